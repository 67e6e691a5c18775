"""A two-agent AutoGen AgentChat team (a solver and a checker taking turns) run on maslab's
harness unchanged: maslab serves each sample an OpenAI-compatible door and AutoGen's
``OpenAIChatCompletionClient`` calls it.

    pip install autogen-agentchat "autogen-ext[openai]"
    maslab run --method external --config entry=examples/external/autogen_pair.py:solve \\
        --benchmark arith --limit 5 --model openai:gpt-4o-mini

Every call the team makes is a call of the sample: budgeted (``--max-calls``), cached,
traced under the agent named in the ``X-Agent`` header, and counted in the run's tokens.
"""

from __future__ import annotations

from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.models import ModelFamily, ModelInfo
from autogen_ext.models.openai import OpenAIChatCompletionClient

# what AutoGen should assume of a model it does not know by name
INFO = ModelInfo(vision=False, function_calling=False, json_output=False,
                 family=ModelFamily.UNKNOWN, structured_output=False)  # fmt: skip


def client_for(client: Any, agent: str) -> OpenAIChatCompletionClient:
    """A model client on the sample's door, naming the agent that calls."""
    return OpenAIChatCompletionClient(
        model=client.model, base_url=client.base_url, api_key=client.api_key, model_info=INFO,
        max_retries=0, default_headers={"X-Agent": agent},
    )  # fmt: skip


async def solve(task: Any, client: Any) -> str:
    clients = [client_for(client, name) for name in ("solver", "checker")]
    solver = AssistantAgent("solver", model_client=clients[0],
                            system_message="Solve the problem step by step.")  # fmt: skip
    checker = AssistantAgent(
        "checker", model_client=clients[1],
        system_message="Check the solver's working; give the final answer as \\boxed{...}.",
    )  # fmt: skip
    # the task, then one turn each: two model calls
    team = RoundRobinGroupChat([solver, checker], termination_condition=MaxMessageTermination(3))
    try:
        result = await team.run(task=task.prompt())
    finally:
        for model_client in clients:
            await model_client.close()
    return str(result.messages[-1].content)
