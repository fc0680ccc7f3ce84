"""The Agno host's view of one Agno run: its streamed events as AG-UI events on the
outlast run, and each tool execution through the journal (G9)."""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_jsonable_python

from outlast.agent import AgentError, RunContext
from outlast.agents.calls import approval, result_text
from outlast.agents.resume import answer_placeholder, call_args, note_settled

try:
    from agno.agent._tools import parse_tools
    from agno.models.response import ToolExecution
except ImportError:  # pragma: no cover - exercised only without the extra
    pass

SESSION_KEY = "agno"  # the host's key in the thread's session_state
KEY_PREFIX = "agno-tool:"  # + the call id: a tool execution's journal key
APPROVAL_KIND = "agno_confirmation"
_RECORD = frozenset({"status", "result", "error"})  # a journaled tool outcome's keys
_TRANSIENT = frozenset({"current_session_id", "current_user_id", "current_run_id"})
_USAGE = {"inputTokens": "input_tokens", "outputTokens": "output_tokens",  # AG-UI: Agno
          "reasoningTokens": "reasoning_tokens", "cachedInputTokens": "cache_read_tokens"}


def journaled(ctx: RunContext, run_call: Any, failures: list[AgentError]) -> Any:
    """Agno's ``Model.arun_function_call`` for one run, each call an outlast effect. A
    failure of the journal's (a person said an effect in doubt must not run) is kept in
    ``failures``: Agno reports it only as its run's error."""

    async def arun_function_call(fc: Any) -> Any:
        from agno.tools.function import FunctionExecutionResult
        from agno.utils.timer import Timer

        ran: Any = None

        async def invoke() -> Any:
            nonlocal ran
            ran = await run_call(fc)
            outcome = ran[3]
            return {"status": outcome.status, "error": fc.error or outcome.error,
                    "result": to_jsonable_python(fc.result, fallback=str)}

        try:
            recorded = await ctx.effect(KEY_PREFIX + str(fc.call_id), invoke,
                                        tool=fc.function.name, args=fc.arguments,
                                        tool_call_id=str(fc.call_id))
        except AgentError as exc:
            failures.append(exc)
            raise
        if ran is not None:
            return ran
        if not (isinstance(recorded, dict) and set(recorded) == _RECORD):
            recorded = {"status": "success", "result": recorded, "error": None}
        fc.result, fc.error = recorded["result"], recorded["error"]
        outcome = FunctionExecutionResult(status=recorded["status"], result=fc.result,
                                          error=fc.error)
        return recorded["status"] == "success", Timer(), fc, outcome  # type: ignore[no-untyped-call]

    return arun_function_call


async def execute(agent: Any, call: dict[str, Any]) -> str:
    """One call a crashed attempt left without a result, run with the agent's own tool
    (through the journal); its result as the model is shown it."""
    name = call["function"]["name"]
    functions = {f.name: f for f in parse_tools(agent, tools=list(agent.tools or ()),
                                                model=agent.model, async_mode=True)
                 if not isinstance(f, dict)}
    if name not in functions:
        return f"Not run: the agent has no tool named {name!r}."
    fc = agent.model.get_function_call_to_run_from_tool_execution(
        ToolExecution(tool_call_id=call["id"], tool_name=name, tool_args=call_args(call)),
        functions)
    _, _, fc, outcome = await agent.model.arun_function_call(fc)
    return result_text(fc.result if outcome.status == "success" else fc.error or outcome.error)


class Relay:
    """Turns Agno's run events into AG-UI events on the run."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.text: str | None = None  # the open text message
        self.thinking: str | None = None  # the open reasoning message
        self.parent: str | None = None  # the current model response's message
        self.unanswered: set[str] = set()
        self.shown = {c["id"] for m in ctx.messages for c in m.get("toolCalls") or ()}
        self.rejected: dict[str, str] = {}  # a paused run's rejected calls: their result
        self.interrupts: list[dict[str, Any]] = []
        self.failures: list[AgentError] = []  # the journal's, inside Agno's run
        self.result: Any = None
        self.session_state: Any = None  # Agno's, as the run ended
        self.dropped: list[str] = []  # Agno runs paused only for the client's tools

    async def send(self, event: Any) -> None:
        kind = getattr(event, "event", None)
        if kind == "RunContent":
            reasoning = getattr(event, "reasoning_content", None)
            if reasoning and isinstance(reasoning, str):
                await self._think(reasoning)
            content = getattr(event, "content", None)
            if content:
                await self._say(content if isinstance(content, str) else result_text(content))
        elif kind == "ModelRequestStarted":
            await self.close()
            self.parent = None
        elif kind == "ModelRequestCompleted":
            await self.close()
            self._usage(event)
        elif kind == "ToolCallStarted" and event.tool is not None:
            await self._call(event.tool)
        elif kind == "ToolCallCompleted" and event.tool is not None:
            await self._result(str(event.tool.tool_call_id), result_text(event.tool.result))
        elif kind == "RunContinued":
            for call, said in list(self.rejected.items()):
                await self._result(call, said)
        elif kind == "RunPaused":
            await self.close()
            for req in getattr(event, "active_requirements", None) or ():
                await self._pause(event, req)
            if not self.interrupts:  # only the client's tools: the thread goes on, not it
                self.dropped.append(str(getattr(event, "run_id", "")))
        elif kind == "RunError":
            if self.failures:
                raise self.failures[0]
            raise AgentError(str(getattr(event, "content", None) or "the Agno run failed"),
                             code=str(getattr(event, "error_type", None) or "agent_error"))
        elif kind == "RunCancelled":
            raise AgentError("the Agno run was cancelled", code="agent_cancelled")
        elif kind == "RunCompleted":
            content = getattr(event, "content", None)
            self.result = to_jsonable_python(content, fallback=str)
            self.session_state = getattr(event, "session_state", None)

    def _boundary(self) -> None:
        """Before an opener with nothing open: the place a crash resume restarts from."""
        if self.text is None and self.thinking is None and not self.unanswered:
            note_settled(self.ctx, SESSION_KEY)

    async def _think(self, delta: str) -> None:
        """The model's reasoning (``reasoning_content``), as an AG-UI reasoning message."""
        if self.thinking is None:
            await self.close()
            self._boundary()
            self.thinking = self.ctx.new_id("reasoning")
            await self.ctx.emit({"type": "REASONING_START", "messageId": self.thinking})
            await self.ctx.emit({"type": "REASONING_MESSAGE_START",
                                 "messageId": self.thinking, "role": "reasoning"})
        await self.ctx.emit({"type": "REASONING_MESSAGE_CONTENT", "messageId": self.thinking,
                             "delta": delta})

    async def _say(self, delta: str) -> None:
        if self.thinking is not None:
            await self.close()
        if self.text is None:
            self._boundary()
            self.text = self.parent = self.ctx.new_id("msg")
            await self.ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": self.text,
                                 "role": "assistant"})
        await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text,
                             "delta": delta})

    async def _call(self, tool: Any) -> None:
        call = str(tool.tool_call_id)
        if call in self.shown:
            return
        await self.close()
        self._boundary()
        self.shown.add(call)
        self.unanswered.add(call)
        if self.parent is None:
            self.parent = self.ctx.new_id("msg")
        await self.ctx.emit({"type": "TOOL_CALL_START", "toolCallId": call,
                             "toolCallName": str(tool.tool_name),
                             "parentMessageId": self.parent})
        await self.ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call,
                             "delta": json.dumps(tool.tool_args or {}, ensure_ascii=False)})
        await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call})

    async def _result(self, call: str, content: str) -> None:
        self.unanswered.discard(call)
        self.rejected.pop(call, None)
        if await answer_placeholder(self.ctx, call, content):
            return  # a call a crashed attempt left open
        await self.ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": self.ctx.new_id("tool"),
                             "toolCallId": call, "role": "tool", "content": content})

    async def _pause(self, event: Any, req: Any) -> None:
        tool = req.tool_execution
        if tool is not None and req.needs_external_execution:
            await self._call(tool)  # a client's tool: the client answers it (AG-UI)
            return
        if tool is None or not req.needs_confirmation:
            raise AgentError("the Agno run paused for input this host does not take (only "
                             "tool confirmations)", code="agno_unsupported_pause")
        await self._call(tool)
        self.unanswered.discard(str(tool.tool_call_id))  # the continuation answers it
        args = to_jsonable_python(tool.tool_args or {}, fallback=str)
        self.interrupts.append(approval(
            str(tool.tool_call_id), tool.tool_name, args, APPROVAL_KIND, edits=True,
            runId=getattr(event, "run_id", None), requirementId=req.id))

    def _usage(self, event: Any) -> None:
        counted: dict[str, Any] = {wire: v for wire, name in _USAGE.items()
                                   if isinstance(v := getattr(event, name, 0), int) and v > 0}
        if counted:
            counted["totalTokens"] = counted.get("inputTokens", 0) + \
                counted.get("outputTokens", 0)
            counted.update({k: v for k, v in (("model", getattr(event, "model", None)), (
                "provider", getattr(event, "model_provider", None))) if isinstance(v, str) and v})
            self.ctx.record_usage(counted)

    async def share(self) -> None:
        """Agno's ``session_state`` as the run left it becomes the thread's AG-UI state
        when it differs, as Agno's own AGUI interface shows it (without the ids Agno
        adds for the run)."""
        if not isinstance(self.session_state, dict):
            return
        state = to_jsonable_python({k: v for k, v in self.session_state.items()
                                    if k not in _TRANSIENT}, fallback=str)
        if state != (self.ctx.state if self.ctx.state is not None else {}):
            await self.ctx.emit({"type": "STATE_SNAPSHOT", "snapshot": state})

    async def close(self) -> None:
        if self.thinking is not None:
            thinking, self.thinking = self.thinking, None
            await self.ctx.emit({"type": "REASONING_MESSAGE_END", "messageId": thinking})
            await self.ctx.emit({"type": "REASONING_END", "messageId": thinking})
        if self.text is not None:
            text, self.text = self.text, None
            await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": text})
