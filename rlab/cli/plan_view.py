"""A training plan on the terminal: the dry runs of `rlab continue`, `rlab pretrain` and `rlab demo`.

`render_plan` lays out the planned tags and their exact commands, `render_changes` the eval inputs and what a
continuation changes against its base run, `render_power` the power line (`rlab.report.power.spec`). The
commands build the plan; this module only prints it.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from rich import box
from rich.cells import cell_len
from rich.table import Table

from rlab.cli.console import out
from rlab.orchestrate.control import is_control
from rlab.orchestrate.plan import experiment_layout

if TYPE_CHECKING:
    from rlab.memory.plan import MemoryPlan
    from rlab.orchestrate.base_info import BaseInfo
    from rlab.orchestrate.launch import Job
    from rlab.orchestrate.preflight import Preflight
    from rlab.orchestrate.reporter import Reporter
    from rlab.report.power.spec import PowerCheck
    from rlab.spec.experiment import ExperimentSpec
    from rlab.spec.run import RunConfig


def render_changes(pf: Preflight) -> None:
    """The inputs of the planned evals (ready / built now / missing), then what the continuation changes against the
    base run, one setting a line with the base's value."""
    if pf.eval_inputs:
        out.print("inputs of the planned evals:", highlight=False)
        for item in pf.eval_inputs:
            out.print(f"  {item.line()}", highlight=False, markup=False, soft_wrap=True)
    if pf.changes and pf.base is not None:
        out.print(f"changed vs the run that trained {pf.base.tag}@{pf.base.step}:", highlight=False)
        for change in pf.changes:
            out.print(f"  {change.line()}", highlight=False, markup=False, soft_wrap=True)


def render_power(check: PowerCheck, reporter: Reporter) -> None:
    """The power line, then a warning per underpowered endpoint class."""
    out.print(check.line(), highlight=False, markup=False, soft_wrap=True)
    for line in check.warnings():
        reporter.warning(line)


def render_plan(
    spec: ExperimentSpec,
    runs: list[RunConfig],
    jobs: list[Job],
    title: str,
    base: BaseInfo | None = None,
    memory: MemoryPlan | None = None,
) -> None:
    """The plan as a table (RoPE with its L0 and factor, seq_len, steps per tag, and on GPUs each job's
    planned peak memory per rank), then each job's exact command.

    What every tag shares (source checkpoint, world size) is one line above the table, so the table fits
    80 columns; the commands are soft-wrapped, never cut, so they can be copied.
    """
    launch = spec.launch
    sources = list(
        dict.fromkeys(
            f"{r.lineage.parent_tag}@{r.lineage.parent_step}" if r.lineage else "scratch" for r in runs
        )
    )
    out.print(
        f"[bold]{title}[/]: from {', '.join(sources) or '-'}, world {launch.nnodes}x{launch.procs_per_job} "
        f"per job",
        highlight=False,
    )
    replicated = len(sources) > 1  # train.replicate_base: say which base each tag starts from
    headers = ["tag", *(["from"] if replicated else []), "rope", "seq", "steps", "tok/step"]
    headers += ["GiB/rank"] if memory is not None else []
    rows = [_plan_row(spec, run, base, memory, replicated) for run in runs]
    headers, widths, squeezed = _fit(headers, rows, [run.tag for run in runs], out.width)
    table = Table(
        box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=squeezed
    )
    for header, width in zip(headers, widths, strict=True):
        if header in ("tag", "rope"):
            table.add_column(header, width=width, overflow="fold")
        else:  # the base a tag starts from, and the numbers, never wrap
            table.add_column(header, justify="left" if header == "from" else "right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    out.print(table)
    if memory is not None:
        verdict = "fits" if memory.fits else "[red]does not fit[/]"
        out.print(
            f"memory per rank (`rlab memory`): peak {memory.peak_gib:.1f} GiB of {memory.budget_gib:.1f} usable "
            f"on a {memory.gpu_memory_gib:.0f} GiB GPU: {verdict}",
            highlight=False,
        )
    layout = experiment_layout(spec)
    out.print(f"base dir: {spec.base.base_dir}   results: {layout.root}", highlight=False)
    if base is not None:
        start = runs[0].data_start if runs else None
        out.print(
            f"base {base.tag}@{base.step}: L0={base.sequence_len}; target_len {spec.target_len}; train data "
            f"{start.describe() if start else 'from the beginning'}"
            + ("; each base replicate's tags after that replicate" if replicated and start else ""),
            highlight=False,
        )
    if launch.launcher == "slurm":
        out.print("launcher: slurm (one sbatch script per variant; torchrun inside srun)", highlight=False)
    out.print("Commands:", highlight=False)
    for job in jobs:
        out.print(f"  {job.command()}", highlight=False, markup=False, soft_wrap=True)


def _plan_row(
    spec: ExperimentSpec, run: RunConfig, base: BaseInfo | None, memory: MemoryPlan | None, replicated: bool
) -> list[str]:
    """A tag's cells: tag (and which base it starts from), RoPE with its L0, seq_len, steps, tokens per step."""
    launch = spec.launch
    batch = run.train.total_batch_size or run.train.device_batch_size * run.train.seq_len * launch.world_size
    l0 = run.rope.original_len or (base.sequence_len if base else None)
    rope = run.rope.with_original_len(l0) if l0 else run.rope
    seq = "→".join(str(n) for n in [*(p.seq_len for p in run.train.seq_len_warmup), run.train.seq_len])
    tag = f"{run.tag} (control)" if run.lineage and is_control(spec, run.variant) else run.tag
    cells = [tag, rope.describe(), seq, str(run.train.steps), f"{batch:,}"]
    if replicated:
        cells.insert(1, run.lineage.parent_tag if run.lineage else "scratch")
    if memory is not None:
        cells.append(f"{memory.peak_gib:.1f}" if run.train.steps > 0 else "-")
    return cells


def _fit(
    headers: list[str], rows: list[list[str]], tags: list[str], room: int
) -> tuple[list[str], list[int | None], bool]:
    """The headers and widths (None: as wide as its cells) of a plan's columns in `room`, cutting no name, and
    whether they are squeezed (two spaces between columns, not three).

    The numbers give way first: a header with a slash takes two lines (tok/ over step), and the columns close
    up. Then the wider of the tag and rope columns wraps, a character at a time: a tag down to the longest tag
    (" (control)" goes under it), the rope down to its longest word (it wraps at spaces). Only a table still too
    narrow for those folds them inside a word (rich's own squeeze did that to the rope at once, it being the one
    column that could wrap). What the rope's wrapped lines leave unused goes back to the tags.
    """

    def widths_of(heads: list[str]) -> list[int]:
        cells = ([head, *(row[i] for row in rows)] for i, head in enumerate(heads))
        return [max(cell_len(line) for cell in column for line in cell.splitlines()) for column in cells]

    if sum(widths_of(headers)) + 3 * (len(headers) - 1) <= room:  # padding, separator, padding
        return headers, [None] * len(headers), False
    headers = [header.replace("/", "/\n") for header in headers]
    natural = widths_of(headers)
    widths, gaps = list(natural), 2 * (len(headers) - 1)
    rope, tag = headers.index("rope"), headers.index("tag")
    floors = {
        tag: max(map(cell_len, tags), default=3),
        rope: max((cell_len(word) for row in rows for word in row[rope].split()), default=4),
    }
    for floor in (floors, dict.fromkeys(floors, 4)):  # whole words and tags, else folded ones
        while sum(widths) + gaps > room and (wider := [i for i in floors if widths[i] > floor[i]]):
            widths[max(wider, key=lambda i: widths[i])] -= 1
    used = max(cell_len(line) for row in rows for line in [*textwrap.wrap(row[rope], widths[rope]), "rope"])
    widths[tag] = min(natural[tag], widths[tag] + widths[rope] - used)  # the rope's lines may end short
    widths[rope] = used
    return headers, [width if i in floors else None for i, width in enumerate(widths)], True
