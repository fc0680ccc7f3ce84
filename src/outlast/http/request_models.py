"""Request bodies as pydantic models: what the OpenAPI document shows and what FastAPI
validates, once, before a route runs (``JsonBodyRoute`` reads the bytes within limits).

Limits that depend on the server's settings (id length, message count) are checked
after, by ``check_limits``; the models hold everything else.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ag_ui.core import ResumeEntry as AgUiResumeEntry
from ag_ui.core import RunAgentInput as AgUiRunAgentInput
from pydantic import BaseModel, BeforeValidator, Field, ValidationError

from outlast.config import Settings
from outlast.errors import InvalidRequest
from outlast.http.deps import ID_DOC

# The id rule (ECMA-262 and Rust regex alike read "$" as the very end); the length
# limit is the server's max_id_length, checked by check_limits.
Id = Annotated[str, Field(pattern=ID_DOC["pattern"], json_schema_extra={"maxLength": 200})]


class AgentResumeEntry(AgUiResumeEntry):
    """An AG-UI resume entry whose ``interruptId`` follows the id rule."""

    interrupt_id: Id


class RunAgentInput(AgUiRunAgentInput):
    """AG-UI's ``RunAgentInput`` (the official type), with our rule for ids."""

    thread_id: Id
    run_id: Id
    resume: list[AgentResumeEntry] | None = None  # type: ignore[assignment]


class Approval(BaseModel):
    """The payload answering an approval interrupt (the demo's risky tool, and
    any agent's ``approval`` interrupt)."""

    approved: bool
    editedArgs: dict[str, Any] | None = Field(
        default=None, description="Arguments to call the tool with instead of the proposed ones")


class ResumeEntry(BaseModel):
    """One answer to a pending interrupt."""

    interruptId: Id
    status: Literal["resolved", "cancelled"]
    payload: Approval | Any = Field(
        default=None, description="The answer the agent asked for: for an approval "
        '`{"approved": bool, "editedArgs"?: {...}}`; any JSON value otherwise')


class ResumeBody(BaseModel):
    """``POST /threads/{thread_id}/resume``: answers to every pending interrupt."""

    resume: list[ResumeEntry] = Field(min_length=1)
    runId: Id | None = Field(default=None, description="The continuation run's id "
                             "(also its idempotency key when no Idempotency-Key is sent)")
    forwardedProps: Any = Field(default=None, description="Passed to the agent untouched")


def _whole(value: Any) -> Any:
    """A float with no fraction as the int it spells; anything else as it came."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class ForkPointRef(BaseModel):
    """A safe boundary of a thread: after event ``seq`` of run ``runId``."""

    model_config = {"extra": "forbid"}

    runId: Id
    # Strict (no "3", no true), but 3.0 is the integer 3 in JSON, as the schema says.
    seq: Annotated[int, BeforeValidator(_whole)] = Field(ge=1, le=2**53 - 1, strict=True)


class ForkBody(BaseModel):
    """``POST /threads/{thread_id}/fork``: where to branch, and the new thread's id."""

    model_config = {"extra": "forbid"}

    threadId: Id | None = Field(default=None, description="The new thread's id (default: "
                                "a fresh UUID); 409 `thread_id_conflict` when taken")
    asOf: ForkPointRef | None = Field(default=None, description="A safe boundary of the "
                                      "thread (default: its latest)")
    beforeMessageId: Id | None = Field(default=None, description="Branch at the boundary "
                                       "just before this message (edit and regenerate)")


def check_length(value: str, what: str, max_length: int) -> None:
    """An id within the server's ``max_id_length``."""
    if len(value) > max_length:
        raise InvalidRequest(f"{what} is longer than {max_length} characters", field=what)


def check_limits(body: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The settings-dependent limits of a validated RunAgentInput or resume body."""
    max_id = settings.max_id_length
    for what in ("threadId", "runId"):
        if isinstance(body.get(what), str):
            check_length(body[what], what, max_id)
    messages = body.get("messages") or []
    if len(messages) > settings.max_messages:
        raise InvalidRequest(f"at most {settings.max_messages} messages per request",
                             limit=settings.max_messages)
    for m in messages:
        if not m.get("id") or len(m["id"]) > max_id:
            raise InvalidRequest(f"every message needs an id of 1 to {max_id} characters",
                                 field="messages")
    for entry in body.get("resume") or []:
        check_length(entry["interruptId"], "resume[].interruptId", max_id)
    return body


def parse_input(raw: Any, settings: Settings) -> dict[str, Any]:
    """A RunAgentInput checked outside a ``JsonBodyRoute`` (the same model and limits)."""
    try:
        RunAgentInput.model_validate(raw)
    except ValidationError as exc:
        problems = [{"loc": [str(p) for p in e["loc"]], "msg": e["msg"]}
                    for e in exc.errors()[:20]]
        raise InvalidRequest("the body is not a valid RunAgentInput", problems=problems) from None
    body: dict[str, Any] = raw
    return check_limits(body, settings)
