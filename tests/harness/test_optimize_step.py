"""The optimisation step of a run (``--optimize-on``): overlap refusal, separate cost, the
learned state saved atomically and reloaded on a re-run, failures."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

import maslab
from maslab.api import run_config
from maslab.benchmarks.arith import generate
from maslab.cli import main
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, MethodState, get_method, register_method
from maslab.core.task import Solution, Task
from maslab.errors import ConfigError, MaslabError
from maslab.harness.runner import OptimizationFailed, Runner
from maslab.harness.sweep import load_sweep
from maslab.store.run_store import RunStore

OPTIMIZE_RUNS: list[str] = []  # the sample id of every optimize call, across the tests


@register_method("toy_learner")
class ToyLearner(Method):
    """Learns the ids of its optimisation tasks, one model call per task."""

    paper = category = calls = "test only"

    class Config(MethodConfig):
        fail: bool = False

    class LearnedState(MethodState):
        seen: list[str]

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        self.seen: list[str] | None = None

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        OPTIMIZE_RUNS.append(ctx.sample_id)
        for task in tasks:
            await ctx.agent("learner").reply(task.prompt())
        if self.config.fail:
            raise ValueError("the learner fell over")
        self.seen = [task.id for task in tasks]

    def learned_state(self) -> ToyLearner.LearnedState | None:
        return None if self.seen is None else self.LearnedState(seen=self.seen)

    def load_learned_state(self, state: ToyLearner.LearnedState) -> None:
        self.seen = list(state.seen)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        reply = await ctx.agent("solver").reply(task.prompt())
        return Solution(answer=reply.content, metadata={"seen": self.seen})


def evaluate(tmp_path, **options: Any) -> maslab.RunResult:
    options = {"limit": 2, "cache": False, "progress": False, "out": tmp_path / "run", **options}
    return maslab.evaluate("toy_learner", "arith", "scripted:echo", **options)


def test_the_step_runs_first_and_its_cost_is_recorded_apart(tmp_path):
    OPTIMIZE_RUNS.clear()
    result = evaluate(tmp_path, optimize_on="dev", optimize_limit=3)
    assert OPTIMIZE_RUNS == ["optimize"]
    seen = [f"arith-dev-{i:04d}" for i in range(3)]
    assert all(r.metadata["seen"] == seen for r in result.records)  # solved after learning
    saved = json.loads((result.dir / "learned_state.json").read_text())
    assert saved["state"] == {"seen": seen} and saved["split"] == "dev"
    assert result.manifest.optimize["task_ids"] == seen

    [attempt] = result.optimization
    assert attempt.task_id == "optimize" and attempt.status == "ok"
    assert attempt.usage["calls"] == 3
    s = result.summary
    assert s.mean_calls == 1  # the samples' own calls only
    assert s.optimize_calls == 3 and s.optimize_tokens == attempt.tokens_used > 0
    assert s.describe_optimization() == (
        f"optimisation: 3 calls, {attempt.tokens_used:,} tokens (not in the per-sample cost)"
    )
    spent = ("prompt_tokens", "completion_tokens")
    samples = sum(r.usage.get(k, 0) for r in result.records for k in spent)
    assert s.total_served_tokens == samples + sum(attempt.usage[k] for k in spent)
    traces = (result.dir / "optimize_traces.jsonl").read_text().splitlines()
    assert [c["agent"] for c in json.loads(traces[0])["calls"]] == ["learner"] * 3


def test_a_rerun_loads_the_learned_state_without_optimising_again(tmp_path):
    evaluate(tmp_path, optimize_on="dev", optimize_limit=2)
    OPTIMIZE_RUNS.clear()
    result = evaluate(tmp_path, optimize_on="dev", optimize_limit=2, limit=3)  # one more
    assert OPTIMIZE_RUNS == []
    assert len(result.optimization) == 1 and result.summary.optimize_calls == 2
    assert [r.metadata["seen"] for r in result.records] == [
        ["arith-dev-0000", "arith-dev-0001"]
    ] * 3


def test_the_optimisation_is_part_of_the_run_identity():
    base = {"method": "toy_learner", "benchmark": "arith", "model": "scripted:echo"}

    def out(**options: object) -> str | None:
        return Runner(run_config(**base, **options)).config.out

    dirs = {
        out(**o) for o in ({}, {"optimize_on": "dev"}, {"optimize_on": "dev", "optimize_limit": 5})
    }
    assert len(dirs) == 3
    assert out() == out(optimize_on=None)


def test_a_run_refuses_another_optimisation_in_its_directory(tmp_path):
    evaluate(tmp_path, optimize_on="dev", optimize_limit=2)
    with pytest.raises(ConfigError, match="optimize differ"):
        evaluate(tmp_path, optimize_on="dev", optimize_limit=1)


def test_the_optimisation_split_may_not_be_the_test_split(tmp_path):
    with pytest.raises(ConfigError, match="'dev' is the test split"):
        evaluate(tmp_path, split="dev", optimize_on="dev")


def write_data(tmp_path, records: list[dict[str, Any]]):
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_split_sharing_a_task_id_is_refused(tmp_path):
    data = write_data(tmp_path, [{"id": "arith-dev-0001", "question": "1 + 1?", "answer": "2"}])
    with pytest.raises(ConfigError, match=r"shares 1 of its 2 tasks .* first arith-dev-0001"):
        evaluate(tmp_path, data=data, optimize_on="dev", optimize_limit=2)
    assert not (tmp_path / "run").exists()  # refused before the directory is touched


def test_a_split_sharing_a_question_is_refused_whatever_its_id(tmp_path):
    question = generate(0, "dev", 3, 0)["question"]
    record = {"id": "mine-1", "question": f"  {question.upper()} ", "answer": "2"}
    with pytest.raises(ConfigError, match="by id or question, first arith-dev-0000"):
        evaluate(tmp_path, data=write_data(tmp_path, [record]), optimize_on="dev")


def test_a_disjoint_data_file_is_accepted(tmp_path):
    data = write_data(tmp_path, [{"id": "mine-1", "question": "What is 1 + 1?", "answer": "2"}])
    result = evaluate(tmp_path, data=data, optimize_on="dev", optimize_limit=1)
    assert [r.task_id for r in result.records] == ["mine-1"] and result.summary.optimize_calls == 1


def test_a_method_with_nothing_to_learn_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="vanilla has nothing to learn"):
        maslab.evaluate("vanilla", "arith", "scripted:echo", limit=1, optimize_on="dev")
    with pytest.raises(ConfigError, match="optimize_limit needs optimize_on"):
        evaluate(tmp_path, optimize_limit=3)


def test_a_failed_optimisation_saves_nothing_and_records_its_spend(tmp_path):
    with pytest.raises(OptimizationFailed, match="the learner fell over") as failure:
        evaluate(tmp_path, optimize_on="dev", optimize_limit=2, config={"fail": True})
    assert "\n" not in str(failure.value)
    store = RunStore(tmp_path / "run")
    assert not (store.dir / "learned_state.json").exists()
    [attempt] = store.optimizations()
    assert attempt.status == "error" and attempt.usage["calls"] == 2
    assert store.results() == []  # no sample ran on an unlearned method


def test_the_cli_runs_the_step_and_reports_a_failure_in_one_line(tmp_path, capsys):
    out = tmp_path / "cli"
    common = ["run", "--method", "toy_learner", "--benchmark", "arith", "--model",
              "scripted:echo", "--limit", "1", "--optimize-on", "dev", "--optimize-limit", "2",
              "--no-cache", "--quiet"]  # fmt: skip
    assert main([*common, "--out", str(out)]) == 0
    assert "optimisation: 2 calls" in capsys.readouterr().out
    assert main(["show", str(out)]) == 0
    assert "optimisation: 2 calls" in capsys.readouterr().out
    assert "optimisation 2 calls" in repr(maslab.load_run(out))
    assert main([*common, "--out", str(tmp_path / "bad"), "--config", "fail=true"]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("maslab: error: the optimisation step on 'dev' failed")
    assert len(error.splitlines()) == 1
    assert main([*common[:-6], "--optimize-on", "test", "--out", str(tmp_path / "same")]) == 2
    assert "is the test split" in capsys.readouterr().err


def test_dylan_learns_its_team_in_a_run_and_solves_with_it(tmp_path):
    pool = ["Economist", "Doctor", "Lawyer"]
    result = maslab.evaluate(
        "dylan", "arith", "scripted:echo", limit=1, optimize_on="dev", optimize_limit=1,
        config={"pool": pool, "team_size": 2, "team": ["Programmer"]}, cache=False,
        out=tmp_path / "dylan", progress=False,
    )  # fmt: skip
    state = json.loads((result.dir / "learned_state.json").read_text())["state"]
    assert len(state["team"]) == 2 and set(state["team"]) <= set(pool)
    assert list(result.records[0].metadata["team"].values()) == state["team"]
    # N = 3 pool agents; echo gives them one answer, a consensus after round 0
    assert result.summary.optimize_calls == 3


def test_dylan_and_goagent_states_round_trip():
    dylan = get_method("dylan")(pool=["Lawyer", "Doctor", "Economist"], team_size=2)
    assert dylan.learned_state() is None
    saved = {"team": ["Lawyer", "Economist"], "pool_importance": {"Lawyer": 1, "Economist": 2}}
    dylan.restore_learned_state(saved, "state.json")
    assert dylan.team == ("Lawyer", "Economist")
    assert dylan.learned_state() == type(dylan).LearnedState.model_validate(saved)
    assert dylan.dump_learned_state() == saved
    with pytest.raises(ConfigError, match=r"^state\.json: dylan learned state does not fit"):
        dylan.restore_learned_state({"team": ["Programmer"], "pool_importance": {}}, "state.json")

    goagent = get_method("goagent")(selector="learned")
    assert goagent.learned_state() is None
    with pytest.raises(MaslabError, match="format: Input should be 'goagent-selector/2'"):
        goagent.restore_learned_state({"format": "goagent-selector/1", "domains": {}}, "state")


def test_a_sweep_gives_the_step_to_the_methods_that_learn(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "models: ['scripted:echo']\nmethods: [vanilla, toy_learner]\n"
        "benchmarks: [{name: arith, optimize_on: dev, optimize_limit: 2}]\n"
    )
    cells = {cell.method: cell.config for cell in load_sweep(sweep).cells()}
    assert (cells["toy_learner"].optimize_on, cells["toy_learner"].optimize_limit) == ("dev", 2)
    assert (cells["vanilla"].optimize_on, cells["vanilla"].optimize_limit) == (None, None)
