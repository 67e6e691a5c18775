"""EvoMAC: a self-evolving network of programmer agents, rewired from unit-test feedback.

Hu, Cai, Du, Zhu, Liu, Yu, Hou, Tang, Chen. "Self-Evolving Multi-Agent Collaboration Networks
for Software Development". arXiv:2410.16946 (ICLR 2025).

Algorithm (I = ``iterations``, the workflows run at most, default 5 as in MASLab; K =
``max_subtasks``), for a coding task:

1. Concurrently: the organiser splits the task into a team, a DAG of 1..K programmer
   sub-tasks (JSON: id, description, the ids it depends on); the tester writes up to
   ``max_tests`` one-line ``assert`` unit tests from the task alone. The tests run are the
   prompt's own examples (:func:`maslab.kit.code_tests.public_tests`) and then the tester's, each
   once. The hidden tests that score the answer are never shown to any model.
2. The team works on one shared codebase, a single Python program that starts empty, in the
   DAG's topological layers (:meth:`Topology.layers`): sub-task i is programmer_i's. Each
   programmer sees the task, its sub-task and the codebase as the earlier layers left it (never
   another programmer's message) and writes the complete updated program. A layer's members
   run concurrently; their programs are merged into the codebase in sub-task order
   (:func:`merge_programs`): every top-level definition (function, class, assignment to a
   name, import) a program adds or changes relative to the layer's starting codebase replaces
   the codebase's one of the same name, or is added; a later sub-task wins a conflict; what a
   program leaves unchanged or drops stays as it was. A program that does not parse replaces
   the codebase as a whole, as does any program merged into a codebase that does not parse.
   A reply without code changes nothing.
3. The codebase is run against the tests in the sandbox (:func:`maslab.kit.code_tests.run_tests`).
4. Evolution ("textual back-propagation"), while some test fails, at most I − 1 times: the
   organiser reads the task, the codebase and the test report (which tests passed and which
   failed, with what the code returned) and writes a new team, a DAG of fix sub-tasks that
   quote the failing asserts; the team updates the codebase as in step 2; the tests run again.
5. The answer is the codebase that passed the most tests (ties: the later one), as a
   ```python block: the one that passed them all when one did.

Sub-task validation: a reply that is not the JSON asked for, or lists no sub-task with a
description, becomes one sub-task (write the whole solution; in an evolution round, make the
failing tests pass). A sub-task with an empty description or a repeated id is dropped, and
the list is cut to K. Dependencies on unknown ids or on itself are dropped; cycles are broken
deterministically: going through the sub-tasks in their order, each dependency in its order,
a dependency is kept unless it closes a cycle with those kept before it.

LLM calls, with n_0 the sub-tasks of the first team and n_e those of evolution round e:
(1 + n_0 + 1) + Σ_{e=1..E} (1 + n_e), where E ≤ I − 1 is the number of evolution rounds run
(0 when the first codebase passes). The tests run in the sandbox and call no model. With
K = 5 and I = 5: 3 to (1 + 5 + 1) + 4·(1 + 5) = 31.

Budget stop: before the first test run, the latest codebase (after each layer); from then on,
the codebase that passed the most tests so far (ties: the later one).

Roles: ``organizer`` (the team and every rewrite), ``tester`` and ``programmer``
(``programmer_1`` .. ``programmer_K``: programmer_i does sub-task i of every team).

Native structured output: where the organiser's model supports it, the team is requested with
its JSON schema as well (same prompt, same calls); either way it is parsed defensively.

Deviations: prompts are our own. MASLab first has an initial coder write the program, which
the organiser reads; here the first team builds it from an empty codebase (no initial coder
call). MASLab runs the programmers one after another over a codebook of files overwritten
whole; here a layer's programmers run concurrently over one program and are merged by
top-level definition (step 2). MASLab's test organiser plans test sub-tasks and test
programmers write a unittest file for each, again after every workflow, run as a plain
subprocess with a 3 s wait; here one tester call writes the unit tests once, joined by the
prompt's examples, each assert run separately in the sandbox. MASLab returns the last
codebase; we return the one that passed the most tests. The sub-task cap K (5) is ours.
Non-code tasks go through the same loop (the answer is the program), but the method is meant
for code tasks.
"""

from __future__ import annotations

import ast
import asyncio
from dataclasses import dataclass
from typing import Annotated, Any

import networkx as nx
from pydantic import BaseModel, BeforeValidator, Field

from maslab.core.answers import extract_answer
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.code_tests import parse_tests, public_tests, run_tests
from maslab.kit.parsing import Text, as_text
from maslab.kit.structured import Reply, ask

ORGANIZER, PROGRAMMER, TESTER = "organizer", "programmer", "tester"
FIRST_SUBTASK = "Write the complete solution to the task."
FIX_SUBTASK = "Change the code so that every failing unit test passes."


# --- the team: parsing and validating the organiser's JSON ---------------------------------------


def _ids(value: object) -> list[str]:
    """A sub-task's dependencies as ids: a list of them, or one id alone; anything else none."""
    if isinstance(value, list):
        return [as_text(v) for v in value if isinstance(v, str | int) and not isinstance(v, bool)]
    return [as_text(value)] if isinstance(value, str | int) and not isinstance(value, bool) else []


class SubtaskReply(BaseModel):
    id: Text = Field("", description="a short id")
    description: Text = Field("", description="what the programmer must do, self-contained")
    depends_on: Annotated[
        list[Annotated[str, Field(description="the id of a sub-task whose code it builds on")]],
        BeforeValidator(_ids),
    ] = Field(default_factory=list)


class TeamReply(Reply):
    """The organiser's JSON reply: the team's sub-tasks."""

    json_name = "team"

    subtasks: list[SubtaskReply]


@dataclass(frozen=True)
class Subtask:
    id: str
    description: str
    depends_on: tuple[str, ...]


def read_team(text: str, limit: int, fallback: str) -> tuple[list[Subtask], bool]:
    """The valid sub-tasks (at most ``limit``) of an organiser's reply, and whether it parsed.

    Dropped: sub-tasks with no description or a repeated id; dependencies on unknown ids, on
    the sub-task itself, repeated ones, and each one that closes a cycle with the dependencies
    kept before it (sub-tasks in order, each one's dependencies in order). No sub-task left:
    one, ``fallback``."""
    reply = TeamReply.parse(text)
    kept: dict[str, SubtaskReply] = {}
    for i, item in enumerate(reply.subtasks if reply else [], 1):
        key = item.id or str(i)
        if item.description and key not in kept and len(kept) < limit:
            kept[key] = item
    if not kept:
        return [Subtask("1", fallback, ())], reply is not None
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(kept)
    for key, item in kept.items():
        for dep in item.depends_on:
            if dep in kept and dep != key and not nx.has_path(graph, key, dep):
                graph.add_edge(dep, key)
    subtasks = [
        Subtask(key, item.description, tuple(d for d in item.depends_on if graph.has_edge(d, key)))
        for key, item in kept.items()
    ]
    return subtasks, True


def team_topology(subtasks: list[Subtask]) -> Topology:
    """Programmer_i for sub-task i; an edge from each dependency's programmer."""
    names = dict(zip((s.id for s in subtasks), numbered(PROGRAMMER, len(subtasks)), strict=True))
    topology = Topology(name="evomac_team")
    for name in names.values():
        topology.add_node(name)
    for subtask in subtasks:
        for dep in subtask.depends_on:
            topology.add_edge(names[dep], names[subtask.id])
    return topology


# --- the shared codebase: merging a layer's programs -------------------------------------------


def _key(node: ast.stmt, source: str) -> str:
    """What a top-level statement defines: its name for a definition or a plain assignment, else
    its own source (an import, a call, ...: the same text is the same statement)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return f"def {node.name}"
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if isinstance(target, ast.Name):
            return f"name {target.id}"
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return f"name {node.target.id}"
    return source


def units(code: str) -> dict[str, str] | None:
    """The program's top-level statements by :func:`_key`, in order (a repeated key: the last
    one's source at the first one's place), or None when it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    lines = code.splitlines()
    found: dict[str, str] = {}
    for node in tree.body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        source = "\n".join(lines[first - 1 : node.end_lineno])
        found[_key(node, source)] = source
    return found


def _render(found: dict[str, str]) -> str:
    """A program from its top-level statements: the imports first, then the rest, in order."""
    imports = [s for s in found.values() if s.startswith(("import ", "from "))]
    rest = [s for s in found.values() if not s.startswith(("import ", "from "))]
    return "\n\n".join([*(["\n".join(imports)] if imports else []), *rest])


def merge_programs(base: str, programs: list[str | None]) -> str:
    """The codebase ``base`` after a layer whose members wrote ``programs``, in sub-task order.

    Each program's top-level statements that differ from ``base``'s of the same key (added or
    changed) replace the codebase's, in place, or are appended; later programs win. A program
    that does not parse, or one merged into a codebase that does not parse, replaces it whole.
    None (no code in the reply) changes nothing."""
    before = units(base) or {}
    merged = base
    for program in programs:
        if program is None:
            continue
        new, current = units(program), units(merged)
        if new is None or current is None:
            merged = program
            continue
        current.update({k: s for k, s in new.items() if before.get(k) != s})
        merged = _render(current)
    return merged


def as_answer(code: str) -> str:
    return f"```python\n{code.strip()}\n```"


# --- prompts -------------------------------------------------------------------------------------

_TEAM_RULES = (
    "The dependencies must form a DAG. Use as few sub-tasks as the work needs (at most {limit}); "
    "do not add testing or documentation sub-tasks."
)


def _shown(code: str) -> str:
    return as_answer(code) if code.strip() else "(empty: nothing has been written yet)"


def organize_prompt(task: Task, limit: int) -> str:
    return (
        f"You lead a small team of programmers. The coding task:\n\n{task.prompt()}\n\n"
        "Split the work into sub-tasks, one per programmer. The programmers share one Python "
        "program: each sees the task, its own sub-task and the program as the sub-tasks it "
        "depends on left it, and writes the updated program; sub-tasks with no dependency "
        "between them are done at the same time. " + _TEAM_RULES.format(limit=limit)
    )


def evolve_prompt(task: Task, code: str, report: str, limit: int) -> str:
    return (
        f"You lead a small team of programmers. The coding task:\n\n{task.prompt()}\n\n"
        f"The team's current program:\n{_shown(code)}\n\n"
        f"It was run against unit tests:\n{report.strip()}\n\n"
        "Design a new team to fix it: sub-tasks that each fix one problem the failing tests "
        "reveal. Quote every failing assert word for word in the description of the sub-task "
        "that fixes it, and say what the code should do instead. The programmers share the "
        "program as above. " + _TEAM_RULES.format(limit=limit)
    )


def programmer_prompt(task: Task, subtask: str, code: str) -> str:
    return (
        f"You are a programmer in a team. The team's coding task:\n\n{task.prompt()}\n\n"
        f"Your sub-task:\n{subtask}\n\n"
        f"The team's program as it stands:\n{_shown(code)}\n\n"
        "Do your sub-task by changing the program. Keep what other sub-tasks need, use the "
        "exact names and signatures the task asks for, and do not add a main program, tests "
        "or asserts. Reply with the complete updated program in one ```python code block."
    )


def tester_prompt(task: Task, count: int) -> str:
    return (
        f"Here is a programming task:\n\n{task.prompt()}\n\n"
        f"Write up to {count} unit tests that a correct solution passes, starting from the "
        "simplest examples the task description gives. Do not solve the task. Each test is "
        "one line, `assert <call of the function> == <expected value>`, with the exact name "
        "and signature the task asks for. Put the tests in one ```python code block, one per "
        "line, and nothing else in it."
    )


# --- the method ----------------------------------------------------------------------------------


@register_method("evomac")
class EvoMAC(Method):
    """An organiser's DAG of programmers over one codebase, rewired from test failures."""

    roles = (ORGANIZER, PROGRAMMER, TESTER)
    paper = "Hu et al., arXiv 2410.16946 (EvoMAC)"
    category = "self-evolving programmer DAG (organiser, programmers, tester; test feedback)"
    calls = (
        "(1 + n_0 + 1) + Σ_e (1 + n_e): organiser, n_0 sub-tasks, tester, then per evolution "
        "round e ≤ I−1 the organiser and its n_e ≤ K sub-tasks (I = 5, K = 5: 3–31)"
    )

    class Config(MethodConfig):
        iterations: int = Field(5, ge=1)
        """I: workflows run at most, the first included (evolution rounds ≤ I − 1)."""
        max_subtasks: int = Field(5, ge=1)
        """K: sub-tasks (programmers) per team."""
        max_tests: int = Field(4, ge=1)
        """Unit tests the tester may write (the prompt's examples come on top)."""

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered(PROGRAMMER, self.config.max_subtasks)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        overview = Topology(name="evomac")
        ctx.topology = overview
        organizer, tester = ctx.agent(ORGANIZER), ctx.agent(TESTER)
        overview.add_edge(TESTER, ORGANIZER)  # the test report drives the organiser's rewrites
        parsed: list[bool] = []  # per team: whether the organiser's reply parsed
        teams: list[list[dict[str, Any]]] = []

        async def design(prompt: str, r: int, fallback: str) -> list[Subtask]:
            said, _ = await ask(organizer, prompt, TeamReply, round=r, kind="team", remember=False)
            subtasks, ok = read_team(said.content, cfg.max_subtasks, fallback)
            parsed.append(ok)
            teams.append([{"id": s.id, "depends_on": list(s.depends_on)} for s in subtasks])
            return subtasks

        async def write_tests() -> list[str]:
            said = await tester.reply(
                tester_prompt(task, cfg.max_tests), round=0, kind="tests", remember=False
            )
            return list(
                dict.fromkeys(public_tests(task) + parse_tests(said.content, cfg.max_tests))
            )

        async def program(name: str, subtask: Subtask, code: str, r: int) -> str | None:
            agent = ctx.agent(name, role=PROGRAMMER)
            said = await agent.reply(
                programmer_prompt(task, subtask.description, code),
                round=r,
                remember=False,
                metadata={"subtask": subtask.id},
            )
            return extract_answer(said.content, "code", entry_point=task.entry_point)

        async def build(subtasks: list[Subtask], code: str, r: int, tested: bool) -> str:
            team = team_topology(subtasks)
            by_name = dict(zip(team.nodes, subtasks, strict=True))
            for name in team.nodes:
                overview.add_edge(ORGANIZER, name)
            for u, v in team.edges:
                overview.add_edge(u, v)
            for name in team.sinks():
                overview.add_edge(name, TESTER)
            for layer in team.layers():
                written = await asyncio.gather(*(program(n, by_name[n], code, r) for n in layer))
                code = merge_programs(code, list(written))
                if not tested:
                    ctx.propose(as_answer(code), round=r)
            return code

        subtasks, tests = await asyncio.gather(
            design(organize_prompt(task, cfg.max_subtasks), 0, FIRST_SUBTASK), write_tests()
        )
        code = await build(subtasks, "", 0, tested=False)
        results: list[tuple[int, int]] = []
        best, report, passed = (-1, ""), "", False
        for r in range(cfg.iterations):
            if r > 0:  # textual back-propagation: a new team from the test report
                prompt = evolve_prompt(task, code, report, cfg.max_subtasks)
                code = await build(await design(prompt, r, FIX_SUBTASK), code, r, tested=True)
            run = await run_tests(task, as_answer(code), tests)
            ctx.post(TESTER, run.feedback, round=r, kind="test_results")
            results.append(run.counts)
            report, passed = run.feedback, run.passed
            if run.counts[0] >= best[0]:
                best = (run.counts[0], code)
                ctx.propose(as_answer(code), round=r, tests_passed=run.counts[0])
            if passed:
                break
        return Solution(
            answer=as_answer(best[1]),
            metadata={
                "rounds": len(results),
                "passed": passed,
                "tests": tests,
                "test_results": results,
                "teams": teams,
                "parsed": parsed,
            },
        )
