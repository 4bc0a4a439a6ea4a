"""Batch arithmetic, cadence validation, LR schedule and the worker's one-line errors."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from rlab.core.batch_plan import plan_batch
from rlab.core.schedule import lr_multiplier
from rlab.core.train import main
from rlab.errors import SpecError
from rlab.spec.train import LRSpec, TrainSpec
from tests.core.train_helpers import make_run_config, root_logging_kept

pytestmark = pytest.mark.usefixtures("one_thread")


def test_plan_batch_divides_into_grad_accum():
    spec = TrainSpec(seq_len=64, device_batch_size=4, total_batch_size=4 * 64 * 2 * 3)
    plan = plan_batch(spec, world_size=2)
    assert plan.grad_accum_steps == 3
    assert plan.tokens_per_step == 1536
    assert plan_batch(TrainSpec(seq_len=64, device_batch_size=4), world_size=3).grad_accum_steps == 1


def test_plan_batch_error_names_every_factor():
    spec = TrainSpec(seq_len=64, device_batch_size=4, total_batch_size=1000)
    with pytest.raises(SpecError) as err:
        plan_batch(spec, world_size=2)
    msg = err.value.message
    assert "train.total_batch_size=1000" in msg and "4 x 64 x 2 = 512" in msg
    assert "\n" not in msg
    assert "1024" in err.value.hint  # the nearest valid value above


def test_worker_prints_one_line_and_exits_1(train_base, tmp_path, capsys):
    cfg = make_run_config(train_base, tmp_path / "run", total_batch_size=1000)
    path = tmp_path / "run.json"
    path.write_text(cfg.model_dump_json())
    with root_logging_kept():
        assert main([str(path)]) == 1
    err_lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err_lines) == 1 and "total_batch_size=1000" in err_lines[0]
    failed = [r for r in map(json.loads, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())]
    assert failed[-1]["type"] == "failed" and "total_batch_size" in failed[-1]["error"]


@pytest.mark.parametrize("value", [0, -1])
def test_cadence_rejects_zero_and_negative(value):
    with pytest.raises(ValidationError):
        TrainSpec(eval_every=value)


@pytest.mark.parametrize("value", ["never", "off", None, False])
def test_cadence_disabled_spellings(value):
    assert TrainSpec(save_every=value).save_every is None


def test_schedule_warmup_constant_warmdown():
    lr = LRSpec(warmup_steps=4, warmdown_frac=0.25, final_lr_frac=0.0)
    mults = [lr_multiplier(i, 20, lr) for i in range(20)]
    assert mults[:4] == [0.25, 0.5, 0.75, 1.0]
    assert all(m == 1.0 for m in mults[4:15])
    assert mults[15:] == [1.0, 0.8, 0.6, 0.4, 0.2]  # the last 5 steps decay linearly towards 0
    floor = LRSpec(warmup_steps=0, warmdown_frac=0.5, final_lr_frac=0.5)
    assert lr_multiplier(9, 10, floor) == pytest.approx(0.5 + 0.5 * 0.2)


def test_schedule_never_exceeds_one_or_goes_negative():
    lr = LRSpec(warmup_steps=7, warmdown_frac=0.9, final_lr_frac=0.1)
    for total in (1, 5, 13):
        for i in range(total):
            assert 0 < lr_multiplier(i, total, lr) <= 1


def test_seq_len_warmup_runs_its_phases_in_order_then_seq_len():
    spec = TrainSpec(seq_len=64, seq_len_warmup=[{"seq_len": 16, "steps": 2}, {"seq_len": 32, "steps": 3}])
    assert [spec.seq_len_at(i) for i in range(7)] == [16, 16, 32, 32, 32, 64, 64]
    assert TrainSpec(seq_len=64).seq_len_at(0) == 64


@pytest.mark.parametrize("length", [24, 64, 128])
def test_seq_len_warmup_lengths_must_divide_seq_len_and_be_shorter(length):
    with pytest.raises(ValidationError, match="seq_len_warmup"):
        TrainSpec(seq_len=64, seq_len_warmup=[{"seq_len": length, "steps": 1}])
