/**
 * OutlastAgentRunner — a CopilotKit runtime `AgentRunner` whose runs live in outlast.
 *
 * CopilotKit's runtime (`@copilotkitnext/runtime`, also inside `@copilotkit/runtime`
 * v2) hands every run to an `AgentRunner`. Its bundled runners keep runs in process
 * memory (or one SQLite file), so a restart or a second runtime process loses them.
 * This runner delegates them to an outlast server instead:
 *
 * - `run` admits the run with `POST /agents/{agent}` (idempotency key = the run id,
 *   so a retried request attaches to the same execution, G3) and streams its events;
 *   if the connection drops it reattaches with `GET /runs/{id}/events` and
 *   `Last-Event-ID`, passing on every event exactly once.
 * - `connect` hydrates the thread (a RunAgentInput with empty `messages`): the
 *   thread's state and messages as snapshots, then the active run, if any, live to
 *   its end.
 * - `isRunning` reads the thread's `activeRun`; `stop` cancels that run by id.
 *
 * Nothing is kept in the runtime process, so any number of them see the same runs.
 * The CopilotKit agent object passed to `run` is not executed: the agent runs in
 * outlast, under the name given by the `agent` option (default: its `agentId`).
 */
import {
  AgentRunner,
  type AgentRunnerConnectRequest,
  type AgentRunnerIsRunningRequest,
  type AgentRunnerRunRequest,
  type AgentRunnerStopRequest,
} from "@copilotkitnext/runtime";
import { Observable, type Subscriber } from "rxjs";
import { RETRYABLE_STATUS, StreamHttpError, errorText, httpError, readSse } from "../../js/src/sse";

export { StreamHttpError } from "../../js/src/sse";

/** The AG-UI event type of the installed runtime (it pins its own @ag-ui/client). */
export type RunnerEvent = ReturnType<AgentRunner["run"]> extends Observable<infer E> ? E : never;

export interface OutlastAgentRunnerOptions {
  /** outlast's base URL, e.g. `http://localhost:8000` (or an app's mount path). */
  url: string;
  /** Bearer token for `outlast serve --tokens-file` (or an app's own auth). */
  token?: string;
  /**
   * The outlast agent that runs a request: a name, or a function of the request.
   * Default: the CopilotKit agent's `agentId`. `connect` uses the thread's latest
   * run's agent unless this is a name.
   */
  agent?: string | ((request: AgentRunnerRunRequest) => string);
  /** Extra headers on every request to outlast. */
  headers?: Record<string, string>;
  /** The fetch to use (default `globalThis.fetch`). */
  fetch?: typeof fetch;
  /** Reconnect when a stream is silent this long (default 45 s; outlast sends a keepalive every 15 s). */
  idleTimeoutMs?: number;
  /** Reconnect delays: `initialMs` (500) doubling up to `maxMs` (8000), at most `maxAttempts` (unbounded). */
  backoff?: { initialMs?: number; maxMs?: number; maxAttempts?: number };
}

type Opener = (signal: AbortSignal) => Promise<Response>;

/** What one followed stream knows about its place in the run. */
interface Position {
  mode: "run" | "connect";
  runId?: string;
  /** The last stored event's seq passed on; undefined until one was. */
  lastSeq?: number;
  /** outlast answered, so a run request was admitted. */
  admitted: boolean;
  started: boolean;
  terminal: boolean;
}

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

/** A CopilotKit `AgentRunner` backed by an outlast server. */
export class OutlastAgentRunner extends AgentRunner {
  private readonly base: string;
  private readonly options: OutlastAgentRunnerOptions;
  private readonly fetchImpl: typeof fetch;

  constructor(options: OutlastAgentRunnerOptions) {
    super();
    if (!options?.url) throw new TypeError("OutlastAgentRunner needs the outlast server's url");
    this.options = options;
    this.base = options.url.replace(/\/+$/, "");
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** Admit the run in outlast and stream its events to the end, across dropped connections. */
  run(request: AgentRunnerRunRequest): Observable<RunnerEvent> {
    const { input } = request;
    const agent = this.agentFor(request);
    const open: Opener = (signal) =>
      this.fetchImpl(this.endpoint(`/agents/${encodeURIComponent(agent)}`), {
        method: "POST",
        headers: this.headers({
          "Content-Type": "application/json",
          Accept: "text/event-stream",
          // G3: every retry of this request attaches to the one execution.
          "Idempotency-Key": input.runId,
        }),
        body: JSON.stringify(input),
        signal,
      });
    return this.follow({ mode: "run", runId: input.runId, admitted: false, started: false, terminal: false }, open);
  }

  /**
   * The thread's history (state and messages snapshots), then its active run, if
   * any, live until it ends. An unknown thread completes with no events.
   */
  connect(request: AgentRunnerConnectRequest): Observable<RunnerEvent> {
    const { threadId } = request;
    return new Observable<RunnerEvent>((out) => {
      const controller = new AbortController();
      let inner: { unsubscribe(): void } | undefined;
      void this.hydrationAgent(threadId, controller.signal).then(
        (agent) => {
          if (controller.signal.aborted) return;
          if (agent === undefined) return out.complete();
          // Hydration (SPEC §3): empty messages and no resume runs nothing.
          const body = JSON.stringify({
            threadId, runId: randomId(), messages: [], state: {}, tools: [], context: [], forwardedProps: {},
          });
          const open: Opener = (signal) =>
            this.fetchImpl(this.endpoint(`/agents/${encodeURIComponent(agent)}`), {
              method: "POST",
              headers: this.headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
              body,
              signal,
            });
          inner = this.follow({ mode: "connect", admitted: false, started: false, terminal: false }, open).subscribe(out);
        },
        (error) => out.error(error),
      );
      return () => {
        controller.abort();
        inner?.unsubscribe();
      };
    });
  }

  /** True while the thread has an active (queued or running) run. */
  async isRunning(request: AgentRunnerIsRunningRequest): Promise<boolean> {
    return (await this.activeRun(request.threadId)) !== undefined;
  }

  /**
   * Cancel the thread's active run by its id (`POST /runs/{id}/cancel`). True when
   * a run was cancelled; false when the thread had none.
   */
  async stop(request: AgentRunnerStopRequest): Promise<boolean> {
    const runId = await this.activeRun(request.threadId);
    if (runId === undefined) return false;
    const response = await this.fetchImpl(this.endpoint(`/runs/${encodeURIComponent(runId)}/cancel`), {
      method: "POST",
      headers: this.headers({}),
    });
    if (response.status === 202) return true; // cancelling: the run ends `cancelled`
    if (!response.ok) throw await httpError(response);
    // Already final: it was stopped only if cancellation is what ended it.
    const record = (await response.json()) as { status?: string };
    return record.status === "cancelled";
  }

  private agentFor(request: AgentRunnerRunRequest): string {
    const { agent } = this.options;
    const name = typeof agent === "function" ? agent(request) : agent ?? request.agent.agentId;
    if (!name) {
      throw new TypeError("OutlastAgentRunner: set the `agent` option or an agentId on the CopilotKit agent");
    }
    return name;
  }

  /** The agent to hydrate through (any registered one shows the whole thread). */
  private async hydrationAgent(threadId: string, signal: AbortSignal): Promise<string | undefined> {
    if (typeof this.options.agent === "string") {
      return (await this.getJson(`/threads/${encodeURIComponent(threadId)}`, signal)) === undefined
        ? undefined
        : this.options.agent;
    }
    const page = await this.getJson<{ runs: { agent: string }[] }>(
      `/threads/${encodeURIComponent(threadId)}/runs?limit=1`, signal);
    if (page === undefined) return undefined;
    if (page.runs[0]) return page.runs[0].agent;
    // A thread without runs of its own (a fork): any agent hydrates it.
    const agents = await this.getJson<{ agents: { name: string }[] }>("/agents", signal);
    return agents?.agents[0]?.name;
  }

  private async activeRun(threadId: string): Promise<string | undefined> {
    const thread = await this.getJson<{ activeRun: { runId: string } | null }>(
      `/threads/${encodeURIComponent(threadId)}`);
    return thread?.activeRun?.runId ?? undefined;
  }

  /** GET a JSON resource; undefined when outlast answers 404. */
  private async getJson<T = unknown>(path: string, signal?: AbortSignal): Promise<T | undefined> {
    const response = await this.fetchImpl(this.endpoint(path), {
      headers: this.headers({ Accept: "application/json" }),
      signal,
    });
    if (response.status === 404) return undefined;
    if (!response.ok) throw await httpError(response);
    return (await response.json()) as T;
  }

  private endpoint(path: string): string {
    return this.base + path;
  }

  private headers(extra: Record<string, string>): Record<string, string> {
    const auth: Record<string, string> = this.options.token ? { Authorization: `Bearer ${this.options.token}` } : {};
    return { ...this.options.headers, ...auth, ...extra };
  }

  private follow(position: Position, first: Opener): Observable<RunnerEvent> {
    return new Observable<RunnerEvent>((out) => {
      const stopped = new AbortController();
      void this.pump(position, first, out, stopped.signal);
      // Leaving stops following only: the run goes on in outlast (and `connect` finds it).
      return () => stopped.abort();
    });
  }

  /** Open, read, and after a drop reattach, until the run's final event or a fatal error. */
  private async pump(p: Position, first: Opener, out: Subscriber<RunnerEvent>, stopped: AbortSignal): Promise<void> {
    const idleTimeoutMs = this.options.idleTimeoutMs ?? 45_000;
    const { initialMs = 500, maxMs = 8000, maxAttempts = Number.POSITIVE_INFINITY } = this.options.backoff ?? {};
    let open = first;
    let resuming = false;
    let attempt = 0;
    let lastError = "";
    while (!stopped.aborted) {
      const connection = new AbortController();
      const onStop = () => connection.abort();
      stopped.addEventListener("abort", onStop);
      try {
        const response = await open(connection.signal);
        if (!response.ok) throw await httpError(response);
        if (!response.body) throw new Error("outlast answered without a body");
        p.admitted = true;
        // Hydration names the thread's active run here.
        if (p.lastSeq === undefined) p.runId = response.headers.get("Outlast-Run-Id") ?? p.runId;
        const skipUpTo = resuming ? p.lastSeq ?? 0 : undefined;
        await readSse(response.body, connection, idleTimeoutMs, {
          activity: () => undefined,
          frame: (id, data) => {
            const seq = id ? Number(id) : undefined;
            const event = JSON.parse(data) as RunnerEvent & { runId?: string };
            if (seq !== undefined && p.lastSeq !== undefined && seq <= p.lastSeq) return; // passed on already
            // A resumed stream re-opens, without ids, what was open at the resume
            // point (SPEC §4): the consumer has those, except an id-less final event.
            if (seq === undefined && skipUpTo !== undefined && !TERMINAL.has(event.type)) return;
            // A re-sent hydration starts again; its snapshots replace, its start must not repeat.
            if (event.type === "RUN_STARTED" && p.started) return;
            if (seq !== undefined) p.lastSeq = seq;
            if (event.type === "RUN_STARTED") p.started = true;
            if (TERMINAL.has(event.type)) p.terminal = true;
            attempt = 0;
            out.next(event);
          },
        });
        if (p.terminal) return out.complete();
        lastError = "the stream ended before the run did";
      } catch (error) {
        if (stopped.aborted) return;
        if ((error instanceof StreamHttpError && !RETRYABLE_STATUS.has(error.status)) || error instanceof SyntaxError) {
          return out.error(error);
        }
        lastError = errorText(error);
      } finally {
        stopped.removeEventListener("abort", onStop);
      }
      if (p.terminal) return out.complete();
      attempt += 1;
      if (attempt > maxAttempts) {
        return out.error(new Error(`gave up reconnecting to outlast after ${attempt - 1} attempts: ${lastError}`));
      }
      const delay = Math.min(maxMs, initialMs * 2 ** (attempt - 1)) * (0.75 + Math.random() * 0.5);
      await sleep(delay, stopped);
      if (p.runId && (p.lastSeq !== undefined || (p.admitted && p.mode === "run"))) {
        const runId = p.runId;
        const after = String(p.lastSeq ?? 0);
        open = (signal) =>
          this.fetchImpl(this.endpoint(`/runs/${encodeURIComponent(runId)}/events`), {
            headers: this.headers({ Accept: "text/event-stream", "Last-Event-ID": after }),
            signal,
          });
        resuming = true;
      } else {
        // Nothing stored was passed on yet: the same request again. A run request is
        // idempotent by its key (G3); hydration restates the whole thread.
        open = first;
        resuming = false;
      }
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done);
  });
}

function randomId(): string {
  return globalThis.crypto.randomUUID();
}
