"""How much a report weighs: 16 runs of real methods (variants of one method among them) on
`arith` tasks through the Runner, on a scripted model whose answers differ between agents,
then one report over them all.

Prints the page's size, per task shown and by part: the topologies' SVG, the plots' SVG and the
rest (leaderboard, figures, transcripts and calls). A size, not a time: it does not depend on
the machine's load.

    python perf/report_size.py [--tasks 10] [--keep DIR] [--json PATH]
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import tempfile
from pathlib import Path
from typing import Any

from benchkit import arguments, print_machine, print_table, write_json

from maslab.harness.runner import RunConfig, Runner
from maslab.llm.registry import ModelSettings, register_provider
from maslab.llm.types import ChatModelBase, ChatRequest
from maslab.report import build_report
from maslab.testing import ScriptedModel

SPEC = "sizes:varied"
RUNS: list[tuple[str, dict[str, Any]]] = [
    ("vanilla", {}),
    ("cot", {}),
    ("self_consistency", {}),
    ("self_refine", {}),
    ("llm_debate", {"agents": 2, "rounds": 2}),
    ("llm_debate", {"agents": 3, "rounds": 2}),
    ("llm_debate", {"agents": 3, "rounds": 3}),
    ("llm_debate", {"agents": 5, "rounds": 2}),
    ("exchange_of_thought", {"paradigm": "memory"}),
    ("exchange_of_thought", {"paradigm": "report"}),
    ("mixture_of_agents", {"layers": 2, "proposers": 3}),
    ("mixture_of_agents", {"layers": 3, "proposers": 6}),
    ("macnet", {"agents": 5}),
    ("macnet", {"agents": 8}),
    ("mad", {}),
    ("free_discussion", {}),
]


def _reply(request: ChatRequest) -> str:
    """A few sentences of working and an answer that one request in four gets wrong."""
    digest = hashlib.sha256(str(request.messages[-1]["content"]).encode()).digest()
    answer = 42 if digest[0] % 4 else 40 + digest[1] % 5
    return (
        "Let me work through this carefully. First I restate what is asked, then I apply each "
        "operation in order and check the intermediate values against the question. "
        f"Having checked every step, the answer is \\boxed{{{answer}}}."
    )


@register_provider("sizes")
def _sizes(name: str, settings: ModelSettings) -> ChatModelBase:
    return ScriptedModel(_reply, name=SPEC)


def make_runs(tasks: int, root: Path) -> list[Path]:
    dirs = []
    for i, (method, config) in enumerate(RUNS):
        out = root / f"{i:02d}-{method}"
        run = RunConfig(
            method=method, method_config=config, benchmark="arith",
            benchmark_options={"size": tasks}, model=SPEC, out=str(out),
        )  # fmt: skip
        runner = Runner(run)
        runner.open()
        asyncio.run(runner.run())
        dirs.append(out)
    return dirs


def weigh(page: str, tasks: int) -> dict[str, Any]:
    topologies = re.findall(r'<svg class="topology".*?</svg>', page, re.S)
    svg = sum(map(len, topologies))
    plots = sum(map(len, re.findall(r'<svg class="chart".*?</svg>', page, re.S)))
    size = len(page.encode())
    return {
        "runs": len(RUNS),
        "tasks": tasks,
        "bytes": size,
        "bytes_per_task": size / tasks,
        "svg_bytes": svg,
        "svg_drawings": len(topologies),
        "plot_bytes": plots,
        "rest_bytes": size - svg - plots,
    }


COLUMNS = [
    ("runs", "runs"), ("tasks", "tasks shown"), ("bytes", "report bytes"),
    ("bytes_per_task", "bytes / task"), ("svg_drawings", "topologies drawn"),
    ("svg_bytes", "topology bytes"), ("plot_bytes", "plot bytes"), ("rest_bytes", "other bytes"),
]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--tasks", type=int, default=10, help="arith tasks per run")
    parser.add_argument("--keep", type=Path, help="leave the runs and the report here")
    args = parser.parse_args()
    machine = print_machine()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        dirs = make_runs(args.tasks, root)
        page = build_report(dirs, root / "report.html").read_text()
    row = weigh(page, args.tasks * len(RUNS))
    print_table([row], COLUMNS)
    write_json(args.json, {"machine": machine, "report": row})


if __name__ == "__main__":
    main()
