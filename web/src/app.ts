/**
 * The outlast web client: one thread at a time, followed live through a
 * ResumableHttpAgent, with the thread list, approvals and a run inspector.
 *
 * Where the truth lives: the agent's folded messages/state for what is shown;
 * the server's thread resource (polled) for whether something changed
 * elsewhere: another tab answered an approval, a run started from the CLI.
 */
import type { Interrupt, Message, ResumeEntry, RunAgentParameters } from "@ag-ui/client";
import * as api from "./api";
import { $, h, replace } from "./dom";
import { ResumableHttpAgent, StreamHttpError, type ConnectionState, type Frame } from "../../clients/js/src/index";
import { renderApprovals, type Answer } from "./views/approvals";
import { TIMELINE_LIMIT, appendTimeline, renderRuns, renderTimeline, type TimelineEntry } from "./views/inspector";
import { renderMessages, subagentNames, textOf } from "./views/messages";
import { renderThreads } from "./views/threads";
import { renderTodos } from "./views/todos";
import { readKnobs, renderKnobs } from "./views/knobs";

const POLL_MS = 3000;
const POLL_HIDDEN_MS = 10_000;
const THREADS_EVERY = 2; // refresh the thread list every Nth poll

const params = new URLSearchParams(location.search);
const AGENT = params.get("agent") ?? "demo";

const el = {
  threads: $("#threads"),
  newThread: $<HTMLButtonElement>("#new-thread"),
  menu: $<HTMLButtonElement>("#menu"),
  backdrop: $("#drawer-backdrop"),
  editing: $("#editing"),
  cancelEdit: $<HTMLButtonElement>("#cancel-edit"),
  token: $<HTMLButtonElement>("#token"),
  title: $("#thread-title"),
  connection: $("#connection"),
  status: $("#run-status"),
  error: $("#error"),
  scroller: $("#scroller"),
  todos: $("#todos"),
  messages: $("#messages"),
  approvals: $("#approvals"),
  form: $<HTMLFormElement>("#composer-form"),
  composer: $<HTMLTextAreaElement>("#composer"),
  send: $<HTMLButtonElement>("#send"),
  stop: $<HTMLButtonElement>("#stop"),
  knobs: $("#knobs"),
  runInfo: $("#run-info"),
  runs: $("#runs"),
  timeline: $("#timeline"),
};

const ACTIVE = new Set(["queued", "running"]);

class App {
  threadId: string | null = params.get("thread");
  agent: ResumableHttpAgent | null = null;
  messages: Message[] = [];
  agentState: unknown = {};
  interrupts: Interrupt[] = [];
  answers = new Map<string, Answer>();
  runStatus = "idle";
  runId: string | undefined;
  /** The seq of the last run event shown (the stream's own, as events arrive). */
  lastSeq: number | undefined;
  /** A runAgent/connectAgent pipeline is streaming. */
  following = false;
  stopping = false;
  connection: ConnectionState = { status: "idle", attempt: 0 };
  reconnects = 0;
  timeline: TimelineEntry[] = [];
  /** Run shown in the inspector; undefined = the live stream. */
  inspectedRunId: string | undefined;
  runs: api.RunRecord[] = [];
  threads: api.ThreadSummary[] = [];
  /** What the thread looked like on the server when this page last caught up. */
  seenKey = "";
  error = "";
  /** The user message being edited: Send forks just before it and runs the edit there. */
  editing: Message | null = null;
  private renderQueued = false;
  private polls = 0;

  start(): void {
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
    // Phones: the thread list is a drawer behind the menu button.
    el.menu.addEventListener("click", () => this.drawer(!document.body.classList.contains("drawer-open")));
    el.backdrop.addEventListener("click", () => this.drawer(false));
    el.cancelEdit.addEventListener("click", () => this.edit(null));
    el.token.addEventListener("click", () => this.askToken());
    window.addEventListener("popstate", () => this.open(new URLSearchParams(location.search).get("thread"), false));
    // Catch up when the page comes back: a frozen tab's stream may be dead.
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") this.catchUp(5000);
    });
    window.addEventListener("online", () => this.catchUp(0));
    window.addEventListener("offline", () => {
      this.agent?.reconnectNow(0); // the connection is gone; show it and retry with backoff
      this.render();
    });
    this.open(this.threadId, false);
    void this.loadThreads();
    this.schedulePoll();
  }

  // ---- threads -------------------------------------------------------------

  open(threadId: string | null, push = true, hydrate = true): void {
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
    this.runId = undefined;
    this.following = false;
    this.stopping = false;
    this.timeline = [];
    this.inspectedRunId = undefined;
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

  private createAgent(threadId: string): ResumableHttpAgent {
    const agent = new ResumableHttpAgent({ url: `/agents/${encodeURIComponent(AGENT)}`, threadId, headers: api.authHeaders() });
    const mine = () => this.agent === agent; // events of a thread we left are ignored
    agent.onConnectionChange = (c) => mine() && this.onConnection(c);
    agent.onFrame = (f) => mine() && this.onFrame(f);
    agent.subscribe({
      onMessagesChanged: ({ messages }) => {
        if (!mine()) return;
        this.messages = messages as Message[];
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
        // AG-UI 1.0 subagents: their messages carry only the run id; show the name.
        const e = event as { type: string; subagentRunId?: string; name?: string };
        if (e.type === "SUBAGENT_STARTED" && e.subagentRunId && e.name) {
          subagentNames.set(e.subagentRunId, e.name);
        }
      },
    });
    return agent;
  }

  async loadThreads(): Promise<void> {
    try {
      this.threads = await api.listThreads();
      renderThreads(el.threads, this.threads, this.threadId, (id) => this.open(id));
      this.render();
    } catch {
      /* the next poll retries */
    }
  }

  // ---- streams -------------------------------------------------------------

  /** Fold the thread as the server has it and follow its active run, if any. */
  async hydrate(): Promise<void> {
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
  async run(parameters: RunAgentParameters): Promise<boolean> {
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
      // Our view may be behind the server (the run was refused): re-sync.
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
  async refresh(): Promise<void> {
    const threadId = this.threadId;
    if (!threadId) return;
    try {
      const thread = await api.getThread(threadId);
      if (this.threadId !== threadId) return;
      this.seenKey = snapshotKey(thread);
      if (thread.activeRun && !this.following) {
        this.runStatus = thread.activeRun.status;
        void this.hydrate(); // a run is live (started elsewhere, or a continuation): follow it
      }
      this.runs = await api.listRuns(threadId).catch(() => this.runs);
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
  catchUp(ifSilentForMs: number): void {
    if (this.following) this.agent?.reconnectNow(ifSilentForMs);
    else void this.poll();
  }

  private schedulePoll(): void {
    setTimeout(
      () => void this.poll().finally(() => this.schedulePoll()),
      document.hidden ? POLL_HIDDEN_MS : POLL_MS,
    );
  }

  /** While idle or waiting on approvals: did the thread change elsewhere? */
  async poll(): Promise<void> {
    this.polls += 1;
    if (this.polls % THREADS_EVERY === 0) void this.loadThreads();
    const threadId = this.threadId;
    if (!threadId || this.following) return;
    try {
      const thread = await api.getThread(threadId);
      if (this.threadId !== threadId || this.following) return;
      if (thread.activeRun || snapshotKey(thread) !== this.seenKey) await this.hydrate();
    } catch {
      /* offline or not created yet: try again later */
    }
  }

  private newTimeline(): void {
    this.timeline = [];
    this.lastSeq = undefined;
    this.inspectedRunId = undefined;
    replace(el.timeline);
  }

  private onFrame(frame: Frame): void {
    const entry = { seq: frame.seq, event: frame.event };
    this.timeline.push(entry);
    if (this.timeline.length > TIMELINE_LIMIT) this.timeline.shift();
    if (this.inspectedRunId === undefined) appendTimeline(el.timeline, entry);
    if (frame.seq === undefined) return; // synthesized by the server, not a run event
    this.lastSeq = frame.seq;
    if (frame.runId) this.runId = frame.runId;
    const e = frame.event as { type: string; outcome?: { type?: string }; code?: string };
    switch (e.type) {
      case "RUN_STARTED":
        this.runStatus = "running";
        this.interrupts = [];
        break;
      case "RUN_FINISHED":
        this.runStatus =
          e.outcome?.type === "interrupt" ? "interrupted" : e.outcome?.type === "cancelled" ? "cancelled" : "succeeded";
        break;
      case "RUN_ERROR":
        this.runStatus = e.code === "cancelled" ? "cancelled" : "failed";
        break;
      default:
        if (!ACTIVE.has(this.runStatus)) this.runStatus = "running";
    }
    this.render();
  }

  private onConnection(c: ConnectionState): void {
    if (c.status === "reconnecting" && this.connection.status !== "reconnecting") this.reconnects += 1;
    if (c.status === "live" && this.connection.status === "reconnecting" && this.inspectedRunId === undefined) {
      el.timeline.append(h("li", { class: "marker" }, `reconnected · resuming after seq ${c.lastSeq ?? 0}`));
    }
    this.connection = c;
    this.render();
  }

  // ---- actions -------------------------------------------------------------

  drawer(open: boolean): void {
    document.body.classList.toggle("drawer-open", open);
    el.menu.setAttribute("aria-expanded", String(open));
  }

  // ---- fork: edit and regenerate, branch from here ----------------------------

  /** Start (or with null, stop) editing a user message in the composer. */
  edit(message: Message | null): void {
    this.editing = message;
    el.composer.value = message ? textOf(message.content) : "";
    if (message) el.composer.focus();
    this.render();
  }

  /** Branch the thread (at the end of a turn) and open the branch. */
  async branch(beforeMessageId: string | undefined): Promise<void> {
    if (!this.threadId || this.following) return;
    try {
      const fork = await api.forkThread(this.threadId, beforeMessageId ? { beforeMessageId } : {});
      this.open(fork.threadId);
      void this.loadThreads();
    } catch (error) {
      this.showError(error);
    }
  }

  /** Fork just before the edited message, open the fork, run the edited text there. */
  private async regenerate(edited: Message, text: string): Promise<void> {
    if (!this.threadId) return;
    let fork: api.ThreadSnapshot;
    try {
      fork = await api.forkThread(this.threadId, { beforeMessageId: edited.id });
    } catch (error) {
      return this.showError(error);
    }
    el.composer.value = "";
    this.open(fork.threadId, true, false);
    await this.hydrate(); // the fork's messages, as the server holds them
    this.agent!.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
    await this.run({ runId: crypto.randomUUID(), forwardedProps: this.forwardedProps() });
  }

  async send(): Promise<void> {
    const text = el.composer.value.trim();
    if (!text || this.following || this.interrupts.length > 0) return;
    if (this.editing) return this.regenerate(this.editing, text);
    if (!this.threadId) {
      this.open(crypto.randomUUID(), true, false); // a new thread: nothing to hydrate
    }
    el.composer.value = "";
    this.agent!.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
    const sent = await this.run({ runId: crypto.randomUUID(), forwardedProps: this.forwardedProps() });
    if (!sent && !el.composer.value) el.composer.value = text; // not sent: give the text back
  }

  async stop(): Promise<void> {
    if (!this.runId || !ACTIVE.has(this.runStatus)) return;
    this.stopping = true;
    this.render();
    try {
      await api.cancelRun(this.runId);
    } catch (error) {
      this.stopping = false;
      this.showError(error);
    }
  }

  /** Record one card's answer; send them together once every interrupt has one. */
  answer(interrupt: Interrupt, answer: Answer): void {
    this.answers.set(interrupt.id, answer);
    if (!this.interrupts.every((i) => this.answers.has(i.id))) return this.render();
    const resume: ResumeEntry[] = this.interrupts.map((i) => {
      return { interruptId: i.id, status: "resolved", payload: this.answers.get(i.id)!.payload };
    });
    this.answers.clear();
    void this.run({ runId: crypto.randomUUID(), resume, forwardedProps: this.forwardedProps() });
  }

  private forwardedProps(): Record<string, unknown> {
    const demo = AGENT === "demo" ? readKnobs() : undefined;
    return demo && Object.keys(demo).length > 0 ? { demo } : {};
  }

  async inspect(runId: string): Promise<void> {
    const live = this.following && runId === this.runId;
    this.inspectedRunId = live ? undefined : runId;
    this.renderInspector();
    if (live) return renderTimeline(el.timeline, this.timeline, 0);
    try {
      const [record, frames] = await Promise.all([api.getRun(runId), api.runEvents(runId)]);
      if (this.inspectedRunId !== runId) return;
      const shown = frames.slice(-TIMELINE_LIMIT);
      renderTimeline(el.timeline, shown, frames.length - shown.length);
      replace(el.runInfo, runInfo(record));
    } catch (error) {
      this.showError(error);
    }
  }

  /** The server answers 401 without a (valid) token: ask for one, keep it, start over. */
  askToken(): void {
    const value = prompt("Access token for this server (empty to forget it):", api.token());
    if (value === null) return;
    api.setToken(value);
    location.reload();
  }

  private showError(error: unknown): void {
    this.error = errorMessage(error);
    this.render();
  }

  // ---- rendering -----------------------------------------------------------

  render(): void {
    if (this.renderQueued) return;
    this.renderQueued = true;
    const run = () => {
      this.renderQueued = false;
      this.draw();
    };
    // Animation frames pause in hidden tabs; the state must still land there.
    if (document.hidden) setTimeout(run, 0);
    else requestAnimationFrame(run);
  }

  private draw(): void {
    const nearBottom = el.scroller.scrollHeight - el.scroller.scrollTop - el.scroller.clientHeight < 80;
    const summary = this.threads.find((t) => t.id === this.threadId);
    el.title.textContent = this.threadId ? (summary?.title ?? `Thread ${this.threadId.slice(0, 8)}`) : "New thread";
    renderTodos(el.todos, this.agentState);
    renderMessages(el.messages, this.messages, {
      enabled: !this.following && !ACTIVE.has(this.runStatus) && this.threadId !== null,
      edit: (m) => this.edit(m),
      branch: (before) => void this.branch(before),
    });
    el.editing.hidden = this.editing === null;
    renderApprovals(el.approvals, this.interrupts, this.messages, new Set(this.answers.keys()), this.following, {
      answer: (i, a) => this.answer(i, a),
    });
    if (nearBottom) el.scroller.scrollTop = el.scroller.scrollHeight;

    el.status.textContent = this.runStatus;
    el.status.className = `badge ${this.runStatus}`;
    el.status.title = this.runId ? `run ${this.runId}` : "";

    const active = ACTIVE.has(this.runStatus) && this.following;
    el.stop.disabled = !active || this.stopping;
    el.stop.textContent = this.stopping && active ? "Stopping…" : "Stop";
    const blocked = this.following || this.interrupts.length > 0;
    el.send.disabled = blocked;
    el.composer.placeholder =
      this.interrupts.length > 0 ? "Answer the approval above to continue…" : this.following ? "The agent is working…" : "Ask the agent to plan and do something…";

    this.drawConnection();
    el.error.hidden = !this.error;
    replace(el.error, this.error, h("button", { class: "ghost", onclick: () => ((this.error = ""), this.render()) }, "dismiss"));
    this.renderInspector();
  }

  private drawConnection(): void {
    const c = this.connection;
    const offline = !navigator.onLine;
    const label =
      c.status === "reconnecting"
        ? `reconnecting${c.retryInMs ? ` in ${Math.ceil(c.retryInMs / 1000)} s` : "…"}`
        : c.status === "connecting"
          ? "connecting…"
          : c.status === "live"
            ? "live"
            : "synced";
    el.connection.textContent = offline ? `offline · ${label}` : label;
    el.connection.dataset.state = offline && c.status !== "idle" ? "reconnecting" : c.status;
    el.connection.dataset.reconnects = String(this.reconnects);
    el.connection.title = c.error ?? (c.lastSeq !== undefined ? `last seq ${c.lastSeq}` : "");
  }

  private renderInspector(): void {
    renderRuns(el.runs, this.runs, this.inspectedRunId ?? this.runId, (id) => void this.inspect(id));
    if (this.inspectedRunId === undefined) {
      replace(
        el.runInfo,
        h("dl", {}, h("dt", {}, "run"), h("dd", { class: "mono" }, this.runId ?? "—"),
          h("dt", {}, "status"), h("dd", {}, this.runStatus),
          h("dt", {}, "last seq"),
          h("dd", { "data-testid": "last-seq" }, String(this.lastSeq ?? this.connection.lastSeq ?? "—")),
          h("dt", {}, "stream"), h("dd", {}, this.following ? this.connection.status : "closed")),
      );
    }
  }
}

function runInfo(r: api.RunRecord): HTMLElement {
  const row = (k: string, v: unknown) => [h("dt", {}, k), h("dd", {}, v === undefined || v === null ? "—" : typeof v === "object" ? JSON.stringify(v) : String(v))];
  return h("dl", {}, row("run", r.runId), row("status", r.status), row("last seq", r.lastSeq), row("attempts", r.attempts), row("error", r.error));
}

/** What changes on the server when anything happens to the thread. */
function snapshotKey(t: api.ThreadSnapshot): string {
  return JSON.stringify([t.asOf ?? null, t.interrupts.map((i) => i.id), t.messages.length, t.status]);
}

function isNotFound(error: unknown): boolean {
  return (error instanceof StreamHttpError || error instanceof api.ApiError) && error.status === 404;
}

function errorMessage(error: unknown): string {
  const unauthorized = (error instanceof StreamHttpError || error instanceof api.ApiError) && error.status === 401;
  if (unauthorized) return `${(error as Error).message} — set an access token with the key button`;
  if (error instanceof api.ApiError) return `${error.code}: ${error.message}`;
  if (error instanceof Error) return error.message;
  return String(error);
}

api.takeTokenFromLocation();
new App().start();
