"""Each eval is defined once (its package's `EVAL`), and what the rest of rlab knows of the evals is derived from
those definitions: the spec's names and default, eval.json's sections, the CLI switches, the report's side files."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing

import pytest

from rlab.errors import EvalError
from rlab.evals import catalog
from rlab.evals.definition import resolve
from rlab.records.base import Record
from rlab.records.eval_doc import EvalMetrics
from rlab.records.sections import Section
from rlab.spec.eval import EvalSpec


def test_every_definition_names_what_exists() -> None:
    files: list[str] = []
    for d in catalog.definitions():
        section = resolve(d.section)
        assert isinstance(section, type) and issubclass(section, Section), d.name
        assert callable(resolve(d.run)), d.name
        for f in d.files:
            row = resolve(f.row)
            assert issubclass(row, Record) and row.columns, f"{d.name}: {f.name} has no columns"
            files.append(f.name)
        assert set(d.settings) <= set(EvalSpec.model_fields) - {"evals"}, d.name
    assert len(files) == len(set(files)), "a file owned by two evals"


def test_the_spec_eval_json_and_cli_list_the_catalog() -> None:
    names = catalog.names()
    assert names == ("bpb", "bpb_length", "core", "passkey", "ruler", "copy_distance")
    assert EvalSpec().evals == catalog.default_names() == names[:-1]  # copy_distance is opt-in
    assert set(typing.get_args(typing.get_args(EvalSpec.model_fields["evals"].annotation)[0])) == set(names)
    assert tuple(EvalMetrics.model_fields) == names
    from rlab.cli.eval_cmd import eval_tag

    switches = [p for p in inspect.signature(eval_tag).parameters if p.startswith("switch_")]
    assert switches == [f"switch_{n}" for n in names]  # `--<eval>/--no-<eval>`, in the catalog's order


def test_the_report_reads_each_eval_s_report_files() -> None:
    from rlab.report.tag_files import eval_csvs

    expected = {f.key for d in catalog.definitions() for f in d.files if f.report} | {"bpb_units"}
    assert set(eval_csvs()) == expected
    assert {
        "core_examples",
        "passkey_trials",
        "passkey_choices",
        "ruler_choices",
        "copy_distance",
    } <= expected


def test_an_unknown_eval_name_suggests_the_closest() -> None:
    with pytest.raises(EvalError, match="Did you mean 'core'"):
        catalog.get("cor")


def test_the_definitions_load_without_pydantic_or_torch() -> None:
    """`rlab --help` lists the eval switches: the catalog must stay light."""
    code = (
        "import sys; from rlab.evals import catalog; catalog.definitions(); "
        "print(sorted(m for m in ('pydantic', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
