"""The root CLI lists the mission's commands and stays cheap to import."""

import subprocess
import sys

import pytest

from rlab.paths import BaseLayout
from rlab.variants import VARIANT_NAMES
from tests.cli.harness import run_main
from tests.conftest import REPO_ROOT
from tests.orchestrate.helpers import make_checkpoint

# What `rlab --help` must not load: torch outright, and the libraries that made it slow before
# the command modules imported them lazily (pydantic via the spec models, the data/report stack).
HEAVY_MODULES = ("torch", "pydantic", "pandas", "numpy", "pyarrow", "matplotlib", "wandb")


def _loaded_heavy_modules(code: str) -> list[str]:
    """Run `code` in a fresh interpreter; return which HEAVY_MODULES it left in sys.modules."""
    probe = (
        f"{code}\nimport sys\nprint('loaded:' + ','.join(m for m in {HEAVY_MODULES!r} if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    last = result.stdout.splitlines()[-1]
    assert last.startswith("loaded:"), result.stdout
    return [name for name in last.removeprefix("loaded:").split(",") if name]


def test_help_lists_mission_commands():
    result = run_main("--help")
    assert result.code == 0, result.text
    for command in ("continue", "eval", "report", "rope"):
        assert command in result.out


def test_importing_the_cli_loads_nothing_heavy():
    assert _loaded_heavy_modules("import rlab.cli.app") == []


def test_root_help_loads_nothing_heavy():
    code = (
        "from rlab.cli.app import app\nassert app(['--help'], prog_name='rlab', standalone_mode=False) == 0"
    )
    assert _loaded_heavy_modules(code) == []


def test_a_command_help_loads_nothing_heavy():
    """The root group's unset switches are processed before every subcommand: no pydantic to coerce them."""
    for command in ("continue", "eval", "ls"):
        code = (
            "import sys\nfrom rlab.cli.app import main\n"
            f"sys.argv = ['rlab', '{command}', '--help']\n"
            "try:\n    main()\nexcept SystemExit as exit:\n    assert exit.code == 0"
        )
        assert _loaded_heavy_modules(code) == [], command


def test_rope_help_names_every_variant():
    result = run_main("rope", "inspect", "--help", columns=200)
    assert result.code == 0, result.text
    for name in VARIANT_NAMES:
        assert name in result.out


def test_a_dry_run_reads_the_base_without_torch(tmp_path):
    """`continue --dry-run` checks the base's weights and token table (finite, the right size) with numpy: torch is
    for the launch."""

    make_checkpoint(tmp_path / "base", "d20", steps=(10,))
    assert (BaseLayout(tmp_path / "base").tokenizer_dir / "token_bytes.pt").is_file()
    code = (
        "import sys\nfrom rlab.cli.app import main\n"
        f"sys.argv = ['rlab', 'continue', '--base-dir', {str(tmp_path / 'base')!r}, '--results-dir', "
        f"{str(tmp_path / 'results')!r}, '--from-step', '10', '--variants', 'pi', '--dry-run']\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert exit.code == 0, exit.code"
    )
    assert "torch" not in _loaded_heavy_modules(code)


def test_the_cli_bans_every_module_the_project_bans():
    """rlab/cli/ruff.toml's banned-module-level-imports replaces pyproject.toml's (a nested ruff config does not add
    to a list): it must keep every module of the project's."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]
    cli = tomllib.loads((REPO_ROOT / "rlab" / "cli" / "ruff.toml").read_text())["lint"]
    key = "banned-module-level-imports"
    assert set(project["flake8-tidy-imports"][key]) <= set(cli["flake8-tidy-imports"][key])
