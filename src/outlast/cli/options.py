"""``outlast serve``'s flags, derived from :class:`outlast.config.Settings`.

The flags, their ``--help`` text and their validation all come from the one
declaration in ``outlast/config/settings.py``; nothing about a setting is repeated here.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import ValidationError

from outlast.config import Settings, option, options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting. Defaults stay unset here, so the environment and the
    declared defaults apply later, when the values are validated (never at --help)."""
    for opt in options():
        if opt.switch:
            parser.add_argument(opt.flag, dest=opt.name, action="store_const", const=True,
                                default=None, help=opt.describe())
        else:
            parser.add_argument(opt.flag, dest=opt.name, metavar=opt.metavar,
                                action="append" if opt.repeatable else "store",
                                default=None, help=opt.describe())


def settings_from(ns: argparse.Namespace) -> Settings:
    """The settings from parsed flags, over ``OUTLAST_*`` variables, over defaults.
    Raises ``ValidationError`` (see :func:`explain`)."""
    given: dict[str, Any] = {opt.name: getattr(ns, opt.name) for opt in options()
                             if getattr(ns, opt.name, None) is not None}
    return Settings(**given)


class StartupError(Exception):
    """A startup mistake; its message is the whole line the person reads."""


def one_line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


def explain(exc: ValidationError) -> str:
    """One line: each refused value with its flag, its variable and what is allowed."""
    problems = []
    for error in exc.errors(include_url=False):
        name = str(error["loc"][0]) if error["loc"] else ""
        message = str(error["msg"]).removeprefix("Value error, ")
        shown = error.get("input")
        value = f" (got {shown!r})" if isinstance(shown, str | int | float) else ""
        try:
            opt = option(name)
        except KeyError:
            problems.append(f"{name}: {message}{value}")
            continue
        if opt.secret:
            value = ""  # a secret is never echoed, not even a refused one
        bounded = str(error["type"]).startswith(("greater_than", "less_than"))
        allowed = f"; allowed: {opt.bounds}" if opt.bounds and not bounded else ""
        problems.append(f"{opt.flag} / {opt.env}: {message}{value}{allowed}")
    return "invalid setting: " + "; ".join(problems)
