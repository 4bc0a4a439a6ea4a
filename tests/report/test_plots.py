"""Plots are written, are real PNGs, and are skipped (not drawn empty) when their data is missing."""

from __future__ import annotations

import json
import shutil

from rlab.report.build import write_report
from rlab.report.render.plots import PLOT_FILES

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_every_plot_is_a_valid_png(fx):
    out = write_report(fx, draws=200)
    for name in PLOT_FILES.values():
        path = fx.plots_dir / name
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC, name
        assert len(data) > 10_000, name  # a real figure, not an empty canvas
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert width > 400 and height > 250, name
        assert path in out.written
    md = fx.comparison_md.read_text()
    answer, plot = md.index("**Answer**"), md.index("(plots/bpb_vs_length.png)")
    assert answer < plot < md.index("## ")  # the answer, then the headline plot, then the tables


def test_plots_without_passkey_or_metrics(fx):
    for tag in ("fx-rope", "fx-pi", "fx-yarn"):
        (fx.eval_dir(tag) / "passkey.csv").unlink()
        doc = json.loads(fx.eval_json(tag).read_text())
        del doc["metrics"]["passkey"], doc["measured"]["passkey"]
        fx.eval_json(tag).write_text(json.dumps(doc))
    shutil.rmtree(fx.root / "runs")
    plots = write_report(fx, draws=200)
    assert not (fx.plots_dir / PLOT_FILES["passkey"]).exists()
    assert not (fx.plots_dir / PLOT_FILES["loss"]).exists()
    assert (fx.plots_dir / PLOT_FILES["bpb_length"]).read_bytes()[:8] == PNG_MAGIC
    assert plots.data.passkey.empty
