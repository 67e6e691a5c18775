"""Time and peak memory of reading a large run: resume, show, show TASK, report, compare.

Writes a synthetic llm_debate-shaped run of N samples through ``RunStore.append`` (each trace
6 messages and 6 calls, every call carrying its prompt; 1 sample in 100 errored, then retried as
a resume would), then runs each step in a fresh Python process and reads its wall time and peak
RSS (VmHWM where Linux has it, else ``resource.getrusage``). Run it at two sizes to see whether
memory grows with the run.

    python perf/store_scale.py [--samples 5000] [--json PATH] [--dir DIR]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import arguments, print_machine, print_table, write_json

from maslab.bench.evaluation import Score
from maslab.store.run_store import Manifest, ResultRecord, RunStore, Trace

AGENTS, ROUNDS = 3, 2
WORDS = ("the", "answer", "follows", "from", "adding", "both", "amounts", "and", "then",
         "checking", "the", "remainder", "again")  # fmt: skip

# each step runs in a child process; it prints its peak RSS in KiB last: the high-water mark
# of its own memory (getrusage's ru_maxrss would count the parent's at fork time too)
CHILD = """
import contextlib, os, resource, sys
with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
    if sys.argv[1] == "resume":
        from maslab.store.run_store import RunStore
        store = RunStore(sys.argv[2])
        store.open(store.manifest())
        store.close()
        code = 0
    else:
        from maslab.cli import main
        code = 0 if sys.argv[1] == "import" else main(sys.argv[1:])
try:
    with open("/proc/self/status") as status:
        peak = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(peak)
sys.exit(code)
"""


def _text(seed: int, words: int) -> str:
    return " ".join(WORDS[(seed + i * 7) % len(WORDS)] for i in range(words))


def _trace(task: str, i: int) -> Trace:
    """A debate's trace: each agent answers each round, seeing the earlier rounds' answers."""
    question = f"Question {i}: " + _text(i, 60)
    messages, calls = [], []
    for round_ in range(ROUNDS):
        for agent in range(AGENTS):
            reply = f"Agent {agent}, round {round_}: " + _text(i + agent + round_, 120)
            history = [{"role": "user", "content": question}] + [
                {"role": "assistant", "content": m["content"]} for m in messages[: AGENTS * round_]
            ]
            calls.append({
                "sample_id": task, "agent": f"agent{agent}", "round": round_,
                "model": "openai:gpt-4o-mini", "prompt_tokens": 150 * (1 + round_),
                "completion_tokens": 160, "latency_s": 1.2, "cached": False, "error": None,
                "draw": 0, "messages": history, "response": reply, "finish_reason": "stop",
            })  # fmt: skip
            messages.append({"sender": f"agent{agent}", "content": reply, "round": round_,
                             "kind": "message", "recipients": []})  # fmt: skip
    line = {"task_id": task, "repeat": 0, "prompt": question, "calls": calls,
            "messages": messages, "topology": None}  # fmt: skip
    return Trace.model_validate(line)


def _record(task: str, i: int, status: str) -> ResultRecord:
    correct = i % 3 != 0
    score = Score(value=float(correct), correct=correct, extracted=str(i), explanation="")
    usage = {"calls": 6, "prompt_tokens": 1350, "completion_tokens": 960, "latency_s": 7.2}
    if status == "error":
        return ResultRecord(
            task_id=task, status="error", error="ServerError: HTTP 500", usage=usage
        )
    return ResultRecord(task_id=task, status="ok", answer=f"The answer is {i}.", gold=str(i),
                        score=score, usage=usage, elapsed_s=8.0)  # fmt: skip


def write_run(directory: Path, samples: int) -> None:
    tasks = [f"task-{i:05d}" for i in range(samples)]
    manifest = Manifest(method="llm_debate", benchmark="gsm8k", model="openai:gpt-4o-mini",
                        evaluator="numeric", tasks=samples, task_ids=tasks)  # fmt: skip
    store = RunStore(directory)
    store.open(manifest)
    for i, task in enumerate(tasks):
        store.append(_record(task, i, "error" if i % 100 == 7 else "ok"), _trace(task, i))
    store.close()
    store.open(manifest)  # a resume retries the errored samples
    for i, task in enumerate(tasks):
        if i % 100 == 7:
            store.append(_record(task, i, "ok"), _trace(task, i))
    store.close()


def measure(argv: list[str]) -> dict[str, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    return {"wall_s": round(wall, 3), "peak_rss_mb": round(int(done.stdout.split()[-1]) / 1024, 1)}


COLUMNS = [("step", "step"), ("wall_s", "wall s", "{:.2f}"), ("peak_rss_mb", "peak RSS MiB")]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--dir", type=Path, help="where to write the run (default: a temp dir)")
    args = parser.parse_args()
    info = print_machine()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.dir or Path(tmp) / "run"
        started = time.perf_counter()
        write_run(run, args.samples)
        written = time.perf_counter() - started
        size = (run / "traces.jsonl").stat().st_size
        print(
            f"{args.samples} samples, traces.jsonl {size / 2**20:.0f} MiB, "
            f"written in {written:.1f} s"
        )
        task = f"task-{args.samples // 2:05d}"
        steps = {
            "import maslab.cli (baseline)": ["import"],
            "resume (RunStore.open)": ["resume", str(run)],
            "maslab show RUN": ["show", str(run)],
            "maslab show RUN TASK": ["show", str(run), task],
            "maslab report RUN": ["report", str(run), "-o", str(Path(tmp) / "report.html")],
            "maslab compare RUN RUN": ["compare", str(run), str(run)],
        }
        figures = {name: measure(argv) for name, argv in steps.items()}
    print_table([{"step": name, **figure} for name, figure in figures.items()], COLUMNS)
    report = {"machine": info, "samples": args.samples, "traces_bytes": size, "steps": figures}
    write_json(args.json, report)


if __name__ == "__main__":
    main()
