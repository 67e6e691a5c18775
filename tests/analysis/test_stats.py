"""Intervals, pass@k / pass^k, run summaries and paired comparisons."""

from __future__ import annotations

import tracemalloc
from itertools import combinations

import numpy as np
import pytest

from maslab.analysis import stats
from maslab.analysis.stats import (
    bootstrap_ci,
    clustered_interval,
    mcnemar_exact,
    paired_comparison,
    paired_permutation_test,
    pass_at_k,
    pass_hat_k,
    summarize,
    wilson_interval,
)
from maslab.bench.evaluation import Score
from maslab.store.run_store import ResultRecord


def record(task: str, correct: bool, repeat: int = 0, **fields) -> ResultRecord:
    score = Score(value=float(correct), correct=correct, extracted="x")
    return ResultRecord(task_id=task, repeat=repeat, status="ok", score=score, **fields)


def test_wilson_known_values():
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.490, abs=5e-4)
    assert hi == pytest.approx(0.943, abs=5e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(0, 5)[0] == pytest.approx(0.0, abs=1e-12)
    assert wilson_interval(5, 5)[1] == pytest.approx(1.0)
    assert wilson_interval(8, 10, 0.99)[0] < lo


def brute_force(n: int, c: int, k: int) -> tuple[float, float]:
    """(any, all) of k-subsets of n outcomes with c successes, by enumeration."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(combinations(outcomes, k))
    return (
        sum(map(any, subsets)) / len(subsets),
        sum(map(all, subsets)) / len(subsets),
    )


@pytest.mark.parametrize("n", range(1, 8))
def test_pass_at_k_and_pass_hat_k_match_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            any_, all_ = brute_force(n, c, k)
            assert pass_at_k(n, c, k) == pytest.approx(any_)
            assert pass_hat_k(n, c, k) == pytest.approx(all_)


def test_pass_at_k_rejects_bad_arguments():
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError):
        pass_hat_k(3, 1, 4)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_pass_at_k_is_stable_for_large_n():
    assert pass_at_k(1000, 1, 1) == pytest.approx(0.001)
    assert 0 < pass_hat_k(1000, 999, 500) < 1


def test_mcnemar_exact():
    assert mcnemar_exact(1, 9) == pytest.approx(0.0215, abs=5e-5)
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0


def test_bootstrap_is_deterministic_and_covers_the_mean():
    values = np.random.default_rng(1).normal(size=50)
    ci = bootstrap_ci(values, seed=3)
    assert ci == bootstrap_ci(values, seed=3)
    assert ci != bootstrap_ci(values, seed=4)
    assert ci[0] < values.mean() < ci[1]
    lo, hi = bootstrap_ci(values, np.median, confidence=0.5)
    assert ci[0] < lo < hi < ci[1]
    with pytest.raises(ValueError):
        bootstrap_ci([])


def one_array_bootstrap(values, statistic, n_resamples: int, seed: int) -> tuple[float, float]:
    """The bootstrap before batching: one (n_resamples, n) index array."""
    rng = np.random.default_rng(seed)
    samples = values[rng.integers(0, values.size, size=(n_resamples, values.size))]
    alpha = (1 - 0.95) / 2
    lo, hi = np.quantile([statistic(s) for s in samples], [alpha, 1 - alpha])
    return (float(lo), float(hi))


@pytest.mark.parametrize("batch_bytes", [1, 12 * 37 * 5, 2**30])
@pytest.mark.parametrize("statistic", [np.mean, np.median])
def test_bootstrap_batches_leave_the_interval_unchanged(monkeypatch, batch_bytes, statistic):
    values = np.random.default_rng(2).normal(size=37)
    monkeypatch.setattr(stats, "_BATCH_BYTES", batch_bytes)  # 1, 5 or all resamples a batch
    ci = bootstrap_ci(values, statistic, n_resamples=301, confidence=0.95, seed=9)
    assert ci == one_array_bootstrap(values, statistic, 301, 9)


def test_bootstrap_narrows_with_more_tasks():
    values = np.random.default_rng(4).integers(0, 2, size=4000).astype(float)
    widths = []
    for n in (100, 400, 4000):
        lo, hi = bootstrap_ci(values[:n], seed=1)
        assert lo < values[:n].mean() < hi
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]


def test_bootstrap_memory_is_bounded():
    values = np.random.default_rng(5).normal(size=200_000)
    tracemalloc.start()
    try:
        bootstrap_ci(values, n_resamples=100)  # one array of them would take 320 MB
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20


def runs(outcomes: list[list[bool]]) -> list[ResultRecord]:
    """Records of tasks t0, t1, ...; ``outcomes[i]`` holds task i's correctness per repeat."""
    return [
        record(f"t{task}", ok, repeat)
        for task, repeats in enumerate(outcomes)
        for repeat, ok in enumerate(repeats)
    ]


def test_clustered_interval_by_hand():
    # means [1, .5, .5, 0] of 2 repeats (8 records): p = .5, SE² = (.25 + 0 + 0 + .25) / (4 * 3)
    # = 1/24, n_eff = .25 / (1/24) = 6 -> Wilson at 3 of 6: centre .5,
    # half = 1.95996 * sqrt(.25/6 + 3.84146/144) / (1 + 3.84146/6) = .31238
    assert clustered_interval([1, 0.5, 0.5, 0], 8) == pytest.approx((0.18762, 0.81238), abs=1e-5)
    assert clustered_interval([1, 0.5, 0.5, 0], 8) == pytest.approx(wilson_interval(3, 6))
    # [1, 1, 0, 0]: SE² = 4 * .25 / 12 = 1/12, n_eff = .25 * 12 = 3, raised to T = 4: 2 of 4
    assert clustered_interval([1, 1, 0, 0], 8) == pytest.approx(wilson_interval(2, 4))
    # seven tasks at .5 and one at 1, 2 repeats each (16 records): p = 4.5/8 = .5625,
    # Σ(p_t - p)² = 7 * .0625² + .4375² = .21875, SE² = .21875 / 56 = .00390625,
    # n_eff = .5625 * .4375 / .00390625 = 63, capped at 16 records: 9 of 16
    assert clustered_interval([0.5] * 7 + [1], 16) == pytest.approx(wilson_interval(9, 16))
    # no spread between tasks, or a single task: n_eff = T
    assert clustered_interval([1 / 3] * 3, 9) == pytest.approx(wilson_interval(1, 3))
    assert clustered_interval([1.0], 5) == pytest.approx(wilson_interval(1, 1))
    assert clustered_interval([], 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        clustered_interval([1, 0], 1)


def test_one_repeat_gives_the_wilson_interval_over_tasks():
    s = summarize(runs([[True], [False], [True], [True], [False]]))
    assert s.ci == pytest.approx(wilson_interval(3, 5))
    assert s.ci == pytest.approx(wilson_interval(s.correct, s.tasks))


@pytest.mark.parametrize("repeats", [3, 10])
def test_identical_repeats_do_not_narrow_the_interval(repeats):
    # 14 of 40 tasks (i % 3 == 0) always right: repeating them adds no information
    outcome = [i % 3 == 0 for i in range(40)]
    once = summarize(runs([[ok] for ok in outcome]))
    many = summarize(runs([[ok] * repeats for ok in outcome]))
    assert many.n == 40 * repeats
    assert many.accuracy == pytest.approx(14 / 40)
    assert many.ci == pytest.approx(once.ci)
    assert once.ci == pytest.approx(wilson_interval(14, 40))


def test_clustered_interval_covers_under_task_heterogeneity():
    # 400 runs of 30 tasks x 5 repeats; task success rates ~ Beta(.5, .5), population mean .5
    rng = np.random.default_rng(0)
    clustered = naive = 0
    for _ in range(400):
        hits = rng.binomial(5, rng.beta(0.5, 0.5, size=30))
        lo, hi = clustered_interval(hits / 5, 150)
        clustered += lo <= 0.5 <= hi
        lo, hi = wilson_interval(int(hits.sum()), 150)
        naive += lo <= 0.5 <= hi
    assert clustered / 400 >= 0.9
    assert naive / 400 < 0.85


def test_summarize_averages_tasks_and_keeps_errors_and_unparsed_in_the_denominator():
    records = [
        record("a", True),
        record("a", False, repeat=1),
        record("a", False, repeat=2),
        record("b", True),
        record("b", True, repeat=1),
        ResultRecord(task_id="c", status="error", error="boom"),
        ResultRecord(task_id="c", repeat=1, status="ok", score=Score.unparsable()),
    ]
    s = summarize(records)
    assert (s.n, s.tasks, s.repeats, s.correct) == (7, 3, 2, 3)
    assert (s.errors, s.unparsed, s.budget_stopped) == (1, 1, 0)
    # task means 1/3, 1, 0 (record accuracy would be 3/7)
    assert s.accuracy == pytest.approx(4 / 9)
    assert s.ci == clustered_interval([1 / 3, 1, 0], 7)
    # repeat 0: a, b right, c wrong; 1: b right; 2: only task a, wrong
    assert s.per_repeat == pytest.approx((2 / 3, 1 / 3, 0))
    # per task (fewest repeats 2): a n=3 c=1, b n=2 c=2, c n=2 c=0
    assert s.pass_at(1) == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert s.pass_at(2) == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert s.pass_hat(2) == pytest.approx((0 + 1 + 0) / 3)
    with pytest.raises(ValueError):
        s.pass_at(3)


def test_per_repeat_and_repeat_spread():
    s = summarize(runs([[True, True], [True, False], [False, False]]))
    assert s.per_repeat == pytest.approx((2 / 3, 1 / 3))
    # sample std (ddof=1) of [2/3, 1/3]: |2/3 - 1/3| / sqrt(2) = .2357
    assert s.repeat_spread == pytest.approx((1 / 3, 2 / 3, 0.2357), abs=1e-4)
    assert summarize(runs([[True], [False]])).repeat_spread is None


def test_summarize_costs():
    records = [
        record(
            "a",
            True,
            usage={
                "calls": 2, "prompt_tokens": 100, "completion_tokens": 20,
                "cached_prompt_tokens": 50, "cached_completion_tokens": 10,
                "latency_s": 1.0, "estimated_calls": 1,
            },
            usage_by_model={
                "m1": {"prompt_tokens": 100, "completion_tokens": 20},
                "m2": {"cached_prompt_tokens": 50, "cached_completion_tokens": 10},
            },
            scoring_usage={"prompt_tokens": 7, "completion_tokens": 3, "cached_prompt_tokens": 5},
        ),
        record(
            "b",
            False,
            usage={"calls": 1, "prompt_tokens": 200, "completion_tokens": 40},
            usage_by_model={"m1": {"prompt_tokens": 200, "completion_tokens": 40}},
        ),
    ]  # fmt: skip
    retried = ResultRecord(
        task_id="b",
        status="error",
        error="boom",
        usage={"prompt_tokens": 30, "completion_tokens": 5, "cached_prompt_tokens": 1000},
        scoring_usage={"prompt_tokens": 1},
    )
    s = summarize(records, superseded=[retried])
    assert s.mean_tokens == pytest.approx((120 + 60 + 240) / 2)  # spent + cached
    assert s.mean_spent_tokens == pytest.approx((120 + 240) / 2)
    assert s.mean_cached_tokens == pytest.approx(60 / 2)
    assert s.mean_prompt_tokens == pytest.approx((100 + 50 + 200) / 2)
    assert s.mean_completion_tokens == pytest.approx((20 + 10 + 40) / 2)
    assert (s.mean_calls, s.mean_latency_s) == pytest.approx((1.5, 0.5))
    assert s.describe_model_time() == "0.50 s of model time"  # no server said it queued
    assert s.mean_scoring_tokens == pytest.approx((7 + 3 + 5) / 2)
    # spent only: method 360 + scoring 10 + superseded method 35 + superseded scoring 1
    assert s.total_served_tokens == 406
    assert s.estimated_calls == 1
    assert s.consumed_by_model == {"m1": (150, 30), "m2": (25, 5)}
    # m1: 150 * $1 + 30 * $2; m2: 25 * $10 + 5 * $30 -> $610 per 1M
    prices = {"m1": (1.0, 2.0), "m2": (10.0, 30.0)}
    assert s.cost(prices) == pytest.approx(610e-6)
    assert s.cost({"m1": (1.0, 2.0)}) is None
    plain = summarize(records)
    assert (plain.n, plain.accuracy, plain.ci) == (s.n, s.accuracy, s.ci)
    assert plain.total_served_tokens == 370


def test_summarize_counts_budget_stops_and_handles_no_records():
    budget = ResultRecord(task_id="a", status="budget", score=Score.unparsable())
    assert summarize([budget]).budget_stopped == 1
    empty = summarize([])
    assert (empty.n, empty.accuracy, empty.ci, empty.repeats) == (0, 0.0, (0.0, 1.0), 0)
    assert (empty.per_repeat, empty.repeat_spread, empty.cost({})) == ((), None, 0.0)


def test_paired_comparison_with_one_repeat_is_mcnemar():
    a_right = [True] * 5 + [False] * 5 + [True, False]
    b_right = [True] * 5 + [True] * 4 + [False] + [False, True]
    a = [record(f"t{i}", ok) for i, ok in enumerate(a_right)] + [record("only-a", True)]
    b = [record(f"t{i}", ok) for i, ok in enumerate(b_right)]
    b += [record("only-b", True), record("only-b", True, repeat=1)]
    p = paired_comparison(a, b, seed=7)
    assert (p.n, p.only_a, p.only_b) == (12, 1, 1)
    assert (p.test, p.repeats_a, p.repeats_b) == ("mcnemar", 1, 1)
    assert p.accuracy_a == pytest.approx(6 / 12)
    assert p.accuracy_b == pytest.approx(10 / 12)
    assert p.difference == pytest.approx(4 / 12)
    assert (p.a_only_correct, p.b_only_correct) == (1, 5)
    assert p.p_value == pytest.approx(mcnemar_exact(1, 5))
    assert p.ci[0] <= p.difference <= p.ci[1]
    assert p == paired_comparison(a, b, seed=7)
    with pytest.raises(ValueError, match="both runs"):
        paired_comparison(a[:1], b[-1:])


def test_paired_comparison_pairs_tasks_not_records():
    # per-task means a: 0, .5, 0, .5; b: .5, 1, 1, .5 -> diffs [.5, .5, 1, 0]
    a = runs([[False, False], [False, True], [False, False], [True, False]])
    b = runs([[True, False], [True, True], [True, True], [False, True]])
    a.append(record("only-a", True))
    b += [record("only-b", True), record("only-b2", False)]
    p = paired_comparison(a, b)
    assert (p.n, p.only_a, p.only_b) == (4, 1, 2)
    assert (p.test, p.repeats_a, p.repeats_b) == ("permutation", 2, 2)
    assert (p.accuracy_a, p.accuracy_b, p.difference) == pytest.approx((0.25, 0.75, 0.5))
    assert (p.a_only_correct, p.b_only_correct) == (0, 3)
    # the zero diff drops out; signs of (.5, .5, 1) give sums ±2 (+++, ---), ±1 (+-+, -++,
    # +--, -+-), 0 (++-, --+): 2 of 8 reach |observed sum| 2, p = .25
    assert p.p_value == pytest.approx(0.25)


def test_paired_comparison_with_unequal_repeats_uses_the_permutation_test():
    a = runs([[True], [False], [False]])
    b = runs([[True, True], [True, True], [True, False]])
    p = paired_comparison(a, b)
    assert (p.test, p.repeats_a, p.repeats_b, p.b_only_correct) == ("permutation", 1, 2, 2)
    # diffs [0, 1, .5]: signs of (1, .5) give |sums| 1.5, .5, .5, 1.5 -> p = 2/4
    assert p.p_value == pytest.approx(0.5)


def test_paired_comparison_without_differences():
    same = [record("t", True), record("u", False)]
    p = paired_comparison(same, same)
    assert (p.difference, p.ci, p.p_value) == (0.0, (0.0, 0.0), 1.0)
    repeated = runs([[True, False], [False, False]])
    assert paired_comparison(repeated, repeated).p_value == 1.0


def test_permutation_test_on_signs_is_the_exact_sign_test():
    # five +1, one -1, three ties: 2 * (1 + 6) / 2^6 = .21875 = McNemar(1, 5)
    assert paired_permutation_test([1] * 5 + [-1] + [0] * 3) == pytest.approx(0.21875)
    assert paired_permutation_test([1] * 5 + [-1]) == pytest.approx(mcnemar_exact(1, 5))
    # 16 nonzero diffs, still exact: only all-plus and all-minus reach the observed sum
    assert paired_permutation_test(range(1, 17)) == pytest.approx(2 / 2**16)
    with pytest.raises(ValueError):
        paired_permutation_test([])


def test_permutation_test_monte_carlo():
    diffs = [1] * 20 + [-1] * 10 + [0] * 5  # 30 nonzero: sampled, not enumerated
    p = paired_permutation_test(diffs, seed=3)
    assert p == paired_permutation_test(diffs, seed=3)
    assert p != paired_permutation_test(diffs, seed=4)
    assert p == pytest.approx(mcnemar_exact(10, 20), abs=0.01)  # the exact answer, .0987
    # 20 positive diffs: no random pattern of 20,000 is likely to reach them, p = 1 / 20,001
    assert paired_permutation_test([0.5] * 20) < 0.001


def test_a_run_of_measurements_has_no_accuracy_and_one_verdict_restores_it():
    measured = Score(value=0.4, correct=False, extracted="x", measurement=True)
    graded = Score(value=1.0, correct=True, extracted="1")
    runs = [ResultRecord(task_id=f"t{i}", status="ok", score=measured) for i in range(4)]
    s = summarize(runs)
    assert not s.graded and s.describe_accuracy().startswith("no accuracy")
    mixed = summarize([*runs, ResultRecord(task_id="t9", status="ok", score=graded)])
    assert mixed.graded and mixed.describe_accuracy().startswith("20.0% [")


def strictly(task: str, correct: bool, strict: str | None, strict_correct: bool, **fields):
    """A record scored ``correct`` (flexible) whose strict verdict is (``strict``, right or not)."""
    score = Score(value=float(correct), correct=correct, extracted="x").with_strict(
        strict, strict_correct
    )
    return ResultRecord(task_id=task, status="ok", score=score, **fields)


def test_strict_accuracy_and_format_compliance_beside_the_flexible_accuracy():
    records = [
        strictly("a", True, "64", True),
        strictly("b", True, None, False),  # right by its last number, nothing in the asked form
        strictly("c", False, "3", False),
        ResultRecord(task_id="d", status="error", error="boom"),  # no verdict: wrong, no form
    ]
    s = summarize(records)
    assert (s.accuracy, s.strict_accuracy, s.compliance) == (0.5, 0.25, 0.5)
    assert s.strict_ci == clustered_interval([1, 0, 0, 0], 4)
    lo, hi = s.strict_ci
    assert s.describe_strict() == (
        f"strict 25.0% [{lo:.1%}, {hi:.1%}], 50.0% of samples in the instructed form"
    )


def test_no_strict_figures_when_a_scored_record_has_no_strict_verdict():
    with_strict = strictly("a", True, "1", True)
    assert summarize([with_strict]).strict_accuracy == 1.0
    for records in ([record("a", True)], [with_strict, record("b", True)], []):
        s = summarize(records)
        assert (s.strict_accuracy, s.strict_ci, s.compliance, s.describe_strict()) == (None,) * 4


def test_replies_cut_at_max_tokens_per_sample_and_the_samples_with_any():
    records = [
        record("a", True, truncated_calls=3),
        record("b", False, truncated_calls=1),
        record("c", True),
        record("d", True),
    ]
    s = summarize(records)
    assert (s.truncated_calls, s.truncated_samples) == (4, 2)
    assert s.describe_truncation() == (
        "1.00 replies cut at max_tokens per sample, in 2 of 4 samples (50.0%)"
    )
    assert summarize(records[2:]).describe_truncation() is None


def test_a_long_error_is_cut_at_a_word_with_an_ellipsis():
    def failed(task: str, error: str) -> ResultRecord:
        return ResultRecord(task_id=task, status="error", error=error)

    long = "LLMConnectionError: " + " ".join(f"word{i:03d}" for i in range(40))
    unbroken = "KeyError: " + "x" * 300
    described = summarize([failed("a", long), failed("b", unbroken)]).describe_errors()
    first, second = described.split("; ")
    cut = first.removeprefix("1 × ")
    assert cut.endswith(" word016…") and long.startswith(cut[:-1] + " ")
    assert len(cut) < stats._CAUSE_CHARS  # shorter than the cause, whose word was cut
    assert second == f"1 × {unbroken[: stats._CAUSE_CHARS - 2]}…"  # no word to cut at
    short = "LLMTimeout: m: no answer within 5s"
    assert summarize([failed("c", short)]).describe_errors() == f"1 × {short}"


def test_time_queued_at_the_server_is_said_apart_from_model_time():
    records = [
        record("a", True, usage={"calls": 3, "latency_s": 1.2, "queued_s": 0.6}),
        record("b", True, usage={"calls": 3, "latency_s": 0.8, "queued_s": 0.2}),
    ]
    s = summarize(records)
    assert s.mean_queued_s == pytest.approx(0.4)
    assert s.describe_model_time() == "0.60 s of model time (and 0.40 s queued at the server)"


@pytest.mark.parametrize("seed", range(6))
def test_running_accuracy_is_the_clustered_interval_of_the_samples_so_far(seed):
    import random

    from maslab.analysis.stats import RunningAccuracy, clustered_interval

    rng = random.Random(seed)
    running, tallies = RunningAccuracy(), {}
    skill = rng.choice([0.0, 0.3, 0.7, 1.0])  # 0 and 1: no spread between tasks
    for _ in range(300):
        task = f"t{rng.randrange(40)}"
        correct = rng.random() < skill
        running.add(task, correct)
        tallies.setdefault(task, []).append(correct)
        means = [sum(v) / len(v) for v in tallies.values()]
        assert running.accuracy == pytest.approx(sum(means) / len(means), abs=1e-12)
        expected = clustered_interval(means, sum(map(len, tallies.values())))
        assert running.interval() == pytest.approx(expected, abs=1e-9)
