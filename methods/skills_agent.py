"""Skills agent: a multi-agent system compiled into one agent with skills, and skill routing.

Xiaoxiao Li. "When Single-Agent with Skills Replace Multi-Agent Systems (and When They
Fail)". arXiv:2601.04748 (2026).

Compilation (:func:`compile`), from a :class:`MASSpec` (roles, each with a role description
and a policy; a topology of who hands over to whom; the protocol kind; each role's private
state and model) or from a bundled method's structure (:data:`STRUCTURES`):

1. Compilability, judged from the spec's properties. Every condition that fails is a reason in
   one :class:`NotCompilable` message:
   - a debate protocol: each agent must hold its own opposing position, and one context
     cannot keep the positions independent;
   - an independent protocol (best-of-n, parallel proposers): one call cannot give
     independent samples;
   - C2: a role with private state;
   - C3: roles on different models;
   - C1: a communication graph with a cycle, so it has no serial order. The exception is the
     loop of a refinement protocol (writer <-> critic). There, an edge that points back to an
     earlier role (in the topology's node order) is a loop, written at most ``iterations``
     times.
2. Capability decomposition and backend assignment: each role becomes one internalised skill.
   The skill has the role's skill name, its role description as the descriptor and its policy.
3. Topology internalisation: the skills are put in topological order (the graph's generations,
   leaving out a refinement's back edges). Every edge u -> v becomes a handover constraint on
   u's skill: hand over to v in a form v can take. A back edge becomes a bounded loop. The last
   skill must end with the final answer.

The compiled agent (``routing="none"``) makes one call. Its system prompt lists the skills in
order (tag, name, descriptor, policy, handovers) and asks for one section per skill, headed by
the skill's tag (``[DECOMPOSE] ... [SOLVE] ... [VERIFY] ...``). The user turn is the task. The
answer is the last section of the last skill. A reply without that section is the answer as it
is.

Built-in systems (``system``), from the paper's table:

- ``pipeline`` (GSM8K): decomposer -> solver -> verifier; skills decompose, solve, verify.
- ``writer_critic`` (HumanEval): coder -> critic -> refiner, and the refiner hands back to the
  critic (one pass); skills code, critique, refine.
- ``router`` (HotpotQA): router -> retriever and reasoner -> aggregator; skills analyze,
  retrieve, reason, synthesize.

``compile_from`` compiles a bundled method, with its default config, instead.

Skill routing (``routing``) works on a library of skills grouped into clusters (``library``).
The default library has 4 clusters of 3 near-synonym skills: the paper's confusability-aware
grouping.

- ``flat``: the router sees every skill (name and descriptor) and picks one. The agent then
  applies that skill's policy to the task.
- ``hierarchical``: the router picks a cluster, seeing only the cluster names and
  descriptions. It then picks a skill of that cluster, seeing only that cluster's skills.
  Last, the agent applies the skill.

A choice is read from JSON (``{"choice": name}``), natively where the model supports
structured output. Failing that, a reply that is a bare name, or that names exactly one
candidate, is read as that choice. Anything else falls back to the first candidate listed;
``metadata["fallbacks"]`` names the stages that fell back.

LLM calls: 1 (``routing="none"``); flat 1 + 1 = 2; hierarchical 2 + 1 = 3.

Budget stop: no answer. Only the last call writes one, so there is nothing to propose before.

Deviations:

- No code was released. The prompts, the skill texts and the default library are our own.
- Each role becomes one skill; the paper may split an agent's prompt into several
  capabilities. Every skill is internalised (a prompt template). The paper's externalised
  tool backends are not built, so a compiled ``planner_executor`` works out its function
  results itself.
- Compilability follows from declared properties (protocol kind, private state, models, the
  graph); it is not measured. A bundled method is compiled with its default config and on the
  run's model, so C3 holds unless its structure declares other models.
- Routing runs the selected library skill on its own. The paper measures how accurately a
  skill is selected as the library grows; it fixes no execution prompt.
- The HotpotQA skill "retrieve" recalls facts from the question's context or from the model's
  knowledge: there is no retrieval tool.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, create_model, model_validator

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, get_method, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.errors import ConfigError
from maslab.kit.parsing import Text
from maslab.kit.structured import Reply, ask

AGENT, ROUTER = "agent", "router"
SKILL_NAME = r"^[a-z][a-z0-9_]*$"

Protocol = Literal["pipeline", "routing", "refinement", "debate", "independent"]
"""How a MAS's agents work together: handing work along a graph (pipeline, routing), a
writer <-> critic loop (refinement), opposing positions (debate), or independent parallel
answers (best-of-n, parallel proposers)."""


# -- the MAS description -------------------------------------------------------------------


@dataclass(frozen=True)
class Role:
    """One agent of a MAS: the skill it becomes, its role description and behavioural policy,
    whether it keeps state the others cannot see, and its model (None: the shared one)."""

    name: str
    skill: str
    description: str
    policy: str
    private_state: bool = False
    model: str | None = None


@dataclass(frozen=True)
class MASSpec:
    """A MAS to compile: its roles, who hands over to whom, the protocol kind and, for a
    refinement loop, the most passes through it."""

    name: str
    roles: tuple[Role, ...]
    topology: Topology
    protocol: Protocol
    iterations: int = 1

    def __post_init__(self) -> None:
        what = f"MAS spec {self.name!r}"
        names, skills = [r.name for r in self.roles], [r.skill for r in self.roles]
        if not names:
            raise ConfigError(f"{what} has no roles")
        if len(set(names)) < len(names) or len(set(skills)) < len(skills):
            raise ConfigError(f"{what}: role names and skill names must be unique")
        if bad := [s for s in skills if not re.match(SKILL_NAME, s)]:
            raise ConfigError(f"{what}: skill names are lower-case identifiers, got {bad[0]!r}")
        if sorted(self.topology.nodes) != sorted(names):
            raise ConfigError(
                f"{what}: the topology's agents {self.topology.nodes} must be its roles {names}"
            )
        if self.protocol not in get_args(Protocol):
            known = ", ".join(get_args(Protocol))
            raise ConfigError(f"{what}: unknown protocol {self.protocol!r}; known: {known}")
        if self.iterations < 1:
            raise ConfigError(f"{what}: iterations must be >= 1, got {self.iterations}")


# -- the compiled skill library --------------------------------------------------------------


class Skill(BaseModel):
    """A skill: its name, the descriptor a selector reads, its execution policy and the
    handover constraints the topology put on it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SKILL_NAME)
    descriptor: str = Field(min_length=1)
    policy: str = Field(min_length=1)
    handovers: tuple[str, ...] = ()

    @property
    def tag(self) -> str:
        return f"[{self.name.upper()}]"


@dataclass(frozen=True)
class SkillLibrary:
    """A compiled MAS: its skills in topological order; the last one writes the answer."""

    name: str
    skills: tuple[Skill, ...]


class NotCompilable(ConfigError):
    """A MAS that one agent with skills cannot replace; the message says why."""


def compile(system: MASSpec | Method | str) -> SkillLibrary:
    """The skill library of ``system``: a spec, or a bundled method (an instance or a name).

    Raises:
        NotCompilable: ``system`` fails a compilability condition; the message names each one.
        ConfigError: an unknown method, or a method whose structure is not known.
    """
    spec = system if isinstance(system, MASSpec) else structure_of(system)
    back = _back_edges(spec)
    forward = _without(spec.topology, back)
    if reasons := _refusals(spec, forward):
        raise NotCompilable(f"cannot compile {spec.name} into one agent: {'; '.join(reasons)}")
    order = [name for layer in forward.layers() for name in layer]
    roles = {r.name: r for r in spec.roles}

    def handovers(name: str) -> tuple[str, ...]:
        tag = f"[{roles[name].skill.upper()}]"
        rules = []
        for successor in spec.topology.successors(name):
            target = roles[successor]
            to = f"[{target.skill.upper()}]"
            if (name, successor) in back:
                rules.append(
                    f"Loop: if problems remain after {tag}, hand back to {to} and write the "
                    f"sections from {to} to {tag} again; at most {spec.iterations} pass(es) "
                    "through them in all."
                )
            else:
                rules.append(
                    f"Hand over to {to} ({target.description}): leave output that it can take "
                    "as its input."
                )
        if name == order[-1]:
            rules.append("Final skill: end this section with the final answer, as the task asks.")
        return tuple(rules)

    skills = tuple(
        Skill(
            name=roles[n].skill,
            descriptor=roles[n].description,
            policy=roles[n].policy,
            handovers=handovers(n),
        )
        for n in order
    )
    return SkillLibrary(spec.name, skills)


def _back_edges(spec: MASSpec) -> set[tuple[str, str]]:
    """A refinement's loop edges: those that point to a role no later in the node order."""
    if spec.protocol != "refinement":
        return set()
    position = {name: i for i, name in enumerate(spec.topology.nodes)}
    return {(u, v) for u, v in spec.topology.edges if position[u] >= position[v]}


def _without(topology: Topology, edges: set[tuple[str, str]]) -> Topology:
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(topology.nodes)
    graph.add_edges_from(edge for edge in topology.edges if edge not in edges)
    return Topology(graph, name=topology.name)


def _refusals(spec: MASSpec, forward: Topology) -> list[str]:
    """Why ``spec`` cannot be one agent (``forward``: its graph without the loop edges)."""
    reasons = []
    if spec.protocol == "debate":
        reasons.append(
            "it is a debate: each agent must hold its own opposing position, and one context "
            "cannot keep the positions independent"
        )
    if spec.protocol == "independent":
        reasons.append(
            "its agents answer independently in parallel (best-of-n sampling): one call cannot "
            "give independent samples"
        )
    if private := [r.name for r in spec.roles if r.private_state]:
        reasons.append(
            f"{', '.join(private)} hold private state that one shared context would expose "
            "(C2: shared history)"
        )
    models = dict.fromkeys(r.model or "the run's model" for r in spec.roles)
    if len(models) > 1:
        reasons.append(
            f"its agents use different models ({', '.join(models)}) and one agent runs on one "
            "(C3: homogeneous backbone)"
        )
    if not forward.is_dag():
        cycle = [u for u, _ in nx.find_cycle(forward.graph)]
        reasons.append(
            f"its communication graph has a cycle {' -> '.join([*cycle, cycle[0]])}, so it has "
            "no serial order (C1; only a writer-critic refinement loop may cycle)"
        )
    return reasons


# -- the structures of bundled methods -------------------------------------------------------


def _peer(name: str, description: str, *, model: str | None = None) -> Role:
    """A role of a structure that is refused anyway: its description is its policy too."""
    return Role(name, name.lower(), description, description, model=model)


def _declared(method: Method) -> Topology:
    """The topology ``method`` declares for its config (:meth:`Method.structure`)."""
    topology = method.structure()
    if topology is None:
        raise ConfigError(f"method '{method.name}' declares no structure to compile")
    return topology


def _debate(method: Method) -> MASSpec:
    topology = _declared(method)
    description = "argue for an answer and answer the others' arguments"
    roles = tuple(_peer(n, description) for n in topology.nodes)
    return MASSpec("llm_debate", roles, topology, "debate")


def _mad(method: Method) -> MASSpec:
    affirmative, negative, moderator, judge = method.roles
    roles = (
        _peer(affirmative, "argue for an answer"),
        _peer(negative, "argue against the affirmative side's answer"),
        _peer(moderator, "judge each round's arguments"),
        _peer(judge, "decide between the sides' answers"),
    )
    return MASSpec("mad", roles, _declared(method), "debate")


def _exchange_of_thought(method: Method) -> MASSpec:
    description = "answer, then revise against the others' answers"
    roles = tuple(_peer(n, description) for n in method.roles)
    return MASSpec("exchange_of_thought", roles, _declared(method), "debate")


def _samplers(name: str, sampler: str, count: int, judge: str | None) -> MASSpec:
    """``count`` independent samplers, and the agent that combines them, if any."""
    names = numbered(sampler, count)
    roles = tuple(_peer(n, "answer the question on its own") for n in names)
    if judge is None:
        return MASSpec(name, roles, Topology.layered([names]), "independent")
    roles += (_peer(judge, "combine the independent answers into one"),)
    return MASSpec(name, roles, Topology.layered([names, [judge]]), "independent")


def _self_consistency(method: Any) -> MASSpec:
    judge = "aggregator" if method.config.aggregate == "llm" else None
    return _samplers("self_consistency", "sample", method.config.k, judge)


def _mixture_of_agents(method: Any) -> MASSpec:
    return _samplers("mixture_of_agents", "proposer", method.config.proposers, "aggregator")


def _mav(method: Any) -> MASSpec:
    return _samplers("mav", "generator", method.config.n, "verifier")


def _self_refine(method: Any) -> MASSpec:
    generator, critic, refiner = method.roles
    roles = (
        Role(
            generator,
            "draft",
            "write a first complete answer",
            "Answer the question, reasoning step by step.",
        ),
        Role(
            critic,
            "critique",
            "find what is wrong or missing in the current answer",
            "Check every step and the result of the latest answer; list each concrete problem, "
            "or say that there is none.",
        ),
        Role(
            refiner,
            "refine",
            "rewrite the answer so it fixes the problems found",
            "Write the whole improved answer, fixing every listed problem and keeping what was "
            "right; if no problem was found, restate the answer.",
        ),
    )
    return MASSpec(
        "self_refine",
        roles,
        _declared(method),
        "refinement",
        iterations=method.config.max_iterations,
    )


def _planner_executor(method: Any) -> MASSpec:
    config = method.config
    roles = (
        Role(
            "planner",
            "plan",
            "split the task into a few short steps",
            "Write a numbered plan of at most "
            f"{config.max_steps} steps, each one operation on the task's data or on earlier "
            "results.",
        ),
        Role(
            "action",
            "execute",
            "carry out the plan's steps one by one",
            "For each step, write the operation as a call of one of the functions "
            f"{', '.join(config.functions)} and work out its result yourself; use earlier "
            "results in later steps.",
        ),
    )
    return MASSpec("planner_executor", roles, Topology.chain(["planner", "action"]), "pipeline")


STRUCTURES: dict[str, Callable[[Any], MASSpec]] = {
    "exchange_of_thought": _exchange_of_thought,
    "llm_debate": _debate,
    "mad": _mad,
    "mav": _mav,
    "mixture_of_agents": _mixture_of_agents,
    "planner_executor": _planner_executor,
    "self_consistency": _self_consistency,
    "self_refine": _self_refine,
}
"""Bundled method name -> its structure, built from the method (an instance, so its config);
the graph is the one the method declares (:meth:`Method.structure`) where it declares one."""


def structure_of(method: Method | str) -> MASSpec:
    """The structure of a bundled method (an instance, or a name with its default config)."""
    instance = get_method(method)() if isinstance(method, str) else method
    build = STRUCTURES.get(instance.name)
    if build is None:
        name, known = instance.name or type(instance).__name__, ", ".join(STRUCTURES)
        raise ConfigError(f"no known structure to compile for method '{name}'; known: {known}")
    return build(instance)


# -- built-in systems (the paper's table) ----------------------------------------------------


def _pipeline() -> MASSpec:
    roles = (
        Role(
            "decomposer",
            "decompose",
            "break a word problem into its given quantities and the sub-questions that lead to "
            "what it asks",
            "List the known quantities with their units, then number the sub-questions, each "
            "answerable from the quantities and the earlier sub-questions, the last being the "
            "question itself. Compute nothing yet.",
        ),
        Role(
            "solver",
            "solve",
            "work out each sub-question in order with explicit arithmetic",
            "Answer the sub-questions one by one, writing out every calculation and carrying "
            "each result forward.",
        ),
        Role(
            "verifier",
            "verify",
            "check a worked solution against the problem and state the final answer",
            "Re-read the problem, check that every quantity is used as stated and redo each "
            "calculation another way (for instance backwards); fix any error you find.",
        ),
    )
    names = [r.name for r in roles]
    return MASSpec("pipeline", roles, Topology.chain(names), "pipeline")


def _writer_critic() -> MASSpec:
    roles = (
        Role(
            "coder",
            "code",
            "write a complete implementation of the requested function",
            "Read the signature, the docstring and the examples, then write the whole function "
            "in one Python code block, with the imports it needs.",
        ),
        Role(
            "critic",
            "critique",
            "review code for bugs, unhandled edge cases and departures from the specification",
            "Trace the docstring's examples through the code, try edge cases (empty input, "
            "zero, negatives, duplicates) and list every concrete problem, or say 'no issues'. "
            "Do not rewrite the code here.",
        ),
        Role(
            "refiner",
            "refine",
            "rewrite code so that it fixes the problems a review found",
            "Write the complete corrected function in one Python code block, fixing every "
            "listed problem and keeping what was right; with no issues, repeat the code as it "
            "is.",
        ),
    )
    forward = [("coder", "critic"), ("coder", "refiner"), ("critic", "refiner")]
    topology = Topology.from_edges([*forward, ("refiner", "critic")], name="writer_critic")
    return MASSpec("writer_critic", roles, topology, "refinement")


def _router() -> MASSpec:
    roles = (
        Role(
            "router",
            "analyze",
            "work out what a multi-hop question asks and which facts it depends on",
            "Name the entities in the question, the relation to find and the intermediate "
            "facts (hops) it needs, in order.",
        ),
        Role(
            "retriever",
            "retrieve",
            "collect the facts each hop needs, from the given context or from knowledge",
            "For each hop, state the relevant facts, naming the passage when the question gives "
            "passages. Facts only, no conclusions.",
        ),
        Role(
            "reasoner",
            "reason",
            "chain facts together hop by hop to reach a conclusion",
            "Combine the facts hop by hop, saying which fact supports each step, and note any "
            "gap or conflict.",
        ),
        Role(
            "aggregator",
            "synthesize",
            "turn the reasoning into one short, direct answer",
            "Settle any conflict noted, then state the answer as briefly as the question allows "
            "(an entity, a date, yes or no).",
        ),
    )
    topology = Topology.layered([["router"], ["retriever", "reasoner"], ["aggregator"]])
    return MASSpec("router", roles, topology, "routing")


System = Literal["pipeline", "writer_critic", "router"]
SYSTEMS: dict[str, Callable[[], MASSpec]] = {
    "pipeline": _pipeline,
    "writer_critic": _writer_critic,
    "router": _router,
}


# -- the skill-routing library ---------------------------------------------------------------


class Cluster(BaseModel):
    """A group of related skills that hierarchical routing picks before picking a skill."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    skills: tuple[Skill, ...] = Field(min_length=1)


def _skill(name: str, descriptor: str, policy: str) -> Skill:
    return Skill(name=name, descriptor=descriptor, policy=policy)


DEFAULT_LIBRARY: tuple[Cluster, ...] = (
    Cluster(
        name="math",
        description="problems whose answer is a number or an expression",
        skills=(
            _skill(
                "word_problem_arithmetic",
                "solve an everyday word problem with a few arithmetic steps",
                "List the quantities, compute step by step with every calculation written out, "
                "and check the result against the story.",
            ),
            _skill(
                "equation_solving",
                "set up and solve equations for unknown quantities",
                "Name the unknowns, write the equations the problem states, solve them "
                "algebraically and substitute the solution back to check it.",
            ),
            _skill(
                "counting_and_probability",
                "count arrangements or compute a probability",
                "Define the outcomes, count them systematically (cases, combinations, "
                "complements) and simplify the result.",
            ),
        ),
    ),
    Cluster(
        name="code",
        description="tasks that ask for a program or a function",
        skills=(
            _skill(
                "implement_function",
                "write a function from its signature and docstring",
                "Read the specification and examples, then write the complete function in one "
                "Python code block and trace one example through it.",
            ),
            _skill(
                "fix_program",
                "find and fix the bug in a given program",
                "Locate the failing behaviour, explain the cause in one sentence and write the "
                "whole corrected program in one Python code block.",
            ),
            _skill(
                "write_script",
                "write a short standalone script that reads input and prints output",
                "Decide the input format, write the script in one Python code block and show "
                "its output on a sample input.",
            ),
        ),
    ),
    Cluster(
        name="knowledge",
        description="questions answered by facts about the world",
        skills=(
            _skill(
                "multi_hop_question",
                "answer a question that chains two or more facts",
                "Split the question into hops, settle each hop's fact in turn and state the "
                "answer the last hop gives.",
            ),
            _skill(
                "single_fact_question",
                "answer a question about one fact",
                "Recall the fact, say how sure you are, and state the answer briefly.",
            ),
            _skill(
                "multiple_choice_exam",
                "pick the right option of a multiple-choice question",
                "Weigh every option against what you know, rule out the wrong ones with a "
                "reason each, and state the letter of the remaining option.",
            ),
        ),
    ),
    Cluster(
        name="reasoning",
        description="puzzles and judgements that need careful logic more than facts",
        skills=(
            _skill(
                "logic_puzzle",
                "solve a puzzle of constraints about people, objects or orderings",
                "List the constraints, deduce what each one forces, try the remaining cases "
                "and check the solution against every constraint.",
            ),
            _skill(
                "commonsense_judgement",
                "judge what is plausible in an everyday situation",
                "Describe what normally happens in such a situation, compare each possibility "
                "with it and choose the most plausible.",
            ),
            _skill(
                "argument_analysis",
                "judge whether a conclusion follows from given premises",
                "Restate the premises and the conclusion, look for a counterexample, and say "
                "whether the conclusion follows.",
            ),
        ),
    ),
)


# -- prompts ----------------------------------------------------------------------------------


def compiled_system_prompt(library: SkillLibrary) -> str:
    """The compiled agent's system prompt: every skill in order, and the sections to write."""
    listed = []
    for i, skill in enumerate(library.skills, 1):
        rules = "".join(f"\n   - {rule}" for rule in skill.handovers)
        listed.append(
            f"{i}. {skill.tag} {skill.name}: {skill.descriptor}.\n   How: {skill.policy}"
            f"\n   Handover:{rules or ' none.'}"
        )
    tags = " ".join(skill.tag for skill in library.skills)
    return (
        f"You do the work of a whole team on your own, as {len(library.skills)} skills applied "
        "one after the other in a single reply. The skills, in the order you apply them:\n\n"
        + "\n".join(listed)
        + "\n\nWrite one section per skill, in this order, each starting with its tag alone on "
        f"a line: {tags}. Sections repeat only where a handover allows a loop. Your reply ends "
        f"with the {library.skills[-1].tag} section, which holds the final answer."
    )


def skill_system_prompt(skill: Skill) -> str:
    """The system prompt of the agent that applies one selected skill."""
    return (
        f"Apply the skill '{skill.name}' ({skill.descriptor}) to the task.\n\nHow: "
        f"{skill.policy}\n\nEnd with the final answer, stated as the task asks."
    )


def choice_prompt(task: Task, kind: str, options: Mapping[str, str]) -> str:
    """Ask the router for one of ``options`` (name -> description)."""
    listed = "\n".join(f"- {name}: {description}" for name, description in options.items())
    return (
        f"Choose the one {kind} best suited to the task below.\n\n{kind.capitalize()}s:\n"
        f"{listed}\n\nTask:\n{task.prompt()}\n\nDo not solve the task."
    )


# -- reading replies ---------------------------------------------------------------------------


class Choice(Reply):
    """The router's JSON reply: the name it chooses."""

    choice: Text

    @classmethod
    def among(cls, names: list[str]) -> type[Choice]:
        """The reply choosing one of ``names``: its schema and shape list them; it is read as
        leniently as :class:`Choice` (:func:`read_choice` matches the name)."""
        listed = WithJsonSchema({"type": "string", "enum": names})
        return create_model(cls.__name__, __base__=cls, choice=(Annotated[Text, listed], ...))


def read_choice(reply: str, names: list[str]) -> str | None:
    """The name ``reply`` chooses among ``names``: JSON, else a bare name, else the one name
    it mentions; None when it chooses none, or mentions several."""
    by_key = {name.lower(): name for name in names}
    parsed = Choice.parse(reply)
    if parsed is not None and parsed.choice.lower() in by_key:
        return by_key[parsed.choice.lower()]
    bare = reply.strip().strip("`'\"*.").lower()
    if bare in by_key:
        return by_key[bare]
    mentioned = [n for n in names if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", reply, re.I)]
    return mentioned[0] if len(mentioned) == 1 else None


def sections(reply: str, tags: list[str]) -> list[tuple[str, str]]:
    """The ``(tag, text)`` sections of ``reply``, in order; a tag counts at a line's start
    (markdown marks before it allowed)."""
    pattern = "|".join(re.escape(tag) for tag in tags)
    heads = list(re.finditer(rf"^[ \t>#*_]*({pattern})[*_]*", reply, re.I | re.M))
    if not heads:
        return []
    ends = [m.start() for m in heads[1:]] + [len(reply)]
    return [
        (m.group(1).upper(), reply[m.end() : end].strip())
        for m, end in zip(heads, ends, strict=True)
    ]


# -- the method ---------------------------------------------------------------------------------


@register_method("skills_agent")
class SkillsAgent(Method):
    """One agent with the skills of a compiled MAS (1 call), or skill routing (2 or 3 calls)."""

    roles = (AGENT, ROUTER)
    paper = "Li, arXiv 2601.04748 (single agent with skills)"
    category = "single agent with skills (compiled MAS; skill routing)"
    calls = "1 (compiled); routing flat 1 + 1 = 2, hierarchical 2 + 1 = 3"

    class Config(MethodConfig):
        system: System | None = None
        """The built-in MAS to compile (``routing="none"``); None: ``pipeline``, unless
        ``compile_from`` names a method."""
        compile_from: str | None = None
        """A bundled method to compile instead of ``system``."""
        routing: Literal["none", "flat", "hierarchical"] = "none"
        """``none``: the compiled single call; else select a library skill, then apply it."""
        library: tuple[Cluster, ...] = Field(DEFAULT_LIBRARY, min_length=1)
        """The skills routing selects from, in clusters."""

        @model_validator(mode="after")
        def _consistent(self) -> SkillsAgent.Config:
            if self.compile_from is not None and self.system is not None:
                raise ValueError("set system or compile_from, not both")
            if self.routing != "none" and (self.system or self.compile_from) is not None:
                raise ValueError(
                    "routing selects from the library; system and compile_from need routing=none"
                )
            names = [c.name for c in self.library]
            skills = [s.name for c in self.library for s in c.skills]
            if len(set(names)) < len(names) or len(set(skills)) < len(skills):
                raise ValueError("library cluster names and skill names must be unique")
            return self

    config: Config

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        cfg = self.config
        self.compiled: SkillLibrary | None = None
        if cfg.routing == "none":  # a system that cannot be compiled fails here, before any call
            self.compiled = compile(cfg.compile_from or SYSTEMS[cfg.system or "pipeline"]())

    def structure(self) -> Topology | None:
        """Routing: the router hands the chosen skill to the agent; compiled: one agent."""
        return None if self.compiled is not None else Topology.chain([ROUTER, AGENT])

    async def solve(self, task: Task, ctx: Context) -> Solution:
        if self.compiled is not None:
            return await self._compiled(task, ctx, self.compiled)
        return await self._routed(task, ctx)

    async def _compiled(self, task: Task, ctx: Context, library: SkillLibrary) -> Solution:
        agent = ctx.agent(AGENT, system=compiled_system_prompt(library))
        reply = (await agent.reply(task.prompt(), round=0)).content
        found = sections(reply, [skill.tag for skill in library.skills])
        final = [text for tag, text in found if tag == library.skills[-1].tag]
        parsed = bool(final and final[-1])
        return Solution(
            answer=final[-1] if parsed else reply,
            metadata={
                "system": library.name,
                "skills": [skill.name for skill in library.skills],
                "sections": [tag for tag, _ in found],
                "final_section": parsed,
            },
        )

    async def _routed(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = self.structure()
        router = ctx.agent(ROUTER)
        chosen: list[str] = []  # the choices so far, one per selection call (its round)
        fallbacks: list[str] = []

        async def choose(kind: str, options: dict[str, str]) -> str:
            names = list(options)
            said, _ = await ask(
                router,
                choice_prompt(task, kind, options),
                Choice.among(names),
                round=len(chosen),
                kind="selection",
                remember=False,
            )
            choice = read_choice(said.content, names)
            if choice is None:
                fallbacks.append(kind)
            chosen.append(choice or names[0])
            return chosen[-1]

        clusters = list(cfg.library)
        if cfg.routing == "hierarchical":
            picked = await choose("cluster", {c.name: c.description for c in clusters})
            clusters = [c for c in clusters if c.name == picked]
        skills = {s.name: s for c in clusters for s in c.skills}
        skill = skills[await choose("skill", {n: s.descriptor for n, s in skills.items()})]

        agent = ctx.agent(AGENT, system=skill_system_prompt(skill))
        reply = (await agent.reply(task.prompt(), round=len(chosen))).content
        return Solution(
            answer=reply,
            metadata={
                "routing": cfg.routing,
                "cluster": clusters[0].name if cfg.routing == "hierarchical" else None,
                "skill": skill.name,
                "fallbacks": fallbacks,
            },
        )
