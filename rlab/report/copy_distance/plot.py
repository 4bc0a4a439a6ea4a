"""The copy section's figure: gain by distance per condition and, where estimated, the retention of the copy.

Top row: each arm's gain over the control by distance, one panel per condition (zero-shot, continued), the
base dotted, L0 and the training length marked. Bottom row (when `rlab.report.copy_distance.retention` estimated any):
each arm's retention beyond L0 by distance, 1 = keeps all of its gain within L0, 0 = none.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def plot(
    c: pd.DataFrame,
    path: Path,
    base_len: int | None,
    train_len: int | None,
    kept: pd.DataFrame | None = None,
) -> Path | None:
    """Gain by distance per condition (top row) and, when estimated, the retention of the copy (bottom row)."""
    import matplotlib  # noqa: PLC0415 - defers matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - defers matplotlib

    kinds = [k for k in ("zero-shot", "continued") if k in set(c["kind"])]
    if not kinds:
        kinds = list(dict.fromkeys(c["kind"]))
    with_retention = kept is not None and bool(kept["retention"].notna().any())
    rows = 2 if with_retention else 1
    fig, axes = plt.subplots(
        rows, len(kinds), figsize=(6.2 * len(kinds), 4.2 * rows), sharey="row", squeeze=False
    )
    base = c[c["kind"] == "base"]
    for ax, kind in zip(axes[0], kinds):
        for variant, g in c[c["kind"] == kind].groupby("variant", sort=False):
            g = g.sort_values("distance")
            _errorbars(ax, g, "gain", variant)
        if not base.empty:
            b = base.sort_values("distance")
            ax.plot(b["distance"], b["gain"], color="black", ls=":", marker="x", label="base")
        ax.axhline(0.0, color="grey", ls="--", lw=0.8, label="no use of the earlier copy")
        for length, name in ((base_len, "L0"), (train_len, "train len")):
            if length:
                ax.axvline(length, color="grey", lw=0.8)
                ax.text(length, ax.get_ylim()[1] if ax.lines else 0, f" {name}", va="top", fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{kind}: gain from a passage seen d tokens back")
        ax.set_xlabel("distance d to the first occurrence (tokens)")
    axes[0][0].set_ylabel("gain (nats/token vs control; higher = uses it)")
    if with_retention and kept is not None:
        for ax, kind in zip(axes[1], kinds):
            _draw_retention(ax, kept, kind, base_len, train_len)
        axes[1][0].set_ylabel("retention: gain at d / gain within L0")
    handles, labels = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)
    tmp.replace(path)
    return path


def _errorbars(ax, g: pd.DataFrame, column: str, label: str) -> None:
    """`column` by distance with its 95% interval (`<column>_low`, `<column>_high`) as error bars."""
    ax.errorbar(
        g["distance"],
        g[column],
        yerr=[g[column] - g[f"{column}_low"], g[f"{column}_high"] - g[column]],
        marker="o",
        capsize=2,
        label=label,
    )


def _draw_retention(ax, kept: pd.DataFrame, kind: str, base_len: int | None, train_len: int | None) -> None:
    """Retention by distance for one condition's arms (and the base), on one matplotlib axis."""
    for variant, g in kept[kept["kind"] == kind].groupby("variant", sort=False):
        g = g[g["retention"].notna()].sort_values("distance")
        if g.empty:
            continue
        _errorbars(ax, g, "retention", variant)
    base = kept[(kept["kind"] == "base") & kept["retention"].notna()].sort_values("distance")
    if not base.empty:
        ax.plot(base["distance"], base["retention"], color="black", ls=":", marker="x", label="base")
    ax.axhline(1.0, color="grey", ls="--", lw=0.8)
    ax.axhline(0.0, color="grey", ls="--", lw=0.8)
    for length in (base_len, train_len):
        if length:
            ax.axvline(length, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_title(f"{kind}: retention of the copy beyond L0")
    ax.set_xlabel("distance d to the first occurrence (tokens)")
