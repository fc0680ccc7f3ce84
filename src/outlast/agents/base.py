"""What an agent is: Python code registered under a name, run with a RunContext."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from outlast.engine.context import RunContext


class AgentError(Exception):
    """An agent failure whose message is safe to show to the person using the client."""

    def __init__(self, message: str, code: str = "agent_error") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class Capabilities:
    """What an agent declares about itself (``GET /agents``)."""

    description: str = ""
    supports_resume: bool = False  # can restart from a boundary snapshot (enables G8 resume)
    interrupts: bool = False
    journaled_effects: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "supportsResume": self.supports_resume,
            "interrupts": self.interrupts,
            "journaledEffects": self.journaled_effects,
        }


class Agent(ABC):
    """An agent turn: read the context, emit AG-UI events, return when done.

    Cooperate with cancellation (G6): do work in ``await``-able steps so the
    ``asyncio.CancelledError`` that stops a run reaches you, and never swallow it.
    """

    capabilities: Capabilities = Capabilities()

    @abstractmethod
    async def run(self, ctx: RunContext) -> None:
        """Execute one run."""


class MissingAgent(Agent):
    """Stands in for an agent a stored run names but this server does not register."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def run(self, ctx: RunContext) -> None:
        raise AgentError(f"The agent {self.name!r} is not available on this server.",
                         code="agent_not_found")
