"""`rlab export --all -e EXP`: every arm of an experiment as its own folder, one index README, and the upload.

The arms are the experiment's rows in results.csv (the base included), else the tags with a run config under
`runs/`. Each arm is exported (and checked) as `rlab export --tag` would, into `<out>/<tag>/`; the index lists
them with what each serves and how its check went. `push` uploads a folder with `huggingface_hub.upload_folder`
(the `[hub]` extra); whatever keeps it from the Hub (no network, no login) is one line naming the command that
uploads the same folder later.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rlab.errors import ExportError
from rlab.export.card import CardOptions, metadata_header
from rlab.export.hf import FILE_MODE, export_hf
from rlab.paths import ExperimentLayout

if TYPE_CHECKING:
    from rlab.export.card import CardOptions
    from rlab.export.hf import ExportResult


@dataclass(frozen=True)
class Arm:
    tag: str
    arm: str  # results.csv's label ("yarn (zero-shot)"), else the tag


def experiment_arms(results_root: Path, experiment: str) -> list[Arm]:
    """The experiment's arms, in results.csv's order (else run configs' tag order); `ExportError` when none."""

    layout = ExperimentLayout(results_root, experiment)
    if layout.results_csv.is_file():
        with layout.results_csv.open(newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("experiment") == experiment and r.get("tag")]
        arms = {r["tag"]: Arm(r["tag"], r.get("arm") or r["tag"]) for r in rows}
        if arms:
            return list(arms.values())
    runs = sorted(p.parent.name for p in (layout.root / "runs").glob("*/run.json"))
    if not runs:
        raise ExportError(
            f"No arms of experiment '{experiment}' under {layout.root} (neither results.csv rows nor runs/*/run.json).",
            "Check --experiment and --results-dir, or export one tag with --tag.",
        )
    return [Arm(tag, tag) for tag in runs]


def export_experiment(
    base_dir: Path,
    experiment: str,
    out: Path,
    *,
    results_root: Path,
    force: bool = False,
    card: CardOptions | None = None,
) -> list[ExportResult]:
    """Export every arm into `out/<tag>/` and write `out/README.md` (the index)."""

    arms = experiment_arms(results_root, experiment)
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not force:
        raise ExportError(
            f"{out} exists and is not empty.", "Choose another --out, or replace it with --force."
        )
    out.mkdir(parents=True, exist_ok=True)
    options = card or CardOptions()
    results = []
    for arm in arms:
        folder_options = options if options.model_id == "." else replace(options, subfolder=arm.tag)
        results.append(
            export_hf(
                base_dir, arm.tag, out / arm.tag, results_root=results_root, force=True, card=folder_options
            )
        )
    index = out / "README.md"
    index.write_text(render_index(experiment, arms, results, options))
    index.chmod(FILE_MODE)
    return results


def render_index(experiment: str, arms: list[Arm], results: list[ExportResult], options: CardOptions) -> str:
    """The index README: one row per arm, each linking its folder (and card)."""

    load = (
        f'`AutoModelForCausalLM.from_pretrained("{options.model_id}", subfolder="TAG", trust_remote_code=True)`'
        if options.model_id != "."
        else '`AutoModelForCausalLM.from_pretrained("TAG", trust_remote_code=True)` from this folder'
    )
    lines = [
        metadata_header(["rlab", "nanochat", "rope-scaling", "context-extension"], options),
        f"# Experiment `{experiment}`: {len(results)} arms exported by rlab",
        "",
        f"One folder per arm, each with its own card (RoPE, recipe, verdicts, export check). Load one with {load}.",
        "",
        "| arm | folder | architecture | RoPE | serves (tokens) | logits max diff | generate() |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm, r in zip(arms, results, strict=True):
        rt = r.roundtrip
        lines.append(
            f"| {arm.arm} | [{r.tag}/]({r.tag}/README.md) | {r.architecture} | `{r.rope}` | "
            f"{r.max_position_embeddings:,} | {rt.max_abs_logit_diff:.1e} | "
            f"{'equals rlab' if rt.generate_match else 'differs'} |"
        )
    return "\n".join(lines) + "\n"


def upload_command(repo_id: str, folder: Path) -> str:
    """The command that uploads `folder` as `repo_id` (huggingface_hub's CLI), for later."""
    return f"hf upload {repo_id} {folder} . --repo-type model"


def push(folder: Path, repo_id: str) -> str:
    """Upload `folder` to the Hub model repo `repo_id` (created if missing); the commit URL."""
    try:
        from huggingface_hub import create_repo, upload_folder
    except ImportError:
        raise ExportError(
            f"--push needs huggingface_hub; the export in {folder} is complete.",
            f'pip install "rlab[hub]", then: {upload_command(repo_id, folder)}',
        ) from None
    try:
        create_repo(repo_id, repo_type="model", exist_ok=True)
        info = upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="model")
    except Exception as exc:  # httpx/requests/offline/auth errors differ across huggingface_hub versions
        reason = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise ExportError(
            f"Could not upload {folder} to the Hub as {repo_id} ({reason}); the export is complete, "
            f"upload it later with: {upload_command(repo_id, folder)}"
        ) from None
    return str(getattr(info, "commit_url", info))
