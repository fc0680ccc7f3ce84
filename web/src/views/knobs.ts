/** The demo agent's knobs (`forwardedProps.demo`), kept in localStorage. */
import { h, replace } from "../dom";

const STORAGE_KEY = "outlast.demo";

const FIELDS: { key: string; label: string; hint: string; list?: boolean }[] = [
  { key: "steps", label: "steps", hint: "todos to plan" },
  { key: "step_delay_ms", label: "step delay (ms)", hint: "per tool call" },
  { key: "tokens_per_message", label: "tokens / message", hint: "" },
  { key: "token_delay_ms", label: "token delay (ms)", hint: "" },
  { key: "approve_at", label: "approve at", hint: "steps, e.g. 2,4", list: true },
  { key: "fail_at", label: "fail at", hint: "step" },
];

type Knobs = Record<string, number | number[]>;

function load(): Knobs {
  try {
    return JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "{}") as Knobs;
  } catch {
    return {};
  }
}

/** The knobs to send, numbers only, empty fields left out (server defaults apply). */
export function readKnobs(): Knobs {
  return load();
}

export function renderKnobs(container: HTMLElement, visible: boolean): void {
  container.hidden = !visible;
  if (!visible) return;
  const knobs = load();
  const inputs = FIELDS.map((f) => {
    const current = knobs[f.key];
    const input = h("input", {
      name: f.key,
      "data-testid": `knob-${f.key}`,
      inputmode: "numeric",
      placeholder: f.hint || "default",
      value: Array.isArray(current) ? current.join(",") : (current ?? ""),
      onchange: () => save(),
    });
    return h("label", {}, h("span", {}, f.label), input);
  });
  const save = () => {
    const next: Knobs = {};
    FIELDS.forEach((f, i) => {
      const raw = (inputs[i].querySelector("input") as HTMLInputElement).value.trim();
      if (!raw) return;
      if (f.list) {
        const list = raw.split(/[\s,]+/).map(Number).filter(Number.isFinite);
        if (list.length) next[f.key] = list;
      } else if (Number.isFinite(Number(raw))) {
        next[f.key] = Number(raw);
      }
    });
    localStorage.setItem(STORAGE_KEY, JSON.stringify(next));
  };
  replace(container, h("summary", {}, "Demo agent settings"), h("div", { class: "knob-grid" }, inputs));
}
