"""The public agent SDK: everything an agent author imports comes from here.

    from outlast.agent import Agent, Capabilities, RunContext, AgentError, tool

It imports nothing of the engine, the stores or HTTP: the engine implements
``RunContext`` and hands each run an object that satisfies it.
"""

from outlast.agent import in_doubt
from outlast.agent.base import (
    NOT_DONE,
    Agent,
    AgentError,
    Capabilities,
    InvalidInput,
    Resolution,
    RunContext,
    RunSuspended,
    ToolEffect,
    interrupt_items,
)
from outlast.agent.tools import Tool, ToolArgumentsError, tool
from outlast.protocol.verify import ProtocolViolation

__all__ = [
    "NOT_DONE",
    "Agent",
    "AgentError",
    "Capabilities",
    "InvalidInput",
    "ProtocolViolation",
    "Resolution",
    "RunContext",
    "RunSuspended",
    "Tool",
    "ToolArgumentsError",
    "ToolEffect",
    "in_doubt",
    "interrupt_items",
    "tool",
]
