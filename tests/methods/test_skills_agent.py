"""Skills agent (arXiv 2601.04748) with scripted models: compilation (skill order, handovers,
refusals and their reasons), the one compiled call, flat and hierarchical routing (who sees
which skills), fallbacks, budget stops, model roles and the command line."""

from __future__ import annotations

import json

import pytest
from helpers import TwoModels, agent_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method, list_methods
from maslab.core.task import Task
from maslab.core.topology import Topology
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.skills_agent import (
    DEFAULT_LIBRARY,
    STRUCTURES,
    SYSTEMS,
    Choice,
    MASSpec,
    NotCompilable,
    Role,
    SkillsAgent,
    compile,
    compiled_system_prompt,
    read_choice,
    sections,
)

TASK = Task(
    id="t1",
    question="What is 6 * 7?",
    answer_type="number",
    instruction="End with 'The answer is N'.",
)
PIPELINE_REPLY = (
    "[DECOMPOSE]\nquantities: 6, 7\n[SOLVE]\n6 * 7 = 42\n[VERIFY]\n42 / 7 = 6. The answer is 42."
)


def system_of(record) -> str:
    assert record.messages[0]["role"] == "system"
    return record.messages[0]["content"]


def refusal(system) -> str:
    """Why ``compile`` refuses ``system``: its one-line message."""
    with pytest.raises(NotCompilable) as refused:
        compile(system)
    assert "\n" not in str(refused.value)
    return str(refused.value)


def role(name: str, skill: str, **properties) -> Role:
    return Role(name, skill, f"{skill} things", f"do {skill} carefully", **properties)


def spec(protocol="pipeline", edges=(("a", "b"), ("b", "c")), **properties) -> MASSpec:
    roles = tuple(
        role(n, f"skill_{n}", **properties.get(n, {})) for n in dict.fromkeys(sum(edges, ()))
    )
    topology = Topology(name="hand_built")
    for u, v in edges:
        topology.add_edge(u, v)
    return MASSpec("hand_built", roles, topology, protocol)


def test_defaults_and_registration():
    method = get_method("skills_agent")()
    assert isinstance(method, SkillsAgent)
    assert method.config.system is None and method.config.routing == "none"
    assert method.compiled is not None and method.compiled.name == "pipeline"
    assert method.config.compile_from is None and method.config.library == DEFAULT_LIBRARY
    assert len(DEFAULT_LIBRARY) == 4 and all(len(c.skills) == 3 for c in DEFAULT_LIBRARY)
    assert method.agent_names() == () and SkillsAgent.roles == ("agent", "router")


# -- compilation -----------------------------------------------------------------------------


def blocks(prompt: str, tags: list[str]) -> list[str]:
    """The system prompt's listing of each skill, from its tag to the next skill's."""
    starts = [prompt.index(f"{i}. {tag}") for i, tag in enumerate(tags, 1)]
    return [prompt[s:e] for s, e in zip(starts, [*starts[1:], len(prompt)], strict=True)]


async def test_a_compiled_pipeline_makes_one_call_listing_the_skills_in_order():
    model = ScriptedModel([PIPELINE_REPLY])
    ctx = Context(model)
    solution = await SkillsAgent().solve(TASK, ctx)
    assert len(model.calls) == ctx.usage.calls == 1
    (record,) = ctx.ledger.records
    assert record.agent == "agent" and last_user_message(model.requests[0]) == TASK.prompt()
    prompt = system_of(record)
    decompose, solve, verify = blocks(prompt, ["[DECOMPOSE]", "[SOLVE]", "[VERIFY]"])
    assert "decompose:" in decompose and "How: List the known quantities" in decompose
    assert "Hand over to [SOLVE]" in decompose and "[VERIFY]" not in decompose
    assert "Hand over to [VERIFY]" in solve and "Hand over" not in verify
    assert "Final skill" in verify and "Final skill" not in decompose + solve
    assert "[DECOMPOSE] [SOLVE] [VERIFY]" in prompt  # the sections to write, in order
    assert solution.answer == "42 / 7 = 6. The answer is 42."  # the final section only
    assert solution.metadata == {
        "system": "pipeline",
        "skills": ["decompose", "solve", "verify"],
        "sections": ["[DECOMPOSE]", "[SOLVE]", "[VERIFY]"],
        "final_section": True,
    }


async def test_a_compiled_writer_critic_makes_one_call_with_a_bounded_loop():
    reply = (
        "[CODE]\ndef f(): return 1\n[CRITIQUE]\noff by one\n[REFINE]\ndef f(): return 2\n"
        "[CRITIQUE]\nstill wrong\n[REFINE]\ndef f(): return 3"
    )
    model = ScriptedModel([reply])
    ctx = Context(model)
    solution = await SkillsAgent(system="writer_critic").solve(TASK, ctx)
    assert len(model.calls) == 1
    code, critique, refine = blocks(
        system_of(ctx.ledger.records[0]), ["[CODE]", "[CRITIQUE]", "[REFINE]"]
    )
    assert "Hand over to [CRITIQUE]" in code and "Hand over to [REFINE]" in code
    assert "Hand over to [REFINE]" in critique and "Loop" not in code + critique
    assert "hand back to [CRITIQUE]" in refine and "at most 1 pass(es)" in refine
    assert solution.answer == "def f(): return 3"  # the last [REFINE] section
    loop = ["[CRITIQUE]", "[REFINE]"]
    assert solution.metadata["sections"] == ["[CODE]", *loop, *loop]


async def test_compile_from_a_bundled_method_maps_its_structure():
    model = ScriptedModel(["[DRAFT]\n1\n[CRITIQUE]\nwrong\n[REFINE]\nThe answer is 42."])
    ctx = Context(model)
    solution = await SkillsAgent(compile_from="self_refine").solve(TASK, ctx)
    assert len(model.calls) == 1 and solution.answer == "The answer is 42."
    prompt = system_of(ctx.ledger.records[0])
    _, _, refine = blocks(prompt, ["[DRAFT]", "[CRITIQUE]", "[REFINE]"])
    assert "at most 4 pass(es)" in refine  # self_refine's default T = 4
    assert [s.name for s in compile(get_method("self_refine")(max_iterations=2)).skills] == [
        "draft",
        "critique",
        "refine",
    ]
    assert (
        "at most 2 pass(es)"
        in compile(get_method("self_refine")(max_iterations=2)).skills[2].handovers[0]
    )
    planner = compile("planner_executor")
    assert [s.name for s in planner.skills] == ["plan", "execute"]
    assert "Hand over to [EXECUTE]" in planner.skills[0].handovers[0]
    assert "multiply" in planner.skills[1].policy  # the method's functions, internalised


def test_the_router_system_orders_workers_between_router_and_aggregator():
    library = compile(SYSTEMS["router"]())
    assert [s.name for s in library.skills] == ["analyze", "retrieve", "reason", "synthesize"]
    handed = [
        [h.split("]")[0] for h in s.handovers if h.startswith("Hand")] for s in library.skills
    ]
    assert handed == [["Hand over to [RETRIEVE", "Hand over to [REASON"]] + [
        ["Hand over to [SYNTHESIZE"]
    ] * 2 + [[]]


def test_the_order_is_the_graph_s_not_the_insertion_order():
    topology = Topology(name="t")
    topology.add_node("c")  # inserted first, but last in the graph
    topology.add_edge("a", "b")
    topology.add_edge("b", "c")
    roles = (role("c", "check"), role("b", "work"), role("a", "plan"))
    library = compile(MASSpec("t", roles, topology, "pipeline"))
    assert [s.name for s in library.skills] == ["plan", "work", "check"]
    prompt = compiled_system_prompt(library)
    assert prompt.index("1. [PLAN]") < prompt.index("2. [WORK]") < prompt.index("3. [CHECK]")


@pytest.mark.parametrize(
    ("method", "reason"),
    [
        ("llm_debate", "its own opposing position, and one context cannot keep"),
        ("mad", "it is a debate"),
        ("exchange_of_thought", "it is a debate"),
        ("self_consistency", "one call cannot give independent samples"),
        ("mixture_of_agents", "one call cannot give independent samples"),
        ("mav", "one call cannot give independent samples"),
    ],
)
def test_debate_and_best_of_n_are_refused_with_their_reason(method, reason):
    with pytest.raises(NotCompilable) as refused:
        SkillsAgent(compile_from=method)
    message = str(refused.value)
    assert isinstance(refused.value, ConfigError) and "\n" not in message
    assert message.startswith(f"cannot compile {method} into one agent: ") and reason in message


def test_the_debate_refusal_also_names_the_cycle():
    message = refusal("llm_debate")
    assert "cycle debater_1 -> debater_2 -> debater_1" in message and "(C1" in message


def test_private_state_and_mixed_models_are_refused_c2_and_c3():
    private = spec(b={"private_state": True})
    message = refusal(private)
    assert "b hold private state" in message and "C2" in message and "C3" not in message
    mixed = spec(a={"model": "openai:gpt-4o"})
    message = refusal(mixed)
    assert "different models (openai:gpt-4o, the run's model)" in message and "C3" in message
    assert "C2" not in message
    same = spec(**{n: {"model": "openai:gpt-4o"} for n in "abc"})
    assert len(compile(same).skills) == 3  # one model for all is homogeneous


def test_a_cycle_is_refused_c1_except_in_a_refinement_loop():
    looped = (("a", "b"), ("b", "c"), ("c", "b"))
    message = refusal(spec("pipeline", looped))
    assert "cycle b -> c -> b" in message and "no serial order (C1" in message
    library = compile(spec("refinement", looped))
    assert [s.name for s in library.skills] == ["skill_a", "skill_b", "skill_c"]
    assert "hand back to [SKILL_B]" in library.skills[2].handovers[0]


def test_reasons_follow_from_the_properties_not_the_name():
    named_like_a_debate = MASSpec(
        "llm_debate", (role("x", "go"),), Topology.chain(["x"]), "pipeline"
    )
    assert [s.name for s in compile(named_like_a_debate).skills] == ["go"]
    message = refusal(spec("independent"))
    assert "independent samples" in message
    message = refusal(spec("debate"))
    assert "debate" in message and "C1" not in message  # a chain has a serial order


def test_unknown_methods_and_bad_specs_are_one_line_config_errors():
    with pytest.raises(ConfigError, match="no known structure to compile for method 'vanilla'"):
        SkillsAgent(compile_from="vanilla")
    with pytest.raises(ConfigError, match="unknown method 'debate'; did you mean llm_debate"):
        compile("debate")
    assert set(STRUCTURES) <= set(list_methods())  # every mapped name is a method
    with pytest.raises(ConfigError, match="must be its roles"):
        MASSpec("s", (role("a", "x"),), Topology.chain(["a", "b"]), "pipeline")
    with pytest.raises(ConfigError, match="lower-case identifiers"):
        MASSpec("s", (role("a", "Bad Name"),), Topology.chain(["a"]), "pipeline")
    with pytest.raises(ConfigError, match="unknown protocol"):
        MASSpec("s", (role("a", "x"),), Topology.chain(["a"]), "vote")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="iterations must be >= 1"):
        compile(get_method("self_refine")(max_iterations=0))


@pytest.mark.parametrize(
    "config",
    [
        {"system": "router", "compile_from": "self_refine"},
        {"routing": "flat", "system": "router"},
        {"routing": "hierarchical", "compile_from": "self_refine"},
        {"routing": "flat", "library": [DEFAULT_LIBRARY[0], DEFAULT_LIBRARY[0]]},
    ],
)
def test_conflicting_settings_are_config_errors(config):
    with pytest.raises(ConfigError):
        SkillsAgent(config)


def test_a_config_that_passed_once_passes_again():
    """The harness rebuilds a method from its dumped config: no conflict may appear then."""
    for config in ({"compile_from": "self_refine"}, {"routing": "flat"}, {}):
        rebuilt = SkillsAgent(SkillsAgent(config).config)
        assert rebuilt.config == SkillsAgent(config).config


# -- replies that do not follow the sections ---------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "answer", "final"),
    [
        ("", "", False),
        ("The answer is 42.", "The answer is 42.", False),
        ("[DECOMPOSE]\nx\n[SOLVE]\nThe answer is 42.", None, False),  # no [VERIFY]: whole reply
        ("[DECOMPOSE]\nx\n[VERIFY]\n", None, False),  # an empty final section: whole reply
        ("**[VERIFY]** The answer is 42.", "The answer is 42.", True),
        ("[verify]\nThe answer is 42.", "The answer is 42.", True),
        ("text [VERIFY] inline only", None, False),  # a tag counts at a line's start
        ("{not json [[[", None, False),
    ],
)
async def test_garbage_replies_never_crash(reply, answer, final):
    solution = await SkillsAgent().solve(TASK, Context(ScriptedModel([reply])))
    assert solution.answer == (reply if answer is None else answer)
    assert solution.metadata["final_section"] is final


def test_sections_split_at_line_initial_tags():
    found = sections("intro\n[A]\none\n## [B]\ntwo\n[A] three", ["[A]", "[B]"])
    assert found == [("[A]", "one"), ("[B]", "two"), ("[A]", "three")]


# -- routing ------------------------------------------------------------------------------------

ALL_SKILLS = [s.name for c in DEFAULT_LIBRARY for s in c.skills]


def router_script(cluster="code", skill="implement_function", answer="The answer is 42."):
    def respond(request: ChatRequest) -> str:
        if agent_of(request) == "agent":
            return answer
        prompt = last_user_message(request)
        if "Choose the one cluster" in prompt:
            return json.dumps({"choice": cluster})
        return json.dumps({"choice": skill})

    return respond


async def test_flat_routing_is_one_selection_call_and_one_execution_call():
    model = ScriptedModel(router_script(skill="equation_solving"))
    ctx = Context(model)
    solution = await SkillsAgent(routing="flat").solve(TASK, ctx)
    assert len(model.calls) == 2
    select, execute = ctx.ledger.records
    assert (select.agent, select.round, execute.agent, execute.round) == ("router", 0, "agent", 1)
    prompt = last_user_message(model.requests[0])
    assert all(f"- {name}:" in prompt for name in ALL_SKILLS) and TASK.prompt() in prompt
    system = system_of(execute)
    assert "equation_solving" in system and "Name the unknowns" in system
    assert last_user_message(model.requests[1]) == TASK.prompt()
    assert solution.answer == "The answer is 42."
    assert solution.metadata == {
        "routing": "flat",
        "cluster": None,
        "skill": "equation_solving",
        "fallbacks": [],
    }
    assert ctx.topology is not None and ctx.topology.edges == [("router", "agent")]


async def test_hierarchical_routing_shows_stage_2_only_the_chosen_cluster():
    model = ScriptedModel(router_script(cluster="code", skill="fix_program"))
    ctx = Context(model)
    solution = await SkillsAgent(routing="hierarchical").solve(TASK, ctx)
    assert len(model.calls) == 3
    assert [(r.agent, r.round) for r in ctx.ledger.records] == [
        ("router", 0),
        ("router", 1),
        ("agent", 2),
    ]
    stage_1, stage_2 = (last_user_message(r) for r in model.requests[:2])
    assert all(f"- {c.name}:" in stage_1 for c in DEFAULT_LIBRARY)
    assert not any(name in stage_1 for name in ALL_SKILLS)  # clusters only
    code = [s.name for s in DEFAULT_LIBRARY[1].skills]
    assert all(f"- {name}:" in stage_2 for name in code)
    assert not any(name in stage_2 for name in ALL_SKILLS if name not in code)
    assert "Locate the failing behaviour" in system_of(ctx.ledger.records[2])
    assert solution.metadata["cluster"] == "code" and solution.metadata["skill"] == "fix_program"


async def test_an_unreadable_or_unknown_choice_falls_back_to_the_first_candidate():
    model = ScriptedModel(["no idea", '{"choice": "astrology"}', "The answer is 42."])
    ctx = Context(model)
    solution = await SkillsAgent(routing="hierarchical").solve(TASK, ctx)
    assert len(model.calls) == 3
    assert solution.metadata["cluster"] == "math"
    assert solution.metadata["skill"] == "word_problem_arithmetic"
    assert solution.metadata["fallbacks"] == ["cluster", "skill"]
    stage_2 = last_user_message(model.requests[1])
    assert "- equation_solving:" in stage_2 and "- fix_program:" not in stage_2


def test_read_choice():
    names = ["math", "code"]
    assert read_choice('```json\n{"choice": "Code"}\n```', names) == "code"
    assert read_choice("  `math`. ", names) == "math"
    assert read_choice("I would pick code here.", names) == "code"  # the one name mentioned
    assert read_choice("math or code?", names) is None  # two: no guess
    assert read_choice('{"choice": 3}', names) is None
    chosen = Choice.among(names).parse('{"choice": "Code"}')  # read leniently, matched later
    assert chosen is not None and chosen.choice == "Code"
    assert read_choice("", names) is None


@pytest.mark.parametrize("native", [True, False])
async def test_the_selection_schema_is_sent_natively_where_supported(native):
    model = ScriptedModel(router_script(), native=["structured_output"] if native else [])
    await SkillsAgent(routing="hierarchical").solve(TASK, Context(model))
    formats = [r.response_format for r in model.requests]
    assert formats[2] is None  # the execution call
    clusters = [c.name for c in DEFAULT_LIBRARY]
    skills = [s.name for s in DEFAULT_LIBRARY[1].skills]
    for request, names in zip(model.requests, (clusters, skills), strict=False):
        shape = '{"choice": ' + " or ".join(f'"{name}"' for name in names) + "}"
        assert last_user_message(request).endswith(f"\n\nReply with a JSON object only: {shape}.")
    if native:
        schema = formats[0]["json_schema"]["schema"]
        assert schema["properties"]["choice"]["enum"] == [c.name for c in DEFAULT_LIBRARY]
        enum = formats[1]["json_schema"]["schema"]["properties"]["choice"]["enum"]
        assert enum == [s.name for s in DEFAULT_LIBRARY[1].skills]
    else:
        assert formats == [None] * 3


async def test_a_library_from_the_config():
    library = [
        {
            "name": "only",
            "description": "the one cluster",
            "skills": [{"name": "shout", "descriptor": "say it loud", "policy": "USE CAPITALS"}],
        }
    ]
    model = ScriptedModel(["shout", "FORTY-TWO"])
    ctx = Context(model)
    solution = await SkillsAgent(routing="flat", library=library).solve(TASK, ctx)
    assert solution.metadata["skill"] == "shout" and solution.metadata["fallbacks"] == []
    assert "USE CAPITALS" in system_of(ctx.ledger.records[1])


# -- budget, model roles, command line -----------------------------------------------------------


async def test_budget_stops():
    ctx = Context(ScriptedModel([PIPELINE_REPLY]), budget=Budget(max_calls=1))
    solution = await SkillsAgent().run_sample(TASK, ctx)
    assert solution.answer.endswith("The answer is 42.") and "budget" not in solution.metadata
    for routing, limit in (("flat", 1), ("hierarchical", 2)):
        model = ScriptedModel(router_script())
        ctx = Context(model, budget=Budget(max_calls=limit))
        solution = await SkillsAgent(routing=routing).run_sample(TASK, ctx)
        assert len(model.calls) == limit and ctx.usage.calls == limit
        assert solution.answer == "" and "budget" in solution.metadata  # no answer before the end
    ctx = Context(ScriptedModel([]), budget=Budget(max_calls=0))
    solution = await SkillsAgent().run_sample(TASK, ctx)
    assert solution.answer == "" and "calls limit 0" in solution.metadata["budget"]


async def test_model_roles_put_the_router_on_another_model():
    method = get_method("skills_agent")(routing="hierarchical")
    roles = method.check_model_roles({"router": "scripted:b"})
    ctx = Context("scripted:a", models=TwoModels(router_script), model_roles=roles)
    await method.solve(TASK, ctx)
    assert [(r.agent, r.model) for r in ctx.ledger.records] == [
        ("router", "scripted:b"),
        ("router", "scripted:b"),
        ("agent", "scripted:a"),
    ]
    with pytest.raises(ConfigError, match="no role or agent 'judge'"):
        method.check_model_roles({"judge": "scripted:b"})


def run_cli(out, *config: str) -> int:
    args = ["run", "--method", "skills_agent", "--benchmark", "arith", "--model", "scripted:echo",
            "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]  # fmt: skip
    for item in config:
        args += ["--config", item]
    return main(args)


@pytest.mark.system
def test_the_command_line_runs_skills_agent_end_to_end(tmp_path, capsys):
    cases = [((), 1), (("system=writer_critic",), 1), (("compile_from=self_refine",), 1),
             (("routing=flat",), 2), (("routing=hierarchical",), 3)]  # fmt: skip
    for config, calls in cases:
        out = tmp_path / "-".join(config or ("default",))
        assert run_cli(out, *config) == 0
        results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert len(results) == 2 and all(r["usage"]["calls"] == calls for r in results)
    trace = json.loads((tmp_path / "default" / "traces.jsonl").read_text().splitlines()[0])
    (call,) = trace["calls"]
    assert call["agent"] == "agent" and "[DECOMPOSE] [SOLVE] [VERIFY]" in json.dumps(call)
    capsys.readouterr()
    assert run_cli(tmp_path / "refused", "compile_from=llm_debate") == 2
    err = capsys.readouterr().err.strip()
    assert "cannot compile llm_debate into one agent: it is a debate" in err and "\n" not in err
