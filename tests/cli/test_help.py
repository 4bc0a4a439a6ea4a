"""Every command's --help: examples that parse, grouped options, defaults that match the spec, 80 columns."""

from __future__ import annotations

import shlex

import pytest

from rlab.cli.app import click_command
from rlab.cli.examples import EXAMPLES
from rlab.spec.experiment import LaunchSpec
from rlab.spec.train import TrainSpec
from tests.cli.harness import run_main

COMMANDS = [
    ["continue"],
    ["eval"],
    ["report"],
    ["compare"],
    ["demo"],
    ["pretrain"],
    ["power"],
    ["ls"],
    ["status"],
    ["sample"],
    ["validate"],
    ["schema"],
    ["rope", "inspect"],
    ["data", "prepare"],
    ["bundle", "check"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_reads_at_80_columns(command):
    outcome = run_main(*command, "--help", columns=80)
    assert outcome.code == 0, outcome.text
    lines = outcome.out.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert "<bool>" not in outcome.out and "<int range>" not in outcome.out and "[x>=" not in outcome.out
    if command[0] in EXAMPLES:
        assert "Examples" in outcome.out and EXAMPLES[command[0]][0][0][:30] in " ".join(outcome.out.split())


def test_options_are_grouped_and_choices_listed():
    text = run_main("continue", "--help", columns=100).out
    for panel in ("Where things live", "Multi-node / SLURM"):
        assert panel in text
    assert text.index("--steps") < text.index("Multi-node / SLURM") < text.index("--rdzv-endpoint")
    assert "local|slurm" in text and "-e" in text and "not --steps more" in " ".join(text.split())
    assert "md|html|csv" in run_main("report", "--help", columns=100).out
    assert "dynamic-ntk" in run_main("rope", "inspect", "--help", columns=100).out


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_parses(name):
    """Each example's flags exist and take the values shown (click parses them; nothing runs)."""
    group = click_command()
    for line, _ in EXAMPLES[name]:
        args = shlex.split(line)[1:]
        command = group.get_command(None, args[0])
        command.make_context(args[0], args[1:], parent=group.make_context("rlab", [args[0]]))


@pytest.fixture(scope="module")
def continue_help() -> str:
    return " ".join(run_main("continue", "--help", columns=200).out.split())


@pytest.mark.parametrize(
    "flag, spec, field",
    [
        ("--steps", TrainSpec, "steps"),
        ("--nnodes", LaunchSpec, "nnodes"),
        ("--node-rank", LaunchSpec, "node_rank"),
        ("--max-restarts", LaunchSpec, "max_restarts"),
        ("--launcher", LaunchSpec, "launcher"),
    ],
)
def test_defaults_in_help_match_the_spec(continue_help, flag, spec, field):
    after = continue_help[continue_help.index(flag) :]
    assert f"(default: {getattr(spec(), field)})" in after[:400], after[:400]


def test_validate_names_its_positional_argument(tmp_path):
    outcome = run_main("validate", str(tmp_path / "nope.yaml"))
    assert outcome.code == 1 and "--spec" not in outcome.err and "Spec file not found" in outcome.err
    assert "Missing argument 'SPEC'" in run_main("validate").err


def test_shell_completion_is_offered():
    text = run_main("--help", columns=100).out
    assert "--install-completion" in text and "--show-completion" in text
