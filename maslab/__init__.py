"""maslab: LLM multi-agent systems on one shared agent / message / topology abstraction.

import maslab

run = maslab.evaluate("llm_debate", "arith", "openai:gpt-4o-mini", limit=20)  # as `maslab run`
print(run.accuracy, run.summary.ci)
run.to_pandas()  # one row per sample
"""

from maslab.agents import Agent
from maslab.benchmark import Benchmark, get_benchmark, list_benchmarks
from maslab.context import Budget, Context
from maslab.errors import BudgetExceeded, ConfigError, LLMError, MaslabError, SampleEnded
from maslab.evaluation import Evaluator, Score, get_evaluator, list_evaluators
from maslab.harness import aevaluate, evaluate
from maslab.llm.registry import ModelPool, load_model
from maslab.llm.types import ChatModel, Completion, Usage
from maslab.messages import Message, Transcript
from maslab.method import Method, MethodConfig, get_method, list_methods, register_method
from maslab.run_result import RunResult, load_run
from maslab.task import Solution, Task
from maslab.topology import Topology

__version__ = "0.1.0"

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
    "register_method",
]
