"""Fixtures for the eval tests: a tiny BPE tokenizer trained on bundle text, tiny random GPTs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from rlab.core.gpt import GPT, GPTConfig
from rlab.core.tokenizer import Tokenizer
from rlab.evals.core.bundle import load_bundle
from tests.conftest import EVAL_BUNDLE_DIR


def bundle_texts(per_file: int = 40) -> list[str]:
    texts: list[str] = []
    for path in sorted((EVAL_BUNDLE_DIR / "eval_data").rglob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i >= per_file:
                    break
                texts.extend(str(v) for v in json.loads(line).values())
    return texts


@pytest.fixture(scope="session")
def tokenizer():
    """A real byte-level BPE (rlab's Tokenizer) with 512 tokens, trained on bundle rows."""

    return Tokenizer.train(bundle_texts(), vocab_size=512)


EVAL_GPT: dict[str, Any] = dict(n_embd=32, n_layer=2, n_head=2, n_kv_head=2)
"""`random_gpt`'s shape unless a test overrides it (nanochat-2025, GPTConfig's default architecture)."""


def random_gpt(vocab_size: int, sequence_len: int = 64, seed: int = 0, rope=None, **shape: Any):
    """A small GPT (`EVAL_GPT`, or `shape` over it) whose outputs depend on the input (init_weights zeroes the
    output layers, which would make every prediction uniform, so those are drawn at random here)."""

    torch.manual_seed(seed)
    cfg = GPTConfig(vocab_size=vocab_size, sequence_len=sequence_len, **{**EVAL_GPT, **shape})
    model = GPT(cfg, rope=rope)
    model.init_weights()
    with torch.no_grad():
        for block in model.transformer.h:
            block.attn.c_proj.weight.normal_(0.0, 0.3)
            block.mlp.c_proj.weight.normal_(0.0, 0.3)
        model.lm_head.weight.normal_(0.0, 0.5)
    return model.eval()


@pytest.fixture
def tiny_gpt(tokenizer):

    torch.set_num_threads(1)
    return random_gpt(tokenizer.vocab_size)


@pytest.fixture(scope="session")
def bundle():

    return load_bundle(EVAL_BUNDLE_DIR)


@pytest.fixture
def bundle_copy(tmp_path) -> Path:
    """A writable copy of the bundle's config with three small tasks (for corruption tests)."""

    dst = tmp_path / "bundle"
    (dst / "eval_data").mkdir(parents=True)
    shutil.copy(EVAL_BUNDLE_DIR / "eval_meta_data.csv", dst / "eval_meta_data.csv")
    (dst / "core.yaml").write_text(
        "icl_tasks:\n"
        "- {label: copa, dataset_uri: commonsense_reasoning/copa.jsonl, num_fewshot: [0], icl_task_type: multiple_choice}\n"
        "- {label: winograd, dataset_uri: language_understanding/winograd_wsc.jsonl, num_fewshot: [0], icl_task_type: schema}\n"
        "- {label: squad, dataset_uri: reading_comprehension/squad.jsonl, num_fewshot: [10], icl_task_type: language_modeling}\n"
    )
    for uri in ("commonsense_reasoning/copa.jsonl", "language_understanding/winograd_wsc.jsonl"):
        (dst / "eval_data" / uri).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(EVAL_BUNDLE_DIR / "eval_data" / uri, dst / "eval_data" / uri)
    return dst
