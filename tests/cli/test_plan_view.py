"""The dry-run plan table in a narrow terminal: names stay whole, the numbers' headers give way first."""

from __future__ import annotations

from tests.cli.harness import run_main
from tests.orchestrate.helpers import make_checkpoint, spec_args

REPLICATED = (
    "base: {tag: d20, step: 20}\n"
    "train: {steps: 5, seeds: 2, zero_shot: true, replicate_base: true}\n"
    "pretrain: {train: {steps: 20, seq_len: 64}}\n"
    "variants: {yarn: {variant: yarn}, dynamic-ntk: {variant: dynamic-ntk, factor: 4}}\n"
)


def test_replicated_bases_at_80_columns_keep_every_tag_and_rope_word_whole(tmp_path):
    """The tag and from columns of replicated bases left rich 4 characters for the rope (`rope(b`, `ase=ck`);
    now the tok/step header takes two lines, a tag's "(control)" and the rope wrap at spaces, nothing is cut."""
    base = tmp_path / "base"
    make_checkpoint(base, "d20", steps=(20,))
    make_checkpoint(base, "d20-seed1", steps=(20,), inputs=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text(REPLICATED)
    result = run_main("continue", *spec_args(spec, base, tmp_path / "res"), "--dry-run", columns=80)
    assert result.code == 0, result.text
    table = result.out.split("\nbase dir:")[0].splitlines()[1:]
    assert table and max(len(line) for line in table) <= 80
    assert table[0].split() == ["tok/"] and table[1].split()[-1] == "step"
    cells = [line.split() for line in table[3:]]
    assert {"d20-yarn-seed1-zeroshot", "d20-dynamic-ntk-seed1-zeroshot"} <= {row[0] for row in cells}
    words = {word for row in cells for word in row}
    assert {"rope(base=ckpt)", "yarn(s=4,", "L0=256,", "beta=32/1)", "dynamic-ntk(s=4,", "(control)"} <= words
    yarn = next(row for row in cells if row[0] == "d20-yarn-seed1")
    assert yarn == ["d20-yarn-seed1", "d20-seed1", "yarn(s=4,", "L0=256,", "1024", "5", "8,192"]
    # wide enough, the table is as it always was: one line a tag, three spaces between columns
    wide = run_main("continue", *spec_args(spec, base, tmp_path / "res"), "--dry-run", columns=200)
    assert "d20-rope-seed1-zeroshot (control)   d20-seed1   rope(base=ckpt)" in wide.out
    assert "seq   steps   tok/step" in wide.out
