"""A LangGraph agent, served durably by outlast: a model node, a review node that asks a
person (``interrupt()``) before any ``delete_file`` call, and a ``ToolNode``.

    pip install "outlast[langgraph]"
    outlast serve --agent assistant=examples.langgraph_agent:agent

The model is any OpenAI-compatible server, reached over the Chat Completions API:
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as the OpenAI client reads them, the model
named by ``OPENAI_MODEL``. ``delete_file`` deletes only inside ``EXAMPLE_SANDBOX``
(default ``./sandbox``), and only after a person approves the call.
"""

# No `from __future__ import annotations`: LangGraph reads the nodes' type hints.

import logging
import os
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt

log = logging.getLogger(__name__)
SANDBOX = Path(os.environ.get("EXAMPLE_SANDBOX", "sandbox"))


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    log.info("get_weather(%r)", city)
    return f"It is sunny and 21 °C in {city}."


@tool
def delete_file(path: str) -> str:
    """Delete a file from the sandbox folder (a person approves each call first)."""
    log.info("delete_file(%r)", path)
    target = (SANDBOX / path).resolve()
    if not target.is_relative_to(SANDBOX.resolve()):
        return f"{path} is outside the sandbox: nothing was deleted."
    if not target.is_file():
        return f"There is no file {path}."
    target.unlink()
    return f"Deleted {path}."


TOOLS = [get_weather, delete_file]
model = ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"), streaming=True,
                   stream_usage=True).bind_tools(TOOLS)


async def assistant(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await model.ainvoke(state["messages"])]}


def route(state: MessagesState) -> str:
    return "review" if state["messages"][-1].tool_calls else END


def review(state: MessagesState) -> Command[Any]:
    """Ask a person before a call to delete_file; the others run at once."""
    calls = state["messages"][-1].tool_calls
    risky = [c for c in calls if c["name"] == "delete_file"]
    if not risky:
        return Command(goto="tools")
    answer = interrupt({"message": f"Delete {risky[0]['args'].get('path')}?",
                        "tool": "delete_file", "args": risky[0]["args"]})
    if isinstance(answer, dict) and answer.get("approved"):
        return Command(goto="tools")
    reason = answer.get("reason") if isinstance(answer, dict) else None
    return Command(goto="assistant", update={"messages": [
        ToolMessage(content=f"Not run: {reason or 'the person declined'}.",
                    tool_call_id=c["id"]) for c in calls]})


builder = StateGraph(MessagesState)
builder.add_node("assistant", assistant)
builder.add_node("review", review)
builder.add_node("tools", ToolNode(TOOLS))
builder.add_edge(START, "assistant")
builder.add_conditional_edges("assistant", route, ["review", END])
builder.add_edge("tools", "assistant")
agent = builder.compile()
