"""`rlab bundle download | check`: get nanochat's DCLM CORE eval bundle and check it file by file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from rlab.cli.console import err, out
from rlab.cli.help_layout import RlabCommand, RlabGroup
from rlab.cli.options import BaseDirOpt
from rlab.paths import BaseLayout, default_base_dir, eval_bundle_cache

app = typer.Typer(help="Download and check the DCLM CORE eval bundle.", no_args_is_help=True, cls=RlabGroup)

_STYLE = {"ok": "green", "modified": "yellow", "missing": "red", "unknown": "cyan"}
_MEANING = {
    "ok": "byte-identical to nanochat's bundle",
    "modified": "present, differs from nanochat's file (CORE not comparable for these tasks)",
    "missing": "absent: CORE will be partial",
    "unknown": "present, not part of nanochat's bundle",
}


def _render(directory: Path) -> None:

    from rlab.evals.core.bundle import verify_bundle

    checks = verify_bundle(directory)
    table = Table(title=f"CORE bundle {directory}")
    for col in ("task(s)", "file", "status"):
        table.add_column(col)
    for c in checks:
        table.add_row(", ".join(c.labels), c.dataset_uri, f"[{_STYLE[c.status]}]{c.status}[/]")
    out.print(table)
    counts = {s: sum(c.status == s for c in checks) for s in _STYLE}
    for status, n in counts.items():
        if n:
            out.print(f"[{_STYLE[status]}]{n} {status}[/]: {_MEANING[status]}")


@app.command("check", cls=RlabCommand)
def check(
    directory: Annotated[
        Optional[Path],
        typer.Argument(
            help="Bundle folder (default: the one rlab would read: $RLAB_EVAL_BUNDLE, <base>/eval_bundle, "
            "then where `rlab bundle download` puts it)."
        ),
    ] = None,
    base_dir: BaseDirOpt = None,
) -> None:
    """Report which task files are present, missing, or differ from nanochat's bundle."""
    from rlab.evals.core.bundle import bundle_root

    _render(bundle_root(base_dir or default_base_dir(), directory))


@app.command("download", cls=RlabCommand)
def download(
    base_dir: BaseDirOpt = None,
    url: Annotated[str, typer.Option("--url", help="Where to fetch the zip from.")] = "",
    force: Annotated[bool, typer.Option("--force", help="Replace an existing <base>/eval_bundle.")] = False,
) -> None:
    """Fetch nanochat's eval_bundle.zip into <base>/eval_bundle and verify every task file.

    Without --base-dir: into the default base dir (~/.cache/nanochat unless $RLAB_BASE_DIR or
    $NANOCHAT_BASE_DIR say otherwise), where rlab eval and rlab demo find it whatever their --base-dir."""
    from rlab.evals.core.bundle_download import BUNDLE_URL, download_bundle

    target = BaseLayout(base_dir).eval_bundle_dir if base_dir is not None else eval_bundle_cache()
    err.print(f"Downloading {url or BUNDLE_URL} ...", markup=False)
    download_bundle(target, url=url or BUNDLE_URL, force=force)
    _render(target)
