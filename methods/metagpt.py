"""MetaGPT: a software company's standard operating procedure, role by role, over a message pool.

Hong, Zhuge, Chen, Zheng, Cheng, Zhang, Wang, Wang, Yau, Lin, Zhou, Ran, Xiao, Wu, Schmidhuber.
"MetaGPT: Meta Programming for A Multi-Agent Collaborative Framework". arXiv:2308.00352
(ICLR 2024).

Algorithm (k = ``max_retries``, T = ``max_tests``). The roles work in the SOP's order, each
publishing one document of a kind to the shared message pool (the sample's transcript). Every
role reads the customer's requirement (the task) and, from the pool, only the latest document of
each kind it subscribes to (:data:`SUBSCRIPTIONS`; who publishes each kind: :data:`PUBLISHERS`):

1. Product manager: the PRD (JSON, :class:`PRD`): product goals, user stories, requirement
   analysis, the requirement pool (each requirement with a priority, P0 / P1 / P2) and anything
   unclear.
2. Architect, subscribed to the PRD: the system design (JSON, :class:`SystemDesign`):
   implementation approach, file list, data structures and interfaces, program call flow,
   anything unclear.
3. Project manager, subscribed to the design: the task list (JSON, :class:`TaskList`): required
   packages, logic analysis, the ordered tasks, shared knowledge, anything unclear.
4. Engineer, subscribed to the design and the task list: the code, in one ```python block.
5. QA engineer, subscribed to the code: up to T one-line ``assert`` unit tests, the expected
   values worked out from the requirement.
6. Executable feedback: the code runs in the sandbox (:func:`maslab.kit.code_tests.run_tests`)
   against the tests: the examples the requirement shows
   (:func:`maslab.kit.code_tests.public_tests`), then the QA engineer's. The QA engineer
   publishes the report (kind ``test_results``, no model call). While a test fails, at most k
   times, the engineer, subscribed to the report too, reads the design, the task list, the
   report and its own latest code, and writes the fixed code, which is tested again. The hidden
   tests that score the answer (``task.tests``) are never run by the method nor shown to a model.
7. The answer is the code that passed the most tests (ties: the later one), in a ```python
   block: the first code that passed them all when one did.

On a task whose answer is not code (``answer_type`` other than ``"code"``, e.g. gsm8k) steps 1-4
run as they are, except that the engineer works the task list through to the result the task
asks for instead of writing code; its reply is the answer. Nothing is executable, so the QA
engineer and the feedback loop do not run.

LLM calls: 5 + d on a code task, d ≤ k the debugging rounds (d = 0 when the first code passes;
k = 3: 5 to 8); 4 on any other task. Running the tests calls no model.

Budget stop: before the engineer's first reply, nothing (an empty answer); then that reply until
the first test run; from then on the code that passed the most tests so far (ties: the later).

Replies are read defensively. The three documents are asked for as JSON :class:`Reply` models
(:func:`maslab.kit.structured.ask`), natively where the model supports structured output (same
prompts, same calls). A document that is not the JSON asked for (or whose fields are all empty)
is published as written: its subscribers read its text; ``metadata["parsed"]`` says, per
document, whether it was read as JSON. A QA reply without a valid one-line assert adds no test
(only the requirement's examples run; with none at all, the code passes when it runs without
error). An engineer reply without code is tested as such (the report says no code was found),
is never the answer while any code exists, and the engineer's next prompt shows its latest code.

Deviations: the prompts, the role profiles and the documents' field wording are our own. The
documents keep the fields of the paper's SOP (Figure 3, Appendix B) and the official code's
templates that bear on the code; the competitive analysis, the quadrant chart, the UI draft and
the mermaid diagrams are left out (the call flow is prose), since a function-level task has no
market, screen or multi-file project. Every role reads the requirement itself (in MetaGPT later
roles get it through the PRD's "original requirements"): the code must keep the requirement's
exact names and signatures. Every call starts afresh: a role knows what its prompt shows, its
subscriptions (MetaGPT's roles keep a memory of the messages they observed). The answer is one
code block; the design's file list is advisory. The paper's engineer writes and runs its own
tests and debugs up to 3 retries (k = 3, our default); the official code has a QA engineer write
and run the tests and debug the failures for up to 5 rounds (``test_round_allowed``).
Here the QA engineer writes the tests once, the requirement's examples join them, and the
engineer debugs; the cap T = 5 on the QA engineer's tests is ours. The official code's optional
code review and its per-file code summaries are not performed. The paper keeps the last code;
ours is the code that passed the most tests. Code runs in :mod:`maslab.sandbox`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field

from maslab.core.answers import extract_answer
from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.code_tests import parse_tests, public_tests, run_tests
from maslab.kit.parsing import Text, as_text
from maslab.kit.structured import Reply, ask

PRODUCT_MANAGER, ARCHITECT, PROJECT_MANAGER = "product_manager", "architect", "project_manager"
ENGINEER, QA_ENGINEER = "engineer", "qa_engineer"
ROLES = (PRODUCT_MANAGER, ARCHITECT, PROJECT_MANAGER, ENGINEER, QA_ENGINEER)

PRD_KIND, DESIGN, TASKS, CODE, TESTS, TEST_RESULTS = (
    "prd",
    "design",
    "tasks",
    "code",
    "tests",
    "test_results",
)

PUBLISHERS: dict[str, str] = {
    PRD_KIND: PRODUCT_MANAGER,
    DESIGN: ARCHITECT,
    TASKS: PROJECT_MANAGER,
    CODE: ENGINEER,
    TESTS: QA_ENGINEER,
    TEST_RESULTS: QA_ENGINEER,
}
"""Who publishes each kind of document to the message pool."""

SUBSCRIPTIONS: dict[str, tuple[str, ...]] = {
    PRODUCT_MANAGER: (),
    ARCHITECT: (PRD_KIND,),
    PROJECT_MANAGER: (DESIGN,),
    ENGINEER: (DESIGN, TASKS, TEST_RESULTS),
    QA_ENGINEER: (CODE,),
}
"""The kinds of document each role reads from the pool, in the order its prompt shows them
(besides the requirement, which every role reads)."""

TITLES: dict[str, str] = {
    PRD_KIND: "Product requirement document (from the product manager)",
    DESIGN: "System design (from the architect)",
    TASKS: "Task list (from the project manager)",
    CODE: "Code (from the engineer)",
    TESTS: "Unit tests (from the QA engineer)",
    TEST_RESULTS: "Test results (the code run against the unit tests)",
}

PROFILES: dict[str, str] = {
    PRODUCT_MANAGER: (
        "You are the product manager of a software company. You turn a customer's requirement "
        "into a precise product requirement document: what must be built and what matters most."
    ),
    ARCHITECT: (
        "You are the architect of a software company. You turn a product requirement document "
        "into a concise, complete Python design with exact interfaces."
    ),
    PROJECT_MANAGER: (
        "You are the project manager of a software company. You break a system design down into "
        "ordered tasks an engineer can carry out one by one."
    ),
    ENGINEER: (
        "You are an engineer at a software company. You write correct, complete and readable "
        "Python code that follows the design and the task list exactly."
    ),
    QA_ENGINEER: (
        "You are the QA engineer of a software company. You write unit tests that check code "
        "against the customer's requirement, edge cases included."
    ),
}


# --- the documents -------------------------------------------------------------------------------


def _texts(value: object) -> list[str]:
    """A list of texts: a list's non-empty items as text, a lone string as a list of one."""
    if isinstance(value, str):
        value = [value]
    return [text for text in map(as_text, value) if text] if isinstance(value, list) else []


def _pool_items(value: object) -> list[object]:
    """The requirement pool's entries: objects as they are, a bare string as a requirement."""
    items = value if isinstance(value, list) else []
    return [
        {"requirement": v} if isinstance(v, str) else v for v in items if isinstance(v, dict | str)
    ]


Goals = Annotated[
    list[Annotated[str, Field(description="one product goal")]], BeforeValidator(_texts)
]
Stories = Annotated[
    list[Annotated[str, Field(description="one user story: as a ..., I want ..., so that ...")]],
    BeforeValidator(_texts),
]
Files = Annotated[
    list[Annotated[str, Field(description="a file name (a single-function task needs one)")]],
    BeforeValidator(_texts),
]
Packages = Annotated[
    list[Annotated[str, Field(description="a package the code needs beyond the standard library")]],
    BeforeValidator(_texts),
]
Logic = Annotated[
    list[Annotated[str, Field(description="a file or function, the logic it must implement")]],
    BeforeValidator(_texts),
]
Steps = Annotated[
    list[Annotated[str, Field(description="one task for the engineer, in the order to do them")]],
    BeforeValidator(_texts),
]


class PoolItem(BaseModel):
    """One requirement of the PRD's requirement pool."""

    requirement: Text = Field("", description="one requirement")
    priority: Text = Field("", description="P0 (must have), P1 (should have) or P2 (nice to have)")


class Document(Reply):
    """A structured document a role publishes: read as JSON, shown to subscribers as text."""

    def render(self) -> str:
        """The document as its subscribers read it: one section per field, empty ones left out."""
        sections = []
        for name, value in self.model_dump().items():
            if isinstance(value, list):
                lines = [f"- {_item_text(item)}" for item in value if _item_text(item)]
                text = "\n".join(lines)
            else:
                text = str(value).strip()
            if text:
                sections.append(f"### {name.replace('_', ' ').capitalize()}\n{text}")
        return "\n\n".join(sections)


def _item_text(item: object) -> str:
    if isinstance(item, dict):
        requirement, priority = as_text(item.get("requirement")), as_text(item.get("priority"))
        return f"[{priority}] {requirement}" if priority and requirement else requirement
    return as_text(item)


class PRD(Document):
    """The product manager's product requirement document."""

    json_name = "prd"

    product_goals: Goals = Field(default_factory=list)
    user_stories: Stories = Field(default_factory=list)
    requirement_analysis: Text = Field(
        "", description="what the requirement asks for exactly: inputs, outputs, rules, edge cases"
    )
    requirement_pool: Annotated[list[PoolItem], BeforeValidator(_pool_items)] = Field(
        default_factory=list
    )
    anything_unclear: Text = Field("", description="what is ambiguous, and how you read it")


class SystemDesign(Document):
    """The architect's system design."""

    json_name = "system_design"

    implementation_approach: Text = Field(
        "", description="how to meet the requirement: the approach, algorithms, libraries"
    )
    file_list: Files = Field(default_factory=list)
    data_structures_and_interfaces: Text = Field(
        "", description="every function and class, with its exact signature, types and purpose"
    )
    program_call_flow: Text = Field(
        "", description="which function calls which, in order, and the data passed"
    )
    anything_unclear: Text = Field("", description="what is ambiguous, and how you read it")


class TaskList(Document):
    """The project manager's task list."""

    json_name = "task_list"

    required_packages: Packages = Field(default_factory=list)
    logic_analysis: Logic = Field(default_factory=list)
    task_list: Steps = Field(default_factory=list)
    shared_knowledge: Text = Field(
        "", description="facts, helpers and conventions every task relies on"
    )
    anything_unclear: Text = Field("", description="what is ambiguous, and how you read it")


DOCUMENTS: dict[str, type[Document]] = {PRD_KIND: PRD, DESIGN: SystemDesign, TASKS: TaskList}


def read_document(kind: str, text: str) -> tuple[str, bool]:
    """A published document as its subscribers read it, and whether it was read as JSON: the
    rendered fields, or the reply as written when it is no such JSON (or all its fields are
    empty)."""
    document = DOCUMENTS[kind].parse(text)
    rendered = document.render() if document is not None else ""
    return (rendered, True) if rendered else (text.strip() or "(empty)", False)


def show_code(code: str | None) -> str:
    return f"```python\n{code.strip()}\n```" if code is not None else "(no code was written)"


# --- the message pool ----------------------------------------------------------------------------


def subscribed(ctx: Context, role: str) -> list[Message]:
    """What ``role`` reads from the pool: the latest message of each kind it subscribes to, from
    that kind's publisher, in subscription order (kinds not published yet are left out)."""
    found = [ctx.transcript.last(PUBLISHERS[kind], kind=kind) for kind in SUBSCRIPTIONS[role]]
    return [message for message in found if message is not None]


def pool_text(ctx: Context, task: Task, role: str) -> str:
    """The subscribed documents of ``role`` as one text, each under its title."""
    parts = []
    for message in subscribed(ctx, role):
        if message.kind in DOCUMENTS:
            body = read_document(message.kind, message.content)[0]
        elif message.kind == CODE:
            body = show_code(extract_answer(message.content, "code", entry_point=task.entry_point))
        else:
            body = message.content.strip()
        parts.append(f"## {TITLES[message.kind]}\n\n{body}")
    return "\n\n".join(parts)


def _requirement(task: Task) -> str:
    return f"## The customer's requirement\n\n{task.prompt()}"


# --- prompts -------------------------------------------------------------------------------------


def prd_prompt(task: Task) -> str:
    return (
        f"{_requirement(task)}\n\n"
        "Write the product requirement document for this requirement: the product goals (at "
        "most three), the user stories, an exact analysis of the requirement, the requirement "
        "pool with a priority for each requirement, and anything unclear. Keep every name, "
        "signature and input or output format the requirement gives."
    )


def design_prompt(task: Task, pool: str) -> str:
    return (
        f"{_requirement(task)}\n\n{pool}\n\n"
        "Write the system design that meets this PRD in Python: the implementation approach, "
        "the file list, the data structures and interfaces (every function and class with its "
        "exact signature; keep the ones the requirement names), the program call flow, and "
        "anything unclear. Keep it as simple as the requirement allows."
    )


def tasks_prompt(task: Task, pool: str) -> str:
    return (
        f"{_requirement(task)}\n\n{pool}\n\n"
        "Break this design down for the engineer: the packages required beyond the standard "
        "library, the logic analysis of each file or function, the ordered task list, the "
        "knowledge shared by all tasks, and anything unclear."
    )


def engineer_prompt(task: Task, pool: str, code: str | None, *, fixing: bool) -> str:
    """The engineer's turn: write the code, or (``fixing``) fix its latest code from the test
    report in its pool; on a task whose answer is not code, work the task list through."""
    if task.answer_type != "code":
        return (
            f"{_requirement(task)}\n\n{pool}\n\n"
            "Carry out the task list to meet the requirement. There is no program to write: work "
            "the solution through step by step and give the result in the form the requirement "
            "asks for."
        )
    if not fixing:
        return (
            f"{_requirement(task)}\n\n{pool}\n\n"
            "Write the code: carry out the task list, follow the design's interfaces, and keep "
            "exactly the names and signatures the requirement gives. Write complete code with "
            "the imports it needs: no placeholders, no tests, no input() reads, nothing that "
            "runs on import. Give the whole code in one ```python block."
        )
    return (
        f"{_requirement(task)}\n\n{pool}\n\n## Your latest code\n\n{show_code(code)}\n\n"
        "Some tests failed. They are the examples the requirement shows and the QA engineer's "
        "unit tests; where a test contradicts the requirement, the requirement is right. Find "
        "why each failing test fails and fix the code. Give the whole fixed code in one "
        "```python block."
    )


def qa_prompt(task: Task, pool: str, count: int) -> str:
    return (
        f"{_requirement(task)}\n\n{pool}\n\n"
        f"Write up to {count} unit tests of this code: the normal cases and the edge cases. "
        "Work each expected value out from the requirement, not from what the code does. Each "
        "test is one line, `assert <call> == <expected value>`, calling the functions with the "
        "exact names and signatures the requirement gives. Put the tests in one ```python "
        "block, one per line, and nothing else in it."
    )


# --- the method ----------------------------------------------------------------------------------


@register_method("metagpt")
class MetaGPT(Method):
    """PRD, design, task list, code and unit tests, role by role; the code debugged on the tests."""

    roles = ROLES
    paper = "Hong et al., arXiv 2308.00352 (MetaGPT)"
    category = "SOP software-company pipeline (PRD, design, tasks, code, QA tests; message pool)"
    calls = (
        "5 + d on code tasks, d ≤ k debugging rounds after failing tests (k = 3: 5–8); "
        "4 on other tasks (no QA, no tests)"
    )

    class Config(MethodConfig):
        max_retries: int = Field(
            3,
            ge=0,
            description="k: debugging rounds at most, each after a failing test run (the "
            "paper's 'maximum of 3 retries')",
        )
        max_tests: int = Field(
            5,
            ge=1,
            description="T: unit tests the QA engineer may write (ours); the requirement's own "
            "examples run on top",
        )

    config: Config

    def structure(self) -> Topology:
        """An edge from the publisher of each kind of document to each role subscribed to it."""
        edges = [(PUBLISHERS[kind], role) for role in ROLES for kind in SUBSCRIPTIONS[role]]
        return Topology.from_edges(edges, name="metagpt", nodes=ROLES)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = self.structure()
        agents = {role: ctx.agent(role, system=PROFILES[role]) for role in ROLES}
        parsed: dict[str, bool] = {}

        async def publish(role: str, kind: str, prompt: str, r: int) -> None:
            said, _ = await ask(agents[role], prompt, DOCUMENTS[kind], round=r, kind=kind)
            parsed[kind] = read_document(kind, said.content)[1]

        await publish(PRODUCT_MANAGER, PRD_KIND, prd_prompt(task), 0)
        await publish(ARCHITECT, DESIGN, design_prompt(task, pool_text(ctx, task, ARCHITECT)), 1)
        prompt = tasks_prompt(task, pool_text(ctx, task, PROJECT_MANAGER))
        await publish(PROJECT_MANAGER, TASKS, prompt, 2)

        engineer = agents[ENGINEER]
        prompt = engineer_prompt(task, pool_text(ctx, task, ENGINEER), None, fixing=False)
        said = await engineer.reply(prompt, round=3, kind=CODE, remember=False)
        if task.answer_type != "code":
            return Solution(answer=said.content, metadata={"parsed": parsed})
        state = _Code(ctx, task)
        state.write(said.content, round=3)

        written = await agents[QA_ENGINEER].reply(
            qa_prompt(task, pool_text(ctx, task, QA_ENGINEER), cfg.max_tests),
            round=4,
            kind=TESTS,
            remember=False,
        )
        shown, own = public_tests(task), parse_tests(written.content, cfg.max_tests)
        tests = list(dict.fromkeys(shown + own))

        r, retries = 5, 0
        while True:
            run = await run_tests(task, said.content, tests)
            ctx.post(QA_ENGINEER, run.feedback, round=r, kind=TEST_RESULTS)
            state.tested(run.counts, round=r)
            if run.passed or retries == cfg.max_retries:
                break
            retries, r = retries + 1, r + 1
            pool = pool_text(ctx, task, ENGINEER)
            prompt = engineer_prompt(task, pool, state.code, fixing=True)
            said = await engineer.reply(prompt, round=r, kind=CODE, remember=False)
            state.write(said.content, round=r)
            r += 1

        return Solution(
            answer=state.answer,
            metadata={
                "parsed": parsed,
                "public_tests": shown,
                "qa_tests": own,
                "test_results": state.results,
                "retries": retries,
                "passed": run.passed,
                "replies_without_code": state.missing,
            },
        )


class _Code:
    """The engineer's code: the latest written, and the one that passed the most tests."""

    def __init__(self, ctx: Context, task: Task) -> None:
        self.ctx, self.task = ctx, task
        self.code: str | None = None  # the latest code written
        self.fresh = False  # whether the latest reply held code
        self.last_reply = ""
        self.best: str | None = None
        self.best_passed = -1
        self.results: list[tuple[int, int]] = []
        self.missing = 0

    @property
    def answer(self) -> str:
        """The code that passed the most tests; before any test run, the latest code; with no
        code ever written, the engineer's last reply."""
        if self.best is not None:
            return show_code(self.best)
        return show_code(self.code) if self.code is not None else self.last_reply

    def write(self, reply: str, *, round: int) -> None:
        """Take the engineer's reply; before the first test run, it is the answer so far."""
        self.last_reply = reply
        code = extract_answer(reply, "code", entry_point=self.task.entry_point)
        self.fresh = code is not None
        if code is None:
            self.missing += 1
        else:
            self.code = code
        if not self.results:
            self.ctx.propose(self.answer, round=round)

    def tested(self, counts: tuple[int, int], *, round: int) -> None:
        """Record a test run of the latest reply (tests passed, tests run); its code, if it has
        one, becomes the answer when it passed at least as many tests as the best so far."""
        self.results.append(counts)
        passed = counts[0]
        if self.fresh and passed >= self.best_passed:
            self.best, self.best_passed = self.code, passed
            self.ctx.propose(self.answer, round=round, tests_passed=passed)
