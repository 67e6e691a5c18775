"""Any function as an evaluator (DSPy's metrics): ``evaluate(..., evaluator=fn)`` and
``--evaluator module:fn`` / ``--evaluator path/to/file.py:fn``; the manifest names the function,
what it returns becomes the score, and what it raises is that sample's error."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import maslab
from maslab import MaslabError, Score, Task
from maslab.bench.evaluation import function_name, get_evaluator
from maslab.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
GSM8K = FIXTURES / "gsm8k_small.jsonl"
SCRIPTED = f"scripted:{FIXTURES / 'answers.yaml'}"
# vanilla's answers to the 5 gsm8k fixture tasks, whose golds are 14, 2400, 90, 260 and 37
ANSWERS = [
    "3 boxes of 6 is 18, minus 4 leaves 14. The answer is 14.",
    "1,200 rolls at $2 is $2,400. The answer is $2,400.",
    "15 pages for 6 days. The answer is 80.",
    "I am not sure.",
    "The answer is 37.",
]
NOT_CALLABLE = 3


def run(tmp_path: Path, evaluator: object, name: str = "run") -> maslab.RunResult:
    return maslab.evaluate(
        "vanilla", "gsm8k", SCRIPTED, data=GSM8K, cache=False, progress=False,
        out=tmp_path / name, evaluator=evaluator,
    )  # fmt: skip


def cli_run(*args: object) -> int:
    return main(["run", "--method", "vanilla", "--benchmark", "gsm8k", "--data", str(GSM8K),
                 "--model", SCRIPTED, "--no-cache", "--quiet", *map(str, args)])  # fmt: skip


def last_word_is_gold(task: Task, answer: str) -> bool:
    return answer.rstrip(".").split()[-1] == task.gold


async def digits_found(task: Task, answer: str) -> float:
    """1 when the gold's digits are in the answer, 0.5 for other digits, else 0."""
    await asyncio.sleep(0)
    digits = "".join(c for c in answer if c.isdigit())
    return 1.0 if task.gold in digits else 0.5 if digits else 0


def own_score(task: Task, answer: str) -> Score:
    return Score(value=0.25, correct=False, extracted=answer[:4], explanation="mine")


def fussy(task: Task, answer: str) -> bool | str:
    if task.gold == "260":
        raise ValueError("no digits to read")
    return "yes" if task.gold == "90" else True


def test_a_bool_is_graded_with_the_answer_as_extracted(tmp_path):
    result = run(tmp_path, last_word_is_gold)
    assert result.manifest.evaluator == function_name(last_word_is_gold)
    assert result.manifest.evaluator.endswith(":last_word_is_gold")
    assert result.manifest.evaluator_options == {}
    assert [r.answer for r in result.records] == ANSWERS
    assert [r.correct for r in result.records] == [True, False, False, False, True]
    assert [r.score.extracted for r in result.records] == ANSWERS
    assert result.records[2].score.explanation == f"expected '90', got {ANSWERS[2]!r}"
    assert result.accuracy == pytest.approx(0.4)


def test_an_async_number_is_the_value_correct_at_one(tmp_path):
    result = run(tmp_path, digits_found)
    assert [r.score.value for r in result.records] == [1.0, 1.0, 0.5, 0.0, 1.0]
    assert [r.correct for r in result.records] == [True, True, False, False, True]
    assert result.manifest.evaluator.endswith(":digits_found")


def test_a_score_is_kept_as_it_is(tmp_path):
    result = run(tmp_path, own_score)
    assert [r.score for r in result.records] == [
        Score(value=0.25, correct=False, extracted=a[:4], explanation="mine") for a in ANSWERS
    ]


def test_what_the_function_raises_or_returns_amiss_is_that_samples_error(tmp_path):
    result = run(tmp_path, fussy)
    assert [r.status for r in result.records] == ["ok", "ok", "error", "error", "ok"]
    assert result.records[3].error == "evaluator: ValueError: no digits to read"
    assert result.records[2].error == (
        f"evaluator: TypeError: {function_name(fussy)} returned 'yes': return a bool, a number "
        "in [0, 1] or a Score"
    )
    assert result.records[2].answer == ANSWERS[2]


def test_the_command_line_names_a_function_in_a_module_or_a_file(tmp_path, monkeypatch):
    (tmp_path / "t28_metrics.py").write_text(
        "def gold_in(task, answer):\n    return task.gold in answer.replace(',', '')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    script = tmp_path / "t28_script_metric.py"
    script.write_text("class Metrics:\n    @staticmethod\n    def says_14(task, answer):\n"
                      "        return '14' in answer\n")  # fmt: skip
    for spec, correct in (
        ("t28_metrics:gold_in", [True, True, False, False, True]),
        (f"{script}:Metrics.says_14", [True, False, False, False, False]),
    ):
        out = tmp_path / spec.rpartition(":")[2]
        assert cli_run("--evaluator", spec, "--out", out) == 0
        result = maslab.load_run(out)
        assert result.manifest.evaluator == spec
        assert [r.correct for r in result.records] == correct


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("t28_nowhere:fn", "evaluator t28_nowhere:fn: ModuleNotFoundError: No module named"),
        ("{tmp}/t28_missing.py:fn", "evaluator {tmp}/t28_missing.py:fn: file not found"),
        (f"{__name__}:no_such", f"evaluator {__name__}:no_such: {__name__} has no no_such"),
        (f"{__name__}:NOT_CALLABLE", f"evaluator '{__name__}:NOT_CALLABLE' is not callable"),
        ("t28_metrics:", "evaluator 't28_metrics:': name a function as module:function"),
    ],
)
def test_a_name_that_cannot_be_imported_or_called_is_one_line(tmp_path, capsys, spec, expected):
    spec, expected = spec.format(tmp=tmp_path), expected.format(tmp=tmp_path)
    with pytest.raises(MaslabError) as exc:
        get_evaluator(spec)
    assert expected in str(exc.value) and "\n" not in str(exc.value)
    assert cli_run("--evaluator", spec, "--out", tmp_path / "run") == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err
    assert not (tmp_path / "run").exists()


def test_a_function_takes_no_evaluator_options_and_a_non_function_is_refused(tmp_path):
    with pytest.raises(MaslabError, match="has no option 'tolerance' \\(its options: none\\)"):
        maslab.api.run_config(
            "vanilla", "gsm8k", SCRIPTED, evaluator=last_word_is_gold,
            evaluator_options={"tolerance": 1},
        )  # fmt: skip
    with pytest.raises(MaslabError, match="evaluator") as exc:
        run(tmp_path, 42)
    assert "\n" not in str(exc.value)
