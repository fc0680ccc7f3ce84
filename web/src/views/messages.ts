/** The conversation: one element per message, updated in place as tokens arrive. */
import type { Message, ToolCall } from "@ag-ui/client";
import { h, pretty } from "../dom";

type AnyMessage = Message & {
  content?: unknown;
  toolCalls?: ToolCall[];
  toolCallId?: string;
  error?: string;
  encryptedValue?: string;
  subagentRunId?: string;
};

/** Subagents' names by `subagentRunId`, as their SUBAGENT_STARTED events tell them. */
export const subagentNames = new Map<string, string>();

/** Last rendered form of each element, so unchanged messages are not touched. */
const rendered = new WeakMap<HTMLElement, string>();

export function textOf(content: unknown): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (part && typeof part === "object" && "text" in part ? String(part.text) : ""))
      .join("");
  }
  return JSON.stringify(content);
}

/** Per-message actions built on fork; offered only while nothing streams. */
export interface MessageActions {
  enabled: boolean;
  /** Edit a user message and run the edit on a new branch. */
  edit: (message: Message) => void;
  /** Branch the thread at the end of this turn (before `beforeMessageId`, or the latest). */
  branch: (beforeMessageId: string | undefined) => void;
}

/**
 * Bring `list` in line with `messages`: keyed by message id, so a message
 * element survives every update and only its changed text is rewritten.
 */
export function renderMessages(list: HTMLElement, messages: Message[], actions?: MessageActions): void {
  const toolNames = new Map<string, string>();
  const answered = new Set<string>();
  for (const m of messages as AnyMessage[]) {
    for (const call of m.toolCalls ?? []) toolNames.set(call.id, call.function.name);
    if (m.role === "tool" && m.toolCallId) answered.add(m.toolCallId);
  }

  const existing = new Map<string, HTMLElement>();
  for (const el of Array.from(list.children) as HTMLElement[]) {
    if (el.dataset.messageId) existing.set(el.dataset.messageId, el);
  }

  const shown = (messages as AnyMessage[]).filter((m) => m.role !== "activity");
  let previous: Element | null = null;
  for (const [index, message] of shown.entries()) {
    let el = existing.get(message.id);
    existing.delete(message.id);
    if (!el) {
      el = h("article", {
        class: `message ${message.role}${message.subagentRunId ? " subagent" : ""}`,
        "data-testid": "message",
        "data-message-id": message.id,
        "data-role": message.role,
      });
    }
    // A turn ends where the next message is the person's (or at the end): a boundary.
    const next = shown[index + 1];
    const turnEnd = message.role !== "user" && (next === undefined || next.role === "user");
    const offer = actions?.enabled ? (message.role === "user" ? "edit" : turnEnd ? "branch" : "") : "";
    const sub = message.subagentRunId ? subagentNames.get(message.subagentRunId) : undefined;
    const key = JSON.stringify([message, message.role === "assistant" ? [...answered] : 0, offer, next?.id, sub]);
    if (rendered.get(el) !== key) {
      rendered.set(el, key);
      el.replaceChildren(...body(message, toolNames, answered));
      if (offer && actions) el.append(messageActions(offer, message, next?.id, actions));
    }
    const expectedPosition: Element | null = previous ? previous.nextElementSibling : list.firstElementChild;
    if (expectedPosition !== el) {
      if (previous) previous.after(el);
      else list.prepend(el);
    }
    previous = el;
  }
  for (const stale of existing.values()) stale.remove();
}

function messageActions(offer: string, message: Message, nextId: string | undefined, actions: MessageActions): HTMLElement {
  const button = offer === "edit"
    ? h("button", { class: "ghost", type: "button", "data-testid": "edit-message", onclick: () => actions.edit(message) }, "Edit and regenerate")
    : h("button", { class: "ghost", type: "button", "data-testid": "branch-here", onclick: () => actions.branch(nextId) }, "Branch from here");
  return h("div", { class: "message-actions" }, button);
}

/** Who wrote a message: its role, and the subagent it belongs to, if any. */
function author(m: AnyMessage): string {
  if (!m.subagentRunId) return m.role;
  return `${m.role} · subagent ${subagentNames.get(m.subagentRunId) ?? m.subagentRunId}`;
}

function body(m: AnyMessage, toolNames: Map<string, string>, answered: Set<string>): Node[] {
  const text = textOf(m.content);
  switch (m.role) {
    case "reasoning": {
      // Thinking is folded away; a provider's encrypted reasoning has nothing to show.
      const shown = text || (m.encryptedValue ? "(encrypted reasoning)" : "");
      return [
        h(
          "details",
          { class: "reasoning-body", "data-testid": "reasoning" },
          h("summary", { class: "meta" }, author(m).replace("reasoning", "thinking")),
          h("div", { class: "content" }, shown),
        ),
      ];
    }
    case "tool":
      return [
        h("div", { class: "meta" }, `result · ${toolNames.get(m.toolCallId ?? "") ?? "tool"}`),
        h("pre", { class: "content tool-result" }, m.error ? `error: ${m.error}` : pretty(text)),
      ];
    case "assistant":
      return [
        h("div", { class: "meta" }, author(m)),
        text ? h("div", { class: "content" }, text) : null,
        ...(m.toolCalls ?? []).map((call) => toolCall(call, answered.has(call.id))),
      ].filter((n): n is HTMLElement => n !== null);
    default:
      return [h("div", { class: "meta" }, author(m)), h("div", { class: "content" }, text)];
  }
}

function toolCall(call: ToolCall, done: boolean): HTMLElement {
  return h(
    "div",
    { class: `tool-call ${done ? "done" : "pending"}`, "data-testid": "tool-call", "data-tool-call-id": call.id },
    h("div", { class: "tool-name" }, h("span", { class: "icon" }, done ? "✓" : "⋯"), call.function.name),
    h("pre", { class: "tool-args" }, pretty(call.function.arguments || "{}")),
  );
}
