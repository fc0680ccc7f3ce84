"""The object a host's ``factory`` serves, named by an environment variable."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any


def load_target(variable: str, host: str, is_target: Callable[[Any], bool],
                settings: Any = None) -> Any:
    """``$variable`` = ``module:attr`` names the framework's object, or a function of the
    settings that returns it. A missing or malformed variable stops the server with one
    line saying what to set."""
    target = os.environ.get(variable)
    if not target or ":" not in target:
        raise SystemExit(f"the {host} needs {variable}=module:attr")
    module, _, attr = target.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    return obj if is_target(obj) else obj(settings)
