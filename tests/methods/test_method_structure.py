"""Each method declares its structure once, and methods do not import each other.

``Method.structure()`` is the topology ``solve`` sets, readable without a call (the skills
compiler and the report read it); a method module imports the core, the kit and the benchmarks,
never another method (a method package's own modules excepted).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from helpers import TASK

from maslab.bench.benchmark import get_benchmark
from maslab.core.context import Budget, Context
from maslab.core.method import get_method, list_methods
from maslab.core.task import Task
from maslab.llm.scripted import ScriptedModel
from maslab.methods.skills_agent import structure_of

METHODS = Path(__file__).resolve().parents[2] / "methods"

DECLARED = {
    "agentverse", "autogen", "camel", "chatdev", "collab_pair", "conductor", "dag_pipeline",
    "evoagent", "exchange_of_thought", "free_discussion", "llm_debate", "macm", "mad", "mapcoder",
    "mars2_search", "mas_gpt", "mav", "metagpt", "mixture_of_agents", "plan_debate", "reflexion",
    "relay", "self_org_team", "self_refine", "step_verifier",
}  # fmt: skip
"""The methods whose topology, with the default config, is fixed before any call."""

VARIANTS: list[tuple[str, dict[str, Any]]] = [
    *((name, {}) for name in sorted(DECLARED)),
    ("camel", {"specify_task": False, "options": 2}),
    ("collab_pair", {"mode": "solo_full"}),
    ("conductor", {"tools": ["add"]}),
    ("dag_pipeline", {"topology": "spindle"}),
    ("dag_pipeline", {"nodes": {"x": "You are X.", "y": "You are Y."}, "edges": [("y", "x")]}),
    *(("exchange_of_thought", {"paradigm": p}) for p in ("report", "relay", "debate")),
    ("llm_debate", {"agents": 1}),
    ("mav", {"draw": 2}),
    ("plan_debate", {"planners": 3, "rounds": 0}),
    ("self_org_team", {"condition": "best_individual"}),
    ("skills_agent", {"routing": "flat"}),
]
CODE_ONLY = {"mapcoder", "mars2_search"}
MAZE = {"collab_pair", "relay"}


def task_for(name: str) -> Task:
    if name in MAZE:
        maze = get_benchmark("collab_maze")()
        return maze.to_task(maze.packaged_records("test")[0], 0, "test")
    if name in CODE_ONLY:
        return Task(id="c1", question="Write a function add(a, b).", answer_type="code")
    return TASK


def test_the_methods_that_declare_a_structure():
    declaring = {name for name in list_methods() if get_method(name)().structure() is not None}
    assert declaring == DECLARED


@pytest.mark.parametrize(("name", "config"), VARIANTS)
async def test_solve_sets_the_declared_structure(name: str, config: dict[str, Any]):
    method = get_method(name)(**config)
    ctx = Context(ScriptedModel(["unused"]), budget=Budget(max_calls=0))
    await method.run_sample(task_for(name), ctx)  # stops at the first call
    declared = method.structure()
    assert declared is not None and ctx.topology is not None
    assert ctx.topology.to_dict() == declared.to_dict()


async def test_mad_keeps_its_declared_structure_to_the_judge():
    method = get_method("mad")(max_rounds=1)
    model = ScriptedModel(default="The answer is 42.")  # no verdict parses: the judge decides
    ctx = Context(model)
    solution = await method.run_sample(TASK, ctx)
    assert len(model.calls) == 5 and solution.metadata["decided_by"] == "judge"
    assert ctx.topology is not None
    assert ctx.topology.to_dict() == method.structure().to_dict()


@pytest.mark.parametrize("name", ["llm_debate", "mad", "self_refine", "exchange_of_thought"])
def test_the_skills_compiler_reads_the_declared_structure(name: str):
    declared = get_method(name)().structure()
    assert declared is not None
    assert structure_of(name).topology.to_dict() == declared.to_dict()


def module_name(path: Path) -> list[str]:
    """The parts of the installed name of ``path``, a module under ``methods/``."""
    parts = ["maslab", "methods", *path.relative_to(METHODS).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported_modules(path: Path) -> list[str]:
    """The absolute names of what ``path`` imports (relative imports resolved)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name[:-1]
    imported = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            imported += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            imported += [f"{module}.{alias.name}" for alias in node.names]
    return imported


def method_of(parts: list[str]) -> str | None:
    """The method module or package that the module ``parts`` belongs to; None outside
    ``maslab.methods``, "" for the package itself."""
    if parts[:2] != ["maslab", "methods"]:
        return None
    return parts[2] if len(parts) > 2 else ""


def test_no_method_imports_another_method():
    crossing = []
    for path in sorted(METHODS.rglob("*.py")):
        own = method_of(module_name(path))
        for module in imported_modules(path):
            other = method_of(module.split("."))
            if other is not None and other != own:
                crossing.append(f"{path.relative_to(METHODS.parent)} imports {module}")
    assert crossing == []
