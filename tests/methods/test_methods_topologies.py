"""Structural tests of the group/DAG topology methods (MacNet, GoAgent) with scripted models."""

from __future__ import annotations

import asyncio
import itertools
import json
import re

import pytest
from helpers import GOLD_TASK as TASK

from maslab.cli import main
from maslab.core.context import Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.methods import goagent, macnet  # noqa: F401 (registers the methods)

TOKEN = re.compile(r"token-\d+")


def unique_answers():
    counter = itertools.count(1)
    return lambda request: f"token-{next(counter)}: The answer is 42."


def tokens(text: str) -> set[str]:
    return set(TOKEN.findall(text))


def prompt_of(record) -> str:
    return record.messages[-1]["content"]


# -- MacNet ----------------------------------------------------------------------------------


def macnet_calls(edges: list[list[str]], nodes: int | list[str]) -> int:
    """|sources| + 2|E| + #merging nodes + [several sinks], over ``nodes`` (``node_0`` ..
    ``node_<nodes-1>``, or these names) and every node an edge names (``output``)."""
    names = [f"node_{i}" for i in range(nodes)] if isinstance(nodes, int) else nodes
    indegree = dict.fromkeys(names, 0)
    outdegree = dict(indegree)
    for u, v in edges:
        indegree[v] = indegree.get(v, 0) + 1
        outdegree[u] = outdegree.get(u, 0) + 1
        indegree.setdefault(u, 0)
        outdegree.setdefault(v, 0)
    sources = sum(d == 0 for d in indegree.values())
    merges = sum(d >= 2 for d in indegree.values())
    sinks = sum(d == 0 for d in outdegree.values())
    return sources + 2 * len(edges) + merges + (sinks >= 2)


@pytest.mark.parametrize(
    ("topology", "edges", "calls"),
    [
        ("chain", [(0, 1), (1, 2), (2, 3), (3, 4)], 9),
        ("star", [(0, 1), (0, 2), (0, 3), (0, 4)], 10),
        ("tree", [(0, 1), (0, 2), (1, 3), (1, 4)], 10),
        ("mesh", [(u, v) for u in range(5) for v in range(u + 1, 5)], 24),
        ("layered", [(u, v) for u in range(3) for v in (3, 4)], 18),
    ],
)
async def test_macnet_builds_the_dag_and_makes_the_formula_s_calls(topology, edges, calls):
    model = ScriptedModel(unique_answers())
    ctx = Context(model)
    solution = await get_method("macnet")(topology=topology).solve(TASK, ctx)
    expected = [[f"node_{u}", f"node_{v}"] for u, v in edges]
    assert sorted(solution.metadata["edges"]) == sorted(expected)
    assert macnet_calls(expected, 5) == calls
    assert len(model.calls) == ctx.usage.calls == calls
    assert ctx.topology is not None and ctx.topology.name == solution.metadata["topology"]


@pytest.mark.parametrize("seed", [0, 1, 7, 2025])
async def test_macnet_random_dag_is_seeded_and_matches_the_formula(seed):
    model = ScriptedModel(unique_answers())
    ctx = Context(model, seed=seed)
    solution = await get_method("macnet")(agents=6).solve(TASK, ctx)
    edges = solution.metadata["edges"]
    assert len(model.calls) == macnet_calls(edges, 6)
    # the same sample seed draws the same DAG; a config seed fixes it for every sample
    again = await get_method("macnet")(agents=6).solve(TASK, Context(ScriptedModel(), seed=seed))
    assert again.metadata["edges"] == edges
    fixed = [
        (await get_method("macnet")(seed=99).solve(TASK, Context(ScriptedModel(), seed=s)))
        for s in (seed, seed + 1)
    ]
    assert fixed[0].metadata["edges"] == fixed[1].metadata["edges"]
    assert fixed[0].metadata["seed"] == 99


@pytest.mark.parametrize("topology", ["mesh", "layered", "random", "tree"])
async def test_macnet_critics_review_the_upstream_artifact_and_actors_rewrite_it(topology):
    model = ScriptedModel(unique_answers())
    ctx = Context(model, seed=3)
    await get_method("macnet")(topology=topology).solve(TASK, ctx)
    artifacts = {m.sender: m.content for m in ctx.transcript if m.kind == "artifact"}
    critiques = {m.sender: m.content for m in ctx.transcript if m.kind == "critique"}
    edges = [tuple(e) for e in ctx.topology.edges]
    assert {f"critic:{u}->{v}" for u, v in edges} == set(critiques)
    for u, v in edges:
        critic = next(r for r in ctx.ledger.records if r.agent == f"critic:{u}->{v}")
        # MASLab's bug left this empty: the critic must see u's artifact, and only u's
        assert tokens(artifacts[u]) <= tokens(prompt_of(critic))
        assert tokens(prompt_of(critic)) == tokens(artifacts[u])
        revision = next(
            r
            for r in ctx.ledger.records
            if r.agent == v and critiques[f"critic:{u}->{v}"] in prompt_of(r)
        )
        assert tokens(prompt_of(revision)) == tokens(artifacts[u]) | tokens(critiques[critic.agent])
    # every call is stateless: only artifacts travel, never conversations
    assert all(len(r.messages) <= 2 for r in ctx.ledger.records)


async def test_macnet_merges_several_incoming_versions_and_several_sinks():
    model = ScriptedModel(unique_answers())
    ctx = Context(model)
    solution = await get_method("macnet")(topology="layered").solve(TASK, ctx)
    revisions = [m for m in ctx.transcript if m.kind == "revision"]
    for node in ("node_3", "node_4"):
        merge = next(
            r for r in ctx.ledger.records if r.agent == node and "Merge them" in prompt_of(r)
        )
        mine = {t for m in revisions if m.sender == node for t in tokens(m.content)}
        assert len(mine) == 3 and tokens(prompt_of(merge)) == mine
    artifacts = {m.sender: m.content for m in ctx.transcript if m.kind == "artifact"}
    output = ctx.ledger.records[-1]
    assert output.agent == "output"
    assert tokens(prompt_of(output)) == tokens(artifacts["node_3"] + artifacts["node_4"])
    assert solution.answer == output.response and solution.metadata["output"] == "merged sinks"

    chain = Context(ScriptedModel(unique_answers()))
    solution = await get_method("macnet")(topology="chain").solve(TASK, chain)
    assert solution.answer == chain.ledger.records[-1].response
    assert chain.ledger.records[-1].agent == "node_4" and solution.metadata["output"] == "sink"


async def test_macnet_runs_a_layer_concurrently_and_cools_with_depth():
    model = ScriptedModel(unique_answers(), latency=0.05)
    ctx = Context(model)
    await get_method("macnet")(topology="star").solve(TASK, ctx)
    critics = [
        c for c, r in zip(model.calls, ctx.ledger.records, strict=True) if "critic" in r.agent
    ]
    assert len(critics) == 4
    assert max(c.started for c in critics) < min(c.finished for c in critics)
    temperatures = {
        r.agent: c.request.temperature for c, r in zip(model.calls, ctx.ledger.records, strict=True)
    }
    assert temperatures["node_0"] == pytest.approx(1 - 1 / 3)
    assert temperatures["node_1"] == pytest.approx(1 - 2 / 3)
    assert temperatures["output"] == 0


async def test_macnet_single_agent_is_one_call():
    model = ScriptedModel(["The answer is 42."])
    solution = await get_method("macnet")(agents=1).solve(TASK, Context(model))
    assert solution.answer == "The answer is 42."
    model.assert_consumed()


# -- MacNet: MASLab's protocol (preset=maslab) ------------------------------------------------

# MASLab's macnet_main.py (commit 74265c7) calls random.seed(2025) in inference, then
# generate_random with agent_num 5: edge count random.randint(4, 10.0) = 8, forward pairs
# shuffled with random.shuffle, the first 8 kept (derived by running Python's random)
MASLAB_DAG = [(3, 4), (1, 3), (1, 4), (0, 4), (2, 4), (0, 1), (1, 2), (0, 3)]


def node_edges(pairs) -> list[list[str]]:
    return sorted([f"node_{u}", f"node_{v}"] for u, v in pairs)


def test_macnet_maslab_preset_sets_its_protocol_and_explicit_settings_win():
    config = macnet.MacNet(preset="maslab").config
    assert (config.agents, config.topology, config.random_graph, config.seed) == (
        5, "random", "edge_count", 2025
    )  # fmt: skip
    assert config.output_node and config.persona_pool == "professions"
    assert len(macnet.PROFESSIONS) == len(set(macnet.PROFESSIONS)) == 99  # randint(1, 99)
    explicit = macnet.MacNet(preset="maslab", seed=7, topology="chain", agents=6).config
    assert (explicit.seed, explicit.topology, explicit.agents) == (7, "chain", 6)
    assert explicit.random_graph == "edge_count" and explicit.output_node
    every_default = macnet.MacNet.Config().model_dump(mode="json")
    assert macnet.MacNet({**every_default, "preset": "maslab"}).config == config
    defaults = macnet.MacNet().config
    assert (defaults.random_graph, defaults.output_node, defaults.persona_pool) == (
        "pairs", False, "short"
    )  # fmt: skip
    with pytest.raises(ConfigError):
        macnet.MacNet(preset="other")


async def test_macnet_maslab_preset_runs_maslabs_seed_2025_dag_in_21_calls():
    for sample_seed in (0, 1):
        model = ScriptedModel(unique_answers())
        ctx = Context(model, seed=sample_seed)
        solution = await get_method("macnet")(preset="maslab").solve(TASK, ctx)
        edges = solution.metadata["edges"]
        assert [e for e in edges if "output" in e] == [["node_4", "output"]]
        assert sorted(e for e in edges if "output" not in e) == node_edges(MASLAB_DAG)
        # MASLab's graph_inference as designed: a critic and an assistant call per edge (8 DAG
        # edges + node_4 -> out), the input edge's assistant call alone (node_0 drafts), and
        # a CC merge at node_3 (2 predecessors) and node_4 (4): 9 + 10 + 2 = 21. As run, its
        # bug leaves the reviewed text empty: no critic, no merge, 10 calls.
        assert len(model.calls) == ctx.usage.calls == 9 + 10 + 2 == 21
        assert macnet_calls(edges, 5) == 21  # the formula, the output node as a node
        temperatures = {
            r.agent: c.request.temperature
            for c, r in zip(model.calls, ctx.ledger.records, strict=True)
        }
        # 1 - depth / max_depth, MASLab's virtual input node at depth 0 and out at 5
        expected = {"node_0": 0.8, "node_1": 0.6, "node_2": 0.4, "node_3": 0.4, "node_4": 0.2}
        assert {a: temperatures[a] for a in expected} == pytest.approx(expected)
        assert temperatures["output"] == temperatures["critic:node_4->output"] == 0
        for call in model.calls:
            system = call.request.messages[0]["content"]
            if not system.startswith("You are a critical reviewer"):
                assert any(p in system for p in macnet.PROFESSIONS)
        merges = [r.agent for r in ctx.ledger.records if "Merge them" in prompt_of(r)]
        assert sorted(merges) == ["node_3", "node_4"]
        # the output edge's critic reviews node_4's merged artifact (MASLab's, empty)
        artifacts = {m.sender: m.content for m in ctx.transcript if m.kind == "artifact"}
        (critic,) = [r for r in ctx.ledger.records if r.agent == "critic:node_4->output"]
        assert tokens(prompt_of(critic)) == tokens(artifacts["node_4"]) != set()
        assert solution.answer == ctx.ledger.records[-1].response
        assert ctx.ledger.records[-1].agent == "output"
        assert solution.metadata["output"] == "output node"


async def test_macnet_output_node_reviews_and_rewrites_each_sink():
    model = ScriptedModel(unique_answers())
    ctx = Context(model)
    solution = await get_method("macnet")(topology="layered", output_node=True).solve(TASK, ctx)
    artifacts = {m.sender: m.content for m in ctx.transcript if m.kind == "artifact"}
    for sink in ("node_3", "node_4"):
        critic = next(r for r in ctx.ledger.records if r.agent == f"critic:{sink}->output")
        assert tokens(prompt_of(critic)) == tokens(artifacts[sink])
    rewrites = [m for m in ctx.transcript if m.kind == "revision" and m.sender == "output"]
    merge = ctx.ledger.records[-1]
    assert merge.agent == "output" and "Merge them" in prompt_of(merge)
    assert tokens(prompt_of(merge)) == {t for m in rewrites for t in tokens(m.content)}
    assert len(rewrites) == 2 and solution.answer == merge.response == artifacts["output"]


@pytest.mark.parametrize(
    ("topology", "calls"),
    [("chain", 2 * 5 + 1), ("star", 1 + 2 * (4 + 4) + 1), ("layered", 3 + 2 * (6 + 2) + 2 + 1)],
)
async def test_macnet_output_node_adds_two_calls_a_sink_and_a_merge(topology, calls):
    model = ScriptedModel(unique_answers())
    ctx = Context(model)
    solution = await get_method("macnet")(topology=topology, output_node=True).solve(TASK, ctx)
    edges = solution.metadata["edges"]
    sinks = [u for u, v in edges if v == "output"]
    assert sinks == ctx.topology.predecessors("output") and len(edges) > len(sinks)
    # the formula with the output node as a node; without it, 2 calls less a sink (the merge
    # of several sinks is the output node's now)
    assert len(model.calls) == calls == macnet_calls(edges, 5)
    plain = [e for e in edges if "output" not in e]
    assert calls == macnet_calls(plain, 5) + 2 * len(sinks)


@pytest.mark.parametrize("agents", [1, 2, 5, 6, 8])
async def test_macnet_edge_count_dags_are_maslabs_draws(agents):
    for seed in range(6):
        names = [f"node_{i}" for i in range(agents)]
        topology = macnet.build_topology("random", names, seed, "edge_count")
        pairs = macnet.edge_count_dag(agents, seed)
        assert sorted(topology.edges) == sorted((f"node_{u}", f"node_{v}") for u, v in pairs)
        assert agents - 1 <= len(pairs) <= agents * (agents - 1) // 2
        assert all(u < v for u, v in pairs) and len(set(pairs)) == len(pairs)
        touched = {n for edge in topology.edges for n in edge}
        assert set(topology.nodes) == (touched or {"node_0"})  # isolated nodes are dropped
    assert any(
        len({n for e in macnet.edge_count_dag(6, s) for n in e}) < 6 for s in range(40)
    )  # some draws leave a node out
    model = ScriptedModel(unique_answers())
    solution = await get_method("macnet")(agents=agents, random_graph="edge_count", seed=3).solve(
        TASK, Context(model)
    )
    edges = solution.metadata["edges"]
    assert sorted(map(tuple, edges)) == sorted(
        (f"node_{u}", f"node_{v}") for u, v in macnet.edge_count_dag(agents, 3)
    )
    touched = sorted({n for edge in edges for n in edge}) or ["node_0"]
    assert len(model.calls) == macnet_calls(edges, touched)


def test_macnet_maslab_preset_on_the_command_line(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "macnet", "--benchmark", "arith", "--limit", "2",
         "--model", "scripted:echo", "--config", "preset=maslab", "--no-cache", "--quiet",
         "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["usage"]["calls"] == 21 for r in results)


# -- GoAgent ---------------------------------------------------------------------------------

POOL = {
    "groups": [
        {"name": "alpha", "expertise": "solve", "roles": ["a1", "a2"], "topology": "chain"},
        {"name": "beta", "expertise": "check", "roles": ["hub", "x", "y"], "topology": "star"},
        {"name": "gamma", "expertise": "argue", "roles": ["p", "q"], "topology": "complete"},
        {"name": "broken"},
    ]
}
ALPHA_TO_BETA = {"groups": ["alpha", "beta"], "edges": [["alpha", "beta"]]}


def goagent_script(pool=POOL, selection=ALPHA_TO_BETA):
    counter = itertools.count(1)

    def respond(request):
        prompt = last_user_message(request)
        if prompt.startswith("You design teams"):
            return f"Here you go:\n```json\n{json.dumps(pool)}\n```"
        if "You are assembling a team" in prompt:
            return selection if isinstance(selection, str) else json.dumps(selection)
        if "Several agents answered" in prompt:
            return "The answer is 42."
        return f"token-{next(counter)}: The answer is 42."

    return respond


def agent_records(ctx):
    return [r for r in ctx.ledger.records if r.agent and ":" in r.agent]


async def test_goagent_call_count_and_pool_built_once_for_two_tasks():
    model = ScriptedModel(goagent_script())
    method = get_method("goagent")()
    first, second = Context(model), Context(model)
    one = await method.solve(TASK, first)
    two = await method.solve(TASK.model_copy(update={"id": "t2"}), second)
    rounds, agents = 3, 2 + 3
    assert first.usage.calls == 1 + 1 + rounds * agents + 1
    assert second.usage.calls == 1 + rounds * agents + 1
    assert [r.agent for r in first.ledger.records[:2]] == ["pool_builder", "selector"]
    assert first.ledger.records[-1].agent == "aggregator"
    assert one.metadata["pool"] == {
        "source": "llm", "built_in_this_sample": True, "groups": ["alpha", "beta", "gamma"],
    }  # fmt: skip
    assert two.metadata["pool"]["built_in_this_sample"] is False
    assert one.metadata["selector"] == "llm" and one.metadata["selector_file"] is None
    assert one.metadata["selection"] == {"groups": ["alpha", "beta"], "edges": [["alpha", "beta"]]}
    assert one.answer == "The answer is 42."


async def test_goagent_concurrent_samples_share_one_pool_call():
    model = ScriptedModel(goagent_script(), latency=0.01)
    method = get_method("goagent")(rounds=1)
    contexts = [Context(model, sample_id=f"s{i}") for i in range(4)]
    tasks = [TASK.model_copy(update={"id": f"s{i}"}) for i in range(4)]
    await asyncio.gather(*(method.solve(t, c) for t, c in zip(tasks, contexts, strict=True)))
    builders = [r for c in contexts for r in c.ledger.records if r.agent == "pool_builder"]
    assert len(builders) == 1


@pytest.mark.parametrize("rounds", [1, 2, 3])
async def test_goagent_agents_see_only_their_predecessors(rounds):
    model = ScriptedModel(goagent_script())
    ctx = Context(model)
    await get_method("goagent")(rounds=rounds).solve(TASK, ctx)
    # alpha (chain a1 -> a2) -> beta (star around hub, both ways): the sink a2 feeds every
    # beta member; hub -> x, y act within a round, x, y -> hub across rounds
    spatial = {
        "alpha:a1": [],
        "alpha:a2": ["alpha:a1"],
        "beta:hub": ["alpha:a2"],
        "beta:x": ["alpha:a2", "beta:hub"],
        "beta:y": ["alpha:a2", "beta:hub"],
    }
    temporal = {"beta:hub": ["beta:x", "beta:y"]}
    records = agent_records(ctx)
    assert len(records) == rounds * 5
    out = {(r.agent, r.round): tokens(r.response) for r in records}
    for r in records:
        expected = set().union(
            *(out[(p, r.round)] for p in spatial[r.agent]),
            *(out.get((p, r.round - 1), set()) for p in [*temporal.get(r.agent, []), r.agent]),
        )
        assert tokens(prompt_of(r)) == expected, (r.agent, r.round)
    decision = prompt_of(ctx.ledger.records[-1])
    assert tokens(decision) == set().union(*(out[(a, rounds - 1)] for a in spatial))


async def test_goagent_layers_run_concurrently():
    model = ScriptedModel(goagent_script(), latency=0.05)
    ctx = Context(model)
    await get_method("goagent")(rounds=1).solve(TASK, ctx)
    calls = dict(zip([r.agent for r in ctx.ledger.records], model.calls, strict=True))
    x, y, hub = calls["beta:x"], calls["beta:y"], calls["beta:hub"]
    assert max(x.started, y.started) < min(x.finished, y.finished)
    assert min(x.started, y.started) >= hub.finished


@pytest.mark.parametrize(
    ("reply", "groups", "edges", "note"),
    [
        ("I pick alpha and beta.", ["alpha", "beta"], [["alpha", "beta"]], "no JSON object"),
        ('{"groups": "alpha"}', ["alpha", "beta"], [["alpha", "beta"]], "no known group"),
        (
            {
                "groups": ["Gamma", "zeta", "alpha"],
                "edges": [["gamma", "alpha"], ["alpha", "gamma"]],
            },
            ["gamma", "alpha"],
            [["gamma", "alpha"]],
            "closes a cycle",
        ),
        (
            {"groups": ["beta", "alpha"], "edges": [{"from": "alpha", "to": "beta"}, ["beta"]]},
            ["alpha", "beta"],
            [["alpha", "beta"]],
            "dropped edge ['beta']",
        ),
    ],
)
async def test_goagent_repairs_or_replaces_a_bad_selection(reply, groups, edges, note):
    model = ScriptedModel(goagent_script(selection=reply))
    ctx = Context(model)
    solution = await get_method("goagent")(rounds=1).solve(TASK, ctx)
    assert solution.metadata["selection"] == {"groups": groups, "edges": edges}
    assert any(note in n for n in solution.metadata["selection_notes"])
    members = {"alpha": 2, "beta": 3, "gamma": 2}
    assert ctx.usage.calls == 1 + 1 + sum(members[g] for g in groups) + 1


async def test_goagent_falls_back_to_the_builtin_pool_on_a_malformed_reply():
    model = ScriptedModel(goagent_script(pool={"teams": []}, selection="no idea"))
    ctx = Context(model)
    solution = await get_method("goagent")(rounds=2).solve(TASK, ctx)
    pool = solution.metadata["pool"]
    assert pool["source"].startswith("builtin") and pool["groups"][0] == "solve_and_verify"
    assert solution.metadata["selection"]["groups"] == ["solve_and_verify", "plan_and_execute"]
    assert ctx.usage.calls == 1 + 1 + 2 * (3 + 2) + 1


async def test_goagent_pool_file_is_reused_by_a_new_instance(tmp_path):
    path = tmp_path / "pools.json"
    model = ScriptedModel(goagent_script())
    await get_method("goagent")(pool_path=str(path), rounds=1).solve(TASK, Context(model))
    stored = json.loads(path.read_text())
    assert [g["name"] for g in stored["math word problems"]] == ["alpha", "beta", "gamma"]
    ctx = Context(model)
    solution = await get_method("goagent")(pool_path=str(path), rounds=1).solve(TASK, ctx)
    assert solution.metadata["pool"]["source"] == "pool file"
    assert "pool_builder" not in {r.agent for r in ctx.ledger.records}
    assert ctx.usage.calls == 1 + 5 + 1


LEARN_POOL = {
    "groups": [
        {"name": "bad_one", "roles": ["solver"]},
        {"name": "good", "roles": ["solver"]},
        {"name": "bad_two", "roles": ["solver"]},
    ]
}


def learning_script(request):
    """Only the 'good' group answers right; the decision keeps a right answer if it sees one."""
    prompt = last_user_message(request)
    system = request.messages[0]["content"] if request.messages[0]["role"] == "system" else ""
    if prompt.startswith("You design teams"):
        return json.dumps(LEARN_POOL)
    if "Several agents answered" in prompt:
        return "The answer is 42." if "The answer is 42" in prompt else "The answer is 7."
    return "The answer is 42." if "'good'" in system else "The answer is 7."


async def train(tmp_path, seed, name):
    path = tmp_path / name
    method = get_method("goagent")(
        selector="learned", selector_path=str(path), rounds=1, train_epochs=8
    )
    tasks = [TASK, TASK.model_copy(update={"id": "t2", "question": "What is 40 + 2?"})]
    ctx = Context(ScriptedModel(learning_script), seed=seed)
    await method.optimize(tasks, ctx)
    return method, path, ctx


async def test_goagent_optimize_trains_the_learned_selector_deterministically(tmp_path):
    method, path, ctx = await train(tmp_path, seed=5, name="a.json")
    _, again, _ = await train(tmp_path, seed=5, name="b.json")
    assert path.read_text() == again.read_text()
    saved = json.loads(path.read_text())
    policy = saved["domains"]["math word problems"]
    assert [g["name"] for g in policy["pool"]] == ["bad_one", "good", "bad_two"]
    logits = dict(zip(policy["choices"]["options"], policy["choices"]["logits"][0], strict=True))
    assert logits["good"] > 0 > min(logits["bad_one"], logits["bad_two"])
    assert saved == method.dump_learned_state()  # the file holds the learned state
    assert sum(r.agent == "pool_builder" for r in ctx.ledger.records) == 1
    assert all(r.agent != "selector" for r in ctx.ledger.records)

    # the trained instance and a fresh one loading the file both decode it with no LLM call
    restored = get_method("goagent")(selector="learned")  # a run's learned_state.json
    restored.restore_learned_state(saved, "learned_state.json")
    from_file = get_method("goagent")(selector="learned", selector_path=str(path))
    for solver in (method, from_file, restored):
        solve_ctx = Context(ScriptedModel(learning_script))
        solution = await solver.solve(TASK, solve_ctx)
        groups = solution.metadata["selection"]["groups"]
        assert groups[0] == "good"
        assert solution.metadata["selector"] == "learned"
        assert solution.metadata["selector_file"] == solver.config.selector_path
        assert solve_ctx.usage.calls == solver.config.rounds * len(groups) + 1
        assert solution.answer == "The answer is 42."


async def test_goagent_untrained_learned_selector_uses_the_default_selection():
    model = ScriptedModel(goagent_script())
    ctx = Context(model)
    solution = await get_method("goagent")(selector="learned", rounds=1).solve(TASK, ctx)
    assert solution.metadata["selection"]["groups"] == ["alpha", "beta"]
    assert "no learned selector" in solution.metadata["selection_notes"][0]
    assert ctx.usage.calls == 1 + 0 + 5 + 1


async def test_goagent_optimize_is_a_no_op_for_the_llm_selector():
    model = ScriptedModel(goagent_script())
    await get_method("goagent")().optimize([TASK], Context(model))
    assert model.calls == []


# -- end to end ------------------------------------------------------------------------------


@pytest.mark.system
@pytest.mark.parametrize("method", ["macnet", "goagent"])
def test_maslab_run_end_to_end(tmp_path, method):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", method, "--benchmark", "arith", "--limit", "2",
         "--model", "scripted:echo", "--no-cache", "--quiet", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2
    assert all(json.loads(line)["status"] == "ok" for line in lines)


def test_goagent_rejects_a_malformed_selector_file(tmp_path):
    path = tmp_path / "selector.json"
    path.write_text('{"format": "goagent-selector/2", "domains": {"math": {"pool": []}}}')
    with pytest.raises(ConfigError, match=r"selector.json: .* domains.math.pool: List should"):
        get_method("goagent")(selector="learned", selector_path=str(path))
