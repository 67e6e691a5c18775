"""Collab maze (arXiv:2511.02687): generator, route evaluator, collab_pair and relay methods."""

from __future__ import annotations

import itertools
import json

import pytest

import maslab.methods.relay  # noqa: F401
from maslab.bench.benchmark import get_benchmark
from maslab.bench.evaluation import get_evaluator
from maslab.benchmarks.collab_maze import HIDDEN, CollabMaze, Maze, maze_of
from maslab.cli import main
from maslab.core.context import Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.evaluators.collab_maze import CollabMazeEvaluator, outcome, parse_route
from maslab.llm import ModelPool
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.methods.collab_pair import CRITIC, RELAY_SYSTEM

# A hand-made 4x4 maze; shortest route: down, down, right, right, right (a = 5).
GRID = ["@.#.", ".#..", "...*", "#.#."]
SHORTEST = ["down", "down", "right", "right", "right"]


def hand_task() -> Task:
    maze = Maze.from_record({"grid": GRID, "start": [0, 0], "goal": [2, 3]})
    cells = [(r, c) for r in range(4) for c in range(4) if (r, c) not in {(0, 0), (2, 3)}]
    record = {
        "id": "hand",
        "grid": GRID,
        "maps": [maze.render(hidden=cells[0::2]), maze.render(hidden=cells[1::2])],
        "start": [0, 0],
        "goal": [2, 3],
    }
    return CollabMaze().to_task(record, 0, "test")


def cells(text: str) -> list[list[str]]:
    return [row.split() for row in text.splitlines()]


def models_named(**models: ScriptedModel) -> ModelPool:
    """A pool that serves the given scripted models by spec."""

    class Pool(ModelPool):
        def get(self, spec: str) -> ScriptedModel:  # type: ignore[override]
            return models[spec]

    return Pool()


def unique_replies():
    counter = itertools.count(1)
    return lambda request: f"msg-{next(counter)}"


# --- generator ----------------------------------------------------------------------------------


def test_generator_is_deterministic_per_split_and_seed():
    tasks = CollabMaze().load()
    assert len(tasks) == 100 and tasks == CollabMaze().load()
    assert CollabMaze(count=10).load() == tasks[:10]
    assert CollabMaze(seed=1).load(limit=5) != tasks[:5]
    assert CollabMaze().load("dev", limit=5) != tasks[:5]
    assert tasks[0].id == "collab_maze-test-0000" and tasks[0].answer_type == "text"
    assert get_benchmark("collab_maze").evaluator == "collab_maze"


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"size": 4, "wall_rate": 0.15, "min_path": 3, "max_path": 5},
        {"size": 10, "wall_rate": 0.45, "min_path": 12, "max_path": 20},
    ],
)
def test_every_maze_is_solvable_within_bounds_and_split_into_two_covering_maps(options):
    bench = CollabMaze(count=40, **options)
    for task in bench.load():
        maze = maze_of(task)
        meta = task.metadata
        n = maze.size
        assert len(maze.walls) == round(bench.config.wall_rate * n * n)
        a = maze.distances(maze.start)[maze.goal]
        assert bench.config.min_path <= a <= bench.config.max_path and meta["shortest_path"] == a
        assert maze.walk(parse_route(task.gold)).reached and len(parse_route(task.gold)) == a
        full, one, two = cells(maze.render()), *map(cells, meta["maps"])
        hidden = [0, 0]
        for r, c in itertools.product(range(n), range(n)):
            seen = [m[r][c] for m in (one, two) if m[r][c] != HIDDEN]
            assert seen, f"cell {(r, c)} hidden on both maps"
            assert all(symbol == full[r][c] for symbol in seen)  # union = full maze
            if (r, c) in (maze.start, maze.goal):
                assert len(seen) == 2 and seen[0] in "@*"
            hidden[0] += one[r][c] == HIDDEN
            hidden[1] += two[r][c] == HIDDEN
        assert sorted(hidden) == [(n * n - 2) // 2, (n * n - 1) // 2]  # about half each
        assert meta["maps"][0] not in task.question and maze.render() in task.question


def test_bad_options_and_impossible_constraints_are_config_errors():
    for bad in ({"size": 1}, {"wall_rate": 1.5}, {"min_path": 0}, {"max_path": 3}, {"n": 2}):
        with pytest.raises(ConfigError):
            CollabMaze(**bad)
    with pytest.raises(ConfigError, match="relax the options"):
        CollabMaze(size=3, min_path=7, max_path=8).load()
    with pytest.raises(ConfigError, match="not a collab_maze task"):
        maze_of(Task(id="x", question="2+2?"))


# --- evaluator ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "value", "raw", "correct", "explains"),
    [
        ("Route: down, down, right, right, right", 1.0, 1.0, True, "reached the goal in 5"),
        ("DOWN DOWN RIGHT RIGHT RIGHT UP", 1.0, 1.0, True, "reached the goal in 5"),  # stops there
        ("Route: down, right, down", 0.2, 0.2, False, "wall hit at move 2 (right)"),
        ("Route: down, down, right", 0.6, 0.6, False, "stopped after 3 moves"),
        ("We go right. Route: right", 0.0, -0.2, False, "outcome -0.200"),  # moved away
        ("Route: right, down", 0.0, -0.2, False, "wall hit at move 2 (down)"),
        ("Route: up", 0.0, 0.0, False, "wall hit at move 1 (up)"),  # off the grid
        ("Route: none", 0.0, 0.0, False, "stopped after 0 moves"),
    ],
)
async def test_routes_are_simulated_and_scored_by_weighted_outcome(
    answer, value, raw, correct, explains
):
    task = hand_task()
    score = await get_evaluator("collab_maze")().score(task, answer)
    assert score.value == pytest.approx(value) and score.correct is correct
    assert explains in score.explanation and not score.unparsed
    moves = parse_route(score.extracted) if score.extracted else []
    assert outcome(maze_of(task), moves).value == pytest.approx(raw)
    assert score.details["outcome"] == pytest.approx(raw)  # unclamped, for the analyses


async def test_an_answer_without_a_route_is_unparsed():
    score = await CollabMazeEvaluator().score(hand_task(), "I could not find a way, sorry.")
    assert score.unparsed and score.value == 0.0 and not score.correct


@pytest.mark.parametrize(
    ("text", "moves"),
    [
        ("up, right, down", ["up", "right", "down"]),
        ("1. UP\n2. RIGHT", ["up", "right"]),
        ("First up? No. Final route: left, down. It never goes up.", ["left", "down"]),
        ("\\boxed{north, east then east}", ["up", "right", "right"]),
        ("**Route**: ↓ → →", ["down", "right", "right"]),
        ("no moves here", None),
    ],
)
def test_route_parser(text, moves):
    assert parse_route(text) == moves


@pytest.mark.parametrize(
    "text",
    [
        "Route: down 2, right 3",
        "Route: down x2, right x3",
        "Route: 2 down, 3 right",
        "Route: down ×2 then right ×3",
        "Route: DOWN X2 RIGHT X3",
        "Route: down twice, right three times",
        "Route: 2 steps down, then 3 cells right.",
        "Route: down (2), right (x3)",
        "Route: 2x down, 3x right",
        "Route: down 2 right 3",  # each count after its move ...
        "Route: 2 down 3 right",  # ... or each before it
        "1. down 2\n2. right 3",  # a numbered list with counts
        "Route: down-2, right-3",
        "Route: ↓×2 →3",
        "Route: down, down, right, right, right (5 moves)",  # a total, not a count
    ],
)
async def test_route_counts_repeat_their_move(text):
    assert parse_route(text) == SHORTEST
    score = await CollabMazeEvaluator().score(hand_task(), text)
    assert score.correct and score.value == 1.0


@pytest.mark.parametrize(
    "text",
    [
        "Route: up 2 down",  # the 2 of up or of down?
        "Route: 2 down 3",  # two counts for one move
        "Route: x2 down",  # a count after no move
        "Route: down 0",
        "Route: right 1000",
    ],
)
async def test_a_route_with_unclear_counts_is_unparsed_not_misread(text):
    assert parse_route(text) is None
    assert (await CollabMazeEvaluator().score(hand_task(), text)).unparsed


async def test_judge_extracts_in_two_steps_at_temperature_zero():
    judge = ScriptedModel(
        ["(2,1) then (3,1), (3,2), (3,3), (3,4)", "down, down, right, right, right"]
    )
    score = await CollabMazeEvaluator(judge=judge).score(hand_task(), "a long transcript")
    assert score.correct and score.value == 1.0 and len(judge.calls) == 2
    assert all(call.request.temperature == 0 for call in judge.calls)
    assert "row 1, column 1" in last_user_message(judge.calls[1].request)
    judge = ScriptedModel(["NO_ROUTE"])
    assert (await CollabMazeEvaluator(judge=judge).score(hand_task(), "chat")).unparsed
    assert len(judge.calls) == 1


# --- collab_pair --------------------------------------------------------------------------------


def agreeing(moves: list[str]) -> list[str]:
    """Each move proposed by one agent and confirmed by the other."""
    return [f"Let's go {m}.\nMOVE: {m}" for m in moves for _ in range(2)]


async def test_pair_plays_agreed_moves_to_the_goal_and_the_route_scores_one():
    model = ScriptedModel(agreeing(SHORTEST))
    ctx = Context(model)
    task = hand_task()
    solution = await get_method("collab_pair")().solve(task, ctx)
    model.assert_consumed()
    assert solution.answer == "Route: down, down, right, right, right"
    meta = solution.metadata
    assert (meta["ended"], meta["turns"], meta["position"]) == ("goal", 10, [2, 3])
    events = ctx.transcript.filter(kind="environment")
    assert [e.round for e in events] == [2, 4, 6, 8, 10]
    assert events[0].metadata == {"move": "down", "position": [1, 0]}
    assert "on the goal" in events[-1].content
    score = await CollabMazeEvaluator().score(task, solution.answer)
    assert score.correct and score.value == 1.0


async def test_turns_alternate_and_each_agent_sees_only_its_own_map_and_the_dialogue():
    model = ScriptedModel(unique_replies())
    ctx = Context(model)
    task = hand_task()
    solution = await get_method("collab_pair")(turn_cap=7).solve(task, ctx)
    records = ctx.ledger.records
    assert len(records) == 7 and solution.metadata["ended"] == "turn_cap"
    assert [r.agent for r in records] == ["agent_1", "agent_2"] * 3 + ["agent_1"]
    assert [r.round for r in records] == list(range(1, 8))
    map1, map2 = task.metadata["maps"]
    for record in records:
        messages = record.messages
        assert messages[0] == {"role": "system", "content": RELAY_SYSTEM}
        own, other = (map1, map2) if record.agent == "agent_1" else (map2, map1)
        text = json.dumps(messages)
        assert json.dumps(own)[1:-1] in text and json.dumps(other)[1:-1] not in text
        t = record.round
        assert len(messages) == 2 * ((t + 1) // 2)  # system + alternating user/assistant turns
        for earlier in range(1, t):  # the full dialogue so far, own turns as assistant
            role = "assistant" if (earlier - t) % 2 == 0 else "user"
            assert any(m["role"] == role and f"msg-{earlier}" in m["content"] for m in messages), (
                t,
                earlier,
            )
        if t > 2:
            assert messages[-1]["content"] == f"[other agent]: msg-{t - 1}"
    second = records[1].messages[-1]["content"]
    assert second.startswith("[user]: ") and second.endswith("[other agent]: msg-1")
    assert ctx.topology is not None and set(ctx.topology.edges) == {
        ("agent_1", "agent_2"),
        ("agent_2", "agent_1"),
    }


async def test_a_move_needs_the_other_agents_very_next_consent_and_is_announced_to_both():
    script = [
        "MOVE: right",  # 1: proposal
        "No. MOVE: down",  # 2: a different move: a new proposal, nothing made
        "Hmm.",  # 3: no proposal: agent 2's lapses
        "MOVE: down",  # 4: proposal
        "ok MOVE: down",  # 5: consent: down is made
        "next",
    ]
    model = ScriptedModel(script)
    ctx = Context(model)
    solution = await get_method("collab_pair")(turn_cap=6).solve(hand_task(), ctx)
    assert solution.metadata["route"] == ["down"] and solution.metadata["position"] == [1, 0]
    event = "[user]: Both agreed on down: the token is now at row 2, column 1."
    assert [e.round for e in ctx.transcript.filter(kind="environment")] == [5]
    sixth = last_user_message(model.calls[5].request)
    assert sixth == f"[other agent]: ok MOVE: down\n\n{event}"
    assert all(event not in last_user_message(c.request) for c in model.calls[:5])


@pytest.mark.parametrize("method", ["collab_pair", "relay"])
async def test_a_message_can_agree_with_one_move_and_propose_the_next(method):
    script = [
        "MOVE: down",  # 1: proposal
        "Yes.\nMOVE: down\nNext:\nMOVE: down",  # 2: consent (down made), then a proposal
        "MOVE: down\nMOVE: right",  # 3: consent (down made), then a proposal
        "MOVE: right\n**MOVE: right**",  # 4: right made; right proposed
        "MOVE: up\nMOVE: right",  # 5: the first line disagrees: only a proposal of right
        "MOVE: right",  # 6: right made
        "MOVE: right",  # 7: proposal
        "MOVE: right",  # 8: right made: the goal
    ]
    model = ScriptedModel(script)
    ctx = Context(model)
    solution = await get_method(method)().solve(hand_task(), ctx)
    model.assert_consumed()
    assert solution.metadata["route"] == SHORTEST and solution.metadata["ended"] == "goal"
    assert [e.round for e in ctx.transcript.filter(kind="environment")] == [2, 3, 4, 6, 8]


async def test_the_completion_phrase_and_a_wall_end_the_game():
    model = ScriptedModel(["Where are you?", "I think we are there. ACTI!"])
    ctx = Context(model)
    solution = await get_method("collab_pair")().solve(hand_task(), ctx)
    model.assert_consumed()
    assert solution.metadata["ended"] == "phrase" and solution.answer == "Route: none"
    model = ScriptedModel(agreeing(["right", "down"]))
    solution = await get_method("collab_pair")().solve(hand_task(), Context(model))
    model.assert_consumed()
    assert solution.metadata["ended"] == "wall" and solution.answer == "Route: right, down"
    score = await CollabMazeEvaluator().score(hand_task(), solution.answer)
    assert "wall hit at move 2" in score.explanation and not score.correct


async def test_per_agent_models_and_non_maze_tasks():
    one, two = (
        ScriptedModel(unique_replies(), name="one"),
        ScriptedModel(unique_replies(), name="two"),
    )
    ctx = Context("one", models=models_named(one=one, two=two), model_roles={"agent_2": "two"})
    method = get_method("collab_pair")(turn_cap=4)
    solution = await method.solve(hand_task(), ctx)
    assert (len(one.calls), len(two.calls)) == (2, 2)
    assert solution.metadata["speakers"] == ["one", "two", "one", "two"]
    with pytest.raises(ConfigError, match="not a collab_maze task"):
        await method.solve(Task(id="x", question="2+2?"), ctx)
    with pytest.raises(ConfigError, match="no role or agent 'agent_3'"):
        method.check_model_roles({"agent_3": "two"})


@pytest.mark.parametrize("mode", ["solo_full", "solo_distributed"])
async def test_solo_baselines_answer_then_review_once(mode):
    task = hand_task()
    model = ScriptedModel(["Route: right", "Route: down, down, right, right, right"])
    ctx = Context(model)
    solution = await get_method("collab_pair")(mode=mode).solve(task, ctx)
    model.assert_consumed()
    assert solution.answer == "Route: down, down, right, right, right"
    assert solution.metadata == {"mode": mode, "fallback_to_first": False}
    first, second = (c.request.messages for c in model.calls)
    full, (map1, map2) = maze_of(task).render(), task.metadata["maps"]
    if mode == "solo_full":
        assert first[-1]["content"] == task.prompt()
    else:
        assert map1 in first[-1]["content"] and map2 in first[-1]["content"]
        assert full not in first[-1]["content"]
    assert second[-2] == {"role": "assistant", "content": "Route: right"}
    assert CRITIC in second[-1]["content"]


async def test_solo_falls_back_to_the_first_route_when_the_review_has_none():
    model = ScriptedModel(["Route: down, down", "I am not sure any more."])
    solution = await get_method("collab_pair")(mode="solo_full").solve(hand_task(), Context(model))
    assert solution.answer == "Route: down, down" and solution.metadata["fallback_to_first"]


# --- relay --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "side", "k"),
    [("strong_primer", 0, 2), ("strong_primer", 1, 3), ("strong_recovery", 0, 4)],
)
async def test_relay_swaps_one_sides_model_after_turn_k_and_keeps_its_history(variant, side, k):
    counter = itertools.count(1)
    strong = ScriptedModel(lambda r: f"msg-{next(counter)}", name="strong")
    weak = ScriptedModel(lambda r: f"msg-{next(counter)}", name="weak")
    models = models_named(strong=strong, weak=weak)
    ctx = Context("weak", models=models, model_roles={"strong": "strong"})
    relay = get_method("relay")(variant=variant, side=side, swap_after=k, turn_cap=10)
    solution = await relay.solve(hand_task(), ctx)
    first, then = ("strong", "weak") if variant == "strong_primer" else ("weak", "strong")
    records = ctx.ledger.records
    assert len(records) == 10
    for record in records:
        swapped_side = (record.round - 1) % 2 == side
        expected = (first if record.round <= k else then) if swapped_side else "weak"
        assert record.model == expected, (record.round, record.model)
        assert record.agent == f"agent_{side + 1}" or not swapped_side
    handover = next(r for r in records if r.round > k and (r.round - 1) % 2 == side)
    replaced = next(r for r in records if r.round <= k and (r.round - 1) % 2 == side)
    assert handover.messages[: len(replaced.messages)] == replaced.messages
    text = json.dumps(handover.messages)
    assert all(f"msg-{t}" in text for t in range(1, handover.round))
    assert solution.metadata["speakers"] == [r.model for r in records]
    assert (solution.metadata["variant"], solution.metadata["swap_after"]) == (variant, k)


# --- end to end ---------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["collab_pair", "relay"])
def test_maslab_run_end_to_end(tmp_path, method):
    out = tmp_path / "run"
    args = ["--limit", "2", "--model", "scripted:echo", "--no-cache", "--quiet", "--out", str(out)]
    assert main(["run", "--method", method, "--benchmark", "collab_maze", *args]) == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["status"] == "ok" for r in results)
