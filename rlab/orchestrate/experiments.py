"""Which experiment a command means when none is named: one rule for `eval --all`, `status`, `ls`, `report`, `compare`.

The flag (`--experiment`), else the spec's name (`--spec`), else ``$RLAB_EXPERIMENT``, else the only experiment
under the results root. Two or more there: an error listing them (or, for a command that can show them all,
`status` and `ls`, no choice). The results root is the flag, else the spec's, else the default (`rlab.paths`).
"""

from __future__ import annotations

from pathlib import Path

from rlab.errors import RlabError, SpecError
from rlab.paths import default_results_root, env_experiment
from rlab.spec.loading import load_spec


def experiments_under(root: Path) -> list[str]:
    """The experiments (folders with runs/ or evals/) under a results root, sorted."""
    if not root.is_dir():
        return []
    return sorted(
        p.name for p in root.iterdir() if p.is_dir() and ((p / "evals").is_dir() or (p / "runs").is_dir())
    )


def resolve_experiment(
    experiment: str | None, spec_file: Path | None, results_dir: Path | None
) -> tuple[str, Path]:
    """(experiment, results root) by the rule above; none or several under the root is an error."""
    chosen, found, root = _choose(experiment, spec_file, results_dir)
    if chosen:
        return chosen, root
    if not found:
        raise RlabError(
            f"No experiments under {root}.",
            "Run `rlab continue` and `rlab eval` first, or point --results-dir at your results.",
        )
    raise RlabError(
        f"Several experiments under {root}: {', '.join(found)}.",
        "Choose one with --experiment NAME (or --spec FILE, or $RLAB_EXPERIMENT).",
    )


def experiment_filter(experiment: str | None, results_dir: Path | None) -> tuple[str | None, Path]:
    """(experiment or None, results root) for a command that can show every experiment (`status`, `ls`): the rule
    above, with None where it finds none or several."""
    chosen, _, root = _choose(experiment, None, results_dir)
    return chosen, root


def _choose(
    experiment: str | None, spec_file: Path | None, results_dir: Path | None
) -> tuple[str | None, list[str], Path]:
    """(the experiment the rule picks or None, the experiments under the root, the root)."""
    spec_name, spec_root = _spec_target(spec_file) if spec_file is not None else (None, None)
    root = (results_dir or spec_root or default_results_root()).expanduser()
    chosen = experiment or spec_name or env_experiment()
    if chosen:
        return chosen, [], root
    found = experiments_under(root)
    return (found[0] if len(found) == 1 else None), found, root


def _spec_target(spec_file: Path) -> tuple[str, Path | None]:
    """(experiment name, results root or None) of a spec file, through the spec loader."""
    if not spec_file.is_file():
        raise SpecError(f"Spec file not found: {spec_file}", "Pass an existing YAML file to --spec.")

    spec = load_spec(spec_file)
    return spec.experiment, spec.results_dir
