"""Replicated bases (train.replicate_base): seed replicate i, and its zero-shot arm, start from base replicate i;
`rlab pretrain --seeds S` makes the bases; a missing one stops `rlab continue` with the command that makes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlab.errors import SpecError
from rlab.orchestrate.plan import (
    arm_label,
    base_tags,
    experiment_tags,
    is_base_tag,
    plan_bases,
    plan_continue,
    plan_eval,
    variant_of_tag,
)
from rlab.paths import BaseLayout, meta_file
from rlab.spec.loading import load_spec
from tests.cli.harness import run_main
from tests.orchestrate.helpers import fake_torchrun, make_checkpoint, spec_args

BASE = Path("/data/nanochat")
RESULTS = Path("/data/results")
REPLICATED = "base: {tag: d20, step: 7}\ntrain: {steps: 5, seeds: 2, zero_shot: true, replicate_base: true}\n"


def spec_file(tmp_path: Path, text: str = REPLICATED) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_seed_i_and_its_zero_shot_arm_start_from_base_i(tmp_path):
    spec = load_spec(spec_file(tmp_path), base_dir=BASE, results_dir=RESULTS, variants="rope,yarn")
    runs = plan_continue(spec)
    starts = {r.tag: (r.lineage.parent_tag, r.train.seed, r.train.steps) for r in runs}
    assert starts == {
        "d20-rope": ("d20", 42, 5),
        "d20-rope-seed1": ("d20-seed1", 43, 5),
        "d20-rope-zeroshot": ("d20", 42, 0),
        "d20-rope-seed1-zeroshot": ("d20-seed1", 43, 0),
        "d20-yarn": ("d20", 42, 5),
        "d20-yarn-seed1": ("d20-seed1", 43, 5),
        "d20-yarn-zeroshot": ("d20", 42, 0),
        "d20-yarn-seed1-zeroshot": ("d20-seed1", 43, 0),
    }
    assert {r.lineage.parent_step for r in runs} == {7}
    assert base_tags(spec) == ["d20", "d20-seed1"]
    assert experiment_tags(spec) == ["d20", "d20-seed1", *(r.tag for r in runs)]  # both bases are references
    # every tag's name says its variant; each base replicate is a base arm with its own CORE file
    assert all(variant_of_tag(spec, r.tag) == r.variant for r in runs)
    assert (variant_of_tag(spec, "d20-seed1"), arm_label(spec, "d20-seed1")) == ("base", "base-seed1")
    assert plan_eval(spec, "d20-seed1", variant="base").core_csv.name == "results_base-seed1.csv"
    assert plan_eval(spec, "d20-yarn-seed1-zeroshot").core_csv.name == "results_yarn-seed1-zeroshot.csv"
    # the zero-shot runs are valid run configs on their own (one seed, nothing replicated)
    assert all(not r.train.replicate_base for r in runs if r.train.steps == 0)
    # without the switch, every seed continues the one base (as before)
    one = load_spec(spec_file(tmp_path, REPLICATED.replace("replicate_base: true", "replicate_base: false")))
    assert {
        r.lineage.parent_tag for r in plan_continue(one.model_copy(update={"variants": spec.variants}))
    } == {"d20"}


def test_replicate_base_needs_two_seeds(tmp_path):
    with pytest.raises(
        SpecError, match=r"train.replicate_base: needs seeds >= 2, one base per seed \(got seeds 1\)"
    ):
        load_spec(spec_file(tmp_path), seeds=1)


@pytest.mark.parametrize("name", ["seed1", "seed0", "seed01", "pi-seed2", "pi-zeroshot"])
def test_variant_names_that_a_replicate_or_zero_shot_tag_would_reuse_are_refused(tmp_path, name):
    """`d20-seed1` is base replicate 1: a variant named seed1 would share (and overwrite) its tag; `d20-pi-seed2`
    is replicate 2 of variant pi, so a variant named pi-seed2 would be read back as pi."""
    text = f"base: {{tag: d20, step: 7}}\nvariants: {{{name}: {{variant: pi, factor: 2}}}}\n"
    with pytest.raises(SpecError, match=f"variant name '{name}' is reserved"):
        load_spec(spec_file(tmp_path, text))


@pytest.mark.parametrize("name", ["seed", "seeded", "seed1a", "pi-seed", "pi-seed2x", "reseed1"])
def test_every_variant_name_the_spec_accepts_reads_back_from_its_tags(tmp_path, name):
    """The spec reserves exactly what the planner reads as a replicate suffix (one pattern): an accepted name
    near it is its own variant, in every replicate and zero-shot tag, never a base replicate."""
    text = "base: {tag: d20, step: 7}\ntrain: {steps: 5, seeds: 3, zero_shot: true}\n"
    spec = load_spec(spec_file(tmp_path, text + f"variants: {{{name}: {{variant: pi, factor: 2}}}}\n"))
    runs = plan_continue(spec)
    assert [r.tag for r in runs] == [
        f"d20-{name}",
        f"d20-{name}-seed1",
        f"d20-{name}-seed2",
        f"d20-{name}-zeroshot",
    ]
    assert {variant_of_tag(spec, r.tag) for r in runs} == {name}
    assert not any(is_base_tag(spec, r.tag) for r in runs)
    assert is_base_tag(spec, "d20-seed1") and variant_of_tag(spec, "d20-seed1") == "base"


def test_pretrain_makes_one_base_per_seed(tmp_path):
    text = "base: {tag: d6}\npretrain: {train: {steps: 3, seq_len: 64, seed: 7}}\n"
    spec = load_spec(spec_file(tmp_path, text), base_dir=BASE, results_dir=RESULTS, pretrain_seeds=3)
    runs = plan_bases(spec)
    assert [(r.tag, r.train.seed, r.init.kind) for r in runs] == [
        ("d6", 7, "scratch"),
        ("d6-seed1", 8, "scratch"),
        ("d6-seed2", 9, "scratch"),
    ]
    assert [r.run_dir.name for r in runs] == ["d6", "d6-seed1", "d6-seed2"]
    # train.replicate_base asks for one base per continued seed, without --seeds on pretrain
    replicated = load_spec(
        spec_file(tmp_path, text + "train: {seeds: 2, replicate_base: true}\n"),
        base_dir=BASE,
        results_dir=RESULTS,
    )
    assert [r.tag for r in plan_bases(replicated)] == ["d6", "d6-seed1"]
    assert [r.tag for r in plan_bases(load_spec(spec_file(tmp_path, text)))] == ["d6"]


def _write_spec(tmp_path: Path, pretrain: bool) -> Path:
    text = REPLICATED.replace("step: 7", "step: 20") + "variants: {yarn: {variant: yarn}}\n"
    return spec_file(tmp_path, text + ("pretrain: {train: {steps: 20, seq_len: 64}}\n" if pretrain else ""))


def test_a_missing_base_replicate_is_one_line_naming_it_and_the_command(tmp_path):
    base = tmp_path / "base"
    make_checkpoint(base, "d20", steps=(20,))
    for pretrain, hint in (
        (
            True,
            "Make the bases with `rlab pretrain --seeds 2` on this spec, or set train.replicate_base: false.",
        ),
        (False, f"Train it into {BaseLayout(base).checkpoint_dir('d20-seed1')}, or set train.replicate_base"),
    ):
        spec = _write_spec(tmp_path, pretrain)
        result = run_main("continue", *spec_args(spec, base, tmp_path))
        assert result.code == 1 and result.exception is None, result.text
        text = " ".join(result.err.split())
        assert (
            "Base replicate 'd20-seed1' has no checkpoint at step 20 (train.replicate_base: seed 1 continues it)."
            in text
        )
        assert hint in text
    assert not BaseLayout(base).checkpoint_dir("d20-yarn").exists()  # nothing was cloned


def test_dry_run_shows_which_base_each_tag_starts_from(tmp_path):
    base = tmp_path / "base"
    make_checkpoint(base, "d20", steps=(20,))
    make_checkpoint(base, "d20-seed1", steps=(20,), inputs=False)
    spec = _write_spec(tmp_path, pretrain=True)
    common = [*spec_args(spec, base, tmp_path / "res")]
    result = run_main("continue", *common, "--dry-run")
    assert result.code == 0, result.text
    rows = {
        line.split()[0]: line.split()[1] for line in result.out.splitlines() if line.startswith("d20-yarn")
    }
    assert rows == {
        "d20-yarn": "d20",
        "d20-yarn-seed1": "d20-seed1",
        "d20-yarn-zeroshot": "d20",
        "d20-yarn-seed1-zeroshot": "d20-seed1",
    }
    planned = json.loads(run_main("continue", *common, "--dry-run", "--json").out)
    assert {t["tag"]: t["from"] for t in planned["tags"]}["d20-yarn-seed1"] == "d20-seed1@20"
    # a base replicate of another context length cannot be paired with the base
    meta = meta_file(BaseLayout(base).checkpoint_dir("d20-seed1"), 20)
    record = json.loads(meta.read_text())
    record["model_config"]["sequence_len"] *= 2
    meta.write_text(json.dumps(record))
    result = run_main("continue", *common, "--dry-run")
    assert result.code == 1 and "Base replicate 'd20-seed1' has context" in " ".join(result.err.split())


def test_continue_clones_base_i_and_eval_all_takes_both_bases_as_references(tmp_path):

    base = tmp_path / "base"
    make_checkpoint(base, "d20", steps=(20,))
    make_checkpoint(base, "d20-seed1", steps=(20,), inputs=False)
    spec = spec_file(
        tmp_path,
        REPLICATED.replace("step: 7", "step: 20")
        + f"variants: {{yarn: {{variant: yarn}}}}\nlaunch: {{torchrun: {fake_torchrun(tmp_path)}}}\n",
    )
    common = [*spec_args(spec, base, tmp_path / "res")]
    result = run_main("continue", *common, "--no-control")  # the lineage of yarn's clones is the point here
    assert result.code == 0, result.text
    layout = BaseLayout(base)
    lineage = {
        tag: json.loads(meta_file(layout.checkpoint_dir(tag), 20).read_text())["lineage"]["parent_tag"]
        for tag in ("d20-yarn", "d20-yarn-seed1", "d20-yarn-zeroshot", "d20-yarn-seed1-zeroshot")
    }
    assert lineage == {
        "d20-yarn": "d20",
        "d20-yarn-seed1": "d20-seed1",
        "d20-yarn-zeroshot": "d20",
        "d20-yarn-seed1-zeroshot": "d20-seed1",
    }
    planned = run_main("eval", *common, "--all", "--dry-run", "--json")
    assert planned.code == 0, planned.text
    configs = {job["tag"]: job["config"] for job in json.loads(planned.out)["tags"]}
    assert list(configs) == ["d20", "d20-seed1", *lineage]
    for tag in (
        "d20",
        "d20-seed1",
    ):  # each base replicate is a base arm at the step the variants started from
        assert (configs[tag]["variant"], configs[tag]["step"]) == ("base", 20)
    assert Path(configs["d20-seed1"]["core_csv"]).name == "results_base-seed1.csv"
