"""Solo Performance Prompting (SPP).

Wang, Mao, Wu, Ge, Wei, Ji. "Unleashing the Emergent Cognitive Synergy in Large Language Models:
A Task-Solving Agent through Multi-Persona Self-Collaboration". arXiv:2307.05300 (NAACL 2024).

Algorithm: one model, one call. The prompt describes the persona protocol and shows worked
demonstrations of it; the model then, in a single reply,

1. names the participants who would help with the task (``Participants: AI Assistant (you);
   ...``), always including itself as the AI Assistant;
2. simulates a multi-turn collaboration in which the personas propose, give critical comments
   and detailed suggestions, and the assistant revises, until they agree;
3. ends with a ``Final answer:`` section.

The answer is the final-answer section (from its ``Final answer:`` marker to the end of the
reply), so a number a persona suggested along the way is never scored. A reply without such a
section falls back to the whole reply, which the evaluator reads as it reads CoT's (last answer
marker, else a type-specific fallback); ``metadata["final_section"]`` says which happened. The
personas the model listed on its ``Participants:`` line are in ``metadata["personas"]`` (empty
when there is no such line).

LLM calls: 1.

Budget stop: no answer; the single call is the answer, so there is nothing to propose.

Deviations: the protocol wording and both demonstrations are our own (same structure as the
paper's: a two-persona arithmetic example with an AI Assistant and a math expert, and a
knowledge-heavy writing example with several domain personas); the paper uses task-specific
prompt files with the same two demonstrations. The final answer is asked to follow the task's
own answer-format instruction, so every benchmark's evaluator can read it. The paper's variants
(SPP-Profile, SPP-Fixed-Persona) and its two-call Codenames setting are not implemented.
``demonstrations`` (default 2, as in the paper) may drop demonstrations for ablations.
"""

from __future__ import annotations

import re

from pydantic import Field

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task

# A "Final answer:" heading at the start of a line (markdown bold or heading marks allowed).
_FINAL = re.compile(r"^[ \t>#*_]*final[ \t]+answer[ \t*_]*:", re.IGNORECASE | re.MULTILINE)
_BULLET = re.compile(r"[ \t]*(?:[-*•]|\d+[.)])[ \t]+")
_PARTICIPANTS = re.compile(r"^[ \t>#*_]*participants[ \t*_]*:(.*)$", re.IGNORECASE | re.MULTILINE)

DEMONSTRATIONS = (
    """Task: A stationery shop sells pencils at 3 for $1 and erasers at $0.75 each. How much do
18 pencils and 2 erasers cost together?

Participants: AI Assistant (you); Math Expert

Start collaboration!

Math Expert: Let's split the bill into the pencils and the erasers. Pencils come in groups of 3
for $1, so first count the groups.
AI Assistant (you): 18 / 3 = 6 groups, so the pencils cost $6. Adding an eraser at $0.75 gives
$6.75.
Math Expert: The pencils are right, but the task asks for 2 erasers, not one: 2 * 0.75 = $1.50.
Please redo the total.
AI Assistant (you): You're right. $6 + $1.50 = $7.50.
Math Expert: Both parts check out now: 6 groups of pencils and two erasers. I agree with $7.50.

Final answer: The total is $7.50.""",
    """Task: Write two sentences about a lighthouse keeper's morning that mention (1) the
chemical element with symbol Fe and (2) the planet closest to the Sun.

Participants: AI Assistant (you); Chemist; Astronomer; Fiction Editor

Start collaboration!

AI Assistant (you): I need two facts before writing. Could the experts confirm them?
Chemist: Fe is the symbol of iron, from the Latin "ferrum".
Astronomer: The planet closest to the Sun is Mercury. It is often visible low on the horizon
just before sunrise, which suits a morning scene.
AI Assistant (you): Draft: "The keeper climbed the iron stairs at dawn. Mercury was in the sky."
Fiction Editor: Both facts are there, but the sentences read like a list. Connect them to the
keeper's routine and give the scene some atmosphere.
AI Assistant (you): Revised: "At dawn the keeper climbed the cold iron stairs to put out the
lamp, salt crusted on every rail. Low over the eastern sea, Mercury glimmered for a few minutes
before the sunrise swallowed it."
Chemist: Iron is used correctly.
Astronomer: Mercury near the eastern horizon before sunrise is accurate.
Fiction Editor: Much better; I have nothing more to add.

Final answer: At dawn the keeper climbed the cold iron stairs to put out the lamp, salt crusted
on every rail. Low over the eastern sea, Mercury glimmered for a few minutes before the sunrise
swallowed it.""",
)


def protocol(demonstrations: int) -> str:
    """The persona protocol and the first ``demonstrations`` worked examples of it."""
    text = (
        "You solve tasks by simulating a team. First decide which participants would help: "
        "yourself as the AI Assistant plus experts or other personas whose knowledge or point "
        "of view the task needs, and list them on one line starting with 'Participants:', "
        "separated by semicolons. Then write the team's discussion, one turn per line as "
        "'Name: ...', over as many rounds as needed: participants propose ideas, check each "
        "other's work, and give critical comments and detailed suggestions, and the AI "
        "Assistant revises until everyone agrees. Finally, on a new line, write 'Final answer:' "
        "followed by the team's answer."
    )
    if demonstrations:
        shown = "\n\n---\n\n".join(
            f"Example {i}\n\n{demo}"
            for i, demo in enumerate(DEMONSTRATIONS[:demonstrations], start=1)
        )
        text += f"\n\nHere is how it looks:\n\n---\n\n{shown}\n\n---"
    return text


def spp_prompt(task: Task, demonstrations: int = 2) -> str:
    """The whole single-call prompt: protocol, demonstrations, then the task."""
    return (
        f"{protocol(demonstrations)}\n\n"
        "Now identify the participants and solve the following task together, step by step. "
        "In the final answer, follow the task's instructions on how to state the answer.\n\n"
        f"Task: {task.prompt()}"
    )


def final_section(reply: str) -> str | None:
    """The reply from its last line-initial 'Final answer:' to the end, or None if it has none."""
    matches = list(_FINAL.finditer(reply))
    if not matches:
        return None
    section = reply[matches[-1].start() :].strip(" \t\r\n>#")
    # Markdown emphasis around the marker stays out: "**Final answer:** 42" -> "Final answer: 42".
    return re.sub(r"^[*_]*(final[ \t]+answer)[ \t*_]*:[*_]*", r"\1:", section, flags=re.IGNORECASE)


def personas(reply: str) -> list[str]:
    """The participants listed after the reply's first 'Participants:' (empty if none): on its
    line, separated by semicolons (or commas), or as a bulleted list on the lines below."""
    match = _PARTICIPANTS.search(reply)
    if match is None:
        return []
    line = match.group(1).strip(" \t*_")
    if line:
        parts = line.split(";") if ";" in line else line.split(",")
    else:
        parts = []
        for below in reply[match.end() :].lstrip("\r\n").splitlines():
            if not (bullet := _BULLET.match(below)):
                break
            parts.append(below[bullet.end() :])
    return [name for part in parts if (name := part.strip(" \t*_.`"))]


@register_method("spp")
class SPP(Method):
    """One model simulates several personas that brainstorm, critique and revise (1 call)."""

    roles = ("solver",)
    paper = "Wang et al., arXiv 2307.05300 (Solo Performance Prompting)"
    category = "single-agent multi-persona self-collaboration"
    calls = "1 (all personas in one reply)"

    class Config(MethodConfig):
        demonstrations: int = Field(2, ge=0, le=len(DEMONSTRATIONS))

    config: Config

    async def solve(self, task: Task, ctx: Context) -> Solution:
        prompt = spp_prompt(task, self.config.demonstrations)
        reply = (await ctx.agent("solver").reply(prompt, round=0)).content
        section = final_section(reply)
        return Solution(
            answer=reply if section is None else section,
            metadata={"personas": personas(reply), "final_section": section is not None},
        )
