"""Each eval is defined once (its package's `EVAL`), and what the rest of rlab knows of the evals is derived from
those definitions: the spec's names and default, eval.json's sections, the CLI switches, the report's side files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import typing

import pytest
import yaml

from rlab.cli.app import click_command
from rlab.errors import EvalError
from rlab.evals import catalog
from rlab.evals.definition import resolve
from rlab.evals.settings import EvalSettings
from rlab.records.base import Record, short_hash
from rlab.records.eval_doc import EvalMetrics, read_eval_doc
from rlab.records.sections import Section
from rlab.report.sources.tag_files import eval_csvs
from rlab.spec.eval import EvalSpec, RunSettings, check_disjoint
from tests.conftest import REPO_ROOT
from tests.evals.test_runner import make_base

DEMO = REPO_ROOT / "results" / "demo"


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
        own = d.settings_type()
        assert own is None or issubclass(own, EvalSettings), d.name
        assert own is None or set(own.model_fields) <= set(EvalSpec.model_fields), d.name
        assert set(d.settings) <= set(EvalSpec.model_fields) - {"evals"}, d.name
    assert len(files) == len(set(files)), "a file owned by two evals"


def test_the_committed_demo_s_sections_hash_the_settings_they_hashed_then() -> None:
    """Each section of the committed demo's eval.json files recorded the settings its definition names today,
    plus the facts of its run (`EvalOutcome.settings_extra`): re-evaluating gives the same settings hash."""
    run_facts = {"window", "lengths_used", "windows_used", "records", "cropped_to", "attention_windows"}
    files = sorted(DEMO.glob("evals/*/eval.json"))
    assert files
    for path in files:
        for name, run in read_eval_doc(path).measured.items():
            d = catalog.get(name)
            assert set(run.settings) - run_facts == set(d.settings), f"{path.parent.name} {name}"
            spec_part = {k: run.settings[k] for k in d.settings}
            facts = {k: v for k, v in run.settings.items() if k in run_facts}
            assert short_hash(d.settings_of(spec_part, facts)) == run.settings_hash, (
                f"{path.parent.name} {name}"
            )


def test_the_derived_spec_keeps_every_key_in_its_place() -> None:
    """`EvalSpec` (the shared settings and each eval's, flat) dumps the committed demo's `eval:` section back
    byte for byte: the same keys in the same order with the same values."""
    committed = yaml.safe_load((DEMO / "spec.resolved.yaml").read_text())["eval"]
    dumped = EvalSpec.model_validate(committed).model_dump(mode="json")
    assert yaml.safe_dump(dumped, sort_keys=False) == yaml.safe_dump(committed, sort_keys=False)
    assert list(EvalSpec.model_fields) == list(committed)


def test_two_groups_of_settings_may_not_share_a_key() -> None:

    class Seeded(EvalSettings):
        seed: int = 7

    with pytest.raises(RuntimeError, match="RunSettings and Seeded both declare 'seed'"):
        check_disjoint([RunSettings, Seeded])


TOY_EVAL = {
    "__init__.py": """
        from rlab.evals.definition import package_eval

        EVAL = package_eval(__name__, order=70, help="Toy eval.", shared_settings=("seed",), default=False)
    """,
    "settings.py": """
        from typing import Annotated

        from pydantic import field_validator

        from rlab.evals.settings import EvalSettings
        from rlab.spec.bounds import InRange


        class ToySettings(EvalSettings):
            toy_copies: Annotated[int, InRange(1, 9)] = 2
            '''How many copies the toy makes.'''

            @field_validator("toy_copies")
            @classmethod
            def _odd(cls, value: int) -> int:
                if value % 2 == 0:
                    raise ValueError("toy copies come in odd numbers")
                return value
    """,
    "records.py": """
        from rlab.records.sections import Section


        class ToyMetric(Section):
            copies: int
    """,
    "run.py": """
        from rlab.evals.context import EvalContext, EvalOutcome
        from rlab.evals.toy.records import ToyMetric
        from rlab.evals.toy.settings import ToySettings


        def run(ctx: EvalContext) -> EvalOutcome:
            return EvalOutcome(ToyMetric(copies=ToySettings.of(ctx.spec).toy_copies))
    """,
}

TOY_CHECKS = """
import contextlib, io, json, sys
import rlab.evals

rlab.evals.__path__.append(sys.argv[1])  # the toy package sits beside the others, rlab's own files untouched
from pydantic import ValidationError

from rlab.cli.app import app
from rlab.evals import catalog
from rlab.evals.toy.settings import ToySettings
from rlab.records.eval_doc import EvalMetrics
from rlab.spec.eval import EvalSpec
from rlab.spec.loading import load_spec

spec = load_spec(sys.argv[2])
out = {"settings": list(catalog.get("toy").settings), "evals": spec.eval.evals}
out["copies"] = [EvalSpec().toy_copies, ToySettings.of(spec.eval).toy_copies]
out["keys"] = list(EvalSpec.model_fields)
out["doc"] = EvalSpec.model_json_schema()["properties"]["toy_copies"]["description"]
out["section"] = "toy" in EvalMetrics.model_fields
out["errors"] = []
for bad in ({"toy_copies": 4}, {"toy_copies": 11}, {"toy_copy": 3}):
    try:
        EvalSpec.model_validate(bad)
    except ValidationError as exc:
        out["errors"].append(exc.errors()[0]["msg"])
text = io.StringIO()
with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
    app(["eval", "--help"], prog_name="rlab")
out["help"] = text.getvalue()

from pathlib import Path

from rlab.evals.runner import run_evals
from rlab.records.eval_doc import read_eval_doc
from rlab.spec.run import EvalRunConfig

base, results = Path(sys.argv[3]), Path(sys.argv[4])
config = EvalRunConfig(
    experiment="exp", tag="d2-rope", variant="rope", base_dir=base, out_dir=results / "d2-rope",
    core_csv=results / "results_rope.csv", eval=spec.eval.model_copy(update={"evals": ("toy",)}),
)
run_evals(config)
doc = read_eval_doc(results / "d2-rope" / "eval.json")
out["measured"] = doc.measured["toy"].settings
out["metric"] = doc.metrics.get("toy").model_dump()
print(json.dumps(out))
"""


def test_an_eval_with_a_setting_of_its_own_is_its_package_alone(tiny_base_dir, tmp_path) -> None:
    """A package on rlab.evals' path that declares an eval and its settings model is all it takes: the spec
    takes its key (default, docstring, validator, extra="forbid"), its switch is on `rlab eval`, and the
    worker runs it, its section in eval.json with its setting recorded and hashed."""

    base = make_base(tiny_base_dir, tmp_path)
    for name, text in TOY_EVAL.items():
        (tmp_path / "toy").mkdir(exist_ok=True)
        (tmp_path / "toy" / name).write_text(textwrap.dedent(text).lstrip())
    spec = tmp_path / "spec.yaml"
    spec.write_text("base: {tag: d2}\neval: {evals: [bpb, toy], toy_copies: 5}\n")
    proc = subprocess.run(
        [sys.executable, "-c", TOY_CHECKS, str(tmp_path), str(spec), str(base), str(tmp_path / "evals")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["settings"] == ["toy_copies", "seed"] and out["evals"] == ["bpb", "toy"]
    assert out["copies"] == [2, 5] and out["doc"] == "How many copies the toy makes." and out["section"]
    keys = out["keys"]
    assert keys.index("copy_trials") < keys.index("toy_copies") < keys.index("attention_windows")  # order 70
    assert out["errors"][0].endswith("toy copies come in odd numbers")
    assert "must be from 1 to 9" in out["errors"][1] and out["errors"][2] == "Extra inputs are not permitted"
    assert "--toy" in out["help"] and "--no-toy" in out["help"] and "Toy eval." in out["help"]
    assert out["measured"] == {"toy_copies": 5, "seed": 1234} and out["metric"] == {"copies": 5}


def test_the_spec_eval_json_and_cli_list_the_catalog() -> None:
    names = catalog.names()
    assert names == ("bpb", "bpb_length", "core", "passkey", "ruler", "copy_distance")
    assert EvalSpec().evals == catalog.default_names() == names[:-1]  # copy_distance is opt-in
    assert set(typing.get_args(typing.get_args(EvalSpec.model_fields["evals"].annotation)[0])) == set(names)
    assert tuple(EvalMetrics.model_fields) == names

    params = [p.name for p in click_command().commands["eval"].params]
    switches = [p for p in params if p in names]
    assert switches == list(names)  # `--<eval>/--no-<eval>`, in the catalog's order


def test_the_report_reads_each_eval_s_report_files() -> None:

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
