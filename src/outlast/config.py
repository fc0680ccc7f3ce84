"""Server settings, declared once.

Each field of :class:`Settings` carries its meaning, unit, range or choices and
its ``OUTLAST_*`` environment variable. ``outlast serve``'s flags and their
``--help`` text are derived from this declaration (see :func:`options`), and a
flag's value and its environment variable's value go through the same
validation. Python callers build ``Settings(data_dir=..., lease_ttl=1.0)``;
keywords win over the environment, the environment over the defaults.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import annotated_types
from pydantic import Field, JsonValue, SecretStr, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from outlast.targets import import_target

SnapshotHook = Callable[[dict[str, Any]], Awaitable[None] | None]

ENV_PREFIX = "OUTLAST_"


def setting(default: Any = None, help: str = "", *, unit: str | None = None,
            metavar: str | None = None, flag: str | None = None, env: str | None = None,
            default_factory: Callable[[], Any] | None = None, **constraints: Any) -> Any:
    """A field of :class:`Settings` with what ``--help`` says about it. ``flag`` and
    ``env`` only for names kept from before this declaration; otherwise both come
    from the field's name."""
    named = {"unit": unit, "metavar": metavar, "flag": flag, "env": env}
    extra: dict[str, JsonValue] = {k: v for k, v in named.items() if v is not None}
    if default_factory is not None:
        return Field(default_factory=default_factory, description=help,
                     json_schema_extra=extra, **constraints)
    return Field(default, description=help, json_schema_extra=extra, **constraints)


class Settings(BaseSettings):
    """Everything a server process is configured with; see ``outlast serve --help``."""

    # hide_input_in_errors: a refused --webhook-secret must not appear in a message.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid",
                                      allow_inf_nan=False, validate_assignment=True,
                                      hide_input_in_errors=True)

    host: str = setting("127.0.0.1", "address to listen on; anything but loopback needs "
                        "--tokens-file or --insecure", metavar="H", min_length=1)
    port: int = setting(8765, "TCP port to listen on; 0 picks a free one", metavar="P",
                        ge=0, le=65535)
    data_dir: Path = setting(Path(".outlast"), "directory of the embedded SQLite store and "
                             "the demo workspace", metavar="DIR")
    store_url: str | None = setting(None, "postgresql://... for several processes on one "
                                    "database, or sqlite:///PATH; default: SQLite in "
                                    "--data-dir", metavar="URL", flag="--store",
                                    env="OUTLAST_STORE")
    demo_workspace: Path | None = setting(None, "where the demo agent writes effects.log; "
                                          "default DIR/workspace", metavar="DIR")
    tokens_file: Path | None = setting(None, "bearer tokens, one principal:token a line; "
                                       "without it every request is one local principal",
                                       metavar="FILE")
    insecure: bool = setting(False, "allow a bind beyond loopback without --tokens-file")
    # Request-option defaults (spec §3).
    on_disconnect: Literal["continue", "cancel"] = setting(
        "continue", "what a run does when the stream that created it disconnects")
    multitask: Literal["reject", "enqueue", "interrupt"] = setting(
        "reject", "what a new run on a busy thread does")
    # Snapshots (G5).
    snapshot_mode: Literal["boundary", "run_end"] = setting(
        "boundary", "save thread snapshots at every safe boundary or only at a run's end")
    snapshot_min_interval: float = setting(0.0, "least time between two boundary snapshots "
                                           "of a run", unit="seconds", metavar="S", ge=0)
    app_dir: Path | None = setting(
        None, "where --agent and --snapshot-hook modules are imported from, before the "
        "installed packages (as uvicorn's --app-dir); default: the current directory",
        metavar="DIR")
    snapshot_hook: SnapshotHook | None = setting(
        None, "a function called with every saved snapshot (to mirror them elsewhere)",
        metavar="module:function")
    # Leases and crashes (G8).
    lease_ttl: float = setting(10.0, "how long a run's lease lasts unrenewed: a process "
                               "cut off from the store for this long stops its runs, and "
                               "another takes them over after it plus a margin of "
                               "max(1 s, TTL/4)", unit="seconds", metavar="S", gt=0)
    crash_policy: Literal["resume", "fail"] | None = setting(
        None, "what happens to a crashed run; default: resume if its agent can")
    max_attempts: int = setting(3, "attempts a run gets before a crash fails it", ge=1,
                                metavar="N")
    max_runs: int = setting(1000, "runs this process executes at once", ge=1, metavar="N")
    drain_timeout: float = setting(10.0, "on SIGTERM, how long runs get to reach a boundary",
                                   unit="seconds", metavar="S", ge=0)
    storage_wait: float = setting(300.0, "how long a running run waits for a store that "
                                  "cannot write (a full disk) before it ends failed with "
                                  "storage_full", unit="seconds", metavar="S", gt=0)
    # Retention.
    idempotency_retention: float = setting(24 * 3600.0, "how long an idempotency key is "
                                           "remembered", unit="seconds", metavar="S", gt=0)
    event_retention: float | None = setting(None, "remove the events of runs final for "
                                            "longer than this; default: keep them",
                                            unit="seconds", metavar="S", gt=0)
    admins: list[str] = setting(help="a principal of --tokens-file allowed to run "
                                "`outlast gc` through this server (repeatable); without "
                                "--tokens-file the local principal is", metavar="PRINCIPAL",
                                default_factory=list, flag="--admin", env="OUTLAST_ADMINS")
    # Limits.
    max_body_bytes: int = setting(1 << 20, "largest request body; larger gets 413",
                                  unit="bytes", metavar="N", ge=1)
    max_messages: int = setting(1000, "most messages in one run input", metavar="N", ge=1)
    max_event_bytes: int = setting(1 << 20, "largest event an agent may emit", unit="bytes",
                                   metavar="N", ge=1)
    max_id_length: int = setting(200, "longest thread, run or message id", unit="characters",
                                 metavar="N", ge=1)
    max_header_bytes: int = setting(16 << 10, "request line plus headers; larger gets 431",
                                    unit="bytes", metavar="N", ge=1)
    body_timeout: float = setting(30.0, "time a request body gets to arrive; slower gets 408",
                                  unit="seconds", metavar="S", gt=0)
    head_timeout: float = setting(10.0, "time a request line and headers get to arrive, on a "
                                  "new connection and between requests on a kept-alive "
                                  "one; slower connections are closed", unit="seconds",
                                  metavar="S", gt=0)
    max_connections: int = setting(2000, "open connections (streams included); beyond it "
                                   "new connections get 503 and are closed", metavar="N",
                                   ge=1)
    keepalive: float = setting(15.0, "interval of SSE keepalive comments; a client that "
                               "stops acknowledging is dropped after it", unit="seconds",
                               metavar="S", gt=0)
    # Access.
    cors_origins: list[str] = setting(help="a browser origin allowed to call the API "
                                      "(repeatable); default: none", metavar="ORIGIN",
                                      default_factory=list, flag="--cors-origin")
    allowed_hosts: list[str] = setting(help="a name the server answers to besides loopback "
                                       "names and the bind address (repeatable): "
                                       "api.example.com, .example.com for a domain and its "
                                       "subdomains, or * for any; a request with another "
                                       "Host gets 403 (DNS rebinding)", metavar="NAME",
                                       default_factory=list, flag="--allowed-host")
    sqlite_synchronous: Literal["FULL", "NORMAL"] = setting(
        "FULL", "SQLite's synchronous mode; NORMAL may lose the last commits on power loss")
    extra_agents: list[str] = setting(help="register another agent (repeatable)",
                                      metavar="name=module:attr", default_factory=list,
                                      flag="--agent", env="OUTLAST_AGENTS")
    # Webhooks (G12).
    webhook_secret: SecretStr | None = setting(
        None, "the key that signs webhooks (Standard Webhooks); whsec_<base64> is decoded, "
        "any other text is used as its UTF-8 bytes; needed by --webhook and --webhook-allow",
        metavar="SECRET")
    webhooks: list[str] = setting(help="a URL that receives every run's end and interrupt "
                                  "(repeatable)", metavar="URL", default_factory=list,
                                  flag="--webhook")
    webhook_allow: list[str] = setting(help="a URL prefix, through the first / of its path, "
                                       "that a request's Outlast-Webhook header may name "
                                       "(repeatable); default: none", metavar="PREFIX",
                                       default_factory=list)
    webhook_max_age: float = setting(24 * 3600.0, "how long a webhook is retried before it "
                                     "expires", unit="seconds", metavar="S", gt=0)
    webhook_retry_base: float = setting(1.0, "delay before a webhook's first retry; each "
                                        "next one doubles, with jitter", unit="seconds",
                                        metavar="S", gt=0)
    webhook_retry_max: float = setting(600.0, "longest delay between two attempts of a "
                                       "webhook", unit="seconds", metavar="S", gt=0)
    webhook_timeout: float = setting(10.0, "time a webhook receiver gets to connect and to "
                                     "answer each read", unit="seconds", metavar="S", gt=0)
    limit_active_runs: int = setting(
        0, "most runs one principal may have queued or running at once (0: no limit); "
        "--limits-file sets it per principal", metavar="N", ge=0)
    limit_runs_per_minute: int = setting(
        0, "most runs one principal may start in a minute (0: no limit)", metavar="N", ge=0)
    limit_tokens_per_day: int = setting(
        0, "most model tokens one principal's runs may spend in 24 hours: new runs are "
        "refused past it and a running one stops after the call that passes it (0: no "
        "limit)", metavar="N", ge=0)
    limits_file: Path | None = setting(
        None, 'limits per principal, a JSON object: {"alice": {"activeRuns": 2, '
        '"runsPerMinute": 10, "tokensPerDay": 100000}} (0: none); read again when it '
        "changes", metavar="FILE")
    log_level: Literal["debug", "info", "warning", "error"] = setting(
        "info", "level of the outlast loggers and of the modules --agent names")
    log_format: Literal["text", "json"] = setting(
        "text", "log lines as text, or as one JSON object each (time, level, logger, "
        "message, and run_id, thread_id, attempt and principal on lines about a run)")

    @property
    def workspace(self) -> Path:
        """Where the demo agent writes ``effects.log``."""
        return self.demo_workspace or self.data_dir / "workspace"

    @field_validator("limits_file")
    @classmethod
    def _read_limits(cls, value: Path | None) -> Path | None:
        if value is not None:
            try:
                parse_limits(value.read_text("utf-8"))
            except OSError as exc:
                raise ValueError(f"cannot read it ({exc.strerror})") from None
        return value

    @field_validator("snapshot_hook", mode="before")
    @classmethod
    def _import_hook(cls, value: Any, info: ValidationInfo) -> Any:
        return load_target(value, info.data.get("app_dir")) if isinstance(value, str) \
            else value

    @field_validator("extra_agents")
    @classmethod
    def _agent_specs(cls, value: list[str]) -> list[str]:
        for spec in value:
            name, _, target = spec.partition("=")
            module, _, attr = target.partition(":")
            if not (name and module and attr):
                raise ValueError(f"expected name=module:attr, got {spec!r}")
        return value

    @field_validator("webhook_secret")
    @classmethod
    def _secret_key(cls, value: SecretStr | None) -> SecretStr | None:
        # The message never quotes the value: the secret must not reach any log.
        if value is not None:
            webhook_key(value.get_secret_value())
        return value

    @field_validator("webhooks")
    @classmethod
    def _webhook_urls(cls, value: list[str], info: ValidationInfo) -> list[str]:
        for url in value:
            webhook_url_problem(url, prefix=False, raise_it=True)
        if value and info.data.get("webhook_secret") is None:
            raise ValueError("webhooks are signed: give --webhook-secret too")
        return value

    @field_validator("webhook_allow")
    @classmethod
    def _webhook_prefixes(cls, value: list[str], info: ValidationInfo) -> list[str]:
        for prefix in value:
            webhook_url_problem(prefix, prefix=True, raise_it=True)
        if value and info.data.get("webhook_secret") is None:
            raise ValueError("webhooks are signed: give --webhook-secret too")
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if (problem := allowed_host_problem(name)) is not None:
                raise ValueError(problem)
        return value

    @field_validator("sqlite_synchronous", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keywords (and flags), then ``OUTLAST_*`` variables; no dotenv, no secrets dir."""
        return init_settings, _Environment(settings_cls)


class _Environment(PydanticBaseSettingsSource):
    """``OUTLAST_*`` variables under each option's declared name. Lists are
    comma-separated; an empty variable counts as unset."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        raw = os.environ.get(option(field_name).env)
        return raw, field_name, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for opt in options():
            raw = os.environ.get(opt.env, "")
            if not raw.strip():
                continue
            values[opt.name] = [p.strip() for p in raw.split(",") if p.strip()] \
                if opt.repeatable else raw
        return values


LIMIT_KEYS = {"activeRuns": "active_runs", "runsPerMinute": "runs_per_minute",
              "tokensPerDay": "tokens_per_day"}


def parse_limits(text: str) -> dict[str, dict[str, int]]:
    """A limits file's overrides by principal; ValueError saying what is wrong."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError('expected an object of principals: {"alice": {"activeRuns": 2}}')
    out: dict[str, dict[str, int]] = {}
    for principal, limits in data.items():
        if not isinstance(limits, dict):
            raise ValueError(f"{principal}: expected an object of limits")
        for key, value in limits.items():
            if key not in LIMIT_KEYS:
                raise ValueError(f"{principal}.{key}: not one of {', '.join(LIMIT_KEYS)}")
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{principal}.{key}: expected a count, 0 for no limit")
        out[principal] = {LIMIT_KEYS[k]: v for k, v in limits.items()}
    return out



def webhook_key(secret: str) -> bytes:
    """The HMAC key of ``--webhook-secret``: the decoded bytes of a Standard Webhooks
    ``whsec_<base64>`` secret, otherwise the text's UTF-8 bytes. ValueError (never
    quoting the secret) for an empty key or a ``whsec_`` one that is not base64."""
    if secret.startswith("whsec_"):
        try:
            key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except binascii.Error:
            raise ValueError("a whsec_ secret is whsec_ followed by base64") from None
    else:
        key = secret.encode()
    if not key:
        raise ValueError("the webhook secret is empty")
    return key


def webhook_url_problem(url: str, *, prefix: bool, raise_it: bool = False) -> str | None:
    """Why ``url`` cannot be a webhook URL (or, with ``prefix``, an allowed prefix):
    http or https, a host, no spaces or control characters; a prefix reaches the first
    ``/`` of the path, so ``https://hooks.example`` cannot admit
    ``https://hooks.example.evil``. None when it can; ValueError with ``raise_it``."""
    problem = _url_problem(url, prefix)
    if problem is not None and raise_it:
        raise ValueError(problem)
    return problem


def _url_problem(url: str, prefix: bool) -> str | None:
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return "a webhook URL has no spaces or control characters"
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port
    except ValueError as exc:  # an unbalanced [ of an IPv6 host, a port out of range
        return f"not a URL: {exc}"
    if parts.scheme not in ("http", "https") or not host:
        return f"expected an http:// or https:// URL with a host, got {url[:200]!r}"
    if prefix and not parts.path.startswith("/"):
        return f"a webhook prefix reaches the / after the host (like {url}/), got {url[:200]!r}"
    if _climbs(parts.path):
        return ("a webhook URL has no . or .. path segments and no backslash, in any "
                f"spelling (%2e, %2E%2E%2F, ...), got {url[:200]!r}")
    return None


def _climbs(path: str) -> bool:
    """Whether ``path``, decoded as often as a chain of servers might, holds a ``.`` or
    ``..`` segment or a backslash (which some servers take for a slash): either could
    take a request out of the prefix it was admitted under."""
    for _ in range(8):
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    return "\\" in path or any(segment in (".", "..") for segment in path.split("/"))


def within_prefix(url: str, prefix: str) -> bool:
    """Whether ``url`` lies under ``prefix``, compared part by part as a client sends
    it (scheme and host in any case, a default port written or not), never as text."""
    a, b = urlsplit(url), urlsplit(prefix)
    try:
        ports = (a.port or _DEFAULT_PORTS.get(a.scheme.lower()),
                 b.port or _DEFAULT_PORTS.get(b.scheme.lower()))
    except ValueError:
        return False
    return (a.scheme.lower() == b.scheme.lower() and a.hostname == b.hostname
            and ports[0] == ports[1] and (a.username, a.password) == (b.username, b.password)
            and a.path.startswith(b.path) and not _climbs(a.path))


_DEFAULT_PORTS = {"http": 80, "https": 443}


def host_name(value: str) -> str | None:
    """The name of a ``Host`` header or of an allowed host, lowercased, without port,
    brackets or a trailing dot; None when it is not ``name[:port]`` or ``[v6][:port]``."""
    value = value.strip().lower()
    if not value or any(c in "/\\@?#" or ord(c) <= 32 or ord(c) == 127 for c in value):
        return None
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name or None
    name, colon, port = value.rpartition(":") if value.count(":") == 1 else (value, "", "")
    if colon and not port.isdigit():
        return None
    name = name.rstrip(".")
    return name or None


def allowed_host_problem(value: str) -> str | None:
    """Why ``value`` cannot be an ``--allowed-host``; None when it can."""
    bare = value.strip().removeprefix(".")
    if value.strip() == "*":
        return None
    if "://" in bare:
        return f"an allowed host is a name, not a URL, got {value[:200]!r}"
    if bare.count(":") == 1 or "]:" in bare:
        return f"an allowed host is a name without port (any port is served), got {value[:200]!r}"
    if host_name(bare) is None:
        return f"expected a host name like api.example.com, .example.com or *, got {value[:200]!r}"
    return None


def load_target(spec: str, app_dir: Path | None = None) -> Any:
    """The object ``module:attr`` names, imported now from ``app_dir`` (default: the
    current directory) or the installed packages; ValueError saying why not."""
    return import_target(spec, app_dir)


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


def options() -> list[Option]:
    """Every setting as a command-line option, in declaration order."""
    return list(_OPTIONS.values())


def option(name: str) -> Option:
    """The option of the field ``name``."""
    return _OPTIONS[name]


def _option(name: str, field: FieldInfo) -> Option:
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


_OPTIONS: dict[str, Option] = {name: _option(name, f)
                               for name, f in Settings.model_fields.items()}
