"""The ``demo`` agent: a deterministic, offline "plan then execute todos" loop.

It behaves like a long autonomous tool loop: streams text token by token,
keeps a todo list in shared state (``STATE_DELTA``), runs tools with
realistic delays as journaled effects (one line each in
``<workspace>/effects.log``), asks for approval before risky steps, and
resumes from its last boundary after a crash. Knobs go in
``forwardedProps.demo``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ag_ui.core import RunAgentInput

from outlast.agent import (
    NOT_DONE,
    Agent,
    AgentError,
    Capabilities,
    InvalidInput,
    RunContext,
    in_doubt,
)
from outlast.agents.calls import approval_schema

TOOLS = [
    ("search_docs", "Searching the documentation for the relevant API"),
    ("read_file", "Reading the module that needs the change"),
    ("edit_file", "Applying the change to the module"),
    ("run_tests", "Running the test suite"),
    ("write_report", "Writing up what changed and why"),
]
# What the demo says after each message's lead, a whole sentence at a time.
FILLER = (
    "The run keeps going while your phone sleeps.",
    "Every token is stored before anyone sees it.",
    "Nothing is repeated.",
    "A reload picks up where the stream left off.",
    "Nothing is lost.",
    "Each step is written down first.",
    "The work goes on.",
)
LIMITS = {"steps": 1000, "step_delay_ms": 100_000, "tokens_per_message": 100_000,
          "token_delay_ms": 100_000}


def filler(budget: int, salt: int) -> list[str]:
    """Whole sentences of ``FILLER``, at most ``budget`` words in all, from ``salt`` on."""
    words: list[str] = []
    for i in range(budget):  # each round adds a sentence or ends
        for j in range(len(FILLER)):
            sentence = FILLER[(salt + i + j) % len(FILLER)].split()
            if len(words) + len(sentence) <= budget:
                words += sentence
                break
        else:
            return words
    return words


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class Knobs:
    """Pace and shape of a demo run (``forwardedProps.demo``)."""

    steps: int = 5
    step_delay_ms: int = 3000
    tokens_per_message: int = 24
    token_delay_ms: int = 60
    approve_at: list[int] = field(default_factory=list)
    fail_at: int | None = None
    reconcile: bool = True
    think: bool = False  # reason (AG-UI 1.0 REASONING_*) before each step
    delegate: bool = False  # a subagent reviews the work at the end (SUBAGENT_*)
    blocking: bool = False  # each step's tool is a blocking call in a thread

    @classmethod
    def parse(cls, props: Any) -> Knobs:
        """The knobs of ``forwardedProps``; ``InvalidInput`` naming the first knob of the
        wrong type or range, or one the demo does not know (a typo would pass unseen)."""
        raw = props.get("demo") if isinstance(props, dict) else None
        if raw is None:
            return cls()
        where = "forwardedProps.demo"
        if not isinstance(raw, dict):
            raise InvalidInput(f"{where} must be an object of knobs", field=where)
        knobs = cls()
        known = {f.name for f in fields(cls)}
        for name, value in raw.items():
            what = f"{where}.{name}"
            if name not in known:
                raise InvalidInput(f"{what} is not a demo knob (the knobs: "
                                   f"{', '.join(sorted(known))})", field=what)
            if name in LIMITS:
                if not _is_int(value) or not 0 <= value <= LIMITS[name]:
                    raise InvalidInput(f"{what} must be a whole number from 0 to "
                                       f"{LIMITS[name]}, not {_shown(value)}", field=what)
            elif name == "approve_at":
                if not isinstance(value, list) or not all(_is_int(a) for a in value):
                    raise InvalidInput(f"{what} must be a list of step numbers, not "
                                       f"{_shown(value)}", field=what)
            elif name == "fail_at":
                if value is not None and not _is_int(value):
                    raise InvalidInput(f"{what} must be a step number, not "
                                       f"{_shown(value)}", field=what)
            elif not isinstance(value, bool):
                raise InvalidInput(f"{what} must be true or false, not {_shown(value)}",
                                   field=what)
            setattr(knobs, name, value)
        return knobs


def _tag(run_id: str) -> str:
    """A short, collision-resistant stand-in for a run id inside tool call ids."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:10]


def _has_call(messages: list[dict[str, Any]], call_id: str) -> bool:
    return any(call.get("id") == call_id
               for m in messages for call in m.get("toolCalls") or ())


def _has_result(messages: list[dict[str, Any]], call_id: str) -> bool:
    return any(m.get("role") == "tool" and m.get("toolCallId") == call_id for m in messages)


class DemoAgent(Agent):
    """Plans ``steps`` todos, then executes them one tool call at a time."""

    capabilities = Capabilities(
        description="Deterministic offline plan-and-execute loop with tools, approvals and "
                    "shared-state todos; pace it with forwardedProps.demo.",
        supports_resume=True, interrupts=True, journaled_effects=True,
    )

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace

    def check_input(self, run_input: RunAgentInput) -> None:
        """Knobs of the wrong type or range are refused at admission (a 422 naming
        the knob), not ignored."""
        Knobs.parse(run_input.forwarded_props)

    @property
    def effects_log(self) -> Path:
        return self.workspace / "effects.log"

    async def run(self, ctx: RunContext) -> None:
        demo = ctx.session_state.get("demo")
        if ctx.resume and isinstance(demo, dict):
            await self._answer(ctx, demo)
        elif ctx.resumed and isinstance(demo, dict) and demo.get("phase") == "working" \
                and demo.get("run_id") == ctx.run_id:
            pass  # crash resume: carry on from the step the last boundary recorded
        else:
            demo = await self._plan(ctx)
        await self._work(ctx, demo)

    # -- phases -----------------------------------------------------------
    async def _plan(self, ctx: RunContext) -> dict[str, Any]:
        knobs = Knobs.parse(ctx.forwarded_props)
        demo: dict[str, Any] = {
            "knobs": asdict(knobs), "run_id": ctx.run_id, "next_step": 1,
            "phase": "working", "approved": {}, "denied": {},
        }
        if knobs.steps == 0:
            await self._say(ctx, knobs, "Here is a short answer, streamed token by token.", 0)
            demo["phase"] = "done"
            ctx.session_state["demo"] = demo
            return demo
        todos = [{"id": f"todo-{i}", "title": TOOLS[(i - 1) % len(TOOLS)][1],
                  "tool": TOOLS[(i - 1) % len(TOOLS)][0], "status": "pending"}
                 for i in range(1, knobs.steps + 1)]
        await self._say(ctx, knobs, f"Plan: I will work through {knobs.steps} steps.", 0)
        # A snapshot, not a delta: the plan establishes the state a client folds (a
        # delta before any snapshot has no base a joining client can see).
        state = ctx.state if isinstance(ctx.state, dict) else {}
        await ctx.emit({"type": "STATE_SNAPSHOT", "snapshot": {**state, "todos": todos}})
        ctx.session_state["demo"] = demo
        return demo

    async def _answer(self, ctx: RunContext, demo: dict[str, Any]) -> None:
        demo["run_id"] = ctx.run_id
        demo["phase"] = "working"
        for answer in ctx.resume:
            meta = answer.interrupt.get("metadata") or {}
            step = meta.get("step")
            if in_doubt.is_question(answer.interrupt):  # about effect "step-N"
                n = str(meta.get("effect")).removeprefix("step-")
                step = int(n) if n.isdigit() else None
            if not isinstance(step, int):
                continue
            if in_doubt.is_question(answer.interrupt):
                # The step's tool was cut off by a crash: the engine applies the person's
                # answer when the step reaches its effect again.
                demo["approved"][str(step)] = {
                    "args": meta.get("args", {}),
                    "toolCallId": answer.interrupt.get("toolCallId")}
            elif answer.approved:
                payload = answer.payload if isinstance(answer.payload, dict) else {}
                edited = payload.get("editedArgs")
                args = edited if isinstance(edited, dict) else meta.get("args", {})
                demo["approved"][str(step)] = {
                    "args": args, "toolCallId": answer.interrupt.get("toolCallId")}
            else:
                demo["denied"][str(step)] = {"toolCallId": answer.interrupt.get("toolCallId")}
        ctx.session_state["demo"] = demo

    async def _work(self, ctx: RunContext, demo: dict[str, Any]) -> None:
        knobs = Knobs(**demo["knobs"])
        while demo["phase"] == "working" and demo["next_step"] <= knobs.steps:
            step = demo["next_step"]
            await self._step(ctx, knobs, demo, step)
            demo["next_step"] = step + 1
            ctx.session_state["demo"] = demo
        if demo["phase"] == "working":
            if knobs.delegate:
                await self._review(ctx, knobs)
            await self._say(ctx, knobs, f"All {knobs.steps} steps are done.", 0)
            demo["phase"] = "done"
            ctx.session_state["demo"] = demo

    async def _skip_denied(self, ctx: RunContext, knobs: Knobs, step: int, tool: str,
                           denied: dict[str, Any]) -> None:
        """A step the person did not approve: its call answered so, the step skipped."""
        if denied.get("toolCallId") and not _has_result(ctx.messages, denied["toolCallId"]):
            await ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": ctx.new_id("result"),
                            "toolCallId": denied["toolCallId"], "role": "tool",
                            "content": "Not run: the person did not approve it."})
            denied["answered"] = True
        await self._todo(ctx, step, "skipped")
        await self._say(ctx, knobs, f"Skipped step {step} ({tool}): not approved.", step)

    async def _propose(self, ctx: RunContext, knobs: Knobs, demo: dict[str, Any], step: int,
                       args: dict[str, Any]) -> None:
        """Propose the step's call the AG-UI way and end the run waiting for a person: the
        tool call is in the transcript, its result comes after the person answers (in
        the continuation run)."""
        tool, title = TOOLS[(step - 1) % len(TOOLS)]
        call_id = f"call_{_tag(ctx.run_id)}_{step}"
        if _has_call(ctx.messages, call_id):  # proposed by an attempt that crashed
            call_id = f"{call_id}_{ctx.attempt}"
        message_id = await self._say(ctx, knobs, f"Step {step}: {title} needs approval.", step)
        await self._call(ctx, call_id, tool, args, message_id)
        await self._todo(ctx, step, "awaiting_approval")
        demo["phase"] = "awaiting"
        ctx.session_state["demo"] = demo
        await ctx.interrupt({
            "id": f"approve-{call_id}", "reason": "tool_call", "toolCallId": call_id,
            "message": f"Step {step} wants to run {tool}({json.dumps(args)}). Approve?",
            "responseSchema": approval_schema(reason=False, edits=True),
            "metadata": {"tool": tool, "args": args, "step": step},
        })

    async def _step(self, ctx: RunContext, knobs: Knobs, demo: dict[str, Any],
                    step: int) -> None:
        tool, title = TOOLS[(step - 1) % len(TOOLS)]
        approved = demo["approved"].get(str(step))
        args: dict[str, Any] = {"step": step, "target": f"module_{step}.py"}
        denied = demo["denied"].get(str(step)) if isinstance(demo["denied"], dict) else None
        if denied is not None:
            await self._skip_denied(ctx, knobs, step, tool, denied)
            return
        if step in knobs.approve_at and approved is None:
            await self._propose(ctx, knobs, demo, step, args)
        if approved is not None and approved.get("toolCallId") \
                and not _has_result(ctx.messages, approved["toolCallId"]):
            # The call was made before the interrupt: only its result is missing.
            # (After a crash resume it may have one already: then a fresh call follows,
            # so no call ever gets two results.)
            call_id = approved["toolCallId"]
            args = approved["args"]
            await self._todo(ctx, step, "in_progress")
        else:
            if approved is not None:
                args = approved["args"]
            call_id = f"call_{_tag(ctx.run_id)}_{step}_{ctx.attempt}"
            await self._todo(ctx, step, "in_progress")
            if knobs.think:
                await self._think(ctx, knobs, f"Step {step} calls for {tool}.", step)
            message_id = await self._say(ctx, knobs, f"Step {step}: {title}.", step)
            await self._call(ctx, call_id, tool, args, message_id)
        if knobs.fail_at == step:
            raise AgentError(f"Tool {tool} failed at step {step}.", code="tool_failed")
        # Cut off by a crash, the tool asks a person whether it ran (unless the demo's
        # reconcile check finds out): the run ends here with the question.
        result = await self._execute(ctx, knobs, step, tool, call_id, args)
        await ctx.emit({"type": "TOOL_CALL_RESULT", "messageId": ctx.new_id("result"),
                        "toolCallId": call_id, "role": "tool", "content": result})
        await self._todo(ctx, step, "done")

    async def _execute(self, ctx: RunContext, knobs: Knobs, step: int, tool: str,
                       call_id: str, args: dict[str, Any]) -> str:
        line_prefix = f"{ctx.run_id} {step} "
        shown = json.dumps(args, sort_keys=True)  # a recovered result names its args too

        async def run_tool() -> str:
            line = f"{line_prefix}{call_id}\n"
            if knobs.blocking:  # once begun, nothing stops it: the thread runs to its end
                await asyncio.to_thread(self._blocking_call, knobs.step_delay_ms / 1000, line)
            else:
                await asyncio.sleep(knobs.step_delay_ms / 1000)
                await asyncio.to_thread(self._record, line)
            return f"{tool} finished step {step} with {shown}"

        async def reconcile() -> Any:
            # The effect is checkable from outside: its line is either there or not.
            if self.effects_log.exists():
                for line in self.effects_log.read_text("utf-8").splitlines():
                    if line.startswith(line_prefix):
                        return f"{tool} finished step {step} with {shown} (recovered)"
            return NOT_DONE

        result = await ctx.effect(
            f"step-{step}", run_tool, reconcile=reconcile if knobs.reconcile else None,
            tool=tool, args=args, tool_call_id=call_id, interruptible=not knobs.blocking)
        return result if isinstance(result, str) else json.dumps(result)

    def _blocking_call(self, seconds: float, line: str) -> None:
        """A tool that blocks (a synchronous client): it waits, then has its effect."""
        time.sleep(seconds)
        self._record(line)

    def _record(self, line: str) -> None:
        """The tool's side effect: one durable line in effects.log."""
        self.workspace.mkdir(parents=True, exist_ok=True)
        with open(self.effects_log, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    # -- pieces -----------------------------------------------------------
    async def _call(self, ctx: RunContext, call_id: str, tool: str, args: dict[str, Any],
                    message_id: str) -> None:
        await ctx.emit({"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": tool,
                        "parentMessageId": message_id})
        await ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": call_id,
                        "delta": json.dumps(args)})
        await ctx.emit({"type": "TOOL_CALL_END", "toolCallId": call_id})

    async def _todo(self, ctx: RunContext, step: int, status: str) -> None:
        todos = (ctx.state or {}).get("todos") if isinstance(ctx.state, dict) else None
        if not isinstance(todos, list) or len(todos) < step:
            return
        await ctx.emit({"type": "STATE_DELTA", "delta": [
            {"op": "replace", "path": f"/todos/{step - 1}/status", "value": status}]})

    async def _say(self, ctx: RunContext, knobs: Knobs, lead: str, salt: int, *,
                   kind: str = "TEXT_MESSAGE", role: str = "assistant",
                   tags: dict[str, Any] | None = None) -> str:
        """Stream one message (``kind``: ``TEXT_MESSAGE`` or ``REASONING_MESSAGE``)."""
        message_id = ctx.new_id("msg")
        tags = tags or {}
        await ctx.emit({"type": f"{kind}_START", "messageId": message_id, "role": role,
                        **tags})
        tokens = lead.split()
        tokens += filler(knobs.tokens_per_message - len(tokens), salt)
        for i, token in enumerate(tokens):
            await ctx.emit({"type": f"{kind}_CONTENT", "messageId": message_id,
                            "delta": token if i == 0 else " " + token, **tags})
            if knobs.token_delay_ms:
                await asyncio.sleep(knobs.token_delay_ms / 1000)
        await ctx.emit({"type": f"{kind}_END", "messageId": message_id, **tags})
        return message_id

    async def _think(self, ctx: RunContext, knobs: Knobs, lead: str, salt: int) -> None:
        """A reasoning phase holding one reasoning message (AG-UI 1.0)."""
        phase = ctx.new_id("reasoning")
        await ctx.emit({"type": "REASONING_START", "messageId": phase})
        await self._say(ctx, knobs, lead, salt + 3, kind="REASONING_MESSAGE", role="reasoning")
        await ctx.emit({"type": "REASONING_END", "messageId": phase})

    async def _review(self, ctx: RunContext, knobs: Knobs) -> None:
        """A subagent, "reviewer", looks the work over (AG-UI 1.0 SUBAGENT_*): its
        messages carry its ``subagentRunId``."""
        sub = f"reviewer-{_tag(ctx.run_id)}-{ctx.attempt}"
        await ctx.emit({"type": "SUBAGENT_STARTED", "subagentRunId": sub, "name": "reviewer",
                        "description": "Checks the finished steps"})
        tags = {"subagentRunId": sub}
        if knobs.think:
            phase = ctx.new_id("reasoning")
            await ctx.emit({"type": "REASONING_START", "messageId": phase, **tags})
            await self._say(ctx, knobs, "Reviewing each step's result.", 11,
                            kind="REASONING_MESSAGE", role="reasoning", tags=tags)
            await ctx.emit({"type": "REASONING_END", "messageId": phase, **tags})
        await self._say(ctx, knobs, f"Review: all {knobs.steps} steps look right.", 13,
                        tags=tags)
        await ctx.emit({"type": "SUBAGENT_FINISHED", "subagentRunId": sub})


