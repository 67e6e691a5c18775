"""BFCL's wheel in the data cache (`maslab data fetch/import bfcl`), the two benchmarks' tasks and
the environments built from them (benchmarks/bfcl)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import urllib.request

import pytest

from maslab.bench import data
from maslab.bench.benchmark import get_benchmark
from maslab.benchmarks.bfcl import render_messages
from maslab.benchmarks.bfcl.environment import CLASSES, BFCLEnvironment, class_specs
from maslab.benchmarks.bfcl.wheel import WHEEL
from maslab.cli import main
from maslab.core.environment import ToolError
from maslab.errors import ConfigError

jsonschema = pytest.importorskip("jsonschema")

SINGLE_COUNTS = {
    "simple": 400, "multiple": 200, "parallel": 200, "parallel_multiple": 200,
    "live_simple": 258, "live_multiple": 1053, "live_parallel": 16,
    "live_parallel_multiple": 24, "irrelevance": 240, "live_irrelevance": 884,
    "live_relevance": 16,
}  # fmt: skip
MULTI_TURN_COUNTS = {"base": 200, "long_context": 200, "miss_func": 200, "miss_param": 200}


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


# --- the wheel in the data cache ------------------------------------------------------------------


def test_without_the_wheel_loading_says_to_fetch_it(empty_cache):
    for name in ("bfcl_single", "bfcl_multi_turn"):
        with pytest.raises(ConfigError, match=r"bfcl data not found .*`maslab data fetch bfcl`"):
            get_benchmark(name)().load()


def test_fetch_downloads_the_pinned_wheel_and_checks_its_hash(empty_cache, monkeypatch):
    blob = b"not the wheel"
    urls = []

    def urlopen(request, timeout):
        url = getattr(request, "full_url", request)
        urls.append(url)
        if url.endswith("/bfcl-eval/"):  # the simple index, in its JSON form (PEP 691)
            assert request.get_header("Accept") == "application/vnd.pypi.simple.v1+json"
            listing = {"files": [{"filename": WHEEL.filename, "url": "https://files/x.whl"}]}
            return io.BytesIO(json.dumps(listing).encode())
        return io.BytesIO(blob)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    with pytest.raises(ConfigError, match=r"sha256 .* is not that of bfcl_eval-2026\.3\.23"):
        data.fetch_pypi_file(WHEEL)
    assert urls == ["https://pypi.org/simple/bfcl-eval/", "https://files/x.whl"]
    assert not WHEEL.path.exists()
    same_hash = dataclasses.replace(WHEEL, sha256=hashlib.sha256(blob).hexdigest())
    assert data.fetch_pypi_file(same_hash).read_bytes() == blob


def test_import_checks_the_wheel_and_the_cli_names_the_pinned_file(empty_cache, tmp_path, capsys):
    fake = tmp_path / WHEEL.filename
    fake.write_bytes(b"tampered")
    assert main(["data", "import", "bfcl", str(fake)]) == 2
    assert "sha256" in capsys.readouterr().err and not WHEEL.path.exists()
    assert main(["data", "path", "bfcl"]) == 1
    assert "run `maslab data fetch bfcl`" in capsys.readouterr().err
    assert main(["data", "import", "bfcl"]) == 2
    assert f"maslab data import bfcl {WHEEL.filename}" in capsys.readouterr().err


def test_import_copies_a_good_wheel_into_the_cache(bfcl_wheel, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "other"))
    assert main(["data", "import", "bfcl", str(bfcl_wheel)]) == 0
    assert capsys.readouterr().out.strip() == str(WHEEL.path)
    assert WHEEL.path.read_bytes() == bfcl_wheel.read_bytes()
    assert main(["data", "path", "bfcl"]) == 0


# --- tasks ----------------------------------------------------------------------------------------


def test_every_single_turn_category_loads_with_valid_tool_schemas(bfcl_wheel):
    schemas = {}
    for category, count in SINGLE_COUNTS.items():
        tasks = get_benchmark("bfcl_single")(category=category).load()
        assert len(tasks) == count, category
        for task in tasks:
            assert task.question and task.metadata["category"] == category
            assert task.tools or category == "live_irrelevance"  # one record offers none
            for tool in task.tools:
                assert set(tool) == {"name", "description", "parameters"}
                assert tool["parameters"]["type"] == "object"
                schemas[json.dumps(tool["parameters"], sort_keys=True)] = tool["parameters"]
    for schema in schemas.values():  # each distinct schema once
        jsonschema.Draft202012Validator.check_schema(schema)


def test_single_turn_questions_and_golds(bfcl_wheel):
    task = get_benchmark("bfcl_single")().load(limit=1)[0]
    assert task.id == "simple_python_0" and task.question.startswith("Find the area of a triangle")
    assert json.loads(task.gold) == [
        {"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}
    ]
    live = {t.id: t for t in get_benchmark("bfcl_single")(category="live_irrelevance").load()}
    assert all(t.gold == "[]" for t in live.values())
    transcripts = [t for t in live.values() if t.question.startswith("System: ")]
    assert transcripts and "\n\nUser: " in transcripts[0].question
    assert render_messages([{"role": "user", "content": "hi"}]) == "hi"
    exchange = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert render_messages(exchange) == "User: a\n\nAssistant: b"


def test_unknown_category_is_a_config_error():
    with pytest.raises(ConfigError, match="bfcl_single options: category"):
        get_benchmark("bfcl_single")(category="simple_java")
    with pytest.raises(ConfigError, match="bfcl_multi_turn options: category"):
        get_benchmark("bfcl_multi_turn")(category="memory")


def test_every_environment_class_has_valid_specs_matching_its_methods(bfcl_wheel):
    for class_name in CLASSES:
        specs = class_specs(class_name)
        environment = BFCLEnvironment([class_name], {})
        order = environment.parameter_order()
        assert [s["name"] for s in environment.functions(0)] == [s["name"] for s in specs]
        for spec in specs:
            jsonschema.Draft202012Validator.check_schema(spec["parameters"])
            assert set(spec["parameters"]["properties"]) <= set(order[spec["name"]]), spec["name"]


def test_multi_turn_tasks_hold_turns_tools_and_their_environment(bfcl_wheel):
    for category, count in MULTI_TURN_COUNTS.items():
        tasks = get_benchmark("bfcl_multi_turn")(category=category).load()
        assert len(tasks) == count
        for task in tasks:
            assert len(json.loads(task.gold)) == 1 + len(task.turns)
    bench = get_benchmark("bfcl_multi_turn")(category="miss_func")
    task = bench.load(limit=1)[0]
    assert task.metadata["held_out"] == {"3": ["sort"]} and task.turns[2] == ""
    assert "sort" not in {tool["name"] for tool in task.tools}
    environment = bench.environment(task)
    assert "sort" not in {spec["name"] for spec in environment.functions(2)}
    with pytest.raises(ToolError, match="unknown function 'sort'"):
        environment.execute("sort", {"file_name": "final_report.pdf"})
    assert "sort" in {spec["name"] for spec in environment.functions(3)}
    environment.execute("cd", {"folder": "document"})
    assert "Year2024" in environment.execute("sort", {"file_name": "final_report.pdf"})


def test_environment_calls_return_text_and_refuse_bad_ones(bfcl_wheel):
    task = get_benchmark("bfcl_multi_turn")().load(limit=1)[0]
    one, other = (get_benchmark("bfcl_multi_turn")().environment(task) for _ in range(2))
    assert json.loads(one.execute("mkdir", {"dir_name": "new"})) is None
    assert "new" in one.execute("ls", {}) and "new" not in other.execute("ls", {})  # no sharing
    with pytest.raises(ToolError, match="unknown function 'rm_rf'"):
        one.execute("rm_rf", {})
    with pytest.raises(ToolError, match="bad arguments for cd"):
        one.execute("cd", {"directory": "x"})
    with pytest.raises(ToolError, match="No such file or directory"):  # BFCL's own error result
        one.execute("cd", {"folder": "missing"})


def test_long_context_loads_the_padded_states(bfcl_wheel):
    base, long = (
        get_benchmark("bfcl_multi_turn")(category=c).load(limit=1)[0]
        for c in ("base", "long_context")
    )
    assert long.metadata["long_context"] and not base.metadata["long_context"]
    listing = {}
    for task in (base, long):
        environment = BFCLEnvironment.for_task(task)
        environment.execute("cd", {"folder": "document"})
        listing[task.metadata["category"]] = json.loads(environment.execute("ls", {}))
    assert len(listing["long_context"]["current_directory_content"]) > len(
        listing["base"]["current_directory_content"]
    )
