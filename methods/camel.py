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
   suffix dropped), not the transcript (unless ``answer="transcript"``); the evaluator reads
   the answer from it.

Critic default: MASLab's config says ``with_critic: True, option_num: 1``, and with one option
MASLab still calls the critic once per turn on the user's single "option" (and then reuses that
choice for the assistant's options); a choice among one option changes nothing. We keep
MASLab's settings (``with_critic=True, options=1``) but, as the official ``RolePlaying`` does,
consult the critic only when there are at least two options, so by default the dialogue is
exactly MASLab's without its no-op critic calls. ``options=2`` or more makes the critic real.

Options for MASLab's protocol (each off by default): ``critic_each_turn`` (with ``with_critic``)
consults the critic on the user's message every turn even when it is the only option, and then
shows it, with the user's next options, the assistant's reply it was not asked about (with
k > 1 the critic judges both sides anyway); ``reply_to_done`` lets the assistant reply to the
done token, at any turn, and ends the dialogue after that reply (CAMEL's and MASLab's loop);
``keep_question=False`` shows the three agents the specified task only, not the original
question (CAMEL's and MASLab's; without the specifier they see the question); ``answer=
"transcript"`` makes the answer the whole dialogue instead of the last solution: the question,
the specified task, then every message of the user, the critic and the assistant in the order
said, each under its speaker's role (with k > 1 a side's entry lists its options, and the
critic's choice follows). Our layout of it.

LLM calls, with s = 1 if ``specify_task`` else 0, and per turn u calls for the user's side and a
for the assistant's: u = a = k, plus 1 for the critic on a side it is consulted about (both
sides when ``with_critic`` and k > 1; the user's side also with ``critic_each_turn``):

* the user says the done token at turn t (2 ≤ t ≤ T, any t with ``reply_to_done``):
  s + t·u + (t − 1)·a, plus a with ``reply_to_done``;
* otherwise (turn limit): s + T·(u + a).

Defaults (s = 1, k = 1, no critic call, T = 3): u = a = 1, 4–7 calls. With k = 2 and the
critic: 10–19. ``preset=maslab`` (u = 2, a = 1, ``reply_to_done``): 1 + 3t, at most 10.

Budget stop: the assistant's latest solution (proposed after each one); with
``answer="transcript"``, the dialogue up to its latest message.

Deviations: every prompt is our own wording of the inception prompts. By default the original
question stays in the system prompts next to the specified task (CAMEL and MASLab replace it by
the specified task, which may drop a number or the required answer format:
``keep_question=False``); the specifier is told to keep every fact and not to solve. The user
is told how many instructions it may give and, on its last turn, a note appended to its
incoming message asks for the complete final answer; the assistant is asked to state the
task's answer in the required form whenever a solution settles it; both so the last solution
holds an answer the evaluator can read. By default the done token ends the dialogue before the
assistant speaks (CAMEL and MASLab let the assistant reply to it with a pleasantry, which would
become the last solution: ``reply_to_done``), and a done token in the user's first message,
before any solution exists, does not end the dialogue (``metadata["early_done"]``). The k
options are k separate calls (MASLab samples them in one request with the API's ``n``, one
call: with k > 1 our count is higher). A critic reply with no usable option number falls back
to option 1 (``metadata["choices"]`` records each choice and whether it parsed); an empty last
solution falls back to the latest non-empty one (``metadata["answer_turn"]``). Model errors
propagate (MASLab's ``call_llm`` swallows them and returns None). The paper's other stops (role
flipping, token limits, a ~40-message cap) are replaced by the turn limit.

MASLab's protocol (``preset=maslab``, on the command line ``--config preset=maslab``; MASLab's
``methods/camel`` at commit 74265c7): from ``configs/config_main.yaml``, ``turn_limit=3``
(``chat_turn_limit``), ``assistant_role="Postdoc"``, ``user_role="PhD Student"``,
``critic_role="Professor"``, ``with_critic=True`` and ``options=1`` (``option_num``); from
``prompt_main.py``, ``specify_task=True`` and ``word_limit=50`` (``inference`` always calls the
specifier, ``SystemPromptGenerator.generate``'s ``word_limit=50``); from ``camel_main.py``'s
``inference`` (the ``with_critic`` branch): ``critic_each_turn=True`` (one critic call per turn
on the user's proposals, whatever their number; the assistant's proposals join the critic's
history without a call), ``reply_to_done=True`` (``CAMEL_TASK_DONE`` is checked after the
assistant's reply), ``keep_question=False`` (the system prompts are built from the specified
task; the query appears only in the response's header) and ``answer="transcript"`` (the
response is the whole dialogue: the query, the specified task, then each user, critic and
assistant message). Calls: 1 + 3t, at most 1 + 3·3 = 10, as MASLab's. The preset sets only the
settings left at their defaults (``preset=maslab turn_limit=5`` keeps T = 5).

MASLab's bugs the preset does not copy, and how numbers may differ: (1) the critic is not asked
about the assistant's options, its choice among the user's is reused to pick one; with
``option_num`` 1 that is option 1 either way, so MASLab's runs are unaffected, but with k > 1
our critic chooses among the assistant's options in a call of its own. (2) ``find_option``
takes the first integer of the critic's reply: above k, or absent, it makes the sample fail
(IndexError, TypeError), even with one option (a reply like "Both of the 2 steps ...");
ours reads "Choice: N" and falls back to option 1 (recorded), so samples MASLab lost score
here. (3) CAMEL's ``call_llm`` swallows every API error and returns None (so tenacity never
retries): a failed specifier call becomes the task "None", a failed turn fails the sample; our
model errors go through the harness's retries. MASLab's accuracy (a) leaves failed samples out
of its denominator, so where they were frequent the two accuracies may differ. Our prompts
differ in wording and in what they steer to (the user is told its instruction budget and, on
its last turn, to ask for the final answer; the specifier to keep every fact, where MASLab's
asks for a creative, imaginative specification), and the transcript's layout is ours.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology

SPECIFIER, USER, ASSISTANT, CRITIC = "specifier", "user", "assistant", "critic"
DONE = "CAMEL_TASK_DONE"
PRESETS: dict[str, dict[str, Any]] = {
    "maslab": {
        "turn_limit": 3,
        "specify_task": True,
        "word_limit": 50,
        "assistant_role": "Postdoc",
        "user_role": "PhD Student",
        "critic_role": "Professor",
        "with_critic": True,
        "options": 1,
        "critic_each_turn": True,
        "reply_to_done": True,
        "keep_question": False,
        "answer": "transcript",
    },
}
"""Other implementations' protocols by name (see the module docstring for their sources)."""

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


def task_block(task: Task, specified: str | None, keep_question: bool = True) -> str:
    """The task as the agents' system prompts show it: the question and the specified task, or
    (``keep_question=False``) the specified task alone when there is one."""
    if specified and not keep_question:
        return f"The task:\n{specified}"
    block = f"The task:\n{task.prompt()}"
    if specified:
        block += f"\n\nThe task as the task specifier made it more specific:\n{specified}"
    return block


def assistant_system(task_text: str, user_role: str, assistant_role: str) -> str:
    return (
        f"You are a {assistant_role} and you work with a {user_role}, who instructs you. Keep "
        f"these roles throughout: never swap them and never instruct the {user_role} yourself."
        f"\n\n{task_text}\n\n"
        f"The {user_role} sends one instruction per message, written as 'Instruction: ...' "
        "followed by 'Input: ...'. Carry out exactly that instruction with a concrete, correct "
        "result and the reasoning it needs. If you cannot carry it out, say so honestly and "
        "explain why. Start every reply with 'Solution:' and finish it with 'Next request.'. "
        "Whenever a solution settles the answer to the whole task, state that answer in the "
        "form the task asks for, just before 'Next request.'."
    )


def user_system(task_text: str, user_role: str, assistant_role: str, turn_limit: int) -> str:
    return (
        f"You are a {user_role} and you direct a {assistant_role} so that the two of you "
        "complete a task. Keep these roles throughout: never swap them."
        f"\n\n{task_text}\n\n"
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


def critic_system(task_text: str, user_role: str, assistant_role: str, critic_role: str) -> str:
    return (
        f"You are a {critic_role} supervising a {user_role} and a {assistant_role} who work on a "
        f"task together.\n\n{task_text}\n\n"
        "Whenever one of them drafts several alternative messages, you pick the one that best "
        "moves the work toward a correct and complete result. Always pick exactly one. Start "
        "your reply with 'Choice: N', N being the option's number, then explain briefly why it "
        "is better than the others."
    )


def listed(options: list[str]) -> str:
    """Options numbered from 1, each under its ``Option N:`` line."""
    return "\n\n".join(f"Option {i}:\n{text.strip()}" for i, text in enumerate(options, 1))


def unasked_note(role: str, message: str) -> str:
    """What the critic is shown of a message it was not asked to choose (``critic_each_turn``)."""
    return f"The {role} replied, with no alternative to choose from:\n{message.strip()}\n\n"


def critic_prompt(speaker_role: str, options: list[str], before: str = "") -> str:
    return (
        f"{before}Alternative messages drafted by the {speaker_role}:\n\n{listed(options)}\n\n"
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


def transcript(dialogue: list[tuple[str, str]]) -> str:
    """The dialogue as one text (``answer="transcript"``): each entry under its speaker."""
    return "\n\n".join(f"{speaker}:\n{text.strip()}".rstrip() for speaker, text in dialogue)


@register_method("camel")
class Camel(Method):
    """AI user instructs, AI assistant solves, turn by turn; the last solution is the answer."""

    roles = (SPECIFIER, USER, ASSISTANT, CRITIC)
    paper = "Li et al., arXiv 2303.17760 (CAMEL)"
    category = "role-playing (AI user instructs, AI assistant solves; optional critic)"
    calls = (
        "s + t·(u + a) − a if the user says done at turn t (no − a with `reply_to_done`), else"
        " s + T·(u + a) (s = 1 with the specifier; u = a = k options, +1 critic call each when"
        " k > 1, u also with `critic_each_turn`); defaults T = 3, k = 1: 4–7; `preset=maslab`:"
        " 1 + 3t, ≤ 10"
    )

    class Config(MethodConfig):
        presets: ClassVar[Mapping[str, Mapping[str, Any]]] = PRESETS
        preset: Literal["maslab"] | None = Field(
            None,
            description="another protocol's values (PRESETS) for the settings left at their "
            "defaults: maslab",
        )
        turn_limit: int = Field(
            3, ge=1, description="T: the most user turns (MASLab's chat_turn_limit)"
        )
        specify_task: bool = Field(True, description="run the task specifier first")
        word_limit: int = Field(
            50, ge=1, description="the specified task's word limit (CAMEL's default)"
        )
        assistant_role: str = Field("Postdoc", min_length=1, description="the assistant's role")
        user_role: str = Field("PhD Student", min_length=1, description="the user's role")
        critic_role: str = Field("Professor", min_length=1, description="the critic's role")
        with_critic: bool = Field(
            True,
            description="let a critic choose among the options (consulted when options > 1, "
            "or on the user's side with critic_each_turn)",
        )
        options: int = Field(
            1,
            ge=1,
            description="k: alternative messages each side drafts per turn (MASLab's option_num)",
        )
        critic_each_turn: bool = Field(
            False,
            description="consult the critic on the user's message every turn, even a single "
            "option, showing it the assistant's reply it was not asked about (MASLab's)",
        )
        reply_to_done: bool = Field(
            False,
            description="the assistant replies to the done token before the dialogue ends "
            "(CAMEL's and MASLab's); false: it ends at once",
        )
        keep_question: bool = Field(
            True,
            description="show the original question beside the specified task; false: the "
            "specified task alone (CAMEL's and MASLab's)",
        )
        answer: Literal["solution", "transcript"] = Field(
            "solution",
            description="solution: the assistant's last solution; transcript: the whole "
            "dialogue (MASLab's)",
        )

        @model_validator(mode="after")
        def _options_need_a_critic(self) -> Camel.Config:
            if self.options > 1 and not self.with_critic:
                raise ValueError("options > 1 needs with_critic=True (someone must choose)")
            return self

    config: Config

    def _critic_sides(self) -> tuple[bool, bool]:
        """Whether the critic is consulted on the user's side and on the assistant's."""
        cfg = self.config
        both = cfg.with_critic and cfg.options > 1
        return both or (cfg.with_critic and cfg.critic_each_turn), both

    def structure(self) -> Topology:
        """The task specifier (if on) briefs both sides, the user and the assistant read each
        other, and the critic (when consulted) reads both."""
        cfg = self.config
        briefs = [(SPECIFIER, USER), (SPECIFIER, ASSISTANT)] if cfg.specify_task else []
        chooses = [(USER, CRITIC), (ASSISTANT, CRITIC)] if any(self._critic_sides()) else []
        return Topology.from_edges(
            [*briefs, (USER, ASSISTANT), (ASSISTANT, USER), *chooses], name="camel"
        )

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        k = cfg.options
        critic_on_user, critic_on_assistant = self._critic_sides()
        ctx.topology = self.structure()

        specified: str | None = None
        if cfg.specify_task:
            prompt = specifier_prompt(task, cfg.user_role, cfg.assistant_role, cfg.word_limit)
            specified = (await ctx.agent(SPECIFIER).reply(prompt, round=0)).content.strip()
        shown = task_block(task, specified or None, cfg.keep_question)
        roles = (cfg.user_role, cfg.assistant_role)
        user = ctx.agent(USER, system=user_system(shown, *roles, cfg.turn_limit))
        assistant = ctx.agent(ASSISTANT, system=assistant_system(shown, *roles))
        critic = (
            ctx.agent(CRITIC, system=critic_system(shown, *roles, cfg.critic_role))
            if critic_on_user
            else None
        )
        choices: list[dict[str, Any]] = []
        dialogue: list[tuple[str, str]] = [("Question", task.prompt())]
        if cfg.specify_task:
            dialogue.append(("Specified task", specified or ""))
        unasked = ""  # a message the critic has not been shown yet (critic_each_turn)

        def said(role: str, text: str) -> None:
            """Add a message to the dialogue; the transcript answer is proposed as it grows."""
            dialogue.append((role, text))
            if cfg.answer == "transcript":
                ctx.propose(transcript(dialogue))

        async def speak(agent: Agent, prompt: str, speaker_role: str, t: int) -> str:
            """One side's turn: k drafts and the critic's pick when it is consulted on this
            side, else one message; the message goes into the side's history."""
            nonlocal unasked
            if critic is None or not (critic_on_assistant or agent.name == USER):
                text = (await agent.reply(prompt, round=t)).content
                said(speaker_role, text)
                if critic is not None:
                    unasked = unasked_note(speaker_role, text)
                return text
            drafts = await asyncio.gather(
                *(agent.reply(prompt, round=t, kind="option", remember=False) for _ in range(k))
            )
            options = [m.content for m in drafts]
            said(speaker_role, options[0] if k == 1 else listed(options))
            ask, unasked = critic_prompt(speaker_role, options, unasked), ""
            verdict = await critic.reply(ask, round=t)
            said(cfg.critic_role, verdict.content)
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
            ends = DONE in instruction and (cfg.reply_to_done or bool(solutions))
            early_done = early_done or (DONE in instruction and not ends)
            if ends and not cfg.reply_to_done:
                done_turn = t
                break
            solution = await speak(assistant, instruction, cfg.assistant_role, t)
            solutions.append(solution)
            incoming = solution
            if cfg.answer == "solution" and clean_solution(solution):
                ctx.propose(clean_solution(solution), round=t)
            if ends:
                done_turn = t
                break

        answer_turn = next(
            (i for i in range(len(solutions), 0, -1) if clean_solution(solutions[i - 1])), None
        )
        if cfg.answer == "transcript":
            answer = transcript(dialogue)
        else:
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
