"""The report's PNG figures (matplotlib, headless Agg backend, written atomically).

* ``loss_curves.png``      training loss per variant vs step (from each tag's metrics.jsonl)
* ``val_bpb_vs_step.png``  in-training val BPB per variant vs step
* ``bpb_vs_length.png``    the headline: BPB vs context length per variant, log-x, with the
                           continued-training length and the original length L0 marked
* ``passkey_heatmap.png``  passkey accuracy by length × depth, one panel per variant

A figure whose data is absent is skipped (and the caller footnotes it), never drawn empty.
Each variant keeps one colour across every figure.
"""

from __future__ import annotations

import io
import logging
import math
from pathlib import Path

import pandas as pd

from rlab.atomic_io import write_bytes_atomic
from rlab.report.collect import ReportData
from rlab.report.tables import tag_order

log = logging.getLogger(__name__)

PLOT_FILES = {
    "loss": "loss_curves.png",
    "val_bpb": "val_bpb_vs_step.png",
    "bpb_length": "bpb_vs_length.png",
    "passkey": "passkey_heatmap.png",
}
_VARIANT_ORDER = ("rope", "pi", "ntk", "dynamic-ntk", "yarn", "llama3")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _colors(data: ReportData) -> dict[str, object]:
    """A stable colour per tag: known variants get fixed tab10 slots, others follow."""
    plt = _pyplot()
    cmap = plt.get_cmap("tab10")
    out, extra = {}, len(_VARIANT_ORDER)
    for tag in tag_order(data):
        variant = str(data.meta.loc[data.meta["tag"] == tag, "variant"].iloc[0])
        if variant in _VARIANT_ORDER:
            out[tag] = cmap(_VARIANT_ORDER.index(variant) % 10)
        else:
            out[tag] = cmap(extra % 10)
            extra += 1
    return out


def _integer_ticks():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _label(data: ReportData, tag: str) -> str:
    row = data.meta.loc[data.meta["tag"] == tag].iloc[0]
    return str(row["label"]) + (" (baseline)" if tag == data.baseline_tag else "")


def _save(fig, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)
    write_bytes_atomic(path, buf.getvalue())
    return path


def _title(data: ReportData, what: str) -> str:
    return f"{what} — experiment '{data.experiment}'"


def _plot_curve(data: ReportData, path: Path, *, kind: str, column: str, ylabel: str, what: str,
                marker: str | None) -> Path | None:
    """One line per tag of `column` vs step from the training curves of type `kind` (train/eval)."""
    curves = data.curves
    rows = curves[(curves["type"] == kind) & curves[column].notna()] if len(curves) else None
    if rows is None or rows.empty:
        return None
    plt = _pyplot()
    colors = _colors(data)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for tag in tag_order(data):
        part = rows[rows["tag"] == tag].sort_values("step")
        if len(part):
            ax.plot(part["step"], part[column], marker=marker, markersize=3.5, color=colors[tag],
                    label=_label(data, tag), linewidth=1.4)
    ax.xaxis.set_major_locator(_integer_ticks())
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(_title(data, what))
    ax.grid(alpha=0.3)
    ax.legend(title="variant")
    return _save(fig, path)


def plot_loss(data: ReportData, path: Path) -> Path | None:
    return _plot_curve(data, path, kind="train", column="loss", ylabel="training loss (nats / token)",
                       what="Training loss", marker=None)


def plot_val_bpb(data: ReportData, path: Path) -> Path | None:
    return _plot_curve(data, path, kind="eval", column="val_bpb", ylabel="validation BPB (bits per byte)",
                       what="Validation BPB during training", marker="o")


def plot_bpb_length(data: ReportData, path: Path) -> Path | None:
    bl = data.bpb_length
    if bl.empty:
        return None
    plt = _pyplot()
    colors = _colors(data)
    diffs = _length_diffs(data)
    if diffs.empty:
        fig, ax = plt.subplots(figsize=(7.5, 4.6))
        dax = None
    else:
        # Bottom panel: the paired difference vs the baseline. The same targets are scored at every length
        # and for every variant, so these intervals are far tighter than the per-variant bars above.
        fig, (ax, dax) = plt.subplots(2, 1, figsize=(7.5, 7.2), sharex=True, height_ratios=[3, 2])
    drawn = [t for t in tag_order(data) if (bl["tag"] == t).any()]
    for i, tag in enumerate(drawn):
        part = bl[bl["tag"] == tag].sort_values("length")
        ax.plot(part["length"], part["bpb"], marker="o", color=colors[tag], label=_label(data, tag), linewidth=1.6)
        bars = part.dropna(subset=["ci_low", "ci_high"])
        if len(bars):
            # Per-variant 95% intervals, nudged sideways (on the log axis) so they do not hide each other.
            # They are wider than the paired differences in the tables: hard documents are hard for all.
            nudge = 2.0 ** (0.025 * (i - (len(drawn) - 1) / 2))
            ax.errorbar(bars["length"] * nudge, bars["bpb"],
                        yerr=[bars["bpb"] - bars["ci_low"], bars["ci_high"] - bars["bpb"]],
                        fmt="none", ecolor=colors[tag], elinewidth=1.0, capsize=2.5, alpha=0.6)
    ax.set_xscale("log", base=2)
    lengths = sorted(set(bl["length"].astype(int))
                     | set(data.meta["train_seq_len"].dropna().astype(int))
                     | set(data.meta["rope_original_len"].dropna().astype(int)))
    ax.set_xlim(lengths[0] / 1.3, lengths[-1] * 1.3)  # room for lines drawn at the extreme lengths
    ax.set_xticks(lengths)
    ax.set_xticklabels([str(L) for L in lengths])
    ax.minorticks_off()
    marks = []
    for col, style, name in (("train_seq_len", "--", "training length"), ("rope_original_len", ":", "original length L0")):
        vals = sorted(set(data.meta[col].dropna().astype(int)))
        for v in vals:
            ax.axvline(v, color="0.35", linestyle=style, linewidth=1.1)
            marks.append((v, style, f"{name} = {v}"))
    handles, labels = ax.get_legend_handles_labels()
    from matplotlib.lines import Line2D

    for _, style, text in marks:
        handles.append(Line2D([], [], color="0.35", linestyle=style))
        labels.append(text)
    bottom = dax if dax is not None else ax
    bottom.set_xlabel("context length (tokens, log scale)")
    ax.set_ylabel("BPB (bits per byte, lower is better)")
    ax.set_title(_title(data, "BPB vs context length"))
    ax.grid(alpha=0.3, which="major")
    ax.legend(handles, labels, fontsize=8.5, loc="best")
    ax.text(0.01, 0.02, "bars: 95% bootstrap interval per variant", transform=ax.transAxes, fontsize=8, color="0.3")
    if dax is not None:
        _plot_length_diffs(data, diffs, dax, colors)
        for v, style, _ in marks:
            dax.axvline(v, color="0.35", linestyle=style, linewidth=1.1)
    fig.tight_layout()
    return _save(fig, path)


def _length_diffs(data: ReportData) -> pd.DataFrame:
    """Paired BPB differences vs the baseline per length: tag, length, diff, diff_low, diff_high."""
    comp = data.comparisons
    if comp.empty or data.baseline_tag is None:
        return pd.DataFrame()
    rows = comp[comp["metric"].str.startswith("bpb_len_") & (comp["tag"] != data.baseline_tag)].copy()
    if rows.empty:
        return pd.DataFrame()
    rows["length"] = rows["metric"].str.removeprefix("bpb_len_").astype(int)
    return rows


def _plot_length_diffs(data: ReportData, diffs: pd.DataFrame, ax, colors: dict[str, object]) -> None:
    drawn = [t for t in tag_order(data) if (diffs["tag"] == t).any()]
    for i, tag in enumerate(drawn):
        part = diffs[diffs["tag"] == tag].sort_values("length")
        nudge = 2.0 ** (0.025 * (i - (len(drawn) - 1) / 2))
        ax.errorbar(part["length"] * nudge, part["diff"],
                    yerr=[part["diff"] - part["diff_low"], part["diff_high"] - part["diff"]],
                    marker="o", markersize=4, color=colors[tag], linewidth=1.4, elinewidth=1.0, capsize=2.5,
                    label=_label(data, tag))
    ax.axhline(0.0, color=colors.get(data.baseline_tag, "0.2"), linewidth=1.6,
               label=f"{data.baseline} (baseline)")
    ax.set_ylabel(f"BPB - {data.baseline} (neg = better)")
    ax.set_title(f"Difference vs {data.baseline}, paired 95% bootstrap interval", fontsize=10)
    ax.grid(alpha=0.3, which="major")


def plot_passkey(data: ReportData, path: Path) -> Path | None:
    pk = data.passkey
    if pk.empty:
        return None
    plt = _pyplot()
    tags = [t for t in tag_order(data) if (pk["tag"] == t).any()]
    lengths = sorted(set(pk["length"].astype(int)))
    depths = sorted(set(pk["depth"].astype(float)))
    ncols = min(len(tags), 3)
    nrows = math.ceil(len(tags) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols + 1.0, 2.9 * nrows + 0.4), squeeze=False)
    image = None
    for i, tag in enumerate(tags):
        ax = axes[i // ncols][i % ncols]
        grid = (pk[pk["tag"] == tag].pivot_table(index="depth", columns="length", values="accuracy", aggfunc="mean")
                .reindex(index=depths, columns=lengths))
        image = ax.imshow(grid.to_numpy(dtype=float), vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto",
                          origin="lower")
        for (r, c), v in pd.DataFrame(grid.to_numpy()).stack().items():
            ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=7.5, color="white" if v < 0.6 else "black")
        ax.set_xticks(range(len(lengths)), [str(L) for L in lengths], fontsize=8, rotation=30)
        ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths], fontsize=8)
        ax.set_title(_label(data, tag), fontsize=10)
        ax.set_xlabel("context length (tokens)", fontsize=8.5)
        if i % ncols == 0:
            ax.set_ylabel("key depth (fraction of prompt)", fontsize=8.5)
    for j in range(len(tags), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    fig.suptitle(_title(data, "Passkey retrieval accuracy"))
    fig.tight_layout()
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), label="accuracy", shrink=0.85)
    return _save(fig, path)


def write_plots(data: ReportData, plots_dir: Path) -> dict[str, Path | None]:
    """Every figure; a value is None when its data is missing."""
    makers = {"loss": plot_loss, "val_bpb": plot_val_bpb, "bpb_length": plot_bpb_length, "passkey": plot_passkey}
    out = {}
    for key, make in makers.items():
        out[key] = make(data, plots_dir / PLOT_FILES[key])
        if out[key] is None:
            log.info("plot %s skipped: no data", PLOT_FILES[key])
    return out
