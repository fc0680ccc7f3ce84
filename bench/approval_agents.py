"""The small agents of ``bench.host_agents`` with one tool, ``get_weather(city)``, that
needs a person's approval, asked in each framework's own way: Pydantic AI
``requires_approval=True``, LangGraph ``interrupt()`` in a node before the tool,
Agent Framework ``approval_mode="always_require"``, ADK
``FunctionTool(..., require_confirmation=True)``. ``bench.conformance_peers`` serves
them behind each peer's own AG-UI endpoint and behind outlast.

The suite's fake model (``tests.support.fake_openai``, by default) calls the first tool
it is offered when the prompt says "weather", and answers a tool result with text that
quotes it; any other prompt it echoes, so these agents answer like the plain ones."""

# No `from __future__ import annotations`: LangGraph reads the nodes' type hints.

import os
from typing import Any


def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def pydantic_agent(settings: Any = None) -> Any:
    """The approval ends the run with ``DeferredToolRequests`` (an output type Pydantic
    AI asks for beside ``str``), which its AG-UI adapter sends as an interrupt."""
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("bench", provider=OpenAIProvider(
        base_url=os.environ["OUTLAST_OPENAI_BASE_URL"], api_key="unused"))
    agent = Agent(model, instructions="Answer.", output_type=[str, DeferredToolRequests])

    @agent.tool_plain(requires_approval=True)
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return weather(city)

    return agent


def langgraph_graph(settings: Any = None, checkpointer: Any = None) -> Any:
    """A model node, a review node that asks with ``interrupt()`` before any tool call,
    and a ``ToolNode``; compiled with ``checkpointer`` (ag-ui-langgraph needs one,
    outlast's host brings its own)."""
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode
    from langgraph.types import Command, interrupt

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return weather(city)

    model = ChatOpenAI(model="bench", base_url=os.environ["OUTLAST_OPENAI_BASE_URL"],
                       api_key="unused", streaming=True  # type: ignore[arg-type]
                       ).bind_tools([get_weather])

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        return "review" if state["messages"][-1].tool_calls else END  # type: ignore[union-attr]

    def review(state: MessagesState) -> Command[Any]:
        calls = state["messages"][-1].tool_calls  # type: ignore[union-attr]
        answer = interrupt({"message": f"Run get_weather({calls[0]['args']})?",
                            "tool": "get_weather", "args": calls[0]["args"]})
        if isinstance(answer, dict) and answer.get("approved"):
            return Command(goto="tools")
        return Command(goto="agent", update={"messages": [
            ToolMessage(content="Not run: the person declined.", tool_call_id=c["id"])
            for c in calls]})

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("review", review)
    builder.add_node("tools", ToolNode([get_weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["review", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def maf_agent(settings: Any = None) -> Any:
    import agent_framework as af
    from agent_framework.openai import OpenAIChatCompletionClient

    @af.tool(approval_mode="always_require")
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return weather(city)

    client = OpenAIChatCompletionClient(base_url=os.environ["OUTLAST_OPENAI_BASE_URL"],
                                        api_key="unused", model="bench")
    return af.Agent(client=client, instructions="Answer.", tools=[get_weather])


def adk_agent(settings: Any = None) -> Any:
    from google.adk.agents import LlmAgent
    from google.adk.integrations.openai import OpenAILlm
    from google.adk.tools.function_tool import FunctionTool
    from openai import AsyncOpenAI

    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return weather(city)

    model = OpenAILlm(model="bench", client=AsyncOpenAI(
        base_url=os.environ["OUTLAST_OPENAI_BASE_URL"], api_key="unused"))
    return LlmAgent(name="assistant", model=model, instruction="Answer.",
                    tools=[FunctionTool(get_weather, require_confirmation=True)])


def chosen(name: str) -> Any:
    """The factory ``name`` of this module when ``$OUTLAST_BENCH_APPROVAL`` is 1, else
    ``bench.host_agents``' (the peers' servers serve either)."""
    import bench.approval_agents
    import bench.host_agents

    module = bench.approval_agents if os.environ.get("OUTLAST_BENCH_APPROVAL") == "1" \
        else bench.host_agents
    return getattr(module, name)
