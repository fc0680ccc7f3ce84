"""``ChatAgent``: a whole tool-calling loop on an OpenAI-compatible model server.

Each run: settle the tool calls the conversation still owes (execute server-side
tools, apply the person's approvals, stop for front-end tools), ask the model,
stream its reply, and loop until it answers without tool calls or ``max_steps``
model calls were made. All loop state lives in the conversation itself, so a
crash resume, an approval's continuation and a front-end tool's answer all
continue the same way: from ``ctx.messages``.

Every reply's ``TEXT_MESSAGE_START`` marks the message ``metadata.finishReason =
"streaming"`` and its ``TEXT_MESSAGE_END`` sets the real reason (``stop``,
``tool_calls``, ``length``...). A reply still marked ``streaming`` was cut off; it
is re-marked ``interrupted`` on a crash resume, kept in the thread, and never sent
back to the model as a finished turn.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from outlast.agent import (
    Agent,
    AgentError,
    Capabilities,
    Resolution,
    RunContext,
    Tool,
    ToolArgumentsError,
    ToolEffect,
    in_doubt,
)
from outlast.agents.calls import approval
from outlast.agents.openai.client import ModelClient
from outlast.agents.openai.wire import CallPiece, Turn, Usage, to_openai, tool_spec
from outlast.agents.resume import (
    ENGINE_PLACEHOLDER,
    FINISH,
    INTERRUPTED,
    STREAMING,
    finish_of,
    unfinished,
)

log = logging.getLogger("outlast.agents.openai")

APPROVAL_KIND = "tool_approval"
DECLINED = "The person declined this tool call; it was not run."


class ChatAgent(Agent):
    """An OpenAI-compatible chat-completions agent with server-side tools.

    ``tools``: ``@outlast.agent.tool`` functions run on the server, each execution a
    journaled effect keyed by the call id (G9); those with ``requires_approval``
    end the run with an interrupt first (G7). The input's AG-UI ``tools`` are
    front-end tools: a call to one ends the run with the call pending. ``params``
    (``temperature``, ``max_tokens``, ``tool_choice``...) go with every request;
    ``timeout`` is the longest wait for the next chunk of a reply."""

    capabilities = Capabilities(
        description="OpenAI-compatible chat completions: a tool-calling loop with server "
                    "tools, approvals and front-end tools",
        supports_resume=True, interrupts=True, journaled_effects=True,
    )

    def __init__(self, model: str, base_url: str, api_key: str | None = None,
                 tools: tuple[Tool, ...] | list[Tool] = (), system_prompt: str | None = None,
                 max_steps: int = 10, params: dict[str, Any] | None = None,
                 timeout: float = 60.0) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.model = model
        self.base_url = base_url
        self.tools = {t.name: t for t in tools}
        self.system_prompt = system_prompt
        self.max_steps = max_steps
        self.params = dict(params or {})
        self.client = ModelClient(base_url, api_key, timeout)

    async def run(self, ctx: RunContext) -> dict[str, Any]:
        """Settle owed calls, then model turns until an answer without tool calls."""
        if ctx.resumed:
            await self._mark_cut_off(ctx)
        if ctx.resumed or any(in_doubt.is_question(r.interrupt) for r in ctx.resume):
            # Calls a dead attempt may have started are asked about together, before any
            # runs (a person's answer decides each in the continuation).
            await ctx.confirm_in_doubt(self._effects(ctx, self._owed(ctx)))
        usage = Usage()
        for _ in range(self.max_steps):
            if await self._settle(ctx):
                return _result("tool_calls", usage)  # front-end calls: the client answers
            turn = await self._turn(ctx, usage)
            if turn.finish == "length":
                await self._skip(ctx, [c.id for c in turn.calls if c.id],
                                 "Not run: the reply was cut off by the length limit.")
                return _result("length", usage)
            if not turn.calls:
                return _result(turn.finish or "stop", usage)
        await self._skip(ctx, [c["id"] for c in self._owed(ctx)],
                         f"Not run: the agent reached its limit of {self.max_steps} model "
                         "calls in one run.")
        return _result("max_steps", usage)

    # -- tool calls the conversation owes -----------------------------------
    def _owed(self, ctx: RunContext) -> list[dict[str, Any]]:
        """Calls of finished replies after the last user message that have no result
        (or only the placeholder the engine gave it when an attempt crashed)."""
        answered = {r.interrupt.get("toolCallId") for r in ctx.resume}
        messages = ctx.messages
        start = 0
        for i, m in enumerate(messages):
            if m.get("role") == "user":
                start = i + 1
        results: dict[str, str] = {}
        for m in messages[start:]:
            if m.get("role") == "tool":
                results[str(m.get("toolCallId"))] = str(m.get("id"))
        owed = []
        for m in messages[start:]:
            if m.get("role") != "assistant" or unfinished(m):
                continue
            for call in m.get("toolCalls") or ():
                result_id = results.get(call["id"])
                placeholder = result_id == ENGINE_PLACEHOLDER + call["id"]
                if result_id is None or (placeholder and (ctx.resumed
                                                          or call["id"] in answered)):
                    owed.append(call)
        return owed

    def _effects(self, ctx: RunContext, calls: list[dict[str, Any]]) -> list[ToolEffect]:
        """The journaled effects of ``calls`` to server tools, as a person is asked about
        them."""
        effects = []
        for call in calls:
            if call["function"]["name"] in self.tools:
                try:
                    args = json.loads(call["function"].get("arguments") or "{}")
                except ValueError:
                    continue  # never run: answered with the parse error
                effects.append(ToolEffect(f"tool:{call['id']}", call["function"]["name"],
                                          args, call["id"]))
        return effects

    async def _settle(self, ctx: RunContext) -> bool:
        """Answer every owed call that can be answered now; True if front-end calls
        remain for the client. Raises the interrupt when approvals are needed."""
        answers = {str(r.interrupt.get("toolCallId")): r for r in ctx.resume
                   if (r.interrupt.get("metadata") or {}).get("kind") == APPROVAL_KIND}
        # A call asked about after a crash was approved before it first ran: the answer
        # about its effect decides now, with the arguments it ran with.
        confirmed = {str(r.interrupt.get("toolCallId")): r.interrupt["metadata"]
                     for r in ctx.resume if in_doubt.is_question(r.interrupt)}
        front = {t.name for t in ctx.input.tools or ()}
        frontend: list[str] = []
        approvals: list[dict[str, Any]] = []
        for call in self._owed(ctx):
            call_id, name = call["id"], call["function"]["name"]
            tool = self.tools.get(name)
            if tool is None:
                if name in front:
                    frontend.append(call_id)
                else:
                    await self._answer(ctx, call_id, f"Error: there is no tool named {name!r}.")
                continue
            try:
                args = json.loads(call["function"].get("arguments") or "{}")
                tool.validate(args)
            except (ValueError, ToolArgumentsError) as exc:
                await self._answer(ctx, call_id, f"Error: invalid arguments: {exc}")
                continue
            if call_id in confirmed:
                ran_with = confirmed[call_id].get("args")
                await self._execute(ctx, tool, call_id,
                                    ran_with if isinstance(ran_with, dict) else args)
                continue
            if not tool.requires_approval:
                await self._execute(ctx, tool, call_id, args)
                continue
            answer = answers.get(call_id)
            if answer is None:
                approvals.append(approval(call_id, name, args, APPROVAL_KIND, reason=False,
                                          edits=True))
            else:
                await self._apply(ctx, tool, call_id, args, answer)
        if frontend:
            return True
        if approvals:
            await ctx.interrupt(*approvals)
        return False

    async def _apply(self, ctx: RunContext, tool: Tool, call_id: str, args: dict[str, Any],
                     answer: Resolution) -> None:
        """Run or decline one call as a person answered its approval. The stored
        interrupt is the authority: the call id, the tool and the arguments the person
        saw come from it; the answer only says yes, no, or these edited arguments
        (validated like the model's)."""
        meta = answer.interrupt.get("metadata") or {}
        if meta.get("tool") != tool.name:
            await self._answer(ctx, call_id, DECLINED)
        elif not answer.approved:
            await self._answer(ctx, call_id, DECLINED if answer.status == "resolved"
                               else "The approval request was cancelled; not run.")
        else:
            edited = answer.edited_args
            chosen = edited if edited is not None else meta.get("args", args)
            try:
                tool.validate(chosen)
            except ToolArgumentsError as exc:
                await self._answer(ctx, call_id,
                                   f"Not run: the person's edited arguments are invalid: {exc}")
                return
            await self._execute(ctx, tool, call_id, chosen)

    async def _execute(self, ctx: RunContext, tool: Tool, call_id: str,
                       args: dict[str, Any]) -> None:
        async def invoke() -> str:
            try:
                value = await tool.invoke(args)
            except AgentError:
                raise
            except ToolArgumentsError as exc:
                return f"Error: invalid arguments: {exc}"
            except Exception as exc:  # the model is told; the details stay in the log
                log.warning("run %s: tool %s raised %s", ctx.run_id, tool.name,
                            type(exc).__name__)
                return f"Error: the tool failed ({type(exc).__name__})."
            return value if isinstance(value, str) else json.dumps(value, default=str)

        # A call a dead attempt left in doubt ends the run with a question (G9): never
        # run twice unless a person says so.
        done = await ctx.effect(f"tool:{call_id}", invoke, tool=tool.name, args=args,
                                tool_call_id=call_id)
        if isinstance(done, dict) and set(done) == {"content"}:  # an older journal's shape
            done = done["content"]
        await self._answer(ctx, call_id, done if isinstance(done, str) else json.dumps(done))

    async def _answer(self, ctx: RunContext, call_id: str, content: str) -> None:
        placeholder = ENGINE_PLACEHOLDER + call_id
        if any(m.get("id") == placeholder for m in ctx.messages):
            # A crash resume: the engine closed this call with "interrupted"; the real
            # result replaces it so the thread holds one answer per call.
            messages = [dict(m, content=content) if m.get("id") == placeholder else m
                        for m in ctx.messages]
            await ctx.emit({"type": "MESSAGES_SNAPSHOT", "messages": messages})
            return
        await ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": ctx.new_id("result"),
                        "toolCallId": call_id, "role": "tool", "content": content})

    async def _skip(self, ctx: RunContext, call_ids: list[str], why: str) -> None:
        for call_id in call_ids:
            await self._answer(ctx, call_id, why)

    async def _mark_cut_off(self, ctx: RunContext) -> None:
        """After a crash: replies the dead attempt was streaming are kept but marked
        ``interrupted``, so they are never sent back to the model as finished."""
        messages = ctx.messages
        if not any(m.get("role") == "assistant" and finish_of(m) == STREAMING
                   for m in messages):
            return
        # An ended message is never started again (G11): the mark comes in a snapshot.
        await ctx.emit({"type": "MESSAGES_SNAPSHOT", "messages": [
            dict(m, metadata={**m["metadata"], FINISH: INTERRUPTED})
            if m.get("role") == "assistant" and finish_of(m) == STREAMING else m
            for m in messages]})

    # -- one model call -------------------------------------------------------
    def _request(self, ctx: RunContext) -> dict[str, Any]:
        tools = [tool_spec(t.name, t.description, t.parameters) for t in self.tools.values()]
        tools += [tool_spec(t.name, t.description, t.parameters)
                  for t in ctx.input.tools or () if t.name not in self.tools]
        body: dict[str, Any] = {"model": self.model, **self.params,
                                "messages": to_openai(ctx.messages, self.system_prompt),
                                "stream": True}
        body.setdefault("stream_options", {"include_usage": True})
        if tools:
            body["tools"] = tools
        return body

    async def _turn(self, ctx: RunContext, usage: Usage) -> Turn:
        known = {c["id"] for m in ctx.messages for c in m.get("toolCalls") or ()}
        turn = Turn(ctx.new_id("msg"))
        stream = _TurnStream(ctx, turn, known)
        call = Usage()  # this model call's, for the run's final event (AG-UI 1.0 usage)
        async for chunk in self.client.chunks(self._request(ctx)):
            call.add(chunk.get("usage"))
            for choice in chunk.get("choices") or ():
                if not isinstance(choice, dict):
                    continue
                await stream.delta(choice.get("delta") or {})
                if choice.get("finish_reason"):
                    turn.finish = str(choice["finish_reason"])
        await stream.close()
        reported = call.to_json()
        if reported is not None:
            usage.add_counts(call)
            ctx.record_usage({**reported, "model": self.model}, finish_reason=turn.finish)
        return turn


class _TurnStream:
    """Turns one reply's deltas into AG-UI events under one assistant message.

    The message stays open for the whole reply: its tool calls start inside it
    (``parentMessageId``), text after a call continues it, and its end carries the
    finish reason. A message id is started once: strict AG-UI clients refuse a second
    start of an ended message (G11 does too)."""

    def __init__(self, ctx: RunContext, turn: Turn, known_call_ids: set[str]) -> None:
        self.ctx = ctx
        self.turn = turn
        self.known = known_call_ids
        self.started = False
        self.calls: dict[int, CallPiece] = {}

    async def _open(self) -> None:
        await self.ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": self.turn.message_id,
                             "role": "assistant", "metadata": {FINISH: STREAMING}})
        self.started = True

    async def delta(self, delta: dict[str, Any]) -> None:
        content = delta.get("content")
        if content and isinstance(content, str):
            if not self.started:
                await self._open()
            self.turn.text = True
            await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT",
                                 "messageId": self.turn.message_id, "delta": content})
        for piece in delta.get("tool_calls") or ():
            if isinstance(piece, dict):
                await self._call(piece)

    async def _call(self, piece: dict[str, Any]) -> None:
        index = piece.get("index")
        index = index if isinstance(index, int) else len(self.calls)
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = CallPiece(index)
            self.turn.calls.append(call)
        fn = piece.get("function") or {}
        # OpenAI sends id and name once; llama.cpp repeats them in every piece.
        if call.id is None and piece.get("id"):
            call.id = str(piece["id"])
        if call.name is None and fn.get("name"):
            call.name = str(fn["name"])
        if isinstance(fn.get("arguments"), str):
            call.arguments += fn["arguments"]
            if call.started and fn["arguments"]:
                await self.ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call.id,
                                     "delta": fn["arguments"]})
        if not call.started and call.name:
            await self._start(call)

    async def _start(self, call: CallPiece) -> None:
        if not self.started:
            await self._open()
        if call.id is None or call.id in self.known:
            # Some servers number calls per reply ("call_0"): a reused id would reuse
            # another call's journaled result (G9) and interrupt id, so it is renamed.
            call.id = f"{call.id or 'call'}_{self.ctx.new_id('c')}"
        self.known.add(call.id)
        call.started = True
        await self.ctx.emit({"type": "TOOL_CALL_START", "toolCallId": call.id,
                             "toolCallName": call.name,
                             "parentMessageId": self.turn.message_id})
        if call.arguments:
            await self.ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call.id,
                                 "delta": call.arguments})

    async def close(self) -> None:
        for call in self.turn.calls:
            if not call.started:  # a call that never got a name: show it anyway
                call.name = call.name or "unknown"
                await self._start(call)
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call.id})
        if not self.started:
            await self._open()  # an empty reply is still a finished turn
        finish = self.turn.finish or ("tool_calls" if self.turn.calls else "stop")
        self.turn.finish = finish
        await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": self.turn.message_id,
                             "metadata": {FINISH: finish}})


def _result(finish: str, usage: Usage) -> dict[str, Any]:
    out: dict[str, Any] = {"finishReason": finish}
    counts = usage.to_json()
    if counts is not None:
        out["usage"] = counts
    return out
