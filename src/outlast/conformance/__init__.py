"""A black-box checker of AG-UI HTTP endpoints against the resumable AG-UI binding
(docs/resumable-ag-ui.md): ``outlast check URL``.

A client only: it speaks HTTP and SSE (httpx) and reads AG-UI types, and imports
nothing of outlast's server, so it judges any AG-UI server by the document and by
what the server advertises."""

from typing import TYPE_CHECKING, Any

from outlast.conformance.report import CHECKS, Report, Result
from outlast.conformance.session import BINDING, Options

if TYPE_CHECKING:
    from outlast.conformance.runner import check, run_checks

__all__ = ["BINDING", "CHECKS", "Options", "Report", "Result", "check", "run_checks"]


def __getattr__(name: str) -> Any:
    """The runner (with the checks and the AG-UI types they read) loads when first used:
    ``outlast``'s parser lists the checks without it."""
    if name in ("check", "run_checks"):
        from outlast.conformance import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
