/**
 * The SSE transport shared by outlast's JavaScript clients: a frame reader that
 * keeps each frame's `id:` (the event's `seq`; the stock AG-UI parser drops it)
 * and the error type for HTTP answers that retrying cannot fix. No framework
 * imports, so any client (browser or Node) can bundle it.
 */

/** An HTTP answer that retrying cannot fix (4xx other than 408/425/429). */
export class StreamHttpError extends Error {
  constructor(
    readonly status: number,
    readonly payload: unknown,
  ) {
    const detail =
      (payload as { error?: { message?: string } } | null)?.error?.message ??
      (typeof payload === "string" ? payload : JSON.stringify(payload));
    super(`HTTP ${status}: ${detail}`);
    this.name = "StreamHttpError";
  }
}

/** Statuses worth retrying: the request may succeed later (SPEC §3 error codes). */
export const RETRYABLE_STATUS = new Set([408, 425, 429, 500, 502, 503, 504]);

/** Reason given to an AbortController when a client replaces a connection itself. */
export const RECONNECT = Symbol("reconnect");

export interface SseHandlers {
  /** Any bytes arrived (data or keepalive comment). */
  activity(): void;
  /** One complete event: its `id:` (undefined when absent) and joined `data:`. */
  frame(id: string | undefined, data: string): void;
}

/**
 * Read an SSE body until it ends, calling `frame` per event. Aborts `connection`
 * (so the caller reconnects) when nothing arrives for `idleTimeoutMs`.
 */
export async function readSse(
  body: ReadableStream<Uint8Array>,
  connection: AbortController,
  idleTimeoutMs: number,
  on: SseHandlers,
): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let idle: ReturnType<typeof setTimeout> | undefined;
  const arm = () => {
    clearTimeout(idle);
    idle = setTimeout(() => connection.abort(RECONNECT), idleTimeoutMs);
  };
  const cancel = () => void reader.cancel().catch(() => undefined);
  connection.signal.addEventListener("abort", cancel);
  try {
    arm();
    for (;;) {
      if (connection.signal.aborted) throw connection.signal.reason ?? new Error("aborted");
      const { done, value } = await reader.read();
      if (connection.signal.aborted) throw connection.signal.reason ?? new Error("aborted");
      if (done) break;
      arm();
      on.activity();
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = frameEnd(buffer)) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end).replace(/^(\r\n|\r|\n){2}/, "");
        dispatch(block, on);
      }
    }
    // A final frame without its blank line is incomplete: ignore it, as
    // EventSource does, and let the caller resume from the last full one.
  } finally {
    clearTimeout(idle);
    connection.signal.removeEventListener("abort", cancel);
    reader.releaseLock();
  }
}

/** Index where the first complete frame's blank-line terminator starts, or -1. */
function frameEnd(buffer: string): number {
  const match = /(\r\n|\r|\n)(\r\n|\r|\n)/.exec(buffer);
  return match ? match.index : -1;
}

function dispatch(block: string, on: SseHandlers): void {
  let id: string | undefined;
  const data: string[] = [];
  for (const line of block.split(/\r\n|\r|\n/)) {
    if (line === "" || line.startsWith(":")) continue; // keepalive comment
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  if (data.length > 0) on.frame(id, data.join("\n"));
}

export async function httpError(response: Response): Promise<StreamHttpError> {
  const text = await response.text().catch(() => "");
  let payload: unknown = text;
  try {
    payload = JSON.parse(text);
  } catch {
    /* keep the text */
  }
  return new StreamHttpError(response.status, payload);
}

export function errorText(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === "symbol") return "connection replaced";
  return String(error);
}
