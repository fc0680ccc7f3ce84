"""OpenTelemetry traces of runs (``pip install "outlast[otel]"``), off unless the
standard ``OTEL_*`` variables ask for OTLP: ``OTEL_TRACES_EXPORTER=otlp`` or an
``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT``, and not ``OTEL_SDK_DISABLED=true``. Off, every
hook is a constant no-op: nothing is imported, nothing allocated per event.

The spans of one run, whichever processes execute it:

- ``outlast.run`` (``invoke_agent {agent}``): admission decides its trace and span id,
  as a child of the creating request's W3C ``traceparent`` (or a new trace), and stores
  them with the run; the process that ends the run emits it, from the run's creation
  to its end, with that very id (``_Ids``), so every attempt's spans nest under it;
- ``outlast.attempt``: one per attempt, a crash resume's linked to the run span too;
- ``chat {model}``: one per model call the agent reports (GenAI semantic conventions:
  model, provider, tokens in and out, finish reason), from the end of what the run
  did before it (its start, a tool's end, the previous call's end) to the report;
- ``execute_tool {tool}``: one per journaled effect that runs;
- ``outlast.interrupt.wait``: from the interrupted run's end to the answer, in the
  continuation's trace;
- ``outlast.commit``: one per group commit (runs and events in it).

Every span about a run carries ``outlast.run_id`` and ``outlast.thread_id``.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import secrets
import time
from collections.abc import Iterator, Mapping
from typing import Any

from outlast.errors import MissingDependency

_FIXED_IDS: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "outlast_span_ids", default=None)
_NS = 1_000_000_000


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    """True when the standard variables ask for OTLP traces."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter and exporter != "otlp":
        return False
    return exporter == "otlp" or bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                                      or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def parse_traceparent(value: str | None) -> tuple[int, int] | None:
    """A W3C ``traceparent``'s (trace id, span id), or None for a missing or bad one."""
    if not value:
        return None
    parts = value.strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id = int(parts[1], 16), int(parts[2], 16)
    except ValueError:
        return None
    return (trace_id, span_id) if trace_id and span_id else None


class Tracing:
    """The process's tracer, or nothing."""

    def __init__(self) -> None:
        self.tracer: Any = None
        self._provider: Any = None
        self._api: Any = None

    @property
    def on(self) -> bool:
        return self.tracer is not None

    def configure(self, env: Mapping[str, str] = os.environ) -> None:
        """Turn tracing on if the environment asks for it (MissingDependency without
        the extra)."""
        if not wanted(env):
            return
        try:
            from opentelemetry import trace
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            raise MissingDependency("opentelemetry-sdk", "otel") from None
        provider = TracerProvider(resource=Resource.create({"service.name": env.get(
            "OTEL_SERVICE_NAME") or "outlast"}), id_generator=_ids())
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        self._provider, self._api = provider, trace
        self.tracer = provider.get_tracer("outlast")

    def shutdown(self) -> None:
        """Export what is pending (a clean stop)."""
        if self._provider is not None:
            self._provider.shutdown()

    # -- a run's trace ------------------------------------------------------
    def new_run(self, traceparent: str | None) -> dict[str, str] | None:
        """The trace a new run joins (kept with the run): its own span id, in the trace
        of the creating request's ``traceparent`` (its parent) or a new one."""
        if not self.on:
            return None
        parent = parse_traceparent(traceparent)
        trace_id = parent[0] if parent else secrets.randbits(128) or 1
        span_id = secrets.randbits(64) or 1
        out = {"traceparent": f"00-{trace_id:032x}-{span_id:016x}-01"}
        if parent:
            out["parent"] = f"{parent[1]:016x}"
        return out

    def _remote(self, trace_id: int, span_id: int) -> Any:
        """The context of a span this process did not start (a run's, a request's)."""
        api = self._api
        return api.SpanContext(trace_id, span_id, is_remote=True,
                               trace_flags=api.TraceFlags(1))

    @contextlib.contextmanager
    def attempt(self, run: Any) -> Iterator[None]:
        """The span of one attempt, current while it runs (its agent's task inherits it).
        Holds nothing of ``run`` meanwhile (its record may carry the whole input)."""
        if not self.on:
            del run
            yield
            return
        api = self._api
        ids = parse_traceparent((run.options.get("trace") or {}).get("traceparent"))
        attributes = {**_about(run), "outlast.attempt": run.attempts,
                      "gen_ai.agent.name": run.agent}
        resumed = run.attempts > 1
        del run
        parent, links = None, []
        if ids is not None:  # under the run's span; a resumed attempt linked to it too
            parent = api.set_span_in_context(api.NonRecordingSpan(self._remote(*ids)))
            if resumed:
                links = [api.Link(self._remote(*ids), {"outlast.link": "resumed run"})]
        with self.tracer.start_as_current_span("outlast.attempt", context=parent,
                                               links=links, attributes=attributes):
            yield

    def run_ended(self, run: Any, status: str, error: Mapping[str, Any] | None = None) -> None:
        """Emit the run's span, with the id admission gave it, from its creation to now."""
        trace = run.options.get("trace") if self.on else None
        ids = parse_traceparent((trace or {}).get("traceparent"))
        if ids is None:
            return
        api = self._api
        parent_id = (trace or {}).get("parent")
        if parent_id:  # the creating request's span
            parent = api.set_span_in_context(api.NonRecordingSpan(
                self._remote(ids[0], int(parent_id, 16))))
        else:  # the root of its own trace
            parent = api.set_span_in_context(api.INVALID_SPAN)
        token = _FIXED_IDS.set(ids)
        try:
            span = self.tracer.start_span(
                f"invoke_agent {run.agent}", context=parent,
                start_time=int(run.created_at * _NS),
                attributes={**_about(run), "gen_ai.operation.name": "invoke_agent",
                            "gen_ai.agent.name": run.agent, "outlast.status": status,
                            "outlast.attempts": run.attempts})
        finally:
            _FIXED_IDS.reset(token)
        if error:
            span.set_status(api.Status(api.StatusCode.ERROR, str(error.get("message"))))
            span.set_attribute("error.type", str(error.get("code")))
        span.end()

    def model_call(self, run: Any, started: float, usage: Any,
                   finish_reason: str | None) -> None:
        """A ``chat`` span for one reported model call (GenAI conventions)."""
        if not self.on:
            return
        attributes: dict[str, Any] = {**_about(run), "gen_ai.operation.name": "chat"}
        for key, value in (("gen_ai.request.model", usage.model),
                           ("gen_ai.response.model", usage.model),
                           ("gen_ai.provider.name", usage.provider),
                           ("gen_ai.usage.input_tokens", usage.input_tokens),
                           ("gen_ai.usage.output_tokens", usage.output_tokens)):
            if value is not None:
                attributes[key] = value
        if finish_reason:
            attributes["gen_ai.response.finish_reasons"] = [finish_reason]
        span = self.tracer.start_span(f"chat {usage.model or ''}".strip(),
                                      start_time=int(started * _NS), attributes=attributes,
                                      kind=self._api.SpanKind.CLIENT)
        span.end()

    @contextlib.contextmanager
    def tool(self, run: Any, key: str, tool: str | None,
             call_id: str | None) -> Iterator[None]:
        """An ``execute_tool`` span around one journaled effect that runs."""
        if not self.on:
            yield
            return
        attributes: dict[str, Any] = {**_about(run), "gen_ai.operation.name": "execute_tool",
                                      "outlast.effect": key}
        if tool:
            attributes["gen_ai.tool.name"] = tool
        if call_id:
            attributes["gen_ai.tool.call.id"] = call_id
        with self.tracer.start_as_current_span(f"execute_tool {tool or key}",
                                               attributes=attributes):
            yield

    async def waited(self, run: Any, answered: list[Any], store: Any) -> list[Any]:
        """An ``outlast.interrupt.wait`` span per interrupt a continuation answers, from
        the interrupted run's end to the answer; ``answered``, unchanged."""
        if not self.on or not answered:
            return answered
        for record in answered:
            raised = await store.get_run_by_rid(record.rid)
            start = raised.finished_at if raised is not None and raised.finished_at else \
                record.answered_at or time.time()
            span = self.tracer.start_span("outlast.interrupt.wait", start_time=int(
                start * _NS), attributes={
                **_about(run), "outlast.interrupt_id": record.id,
                "outlast.interrupt.reason": str(record.body.get("reason") or ""),
                "outlast.interrupt.status": str((record.resolution or {}).get("status")),
                "outlast.interrupted_run_id": record.run_id})
            span.end(end_time=int((record.answered_at or time.time()) * _NS))
        return answered

    @contextlib.contextmanager
    def commit(self, writes: list[Any]) -> Iterator[None]:
        """An ``outlast.commit`` span around one group commit."""
        if not self.on:
            yield
            return
        with self.tracer.start_as_current_span(
                "outlast.commit", context=self._api.set_span_in_context(
                    self._api.INVALID_SPAN),
                attributes={"outlast.commit.runs": len(writes),
                            "outlast.commit.events": sum(len(w.events) for w in writes)}):
            yield


def _about(run: Any) -> dict[str, Any]:
    """A run record's ids, or a run context's."""
    return {"outlast.run_id": getattr(run, "id", None) or run.run_id,
            "outlast.thread_id": run.thread_id}


def _ids() -> Any:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class Ids(RandomIdGenerator):
        """Random ids, but the run span's own (admission chose them) when one is
        being emitted."""

        def generate_span_id(self) -> int:
            fixed = _FIXED_IDS.get()
            return fixed[1] if fixed is not None else super().generate_span_id()

        def generate_trace_id(self) -> int:
            fixed = _FIXED_IDS.get()
            return fixed[0] if fixed is not None else super().generate_trace_id()

    return Ids()


TRACING = Tracing()
"""The process's tracing (``configure`` once at start-up)."""
