"""CAMEL: role-playing between an AI user and an AI assistant (optional critic in the loop).

Li, Hammoud, Itani, Khizbullin, Ghanem. "CAMEL: Communicative Agents for 'Mind' Exploration of
Large Language Model Society". arXiv:2303.17760 (NeurIPS 2023). Code: github.com/camel-ai/camel
(``RolePlaying``); MASLab ``methods/camel/``.

Algorithm (T = ``turn_limit``, k = ``options``):

1. Task specifier (``specify_task``, on by default): one call turns the question into a more
   specific task description of at most ``word_limit`` words.
2. Inception: the AI user (``user_role``, a PhD student) and the AI assistant
   (``assistant_role``, a postdoc) each get a system prompt of their own with the task: the user
   gives one instruction per message ("Instruction: ... / Input: ..."), never solves; the
   assistant carries out that one instruction ("Solution: ... Next request."), never instructs.
   Each keeps its own history: the user sees the assistant's solutions as its incoming turns,
   the assistant sees the user's instructions as its incoming turns. Nobody else is seen.
3. Turn t = 1..T: the user speaks; if its message holds the done token ``CAMEL_TASK_DONE`` the
   dialogue ends; otherwise the assistant answers the instruction.
4. Critic in the loop (``with_critic``, ``options`` k > 1): a side drafts k alternative messages
   (k calls on the same history, run concurrently, listed in call order) and the critic
   (``critic_role``, a professor; it keeps its own history of proposals and choices) picks one
   ("Choice: N"); only the chosen message enters both histories. The critic judges the user's
   options and the assistant's options alike, as in CAMEL's ``RolePlaying``.
5. The answer is the assistant's LAST solution (its "Solution:" prefix and "Next request."
   suffix dropped), not the transcript; the evaluator reads the answer from it.

Critic default: MASLab's config says ``with_critic: True, option_num: 1``, and with one option
MASLab still calls the critic once per turn on the user's single "option" (and then reuses that
choice for the assistant's options); a choice among one option changes nothing. We keep
MASLab's settings (``with_critic=True, options=1``) but, as the official ``RolePlaying`` does,
consult the critic only when there are at least two options, so by default the dialogue is
exactly MASLab's without its no-op critic calls. ``options=2`` or more makes the critic real.

LLM calls, with s = 1 if ``specify_task`` else 0 and m = k + c per speaker turn (c = 1 when the
critic is consulted, i.e. ``with_critic`` and k > 1; else 0):

* the user says the done token at turn t (2 ≤ t ≤ T): s + (2t − 1)·m;
* otherwise (turn limit): s + 2T·m.

Bounds: s + 3m ≤ calls ≤ s + 2T·m for T ≥ 2 (s + 2m for T = 1). Defaults (s = 1, k = 1, c = 0,
T = 3): 4–7 calls. With k = 2 and the critic: 10–19.

Budget stop: the assistant's latest solution (proposed after each one).

Deviations: every prompt is our own wording of the inception prompts. The original question
stays in both system prompts next to the specified task (CAMEL and MASLab replace it by the
specified task, which may drop a number or the required answer format); the specifier is told
to keep every fact and not to solve. The user is told how many instructions it may give and,
on its last turn, a note appended to its incoming message asks for the complete final answer;
the assistant is asked to state the task's answer in the required form whenever a solution
settles it; both so the last solution holds an answer the evaluator can read. The done token
ends the dialogue before the assistant speaks (CAMEL and MASLab let the assistant reply to it
with a pleasantry, which would become the last solution). A done token in the user's first
message, before any solution exists, does not end the dialogue (``metadata["early_done"]``).
The k options are k separate calls (MASLab's ``n`` sampling, made as separate calls there
too). A critic reply with no usable option number falls back to option 1
(``metadata["choices"]`` records each choice and whether it parsed); an empty last solution
falls back to the latest non-empty one (``metadata["answer_turn"]``). Model errors propagate
(MASLab's ``call_llm`` swallows them and returns None). The paper's other stops (role flipping,
token limits, a ~40-message cap) are replaced by the turn limit.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from pydantic import Field, model_validator

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology

SPECIFIER, USER, ASSISTANT, CRITIC = "specifier", "user", "assistant", "critic"
DONE = "CAMEL_TASK_DONE"

_SOLUTION_PREFIX = re.compile(r"\A[\s*_#>]*solution[\s*_]*:[\s*_]*", re.IGNORECASE)
_NEXT_REQUEST = re.compile(r"[\s*_]*next\s+request[\s.!*_]*\Z", re.IGNORECASE)
_CHOICE_PATTERNS = (
    re.compile(r"choice\W{0,4}(\d+)", re.IGNORECASE),
    re.compile(r"option\W{0,4}(\d+)", re.IGNORECASE),
    re.compile(r"(?<![\d.])(\d+)(?![\d.])"),
)


def specifier_prompt(task: Task, user_role: str, assistant_role: str, word_limit: int) -> str:
    return (
        f"A {user_role} and a {assistant_role} are about to work on the following task "
        f"together.\n\nTask:\n{task.prompt()}\n\n"
        f"Rewrite it as a more specific task description of at most {word_limit} words that "
        "says concretely what has to be worked out and what the result must be. Keep every "
        "fact, number and constraint exactly as given, do not change what is asked, and do not "
        "solve it. Reply with the specific task description only."
    )


def _task_block(task: Task, specified: str | None) -> str:
    block = f"The task:\n{task.prompt()}"
    if specified:
        block += f"\n\nThe task as the task specifier made it more specific:\n{specified}"
    return block


def assistant_system(task: Task, specified: str | None, user_role: str, assistant_role: str) -> str:
    return (
        f"You are a {assistant_role} and you work with a {user_role}, who instructs you. Keep "
        f"these roles throughout: never swap them and never instruct the {user_role} yourself."
        f"\n\n{_task_block(task, specified)}\n\n"
        f"The {user_role} sends one instruction per message, written as 'Instruction: ...' "
        "followed by 'Input: ...'. Carry out exactly that instruction with a concrete, correct "
        "result and the reasoning it needs. If you cannot carry it out, say so honestly and "
        "explain why. Start every reply with 'Solution:' and finish it with 'Next request.'. "
        "Whenever a solution settles the answer to the whole task, state that answer in the "
        "form the task asks for, just before 'Next request.'."
    )


def user_system(
    task: Task, specified: str | None, user_role: str, assistant_role: str, turn_limit: int
) -> str:
    return (
        f"You are a {user_role} and you direct a {assistant_role} so that the two of you "
        "complete a task. Keep these roles throughout: never swap them."
        f"\n\n{_task_block(task, specified)}\n\n"
        f"Lead the {assistant_role} through the task step by step, one instruction per message, "
        "written exactly as\nInstruction: <what to do>\nInput: <what it needs, or None>\n"
        "Only give instructions: do not ask questions and do not work on the task yourself. "
        f"You may give at most {turn_limit} instruction(s), so plan them; the last one should "
        "ask for the complete answer to the task in the form the task requires. Once the task "
        f"is fully complete, reply with the single word {DONE} and nothing else."
    )


def user_kickoff(assistant_role: str) -> str:
    return f"Send your first instruction to the {assistant_role} now."


def last_turn_note(assistant_role: str) -> str:
    return (
        f"(You have one instruction left: ask the {assistant_role} for the complete final "
        "answer to the task, in the form the task requires.)"
    )


def critic_system(
    task: Task, specified: str | None, user_role: str, assistant_role: str, critic_role: str
) -> str:
    return (
        f"You are a {critic_role} supervising a {user_role} and a {assistant_role} who work on a "
        f"task together.\n\n{_task_block(task, specified)}\n\n"
        "Whenever one of them drafts several alternative messages, you pick the one that best "
        "moves the work toward a correct and complete result. Always pick exactly one. Start "
        "your reply with 'Choice: N', N being the option's number, then explain briefly why it "
        "is better than the others."
    )


def critic_prompt(speaker_role: str, options: list[str]) -> str:
    shown = "\n\n".join(f"Option {i}:\n{text.strip()}" for i, text in enumerate(options, 1))
    return (
        f"Alternative messages drafted by the {speaker_role}:\n\n{shown}\n\n"
        f"Which one do you choose? Start with 'Choice: N' (N from 1 to {len(options)})."
    )


def parse_choice(text: str, count: int) -> int | None:
    """The option number (1-based) the critic chose, or None when it names no valid option."""
    for pattern in _CHOICE_PATTERNS:
        for match in pattern.finditer(text):
            if 1 <= (number := int(match.group(1))) <= count:
                return number
    return None


def clean_solution(text: str) -> str:
    """A solution without its 'Solution:' prefix and its 'Next request.' suffix."""
    return _NEXT_REQUEST.sub("", _SOLUTION_PREFIX.sub("", text.strip())).strip()


@register_method("camel")
class Camel(Method):
    """AI user instructs, AI assistant solves, turn by turn; the last solution is the answer."""

    roles = (SPECIFIER, USER, ASSISTANT, CRITIC)
    paper = "Li et al., arXiv 2303.17760 (CAMEL)"
    category = "role-playing (AI user instructs, AI assistant solves; optional critic)"
    calls = (
        "s + (2t−1)·m if the user says done at turn t, else s + 2T·m (s = 1 with the specifier,"
        " m = k options + 1 critic call when k > 1); defaults T = 3, k = 1: 4–7"
    )

    class Config(MethodConfig):
        turn_limit: int = Field(3, ge=1)
        """T: the most user turns (MASLab's ``chat_turn_limit``)."""
        specify_task: bool = True
        """Run the task specifier first."""
        word_limit: int = Field(50, ge=1)
        """The specified task's word limit (CAMEL's default)."""
        assistant_role: str = Field("Postdoc", min_length=1)
        user_role: str = Field("PhD Student", min_length=1)
        critic_role: str = Field("Professor", min_length=1)
        with_critic: bool = True
        """Let a critic choose among the options (only consulted when ``options`` > 1)."""
        options: int = Field(1, ge=1)
        """k: alternative messages each side drafts per turn (MASLab's ``option_num``)."""

        @model_validator(mode="after")
        def _options_need_a_critic(self) -> Camel.Config:
            if self.options > 1 and not self.with_critic:
                raise ValueError("options > 1 needs with_critic=True (someone must choose)")
            return self

    config: Config

    def structure(self) -> Topology:
        """The task specifier (if on) briefs both sides, the user and the assistant read each
        other, and the critic (with more than one option) reads both."""
        cfg = self.config
        briefs = [(SPECIFIER, USER), (SPECIFIER, ASSISTANT)] if cfg.specify_task else []
        chooses = (
            [(USER, CRITIC), (ASSISTANT, CRITIC)] if cfg.with_critic and cfg.options > 1 else []
        )
        return Topology.from_edges(
            [*briefs, (USER, ASSISTANT), (ASSISTANT, USER), *chooses], name="camel"
        )

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        k = cfg.options
        use_critic = cfg.with_critic and k > 1
        ctx.topology = self.structure()

        specified: str | None = None
        if cfg.specify_task:
            prompt = specifier_prompt(task, cfg.user_role, cfg.assistant_role, cfg.word_limit)
            specified = (await ctx.agent(SPECIFIER).reply(prompt, round=0)).content.strip()
        roles = (cfg.user_role, cfg.assistant_role)
        user = ctx.agent(USER, system=user_system(task, specified or None, *roles, cfg.turn_limit))
        assistant = ctx.agent(ASSISTANT, system=assistant_system(task, specified or None, *roles))
        critic = (
            ctx.agent(
                CRITIC, system=critic_system(task, specified or None, *roles, cfg.critic_role)
            )
            if use_critic
            else None
        )
        choices: list[dict[str, Any]] = []

        async def speak(agent: Agent, prompt: str, speaker_role: str, t: int) -> str:
            """One side's turn: k drafts, the critic's pick when k > 1; into the history."""
            if critic is None:
                return (await agent.reply(prompt, round=t)).content
            drafts = await asyncio.gather(
                *(agent.reply(prompt, round=t, kind="option", remember=False) for _ in range(k))
            )
            options = [m.content for m in drafts]
            verdict = await critic.reply(critic_prompt(speaker_role, options), round=t)
            number = parse_choice(verdict.content, k)
            choices.append(
                {"turn": t, "side": agent.name, "choice": number or 1, "parsed": bool(number)}
            )
            chosen = options[(number or 1) - 1]
            agent.history = [
                *agent.history,
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": chosen},
            ]
            return chosen

        solutions: list[str] = []
        incoming = user_kickoff(cfg.assistant_role)
        done_turn: int | None = None
        early_done = False
        for t in range(1, cfg.turn_limit + 1):
            if t == cfg.turn_limit:
                incoming = f"{incoming.rstrip()}\n\n{last_turn_note(cfg.assistant_role)}"
            instruction = await speak(user, incoming, cfg.user_role, t)
            if DONE in instruction:
                if solutions:
                    done_turn = t
                    break
                early_done = True
            solution = await speak(assistant, instruction, cfg.assistant_role, t)
            solutions.append(solution)
            incoming = solution
            if clean_solution(solution):
                ctx.propose(clean_solution(solution), round=t)

        answer_turn = next(
            (i for i in range(len(solutions), 0, -1) if clean_solution(solutions[i - 1])), None
        )
        answer = clean_solution(solutions[answer_turn - 1]) if answer_turn else ""
        return Solution(
            answer=answer,
            metadata={
                "specified_task": specified,
                "turns": len(solutions),
                "done_turn": done_turn,
                "early_done": early_done,
                "answer_turn": answer_turn,
                "choices": choices,
            },
        )
