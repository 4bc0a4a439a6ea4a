"""The CLI end to end on both base dirs nanochat wrote (`$RLAB_NANOCHAT_REFERENCE`): ls, continue, eval.

Slow (real torchrun jobs). Each test works on a private copy of the fixture: `rlab continue` clones into it.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from rlab.paths import BaseLayout, ExperimentLayout, meta_file, model_file
from rlab.records.eval_doc import read_eval_doc
from tests.cli.harness import run_process
from tests.conftest import EVAL_BUNDLE_DIR, nanochat_reference_path, needs_nanochat_reference
from tests.orchestrate.helpers import spec_args

REFERENCE = nanochat_reference_path("")
SPEC = f"""name: ref
base: {{tag: d2, step: 20}}
train: {{seq_len: 512, steps: 1, device_batch_size: 1, eval_every: never, lr: {{warmup_steps: 0}}}}
eval: {{evals: [bpb, passkey], bpb_tokens: 2048, core_bundle: {EVAL_BUNDLE_DIR}, passkey_lengths: [512],
        passkey_depths: [0.5], passkey_trials: 1, device_batch_size: 2}}
launch: {{nproc_per_node: 1}}
"""
CASES = {
    "d314e96": ("nanochat-2025 (base 10000)", "DistAdamW+DistMuon"),
    "head": ("nanochat-2026 (windows SSSL, base 100000)", "MuonAdamW"),
}


@pytest.mark.slow
@needs_nanochat_reference(REFERENCE)
@pytest.mark.parametrize("version", list(CASES))
def test_ls_continue_eval_on_nanochat_s_own_base_dir(version, tmp_path):
    shown, optimizer = CASES[version]
    base = tmp_path / "base"
    shutil.copytree(REFERENCE / version, base)
    (spec := tmp_path / "ref.yaml").write_text(SPEC)
    results = tmp_path / "results"
    common = [*spec_args(spec, base, results)]

    listed = run_process("ls", "--base-dir", str(base))
    assert listed.code == 0 and shown.split()[0].removeprefix("nanochat-") in listed.out, listed.out
    as_json = json.loads(run_process("ls", "--json", "--base-dir", str(base)).out)
    assert [t["architecture"]["describe"] for t in as_json["tags"]] == [shown]

    done = run_process("continue", *common, "--variants", "pi,yarn", timeout=600)
    assert done.code == 0, done.out + done.err
    layout, ckpts = ExperimentLayout(results, "ref"), BaseLayout(base)
    for variant in ("pi", "yarn"):
        tag = f"d2-ref-{variant}"
        meta = json.loads(meta_file(ckpts.checkpoint_dir(tag), 21).read_text())
        assert meta["architecture"] == shown.split()[0] and meta["rope"]["windows"] == "scale"
        assert meta["rope"]["base"] == float(shown.rsplit("base ", 1)[1].rstrip(")"))
        assert meta["optimizer"]["import"]["restored"] and optimizer in meta["optimizer"]["import"]["format"]
        # nanochat's loader reads exactly these: the same keys and dtypes as its own file, its model_config
        source = json.loads(meta_file(ckpts.checkpoint_dir("d2"), 20).read_text())["model_config"]
        assert meta["model_config"] == {**source, "sequence_len": 512}
        ours = torch.load(model_file(ckpts.checkpoint_dir(tag), 21), weights_only=True)
        theirs = torch.load(model_file(ckpts.checkpoint_dir("d2"), 20), weights_only=True)
        assert [(k, v.dtype, v.shape) for k, v in ours.items()] == [
            (k, v.dtype, v.shape) for k, v in theirs.items()
        ]

    evaluated = run_process("eval", *common, "--tag", "d2-ref-yarn", timeout=600)
    assert evaluated.code == 0, evaluated.out + evaluated.err
    doc = read_eval_doc(layout.eval_json("d2-ref-yarn"))
    assert doc.step == 21 and doc.rope["windows"] == "scale"
    assert doc.section("bpb") is not None and doc.section("passkey") is not None
