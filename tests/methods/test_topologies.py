"""The role-DAG presets of "Aligned Agents, Biased Swarm" (arXiv 2604.08963): exact edge sets,
node attributes, custom names and roles, and the one-line errors."""

from __future__ import annotations

import pytest

from maslab.core.topology import Topology
from maslab.errors import ConfigError
from maslab.methods.dag_pipeline.topologies import (
    PERSONAS,
    PRESETS,
    chain,
    ffn,
    iteration,
    parallel,
    preset,
    spindle,
)

# The spec's visibility lists (methods.md A8), written out as reader: [what it reads].
SPINDLE = {
    "Judge": [],
    "Doctor": ["Judge"],
    "Engineer": ["Judge"],
    "Summarizer_1": ["Judge", "Doctor", "Engineer"],
    "Lawyer": ["Summarizer_1"],
    "Merchant": ["Summarizer_1"],
    "Summarizer_2": ["Judge", "Summarizer_1", "Lawyer", "Merchant"],
}
PARALLEL = {
    "Judge": [],
    "Doctor": ["Judge"],
    "Engineer": ["Judge"],
    "Lawyer": ["Doctor"],
    "Merchant": ["Engineer"],
    "Summarizer": ["Judge", "Lawyer", "Merchant"],
}
FFN = {
    "Judge": [],
    "Doctor": ["Judge"],
    "Engineer": ["Judge"],
    "Lawyer": ["Doctor", "Engineer"],
    "Merchant": ["Doctor", "Engineer"],
    "Summarizer": ["Judge", "Lawyer", "Merchant"],
}


def edge_set(reads: dict[str, list[str]]) -> set[tuple[str, str]]:
    return {(u, v) for v, readers in reads.items() for u in readers}


def test_chain_is_cumulative_every_agent_reads_all_before_it():
    t = chain()
    assert t.nodes == ["Judge", "Doctor", "Engineer", "Summarizer"]
    assert set(t.edges) == {
        ("Judge", "Doctor"),
        ("Judge", "Engineer"),
        ("Doctor", "Engineer"),
        ("Judge", "Summarizer"),
        ("Doctor", "Summarizer"),
        ("Engineer", "Summarizer"),
    }
    assert len(t.edges) == 6
    # the plain neighbour chain keeps its meaning
    assert set(Topology.chain(["a", "b", "c"]).edges) == {("a", "b"), ("b", "c")}


@pytest.mark.parametrize(
    ("name", "roles"),
    [
        ("chain", ["Judge", "Doctor", "Engineer", "Summarizer"]),
        ("chain_plain", ["Assistant"] * 4),
        ("chain_persona", ["Doctor", "Engineer", "Lawyer", "Merchant"]),
        ("chain_function", ["Judge", "Analyst", "Reflector", "Summarizer"]),
    ],
)
def test_the_four_chain_role_mixes(name, roles):
    t = preset(name)
    assert [t.graph.nodes[n]["role"] for n in t.nodes] == roles
    assert t.predecessors(t.nodes[3]) == t.nodes[:3]
    assert len(t.edges) == 6
    if name == "chain_plain":
        assert t.nodes == ["Assistant_1", "Assistant_2", "Assistant_3", "Assistant_4"]


def test_a_longer_chain_with_own_names():
    t = chain(["a", "b", "c", "d", "e"])
    assert len(t.edges) == 10 and t.predecessors("e") == ["a", "b", "c", "d"]
    assert t.graph.nodes["c"]["role"] == "c"


@pytest.mark.parametrize(
    ("builder", "reads"), [(spindle, SPINDLE), (parallel, PARALLEL), (ffn, FFN)]
)
def test_spindle_parallel_and_ffn_have_exactly_the_papers_edges(builder, reads):
    t = builder()
    assert t.nodes == list(reads)
    assert set(t.edges) == edge_set(reads)
    assert len(t.edges) == len(edge_set(reads))  # no duplicates
    for node, readers in reads.items():
        assert t.predecessors(node) == readers  # listed in node order
    assert t.sinks() == [list(reads)[-1]] and t.sources() == ["Judge"]


def test_iteration_repeats_the_ffn_unit_and_links_summarizer_to_next_judge():
    t = iteration()
    assert len(t) == 24
    expected = {(f"{u}_{i}", f"{v}_{i}") for i in range(1, 5) for u, v in edge_set(FFN)}
    expected |= {(f"Summarizer_{i - 1}", f"Judge_{i}") for i in range(2, 5)}
    assert set(t.edges) == expected and len(t.edges) == 4 * 9 + 3
    assert t.predecessors("Judge_1") == []
    assert t.predecessors("Judge_3") == ["Summarizer_2"]
    assert t.sinks() == ["Summarizer_4"]
    assert [t.graph.nodes[n]["iteration"] for n in t.nodes] == [i for i in range(1, 5) for _ in FFN]
    assert len(iteration(iterations=2)) == 12 and len(iteration(iterations=1).edges) == 9


def test_nodes_carry_role_and_persona():
    t = spindle()
    assert t.graph.nodes["Summarizer_2"]["role"] == "Summarizer"
    assert t.graph.nodes["Judge"]["persona"] == PERSONAS["Judge"]
    custom = ffn(["j", "d", "e", "l", "m", "s"])
    assert custom.graph.nodes["l"] == {"role": "Lawyer", "persona": PERSONAS["Lawyer"]}
    assert set(custom.edges) == {
        (u.lower()[0], v.lower()[0]) for u, v in edge_set(FFN)
    }  # same wiring, own names
    renamed = parallel(roles=["Chair", "A", "B", "C", "D", "E"])
    assert renamed.nodes[0] == "Chair" and renamed.graph.nodes["Chair"]["persona"] == (
        "You are a Chair."
    )


def test_preset_table_and_errors():
    assert set(PRESETS) >= {"chain", "spindle", "parallel", "ffn", "iteration"}
    assert preset("iteration", iterations=3).nodes[-1] == "Summarizer_3"
    with pytest.raises(ConfigError, match="unknown topology preset 'star'; use one of chain"):
        preset("star")
    with pytest.raises(ConfigError, match=r"spindle\(\) needs 7 names and roles, got 3 names"):
        spindle(["a", "b", "c"])
    with pytest.raises(ConfigError, match="duplicate names: 'a'"):
        ffn(["a", "a", "b", "c", "d", "e"])
    with pytest.raises(ConfigError, match="not the string"):
        chain("abc")
    with pytest.raises(ConfigError, match="iterations >= 1"):
        iteration(iterations=0)
