// What one handler keeps between requests: its options, the compactor, the
// answers holding sessions, the automatic checks scheduled, the condense
// rate per member, the running tasks and the event streams to wake. The
// Rust server's state.rs.

import type { Compactor } from "../driver/api.js";
import type { Availability, Preferences } from "../types.js";
import { ApiError } from "./reply.js";
import type { CompressionStore, ExecutionContext, HandlerOptions, Owners } from "./api.js";

/** The slot of one conversation's timeline page: the last answer drawn and the turn to draw. */
export interface TimelineSlot { kept?: { tag: string; body: Uint8Array<ArrayBuffer> }; turn: Promise<void>; users: number }

/** The handler's state, shared by every request. */
export interface App {
  o: HandlerOptions;
  owners: Owners;
  compactor: Compactor;
  bodyLimit: number;
  perMinute: number;
  answerLeaseMs: number;
  pollMs: number;
  /** The timeline pages drawn last, by conversation and page (`timeline.ts`). */
  drawn: Map<string, TimelineSlot>;
  /** The declarations' hash, named in timeline tags (computed once). */
  declarationsHash?: Promise<string>;
  /** Conversations with an automatic check running (`true`: one more asked for meanwhile). */
  checks: Map<string, boolean>;
  /** The answer holding each session, its lease and the compression state it captured. */
  answers: Map<string, { id: string; until: number; preferences: Preferences }>;
  availability: Availability;
  compression: CompressionStore;
  /** Each member's condense requests of the last minute. */
  rate: Map<string, number[]>;
  /** Tasks running in this handler (`conversation\ntask`). */
  running: Set<string>;
  /** Where each task's `requested` event is (`conversation\ntask`), for the tasks started or followed here; the least recently used let go past `TASK_STARTS`. */
  taskStarts: Map<string, number>;
  /** Event streams waiting for a write. */
  wakers: Set<() => void>;
}

/** Wake every event stream: something was written. */
export function wrote(app: App): void {
  for (const w of [...app.wakers]) w();
}

/** Work that outlives the response: logged if it fails, kept alive on edge runtimes. */
export function later(p: Promise<unknown>, ctx?: ExecutionContext): void {
  const q = p.catch((e) => console.error("foldline handler:", e));
  ctx?.waitUntil(q);
}

/** Whether an answer holds the conversation's session now. */
export function answering(app: App, id: string): boolean {
  return (app.answers.get(id)?.until ?? 0) > Date.now();
}

/**
 * Answers whose lease lapsed without being given back (a client that went
 * away) are let go once the handler holds this many, so a long-lived process
 * does not keep one per conversation ever answered; a lapsed answer given
 * back after that is `404 not_found`, as one that never held the session.
 */
const ANSWERS_KEPT = 1024;

/** Let the lapsed answers go once `ANSWERS_KEPT` are held. */
export function letLapsedGo(app: App): void {
  if (app.answers.size < ANSWERS_KEPT) return;
  const now = Date.now();
  for (const [id, a] of app.answers) if (a.until <= now) app.answers.delete(id);
}

/** The automatic check, after the answer; checks of one conversation never overlap, one more runs if asked meanwhile. */
export function schedule(app: App, id: string, ctx?: ExecutionContext): void {
  if (app.checks.has(id)) { app.checks.set(id, true); return; }
  app.checks.set(id, false);
  later((async () => {
    try {
      for (;;) {
        const r = await app.compactor.onMessage(id);
        if (r.status === "compacted" || r.status === "failed") wrote(app);
        if (!app.checks.get(id)) break;
        app.checks.set(id, false);
      }
    } finally {
      app.checks.delete(id);
    }
  })(), ctx);
}

export function takeCondense(app: App, member: string): void {
  const now = Date.now();
  const w = (app.rate.get(member) ?? []).filter((t) => now - t < 60_000);
  app.rate.set(member, w);
  if (w.length >= app.perMinute) {
    const wait = Math.max(1, Math.ceil((60_000 - (now - w[0])) / 1000));
    throw new ApiError(429, "rate_limited", `at most ${app.perMinute} manual compactions per minute; try again in ${wait} s`, wait);
  }
  w.push(now);
}
