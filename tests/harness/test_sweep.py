"""``maslab sweep``: options that override the file, and cells that fail without stopping the
others."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

import maslab
from maslab.cli import main
from maslab.errors import ConfigError
from maslab.harness.runner import Runner
from maslab.harness.sweep import load_sweep, parse_only, select

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
GSM8K = FIXTURES / "gsm8k_small.jsonl"


def results(run: Path) -> int:
    return len((run / "results.jsonl").read_bytes().splitlines())


def failure_lines(out: str) -> list[str]:
    """The lines of the closing table of failed cells."""
    return [line.strip() for line in out.split(" failed:\n", 1)[1].strip().splitlines()]


def test_a_missing_dataset_sets_aside_its_cell_and_the_others_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "datasets", None)  # no Hub: gsm8k has no data here
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"out: {tmp_path / 'sweep'}\nmodels: ['scripted:echo']\nmethods: [vanilla]\n"
        "benchmarks: [gsm8k, arith]\nlimit: 2\ncache: false\n"
    )
    assert main(["sweep", str(sweep), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert results(tmp_path / "sweep" / "arith" / "vanilla" / "scripted_echo") == 2
    assert not (tmp_path / "sweep" / "gsm8k").exists()
    assert "sweep done: 1 of 2 runs finished" in out
    assert (tmp_path / "sweep" / "report.html").is_file()
    (line,) = failure_lines(out)
    assert line.split()[:3] == ["gsm8k/vanilla/scripted:echo", "before", "running"]
    assert "gsm8k data not found: pass --data FILE" in line


def test_an_unreachable_endpoint_and_errored_samples_are_tabled(tmp_path, capsys):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (tmp_path / "endpoints.yaml").write_text(
        f"down:\n  - base_url: http://127.0.0.1:{port}/v1\n    retry: {{attempts: 1}}\n"
    )
    (tmp_path / "one.yaml").write_text("['The answer is 1.']\n")  # the second call fails
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"out: {tmp_path / 'sweep'}\nendpoints: {tmp_path / 'endpoints.yaml'}\n"
        f"models: ['scripted:{tmp_path / 'one.yaml'}', openai:down]\nmethods: [vanilla]\n"
        "benchmarks: [arith]\nlimit: 4\nconcurrency: 1\ncache: false\n"
    )
    assert main(["sweep", str(sweep), "--quiet"]) == 1
    scripted, down = failure_lines(capsys.readouterr().out)
    assert "samples errored" in scripted and "ScriptError: script used up" in scripted
    assert down.startswith("arith/vanilla/openai:down")
    assert "while running" in down and "stopped: ConnectionRefused" in down  # at once


def test_model_limit_and_only_override_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the file's model is never used
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"out: {tmp_path / 'sweep'}\nmodels: [openai:gpt-4o-mini]\n"
        "methods: [vanilla, {name: llm_debate, config: {agents: 2, rounds: 1}, label: debate2}]\n"
        f"benchmarks: [arith, {{name: gsm8k, data: '{GSM8K}'}}]\nlimit: 5\ncache: false\n"
    )
    argv = ["sweep", str(sweep), "--quiet", "--model", "scripted:echo", "--limit", "2",
            "--only", "method=debate2", "--only", "benchmark=gsm*,method=vanilla"]  # fmt: skip
    assert main(argv) == 0
    assert "sweep done: 3 of 3 runs finished" in capsys.readouterr().out
    ran = sorted(p.parent.relative_to(tmp_path / "sweep").as_posix()
                 for p in (tmp_path / "sweep").rglob("results.jsonl"))  # fmt: skip
    assert ran == [
        "arith/debate2/scripted_echo",
        "gsm8k/debate2/scripted_echo",
        "gsm8k/vanilla/scripted_echo",
    ]
    assert all(results(tmp_path / "sweep" / run) == 2 for run in ran)


def test_only_patterns_match_names_labels_and_globs(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "models: ['scripted:echo', 'openai:gpt-4o-mini']\n"
        "methods: [vanilla, {name: llm_debate, label: debate-llm-agg}]\n"
        "benchmarks: [arith, {name: arith, limit: 3, label: arith-3}]\nlimit: 10\n"
    )
    cells = load_sweep(sweep).cells(limit=4)
    assert len(cells) == 8 and {c.config.limit for c in cells} == {3, 4}  # capped, not raised
    assert parse_only(" model = openai:* , method=llm_debate") == {
        "model": "openai:*",
        "method": "llm_debate",
    }
    chosen = select(cells, ["model=openai:*,method=llm_debate"])
    assert {str(c) for c in chosen} == {  # both arith cells, each in its own directory
        "arith/debate-llm-agg/openai:gpt-4o-mini",
        "arith-3/debate-llm-agg/openai:gpt-4o-mini",
    }
    assert len(select(cells, ["method=debate-*"])) == 4  # the label counts too
    assert select(cells, []) == cells
    with pytest.raises(ConfigError, match="not KEY=GLOB"):
        parse_only("method")


def test_a_cell_whose_agent_model_lacks_its_key_is_set_aside(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MASLAB_NO_SUCH_KEY", raising=False)
    (tmp_path / "endpoints.yaml").write_text(
        "keyed:\n  - base_url: http://127.0.0.1:9/v1\n    api_key_env: MASLAB_NO_SUCH_KEY\n"
    )
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"out: {tmp_path / 'sweep'}\nendpoints: {tmp_path / 'endpoints.yaml'}\n"
        "models: ['scripted:echo']\nbenchmarks: [arith]\nlimit: 1\ncache: false\nmethods:\n"
        "  - vanilla\n  - {name: conductor, model_roles: {planner: openai:keyed}, label: kp}\n"
    )
    assert main(["sweep", str(sweep), "--quiet"]) == 1
    (line,) = failure_lines(capsys.readouterr().out)
    assert line.split()[:3] == ["arith/kp/scripted:echo", "before", "running"]
    assert "MASLAB_NO_SUCH_KEY is not set" in line and not (tmp_path / "sweep/arith/kp").exists()
    assert results(tmp_path / "sweep" / "arith" / "vanilla" / "scripted_echo") == 1


def test_a_sweep_file_passes_its_evaluator_the_options(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    base = (
        f"out: {tmp_path / 'sweep'}\nmodels: ['scripted:echo']\nbenchmarks: [arith]\nlimit: 1\n"
        "cache: false\nmethods: [{name: free_discussion, config: {agents: 2, rounds: 1}}]\n"
    )
    sweep.write_text(
        base + "evaluator: behaviour_coding\n"
        "evaluator_options: {judge_a: 'scripted:echo', judge_b: 'scripted:echo'}\n"
    )
    (cell,) = load_sweep(sweep).cells()
    assert cell.config.evaluator_options == {"judge_a": "scripted:echo", "judge_b": "scripted:echo"}
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    (record,) = maslab.load_run(tmp_path / "sweep/arith/free_discussion/scripted_echo").records
    assert record.scoring_usage["calls"] == 2 * 2  # two messages, each coded by both judges
    sweep.write_text(base + "evaluator: behaviour_coding\nevaluator_options: {judge_a: x}\n")
    with pytest.raises(ConfigError, match="behaviour_coding needs judge_b"):
        load_sweep(sweep)
    sweep.write_text(base + "evaluator_options: {judge_a: 'scripted:echo'}\n")
    with pytest.raises(ConfigError, match="options of one evaluator: name it"):
        load_sweep(sweep)


def test_one_benchmark_or_method_twice_needs_labels_and_gets_its_own_directory(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    head = f"out: {tmp_path / 'sweep'}\nmodels: ['scripted:echo']\nlimit: 2\ncache: false\n"
    twice = (
        "benchmarks:\n- {name: arith, options: {size: 3}}\n- {name: arith, options: {size: 4}}\n"
    )
    sweep.write_text(head + "methods: [vanilla]\n" + twice + "\n")
    with pytest.raises(ConfigError, match="benchmarks arith appear more than once: give each"):
        load_sweep(sweep)
    sweep.write_text(
        head + "methods: [vanilla, {name: vanilla, config: {}}]\nbenchmarks: [arith]\n"
    )
    with pytest.raises(ConfigError, match="methods vanilla appear more than once"):
        load_sweep(sweep)
    labelled = twice.replace("size: 4}}", "size: 4}, label: arith-4}")
    sweep.write_text(head + "methods: [vanilla]\n" + labelled + "\n")
    cells = load_sweep(sweep).cells()
    assert [str(c) for c in cells] == [
        "arith/vanilla/scripted:echo",
        "arith-4/vanilla/scripted:echo",
    ]
    assert [str(c) for c in select(cells, ["benchmark=arith-4"])] == [str(cells[1])]
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    for directory in ("arith", "arith-4"):
        assert results(tmp_path / "sweep" / directory / "vanilla" / "scripted_echo") == 2


def test_a_sweep_files_budgets_and_shuffle_reach_every_cell(tmp_path, capsys):
    """``max_calls: 1`` stops every sample of every cell at its first call (a two-agent debate
    makes two), as ``maslab run --max-calls 1`` does; the other budgets and the shuffle reach
    each cell's run too."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"out: {tmp_path / 'sweep'}\nmodels: ['scripted:echo']\nbenchmarks: [arith]\nlimit: 2\n"
        "cache: false\nmethods: [vanilla, {name: llm_debate, config: {agents: 2, rounds: 1}}]\n"
        "max_calls: 1\nmax_sample_tokens: 5000\nmax_sample_seconds: 60\nshuffle: true\n"
    )
    cells = load_sweep(sweep).cells()
    assert {(c.config.max_calls, c.config.max_tokens, c.config.max_seconds) for c in cells} == {
        (1, 5000, 60)
    }
    assert all(c.config.shuffle for c in cells)
    assert main(["sweep", str(sweep), "--quiet"]) == 0
    debate = maslab.load_run(tmp_path / "sweep/arith/llm_debate/scripted_echo")
    assert [(r.status, r.usage["calls"]) for r in debate.records] == [("budget", 1)] * 2
    assert debate.manifest.budget == {"max_calls": 1, "max_tokens": 5000, "max_seconds": 60}
    vanilla = maslab.load_run(tmp_path / "sweep/arith/vanilla/scripted_echo")
    assert [(r.status, r.usage["calls"]) for r in vanilla.records] == [("ok", 1)] * 2
    # the run's tasks are the shuffled split's first two, not the split's
    unshuffled = load_sweep(sweep).model_copy(update={"shuffle": False}).cells()[0].config
    ran = sorted({r.task_id for r in vanilla.records})
    assert ran == sorted(t.id for t in Runner(cells[0].config).tasks)
    assert ran != sorted(t.id for t in Runner(unshuffled).tasks)
    sweep.write_text(sweep.read_text().replace("max_calls: 1", "max_calls: 0"))
    with pytest.raises(ConfigError, match="max_calls"):
        load_sweep(sweep)


def test_an_entrys_options_replace_the_files_the_methods_last(tmp_path):
    """A cell's options: the file's, then its benchmark entry's, then its method entry's; the
    file's judge goes to the cells whose evaluator asks one; sampling's other keys reach every
    cell."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "models: ['scripted:echo']\nlimit: 5\nseed: 3\njudge_model: 'scripted:echo'\n"
        "sampling: {temperature: 0.2, top_p: 0.9}\n"
        "methods: [vanilla, {name: cot, limit: 2, temperature: 0}]\n"
        "benchmarks: [{name: arith, limit: 3, seed: 4},\n"
        "             {name: arith, label: judged, evaluator: llm_judge, repeats: 2}]\n"
    )
    cells = {str(cell): cell.config for cell in load_sweep(sweep).cells()}
    assert {name: (c.limit, c.seed, c.repeats) for name, c in cells.items()} == {
        "arith/vanilla/scripted:echo": (3, 4, 1),
        "arith/cot/scripted:echo": (2, 4, 1),
        "judged/vanilla/scripted:echo": (5, 3, 2),
        "judged/cot/scripted:echo": (2, 3, 2),
    }
    assert {name: c.evaluator_options.get("judge") for name, c in cells.items()} == {
        "arith/vanilla/scripted:echo": None,
        "arith/cot/scripted:echo": None,
        "judged/vanilla/scripted:echo": "scripted:echo",
        "judged/cot/scripted:echo": "scripted:echo",
    }
    assert cells["arith/vanilla/scripted:echo"].sampling["top_p"] == 0.9
    assert [c.sampling["temperature"] for c in cells.values()] == [0.2, 0, 0.2, 0]
    sweep.write_text(sweep.read_text() + "temperature: 0.3\n")
    with pytest.raises(ConfigError, match="give temperature once: at the top or in sampling"):
        load_sweep(sweep)
