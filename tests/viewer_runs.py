"""Small runs for the viewer's tests: a debate of two agents over two rounds per sample, with
one sample of each outcome, a hostile transcript and triage signals."""

from __future__ import annotations

from pathlib import Path

import orjson

from maslab.bench.evaluation import Score
from maslab.store.run_store import RESULTS, Manifest, ResultRecord, RunStore, Trace

# model text that would run script if the viewer did not escape it
PAYLOAD = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 1">'
ODD_ID = 't04<b>&"'
SIGNALS = {"t01": {"answer_flips": 2.0}, "t05": {"answer_flips": 1.0, "repetition": 3.0},
           "t02": {"unparsed": 1.0, "answer_flips": 0.0}}  # fmt: skip


def task_ids(samples: int) -> list[str]:
    return [ODD_ID if i == 4 else f"t{i:02d}" for i in range(samples)]


def debate_trace(task: str, answers: list[str | None], extra: str = "") -> Trace:
    """Two agents over two rounds; ``answers`` is what each of the four messages concludes."""
    messages, calls = [], []
    for i, answer in enumerate(answers):
        agent, round_ = f"agent{i % 2}", i // 2
        content = f"{agent} in round {round_} of {task}. {extra} The answer is {answer}."
        messages.append({"sender": agent, "content": content, "round": round_,
                         "kind": "message", "recipients": []})  # fmt: skip
        calls.append({"agent": agent, "round": round_, "model": "scripted:viewer",
                      "prompt_tokens": 12, "completion_tokens": 5, "latency_s": 0.25,
                      "messages": [{"role": "user", "content": f"Solve {task}"}],
                      "response": content, "finish_reason": "stop"})  # fmt: skip
    return Trace.model_validate({
        "task_id": task, "repeat": 0, "prompt": f"Solve {task}", "messages": messages,
        "calls": calls, "answers": answers, "topology": None,
    })  # fmt: skip


def _sample(task: str) -> tuple[ResultRecord, Trace]:
    usage = {"calls": 4, "prompt_tokens": 48, "completion_tokens": 20}
    if task == "t00":  # correct, and holds the searched phrases
        extra = 'needle-alpha; she said "hi there"; Ünïcode'
        trace = debate_trace(task, ["4", "4", "4", "4"], extra)
        score = Score(value=1.0, correct=True, extracted="4")
    elif task == "t01":  # wrong, after flipping, with a hostile message
        trace = debate_trace(task, ["4", "5", "5", "5"], PAYLOAD)
        score = Score(value=0.0, correct=False, extracted="5")
    elif task == "t02":  # nothing to score
        trace = debate_trace(task, [None, None, None, None])
        score = Score.unparsable()
    elif task == "t03":
        record = ResultRecord(task_id=task, status="error", error="ServerError: HTTP 500",
                              usage=usage)  # fmt: skip
        return record, debate_trace(task, ["4", "4"])
    else:
        trace = debate_trace(task, ["4", "4", "4", "4"])
        score = Score(value=1.0, correct=True, extracted="4")
    record = ResultRecord(task_id=task, status="ok", answer=f"The answer is {score.extracted}.",
                          gold="4", score=score, usage=usage, elapsed_s=1.0)  # fmt: skip
    return record, trace


def write_run(directory: Path, *, method: str = "llm_debate", samples: int = 60) -> Path:
    """A finished run of ``samples`` tasks; its records carry :data:`SIGNALS` (the field of
    :class:`ResultRecord` reads them back where it exists)."""
    tasks = task_ids(samples)
    manifest = Manifest(method=method, benchmark="arith", model="scripted:viewer",
                        evaluator="numeric", tasks=samples, task_ids=tasks)  # fmt: skip
    store = RunStore(directory)
    store.open(manifest)
    for task in tasks:
        store.append(*_sample(task))
    store.close()
    lines = []
    for line in (directory / RESULTS).read_bytes().splitlines():
        row = orjson.loads(line)
        row["signals"] = SIGNALS.get(row["task_id"], {})
        lines.append(orjson.dumps(row) + b"\n")
    (directory / RESULTS).write_bytes(b"".join(lines))
    return directory
