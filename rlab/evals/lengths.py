"""The context lengths the long-context evals use (no torch: the CLI computes them too).

Default grid: powers of two times the base's training length L0 from L0/2 up to 2x the
continued-training length T (T and 2T included even when they are not such a multiple), e.g.
L0 = 2048, T = 8192: 1024, 2048, 4096, 8192, 16384. Every tag of an experiment is evaluated at
the same lengths (L0 and T come from the experiment, not from the tag being evaluated), so the
base, zero-shot and continued arms are comparable length by length.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlab.spec.eval import EvalSpec


def default_grid(l0: int, target: int) -> list[int]:
    """L0/2, L0, 2*L0, ... <= 2*target, plus target and 2*target."""
    top = 2 * max(target, 1)
    out = {max(1, l0 // 2)}
    length = max(1, l0)
    while length <= top:
        out.add(length)
        length *= 2
    out.update({target, top})
    return sorted(out)


def target_len(spec: EvalSpec, fallback: int) -> int:
    """The continued-training length T (the spec's, else `fallback`, e.g. the tag's own training length)."""
    return int(spec.target_len or fallback)


def experiment_target_len(spec) -> int:
    """T of an experiment spec: eval.target_len, else the experiment's target_len, else train.seq_len."""
    return int(spec.eval.target_len or spec.target_len or spec.train.seq_len)


def eval_lengths(spec: EvalSpec, l0: int, target: int) -> list[int]:
    """Explicit `lengths` or the default grid, plus `extra_lengths`; ascending, unique."""
    base: Sequence[int] = spec.lengths if spec.lengths else default_grid(l0, target)
    return sorted({int(n) for n in (*base, *spec.extra_lengths)})


def longest_bpb_length(spec: EvalSpec, target: int) -> int:
    """The longest BPB-vs-length length (without knowing L0): what the long documents must cover."""
    base = max(spec.lengths) if spec.lengths else 2 * target
    return max([base, *spec.extra_lengths])
