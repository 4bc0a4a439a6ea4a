"""Bad input anywhere is one or two lines and a non-zero exit, never a traceback.

Strict spec types, unreadable or absurd spec files, bad endpoints, unwritable or full folders,
report flags that name nothing, case-insensitive variant names. Through the real entry point.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.harness import assert_clean_error, run_main
from tests.orchestrate.helpers import make_checkpoint

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "experiments" / "demo.yaml"


def spec_file(tmp_path: Path, text: str | bytes, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize(
    "yaml_text, fragment",
    [
        ("train: {seq_len: true}", "train.seq_len: expected a number, not a boolean (got True)"),
        ("train: {steps: false}", "train.steps: expected a number, not a boolean"),
        ("train: {eval_every: true}", "train.eval_every: expected a number, not a boolean"),
        ("eval: {passkey_depths: [0.5, true]}", "eval.passkey_depths: expected a number"),
        ("launch: {nnodes: yes}", "launch.nnodes: expected a number"),
        ("variants: {a: {variant: pi, factor: .nan}}", "variants.a.factor: Input should be a finite number"),
        (
            "variants: {a: {variant: pi, factor: .inf}}",
            "variants.a.factor: must be from 0 to 1,024 (got inf)",
        ),
        ("train: {lr: {matrix_lr: -.inf}}", "train.lr.matrix_lr: Input should be a finite number"),
        ("scale: .nan", "scale: Input should be a finite number"),
        ("launch: {rdzv_endpoint: '127.0.0.1:abc'}", "launch.rdzv_endpoint: port must be a number"),
        ("launch: {rdzv_endpoint: 'node01:99999'}", "launch.rdzv_endpoint:"),
        ("variants: {a: {variant: YaRM}}", "Did you mean 'yarn'?"),
    ],
)
def test_strict_spec_types(tmp_path, yaml_text, fragment):
    outcome = run_main("validate", str(spec_file(tmp_path, yaml_text)))
    assert_clean_error(outcome, fragment, max_lines=3)  # header, the problem, the hint


def test_what_stays_valid(tmp_path):
    """false still means "never" for a cadence; booleans where booleans belong; a case-insensitive variant."""
    text = (
        "base: {step: 10}\ntrain: {eval_every: false, compile: true}\nvariants: {a: {variant: YaRN, factor: 4}}\n"
        "launch: {rdzv_endpoint: 'node-01.cluster:29500'}\n"
    )
    outcome = run_main("validate", "--spec-only", str(spec_file(tmp_path, text)))
    assert outcome.code == 0, outcome.text


def test_non_utf8_and_unreadable_specs(tmp_path):
    outcome = run_main("validate", str(spec_file(tmp_path, b"name: caf\xe9\n")))
    assert_clean_error(outcome, "not UTF-8 text", "save it as UTF-8")
    folder = tmp_path / "adir.yaml"
    folder.mkdir()
    outcome = run_main("continue", "--spec", str(folder), "--dry-run")
    assert outcome.exception is None and outcome.code in (1, 2) and "Traceback" not in outcome.text


def test_deeply_nested_yaml_is_one_short_error(tmp_path):
    for text in (
        "a: " + "[" * 20000 + "]" * 20000,
        "a:\n" + "".join(" " * i + "- \n" for i in range(1, 3000)),
    ):
        outcome = run_main("validate", str(spec_file(tmp_path, text)))
        assert outcome.exception is None, repr(outcome.exception)
        assert outcome.code == 1 and "Traceback" not in outcome.text
        assert len(outcome.err) < 1000, outcome.err[:300]


def test_bad_rdzv_endpoint_flag_fails_the_dry_run(tmp_path):
    outcome = run_main(
        "continue", "--spec", str(DEMO), "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:abc", "--dry-run"
    )
    assert_clean_error(outcome, "launch.rdzv_endpoint: port must be a number", max_lines=3)


def test_variant_names_are_case_insensitive(tmp_path):

    make_checkpoint(tmp_path / "base", "d20", steps=(10,))  # $RLAB_BASE_DIR (tests/conftest.py)
    outcome = run_main("continue", "--from-step", "10", "--variants", "YaRN,PI", "--dry-run")
    assert outcome.code == 0, outcome.text
    assert "d20-yarn" in outcome.out and "d20-pi" in outcome.out
    outcome = run_main("continue", "--from-step", "10", "--variants", "YARM", "--dry-run")
    assert_clean_error(outcome, "Unknown variant 'YARM'. Did you mean 'yarn'?", max_lines=1)


def test_usage_errors_are_two_lines():
    assert_clean_error(
        run_main("report", "--format", "pdf"),
        "'pdf' is not one of 'md', 'html', 'csv'",
        "See: rlab report --help",
        code=2,
    )
    assert_clean_error(run_main("eval", "--tag", "x", "--step", "-1"), "--step", code=2)
    assert_clean_error(run_main("continue", "--bogus"), "No such option: --bogus", code=2)
    assert_clean_error(
        run_main("continue", "--from-step", "10", "--launcher", "k8s"),
        "'k8s' is not one of 'local', 'slurm'",
        code=2,
    )
    assert_clean_error(run_main("continue", "--nnodes", "0"), "--nnodes", "must be >= 1 (got 0)", code=2)


# ------------------------------------------------------------------ unwritable and full folders


def _mount_tmpfs(where: Path, options: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True
        ).returncode
        == 0
    )


@pytest.fixture
def small_disk(tmp_path):
    """A real 16 KiB filesystem (tmpfs; needs root, else the test skips)."""
    where = tmp_path / "small"
    if not _mount_tmpfs(where, "size=16k"):
        pytest.skip("mounting a tmpfs needs root")
    yield where
    subprocess.run(["umount", str(where)], check=False)


def test_read_only_folder_names_the_path(tmp_path):
    where = tmp_path / "ro"
    mounted = _mount_tmpfs(where, "size=64k,ro")
    if not mounted:
        where.chmod(0o555)
    try:
        outcome = run_main("schema", "--output", str(where / "sub" / "schema.json"))
        assert_clean_error(outcome, f"Cannot write {where / 'sub'}", "Choose a writable folder")
    finally:
        if mounted:
            subprocess.run(["umount", str(where)], check=False)
        else:
            where.chmod(0o755)


def test_full_disk_names_the_path_and_the_space(small_disk):
    outcome = run_main("schema", "--output", str(small_disk / "schema.json"))
    assert_clean_error(
        outcome, f"No space left writing {small_disk / 'schema.json'}", "to write", "free there"
    )
    assert list(small_disk.iterdir()) == []  # no half-written file, no temp file left behind


@pytest.mark.slow  # the report itself takes ~15 s
def test_full_disk_during_a_report_leaves_complete_files(small_disk):
    fixture = REPO / "tests" / "report" / "fixtures" / "fx"
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_disk)], check=True)
    shutil.copytree(fixture, small_disk / "fx")
    used_kib = shutil.disk_usage(small_disk).used // 1024
    subprocess.run(
        ["mount", "-o", f"remount,size={used_kib + 24}k", str(small_disk)], check=True
    )  # room for ~1 file
    outcome = run_main("report", "--results-dir", str(small_disk), "-e", "fx", "--bootstrap", "100", "-q")
    assert_clean_error(outcome, "No space left writing", str(small_disk / "fx"))
    assert not [p for p in (small_disk / "fx").rglob(".*.tmp")]  # temp files removed
