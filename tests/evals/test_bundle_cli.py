"""`rlab bundle check` on the fixture bundle (and the whole one where given), and installing a bundle zip (no network here)."""

from __future__ import annotations

import zipfile

import pytest
from typer.testing import CliRunner

from rlab.cli.app import app
from rlab.errors import EvalError
from rlab.evals.core.bundle_download import install_from_zip
from tests.conftest import EVAL_BUNDLE_DIR, full_eval_bundle


def test_check_reports_present_missing_and_modified():
    result = CliRunner().invoke(app, ["bundle", "check", str(EVAL_BUNDLE_DIR)])
    assert result.exit_code == 0, result.output
    assert "2 ok" in result.output and "2 missing" in result.output and "17 modified" in result.output
    assert "squad" in result.output and "coqa" in result.output


def test_check_the_whole_bundle():
    result = CliRunner().invoke(app, ["bundle", "check", str(full_eval_bundle())])
    assert result.exit_code == 0, result.output
    assert "18 ok" in result.output and "2 missing" in result.output and "1 modified" in result.output


def _zip_bundle(src, dest):
    with zipfile.ZipFile(dest, "w") as zf:
        for p in src.rglob("*"):
            if p.is_file():
                zf.write(p, "eval_bundle/" + str(p.relative_to(src)))
    return dest


def test_install_from_zip_checks_and_places_bundle(bundle_copy, tmp_path):
    zpath = _zip_bundle(bundle_copy, tmp_path / "eval_bundle.zip")
    target = tmp_path / "base" / "eval_bundle"
    install_from_zip(zpath, target)
    assert (target / "core.yaml").is_file() and (
        target / "eval_data" / "commonsense_reasoning" / "copa.jsonl"
    ).is_file()
    with pytest.raises(EvalError, match="already exists"):
        install_from_zip(zpath, target)
    result = CliRunner().invoke(app, ["bundle", "check", "--base-dir", str(tmp_path / "base")])
    assert result.exit_code == 0, result.output
    assert "1 ok" in result.output and "1 modified" in result.output and "1 missing" in result.output


def test_install_refuses_a_corrupt_bundle(bundle_copy, tmp_path):
    copa = bundle_copy / "eval_data" / "commonsense_reasoning" / "copa.jsonl"
    copa.write_text(copa.read_text() + "{not json\n")
    zpath = _zip_bundle(bundle_copy, tmp_path / "bad.zip")
    with pytest.raises(EvalError, match=r"copa\.jsonl:101"):
        install_from_zip(zpath, tmp_path / "base" / "eval_bundle")
    assert not (tmp_path / "base" / "eval_bundle").exists()
