// What one handler keeps between requests: its options, the compactor, the
// answers holding sessions, the automatic checks scheduled, the condense
// rate per member, the running tasks and the event streams to wake. The
// Rust server's state.rs.

import type { Compactor } from "../driver/api.js";
import type { Availability } from "../types.js";
import { WAITS_PER_MEMBER } from "../defaults.js";
import { ApiError } from "./reply.js";
import type { Answers, CompressionStore, ExecutionContext, HandlerOptions, Member, Owners } from "./api.js";

/** The slot of one conversation's timeline page: the last answer drawn and the turn to draw. */
export interface TimelineSlot { kept?: { tag: string; body: Uint8Array<ArrayBuffer> }; turn: Promise<void>; users: number }

/** The handler's state, shared by every request. */
export interface App {
  o: HandlerOptions;
  /** Who may call: `o.members` until `setMembers`. */
  members: Member[];
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
  /** The answer holding each session, its lease and the compression state it captured (in `owners` when it keeps them). */
  answers: Answers;
  availability: Availability;
  compression: CompressionStore;
  /** Each member's condense requests of the last minute. */
  rate: Map<string, number[]>;
  /** Tasks running in this handler (`conversation\ntask`). */
  running: Set<string>;
  /** Where each task's `requested` event is (`conversation\ntask`), for the tasks started or followed here; the least recently used let go past `TASK_STARTS`. */
  taskStarts: Map<string, number>;
  /** Event streams waiting for a write, by conversation (none kept for a conversation nobody waits on). */
  wakers: Map<string, Set<() => void>>;
  /** The long polls each member has waiting (at most `WAITS_PER_MEMBER`). */
  waiting: Map<string, number>;
}

/**
 * Wake the event streams of conversation `id`: something was written to it.
 * Only its own: with hundreds of pages open, waking them all on every write
 * made each append cost a journal read per page (the Rust server's wakes.rs).
 */
export function wrote(app: App, id: string): void {
  for (const w of [...(app.wakers.get(id) ?? [])]) w();
}

/** Wait for a write to conversation `id`, at most `ms`: woken by this handler's writes, another's seen after `ms`. */
export function napOn(app: App, id: string, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    let waiting = app.wakers.get(id);
    if (!waiting) app.wakers.set(id, (waiting = new Set()));
    const set = waiting;
    const done = () => {
      clearTimeout(t);
      set.delete(done);
      if (set.size === 0 && app.wakers.get(id) === set) app.wakers.delete(id);
      resolve();
    };
    const t = setTimeout(done, Math.max(1, ms));
    set.add(done);
  });
}

/**
 * Run `poll`, a long poll of `member` (when its `deadline` is still to
 * come), holding one of the member's `WAITS_PER_MEMBER` places meanwhile;
 * one more is refused with `rate_limited` (each costs a journal read per
 * write to its conversation and per poll interval).
 */
export async function holding<T>(app: App, member: string, deadline: number, poll: () => Promise<T>): Promise<T> {
  if (deadline <= Date.now()) return poll();
  const held = app.waiting.get(member) ?? 0;
  if (held >= WAITS_PER_MEMBER) {
    throw new ApiError(429, "rate_limited", `${member} already has ${WAITS_PER_MEMBER} long polls waiting on this server; ask again when one has answered`, 1);
  }
  app.waiting.set(member, held + 1);
  try {
    return await poll();
  } finally {
    const left = (app.waiting.get(member) ?? 1) - 1;
    if (left === 0) app.waiting.delete(member);
    else app.waiting.set(member, left);
  }
}

/** Work that outlives the response: logged if it fails, kept alive on edge runtimes. */
export function later(p: Promise<unknown>, ctx?: ExecutionContext): void {
  const q = p.catch((e) => console.error("foldline handler:", e));
  ctx?.waitUntil(q);
}

/** Whether an answer holds the conversation's session now (on any handler sharing the store that keeps answers). */
export async function answering(app: App, id: string): Promise<boolean> {
  return (await app.answers.answer(id, Date.now())) !== undefined;
}

/** The automatic check, after the answer; checks of one conversation never overlap, one more runs if asked meanwhile. */
export function schedule(app: App, id: string, ctx?: ExecutionContext): void {
  if (app.checks.has(id)) { app.checks.set(id, true); return; }
  app.checks.set(id, false);
  later((async () => {
    try {
      for (;;) {
        const r = await app.compactor.onMessage(id);
        if (r.status === "compacted" || r.status === "failed") wrote(app, id);
        if (!app.checks.get(id)) break;
        app.checks.set(id, false);
      }
    } finally {
      app.checks.delete(id);
    }
  })(), ctx);
}

/** Count a condense request of `member` against the per-minute limit: in the owners' store when it counts (shared by every isolate), else here. */
export async function takeCondense(app: App, member: string): Promise<void> {
  const now = Date.now();
  let wait = 0;
  if (app.owners.takeCondense) {
    wait = await app.owners.takeCondense(member, now, app.perMinute);
  } else {
    const w = (app.rate.get(member) ?? []).filter((t) => now - t < 60_000);
    app.rate.set(member, w);
    if (w.length >= app.perMinute) wait = Math.max(1, Math.ceil((60_000 - (now - w[0])) / 1000));
    else w.push(now);
  }
  if (wait > 0) throw new ApiError(429, "rate_limited", `at most ${app.perMinute} manual compactions per minute; try again in ${wait} s`, wait);
}
