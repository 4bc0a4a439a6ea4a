"""The seed's command runs the seed's design (issue 36): the control arm, the experiment found the same way by every
command, the evals' inputs prepared before training, and the changed-vs-base lines of the preflight."""

from __future__ import annotations

import json
import shutil

import pytest

from rlab.data.long_docs import read_long_docs_manifest
from rlab.errors import RlabError
from rlab.orchestrate.eval_inputs import eval_inputs, prepare_eval_inputs
from rlab.orchestrate.experiments import experiment_filter, resolve_experiment
from rlab.spec.loading import load_spec
from tests.cli.harness import run_main
from tests.conftest import nanochat_reference_path, needs_nanochat_reference
from tests.orchestrate.helpers import continue_from

REFERENCE = nanochat_reference_path("")


@needs_nanochat_reference(REFERENCE)
@pytest.mark.parametrize("version", ["d314e96", "head"])
def test_the_seeds_dry_run_plans_a_control_and_says_what_changed(version, tmp_path):
    base = REFERENCE / version
    args = [
        "continue",
        *continue_from(20, "pi,ntk,yarn"),
        "--dry-run",
        "--base-dir",
        str(base),
    ]
    args += ["--base-tag", "d2", "--results-dir", str(tmp_path / "res")]
    plan = json.loads(run_main(*args, "--json").out)
    assert [(t["tag"], t["control"]) for t in plan["tags"]] == [
        ("d2-rope", True),
        ("d2-pi", False),
        ("d2-ntk", False),
        ("d2-yarn", False),
    ]
    rope, pi = plan["tags"][0], plan["tags"][1]  # trained identically: steps, length, data start, seed
    assert {k: rope[k] for k in ("steps", "seq_len", "tokens", "data_start")} == {
        k: pi[k] for k in ("steps", "seq_len", "tokens", "data_start")
    }
    changes = {c["setting"]: c for c in plan["changes_vs_base"]}
    assert changes["sequence length"]["planned"] == "1024" and changes["sequence length"]["base"] == "256"
    assert changes["tokens/step"]["base"] == "2,048" and changes["tokens/step"]["changed"]
    assert "imported from nanochat's 2 per-rank shard(s)" == changes["optimizer state"]["planned"]
    assert {"peak LRs", "LR warmup", "LR decay", "steps"} <= set(changes)
    (docs,) = [i for i in plan["eval_inputs"] if i["name"] == "long-document set"]
    assert (
        docs["state"] == "build"
        and "needs network" in docs["detail"]
        and "rlab data long-docs" in docs["detail"]
    )
    text = run_main(*args)
    assert text.code == 0, text.err
    assert "d2-rope (control)" in text.out and "long-document set: will be built now" in text.out
    assert "tokens/step: 8,192 (base: 2,048; changed)" in text.out
    without = run_main(*args, "--no-control", "--json")
    plan = json.loads(without.out)
    assert [t["tag"] for t in plan["tags"]] == ["d2-pi", "d2-ntk", "d2-yarn"]
    assert any(
        "no control arm (--no-control)" in w and "no better/worse verdicts" in w for w in plan["warnings"]
    )


def test_every_command_finds_the_experiment_the_same_way(tmp_path, monkeypatch):
    root = tmp_path / "results"
    with pytest.raises(RlabError, match="No experiments under"):
        resolve_experiment(None, None, root)
    (root / "a" / "runs").mkdir(parents=True)
    assert resolve_experiment(None, None, root) == ("a", root)  # the only one
    (root / "b" / "evals").mkdir(parents=True)
    with pytest.raises(RlabError, match=r"Several experiments under .*: a, b\.") as caught:
        resolve_experiment(None, None, root)
    assert "\n" not in caught.value.message
    assert experiment_filter(None, root) == (None, root)  # status / ls show them all
    assert resolve_experiment("b", None, root) == ("b", root)
    monkeypatch.setenv("RLAB_EXPERIMENT", "a")
    assert resolve_experiment(None, None, root) == ("a", root) and experiment_filter(None, root) == (
        "a",
        root,
    )
    assert resolve_experiment("b", None, root) == ("b", root)  # the flag wins


def test_the_long_document_set_is_built_before_training_and_read_offline(tiny_base_dir, tmp_path):

    base = tmp_path / "base"
    shutil.copytree(tiny_base_dir, base)
    shutil.rmtree(base / "long_docs")
    spec = load_spec(None, base_dir=base, results_dir=tmp_path / "res", target_len=512)
    (docs, core) = eval_inputs(spec)
    assert (docs.state, core.name) == ("build", "CORE bundle")
    assert "no network" in docs.detail  # the base was prepared from a corpus folder that is still there
    done = prepare_eval_inputs(spec, [docs])
    assert len(done) == 1 and "long-document set built" in done[0]
    assert eval_inputs(spec)[0].state == "ready"
    assert (
        read_long_docs_manifest(base) is not None
    )  # what `rlab eval` reads instead of building (no network)
