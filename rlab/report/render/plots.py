"""The report's PNG figures (matplotlib, headless Agg backend, written atomically).

* ``bpb_vs_length.png``  the headline: one panel per variant, its paired BPB difference vs the baseline
                         by context length after continued training (solid) and zero-shot (dashed),
                         95% interval shaded, a shaded band around zero, the base model as a
                         reference, training length and L0 marked
* ``loss_curves.png``    training loss minus the baseline's at the same step (smoothed), one line per tag,
                         each seed replicate paired with the baseline's run of the same seed
* ``val_bpb_vs_step.png`` in-training val BPB minus the baseline's
(curves only with 3+ points per run)
* ``passkey_heatmap.png`` passkey accuracy by length x depth per arm (not drawn when all are 0)

A figure whose data is absent or carries no information is skipped (the caller footnotes it).
Each variant keeps one colour across every figure; legends sit outside the data.
"""

from __future__ import annotations

import io
import logging
import math
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from rlab.atomic_io import write_bytes_atomic
from rlab.report.assemble.report_data import ReportData
from rlab.report.render.arm_values import train_lengths
from rlab.report.render.table_model import arm_order
from rlab.report.render.tables import passkey_all_zero

log = logging.getLogger(__name__)

PLOT_FILES = {
    "bpb_length": "bpb_vs_length.png",
    "loss": "loss_curves.png",
    "val_bpb": "val_bpb_vs_step.png",
    "passkey": "passkey_heatmap.png",
}
_VARIANT_ORDER = ("rope", "pi", "ntk", "dynamic-ntk", "yarn", "llama3")
_MIN_POINTS = 3


def _pyplot():
    import matplotlib  # noqa: PLC0415 - defers matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # noqa: PLC0415 - defers matplotlib

    return plt


def _colors(data: ReportData) -> dict[str, object]:
    """A stable colour per variant: known variants get fixed tab10 slots, others follow."""
    cmap = _pyplot().get_cmap("tab10")
    out, extra = {}, len(_VARIANT_ORDER)
    for key in arm_order(data):
        variant = data.arm(key).variant
        if variant in out:
            continue
        if variant in _VARIANT_ORDER:
            out[variant] = cmap(_VARIANT_ORDER.index(variant) % 10)
        else:
            out[variant] = cmap(extra % 10)
            extra += 1
    return out


def _save(fig, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)
    write_bytes_atomic(path, buf.getvalue())
    return path


def _marks(data: ReportData) -> list[tuple[int, Literal["--", ":"], str]]:
    """(length, linestyle, label) of the training length(s) and the original length(s) L0."""
    out: list[tuple[int, Literal["--", ":"], str]] = [
        (v, "--", f"training length = {v}") for v in sorted(train_lengths(data))
    ]
    out += [(v, ":", f"L0 = {v}") for v in sorted(set(data.meta["rope_original_len"].dropna().astype(int)))]
    return out


def _length_diffs(data: ReportData) -> pd.DataFrame:
    """Paired BPB differences vs the baseline per length: arm, kind, length, diff, diff_low, diff_high."""
    comp = data.comparisons
    if comp.empty:
        return pd.DataFrame()
    rows = comp[comp["metric"].str.startswith("bpb_len_")].copy()
    if rows.empty:
        return rows
    rows["length"] = rows["metric"].str.removeprefix("bpb_len_").astype(int)
    return rows


def _draw_diff(ax, rows: pd.DataFrame, color, style: str, label: str, marker: str = "o") -> None:
    rows = rows.sort_values("length")
    ax.fill_between(rows["length"], rows["diff_low"], rows["diff_high"], color=color, alpha=0.18, linewidth=0)
    ax.plot(
        rows["length"],
        rows["diff"],
        marker=marker,
        markersize=4,
        color=color,
        linewidth=1.6,
        linestyle=style,
        label=label,
    )


def _length_panel(
    ax,
    data: ReportData,
    diffs: pd.DataFrame,
    base_rows: pd.DataFrame,
    color: object,
    band: tuple[float, float],
) -> bool:
    """One variant's panel: the noise band, zero, the length marks, the base and its arms' differences; whether a
    point is at a length some model cannot attend to (marked X)."""
    ax.axhspan(*band, color="0.85", alpha=0.7, zorder=0, linewidth=0)
    ax.axhline(0.0, color="black", linewidth=1.3, zorder=1)
    for v, mark_style, _ in _marks(data):
        ax.axvline(v, color="0.35", linestyle=mark_style, linewidth=1.0)
    if len(base_rows):
        rows = base_rows.sort_values("length")
        ax.plot(
            rows["length"], rows["diff"], marker="s", markersize=3, color="0.5", linewidth=1.0, linestyle="-."
        )
    any_capped = False
    for kind, style in (("continued", "-"), ("zero-shot", "--")):
        rows = diffs[diffs["kind"] == kind]
        if len(rows):
            _draw_diff(ax, rows, color, style, kind)
            capped = rows[[_capped_pair(data, r.arm, r.reference, r.length) for r in rows.itertuples()]]
            if len(capped):
                any_capped = True
                ax.scatter(capped["length"], capped["diff"], marker="X", s=60, color=color, zorder=5)
    return any_capped


def plot_bpb_length(data: ReportData, path: Path) -> Path | None:
    """One panel per variant: continued (solid) and zero-shot (dashed) differences vs the baseline arm."""
    diffs = _length_diffs(data)
    if diffs.empty:
        return None
    plt = _pyplot()
    from matplotlib.lines import Line2D  # noqa: PLC0415 - defers matplotlib
    from matplotlib.patches import Patch  # noqa: PLC0415 - defers matplotlib

    colors = _colors(data)
    variants = list(
        dict.fromkeys(
            data.arm(a).variant
            for a in arm_order(data)
            if data.arm(a).kind != "base" and (diffs["arm"] == a).any()
        )
    )
    zero_refs = sorted(set(diffs[diffs["kind"] == "zero-shot"]["reference"]))
    # the base is the zero-shot arms' own zero when they are compared with it: no separate line then
    base_rows = diffs[diffs["kind"] == "base"] if not zero_refs else diffs.iloc[:0]
    # near-square (two panels a row, the legend below): the report shows it beside the Answer table, narrow
    ncols = min(len(variants), 2)
    nrows = math.ceil(len(variants) / ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(4.0 * ncols + 0.4, 3.1 * nrows + 1.9), sharex=True, sharey=True, squeeze=False
    )
    lengths = sorted(set(diffs["length"]) | {m[0] for m in _marks(data)})
    band = _zero_band(diffs)
    any_capped = False
    for i, variant in enumerate(variants):
        ax = axes[i // ncols][i % ncols]
        any_capped |= _length_panel(
            ax, data, diffs[diffs["variant"] == variant], base_rows, colors[variant], band
        )
        ax.set_title(variant, fontsize=10.5, color=colors[variant], fontweight="bold")
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(L) for L in lengths], fontsize=8)
        ax.minorticks_off()
        ax.set_xlim(lengths[0] / 1.25, lengths[-1] * 1.25)
        ax.grid(alpha=0.3, which="major")
        if i % ncols == 0:
            ax.set_ylabel(f"BPB − {data.baseline}  (< 0: better)", fontsize=9)
        if i // ncols == nrows - 1 or i + ncols >= len(variants):
            ax.set_xlabel("context length (tokens)", fontsize=9)
            ax.tick_params(labelbottom=True)
    for j in range(len(variants), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    handles = [
        Line2D([], [], color="0.2", linewidth=1.6, marker="o", markersize=4),
        Line2D([], [], color="0.2", linewidth=1.6, linestyle="--", marker="o", markersize=4),
        Patch(color="0.2", alpha=0.18),
        Line2D([], [], color="black", linewidth=1.3),
        Patch(color="0.85"),
    ]
    zero = f"{data.baseline_arm} = 0" + (f" (zero-shot: {' / '.join(zero_refs)} = 0)" if zero_refs else "")
    labels = [
        "continued training",
        "zero-shot (RoPE applied, no training)",
        "95% paired interval",
        zero.replace(" (zero-shot", "\n(zero-shot"),
        "|Δ| below every interval's\nhalf-width (never significant)",
    ]
    if not (diffs["kind"] == "zero-shot").any():
        del handles[1], labels[1]
    if len(base_rows):
        handles.append(Line2D([], [], color="0.5", linestyle="-.", marker="s", markersize=3))
        labels.append(f"base model − {data.baseline_arm}")
    for _, style, text in _marks(data):
        handles.append(Line2D([], [], color="0.35", linestyle=style))
        labels.append(text)
    if any_capped:
        handles.append(Line2D([], [], color="0.2", marker="X", linestyle="none", markersize=7))
        labels.append("context capped by attention\nwindows (not L tokens)")
    fig.suptitle(
        f"BPB difference vs {data.baseline} by context length,\npaired on the same targets — '{data.experiment}'",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 1.35 / (3.1 * nrows + 1.9), 1, 1))  # the legend's room below
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8.5, frameon=False)
    return _save(fig, path)


def _capped_pair(data: ReportData, arm: str, reference: str, length: int) -> bool:
    """Either side of a difference cannot attend to the whole input at this length."""
    return any(length in data.arm_caps(k) for k in (arm, reference) if any(a.key == k for a in data.arms))


def _zero_band(diffs: pd.DataFrame) -> tuple[float, float]:
    """A band around 0 as wide as the narrowest interval drawn: differences inside it are indistinguishable."""
    half = ((diffs["diff_high"] - diffs["diff_low"]) / 2).dropna()
    h = float(half.min()) if len(half) else 0.0
    return -h, h


def _relative_curves(data: ReportData, kind: str, column: str) -> pd.DataFrame | None:
    """Per tag of a non-baseline arm: `column` minus the baseline arm's at the same step. A seed replicate is
    paired with the baseline's run of the same seed (the same data order) when there is one, else with the
    mean over the baseline's runs."""
    curves = data.curves
    if curves.empty or data.baseline_arm is None:
        return None
    rows = curves[(curves["type"] == kind) & curves[column].notna()]
    base_tags = data.arm(data.baseline_arm).tags
    base_rows = rows[rows["tag"].isin(base_tags)]
    if base_rows.empty:
        return None
    seeds = data.meta.set_index("tag")["seed"]
    base_by_seed = {seeds.get(t): t for t in base_tags if not pd.isna(seeds.get(t))}
    mean = base_rows.groupby("step")[column].mean()
    parts = []
    for tag, part in rows[~rows["tag"].isin(base_tags)].groupby("tag"):
        twin = base_by_seed.get(seeds.get(tag))
        ref = base_rows[base_rows["tag"] == twin].set_index("step")[column] if twin is not None else mean
        parts.append(part.assign(delta=part[column] - part["step"].map(ref)))
    return pd.concat(parts).dropna(subset=["delta"]) if parts else None


def _plot_relative(
    data: ReportData, path: Path, kind: str, column: str, ylabel: str, title: str, smooth: bool
) -> Path | None:
    rel = _relative_curves(data, kind, column)
    if rel is None or rel.empty:
        return None
    if rel.groupby("tag").size().max() < _MIN_POINTS:  # a line of one or two points says nothing
        return None
    plt = _pyplot()
    colors = _colors(data)
    fig, ax = plt.subplots(figsize=(8.4, 4.2))
    for arm in arm_order(data):
        tags = data.arm(arm).tags
        for i, tag in enumerate(tags):
            part = rel[rel["tag"] == tag].sort_values("step")
            if part.empty:
                continue
            y = part["delta"].to_numpy()
            if smooth and len(y) > 10:
                window = max(3, len(y) // 20)
                y = pd.Series(y).rolling(window, min_periods=1, center=True).mean().to_numpy()
            style = "-" if data.arm(arm).kind == "continued" else "--"
            ax.plot(
                part["step"],
                y,
                color=colors[data.arm(arm).variant],
                linestyle=style,
                linewidth=1.3 if len(tags) == 1 else 0.9,
                alpha=1.0 if len(tags) == 1 else 0.8,
                label=data.label(arm) if i == 0 else None,
                marker=None if smooth else "o",
                markersize=3,
            )
    ax.axhline(0.0, color="black", linewidth=1.3, label=f"{data.baseline} (baseline)")
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title} — '{data.experiment}'", fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8.5, frameon=False)
    fig.tight_layout()
    return _save(fig, path)


def plot_loss(data: ReportData, path: Path) -> Path | None:
    return _plot_relative(
        data,
        path,
        "train",
        "loss",
        f"training loss − {data.baseline}'s (nats/token)",
        f"Training loss minus {data.baseline}'s at the same step (smoothed; one line per run)",
        smooth=True,
    )


def plot_val_bpb(data: ReportData, path: Path) -> Path | None:
    return _plot_relative(
        data,
        path,
        "eval",
        "val_bpb",
        f"val BPB − {data.baseline}'s",
        f"In-training val BPB minus {data.baseline}'s",
        smooth=False,
    )


def plot_passkey(data: ReportData, path: Path) -> Path | None:
    pk = data.passkey
    if pk.empty or passkey_all_zero(data):
        return None
    plt = _pyplot()
    arms = [a for a in arm_order(data) if pk["tag"].isin(data.arm(a).tags).any()]
    lengths = sorted(set(pk["length"].astype(int)))
    depths = sorted(set(pk["depth"].astype(float)))
    ncols = min(len(arms), 3)
    nrows = math.ceil(len(arms) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols + 1.0, 2.9 * nrows + 0.4), squeeze=False)
    image = None
    for i, arm in enumerate(arms):
        ax = axes[i // ncols][i % ncols]
        part = pk[pk["tag"].isin(data.arm(arm).tags)]
        grid = (
            part.pivot_table(index="depth", columns="length", values="accuracy", aggfunc="mean").reindex(
                index=depths, columns=lengths
            )
        ).to_numpy(dtype=float)
        image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto", origin="lower")
        for (r, c), v in np.ndenumerate(grid):
            if not math.isnan(v):
                ax.text(
                    c,
                    r,
                    f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7.5,
                    color="white" if v < 0.6 else "black",
                )
        ax.set_xticks(range(len(lengths)), [str(L) for L in lengths], fontsize=8, rotation=30)
        ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths], fontsize=8)
        ax.set_title(data.label(arm), fontsize=10)
        ax.set_xlabel("context length (tokens)", fontsize=8.5)
        if i % ncols == 0:
            ax.set_ylabel("key depth (fraction of prompt)", fontsize=8.5)
    for j in range(len(arms), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    n = int(pk["n"].min())
    fig.suptitle(f"Passkey retrieval accuracy ({n} key(s) per cell) — '{data.experiment}'")
    fig.tight_layout()
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), label="accuracy", shrink=0.85)
    return _save(fig, path)


def write_plots(data: ReportData, plots_dir: Path) -> dict[str, Path | None]:
    """Every figure; a value is None when its data is missing or uninformative (a stale file is removed)."""
    makers = {
        "bpb_length": plot_bpb_length,
        "loss": plot_loss,
        "val_bpb": plot_val_bpb,
        "passkey": plot_passkey,
    }
    out = {}
    for key, make in makers.items():
        out[key] = make(data, plots_dir / PLOT_FILES[key])
        if out[key] is None:
            (plots_dir / PLOT_FILES[key]).unlink(missing_ok=True)
            log.info("plot %s skipped: no informative data", PLOT_FILES[key])
    return out
