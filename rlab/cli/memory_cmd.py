"""`rlab memory`: the per-rank memory plan of a training shape (or, with --eval, of the evals), in GiB.

    rlab memory --meta d20/meta_021400.json --seq-len 8192 --device-batch-size 8 --nproc 8
    rlab memory --tag d20 --seq-len 8192 --device-batch-size 8 --nproc 8 --total-batch-size 524288 --json
    rlab memory --tag d20-pi --eval

The numbers come from running the model's own training step (or eval forwards) under fake tensors on
the CPU (`rlab.memory`): nothing is allocated, a d20 step at 8 x 8192 tokens takes seconds (the
torch.compile accounting of a CUDA run half a minute more).
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich import box
from rich.table import Table

from rlab.cli.console import out
from rlab.cli.options import BaseDirOpt, JsonOpt, number, switch, tag_option
from rlab.paths import default_base_dir

if TYPE_CHECKING:
    from rlab.core.checkpoint_meta import CheckpointMeta


class Dtype(str, Enum):
    bfloat16 = "bfloat16"
    float32 = "float32"


def memory(
    meta: Annotated[
        Optional[Path],
        typer.Option("--meta", metavar="FILE", dir_okay=False, help="A checkpoint's meta_XXXXXX.json."),
    ] = None,
    tag: Annotated[Optional[str], tag_option("A tag's newest checkpoint instead.")] = None,
    step: Annotated[Optional[int], number("--step", low=0, help="With --tag: this step.")] = None,
    seq_len: Annotated[
        Optional[int], number("--seq-len", low=1, help="Training length. (default: the checkpoint's)")
    ] = None,
    device_batch_size: Annotated[
        Optional[int],
        number(
            "--device-batch-size",
            low=1,
            help="Rows per rank per micro-batch (with --eval: the eval's). (default: the checkpoint's; eval 8)",
        ),
    ] = None,
    nproc: Annotated[int, number("--nproc", low=1, help="Ranks (GPUs) of the run.")] = 1,
    total_batch_size: Annotated[
        Optional[int],
        number(
            "--total-batch-size",
            low=1,
            help="Tokens per optimizer step, all ranks (sets the accumulation). (default: no accumulation)",
        ),
    ] = None,
    dtype: Annotated[Dtype, typer.Option("--dtype", help="Compute dtype (autocast).")] = Dtype.bfloat16,
    eager: Annotated[
        bool, switch("--eager", help="The run is not compiled (train.compile: false); skips compile's count.")
    ] = False,
    gpu_memory: Annotated[
        Optional[float],
        typer.Option(
            "--gpu-memory",
            metavar="GIB",
            min=1.0,
            help="GPU memory in GiB. (default: the CUDA device's when present, else 80)",
        ),
    ] = None,
    checkpointing: Annotated[
        str,
        typer.Option(
            "--activation-checkpointing",
            metavar="SETTING",
            help="Blocks that rerun their forward in the backward: off, all, every-k (train.activation_checkpointing). "
            "A plan that does not fit names the least that does.",
        ),
    ] = "off",
    longest: Annotated[
        bool,
        switch(
            "--longest",
            help="Also the longest length one row per rank trains at on 24/40/80/141 GiB GPUs, without and with "
            "checkpointing (four more plans; cached).",
        ),
    ] = False,
    evals: Annotated[
        bool, switch("--eval", help="The evals' plan: BPB at the longest length, generation prefill.")
    ] = False,
    eval_length: Annotated[
        Optional[int],
        number("--eval-length", low=1, help="With --eval: the longest eval length. (default: 2 x --seq-len)"),
    ] = None,
    base_dir: BaseDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Per-rank memory of a training shape: parameters, gradients, DDP buckets, optimizer state, saved
    activations, the loss head, and the peak against the GPU's memory."""

    from rlab.core.checkpoint_meta import load_meta
    from rlab.memory.shape import meta_of_tag

    if not re.fullmatch(r"off|all|every-[1-9][0-9]{0,3}", checkpointing):
        raise typer.BadParameter(
            f"{checkpointing!r} is not off, all or every-k.", param_hint="--activation-checkpointing"
        )
    if (meta is None) == (tag is None):
        raise typer.BadParameter("give exactly one of --meta FILE or --tag TAG.", param_hint="--meta/--tag")
    if meta is not None:
        checkpoint_meta, source = load_meta(meta), str(meta)
    else:
        root = Path(base_dir) if base_dir is not None else default_base_dir()
        checkpoint_meta, source = meta_of_tag(root, str(tag), step)
    memory_gib = gpu_memory if gpu_memory is not None else cuda_memory_gib()
    if evals:
        _eval_plan(
            checkpoint_meta,
            source,
            seq_len,
            device_batch_size,
            eval_length,
            dtype.value,
            memory_gib,
            json_out,
        )
        return
    from rlab.memory.plan import plan_training
    from rlab.memory.shape import shape_from_meta

    shape = shape_from_meta(
        checkpoint_meta,
        seq_len=seq_len,
        device_batch_size=device_batch_size,
        nproc=nproc,
        total_batch_size=total_batch_size,
        dtype=dtype.value,
        compile=not eager,
        source=source,
    ).with_checkpointing(checkpointing)
    plan = plan_training(shape, memory_gib)
    if longest:
        from rlab.memory.checkpointing import longest_rows

        plan.longest = longest_rows(shape)
    if json_out:
        typer.echo(plan.model_dump_json(indent=2))
    else:
        render_plan(plan, source)


def cuda_memory_gib() -> float:
    """The first CUDA device's memory in GiB, else the default (80)."""
    import torch

    from rlab.memory.plan import DEFAULT_GPU_MEMORY_GIB, GIB

    if torch.cuda.is_available():
        return torch.cuda.get_device_properties(0).total_memory / GIB
    return DEFAULT_GPU_MEMORY_GIB


def render_plan(plan: Any, source: str) -> None:
    """The plan as a table (GiB per rank), what was counted, and the verdict."""

    out.print(f"[bold]Memory plan per rank[/] ({source}): {plan.shape.describe()}", highlight=False)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("")
    table.add_column("GiB", justify="right")
    table.add_column("")
    acts = "torch.compile's saved tensors" if plan.compiled_activations_gib is not None else "eager autograd"
    rows = [
        ("parameters", plan.parameters_gib, "fp32 matrices, embeddings in the stream dtype"),
        ("gradients", plan.gradients_gib, ""),
        (
            "DDP buckets",
            plan.ddp_buckets_gib,
            "gradient_as_bucket_view"
            if plan.ddp_bucket_view
            else "a second gradient copy"
            if plan.shape.nproc > 1
            else "one rank: no DDP",
        ),
        ("optimizer state", plan.optimizer_gib, "held by this rank"),
        ("autocast weight copies", plan.weight_copies_gib, "bf16, kept for the backward (eager)"),
        ("saved activations", plan.activations_gib, acts),
        ("  eager autograd", plan.eager_activations_gib, f"{plan.kib_per_token_per_layer:g} KiB/token/layer"),
    ]
    if plan.compiled_activations_gib is not None:
        rows.append(
            (
                "  torch.compile",
                plan.compiled_activations_gib,
                f"{plan.compiled_kib_per_token_per_layer:g} KiB/token/layer, "
                f"{plan.compiled_outside_blocks_gib:g} GiB outside the blocks",
            )
        )
    rows += [
        (
            "loss head: saved",
            plan.activations_by_region_gib.get("head", 0.0),
            f"{plan.head_kib_per_token:g} KiB/token",
        ),
        ("loss head: transient", plan.head_transient_gib, ""),
    ]
    for name, value, note in rows:
        table.add_row(name, f"{value:.2f}", note)
    table.add_row("[bold]peak[/]", f"[bold]{plan.peak_gib:.2f}[/]", f"at {plan.peak_phase}")
    out.print(table)
    out.print(f"[dim]{plan.counted}[/]", highlight=False)
    verdict = "[green]fits[/]" if plan.fits else "[red]does not fit[/]"
    out.print(
        f"peak {plan.peak_gib:.1f} GiB vs {plan.budget_gib:.1f} GiB usable of {plan.gpu_memory_gib:g} GiB "
        f"({verdict})",
        highlight=False,
    )
    fix = plan.suggestion
    if fix is not None and fix.activation_checkpointing != "off":
        out.print(
            f"[green]fits with activation checkpointing {fix.activation_checkpointing}[/] (the least that fits: "
            f"peak {fix.peak_gib:.1f} GiB; train.activation_checkpointing: auto chooses it)",
            highlight=False,
        )
    elif fix is not None:
        out.print(f"largest that fits: {fix.describe()}", highlight=False)
    elif not plan.fits:
        from rlab.memory.plan import no_fit_advice

        out.print(f"[red]{no_fit_advice(plan)}[/]", highlight=False)
    if plan.longest:
        render_longest(plan.longest, plan.shape)


def render_longest(rows: Any, shape: Any) -> None:
    """The longest trainable length per GPU size, without and with every block checkpointed."""

    table = Table(
        title="Longest length, one row per rank (the rest of the shape as above)",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    for name in ("GPU GiB", "no checkpointing", "all blocks checkpointed"):
        table.add_column(name, justify="right")
    for row in rows:
        cells = [
            f"{n:,}" if n is not None else "-" for n in (row.without_checkpointing, row.with_checkpointing)
        ]
        table.add_row(f"{row.gpu_memory_gib:g}", *cells)
    out.print(table)
    out.print(
        f"[dim]Peak on the line through the plans at {max(1024, shape.seq_len // 2):,} and {max(2048, shape.seq_len):,} "
        "tokens (it is affine in the length at one row), rounded down to 1,024; - = not even 1,024 fits.[/]",
        highlight=False,
    )


def _eval_plan(
    meta: CheckpointMeta,
    source: str,
    seq_len: int | None,
    batch: int | None,
    longest: int | None,
    dtype: str,
    memory_gib: float,
    json_out: bool,
) -> None:
    from rlab.memory.eval_plan import eval_shape_from, plan_evals, plans_at_multiples
    from rlab.memory.shape import model_config_from_meta

    config = model_config_from_meta(meta)
    train_len = seq_len or config.sequence_len
    shape = eval_shape_from(
        config,
        train_seq_len=train_len,
        longest=longest,
        original_len=meta.rope_spec().original_len,
        device_batch_size=batch or 8,
        dtype=dtype,  # type: ignore[arg-type]
    )
    plan = plan_evals(shape, memory_gib)
    if json_out:
        typer.echo(plan.model_dump_json(indent=2))
        return
    out.print(
        f"[bold]Eval memory per rank[/] ({source}): batch_tokens {shape.batch_tokens:,} "
        f"({shape.device_batch_size} x {shape.train_seq_len}), longest length {shape.longest:,}",
        highlight=False,
    )
    out.print(f"  parameters                  {plan.parameters_gib:7.2f} GiB", highlight=False)
    out.print(
        f"  BPB at {plan.bpb.length:,}: {plan.bpb.rows} row(s)   peak {plan.bpb.peak_gib:7.2f} GiB",
        highlight=False,
    )
    out.print(
        f"  prefill at {plan.prefill.length:,}: {plan.prefill.rows} row(s) peak {plan.prefill.peak_gib:7.2f} GiB "
        f"(KV cache {plan.prefill.kv_cache_gib:.2f} GiB)",
        highlight=False,
    )
    verdict = "[green]fits[/]" if plan.fits else "[red]does not fit[/]"
    out.print(
        f"peak {plan.peak_gib:.1f} GiB vs {plan.budget_gib:.1f} GiB usable of {plan.gpu_memory_gib:g} GiB ({verdict})",
        highlight=False,
    )
    _render_eval_multiples(plans_at_multiples(shape, memory_gib), shape.train_seq_len)


def _render_eval_multiples(plans: Any, train_len: int) -> None:
    """Each planned multiple of the training length, and the longest eval length that fits."""

    for p in plans:
        mark = "fits" if p.fits else "does not fit"
        out.print(
            f"  {p.shape.longest // train_len}x = {p.shape.longest:,}: BPB {p.bpb.peak_gib:.2f}, prefill "
            f"{p.prefill.peak_gib:.2f} GiB (KV {p.prefill.kv_cache_gib:.2f}): {mark}",
            highlight=False,
        )
    fitting = [p.shape.longest for p in plans if p.fits]
    if not fitting:
        out.print(
            f"[red]no eval length from 2x the training length ({2 * train_len:,}) fits[/]", highlight=False
        )
        return
    bound = "at least " if fitting[-1] == plans[-1].shape.longest else ""
    out.print(
        f"longest eval length that fits: {bound}{fitting[-1]:,} ({fitting[-1] // train_len}x the training length)",
        highlight=False,
    )
