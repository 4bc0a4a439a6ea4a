"""CLI latency: how long each command makes a researcher wait, as a ratio to `python -c "import torch"`.

    python -m bench latency                 # every command, 3 runs each (the median)
    python -m bench latency --repeats 1     # once each
    python -m bench.latency_bench --only help,rope

Each command runs in a fresh process of this interpreter, as a user runs it (the rlab this Python has installed); `import torch` is timed in the same run, between
the commands, so the ratio holds on a loaded machine where the seconds do not (2 cores shared by many).
The targets are seconds on a quiet machine (issue 41); a ratio's target is that over `QUIET_TORCH_S`, the
time `import torch` takes there. Fixtures: the nanochat reference base (`$RLAB_NANOCHAT_REFERENCE`, its d2
checkpoint: continue --dry-run, eval --dry-run, sample), the d20 meta in tests/fixtures (`rlab memory`,
cold: an empty plan cache). A row whose fixture is missing says so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
D20_META = REPO / "tests" / "fixtures" / "nanochat_d20" / "meta_021400.json"
QUIET_TORCH_S = 1.7
"""`python -c "import torch"` on the 2-core development machine when quiet (1.66 s measured, 2026-11-28)."""


@dataclass(frozen=True)
class Command:
    name: str
    argv: list[str]
    target_s: float
    needs: Path | None = None
    cold_cache: bool = False


def commands(reference: Path | None, smoke: bool) -> list[Command]:
    rlab = [sys.executable, "-m", "rlab"]
    base = reference / "d314e96" if reference is not None else None
    where = ["--base-dir", str(base)] if base is not None else []
    # without the reference these commands would read the default base dir: skip them, naming what is missing
    needs = base if base is not None else Path("$RLAB_NANOCHAT_REFERENCE")
    memory = ["--seq-len", "256", "--device-batch-size", "1", "--eager"] if smoke else ["--seq-len", "8192"]
    memory += ["--device-batch-size", "8"] if not smoke else []
    help_cmds = ["continue", "eval", "report", "memory", "sample", "power", "ls", "status"]
    out = [Command("rlab --help", [*rlab, "--help"], 0.5)]
    out += [
        Command(f"rlab {c} --help", [*rlab, c, "--help"], 0.5)
        for c in (help_cmds[:2] if smoke else help_cmds)
    ]
    out += [
        Command("rlab rope inspect", [*rlab, "rope", "inspect", "--variant", "yarn", "--scale", "4"], 1.0),
        Command(
            "rlab continue --dry-run (nanochat d2)",
            [
                *rlab,
                "continue",
                *where,
                "--base-tag",
                "d2",
                "--from-step",
                "20",
                "--variants",
                "pi",
                "--dry-run",
            ],
            3.0,
            needs=needs,
        ),
        Command(
            "rlab eval --dry-run (nanochat d2)",
            [*rlab, "eval", *where, "--tag", "d2", "--dry-run"],
            3.0,
            needs=needs,
        ),
        Command(
            "rlab sample (nanochat d2, 8 tokens)",
            [
                *rlab,
                "sample",
                *where,
                "--tag",
                "d2",
                "--prompt",
                "The",
                "--max-tokens",
                "8",
                "--device",
                "cpu",
            ],
            5.0,
            needs=needs,
        ),
        Command(
            "rlab memory (d20, cold cache)",
            [*rlab, "memory", "--meta", str(D20_META), *memory, "--nproc", "8", "--gpu-memory", "80"],
            15.0,
            needs=D20_META,
            cold_cache=True,
        ),
    ]
    return out


def _time(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return time.perf_counter() - start, done.returncode


def _load() -> str:
    """The machine's load average (a ratio holds under load better than seconds do, not perfectly)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench.latency_bench")
    parser.add_argument("--repeats", type=int, default=3, help="runs per command (the median is shown)")
    parser.add_argument("--smoke", action="store_true", help="a few commands, small shapes, once each")
    parser.add_argument("--only", default=None, help="comma-separated substrings of the commands to time")
    args = parser.parse_args(argv)
    repeats = 1 if args.smoke else args.repeats
    ref = os.environ.get("RLAB_NANOCHAT_REFERENCE")
    reference = Path(ref) if ref and Path(ref).is_dir() else None
    torch_argv = [sys.executable, "-c", "import torch"]
    selected = [
        c
        for c in commands(reference, args.smoke)
        if args.only is None or any(s in c.name for s in args.only.split(","))
    ]
    rows, torch_times = [], []
    load_before = _load()
    with tempfile.TemporaryDirectory() as tmp:
        for i, cmd in enumerate(selected):
            if cmd.needs is not None and not cmd.needs.exists():
                rows.append((cmd, None, f"skipped: no {cmd.needs}"))
                continue
            times = []
            for r in range(repeats):
                env = {**os.environ, "RLAB_RESULTS_DIR": str(Path(tmp) / "results")}
                if cmd.cold_cache:
                    env["RLAB_CACHE_DIR"] = str(Path(tmp) / f"cache-{i}-{r}")
                torch_times.append(_time(torch_argv, env)[0])  # the reference, next to each command
                seconds, code = _time(cmd.argv, env)
                times.append(seconds)
            rows.append((cmd, statistics.median(times), "" if code == 0 else f"exit {code}"))
    torch_s = statistics.median(torch_times) if torch_times else float("nan")
    print(f"load average before / after: {load_before} / {_load()} (1, 5, 15 min; {os.cpu_count()} cores)")
    print(f'python -c "import torch": {torch_s:.2f} s (median of {len(torch_times)}, the unit below)')
    print(f"{'command':44} {'seconds':>8} {'x torch':>8} {'target':>8}  ok")
    for cmd, seconds, note in rows:
        target = cmd.target_s / QUIET_TORCH_S
        if seconds is None:
            print(f"{cmd.name:44} {'-':>8} {'-':>8} {target:>7.2f}x  {note}")
            continue
        ratio = seconds / torch_s
        ok = "yes" if ratio <= target and not note else "NO"
        print(f"{cmd.name:44} {seconds:8.2f} {ratio:7.2f}x {target:>7.2f}x  {ok} {note}".rstrip())
    print(
        f"target x torch = the issue's seconds / {QUIET_TORCH_S:g} s (`import torch` on the quiet machine); "
        "seconds vary with the load, ratios much less"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
