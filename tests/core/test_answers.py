"""Answer extraction, normalisation and majority voting (maslab.core.answers)."""

from __future__ import annotations

import pytest

from maslab.core.answers import (
    Vote,
    extract_answer,
    majority_vote,
    normalize_answer,
    strict_answer,
)
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.kit.aggregation import answer_key

EXTRACT_CASES = [
    # --- boxed ---
    (r"So the result is \boxed{\frac{1}{2}}.", "math", r"\frac{1}{2}"),
    (r"First \boxed{3}, corrected: \boxed{5}", "number", "5"),
    (r"\boxed{\sqrt{\frac{a}{b}}} is it", "math", r"\sqrt{\frac{a}{b}}"),
    (r"Answer: 7. Actually \boxed{8}", "number", "8"),  # boxed beats a marker
    (r"\boxed{\frac{1}{2}}", "number", "1/2"),
    (r"\boxed{18 \text{ dollars}}", "number", "18"),
    (r"\boxed{2} and later \boxed{oops", "number", "2"),  # unbalanced last box is skipped
    (r"\boxed{\text{eighteen}} but 18 in total", "number", "18"),  # no number in box: fall through
    # --- markers ---
    ("Step 1: 6 * 3 = 18.\nThe answer is 18 dollars.", "number", "18"),
    ("Natalia sold 48 + 24 = 72 clips.\n#### 1,234", "number", "1234"),
    ("Final answer: 42\nThis used 3 steps.", "number", "42"),
    ("**Final Answer:** **-7**", "number", "-7"),
    ("The answer is 18, and Tom has 5 left.", "number", "18"),
    ("the answer is 2 \\times 9 = 18.", "number", "18"),
    ("The answer is:\n\n25", "number", "25"),
    ("#### Step 1\nWe compute 2 + 2 = 4 apples", "number", "4"),  # a heading is not a marker
    # --- number fallbacks ---
    ("It costs $18", "number", "18"),
    ("Revenue grew by 18%", "number", "18"),
    ("The temperature fell to -3.5 degrees.", "number", "-3.5"),
    ("She ate 3/4 of the pie.", "number", "3/4"),
    ("Total: $1,234.50 after tax", "number", "1234.50"),
    ("3 + 5 = 8, then 10 - 2 = 8, and finally 12 apples remain.", "number", "12"),
    ("Tom is 5-3 years old", "number", "3"),
    ("I am not sure how to solve this.", "number", None),
    ("", "number", None),
    # --- choice ---
    ("Comparing options, I choose (B).", "choice", "B"),
    ("My pick is **C**", "choice", "C"),
    ("After checking, the answer is D.", "choice", "D"),
    (r"\boxed{A}", "choice", "A"),
    ("Option B is correct.", "choice", "B"),
    ("(A) is wrong; (C) is right.", "choice", "C"),
    ("Let me think.\nC", "choice", "C"),
    ("Final answer: b", "choice", "B"),
    ("The correct answer is B) 42", "choice", "B"),
    ("The correct choice is E. 40", "choice", "E"),
    ("So the correct option is (C), not (D).", "choice", "C"),
    ("Correct choice: B", "choice", "B"),
    ("**Correct choice:** B", "choice", "B"),
    ("I weighed (A) and (D); the right answer is D) 12", "choice", "D"),
    ("The best option is C.\nOption D fails.", "choice", "C"),
    ("My final choice: A", "choice", "A"),
    ("The answer choice is G", "choice", "G"),
    ("The correct option is 42 apples.", "number", "42"),
    ("Another option is 7, but the answer is 5.", "number", "5"),
    ("A train leaves the station at 3 pm and travels 60 miles.", "choice", None),
    ("The answer is a train.", "choice", None),
    ("Final answer: I think it is (B)", "choice", "B"),
    ("The answer is (H).", "choice", "H"),  # no choices given: A-J allowed
    ("The answer is (K).", "choice", None),
    # --- math ---
    ("The answer is $x = 2$, so we are done.", "math", "x = 2"),
    ("Therefore the final answer is \\(x^2 + 1\\).", "math", "x^2 + 1"),
    ("Final answer: $\\frac{3}{4}$.", "math", "\\frac{3}{4}"),
    ("We get 12 and then 15", "math", "15"),
    # --- code ---
    ("```python\nx = 1\n```\nBetter:\n```\ny = 2\nprint(y)\n```\nDone.", "code", "y = 2\nprint(y)"),
    ("Here:\n```py\ndef f():\n    return 1\n```", "code", "def f():\n    return 1"),
    ("import os\nprint(os.sep)\n", "code", "import os\nprint(os.sep)"),
    ("There is no program here.", "code", None),
    # --- text ---
    ("Let me think.\nThe capital is Paris\n\n", "text", "The capital is Paris"),
    ("Final answer: **Paris**.", "text", "Paris"),
    (r"\boxed{\text{Paris}}", "text", "Paris"),
    ("   \n  ", "text", None),
]


@pytest.mark.parametrize(("text", "answer_type", "expected"), EXTRACT_CASES)
def test_extract_answer(text, answer_type, expected):
    assert extract_answer(text, answer_type) == expected


CHOICES = ["London", "Paris", "Rome", "Berlin"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is Paris.", "B"),
        ("Final answer: berlin", "D"),
        (r"\boxed{\text{Rome}}", "C"),
        ("The answer is (E).", None),  # only A-D exist
        ("(C) looks right, though (E) is tempting", "C"),  # out-of-range letters are skipped
        ("The answer is Madrid.", None),
        ("I'd say (A)", "A"),
    ],
)
def test_extract_choice_with_options(text, expected):
    assert extract_answer(text, "choice", choices=CHOICES) == expected


def test_option_text_wins_over_leading_letter():
    assert extract_answer("The answer is A train", "choice", choices=["A bus", "A train"]) == "B"


STRICT_CASES = [  # (reply, answer type, the flexible answer, the strict one)
    ("It is around 64, but I cannot decide.", "number", "64", None),
    ("The answer is approximately 64.", "number", "64", None),  # a hedge in the marker
    (r"Maybe 12. So \boxed{64}.", "number", "64", "64"),
    ("The answer is $1,234.50.", "number", "1234.50", "1234.50"),
    ("Final answer: 540 meters", "number", "540", "540"),  # a unit after the number
    ("He made $70,000.\n#### 70,000", "number", "70000", "70000"),
    (r"\boxed{x = -5}", "number", "-5", "-5"),  # the number after the last "="
    (r"\boxed{\$18}", "number", "18", "18"),
    (r"\boxed{\frac{3}{4}}", "number", "3/4", "3/4"),
    ("I'd say (B) London.", "choice", "B", None),
    ("**B**", "choice", "B", None),
    ("The answer is (B) Paris.", "choice", "B", "B"),
    (r"\boxed{C}", "choice", "C", "C"),
    ("Answer: d", "choice", "D", "D"),
    ("The answer is option D", "choice", "D", "D"),
    ("The answer is Paris.", "choice", "B", None),  # the option's text, not its letter
    (r"Thus \boxed{\frac{2}{4}}.", "math", r"\frac{2}{4}", r"\frac{2}{4}"),
    ("it is 0.5", "math", "0.5", None),
    ("The capital is Paris", "text", "The capital is Paris", None),
    ("Final answer: Paris", "text", "Paris", "Paris"),
]


@pytest.mark.parametrize(("text", "answer_type", "flexible", "strict"), STRICT_CASES)
def test_the_strict_answer_is_only_the_one_in_the_instructed_form(
    text, answer_type, flexible, strict
):
    choices = CHOICES if answer_type == "choice" else None
    assert extract_answer(text, answer_type, choices=choices) == flexible  # unchanged
    assert strict_answer(text, answer_type, choices=choices) == strict


def test_extract_never_returns_empty_string():
    assert extract_answer(r"\boxed{}", "math") is None
    assert extract_answer("The answer is **", "text") == "The answer is"


def test_unknown_answer_type_is_a_config_error():
    with pytest.raises(ConfigError):
        extract_answer("42", "integer")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        normalize_answer("42", "integer")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answer", "answer_type", "expected"),
    [
        ("18.0", "number", "18"),
        ("0.50", "number", "0.5"),
        ("-0", "number", "0"),
        ("-0.0", "number", "0"),
        ("1,234", "number", "1234"),
        (" 1 234 ", "number", "1234"),
        ("$18", "number", "18"),
        ("18%", "number", "18"),
        ("1800.00", "number", "1800"),
        (".5", "number", "0.5"),
        ("+5", "number", "5"),
        ("3/4", "number", "0.75"),
        ("-1/2", "number", "-0.5"),
        ("6/3", "number", "2"),
        ("2/6", "number", "1/3"),
        ("1/1024", "number", "1/1024"),  # exact, but not a short decimal
        ("1/200000", "number", "0.000005"),
        ("1234567890123456789012345678901/4", "number", "308641972530864197253086419725.25"),
        (r"\frac{6}{4}", "number", "1.5"),
        ("3/0", "number", "3/0"),
        ("Eighteen ", "number", "eighteen"),
        ("(b)", "choice", "B"),
        (" c ", "choice", "C"),
        ("$x = 2$.", "math", "x=2"),
        (r"\dfrac{1}{2}", "math", r"\frac{1}{2}"),
        (r"\tfrac12", "math", r"\frac12"),
        (r"\left( x \right)", "math", "(x)"),
        (r"x \leftarrow 1", "math", r"x\leftarrow1"),
        (r"1\!000\,000", "math", "1000000"),
        ("  Hello,   World! ", "text", "hello, world"),
        ("**Paris**.", "text", "paris"),
        ("\n\ndef f():   \n    return 1  \n\n", "code", "def f():\n    return 1"),
    ],
)
def test_normalize_answer(answer, answer_type, expected):
    assert normalize_answer(answer, answer_type) == expected


def test_normalize_number_survives_absurd_digit_counts():
    huge = "9" * 5000 + "/7"
    assert normalize_answer(huge, "number") == huge


def test_majority_vote_groups_equal_numbers():
    vote = majority_vote(["18", "7", "18.0", "$18"], "number")
    assert vote == Vote(winner="18", counts={"18": 3, "7": 1}, support=0.75)


def test_majority_vote_winner_is_first_original_of_class():
    vote = majority_vote(["7", "18.0", "18", "18"], "number")
    assert vote.winner == "18.0"
    assert vote.counts == {"7": 1, "18": 3}


def test_majority_vote_ignores_abstentions():
    vote = majority_vote([None, "B", None, "b", "A"], "choice")
    assert vote.winner == "B"
    assert vote.counts == {"B": 2, "A": 1}
    assert vote.support == pytest.approx(2 / 3)


def test_majority_vote_tie_goes_to_first_class():
    assert majority_vote(["Rome", "Paris", "paris", "rome."]).winner == "Rome"
    assert majority_vote(["Paris", "Rome", "rome.", "paris"]).winner == "Paris"


def test_majority_vote_nothing_to_count():
    assert majority_vote([]) == Vote(winner=None, counts={}, support=0.0)
    assert majority_vote([None, None], "number") == Vote(winner=None, counts={}, support=0.0)


def test_majority_vote_unanimous():
    vote = majority_vote([r"\dfrac{1}{2}", r"\frac{1}{2}"], "math")
    assert vote == Vote(winner=r"\dfrac{1}{2}", counts={r"\frac{1}{2}": 2}, support=1.0)


def test_extract_then_vote():
    replies = ["... so the answer is $18.", "I get \\boxed{18.00}", "Total is 17", "No idea."]
    answers = [extract_answer(reply, "number") for reply in replies]
    assert answers == ["18", "18.00", "17", None]
    vote = majority_vote(answers, "number")
    assert (vote.winner, vote.support) == ("18", pytest.approx(2 / 3))


def test_answer_key_is_the_answer_votes_compare():
    number = Task(id="n", question="How many?", answer_type="number")
    assert answer_key(number, "So the answer is 1,000.") == answer_key(number, r"\boxed{1000.0}")
    assert answer_key(number, "So the answer is 1,000.") == "1000"
    assert answer_key(number, "no idea") is None
    choice = Task(id="c", question="Which?", answer_type="choice", choices=["x", "y"])
    assert answer_key(choice, "The answer is (B)") == answer_key(choice, "Final answer: b") == "B"


CODE_REPLIES = {
    # (reply, entry point) -> the code a grader takes
    "the block defining the entry point, not a later example": (
        "```python\ndef f(x):\n    return x\n```\nTry it:\n```python\nprint(f(1))\n```",
        "f",
        "def f(x):\n    return x",
    ),
    "of several defining it, the last": (
        "```python\ndef f(x):\n    return 0\n```\nFixed:\n"
        "```python\nasync def f(x):\n    pass\n```",
        "f",
        "async def f(x):\n    pass",
    ),
    "a class as the entry point": (
        "```python\nclass Pair:\n    pass\n```\n```python\nPair()\n```",
        "Pair",
        "class Pair:\n    pass",
    ),
    "a name that only starts like the entry point does not define it": (
        "```python\ndef f(x):\n    return 1\n```\n```python\ndef f_helper():\n    pass\n```",
        "f",
        "def f(x):\n    return 1",
    ),
    "none defines it: the last Python block": (
        "```python\n    return x\n```\n```python\nprint(1)\n```",
        "f",
        "print(1)",
    ),
    "a block in another language is never code": (
        '```python\ndef f(x):\n    return x\n```\n```json\n{"f": 1}\n```\n```bash\nls\n```',
        None,
        "def f(x):\n    return x",
    ),
    "a labelled fence with attributes": (
        '```Python title="f.py"\ndef f():\n    pass\n```',
        None,
        "def f():\n    pass",
    ),
    "only other languages: no code": ('```json\n{"def ": 1}\n```', "f", None),
}


@pytest.mark.parametrize("case", CODE_REPLIES.values(), ids=CODE_REPLIES.keys())
def test_code_is_the_block_a_grader_would_take(case: tuple[str, str | None, str | None]):
    reply, entry_point, code = case
    assert extract_answer(reply, "code", entry_point=entry_point) == code


def test_a_code_tasks_entry_point_is_named_or_the_first_function_its_tests_call():
    named = Task(id="h", question="q", answer_type="code", metadata={"entry_point": "add"})
    mbpp = Task(
        id="m",
        question="q",
        answer_type="code",
        tests=(
            "import math\ndef helper(x):\n    return x",
            "assert math.isclose(helper(1), 1)",
            "assert set(similar((3, 4), (5, 4))) == set((4,))",
        ),
    )
    assert (named.entry_point, mbpp.entry_point) == ("add", "similar")
    assert Task(id="t", question="q", metadata={"entry_point": "add"}).entry_point is None
    reply = "```python\ndef similar(a, b):\n    return []\n```\n```py\nprint(similar(1, 2))\n```"
    assert mbpp.answer_in(reply) == "def similar(a, b):\n    return []"
