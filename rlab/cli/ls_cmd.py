"""`rlab ls`: the tags under the base dir, with steps, lineage, architecture, RoPE config and which evals exist."""

from __future__ import annotations

# Heavy imports (pydantic specs, the orchestrator, rich tables) are local to the functions that use
# them, so `rlab --help` stays fast.
import json

from rlab.cli.options import BaseDirOpt, ResultsDirOpt
from rlab.paths import BaseLayout, ExperimentLayout, default_base_dir, default_results_root, meta_file


def tag_rows(base: BaseLayout, results_root) -> list[tuple[str, ...]]:
    """One row per tag: tag, steps, lineage, architecture, rope, evals (experiment:evals that ran)."""
    from rlab.orchestrate.clone import checkpoint_steps
    from rlab.orchestrate.clone import list_tags as tag_names
    from rlab.spec.rope import RopeSpec

    experiments = sorted(p.name for p in results_root.iterdir() if p.is_dir()) if results_root.is_dir() else []
    rows = []
    for tag in tag_names(base):
        ckpt_dir = base.checkpoint_dir(tag)
        steps = checkpoint_steps(ckpt_dir)
        meta = {}
        if steps:
            try:
                meta = json.loads(meta_file(ckpt_dir, steps[-1]).read_text())
            except (OSError, json.JSONDecodeError):
                meta = {}
        arch = _architecture_text(ckpt_dir, steps[-1]) if steps else "-"
        lineage = meta.get("lineage") or {}
        parent = f"{lineage['parent_tag']}@{lineage['parent_step']}" if lineage.get("parent_tag") else "-"
        rope_data = meta.get("rope")
        if rope_data:
            try:
                rope = RopeSpec.model_validate(rope_data).describe()
            except ValueError:
                rope = str(rope_data.get("variant", "?"))
        else:
            seq = (meta.get("model_config") or {}).get("sequence_len")
            rope = f"rope (nanochat, L0={seq})" if seq else "-"
        evals = []
        for exp in experiments:
            path = ExperimentLayout(results_root, exp).eval_json(tag)
            if path.exists():
                try:
                    names = sorted(json.loads(path.read_text()).get("metrics", {}))
                except (OSError, json.JSONDecodeError):
                    names = ["unreadable"]
                evals.append(f"{exp}: {', '.join(names) or '-'}")
        rows.append((tag, _steps_text(steps), parent, arch, rope, "; ".join(evals) or "-"))
    return rows


def _architecture_text(ckpt_dir, step: int) -> str:
    """e.g. ``nanochat-2026 (windows SSSL, base 100000)``, or why it is not known."""
    from rlab.core.checkpoint import inspect_checkpoint
    from rlab.errors import RlabError

    try:
        return inspect_checkpoint(ckpt_dir, step).describe()
    except RlabError as exc:
        return f"unreadable: {exc.message}"


def _steps_text(steps: list[int]) -> str:
    if not steps:
        return "none complete"
    if len(steps) <= 4:
        return ", ".join(map(str, steps))
    return f"{steps[0]}, {steps[1]} … {steps[-1]} ({len(steps)})"


def list_tags(base_dir: BaseDirOpt = None, results_dir: ResultsDirOpt = None) -> None:
    """List tags under the base dir: steps, lineage, RoPE config, and which evals exist."""
    from rich.table import Table

    from rlab.cli.console import out

    base = BaseLayout((base_dir or default_base_dir()).expanduser())
    results_root = (results_dir or default_results_root()).expanduser()
    rows = tag_rows(base, results_root)
    if not rows:
        out.print(f"No checkpoints under {base.checkpoints_root}.", highlight=False)
        return
    table = Table(title=f"Tags in {base.checkpoints_root}", title_justify="left")
    for column in ("tag", "steps", "from", "architecture", "rope", "evals"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    out.print(table)
