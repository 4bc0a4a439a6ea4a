"""The primary endpoint, chosen so the architecture can express it, and the lengths a model cannot attend to.

Context extension asks which variant predicts best *beyond* the length it trained at. The primary endpoint is
therefore the level there: BPB at the longest of 2x and 4x the continued-training length T that every
continued arm attends to. The extension, BPB there minus BPB at T over the same target tokens
(`estimates.add_extension_units`), is its explanation, tested in the secondary family: a model that barely
uses context loses little from more of it, so "extends better" alone can crown a model that is worse at every
length (the demo's PI: extension better, BPB at 2T 6.45% worse). A length enters only when every continued arm can
attend to all of it: a windowed model evaluated under `eval.attention_windows: capped` sees at most its
training length, so "BPB at 2T" would be BPB at T again (eval.json's `attention` record says where the
context is capped; `context_caps`). An eval.json without that record (written before rlab recorded
windows) cannot show the lengths were attended to, so its lengths past T are not used either. Where no
such length remains the endpoint falls back to the level, BPB at T, and says why; with no BPB-vs-length
at all, to val BPB.

`dynamic_ntk_note` states what the curves of a dynamic-ntk arm evaluated per window mean: its frequencies
change with the length (effective scale s*L/L0 - (s-1)), so points at other lengths than the one it was
trained at are evaluated at other frequencies than it trained with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from rlab.evals.rope_eval import fixed_scale
from rlab.report.sources.tag_files import TagSources
from rlab.report.stats import estimates as est

EXTENSION_MULTIPLES = (2, 4)
"""The extension lengths, as multiples of the training length T (those measured and attendable are used)."""


@dataclass
class Primary:
    """The experiment's one primary endpoint, vs the baseline: a level (BPB at `lengths`, beside it the
    extension from `reference` to `extension`), or val BPB."""

    metric: str
    lengths: list[int]
    description: str
    reference: int | None = None
    """The training length an extension is measured from (None for a level endpoint)."""
    note: str = ""
    """Why the endpoint is not the extension one, when it is not (shown with the warnings)."""
    capped: dict[int, list[str]] = field(default_factory=dict)
    """Extension lengths left out because these continued tags cannot attend to them."""
    extension: list[int] = field(default_factory=list)
    """The lengths of the extension shown beside the level (BPB there minus at `reference`; a secondary
    comparison); empty when no length past T is measured and attendable."""


def context_caps(src: TagSources) -> dict[int, int] | None:
    """Length -> the most tokens back the tag's model attends at that length, where that is less than the
    input needs (its windows cap the context); lengths absent are fully visible. None: not recorded."""
    if src.eval is None:
        return {}  # not evaluated: nothing measured to judge
    attention = src.eval.attention
    if attention is None:
        return None
    return {w.length: w.capped_at for w in attention.lengths if w.capped_at is not None}


def cap_text(cap: int) -> str:
    return f"capped at {cap} tokens of context"


def choose_primary(
    meta: pd.DataFrame, bpb_length: pd.DataFrame, caps: dict[str, dict[int, int] | None]
) -> Primary:
    """BPB at the longest of 2T and 4T measured and attendable by every continued arm, with the extension
    beside it; else BPB at T; else val BPB (T = the continued arms' most common training length)."""
    continued = meta[meta["kind"] == "continued"]
    trained = continued["train_seq_len"].dropna()
    measured = set(bpb_length["length"].astype(int)) if len(bpb_length) else set()
    if not len(trained):
        return Primary("val_bpb", [], "validation BPB")
    train_len = int(Counter(trained.astype(int)).most_common(1)[0][0])
    if train_len not in measured:
        return Primary("val_bpb", [], "validation BPB")
    wanted = [m * train_len for m in EXTENSION_MULTIPLES if m * train_len in measured]
    unknown = sorted(t for t in continued["tag"] if caps.get(t, {}) is None)
    capped = {L: [t for t in continued["tag"] if L in (caps.get(t) or {})] for L in wanted}
    capped = {L: tags for L, tags in capped.items() if tags}
    usable = [L for L in wanted if L not in capped and not unknown]
    if usable:
        top, what = max(usable), " and ".join(str(L) for L in usable)
        return Primary(
            est.PRIMARY,
            [top],
            f"BPB at {top} tokens of context ({top // train_len}x the training length {train_len}; lower is "
            f"better), with beside it the extension: BPB at {what} minus BPB at {train_len} on the same targets "
            f"({'mean over the lengths; ' if len(usable) > 1 else ''}what the longer context buys; secondary)",
            reference=train_len,
            capped=capped,
            extension=usable,
        )
    if wanted and unknown:
        why = (
            f"no extension endpoint: the eval.json of {', '.join(unknown)} does not record its attention windows "
            f"(evaluated before rlab recorded them), so BPB at {', '.join(map(str, wanted))} tokens may be BPB "
            "with the training length's context again (a windowed model's full-context layers stop there); "
            "re-run `rlab eval` to measure the extension"
        )
    elif capped:
        why = (
            f"no extension endpoint: at {', '.join(map(str, capped))} tokens the continued arms' attention "
            f"windows cap the context at their training length (eval.attention_windows: capped), so BPB "
            "there is BPB at the training length again; re-evaluate with `attention_windows: extend`"
        )
    else:
        why = (
            f"no extension endpoint: BPB vs length was not measured at {2 * train_len} or "
            f"{4 * train_len} tokens (add them to eval.lengths or eval.extra_lengths)"
        )
    return Primary(
        est.PRIMARY,
        [train_len],
        f"BPB at {train_len} tokens of context (the training length; a level, not an extension)",
        note=why,
        capped=capped,
    )


def add_units(data: est.TagData, primary: Primary) -> None:
    """The tag's point value and units of the primary endpoint, and of the extension beside it (BPB units must
    be present per length)."""
    points = data.points
    if primary.extension and primary.reference is not None:
        ref = points.get(f"bpb_len_{primary.reference}")
        at = [points.get(f"bpb_len_{L}") for L in primary.extension]
        if ref is not None and all(v is not None for v in at):
            points[est.EXTENSION] = sum(v - ref for v in at if v is not None) / len(at)
        est.add_extension_units(data, primary.reference, primary.extension)
    if primary.metric == est.PRIMARY and all(f"bpb_len_{L}" in points for L in primary.lengths):
        points[est.PRIMARY] = sum(points[f"bpb_len_{L}"] for L in primary.lengths) / len(primary.lengths)
        est.add_primary_units(data, primary.lengths)


# ---------------------------------------------------------------- dynamic-ntk's frequencies along the curves


def dynamic_ntk_note(src: TagSources, kind: str, lengths: Iterable[int]) -> str | None:
    """What a dynamic-ntk tag evaluated per window was evaluated at: its effective scale at each length, and
    the scale it trained with (continued: at its training length; zero-shot and base: none, plain rope)."""

    doc = src.eval
    if (
        doc is None
        or doc.variant != "dynamic-ntk"
        or (doc.rope_eval or {}).get("dynamic_ntk") != "per_window"
    ):
        return None
    factor, original = doc.rope.get("factor"), doc.rope.get("original_len")
    if not isinstance(factor, int | float) or not isinstance(original, int):
        return None
    scales: dict[float, list[int]] = {}
    for length in sorted(set(lengths)):
        scales.setdefault(round(fixed_scale(float(factor), original, length), 3), []).append(length)
    along = ", ".join(f"{s:g} at {_span(ls)}" for s, ls in scales.items())
    trained = (
        f"it trained at {doc.train_seq_len} tokens, i.e. at scale {fixed_scale(float(factor), original, doc.train_seq_len):g}"
        if kind == "continued"
        else f"it was not trained: the base it was applied to trained with plain rope (scale 1) at {original} tokens"
    )
    return (
        f"{src.tag}: dynamic-ntk is evaluated per window (Hugging Face's rule, eval.dynamic_ntk: per_window), so "
        f"its frequencies change along the length axis: effective scale {along}; {trained}. Its points at "
        "other lengths mix the frequency change with the context change (eval.dynamic_ntk: fixed evaluates "
        "one scale at every length)."
    )


def _span(lengths: list[int]) -> str:
    return str(lengths[0]) if len(lengths) == 1 else f"{lengths[0]}-{lengths[-1]}"
