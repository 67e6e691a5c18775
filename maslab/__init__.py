"""maslab: LLM multi-agent systems on one shared agent / message / topology abstraction.

The layers, each built only on those above it::

    maslab.llm              model access: ChatModel, providers chosen by spec ("openai:...",
                            "local:...", "scripted:..."), cache -> retry -> load balancer ->
                            per-endpoint limiter, usage ledger
    messages, agents,       one sample: Message and Transcript, Agent, Topology (who reads
    topology, context       whom), Context (the door every call goes through: budget,
                            tracing, seeded random streams)
    method                  Method, MethodConfig and their registry; task (Task, Solution);
                            shared pieces: answers, aggregation, tools
    benchmark, data,        tasks with gold answers and how they score: Benchmark and its
    evaluation, sandbox     registry, where the data comes from, Evaluator and Score, the
                            sandbox for model-written code
    runner, results,        the harness: async runs and sweeps, the run directory (resumable),
    stats, report           statistics over tasks, the HTML report
    cli                     the ``maslab`` command

Beside them, for every layer: defaults (each default setting, once), errors, secrets, paths,
config_files, registry; maslab.testing holds the scripted model and a fake OpenAI server.

Plug-ins: methods/, benchmarks/ and evaluators/ at the top of the repository install as
maslab.methods, maslab.benchmarks and maslab.evaluators. Each module imports the core and
registers its class by name (``register_method``, ``register_benchmark``,
``register_evaluator``); other distributions add theirs through the entry-point groups of
the same names, and model providers through ``maslab.llm.registry.register_provider``. The
core reaches a plug-in only through its registry.

    import maslab

    run = maslab.evaluate("llm_debate", "arith", "openai:gpt-4o-mini", limit=20)  # as `maslab run`
    print(run.accuracy, run.summary.ci)
    run.to_pandas()  # one row per sample
    maslab.load_runs("runs/arith/*").runs_df()  # one row per run (samples_df, messages_df)

    debate = maslab.get_method("llm_debate")(agents=3, rounds=2)  # one question, in a script
    outcome = debate.run("What is 17 * 23?", "openai:gpt-4o-mini")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from maslab import moved, version
from maslab.lazy import lazy_exports

moved.install()  # the flat layout's module paths still import

if TYPE_CHECKING:  # for type checkers and IDEs; at run time each name loads on first use
    from maslab.analysis.frames import Runs, load_runs
    from maslab.analysis.run_result import RunResult, load_run
    from maslab.api import aevaluate, evaluate
    from maslab.bench.benchmark import Benchmark, get_benchmark, list_benchmarks
    from maslab.bench.evaluation import Evaluator, Score, get_evaluator, list_evaluators
    from maslab.core.agents import Agent
    from maslab.core.context import Budget, Context
    from maslab.core.messages import Message, Transcript
    from maslab.core.method import Method, MethodConfig, get_method, list_methods, register_method
    from maslab.core.task import Solution, Task
    from maslab.core.topology import Topology
    from maslab.errors import BudgetExceeded, ConfigError, LLMError, MaslabError, SampleEnded
    from maslab.llm.pool import ModelPool
    from maslab.llm.registry import load_model
    from maslab.llm.types import ChatModel, Completion, Usage

# public name -> the module that defines it: `import maslab` stays cheap (the CLI and a
# worker import only what they use), and `maslab.X` imports X's module on first access
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Agent": "maslab.core.agents",
        "Benchmark": "maslab.bench.benchmark",
        "get_benchmark": "maslab.bench.benchmark",
        "list_benchmarks": "maslab.bench.benchmark",
        "Budget": "maslab.core.context",
        "Context": "maslab.core.context",
        "BudgetExceeded": "maslab.errors",
        "ConfigError": "maslab.errors",
        "LLMError": "maslab.errors",
        "MaslabError": "maslab.errors",
        "SampleEnded": "maslab.errors",
        "Evaluator": "maslab.bench.evaluation",
        "Score": "maslab.bench.evaluation",
        "get_evaluator": "maslab.bench.evaluation",
        "list_evaluators": "maslab.bench.evaluation",
        "aevaluate": "maslab.api",
        "evaluate": "maslab.api",
        "ModelPool": "maslab.llm.pool",
        "load_model": "maslab.llm.registry",
        "ChatModel": "maslab.llm.types",
        "Completion": "maslab.llm.types",
        "Usage": "maslab.llm.types",
        "Message": "maslab.core.messages",
        "Transcript": "maslab.core.messages",
        "Method": "maslab.core.method",
        "MethodConfig": "maslab.core.method",
        "get_method": "maslab.core.method",
        "list_methods": "maslab.core.method",
        "register_method": "maslab.core.method",
        "RunResult": "maslab.analysis.run_result",
        "load_run": "maslab.analysis.run_result",
        "Runs": "maslab.analysis.frames",
        "load_runs": "maslab.analysis.frames",
        "Solution": "maslab.core.task",
        "Task": "maslab.core.task",
        "Topology": "maslab.core.topology",
    },
)

__version__ = version.__version__

__all__ = [
    "Agent",
    "Benchmark",
    "Budget",
    "BudgetExceeded",
    "ChatModel",
    "Completion",
    "ConfigError",
    "Context",
    "Evaluator",
    "LLMError",
    "MaslabError",
    "Message",
    "Method",
    "MethodConfig",
    "ModelPool",
    "RunResult",
    "Runs",
    "SampleEnded",
    "Score",
    "Solution",
    "Task",
    "Topology",
    "Transcript",
    "Usage",
    "aevaluate",
    "evaluate",
    "get_benchmark",
    "get_evaluator",
    "get_method",
    "list_benchmarks",
    "list_evaluators",
    "list_methods",
    "load_model",
    "load_run",
    "load_runs",
    "register_method",
]
