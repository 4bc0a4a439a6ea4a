"""What torch.compile keeps for the backward, measured on the CPU without compiling any kernel.

On CUDA the trainer runs the model under torch.compile. Its AOTAutograd stage traces forward and
backward into one graph and a partitioner (inductor's min-cut rematerialisation) decides which forward
values the backward gets; everything else it recomputes. Those values are the outputs of the forward
graph beyond the loss. Here dynamo and AOTAutograd run with inductor's decompositions and partitioner on
fake tensors, and a stand-in "compiler" counts the storages of those extra outputs each time a forward
graph runs, instead of generating code.

Compiling the full depth is slow on a CPU, and the blocks repeat, so the model is compiled at two small
depths one period of blocks apart (`probe_depths`): their difference is one period, the rest is the
embedding and the loss head. A period is one block for nanochat-2025, and covers the alternating value
embeddings and the window pattern for nanochat-2026 (`layer_period`), so the count at the full depth is
exact, not an average (`tests/memory/test_compiled.py` compares it with a compile at the full depth).
The model runs as the planned device runs it (`rlab.core.target_device.planning_for`): on CUDA the loss
head works in a few large chunks (on the CPU's small ones it took most of the time), windows go through
FlexAttention. The kernels' own working memory (inductor's buffers) is not counted.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import replace

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.partitioners import min_cut_rematerialization_partition
from torch._inductor.decomposition import select_decomp_table
from torch._subclasses.fake_tensor import FakeTensorMode

from rlab.activation_checkpointing import every
from rlab.core.gpt_config import GPTConfig
from rlab.core.target_device import planning_for
from rlab.memory.counts import CompiledSaved
from rlab.memory.shape import TrainShape
from rlab.memory.trace import rlab_model
from rlab.nanochat.generations import get_architecture


def layer_period(config: GPTConfig, checkpointing: str = "off") -> int:
    """How many consecutive blocks make up the pattern the depth repeats: 1 when every block is alike,
    2 with value embeddings on alternating layers, times the window pattern's length (lcm) with windows,
    and k's (lcm) when every k-th block is checkpointed."""

    arch = get_architecture(config.architecture)
    period = 2 if arch.value_embeds else 1
    if arch.sliding_windows:
        period = math.lcm(period, len(config.window_pattern))
    return math.lcm(period, every(checkpointing) or 1)


def probe_depths(n_layer: int, period: int) -> tuple[int, int]:
    """The two depths compiled for a model of `n_layer` blocks: the smallest depth with the same layout
    of blocks (the same remainder modulo `period`: value embeddings sit on the layers of the last one's
    parity, and the last layer is a long window) and one period more."""
    low = (n_layer - 1) % period + 1
    return low, low + period


def _counting_backend(counts: list[int]):
    """An AOTAutograd backend whose forward "compiler" returns the graph itself, wrapped to add up the
    storages of the saved outputs (those after the partitioner's `num_fwd_outputs`) at every call."""

    split = {"num_fwd_outputs": 1}

    def partition(joint, joint_inputs, *, num_fwd_outputs, **kwargs):
        split["num_fwd_outputs"] = num_fwd_outputs
        return min_cut_rematerialization_partition(
            joint, joint_inputs, compiler="inductor", num_fwd_outputs=num_fwd_outputs, **kwargs
        )

    def forward_compiler(gm: torch.fx.GraphModule, example_inputs):
        user_outputs = split["num_fwd_outputs"]

        def run(*args):
            outs = gm(*args)
            seen, total = set(), 0
            for t in outs[user_outputs:]:
                if isinstance(t, torch.Tensor):
                    st = t.untyped_storage()
                    if st._cdata not in seen:
                        seen.add(st._cdata)
                        total += st.nbytes()
            counts.append(total)
            return outs

        return run

    return aot_autograd(
        fw_compiler=forward_compiler,
        bw_compiler=lambda gm, example_inputs: gm,
        partition_fn=partition,
        decompositions=select_decomp_table(),
    )


MakeModel = Callable[[GPTConfig, TrainShape], torch.nn.Module]
"""Builds the model of a config for a shape: rlab's GPT (`rlab.memory.trace.rlab_model`), or another to compare."""


def _saved_at_depth(shape: TrainShape, depth: int, make_model: MakeModel = rlab_model) -> int:

    counts: list[int] = []
    torch._dynamo.reset()
    with planning_for(shape.device), FakeTensorMode(allow_non_fake_inputs=True):
        model = make_model(replace(shape.config, n_layer=depth), shape)
        compiled = torch.compile(model, backend=_counting_backend(counts), dynamic=False, fullgraph=False)
        rows = (shape.device_batch_size, shape.seq_len)
        x = torch.randint(0, shape.config.vocab_size, rows)
        cast = (
            torch.autocast("cpu", dtype=torch.bfloat16)
            if shape.dtype == "bfloat16"
            else contextlib.nullcontext()
        )
        with cast:
            compiled(x, x)
    torch._dynamo.reset()
    return sum(counts)


def compiled_saved(shape: TrainShape, make_model: MakeModel = rlab_model) -> CompiledSaved:
    """What the compiled forward of `shape` keeps for the backward (see the module docstring)."""
    n_layer = shape.config.n_layer
    period = layer_period(shape.config, shape.activation_checkpointing)
    low, high = probe_depths(n_layer, period)
    at_low = _saved_at_depth(shape, low, make_model)
    per_period = _saved_at_depth(shape, high, make_model) - at_low
    return CompiledSaved(
        total=at_low + (n_layer - low) // period * per_period, per_layer=per_period / period, n_layer=n_layer
    )
