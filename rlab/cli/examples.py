"""The examples at the end of each command's `--help` (Typer epilogs), in one place to keep them consistent.

Each is a list of (command, what it does); `epilog` lays them out for Typer's rich help, one per line.
tests/cli/test_help.py checks every command shows its examples and that each example parses.
"""

from __future__ import annotations

EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "continue": [
        ("rlab continue --from-step 21400 --variants pi,ntk,yarn", "d20 in the default base dir"),
        ("rlab continue --spec experiments/demo.yaml --dry-run", "the plan and the exact commands"),
        ("rlab continue --spec experiments/demo.yaml --variants ntk --resume", "finish an interrupted run"),
        ("rlab continue -s x.yaml --nnodes 2 --node-rank 0 --rdzv-endpoint node01:29500", "two nodes"),
    ],
    "eval": [
        ("rlab eval --tag d20-pi", "settings from the experiment's resolved spec"),
        ("rlab eval --spec experiments/demo.yaml --all", "every variant of an experiment"),
        ("rlab eval --tag d20-yarn --no-core --lengths 2048,8192 --nproc 8", "BPB vs length only"),
        ("rlab eval --tag d20-pi --dry-run --json", "what it would run, as JSON"),
        ("rlab eval --tag d20-pi --tasks hellaswag,arc_*", "CORE on some tasks"),
    ],
    "report": [
        ("rlab report -e demo", "results.csv, comparison.md, plots/"),
        ("rlab report --spec experiments/demo.yaml --baseline rope --format html", "self-contained HTML"),
        ("rlab report -e demo --json", "the tables as JSON"),
    ],
    "compare": [
        ("rlab compare scale4 scale8", "each arm of scale8 vs the same arm of scale4"),
        ("rlab compare experiments/a.yaml experiments/b.yaml --baseline a/rope", "every arm vs one arm"),
        ("rlab compare scale4 scale8 --arms yarn --json", "yarn of each, as JSON"),
    ],
    "demo": [
        ("rlab demo", "the whole mission on CPU, minutes"),
        ("rlab demo --dry-run", "the commands only"),
    ],
    "power": [
        ("rlab power -e demo", "pilot: results/demo's per-unit files; targets from its spec"),
        (
            "rlab power -e demo --mde primary=0.005 --mde copy_gain=0.05 --endpoints primary,copy_gain",
            "other targets",
        ),
        ("rlab power -e demo --seed-sd core=0.0052 --endpoints core", "with nanochat's run-to-run CORE SD"),
        (
            "rlab power --unit-sd core=0.57 --seed-sd core=0.0052 --mde core=0.01 --family-size 8",
            "no pilot: stated noise",
        ),
        ("rlab power -e demo --json", "every endpoint, with units needed at 1-10 seeds"),
    ],
    "pretrain": [
        ("rlab pretrain --spec experiments/demo.yaml", "train the spec's base from scratch"),
        ("rlab pretrain --spec experiments/demo.yaml --seeds 3", "3 bases, for `continue --replicate-base`"),
    ],
    "ls": [("rlab ls", "every tag: state, seq_len, RoPE, metrics"), ("rlab ls --json", "the same as JSON")],
    "status": [
        ("rlab status", "runs and evals in progress or unfinished"),
        ("rlab status -e demo --json", ""),
    ],
    "memory": [
        (
            "rlab memory --meta meta_021400.json --seq-len 8192 --device-batch-size 8 --nproc 8",
            "d20 at 8k on 8 GPUs",
        ),
        ("rlab memory --tag d20 --seq-len 8192 --nproc 8 --total-batch-size 524288 --json", "as JSON"),
        ("rlab memory --tag d20-pi --eval", "BPB at the longest length, generation prefill"),
    ],
    "sample": [("rlab sample --tag d20-yarn --prompt 'The capital of France is'", "")],
    "export": [
        (
            "rlab export --tag d20-yarn --format hf --out exports/d20-yarn",
            "transformers folder, checked round trip",
        ),
        (
            "rlab export --tag d20-pi --step 26400 --out exports/d20-pi --json",
            "a given step; the check as JSON",
        ),
        ("rlab export --all -e d20 --out exports/d20", "every arm, one folder each, and an index"),
        (
            "rlab export --all -e d20 --out exports/d20 --push me/d20-rope --license mit",
            "then upload to the Hub",
        ),
    ],
    "validate": [
        ("rlab validate experiments/demo.yaml", "spec, base dir, tags, disk"),
        ("rlab validate --spec-only my.yaml", "the file alone"),
    ],
    "schema": [("rlab schema -o rlab.schema.json", "for editor completion")],
}


def epilog(command: str) -> str | None:
    """The examples of `command` as Typer epilog text (rich markup; blank lines keep one example per line)."""
    items = EXAMPLES.get(command)
    if not items:
        return None
    lines = ["[bold]Examples[/]"]
    for cmd, what in items:
        lines.append(f"  [cyan]{cmd}[/]" + (f"  [dim]# {what}[/]" if what else ""))
    return "\n\n".join(lines)
