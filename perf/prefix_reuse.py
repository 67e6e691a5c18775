"""Prefix reuse per method: the share of a sample's prompt that a server's prefix cache could skip.

Every registered method solves TASKS tasks (the generated `arith` benchmark; the code methods
the bundled HumanEval, the maze-game methods `collab_maze`) on an in-process scripted model with
a fixed, plausible reply: a short step-by-step answer whose number is fixed per agent (so agents
disagree and no method stops early on a consensus), a program defining the task's function
where the prompt shows one, a move in the maze game. Each sample's requests come from its usage
ledger in the order they were sent and are scored with :func:`maslab.prefix.prefix_reuse`: the
prompt characters in the longest prefix shared with an earlier request of the same sample, over
all its prompt characters (messages as "role: content" lines, as a prefix cache sees the chat).
Tokens are maslab's scripted count (words and punctuation marks), an approximation of a real
tokenizer. Learned methods run their untrained defaults (no `optimize`).

    python perf/prefix_reuse.py [--tasks 3] [--methods a,b] [--json out.json]
                                [--compare before.json]

`--compare` adds the reused share of an earlier `--json` file (e.g. taken before a change to the
prompts) as a "before" column.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
import zlib
from pathlib import Path
from typing import Any

from maslab.benchmark import get_benchmark
from maslab.context import Context
from maslab.llm.types import ChatRequest
from maslab.method import get_method, list_methods
from maslab.prefix import PrefixReuse, prefix_reuse
from maslab.task import Task
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3, help="tasks per method")
    parser.add_argument("--methods", help="comma-separated method names (default: all)")
    parser.add_argument("--json", type=Path, help="write the rows to this JSON file")
    parser.add_argument("--compare", type=Path, help="an earlier --json file: 'before' column")
    args = parser.parse_args()

    names = args.methods.split(",") if args.methods else list_methods()
    tasks = {
        name: get_benchmark(name)().load(limit=args.tasks)
        for name in {"arith", *BENCHMARKS.values()}
    }
    before = {}
    if args.compare:
        before = {r["method"]: r["reused_share"] for r in json.loads(args.compare.read_text())}
    rows = []
    print(f"{'method':22} {'req/sample':>10} {'chars':>9} {'tokens':>8} {'reused':>7} "
          f"{'tok.reused':>10} {'before':>7}  notes")  # fmt: skip
    for name in names:
        row = asyncio.run(measure(name, tasks[BENCHMARKS.get(name, "arith")]))
        row["before"] = before.get(name)
        rows.append(row)
        was = f"{row['before']:7.1%}" if row["before"] is not None else f"{'':7}"
        notes = f"{row['failed']} failed" if row["failed"] else ""
        print(f"{name:22} {row['requests_per_sample']:10.1f} {row['chars_per_sample']:9.0f} "
              f"{row['tokens_per_sample']:8.0f} {row['reused_share']:7.1%} "
              f"{row['reused_token_share']:10.1%} {was}  {notes}")  # fmt: skip
    every = sum(r["chars_per_sample"] for r in rows)
    reused = sum(r["chars_per_sample"] * r["reused_share"] for r in rows)
    print(f"all methods, prompt characters reused: {reused / every:.1%}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
