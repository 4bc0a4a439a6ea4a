"""Probe: the fault drills of issues 29 and 42, rerun through the real CLI on 2 CPU ranks (torchrun, gloo).

Why this exists: issue 29's drill found nine ways a long job's faults went wrong (workers outliving their launcher,
a full disk ending in a traceback, a validator that hung, relative paths, a disk check that contradicted
itself, invisible runs, corrupt inputs found late, exit codes and batch changes, untested multi-process evals);
issue 42's found six more (a frozen rank, tags as paths, divergence without NaN, exploded checkpoints, a full
results disk, a peer's error named instead of the cause: attacks 42.1 to 42.6).
This script attacks each again and prints what rlab does now, one row per finding, so the drill is repeatable.
It builds its own tiny base (the test suite's synthetic corpus, a 2-layer 32-wide model pretrained 4 steps) in
a scratch folder. The full-disk and disk-check attacks mount small tmpfs folders (root only; skipped
elsewhere). About 10 minutes on 2 shared cores.

    .venv/bin/python experiments/probes/fault_drill.py --work /tmp/rlab-drill
    .venv/bin/python experiments/probes/fault_drill.py --work /tmp/rlab-drill --only 1,3,7
    .venv/bin/python experiments/probes/fault_drill.py --work /tmp/rlab-drill --only 42.1,42.2,42.3,42.4,42.5,42.6
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from rlab.core.checkpoint_meta import read_meta  # noqa: E402
from rlab.errors import RlabError  # noqa: E402
from rlab.orchestrate.disk import DISK_MARGIN, MIB, checkpoint_bytes  # noqa: E402
from rlab.orchestrate.lock import lock_holder  # noqa: E402
from rlab.paths import BaseLayout, ExperimentLayout, checkpoint_steps, model_file  # noqa: E402
from rlab.records.metrics_log import read_metrics_records  # noqa: E402
from tests.cli import job_faults as jf  # noqa: E402
from tests.cli.harness import Outcome, processes_mentioning, run_process  # noqa: E402
from tests.conftest import build_tiny_base  # noqa: E402
from tests.orchestrate.helpers import pretrained_smoke_base, spec_args  # noqa: E402

COLUMNS = 400
"""No wrapped lines in what the drill reads back."""


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def run(args: list[str], cwd: Path, timeout: float = 300) -> Outcome:
    return run_process(*args, cwd=cwd, columns=COLUMNS, timeout=timeout)


def start(args: list[str], cwd: Path) -> subprocess.Popen[str]:
    return jf.start_job(*args, cwd=cwd, columns=COLUMNS)


def error_lines(stderr: str) -> list[str]:
    """The stderr from its first `Error:` line on (what a user reads as the failure)."""
    lines = stderr.rstrip().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("Error")), None)
    return lines[first:] if first is not None else lines[-3:]


def one_line(lines: list[str], limit: int = 220) -> str:
    text = " ".join(" ".join(lines).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def replace_truncated(path: Path) -> None:
    """A crash mid-write: half the file, as a new file in its place (never written through, since a clone's
    step is a hard link to the base's file)."""
    half = path.with_name(path.name + ".half")
    half.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    os.replace(half, path)


class Drill:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.base = work / "base"
        self.results = work / "results"
        self.rows: list[dict[str, str]] = []

    # setup

    def build_base(self) -> None:
        """The tiny base: the test suite's (`tests.conftest.build_tiny_base`), the smoke model pretrained 4 steps
        on it into tag `smoke` (`tests.orchestrate.helpers.pretrained_smoke_base`)."""
        if checkpoint_steps(BaseLayout(self.base).checkpoint_dir("smoke")) == [4]:
            return

        for folder in (self.work / "tiny", self.base):  # what an interrupted build left
            shutil.rmtree(folder, ignore_errors=True)
        (self.work / "tiny").mkdir()
        pretrained_smoke_base(build_tiny_base(self.work / "tiny"), self.work)

    def spec(self, name: str, text: str | None = None) -> Path:
        path = self.work / f"{name}.yaml"
        path.write_text(text if text is not None else jf.long_run(name))
        return path

    def job_args(self, name: str, base: Path | None = None, text: str | None = None) -> list[str]:
        """`rlab continue` of the job on spec `text` (default: the long run) as experiment `name`."""
        return jf.continue_args(self.spec(name, text), base or self.base, self.results)

    def base_on(self, mount: Path) -> Path:
        """A copy of the tiny base on `mount` (a small tmpfs), its shards and long documents linked, not copied."""
        base = mount / "base"
        shutil.copytree(self.base, base, ignore=shutil.ignore_patterns("base_data", "long_docs", "corpus"))
        for sub in ("base_data", "long_docs"):
            (base / sub).symlink_to(self.base / sub)
        return base

    @contextmanager
    def tmpfs(self, folder: str, size: str, finding: str, before: str = "-") -> Iterator[Path | None]:
        """A small tmpfs under the work folder while the block runs; None where it cannot be mounted (the
        finding's row then says it was skipped)."""
        with jf.small_tmpfs(self.work / folder, size) as mount:
            if mount is None:
                self.row(finding, "-", before, "skipped: cannot mount tmpfs here")
            yield mount

    def row(self, finding: str, attack: str, before: str, now: str) -> None:
        self.rows.append({"finding": finding, "attack": attack, "before": before, "now": now})
        say(json.dumps(self.rows[-1]))

    # the attacks, numbered as the findings

    def f1_agent_killed_and_f4_paths_and_f8_way_out(self) -> None:
        """SIGKILL of the torchrun agent alone; then the printed resume command from another directory
        (relative paths typed); then a truncated newest checkpoint and the way out, on 1 process."""
        name = "d1"
        layout, tag = ExperimentLayout(self.results, name), jf.long_run_tag(name)
        self.spec(name)
        # typed relative, as the drill did: the paths stored and printed must still work from elsewhere
        args = ["continue", *spec_args(f"{name}.yaml", "base", "results")]
        proc = start([*args, "--variants", "pi", "--no-control", "--nproc", "2"], self.work)
        try:
            ckpt = BaseLayout(self.base).checkpoint_dir(tag)
            jf.wait_for(lambda: len(checkpoint_steps(ckpt)) >= 3, 240, "two saves of the run")  # clone + 2
            job = processes_mentioning(str(layout.run_config(tag)))
            os.kill(jf.torchrun_agent(layout.run_config(tag)), signal.SIGKILL)
            _, stderr = proc.communicate(timeout=120)
        finally:
            jf.stop(proc)
        (self.work / "d1-killed.stderr").write_text(stderr)
        left = processes_mentioning(str(layout.run_config(tag)))
        steps = checkpoint_steps(ckpt)
        time.sleep(5)
        later = [s for s in checkpoint_steps(ckpt) if s not in steps]
        self.row(
            "1 workers outlive launcher",
            f"kill -9 <torchrun agent> of `rlab continue --nproc 2` ({len(job)} job processes)",
            "rlab said failed and freed the lock; both workers trained on and wrote 5 more checkpoints",
            f"exit {proc.returncode}; {len(left)} job process(es) left when rlab exited; "
            f"{len(later)} checkpoint(s) written after; lock held by: {lock_holder(BaseLayout(self.base), tag)}; "
            "summary: "
            f"{one_line([ln for ln in stderr.splitlines() if 'failed' in ln][:2])}",
        )
        resolved = ExperimentLayout(self.results, name).resolved_spec.read_text()
        rerun_at = stderr.find("Rerun just these with:")
        rerun = shlex.split(" ".join(stderr[rerun_at:].split(":", 1)[1].split()).split(" rlab ")[0])
        rerun = rerun[rerun.index("rlab") + 1 :] if "rlab" in rerun else rerun
        elsewhere = run([*rerun, "--dry-run"], Path("/"))
        absolute = all(
            Path(line.split(":", 1)[1].strip()).is_absolute()
            for line in resolved.splitlines()
            if line.strip().startswith(("base_dir:", "results_dir:"))
            and line.split(":", 1)[1].strip() != "null"
        )
        self.row(
            "4 relative paths",
            "`rlab continue --spec d1.yaml --base-dir base --results-dir results` (relative), then the printed "
            "rerun command run from `/` (with --dry-run)",
            "spec.resolved.yaml kept relative paths; rlab's own next:/rerun commands failed elsewhere",
            f"spec.resolved.yaml paths absolute: {absolute}; printed command from /: exit {elsewhere.code}",
        )
        # a crash mid-save: the newest checkpoint truncated
        steps = checkpoint_steps(ckpt)
        newest = model_file(ckpt, steps[-1])
        replace_truncated(newest)
        refused = run([*rerun, "--nproc", "1"], Path("/"))
        (self.work / "d1-refused.stderr").write_text(refused.err)
        hint = error_lines(refused.err)
        way_out = " ".join(" ".join(hint).split()).split("newest readable one")[-1].split(": ", 1)[-1]
        argv = shlex.split(way_out)
        readable = int(argv[argv.index("--resume-from") + 1]) if "--resume-from" in argv else None
        resumed = None
        if readable is not None:
            two_more = str(readable + 2 - jf.BASE_STEP)
            resumed = run([*argv[1:], "--steps", two_more], Path("/"), timeout=400)
            (self.work / "d1-resumed.stderr").write_text(resumed.err)
        said = refused.err + (resumed.err if resumed else "")
        batch = [ln for ln in said.splitlines() if "global batch" in ln or "tokens per step instead" in ln]
        self.row(
            "8 broken newest checkpoint",
            f"truncate model_{steps[-1]:06d}.pt of the tag, then the printed `--resume` command (from /)",
            "the hint said to choose another step; continue had no such option",
            f"exit {refused.code}: {one_line(hint, 160)} -> that command (+--steps): exit "
            f"{resumed.code if resumed else '-'}, steps now {checkpoint_steps(ckpt)}, "
            f"set aside: {sorted(p.name for p in (ckpt / 'set_aside').glob('*'))}",
        )
        self.row(
            "8 world size",
            "that resume at --nproc 1 of a tag trained at --nproc 2 (512 tokens/step)",
            "global batch halved (2048 -> 1024 tokens/step), only an INFO line in train.log",
            f"console: {one_line(batch, 200) or '(no line)'}",
        )

    def f2_full_disk(self) -> None:
        with self.tmpfs("tmpfs-full", "16m", "2 full disk", "61-line MarkupError traceback") as mount:
            if mount is None:
                return
            name = "d2"
            base = self.base_on(mount)
            layout, tag = ExperimentLayout(self.results, name), jf.long_run_tag(name)
            proc = start(self.job_args(name, base), self.work)
            stderr, filler = jf.attack_when_training(
                proc, layout, tag, lambda: jf.fill_disk(mount), timeout=180
            )
            failed = stderr[stderr.find("job(s) failed") :]
            filler.unlink()
            steps = checkpoint_steps(BaseLayout(base).checkpoint_dir(tag))
            resumed = run(jf.resume_args(layout, tag, base, self.results, after=max(steps)), self.work)
            self.row(
                "2 full disk",
                "fill a 16 MiB tmpfs holding the base while `rlab continue --nproc 2` trains",
                "61-line traceback (rich MarkupError); the line shown was rank 1's 'Connection closed by peer'",
                f"exit {proc.returncode}, {stderr.count('Traceback')} traceback(s), "
                f"{len(stderr.splitlines())} stderr lines; summary: "
                f"{one_line(failed.splitlines()[:3], 200)}; freed + --resume: exit {resumed.code}, "
                f"steps {steps[-1]} -> {max(checkpoint_steps(BaseLayout(base).checkpoint_dir(tag)))}",
            )

    def f3_validator(self) -> None:
        huge = "9" * 5000
        cases = {
            "train.seeds: 1000000": "train: {seeds: 1000000}",
            "a 5,000-digit integer": f"train: {{steps: {huge}}}",
            "launch.nproc_per_node: 1e30": "launch: {nproc_per_node: 1e30}",
            "train.seq_len: 2**63": f"train: {{seq_len: {2**63}}}",
            "train.seq_len: 1e9": "train: {seq_len: 1e9}",
            "eval.lengths: []": "eval: {lengths: []}",
            "eval.lengths: [1, 2]": "eval: {lengths: [1, 2]}",
            "eval.evals: []": "eval: {evals: []}",
            "factor: 1e300": "variants: {a: {variant: pi, factor: 1e300}}",
            "nesting 200 deep": "x: " + "[" * 200 + "]" * 200,
        }
        seen = []
        slowest = 0.0
        for label, body in cases.items():
            path = self.work / "bad.yaml"
            path.write_text(f"name: v\nbase: {{tag: smoke}}\n{body}\n")
            began = time.time()
            done = run(["validate", str(path), "--spec-only"], self.work, timeout=60)
            slowest = max(slowest, time.time() - began)
            first = error_lines(done.err)
            seen.append(
                f"{label}: exit {done.code}, {len(first)} line(s)"
                + (", TRACEBACK" if "Traceback" in done.err else "")
            )
        say("\n".join(f"  {line}" for line in seen))
        refused = sum(" exit 1," in s and "TRACEBACK" not in s for s in seen)
        example = run(
            ["validate", str(self.spec("v3", "name: v\ntrain: {seeds: 1000000}\n")), "--spec-only"], self.work
        )
        self.row(
            "3 validator",
            f"`rlab validate --spec-only` on {len(cases)} bad specs (seeds 1e6, 5,000-digit int, nproc 1e30, "
            "seq_len 2**63 / 1e9, empty/tiny lengths, empty evals, factor 1e300, 200-deep nesting)",
            "hung > 100 s on seeds 1e6; 64-line traceback on a >4,300-digit int; 16 invalid specs passed",
            f"{refused} of {len(cases)} refused with exit 1, no traceback; slowest {slowest:.1f} s (process start "
            f"included); e.g. {one_line(error_lines(example.err)[:2], 150)}",
        )

    def f5_disk_check(self) -> None:

        with self.tmpfs("tmpfs-disk", "192m", "5 disk check", "refused 0.1 GB with 0.1 GB free") as mount:
            if mount is None:
                return
            base = self.base_on(mount)
            one = checkpoint_bytes(BaseLayout(base).checkpoint_dir("smoke"), 4)
            keep = 95 * MIB // one  # about the drill's 94 MiB written
            need = (keep + 1) * one  # keep_last + the save being written, the clone hard-linked
            outcome = {}
            for label, free in (("fits", need * 128 // 94), ("short", int(need * 1.05))):
                filler = mount / "filler"
                filler.unlink(missing_ok=True)
                spare = shutil.disk_usage(mount).free - free
                with open(filler, "wb") as fh:
                    fh.write(b"\0" * spare)
                text = jf.long_run(f"d5{label}").replace("keep_last: 3", f"keep_last: {keep}")
                done = run([*self.job_args(f"d5{label}", base, text), "--dry-run"], self.work)
                said = [ln for ln in done.err.splitlines() if "Not enough disk" in ln]
                outcome[label] = (done.code, shutil.disk_usage(mount).free / MIB, one_line(said, 200))
            self.row(
                "5 disk check",
                f"`continue --dry-run` on a tmpfs with free = need x 128/94 (the drill's ratio), then need x 1.05 "
                f"(need {need / MIB:.2f} MiB, +{round((DISK_MARGIN - 1) * 100)}% margin)",
                "refused a run that fits: 'about 0.1 GB needed, 0.1 GB free' (128 MiB free, ~94 MiB written)",
                f"fits ({outcome['fits'][1]:.1f} MiB free): exit {outcome['fits'][0]}, "
                f"{outcome['fits'][2] or 'no disk error'}; short "
                f"({outcome['short'][1]:.1f} MiB free): exit {outcome['short'][0]}: {outcome['short'][2]}",
            )

    def f6_invisible_run(self) -> None:
        name = "d6"
        layout, tag = ExperimentLayout(self.results, name), jf.long_run_tag(name)
        proc = start(self.job_args(name), self.work)
        try:
            jf.wait_for(lambda: layout.run_config(tag).exists(), 120, "run.json")
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        jf.wait_for(lambda: not processes_mentioning(str(layout.run_config(tag))), 30, "the job to go")
        stepped = jf.trained_a_step(layout, tag)
        status = run(["status", "--results-dir", str(self.results), "--base-dir", str(self.base)], self.work)
        shown = [
            ln for ln in status.out.splitlines() + status.err.splitlines() if tag in ln or "resume" in ln
        ]
        self.row(
            "6 invisible runs",
            "kill -9 of rlab's process group right after run.json is written (before step 1), then `rlab status`",
            "'Nothing running or unfinished'",
            f"stepped before kill: {stepped}; status exit {status.code}: {one_line(shown, 200)}",
        )

    def f7_corrupt_inputs(self) -> None:

        def truncate(path: Path) -> None:
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

        def nan(path: Path) -> None:
            state = torch.load(path)
            next(iter(state.values())).view(-1)[0] = float("nan")
            torch.save(state, path)

        damages: dict[str, Callable[[BaseLayout], object]] = {
            "truncated checkpoint": lambda b: truncate(model_file(b.checkpoint_dir("smoke"), 4)),
            "NaN checkpoint": lambda b: nan(model_file(b.checkpoint_dir("smoke"), 4)),
            "missing tokenizer": lambda b: (b.tokenizer_dir / "tokenizer.pkl").unlink(),
            "truncated parquet shard": lambda b: truncate(sorted(b.data_dir.glob("*.parquet"))[0]),
        }
        seen = []
        for label, damage in damages.items():
            base = self.work / "corrupt"
            shutil.rmtree(base, ignore_errors=True)
            shutil.copytree(self.base, base)
            damage(BaseLayout(base))
            name = "d7"
            began = time.time()
            done = run(self.job_args(name, base), self.work)
            took = time.time() - began
            cloned = BaseLayout(base).checkpoint_dir(jf.long_run_tag(name)).exists()
            lines = error_lines(done.err)
            seen.append(
                f"{label}: exit {done.code} in {took:.1f} s, {len(lines)} line(s), cloned: {cloned}, "
                f"tracebacks: {done.err.count('Traceback')}"
            )
            say(f"  {seen[-1]}\n    {one_line(lines, 300)}")
        self.row(
            "7 corrupt inputs",
            "truncated / NaN base checkpoint, missing tokenizer.pkl, truncated parquet shard; `rlab continue`",
            "noticed after the clone and torchrun, ~15 s later, inside 37-44 lines",
            "; ".join(seen),
        )

    def f8_signals(self) -> None:
        codes = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            name = f"d8{signum.name.lower()}"
            layout, tag = ExperimentLayout(self.results, name), jf.long_run_tag(name)
            proc = start(self.job_args(name), self.work)
            jf.attack_when_training(proc, layout, tag, partial(proc.send_signal, signum))
            left = len(processes_mentioning(str(layout.run_config(tag))))
            codes[signum.name] = f"exit {proc.returncode} ({left} job process(es) left)"
        self.row(
            "8 exit codes",
            "SIGINT (Ctrl-C), then SIGTERM, to a training `rlab continue --nproc 2`",
            "Ctrl-C exited 1 (SIGTERM: 143)",
            f"SIGINT: {codes['SIGINT']}; SIGTERM: {codes['SIGTERM']}",
        )

    def f9_evals(self) -> None:
        """A 2-process eval: SIGKILL of its torchrun agent after one finished eval; then two at once."""
        quick = self.spec("e-quick", "name: ev\nbase: {tag: smoke}\neval: {evals: [bpb], bpb_tokens: 1024}\n")
        long = self.spec(
            "e-long",
            "name: ev\nbase: {tag: smoke}\neval: {evals: [bpb, passkey], bpb_tokens: 1024, passkey_trials: 2000, "
            "passkey_depths: [0.0, 0.5], lengths: [256, 512]}\n",
        )
        twin = self.spec(
            "e-twin",
            "name: ev\nbase: {tag: smoke}\neval: {evals: [bpb, passkey], bpb_tokens: 1024, passkey_trials: 20, "
            "passkey_depths: [0.0, 0.5], lengths: [256, 512]}\n",
        )
        layout = ExperimentLayout(self.results, "ev")
        base_args = [
            "--base-dir",
            str(self.base),
            "--results-dir",
            str(self.results),
            "--nproc",
            "2",
            "--no-core",
        ]

        def argv(spec: Path, tag: str = "smoke") -> list[str]:
            return ["eval", "--tag", tag, "--spec", str(spec), *base_args]

        first = run(argv(quick), self.work)
        assert first.code == 0, first.err[-2000:]
        before = layout.eval_json("smoke").read_bytes()
        config = layout.eval_run_config("smoke")
        proc = start(argv(long), self.work)
        try:
            jf.wait_for(lambda: len(processes_mentioning(str(config))) >= 3, 120, "eval workers")
            time.sleep(2)
            os.kill(jf.torchrun_agent(config), signal.SIGKILL)
            _, stderr = proc.communicate(timeout=120)
        finally:
            jf.stop(proc)
        left = len(processes_mentioning(str(config)))
        kept = layout.eval_json("smoke").read_bytes() == before
        shutil.copytree(
            BaseLayout(self.base).checkpoint_dir("smoke"), BaseLayout(self.base).checkpoint_dir("smoke-twin")
        )
        try:
            both = [start(argv(twin), self.work), start(argv(twin, "smoke-twin"), self.work)]
            outs = [p.communicate(timeout=600) for p in both]
        finally:
            shutil.rmtree(BaseLayout(self.base).checkpoint_dir("smoke-twin"))
        results = [
            layout.eval_json(tag).exists()
            and "passkey" in json.loads(layout.eval_json(tag).read_text())["metrics"]
            for tag in ("smoke", "smoke-twin")
        ]
        self.row(
            "9 multi-process evals",
            "kill -9 of a 2-process eval's torchrun agent; then two 2-process evals at once",
            "untested",
            f"killed: exit {proc.returncode}, {stderr.count('Traceback')} tracebacks, {left} worker(s) left, old "
            f"eval.json kept: {kept}; concurrent: exits {[p.returncode for p in both]}, both results written: "
            f"{all(results)}, tracebacks: {sum(o[1].count('Traceback') for o in outs)}",
        )

    # issue 42's attacks

    def _failed_job(
        self, name: str, text: str, attack: Callable[[ExperimentLayout, str], None] | None = None
    ):
        """Run job `name` on spec `text` until it ends (after `attack(layout, tag)` once it trained a step); returns
        (exit code, its summary, seconds from the attack to the end)."""
        layout, tag = ExperimentLayout(self.results, name), jf.long_run_tag(name)
        proc = start(self.job_args(name, text=text), self.work)
        try:
            attacked = time.time()
            if attack is not None:
                jf.wait_for(lambda: jf.trained_a_step(layout, tag), 240, "a trained step")
                attack(layout, tag)
                attacked = time.time()
            _, stderr = proc.communicate(timeout=600)
        finally:
            jf.stop(proc)
        (self.work / f"{name}.stderr").write_text(stderr)
        summary = jf.failure_summary(stderr) or " ".join(stderr.split())
        return proc.returncode, summary.split("train.log. ", 1)[-1], time.time() - attacked  # the reason line

    def _status(self, tag: str) -> str:
        done = run(["status", "--base-dir", str(self.base), "--results-dir", str(self.results)], self.work)
        return one_line([ln for ln in done.out.splitlines() if ln.startswith(f"{tag}:")], 160)

    def g1_frozen_rank(self) -> None:
        name = "s1"
        layout, tag = ExperimentLayout(self.results, name), jf.long_run_tag(name)

        def freeze(layout: ExperimentLayout, tag: str) -> None:
            jf.stop_rank(layout, tag, 1, signal.SIGSTOP)

        code, summary, took = self._failed_job(name, jf.long_run(name, stall_timeout_s=10), freeze)
        status = self._status(tag)
        steps = checkpoint_steps(BaseLayout(self.base).checkpoint_dir(tag))
        resumed = run(jf.resume_args(layout, tag, self.base, self.results, after=max(steps)), self.work)
        self.row(
            "42.1 frozen rank",
            "`kill -STOP` of rank 1 of `rlab continue --nproc 2` (train.stall_timeout_s: 10), then `rlab status`, "
            "then `--resume`",
            "nothing printed for minutes; `rlab status`: training 40/80; only the 30-min collective timeout ends it",
            f"exit {code} {took:.0f} s after the stop: {one_line([summary], 300)}; status: {status}; "
            f"--resume: exit {resumed.code}",
        )

    def g2_tags_as_paths(self) -> None:
        outside = self.work / "outside"
        shutil.copytree(
            BaseLayout(self.base).checkpoint_dir("smoke"),
            outside / "base_checkpoints" / "d2",
            dirs_exist_ok=True,
        )
        before = sorted(outside.rglob("*"))
        codes = []
        for tag in (
            str(outside / "base_checkpoints" / "d2"),
            "../../outside/base_checkpoints/d2",
            "smoke/../smoke",
        ):
            for command in ("eval", "sample"):
                extra = ["--results-dir", str(self.results), "--no-core"] if command == "eval" else []
                done = run([command, "--tag", tag, "--base-dir", str(self.base), *extra], self.work)
                codes.append(f"{command} {tag.replace(str(self.work), '<work>')}: exit {done.code}")
        written = sorted(set(outside.rglob("*")) - set(before))
        self.row(
            "42.2 tags as paths",
            "`rlab eval/sample --tag` an absolute path, `../../x/base_checkpoints/d2`, `smoke/../smoke`",
            "exit 0; evaluated a checkpoint outside --base-dir, wrote eval.json, logs and CSVs there",
            f"{'; '.join(codes)}; files written outside: {len(written)}; e.g. "
            f"{one_line(error_lines(run(['eval', '--tag', 'smoke/../smoke'], self.work).err), 150)}",
        )

    def g3_divergence(self) -> None:
        name = "s3"
        huge = "lr: {warmup_steps: 1, matrix_lr: 1.0e+8, embedding_lr: 1.0e+8, unembedding_lr: 1.0e+8}"
        text = (
            jf.long_run(name, steps=60)
            .replace("lr: {warmup_steps: 1}", huge)
            .replace("save_every: 2", "save_every: 100")
        )
        code, summary, _ = self._failed_job(name, text)
        ls = run(
            ["ls", "--base-dir", str(self.base), "--results-dir", str(self.results), "--json"], self.work
        )
        state = next(
            (t["state"] for t in json.loads(ls.out)["tags"] if t["tag"] == jf.long_run_tag(name)), "-"
        )
        self.row(
            "42.3 divergence without NaN",
            "`rlab continue --nproc 2` at lr 1e8 (every group), 60 steps",
            "loss stuck at ln(vocab), grad norm 0.0 for 29 steps; state `done`, exit 0, no warning",
            f"exit {code}: {one_line([summary], 300)}; ls state: {state}",
        )

    def g4_exploded_checkpoints(self) -> None:

        name = "s4"
        huge = "lr: {warmup_steps: 1, matrix_lr: 1.0e+37, embedding_lr: 1.0e+37, unembedding_lr: 1.0e+37}"
        text = jf.long_run(name, steps=40, grad_clip="null").replace("lr: {warmup_steps: 1}", huge)
        code, summary, _ = self._failed_job(name, text)
        ckpt = BaseLayout(self.base).checkpoint_dir(jf.long_run_tag(name))
        unreadable = []
        for step in checkpoint_steps(ckpt):
            try:
                meta = read_meta(ckpt, step)
                if not all(isinstance(c, float) for c in meta.replica_param_checksums or []):
                    unreadable.append(step)
            except RlabError:
                unreadable.append(step)
        self.row(
            "42.4 exploded checkpoints",
            "`rlab continue --nproc 2` at lr 1e37, no grad clip, saving every 2 steps",
            "steps 22-30 saved with weights ~3e37 and `replica_param_checksums: [null, null]`; the resume hint "
            "pointed at them",
            f"exit {code}: {one_line([summary], 260)}; checkpoints {checkpoint_steps(ckpt)}, "
            f"unreadable metas: {unreadable or 'none'}",
        )

    def g5_full_results_disk(self) -> None:

        with self.tmpfs("tmpfs-results", "16m", "42.5 full results disk") as mount:
            if mount is None:
                return
            name = "s5"
            layout, tag = ExperimentLayout(mount / "results", name), jf.long_run_tag(name)
            proc = start(jf.continue_args(self.spec(name), self.base, mount / "results"), self.work)
            stderr, filler = jf.attack_when_training(
                proc, layout, tag, lambda: jf.fill_disk(mount), timeout=180
            )
            summary = jf.failure_summary(stderr).split("train.log. ", 1)[-1]
            metrics = layout.metrics_file(tag)
            torn = not metrics.read_bytes().endswith(b"\n")
            try:
                records = f"{len(read_metrics_records(metrics))} records read"
            except Exception as exc:  # noqa: BLE001 - what a reader meets is the finding
                records = f"unreadable: {exc}"
            filler.unlink()
            self.row(
                "42.5 full results disk",
                "fill a 16 MiB tmpfs holding --results-dir while `rlab continue --nproc 2` trains",
                "'No space left writing a file (71 GiB free there)': no file, the root disk's free space; "
                "a torn last line in metrics.jsonl",
                f"exit {proc.returncode}: {one_line([summary], 300)}; metrics.jsonl torn: {torn}, {records}",
            )

    def g6_cause_first(self) -> None:
        code, summary, _ = self._failed_job(
            "s6",
            jf.long_run("s6"),
            lambda layout, tag: jf.stop_rank(layout, tag, 0, signal.SIGKILL),
        )
        agent_code, agent_summary, _ = self._failed_job(
            "s6agent",
            jf.long_run("s6agent"),
            lambda layout, tag: os.kill(jf.torchrun_agent(layout.run_config(tag)), signal.SIGKILL),
        )
        self.row(
            "42.6 the cause first",
            "SIGKILL of rank 0's worker of `rlab continue --nproc 2`; then of a job's torchrun agent",
            "rank 1's gloo 'Connection closed by peer'; the agent kill: '1 of 1 job(s) failed' with no cause",
            f"rank 0: exit {code}: {one_line([summary], 300)}; agent: exit {agent_code}: "
            f"{one_line([agent_summary], 300)}",
        )


ATTACKS = {
    "1": Drill.f1_agent_killed_and_f4_paths_and_f8_way_out,
    "2": Drill.f2_full_disk,
    "3": Drill.f3_validator,
    "5": Drill.f5_disk_check,
    "6": Drill.f6_invisible_run,
    "7": Drill.f7_corrupt_inputs,
    "8": Drill.f8_signals,
    "9": Drill.f9_evals,
    "42.1": Drill.g1_frozen_rank,
    "42.2": Drill.g2_tags_as_paths,
    "42.3": Drill.g3_divergence,
    "42.4": Drill.g4_exploded_checkpoints,
    "42.5": Drill.g5_full_results_disk,
    "42.6": Drill.g6_cause_first,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/rlab-fault-drill"))
    parser.add_argument(
        "--only", default=",".join(ATTACKS), help="attacks to run (1 also covers 4 and 8's resume)"
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    drill = Drill(args.work.resolve())
    began = time.time()
    drill.build_base()
    say(f"base ready in {time.time() - began:.0f} s")
    for key in args.only.split(","):
        t0 = time.time()
        try:
            ATTACKS[key](drill)
        except Exception as exc:  # noqa: BLE001 - a drill reports an attack it could not finish and goes on
            drill.row(f"{key} (attack failed)", ATTACKS[key].__name__, "-", f"{type(exc).__name__}: {exc}")
        say(f"attack {key}: {time.time() - t0:.0f} s")
    say(f"\ndrill: {time.time() - began:.0f} s\n")
    say("| finding | attack | before (issue 29 / 42) | now |\n|---|---|---|---|")
    for row in sorted(drill.rows, key=lambda r: r["finding"]):
        say(f"| {row['finding']} | {row['attack']} | {row['before']} | {row['now']} |")


if __name__ == "__main__":
    main()
