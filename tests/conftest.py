"""Shared fixtures: tiny configs and hygiene that every test gets."""

from __future__ import annotations

import importlib.util
import json as _json
import os
import random
import signal
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.distributed as dist

from rlab.data.prepare import PrepareOptions, prepare_data

REPO_ROOT = Path(__file__).resolve().parents[1]


def load_probe(name: str) -> ModuleType:
    """`experiments/probes/<name>.py` as a module: the probes are scripts, not a package."""
    spec = importlib.util.spec_from_file_location(
        f"{name}_probe", REPO_ROOT / "experiments" / "probes" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EVAL_BUNDLE_DIR = REPO_ROOT / "tests" / "fixtures" / "eval_bundle"
"""A subset of the DCLM CORE bundle kept in the repository (every label, a few rows per task; see its
SOURCES.md): what the CORE tests read."""

# Test data that cannot live in the repository, found through the environment (`.ci/run` points these at
# the project's ../shared); the tests that need it skip with a one-line reason where it is absent.
FULL_EVAL_BUNDLE_ENV = "RLAB_EVAL_BUNDLE"
"""The whole CORE bundle (`rlab bundle download` fetches it). rlab itself reads the same variable, so the
autouse fixture below hides it from the code under test."""
NANOCHAT_REFERENCE_ENV = "RLAB_NANOCHAT_REFERENCE"
"""Base dirs written by nanochat itself (d314e96/ and head/: its tokenizers, shards, checkpoints and the
numbers it measured on them)."""


def _env_dir(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


FULL_EVAL_BUNDLE_DIR = _env_dir(FULL_EVAL_BUNDLE_ENV)
NANOCHAT_REFERENCE_DIR = _env_dir(NANOCHAT_REFERENCE_ENV)


def full_eval_bundle() -> Path:
    """The whole CORE bundle, or a skip naming the variable that gives it."""
    if FULL_EVAL_BUNDLE_DIR is None or not (FULL_EVAL_BUNDLE_DIR / "core.yaml").is_file():
        pytest.skip(f"needs the whole CORE bundle: set ${FULL_EVAL_BUNDLE_ENV} (`rlab bundle download`)")
    return FULL_EVAL_BUNDLE_DIR


NANOCHAT_REFERENCE_SKIP = f"needs checkpoints written by nanochat: set ${NANOCHAT_REFERENCE_ENV}"


def nanochat_reference_path(version: str) -> Path:
    """`$RLAB_NANOCHAT_REFERENCE/<version>`; with the variable unset, a relative path named after it that does
    not exist, so a module can build its paths at import and skip on them (`needs_nanochat_reference`)."""
    return (NANOCHAT_REFERENCE_DIR or Path(f"${NANOCHAT_REFERENCE_ENV}-is-unset")) / version


def needs_nanochat_reference(path: Path) -> pytest.MarkDecorator:
    """Skip (with the variable to set) unless `path`, from `nanochat_reference_path`, is there."""
    return pytest.mark.skipif(not path.exists(), reason=NANOCHAT_REFERENCE_SKIP)


# Keep tests from touching a user's real nanochat dir or results.
os.environ.setdefault("WANDB_MODE", "disabled")


@pytest.fixture(autouse=True)
def _isolate_env(monkeypatch, tmp_path):
    """Each test gets its own base dir, results root and cache (memory plans), no CORE bundle from the environment, and no debug
    tracebacks."""
    monkeypatch.setenv("RLAB_BASE_DIR", str(tmp_path / "base"))
    monkeypatch.setenv("RLAB_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("RLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NANOCHAT_BASE_DIR", raising=False)
    monkeypatch.delenv(FULL_EVAL_BUNDLE_ENV, raising=False)
    monkeypatch.delenv("RLAB_DEBUG", raising=False)


@pytest.fixture(autouse=True)
def _restore_torch_state():
    """Restore the default dtype and tear down any process group a test left behind."""
    try:
        import torch  # noqa: PLC0415 - optional
    except ImportError:  # pragma: no cover
        yield
        return
    dtype = torch.get_default_dtype()
    yield
    torch.set_default_dtype(dtype)

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


# ======================================================================================
# Data fixtures: a tiny base dir and the text generator behind it.
#
# `tiny_base_dir` (session-scoped): a complete, tiny base dir in nanochat's layout, built
# once per test session in ~1-2 s by the real `rlab.data.prepare.prepare_data` from a user
# corpus folder of deterministic English-like text (no downloads):
#     <base>/base_data/shard_00000.parquet ... (3 train shards + the val shard, last; 3 row groups each)
#     <base>/tokenizer/tokenizer.pkl, token_bytes.pt   (vocab 512, nanochat's specials incl. <|bos|>)
#     <base>/long_docs/long_docs.parquet                (3 docs of >= 12k chars, kept out of train/val)
#     <base>/rlab_corpus.json                           (manifest, with token/char counts)
# Treat it as READ-ONLY (it is shared by all tests); copy it (shutil.copytree) to modify.
# `make_english_docs(n, seed)` is the generator, exposed for tests that need their own text.
# ======================================================================================


def default_sigint() -> None:
    """preexec_fn for a child a test will Ctrl-C: a shell's background job (`cmd &` without job control)
    starts with SIGINT ignored, and an ignored signal stays ignored across exec (Python then never installs
    its KeyboardInterrupt handler), so the test would hang instead of testing the interrupt."""

    signal.signal(signal.SIGINT, signal.SIG_DFL)


TINY_VOCAB_SIZE = 512

_WORDS = {
    "adj": "old quiet bright narrow ancient silver heavy gentle distant green broken royal honest simple "
    "strange early final golden public certain".split(),
    "noun": "king river city letter garden soldier nation winter market harbour council kingdom forest "
    "merchant bridge question people island evening treaty law congress tower ship friend".split(),
    "verb": "found watched crossed defended remembered carried answered followed opened built praised "
    "promised measured guarded visited".split(),
    "prep": "across beyond beneath within near against toward behind".split(),
    "adv": "slowly plainly often never always gladly surely nearly".split(),
}


def make_english_docs(
    n_docs: int, seed: int = 0, min_sentences: int = 15, max_sentences: int = 40
) -> list[str]:
    """`n_docs` deterministic English-like documents (paragraphs of simple sentences, digits, punctuation)."""

    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        sentences = []
        for _ in range(rng.randint(min_sentences, max_sentences)):
            w = {k: rng.choice(v) for k, v in _WORDS.items()}
            n2 = rng.choice(_WORDS["noun"])
            form = rng.randrange(4)
            if form == 0:
                s = f"The {w['adj']} {w['noun']} {w['verb']} the {n2} {w['prep']} the river."
            elif form == 1:
                s = f"In {rng.randint(1600, 2025)}, a {w['noun']} {w['adv']} {w['verb']} {rng.randint(2, 99)} {n2}s."
            elif form == 2:
                s = f'"Who {w["verb"]} my {w["noun"]}?" asked the {w["adj"]} {n2}; nobody {w["adv"]} answered.'
            else:
                s = f"Our {w['noun']}, {w['adj']} and {rng.choice(_WORDS['adj'])}, {w['verb']} {w['prep']} the {n2}."
            sentences.append(s)
        paragraphs = [" ".join(sentences[i : i + 5]) for i in range(0, len(sentences), 5)]
        docs.append("\n\n".join(paragraphs))
    return docs


@pytest.fixture(scope="session")
def tiny_base_dir(tmp_path_factory) -> Path:
    """A complete tiny base dir built by the real prepare pipeline (see the section comment above)."""
    return build_tiny_base(tmp_path_factory.mktemp("tiny_base"))


def build_tiny_base(root: Path) -> Path:
    """The tiny base dir, `root/base` (its corpus in `root/corpus`); also what experiments/probes/fault_drill.py
    builds its base from."""

    corpus = root / "corpus"
    corpus.mkdir()
    short = make_english_docs(150, seed=1)
    for i, text in enumerate(short[:100]):  # .txt: one document per file
        (corpus / f"doc_{i:03d}.txt").write_text(text, encoding="utf-8")
    with open(corpus / "more.jsonl", "w", encoding="utf-8") as f:  # .jsonl: one document per line
        for text in short[100:]:
            f.write(_json.dumps({"text": text}) + "\n")
    for i, text in enumerate(make_english_docs(3, seed=2, min_sentences=260, max_sentences=280)):
        (corpus / f"long_{i}.txt").write_text(text, encoding="utf-8")
    base = root / "base"
    options = PrepareOptions(
        seed=0, val_fraction=0.1, long_min_chars=12_000, long_per_era=3, shard_chars=60_000, row_groups=3
    )
    prepare_data(base, corpus=[corpus], vocab_size=TINY_VOCAB_SIZE, options=options)
    return base


@pytest.fixture
def train_base(tiny_base_dir: Path, tmp_path: Path) -> Path:
    """A base dir whose data and tokenizer are the shared (read-only) tiny ones, with its own checkpoints."""
    base = tmp_path / "train_base"
    base.mkdir()
    for name in ("base_data", "tokenizer"):
        (base / name).symlink_to(tiny_base_dir / name, target_is_directory=True)
    return base


@pytest.fixture
def one_thread():
    """Two cores are shared by everyone: keep torch to one intra-op thread (the training tests use it)."""

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
