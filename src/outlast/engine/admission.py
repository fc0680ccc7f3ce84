"""What a request becomes before the store admits it: its options (spec §3 headers),
its identity (G3), the thread's title, the protocol version its stream follows, and
the checks that each tool result it carries answers a call and each answer fits its
interrupt."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ag_ui.core import RunAgentInput

from outlast.agent import Agent, InvalidInput, in_doubt
from outlast.engine.history import ResentHistory
from outlast.engine.limits import PrincipalLimits
from outlast.errors import InvalidAnswer, InvalidRequest
from outlast.protocol.content import text_of
from outlast.protocol.jsonutil import dumps
from outlast.protocol.message_index import tool_calls
from outlast.store.base import AdmitRequest, Multitask, ResumeAnswer, Store


@dataclass(frozen=True)
class RunOptions:
    """Per-request options (spec §3 headers), after server defaults apply."""

    key: str | None = None
    on_disconnect: str = "continue"
    multitask: Multitask = "reject"
    webhook: str | None = None  # Outlast-Webhook: this run's own receiver (G12)
    trace: dict[str, str] | None = None  # the trace the run joins (outlast.tracing)


def fingerprint(agent: str, body: Mapping[str, Any]) -> str:
    """The request's identity for G3: the agent and the canonical input body."""
    canon = json.dumps({"agent": agent, "input": body}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def title_of(messages: list[dict[str, Any]]) -> str | None:
    """A thread title: the first words of the first user message."""
    for m in messages:
        if m.get("role") == "user":
            content = text_of(m.get("content"))
            if content.strip():
                text = " ".join(content.split())
                return text[:80]
    return None


def protocol_version(body: Mapping[str, Any]) -> str | None:
    """The AG-UI version the input declares (a stream's format follows it), if any."""
    version = body.get("protocolVersion")
    return version if isinstance(version, str) else None


async def check_tool_results(store: Store, principal: str, thread_id: str,
                         messages: list[dict[str, Any]]) -> None:
    """A tool result must answer a tool call of the input or of the thread: strict
    model servers refuse an orphan, and once stored it would break every later turn."""
    calls = {c.get("id") for m in messages for c in tool_calls(m)}
    orphans = [m for m in messages
               if m.get("role") == "tool" and m.get("toolCallId") not in calls]
    if not orphans:
        return
    view = await store.thread_view(principal, thread_id)
    known = set() if view is None else \
        {c.get("id") for m in view.snapshot.messages for c in tool_calls(m)}
    for message in orphans:
        if message.get("toolCallId") not in known:
            raise InvalidRequest(
                f"message {message.get('id')!r} is a tool result for tool call "
                f"{message.get('toolCallId')!r}, which no assistant message of this "
                "thread or input holds", messageId=message.get("id"))


def check_answer(interrupt: dict[str, Any], answer: ResumeAnswer) -> None:
    """Refuse an answer of the wrong shape for the interrupt it answers (an effect in
    doubt takes one of three answers), before anything is stored."""
    problem = in_doubt.answer_problem(interrupt, answer.status, answer.payload)
    if problem is not None:
        raise InvalidAnswer(f"interrupt {answer.interrupt_id!r}: {problem}",
                            interruptId=answer.interrupt_id)


def check_agent_input(agent: Agent, body: dict[str, Any]) -> None:
    """The agent's own check of a request (``Agent.check_input``), before anything is
    stored: its refusal is the client's 422."""
    if type(agent).check_input is Agent.check_input:
        return  # accepts everything: no need to build the model
    try:
        agent.check_input(RunAgentInput.model_validate(body))
    except InvalidInput as exc:
        fields = {"field": exc.field} if exc.field else {}
        raise InvalidRequest(exc.message, **fields) from None


def admit_request(principal: str, agent: str, body: dict[str, Any], options: RunOptions,
                  history: ResentHistory, limits: PrincipalLimits, *,
                  claim: tuple[str, float, int]) -> AdmitRequest:
    """What the store admits for a RunAgentInput ``body``; ``claim``: the instance, lease
    TTL and room with which to start the run in the admission's own transaction."""
    messages = body.get("messages") or []
    instance, ttl, room = claim
    return AdmitRequest(
        principal=principal, thread_id=body["threadId"], run_id=body["runId"], agent=agent,
        key=options.key or body["runId"], fingerprint=fingerprint(agent, body),
        input_json=dumps(body), input=body, protocol_version=protocol_version(body),
        options_json=dumps({"onDisconnect": options.on_disconnect,
                            "multitask": options.multitask,
                            **({"webhook": options.webhook} if options.webhook else {}),
                            **({"trace": options.trace} if options.trace else {})}),
        multitask=options.multitask,
        resume=[ResumeAnswer(r["interruptId"], r["status"], r.get("payload"))
                for r in body.get("resume") or []],
        has_new_input=bool(messages), title=title_of(messages), now=time.time(),
        resent=history.ids, check_history=history.check, check_answer=check_answer,
        claim_instance=instance, claim_ttl=ttl, claim_limit=room, claim_start=True,
        limits=limits,
    )
