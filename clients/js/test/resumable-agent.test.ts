/**
 * ResumableHttpAgent against a scripted server: streams break mid-message and
 * the agent must fold every event exactly once through the stock pipeline.
 *
 *   npm test --prefix clients/js
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ResumableHttpAgent, type ConnectionState } from "../src/index";

type Ev = Record<string, unknown> & { type: string };

const RUN = "run-1";
const THREAD = "thread-1";
const WORDS = ["Plan", " the", " trip", " in", " three", " steps", "."];

/** The run's stored log: seq = index + 1. */
const LOG: Ev[] = [
  { type: "RUN_STARTED", threadId: THREAD, runId: RUN },
  { type: "STEP_STARTED", stepName: "plan" },
  { type: "TEXT_MESSAGE_START", messageId: "m1", role: "assistant" },
  ...WORDS.map((delta) => ({ type: "TEXT_MESSAGE_CONTENT", messageId: "m1", delta })),
  { type: "TEXT_MESSAGE_END", messageId: "m1" },
  { type: "TOOL_CALL_START", toolCallId: "t1", toolCallName: "search", parentMessageId: "m1" },
  { type: "TOOL_CALL_ARGS", toolCallId: "t1", delta: '{"q":' },
  { type: "TOOL_CALL_ARGS", toolCallId: "t1", delta: '"x"}' },
  { type: "TOOL_CALL_END", toolCallId: "t1" },
  { type: "TOOL_CALL_RESULT", toolCallId: "t1", messageId: "r1", content: "ok" },
  { type: "STEP_FINISHED", stepName: "plan" },
  { type: "RUN_FINISHED", threadId: THREAD, runId: RUN },
];

/** What the server re-opens when a stream resumes after `after` (SPEC §4). */
function reopened(after: number): Ev[] {
  const open = new Map<string, Ev>();
  for (const ev of LOG.slice(0, after)) {
    if (ev.type === "STEP_STARTED") open.set(`s:${ev.stepName}`, { type: "STEP_STARTED", stepName: ev.stepName });
    if (ev.type === "STEP_FINISHED") open.delete(`s:${ev.stepName}`);
    if (ev.type === "TEXT_MESSAGE_START") open.set(`m:${ev.messageId}`, { ...ev });
    if (ev.type === "TEXT_MESSAGE_END") open.delete(`m:${ev.messageId}`);
    if (ev.type === "TOOL_CALL_START") open.set(`t:${ev.toolCallId}`, { ...ev });
    if (ev.type === "TOOL_CALL_END") open.delete(`t:${ev.toolCallId}`);
  }
  return [{ type: "RUN_STARTED", threadId: THREAD, runId: RUN }, ...open.values()];
}

function frame(ev: Ev, seq?: number): string {
  return `${seq === undefined ? "" : `id: ${seq}\n`}data: ${JSON.stringify(ev)}\n\n`;
}

/** A body that sends `chunks`, then either ends or fails like a dropped connection. */
function body(chunks: string[], drop: boolean): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    async pull(controller) {
      await new Promise((r) => setTimeout(r, 1));
      const next = chunks.shift();
      if (next !== undefined) controller.enqueue(encoder.encode(next));
      else if (drop) controller.error(new TypeError("network error"));
      else controller.close();
    },
  });
}

function sse(chunks: string[], drop = false): Response {
  return new Response(body(chunks, drop), {
    headers: { "Content-Type": "text/event-stream", "Outlast-Run-Id": RUN },
  });
}

/**
 * Serves the POST with frames up to `cuts[0]` and then drops; each resume
 * (GET with Last-Event-ID) is served up to the next cut, the last one to the end.
 * A cut splits a frame in half too, to exercise the parser.
 */
function scriptedFetch(cuts: number[], calls: string[]) {
  let served = 0;
  return async (url: string, init: RequestInit): Promise<Response> => {
    const headers = new Headers(init.headers);
    const after = Number(headers.get("Last-Event-ID") ?? 0);
    calls.push(`${init.method} ${new URL(url).pathname} after=${after}`);
    const cut = cuts[served++];
    const until = cut ?? LOG.length;
    const intro = ["retry: 1000\n\n", ...(init.method === "GET" ? reopened(after).map((ev) => frame(ev)) : [])];
    const frames = LOG.slice(after, until).map((ev, i) => frame(ev, after + i + 1));
    if (cut === undefined) return sse([...intro, ...frames]);
    const half = frame(LOG[until], until + 1);
    return sse([...intro, ...frames, half.slice(0, 9)], true);
  };
}

function agentWith(fetchFn: ReturnType<typeof scriptedFetch>) {
  const states: ConnectionState[] = [];
  const seqs: (number | undefined)[] = [];
  const agent = new ResumableHttpAgent({
    url: "http://outlast.test/agents/demo",
    threadId: THREAD,
    fetch: fetchFn,
    backoff: { initialMs: 1, maxMs: 5 },
  });
  agent.onConnectionChange = (c) => states.push(c);
  agent.onFrame = (f) => seqs.push(f.seq);
  return { agent, states, seqs };
}

test("a run that drops mid-message and mid-tool-call folds to the full log, once", async () => {
  const calls: string[] = [];
  const { agent, states, seqs } = agentWith(scriptedFetch([5, 14], calls));
  agent.addMessage({ id: "u1", role: "user", content: "go" });
  await agent.runAgent({ runId: RUN });

  const assistant = agent.messages.find((m) => m.id === "m1") as { content: string; toolCalls: { function: { arguments: string } }[] };
  assert.equal(assistant.content, WORDS.join(""));
  assert.equal(assistant.toolCalls.length, 1);
  assert.equal(assistant.toolCalls[0].function.arguments, '{"q":"x"}');
  assert.deepEqual(agent.messages.map((m) => m.id), ["u1", "m1", "r1"]);
  assert.deepEqual(seqs, LOG.map((_, i) => i + 1), "every seq passed on exactly once");
  assert.deepEqual(calls, ["POST /agents/demo after=0", "GET /runs/run-1/events after=5", "GET /runs/run-1/events after=14"]);
  assert.ok(states.some((s) => s.status === "reconnecting"));
  assert.equal(states.at(-1)?.status, "idle");
});

test("a request that fails before any event is sent again", async () => {
  const calls: string[] = [];
  let first = true;
  const inner = scriptedFetch([], calls);
  const fetchFn = async (url: string, init: RequestInit) => {
    if (first) {
      first = false;
      throw new TypeError("Failed to fetch");
    }
    return inner(url, init);
  };
  const { agent } = agentWith(fetchFn);
  await agent.runAgent({ runId: RUN });
  assert.equal((agent.messages.find((m) => m.id === "m1") as { content: string }).content, WORDS.join(""));
  assert.deepEqual(calls, ["POST /agents/demo after=0"]);
});

test("a 4xx answer is not retried", async () => {
  const fetchFn = async () =>
    new Response(JSON.stringify({ error: { code: "resume_incomplete", message: "answer every interrupt" } }), {
      status: 422,
      headers: { "Content-Type": "application/json" },
    });
  const { agent } = agentWith(fetchFn);
  await assert.rejects(agent.runAgent({ runId: RUN }), /422: answer every interrupt/);
});

test("hydration follows the active run and resumes it after a drop", async () => {
  const calls: string[] = [];
  const resume = scriptedFetch([], calls);
  let posts = 0;
  const fetchFn = async (url: string, init: RequestInit): Promise<Response> => {
    if (init.method === "GET") return resume(url, init);
    posts += 1;
    const sent = JSON.parse(String(init.body)) as { messages: unknown[]; resume?: unknown };
    assert.deepEqual(sent.messages, [], "hydration sends no messages");
    assert.equal(sent.resume, undefined, "hydration sends no resume");
    // As outlast streams it: synthesized head (no ids), then the run after its snapshot seq.
    const head = [
      frame({ type: "RUN_STARTED", threadId: THREAD, runId: RUN }),
      frame({ type: "STATE_SNAPSHOT", snapshot: { todos: [] } }),
      frame({ type: "MESSAGES_SNAPSHOT", messages: [{ id: "u1", role: "user", content: "go" }] }),
    ];
    const live = LOG.slice(1, 7).map((ev, i) => frame(ev, i + 2));
    return sse([...head, ...live], true);
  };
  const { agent, seqs } = agentWith(fetchFn);
  agent.messages = [{ id: "stale", role: "user", content: "gone" }];
  await agent.connectAgent();

  assert.equal(posts, 1);
  assert.deepEqual(calls, ["GET /runs/run-1/events after=7"]);
  assert.deepEqual(agent.messages.map((m) => m.id), ["u1", "m1", "r1"]);
  assert.equal((agent.messages[1] as { content: string }).content, WORDS.join(""));
  assert.deepEqual(agent.state, { todos: [] });
  assert.deepEqual(seqs.filter((s) => s !== undefined), LOG.slice(1).map((_, i) => i + 2));
});

test("hydration of an idle thread restates its pending interrupts", async () => {
  const interrupt = { id: "approve-1", reason: "tool_call", message: "ok?" };
  const fetchFn = async (): Promise<Response> =>
    sse([
      frame({ type: "RUN_STARTED", threadId: THREAD, runId: "h" }),
      frame({ type: "STATE_SNAPSHOT", snapshot: {} }),
      frame({ type: "MESSAGES_SNAPSHOT", messages: [] }),
      frame({ type: "RUN_FINISHED", threadId: THREAD, runId: "h", outcome: { type: "interrupt", interrupts: [interrupt] } }),
    ]);
  const { agent } = agentWith(fetchFn);
  agent.pendingInterrupts = [{ id: "old", reason: "x" }];
  await agent.connectAgent();
  assert.deepEqual(agent.pendingInterrupts.map((i) => i.id), ["approve-1"]);
});

test("a resumed stream of a run that already ended passes its id-less final event", async () => {
  const calls: string[] = [];
  const fetchFn = async (url: string, init: RequestInit): Promise<Response> => {
    calls.push(`${init.method} ${new URL(url).pathname}`);
    if (init.method === "POST") return sse(LOG.slice(0, -1).map((ev, i) => frame(ev, i + 1)), true);
    return sse([frame({ type: "RUN_STARTED", threadId: THREAD, runId: RUN }), frame(LOG.at(-1)!)]);
  };
  const { agent } = agentWith(fetchFn);
  await agent.runAgent({ runId: RUN });
  assert.deepEqual(calls, ["POST /agents/demo", "GET /runs/run-1/events"]);
  assert.equal(agent.messages.length, 2);
});
