"""The code version ignores what runs write into results/ (else each eval of one run gets its own version)."""

from __future__ import annotations

import subprocess

import torch

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


X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9B14
flags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16 avx512_vnni
processor\t: 1
model name\t: AMD EPYC 9B14
flags\t\t: fpu sse2
"""
ARM = "processor\t: 0\nFeatures\t: fp asimd sve bf16\nCPU part\t: 0xd40\n"


def test_the_cpu_facts_are_the_model_and_the_flags_that_pick_kernels():
    assert provenance.cpu_facts(X86) == (
        "AMD EPYC 9B14",
        ["avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16"],
    )
    assert provenance.cpu_facts(ARM) == (None, ["asimd", "sve", "bf16"])  # the first processor's lines only
    assert provenance.cpu_facts("") == (None, [])


def test_the_platform_names_this_process_threads_and_torch(one_thread):

    now = provenance.current_platform()
    assert now.device == "cpu" and now.threads == 1 and now.torch == torch.__version__ and now.cpu
    assert now.kernels == torch.backends.cpu.get_cpu_capability()
    assert "torch" in now.label and now.label.endswith("1 thread")
    on_gpu = now.model_copy(update={"device": "NVIDIA H200", "threads": 16})
    # on a GPU no host ISA: the CPU's kernels compute nothing of its numbers
    assert on_gpu.label == f"NVIDIA H200, torch {torch.__version__}, 16 threads"
