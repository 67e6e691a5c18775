"""maslab: LLM multi-agent systems on one shared agent / message / topology abstraction.

from maslab import Context, Task, get_method, load_model

method = get_method("llm_debate")(agents=3, rounds=2)
solution = await method.solve(task, Context(load_model("openai:gpt-4o-mini")))
"""

from maslab.agents import Agent
from maslab.benchmark import Benchmark, get_benchmark, list_benchmarks
from maslab.context import Budget, Context
from maslab.errors import BudgetExceeded, ConfigError, LLMError, MaslabError, SampleEnded
from maslab.evaluation import Evaluator, Score, get_evaluator, list_evaluators
from maslab.llm.registry import ModelPool, load_model
from maslab.llm.types import ChatModel, Completion, Usage
from maslab.messages import Message, Transcript
from maslab.method import Method, MethodConfig, get_method, list_methods, register_method
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
    "SampleEnded",
    "Score",
    "Solution",
    "Task",
    "Topology",
    "Transcript",
    "Usage",
    "get_benchmark",
    "get_evaluator",
    "get_method",
    "list_benchmarks",
    "list_evaluators",
    "list_methods",
    "load_model",
    "register_method",
]
