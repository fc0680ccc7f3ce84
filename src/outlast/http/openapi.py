"""The OpenAPI document as this server enforces it: FastAPI derives it from the routes
and models, and this module adds what they cannot say — the bearer scheme when tokens
are on, the server's own id and list limits, the agents registered, the rules between
fields, and the links a client follows from a run to its thread, events and answers."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from outlast.config import Settings
from outlast.engine.runtime import Engine
from outlast.http.auth import Principals
from outlast.http.deps import ID_DOC, SEQ_PATTERN

# What needs no token (spec §6): probes, the web client, the documentation.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/"})
ID_PATTERN = ID_DOC["pattern"]
MAX_WEBHOOK_URL = 2048


def install(app: FastAPI, engine: Engine, principals: Principals) -> None:
    """Serve the document below (built once, on first request) as ``app.openapi()``."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version,
                              description=app.description, routes=app.routes)
            app.openapi_schema = document(doc, engine.settings, sorted(engine.agents),
                                          principals.enabled)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def document(doc: dict[str, Any], settings: Settings, agents: list[str],
             tokens: bool) -> dict[str, Any]:
    """``doc`` (FastAPI's) made to say what the server enforces."""
    doc = copy.deepcopy(doc)
    schemas = doc.get("components", {}).get("schemas", {})
    for operation in _operations(doc):
        for param in operation.get("parameters", []):
            _parameter(param, settings, agents)
        operation["parameters"] = [p for p in operation.get("parameters", [])
                                   if not _dropped(p, settings)]
    _ids(doc, settings.max_id_length)
    _discriminators(doc, schemas)
    _messages(schemas, settings)
    _fork_body(schemas)
    if tokens:
        doc.setdefault("components", {})["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer",
                       "description": "A token of the server's --tokens-file"}}
        doc["security"] = [{"bearer": []}]
        for path, item in doc["paths"].items():
            if path in OPEN_PATHS:
                for operation in item.values():
                    operation["security"] = []
    _links(doc)
    return doc


def _operations(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for item in doc["paths"].values():
        yield from item.values()


def _parameter(param: dict[str, Any], settings: Settings, agents: list[str]) -> None:
    """A header or query value is a string (or the type declared), never null: FastAPI
    spells an optional one ``anyOf [T, null]``, which no HTTP request can send."""
    schema = param.get("schema", {})
    branches = schema.get("anyOf")
    if isinstance(branches, list):
        kept = [b for b in branches if b.get("type") != "null"]
        if len(kept) == 1:
            del schema["anyOf"]
            schema.update({**kept[0], **schema})
    name = param["name"]
    if name in ("Last-Event-ID", "after"):
        schema.pop("maxLength", None)
        schema.update({"type": "string", "pattern": SEQ_PATTERN})
    elif name == "principal":
        schema["pattern"] = ID_PATTERN  # then _ids gives it the server's length
    elif name == "agent" and param["in"] == "path":
        schema["enum"] = sorted(agents)
    elif name == "Outlast-Webhook" and settings.webhook_allow:
        prefixes = "|".join(re.escape(p) for p in settings.webhook_allow)
        schema.pop("format", None)
        schema.update({"pattern": f"^(?:{prefixes})", "maxLength": MAX_WEBHOOK_URL})


def _dropped(param: dict[str, Any], settings: Settings) -> bool:
    """``Outlast-Webhook`` is refused whatever its value without a --webhook-allow."""
    return param["name"] == "Outlast-Webhook" and not settings.webhook_allow


def _walk(node: Any, visit: Callable[[dict[str, Any]], None]) -> None:
    if isinstance(node, dict):
        visit(node)
        for value in node.values():
            _walk(value, visit)
    elif isinstance(node, list):
        for value in node:
            _walk(value, visit)


def _ids(doc: dict[str, Any], max_length: int) -> None:
    """Every id follows the id rule, up to the server's ``max_id_length``."""

    def visit(node: dict[str, Any]) -> None:
        if node.get("pattern") == ID_PATTERN:
            node["maxLength"] = max_length

    _walk(doc, visit)


def _discriminators(doc: dict[str, Any], schemas: dict[str, Any]) -> None:
    """A union's member names its tag (a message its ``role``, a content part its
    ``type``): the server reads the tag to know which member it is, so it is required,
    though each model has it as a default."""

    def visit(node: dict[str, Any]) -> None:
        tag = node.get("discriminator", {}).get("propertyName")
        for ref in node.get("discriminator", {}).get("mapping", {}).values():
            member = schemas.get(ref.rsplit("/", 1)[-1])
            if tag and member is not None and tag in member.get("properties", {}):
                member["required"] = sorted({*member.get("required", []), tag})

    _walk(doc, visit)


def _messages(schemas: dict[str, Any], settings: Settings) -> None:
    """A message has an id of 1 to ``max_id_length`` characters; an input holds at
    most ``max_messages``."""
    for name, schema in schemas.items():
        props = schema.get("properties", {})
        if name.endswith("Message") and "role" in props and "id" in props:
            schema["required"] = sorted({*schema.get("required", []), "id"})
            props["id"].update({"minLength": 1, "maxLength": settings.max_id_length})
    run_input = schemas.get("RunAgentInput", {}).get("properties", {})
    if "messages" in run_input:
        run_input["messages"]["maxItems"] = settings.max_messages


def _fork_body(schemas: dict[str, Any]) -> None:
    """A fork names its boundary by ``asOf`` or by ``beforeMessageId``, not both."""
    body = schemas.get("ForkBody")
    if body is not None:
        body["not"] = {"required": ["asOf", "beforeMessageId"], "properties": {
            "asOf": {"type": "object"}, "beforeMessageId": {"type": "string"}}}


RUN = {"run_id": "$response.header.Outlast-Run-Id"}
THREAD = {"thread_id": "$response.header.Outlast-Thread-Id"}


def _links(doc: dict[str, Any]) -> None:
    """OpenAPI links: where a response's ids lead (a client's next requests)."""
    by_body = {"thread_id": "$response.body#/threadId"}
    answer = {"resume": [{"interruptId": "$response.body#/interrupts/0/id",
                          "status": "resolved", "payload": {"approved": True}}]}
    run_of = {"run_id": "$response.body#/run/runId"}
    newest = {"thread_id": "$response.body#/threads/0/threadId"}
    links: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {
        ("/agents/{agent}", "post", "200"): {
            "GetRun": _link("getRun", RUN), "CancelRun": _link("cancelRun", RUN),
            "RunEvents": _link("runEvents", RUN), "GetThread": _link("getThread", THREAD),
            "ThreadRuns": _link("threadRuns", THREAD)},
        ("/threads", "get", "200"): {  # the newest thread
            "GetThread": _link("getThread", newest), "ThreadRuns": _link("threadRuns", newest)},
        ("/threads/{thread_id}", "get", "200"): {
            "Resume": _link("resumeThread", by_body, body=answer),
            "CancelActiveRun": _link("cancelRun", {"run_id": "$response.body#/activeRun/runId"}),
            "GetActiveRun": _link("getRun", {"run_id": "$response.body#/activeRun/runId"}),
            "ForkThread": _link("forkThread", by_body),
            "ThreadRuns": _link("threadRuns", by_body)},
        ("/threads/{thread_id}/resume", "post", "200"): {
            "GetRun": _link("getRun", run_of), "CancelRun": _link("cancelRun", run_of)},
        ("/threads/{thread_id}/fork", "post", "201"): {
            "GetThread": _link("getThread", by_body),
            "Resume": _link("resumeThread", by_body, body=answer)},
        ("/threads/{thread_id}/runs", "get", "200"): {
            "GetRun": _link("getRun", {"run_id": "$response.body#/runs/0/runId"})},
        ("/runs/{run_id}", "get", "200"): {  # a run's pending interrupts are its thread's
            "GetThread": _link("getThread", by_body),
            "Resume": _link("resumeThread", by_body, body=answer),
            "CancelRun": _link("cancelRun", {"run_id": "$response.body#/runId"})},
    }
    for (path, method, status), found in links.items():
        operation = doc["paths"].get(path, {}).get(method)
        if operation is None:
            continue
        response = operation.setdefault("responses", {}).setdefault(
            status, {"description": "Successful Response"})
        response["links"] = found
    ids = {("/runs/{run_id}", "get"): "getRun", ("/runs/{run_id}/cancel", "post"): "cancelRun",
           ("/runs/{run_id}/events", "get"): "runEvents",
           ("/threads/{thread_id}", "get"): "getThread",
           ("/threads/{thread_id}", "delete"): "deleteThread",
           ("/threads/{thread_id}/runs", "get"): "threadRuns",
           ("/threads/{thread_id}/resume", "post"): "resumeThread",
           ("/threads/{thread_id}/fork", "post"): "forkThread"}
    for (path, method), operation_id in ids.items():
        operation = doc["paths"].get(path, {}).get(method)
        if operation is not None:
            operation["operationId"] = operation_id


def _link(operation_id: str, parameters: dict[str, str],
          body: dict[str, Any] | None = None) -> dict[str, Any]:
    link: dict[str, Any] = {"operationId": operation_id, "parameters": dict(parameters)}
    if body is not None:
        link["requestBody"] = body
        # OpenAPI's meaning: this is the body. (Schemathesis merges a link's body into
        # one it generates unless told.)
        link["x-schemathesis"] = {"merge_body": False}
    return link

