"""The memory plan of the evals' largest shapes: BPB at the longest length, and a generation eval's prefill.

The eval worker (`rlab.evals.runner`) holds the model (fp32 weights, bf16 autocast on CUDA) and runs
no backward, so its peak is one forward's working memory on top of the weights:

* BPB vs length scores `batch_tokens // L` windows of the longest length L per forward
  (`rlab.evals.bpb_length.same_targets.evaluate_bpb_blocks` -> `rlab.core.bpb.score_tokens`): the trunk over every
  position, the loss head on the scored block of each window only;
* passkey and the RULER-style tasks prefill `batch_tokens // (L + answer)` prompts of the longest length
  through the engine (`Engine.prefill`) into a KV cache sized for prompt + answer, then decode.

Both run here under fake tensors, through the same functions. One step is taken by hand: the eval picks
the scored rows by value (a `nonzero`, which fake tensors cannot run), so here the trunk runs through
`GPT.hidden_states` and the loss head on the block's rows, which is what `GPT.forward` does with them.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict
from torch._subclasses.fake_tensor import FakeTensorMode

from rlab.core.engine import Engine
from rlab.core.gpt import LOGIT_SOFTCAP
from rlab.core.gpt_config import GPTConfig
from rlab.core.head_loss import _SoftcapCrossEntropy
from rlab.core.target_device import planning_for
from rlab.evals.bpb_length.same_targets import default_block
from rlab.evals.lengths import default_grid
from rlab.evals.passkey.task import MAX_NEW_TOKENS
from rlab.evals.ruler.tasks import MAX_NEW
from rlab.memory.plan import DEFAULT_GPU_MEMORY_GIB, FIT_FRACTION, GIB
from rlab.memory.shape import ModelConfig
from rlab.memory.trace import CUDA_BLOCK, planned_model
from rlab.memory.tracker import LiveTensors


class EvalShape(BaseModel):
    """What sets the evals' memory: the model, its training length, the longest eval length, the batch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config: ModelConfig
    train_seq_len: int
    """The tag's training length: batch_tokens = device_batch_size x this (`EvalContext.batch_tokens`)."""
    longest: int
    """The longest eval length (BPB vs length, passkey, RULER-style tasks)."""
    block: int
    """BPB vs length: targets scored per window (its last `block` positions)."""
    device_batch_size: int = 8
    answer_tokens: int
    """The longest answer a generation eval decodes."""
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    device: Literal["cuda", "cpu"] = "cuda"

    @property
    def batch_tokens(self) -> int:
        return self.device_batch_size * self.train_seq_len


class EvalPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rows: int
    length: int
    peak_gib: float
    kv_cache_gib: float | None = None


class EvalPlan(BaseModel):
    """Bytes per rank of the evals' largest forwards (GiB = 2^30 bytes)."""

    model_config = ConfigDict(extra="forbid")

    shape: EvalShape
    parameters_gib: float
    bpb: EvalPart
    prefill: EvalPart
    peak_gib: float
    gpu_memory_gib: float
    budget_gib: float
    fits: bool


def longest_answer() -> int:
    """The most tokens any generation eval decodes (passkey, RULER-style tasks)."""

    return max(MAX_NEW_TOKENS, *MAX_NEW.values())


def _cast(shape: EvalShape) -> contextlib.AbstractContextManager:
    if shape.dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast("cpu", dtype=torch.bfloat16)


def _bpb_forward(model, shape: EvalShape, rows: int) -> None:
    """`score_tokens` on `rows` windows of the longest length, the last `block` targets of each scored."""

    L, vocab = shape.longest, shape.config.vocab_size
    x = torch.randint(0, vocab, (rows, L))
    targets = torch.randint(0, vocab, (rows * shape.block,))
    with torch.no_grad(), _cast(shape):
        hidden = model.hidden_states(x)  # (rows, L, C)
        scored = hidden[:, L - shape.block :].reshape(rows * shape.block, -1)  # the rows `forward` selects
        _SoftcapCrossEntropy.apply(scored, model.lm_head.weight, targets, vocab, LOGIT_SOFTCAP, "none", False)


def _prefill(model, shape: EvalShape, rows: int) -> int:
    """The engine's prefill of `rows` prompts of the longest length; returns the KV cache's bytes."""

    prompt = shape.longest - shape.answer_tokens
    engine = Engine(model)
    with torch.no_grad(), _cast(shape):
        cache = engine._new_cache(rows, shape.longest, torch.device("cpu"))
        ids = torch.randint(0, shape.config.vocab_size, (rows, prompt))
        engine.prefill(ids, cache)
    return sum(t.untyped_storage().nbytes() for t in cache._k + cache._v)


def plan_evals(shape: EvalShape, gpu_memory_gib: float = DEFAULT_GPU_MEMORY_GIB) -> EvalPlan:
    """Trace the evals' two largest forwards of `shape` (see the module docstring)."""

    bpb_rows = max(1, shape.batch_tokens // shape.longest)
    gen_rows = max(
        1, shape.batch_tokens // shape.longest
    )  # run_jobs_with_choices: batch_tokens // (prompt + answer)
    tracker = LiveTensors(round_to=CUDA_BLOCK if shape.device == "cuda" else 1)
    with planning_for(shape.device), FakeTensorMode(), tracker:
        model = planned_model(shape.config, shape.device, shape.dtype).eval()
        params = tracker.live_bytes
        tracker.set_phase("bpb")
        _bpb_forward(model, shape, bpb_rows)
        tracker.set_phase("prefill")
        kv = _prefill(model, shape, gen_rows)
    bpb_peak, prefill_peak = tracker.phase_peak("bpb"), tracker.phase_peak("prefill")
    peak = max(bpb_peak, prefill_peak)
    budget = FIT_FRACTION * gpu_memory_gib
    return EvalPlan(
        shape=shape,
        parameters_gib=round(params / GIB, 3),
        bpb=EvalPart(rows=bpb_rows, length=shape.longest, peak_gib=round(bpb_peak / GIB, 3)),
        prefill=EvalPart(
            rows=gen_rows,
            length=shape.longest,
            peak_gib=round(prefill_peak / GIB, 3),
            kv_cache_gib=round(kv / GIB, 3),
        ),
        peak_gib=round(peak / GIB, 3),
        gpu_memory_gib=round(gpu_memory_gib, 2),
        budget_gib=round(budget, 2),
        fits=peak / GIB <= budget,
    )


def eval_shape_from(
    config: GPTConfig,
    *,
    train_seq_len: int,
    longest: int | None = None,
    original_len: int | None = None,
    device_batch_size: int = 8,
    dtype: Literal["bfloat16", "float32"] = "bfloat16",
    device: Literal["cuda", "cpu"] = "cuda",
) -> EvalShape:
    """The eval shape of a tag trained at `train_seq_len` (from L0 = `original_len`): by default the longest
    length of the default grid (2 x train_seq_len) and its block (the shortest length L0/2, halved)."""

    l0 = original_len or train_seq_len
    grid = default_grid(l0, train_seq_len)
    return EvalShape(
        config=replace(config, sequence_len=train_seq_len),
        train_seq_len=train_seq_len,
        longest=longest or max(grid),
        block=default_block(grid),
        device_batch_size=device_batch_size,
        answer_tokens=longest_answer(),
        dtype=dtype,
        device=device,
    )


EVAL_MULTIPLES = (2, 4, 8)
"""The eval lengths `rlab memory --eval` plans, as multiples of the training length."""


def plans_at_multiples(shape: EvalShape, gpu_memory_gib: float) -> list[EvalPlan]:
    """The evals' plan at 2, 4 and 8 x the training length (the rest of `shape` as given), shortest first:
    what an eval grid past the default 2 x needs. Each is planned: rows per forward fall as the length
    grows (batch_tokens // length), so a longer length can need less until one row is left."""
    return [
        plan_evals(shape.model_copy(update={"longest": m * shape.train_seq_len}), gpu_memory_gib)
        for m in EVAL_MULTIPLES
    ]
