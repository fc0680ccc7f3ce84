"""What ``outlast check`` reports: one result per check, as text or JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "skip"]

# Each check, in the order it is reported, with the section of docs/resumable-ag-ui.md
# that it tests.
CHECKS: dict[str, str] = {
    "valid": "§3 The event stream",
    "survives-disconnect": "§5 Disconnects",
    "progress-visible": "§6 Hydration",
    "reattach": "§4 Reattaching",
    "retry-attaches": "§2 Creating a run",
    "busy-thread": "§7 A busy thread",
    "cancel": "§8 Cancel",
    "interrupt-durable": "§9 Interrupts",
    "restart": "§10 Restarts",
}


@dataclass
class Result:
    """One check's verdict, why, and the exchanges that show it."""

    id: str
    status: Status
    detail: str
    evidence: list[dict[str, Any]] = field(default_factory=list)

    @property
    def section(self) -> str:
        return CHECKS[self.id]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status, "detail": self.detail,
                "section": self.section, "evidence": self.evidence}


@dataclass
class Report:
    """Every check's result against one endpoint, and what the server advertised."""

    url: str
    binding: str
    results: list[Result]
    capabilities: dict[str, Any] | None = None
    capabilities_source: str | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return any(r.status == "fail" for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url, "binding": self.binding,
            "capabilities": self.capabilities, "capabilitiesSource": self.capabilities_source,
            "checks": [r.to_json() for r in self.results],
            "summary": {s: sum(r.status == s for r in self.results)
                        for s in ("pass", "fail", "skip")},
            "seconds": round(self.seconds, 2),
        }

    def text(self, *, verbose: bool = False) -> str:
        lines = [f"{self.url} against resumable AG-UI {self.binding}",
                 "capabilities: " + (f"advertised at {self.capabilities_source}"
                                     if self.capabilities_source else
                                     "none advertised (checked for the core)")]
        width = max(len(r.id) for r in self.results) if self.results else 0
        for r in self.results:
            lines.append(f"  {r.status.upper():4}  {r.id:{width}}  {r.detail}  [{r.section}]")
            if verbose or r.status == "fail":
                for ev in r.evidence:
                    lines.extend(f"        {line}" for line in evidence_lines(ev))
        counts = self.to_json()["summary"]
        lines.append(f"{counts['pass']} passed, {counts['fail']} failed, "
                     f"{counts['skip']} skipped in {self.seconds:.1f} s")
        return "\n".join(lines)


def evidence_lines(ev: dict[str, Any]) -> list[str]:
    """One exchange as a person reads it: the request, its body on one line, the answer."""
    if "request" not in ev:
        return [json.dumps(ev, ensure_ascii=False)[:300]]
    out = [f"> {ev['request']}"]
    for name, value in (ev.get("headers") or {}).items():
        out.append(f">   {name}: {value}")
    if "body" in ev:
        body = json.dumps(ev["body"], ensure_ascii=False)
        out.append(f">   {body[:200]}{' ...' if len(body) > 200 else ''}")
    got = ev.get("response") or {}
    out.append(f"< {got.get('status')}" + (f" ({got['error']})" if got.get("error") else "")
               + (f", {got['count']} events, ended {got['ended']}" if "count" in got else ""))
    out.extend(f"<   {f}" for f in got.get("frames") or [])
    if "body" in got:
        out.append(f"<   {got['body'][:300]}")
    return out
