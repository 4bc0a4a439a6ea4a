"""Bounded fuzz of specs and CLI arguments (hypothesis): never a traceback, never exit 0 on invalid input.

Spec fuzz: a valid spec with one to three fields replaced by arbitrary YAML values (booleans, huge or
negative numbers, nan/inf, strings, lists, maps), plus arbitrary text and bytes as a whole file, run
through `rlab validate` and `rlab continue --dry-run`. CLI fuzz: each read-only/dry-run command with
random flags and values. Every run goes through the real entry point in this process (tests.cli.harness).
The example counts are fixed and derandomized, so the suite stays fast and reproducible.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlab.spec.loading import load_spec
from tests.cli.harness import Outcome, run_main

EXAMPLES = int(os.environ.get("RLAB_FUZZ_EXAMPLES", "60"))  # e.g. 2000 for a long local hunt
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

VALID = {
    "name": "fz",
    "base": {"tag": "d20", "step": 10},
    "variants": {"pi": {"variant": "pi", "factor": 4}},
    "train": {"seq_len": 64, "steps": 2},
    "launch": {"nproc_per_node": 1},
    "tracking": {"wandb": "disabled"},
}

PATHS = [
    "name",
    "results_dir",
    "scale",
    "base",
    "base.tag",
    "base.step",
    "base.base_dir",
    "variants",
    "variants.pi",
    "variants.pi.variant",
    "variants.pi.factor",
    "variants.pi.original_len",
    "variants.pi.beta_fast",
    "variants.pi.attention_factor",
    "variants.x y",
    "train",
    "train.seq_len",
    "train.steps",
    "train.device_batch_size",
    "train.total_batch_size",
    "train.eval_every",
    "train.save_every",
    "train.keep_last",
    "train.seed",
    "train.compile",
    "train.dtype",
    "train.grad_clip",
    "train.lr",
    "train.lr.matrix_lr",
    "train.lr.warmdown_frac",
    "train.lr.warmup_steps",
    "eval",
    "eval.evals",
    "eval.lengths",
    "eval.extra_lengths",
    "eval.max_per_task",
    "eval.passkey_depths",
    "eval.core_tasks",
    "launch",
    "launch.launcher",
    "launch.nproc_per_node",
    "launch.nnodes",
    "launch.node_rank",
    "launch.rdzv_endpoint",
    "launch.rdzv_port",
    "launch.gpus_per_variant",
    "launch.env",
    "launch.slurm.time",
    "launch.slurm.extra_args",
    "tracking.wandb",
    "pretrain",
    "pretrain.model.n_head",
    "pretrain.train.steps",
    "typo",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0]),
    st.text(max_size=12),
    st.sampled_from(["", "never", "yarn", "YaRN", "127.0.0.1:abc", "host:0", "1e3", "nan"]),
)
values = st.one_of(
    scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=6), scalars, max_size=2)
)


def _set(raw: dict, dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = raw
    for key in parents:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[leaf] = value


def _get(raw: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        raw = raw.get(key) if isinstance(raw, dict) else None
    return raw


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    return True


def assert_no_traceback(outcome: Outcome) -> None:
    assert outcome.exception is None, f"traceback: {outcome.exception!r}"
    assert "Traceback" not in outcome.text, outcome.text[-2000:]
    assert outcome.code in (0, 1, 2), (outcome.code, outcome.text[-500:])
    if outcome.code != 0:
        assert "Error:" in outcome.err, outcome.err[:500]  # after any warnings
        error = outcome.err[outcome.err.index("Error:") :]
        assert error.startswith("Error:") and len(error) < 4000, error[:500]  # a message, not a dump


def _write(folder: Path, raw: dict) -> Path:
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    return path


@FUZZ
@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), values), min_size=1, max_size=3))
def test_fuzzed_specs(changes):
    raw: dict = yaml.safe_load(yaml.safe_dump(VALID))
    for path, value in changes:
        _set(raw, path, value)
    with tempfile.TemporaryDirectory() as tmp:
        spec = _write(Path(tmp), raw)
        outcome = run_main("validate", "--spec-only", str(spec))
        assert_no_traceback(outcome)
        if outcome.code == 0:  # accepted: then it holds what was written, with nothing coerced
            dumped = load_spec(spec, resolve=False).model_dump(mode="python")
            assert _finite(dumped), dumped
            for path, _ in changes:
                value, node = (
                    _get(raw, path),
                    _get(dumped, path),
                )  # what the file finally says, what was loaded
                if isinstance(value, bool) and not path.endswith(("compile", "eval_every", "save_every")):
                    assert node is None or isinstance(node, bool), (path, value, node)
        dry = run_main(
            "continue",
            "--spec",
            str(spec),
            "--dry-run",
            "--base-dir",
            f"{tmp}/base",
            "--results-dir",
            f"{tmp}/results",
            cwd=Path(tmp),
        )
        assert_no_traceback(dry)
        if outcome.code != 0 and not any(
            p.startswith(("results_dir", "base")) for p, _ in changes
        ):  # flags win
            assert dry.code != 0, "continue --dry-run accepted a spec that validate rejects"


@FUZZ
@given(
    text=st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))),
    raw_bytes=st.binary(max_size=64),
)
def test_fuzzed_spec_files(text, raw_bytes):
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in (("a.yaml", text.encode("utf-8", "surrogatepass")), ("b.yaml", raw_bytes)):
            path = Path(tmp) / name
            path.write_bytes(data)
            assert_no_traceback(run_main("validate", str(path)))


COMMANDS = {
    ("continue", "--dry-run"): [
        "--spec",
        "--from-step",
        "--variants",
        "--base-tag",
        "--steps",
        "--seq-len",
        "--nproc",
        "--max-restarts",
        "--gpus-per-variant",
        "--nnodes",
        "--node-rank",
        "--rdzv-endpoint",
        "--launcher",
        "-e",
    ],
    ("eval", "--dry-run"): [
        "--tag",
        "--spec",
        "--experiment",
        "--base-tag",
        "--step",
        "--lengths",
        "--max-per-task",
        "--tasks",
        "--nproc",
    ],
    ("report",): ["--experiment", "--baseline", "--format", "--seed", "--bootstrap"],
    ("ls",): ["--base-dir", "--results-dir"],
    ("validate",): ["--spec-only"],
    ("rope", "inspect"): [
        "--variant",
        "--head-dim",
        "--base",
        "--scale",
        "--original-len",
        "--beta-fast",
        "--beta-slow",
    ],
    ("status",): ["--results-dir"],
}
flag_values = st.one_of(
    st.text(max_size=10),
    st.integers(min_value=-(2**66), max_value=2**66).map(str),
    st.sampled_from(["nan", "inf", "-1", "0", "true", "YaRN", "pi,,ntk", ",", "1e9", "🙂", "-"]),
)


@FUZZ
@given(command=st.sampled_from(sorted(COMMANDS)), data=st.data())
def test_fuzzed_cli_arguments(command, data):
    flags = COMMANDS[command]
    argv = list(command)
    for _ in range(data.draw(st.integers(0, 3))):
        if flags and data.draw(st.booleans()):
            argv.append(data.draw(st.sampled_from(flags)))
        argv.append(data.draw(flag_values))
    with tempfile.TemporaryDirectory() as tmp:
        argv += ["--base-dir", f"{tmp}/base"] if command[0] in ("continue", "eval", "ls") else []
        argv += (
            ["--results-dir", f"{tmp}/results"] if command[0] in ("continue", "eval", "report", "ls") else []
        )
        assert_no_traceback(run_main(*argv, cwd=Path(tmp)))
