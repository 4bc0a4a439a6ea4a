"""CORE: prompt rendering and spans on real bundle rows, batched == one-at-a-time, aggregation."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from rlab.evals.core.bundle import load_bundle, load_task_data
from rlab.evals.core.metric import (
    CoreResult,
    TaskResult,
    centered_accuracy,
    evaluate_core,
    evaluate_task,
    score_task,
    subsample,
)
from rlab.evals.core.packed import (
    FORWARD_OVERHEAD,
    _row_cost,
    pack_example,
    plan_rows,
    score_examples_batched,
    split_batches,
)
from rlab.evals.core.prompts import (
    crop_left,
    fewshot_indices,
    prepare_example,
    prepare_examples,
    render_prompts,
)
from rlab.evals.core.reference import _forward_rows
from rlab.spec.rope import RopeSpec

from .conftest import random_gpt


def test_multiple_choice_zero_shot_copa(bundle, tokenizer):
    task = bundle.task("copa")
    rows = load_task_data(task)
    prompts = render_prompts(task, rows, 0)
    assert prompts == [
        "The man turned on the faucet, therefore the toilet filled with water.",
        "The man turned on the faucet, therefore water flowed from the spout.",
    ]
    ex = prepare_example(tokenizer, task, rows, 0)
    assert ex.gold == 1 and ex.tokens[0][0] == tokenizer.bos_token_id
    for toks, s, e, choice in zip(ex.tokens, ex.starts, ex.ends, rows[0]["choices"]):
        assert e == len(toks)
        # the span is what follows the common prefix: delimiter + choice (the space merges into a token)
        assert tokenizer.decode(toks[s:e]) == " " + choice
        assert (
            tokenizer.decode(toks[1:s]) + tokenizer.decode(toks[s:e])
            == prompts[rows[0]["choices"].index(choice)]
        )
    assert ex.starts[0] == ex.starts[1]


def test_multiple_choice_few_shot_arc(bundle):
    task = bundle.task("arc_easy")
    rows = load_task_data(task)
    shots = fewshot_indices(len(rows), 5, 10)
    assert len(shots) == 10 and 5 not in shots and shots == fewshot_indices(len(rows), 5, 10)
    prompts = render_prompts(task, rows, 5)
    first = rows[shots[0]]
    assert prompts[0].startswith(f"{first['query']}\nAnswer: {first['choices'][first['gold']]}\n\n")
    for p, choice in zip(prompts, rows[5]["choices"]):
        assert p.endswith(f"\n\n{rows[5]['query']}\nAnswer: {choice}")
        assert p.count("\nAnswer: ") == 11


def test_schema_winograd(bundle, tokenizer):
    task = bundle.task("winograd")
    rows = load_task_data(task)
    assert render_prompts(task, rows, 0) == [
        "The city councilmen refused the demonstrators a permit because the city councilmen feared violence.",
        "The city councilmen refused the demonstrators a permit because the demonstrators feared violence.",
    ]
    ex = prepare_example(tokenizer, task, rows, 0)
    spans = [tokenizer.decode(t[s:e]) for t, s, e in zip(ex.tokens, ex.starts, ex.ends)]
    assert spans[0] == spans[1] and "feared violence." in rows[0]["continuation"]
    assert rows[0]["continuation"].endswith(spans[0].strip())


def test_language_modeling_operators(bundle, tokenizer):
    task = bundle.task("bigbench_operators")
    rows = load_task_data(task)
    without, with_ = render_prompts(task, rows, 3)
    item = rows[3]
    assert with_.endswith(f"{item['context'].strip()} {item['continuation']}")
    assert without == with_[: -len(item["continuation"])].strip()
    assert without.count("\n\n") >= 10  # ten solved examples before it
    ex = prepare_example(tokenizer, task, rows, 3)
    assert len(ex.tokens) == 1
    assert tokenizer.decode(ex.tokens[0][ex.starts[0] : ex.ends[0]]).strip() == item["continuation"]


def test_crop_left_shifts_spans():
    toks, starts, ends = crop_left([[1, 2, 3, 4, 5, 6], [1, 2, 3]], [4, 2], [6, 3], 4)
    assert toks == [[3, 4, 5, 6], [1, 2, 3]]
    assert starts == [2, 2] and ends == [4, 3]


def test_long_prompts_are_cropped_to_the_context(bundle, tokenizer):
    task = bundle.task("hellaswag")
    rows = load_task_data(task)
    full = prepare_example(tokenizer, task, rows, 0)
    cropped = prepare_example(tokenizer, task, rows, 0, max_seq_len=48)
    assert max(len(t) for t in full.tokens) > 48 and max(len(t) for t in cropped.tokens) <= 48
    for ft, fs, ct, cs, ce in zip(full.tokens, full.starts, cropped.tokens, cropped.starts, cropped.ends):
        assert ct == ft[-48:] and ct[cs:ce] == ft[fs:]
    assert cropped.cropped and not full.cropped
    assert not prepare_example(tokenizer, task, rows, 0, max_seq_len=max(len(t) for t in full.tokens)).cropped


def test_a_task_score_counts_the_examples_cropped_to_the_context(bundle, tokenizer, tiny_gpt):
    """What CORE's eval settings compare across arms (`cropped_to`): none cropped at a long enough context."""

    task = bundle.task("copa")
    rows, order = subsample(load_task_data(task), 8)
    longest = max(len(t) for i in range(8) for t in prepare_example(tokenizer, task, rows, i).tokens)
    short = score_task(tiny_gpt, tokenizer, task, rows, "cpu", source_indices=order, max_seq_len=longest - 1)
    roomy = score_task(tiny_gpt, tokenizer, task, rows, "cpu", source_indices=order, max_seq_len=longest)
    assert 1 <= short.cropped <= 8 and roomy.cropped == 0 and len(roomy.correct) == 8


def test_centered_accuracy_formula():
    assert centered_accuracy(0.25, 25.0) == 0.0
    assert centered_accuracy(1.0, 25.0) == 1.0
    assert math.isclose(centered_accuracy(0.6, 50.0), 0.2)
    assert math.isclose(centered_accuracy(0.3, 0.0), 0.3)


def test_subsample_is_deterministic():
    rows = [{"i": i} for i in range(50)]
    a, ia = subsample(rows, 10)
    b, ib = subsample(rows, 10)
    assert a == b and ia == ib and len(set(ia)) == 10
    full, order = subsample(rows, None)
    assert order[:10] == ia and sorted(order) == list(range(50))


@pytest.mark.parametrize(
    "label",
    ["copa", "winogrande", "arc_challenge", "hellaswag", "piqa", "bigbench_operators", "lambada_openai"],
)
def test_batched_equals_one_at_a_time(bundle, tokenizer, tiny_gpt, label):
    task = bundle.task(label)
    rows, order = subsample(load_task_data(task), 16)
    kwargs = dict(source_indices=order, max_seq_len=64)
    batched = evaluate_task(tiny_gpt, tokenizer, task, rows, "cpu", batch_tokens=512, **kwargs)
    single = evaluate_task(tiny_gpt, tokenizer, task, rows, "cpu", batched=False, **kwargs)
    assert batched == single
    assert len(batched) == 16


def test_pack_example_shares_the_prefix(bundle, tokenizer):
    task = bundle.task("arc_easy")  # 10-shot: the choices share a long prompt
    ex = prepare_example(tokenizer, task, load_task_data(task), 2)
    pack = pack_example(ex)
    shared = ex.starts[0]
    assert (
        len(pack.tokens)
        == shared + sum(len(t) - shared for t in ex.tokens)
        < sum(len(t) for t in ex.tokens) / 2
    )
    for j, (row, s, e) in enumerate(zip(ex.tokens, ex.starts, ex.ends)):
        idx = [i for i, g in enumerate(pack.segments) if g in (0, j + 1)]
        assert [pack.tokens[i] for i in idx] == row and [pack.positions[i] for i in idx] == list(
            range(len(row))
        )
        assert pack.targets[j] == row[s:e] and pack.score_at[j] == idx[s - 1 : e - 1]


def _assert_scores_match_reference(model, tokenizer, examples, batch_tokens):
    """Per-sequence mean span losses of the packed, gathered path vs full logits one example at a
    time: equal up to fp32 summation order; argmax hits exactly."""
    bos = tokenizer.bos_token_id
    batched = score_examples_batched(model, examples, bos, "cpu", batch_tokens)
    assert len(batched) == len(examples)
    for ex, got in zip(examples, batched):
        ref = _forward_rows(model, ex.tokens, ex.starts, ex.ends, bos, "cpu")
        assert [g[1] for g in got] == [r[1] for r in ref]
        assert [g[0] for g in got] == pytest.approx([r[0] for r in ref], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize(
    "label, max_seq_len, packed",
    [
        ("arc_easy", 2048, True),
        ("hellaswag_zeroshot", 2048, True),
        ("hellaswag", 128, False),
        ("winograd", 256, True),
        ("bigbench_operators", 256, True),
    ],
)
def test_packed_span_losses_match_the_reference(bundle, tokenizer, tiny_gpt, label, max_seq_len, packed):
    """Uncropped few-shot prompts share their prefix (one packed row per example); prompts cropped
    from the left share none (one plain row per sequence)."""
    task = bundle.task(label)
    rows, _ = subsample(load_task_data(task), 12)  # 10-shot tasks draw from 11+ rows
    examples = [prepare_example(tokenizer, task, rows, i, max_seq_len=max_seq_len) for i in range(6)]
    plans = [plan_rows(ex, tiny_gpt.config.n_embd) for ex in examples]
    assert all((len(p) == 1) == packed for p in plans)
    _assert_scores_match_reference(tiny_gpt, tokenizer, examples, batch_tokens=4096)


def test_prompts_cropped_at_the_same_token_share_a_row(bundle, tokenizer, tiny_gpt):
    """Left-cropped 10-shot prompts share their prefix only when cut at the same token: those
    sequences go in one packed row, the others alone; scores land on the right sequence."""
    task = bundle.task("arc_easy")
    rows, order = subsample(load_task_data(task), 12)
    examples = [prepare_example(tokenizer, task, rows, i, max_seq_len=64) for i in range(12)]
    plans = [plan_rows(ex, tiny_gpt.config.n_embd) for ex in examples]
    mixed = [p for ex, p in zip(examples, plans) if any(1 < len(r.seq_ids) < len(ex.tokens) for r in p)]
    assert mixed, "expected some examples with a partial group"
    for ex, plan in zip(examples, plans):
        assert sorted(j for r in plan for j in r.seq_ids) == list(range(len(ex.tokens)))
    _assert_scores_match_reference(tiny_gpt, tokenizer, examples, batch_tokens=512)
    kwargs = dict(source_indices=order, max_seq_len=64)
    assert evaluate_task(tiny_gpt, tokenizer, task, rows, "cpu", batch_tokens=512, **kwargs) == evaluate_task(
        tiny_gpt, tokenizer, task, rows, "cpu", batched=False, **kwargs
    )


def test_dynamic_ntk_beyond_l0_scores_each_example_at_its_own_length(bundle, tokenizer):
    """dynamic-ntk's frequencies depend on the sequence length above L0: the batched path must
    evaluate each example at the length the reference pads it to, not at the batch's width."""

    model = random_gpt(
        tokenizer.vocab_size, sequence_len=32, rope=RopeSpec(variant="dynamic-ntk", factor=4.0)
    )
    task = bundle.task("hellaswag_zeroshot")
    rows, _ = subsample(load_task_data(task), 12)
    examples = [prepare_example(tokenizer, task, rows, i, max_seq_len=128) for i in range(12)]
    _assert_scores_match_reference(model, tokenizer, examples, batch_tokens=1024)


def test_core_partial_result(bundle_copy, tokenizer, tiny_gpt, caplog):
    b = load_bundle(bundle_copy)
    with caplog.at_level("INFO"):
        res = evaluate_core(tiny_gpt, tokenizer, b, "cpu", max_per_task=8, max_seq_len=64)
    m = res.metrics()
    assert m["partial"] is True and m["missing_tasks"] == ["squad"]
    assert set(m["tasks"]) == {"copa", "winograd"}
    assert math.isclose(m["core"], (m["tasks"]["copa"]["centered"] + m["tasks"]["winograd"]["centered"]) / 2)
    assert "ci_low" not in m  # intervals are the report's, from core_examples.csv
    assert all(0.0 <= t["baseline"] < 1.0 for t in m["tasks"].values())  # fractions, never percent
    assert all(t["n"] == 8 for t in m["tasks"].values())


def test_core_mean_by_hand(bundle):
    copa, lsat = bundle.task("copa"), bundle.task("agi_eval_lsat_ar")
    res = CoreResult(
        [TaskResult(copa, [True] * 3 + [False], [0, 1, 2, 3]), TaskResult(lsat, [True, False], [0, 1])]
    )
    c1, c2 = (0.75 - 0.5) / 0.5, (0.5 - 0.2) / 0.8
    assert math.isclose(res.core(), (c1 + c2) / 2)


def _batches_cost(widths, sizes, n_embd):

    cost, i = 0.0, 0
    for size in sizes:
        cost += size * _row_cost(widths[i], n_embd) + FORWARD_OVERHEAD
        i += size
    return cost


def test_split_batches_is_the_cheapest_feasible_split():
    """Against brute force over every split of small sorted width lists."""

    rng = random.Random(0)
    for _ in range(200):
        n, budget = rng.randint(1, 8), rng.choice([64, 256, 1024])
        widths = sorted((rng.randint(1, 300) for _ in range(n)), reverse=True)
        sizes = split_batches(widths, budget, 32)
        assert sum(sizes) == n and all(s >= 1 for s in sizes)
        starts = list(itertools.accumulate([0] + sizes[:-1]))
        assert all(s == 1 or s * widths[i] <= budget for s, i in zip(sizes, starts))
        best = math.inf
        for cuts in itertools.product([False, True], repeat=n - 1):
            split, size = [], 1
            for c in cuts:
                if c:
                    split.append(size)
                    size = 1
                else:
                    size += 1
            split.append(size)
            first = list(itertools.accumulate([0] + split[:-1]))
            if all(s == 1 or s * widths[i] <= budget for s, i in zip(split, first)):
                best = min(best, _batches_cost(widths, split, 32))
        assert _batches_cost(widths, sizes, 32) == pytest.approx(best)
    assert split_batches([], 100, 32) == []


def test_prepare_examples_equals_prepare_example(bundle, tokenizer):
    """One tokenizer call for a task's prompts gives each example exactly what it gets alone."""

    for label in ("arc_easy", "winograd", "lambada_openai"):
        task = bundle.task(label)
        rows, order = subsample(load_task_data(task), 12)
        mine = [1, 4, 7, 10]  # a strided slice, as one rank of four scores
        many = prepare_examples(tokenizer, task, rows, mine, source_indices=order, max_seq_len=64)
        one = [prepare_example(tokenizer, task, rows, i, source_index=order[i], max_seq_len=64) for i in mine]
        assert many == one and [ex.source_index for ex in many] == [order[i] for i in mine]
