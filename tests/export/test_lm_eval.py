"""lm-evaluation-harness on an export of each nanochat generation: HFLM sees the served length and runs a
loglikelihood and a generate_until request built here (no Hub datasets). Needs the `lm-eval` extra."""

from __future__ import annotations

import math

import pytest
import torch

from rlab.export import hf as H
from rlab.spec.rope import RopeSpec
from tests.core.tiny_checkpoints import random_model, write_checkpoint
from tests.export.test_hf_export import vocab

pytest.importorskip("lm_eval", reason='lm-evaluation-harness is not installed (pip install "rlab[lm-eval]")')
pytest.importorskip("accelerate", reason='lm-eval\'s HFLM needs accelerate (pip install "rlab[lm-eval]")')

torch.set_num_threads(1)


@pytest.mark.parametrize("arch", ["nanochat-2025", "nanochat-2026"])
def test_lm_eval_hflm_runs_loglikelihood_and_generate_until(base, tmp_path, arch):
    from lm_eval.api.instance import Instance  # noqa: PLC0415 - optional dependency (lm_eval)
    from lm_eval.models.huggingface import HFLM  # noqa: PLC0415 - optional dependency (lm_eval)

    # dynamic-ntk 8x over L0 16: meant to serve 128 tokens, twice the checkpoint's sequence_len
    rope = RopeSpec(variant="dynamic-ntk", factor=8.0, original_len=16)
    write_checkpoint(base, "t", random_model(arch, rope, vocab_size=vocab(base)))
    result = H.export_hf(base, "t", tmp_path / "out")
    assert result.max_position_embeddings == 128
    lm = HFLM(pretrained=str(tmp_path / "out"), trust_remote_code=True, device="cpu", batch_size=2)
    assert lm.max_length == 128
    long_context = " ".join(["the river crossed the old town"] * 14)  # ~90 tokens: past 64, within 128
    scores = lm.loglikelihood(
        [
            Instance("loglikelihood", {}, (long_context, " and the king"), 0),
            Instance("loglikelihood", {}, ("One two", " three"), 1),
        ]
    )
    assert len(scores) == 2 and all(math.isfinite(ll) and ll < 0 for ll, _ in scores)
    until = {"until": ["\n\n"], "max_gen_toks": 6, "do_sample": False}
    texts = lm.generate_until(
        [
            Instance("generate_until", {}, (long_context, until), 0),
            Instance("generate_until", {}, ("Hi", until), 1),
        ]
    )
    assert len(texts) == 2 and all(isinstance(t, str) for t in texts)
