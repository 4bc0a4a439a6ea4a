"""The choice of SDPA kernel (`rlab.core.attention_backends`): the decision from the machine's facts, and
what a CPU run reports."""

from __future__ import annotations

import subprocess
import sys

import torch

from rlab.core.attention_backends import CUDNN_FIRST, attention_kernels, choose_kernel, describe_attention


def test_fa3_on_hopper_when_it_imports_else_cudnn_first_when_it_accepts():
    assert choose_kernel(True, (9, 0), fa3_importable=True, cudnn_accepts=True).activate_fa3
    ampere = choose_kernel(True, (8, 0), fa3_importable=True, cudnn_accepts=True)
    assert not ampere.activate_fa3 and ampere.priority == CUDNN_FIRST  # FA3's kernels here are Hopper's
    no_fa3 = choose_kernel(True, (9, 0), fa3_importable=False, cudnn_accepts=True)
    assert not no_fa3.activate_fa3 and no_fa3.priority == CUDNN_FIRST
    plain = choose_kernel(True, (9, 0), fa3_importable=False, cudnn_accepts=False)
    assert not plain.activate_fa3 and plain.priority is None  # torch's own order (FlashAttention-2)
    cpu = choose_kernel(False, None, fa3_importable=True, cudnn_accepts=True)
    assert not cpu.activate_fa3 and cpu.priority is None


def test_a_cpu_run_names_the_kernel_sdpa_dispatches_to():
    with attention_kernels(torch.device("cpu"), 4, 2, 32, torch.float32) as name:
        assert name == "flash (CPU kernel)"


def test_the_log_line_names_windowed_layers_and_their_path():
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    windows = [2048, 2048, 2048, 8192] * 5  # d20 nanochat-2026 at 8192: SSSL
    line = describe_attention("FlashAttention-3", windows, 8192, cuda, "auto", compiled=True)
    assert line == (
        "SDPA FlashAttention-3 for full-context layers; "
        "15 sliding-window layer(s) (window 2048) through FlexAttention block masks"
    )
    assert describe_attention("flash (CPU kernel)", [None, None], 64, cpu, "auto", True) == (
        "SDPA flash (CPU kernel) for full-context layers"
    )
    assert "dense mask" in describe_attention("x", windows, 8192, cpu, "auto", True)
    assert "blocked causal kernel" in describe_attention("x", [None], 512, cpu, "auto", compiled=False)


def test_a_torch_without_the_flash_impl_switch_still_imports_and_picks_sdpa():
    """torch < 2.13 has no `activate_flash_attention_impl` (rlab supports >= 2.9; a lent GPU ran 2.11): the
    module must import, and FlashAttention-3 is then never chosen."""
    code = (
        "import torch.nn.attention as a\n"
        "del a.activate_flash_attention_impl\n"
        "import torch\n"
        "from rlab.core import attention_backends as ab\n"
        "assert ab._ACTIVATE_IMPL is None\n"
        "with ab.attention_kernels(torch.device('cpu'), 2, 2, 16, torch.float32) as name:\n"
        "    print(name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip()
