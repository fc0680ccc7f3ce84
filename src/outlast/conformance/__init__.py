"""A black-box checker of AG-UI HTTP endpoints against the resumable AG-UI binding
(docs/resumable-ag-ui.md): ``outlast check URL``.

A client only: it speaks HTTP and SSE (httpx) and reads AG-UI types, and imports
nothing of outlast's server, so it judges any AG-UI server by the document and by
what the server advertises."""

from outlast.conformance.report import CHECKS, Report, Result
from outlast.conformance.runner import check, run_checks
from outlast.conformance.session import BINDING, Options

__all__ = ["BINDING", "CHECKS", "Options", "Report", "Result", "check", "run_checks"]
