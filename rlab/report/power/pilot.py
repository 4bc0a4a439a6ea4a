"""A pilot's noise: each endpoint's unit and seed SDs read from an experiment's own report comparisons.

`rlab power -e X` plans from these (`rlab.report.power.planner`); each endpoint is a metric within one family,
its noise the median (or noisiest, `Spread`) of its comparisons' unit and seed terms.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from rlab.report.estimands.effective_length import keys_note
from rlab.report.power.planner import Noise, unit_word
from rlab.report.stats import inference as inf
from rlab.report.stats import verdicts as vd
from rlab.spec.eval import TargetMde

if TYPE_CHECKING:
    from rlab.report.assemble.report_data import ReportData


Spread = Literal["median", "max"]
"""Which of an endpoint's comparisons sets its noise: the median one (a typical comparison; the default) or the
noisiest (every comparison reaches the target). Arms far from the baseline have noisier differences (their
effect varies from unit to unit) but need no power to be told apart, so the noisiest is usually pessimistic."""


def _num(column: pd.Series) -> pd.Series:
    """A frame column as floats (pd.NA and blanks -> NaN)."""
    return pd.to_numeric(column, errors="coerce").astype(float)


def unit_skew(rows: pd.DataFrame) -> float:
    """The median skewness of one unit's contribution over an endpoint's comparisons: each comparison's `a`
    (`inference.Comparison.skew`) times √n (se / unit se)³; 0 where the frame has none."""
    if "skew" not in rows:
        return 0.0
    unit_var, seed_var = _num(rows["unit_var"]), _num(rows["seed_var"]).fillna(0.0)
    ratio = ((unit_var + seed_var) / unit_var) ** 1.5
    gamma = (_num(rows["skew"]) * np.sqrt(_num(rows["n_units"])) * ratio).dropna()
    return float(gamma.median()) if len(gamma) else 0.0


def _summarise(rows: pd.DataFrame, spread: Spread) -> tuple[float | None, float | None, str]:
    """(unit SD, seed SD, which comparison(s)) over the comparisons of one endpoint, per `spread`."""
    unit = (_num(rows["unit_var"]) * _num(rows["n_units"])).where(lambda v: v > 0).dropna()
    if unit.empty:
        return None, None, ""
    several = _num(rows["n_seeds"]) >= inf.MIN_SEEDS
    seed = (_num(rows["seed_var"]) * _num(rows["n_seeds"]))[several].dropna()
    if spread == "max":
        i = unit.idxmax()
        which = f"{rows.at[i, 'arm']!s} vs {rows.at[i, 'reference']!s}, the noisiest of {len(unit)}"
        return math.sqrt(float(unit[i])), math.sqrt(float(seed.max())) if len(seed) else None, which
    which = f"median of {len(unit)} comparison{'s' if len(unit) != 1 else ''}"
    return (
        math.sqrt(float(unit.median())),
        math.sqrt(float(seed.median())) if len(seed) else None,
        which,
    )


def noise_from_report(data: ReportData, pilot: str, spread: Spread = "median") -> list[Noise]:
    """The noise of every endpoint the pilot compared, from the report's own comparisons (and its copy cells).

    An endpoint is a metric within one family (the primary endpoint of continued arms is the primary family,
    the same metric of zero-shot arms is secondary). Its unit and seed SDs are the median (or largest, `spread`)
    over its comparisons; its family size counts every comparison that would be tested with enough units
    (those with fewer than `inference.MIN_UNITS` units but some variance included; those with no variation or
    not comparable left out)."""
    out: list[Noise] = []
    comps = data.comparisons
    if comps is not None and len(comps):
        primary = data.primary.metric
        comps = comps.assign(  # the family each would be tested in (those with too few units are in none yet)
            would_be=[
                "primary" if m == primary and k == "continued" else "secondary"
                for m, k in zip(comps["metric"], comps["kind"], strict=True)
            ]
        )
        measured = comps[comps["diff"].notna() & (comps["verdict"] != vd.Verdict.NOT_COMPARABLE)]
        varied = _num(measured["unit_var"]) > 0  # tested, or too few units but some variance
        sizes = measured[varied].groupby("would_be").size().to_dict()
        for (metric, family), rows in measured.groupby(["metric", "would_be"], sort=False):
            unit_sd, seed_sd, which = _summarise(rows, spread)
            units, seeds = _num(rows["n_units"]), _num(rows["n_seeds"])
            n = int(units.max()) if units.notna().any() else None
            s = int(seeds.min()) if seeds.notna().any() else 1
            ref = rows["ref_value"].iloc[0]
            out.append(
                Noise(
                    endpoint=str(metric),
                    family=str(family),
                    family_size=int(sizes.get(family, 1)),
                    unit=unit_word(str(metric), data.clustered),
                    unit_sd=unit_sd,
                    seed_sd=seed_sd,
                    unit_skew=unit_skew(rows),
                    n_units=n,
                    n_seeds=s,
                    source=f"pilot {pilot}",
                    set_by=which,
                    seed_source=f"pilot {pilot}: {s} seeds" if seed_sd else "",
                    ref_value=None if pd.isna(ref) else float(ref),
                )
            )
    out += _copy_noise(data, pilot, spread)
    order = {"primary": 0, "secondary": 1, "copy": 2}
    return sorted(out, key=lambda n: (order.get(n.family, 3), _endpoint_rank(n.endpoint)))


def _endpoint_rank(endpoint: str) -> tuple[int, int]:

    m = re.match(r"^(?:bpb_len_|copy_d)(\d+)$", endpoint)
    if m:
        return (3 if endpoint.startswith("bpb") else 6, int(m.group(1)))
    ranks = {
        "primary_bpb": 0,
        "extension_bpb": 0,
        "train_bpb": 1,
        "val_bpb": 2,
        "core": 4,
        "passkey_overall": 5,
    }
    return (ranks.get(endpoint, 7), 0)


def _copy_noise(data: ReportData, pilot: str, spread: Spread) -> list[Noise]:
    from rlab.report.copy_distance.records import metric_name  # noqa: PLC0415 - defers torch

    cells = data.copy_cells
    if cells is None or cells.empty or "unit_var" not in cells:
        return []
    rows = cells[cells["ref"].notna() & (cells["verdict"] != vd.Verdict.UNTESTABLE)]
    rows = rows[rows["diff"].notna()]
    kept = getattr(data, "copy_retention", None)  # retention comparisons share the copy family
    tested = (
        0
        if kept is None or kept.empty
        else int(
            (kept["diff"].notna() & ~kept["verdict"].isin([vd.Verdict.UNTESTABLE, vd.Verdict.NONE])).sum()
        )
    )
    size = len(rows) + tested
    out = []
    for distance, g in rows.groupby("distance"):
        g = g.rename(columns={"diff_n": "n_units", "ref": "reference"})
        unit_sd, seed_sd, which = _summarise(g, spread)
        out.append(
            Noise(
                endpoint=metric_name(int(distance)),
                family="copy",
                family_size=size,
                unit="records",
                unit_sd=unit_sd,
                seed_sd=seed_sd,
                n_units=int(g["n_units"].max()),
                n_seeds=int(g["n_seeds"].min()),
                source=f"pilot {pilot}",
                set_by=which,
                seed_source=f"pilot {pilot}: {int(g['n_seeds'].min())} seeds" if seed_sd else "",
            )
        )
    return out


@dataclass
class Pilot:
    """An experiment's evals read as a pilot: the noise of each endpoint and the targets its spec states."""

    name: str
    noises: list[Noise]
    targets: TargetMde | None
    """The pilot's `eval.target_mde` (from its resolved spec), None when it states none."""
    comparisons: pd.DataFrame | None = None
    """The pilot report's comparisons, adjusted (which entered a family, which did not and why)."""
    notes: list[str] = field(default_factory=list)
    """Other shortfalls of the pilot's size (too few keys per length for the effective length's interval)."""


def read_pilot(
    layout: Any, baseline: str | None = None, spread: Spread = "median", draws: int = 200
) -> Pilot:
    """The noise of every endpoint an experiment compared (its report's comparisons, `noise_from_report`).

    The sign-flip draws only set p-values, which a plan does not use: a few hundred keep this fast."""
    from rlab.report.assemble.collect import collect  # noqa: PLC0415 - defers matplotlib, torch

    data = collect(layout, baseline, draws=draws)
    name = layout.experiment
    return Pilot(
        name,
        noise_from_report(data, name, spread),
        _stated(data),
        data.comparisons,
        _key_notes(data),
    )


def _stated(data: ReportData) -> TargetMde | None:
    """The `eval.target_mde` of the experiment's resolved spec (None without one)."""
    spec = data.sources.spec if data.sources else None
    return spec.eval.target_mde if spec is not None else None


def stated_targets(data: ReportData) -> TargetMde:
    """The experiment's `eval.target_mde`, else the defaults."""
    return _stated(data) or TargetMde()


def _key_notes(data: Any) -> list[str]:
    """The effective length's keys per length in the pilot, when too few for an informative interval."""

    keys = [r.n_units for r in data.estimands.effective_length if r.n_units]
    note = keys_note(min(keys)) if keys else None
    return [note] if note else []
