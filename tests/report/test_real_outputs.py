"""The report on outputs written by the real eval worker (two tiny random checkpoints), not fixtures.

Guards the contract between `rlab.evals` (producer) and `rlab.report` (consumer): whatever the
worker writes, the report reads without footnotes about unreadable or malformed files.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch

from rlab.core.checkpoint import save_checkpoint
from rlab.core.checkpoint_meta import CheckpointMeta
from rlab.core.tokenizer import Tokenizer
from rlab.evals.runner import run_evals
from rlab.paths import ExperimentLayout
from rlab.report.build import write_report
from rlab.spec.eval import EvalSpec
from rlab.spec.rope import RopeSpec
from rlab.spec.run import EvalRunConfig
from tests.conftest import EVAL_BUNDLE_DIR
from tests.evals.conftest import random_gpt

pytestmark = pytest.mark.slow


def _checkpoint(base: Path, tiny_base_dir: Path, tag: str, rope) -> None:

    tok = Tokenizer.from_directory(tiny_base_dir / "tokenizer")
    model = random_gpt(tok.vocab_size, sequence_len=32, seed=7)
    meta = {
        "step": 5,
        "model_config": model.config.to_dict(),
        "tokens_trained": 1000,
        "rope": rope.model_dump(mode="json"),
    }
    save_checkpoint(
        base / "base_checkpoints" / tag, 5, model.state_dict(), CheckpointMeta.model_validate(meta)
    )


def _two_task_bundle(tmp_path: Path) -> Path:
    """The fixture bundle's data with a core.yaml of two zero-shot tasks (keeps the test small)."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "eval_data").symlink_to(EVAL_BUNDLE_DIR / "eval_data")
    (bundle / "eval_meta_data.csv").symlink_to(EVAL_BUNDLE_DIR / "eval_meta_data.csv")
    (bundle / "core.yaml").write_text(
        "icl_tasks:\n"
        "- {label: copa, dataset_uri: commonsense_reasoning/copa.jsonl, num_fewshot: [0], "
        "icl_task_type: multiple_choice}\n"
        "- {label: winograd, dataset_uri: language_understanding/winograd_wsc.jsonl, num_fewshot: [0], "
        "icl_task_type: schema}\n"
    )
    return bundle


def test_report_reads_what_the_eval_worker_writes(tiny_base_dir, tmp_path):

    torch.set_num_threads(1)
    base = tmp_path / "base"
    base.mkdir()
    for sub in ("base_data", "tokenizer", "long_docs"):
        (base / sub).symlink_to(tiny_base_dir / sub)
    layout = ExperimentLayout(tmp_path / "results", "real")
    spec = EvalSpec(
        bpb_tokens=512,
        lengths=(16, 32, 64, 100000),
        length_tokens=192,
        core_bundle=_two_task_bundle(tmp_path),
        max_per_task=4,
        passkey_lengths=(256,),
        passkey_depths=(0.0, 0.9),
        passkey_trials=1,
        ruler_lengths=(256,),
        ruler_trials=1,
        device_batch_size=4,
    )
    for variant, rope in (("rope", RopeSpec()), ("pi", RopeSpec(variant="pi", factor=2.0, original_len=32))):
        tag = f"d2-{variant}"
        _checkpoint(base, tiny_base_dir, tag, rope)
        run_evals(
            EvalRunConfig(
                experiment="real",
                tag=tag,
                variant=variant,
                base_dir=base,
                out_dir=layout.eval_dir(tag),
                core_csv=layout.core_task_csv(variant),
                eval=spec,
            )
        )

    out = write_report(layout, draws=200)
    data = out.data
    notes = data.footnotes.items
    assert data.clustered and not any("do not name their documents" in n for n in notes)  # per-document units
    assert notes[0] == "d2-pi: no training metrics (metrics.jsonl)"
    assert notes[1].startswith("d2-pi: BPB not measured at length(s) 100000 (skipped by the eval: ")
    assert "d2-rope: no training metrics (metrics.jsonl)" in notes
    assert notes[-2:] == [
        "plot loss_curves.png not drawn: no informative data for it yet",
        "plot val_bpb_vs_step.png not drawn: no informative data for it yet",
    ]
    assert not any("unreadable" in n or "lacks column" in n or "schema" in n for n in notes)
    res = data.results.set_index("tag")
    assert list(res.index) == ["d2-pi", "d2-rope"]
    for col in ("train_bpb", "val_bpb", "bpb_len_16", "bpb_len_64", "core", "passkey_len_256"):
        assert res[col].notna().all(), col
    assert (data.scalars.query("metric != 'passkey_overall'")["interval"] == "t").all()
    comp = data.comparisons.set_index(["arm", "metric"])
    assert comp.loc[("pi", "val_bpb"), "interval"] == "t"
    assert comp.loc[("pi", "core"), "interval"] == "t"
    assert not data.mismatches  # evaluated alike: comparable
    for col in ("code_version", "eval_settings_hash", "eval_data_hash", "world_size", "dtype"):
        assert res[col].notna().all() and res[col].nunique() == 1, col
    # identical weights: at the original length pi(2x) differs from rope only through the frequencies
    assert res.loc["d2-rope", "rope_original_len"] == 32 and res.loc["d2-pi", "rope_factor"] == 2.0
    csv = pd.read_csv(layout.results_csv)
    assert len(csv) == 2 and "val_bpb_rel_vs_rope_pct (neg=better)" in csv.columns
