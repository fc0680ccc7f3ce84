"""``module:attr`` names an object in the user's code: imported as uvicorn imports an app,
with the application directory first on ``sys.path``, and a failure told as the user's
module failing, with the place it failed."""

from __future__ import annotations

import importlib
import sys
import traceback
from pathlib import Path
from typing import Any


class TargetError(ValueError):
    """``module:attr`` names nothing importable; the message says why, on one line."""


def use_app_dir(app_dir: str | Path | None = None) -> None:
    """Put ``app_dir`` (default: the current directory) first on ``sys.path``, once."""
    where = str(Path(app_dir or ".").resolve())
    if where in sys.path:
        sys.path.remove(where)
    sys.path.insert(0, where)


def import_target(spec: str, app_dir: str | Path | None = None) -> Any:
    """The object ``spec`` = ``module:attr`` names (``attr`` may be dotted), imported now
    from ``app_dir`` (default: the current directory) or the installed packages."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise TargetError(f"expected module:attribute, got {spec!r}")
    use_app_dir(app_dir)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            where = Path(app_dir or ".").resolve()
            raise TargetError(
                f"no module named {module_name!r} in {where} or the installed packages "
                "(run from the directory that holds it, or pass --app-dir)") from None
        raise TargetError(_failed(module_name, exc)) from None
    except Exception as exc:  # the module's own code raised while importing
        raise TargetError(_failed(module_name, exc)) from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"module {module_name!r} has no attribute {attr!r}") from None
    return obj


def _failed(module_name: str, exc: BaseException) -> str:
    return f"your module {module_name!r} failed to import: {describe(exc)}"


def describe(exc: BaseException) -> str:
    """``Type: message (file, line n)``: an exception's last line and where it was raised,
    on one line."""
    message = " ".join(str(exc.msg if isinstance(exc, SyntaxError) else exc).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{text} ({_shown(exc.filename)}, line {exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<frozen ")]
    # The user's own line first: the last frame in a file of theirs, not of a library.
    own = [f for f in frames if _is_users(f.filename)] or frames
    if own:
        return f"{text} ({_shown(own[-1].filename)}, line {own[-1].lineno})"
    return text


def _is_users(filename: str) -> bool:
    path = Path(filename).resolve()
    return not any(p in ("site-packages", "dist-packages") for p in path.parts) and \
        not path.is_relative_to(Path(__file__).resolve().parent) and \
        not path.is_relative_to(Path(traceback.__file__).resolve().parent)


def _shown(filename: str) -> str:
    """A file's path relative to the current directory when it lies under it."""
    try:
        return str(Path(filename).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return filename
