"""The ADK session of a thread, and what the thread adds to it: a session service kept
in the thread's ``session_state``, and AG-UI messages (and a person's answers) as the
events and function responses ADK reads."""

from __future__ import annotations

import json
from typing import Any

from outlast.agent import Resolution
from outlast.agents.resume import call_args
from outlast.protocol.content import text_of

try:
    from google.adk.events import Event
    from google.adk.sessions import BaseSessionService, Session
    from google.genai import types
except ImportError:  # pragma: no cover - exercised only without the extra
    BaseSessionService = object  # type: ignore[assignment, misc]

CONFIRM = "adk_request_confirmation"  # ADK's long-running confirmation call
EDITED = ("Not run: the person edited the arguments, and ADK runs a confirmed call only "
          "as the model made it.")


class ThreadSessions(BaseSessionService):
    """The ADK session of one run's thread, kept in ``store`` (the host's part of the
    thread's ``session_state``): each event ADK appends is added to it (with the state
    it left), so it is saved with the next boundary snapshot."""

    def __init__(self, store: dict[str, Any]) -> None:
        self.store = store
        saved = store.get("session")
        self.session: Session | None = Session.model_validate(saved) \
            if isinstance(saved, dict) else None

    async def create_session(self, *, app_name: str, user_id: str,
                             state: dict[str, Any] | None = None,
                             session_id: str | None = None) -> Session:
        self.session = Session(app_name=app_name, user_id=user_id, id=session_id or "",
                               state=dict(state or {}))
        self._save()
        return self.session

    async def get_session(self, *, app_name: str, user_id: str, session_id: str,
                          config: Any = None) -> Session | None:
        return self.session

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> Any:
        raise NotImplementedError("one thread holds one ADK session")

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        self.session = None
        self.store.pop("session", None)

    async def append_event(self, session: Session, event: Event) -> Event:
        event = await super().append_event(session, event)
        if not event.partial:
            self._save(event)
        return event

    def _save(self, event: Event | None = None) -> None:
        if self.session is None:
            return
        saved = self.store.get("session")
        if event is None or not isinstance(saved, dict) or saved.get("id") != self.session.id \
                or len(saved.get("events") or ()) != len(self.session.events) - 1:
            self.store["session"] = json.loads(self.session.model_dump_json(exclude_none=True))
            return
        saved.setdefault("events", []).append(json.loads(event.model_dump_json(exclude_none=True)))
        saved.update(json.loads(self.session.model_dump_json(
            exclude_none=True, include={"state", "last_update_time"})))


def user_content(message: dict[str, Any]) -> Any:
    return types.Content(role="user", parts=[types.Part(text=text_of(message.get("content")))])


def to_event(m: dict[str, Any], author: str, calls: dict[str, Any], run_id: str) -> Any:
    """One AG-UI message as the ADK session event that holds it (None: nothing to hold)."""
    role = m.get("role")
    parts: list[Any] = []
    if role in ("user", "system", "developer"):
        author = "user"
        parts.append(types.Part(text=text_of(m.get("content"))))
        content_role = "user"
    elif role == "assistant":
        content_role = "model"
        if m.get("content"):
            parts.append(types.Part(text=text_of(m["content"])))
        for call in m.get("toolCalls") or ():
            args = call_args(call)
            parts.append(types.Part(function_call=types.FunctionCall(
                id=call["id"], name=call["function"]["name"],
                args=args if isinstance(args, dict) else {"arguments": args})))
    elif role == "tool" and m.get("toolCallId") in calls:
        content_role = "user"
        call = calls[m["toolCallId"]]
        parts.append(types.Part(function_response=types.FunctionResponse(
            id=call["id"], name=call["function"]["name"],
            response={"result": text_of(m.get("content"))})))
    if not parts:
        return None
    return Event(author=author, invocation_id=f"outlast-{run_id}",
                 content=types.Content(role=content_role, parts=parts))


def confirmation(answer: Resolution) -> Any:
    """The ``FunctionResponse`` ADK expects for one answered confirmation."""
    meta = answer.interrupt["metadata"]
    reason = answer.reason
    confirmed = answer.approved and answer.edited_args is None
    if answer.approved and not confirmed:
        reason = EDITED
    response: dict[str, Any] = {"confirmed": confirmed}
    if isinstance(reason, str) and reason:
        response["payload"] = {"reason": reason}
    return types.Part(function_response=types.FunctionResponse(
        id=meta["confirmationId"], name=CONFIRM, response=response))
