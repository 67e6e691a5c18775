"""A two-agent LangGraph system (a solver, then a checker) run on maslab's harness unchanged:
maslab serves each sample an OpenAI-compatible door and LangGraph's ``ChatOpenAI`` calls it.

    pip install langgraph langchain-openai
    maslab run --method external --config entry=examples/external/langgraph_pair.py:solve \\
        --benchmark arith --limit 5 --model openai:gpt-4o-mini

Every call the graph makes is a call of the sample: budgeted (``--max-calls``), cached,
traced under the agent named in the ``X-Agent`` header, and counted in the run's tokens.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    question: str
    draft: str
    answer: str


def model(client: Any, agent: str) -> ChatOpenAI:
    """A chat model on the sample's door, naming the agent that calls."""
    return ChatOpenAI(
        model=client.model, base_url=client.base_url, api_key=client.api_key, max_retries=0,
        default_headers={"X-Agent": agent},
    )  # fmt: skip


def solve(task: Any, client: Any) -> str:
    solver, checker = model(client, "solver"), model(client, "checker")

    def draft(state: State) -> dict[str, str]:
        return {"draft": str(solver.invoke(state["question"]).content)}

    def check(state: State) -> dict[str, str]:
        prompt = (
            f"{state['question']}\n\nA colleague answered:\n{state['draft']}\n\n"
            "Check the working and give the final answer as \\boxed{...}."
        )
        return {"answer": str(checker.invoke(prompt).content)}

    graph = StateGraph(State)
    graph.add_node("draft", draft)
    graph.add_node("check", check)
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "check")
    graph.add_edge("check", END)
    final = graph.compile().invoke({"question": task.prompt(), "draft": "", "answer": ""})
    return final["answer"]
