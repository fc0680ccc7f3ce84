"""The object a host's ``factory`` serves, named by an environment variable."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from outlast.targets import TargetError, describe, import_target


def load_target(variable: str, host: str, is_target: Callable[[Any], bool],
                settings: Any = None) -> Any:
    """``$variable`` = ``module:attr`` names the framework's object, or a function of the
    settings that returns it. A missing or malformed variable, or a module that does not
    import, stops the server with one line saying what to change."""
    target = os.environ.get(variable)
    if not target or ":" not in target:
        raise SystemExit(f"the {host} needs {variable}=module:attr")
    try:
        obj = import_target(target, getattr(settings, "app_dir", None))
    except TargetError as exc:
        raise SystemExit(f"{variable}={target}: {exc}") from None
    if is_target(obj):
        return obj
    try:
        return obj(settings)
    except Exception as exc:
        raise SystemExit(f"{variable}={target}: {target}(settings) raised "
                         f"{describe(exc)}") from None
