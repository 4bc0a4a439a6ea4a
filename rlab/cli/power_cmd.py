"""`rlab power`: how many units and seeds each endpoint needs for a target MDE (`rlab.report.power.planner`).

    rlab power -e demo                                   # pilot: results/demo's per-unit files
    rlab power --unit-sd core=0.57 --seed-sd core=0.0052 --mde core=0.01 --family-size 8

This module parses the stated numbers and names the pilot; `rlab.report.power.sources` takes the noise from
them, `rlab.report.power.planner` plans; the plan is rendered here as a table or JSON.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box
from rich.table import Table

from rlab.cli.console import out
from rlab.cli.options import JsonOpt, ResultsDirOpt, SpecOpt, experiment_option, in_panel, number
from rlab.errors import RlabError
from rlab.paths import ExperimentLayout

if TYPE_CHECKING:
    from rlab.report.power.planner import EndpointPlan

STATED_PANEL = "Stated noise and targets"


class Spread(str, Enum):
    """Which of an endpoint's pilot comparisons sets its noise (`rlab.report.power.pilot.Spread`)."""

    median = "median"
    max = "max"


def _pairs(values: list[str] | None, flag: str, integer: bool = False) -> dict[str, float]:
    """NAME=VALUE pairs (repeated flag or comma-separated) -> {name: value > 0}."""
    out: dict[str, float] = {}
    for item in (p.strip() for v in values or [] for p in v.split(",")):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not sep or not name.strip() or not value > 0 or value == float("inf"):
            raise RlabError(
                f"{flag} {item!r}: expected NAME=VALUE with a positive number (e.g. {flag} core=0.02).",
                "NAME is an endpoint class (primary, bpb, core, passkey, copy_gain) or an endpoint (bpb_len_2048).",
            )
        out[name.strip()] = float(int(value)) if integer else value
    return out


UNIT_SHORT = {"documents": "docs", "examples": "ex", "keys": "keys", "records": "rec", "blocks": "blocks"}


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or x != x else f"{x:.{digits}g}"


def _row(p: EndpointPlan, with_seed: bool) -> list[str]:
    """endpoint, unit SD, (seed SD,) pilot size, MDE there, target, units at 1 seed, seeds x units."""
    n = p.noise
    unit = UNIT_SHORT.get(n.unit, n.unit)
    size = "-" if not n.n_units else f"{n.n_units:,} {unit}" + (f" x{n.n_seeds}" if n.n_seeds > 1 else "")
    mde = _num(p.mde_now) if n.unit_sd is not None else "no var." if n.n_units else "no units"
    if p.underpowered:
        mde = f"[red]{mde}[/]"
    one = p.one_seed
    covered = p.with_seeds
    if covered is not None:
        several = f"{covered.seeds} x {covered.units:,}"
    else:
        several = "-" if n.seed_sd is None or n.unit_sd is None else f"> {max(o.seeds for o in p.options)}"
    return [
        n.endpoint,
        _num(n.unit_sd),
        *([_num(n.seed_sd)] if with_seed else []),
        size,
        mde,
        _num(p.target),
        "-" if one is None or one.units is None else f"{one.units:,}",
        several,
    ]


def power_plan(
    spec_path: SpecOpt = None,
    experiment: Annotated[
        Optional[str],
        experiment_option(
            "Pilot: an experiment with evals (folder under the results dir). (default: the spec's)",
            panel=None,
        ),
    ] = None,
    mde: Annotated[
        Optional[list[str]],
        in_panel(
            "--mde",
            STATED_PANEL,
            "Target MDE by class (primary, bpb, core, passkey, copy_gain) or endpoint, in its units "
            "(spec: eval.target_mde; default primary=0.01 bpb=0.01 core=0.02 passkey=0.1 copy_gain=0.1).",
            metavar="NAME=X",
        ),
    ] = None,
    unit_sd: Annotated[
        Optional[list[str]],
        in_panel(
            "--unit-sd",
            STATED_PANEL,
            "SD of one unit's paired difference (replaces the pilot's; without a pilot, the endpoints).",
            metavar="NAME=SD",
        ),
    ] = None,
    seed_sd: Annotated[
        Optional[list[str]],
        in_panel(
            "--seed-sd",
            STATED_PANEL,
            "Run-to-run SD of one arm's value across training seeds (x√2 for a difference), e.g. "
            "core=0.0052: nanochat dev/LEADERBOARD.md Run 4, 7 identical d24 runs.",
            metavar="NAME=SD",
        ),
    ] = None,
    family_size: Annotated[
        Optional[int],
        number(
            "--family-size",
            low=1,
            metavar="M",
            panel=STATED_PANEL,
            help="Comparisons per family (MDE at alpha/M). (default: the pilot's; 1 without one)",
        ),
    ] = None,
    endpoints: Annotated[
        Optional[str],
        typer.Option(
            "--endpoints", metavar="NAMES", help="Only these endpoints or classes, comma-separated."
        ),
    ] = None,
    seeds: Annotated[
        str, typer.Option("--seeds", metavar="S,..", help="Seed counts per arm to plan for.")
    ] = "1,2,3,5,8,10",
    power_level: Annotated[
        float, number("--power", low=0.5, metavar="P", help="Power at the target MDE.")
    ] = 0.8,
    spread: Annotated[
        Spread,
        typer.Option(
            "--noise",
            case_sensitive=False,
            help="Per endpoint, the pilot comparisons' median noise, or the noisiest (every comparison reaches "
            "the target).",
        ),
    ] = Spread.median,
    baseline: Annotated[
        Optional[str],
        typer.Option(
            "--baseline", metavar="NAME", help="The pilot's baseline variant. (default: the spec's)"
        ),
    ] = None,
    results_dir: ResultsDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Plan units and seeds per endpoint for a target MDE at 80% power, from a pilot or stated noise.

    For each endpoint (each metric within its family of verdicts): its noise (unit SD of a paired difference;
    seed SD, training noise, when the pilot has >= 2 seeds or one is stated), the MDE at the pilot's size at
    the family's alpha / m (the level the report quotes MDEs at, with the same formula), and the fewest
    documents / examples / keys / records that reach the target with 1 seed and with the fewest seeds (>= 2)
    that can. The pilot's noise per endpoint is its comparisons' median (--noise max: the noisiest). The
    nanochat figure for --seed-sd:
    dev/LEADERBOARD.md "Run 4" (commit 4b40774), the same d24 run 7 times: CORE SD 0.0052.
    """
    from rlab.report.power import planner as power
    from rlab.report.power.sources import StatedNoise, plan_inputs

    stated = StatedNoise(
        _pairs(unit_sd, "--unit-sd"),
        _pairs(seed_sd, "--seed-sd"),
        family_size,
        None if not endpoints else frozenset(e.strip() for e in endpoints.split(",") if e.strip()),
    )
    targets_given = _pairs(mde, "--mde")
    try:
        seed_grid = tuple(sorted({int(s) for s in seeds.split(",") if s.strip()}))
    except ValueError:
        seed_grid = ()
    if not seed_grid or min(seed_grid) < 1:
        raise RlabError(f"--seeds {seeds!r}: expected positive integers, e.g. 1,3,5.")
    spec_targets, pilot = None, None
    if spec_path is not None:
        from rlab.spec.loading import load_spec

        spec_targets = load_spec(spec_path).eval.target_mde
    if not stated.stands_alone(pilot_named=experiment is not None or spec_path is not None):
        from rlab.orchestrate.experiments import resolve_experiment

        name, root = resolve_experiment(experiment, spec_path, results_dir)
        pilot = ExperimentLayout(root, name)
    inputs = plan_inputs(stated, pilot, spec_targets, baseline, spread.value)
    pilot_name, notes = inputs.pilot, inputs.notes
    plans = power.plan(inputs.noises, inputs.targets, targets_given, power=power_level, seeds=seed_grid)
    if json_out:
        typer.echo(
            json.dumps(
                {
                    "pilot": pilot_name,
                    "power": power_level,
                    "endpoints": [p.as_dict() for p in plans],
                    "notes": notes,
                },
                indent=2,
            )
        )
        return
    _render(plans, pilot_name, power_level)
    for note in notes:
        typer.echo(f"Note: {note}")


def _render(plans: list[EndpointPlan], pilot: str | None, power_level: float) -> None:
    """One table, a section per family (its size m and the level alpha/m), then where the noise came from."""

    out.print(
        f"[bold]Power plan[/]: {power_level:.0%} power at each family's alpha/m (the level the report quotes MDEs "
        f"at); noise from {f'pilot {pilot}' if pilot else 'the stated SDs'}",
        highlight=False,
    )
    groups: dict[tuple[str, int], list[EndpointPlan]] = {}
    for p in plans:
        groups.setdefault((p.noise.family, p.noise.family_size), []).append(p)
    for (family, size), rows in groups.items():
        table = Table(
            title=f"{family} family: m = {size}, alpha/m = {rows[0].alpha:.2g}",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            padding=(0, 1),
        )
        with_seed = any(p.noise.seed_sd is not None for p in rows)
        names = ("endpoint", "unit SD", *(("seed SD",) if with_seed else ()), "now", "MDE", "target")
        for name in (*names, "1 seed", ">=2 seeds"):
            table.add_column(name, justify="left" if name == "endpoint" else "right", no_wrap=True)
        for p in rows:
            table.add_row(*_row(p, with_seed))
        out.print(table)
    out.print(
        "now: the pilot's units (x seeds) and the MDE they give (red: above the target; no var.: the pilot shows "
        "no variation to plan from); 1 seed: units that reach the target (training noise not covered); >=2 "
        "seeds: the fewest seeds that reach it x units (needs a seed SD: a pilot with --seeds >= 2, or --seed-sd).",
        highlight=False,
    )
    sources = list(dict.fromkeys(s for p in plans for s in (p.noise.source, p.noise.seed_source) if s))
    if sources:
        extra = " (per endpoint, the median of its comparisons; --noise max: the noisiest)" if pilot else ""
        out.print(f"Noise: {'; '.join(sources)}{extra}.", highlight=False, markup=False)
