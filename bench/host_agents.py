"""The agents ``bench.hosts`` serves both ways: through the framework's own AG-UI
endpoint and through outlast's host. The model is the framework's OpenAI chat model
pointed at ``bench.model_server`` (``$OUTLAST_OPENAI_BASE_URL``)."""

from __future__ import annotations

import os
from typing import Any


def pydantic_agent(settings: Any = None) -> Any:
    """A Pydantic AI agent that only answers (the model streams; no tools)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("bench", provider=OpenAIProvider(
        base_url=os.environ["OUTLAST_OPENAI_BASE_URL"], api_key="unused"))
    return Agent(model, instructions="Answer.")


def langgraph_graph(settings: Any = None, checkpointer: Any = None) -> Any:
    """A LangGraph graph of one model node (langchain-openai's ``ChatOpenAI``, streaming),
    compiled without a checkpointer for outlast's host (it brings its own) and with one
    for ag-ui-langgraph's endpoint, which needs one."""
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph

    model = ChatOpenAI(model="bench", base_url=os.environ["OUTLAST_OPENAI_BASE_URL"],
                       api_key="unused", streaming=True)  # type: ignore[arg-type]

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=checkpointer)


def maf_agent(settings: Any = None) -> Any:
    """A Microsoft Agent Framework agent on the framework's OpenAI chat client."""
    import agent_framework as af
    from agent_framework.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(base_url=os.environ["OUTLAST_OPENAI_BASE_URL"],
                                        api_key="unused", model="bench")
    return af.Agent(client=client, instructions="Answer.")


def agno_agent(settings: Any = None) -> Any:
    """An Agno agent on Agno's OpenAI chat model (telemetry off: nothing leaves)."""
    from agno.agent import Agent
    from agno.models.openai import OpenAIChat

    model = OpenAIChat(id="bench", base_url=os.environ["OUTLAST_OPENAI_BASE_URL"],
                       api_key="unused")
    return Agent(model=model, instructions="Answer.", telemetry=False)


def strands_agent(settings: Any = None) -> Any:
    """A Strands agent on Strands' OpenAI model that only answers."""
    from strands import Agent
    from strands.models.openai import OpenAIModel

    model = OpenAIModel(client_args={"base_url": os.environ["OUTLAST_OPENAI_BASE_URL"],
                                     "api_key": "unused"}, model_id="bench")
    return Agent(model=model, system_prompt="Answer.", callback_handler=None)


def adk_agent(settings: Any = None) -> Any:
    """A Google ADK ``LlmAgent`` on ADK's own OpenAI model (``OpenAILlm``)."""
    from google.adk.agents import LlmAgent
    from google.adk.integrations.openai import OpenAILlm
    from openai import AsyncOpenAI

    model = OpenAILlm(model="bench", client=AsyncOpenAI(
        base_url=os.environ["OUTLAST_OPENAI_BASE_URL"], api_key="unused"))
    return LlmAgent(name="assistant", model=model, instruction="Answer.")
