"""The Python client of an outlast service (spec §7).

``AsyncClient`` is the implementation; ``Client`` offers the same methods, blocking::

    from outlast.client import Client

    with Client("http://127.0.0.1:8765") as c:
        handle = c.run("demo", run_agent_input)
        for seq, event in c.events(handle.run_id):
            ...

Errors raise ``OutlastError`` with the service's ``code``, ``message`` and ``status``.
"""

from outlast.client.aio import AsyncClient
from outlast.client.errors import OutlastError
from outlast.client.models import (
    ActiveRun,
    Interrupt,
    RunHandle,
    RunRecord,
    Thread,
    ThreadSummary,
)
from outlast.client.sync import Client

__all__ = ["ActiveRun", "AsyncClient", "Client", "Interrupt", "OutlastError", "RunHandle",
           "RunRecord", "Thread", "ThreadSummary"]
