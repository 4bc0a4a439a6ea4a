"""The code version ignores what runs write into results/ (else each eval of one run gets its own version)."""

from __future__ import annotations

import subprocess

from rlab import provenance


def _repo(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "r.csv").write_text("a\n1\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")


def test_results_do_not_change_the_code_version(tmp_path, monkeypatch):
    _repo(tmp_path)
    monkeypatch.setattr(provenance, "REPO_ROOT", tmp_path)
    (tmp_path / "code.py").write_text("x = 2\n")
    before = provenance._local_changes_hash()
    (tmp_path / "results" / "r.csv").write_text("a\n2\n")  # a tracked result rewritten
    (tmp_path / "results" / "new.csv").write_text("b\n")  # a new result
    assert provenance._local_changes_hash() == before
    (tmp_path / "new_module.py").write_text("y = 1\n")  # new code does count
    assert provenance._local_changes_hash() != before
