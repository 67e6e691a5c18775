"""The commands of ``maslab``, each with the module whose ``add_commands`` builds its parser
and its one-line help: known without importing that module, so that a command loads only its
own module and ``maslab --help`` loads none."""

from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    module: str
    """The module of :mod:`maslab.cli` that adds it."""
    help: str


COMMANDS = {
    "run": Command("run", "run a method on a benchmark (resumable)"),
    "merge": Command("run", "combine the shard directories of one run (--shard)"),
    "sweep": Command("sweep", "run a grid of methods x benchmarks x models from YAML"),
    "study": Command(
        "study", "a seed paper's experiment on your model, beside the paper's figures"
    ),
    "plan-power": Command(
        "study", "how many tasks and repeats a claimed difference between two methods needs"
    ),
    "report": Command("reading", "one self-contained HTML report of run directories"),
    "show": Command("reading", "a run's results, or one task's transcript"),
    "compare": Command(
        "reading", "paired comparison of two runs on the same tasks: A − B, its interval and p"
    ),
    "agreement": Command("reading", "score one run with two evaluators and compare them"),
    "triage": Command(
        "triage", "a run's samples ranked by triage signals: the transcripts to read first"
    ),
    "attribute": Command(
        "attribution",
        "name the agent and the step that made each failed sample fail (an LLM judge)",
    ),
    "score": Command("scoring", "score a finished run's answers again, beside its original scores"),
    "view": Command("view", "a local web viewer over run directories (127.0.0.1)"),
    "export": Command("export", "the samples of runs as one table: CSV, Parquet or JSON lines"),
    "list": Command(
        "catalogue",
        "list methods, benchmarks, evaluators, tools or models, and where each comes from",
    ),
    "data": Command("catalogue", "fetch, import or locate benchmark data"),
    "cache": Command("catalogue", "response cache statistics or clearing"),
}


def about(name: str) -> str:
    """Command ``name``'s one-line help."""
    return COMMANDS[name].help
