"""maslab.kit.learning: exact update arithmetic, estimators, learning on toy problems, states."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from pydantic import ValidationError

import maslab.kit.learning
from maslab.core.topology import Topology
from maslab.kit.learning import (
    ChoicePolicy,
    ChoicePolicyState,
    EdgePolicy,
    EdgePolicyState,
    EdgeStep,
    edge_credit,
    group_relative,
    mean_baseline,
    policy_rng,
    sigmoid,
)

NODES = ["a", "b", "c"]
BAD = ("b", "c")  # the adversarial edge of the toy graph problem


# -- estimators, by hand ---------------------------------------------------------------------


def test_mean_baseline_subtracts_the_batch_mean():
    assert mean_baseline([1, 0, 0, 1]).tolist() == [0.5, -0.5, -0.5, 0.5]
    assert mean_baseline([]).size == 0


def test_group_relative_normalises_within_the_group_and_filters_flat_groups():
    # mean 0.25, population std sqrt(0.1875) = sqrt(3)/4
    advantages = group_relative([1, 0, 0, 0])
    assert advantages == pytest.approx(
        [np.sqrt(3), -1 / np.sqrt(3), -1 / np.sqrt(3), -1 / np.sqrt(3)]
    )
    assert group_relative([1, 1, 1]) is None
    assert group_relative([0.0, 0.0]) is None


def test_edge_credit_is_success_with_the_edge_minus_without_it():
    masks = [[1, 0, 1], [1, 1, 1], [0, 1, 1], [0, 0, 1]]
    credit = edge_credit(masks, [1, 1, 0, 0])
    # edge 0: with (1 + 1) / 2, without (0 + 0) / 2; edge 1: 1/2 both ways; edge 2 in every sample
    assert credit.tolist() == [1.0, 0.0, 0.0]
    assert edge_credit(masks, [1, 1, 1, 1]) is None


# -- updates, by hand ------------------------------------------------------------------------


def test_edge_reinforce_moves_each_logit_by_lr_advantage_taken_minus_p():
    policy = EdgePolicy([("a", "b"), ("b", "c")])
    steps = [EdgeStep(("a", "b"), 0.5, True), EdgeStep(("b", "c"), 0.5, False)]
    policy.reinforce(steps, advantage=2.0, lr=0.5)  # ± 0.5 · 2 · 0.5
    assert policy.logits.tolist() == [0.5, -0.5]
    assert policy.probabilities() == pytest.approx(1 / (1 + np.exp([-0.5, 0.5])))
    policy.nudge([1.0, -2.0], lr=0.25)
    assert policy.logits.tolist() == [0.75, -1.0]


def test_choice_reinforce_is_onehot_minus_p_and_features_scale_the_weights():
    policy = ChoicePolicy(["layer_0"], ["cot", "debate", "reflect"], features=1)
    step = policy.sample("layer_0", None, features=[2.0])  # all equal: the first option
    assert step.chosen == 0 and step.probs == pytest.approx((1 / 3,) * 3)
    policy.reinforce([step], advantage=1.0, lr=3.0)
    assert policy.logits[0] == pytest.approx([2.0, -1.0, -1.0])
    assert policy.weights[0, :, 0] == pytest.approx([4.0, -2.0, -2.0])  # (onehot − p) · x · 3
    # logits + weights · x: x = 0 gives the logits' softmax, x = -1 reverses the preference
    assert policy.probabilities(0, [0.0]).argmax() == 0
    assert policy.probabilities(0, [-1.0]).argmax() != 0


def test_unavailable_options_get_probability_zero_and_no_gradient():
    policy = ChoicePolicy(["next"], ["x", "y", "z"])
    probs = policy.probabilities("next", available=[True, False, True])
    assert probs.tolist() == [0.5, 0.0, 0.5]
    step = policy.sample("next", policy_rng(0, "t"), available=[True, False, True])
    assert step.chosen != 1
    policy.reinforce([step], 1.0, 1.0)
    assert policy.logits[0, 1] == 0.0


def test_threshold_compares_probabilities_not_logits():
    policy = EdgePolicy([("a", "b"), ("b", "c"), ("a", "c")], [0.1, -0.1, 0.0])
    # sigmoid(0.1) ≈ 0.525: above 0.5 and 0.52, below 0.53 (a logit cut-off of 0.5 keeps none)
    assert policy.threshold(0.5) == [("a", "b")]
    assert policy.threshold(0.52) == [("a", "b")]
    assert policy.threshold(0.53) == []
    greedy = policy.sample(None)  # no generator: the same rule at 0.5
    assert [s.edge for s in greedy if s.taken] == [("a", "b")]
    graph = policy.graph(greedy)
    assert graph.nodes == ["a", "b", "c"] and graph.edges == [("a", "b")]


def test_sampling_is_reproducible_from_the_run_seed():
    policy = EdgePolicy.from_topology(Topology.complete(NODES))
    first = [s.taken for s in policy.sample(policy_rng(7, "m"))]
    assert first == [s.taken for s in policy.sample(policy_rng(7, "m"))]
    draws = {tuple(s.taken for s in policy.sample(policy_rng(seed, "m"))) for seed in range(20)}
    assert len(draws) > 1


# -- learning on toy problems ----------------------------------------------------------------


def test_reinforce_lowers_the_probability_of_an_adversarial_edge():
    policy = EdgePolicy.from_topology(Topology.complete(NODES))
    rng = policy_rng(0, "toy graph")
    for _ in range(60):
        draws = [policy.sample(rng) for _ in range(8)]
        rewards = [0.0 if any(s.taken and s.edge == BAD for s in d) else 1.0 for d in draws]
        for steps, advantage in zip(draws, mean_baseline(rewards), strict=True):
            policy.reinforce(steps, advantage, lr=0.5)
    assert policy.probability(BAD) < 0.1
    assert BAD not in policy.threshold()


def test_edge_credit_lowers_the_probability_of_an_adversarial_edge():
    policy = EdgePolicy.from_topology(Topology.complete(NODES))
    rng = policy_rng(0, "toy graph grpo")
    bad = policy.index[BAD]
    for _ in range(40):
        masks = [[s.taken for s in policy.sample(rng)] for _ in range(6)]
        rewards = [0.0 if mask[bad] else 1.0 for mask in masks]
        if (credit := edge_credit(masks, rewards)) is not None:
            policy.nudge(credit, lr=0.5)
    assert policy.probability(BAD) < 0.1
    others = [p for e, p in zip(policy.edges, policy.probabilities(), strict=True) if e != BAD]
    assert min(others) > 0.2  # the harmless edges earn no systematic blame


def test_group_relative_lowers_the_probability_of_an_adversarial_agent():
    agents = ["helper", "saboteur", "checker"]
    policy = ChoicePolicy(["slot"], agents)
    rng = policy_rng(0, "toy bandit")
    for _ in range(40):  # one query per step, a group of K = 6 draws
        steps = [policy.sample("slot", rng) for _ in range(6)]
        rewards = [0.0 if agents[s.chosen] == "saboteur" else 1.0 for s in steps]
        if (advantages := group_relative(rewards)) is not None:
            for step, advantage in zip(steps, advantages, strict=True):
                policy.reinforce([step], advantage, lr=0.1)
    assert policy.probabilities("slot")[1] < 0.1


def test_a_query_conditioned_policy_learns_a_choice_per_feature():
    policy = ChoicePolicy(["op"], ["short", "long"], features=2)
    rng = policy_rng(0, "conditioned")
    queries = {"easy": [1.0, 0.0], "hard": [1.0, 1.0]}  # bias, hardness
    best = {"easy": 0, "hard": 1}
    for _ in range(150):
        batch = [(kind, policy.sample("op", rng, queries[kind])) for kind in ("easy", "hard")] * 3
        rewards = [float(step.chosen == best[kind]) for kind, step in batch]
        for (_, step), advantage in zip(batch, mean_baseline(rewards), strict=True):
            policy.reinforce([step], advantage, lr=0.5)
    assert policy.probabilities("op", queries["easy"])[0] > 0.8
    assert policy.probabilities("op", queries["hard"])[1] > 0.8


def test_edge_features_shift_the_logits_and_reinforce_scales_the_weights():
    policy = EdgePolicy([("a", "b"), ("b", "c")], features=2)
    x = [1.0, 3.0]
    ab, _ = policy.sample(None, features=x)  # all logits 0: p = 0.5, not taken
    assert (ab.prob, ab.taken, ab.features) == (0.5, False, (1.0, 3.0))
    policy.reinforce([ab], advantage=1.0, lr=2.0)  # 2 · 1 · (0 − 0.5) = −1, times x
    assert policy.logits.tolist() == [-1.0, 0.0]
    assert policy.weights.tolist() == [[-1.0, -3.0], [0.0, 0.0]]
    # logit(ab | x) = −1 + (−1 · x0 − 3 · x1): the query's features move it
    assert policy.conditioned([0.0, 0.0]).tolist() == [-1.0, 0.0]
    assert policy.conditioned([1.0, 1.0]).tolist() == [-5.0, 0.0]
    assert policy.probability(("a", "b"), [0.0, -1.0]) == pytest.approx(float(sigmoid(2.0)))
    assert policy.threshold(0.5, [0.0, -1.0]) == [("a", "b")]
    assert policy.threshold(0.5, [0.0, 0.0]) == []
    with pytest.raises(ValueError, match="expected 2 features, got 1"):
        policy.probabilities([1.0])


def test_a_query_conditioned_edge_policy_learns_an_edge_per_feature():
    policy = EdgePolicy([("a", "b")], features=1)
    rng = policy_rng(0, "conditioned edge")
    good = {0.0: True, 1.0: False}  # the edge helps queries with x = 0, hurts those with x = 1
    for _ in range(150):
        batch = [(x, policy.sample(rng, features=[x])[0]) for x in good] * 3
        rewards = [float(step.taken == good[x]) for x, step in batch]
        for (_, step), advantage in zip(batch, mean_baseline(rewards), strict=True):
            policy.reinforce([step], advantage, lr=0.5)
    assert policy.probability(("a", "b"), [0.0]) > 0.8
    assert policy.probability(("a", "b"), [1.0]) < 0.2


# -- states ----------------------------------------------------------------------------------


def through_json(state: EdgePolicyState | ChoicePolicyState) -> dict[str, object]:
    return json.loads(json.dumps(state.model_dump(mode="json")))


def test_policies_round_trip_through_their_states():
    edges = EdgePolicy.from_topology(Topology.chain(NODES), init=0.3)
    edges.reinforce([EdgeStep(("a", "b"), float(sigmoid(0.3)), True)], 1.0, 1.0)
    saved = EdgePolicyState.model_validate(through_json(edges.state()))
    again = EdgePolicy.from_state(saved)
    assert again.edges == edges.edges and again.nodes == NODES
    assert again.logits.tolist() == edges.logits.tolist()
    assert again.weights.shape == (2, 0) and again.state() == edges.state()
    conditioned = EdgePolicy([("a", "b")], [0.5], features=2)
    conditioned.weights[0] = [0.25, -1.0]
    copy = EdgePolicy.from_state(EdgePolicyState.model_validate(through_json(conditioned.state())))
    assert copy.weights.tolist() == [[0.25, -1.0]] and copy.logits.tolist() == [0.5]
    assert EdgePolicy.from_state(EdgePolicy([]).state()).weights.shape == (0, 0)

    choices = ChoicePolicy(["l0", "l1"], ["a", "b"], features=3)
    choices.reinforce([choices.sample("l1", None, [1.0, 2.0, 3.0])], 1.0, 0.1)
    copy = ChoicePolicy.from_state(ChoicePolicyState.model_validate(through_json(choices.state())))
    assert copy.slots == choices.slots and copy.options == choices.options
    assert copy.logits.tolist() == choices.logits.tolist()
    assert copy.weights.tolist() == choices.weights.tolist()
    plain = ChoicePolicy(["s"], ["a", "b"])
    assert ChoicePolicy.from_state(plain.state()).weights.shape == (1, 2, 0)


EDGES = {"nodes": ["a", "b"], "edges": [["a", "b"]], "logits": [0.5], "features": 1,
         "weights": [[1.0]]}  # fmt: skip
CHOICES = {"slots": ["s"], "options": ["a", "b"], "logits": [[0.0, 1.0]],
           "weights": [[[], []]]}  # fmt: skip


@pytest.mark.parametrize(
    ("schema", "data", "problem"),
    [
        (EdgePolicyState, {**EDGES, "logits": []}, "1 edges need as many logits, got 0"),
        (EdgePolicyState, {**EDGES, "weights": [[1, 2]]}, "weights must hold a row of 1 per edge"),
        (EdgePolicyState, {**EDGES, "edges": [["a", "b"]] * 2}, "each edge may appear once"),
        (EdgePolicyState, {**EDGES, "nodes": ["a"]}, "edges between nodes it does not list: b"),
        (EdgePolicyState, {**EDGES, "logits": [float("inf")]}, "finite number"),
        (ChoicePolicyState, {**CHOICES, "logits": [[0]]}, "logits must hold a row of 2"),
        (ChoicePolicyState, {**CHOICES, "weights": [[[1], []]]}, "weights must hold 2 rows"),
        (ChoicePolicyState, {**CHOICES, "slots": []}, "List should have at least 1 item"),
    ],
)
def test_a_state_of_the_wrong_shape_is_refused(schema, data, problem):
    with pytest.raises(ValidationError, match=problem):
        schema.model_validate(data)


def test_the_policy_module_example_runs():
    exec(textwrap.dedent(maslab.kit.learning.__doc__.split("Example::")[1]), {})
