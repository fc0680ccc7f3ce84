"""How a setting appears on the command line and in the environment: its flag, its
variable, and the ``--help`` text derived from its field."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

import annotated_types
from pydantic import SecretStr
from pydantic.fields import FieldInfo

ENV_PREFIX = "OUTLAST_"


@dataclass(frozen=True)
class Option:
    """How one setting appears on the command line and in the environment."""

    name: str
    flag: str
    env: str
    help: str
    metavar: str | None
    default: Any
    unit: str | None
    choices: tuple[str, ...]
    bounds: str | None
    repeatable: bool
    switch: bool
    secret: bool = False  # its value is never shown (--webhook-secret)

    def describe(self) -> str:
        """``--help`` text: meaning, then unit, range, default and variable."""
        facts = [f for f in (self.unit, self.bounds) if f]
        if self.default is not None and self.default is not False and self.default != []:
            facts.append(f"default {_show(self.default)}")
        facts.append(f"env {self.env}" + (", comma-separated" if self.repeatable else ""))
        return f"{self.help} ({'; '.join(facts)})"


def option_of(name: str, field: FieldInfo) -> Option:
    """The option a field of a settings class declares."""
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    annotation = _unwrap_optional(field.annotation)
    choices = tuple(str(c) for c in typing.get_args(annotation)) \
        if typing.get_origin(annotation) is Literal else ()
    default = field.get_default(call_default_factory=True)
    return Option(
        name=name, flag=str(extra.get("flag") or "--" + name.replace("_", "-")),
        env=str(extra.get("env") or ENV_PREFIX + name.upper()),
        help=field.description or "", metavar=_str_or_none(extra.get("metavar")) or
        ("|".join(choices) if choices else None), default=default,
        unit=_str_or_none(extra.get("unit")), choices=choices, bounds=_bounds(field),
        repeatable=typing.get_origin(annotation) is list, switch=annotation is bool,
        secret=annotation is SecretStr)


def _unwrap_optional(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _bounds(field: FieldInfo) -> str | None:
    low = high = None
    for m in field.metadata:
        if isinstance(m, annotated_types.Gt):
            low = f"> {m.gt}"
        elif isinstance(m, annotated_types.Ge):
            low = f">= {m.ge}"
        elif isinstance(m, annotated_types.Le):
            high = f"<= {m.le}"
    if low and high and low.startswith(">="):
        return f"{low[3:]}..{high[3:]}"
    return " and ".join(b for b in (low, high) if b) or None


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)
