/** Cards for the thread's pending interrupts: approve, deny, or edit the arguments of a
 * tool call; or, for a tool a crash cut off (an effect in doubt), say whether it happened. */
import type { Interrupt, Message, ToolCall } from "@ag-ui/client";
import { h, pretty, replace } from "../dom";

/** The answer a card produces: a ResumeEntry's payload. */
export interface Answer {
  payload: Record<string, unknown>;
}

/** An interrupt asking whether a tool cut off by a crash happened (spec G9). */
function inDoubt(interrupt: Interrupt): boolean {
  return ((interrupt.metadata ?? {}) as Record<string, unknown>).kind === "effect_in_doubt";
}

export interface ApprovalHandlers {
  answer(interrupt: Interrupt, answer: Answer): void;
}

/** The tool call an interrupt is about: by `toolCallId`, else from its metadata. */
function toolCallFor(interrupt: Interrupt, messages: Message[]): { name: string; args: string } | null {
  if (interrupt.toolCallId) {
    for (const m of messages as (Message & { toolCalls?: ToolCall[] })[]) {
      const call = m.toolCalls?.find((c) => c.id === interrupt.toolCallId);
      if (call) return { name: call.function.name, args: call.function.arguments };
    }
  }
  const meta = (interrupt.metadata ?? {}) as Record<string, unknown>;
  const name = meta.toolName ?? meta.tool ?? meta.name;
  const args = meta.args ?? meta.arguments ?? meta.toolArgs;
  if (name || args) return { name: String(name ?? "tool"), args: JSON.stringify(args ?? {}) };
  return null;
}

export function renderApprovals(
  container: HTMLElement,
  interrupts: Interrupt[],
  messages: Message[],
  answered: ReadonlySet<string>,
  sending: boolean,
  on: ApprovalHandlers,
): void {
  // Keep a card that is being edited: re-rendering would lose the user's typing.
  const key = JSON.stringify([interrupts, [...answered], sending]);
  if (container.dataset.key === key) return;
  container.dataset.key = key;
  replace(container, ...interrupts.map((i) => card(i, toolCallFor(i, messages), answered.has(i.id), sending, on)));
  container.hidden = interrupts.length === 0;
}

function card(
  interrupt: Interrupt,
  call: { name: string; args: string } | null,
  answered: boolean,
  sending: boolean,
  on: ApprovalHandlers,
): HTMLElement {
  if (inDoubt(interrupt)) return doubtCard(interrupt, call, answered || sending, on);
  const editor = h("textarea", {
    class: "args-editor",
    "data-testid": "edit-args",
    spellcheck: "false",
    rows: 6,
    value: pretty(call?.args ?? "{}"),
  });
  const editRow = h("div", { class: "edit-row", hidden: true }, editor);
  const problem = h("div", { class: "problem" });
  const disabled = answered || sending;

  const approveEdited = () => {
    try {
      const editedArgs = JSON.parse(editor.value) as Record<string, unknown>;
      on.answer(interrupt, { payload: { approved: true, editedArgs } });
    } catch (error) {
      problem.textContent = `Arguments are not valid JSON: ${(error as Error).message}`;
    }
  };

  return h(
    "section",
    { class: "approval", "data-testid": "interrupt", "data-interrupt-id": interrupt.id },
    h("header", {}, h("span", { class: "badge interrupted" }, "approval needed"), ` ${interrupt.reason ?? ""}`),
    interrupt.message ? h("p", {}, interrupt.message) : null,
    call ? h("div", { class: "tool-call pending" }, h("div", { class: "tool-name" }, call.name), h("pre", { class: "tool-args" }, pretty(call.args))) : null,
    editRow,
    problem,
    h(
      "div",
      { class: "actions" },
      h("button", { class: "primary", "data-testid": "approve", disabled, onclick: () => (editRow.hidden ? on.answer(interrupt, { payload: { approved: true } }) : approveEdited()) }, "Approve"),
      h("button", { class: "danger", "data-testid": "deny", disabled, onclick: () => on.answer(interrupt, { payload: { approved: false } }) }, "Deny"),
      h("button", {
        class: "ghost",
        "data-testid": "edit",
        disabled,
        onclick: (e: Event) => {
          editRow.hidden = !editRow.hidden;
          (e.target as HTMLButtonElement).textContent = editRow.hidden ? "Edit arguments" : "Cancel edit";
        },
      }, "Edit arguments"),
      answered ? h("span", { class: "muted" }, "answered — waiting for the others") : null,
    ),
  );
}

/** A tool cut off by a crash may or may not have run: the person says which. "It
 * happened" sends what it returned (JSON if it parses, else the text). */
function doubtCard(
  interrupt: Interrupt,
  call: { name: string; args: string } | null,
  disabled: boolean,
  on: ApprovalHandlers,
): HTMLElement {
  const result = h("textarea", {
    class: "args-editor",
    "data-testid": "doubt-result",
    spellcheck: "false",
    rows: 3,
    placeholder: "What it returned, if it happened",
  });
  const happened = () => {
    const text = result.value.trim();
    let value: unknown = text;
    try {
      value = JSON.parse(text);
    } catch {
      // plain text is a fine result
    }
    on.answer(interrupt, { payload: { answer: "happened", result: value } });
  };
  return h(
    "section",
    { class: "approval", "data-testid": "interrupt", "data-interrupt-id": interrupt.id },
    h("header", {}, h("span", { class: "badge interrupted" }, "did it happen?"), ` ${interrupt.reason ?? ""}`),
    interrupt.message ? h("p", {}, interrupt.message) : null,
    call ? h("div", { class: "tool-call pending" }, h("div", { class: "tool-name" }, call.name), h("pre", { class: "tool-args" }, pretty(call.args))) : null,
    h("div", { class: "edit-row" }, result),
    h(
      "div",
      { class: "actions" },
      h("button", { class: "primary", "data-testid": "happened", disabled, onclick: happened }, "It happened"),
      h("button", { class: "ghost", "data-testid": "run-again", disabled, onclick: () => on.answer(interrupt, { payload: { answer: "run_again" } }) }, "Run it again"),
      h("button", { class: "danger", "data-testid": "fail-run", disabled, onclick: () => on.answer(interrupt, { payload: { answer: "fail" } }) }, "Fail the run"),
    ),
  );
}
