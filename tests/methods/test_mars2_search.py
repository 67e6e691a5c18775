"""MARS² tree search with scripted models: exact call counts, the tree and its parent links, who
sees what (public-test feedback, never the hidden tests), the Thompson posteriors moving
expansions to the better agent, budget stops, garbage replies and the command line. Programs run
for real (tiny ones) in the sandbox."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from helpers import agent_of, method_runner

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.pool import ModelPool
from maslab.llm.scripted import ScriptedModel
from maslab.llm.types import ChatRequest
from maslab.methods.mars2_search import ROOT, Mars2Search, generate_prompt

STUB = 'def add(a, b):\n    """Add.\n    >>> add(1, 2)\n    3\n    >>> add(0, 0)\n    0\n    """\n'
TASK = Task(
    id="h1",
    question=f"Complete this function:\n```python\n{STUB}```",
    answer_type="code",
    tests=("assert add(5, 5) == 10  # HIDDEN-TEST",),
    instruction="Give your final answer in a single ```python code block.",
    metadata={"entry_point": "add"},
)
BODIES = {"right": "a + b", "half": "a - b", "wrong": "None"}  # 2, 1 and 0 of 2 public tests
_TAG = re.compile(r"# prog-(\d+)")


def program(kind: str, tag: int) -> str:
    return f"Here it is:\n```python\ndef add(a, b):  # prog-{tag}\n    return {BODIES[kind]}\n```"


def script(kinds):
    """Reply i (1-based) is a program of kind ``kinds(i, agent)`` tagged ``# prog-i``."""
    counter = itertools.count(1)

    def respond(request: ChatRequest) -> str:
        i = next(counter)
        return program(kinds(i, agent_of(request)), i)

    return respond


def prompts(ctx: Context) -> list[str]:
    return [r.messages[-1]["content"] for r in ctx.ledger.records]


search = method_runner(Mars2Search, TASK)


def test_defaults_names_and_registration():
    method = Mars2Search()
    assert get_method("mars2_search") is Mars2Search
    assert (method.config.agents, method.config.nodes, method.config.stop_on_pass) == (2, 8, True)
    assert Mars2Search(agents=3).agent_names() == ("agent_1", "agent_2", "agent_3")
    assert method.roles == ("agent",)


@pytest.mark.system
@pytest.mark.parametrize("nodes", [1, 3, 6])
async def test_programs_that_never_pass_cost_exactly_one_call_per_node(nodes):
    model = ScriptedModel(script(lambda i, a: "half"))
    solution, ctx = await search(model, nodes=nodes)
    assert len(model.calls) == ctx.usage.calls == nodes
    assert len(solution.metadata["tree"]) == nodes + 1  # the root holds no program
    assert sum(solution.metadata["expansions"].values()) == nodes
    assert solution.metadata["best"] == 1 and solution.answer == program("half", 1)  # ties: first
    assert solution.metadata["best_score"] == 0.5 and not solution.metadata["passed_all"]


@pytest.mark.system
@pytest.mark.parametrize("t", [1, 2, 5])
async def test_the_search_stops_at_the_first_node_that_passes_every_public_test(t):
    model = ScriptedModel(script(lambda i, a: "right" if i == t else "wrong"))
    solution, _ = await search(model, nodes=8)
    assert len(model.calls) == t and solution.answer == program("right", t)
    assert solution.metadata["best"] == t and solution.metadata["passed_all"]
    model = ScriptedModel(script(lambda i, a: "right" if i == t else "wrong"))
    solution, _ = await search(model, nodes=8, stop_on_pass=False)
    assert len(model.calls) == 8 and solution.answer == program("right", t)  # same answer


@pytest.mark.system
async def test_the_tree_its_parent_links_and_who_sees_what():
    kinds = ["wrong", "half", "half", "wrong", "half", "wrong", "half", "wrong", "half", "half"]
    model = ScriptedModel(script(lambda i, a: kinds[i - 1]))
    solution, ctx = await search(model, nodes=10)
    tree = solution.metadata["tree"]
    assert [n["id"] for n in tree] == list(range(11)) and tree[0]["action"] == "root"
    assert {n["action"] for n in tree[1:]} == {"generate", "refine"}  # both widened and deepened
    assert solution.metadata["public_tests"] == 2
    for node, prompt in zip(tree[1:], prompts(ctx), strict=True):
        assert node["parent"] < node["id"]
        assert node["action"] == ("generate" if node["parent"] == ROOT else "refine")
        assert node["score"] == {"wrong": 0.0, "half": 0.5}[kinds[node["id"] - 1]]
        assert (node["passed"], node["tests"]) == (int(2 * node["score"]), 2)
        assert "HIDDEN-TEST" not in prompt and "add(5, 5)" not in prompt
        if node["action"] == "generate":
            assert prompt == generate_prompt(TASK)
        else:  # the parent's program and its public-test feedback, nothing else of the tree
            assert _TAG.findall(prompt) == [str(node["parent"])]
            passed = int(2 * tree[node["parent"]]["score"])
            assert f"{passed} of 2 unit tests passed." in prompt
            assert "Failed:\nassert add(1, 2) == 3" in prompt
    messages = [m for m in ctx.transcript if m.kind == "message"]
    assert [(m.metadata["node"], m.metadata["parent"]) for m in messages] == [
        (n["id"], n["parent"]) for n in tree[1:]
    ]
    assert len([m for m in ctx.transcript if m.kind == "test_results"]) == 10
    # every posterior is Beta(1, 1) updated with the node's own score and its children's
    for node in tree:
        rewards = [c["score"] for c in tree if c["parent"] == node["id"]]
        rewards += [node["score"]] if node["id"] != ROOT else []
        assert node["posterior"] == pytest.approx(
            [1 + sum(rewards), 1 + len(rewards) - sum(rewards)]
        )
    for name, (alpha, beta) in solution.metadata["agent_posteriors"].items():
        scores = [n["score"] for n in tree if n["agent"] == name]
        assert len(scores) == solution.metadata["expansions"][name]
        assert (alpha, beta) == pytest.approx((1 + sum(scores), 1 + len(scores) - sum(scores)))


@pytest.mark.system
def test_the_same_seed_grows_the_same_tree_and_other_seeds_other_trees():
    def tree(seed: int):
        model = ScriptedModel(script(lambda i, a: "half"))
        return Mars2Search(nodes=4).run(TASK, model, seed=seed).solution.metadata["tree"]

    assert tree(1) == tree(1)
    assert len({json.dumps(tree(seed)) for seed in range(3)}) > 1


class TwoModels(ModelPool):
    """agent_1 on a model that always writes failing programs, agent_2 on one that is right."""

    def __init__(self) -> None:
        super().__init__()
        self.served = {
            "scripted:bad": ScriptedModel(script(lambda i, a: "wrong"), name="scripted:bad"),
            "scripted:good": ScriptedModel(script(lambda i, a: "right"), name="scripted:good"),
        }

    def get(self, spec: str) -> ScriptedModel:  # type: ignore[override]
        return self.served[spec]


@pytest.mark.system
async def test_the_thompson_posterior_shifts_expansions_to_the_agent_that_writes_passing_code():
    method = Mars2Search(nodes=12, stop_on_pass=False)
    roles = method.check_model_roles({"agent_1": "scripted:bad", "agent_2": "scripted:good"})
    good_share = []
    for seed in range(4):
        ctx = Context("scripted:bad", models=TwoModels(), model_roles=roles, seed=seed)
        solution = await method.solve(TASK, ctx)
        assert {(r.agent, r.model) for r in ctx.ledger.records} <= {
            ("agent_1", "scripted:bad"),
            ("agent_2", "scripted:good"),
        }
        bad, good = (solution.metadata["expansions"][f"agent_{k}"] for k in (1, 2))
        assert bad + good == len(ctx.ledger.records) == 12 and good > bad
        posteriors = solution.metadata["agent_posteriors"]
        assert posteriors == {"agent_1": [1.0, 1.0 + bad], "agent_2": [1.0 + good, 1.0]}
        assert solution.metadata["passed_all"]
        assert solution.metadata["tree"][solution.metadata["best"]]["agent"] == "agent_2"
        good_share.append(good / 12)
    assert sum(good_share) / len(good_share) >= 0.75  # a fair coin would give about a half


@pytest.mark.system
async def test_a_budget_stop_returns_the_best_node_so_far():
    kinds = ["wrong", "half", "wrong", "wrong", "right"]
    for calls, best in ((1, 1), (2, 2), (4, 2), (5, 5)):
        model = ScriptedModel(script(lambda i, a: kinds[i - 1]))
        ctx = Context(model, budget=Budget(max_calls=calls))
        solution = await Mars2Search().run_sample(TASK, ctx)
        assert ctx.usage.calls == calls
        assert _TAG.findall(solution.answer) == [str(best)]
        assert ("budget" in solution.metadata) == (calls < 5)


@pytest.mark.system
async def test_garbage_replies_score_zero_and_never_crash():
    replies = ["", "no code at all", "```python\ndef add(a, b) return\n```", "```python\n```"]
    model = ScriptedModel(replies, cycle=True)
    solution, ctx = await search(model, nodes=8)
    assert len(model.calls) == 8 and solution.answer == ""  # all score 0: the earliest node
    assert all(n["score"] == 0.0 for n in solution.metadata["tree"])
    shown = 0  # refinements of the reply without code: shown as it is
    for node, prompt in zip(solution.metadata["tree"][1:], prompts(ctx), strict=True):
        if node["parent"] != ROOT and replies[(node["parent"] - 1) % 4] == "no code at all":
            assert "it had no Python code" in prompt and "no code at all" in prompt
            shown += 1
    assert shown >= 1


@pytest.mark.system
async def test_with_no_public_test_a_program_that_runs_passes():
    task = Task(id="q", question="Write a function double(x).", answer_type="code")
    model = ScriptedModel(["```python\nraise ValueError\n```", "```python\nx = 1\n```"])
    solution, _ = await search(model, task=task)
    assert len(model.calls) == 2 and solution.metadata["public_tests"] == 0
    assert [n["score"] for n in solution.metadata["tree"]] == [0.0, 0.0, 1.0]


async def test_a_task_that_is_not_code_is_refused():
    task = Task(id="n", question="What is 6 * 7?", answer_type="number")
    with pytest.raises(ConfigError, match="not a code task"):
        await search(ScriptedModel(["42"]), task=task)


@pytest.mark.system
def test_the_command_line_runs_mars2_on_humaneval(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "mars2_search", "--benchmark", "humaneval", "--model",
         "scripted:echo", "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["status"] == "ok" for r in results)
    for r in results:  # the echoed stub never passes its examples: the whole budget is spent
        assert r["metadata"]["public_tests"] >= 1 and r["usage"]["calls"] == 8
        assert r["score"]["correct"] is False
    solutions = tmp_path / "solutions.yaml"
    solutions.write_text(
        "has_close_elements: |\n  ```python\n  def has_close_elements(numbers, threshold):\n"
        "      return any(abs(a - b) < threshold for i, a in enumerate(numbers)\n"
        "                 for b in numbers[i + 1:])\n  ```\n"
        "separate_paren_groups: |\n  ```python\n  def separate_paren_groups(paren_string):\n"
        "      groups, depth, cur = [], 0, ''\n      for c in paren_string.replace(' ', ''):\n"
        "          cur += c\n          depth += 1 if c == '(' else -1\n"
        "          if depth == 0:\n              groups.append(cur)\n              cur = ''\n"
        "      return groups\n  ```\n"
    )
    solved = tmp_path / "solved"
    code = main(
        ["run", "--method", "mars2_search", "--benchmark", "humaneval", "--model",
         f"scripted:{solutions}", "--limit", "2", "--out", str(solved), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (solved / "results.jsonl").read_text().splitlines()]
    assert all(r["usage"]["calls"] == 1 for r in results)  # passes its examples at once
    assert all(r["score"]["correct"] is True for r in results)  # and the hidden tests score it
