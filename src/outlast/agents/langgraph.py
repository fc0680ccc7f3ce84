"""LangGraph host: a compiled graph runs durably as an outlast agent.

The graph streams (``stream_mode=["messages", "updates"]``) as AG-UI: model tokens as
text and tool-call events, tool messages as tool results. Outlast adds:

- the graph's checkpoints live in outlast's store: a checkpointer (``SessionSaver``)
  keeps the latest checkpoint of the thread in its private ``session_state``, saved
  with every boundary snapshot, so a crash resumes the graph at its last finished node
  (``astream(None)`` from the checkpoint) instead of starting over (G8);
- ``interrupt(value)`` in a node ends the run with a durable outlast interrupt (G7);
  its answer, after any restart, resumes the graph with ``Command(resume=...)``;
- tools executed by a ``ToolNode`` of the graph run as journaled effects keyed by the
  model's call id (G9): a crash resume never runs one twice. Side effects outside
  tools are the graph's own (a node re-runs from its start after a crash);
- every model message's token usage counts toward the run's final event (AG-UI 1.0).

Install with ``pip install "outlast[langgraph]"``.
"""

from __future__ import annotations

import base64
import contextvars
import json
import logging
from typing import Any

from ag_ui.core.token_usage import token_usage_from_langchain_metadata
from pydantic_core import to_jsonable_python

from outlast.agent import Agent, Capabilities, RunContext
from outlast.agents.resume import (
    answer_placeholder,
    finished,
    is_placeholder,
    mark_cut_off,
    note_settled,
    owed_calls,
    settled_at,
)
from outlast.agents.target import load_target
from outlast.errors import MissingDependency
from outlast.protocol.content import text_of

try:
    from langchain_core.messages import (
        AIMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_to_dict,
        messages_from_dict,
    )
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import ToolNode
    from langgraph.types import Command
except ImportError:  # pragma: no cover - exercised only without the extra
    InMemorySaver = object  # type: ignore[assignment, misc]
    ToolNode = None  # type: ignore[assignment, misc]

log = logging.getLogger("outlast.agents.langgraph")

SESSION_KEY = "langgraph"
KEY_PREFIX = "langgraph-tool:"  # + the call id: a tool execution's journal key
INTERRUPT_KIND = "langgraph_interrupt"
CURRENT: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "outlast_langgraph_run", default=None)
"""The run whose graph is executing: its tools journal through it (tasks inherit it)."""


def _require() -> None:
    if ToolNode is None:
        raise MissingDependency("langgraph", "langgraph")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class SessionSaver(InMemorySaver):
    """A checkpointer whose state is the thread's ``session_state``: the latest
    checkpoint of each namespace, its channel values and its pending writes, in
    LangGraph's own serialization, rewritten after every ``put`` (so it is saved with
    the next boundary snapshot)."""

    def __init__(self, session_state: dict[str, Any]) -> None:
        super().__init__()
        self.session = session_state
        self._load(session_state.get(SESSION_KEY, {}).get("checkpoints"))

    def _load(self, saved: Any) -> None:
        if not isinstance(saved, dict):
            return
        for item in saved.get("storage", ()):
            thread, ns, cid, (ctype, cdata), (mtype, mdata), parent = item
            self.storage[thread][ns][cid] = ((ctype, base64.b64decode(cdata)),
                                            (mtype, base64.b64decode(mdata)), parent)
        for thread, ns, channel, version, (btype, bdata) in saved.get("blobs", ()):
            self.blobs[(thread, ns, channel, version)] = (btype, base64.b64decode(bdata))
        for thread, ns, cid, task, idx, (wtask, channel, (vtype, vdata), path) in \
                saved.get("writes", ()):
            self.writes.setdefault((thread, ns, cid), {})[(task, idx)] = (
                wtask, channel, (vtype, base64.b64decode(vdata)), path)

    def _save(self) -> None:
        """Keep only each namespace's latest checkpoint, what it reads and its writes."""
        storage, blobs, writes = [], [], []
        for thread, spaces in self.storage.items():
            for ns, checkpoints in spaces.items():
                if not checkpoints:
                    continue
                cid = max(checkpoints)  # checkpoint ids sort by time
                (ctype, cdata), (mtype, mdata), parent = checkpoints[cid]
                storage.append([thread, ns, cid, [ctype, _b64(cdata)],
                                [mtype, _b64(mdata)], parent])
                versions = self.serde.loads_typed((ctype, cdata)).get("channel_versions", {})
                for channel, version in versions.items():
                    blob = self.blobs.get((thread, ns, channel, version))
                    if blob is not None:
                        blobs.append([thread, ns, channel, version, [blob[0], _b64(blob[1])]])
                for (task, idx), (wtask, channel, (vtype, vdata), path) in \
                        self.writes.get((thread, ns, cid), {}).items():
                    writes.append([thread, ns, cid, task, idx,
                                   [wtask, channel, [vtype, _b64(vdata)], path]])
        state = self.session.setdefault(SESSION_KEY, {})
        state["checkpoints"] = {"storage": storage, "blobs": blobs, "writes": writes}

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        saved = super().put(config, checkpoint, metadata, new_versions)
        self._save()
        return saved

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        super().put_writes(config, writes, task_id, task_path)
        self._save()

    async def aput(self, config: Any, checkpoint: Any, metadata: Any,
                   new_versions: Any) -> Any:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: Any, writes: Any, task_id: str,
                          task_path: str = "") -> None:
        self.put_writes(config, writes, task_id, task_path)


def journal_tools(graph: Any) -> None:
    """Make every tool of every ``ToolNode`` in ``graph`` run as an outlast effect keyed
    by the model's call id while a run of this host executes it (G9); outside such a run
    the tools behave as before."""
    _require()
    for node in graph.nodes.values():
        bound = getattr(node, "bound", None)
        if not isinstance(bound, ToolNode):
            continue
        for name, tool in list(bound.tools_by_name.items()):
            if getattr(tool, "_outlast_journaled", False):
                continue
            copy = tool.model_copy()
            object.__setattr__(copy, "ainvoke", _journaled(tool.ainvoke))
            object.__setattr__(copy, "_outlast_journaled", True)
            bound.tools_by_name[name] = copy


def _journaled(invoke: Any) -> Any:
    async def ainvoke(call: Any, config: Any = None, **kwargs: Any) -> Any:
        ctx = CURRENT.get()
        call_id = call.get("id") if isinstance(call, dict) else None
        if ctx is None or not call_id:
            return await invoke(call, config, **kwargs)

        async def run() -> Any:
            result = await invoke(call, config, **kwargs)
            if isinstance(result, ToolMessage):
                return {"message": message_to_dict(result)}
            return {"value": to_jsonable_python(result, fallback=str)}

        recorded = await ctx.effect(KEY_PREFIX + str(call_id), run, tool=call.get("name"),
                                    args=call.get("args"), tool_call_id=str(call_id))
        if isinstance(recorded, dict) and set(recorded) == {"message"}:
            return messages_from_dict([recorded["message"]])[0]
        if isinstance(recorded, dict) and set(recorded) == {"value"}:
            return recorded["value"]
        # The result a person gave for a call cut off by a crash (it happened).
        return ToolMessage(content=recorded if isinstance(recorded, str)
                           else json.dumps(recorded), tool_call_id=str(call_id),
                           name=call.get("name"))

    return ainvoke


def to_langchain(messages: list[dict[str, Any]]) -> list[Any]:
    """AG-UI messages as LangChain messages, each keeping its id; unfinished replies are
    not sent back to the model."""
    out: list[Any] = []
    for m in finished(messages):
        role, mid = m.get("role"), m.get("id")
        if role == "user":
            out.append(HumanMessage(content=text_of(m.get("content")), id=mid))
        elif role in ("system", "developer"):
            out.append(SystemMessage(content=text_of(m.get("content")), id=mid))
        elif role == "assistant":
            calls = [{"id": c["id"], "name": c["function"]["name"],
                      "args": _args(c["function"].get("arguments"))}
                     for c in m.get("toolCalls") or ()]
            out.append(AIMessage(content=text_of(m.get("content")), tool_calls=calls, id=mid))
        elif role == "tool" and m.get("toolCallId"):
            out.append(ToolMessage(content=text_of(m.get("content")),
                                   tool_call_id=m["toolCallId"], id=mid))
    return out


def _args(raw: Any) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class LangGraphAgent(Agent):
    """Hosts a compiled LangGraph graph over a ``messages`` state: checkpoints in the
    thread, ``interrupt()`` durable, ``ToolNode`` tools journaled."""

    capabilities = Capabilities(
        description="LangGraph graph with checkpoints in the thread, durable interrupts and "
                    "journaled tools",
        supports_resume=True, interrupts=True, journaled_effects=True,
    )

    def __init__(self, graph: Any) -> None:
        _require()
        journal_tools(graph)
        self.graph = graph

    async def run(self, ctx: RunContext) -> Any:
        saver = SessionSaver(ctx.session_state)
        graph = self.graph.copy(update={"checkpointer": saver})
        config = {"configurable": {"thread_id": ctx.thread_id}}
        relay = _Relay(ctx)
        graph_input = await self._input(ctx, graph, config, relay)
        token = CURRENT.set(ctx)
        try:
            async for mode, payload in graph.astream(graph_input, config,
                                                     stream_mode=["messages", "updates"]):
                if mode == "messages":
                    await relay.chunk(payload[0])
                else:
                    await relay.update(payload)
        finally:
            CURRENT.reset(token)
        await relay.close()
        if relay.interrupts:
            await ctx.interrupt(*relay.interrupts)
        return None

    async def _input(self, ctx: RunContext, graph: Any, config: Any, relay: _Relay) -> Any:
        answers = [r for r in ctx.resume
                   if (r.interrupt.get("metadata") or {}).get("kind") == INTERRUPT_KIND]
        if answers:
            if len(answers) == 1:
                return Command(resume=answers[0].payload)
            return Command(resume={a.interrupt["metadata"]["interruptId"]: a.payload
                                   for a in answers})
        state = await graph.aget_state(config)
        settled = settled_at(ctx, SESSION_KEY)  # None unless a crash resume
        if settled is not None:
            await mark_cut_off(ctx, settled)  # its node runs again
        # Calls a dead attempt was executing are asked about first (ending the run if
        # any is in doubt); a person's answers are applied by the tools, through the
        # journal, when the graph goes on at them.
        owed = await owed_calls(ctx, KEY_PREFIX, settled)
        if state.next and settled is not None:
            # A crash: the graph goes on from its last finished node.
            log.info("run %s: resuming the graph at %s", ctx.run_id, list(state.next))
            return None
        # Calls a person answered about (or left by a crash the graph's checkpoint does
        # not reach) run here, through the journal; their results join the new input.
        answered = {c["id"] for c in owed if await self._execute(ctx, graph, c)}
        held = {getattr(m, "id", None) for m in (state.values or {}).get("messages", ())}
        new = [m for m in ctx.messages if m.get("id") not in held and (
            not is_placeholder(m) or m.get("toolCallId") in answered)]
        note_settled(ctx, SESSION_KEY)
        return {"messages": to_langchain(new)}


    async def _execute(self, ctx: RunContext, graph: Any, call: dict[str, Any]) -> bool:
        """Run one owed call with the graph's own (journaled) tool and put its result in
        place of the engine's; False when no tool of the graph has its name."""
        name = call["function"]["name"]
        tool = next((node.bound.tools_by_name[name] for node in graph.nodes.values()
                     if isinstance(getattr(node, "bound", None), ToolNode)
                     and name in node.bound.tools_by_name), None)
        if tool is None:
            return False
        token = CURRENT.set(ctx)
        try:
            message = await tool.ainvoke({"type": "tool_call", "id": call["id"], "name": name,
                                          "args": _args(call["function"].get("arguments"))})
        finally:
            CURRENT.reset(token)
        content = message.content if isinstance(message, ToolMessage) else message
        return await answer_placeholder(ctx, call["id"], text_of(content))


class _Relay:
    """Turns the graph's stream into AG-UI events on the run."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.text: str | None = None
        self.calls: dict[int, str] = {}  # tool-call chunk index -> open call id
        self.seen_calls: set[str] = set()
        self.answered: set[str] = set()
        self.streamed: set[str] = set()  # message ids already shown
        self.interrupts: list[dict[str, Any]] = []

    async def chunk(self, message: Any) -> None:
        if isinstance(message, ToolMessage):
            await self._result(message)
            return
        if not hasattr(message, "tool_call_chunks"):
            return
        mid = str(message.id or self.ctx.new_id("msg"))
        text = message.content if isinstance(message.content, str) else text_of(message.content)
        if text:
            if self.text is None:
                await self._boundary()
                self.text = mid
                await self.ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": mid,
                                     "role": "assistant"})
            await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": self.text,
                                 "delta": text})
        for piece in message.tool_call_chunks or ():
            index = piece.get("index") or 0
            if index not in self.calls and piece.get("id") and piece.get("name"):
                await self._boundary()
                call = str(piece["id"])
                self.calls[index] = call
                self.seen_calls.add(call)
                start = {"type": "TOOL_CALL_START", "toolCallId": call,
                         "toolCallName": piece["name"], "parentMessageId": self.text or mid}
                await self.ctx.emit(start)
            if piece.get("args") and index in self.calls:
                await self.ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": self.calls[index],
                                     "delta": piece["args"]})
        self.streamed.add(mid)

    async def update(self, payload: Any) -> None:
        await self.close()
        if not isinstance(payload, dict):
            return
        for node, update in payload.items():
            if node == "__interrupt__":
                pending = sorted(self.seen_calls - self.answered)
                for item in update or ():
                    interrupt = _interrupt(item)
                    if len(pending) == 1:
                        # The call the graph stopped before: its result is owed by the
                        # continuation, not given a placeholder by the engine (G7).
                        interrupt["toolCallId"] = pending[0]
                    self.interrupts.append(interrupt)
                continue
            messages = update.get("messages", ()) if isinstance(update, dict) else ()
            for message in messages if isinstance(messages, list) else [messages]:
                if isinstance(message, ToolMessage):
                    await self._result(message)
                elif isinstance(message, AIMessage):
                    await self._whole(message)
                    counted = token_usage_from_langchain_metadata(message.usage_metadata)
                    if counted is not None:
                        self.ctx.record_usage(counted)

    async def _whole(self, message: AIMessage) -> None:
        """A model message the token stream did not show (a node that returned it)."""
        mid = str(message.id or self.ctx.new_id("msg"))
        if mid in self.streamed:
            return
        self.streamed.add(mid)
        text = text_of(message.content)
        await self._boundary()
        await self.ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": mid,
                             "role": "assistant"})
        if text:
            await self.ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid,
                                 "delta": text})
        await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": mid})
        for call in message.tool_calls:
            if not call["id"] or call["id"] in self.seen_calls:
                continue
            self.seen_calls.add(call["id"])
            await self.ctx.emit({"type": "TOOL_CALL_START", "toolCallId": call["id"],
                                 "toolCallName": call["name"], "parentMessageId": mid})
            await self.ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call["id"],
                                 "delta": json.dumps(call["args"])})
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call["id"]})

    async def _result(self, message: ToolMessage) -> None:
        call = str(message.tool_call_id)
        if call in self.answered:
            return
        self.answered.add(call)
        content = text_of(message.content)
        if await answer_placeholder(self.ctx, call, content):
            return  # a call a crashed attempt left open
        await self.ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": str(
            message.id or self.ctx.new_id("result")), "toolCallId": call, "role": "tool",
            "content": content})

    async def _boundary(self) -> None:
        """Before an opener with nothing open: the place a crash resume restarts from."""
        if self.text is None and not self.calls:
            note_settled(self.ctx, SESSION_KEY)

    async def close(self) -> None:
        for call in self.calls.values():
            await self.ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call})
        self.calls = {}
        if self.text is not None:
            text, self.text = self.text, None
            await self.ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": text})



def _interrupt(item: Any) -> dict[str, Any]:
    """An outlast interrupt for one LangGraph ``Interrupt``."""
    value = to_jsonable_python(getattr(item, "value", None), fallback=str)
    message = value.get("message") if isinstance(value, dict) else value
    iid = str(getattr(item, "id", "") or "interrupt")
    return {"id": f"lg-{iid}", "reason": "input_required",
            "message": str(message) if message is not None else "The graph needs input.",
            "metadata": {"kind": INTERRUPT_KIND, "interruptId": iid, "value": value}}


HOST = LangGraphAgent


def serves(obj: Any) -> bool:
    """True for a compiled LangGraph graph (anything with ``astream`` and ``copy``, as
    ``StateGraph.compile()`` returns)."""
    return ToolNode is not None and hasattr(obj, "astream") and hasattr(obj, "copy")


def factory(settings: Any = None) -> LangGraphAgent:
    """``--agent NAME=outlast.agents.langgraph:factory`` with
    ``OUTLAST_LANGGRAPH_GRAPH=module:attr`` naming a compiled graph, or a function of the
    settings returning one."""
    return LangGraphAgent(load_target("OUTLAST_LANGGRAPH_GRAPH", "LangGraph host",
                                      serves, settings))
