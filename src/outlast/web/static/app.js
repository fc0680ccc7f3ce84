// ../clients/js/src/resumable-agent.ts
import {
  EventType,
  HttpAgent,
  enforceOutgoingInput
} from "./vendor.js";
import { Observable } from "./vendor.js";

// ../clients/js/src/sse.ts
var StreamHttpError = class extends Error {
  constructor(status, payload) {
    const detail = payload?.error?.message ?? (typeof payload === "string" ? payload : JSON.stringify(payload));
    super(`HTTP ${status}: ${detail}`);
    this.status = status;
    this.payload = payload;
    this.name = "StreamHttpError";
  }
  status;
  payload;
};
var RETRYABLE_STATUS = /* @__PURE__ */ new Set([408, 425, 429, 500, 502, 503, 504]);
var RECONNECT = /* @__PURE__ */ Symbol("reconnect");
async function readSse(body2, connection, idleTimeoutMs, on) {
  const reader = body2.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let idle;
  const arm = () => {
    clearTimeout(idle);
    idle = setTimeout(() => connection.abort(RECONNECT), idleTimeoutMs);
  };
  const cancel = () => void reader.cancel().catch(() => void 0);
  connection.signal.addEventListener("abort", cancel);
  try {
    arm();
    for (; ; ) {
      if (connection.signal.aborted) throw connection.signal.reason ?? new Error("aborted");
      const { done, value } = await reader.read();
      if (connection.signal.aborted) throw connection.signal.reason ?? new Error("aborted");
      if (done) break;
      arm();
      on.activity();
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = frameEnd(buffer)) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end).replace(/^(\r\n|\r|\n){2}/, "");
        dispatch(block, on);
      }
    }
  } finally {
    clearTimeout(idle);
    connection.signal.removeEventListener("abort", cancel);
    reader.releaseLock();
  }
}
function frameEnd(buffer) {
  const match = /(\r\n|\r|\n)(\r\n|\r|\n)/.exec(buffer);
  return match ? match.index : -1;
}
function dispatch(block, on) {
  let id;
  const data = [];
  for (const line of block.split(/\r\n|\r|\n/)) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  if (data.length > 0) on.frame(id, data.join("\n"));
}
async function httpError(response) {
  const text = await response.text().catch(() => "");
  let payload = text;
  try {
    payload = JSON.parse(text);
  } catch {
  }
  return new StreamHttpError(response.status, payload);
}
function errorText(error) {
  if (error instanceof Error) return error.message;
  if (typeof error === "symbol") return "connection replaced";
  return String(error);
}

// ../clients/js/src/resumable-agent.ts
var TERMINAL_EVENTS = /* @__PURE__ */ new Set([EventType.RUN_FINISHED, EventType.RUN_ERROR]);
var ResumableHttpAgent = class extends HttpAgent {
  /** Called whenever the transport's state changes. */
  onConnectionChange;
  /** Called for every event delivered to the pipeline, with its seq. */
  onFrame;
  runEventsUrl;
  backoff;
  idleTimeoutMs;
  session;
  constructor(config) {
    super(config);
    const base = new URL(config.url, globalThis.location?.href ?? "http://localhost/");
    this.runEventsUrl = config.runEventsUrl ?? ((runId) => new URL(`/runs/${encodeURIComponent(runId)}/events`, base).toString());
    this.backoff = {
      initialMs: config.backoff?.initialMs ?? 500,
      maxMs: config.backoff?.maxMs ?? 8e3,
      factor: config.backoff?.factor ?? 2,
      maxAttempts: config.backoff?.maxAttempts ?? Number.POSITIVE_INFINITY
    };
    this.idleTimeoutMs = config.idleTimeoutMs ?? 45e3;
  }
  /** The run being followed and the last seq folded, or undefined when idle. */
  get position() {
    const s = this.session;
    return s && { runId: s.runId, lastSeq: s.lastSeq };
  }
  /**
   * Replace the current connection now, resuming after the last seq; or, while
   * waiting out a backoff delay, retry at once. Use it when the page becomes
   * visible or the browser reports it is back online. With `ifSilentForMs`,
   * a connection that delivered something more recently is left alone.
   */
  reconnectNow(ifSilentForMs = 0) {
    const s = this.session;
    if (!s) return;
    if (s.wake) {
      s.attempt = 0;
      s.wake();
    } else if (s.connection && Date.now() - s.lastActivity >= ifSilentForMs) {
      s.connection.abort(RECONNECT);
    }
  }
  /** Start a run (POST) and follow it to its end, reattaching after drops. */
  run(input) {
    const open = (signal) => this.fetch(this.url, { ...this.requestInit(enforceOutgoingInput(input)), signal });
    return this.stream({ mode: "run", runId: input.runId }, open);
  }
  /**
   * Hydrate the thread (empty `messages`, no `resume`) and follow the active
   * run, if the server streams one, to its end.
   */
  connect(input) {
    const hydration = { ...input, messages: [] };
    delete hydration.resume;
    const open = (signal) => this.fetch(this.url, { ...this.requestInit(enforceOutgoingInput(hydration)), signal });
    return this.stream({ mode: "hydrate" }, open);
  }
  async connectAgent(parameters, subscriber) {
    if (this.abortController.signal.aborted) this.abortController = new AbortController();
    this.pendingInterrupts = [];
    return super.connectAgent(parameters, subscriber);
  }
  stream(init, open) {
    return new Observable((subscriber) => {
      const session = {
        ...init,
        admitted: false,
        delivered: false,
        terminal: false,
        attempt: 0,
        lastActivity: Date.now()
      };
      this.session = session;
      let closed = false;
      void this.pump(session, open, subscriber, () => closed).finally(() => {
        if (this.session === session) this.session = void 0;
        this.report(session, "idle");
      });
      return () => {
        closed = true;
        session.connection?.abort();
        session.wake?.();
      };
    });
  }
  /** Open, read, and on a drop reopen, until the run's final event or a fatal error. */
  async pump(s, first, out, isClosed) {
    const userSignal = this.abortController.signal;
    let opener = first;
    let resuming = false;
    let reopening = false;
    let lastError;
    while (!isClosed() && !userSignal.aborted) {
      const connection = new AbortController();
      const onUserAbort = () => connection.abort(userSignal.reason);
      userSignal.addEventListener("abort", onUserAbort);
      s.connection = connection;
      this.report(s, s.attempt === 0 ? "connecting" : "reconnecting", lastError);
      try {
        const response = await opener(connection.signal);
        if (!response.ok) throw await httpError(response);
        if (!response.body) throw new Error("response has no body");
        s.admitted = true;
        if (s.lastSeq === void 0) s.runId = response.headers.get("Outlast-Run-Id") ?? s.runId;
        this.report(s, "live");
        const skipBefore = resuming ? s.lastSeq ?? 0 : void 0;
        const skipRunStarted = reopening;
        await readSse(response.body, connection, this.idleTimeoutMs, {
          activity: () => {
            s.lastActivity = Date.now();
          },
          frame: (id, data) => {
            const seq = id === void 0 || id === "" ? void 0 : Number(id);
            const event = JSON.parse(data);
            if (skipBefore !== void 0) {
              if (seq !== void 0 ? seq <= skipBefore : !TERMINAL_EVENTS.has(event.type)) return;
            }
            if (skipRunStarted && event.type === EventType.RUN_STARTED) return;
            if (seq !== void 0) s.lastSeq = seq;
            if (event.type === EventType.RUN_STARTED && event.runId) s.runId = event.runId;
            if (TERMINAL_EVENTS.has(event.type)) s.terminal = true;
            s.delivered = true;
            s.attempt = 0;
            this.onFrame?.({ seq, runId: s.runId, event });
            out.next(event);
          }
        });
        if (s.terminal) {
          out.complete();
          return;
        }
        lastError = "stream ended before the run did";
      } catch (error) {
        if (isClosed() || userSignal.aborted) break;
        if (error instanceof StreamHttpError && !RETRYABLE_STATUS.has(error.status)) {
          out.error(error);
          return;
        }
        if (error instanceof SyntaxError) {
          out.error(error);
          return;
        }
        const replaced = connection.signal.reason === RECONNECT;
        lastError = replaced ? void 0 : errorText(error);
        if (replaced) s.attempt = 0;
      } finally {
        userSignal.removeEventListener("abort", onUserAbort);
        s.connection = void 0;
      }
      if (s.terminal) {
        out.complete();
        return;
      }
      s.attempt += 1;
      if (s.attempt > this.backoff.maxAttempts) {
        out.error(new Error(`gave up reconnecting after ${s.attempt - 1} attempts: ${lastError}`));
        return;
      }
      const delay = s.attempt === 1 && !lastError ? 0 : this.delayFor(s.attempt);
      this.report(s, "reconnecting", lastError, delay);
      await this.sleep(s, delay);
      if (s.runId && (s.lastSeq !== void 0 || s.admitted && s.mode === "run")) {
        const runId = s.runId;
        const after = s.lastSeq ?? 0;
        opener = (signal) => this.fetch(this.runEventsUrl(runId), {
          method: "GET",
          headers: { ...this.headers, Accept: "text/event-stream", "Last-Event-ID": String(after) },
          signal
        });
        resuming = true;
        reopening = false;
      } else {
        opener = first;
        resuming = false;
        reopening = s.delivered;
      }
    }
    out.complete();
  }
  delayFor(attempt) {
    const { initialMs, maxMs, factor } = this.backoff;
    const base = Math.min(maxMs, initialMs * factor ** (attempt - 1));
    return Math.round(base * (0.75 + Math.random() * 0.5));
  }
  sleep(s, ms) {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        s.wake = void 0;
        resolve();
      };
      const timer = setTimeout(done, ms);
      s.wake = done;
    });
  }
  report(s, status, error, retryInMs) {
    this.onConnectionChange?.({
      status,
      runId: s.runId,
      lastSeq: s.lastSeq,
      attempt: s.attempt,
      retryInMs,
      error
    });
  }
};

// src/api.ts
var ApiError = class extends Error {
  constructor(status, code, message, detail = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.name = "ApiError";
  }
  status;
  code;
  detail;
};
var TOKEN_KEY = "outlast.token";
function token() {
  return localStorage.getItem(TOKEN_KEY) ?? "";
}
function setToken(value) {
  if (value.trim()) localStorage.setItem(TOKEN_KEY, value.trim());
  else localStorage.removeItem(TOKEN_KEY);
}
function takeTokenFromLocation() {
  const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (!match) return;
  setToken(decodeURIComponent(match[1]));
  history.replaceState(history.state, "", location.pathname + location.search);
}
function authHeaders() {
  const value = token();
  return value ? { Authorization: `Bearer ${value}` } : {};
}
async function call(method, path, body2) {
  const response = await fetch(path, {
    method,
    headers: body2 === void 0 ? authHeaders() : { ...authHeaders(), "Content-Type": "application/json" },
    body: body2 === void 0 ? void 0 : JSON.stringify(body2)
  });
  const text = await response.text();
  const json = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const error = json?.error ?? {};
    throw new ApiError(
      response.status,
      String(error.code ?? response.status),
      String(error.message ?? response.statusText),
      error
    );
  }
  return json;
}
function items(json, key) {
  if (Array.isArray(json)) return json;
  const wrapped = json;
  const list = wrapped?.[key] ?? wrapped?.items ?? wrapped?.data;
  return Array.isArray(list) ? list : [];
}
function threadSummary(raw) {
  return {
    ...raw,
    id: String(raw.id ?? raw.threadId ?? raw.thread_id),
    updatedAt: raw.updatedAt ?? raw.updated_at,
    activeRun: raw.activeRun ?? raw.active_run ?? null
  };
}
async function listThreads() {
  const json = await call("GET", "/threads");
  return items(json, "threads").map(threadSummary);
}
async function getThread(threadId) {
  const raw = await call("GET", `/threads/${enc(threadId)}`);
  return {
    ...raw,
    threadId: String(raw.threadId ?? raw.id ?? threadId),
    messages: raw.messages ?? [],
    state: raw.state ?? {},
    interrupts: raw.interrupts ?? [],
    activeRun: raw.activeRun ?? raw.active_run ?? null
  };
}
async function listRuns(threadId) {
  const json = await call("GET", `/threads/${enc(threadId)}/runs`);
  return items(json, "runs");
}
function getRun(runId) {
  return call("GET", `/runs/${enc(runId)}`);
}
function cancelRun(runId) {
  return call("POST", `/runs/${enc(runId)}/cancel`);
}
async function runEvents(runId) {
  const response = await fetch(`/runs/${enc(runId)}/events?after=0&follow=false`, {
    headers: { ...authHeaders(), Accept: "text/event-stream" }
  });
  if (!response.ok || !response.body) throw new ApiError(response.status, "http", response.statusText);
  const frames = [];
  await readSse(response.body, new AbortController(), 3e4, {
    activity: () => void 0,
    frame: (id, data) => frames.push({ seq: id ? Number(id) : void 0, event: JSON.parse(data) })
  });
  return frames;
}
function enc(id) {
  return encodeURIComponent(id);
}
async function forkThread(threadId, body2 = {}) {
  const raw = await call("POST", `/threads/${enc(threadId)}/fork`, body2);
  return { ...raw, threadId: String(raw.threadId) };
}

// src/dom.ts
function h(tag, props = {}, ...children) {
  const el2 = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === void 0 || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el2.addEventListener(key.slice(2), value);
    } else if (key === "text") {
      el2.textContent = String(value);
    } else if (key === "value") {
      el2.value = String(value);
    } else {
      el2.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el2, children);
  return el2;
}
function append(el2, children) {
  for (const child of children.flat()) {
    if (child === null || child === void 0 || child === false) continue;
    el2.append(child instanceof Node ? child : String(child));
  }
}
function replace(el2, ...children) {
  el2.replaceChildren();
  append(el2, children);
}
function $(selector) {
  const el2 = document.querySelector(selector);
  if (!el2) throw new Error(`missing element ${selector}`);
  return el2;
}
function ago(iso) {
  if (!iso) return "";
  const ms = Date.now() - Date.parse(iso);
  if (Number.isNaN(ms)) return "";
  if (ms < 6e4) return `${Math.max(0, Math.round(ms / 1e3))} s ago`;
  if (ms < 36e5) return `${Math.round(ms / 6e4)} min ago`;
  if (ms < 864e5) return `${Math.round(ms / 36e5)} h ago`;
  return new Date(iso).toLocaleDateString();
}
function pretty(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

// src/views/approvals.ts
function inDoubt(interrupt) {
  return (interrupt.metadata ?? {}).kind === "effect_in_doubt";
}
function toolCallFor(interrupt, messages) {
  if (interrupt.toolCallId) {
    for (const m of messages) {
      const call2 = m.toolCalls?.find((c) => c.id === interrupt.toolCallId);
      if (call2) return { name: call2.function.name, args: call2.function.arguments };
    }
  }
  const meta = interrupt.metadata ?? {};
  const name = meta.toolName ?? meta.tool ?? meta.name;
  const args = meta.args ?? meta.arguments ?? meta.toolArgs;
  if (name || args) return { name: String(name ?? "tool"), args: JSON.stringify(args ?? {}) };
  return null;
}
function renderApprovals(container, interrupts, messages, answered, sending, on) {
  const key = JSON.stringify([interrupts, [...answered], sending]);
  if (container.dataset.key === key) return;
  container.dataset.key = key;
  replace(container, ...interrupts.map((i) => card(i, toolCallFor(i, messages), answered.has(i.id), sending, on)));
  container.hidden = interrupts.length === 0;
}
function card(interrupt, call2, answered, sending, on) {
  if (inDoubt(interrupt)) return doubtCard(interrupt, call2, answered || sending, on);
  const editor = h("textarea", {
    class: "args-editor",
    "data-testid": "edit-args",
    spellcheck: "false",
    rows: 6,
    value: pretty(call2?.args ?? "{}")
  });
  const editRow = h("div", { class: "edit-row", hidden: true }, editor);
  const problem = h("div", { class: "problem" });
  const disabled = answered || sending;
  const approveEdited = () => {
    try {
      const editedArgs = JSON.parse(editor.value);
      on.answer(interrupt, { payload: { approved: true, editedArgs } });
    } catch (error) {
      problem.textContent = `Arguments are not valid JSON: ${error.message}`;
    }
  };
  return h(
    "section",
    { class: "approval", "data-testid": "interrupt", "data-interrupt-id": interrupt.id },
    h("header", {}, h("span", { class: "badge interrupted" }, "approval needed"), ` ${interrupt.reason ?? ""}`),
    interrupt.message ? h("p", {}, interrupt.message) : null,
    call2 ? h("div", { class: "tool-call pending" }, h("div", { class: "tool-name" }, call2.name), h("pre", { class: "tool-args" }, pretty(call2.args))) : null,
    editRow,
    problem,
    h(
      "div",
      { class: "actions" },
      h("button", { class: "primary", "data-testid": "approve", disabled, onclick: () => editRow.hidden ? on.answer(interrupt, { payload: { approved: true } }) : approveEdited() }, "Approve"),
      h("button", { class: "danger", "data-testid": "deny", disabled, onclick: () => on.answer(interrupt, { payload: { approved: false } }) }, "Deny"),
      h("button", {
        class: "ghost",
        "data-testid": "edit",
        disabled,
        onclick: (e) => {
          editRow.hidden = !editRow.hidden;
          e.target.textContent = editRow.hidden ? "Edit arguments" : "Cancel edit";
        }
      }, "Edit arguments"),
      answered ? h("span", { class: "muted" }, "answered \u2014 waiting for the others") : null
    )
  );
}
function doubtCard(interrupt, call2, disabled, on) {
  const result = h("textarea", {
    class: "args-editor",
    "data-testid": "doubt-result",
    spellcheck: "false",
    rows: 3,
    placeholder: "What it returned, if it happened"
  });
  const happened = () => {
    const text = result.value.trim();
    let value = text;
    try {
      value = JSON.parse(text);
    } catch {
    }
    on.answer(interrupt, { payload: { answer: "happened", result: value } });
  };
  return h(
    "section",
    { class: "approval", "data-testid": "interrupt", "data-interrupt-id": interrupt.id },
    h("header", {}, h("span", { class: "badge interrupted" }, "did it happen?"), ` ${interrupt.reason ?? ""}`),
    interrupt.message ? h("p", {}, interrupt.message) : null,
    call2 ? h("div", { class: "tool-call pending" }, h("div", { class: "tool-name" }, call2.name), h("pre", { class: "tool-args" }, pretty(call2.args))) : null,
    h("div", { class: "edit-row" }, result),
    h(
      "div",
      { class: "actions" },
      h("button", { class: "primary", "data-testid": "happened", disabled, onclick: happened }, "It happened"),
      h("button", { class: "ghost", "data-testid": "run-again", disabled, onclick: () => on.answer(interrupt, { payload: { answer: "run_again" } }) }, "Run it again"),
      h("button", { class: "danger", "data-testid": "fail-run", disabled, onclick: () => on.answer(interrupt, { payload: { answer: "fail" } }) }, "Fail the run")
    )
  );
}

// src/views/inspector.ts
var TIMELINE_LIMIT = 400;
function renderRuns(container, runs, selectedRunId, select) {
  replace(
    container,
    runs.map(
      (r) => h(
        "button",
        {
          class: `run-chip${r.runId === selectedRunId ? " selected" : ""}`,
          "data-testid": "run-chip",
          "data-run-id": r.runId,
          title: r.runId,
          onclick: () => select(r.runId)
        },
        h("span", { class: `dot ${r.status}` }),
        `${r.runId.slice(0, 8)} \xB7 ${r.status}`
      )
    )
  );
}
function renderTimeline(container, entries, dropped) {
  const rows = entries.map(
    (e) => h(
      "li",
      { class: `event ${e.seq === void 0 ? "synthetic" : ""}`, "data-testid": "event-row", "data-seq": e.seq ?? "" },
      h("span", { class: "seq" }, e.seq ?? "\xB7"),
      h("span", { class: "type" }, e.event.type),
      summaryCell(e)
    )
  );
  replace(container, dropped > 0 ? h("li", { class: "muted" }, `\u2026 ${dropped} earlier events`) : null, rows);
}
function appendTimeline(container, entry) {
  const row = h(
    "li",
    { class: `event ${entry.seq === void 0 ? "synthetic" : ""}`, "data-testid": "event-row", "data-seq": entry.seq ?? "" },
    h("span", { class: "seq" }, entry.seq ?? "\xB7"),
    h("span", { class: "type" }, entry.event.type),
    summaryCell(entry)
  );
  const following = container.scrollHeight - container.scrollTop - container.clientHeight < 40;
  container.append(row);
  while (container.children.length > TIMELINE_LIMIT) container.firstElementChild?.remove();
  if (following) container.scrollTop = container.scrollHeight;
}
var HYDRATION = {
  RUN_STARTED: "hydration: the thread as stored (no run of its own)",
  RUN_FINISHED: "hydration: end of the stored thread"
};
var HYDRATION_WHY = "Synthesized when the page loaded the thread, not an event of a run: its runId is the active run's when one is going, else the id of the loading request, which runs nothing.";
function summaryCell(entry) {
  const hydration = entry.seq === void 0 ? HYDRATION[entry.event.type] : void 0;
  if (hydration !== void 0) {
    return h("span", { class: "summary", title: HYDRATION_WHY, "data-testid": "hydration" }, hydration);
  }
  return h("span", { class: "summary" }, summary(entry.event));
}
function summary(event) {
  const e = event;
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
      const outcome = e.outcome;
      return outcome?.type ?? "success";
    }
    case "RUN_ERROR":
      return `${e.code ?? ""} ${short(String(e.message ?? ""))}`;
    case "STATE_DELTA":
      return short(JSON.stringify(e.delta));
    case "MESSAGES_SNAPSHOT":
      return `${e.messages.length} messages`;
    default:
      return "";
  }
}
function short(s) {
  return s.length > 60 ? `${s.slice(0, 57)}\u2026` : s;
}

// src/views/messages.ts
var subagentNames = /* @__PURE__ */ new Map();
var rendered = /* @__PURE__ */ new WeakMap();
function textOf(content) {
  if (content === void 0 || content === null) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((part) => part && typeof part === "object" && "text" in part ? String(part.text) : "").join("");
  }
  return JSON.stringify(content);
}
function renderMessages(list, messages, actions) {
  const toolNames = /* @__PURE__ */ new Map();
  const answered = /* @__PURE__ */ new Set();
  for (const m of messages) {
    for (const call2 of m.toolCalls ?? []) toolNames.set(call2.id, call2.function.name);
    if (m.role === "tool" && m.toolCallId) answered.add(m.toolCallId);
  }
  const existing = /* @__PURE__ */ new Map();
  for (const el2 of Array.from(list.children)) {
    if (el2.dataset.messageId) existing.set(el2.dataset.messageId, el2);
  }
  const shown = messages.filter((m) => m.role !== "activity");
  let previous = null;
  for (const [index, message] of shown.entries()) {
    let el2 = existing.get(message.id);
    existing.delete(message.id);
    if (!el2) {
      el2 = h("article", {
        class: `message ${message.role}${message.subagentRunId ? " subagent" : ""}`,
        "data-testid": "message",
        "data-message-id": message.id,
        "data-role": message.role
      });
    }
    const next = shown[index + 1];
    const turnEnd = message.role !== "user" && (next === void 0 || next.role === "user");
    const offer = actions?.enabled ? message.role === "user" ? "edit" : turnEnd ? "branch" : "" : "";
    const sub = message.subagentRunId ? subagentNames.get(message.subagentRunId) : void 0;
    const key = JSON.stringify([message, message.role === "assistant" ? [...answered] : 0, offer, next?.id, sub]);
    if (rendered.get(el2) !== key) {
      rendered.set(el2, key);
      el2.replaceChildren(...body(message, toolNames, answered));
      if (offer && actions) el2.append(messageActions(offer, message, next?.id, actions));
    }
    const expectedPosition = previous ? previous.nextElementSibling : list.firstElementChild;
    if (expectedPosition !== el2) {
      if (previous) previous.after(el2);
      else list.prepend(el2);
    }
    previous = el2;
  }
  for (const stale of existing.values()) stale.remove();
}
function messageActions(offer, message, nextId, actions) {
  const button = offer === "edit" ? h("button", { class: "ghost", type: "button", "data-testid": "edit-message", onclick: () => actions.edit(message) }, "Edit and regenerate") : h("button", { class: "ghost", type: "button", "data-testid": "branch-here", onclick: () => actions.branch(nextId) }, "Branch from here");
  return h("div", { class: "message-actions" }, button);
}
function author(m) {
  if (!m.subagentRunId) return m.role;
  return `${m.role} \xB7 subagent ${subagentNames.get(m.subagentRunId) ?? m.subagentRunId}`;
}
function body(m, toolNames, answered) {
  const text = textOf(m.content);
  switch (m.role) {
    case "reasoning": {
      const shown = text || (m.encryptedValue ? "(encrypted reasoning)" : "");
      return [
        h(
          "details",
          { class: "reasoning-body", "data-testid": "reasoning" },
          h("summary", { class: "meta" }, author(m).replace("reasoning", "thinking")),
          h("div", { class: "content" }, shown)
        )
      ];
    }
    case "tool":
      return [
        h("div", { class: "meta" }, `result \xB7 ${toolNames.get(m.toolCallId ?? "") ?? "tool"}`),
        h("pre", { class: "content tool-result" }, m.error ? `error: ${m.error}` : pretty(text))
      ];
    case "assistant":
      return [
        h("div", { class: "meta" }, author(m)),
        text ? h("div", { class: "content" }, text) : null,
        ...(m.toolCalls ?? []).map((call2) => toolCall(call2, answered.has(call2.id)))
      ].filter((n) => n !== null);
    default:
      return [h("div", { class: "meta" }, author(m)), h("div", { class: "content" }, text)];
  }
}
function toolCall(call2, done) {
  return h(
    "div",
    { class: `tool-call ${done ? "done" : "pending"}`, "data-testid": "tool-call", "data-tool-call-id": call2.id },
    h("div", { class: "tool-name" }, h("span", { class: "icon" }, done ? "\u2713" : "\u22EF"), call2.function.name),
    h("pre", { class: "tool-args" }, pretty(call2.function.arguments || "{}"))
  );
}

// src/views/threads.ts
function renderThreads(container, threads, currentId, open) {
  if (threads.length === 0) {
    replace(container, h("p", { class: "muted empty" }, "No threads yet."));
    return;
  }
  replace(
    container,
    threads.map((t) => {
      const status = t.activeRun ? t.activeRun.status : t.status ?? "idle";
      return h(
        "a",
        {
          class: `thread${t.id === currentId ? " current" : ""}`,
          href: `?thread=${encodeURIComponent(t.id)}`,
          "data-testid": "thread-link",
          "data-thread-id": t.id,
          onclick: (e) => {
            if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
            e.preventDefault();
            open(t.id);
          }
        },
        h("span", { class: `dot ${status}` }),
        h("span", { class: "title" }, t.forkedFrom ? h("span", { class: "fork-mark", title: `branched from ${t.forkedFrom.threadId}` }, "\u21B3 ") : null, t.title || t.id.slice(0, 8)),
        h("span", { class: "when muted" }, ago(t.updatedAt))
      );
    })
  );
}

// src/views/todos.ts
var ICON = {
  pending: "\u25CB",
  todo: "\u25CB",
  in_progress: "\u25D0",
  running: "\u25D0",
  done: "\u25CF",
  completed: "\u25CF",
  failed: "\u2715",
  skipped: "\u2013",
  awaiting_approval: "\u25C7"
};
function renderTodos(container, state) {
  const todos = (state?.todos ?? []).filter(Boolean);
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
      todos.map(
        (t) => h(
          "li",
          { class: `todo ${t.status}`, "data-testid": "todo", "data-status": t.status },
          h("span", { class: "icon" }, ICON[t.status] ?? "\u25CB"),
          h("span", {}, t.title)
        )
      )
    )
  );
}

// src/views/knobs.ts
var STORAGE_KEY = "outlast.demo";
var FIELDS = [
  { key: "steps", label: "steps", hint: "todos to plan" },
  { key: "step_delay_ms", label: "step delay (ms)", hint: "per tool call" },
  { key: "tokens_per_message", label: "tokens / message", hint: "" },
  { key: "token_delay_ms", label: "token delay (ms)", hint: "" },
  { key: "approve_at", label: "approve at", hint: "steps, e.g. 2,4", list: true },
  { key: "fail_at", label: "fail at", hint: "step" }
];
function load() {
  try {
    return JSON.parse(localStorage.getItem(STORAGE_KEY) ?? "{}");
  } catch {
    return {};
  }
}
function readKnobs() {
  return load();
}
function renderKnobs(container, visible) {
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
      value: Array.isArray(current) ? current.join(",") : current ?? "",
      onchange: () => save()
    });
    return h("label", {}, h("span", {}, f.label), input);
  });
  const save = () => {
    const next = {};
    FIELDS.forEach((f, i) => {
      const raw = inputs[i].querySelector("input").value.trim();
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

// src/app.ts
var POLL_MS = 3e3;
var POLL_HIDDEN_MS = 1e4;
var THREADS_EVERY = 2;
var params = new URLSearchParams(location.search);
var AGENT = params.get("agent") ?? "demo";
var el = {
  threads: $("#threads"),
  newThread: $("#new-thread"),
  menu: $("#menu"),
  backdrop: $("#drawer-backdrop"),
  editing: $("#editing"),
  cancelEdit: $("#cancel-edit"),
  token: $("#token"),
  title: $("#thread-title"),
  connection: $("#connection"),
  status: $("#run-status"),
  error: $("#error"),
  scroller: $("#scroller"),
  todos: $("#todos"),
  messages: $("#messages"),
  approvals: $("#approvals"),
  form: $("#composer-form"),
  composer: $("#composer"),
  send: $("#send"),
  stop: $("#stop"),
  knobs: $("#knobs"),
  runInfo: $("#run-info"),
  runs: $("#runs"),
  timeline: $("#timeline")
};
var ACTIVE = /* @__PURE__ */ new Set(["queued", "running"]);
var App = class {
  threadId = params.get("thread");
  agent = null;
  messages = [];
  agentState = {};
  interrupts = [];
  answers = /* @__PURE__ */ new Map();
  runStatus = "idle";
  runId;
  /** The seq of the last run event shown (the stream's own, as events arrive). */
  lastSeq;
  /** A runAgent/connectAgent pipeline is streaming. */
  following = false;
  stopping = false;
  connection = { status: "idle", attempt: 0 };
  reconnects = 0;
  timeline = [];
  /** Run shown in the inspector; undefined = the live stream. */
  inspectedRunId;
  runs = [];
  threads = [];
  /** What the thread looked like on the server when this page last caught up. */
  seenKey = "";
  error = "";
  /** The user message being edited: Send forks just before it and runs the edit there. */
  editing = null;
  renderQueued = false;
  polls = 0;
  start() {
    renderKnobs(el.knobs, AGENT === "demo");
    el.form.addEventListener("submit", (e) => {
      e.preventDefault();
      void this.send();
    });
    el.composer.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        void this.send();
      }
    });
    el.stop.addEventListener("click", () => void this.stop());
    el.newThread.addEventListener("click", () => this.open(null));
    el.menu.addEventListener("click", () => this.drawer(!document.body.classList.contains("drawer-open")));
    el.backdrop.addEventListener("click", () => this.drawer(false));
    el.cancelEdit.addEventListener("click", () => this.edit(null));
    el.token.addEventListener("click", () => this.askToken());
    window.addEventListener("popstate", () => this.open(new URLSearchParams(location.search).get("thread"), false));
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.catchUp(5e3);
    });
    window.addEventListener("online", () => this.catchUp(0));
    window.addEventListener("offline", () => {
      this.agent?.reconnectNow(0);
      this.render();
    });
    this.open(this.threadId, false);
    void this.loadThreads();
    this.schedulePoll();
  }
  // ---- threads -------------------------------------------------------------
  open(threadId, push = true, hydrate = true) {
    this.drawer(false);
    this.editing = null;
    if (push) history.pushState(null, "", threadId ? `?thread=${encodeURIComponent(threadId)}` : location.pathname);
    this.agent?.abortRun();
    this.agent = null;
    this.threadId = threadId;
    this.messages = [];
    this.agentState = {};
    this.interrupts = [];
    this.answers.clear();
    this.runStatus = "idle";
    this.runId = void 0;
    this.following = false;
    this.stopping = false;
    this.timeline = [];
    this.inspectedRunId = void 0;
    this.runs = [];
    this.seenKey = "";
    this.error = "";
    replace(el.timeline);
    this.render();
    renderThreads(el.threads, this.threads, this.threadId, (id) => this.open(id));
    if (threadId) {
      this.agent = this.createAgent(threadId);
      if (hydrate) void this.hydrate();
    }
  }
  createAgent(threadId) {
    const agent = new ResumableHttpAgent({ url: `/agents/${encodeURIComponent(AGENT)}`, threadId, headers: authHeaders() });
    const mine = () => this.agent === agent;
    agent.onConnectionChange = (c) => mine() && this.onConnection(c);
    agent.onFrame = (f) => mine() && this.onFrame(f);
    agent.subscribe({
      onMessagesChanged: ({ messages }) => {
        if (!mine()) return;
        this.messages = messages;
        this.render();
      },
      onStateChanged: ({ state }) => {
        if (!mine()) return;
        this.agentState = state;
        this.render();
      },
      onRunFinishedEvent: (p) => {
        if (!mine()) return;
        this.interrupts = p.outcome === "interrupt" ? p.interrupts : [];
        this.render();
      },
      onEvent: ({ event }) => {
        const e = event;
        if (e.type === "SUBAGENT_STARTED" && e.subagentRunId && e.name) {
          subagentNames.set(e.subagentRunId, e.name);
        }
      }
    });
    return agent;
  }
  async loadThreads() {
    try {
      this.threads = await listThreads();
      renderThreads(el.threads, this.threads, this.threadId, (id) => this.open(id));
      this.render();
    } catch {
    }
  }
  // ---- streams -------------------------------------------------------------
  /** Fold the thread as the server has it and follow its active run, if any. */
  async hydrate() {
    const agent = this.agent;
    if (!agent || this.following) return;
    this.following = true;
    this.newTimeline();
    try {
      await agent.connectAgent();
    } catch (error) {
      if (this.agent === agent && !isNotFound(error)) this.showError(error);
    } finally {
      if (this.agent === agent) {
        this.following = false;
        await this.refresh();
      }
    }
  }
  /** Start a run (a new message or interrupt answers) and follow it; false if it was refused. */
  async run(parameters) {
    const agent = this.agent;
    if (!agent || this.following) return false;
    this.following = true;
    this.stopping = false;
    this.runId = parameters.runId;
    this.runStatus = "queued";
    this.interrupts = [];
    this.newTimeline();
    this.render();
    try {
      await agent.runAgent(parameters);
    } catch (error) {
      if (this.agent !== agent) return false;
      this.showError(error);
      this.following = false;
      await this.hydrate();
      return false;
    } finally {
      if (this.agent === agent) this.following = false;
    }
    if (this.agent === agent) await this.refresh();
    return true;
  }
  /** After a stream: take status, interrupts and runs from the server. */
  async refresh() {
    const threadId = this.threadId;
    if (!threadId) return;
    try {
      const thread = await getThread(threadId);
      if (this.threadId !== threadId) return;
      this.seenKey = snapshotKey(thread);
      if (thread.activeRun && !this.following) {
        this.runStatus = thread.activeRun.status;
        void this.hydrate();
      }
      this.runs = await listRuns(threadId).catch(() => this.runs);
      if (!this.following) {
        const latest = thread.activeRun ?? this.runs[0];
        this.runStatus = latest?.status ?? "idle";
        this.runId = latest?.runId ?? this.runId;
      }
    } catch (error) {
      if (!isNotFound(error)) this.showError(error);
    }
    this.render();
    void this.loadThreads();
  }
  /** The page is visible or online again: resume a stream or look for news. */
  catchUp(ifSilentForMs) {
    if (this.following) this.agent?.reconnectNow(ifSilentForMs);
    else void this.poll();
  }
  schedulePoll() {
    setTimeout(
      () => void this.poll().finally(() => this.schedulePoll()),
      document.hidden ? POLL_HIDDEN_MS : POLL_MS
    );
  }
  /** While idle or waiting on approvals: did the thread change elsewhere? */
  async poll() {
    this.polls += 1;
    if (this.polls % THREADS_EVERY === 0) void this.loadThreads();
    const threadId = this.threadId;
    if (!threadId || this.following) return;
    try {
      const thread = await getThread(threadId);
      if (this.threadId !== threadId || this.following) return;
      if (thread.activeRun || snapshotKey(thread) !== this.seenKey) await this.hydrate();
    } catch {
    }
  }
  newTimeline() {
    this.timeline = [];
    this.lastSeq = void 0;
    this.inspectedRunId = void 0;
    replace(el.timeline);
  }
  onFrame(frame) {
    const entry = { seq: frame.seq, event: frame.event };
    this.timeline.push(entry);
    if (this.timeline.length > TIMELINE_LIMIT) this.timeline.shift();
    if (this.inspectedRunId === void 0) appendTimeline(el.timeline, entry);
    if (frame.seq === void 0) return;
    this.lastSeq = frame.seq;
    if (frame.runId) this.runId = frame.runId;
    const e = frame.event;
    switch (e.type) {
      case "RUN_STARTED":
        this.runStatus = "running";
        this.interrupts = [];
        break;
      case "RUN_FINISHED":
        this.runStatus = e.outcome?.type === "interrupt" ? "interrupted" : e.outcome?.type === "cancelled" ? "cancelled" : "succeeded";
        break;
      case "RUN_ERROR":
        this.runStatus = e.code === "cancelled" ? "cancelled" : "failed";
        break;
      default:
        if (!ACTIVE.has(this.runStatus)) this.runStatus = "running";
    }
    this.render();
  }
  onConnection(c) {
    if (c.status === "reconnecting" && this.connection.status !== "reconnecting") this.reconnects += 1;
    if (c.status === "live" && this.connection.status === "reconnecting" && this.inspectedRunId === void 0) {
      el.timeline.append(h("li", { class: "marker" }, `reconnected \xB7 resuming after seq ${c.lastSeq ?? 0}`));
    }
    this.connection = c;
    this.render();
  }
  // ---- actions -------------------------------------------------------------
  drawer(open) {
    document.body.classList.toggle("drawer-open", open);
    el.menu.setAttribute("aria-expanded", String(open));
  }
  // ---- fork: edit and regenerate, branch from here ----------------------------
  /** Start (or with null, stop) editing a user message in the composer. */
  edit(message) {
    this.editing = message;
    el.composer.value = message ? textOf(message.content) : "";
    if (message) el.composer.focus();
    this.render();
  }
  /** Branch the thread (at the end of a turn) and open the branch. */
  async branch(beforeMessageId) {
    if (!this.threadId || this.following) return;
    try {
      const fork = await forkThread(this.threadId, beforeMessageId ? { beforeMessageId } : {});
      this.open(fork.threadId);
      void this.loadThreads();
    } catch (error) {
      this.showError(error);
    }
  }
  /** Fork just before the edited message, open the fork, run the edited text there. */
  async regenerate(edited, text) {
    if (!this.threadId) return;
    let fork;
    try {
      fork = await forkThread(this.threadId, { beforeMessageId: edited.id });
    } catch (error) {
      return this.showError(error);
    }
    el.composer.value = "";
    this.open(fork.threadId, true, false);
    await this.hydrate();
    this.agent.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
    await this.run({ runId: crypto.randomUUID(), forwardedProps: this.forwardedProps() });
  }
  async send() {
    const text = el.composer.value.trim();
    if (!text || this.following || this.interrupts.length > 0) return;
    if (this.editing) return this.regenerate(this.editing, text);
    if (!this.threadId) {
      this.open(crypto.randomUUID(), true, false);
    }
    el.composer.value = "";
    this.agent.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
    const sent = await this.run({ runId: crypto.randomUUID(), forwardedProps: this.forwardedProps() });
    if (!sent && !el.composer.value) el.composer.value = text;
  }
  async stop() {
    if (!this.runId || !ACTIVE.has(this.runStatus)) return;
    this.stopping = true;
    this.render();
    try {
      await cancelRun(this.runId);
    } catch (error) {
      this.stopping = false;
      this.showError(error);
    }
  }
  /** Record one card's answer; send them together once every interrupt has one. */
  answer(interrupt, answer) {
    this.answers.set(interrupt.id, answer);
    if (!this.interrupts.every((i) => this.answers.has(i.id))) return this.render();
    const resume = this.interrupts.map((i) => {
      return { interruptId: i.id, status: "resolved", payload: this.answers.get(i.id).payload };
    });
    this.answers.clear();
    void this.run({ runId: crypto.randomUUID(), resume, forwardedProps: this.forwardedProps() });
  }
  forwardedProps() {
    const demo = AGENT === "demo" ? readKnobs() : void 0;
    return demo && Object.keys(demo).length > 0 ? { demo } : {};
  }
  async inspect(runId) {
    const live = this.following && runId === this.runId;
    this.inspectedRunId = live ? void 0 : runId;
    this.renderInspector();
    if (live) return renderTimeline(el.timeline, this.timeline, 0);
    try {
      const [record, frames] = await Promise.all([getRun(runId), runEvents(runId)]);
      if (this.inspectedRunId !== runId) return;
      const shown = frames.slice(-TIMELINE_LIMIT);
      renderTimeline(el.timeline, shown, frames.length - shown.length);
      replace(el.runInfo, runInfo(record));
    } catch (error) {
      this.showError(error);
    }
  }
  /** The server answers 401 without a (valid) token: ask for one, keep it, start over. */
  askToken() {
    const value = prompt("Access token for this server (empty to forget it):", token());
    if (value === null) return;
    setToken(value);
    location.reload();
  }
  showError(error) {
    this.error = errorMessage(error);
    this.render();
  }
  // ---- rendering -----------------------------------------------------------
  render() {
    if (this.renderQueued) return;
    this.renderQueued = true;
    const run = () => {
      this.renderQueued = false;
      this.draw();
    };
    if (document.hidden) setTimeout(run, 0);
    else requestAnimationFrame(run);
  }
  draw() {
    const nearBottom = el.scroller.scrollHeight - el.scroller.scrollTop - el.scroller.clientHeight < 80;
    const summary2 = this.threads.find((t) => t.id === this.threadId);
    el.title.textContent = this.threadId ? summary2?.title ?? `Thread ${this.threadId.slice(0, 8)}` : "New thread";
    renderTodos(el.todos, this.agentState);
    renderMessages(el.messages, this.messages, {
      enabled: !this.following && !ACTIVE.has(this.runStatus) && this.threadId !== null,
      edit: (m) => this.edit(m),
      branch: (before) => void this.branch(before)
    });
    el.editing.hidden = this.editing === null;
    renderApprovals(el.approvals, this.interrupts, this.messages, new Set(this.answers.keys()), this.following, {
      answer: (i, a) => this.answer(i, a)
    });
    if (nearBottom) el.scroller.scrollTop = el.scroller.scrollHeight;
    el.status.textContent = this.runStatus;
    el.status.className = `badge ${this.runStatus}`;
    el.status.title = this.runId ? `run ${this.runId}` : "";
    const active = ACTIVE.has(this.runStatus) && this.following;
    el.stop.disabled = !active || this.stopping;
    el.stop.textContent = this.stopping && active ? "Stopping\u2026" : "Stop";
    const blocked = this.following || this.interrupts.length > 0;
    el.send.disabled = blocked;
    el.composer.placeholder = this.interrupts.length > 0 ? "Answer the approval above to continue\u2026" : this.following ? "The agent is working\u2026" : "Ask the agent to plan and do something\u2026";
    this.drawConnection();
    el.error.hidden = !this.error;
    replace(el.error, this.error, h("button", { class: "ghost", onclick: () => (this.error = "", this.render()) }, "dismiss"));
    this.renderInspector();
  }
  drawConnection() {
    const c = this.connection;
    const offline = !navigator.onLine;
    const label = c.status === "reconnecting" ? `reconnecting${c.retryInMs ? ` in ${Math.ceil(c.retryInMs / 1e3)} s` : "\u2026"}` : c.status === "connecting" ? "connecting\u2026" : c.status === "live" ? "live" : "synced";
    el.connection.textContent = offline ? `offline \xB7 ${label}` : label;
    el.connection.dataset.state = offline && c.status !== "idle" ? "reconnecting" : c.status;
    el.connection.dataset.reconnects = String(this.reconnects);
    el.connection.title = c.error ?? (c.lastSeq !== void 0 ? `last seq ${c.lastSeq}` : "");
  }
  renderInspector() {
    renderRuns(el.runs, this.runs, this.inspectedRunId ?? this.runId, (id) => void this.inspect(id));
    if (this.inspectedRunId === void 0) {
      replace(
        el.runInfo,
        h(
          "dl",
          {},
          h("dt", {}, "run"),
          h("dd", { class: "mono" }, this.runId ?? "\u2014"),
          h("dt", {}, "status"),
          h("dd", {}, this.runStatus),
          h("dt", {}, "last seq"),
          h("dd", { "data-testid": "last-seq" }, String(this.lastSeq ?? this.connection.lastSeq ?? "\u2014")),
          h("dt", {}, "stream"),
          h("dd", {}, this.following ? this.connection.status : "closed")
        )
      );
    }
  }
};
function runInfo(r) {
  const row = (k, v) => [h("dt", {}, k), h("dd", {}, v === void 0 || v === null ? "\u2014" : typeof v === "object" ? JSON.stringify(v) : String(v))];
  return h("dl", {}, row("run", r.runId), row("status", r.status), row("last seq", r.lastSeq), row("attempts", r.attempts), row("error", r.error));
}
function snapshotKey(t) {
  return JSON.stringify([t.asOf ?? null, t.interrupts.map((i) => i.id), t.messages.length, t.status]);
}
function isNotFound(error) {
  return (error instanceof StreamHttpError || error instanceof ApiError) && error.status === 404;
}
function errorMessage(error) {
  const unauthorized = (error instanceof StreamHttpError || error instanceof ApiError) && error.status === 401;
  if (unauthorized) return `${error.message} \u2014 set an access token with the key button`;
  if (error instanceof ApiError) return `${error.code}: ${error.message}`;
  if (error instanceof Error) return error.message;
  return String(error);
}
takeTokenFromLocation();
new App().start();
