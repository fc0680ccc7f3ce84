/**
 * OutlastAgentRunner inside the real CopilotKit runtime (its Hono endpoint, called
 * in process) against a real `outlast serve` this file starts, with the demo agent.
 *
 *   npm test --prefix clients/copilotkit
 *
 * OUTLAST_BIN names the `outlast` executable (default: the repo's .venv/bin/outlast).
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime, createCopilotEndpoint } from "@copilotkitnext/runtime";
import { readSse } from "../../js/src/sse";
import { OutlastAgentRunner } from "../src/index";

process.env.COPILOTKIT_TELEMETRY_DISABLED = "true";

type Ev = { type: string; [key: string]: unknown };
type Msg = { id: string; role: string; content?: unknown };

// Quick, but long enough to act while the run is going.
const PACE = { steps: 3, step_delay_ms: 300, tokens_per_message: 8, token_delay_ms: 20 };
const SLOW = { steps: 6, step_delay_ms: 500, tokens_per_message: 8, token_delay_ms: 20 };
const WAIT_MS = 30_000;

let server: ChildProcess;
let dataDir: string;
let outlast: string;

before(async () => {
  const bin = process.env.OUTLAST_BIN ?? resolve(process.cwd(), "..", "..", ".venv", "bin", "outlast");
  dataDir = mkdtempSync(join(tmpdir(), "outlast-copilotkit-"));
  server = spawn(bin, ["serve", "--port", "0", "--data-dir", dataDir], { stdio: ["ignore", "pipe", "pipe"] });
  const log: string[] = [];
  outlast = await new Promise<string>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error(`outlast serve did not start:\n${log.join("")}`)), WAIT_MS);
    server.stderr!.on("data", (chunk) => log.push(String(chunk)));
    server.stdout!.on("data", (chunk) => {
      log.push(String(chunk));
      const match = /outlast serving on (\S+)/.exec(log.join(""));
      if (match) {
        clearTimeout(timer);
        ready(match[1].replace(/\/+$/, ""));
      }
    });
    server.on("exit", (code) => fail(new Error(`outlast serve exited (${code}):\n${log.join("")}`)));
  });
});

after(() => {
  server?.kill("SIGTERM");
  rmSync(dataDir, { recursive: true, force: true });
});

/** One CopilotKit runtime process's worth: a runtime with the runner, and its endpoint. */
function runtime() {
  // Few reconnects: a failing test should end, not retry against a stopped server.
  const runner = new OutlastAgentRunner({ url: outlast, backoff: { maxAttempts: 3 } });
  const rt = new CopilotRuntime({
    agents: { demo: new HttpAgent({ agentId: "demo", url: `${outlast}/agents/demo` }) },
    runner,
  });
  const app = createCopilotEndpoint({ runtime: rt, basePath: "/api" });
  const post = async (path: string, body: unknown, signal?: AbortSignal): Promise<Response> =>
    await app.fetch(new Request(`http://runtime/api${path}`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), signal,
    }));
  return { runner, post };
}

function runInput(threadId: string, runId: string, demo: object = PACE) {
  return {
    threadId, runId, messages: [{ id: `user-${runId}`, role: "user", content: "do the work" }],
    state: {}, tools: [], context: [], forwardedProps: { demo },
  };
}

function connectInput(threadId: string) {
  return { threadId, runId: randomUUID(), messages: [], state: {}, tools: [], context: [], forwardedProps: {} };
}

/**
 * Read a runtime SSE response to its end. With `until`, stop reading (the
 * client leaves, aborting `leave`) once it returns true.
 */
async function read(response: Response, until?: (events: Ev[]) => boolean, leave?: AbortController): Promise<Ev[]> {
  assert.equal(response.status, 200, await response.clone().text().catch(() => ""));
  const events: Ev[] = [];
  const connection = new AbortController();
  try {
    await readSse(bytes(response.body!), connection, WAIT_MS, {
      activity: () => undefined,
      frame: (_id, data) => {
        events.push(JSON.parse(data) as Ev);
        if (until?.(events)) {
          leave?.abort();
          connection.abort(new Error("left"));
        }
      },
    });
  } catch (error) {
    if (!connection.signal.aborted) throw error;
  }
  return events;
}

/** The runtime's in-process responses carry strings; an HTTP server would send their bytes. */
function bytes(body: ReadableStream<Uint8Array | string>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return body.pipeThrough(new TransformStream<Uint8Array | string, Uint8Array>({
    transform: (chunk, out) => out.enqueue(typeof chunk === "string" ? encoder.encode(chunk) : chunk),
  }));
}

async function get<T>(path: string): Promise<T> {
  const response = await fetch(`${outlast}${path}`);
  assert.equal(response.status, 200, path);
  return (await response.json()) as T;
}

/** The thread's messages as a client folds them: snapshots replace, text events append. */
function fold(events: Ev[], start: Msg[] = []): Map<string, string> {
  const texts = new Map<string, string>();
  for (const m of start) if (typeof m.content === "string") texts.set(m.id, m.content);
  for (const e of events) {
    if (e.type === "MESSAGES_SNAPSHOT") {
      texts.clear();
      for (const m of e.messages as Msg[]) if (typeof m.content === "string") texts.set(m.id, m.content);
    } else if (e.type === "TEXT_MESSAGE_START") texts.set(e.messageId as string, "");
    else if (e.type === "TEXT_MESSAGE_CONTENT") texts.set(e.messageId as string, texts.get(e.messageId as string)! + (e.delta as string));
  }
  return texts;
}

/** The stored thread's assistant texts, by message id. */
async function storedTexts(threadId: string): Promise<Map<string, string>> {
  const thread = await get<{ messages: Msg[] }>(`/threads/${threadId}`);
  const texts = new Map<string, string>();
  for (const m of thread.messages) if (m.role === "assistant" && typeof m.content === "string") texts.set(m.id, m.content);
  assert.ok(texts.size > 0, "the run stored assistant messages");
  return texts;
}

function assertHasTexts(folded: Map<string, string>, stored: Map<string, string>) {
  for (const [id, text] of stored) assert.equal(folded.get(id), text, `message ${id}`);
}

const contents = (events: Ev[]) => events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").length;

test("a run streams through the runtime to its end, and outlast holds it", async () => {
  const { post } = runtime();
  const threadId = randomUUID();
  const runId = randomUUID();
  const events = await read(await post("/agent/demo/run", runInput(threadId, runId)));
  assert.equal(events[0].type, "RUN_STARTED");
  assert.equal(events[0].runId, runId);
  assert.equal(events.at(-1)!.type, "RUN_FINISHED");
  assert.equal((await get<{ status: string }>(`/runs/${runId}`)).status, "succeeded");
  assertHasTexts(fold(events), await storedTexts(threadId));
});

test("a client that leaves mid-run gets what it missed from connect, then the rest live", async () => {
  const { post, runner } = runtime();
  const threadId = randomUUID();
  const runId = randomUUID();
  const leave = new AbortController();
  const seen = await read(await post("/agent/demo/run", runInput(threadId, runId), leave.signal),
    (events) => contents(events) >= 3, leave);
  assert.notEqual(seen.at(-1)!.type, "RUN_FINISHED");
  // Leaving does not stop the run.
  assert.equal(await runner.isRunning({ threadId }), true);
  const before = await get<{ lastSeq: number; status: string }>(`/runs/${runId}`);
  assert.equal(before.status, "running");

  const events = await read(await post("/agent/demo/connect", connectInput(threadId)));
  assert.deepEqual(events.slice(0, 3).map((e) => e.type), ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"]);
  assert.equal(events.at(-1)!.type, "RUN_FINISHED");
  assert.ok(contents(events.slice(3)) > 0, "the rest of the run followed live");
  assert.equal((await get<{ status: string }>(`/runs/${runId}`)).status, "succeeded");
  assertHasTexts(fold(events), await storedTexts(threadId));
  assert.equal(await runner.isRunning({ threadId }), false);
});

test("connect on an idle thread returns its history; on an unknown thread, nothing", async () => {
  const { post } = runtime();
  const threadId = randomUUID();
  await read(await post("/agent/demo/run", runInput(threadId, randomUUID())));
  await read(await post("/agent/demo/run", {
    ...runInput(threadId, randomUUID()), forwardedProps: { demo: { ...PACE, steps: 0 } },
  }));
  const thread = await get<{ messages: Msg[]; state: unknown }>(`/threads/${threadId}`);

  const events = await read(await post("/agent/demo/connect", connectInput(threadId)));
  assert.deepEqual(events.map((e) => e.type), ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]);
  assert.deepEqual(events[1].snapshot, thread.state);
  assert.deepEqual(events[2].messages, thread.messages);

  assert.deepEqual(await read(await post("/agent/demo/connect", connectInput(randomUUID()))), []);
});

test("isRunning is true exactly while the thread has an active run", async () => {
  const { post, runner } = runtime();
  const threadId = randomUUID();
  assert.equal(await runner.isRunning({ threadId }), false);
  const runId = randomUUID();
  const response = await post("/agent/demo/run", runInput(threadId, runId));
  const checks: Promise<boolean>[] = [];
  const events = await read(response, (events) => {
    if (events.length === 1) checks.push(runner.isRunning({ threadId }));
    return false;
  });
  assert.deepEqual(await Promise.all(checks), [true]);
  assert.equal(events.at(-1)!.type, "RUN_FINISHED");
  assert.equal(await runner.isRunning({ threadId }), false);
});

test("stop cancels the thread's active run by id, and the run's stream ends", async () => {
  const { post, runner } = runtime();
  const threadId = randomUUID();
  const runId = randomUUID();
  let stopped: Promise<Response> | undefined;
  const events = await read(await post("/agent/demo/run", runInput(threadId, runId, SLOW)), (events) => {
    if (!stopped && contents(events) >= 1) stopped = post(`/agent/demo/stop/${threadId}`, {});
    return false;
  });
  assert.deepEqual(await (await stopped!).json().then((b: { stopped: boolean }) => b.stopped), true);
  const last = events.at(-1)!;
  assert.equal(last.type, "RUN_ERROR");
  assert.equal(last.code, "cancelled");
  const record = await get<{ status: string }>(`/runs/${runId}`);
  assert.equal(record.status, "cancelled");
  // Promptly: the run did not get through its steps.
  assert.ok(!fold(events).size || ![...fold(events).values()].some((t) => t.startsWith("All ")), "stopped before the end");
  assert.equal(await runner.isRunning({ threadId }), false);
  assert.equal(await runner.stop({ threadId }), false, "nothing left to stop");
});

test("two runtimes see and control the same run", async () => {
  const a = runtime();
  const b = runtime();
  const threadId = randomUUID();
  const runId = randomUUID();
  const input = runInput(threadId, runId, SLOW);

  let fromB: Promise<Ev[]> | undefined;
  let retried: Promise<Ev[]> | undefined;
  let stoppedByB: Promise<boolean> | undefined;
  const seenByA = await read(await a.post("/agent/demo/run", input), (events) => {
    if (!fromB && contents(events) >= 1) {
      fromB = (async () => {
        assert.equal(await b.runner.isRunning({ threadId }), true);
        // The same request through the other process attaches to the same run (G3).
        retried = b.post("/agent/demo/run", input).then((r) => read(r));
        return read(await b.post("/agent/demo/connect", connectInput(threadId)), (seen) => {
          if (!stoppedByB && contents(seen.slice(3)) >= 2) stoppedByB = b.runner.stop({ threadId });
          return false;
        });
      })();
    }
    return false;
  });
  const seenByB = await fromB!;
  assert.equal(await stoppedByB!, true);
  for (const events of [seenByA, seenByB, await retried!]) {
    assert.equal(events.at(-1)!.type, "RUN_ERROR");
    assert.equal(events.at(-1)!.code, "cancelled");
  }
  assert.equal((await retried!)[0].runId, runId);
  assert.equal((await get<{ status: string }>(`/runs/${runId}`)).status, "cancelled");
  assert.equal(await a.runner.isRunning({ threadId }), false);
  assertHasTexts(fold(seenByB), fold(seenByA)); // B saw all of what A saw, through its snapshot and live
});
