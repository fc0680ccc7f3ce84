"""An OTLP/HTTP trace receiver on loopback: it decodes every export the way a collector
does (protobuf ``ExportTraceServiceRequest``) and keeps the spans, so tests read what an
observability backend would."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Span:
    """One received span, its ids in hex."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    start: float
    end: float
    attributes: dict[str, Any]
    links: list[tuple[str, str]] = field(default_factory=list)  # (trace id, span id)
    status: int = 0
    service: str = ""


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


class OtlpReceiver:
    """``url`` is the base an exporter's ``OTEL_EXPORTER_OTLP_ENDPOINT`` names."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> OtlpReceiver:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                spans = []
                for resource in request.resource_spans:
                    service = next((_value(a.value) for a in resource.resource.attributes
                                    if a.key == "service.name"), "")
                    for scope in resource.scope_spans:
                        for s in scope.spans:
                            spans.append(Span(
                                s.name, s.trace_id.hex(), s.span_id.hex(),
                                s.parent_span_id.hex(), s.start_time_unix_nano / 1e9,
                                s.end_time_unix_nano / 1e9,
                                {a.key: _value(a.value) for a in s.attributes},
                                [(link.trace_id.hex(), link.span_id.hex())
                                 for link in s.links], s.status.code, str(service)))
                with receiver._lock:
                    receiver.requests += 1
                    receiver.spans.extend(spans)
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def env(self) -> dict[str, str]:
        """The standard variables that send a server's traces here, promptly."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.url, "OTEL_BSP_SCHEDULE_DELAY": "100",
                "OTEL_SERVICE_NAME": "outlast-test"}

    def of_run(self, run_id: str) -> list[Span]:
        with self._lock:
            return [s for s in self.spans if s.attributes.get("outlast.run_id") == run_id]
