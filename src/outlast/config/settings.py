"""The declaration of :class:`Settings`: every field with its meaning, unit, range or
choices, its validation, and where its value comes from (keywords, then ``OUTLAST_*``
variables, then the default)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, JsonValue, SecretStr, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from outlast.config.flags import ENV_PREFIX, Option, option_of
from outlast.config.hosts import allowed_host_problem
from outlast.config.limits import parse_limits
from outlast.config.webhook import webhook_key, webhook_url_problem
from outlast.targets import import_target

SnapshotHook = Callable[[dict[str, Any]], Awaitable[None] | None]


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

    @field_validator("webhooks", "webhook_allow")
    @classmethod
    def _webhook_urls(cls, value: list[str], info: ValidationInfo) -> list[str]:
        # --webhook names whole URLs, --webhook-allow the prefixes a run may name.
        for url in value:
            webhook_url_problem(url, prefix=info.field_name == "webhook_allow", raise_it=True)
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


def load_target(spec: str, app_dir: Path | None = None) -> Any:
    """The object ``module:attr`` names, imported now from ``app_dir`` (default: the
    current directory) or the installed packages; ValueError saying why not."""
    return import_target(spec, app_dir)


def options() -> list[Option]:
    """Every setting as a command-line option, in declaration order."""
    return list(_OPTIONS.values())


def option(name: str) -> Option:
    """The option of the field ``name``."""
    return _OPTIONS[name]


_OPTIONS: dict[str, Option] = {name: option_of(name, f)
                               for name, f in Settings.model_fields.items()}
