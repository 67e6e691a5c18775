"""Prefix reuse per method: the share of a sample's prompt that a server's prefix cache could skip.

Every registered method solves TASKS tasks (the generated `arith` benchmark; the code methods
the bundled HumanEval, the maze-game methods `collab_maze`) on an in-process scripted model with
a fixed, plausible reply: a short step-by-step answer whose number is fixed per agent (so agents
disagree and no method stops early on a consensus), a program defining the task's function
where the prompt shows one, a move in the maze game. Each sample's requests come from its usage
ledger in the order they were sent and are scored with :func:`prefix.prefix_reuse`: the
prompt characters in the longest prefix shared with an earlier request of the same sample, over
all its prompt characters (messages as "role: content" lines, as a prefix cache sees the chat).
Tokens are maslab's scripted count (words and punctuation marks), an approximation of a real
tokenizer. Learned methods run their untrained defaults (no `optimize`).

    python perf/prefix_reuse.py [--tasks 3] [--methods a,b] [--json PATH] [--compare PATH]

`--compare` adds the reused share of an earlier `--json` file (e.g. taken before a change to the
prompts) as a "before" column.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import zlib
from pathlib import Path
from typing import Any

from benchkit import arguments, print_machine, print_table, write_json
from prefix import PrefixReuse, prefix_reuse

from maslab.bench.benchmark import get_benchmark
from maslab.core.context import Context
from maslab.core.method import get_method, list_methods
from maslab.core.task import Task
from maslab.llm.types import ChatRequest
from maslab.testing import ScriptedModel, count_tokens, last_user_message

BENCHMARKS = {  # methods for code tasks (only, or mainly) and the maze game's; others: arith
    **dict.fromkeys(("chatdev", "evomac", "mapcoder", "mars2_search"), "humaneval"),
    **dict.fromkeys(("collab_pair", "relay"), "collab_maze"),
}
REPLY = (
    "Let me work through it step by step. I start from the first count and apply each change "
    "in order, checking the arithmetic at every step. The answer is {}."
)
_FUNCTION = re.compile(r"def (\w+)\(")


def reply(request: ChatRequest) -> str:
    """The fixed reply for ``request`` (see the module docstring)."""
    if any("MOVE:" in m["content"] for m in request.messages):
        return "The cell to the right looks open to me.\nMOVE: right"
    functions = _FUNCTION.findall(last_user_message(request))
    if not functions:
        return REPLY.format(41 + zlib.crc32(request.scope.encode()) % 3)
    return f"Here is the program.\n\n```python\ndef {functions[-1]}(*args):\n    return 0\n```"


async def measure(name: str, tasks: list[Task]) -> dict[str, Any]:
    """Run ``name`` on ``tasks`` and score each sample's prefix reuse."""
    method = get_method(name)()
    model = ScriptedModel(reply)
    total, failed = PrefixReuse(0, 0, 0), 0
    started = time.perf_counter()
    for task in tasks:
        ctx = Context(model, sample_id=task.id)
        try:
            await method.run_sample(task, ctx)
        except Exception:  # a method that cannot take the fixed reply still sent its prompts
            failed += 1
        chats = [r.messages for r in ctx.ledger.records if r.purpose == "method"]
        total += prefix_reuse(chats, count_tokens)
    return {
        "method": name,
        "samples": len(tasks),
        "failed": failed,
        "requests_per_sample": total.requests / len(tasks),
        "chars_per_sample": total.chars / len(tasks),
        "tokens_per_sample": total.tokens / len(tasks),
        "reused_share": total.share,
        "reused_token_share": total.token_share,
        "seconds": time.perf_counter() - started,
    }


COLUMNS = [
    ("method", "method"), ("requests_per_sample", "req/sample", "{:.1f}"),
    ("chars_per_sample", "chars", "{:.0f}"), ("tokens_per_sample", "tokens", "{:.0f}"),
    ("reused_share", "reused", "{:.1%}"), ("reused_token_share", "tok.reused", "{:.1%}"),
    ("before", "before", "{:.1%}"), ("notes", "notes"),
]  # fmt: skip


def _before(path: Path) -> dict[str, float]:
    """The reused share by method in an earlier ``--json`` file (its rows under "methods", or a
    bare list of rows as the script wrote them before)."""
    data = json.loads(path.read_text())
    rows = data["methods"] if isinstance(data, dict) else data
    return {r["method"]: r["reused_share"] for r in rows}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--tasks", type=int, default=3, help="tasks per method")
    parser.add_argument("--methods", help="comma-separated method names (default: all)")
    parser.add_argument("--compare", type=Path, help="an earlier --json file: 'before' column")
    args = parser.parse_args()
    info = print_machine()
    print(f"{args.tasks} tasks per method, scripted model with a fixed reply")

    names = args.methods.split(",") if args.methods else list_methods()
    tasks = {
        name: get_benchmark(name)().load(limit=args.tasks)
        for name in {"arith", *BENCHMARKS.values()}
    }
    before = _before(args.compare) if args.compare else {}
    rows = []
    for name in names:
        row = asyncio.run(measure(name, tasks[BENCHMARKS.get(name, "arith")]))
        row["before"] = before.get(name)
        row["notes"] = f"{row['failed']} failed" if row["failed"] else ""
        rows.append(row)
    print_table(rows, COLUMNS)
    every = sum(r["chars_per_sample"] for r in rows)
    reused = sum(r["chars_per_sample"] * r["reused_share"] for r in rows)
    print(f"all methods, prompt characters reused: {reused / every:.1%}")
    write_json(args.json, {"machine": info, "tasks": args.tasks, "methods": rows})


if __name__ == "__main__":
    main()
