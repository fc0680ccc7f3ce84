/** The run inspector: the followed (or a chosen past) run's event timeline with `seq`. */
import type { BaseEvent } from "@ag-ui/client";
import type { RunRecord } from "../api";
import { h, replace } from "../dom";

export interface TimelineEntry {
  seq?: number;
  event: BaseEvent;
}

/** The most rows the timeline keeps; older ones are summarised. */
export const TIMELINE_LIMIT = 400;

export function renderRuns(
  container: HTMLElement,
  runs: RunRecord[],
  selectedRunId: string | undefined,
  select: (runId: string) => void,
): void {
  replace(
    container,
    runs.map((r) =>
      h(
        "button",
        {
          class: `run-chip${r.runId === selectedRunId ? " selected" : ""}`,
          "data-testid": "run-chip",
          "data-run-id": r.runId,
          title: r.runId,
          onclick: () => select(r.runId),
        },
        h("span", { class: `dot ${r.status}` }),
        `${r.runId.slice(0, 8)} · ${r.status}`,
      ),
    ),
  );
}

export function renderTimeline(
  container: HTMLElement,
  entries: TimelineEntry[],
  dropped: number,
): void {
  const rows = entries.map((e) =>
    h(
      "li",
      { class: `event ${e.seq === undefined ? "synthetic" : ""}`, "data-testid": "event-row", "data-seq": e.seq ?? "" },
      h("span", { class: "seq" }, e.seq ?? "·"),
      h("span", { class: "type" }, e.event.type),
      summaryCell(e),
    ),
  );
  replace(container, dropped > 0 ? h("li", { class: "muted" }, `… ${dropped} earlier events`) : null, rows);
}

/** Append one row without rebuilding the list (the live path). */
export function appendTimeline(container: HTMLElement, entry: TimelineEntry): void {
  const row = h(
    "li",
    { class: `event ${entry.seq === undefined ? "synthetic" : ""}`, "data-testid": "event-row", "data-seq": entry.seq ?? "" },
    h("span", { class: "seq" }, entry.seq ?? "·"),
    h("span", { class: "type" }, entry.event.type),
    summaryCell(entry),
  );
  const following = container.scrollHeight - container.scrollTop - container.clientHeight < 40;
  container.append(row);
  while (container.children.length > TIMELINE_LIMIT) container.firstElementChild?.remove();
  if (following) container.scrollTop = container.scrollHeight;
}

// A hydration (no seq: the server synthesizes it) frames the thread's snapshot in
// RUN_STARTED / RUN_FINISHED. With no run going, their runId is the hydration
// request's own, which names no run: shown here, it would read as a run of the thread.
const HYDRATION: Record<string, string> = {
  RUN_STARTED: "hydration: the thread as stored (no run of its own)",
  RUN_FINISHED: "hydration: end of the stored thread",
};
const HYDRATION_WHY =
  "Synthesized when the page loaded the thread, not an event of a run: its runId is the " +
  "active run's when one is going, else the id of the loading request, which runs nothing.";

function summaryCell(entry: TimelineEntry): HTMLElement {
  const hydration = entry.seq === undefined ? HYDRATION[entry.event.type] : undefined;
  if (hydration !== undefined) {
    return h("span", { class: "summary", title: HYDRATION_WHY, "data-testid": "hydration" }, hydration);
  }
  return h("span", { class: "summary" }, summary(entry.event));
}

function summary(event: BaseEvent): string {
  const e = event as unknown as Record<string, unknown>;
  switch (event.type) {
    case "TEXT_MESSAGE_CONTENT":
    case "TOOL_CALL_ARGS":
      return JSON.stringify(e.delta);
    case "TOOL_CALL_START":
      return String(e.toolCallName);
    case "TOOL_CALL_RESULT":
      return short(String(e.content ?? ""));
    case "STEP_STARTED":
    case "STEP_FINISHED":
      return String(e.stepName);
    case "RUN_STARTED":
      return short(String(e.runId));
    case "RUN_FINISHED": {
      const outcome = e.outcome as { type?: string } | undefined;
      return outcome?.type ?? "success";
    }
    case "RUN_ERROR":
      return `${e.code ?? ""} ${short(String(e.message ?? ""))}`;
    case "STATE_DELTA":
      return short(JSON.stringify(e.delta));
    case "MESSAGES_SNAPSHOT":
      return `${(e.messages as unknown[]).length} messages`;
    default:
      return "";
  }
}

function short(s: string): string {
  return s.length > 60 ? `${s.slice(0, 57)}…` : s;
}
