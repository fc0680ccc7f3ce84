"""A LangGraph graph for the host's tests: a model node (langchain-openai's ChatOpenAI
pointed at the scripted model server, ``$OUTLAST_OPENAI_BASE_URL``), a review node that
asks a person with ``interrupt()`` before any ``send_email`` call, and a ``ToolNode``.
Each tool execution appends a line to ``$HOST_TOOL_LOG``."""

# No `from __future__ import annotations`: LangGraph reads the nodes' type hints.

import os
from typing import Any

from tests.support.tool_log import record, slow_step


def graph(settings: Any = None) -> Any:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode
    from langgraph.types import Command, interrupt

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        record(f"get_weather {city}")
        return f"sunny in {city}"

    @tool
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        record(f"send_email {to} {subject}")
        return f"sent to {to}"

    tools = [get_weather, send_email, tool(slow_step)]
    model = ChatOpenAI(model="fake", base_url=os.environ["OUTLAST_OPENAI_BASE_URL"],
                       api_key="unused", streaming=True, stream_usage=True).bind_tools(tools)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        return "review" if state["messages"][-1].tool_calls else END

    def review(state: MessagesState) -> Command[Any]:
        calls = state["messages"][-1].tool_calls
        risky = [c for c in calls if c["name"] == "send_email"]
        if not risky:
            return Command(goto="tools")
        answer = interrupt({"message": f"Send an email to {risky[0]['args']['to']}?",
                            "tool": "send_email", "args": risky[0]["args"]})
        if isinstance(answer, dict) and answer.get("approved"):
            return Command(goto="tools")
        reason = answer.get("reason") if isinstance(answer, dict) else None
        return Command(goto="agent", update={"messages": [
            ToolMessage(content=f"Not sent: {reason or 'the person declined'}.",
                        tool_call_id=c["id"]) for c in calls]})

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("review", review)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["review", END])
    builder.add_edge("tools", "agent")
    return builder.compile()
