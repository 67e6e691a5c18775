"""What a method is given (:class:`Task`) and what it returns (:class:`Solution`)."""

from __future__ import annotations

import ast
import builtins
import string
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from maslab.core.answers import AnswerType, extract_answer

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class Task(BaseModel):
    """One benchmark item. ``gold`` is already normalised to what is scored."""

    model_config = ConfigDict(frozen=True)

    id: str
    question: str
    gold: str | None = None
    choices: tuple[str, ...] | None = None
    tests: tuple[str, ...] = ()
    answer_type: AnswerType = "text"
    instruction: str = ""
    tools: tuple[dict[str, Any], ...] = ()
    """Functions the task offers (``{"name", "description", "parameters"}``, parameters a JSON
    schema object). Without an :class:`~maslab.core.environment.Environment` they are only
    declared: the answer is the calls an agent makes (a function-calling benchmark)."""
    turns: tuple[str, ...] = ()
    """The user's further turns after ``question``: an episode of ``1 + len(turns)`` turns, each
    delivered when the method ends the one before (``""``: a turn with no new message)."""
    metadata: dict[str, Any] = Field(default_factory=dict)

    def prompt(self) -> str:
        """The question as every method shows it: text, lettered options, format instruction."""
        parts = [self.question.strip()]
        if self.choices:
            parts.append(
                "\n".join(
                    f"({letter}) {choice}"
                    for letter, choice in zip(string.ascii_uppercase, self.choices, strict=False)
                )
            )
        if self.instruction:
            parts.append(self.instruction.strip())
        return "\n\n".join(parts)

    def answer_in(self, text: str) -> str | None:
        """The answer ``text`` gives to this task, as its evaluator reads it
        (:func:`maslab.core.answers.extract_answer` with the task's type, options and entry
        point)."""
        return extract_answer(
            text, self.answer_type, choices=self.choices, entry_point=self.entry_point
        )

    @property
    def entry_point(self) -> str | None:
        """The function a code answer defines: ``metadata["entry_point"]`` (HumanEval), else the
        first function the tests call without defining it (MBPP's asserts); None for a task
        that is not code or names none."""
        if self.answer_type != "code":
            return None
        if named := self.metadata.get("entry_point"):
            return str(named)
        return _first_called(self.tests)


def _first_called(sources: tuple[str, ...]) -> str | None:
    """The first name called in ``sources`` that they do not define and is no builtin."""
    trees = []
    for source in sources:
        try:
            trees.append(ast.parse(source))
        except SyntaxError:
            continue
    nodes = [node for tree in trees for node in ast.walk(tree)]
    defined = {node.name for node in nodes if isinstance(node, _DEFINITIONS)}
    defined |= {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    for tree in trees:
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        for call in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
            name = call.func.id if isinstance(call.func, ast.Name) else None
            if name and name not in defined and not hasattr(builtins, name):
                return name
    return None


class Solution(BaseModel):
    """A method's final answer plus whatever it wants to keep (votes, topology, ...)."""

    answer: str
    metadata: dict[str, Any] = Field(default_factory=dict)
