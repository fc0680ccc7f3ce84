/** The outlast REST resources the page reads besides the AG-UI stream (SPEC §3). */
import type { BaseEvent, Interrupt, Message } from "@ag-ui/client";
import { readSse } from "../../clients/js/src/index";

export type RunStatus = "queued" | "running" | "interrupted" | "succeeded" | "failed" | "cancelled";

export interface ActiveRun {
  runId: string;
  status: RunStatus;
  lastSeq?: number;
}

export interface ThreadSummary {
  id: string;
  status?: string;
  updatedAt?: string;
  title?: string;
  activeRun?: ActiveRun | null;
  /** Where a fork branched off: `{threadId, runId, seq}`; absent for other threads. */
  forkedFrom?: { threadId: string; runId?: string | null; seq?: number | null } | null;
}

export interface ThreadSnapshot {
  threadId: string;
  messages: Message[];
  state: Record<string, unknown>;
  interrupts: Interrupt[];
  asOf?: { runId?: string; seq?: number } | null;
  status?: string;
  activeRun: ActiveRun | null;
}

export interface RunRecord {
  runId: string;
  threadId?: string;
  agent?: string;
  status: RunStatus;
  lastSeq?: number;
  attempts?: number;
  createdAt?: string;
  updatedAt?: string;
  error?: unknown;
  interrupts?: Interrupt[];
}

/** An error answer from the server: `{"error": {"code", "message"}}`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly detail: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }
}

const TOKEN_KEY = "outlast.token";

/** The bearer token this page sends, when the server is configured with tokens. */
export function token(): string {
  return localStorage.getItem(TOKEN_KEY) ?? "";
}

/** Remember (or, when empty, forget) the bearer token for this origin. */
export function setToken(value: string): void {
  if (value.trim()) localStorage.setItem(TOKEN_KEY, value.trim());
  else localStorage.removeItem(TOKEN_KEY);
}

/** A `#token=...` link sets the token once; it leaves the address bar at once. */
export function takeTokenFromLocation(): void {
  const match = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  if (!match) return;
  setToken(decodeURIComponent(match[1]));
  history.replaceState(history.state, "", location.pathname + location.search);
}

/** `Authorization: Bearer ...` when a token is set. */
export function authHeaders(): Record<string, string> {
  const value = token();
  return value ? { Authorization: `Bearer ${value}` } : {};
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(path, {
    method,
    headers: body === undefined ? authHeaders() : { ...authHeaders(), "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const json: unknown = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const error = (json as { error?: Record<string, unknown> } | null)?.error ?? {};
    throw new ApiError(
      response.status,
      String(error.code ?? response.status),
      String(error.message ?? response.statusText),
      error,
    );
  }
  return json as T;
}

/** Lists may come bare or wrapped (`{threads: [...]}`, `{items: [...]}`, `{runs: [...]}`). */
function items<T>(json: unknown, key: string): T[] {
  if (Array.isArray(json)) return json as T[];
  const wrapped = json as Record<string, unknown> | null;
  const list = wrapped?.[key] ?? wrapped?.items ?? wrapped?.data;
  return Array.isArray(list) ? (list as T[]) : [];
}

function threadSummary(raw: Record<string, unknown>): ThreadSummary {
  return {
    ...(raw as unknown as ThreadSummary),
    id: String(raw.id ?? raw.threadId ?? raw.thread_id),
    updatedAt: (raw.updatedAt ?? raw.updated_at) as string | undefined,
    activeRun: (raw.activeRun ?? raw.active_run ?? null) as ActiveRun | null,
  };
}

export async function listThreads(): Promise<ThreadSummary[]> {
  const json = await call<unknown>("GET", "/threads");
  return items<Record<string, unknown>>(json, "threads").map(threadSummary);
}

export async function getThread(threadId: string): Promise<ThreadSnapshot> {
  const raw = await call<Record<string, unknown>>("GET", `/threads/${enc(threadId)}`);
  return {
    ...(raw as unknown as ThreadSnapshot),
    threadId: String(raw.threadId ?? raw.id ?? threadId),
    messages: (raw.messages ?? []) as Message[],
    state: (raw.state ?? {}) as Record<string, unknown>,
    interrupts: (raw.interrupts ?? []) as Interrupt[],
    activeRun: (raw.activeRun ?? raw.active_run ?? null) as ActiveRun | null,
  };
}

export async function listRuns(threadId: string): Promise<RunRecord[]> {
  const json = await call<unknown>("GET", `/threads/${enc(threadId)}/runs`);
  return items<RunRecord>(json, "runs");
}

export function getRun(runId: string): Promise<RunRecord> {
  return call<RunRecord>("GET", `/runs/${enc(runId)}`);
}

export function cancelRun(runId: string): Promise<unknown> {
  return call<unknown>("POST", `/runs/${enc(runId)}/cancel`);
}

/** A finished replay of a run's stored events (`?follow=false`), for the inspector. */
export async function runEvents(runId: string): Promise<{ seq?: number; event: BaseEvent }[]> {
  const response = await fetch(`/runs/${enc(runId)}/events?after=0&follow=false`, {
    headers: { ...authHeaders(), Accept: "text/event-stream" },
  });
  if (!response.ok || !response.body) throw new ApiError(response.status, "http", response.statusText);
  const frames: { seq?: number; event: BaseEvent }[] = [];
  await readSse(response.body, new AbortController(), 30_000, {
    activity: () => undefined,
    frame: (id, data) => frames.push({ seq: id ? Number(id) : undefined, event: JSON.parse(data) }),
  });
  return frames;
}

function enc(id: string): string {
  return encodeURIComponent(id);
}

/** Branch a thread (SPEC §3): at its latest boundary, or just before a message. */
export async function forkThread(
  threadId: string,
  body: { beforeMessageId?: string; asOf?: { runId: string; seq: number } } = {},
): Promise<ThreadSnapshot> {
  const raw = await call<Record<string, unknown>>("POST", `/threads/${enc(threadId)}/fork`, body);
  return { ...(raw as unknown as ThreadSnapshot), threadId: String(raw.threadId) };
}
