"""The root CLI lists the mission's commands and stays cheap to import."""

import subprocess
import sys

from typer.testing import CliRunner

from rlab.cli.app import app


def test_help_lists_mission_commands():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("continue", "eval", "report", "rope"):
        assert command in result.output


def test_help_does_not_import_torch():
    code = "import sys; from rlab.cli.app import app; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
