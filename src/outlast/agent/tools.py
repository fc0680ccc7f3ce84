"""Server-side tools: plain Python functions whose JSON schema comes from their type hints.

    @tool
    def get_weather(city: str, unit: Literal["C", "F"] = "C") -> dict[str, Any]:
        '''Current weather for a city.

        Args:
            city: The city's name.
        '''

Sync functions run in a worker thread so they never block the event loop;
``requires_approval=True`` makes an agent ask a person before each call.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model


class ToolArgumentsError(ValueError):
    """The arguments a model produced for a tool do not match its schema."""


@dataclass(frozen=True)
class Tool:
    """A decorated function with its name, description and JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    requires_approval: bool = False
    model: type[BaseModel] = field(repr=False, default=BaseModel)

    def spec(self) -> dict[str, Any]:
        """The AG-UI ``Tool`` shape: name, description, parameters."""
        return {"name": self.name, "description": self.description,
                "parameters": self.parameters}

    def validate(self, args: Any) -> dict[str, Any]:
        """Arguments checked and coerced by the schema, or ``ToolArgumentsError``."""
        if not isinstance(args, dict):
            raise ToolArgumentsError(f"{self.name}: arguments must be a JSON object")
        try:
            parsed = self.model.model_validate(args)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors()[:5])
            raise ToolArgumentsError(f"{self.name}: {problems}") from None
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    async def invoke(self, args: Any) -> Any:
        """Validate ``args`` and call the function (sync ones in a worker thread)."""
        kwargs = self.validate(args)
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**kwargs)
        result = await asyncio.to_thread(self.fn, **kwargs)
        if inspect.isawaitable(result):
            return await result
        return result


_SECTION = re.compile(r"^(Args|Arguments|Parameters):\s*$", re.M)
_ARG = re.compile(r"^(\s+)\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _docs(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The description (the docstring before ``Args:``) and Google-style argument docs."""
    doc = inspect.getdoc(fn) or ""
    found = _SECTION.search(doc)
    if found is None:
        return " ".join(doc.split()), {}
    described: dict[str, str] = {}
    indent: str | None = None
    current: str | None = None
    for line in doc[found.end():].splitlines():
        m = _ARG.match(line)
        if m and (indent is None or m.group(1) == indent):
            indent, current = m.group(1), m.group(2)
            described[current] = m.group(3).strip()
        elif current is not None and line.strip() and indent and line.startswith(indent + " "):
            described[current] = f"{described[current]} {line.strip()}".strip()
        elif line.strip() and not line.startswith(" "):
            break  # the next section
    return " ".join(doc[:found.start()].split()), described


def _build(fn: Callable[..., Any], name: str | None, description: str | None,
           requires_approval: bool) -> Tool:
    hints = get_type_hints(fn, include_extras=True)
    summary, arg_docs = _docs(fn)
    fields: dict[str, Any] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__}: *args and **kwargs have no schema")
        annotation = hints.get(pname, Any)
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, Field(default, description=arg_docs.get(pname)))
    model = create_model(
        f"{fn.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return Tool(name=name or fn.__name__, description=description or summary,
                parameters=schema, fn=fn, requires_approval=requires_approval, model=model)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(*, name: str | None = None, description: str | None = None,
         requires_approval: bool = False) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None,
         description: str | None = None,
         requires_approval: bool = False) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a server-side tool; use bare (``@tool``) or with options."""
    if fn is not None:
        return _build(fn, name, description, requires_approval)

    def wrap(f: Callable[..., Any]) -> Tool:
        return _build(f, name, description, requires_approval)

    return wrap
