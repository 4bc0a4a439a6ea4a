"""A Hub-ready export: card metadata, verdicts and recipe from the experiment, snippets that run, 0644 files,
`rlab export --all`, and `--push` (the upload call and its offline failure; no network is used)."""

from __future__ import annotations

import json
import re
import shutil
import stat
from pathlib import Path

import pytest
import torch
import yaml

from rlab.export import hf as H
from rlab.export.card import CardOptions
from rlab.export.experiment import export_experiment
from tests.cli.harness import assert_clean_error, run_main
from tests.core.tiny_checkpoints import random_model, write_checkpoint
from tests.export.test_hf_export import VARIANTS, vocab

torch.set_num_threads(1)

FIXTURE = Path(__file__).parent / "fixtures" / "demo"
ARMS = {
    "demo": ("nanochat-2025", "rope"),
    "demo-yarn": ("nanochat-2026", "yarn"),
    "demo-dynamic-ntk": ("nanochat-2025", "dynamic-ntk"),
}


@pytest.fixture
def demo(tmp_path, base) -> tuple[Path, Path]:
    """(base dir, results root): tiny checkpoints for three demo arms, with run configs and results.csv rows the
    demo once wrote for them (fixtures/demo, frozen: the committed demo may be regenerated)."""
    results = tmp_path / "results"
    shutil.copytree(FIXTURE, results / "demo")
    for tag, (arch, variant) in ARMS.items():
        model = random_model(arch, VARIANTS[variant], vocab_size=vocab(base))
        write_checkpoint(base, tag, model, extra_meta={"experiment": "demo"})
    return base, results


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_card_is_hub_ready_and_its_code_runs(demo, tmp_path, monkeypatch, capsys):
    base, results = demo
    out = tmp_path / "out"
    H.export_hf(
        base, "demo-yarn", out, results_root=results, card=H.CardOptions(license="mit", base_model="me/demo")
    )
    card = (out / "README.md").read_text()
    meta = front_matter(card)
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "text-generation"
    assert meta["license"] == "mit" and meta["base_model"] == "me/demo"
    assert {"yarn", "nanochat-2026", "rlab"} <= set(meta["tags"])
    # the recipe and the verdicts of this arm, from run.json and results.csv, with units and seeds
    assert "30 steps at 1,024 tokens per row, from `demo@500`; 2,170,880 tokens behind these weights" in card
    assert "matrix 0.005, embedding 0.05, unembedding 0.001" in card
    assert "1 seed, seed 42" in card and "2 rows per device, device batch x ranks rows per step" in card
    assert re.search(r"\| extension_bpb \(neg=better\) \| bits per byte .*\| rope \| [-+]\d", card)
    assert "| passkey_overall (pos=better) | accuracy (fraction of trials) |" in card
    # served length: the run's target (1024), not the checkpoint's 64; L0 stays in rope_parameters
    config = json.loads((out / "config.json").read_text())
    assert (
        config["max_position_embeddings"] == 1024
        and config["rope_parameters"]["original_max_position_embeddings"] == 16
    )
    for path in out.iterdir():  # no local paths anywhere, every file 0644 (safetensors writes 0600)
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path.name
        if path.suffix in (".md", ".json", ".py"):
            text = path.read_text()
            assert str(tmp_path) not in text and "/tmp/" not in text and "/work/" not in text, path.name
    assert all("trust_remote_code=True" in b for b in python_blocks(card) if "from_pretrained" in b)
    run_card(out, monkeypatch, capsys)


def python_blocks(card: str) -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", card, flags=re.S)
    assert blocks
    return blocks


def run_card(folder: Path, monkeypatch, capsys) -> None:
    """Execute the card's python blocks as written, from inside the folder; they print two continuations."""
    monkeypatch.chdir(folder)
    for block in python_blocks((folder / "README.md").read_text()):
        exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert printed.startswith("[") and printed.count("'") >= 4, printed


def test_card_without_an_experiment_says_what_is_missing(demo, tmp_path):
    base, _ = demo
    H.export_hf(base, "demo-yarn", tmp_path / "out", results_root=tmp_path / "empty")
    card = (tmp_path / "out" / "README.md").read_text()
    assert "license" not in front_matter(card) and "No verdicts in results.csv for this arm" in card
    assert "No run config recorded" in card


def test_export_all_writes_one_folder_per_arm_and_an_index(demo, tmp_path, monkeypatch, capsys):
    base, results = demo
    out = tmp_path / "all"
    args = [
        "export",
        "--all",
        "-e",
        "demo",
        "--base-dir",
        str(base),
        "--results-dir",
        str(results),
        "--out",
        str(out),
    ]
    done = run_main(*args, "--json")
    assert done.code == 0, done.text
    got = json.loads(done.out)
    assert sorted(e["tag"] for e in got["exports"]) == sorted(ARMS) and got["pushed"] is None
    assert all(e["roundtrip"]["generate_match"] for e in got["exports"])
    assert sorted(p.name for p in out.iterdir()) == sorted([*ARMS, "README.md"])
    index = (out / "README.md").read_text()
    assert "3 arms exported by rlab" in index and "| yarn | [demo-yarn/](demo-yarn/README.md) |" in index
    assert stat.S_IMODE((out / "README.md").stat().st_mode) == 0o644
    for (
        tag
    ) in ARMS:  # every card's code runs: transformers' own NanoChat and the shipped file, both generations
        run_card(out / tag, monkeypatch, capsys)
    monkeypatch.chdir(tmp_path)
    assert_clean_error(run_main(*args), "exists and is not empty")
    assert_clean_error(run_main("export", "--all", "--out", str(tmp_path / "x")), "give --experiment NAME")
    assert_clean_error(run_main("export", "--out", str(tmp_path / "x")), "Give --tag TAG, or --all")
    assert_clean_error(
        run_main(
            "export", "--all", "-e", "nope", "--results-dir", str(results), "--out", str(tmp_path / "x")
        ),
        "No arms of experiment 'nope'",
    )


def test_push_uploads_the_folder_and_offline_fails_in_one_line(demo, tmp_path, monkeypatch):
    import huggingface_hub  # noqa: PLC0415 - optional dependency (huggingface_hub)

    base, results = demo
    calls = []
    monkeypatch.setattr(
        huggingface_hub, "create_repo", lambda repo_id, **kw: calls.append(("create", repo_id, kw))
    )

    def upload_folder(**kw):
        calls.append(("upload", kw["repo_id"], kw))
        assert (Path(kw["folder_path"]) / "config.json").is_file()  # the finished, checked folder
        return type("Commit", (), {"commit_url": "https://huggingface.co/me/yarn/commit/1"})()

    monkeypatch.setattr(huggingface_hub, "upload_folder", upload_folder)
    args = [
        "export",
        "--tag",
        "demo-yarn",
        "--base-dir",
        str(base),
        "--results-dir",
        str(results),
        "--push",
        "me/yarn",
    ]
    done = run_main(*args, "--out", str(tmp_path / "out"), "--json")
    assert done.code == 0, done.text
    assert json.loads(done.out)["pushed"] == "https://huggingface.co/me/yarn/commit/1"
    assert [c[:2] for c in calls] == [("create", "me/yarn"), ("upload", "me/yarn")]
    assert calls[1][2]["folder_path"] == str(tmp_path / "out") and calls[1][2]["repo_type"] == "model"
    card = (tmp_path / "out" / "README.md").read_text()
    assert 'model_id = "me/yarn"' in card  # the card loads from the repo it is pushed to

    def offline(**kw):
        raise huggingface_hub.errors.OfflineModeIsEnabled(
            "Cannot reach https://huggingface.co: offline mode is enabled."
        )

    monkeypatch.setattr(huggingface_hub, "upload_folder", offline)
    failed = run_main(*args, "--out", str(tmp_path / "again"))
    assert_clean_error(failed, "Could not upload", f"hf upload me/yarn {tmp_path / 'again'} .", max_lines=1)
    assert (tmp_path / "again" / "model.safetensors").is_file()  # the export itself is kept


def test_export_all_push_names_each_arm_by_its_subfolder(demo, tmp_path, monkeypatch):

    base, results = demo
    export_experiment(
        base, "demo", tmp_path / "all", results_root=results, card=CardOptions(model_id="me/demo-arms")
    )
    card = (tmp_path / "all" / "demo-yarn" / "README.md").read_text()
    assert 'from_pretrained(model_id, subfolder="demo-yarn", trust_remote_code=True)' in card
    assert 'from_pretrained("me/demo-arms", subfolder="TAG"' in (tmp_path / "all" / "README.md").read_text()
