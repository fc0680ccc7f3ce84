/** The demo agent's todo list, read from shared state (`state.todos`). */
import { h, replace } from "../dom";

interface Todo {
  id: string | number;
  title: string;
  status: string;
}

const ICON: Record<string, string> = {
  pending: "○",
  todo: "○",
  in_progress: "◐",
  running: "◐",
  done: "●",
  completed: "●",
  failed: "✕",
  skipped: "–",
  awaiting_approval: "◇",
};

export function renderTodos(container: HTMLElement, state: unknown): void {
  const todos = ((state as { todos?: Todo[] } | null)?.todos ?? []).filter(Boolean);
  const key = JSON.stringify(todos);
  if (container.dataset.key === key) return;
  container.dataset.key = key;
  container.hidden = todos.length === 0;
  const done = todos.filter((t) => t.status === "done" || t.status === "completed").length;
  replace(
    container,
    h("h3", {}, "Plan ", h("span", { class: "muted" }, `${done}/${todos.length}`)),
    h(
      "ol",
      { class: "todos" },
      todos.map((t) =>
        h(
          "li",
          { class: `todo ${t.status}`, "data-testid": "todo", "data-status": t.status },
          h("span", { class: "icon" }, ICON[t.status] ?? "○"),
          h("span", {}, t.title),
        ),
      ),
    ),
  );
}
