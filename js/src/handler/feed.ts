// `…/events`: the member-visible events after a position, for a client
// projecting its timeline locally (a long poll with `wait`). The Rust
// server's feed.rs.

import { FEED_PAGE_EVENTS, LONG_POLL_MS } from "../defaults.js";
import { FoldlineError } from "../error.js";
import { json, ApiError } from "./reply.js";
import { stillAdmitted } from "./access.js";
import type { Journal, StoredEvent } from "../journal/journal.js";
import { holding, napOn, type App } from "./state.js";

/**
 * `…/events?after=N[&limit=L][&wait=ms]`: the member-visible events after
 * position `N` (a failed compaction's audit reason taken out), at most `L`
 * and at most `FEED_PAGE_EVENTS` (`more`: the page was full), for a client
 * that projects its timeline locally; with `wait` (at most 25 s) a long poll.
 */
export async function feed(app: App, id: string, url: URL, member: string): Promise<Response> {
  const after = number(url, "after") ?? 0;
  const limit = Math.min(Math.max(number(url, "limit") ?? FEED_PAGE_EVENTS, 1), FEED_PAGE_EVENTS);
  const deadline = waitDeadline(url);
  return holding(app, member, deadline, () => poll(app, id, member, after, limit, deadline));
}

async function poll(app: App, id: string, member: string, after: number, limit: number, deadline: number): Promise<Response> {
  for (let waited = false; ; waited = true) {
    const found = (await readSome(app.o.journal, id, after, limit)).slice(0, limit);
    // A long poll that waited is admitted again before it answers what was
    // written meanwhile: a member let out of the room while it waited is
    // refused, never sent what came after (foldline serve's `still_admitted`).
    if (waited && found.length > 0) await stillAdmitted(app, id, member);
    if (found.length > 0 || Date.now() >= deadline) {
      const events = found.map((s) => ({ seq: s.seq, event: s.event.type === "compactionFailed" ? { ...s.event, reason: "" } : s.event }));
      // The chain's verdict, for the local projection.
      let accepted: string[] = [];
      let retired: string[] = [];
      try {
        const r = await app.compactor.resolve(id);
        [accepted, retired] = [r.accepted, r.retiredBoundaries];
      } catch (e) {
        if (!(e instanceof FoldlineError)) throw e; // a rejected chain draws no completed divider
      }
      return json(200, { events, last: found.at(-1)?.seq ?? after, more: found.length === limit, accepted, retired });
    }
    await nap(app, id, deadline);
  }
}

/**
 * The events after position `after`: a page of about `limit` when the
 * journal reads in pages, else all of them (a caller reading on from the
 * last one gets the rest, never the same events twice).
 */
export function readSome(j: Journal, id: string, after: number, limit: number): Promise<StoredEvent[]> {
  return j.readEventsPage ? j.readEventsPage(id, after, limit) : j.readEvents(id, after);
}

/** A whole-number query parameter, if given. */
export function number(url: URL, name: string): number | undefined {
  const v = url.searchParams.get(name);
  if (v === null) return undefined;
  const n = safeWhole(v);
  if (n === undefined) throw new ApiError(400, "invalid_input", `${name} must be a whole number of decimal digits, at most 9007199254740991 (2^53 - 1)`);
  return n;
}

/**
 * A whole number written in decimal digits only, at most 2^53 − 1 (past it a
 * JS number is not the one asked for; no position is that large), as the
 * Rust server's `safe_whole`: `+5`, `5.0`, `1e3` or ` 5` are not one.
 */
export function safeWhole(v: string): number | undefined {
  const n = Number(v);
  return /^\d+$/.test(v) && Number.isSafeInteger(n) ? n : undefined;
}

/** When a long poll's `wait` (at most 25 s) is up. */
export function waitDeadline(url: URL): number {
  return Date.now() + Math.min(number(url, "wait") ?? 0, LONG_POLL_MS);
}

/** Wait for a write to `id`, at most until `deadline`: woken by this handler's writes to it, another's seen at the next poll. */
export function nap(app: App, id: string, deadline: number): Promise<void> {
  return napOn(app, id, Math.min(app.pollMs, deadline - Date.now()));
}
