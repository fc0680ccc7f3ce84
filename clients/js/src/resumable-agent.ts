/**
 * ResumableHttpAgent — an `@ag-ui/client` HttpAgent whose streams survive
 * dropped connections.
 *
 * The stock HttpAgent reads one HTTP response and stops: it ignores SSE `id:`
 * fields and cannot reattach to a run that is still going on the server. This
 * class keeps everything HttpAgent does (request shape, headers, middleware,
 * the verify/apply pipeline, subscribers) and replaces only the transport:
 *
 * - It parses SSE frames itself and remembers the last `id:` it saw (the
 *   event's `seq` on the server).
 * - When a stream breaks before the run's final event (network error, server
 *   restart, a silent connection, the tab being frozen), it waits with
 *   exponential backoff and reattaches with
 *   `GET {runEventsUrl(runId)}` + `Last-Event-ID: <last seq>`.
 * - The resumed stream starts with a synthesized `RUN_STARTED` (no `id:`) and
 *   re-opens whatever text message or tool call was open at the resume point.
 *   This agent already folded those constructs, so it drops every frame that
 *   carries no id (or an id it has seen) and feeds the rest into the SAME
 *   pipeline. Subscribers see one uninterrupted run: no token is lost or
 *   applied twice.
 * - `connectAgent()` hydrates a thread (AG-UI: a RunAgentInput with empty
 *   `messages` and no `resume`) and, when the server streams an active run
 *   after the snapshots, follows it live with the same resume logic.
 *
 * It needs two things from the server, both plain HTTP + SSE:
 * `id: <seq>` on every stored event, and an endpoint that replays a run's
 * events after `Last-Event-ID` and then follows it live. The run id is taken
 * from the `runId` the client chose, the `Outlast-Run-Id` response header
 * (hydration names the thread's active run there), or the stream's `RUN_STARTED`.
 *
 * Usage:
 *
 *     const agent = new ResumableHttpAgent({ url: "/agents/demo", threadId });
 *     agent.onConnectionChange = (c) => render(c.status);
 *     await agent.connectAgent();                        // hydrate + follow
 *     agent.addMessage({ id, role: "user", content });
 *     await agent.runAgent({ runId: crypto.randomUUID() }); // survives drops
 */
import {
  EventType,
  HttpAgent,
  enforceOutgoingInput,
  type AgentSubscriber,
  type BaseEvent,
  type HttpAgentConfig,
  type RunAgentInput,
  type RunAgentParameters,
  type RunAgentResult,
} from "@ag-ui/client";
import { Observable, type Subscriber } from "rxjs";
import { RECONNECT, RETRYABLE_STATUS, StreamHttpError, errorText, httpError, readSse } from "./sse";


/** What the agent's transport is doing right now. */
export type ConnectionStatus = "idle" | "connecting" | "live" | "reconnecting";

export interface ConnectionState {
  status: ConnectionStatus;
  /** The run whose events are being followed, once known. */
  runId?: string;
  /** The last `seq` (SSE id) folded into the agent. */
  lastSeq?: number;
  /** Reconnect attempts since the stream last delivered something. */
  attempt: number;
  /** When `reconnecting`: milliseconds until the next attempt. */
  retryInMs?: number;
  /** Why the last connection ended, when it ended abnormally. */
  error?: string;
}

/** One event as it came off the wire, with its `seq` when the server stored it. */
export interface Frame {
  seq?: number;
  runId?: string;
  event: BaseEvent;
}

export interface BackoffConfig {
  /** First delay, in ms (default 500). */
  initialMs?: number;
  /** Upper bound for a delay, in ms (default 8000). */
  maxMs?: number;
  /** Growth factor between attempts (default 2). */
  factor?: number;
  /** Give up after this many consecutive failures (default: never). */
  maxAttempts?: number;
}

export interface ResumableHttpAgentConfig extends HttpAgentConfig {
  /** URL of a run's event stream; default `<origin of url>/runs/<runId>/events`. */
  runEventsUrl?: (runId: string) => string;
  backoff?: BackoffConfig;
  /**
   * A connection that delivers nothing, not even a keepalive comment, for this
   * long is treated as dead and replaced (default 45000; outlast sends a
   * keepalive at least every 15 s).
   */
  idleTimeoutMs?: number;
}


const TERMINAL_EVENTS = new Set<string>([EventType.RUN_FINISHED, EventType.RUN_ERROR]);


type Opener = (signal: AbortSignal) => Promise<Response>;

/** Mutable bookkeeping for one logical stream (one runAgent/connectAgent call). */
interface StreamSession {
  mode: "run" | "hydrate";
  runId?: string;
  lastSeq?: number;
  /** The server answered a request of this stream, so the run exists there. */
  admitted: boolean;
  /** Frames were delivered, so a re-sent request must not replay them again. */
  delivered: boolean;
  terminal: boolean;
  attempt: number;
  lastActivity: number;
  connection?: AbortController;
  wake?: () => void;
}

export class ResumableHttpAgent extends HttpAgent {
  /** Called whenever the transport's state changes. */
  onConnectionChange?: (state: ConnectionState) => void;
  /** Called for every event delivered to the pipeline, with its seq. */
  onFrame?: (frame: Frame) => void;

  private readonly runEventsUrl: (runId: string) => string;
  private readonly backoff: Required<BackoffConfig>;
  private readonly idleTimeoutMs: number;
  private session?: StreamSession;

  constructor(config: ResumableHttpAgentConfig) {
    super(config);
    const base = new URL(config.url, globalThis.location?.href ?? "http://localhost/");
    this.runEventsUrl =
      config.runEventsUrl ??
      ((runId) => new URL(`/runs/${encodeURIComponent(runId)}/events`, base).toString());
    this.backoff = {
      initialMs: config.backoff?.initialMs ?? 500,
      maxMs: config.backoff?.maxMs ?? 8000,
      factor: config.backoff?.factor ?? 2,
      maxAttempts: config.backoff?.maxAttempts ?? Number.POSITIVE_INFINITY,
    };
    this.idleTimeoutMs = config.idleTimeoutMs ?? 45_000;
  }

  /** The run being followed and the last seq folded, or undefined when idle. */
  get position(): { runId?: string; lastSeq?: number } | undefined {
    const s = this.session;
    return s && { runId: s.runId, lastSeq: s.lastSeq };
  }

  /**
   * Replace the current connection now, resuming after the last seq; or, while
   * waiting out a backoff delay, retry at once. Use it when the page becomes
   * visible or the browser reports it is back online. With `ifSilentForMs`,
   * a connection that delivered something more recently is left alone.
   */
  reconnectNow(ifSilentForMs = 0): void {
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
  run(input: RunAgentInput): Observable<BaseEvent> {
    const open: Opener = (signal) =>
      this.fetch(this.url, { ...this.requestInit(enforceOutgoingInput(input)), signal });
    return this.stream({ mode: "run", runId: input.runId }, open);
  }

  /**
   * Hydrate the thread (empty `messages`, no `resume`) and follow the active
   * run, if the server streams one, to its end.
   */
  protected connect(input: RunAgentInput): Observable<BaseEvent> {
    const hydration: RunAgentInput = { ...input, messages: [] };
    delete hydration.resume;
    const open: Opener = (signal) =>
      this.fetch(this.url, { ...this.requestInit(enforceOutgoingInput(hydration)), signal });
    return this.stream({ mode: "hydrate" }, open);
  }

  async connectAgent(
    parameters?: RunAgentParameters,
    subscriber?: AgentSubscriber,
  ): Promise<RunAgentResult> {
    // runAgent() gets a fresh controller from HttpAgent; connectAgent() does not.
    if (this.abortController.signal.aborted) this.abortController = new AbortController();
    // Hydration restates the pending interrupts, so the ones held from an
    // earlier stream must not block it (AbstractAgent checks them on start).
    this.pendingInterrupts = [];
    return super.connectAgent(parameters, subscriber);
  }

  private stream(
    init: Pick<StreamSession, "mode" | "runId">,
    open: Opener,
  ): Observable<BaseEvent> {
    return new Observable<BaseEvent>((subscriber) => {
      const session: StreamSession = {
        ...init,
        admitted: false,
        delivered: false,
        terminal: false,
        attempt: 0,
        lastActivity: Date.now(),
      };
      this.session = session;
      let closed = false;
      void this.pump(session, open, subscriber, () => closed).finally(() => {
        if (this.session === session) this.session = undefined;
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
  private async pump(
    s: StreamSession,
    first: Opener,
    out: Subscriber<BaseEvent>,
    isClosed: () => boolean,
  ): Promise<void> {
    const userSignal = this.abortController.signal;
    let opener = first;
    let resuming = false; // reading a GET /runs/{id}/events after a drop
    let reopening = false; // re-sent the first request after frames were delivered
    let lastError: string | undefined;

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
        // Hydration names the thread's active run here (or echoes its own id).
        if (s.lastSeq === undefined) s.runId = response.headers.get("Outlast-Run-Id") ?? s.runId;
        this.report(s, "live");
        const skipBefore = resuming ? (s.lastSeq ?? 0) : undefined;
        const skipRunStarted = reopening;
        await readSse(response.body, connection, this.idleTimeoutMs, {
          activity: () => {
            s.lastActivity = Date.now();
          },
          frame: (id, data) => {
            const seq = id === undefined || id === "" ? undefined : Number(id);
            const event = JSON.parse(data) as BaseEvent & { runId?: string };
            // Synthesized on resume (RUN_STARTED and re-opened constructs) or
            // already folded: the pipeline has these, passing them again would
            // duplicate text or fail verification. An id-less final event is
            // the exception: a server may send a finished run's tail that way.
            if (skipBefore !== undefined) {
              if (seq !== undefined ? seq <= skipBefore : !TERMINAL_EVENTS.has(event.type)) return;
            }
            if (skipRunStarted && event.type === EventType.RUN_STARTED) return;
            if (seq !== undefined) s.lastSeq = seq;
            if (event.type === EventType.RUN_STARTED && event.runId) s.runId = event.runId;
            if (TERMINAL_EVENTS.has(event.type)) s.terminal = true;
            s.delivered = true;
            s.attempt = 0;
            this.onFrame?.({ seq, runId: s.runId, event });
            out.next(event);
          },
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
        lastError = replaced ? undefined : errorText(error);
        if (replaced) s.attempt = 0;
      } finally {
        userSignal.removeEventListener("abort", onUserAbort);
        s.connection = undefined;
      }
      if (s.terminal) {
        out.complete();
        return;
      }

      // The stream dropped before the run's final event: reattach.
      s.attempt += 1;
      if (s.attempt > this.backoff.maxAttempts) {
        out.error(new Error(`gave up reconnecting after ${s.attempt - 1} attempts: ${lastError}`));
        return;
      }
      const delay = s.attempt === 1 && !lastError ? 0 : this.delayFor(s.attempt);
      this.report(s, "reconnecting", lastError, delay);
      await this.sleep(s, delay);

      if (s.runId && (s.lastSeq !== undefined || (s.admitted && s.mode === "run"))) {
        // Resume after the last folded seq (0 = from the start of the run).
        const runId = s.runId;
        const after = s.lastSeq ?? 0;
        opener = (signal) =>
          this.fetch(this.runEventsUrl(runId), {
            method: "GET",
            headers: { ...this.headers, Accept: "text/event-stream", "Last-Event-ID": String(after) },
            signal,
          });
        resuming = true;
        reopening = false;
      } else {
        // Nothing with a seq was folded yet (the request may not even have
        // been admitted): send the same request again. It is idempotent by
        // runId for runs, and hydration restates the whole thread.
        opener = first;
        resuming = false;
        reopening = s.delivered;
      }
    }
    out.complete();
  }

  private delayFor(attempt: number): number {
    const { initialMs, maxMs, factor } = this.backoff;
    const base = Math.min(maxMs, initialMs * factor ** (attempt - 1));
    return Math.round(base * (0.75 + Math.random() * 0.5)); // jitter: spread reconnect storms
  }

  private sleep(s: StreamSession, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        s.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      s.wake = done;
    });
  }

  private report(s: StreamSession, status: ConnectionStatus, error?: string, retryInMs?: number) {
    this.onConnectionChange?.({
      status,
      runId: s.runId,
      lastSeq: s.lastSeq,
      attempt: s.attempt,
      retryInMs,
      error,
    });
  }
}
