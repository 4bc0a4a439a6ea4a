"""Where every file lives. Nothing else in rlab builds a path by hand.

Two roots:

* the **base dir** holds nanochat's layout, so a user's existing directory works unchanged::

      <base>/base_data/shard_00000.parquet ...   training shards; the last one is validation
      <base>/tokenizer/tokenizer.pkl, token_bytes.pt
      <base>/base_checkpoints/<tag>/model_021400.pt, meta_021400.json, optim_021400_rank0.pt
      <base>/base_checkpoints/.<tag>.lock          held while a run trains <tag>
      <base>/eval_bundle/                          DCLM CORE bundle (core.yaml, eval_meta_data.csv, eval_data/)
      <base>/long_docs/long_docs.parquet, manifest.json   the long-document eval set (rlab.data.long_docs)

* the **results root** (default ``./results``) holds one folder per experiment::

      results/<exp>/spec.resolved.yaml      the resolved spec that produced everything below
      results/<exp>/runs/<tag>/run.json     the resolved per-tag run config (torchrun reads it)
      results/<exp>/runs/<tag>/spec.resolved.yaml  the spec of the run that trained <tag> (its rerun command)
      results/<exp>/runs/<tag>/train.log    the job's stdout/stderr
      results/<exp>/runs/<tag>/metrics.jsonl  one JSON object per step / eval (source of truth for plots)
      results/<exp>/runs/<tag>/heartbeats/rank<r>.json  each rank's last step and time (the stall watchdog's)
      results/<exp>/evals/<tag>/eval.json   every metric of one tag
      results/<exp>/evals/<tag>/*.csv       bpb_by_length.csv, passkey.csv, core_examples.csv, bpb_docs.csv
      results/<exp>/results_<variant>.csv   per-task CORE of one variant
      results/<exp>/results.csv, comparison.md, comparison.html, plots/*.png

The environment is read here and only here: ``RLAB_BASE_DIR`` then ``NANOCHAT_BASE_DIR``
then nanochat's default ``~/.cache/nanochat`` for the base dir; ``RLAB_RESULTS_DIR`` for
the results root; ``RLAB_EXPERIMENT`` for the experiment (`rlab.orchestrate.experiments`); ``RLAB_EVAL_BUNDLE`` for the CORE bundle (`find_eval_bundle`); ``RLAB_CACHE_DIR``, else
``$XDG_CACHE_HOME/rlab``, else ``~/.cache/rlab`` for rlab's own cache (`cache_root`: memory plans). Precedence: flags,
then the environment, then paths recorded in a spec rlab wrote (``spec.resolved.yaml``; its results
root is where the file lies now).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rlab.errors import SpecError

NANOCHAT_DEFAULT_BASE_DIR = Path.home() / ".cache" / "nanochat"
RESOLVED_SPEC_NAME = "spec.resolved.yaml"
"""A spec rlab wrote (recorded paths in it yield to the environment and to where the file lies)."""


def env_base_dir() -> Path | None:
    """``$RLAB_BASE_DIR``, else ``$NANOCHAT_BASE_DIR``, else None."""
    for var in ("RLAB_BASE_DIR", "NANOCHAT_BASE_DIR"):
        value = os.environ.get(var)
        if value:
            return Path(value).expanduser().absolute()
    return None


def env_results_root() -> Path | None:
    """``$RLAB_RESULTS_DIR``, else None."""
    value = os.environ.get("RLAB_RESULTS_DIR")
    return Path(value).expanduser().absolute() if value else None


def env_experiment() -> str | None:
    """``$RLAB_EXPERIMENT`` (the experiment `eval --all`, `status`, `ls`, `report` pick without a flag), else None."""
    return os.environ.get("RLAB_EXPERIMENT") or None


def default_base_dir() -> Path:
    """The checkpoint/data root when no ``--base-dir`` is given."""
    return env_base_dir() or NANOCHAT_DEFAULT_BASE_DIR


def default_results_root() -> Path:
    """The results root when none is given: ``$RLAB_RESULTS_DIR`` or ``./results``."""
    return env_results_root() or Path.cwd() / "results"


def recorded_results_root(spec_path: Path, experiment: str) -> Path | None:
    """The results root a recorded spec (``<root>/<experiment>/.../spec.resolved.yaml``) lies in, wherever
    the folder was moved or copied to; None when the file is not inside a folder named `experiment`."""
    for parent in Path(spec_path).resolve().parents:
        if parent.name == experiment:
            return parent.parent
    return None


EVAL_BUNDLE_ENV = "RLAB_EVAL_BUNDLE"


def env_eval_bundle() -> Path | None:
    """``$RLAB_EVAL_BUNDLE``, else None."""
    value = os.environ.get(EVAL_BUNDLE_ENV)
    return Path(value).expanduser().absolute() if value else None


def eval_bundle_cache() -> Path:
    """Where `rlab bundle download` puts the CORE bundle when given no --base-dir: the default base dir's
    ``eval_bundle/`` (nanochat keeps its copy there too, ``~/.cache/nanochat/eval_bundle``)."""
    return BaseLayout(default_base_dir()).eval_bundle_dir


def is_eval_bundle(path: Path) -> bool:
    """A folder laid out as a CORE bundle (it has ``core.yaml``)."""
    return (path / "core.yaml").is_file()


def eval_bundle_search(base_dir: Path) -> list[Path]:
    """The places a CORE bundle is looked for when none is named: ``<base_dir>/eval_bundle``, then the cache."""
    places = [BaseLayout(base_dir).eval_bundle_dir, eval_bundle_cache()]
    return [p for i, p in enumerate(places) if p not in places[:i]]


def find_eval_bundle(base_dir: Path, explicit: Path | None = None) -> Path | None:
    """The CORE bundle rlab reads: `explicit` (--eval-bundle, a spec's eval.core_bundle), else
    ``$RLAB_EVAL_BUNDLE`` (either one is taken as given, found or not: reading it says what is wrong), else
    the first of `eval_bundle_search` that holds a bundle; None when none does."""
    named = explicit if explicit is not None else env_eval_bundle()
    if named is not None:
        return named
    return next((p for p in eval_bundle_search(base_dir) if is_eval_bundle(p)), None)


CACHE_DIR_ENV = "RLAB_CACHE_DIR"


def cache_root() -> Path:
    """rlab's own cache (things it can always recompute): ``$RLAB_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/rlab``, else ``~/.cache/rlab``."""
    value = os.environ.get(CACHE_DIR_ENV)
    if value:
        return Path(value).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "rlab"


def memory_plan_cache_dir() -> Path:
    """Where memory plans' counts are kept, one JSON per shape (`rlab.memory.plan_cache`)."""
    return cache_root() / "memory_plans"


NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
"""What an experiment, tag or variant name may be: one folder name, never a path (no `/`, no leading `.`)."""
MAX_NAME = 100
"""Longest experiment, tag or variant name: each becomes part of a folder name (the OS allows 255 bytes)."""


def name_problem(kind: str, value: str) -> str | None:
    """Why `value` cannot be a `kind` name (the spec's rule, and every --tag/--base-tag/--experiment's), or None."""
    if len(value) > MAX_NAME:
        return f"{kind} must be 1 to {MAX_NAME} characters (got {len(value):,})"
    if not NAME_RE.match(value):
        return f"{kind} {value!r} must start with a letter or digit and contain only letters, digits, '.', '_' or '-'"
    return None


def checked_name(kind: str, value: str) -> str:
    """`value` if it is a valid `kind` name; else a `SpecError`: a tag or experiment is a name, never a path, so
    nothing is read or written outside the base and results dirs."""
    problem = name_problem(kind, value)
    if problem is not None:
        raise SpecError(f"Invalid {problem}.", "A tag or experiment is a name (e.g. d20-pi), not a path.")
    return value


def step_name(step: int) -> str:
    """Zero-padded step as in nanochat's file names (``021400``)."""
    return f"{step:06d}"


class _Rooted(Protocol):
    @property
    def root(self) -> Path: ...


class _UnderRoot:
    """A layout's fixed file or folder below its `root`: one line per name instead of a property each."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, layout: _Rooted, owner: type | None = None) -> Path:
        return layout.root.joinpath(*self.parts)


@dataclass(frozen=True)
class BaseLayout:
    """nanochat's directory layout under one base dir."""

    root: Path

    data_dir = _UnderRoot("base_data")
    tokenizer_dir = _UnderRoot("tokenizer")
    checkpoints_root = _UnderRoot("base_checkpoints")
    eval_bundle_dir = _UnderRoot("eval_bundle")
    long_docs_dir = _UnderRoot("long_docs")
    long_docs_file = _UnderRoot("long_docs", "long_docs.parquet")
    """The long-document set: one whole document per row."""
    long_docs_manifest = _UnderRoot("long_docs", "manifest.json")
    """Written last by `rlab data long-docs`; its presence means the set is complete."""
    corpus_manifest = _UnderRoot("rlab_corpus.json")
    """Written last by `rlab data prepare`; its presence means the data is complete."""

    def checkpoint_dir(self, tag: str) -> Path:
        return self.checkpoints_root / checked_name("tag", tag)

    def tag_lock(self, tag: str) -> Path:
        """The lock file a run holds while it trains `tag` (hidden beside the tag's folder)."""
        return self.checkpoints_root / f".{checked_name('tag', tag)}.lock"


def model_file(ckpt_dir: Path, step: int) -> Path:
    return ckpt_dir / f"model_{step_name(step)}.pt"


def meta_file(ckpt_dir: Path, step: int) -> Path:
    return ckpt_dir / f"meta_{step_name(step)}.json"


def optim_file(ckpt_dir: Path, step: int, rank: int) -> Path:
    return ckpt_dir / f"optim_{step_name(step)}_rank{rank}.pt"


def optim_ranks(ckpt_dir: Path, step: int) -> list[int]:
    """Ranks whose optimizer file (`optim_file`) of `step` exists in `ckpt_dir`, ascending (gaps kept as gaps)."""
    ranks = (p.stem.rsplit("rank", 1)[-1] for p in Path(ckpt_dir).glob(f"optim_{step_name(step)}_rank*.pt"))
    return sorted(int(r) for r in ranks if r.isdigit())


_META_RE = re.compile(r"^meta_(\d{6,})\.json$")


def heartbeat_dir(run_dir: Path) -> Path:
    """A run's heartbeat folder, from its run dir (what a worker knows: `RunConfig.run_dir`)."""
    return Path(run_dir) / "heartbeats"


def heartbeat_file(run_dir: Path, rank: int) -> Path:
    """One rank's heartbeat (`rlab.records.heartbeat.Heartbeat`)."""
    return heartbeat_dir(run_dir) / f"rank{rank}.json"


def checkpoint_steps(ckpt_dir: Path) -> list[int]:
    """Steps with a complete checkpoint in `ckpt_dir` (meta + model present; meta is written last), ascending."""
    ckpt_dir = Path(ckpt_dir)
    if not ckpt_dir.is_dir():
        return []
    steps = []
    for entry in ckpt_dir.iterdir():
        m = _META_RE.match(entry.name)
        if m and model_file(ckpt_dir, int(m.group(1))).exists():
            steps.append(int(m.group(1)))
    return sorted(steps)


@dataclass(frozen=True)
class ExperimentLayout:
    """Where one experiment's runs, evals and report live."""

    results_root: Path
    experiment: str

    def __post_init__(self) -> None:
        checked_name("experiment", self.experiment)

    @property
    def root(self) -> Path:
        return self.results_root / self.experiment

    resolved_spec = _UnderRoot(RESOLVED_SPEC_NAME)

    def run_dir(self, tag: str) -> Path:
        return self.root / "runs" / checked_name("tag", tag)

    def run_config(self, tag: str) -> Path:
        return self.run_dir(tag) / "run.json"

    def tag_spec(self, tag: str) -> Path:
        """The resolved spec of the run that last trained `tag` (its own rerun command reads it)."""
        return self.run_dir(tag) / RESOLVED_SPEC_NAME

    def train_log(self, tag: str) -> Path:
        return self.run_dir(tag) / "train.log"

    def metrics_file(self, tag: str) -> Path:
        return self.run_dir(tag) / "metrics.jsonl"

    def heartbeat_dir(self, tag: str) -> Path:
        """Where each rank of the tag's job heartbeats (`heartbeat_file`); rlab's watchdog and `status` read it."""
        return heartbeat_dir(self.run_dir(tag))

    def sbatch_script(self, tag: str) -> Path:
        """The SLURM script of a tag's training job (`--launcher slurm`)."""
        return self.run_dir(tag) / "sbatch.sh"

    def eval_dir(self, tag: str) -> Path:
        return self.root / "evals" / checked_name("tag", tag)

    def eval_json(self, tag: str) -> Path:
        return self.eval_dir(tag) / "eval.json"

    def eval_log(self, tag: str) -> Path:
        return self.eval_dir(tag) / "eval.log"

    def eval_run_config(self, tag: str) -> Path:
        """The resolved eval config the eval worker reads."""
        return self.eval_dir(tag) / "eval_run.json"

    def core_task_csv(self, variant: str) -> Path:
        return self.root / f"results_{checked_name('variant', variant)}.csv"

    results_csv = _UnderRoot("results.csv")
    comparison_md = _UnderRoot("comparison.md")
    comparison_html = _UnderRoot("comparison.html")
    plots_dir = _UnderRoot("plots")


COMPARISONS_DIR = "_compare"
"""Folder under a results root holding comparisons of several experiments (not a valid experiment name)."""


@dataclass(frozen=True)
class ComparisonLayout:
    """Where `rlab compare A B ...` writes: ``<results root>/_compare/A+B/``, never inside one experiment's folder
    (so a single experiment's report is never overwritten). ``+`` cannot occur in an experiment name."""

    results_root: Path
    experiments: tuple[str, ...]

    @property
    def root(self) -> Path:
        return self.results_root / COMPARISONS_DIR / "+".join(self.experiments)

    comparison_md = _UnderRoot("comparison.md")
    comparison_html = _UnderRoot("comparison.html")
    plots_dir = _UnderRoot("plots")
