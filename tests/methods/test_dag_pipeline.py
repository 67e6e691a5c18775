"""Structural tests of the DAG pipeline ("Aligned Agents, Biased Swarm", arXiv 2604.08963) with
scripted models: calls per preset, who reads which field of whom, reply parsing into message
metadata, the answer, own DAGs and their errors, budget stops, model roles and native JSON."""

from __future__ import annotations

import json
import re

import pytest
from helpers import agent_of, method_runner

from maslab.benchmarks.discrim_eval_open import PROBABILITY_INSTRUCTION, ScenarioReply
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.dag_pipeline import DAGPipeline, NodeAnswer
from maslab.methods.dag_pipeline.topologies import preset

SCENARIO = Task(
    id="s1",
    question="Three versions of one scenario: A, B and C.",
    instruction=PROBABILITY_INSTRUCTION,
    metadata={"scenarios": ["a", "b", "c"]},
)
MATH = Task(id="m1", question="What is 6 * 7?", answer_type="number", instruction="Box it.")
_REASON = re.compile(r"REASON-(\w+)")


def probability_reply(request: ChatRequest) -> str:
    """A scenario reply whose reason names the agent; probabilities 2:3:5 (not normalised)."""
    return json.dumps(
        {"ChoiceProbabilities": {"A": 2, "B": 3, "C": 5}, "Reason": f"REASON-{agent_of(request)}"}
    )


def answer_reply(request: ChatRequest) -> str:
    agent = agent_of(request)
    return json.dumps({"Reason": f"REASON-{agent}", "Answer": f"{agent} says \\boxed{{42}}"})


async def run(model, task=SCENARIO, ctx=None, **config):
    return await method_runner(DAGPipeline, task)(model, ctx, **config)


def test_registered_with_chain_by_default():
    assert get_method("dag_pipeline") is DAGPipeline
    assert DAGPipeline().agent_names() == ("Judge", "Doctor", "Engineer", "Summarizer")
    cfg = DAGPipeline().config
    assert (cfg.pass_field, cfg.answer_field, cfg.iterations) == ("Reason", None, 4)


@pytest.mark.parametrize(
    ("topology", "calls"),
    [("chain", 4), ("spindle", 7), ("parallel", 6), ("ffn", 6), ("iteration", 24)],
)
@pytest.mark.parametrize("task", [SCENARIO, MATH], ids=["scenario", "math"])
async def test_calls_are_one_per_node(topology, calls, task):
    model = ScriptedModel(probability_reply if task is SCENARIO else answer_reply)
    _, ctx = await run(model, task, topology=topology)
    assert len(model.calls) == ctx.usage.calls == calls
    assert sorted(r.agent for r in ctx.ledger.records) == sorted(preset(topology).nodes)
    assert ctx.topology is not None and ctx.topology.name == topology


async def test_iteration_count_scales_the_calls():
    model = ScriptedModel(probability_reply)
    await run(model, topology="iteration", iterations=2)
    assert len(model.calls) == 12


@pytest.mark.parametrize("topology", ["chain", "spindle", "parallel", "ffn", "iteration"])
async def test_each_node_reads_exactly_its_predecessors_reasons_in_node_order(topology):
    model = ScriptedModel(probability_reply)
    await run(model, topology=topology)
    graph = preset(topology)
    for call in model.calls:
        node = agent_of(call.request)
        prompt = last_user_message(call.request)
        assert _REASON.findall(prompt) == graph.predecessors(node)
        for i, sender in enumerate(graph.predecessors(node), 1):
            assert f"Expert {i}: REASON-{sender}" in prompt
        assert prompt.endswith(SCENARIO.prompt())
        experts = prompt.removesuffix(SCENARIO.prompt())
        assert "ChoiceProbabilities" not in experts and '"A"' not in experts  # never passed on
        assert call.request.messages[0] == {
            "role": "system",
            "content": graph.graph.nodes[node]["persona"],
        }
    first = next(c for c in model.calls if agent_of(c.request) == graph.nodes[0])
    assert "Expert" not in last_user_message(first.request)


async def test_a_chosen_pass_field_is_passed_instead():
    model = ScriptedModel(answer_reply)
    await run(model, MATH, topology="chain", pass_field="Answer")
    last = next(c for c in model.calls if agent_of(c.request) == "Summarizer")
    prompt = last_user_message(last.request)
    assert "Expert 3: Engineer says \\boxed{42}" in prompt and "REASON-" not in prompt


async def test_prompts_do_not_depend_on_which_call_finished_first():
    def slow_doctor(request: ChatRequest) -> float:
        return 0.03 if agent_of(request) == "Doctor" else 0.0

    prompts = []
    for latency in (slow_doctor, 0.0):
        model = ScriptedModel(probability_reply, latency=latency)
        _, ctx = await run(model, topology="ffn")
        prompts.append(sorted((r.agent, repr(r.messages)) for r in ctx.ledger.records))
        if latency is slow_doctor:  # the Engineer really finished first
            layer = [m.sender for m in ctx.transcript if m.round == 1]
            assert layer == ["Engineer", "Doctor"]
    assert prompts[0] == prompts[1]


async def test_every_reply_is_parsed_into_its_message_metadata():
    model = ScriptedModel(probability_reply)
    solution, ctx = await run(model, topology="spindle")
    by_sender = {m.sender: m for m in ctx.transcript}
    final = by_sender["Summarizer_2"].metadata
    assert final["reply"] == {
        "ChoiceProbabilities": {"A": 2, "B": 3, "C": 5},
        "Reason": "REASON-Summarizer_2",
    }
    assert final["choice_probabilities"] == {"A": 0.2, "B": 0.3, "C": 0.5}
    assert final["parsed"] is True and final["position"] == 7 and final["role"] == "Summarizer"
    assert sorted(m.metadata["position"] for m in ctx.transcript) == list(range(1, 8))
    assert json.loads(solution.answer) == {"A": 0.2, "B": 0.3, "C": 0.5}
    assert solution.metadata == {"topology": "spindle", "sinks": ["Summarizer_2"], "parsed": 7}


async def test_garbage_replies_default_to_near_uniform_and_never_crash():
    replies = {"Judge": "I refuse to pick.", "Doctor": '{"ChoiceProbabilities": "A", "Reason": 1}'}

    def respond(request: ChatRequest) -> str:
        return replies.get(agent_of(request), '{"ChoiceProbabilities": {"A": -1}}')

    model = ScriptedModel(respond)
    solution, ctx = await run(model, topology="chain")
    for message in ctx.transcript:
        assert message.metadata["choice_probabilities"] == {"A": 0.33, "B": 0.33, "C": 0.34}
        assert message.metadata["parsed"] is False
    assert json.loads(solution.answer) == {"A": 0.33, "B": 0.33, "C": 0.34}
    summarizer = next(c for c in model.calls if agent_of(c.request) == "Summarizer")
    prompt = last_user_message(summarizer.request)
    assert "Expert 1: I refuse to pick." in prompt  # no Reason: the whole reply stands in
    assert "Expert 2: 1" in prompt  # a non-string Reason, as JSON


async def test_a_generic_task_asks_for_reason_and_answer_and_answers_with_the_sinks_answer():
    model = ScriptedModel(answer_reply)
    solution, ctx = await run(model, MATH, topology="parallel")
    assert solution.answer == "Summarizer says \\boxed{42}"
    shape = f"{MATH.prompt()}\n\n{NodeAnswer.instructions()}"
    assert all(last_user_message(c.request).endswith(shape) for c in model.calls)
    assert '"Answer": "<your final answer, in the form the task asks for>"' in shape
    assert all("choice_probabilities" not in m.metadata for m in ctx.transcript)
    sink = next(m for m in ctx.transcript if m.sender == "Summarizer").metadata
    assert sink["reply"] == {"Reason": "REASON-Summarizer", "Answer": solution.answer}
    assert sink["parsed"] is True
    reason, _ = await run(ScriptedModel(answer_reply), MATH, answer_field="Reason")
    assert reason.answer == "REASON-Summarizer"


async def test_an_own_dag_with_several_sinks_takes_the_majority_of_the_sinks():
    answers = {"root": "\\boxed{1}", "x": "\\boxed{7}", "y": "\\boxed{5}", "z": "\\boxed{5}"}

    def respond(request: ChatRequest) -> str:
        return json.dumps({"Reason": "r", "Answer": answers[agent_of(request)]})

    model = ScriptedModel(respond)
    nodes = {name: f"You are {name}." for name in answers}
    method = DAGPipeline(nodes=nodes, edges=[["root", "x"], ["root", "y"], ["root", "z"]])
    solution = await method.solve(MATH, ctx := Context(model))
    assert len(model.calls) == 4 and solution.answer == "\\boxed{5}"
    assert solution.metadata["sinks"] == ["x", "y", "z"]
    assert ctx.topology.to_dict()["nodes"][1] == {
        "name": "x",
        "attrs": {"role": "x", "persona": "You are x."},
    }
    assert model.calls[0].request.messages[0] == {"role": "system", "content": "You are root."}


def test_own_dag_errors_are_one_line():
    nodes = {"a": "A", "b": "B"}
    with pytest.raises(ConfigError, match=r"edge \[a, c\] names unknown node 'c'; nodes: a, b"):
        DAGPipeline(nodes=nodes, edges=[["a", "c"]])
    with pytest.raises(ConfigError, match="has a cycle a -> b -> a") as cycle:
        DAGPipeline(nodes=nodes, edges=[["a", "b"], ["b", "a"]])
    assert "\n" not in str(cycle.value)
    with pytest.raises(ConfigError, match="not both"):
        DAGPipeline(topology="ffn", nodes=nodes)
    with pytest.raises(ConfigError, match="edges need nodes"):
        DAGPipeline(edges=[["a", "b"]])
    with pytest.raises(ConfigError, match="unknown preset 'star'"):
        DAGPipeline(topology="star")
    with pytest.raises(ConfigError, match="pass_field"):
        DAGPipeline(pass_field="Why")


async def test_a_budget_stop_returns_the_last_complete_layers_answer():
    model = ScriptedModel(probability_reply)
    ctx = Context(model, budget=Budget(max_calls=4))  # ffn: layers 1, 2 done, layer 3 cut
    solution = await DAGPipeline(topology="ffn").run_sample(SCENARIO, ctx)
    assert ctx.budget_stop is not None and solution.metadata["budget"]
    assert solution.metadata["node"] == "Engineer"
    assert json.loads(solution.answer) == {"A": 0.2, "B": 0.3, "C": 0.5}


def test_model_roles_put_single_nodes_on_other_models(tmp_path):
    script = tmp_path / "other.yaml"
    script.write_text(json.dumps({".": '{"ChoiceProbabilities": {"A": 1}, "Reason": "OTHER"}'}))
    other = f"scripted:{script}"
    outcome = DAGPipeline(topology="iteration", iterations=2).run(
        SCENARIO, "scripted:echo", model_roles={"Doctor_2": other}
    )
    records = outcome.context.ledger.records
    assert [(r.agent, r.model) for r in records if r.model == other] == [("Doctor_2", other)]
    lawyer = next(r for r in records if r.agent == "Lawyer_2")
    assert "Expert 1: OTHER" in lawyer.messages[-1]["content"]
    method = DAGPipeline(topology="spindle")
    method.check_model_roles({"node": "scripted:echo", "Summarizer_2": "scripted:echo"})
    with pytest.raises(ConfigError, match="no role or agent 'Summarizer_3'"):
        method.check_model_roles({"Summarizer_3": "scripted:echo"})


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize(
    ("task", "schema"), [(SCENARIO, ScenarioReply.json_schema()), (MATH, NodeAnswer.json_schema())]
)
async def test_the_reply_schema_is_sent_natively_where_supported(native, task, schema):
    respond = probability_reply if task is SCENARIO else answer_reply
    model = ScriptedModel(respond, native=["structured_output"] if native else [])
    await run(model, task, topology="chain")
    for call in model.calls:
        sent = call.request.response_format
        assert (sent["json_schema"]["schema"] if native else sent) == (schema if native else None)
