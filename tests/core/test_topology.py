"""Tests for maslab.core.topology."""

from __future__ import annotations

import json
import random

import networkx as nx
import pytest

from maslab.core.messages import Message, Transcript
from maslab.core.topology import Topology
from maslab.errors import ConfigError


def assert_layers_respect_edges(topology: Topology) -> None:
    layers = topology.layers()
    index = {n: i for i, layer in enumerate(layers) for n in layer}
    assert sorted(index) == sorted(topology.nodes)
    assert sum(map(len, layers)) == len(topology)
    for u, v in topology.edges:
        assert index[u] < index[v], (u, v)


# -- wrapper basics ---------------------------------------------------------------------------


def test_wrapper_queries_and_attributes() -> None:
    t = Topology(name="custom")
    t.add_node("b", role="critic")
    t.add_node("a")
    t.add_edge("a", "b", weight=2)
    t.add_edge("b", "c")
    t.add_edge("a", "c")
    assert t.nodes == ["b", "a", "c"]
    assert set(t.edges) == {("a", "b"), ("b", "c"), ("a", "c")}
    assert "c" in t and "z" not in t
    assert len(t) == 3
    assert t.predecessors("c") == ["b", "a"]
    assert t.successors("a") == ["b", "c"]
    assert t.sources() == ["a"]
    assert t.sinks() == ["c"]
    assert t.is_dag()
    assert t.graph.nodes["b"]["role"] == "critic"
    assert t.graph.edges["a", "b"]["weight"] == 2


def test_wraps_given_graph() -> None:
    g = nx.DiGraph([("x", "y")])
    t = Topology(g, name="given")
    assert t.graph is g
    assert t.name == "given"
    assert t.edges == [("x", "y")]


def test_node_attribute_named_name_is_allowed() -> None:
    t = Topology()
    t.add_node("a", name="Alice")
    assert t.graph.nodes["a"]["name"] == "Alice"


def test_unknown_agent_is_config_error() -> None:
    t = Topology.chain(["a", "b"])
    with pytest.raises(ConfigError, match="topology 'chain' has no agent 'z'"):
        t.predecessors("z")
    with pytest.raises(ConfigError, match="has no agent 'z'"):
        t.visible_messages("z", Transcript(), 1)


# -- builders -----------------------------------------------------------------------------------


def test_chain() -> None:
    t = Topology.chain(["a", "b", "c"])
    assert t.name == "chain"
    assert t.nodes == ["a", "b", "c"]
    assert set(t.edges) == {("a", "b"), ("b", "c")}
    assert t.layers() == [["a"], ["b"], ["c"]]


def test_single_node_chain() -> None:
    t = Topology.chain(["solo"])
    assert t.edges == []
    assert t.layers() == [["solo"]]


@pytest.mark.parametrize(
    ("direction", "edges"),
    [
        ("out", {("c", "x"), ("c", "y")}),
        ("in", {("x", "c"), ("y", "c")}),
        ("both", {("c", "x"), ("c", "y"), ("x", "c"), ("y", "c")}),
    ],
)
def test_star(direction: str, edges: set[tuple[str, str]]) -> None:
    t = Topology.star("c", ["x", "y"], direction=direction)  # type: ignore[arg-type]
    assert t.name == "star"
    assert t.nodes == ["c", "x", "y"]
    assert set(t.edges) == edges


def test_star_layers() -> None:
    assert Topology.star("c", ["x", "y"]).layers() == [["c"], ["x", "y"]]
    assert Topology.star("c", ["x", "y"], direction="in").layers() == [["x", "y"], ["c"]]


def test_tree() -> None:
    t = Topology.tree(["r", "a", "b", "c", "d", "e"], branching=2)
    assert t.name == "tree"
    assert set(t.edges) == {("r", "a"), ("r", "b"), ("a", "c"), ("a", "d"), ("b", "e")}
    assert t.layers() == [["r"], ["a", "b"], ["c", "d", "e"]]
    assert_layers_respect_edges(t)


def test_tree_branching_three() -> None:
    t = Topology.tree(["r", "a", "b", "c", "d"], branching=3)
    assert set(t.edges) == {("r", "a"), ("r", "b"), ("r", "c"), ("a", "d")}


def test_complete() -> None:
    t = Topology.complete(["a", "b", "c"])
    assert t.name == "complete"
    assert set(t.edges) == {
        ("a", "b"),
        ("a", "c"),
        ("b", "a"),
        ("b", "c"),
        ("c", "a"),
        ("c", "b"),
    }
    assert not t.is_dag()


def test_layered() -> None:
    t = Topology.layered([["a", "b"], ["c"], ["d", "e"]])
    assert t.name == "layered"
    assert set(t.edges) == {("a", "c"), ("b", "c"), ("c", "d"), ("c", "e")}
    assert t.layers() == [["a", "b"], ["c"], ["d", "e"]]
    assert_layers_respect_edges(t)


def test_ring() -> None:
    t = Topology.ring(["a", "b", "c"])
    assert t.name == "ring"
    assert set(t.edges) == {("a", "b"), ("b", "c"), ("c", "a")}
    assert not t.is_dag()


def test_layers_order_within_layer_follows_insertion_not_name() -> None:
    t = Topology(name="fan")
    for n in ["z", "m", "a"]:
        t.add_node(n)
    t.add_edge("a", "m")
    t.add_edge("a", "z")
    assert t.layers() == [["a"], ["z", "m"]]


def test_layers_of_empty_topology() -> None:
    assert Topology().layers() == []


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        (
            Topology.ring(["a", "b", "c"]),
            "topology 'ring' has a cycle a -> b -> c -> a; layers() needs a DAG",
        ),
        (
            Topology.complete(["a", "b", "c"]),
            "topology 'complete' has a cycle a -> b -> a; layers() needs a DAG",
        ),
    ],
)
def test_layers_cycle_error(topology: Topology, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        topology.layers()
    assert str(info.value) == message


def test_cycle_error_for_unnamed_topology() -> None:
    t = Topology()
    t.add_edge("x", "x")
    with pytest.raises(ConfigError, match=r"^topology has a cycle x -> x; layers\(\) needs a DAG$"):
        t.layers()


NAMES = ["a", "b", "c", "d", "e", "f"]


def test_random_dag_is_deterministic_per_seed() -> None:
    first = Topology.random_dag(NAMES, seed=7)
    second = Topology.random_dag(NAMES, seed=7)
    assert first.name == "random_dag"
    assert first.edges == second.edges


def test_random_dag_differs_across_seeds() -> None:
    assert set(Topology.random_dag(NAMES, seed=0).edges) != set(
        Topology.random_dag(NAMES, seed=2).edges
    )


def test_random_dag_leaves_global_random_alone() -> None:
    state = random.getstate()
    Topology.random_dag(NAMES, seed=3)
    assert random.getstate() == state


@pytest.mark.parametrize("seed", range(10))
def test_random_dag_is_forward_connected_dag(seed: int) -> None:
    t = Topology.random_dag(NAMES, p=0.3, seed=seed)
    assert t.nodes == NAMES
    assert all(NAMES.index(u) < NAMES.index(v) for u, v in t.edges)
    assert t.sources() == ["a"]
    assert nx.is_weakly_connected(t.graph)
    assert_layers_respect_edges(t)


def test_random_dag_extreme_probabilities() -> None:
    assert set(Topology.random_dag(["a", "b", "c", "d"], p=0, seed=1).edges) == {
        ("a", "b"),
        ("b", "c"),
        ("c", "d"),
    }
    assert set(Topology.random_dag(["a", "b", "c"], p=1, seed=1).edges) == {
        ("a", "b"),
        ("a", "c"),
        ("b", "c"),
    }


def test_groups_wiring_and_inter_edges() -> None:
    t = Topology.groups(
        {"A": ["a1", "a2"], "B": ["b1", "b2", "b3"], "C": ["c"]},
        intra={"A": "complete", "B": "chain"},
        inter=[("A", "B"), ("B", "C")],
    )
    assert t.name == "groups"
    assert t.nodes == ["a1", "a2", "b1", "b2", "b3", "c"]
    assert set(t.edges) == {
        # A: complete
        ("a1", "a2"),
        ("a2", "a1"),
        # B: chain
        ("b1", "b2"),
        ("b2", "b3"),
        # A -> B: complete A has no sinks (all members) -> chain B's source b1
        ("a1", "b1"),
        ("a2", "b1"),
        # B -> C: chain B's sink b3 -> c
        ("b3", "c"),
    }
    assert t.group_of("b2") == "B"
    assert t.graph.nodes["a1"]["group"] == "A"
    assert t.group_members("B") == ["b1", "b2", "b3"]


def test_groups_star_and_none_templates() -> None:
    t = Topology.groups(
        {"S": ["hub", "s1", "s2"], "N": ["n1", "n2"]},
        intra="star",
        inter=[("N", "S")],
    )
    assert set(t.edges) == {
        ("hub", "s1"),
        ("s1", "hub"),
        ("hub", "s2"),
        ("s2", "hub"),
        ("n1", "n2"),
        ("n2", "n1"),
        # star "both" has no sources, so every S member receives from N's members
        *((n, s) for n in ["n1", "n2"] for s in ["hub", "s1", "s2"]),
    }

    none = Topology.groups({"X": ["x1", "x2"], "Y": ["y"]}, intra="none", inter=[("X", "Y")])
    assert set(none.edges) == {("x1", "y"), ("x2", "y")}


def test_groups_single_member_groups() -> None:
    t = Topology.groups({"A": ["a"], "B": ["b"]}, intra="star", inter=[("A", "B")])
    assert t.edges == [("a", "b")]


def test_group_queries_errors() -> None:
    t = Topology.groups({"A": ["a"]})
    assert Topology.chain(["x"]).group_of("x") is None
    with pytest.raises(ConfigError, match="topology 'groups' has no group 'Z'"):
        t.group_members("Z")


# -- builder validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Topology.chain([]), "chain() needs at least one name"),
        (lambda: Topology.chain("abc"), "chain() takes a list of names, not the string 'abc'"),
        (lambda: Topology.chain(["a", "b", "a"]), "chain() got duplicate names: 'a'"),
        (
            lambda: Topology.complete(["a", "a", "b", "b"]),
            "complete() got duplicate names: 'a', 'b'",
        ),
        (lambda: Topology.tree([]), "tree() needs at least one name"),
        (lambda: Topology.tree(["a", "b"], branching=0), "tree() needs branching >= 1, got 0"),
        (lambda: Topology.ring(["a"]), "ring() needs at least two names, got ['a']"),
        (lambda: Topology.ring(["a", "a"]), "ring() got duplicate names: 'a'"),
        (lambda: Topology.star("c", ["c"]), "star() got duplicate names: 'c'"),
        (
            lambda: Topology.star("c", ["x"], direction="sideways"),
            "unknown star direction 'sideways'; expected one of 'out', 'in', 'both'",
        ),
        (lambda: Topology.layered([]), "layered() needs at least one name"),
        (lambda: Topology.layered([["a"], []]), "layered() layer 1 needs at least one name"),
        (lambda: Topology.layered([["a"], ["a"]]), "layered() got duplicate names: 'a'"),
        (lambda: Topology.random_dag([], seed=1), "random_dag() needs at least one name"),
        (
            lambda: Topology.random_dag(["a", "b"], p=1.5, seed=1),
            "random_dag() needs 0 <= p <= 1, got 1.5",
        ),
        (lambda: Topology.groups({}), "groups() needs at least one group"),
        (
            lambda: Topology.groups({"A": ["x"], "B": ["x"]}),
            "groups() got duplicate names: 'x'",
        ),
        (lambda: Topology.groups({"A": []}), "groups() group 'A' needs at least one name"),
        (
            lambda: Topology.groups({"A": ["a"]}, intra="mesh"),
            "unknown intra template 'mesh'; expected one of 'complete', 'chain', 'star', 'none'",
        ),
        (
            lambda: Topology.groups({"A": ["a"]}, intra={"B": "chain"}),
            "groups() intra names unknown groups: 'B'",
        ),
        (
            lambda: Topology.groups({"A": ["a"]}, inter=[("A", "Q")]),
            "unknown inter group 'Q'; expected one of 'A'",
        ),
    ],
)
def test_builder_validation(build: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()  # type: ignore[operator]
    assert str(info.value) == message
    assert "\n" not in str(info.value)


# -- visible_messages ---------------------------------------------------------------------------


@pytest.fixture
def debate() -> Transcript:
    """Three agents, two rounds; in round 1 ``a`` also whispers to ``b`` only."""
    transcript = Transcript()
    for rnd in (0, 1):
        for agent in ("a", "b", "c"):
            transcript.add(Message(sender=agent, content=f"{agent}{rnd}", round=rnd))
    transcript.add(Message(sender="a", content="a1->b", round=1, recipients=("b",)))
    transcript.add(Message(sender="c", content="task", round=None))
    return transcript


def contents(messages: list[Message]) -> list[str]:
    return [m.content for m in messages]


def test_visible_messages_complete_previous_round(debate: Transcript) -> None:
    t = Topology.complete(["a", "b", "c"])
    assert contents(t.visible_messages("a", debate, 1)) == ["b0", "c0"]
    assert contents(t.visible_messages("b", debate, 1)) == ["a0", "c0"]
    assert contents(t.visible_messages("c", debate, 1)) == ["a0", "b0"]
    assert contents(t.visible_messages("a", debate, 2)) == ["b1", "c1"]
    assert contents(t.visible_messages("b", debate, 2)) == ["a1", "a1->b", "c1"]
    assert contents(t.visible_messages("c", debate, 2)) == ["a1", "b1"]
    assert t.visible_messages("a", debate, 0) == []


def test_visible_messages_include_self(debate: Transcript) -> None:
    t = Topology.complete(["a", "b", "c"])
    seen = t.visible_messages("a", debate, 2, include_self=True)
    assert contents(seen) == ["a1", "b1", "c1"]


def test_visible_messages_follow_edges(debate: Transcript) -> None:
    t = Topology.chain(["a", "b", "c"])
    assert t.visible_messages("a", debate, 2) == []
    assert contents(t.visible_messages("b", debate, 2)) == ["a1", "a1->b"]
    assert contents(t.visible_messages("c", debate, 2)) == ["b1"]


def test_visible_messages_current_round(debate: Transcript) -> None:
    t = Topology.chain(["a", "b", "c"])
    assert contents(t.visible_messages("b", debate, 1, rounds="current")) == ["a1", "a1->b"]
    assert contents(t.visible_messages("c", debate, 0, rounds="current")) == ["b0"]


def test_visible_messages_history(debate: Transcript) -> None:
    t = Topology.complete(["a", "b", "c"])
    assert contents(t.visible_messages("b", debate, 2, rounds="history")) == [
        "a0",
        "c0",
        "a1",
        "a1->b",
        "c1",
    ]
    assert contents(t.visible_messages("c", debate, 1, rounds="history")) == ["a0", "b0"]


def test_visible_messages_follow_node_order_not_completion_order() -> None:
    finished = [Message(sender=name, content=name, round=0) for name in ("c", "a", "b")]
    t = Topology.complete(["a", "b", "c", "d"])
    assert contents(t.visible_messages("d", finished, 1)) == ["a", "b", "c"]


def test_visible_messages_accepts_plain_list(debate: Transcript) -> None:
    t = Topology.complete(["a", "b", "c"])
    assert contents(t.visible_messages("a", list(debate), 1)) == ["b0", "c0"]


def test_visible_messages_bad_mode(debate: Transcript) -> None:
    t = Topology.complete(["a", "b"])
    with pytest.raises(ConfigError) as info:
        t.visible_messages("a", debate, 1, rounds="future")  # type: ignore[arg-type]
    assert str(info.value) == (
        "unknown rounds mode 'future'; expected one of 'previous', 'current', 'history'"
    )


# -- export -------------------------------------------------------------------------------------


def test_to_mermaid_sanitises_ids() -> None:
    t = Topology.chain(["lead writer", "fact-checker", "editor"])
    t.add_node("editor", role="final")
    text = t.to_mermaid()
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    assert '    n0_lead_writer["lead writer"]' in lines
    assert '    n1_fact_checker["fact-checker"]' in lines
    assert '    n2_editor["editor (final)"]' in lines
    assert "    n0_lead_writer --> n1_fact_checker" in lines
    assert "    n1_fact_checker --> n2_editor" in lines
    ids = [line.split()[0] for line in lines[1:4]]
    assert all(ch.isalnum() or ch == "_" for i in ids for ch in i.split("[")[0])


def test_to_mermaid_ids_unique_when_sanitised_names_collide() -> None:
    t = Topology.chain(["a b", "a-b"])
    text = t.to_mermaid()
    assert "n0_a_b --> n1_a_b" in text


def test_to_mermaid_escapes_quotes() -> None:
    t = Topology.chain(['say "hi"'])
    assert 'n0_say__hi_["say #quot;hi#quot;"]' in t.to_mermaid()


def test_to_dot() -> None:
    t = Topology.chain(["a", 'b "q"'])
    t.add_node("a", role="planner")
    assert t.to_dot() == (
        'digraph "chain" {\n  "a" ["role"="planner"];\n  "b \\"q\\"";\n  "a" -> "b \\"q\\"";\n}'
    )


def test_to_dict_from_dict_round_trip() -> None:
    t = Topology.groups({"A": ["a1", "a2"], "B": ["b"]}, intra="chain", inter=[("A", "B")])
    t.add_node("a1", role="planner")
    t.add_edge("a1", "b", weight=0.5)
    data = t.to_dict()
    restored = Topology.from_dict(json.loads(json.dumps(data)))
    assert restored.to_dict() == data
    assert restored.name == "groups"
    assert restored.nodes == t.nodes
    assert restored.edges == t.edges
    assert restored.graph.nodes["a1"] == {"group": "A", "role": "planner"}
    assert restored.graph.edges["a1", "b"] == {"weight": 0.5}
    assert restored.group_members("A") == ["a1", "a2"]


def test_from_dict_malformed() -> None:
    with pytest.raises(ConfigError, match=r"^malformed topology dict \(KeyError: 'nodes'\)"):
        Topology.from_dict({"name": "x", "edges": []})


def test_from_edges_orders_agents_as_the_edges_name_them_then_the_isolated_ones():
    t = Topology.from_edges([("b", "a"), ("c", "a"), ("a", "d")], name="hand", nodes=["e", "a"])
    assert t.name == "hand"
    assert t.nodes == ["b", "a", "c", "d", "e"]
    assert t.edges == [("b", "a"), ("a", "d"), ("c", "a")]
    assert t.predecessors("a") == ["b", "c"]
    assert Topology.from_edges([]).nodes == []
