"""What orchestration and CLI tests run on. Checkpoints in nanochat's layout: a real tiny model file (so the
preflight, which opens what a run will read, finds a loadable checkpoint), random-ish optimizer shards of a
chosen size, and the tokenizer and shards a run reads, built once per test process by the real prepare
pipeline. Specs, a stand-in launcher (a shell script set as launch.torchrun), and a base really pretrained by
`rlab pretrain`."""

from __future__ import annotations

import atexit
import functools
import io
import json
import shutil
import tempfile
from pathlib import Path

import torch

from rlab.core.gpt import GPT, GPTConfig
from rlab.data.prepare import PrepareOptions, prepare_data
from rlab.paths import BaseLayout, checkpoint_steps, meta_file, model_file, optim_file
from rlab.spec.experiment import ExperimentSpec
from rlab.spec.loading import load_spec
from tests.cli.harness import REPO, run_process
from tests.conftest import make_english_docs

EXPERIMENTS = REPO / "experiments"

MODEL_CONFIG = {
    "sequence_len": 256,
    "vocab_size": 512,
    "n_layer": 2,
    "n_head": 2,
    "n_kv_head": 2,
    "n_embd": 32,
}


@functools.cache
def _model_bytes() -> bytes:
    """A nanochat-2025 state dict of MODEL_CONFIG's shape, initialised (finite), as torch.save writes it."""

    torch.manual_seed(0)
    model = GPT(GPTConfig(**MODEL_CONFIG))
    model.init_weights()
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


@functools.cache
def _inputs() -> Path:
    """A tokenizer (vocab <= 512) and train/val shards, from `rlab.data.prepare` on generated text."""

    root = Path(tempfile.mkdtemp(prefix="rlab-inputs-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    corpus = root / "corpus"
    corpus.mkdir()
    for i, text in enumerate(make_english_docs(40, seed=3)):
        (corpus / f"doc_{i:03d}.txt").write_text(text, encoding="utf-8")
    options = PrepareOptions(seed=0, val_fraction=0.2, long_min_chars=10**9, shard_chars=40_000, row_groups=2)
    prepare_data(root / "base", corpus=[corpus], vocab_size=MODEL_CONFIG["vocab_size"], options=options)
    return root / "base"


def add_inputs(base_dir: Path) -> None:
    """The tokenizer and shards a run reads, copied into `base_dir` (where missing)."""
    layout, source = BaseLayout(base_dir), BaseLayout(_inputs())
    for src, dst in ((source.tokenizer_dir, layout.tokenizer_dir), (source.data_dir, layout.data_dir)):
        if not dst.exists():
            shutil.copytree(src, dst)


def make_checkpoint(
    base_dir: Path,
    tag: str,
    steps=(10,),
    ranks: int = 2,
    size: int = 4096,
    inputs: bool = True,
    model: bool = True,
) -> Path:
    """A checkpoint folder per step: a real tiny model file (`model=False`: `size` random bytes, a stand-in
    for a model too big to make, e.g. d20's), `ranks` optimizer shards of `size` bytes each, a meta JSON;
    with `inputs`, the base dir also gets a tokenizer and shards."""
    ckpt = BaseLayout(base_dir).checkpoint_dir(tag)
    ckpt.mkdir(parents=True, exist_ok=True)
    for step in steps:
        stand_in = bytes((step + i) % 251 for i in range(size))
        model_file(ckpt, step).write_bytes(_model_bytes() if model else stand_in)
        for rank in range(ranks):
            optim_file(ckpt, step, rank).write_bytes(bytes((rank + step + i) % 13 for i in range(size)))
        meta_file(ckpt, step).write_text(json.dumps({"step": step, "model_config": MODEL_CONFIG}))
    if inputs:
        add_inputs(base_dir)
    return ckpt


def snapshot(folder: Path) -> dict[str, tuple[bytes, float]]:
    """Content and mtime of every file in a folder (to prove it was not touched)."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime) for p in sorted(folder.iterdir())}


def write_spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def launcher_spec(tmp_path: Path, name: str, script: str, settings: str = "") -> Path:
    """A spec named `name` (plus YAML lines `settings`) whose torchrun is the shell `script` (a stand-in launcher
    written beside it)."""
    launcher = tmp_path / f"{name}-torchrun"
    launcher.write_text(f"#!/bin/sh\n{script}")
    launcher.chmod(0o755)
    return write_spec(tmp_path, f"name: {name}\n{settings}launch: {{torchrun: {launcher}}}\n")


def d20_continue_spec(tmp_path: Path, nproc: int) -> ExperimentSpec:
    """The spec of continuing a tiny d20 base from step 10 with pi and yarn on `nproc` ranks."""
    make_checkpoint(tmp_path / "base", "d20", steps=(10,))  # n_layer 2, n_embd 32, vocab 512, L0 256
    return load_spec(
        None,
        base_dir=tmp_path / "base",
        results_dir=tmp_path / "res",
        from_step=10,
        variants="pi,yarn",
        nproc=nproc,
    )


def continue_from(step: int, variants: str) -> list[str]:
    """`rlab continue`'s start flags: the base step and the variants."""
    return ["--from-step", str(step), "--variants", variants]


def spec_args(spec: Path | str, base_dir: Path | str, results: Path | str) -> list[str]:
    """The flags that point a command at a spec, a base dir and a results dir."""
    return ["--spec", str(spec), "--base-dir", str(base_dir), "--results-dir", str(results)]


def fake_torchrun(tmp_path: Path, fail_on: str | None = None) -> Path:
    """A stand-in launcher: records its argv; exits 1 when its run.json path mentions `fail_on`."""
    script = tmp_path / "fake-torchrun"
    fail = (
        f'case "$*" in *{fail_on}*) echo "worker crashed: CUDA error"; echo "error: Refusing to save step 3: '
        f'non-finite parameters"; echo "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: '
        f'boilerplate"; exit 1;; esac\n'
        if fail_on
        else ""
    )
    script.write_text(f'#!/bin/sh\necho "launched $*"\n{fail}exit 0\n')
    script.chmod(0o755)
    return script


def d20_base(root: Path, seq_len: int = 2048, step: int = 21400) -> Path:
    """A base dir whose d20 checkpoint at `step` has a nanochat meta (sequence_len, loader position)."""
    make_checkpoint(root, "d20", steps=(step,), size=64, inputs=False, model=False)
    meta = {
        "step": step,
        "model_config": {
            "sequence_len": seq_len,
            "vocab_size": 65536,
            "n_layer": 20,
            "n_head": 10,
            "n_kv_head": 10,
            "n_embd": 1280,
        },
        "dataloader_state_dict": {"pq_idx": 3, "rg_idx": 17},
    }
    meta_file(BaseLayout(root).checkpoint_dir("d20"), step).write_text(json.dumps(meta))
    return root


def pretrained_smoke_base(tiny_base_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the tiny base dir with the smoke base model trained into tag `smoke` (4 steps)."""
    base = tmp_path / "base"
    shutil.copytree(tiny_base_dir, base)
    results = tmp_path / "results"
    result = run_process(
        "pretrain",
        *spec_args(EXPERIMENTS / "smoke.yaml", base, results),
        "--nproc",
        "1",
        timeout=300,
    )
    assert result.code == 0, result.out + result.err
    assert checkpoint_steps(BaseLayout(base).checkpoint_dir("smoke")) == [4]
    return base, results
