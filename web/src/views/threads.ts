/** The thread list in the sidebar (GET /threads, newest first). */
import type { ThreadSummary } from "../api";
import { ago, h, replace } from "../dom";

export function renderThreads(
  container: HTMLElement,
  threads: ThreadSummary[],
  currentId: string | null,
  open: (threadId: string) => void,
): void {
  if (threads.length === 0) {
    replace(container, h("p", { class: "muted empty" }, "No threads yet."));
    return;
  }
  replace(
    container,
    threads.map((t) => {
      const status = t.activeRun ? t.activeRun.status : (t.status ?? "idle");
      return h(
        "a",
        {
          class: `thread${t.id === currentId ? " current" : ""}`,
          href: `?thread=${encodeURIComponent(t.id)}`,
          "data-testid": "thread-link",
          "data-thread-id": t.id,
          onclick: (e: MouseEvent) => {
            if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
            e.preventDefault();
            open(t.id);
          },
        },
        h("span", { class: `dot ${status}` }),
        h("span", { class: "title" }, t.forkedFrom ? h("span", { class: "fork-mark", title: `branched from ${t.forkedFrom.threadId}` }, "↳ ") : null, t.title || t.id.slice(0, 8)),
        h("span", { class: "when muted" }, ago(t.updatedAt)),
      );
    }),
  );
}
