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
      h("span", { class: "summary" }, summary(e.event)),
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
    h("span", { class: "summary" }, summary(entry.event)),
  );
  const following = container.scrollHeight - container.scrollTop - container.clientHeight < 40;
  container.append(row);
  while (container.children.length > TIMELINE_LIMIT) container.firstElementChild?.remove();
  if (following) container.scrollTop = container.scrollHeight;
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
