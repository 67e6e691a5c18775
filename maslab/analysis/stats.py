"""Statistics over run results: intervals, pass@k / pass^k, run summaries and paired tests.

The unit of analysis is the task: repeats of one task are clustered within it, so intervals
and tests treat each task, not each (task, repeat) record, as one observation.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np

from maslab.bench.evaluation import Strict
from maslab.store.run_store import CACHED_KEYS, SPENT_KEYS, ResultRecord

_PROMPT = ("prompt_tokens", "cached_prompt_tokens")
_COMPLETION = ("completion_tokens", "cached_completion_tokens")

_TIE = 1e-12
_EXACT_MAX = 16
_FLIPS = 20_000
_BATCH_BYTES = 32 * 2**20  # one batch of bootstrap resamples: indices and values


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def _wilson(p: float, n: float, confidence: float) -> tuple[float, float]:
    """Wilson score interval at proportion ``p`` with a (possibly fractional) sample size ``n``."""
    z = _z(confidence)
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def wilson_interval(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``successes`` of ``n``; ``(0, 1)`` when ``n == 0``.

    Fractional (effective) counts are allowed.
    """
    if n == 0:
        return (0.0, 1.0)
    return _wilson(successes / n, n, confidence)


def clustered_interval(
    task_means: Sequence[float], n_records: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Interval for the mean of per-task accuracies, with repeats clustered within tasks.

    With ``T`` tasks, ``p = mean(task_means)`` and the cluster-robust variance of that mean
    ``SE² = Σ (p_t - p)² / (T (T - 1))``, the effective sample size ``n_eff = p (1 - p) / SE²``
    is clamped to ``[T, n_records]``: clustering shrinks the sample by at most the cluster size,
    and it never exceeds the records. ``n_eff = T`` when ``T == 1``, ``SE² == 0`` or
    ``p (1 - p) == 0``. The result is the Wilson interval at ``p`` with ``n = n_eff``; with one
    record per task it is exactly the Wilson interval over tasks. ``(0, 1)`` when ``T == 0``.
    """
    tasks = len(task_means)
    if tasks == 0:
        return (0.0, 1.0)
    if n_records < tasks:
        raise ValueError(f"n_records ({n_records}) must be at least the task count ({tasks})")
    p = math.fsum(task_means) / tasks
    se2 = 0.0
    if max(task_means) > min(task_means):  # SE² > 0, hence T >= 2 and 0 < p < 1
        se2 = math.fsum((m - p) ** 2 for m in task_means) / (tasks * (tasks - 1))
    return _clustered_wilson(p, se2, tasks, n_records, confidence)


def _clustered_wilson(
    p: float, se2: float, tasks: int, n_records: int, confidence: float
) -> tuple[float, float]:
    """:func:`clustered_interval` from the mean ``p`` over ``tasks`` tasks and its variance
    ``se2`` (0: no spread between tasks)."""
    n_eff = min(max(p * (1 - p) / se2, tasks), n_records) if se2 > 0 else tasks
    return _wilson(p, n_eff, confidence)


class RunningAccuracy:
    """The mean over tasks of each task's accuracy, and its :func:`clustered_interval`, kept
    up to date as samples finish, in constant time each (a progress display's: recomputed
    from every task at each refresh, a 50,000-task run spent tens of seconds on it)."""

    def __init__(self) -> None:
        self._tasks: dict[str, tuple[int, int]] = {}  # task -> (samples, correct)
        self._sum = self._squares = 0.0  # of the task means
        self.samples = 0

    def add(self, task_id: str, correct: bool) -> None:
        n, c = self._tasks.get(task_id, (0, 0))
        if n:
            self._sum -= c / n
            self._squares -= (c / n) ** 2
        n, c = n + 1, c + correct
        self._tasks[task_id] = (n, c)
        self._sum += c / n
        self._squares += (c / n) ** 2
        self.samples += 1

    @property
    def accuracy(self) -> float:
        return self._sum / len(self._tasks) if self._tasks else 0.0

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """:func:`clustered_interval` of the samples so far (the spread between tasks from
        running sums: a rounding error's worth of spread counts as none)."""
        tasks = len(self._tasks)
        if not tasks:
            return (0.0, 1.0)
        p = self.accuracy
        spread = max(0.0, self._squares - tasks * p * p)
        se2 = spread / (tasks * (tasks - 1)) if tasks > 1 and spread > 1e-9 * tasks else 0.0
        return _clustered_wilson(p, se2, tasks, self.samples, confidence)


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[[np.ndarray], float] = np.mean,
    *,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic``; the same ``seed`` gives the same interval.

    Resamples are drawn in batches of at most about 32 MB, so memory stays bounded however many
    values there are. The draws are those of one ``(n_resamples, len(values))`` index array
    from ``numpy.random.default_rng(seed)``, so the batch size never changes the interval.

    Args:
        values: The sample (one value per unit of analysis: per task).
        statistic: Computed on each resample.
        n_resamples: How many resamples.
        confidence: The interval's coverage.
        seed: Seeds the resampling.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap_ci() needs at least one value")
    rng = np.random.default_rng(seed)
    # int32 indices draw the same numbers as int64 ones, faster and in half the memory
    index = np.int32 if data.size <= np.iinfo(np.int32).max else np.int64
    rows = max(1, _BATCH_BYTES // (data.size * (np.dtype(index).itemsize + data.itemsize)))
    stats = np.empty(n_resamples)
    for start in range(0, n_resamples, rows):
        size = (min(rows, n_resamples - start), data.size)
        samples = data[rng.integers(0, data.size, size=size, dtype=index)]
        stats[start : start + size[0]] = [statistic(sample) for sample in samples]
        del samples  # freed before the next batch is drawn
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return (float(lo), float(hi))


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``c`` correct of ``n`` samples: ``1 - C(n-c, k) / C(n, k)``."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1 - k / i for i in range(n - c + 1, n + 1))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: the chance that ``k`` draws without replacement all succeed, C(c, k) / C(n, k)."""
    _check(n, c, k)
    return math.prod((c - i) / (n - i) for i in range(k))


def outcomes_by_task(
    records: Iterable[ResultRecord], verdicts: Iterable[bool] | None = None
) -> dict[str, list[bool]]:
    """task_id -> correctness of each of its records (``verdicts``, one per record in order; by
    default the scores')."""
    pairs = (
        ((r, r.correct) for r in records)
        if verdicts is None
        else zip(records, verdicts, strict=True)
    )
    outcomes: dict[str, list[bool]] = defaultdict(list)
    for r, verdict in pairs:
        outcomes[r.task_id].append(verdict)
    return dict(outcomes)


def _task_means(outcomes: Mapping[str, Sequence[bool]]) -> list[float]:
    return [_mean(v) for v in outcomes.values()]


def _mean(values: Sequence[bool]) -> float:
    return sum(values) / len(values)


def _strict(record: ResultRecord) -> Strict | None:
    return record.score.strict if record.score is not None else None


def _strict_fields(records: Sequence[ResultRecord], confidence: float) -> dict[str, Any]:
    """The summary's ``strict_accuracy``, ``strict_ci`` and ``compliance``; none when a scored
    record has no strict verdict (an evaluator that records none, or scores from before)."""
    verdicts = [_strict(r) for r in records]  # each parsed once: a score holds it as data
    scored = [v for r, v in zip(records, verdicts, strict=True) if r.score is not None]
    if not scored or None in scored:
        return {}
    outcomes = outcomes_by_task(records, (v is not None and v.correct for v in verdicts))
    in_form = sum(v is not None and v.extracted is not None for v in verdicts)
    return {
        "strict_accuracy": _mean_over_tasks(outcomes),
        "strict_ci": clustered_interval(_task_means(outcomes), len(records), confidence),
        "compliance": in_form / len(records),
    }


def _mean_over_tasks(outcomes: Mapping[str, Sequence[bool]]) -> float:
    """Mean over tasks of each task's mean correctness; 0 without tasks."""
    if not outcomes:
        return 0.0
    return math.fsum(_task_means(outcomes)) / len(outcomes)


def _total(usages: Iterable[Mapping[str, float]], keys: Iterable[str]) -> float:
    keys = tuple(keys)
    return math.fsum(u.get(key, 0) for u in usages for key in keys)


@dataclass(frozen=True)
class Summary:
    """Aggregates of one run. Errors count as wrong and stay in ``n``.

    ``accuracy`` is the mean over tasks of each task's mean correctness and ``ci`` its
    :func:`clustered_interval`. ``repeats`` is the fewest repeats of any task: the largest ``k``
    for ``pass_at``/``pass_hat``. ``per_repeat`` holds the single-run accuracy of each repeat
    index, in order.

    Cost means are per record and cover the method's calls only. Tokens are *consumed* tokens
    (newly spent plus replayed from the response cache), so a warm cache does not make a method
    look cheaper; ``mean_spent_tokens`` and ``mean_cached_tokens`` split them. Scoring calls (an
    LLM judge) are reported apart in ``mean_scoring_tokens``, and so is the optimisation step
    (``--optimize-on``): ``optimize_calls`` and ``optimize_tokens`` (tokens used, scoring
    included) over all its attempts, never in the per-sample means. ``total_served_tokens`` is
    every newly spent token of the run (method and scoring), superseded attempts and the
    optimisation step included.
    ``estimated_calls`` counts the records' calls (method and scoring) whose token usage the
    server did not report.

    When the evaluator records strict verdicts (:attr:`Score.strict`: the answer in the
    instructed form only), ``strict_accuracy`` and ``strict_ci`` are their accuracy, as
    ``accuracy`` is the score's (the flexible verdict), and ``compliance`` the share of records
    whose answer is in the instructed form; all None when a scored record has no strict verdict.
    ``truncated_calls`` and ``truncated_samples``: the records' calls cut at ``max_tokens``, and
    the records with at least one (:attr:`ResultRecord.truncated_calls`).
    """

    n: int
    tasks: int
    repeats: int
    correct: int
    accuracy: float
    ci: tuple[float, float]
    unparsed: int
    errors: int
    budget_stopped: int
    per_repeat: tuple[float, ...]
    mean_tokens: float
    mean_spent_tokens: float
    mean_cached_tokens: float
    mean_prompt_tokens: float
    mean_completion_tokens: float
    mean_calls: float
    mean_latency_s: float
    mean_queued_s: float
    mean_scoring_tokens: float
    total_served_tokens: int
    estimated_calls: int
    consumed_by_model: dict[str, tuple[float, float]] = field(default_factory=dict)
    """model spec -> mean consumed (prompt, completion) tokens per record."""
    per_task: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)
    """task_id -> (records, correct)."""
    error_causes: tuple[tuple[str, int], ...] = ()
    """(cause, errored records), most frequent first (see :func:`error_causes`)."""
    graded: bool = True
    """False when every score is a measurement, not a verdict (:attr:`Score.measurement`)."""
    optimize_attempts: int = 0
    optimize_calls: int = 0
    optimize_tokens: int = 0
    strict_accuracy: float | None = None
    strict_ci: tuple[float, float] | None = None
    compliance: float | None = None
    truncated_calls: int = 0
    truncated_samples: int = 0

    def describe_strict(self) -> str | None:
        """'strict 40.0% [11.8%, 76.9%], 60.0% of samples in the instructed form'; None when
        the evaluator records no strict verdicts."""
        if self.strict_accuracy is None or self.strict_ci is None or self.compliance is None:
            return None
        lo, hi = self.strict_ci
        return (
            f"strict {self.strict_accuracy:.1%} [{lo:.1%}, {hi:.1%}], "
            f"{self.compliance:.1%} of samples in the instructed form"
        )

    def describe_model_time(self) -> str:
        """A sample's mean model time, the time its calls took, summed (calls made at once each
        count): '2.40 s of model time'; where servers said how long requests waited before
        being computed, that wait apart: '0.90 s of model time (and 1.50 s queued at the
        server)'."""
        queued = self.mean_queued_s
        said = f" (and {queued:.2f} s queued at the server)" if queued >= 0.005 else ""
        return f"{self.mean_latency_s - queued:.2f} s of model time{said}"

    def describe_truncation(self) -> str | None:
        """'1.20 replies cut at max_tokens per sample, in 3 of 5 samples (60.0%)'; None when no
        reply was cut."""
        if not self.truncated_calls:
            return None
        return (
            f"{self.truncated_calls / self.n:.2f} replies cut at max_tokens per sample, in "
            f"{self.truncated_samples} of {self.n} samples ({self.truncated_samples / self.n:.1%})"
        )

    def describe_optimization(self) -> str | None:
        """'optimisation: 12 calls, 3,456 tokens' (its attempts, if more than one); None
        without an optimisation step."""
        if not self.optimize_attempts:
            return None
        attempts = f" over {self.optimize_attempts} attempts" if self.optimize_attempts > 1 else ""
        return (
            f"optimisation: {self.optimize_calls:,} calls, {self.optimize_tokens:,} tokens"
            f"{attempts} (not in the per-sample cost)"
        )

    def describe_accuracy(self) -> str:
        """ "54.0% [50.1%, 57.9%]" (accuracy and interval), or why the run has none."""
        if not self.graded:
            return "no accuracy (the evaluator measures, it does not grade: see the scores)"
        lo, hi = self.ci
        return f"{self.accuracy:.1%} [{lo:.1%}, {hi:.1%}]"

    @property
    def repeat_spread(self) -> tuple[float, float, float] | None:
        """(min, max, sample standard deviation with ddof=1) of ``per_repeat``.

        None with fewer than two repeats.
        """
        if len(self.per_repeat) < 2:
            return None
        values = np.asarray(self.per_repeat)
        return (float(values.min()), float(values.max()), float(values.std(ddof=1)))

    @property
    def design(self) -> str:
        """'5 tasks × 3 repeats'."""
        plural = {True: "s", False: ""}
        return (
            f"{self.tasks} task{plural[self.tasks != 1]} × "
            f"{self.repeats} repeat{plural[self.repeats != 1]}"
        )

    def describe_repeats(self) -> str | None:
        """One line on the run-to-run noise (pass@1 spread, pass@k, pass^k); None if no repeats."""
        if self.repeat_spread is None:
            return None
        low, high, std = self.repeat_spread
        k = self.repeats
        return (
            f"single-run pass@1 {low:.1%}–{high:.1%} across repeats (std {std:.1%}), "
            f"pass@{k} {self.pass_at(k):.1%}, pass^{k} {self.pass_hat(k):.1%}"
        )

    def describe_errors(self, limit: int = 3) -> str | None:
        """'12 × LLMTimeout: …; 2 × KeyError: …', the ``limit`` commonest causes (None: none),
        each longer than it can show cut at a word with '…' (``maslab show RUN TASK`` has a
        sample's whole error)."""
        if not self.error_causes:
            return None

        def shown_cause(cause: str) -> str:
            """``cause``, shorter than a cause cut to group it (so '…' never hides nothing):
            cut after its last whole word, or mid-word when that word is over half of it."""
            if len(cause) < _CAUSE_CHARS:
                return cause
            space = cause.rfind(" ", 0, _CAUSE_CHARS - 1)
            head = cause[:space] if space > _CAUSE_CHARS // 2 else cause[: _CAUSE_CHARS - 2]
            return head.rstrip(" ,;:") + "…"

        shown = [f"{count} × {shown_cause(cause)}" for cause, count in self.error_causes[:limit]]
        if rest := sum(count for _, count in self.error_causes[limit:]):
            shown.append(f"{rest} more of {len(self.error_causes) - limit} other causes")
        return "; ".join(shown)

    def model_costs(self, prices: Mapping[str, tuple[float, float]]) -> dict[str, float]:
        """Mean USD per record of each model that ``prices`` prices, at its own (prompt,
        completion) USD per 1M tokens."""
        return {
            model: (prompt * prices[model][0] + completion * prices[model][1]) / 1e6
            for model, (prompt, completion) in self.consumed_by_model.items()
            if model in prices
        }

    def cost(self, prices: Mapping[str, tuple[float, float]]) -> float | None:
        """Mean USD per record, each model at its own price (see :meth:`model_costs`).

        None when a model used has no price, or tokens were recorded without a per-model split.
        """
        if not self.consumed_by_model and self.mean_tokens:
            return None
        costs = self.model_costs(prices)
        return sum(costs.values()) if len(costs) == len(self.consumed_by_model) else None

    def describe_models(
        self, prices: Mapping[str, tuple[float, float]] | None = None
    ) -> str | None:
        """'openai:a 1,234 tokens ($0.0021), openai:b 56 tokens': each model's tokens used per
        record, and its cost where ``prices`` has its price; None with fewer than two models."""
        if len(self.consumed_by_model) < 2:
            return None
        costs = self.model_costs(prices or {})
        return ", ".join(
            f"{model} {prompt + completion:,.0f} tokens"
            + (f" (${costs[model]:.4f})" if model in costs else "")
            for model, (prompt, completion) in self.consumed_by_model.items()
        )

    def pass_at(self, k: int) -> float:
        """pass@k averaged over tasks."""
        return self._over_tasks(pass_at_k, k)

    def pass_hat(self, k: int) -> float:
        """pass^k averaged over tasks."""
        return self._over_tasks(pass_hat_k, k)

    def _over_tasks(self, estimator: Callable[[int, int, int], float], k: int) -> float:
        if not 1 <= k <= self.repeats:
            raise ValueError(f"k must be in [1, {self.repeats}] (the fewest repeats of a task)")
        return float(np.mean([estimator(n, c, k) for n, c in self.per_task.values()]))


def summarize(
    records: Sequence[ResultRecord],
    *,
    superseded: Sequence[ResultRecord] = (),
    optimization: Sequence[ResultRecord] = (),
    confidence: float = 0.95,
) -> Summary:
    """Summarize one run's records (one per task and repeat).

    Args:
        records: The run's results (:meth:`RunStore.results`).
        superseded: Errored attempts that a resume replaced: they count only toward
            ``total_served_tokens``.
        optimization: The attempts at the optimisation step (:meth:`RunStore.optimizations`):
            their own figures, and toward ``total_served_tokens``.
        confidence: The coverage of the accuracy interval.
    """
    n = len(records)
    outcomes = outcomes_by_task(records)
    usages = [r.usage for r in records]
    scoring = [r.scoring_usage for r in records]
    models = sorted({model for r in records for model in r.usage_by_model})

    def mean(total: float) -> float:
        return total / n if n else 0.0

    def by_model(model: str, keys: Iterable[str]) -> float:
        return mean(_total((r.usage_by_model.get(model, {}) for r in records), keys))

    served = [u for r in (*records, *superseded, *optimization) for u in (r.usage, r.scoring_usage)]
    optimizing = [u for r in optimization for u in (r.usage, r.scoring_usage)]
    scores = [r.score for r in records if r.score is not None]
    return Summary(
        n=n,
        tasks=len(outcomes),
        repeats=min(map(len, outcomes.values()), default=0),
        correct=sum(r.correct for r in records),
        accuracy=_mean_over_tasks(outcomes),
        graded=not scores or not all(score.measurement for score in scores),
        ci=clustered_interval(_task_means(outcomes), n, confidence),
        unparsed=sum(r.unparsed for r in records),
        errors=sum(r.status == "error" for r in records),
        budget_stopped=sum(r.status == "budget" for r in records),
        per_repeat=tuple(
            _mean_over_tasks(outcomes_by_task(r for r in records if r.repeat == repeat))
            for repeat in sorted({r.repeat for r in records})
        ),
        mean_tokens=mean(sum(r.tokens_used for r in records)),
        mean_spent_tokens=mean(_total(usages, SPENT_KEYS)),
        mean_cached_tokens=mean(_total(usages, CACHED_KEYS)),
        mean_prompt_tokens=mean(_total(usages, _PROMPT)),
        mean_completion_tokens=mean(_total(usages, _COMPLETION)),
        mean_calls=mean(_total(usages, ["calls"])),
        mean_latency_s=mean(_total(usages, ["latency_s"])),
        mean_queued_s=mean(_total(usages, ["queued_s"])),
        mean_scoring_tokens=mean(_total(scoring, SPENT_KEYS + CACHED_KEYS)),
        total_served_tokens=round(_total(served, SPENT_KEYS)),
        estimated_calls=round(_total(usages + scoring, ["estimated_calls"])),
        consumed_by_model={m: (by_model(m, _PROMPT), by_model(m, _COMPLETION)) for m in models},
        per_task={task: (len(v), sum(v)) for task, v in outcomes.items()},
        error_causes=error_causes(records),
        optimize_attempts=len(optimization),
        optimize_calls=round(_total(optimizing, ["calls"])),
        optimize_tokens=round(_total(optimizing, SPENT_KEYS + CACHED_KEYS)),
        **_strict_fields(records, confidence),
        truncated_calls=sum(r.truncated_calls for r in records),
        truncated_samples=sum(r.truncated_calls > 0 for r in records),
    )


_ATTEMPTS = re.compile(r" \(after \d+ attempts\)$")
_CAUSE_CHARS = 160


def error_causes(records: Iterable[ResultRecord]) -> tuple[tuple[str, int], ...]:
    """Errored records grouped by cause (the error text without its retry count, shortened),
    most frequent first, ties in order of first appearance."""
    causes = Counter(
        _ATTEMPTS.sub("", r.error or "unknown error")[:_CAUSE_CHARS]
        for r in records
        if r.status == "error"
    )
    return tuple(causes.most_common())


@dataclass(frozen=True)
class Paired:
    """Run ``b`` against run ``a`` on the tasks both ran, one observation per task.

    ``n`` counts paired tasks and ``only_a``/``only_b`` the tasks found in one run only.
    Accuracies and ``difference`` (b - a) are means over paired tasks of each task's mean
    correctness; ``ci`` is a bootstrap over tasks. ``a_only_correct``/``b_only_correct`` count
    tasks where ``a``/``b`` did better. ``test`` is ``"mcnemar"`` when every paired task has one
    record in each run, else ``"permutation"`` (see :func:`paired_permutation_test`).
    ``repeats_a``/``repeats_b`` are the fewest records of a paired task in each run.
    """

    n: int
    only_a: int
    only_b: int
    accuracy_a: float
    accuracy_b: float
    difference: float
    ci: tuple[float, float]
    a_only_correct: int
    b_only_correct: int
    p_value: float
    test: str
    repeats_a: int
    repeats_b: int


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: a binomial(b + c, 1/2) test on the discordant pairs."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)


def paired_permutation_test(diffs: Sequence[float], *, seed: int = 0) -> float:
    """Two-sided sign-flip permutation p-value for mean(diffs) = 0.

    Under the null each difference is as likely negative as positive. The p-value is the share
    of sign patterns whose mean is at least as far from 0 as the observed one (ties within
    1e-12). Zero differences are left out of the patterns, as flipping them changes nothing.
    With ``m`` nonzero differences, all ``2^m`` patterns are enumerated when ``m <= 16``;
    otherwise 20,000 random patterns (seeded) give ``(count + 1) / (20,000 + 1)``.

    For differences of ±1 (one binary outcome per task and run) this is the exact sign test,
    i.e. :func:`mcnemar_exact`.
    """
    data = np.asarray(diffs, dtype=float)
    if data.size == 0:
        raise ValueError("paired_permutation_test() needs at least one difference")
    nonzero = data[data != 0]
    m = nonzero.size
    observed = abs(nonzero.sum()) / data.size - _TIE

    def extreme(signs: np.ndarray) -> int:
        return int((np.abs(signs @ nonzero) / data.size >= observed).sum())

    if m <= _EXACT_MAX:
        signs = 1 - 2 * ((np.arange(2**m)[:, None] >> np.arange(m)) & 1)
        return extreme(signs) / 2**m
    rng = np.random.default_rng(seed)
    batch = 1000  # bounds memory for many tasks
    count = sum(
        extreme(1 - 2 * rng.integers(0, 2, size=(batch, m))) for _ in range(_FLIPS // batch)
    )
    return (count + 1) / (_FLIPS + 1)


def paired_comparison(
    a: Sequence[ResultRecord], b: Sequence[ResultRecord], *, seed: int = 0
) -> Paired:
    """Accuracy difference ``b - a`` paired by task, with a bootstrap interval and a test.

    Each run's repeats of a task are averaged first, so tasks, not records, are the units.
    Raises ValueError when the runs share no task.
    """
    by_a, by_b = outcomes_by_task(a), outcomes_by_task(b)
    shared = sorted(by_a.keys() & by_b.keys())
    if not shared:
        raise ValueError("paired_comparison() needs at least one task present in both runs")
    means = np.array([(_mean(by_a[t]), _mean(by_b[t])) for t in shared], dtype=float)
    diffs = means[:, 1] - means[:, 0]
    a_only, b_only = int((diffs < 0).sum()), int((diffs > 0).sum())
    single = all(len(by_a[t]) == len(by_b[t]) == 1 for t in shared)
    test = "mcnemar" if single else "permutation"
    p_value = mcnemar_exact(a_only, b_only) if single else paired_permutation_test(diffs, seed=seed)
    return Paired(
        n=len(shared),
        only_a=len(by_a) - len(shared),
        only_b=len(by_b) - len(shared),
        accuracy_a=float(means[:, 0].mean()),
        accuracy_b=float(means[:, 1].mean()),
        difference=float(diffs.mean()),
        ci=bootstrap_ci(diffs, seed=seed),
        a_only_correct=a_only,
        b_only_correct=b_only,
        p_value=p_value,
        test=test,
        repeats_a=min(len(by_a[t]) for t in shared),
        repeats_b=min(len(by_b[t]) for t in shared),
    )
