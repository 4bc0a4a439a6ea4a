"""Numerics the compared numbers were computed under: the report warns on mixed dtypes, compare on any difference."""

from __future__ import annotations

import dataclasses
import shutil

from rlab.paths import ExperimentLayout
from rlab.records.eval_doc import read_eval_doc
from rlab.records.provenance import Platform
from rlab.report.assemble.collect import collect
from rlab.report.render import answer_lines, headline
from rlab.report.sources import numerics
from rlab.report.sources.tag_files import TagSources
from tests.conftest import REPO_ROOT

DEMO = REPO_ROOT / "results" / "demo"
AMD = Platform(
    device="cpu",
    cpu="AMD EPYC 9B14",
    isa=["avx2", "avx512_bf16"],
    kernels="AVX512",
    torch="2.13.0",
    threads=1,
)


def _doc(tag, dtype=None, platform=None):
    """The committed demo's eval.json, trained and evaluated on `platform` (None: not recorded)."""
    doc = read_eval_doc(DEMO / "evals" / tag / "eval.json")
    facts = doc.checkpoint.model_copy(update={"train_dtype": dtype, "train_platform": platform})
    measured = {name: run.model_copy(update={"platform": platform}) for name, run in doc.measured.items()}
    return doc.model_copy(update={"checkpoint": facts, "measured": measured})


def test_arms_trained_in_other_dtypes_are_named_and_unknown_facts_never_differ():
    groups = {
        "base": [_doc("demo", "bfloat16")],
        "pi": [_doc("demo-pi", "float32"), _doc("demo-pi", "float32")],
    }
    line = numerics.dtype_warning(groups)
    assert line is not None and line.startswith(
        "Arms differ in training dtype: bfloat16 (base) vs float32 (pi)."
    )
    assert "`train.dtype`" in line
    assert numerics.dtype_warning({"base": [_doc("demo", "bfloat16")], "pi": [_doc("demo-pi", None)]}) is None
    mixed = numerics.differences(
        {
            "pi": [_doc("demo-pi", "float32"), _doc("demo-pi", "bfloat16")],
            "ntk": [_doc("demo-ntk", "float32")],
        }
    )
    assert mixed[0].detail() == "bfloat16 + float32 (pi) vs float32 (ntk)"


def test_compare_names_the_platform_facts_that_differ_between_experiments():
    intel = AMD.model_copy(update={"cpu": "Intel Xeon", "isa": ["avx2"], "kernels": "AVX2", "threads": 2})
    tags = [
        TagSources("a/demo-pi", "pi", eval=_doc("demo-pi", "bfloat16", AMD), group="a"),
        TagSources("b/demo-pi", "pi", eval=_doc("demo-pi", "float32", intel), group="b"),
        TagSources("b/demo-ntk", "ntk", eval=None, group="b"),  # not evaluated: nothing to read
    ]
    note = numerics.experiments_note(tags)
    assert note is not None
    for part in (
        "training dtype: bfloat16 (a) vs float32 (b)",
        "CPU: AMD EPYC 9B14 (a) vs Intel Xeon (b)",
        "ISA: AVX512: avx2 avx512_bf16 (a) vs AVX2: avx2 (b)",
        "threads: 1 (a) vs 2 (b)",
    ):
        assert part in note
    assert "torch" not in note  # the same torch on both
    same = [dataclasses.replace(t, eval=_doc("demo-pi", "bfloat16", AMD)) for t in tags[:2]]
    assert numerics.experiments_note(same) is None


def test_the_report_warns_on_mixed_dtypes_and_on_a_single_base_beside_seeded_arms(tmp_path):

    shutil.copytree(DEMO, tmp_path / "demo")
    layout = ExperimentLayout(tmp_path, "demo")
    data = collect(layout, draws=100)
    said = headline.warnings(data)
    assert not any(w.startswith("Arms differ in training dtype") for w in said)  # one dtype
    # Two seeds on the continued arms: no one-seed warning; that the base and its zero-shot arms stay one model
    # each is said once, in the Answer's seed line, not again among the warnings.
    assert not any("One training seed" in w for w in said)
    assert not any("one model each" in w for w in said)
    seed_line = answer_lines._seed_line(data)
    assert seed_line.startswith("Seeds: 2 per continued arm, on one base") and "one model each" in seed_line
    for path in (tmp_path / "demo" / "evals").glob("demo-*/eval.json"):
        if "zeroshot" not in path.parent.name:  # continued arms in fp32, the base and its clones in bf16
            path.write_text(path.read_text().replace('"train_dtype": "bfloat16"', '"train_dtype": "float32"'))
    warned = [w for w in headline.warnings(collect(layout, draws=100)) if w.startswith("Arms differ")]
    assert len(warned) == 1 and "float32 (" in warned[0] and "bfloat16 (" in warned[0] and "base" in warned[0]
