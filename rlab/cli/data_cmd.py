"""`rlab data prepare` (corpus shards, val split, long-doc set, tokenizer) and `rlab data long-docs`.

The library (`rlab.data.prepare`) does the work and reports progress through a callback;
this module owns the console: a rich progress bar while it runs, a summary table after.
"""

from __future__ import annotations

# Imports beyond typer/pathlib are local to the command, so `rlab --help` stays fast.
from pathlib import Path

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from rlab.cli.console import err, out
from rlab.cli.help_layout import RlabCommand, RlabGroup
from rlab.cli.options import at_least
from rlab.data.defaults import DEFAULT_VOCAB_SIZE  # noqa: TID253 - a constant the help shows: no pydantic
from rlab.errors import DataError
from rlab.paths import default_base_dir

app = typer.Typer(help="Prepare corpora and tokenizers.", no_args_is_help=True, cls=RlabGroup)


@app.command("prepare", cls=RlabCommand)
def prepare(
    corpus: list[str] = typer.Option(
        ["default"],
        "--corpus",
        "-c",
        help="'default' (embedded public-domain corpus: State of the Union + Shakespeare/Milton [+ Austen via apt]) "
        "or a folder / files of .txt, .jsonl, .parquet text. Repeat for several.",
    ),
    base_dir: Path | None = typer.Option(
        None,
        "--base-dir",
        help="Where to write nanochat's layout (default: $RLAB_BASE_DIR, $NANOCHAT_BASE_DIR, "
        "~/.cache/nanochat).",
    ),
    vocab_size: int = typer.Option(
        DEFAULT_VOCAB_SIZE, "--vocab-size", help="Tokenizer vocabulary incl. specials."
    ),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the base dir is already prepared."),
    copy_records: bool = typer.Option(
        False,
        "--copy-records",
        help="Mix verbatim repeats into the train split: passages repeated 16-1024 tokens later in the natural "
        "documents, plus twice as many characters of copy documents (spans of 4-16 tokens, each written twice, "
        "half of them random words): long-range structure for a tiny model (the demo uses it). Val and long "
        "documents stay natural text.",
    ),
) -> None:
    """Build shards (last = val), a long-document eval set and a BPE tokenizer; a no-op when already done."""

    from rlab.data.prepare import PrepareOptions, prepare_data
    from rlab.data.repeats import RepeatOptions

    if "default" in corpus and len(corpus) > 1:
        raise DataError("--corpus default cannot be combined with other corpus paths.")
    source = "default" if corpus == ["default"] else [Path(c) for c in corpus]
    root = base_dir if base_dir is not None else default_base_dir()

    tasks: dict[str, TaskID] = {}
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description:<28}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:

        def progress(stage: str, done: int, total: int | None) -> None:
            if stage not in tasks:
                for other in tasks.values():  # a new stage means the previous ones are finished
                    task = bar.tasks[other]
                    bar.update(other, completed=task.total or task.completed)
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        options = PrepareOptions(copy_records=RepeatOptions() if copy_records else None)
        result = prepare_data(
            root, corpus=source, vocab_size=vocab_size, force=force, options=options, progress=progress
        )

    if result.skipped:
        out.print(
            f"[green]{result.base_dir} is already prepared[/] for this corpus and vocab size: nothing to do "
            "(pass --force to rebuild)."
        )
        return
    _summary(result.manifest, result.base_dir, out)


def _summary(manifest: dict, base_dir: Path, out) -> None:

    stats = manifest["stats"]
    table = Table(title=f"Prepared {base_dir}", show_edge=False)
    table.add_column("split")
    for col in ("docs", "chars", "tokens"):
        table.add_column(col, justify="right")
    for split in ("train", "val", "long"):
        table.add_row(
            split, f"{stats['docs'][split]:,}", f"{stats['chars'][split]:,}", f"{stats['tokens'][split]:,}"
        )
    out.print(table)
    out.print(
        f"vocab {manifest['vocab_size']:,} · {stats['chars_per_token']} chars/token · tokenizer trained in "
        f"{stats['tokenizer_train_s']:.1f}s · {len(manifest['shards'])} shards (val: {manifest['val_shard']}) · "
        f"total {stats['prepare_s']:.1f}s"
    )
    for note in manifest.get("notes", []):
        out.print(f"[yellow]note:[/] {escape(note)}")


@app.command("long-docs", cls=RlabCommand)
def long_docs(
    base_dir: Path | None = typer.Option(
        None,
        "--base-dir",
        help="The base dir whose tokenizer counts the tokens (default: $RLAB_BASE_DIR, "
        "$NANOCHAT_BASE_DIR, ~/.cache/nanochat).",
    ),
    sources: list[str] = typer.Option(
        [],
        "--from",
        help="'default' (the embedded corpus's long works) or .txt/.jsonl/.parquet files or folders. "
        "Repeat for several. Default: the corpus the base dir was prepared from, else 'default'.",
    ),
    min_tokens: int | None = typer.Option(
        None,
        "--min-tokens",
        metavar="N",
        callback=at_least(1),
        help="Keep documents with at least this many tokens (default: the longest eval length of --spec, or "
        "2x the default continued-training length).",
    ),
    spec_path: Path | None = typer.Option(
        None, "--spec", "-s", help="Experiment spec whose longest eval length sets the default --min-tokens."
    ),
    force: bool = typer.Option(
        False, "--force", help="Rebuild an existing set (evals already run used the old one)."
    ),
) -> None:
    """Build long_docs/ (whole long documents, counted in the base dir's own tokenizer) for long-context evals."""
    from rlab.data.long_docs import build_long_docs, read_long_docs_manifest

    root = (base_dir if base_dir is not None else default_base_dir()).expanduser()
    existing = read_long_docs_manifest(root)
    if existing is not None and not force:
        out.print(
            f"[green]{root} already has a long-document set[/]: {len(existing.docs)} documents, "
            f"{existing.total_tokens:,} tokens (>= {existing.min_tokens:,} each). Pass --force to rebuild it.",
            highlight=False,
        )
        return
    if min_tokens is None:
        min_tokens = _default_min_tokens(spec_path)
    if not (root / "tokenizer").is_dir():
        raise DataError(
            f"{root} has no tokenizer/ folder.",
            "Point --base-dir at a nanochat base dir (or run `rlab data prepare` first).",
        )
    with err.status(f"building the long-document set of {root} ..."):
        manifest = build_long_docs(root, sources or None, min_tokens)
    _long_docs_summary(manifest, root, out)


def _default_min_tokens(spec_path: Path | None) -> int:
    from rlab.evals.lengths import experiment_target_len, longest_bpb_length
    from rlab.spec.loading import load_spec

    spec = load_spec(spec_path)
    return longest_bpb_length(spec.eval, experiment_target_len(spec))


def _long_docs_summary(manifest, root: Path, out) -> None:

    table = Table(title=f"Long-document set of {root}", show_edge=False)
    table.add_column("source", justify="left")
    table.add_column("offered", justify="right")
    table.add_column("kept", justify="right")
    for s in manifest.sources:
        table.add_row(s.detail, f"{s.offered:,}", f"{s.kept:,}")
    out.print(table)
    excluded = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in manifest.excluded.items()) or "none"
    out.print(
        f"{len(manifest.docs)} documents, {manifest.total_tokens:,} tokens (each >= {manifest.min_tokens:,}; "
        f"{manifest.docs_at_least(16384)} have >= 16,384) · left out: {excluded}",
        highlight=False,
    )
    out.print(
        f"training overlap {manifest.overlap_check} · set sha256 {manifest.set_sha256[:16]}", highlight=False
    )
    for note in manifest.notes:
        out.print(f"[yellow]note:[/] {escape(note)}")
