"""`rlab eval` with the default eval list on nanochat's own base dir, with no preparation step before it.

Tiny sizes so it fits the default suite; the eval list, the long-document build and the unit counts are the
defaults' own. The reference checkpoint is nanochat 92d63d4's d2 (`$RLAB_NANOCHAT_REFERENCE/head`).
"""

from __future__ import annotations

import shutil

from rlab.paths import BaseLayout, ExperimentLayout
from rlab.records.eval_doc import read_eval_doc
from rlab.spec.eval import EvalSpec
from tests.cli.harness import run_main
from tests.conftest import EVAL_BUNDLE_DIR, nanochat_reference_path, needs_nanochat_reference
from tests.orchestrate.helpers import spec_args

REFERENCE = nanochat_reference_path("head")
SPEC = f"""name: ref
base: {{tag: d2, step: 20}}
eval: {{bpb_tokens: 1024, lengths: [128, 256], length_tokens: 256, core_bundle: {EVAL_BUNDLE_DIR},
        max_per_task: 11, passkey_depths: [0.5], passkey_trials: 3, ruler_trials: 2, device_batch_size: 4}}
launch: {{nproc_per_node: 1}}
"""


@needs_nanochat_reference(REFERENCE)
def test_default_evals_on_nanochat_s_base_dir_without_preparation(tmp_path):
    base = tmp_path / "base"
    shutil.copytree(REFERENCE, base)
    assert not BaseLayout(base).long_docs_dir.exists()  # nothing prepared: rlab eval builds what it needs
    (spec := tmp_path / "ref.yaml").write_text(SPEC)
    results = tmp_path / "results"

    done = run_main(
        "eval",
        *spec_args(spec, base, results),
        "--tag",
        "d2",
    )
    assert done.code == 0, done.out + done.err

    doc = read_eval_doc(ExperimentLayout(results, "ref").eval_json("d2"))
    assert set(EvalSpec().evals) == {"bpb", "bpb_length", "core", "passkey", "ruler"}
    for name in EvalSpec().evals:
        assert doc.section(name) is not None, f"{name} missing from eval.json"
    bpb_length = doc.section("bpb_length")
    assert [row.length for row in bpb_length.lengths] == [128, 256]
    assert bpb_length.units == 4 and bpb_length.docs == 4  # 256 targets in blocks of 64, one per document
    passkey = doc.section("passkey")
    assert {(c.length, c.n) for c in passkey.cells} == {(128, 3), (256, 3)}
    ruler = doc.section("ruler")
    assert {(t.task, t.length) for t in ruler.by_task} | {(s.task, s.length) for s in ruler.skipped} == {
        (task, n) for task in EvalSpec().ruler_tasks for n in (128, 256)
    }
    assert ruler.by_task and all(t.n == 2 for t in ruler.by_task)
