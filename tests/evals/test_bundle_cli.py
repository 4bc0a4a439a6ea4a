"""`rlab bundle check` on the fixture bundle (and the whole one where given), and installing a bundle zip (no network here)."""

from __future__ import annotations

import zipfile

import pytest

from rlab.errors import EvalError
from rlab.evals.core.bundle_download import install_from_zip
from tests.cli.harness import run_main
from tests.conftest import EVAL_BUNDLE_DIR, full_eval_bundle


def test_check_reports_present_missing_and_modified():
    result = run_main("bundle", "check", str(EVAL_BUNDLE_DIR))
    assert result.code == 0, result.text
    assert "2 ok" in result.out and "2 missing" in result.out and "17 modified" in result.out
    assert "squad" in result.out and "coqa" in result.out


def test_check_the_whole_bundle():
    result = run_main("bundle", "check", str(full_eval_bundle()))
    assert result.code == 0, result.text
    assert "18 ok" in result.out and "2 missing" in result.out and "1 modified" in result.out


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
    result = run_main("bundle", "check", "--base-dir", str(tmp_path / "base"))
    assert result.code == 0, result.text
    assert "1 ok" in result.out and "1 modified" in result.out and "1 missing" in result.out


def test_install_refuses_a_corrupt_bundle(bundle_copy, tmp_path):
    copa = bundle_copy / "eval_data" / "commonsense_reasoning" / "copa.jsonl"
    copa.write_text(copa.read_text() + "{not json\n")
    zpath = _zip_bundle(bundle_copy, tmp_path / "bad.zip")
    with pytest.raises(EvalError, match=r"copa\.jsonl:101"):
        install_from_zip(zpath, tmp_path / "base" / "eval_bundle")
    assert not (tmp_path / "base" / "eval_bundle").exists()
