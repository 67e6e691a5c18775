"""AutoGen: an LLM assistant and a user proxy that runs the assistant's code.

Wu, Bansal, Zhang, Wu, Li, Zhu, Jiang, Zhang, Zhang, Liu, Awadallah, White, Burger, Wang.
"AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation". arXiv:2308.08155
(COLM 2024). Code: github.com/microsoft/autogen (``AssistantAgent``, ``UserProxyAgent``).

Algorithm (the two-agent setup of the paper's math experiments; T = ``max_turn``; the default
``user_proxy="executor"``):

1. The assistant (an LLM, system prompt: solve with language and Python, one complete program
   per message, print results, fix errors, end with the termination word when done) receives
   the question.
2. Turn t = 1..T: the assistant replies, with its whole conversation so far as history. If the
   reply contains the termination word (``TERMINATE``), the conversation ends. Otherwise, unless
   this was turn T, the user proxy (not a model) answers: if the reply has code blocks, it runs
   the Python ones in :mod:`maslab.sandbox`, in order, stopping at the first that fails, and
   replies with each run's status, exit code, stdout and stderr (each cut to
   ``max_output_chars``); with no code block, it replies with a fixed nudge to continue or to
   answer and end with the termination word. Its reply is the assistant's next user turn.
3. The answer is the assistant's last message minus the termination word; if that holds no
   answer for the task's type (say, a bare "TERMINATE"), the latest assistant message that does.
   Unless the task asks for code, code blocks are left out of both the search and the answer
   (a number in a program is not an answer); if no message holds one, the last message stands.

LLM proxy (``user_proxy="llm"``, MASLab's; off by default): the assistant is told to solve in
words, without code (its system prompt: reason step by step, verify, end every message with the
current final answer, end with the termination word when done), and the user proxy is an LLM
agent with no system prompt whose conversation opens with the question as its own message (it
asked it): in step 2 it replies to each assistant message but the last; its reply, instead of a
run's report, is the assistant's next user turn, and if it contains the termination word the
conversation ends there (the answer is the assistant's message it replied to). Nothing runs. An
empty proxy reply is replaced by the nudge for the assistant (``metadata["proxy_fallbacks"]``).

LLM calls: the number of assistant turns, 1 ≤ calls ≤ T (default T = 3); the user proxy makes
none. Sandbox runs: at most the Python blocks of the first T - 1 assistant messages. With
``user_proxy="llm"`` the proxy's replies count too: 2t − 1 if the assistant says the
termination word at turn t, 2t if the proxy says it after turn t, else 2T − 1; so
1 ≤ calls ≤ 2T − 1 (``preset=maslab``: T = 3, at most 5, as MASLab's).

Budget stop: the latest assistant message that holds an answer (minus the termination word);
before any does, the latest message.

Transcript: the assistant's messages are ``assistant`` messages; each proxy reply is a
``user_proxy`` message (kind ``execution`` when code ran, whose metadata lists every block's
status and exit code; ``auto_reply`` for the nudge; ``message`` when the LLM proxy wrote it).

Deviations: prompts and the proxy's replies are our own wording (not AutoGen's system message
or its exit-code format). The turn cap defaults to MASLab's ``max_turn`` 3: the paper sets no
cap for its MATH runs, and the library only bounds the proxy's consecutive auto-replies (far
more than 3), so pass ``--config max_turn=N`` for a longer conversation. The termination test is
"contains the word" as in MASLab (the library's assistant example checks the end of the
message). Only Python runs: a block in another language (``sh``, ...) is reported as not run,
whereas AutoGen also runs shell code; an unlabelled block counts as Python. Code in the message
of turn T is never run (nobody would read its output). By default, unlike MASLab, the proxy is
not an LLM and code does run, as in the paper; it runs isolated in the sandbox rather than in
the host process. A sandbox failure (not the program's own) is reported to the assistant as
such and counted in ``metadata["sandbox_errors"]``.

MASLab's protocol (``preset=maslab``, on the command line ``--config preset=maslab``; MASLab's
``methods/autogen`` at commit 74265c7): ``user_proxy="llm"`` (``configs/config_main.yaml``,
``code_execute: False``: ``autogen_main.py`` then gives the assistant its language-only system
message and answers every assistant message with an LLM call whose system prompt is
``DEFAULT_USER_PROXY_AGENT_SYSTEM_MESSAGE``, the empty string, so no system turn is sent, and
whose history starts with the query as the proxy's own turn), ``max_turn=3`` (``max_turn: 3``:
one assistant call, then up to two proxy-assistant exchanges) and ``termination="TERMINATE"``
(``is_termination_msg``, tested as a substring of either agent's reply): at most 5 calls, as
MASLab's. The preset sets only the settings left at their defaults (``preset=maslab
max_turn=5`` keeps T = 5). Differences that remain: the prompts are ours; MASLab's response is
the assistant's last message verbatim (termination word included), ours the answer rule of step
3; MASLab would send no user turn after an empty proxy reply, ours sends the nudge. A chat
template that requires the first turn to be the user's cannot serve the LLM proxy (its history
opens with its own turn, as MASLab's does).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.sandbox import IsolationMissing, Limits, arun_python

ASSISTANT, USER_PROXY = "assistant", "user_proxy"

_CODE_BLOCK = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)\n?[ \t]*```", re.DOTALL)
_PYTHON = {"", "python", "python3", "py"}
PRESETS: dict[str, dict[str, Any]] = {
    "maslab": {"user_proxy": "llm", "max_turn": 3, "termination": "TERMINATE"},
}
"""Other implementations' protocols by name (see the module docstring for their sources)."""


def assistant_system(termination: str) -> str:
    return (
        "You solve tasks by reasoning and, where it helps, by writing Python code that your "
        "partner runs for you.\n"
        "- To have code run, first say in a sentence or two what it will do, then give it as "
        "one complete program in a single ```python block. Your partner cannot edit or finish "
        "code, so leave no placeholders, and print every value you need to see.\n"
        "- Your partner replies with the program's exit code and output. If it failed or the "
        "output looks wrong, find the cause and send a corrected, complete program.\n"
        "- When code does not help, reason step by step in words.\n"
        "- When you are confident, check the result, state the final answer in the form the "
        f"task asks for, and end that message with the word {termination}. Write "
        f"{termination} only when you are done."
    )


def words_system(termination: str) -> str:
    """The assistant's system prompt when the user proxy is an LLM: solve without code."""
    return (
        "You solve tasks by reasoning in words. Do not write code: nobody will run it.\n"
        "- If no plan is given, say briefly how you will go about the task, then work through "
        "it step by step.\n"
        "- Check your result before you rely on it, and show the evidence that it is right.\n"
        "- End every message with your current final answer, in the form the task asks for, so "
        "that an answer is there even if the conversation stops.\n"
        f"- When everything is done, end your message with the word {termination}. Write "
        f"{termination} only when you are done."
    )


def nudge(termination: str) -> str:
    return (
        "There was no code block to run in your last message. Keep working on the task. If it "
        "is solved, state the final answer in the requested form and end your message with "
        f"{termination}."
    )


@dataclass(frozen=True)
class Block:
    """One fenced code block of an assistant message."""

    language: str
    code: str

    @property
    def runnable(self) -> bool:
        return self.language.lower() in _PYTHON


def code_blocks(text: str) -> list[Block]:
    """The fenced code blocks of ``text`` in order; empty ones are skipped."""
    return [Block(m[1], m[2]) for m in _CODE_BLOCK.finditer(text) if m[2].strip()]


def prose(text: str, termination: str, keep_code: bool) -> str:
    """``text`` without the termination word, and without its code blocks unless ``keep_code``
    (so that numbers in code never pass for an answer)."""
    if not keep_code:
        text = _CODE_BLOCK.sub("", text)
    return text.replace(termination, "").strip()


def _cut(text: str, limit: int) -> str:
    text = text.rstrip()
    return text if len(text) <= limit else text[:limit] + "\n[output truncated]"


async def execute(blocks: list[Block], limits: Limits, max_chars: int) -> tuple[str, list[dict]]:
    """Run the Python blocks in order until one fails: the proxy's reply and each block's record."""
    parts: list[str] = []
    records: list[dict] = []
    failed = False
    for i, block in enumerate(blocks, 1):
        head = f"Code block {i} of {len(blocks)}"
        if failed:
            parts.append(f"{head}: not run, because an earlier block failed.")
            records.append({"status": "skipped"})
            continue
        if not block.runnable:
            parts.append(f"{head} ({block.language}): not run, only Python code can be run here.")
            records.append({"status": "not_python", "language": block.language})
            continue
        try:
            result = await arun_python(block.code, limits=limits)
        except IsolationMissing:  # not the program's failure: the run's, to stop
            raise
        except Exception as exc:  # the sandbox itself failed, not the program
            parts.append(f"{head}: the sandbox could not run it ({type(exc).__name__}).")
            records.append({"status": "sandbox_error", "error": f"{type(exc).__name__}: {exc}"})
            failed = True
            continue
        lines = [f"{head}: status {result.status}, exit code {result.returncode}."]
        for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            if text.strip():
                lines.append(f"{stream}:\n{_cut(text, max_chars)}")
        if not (result.stdout.strip() or result.stderr.strip()):
            lines.append("(no output)")
        parts.append("\n".join(lines))
        records.append({"status": result.status, "returncode": result.returncode})
        failed = not result.passed
    return "\n\n".join(parts), records


@register_method("autogen")
class AutoGen(Method):
    """An assistant LLM and a code-running user proxy talk until TERMINATE (≤ max_turn calls)."""

    roles = (ASSISTANT, USER_PROXY)
    paper = "Wu et al., arXiv 2308.08155"
    category = (
        "two-agent conversation with code execution (assistant + user proxy running its code in"
        " the sandbox)"
    )
    calls = (
        "assistant turns until `TERMINATE`, 1 ≤ calls ≤ `max_turn` (default 3); the proxy makes"
        " none; `user_proxy=llm` (`preset=maslab`): the proxy's replies too, 1 ≤ calls ≤"
        " 2·`max_turn` − 1 (5)"
    )

    class Config(MethodConfig):
        presets: ClassVar[Mapping[str, Mapping[str, Any]]] = PRESETS
        preset: Literal["maslab"] | None = Field(
            None,
            description="another protocol's values (PRESETS) for the settings left at their "
            "defaults: maslab",
        )
        max_turn: int = Field(3, ge=1, description="T: the most assistant turns")
        termination: str = Field(
            "TERMINATE",
            min_length=1,
            description="the word that ends the conversation when a message contains it",
        )
        user_proxy: Literal["executor", "llm"] = Field(
            "executor",
            description="executor: the proxy runs the assistant's Python code in the sandbox "
            "(no model); llm: the proxy is an LLM and nothing runs (MASLab's)",
        )
        max_output_chars: int = Field(
            2000,
            ge=1,
            description="each of a run's stdout and stderr is cut to this many characters",
        )
        timeout_seconds: float = Field(
            10, gt=0, description="wall-clock and CPU limit of each sandbox run"
        )

    config: Config

    def structure(self) -> Topology:
        """The assistant and the user proxy read each other."""
        return Topology.from_edges(
            [(ASSISTANT, USER_PROXY), (USER_PROXY, ASSISTANT)], name="autogen"
        )

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = self.structure()
        llm_proxy = cfg.user_proxy == "llm"
        system = (words_system if llm_proxy else assistant_system)(cfg.termination)
        assistant = ctx.agent(ASSISTANT, system=system)
        proxy = ctx.agent(USER_PROXY) if llm_proxy else None
        if proxy is not None:  # it asked the question: its conversation opens with it
            proxy.history = [{"role": "assistant", "content": task.prompt()}]
        limits = Limits(wall_seconds=cfg.timeout_seconds, cpu_seconds=cfg.timeout_seconds)

        def answer_in(text: str) -> str | None:
            """``text`` minus the termination word (and, unless the task wants code, minus its
            code blocks), if that holds an answer for the task; else None."""
            stripped = prose(text, cfg.termination, keep_code=task.answer_type == "code")
            found = task.answer_in(stripped)
            return stripped if stripped and found is not None else None

        said: list[str] = []  # the assistant's messages, in turn order
        answers: list[tuple[int, str]] = []  # (turn, message minus the word) holding an answer
        executions = sandbox_errors = proxy_fallbacks = 0
        terminated_by: str | None = None
        prompt = task.prompt()
        for t in range(cfg.max_turn):
            reply = (await assistant.reply(prompt, round=t)).content
            said.append(reply)
            if (answer := answer_in(reply)) is not None:
                answers.append((t, answer))
                ctx.propose(answer, round=t)
            elif not answers:  # as at the end: with no answer anywhere, the last message stands
                ctx.propose(prose(reply, cfg.termination, True), round=t)
            if cfg.termination in reply:
                terminated_by = ASSISTANT
                break
            if t == cfg.max_turn - 1:
                break
            if proxy is not None:
                said_back = await proxy.reply(reply, round=t, recipients=(ASSISTANT,))
                if cfg.termination in said_back.content:
                    terminated_by = USER_PROXY
                    break
                prompt = said_back.content
                if not prompt.strip():  # an empty turn would tell the assistant nothing
                    prompt, proxy_fallbacks = nudge(cfg.termination), proxy_fallbacks + 1
                continue
            blocks = code_blocks(reply)
            if blocks:
                prompt, records = await execute(blocks, limits, cfg.max_output_chars)
                executions += sum(r["status"] not in {"skipped", "not_python"} for r in records)
                sandbox_errors += sum(r["status"] == "sandbox_error" for r in records)
                kind, metadata = "execution", {"blocks": records}
            else:
                prompt, kind, metadata = nudge(cfg.termination), "auto_reply", {}
            ctx.post(
                USER_PROXY, prompt, round=t, kind=kind, recipients=(ASSISTANT,), metadata=metadata
            )

        # answers[-1] is the last message when it holds an answer, else the latest that does
        turn, final = answers[-1] if answers else (None, prose(said[-1], cfg.termination, True))
        return Solution(
            answer=final.strip(),
            metadata={
                "turns": len(said),
                "terminated": terminated_by is not None,
                "terminated_by": terminated_by,  # assistant, user_proxy or None
                "executions": executions,
                "sandbox_errors": sandbox_errors,
                "proxy_fallbacks": proxy_fallbacks,
                "answer_turn": turn,  # 0-based; None: no message held an answer
            },
        )
