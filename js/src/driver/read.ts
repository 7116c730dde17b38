// What a compactor reads and keeps between messages: each conversation's
// state (the journal position read to, the live events, the verified chain
// prefix), read incrementally and resolved again only when a chain event
// arrived; the view the core plans from. The Rust driver's read.rs.

import { FoldlineError } from "../error.js";
import { validate } from "../ops.js";
import { PINNED_ROLES } from "../defaults.js";
import { newSlot, rebuiltSlot, releaseSlot, type HeldView, type Slot } from "../held.js";
import type { Boundary, Event, InputTurn, ModelOutput, Packet, Part, PlanRequest, Resolution, Route, Trigger, Verified } from "../types.js";
import type { CompactorOptions } from "./api.js";

/** What every part of a compactor shares: its options and the state of each conversation. */
export interface Ctx {
  o: CompactorOptions;
  routeOf: (id: string) => Route;
  holder: string;
  leaseMs: number;
  /** Each kept conversation's state, the least recently used first. */
  states: Map<string, State>;
  /** The most conversations kept (`conversationsKept`, at least 1). */
  kept: number;
}

/** How many keyed appends per conversation a retry is recognized for. */
const KEPT_KEYS = 4096;
const CHAIN_TYPES = new Set(["frontier", "boundary", "correction", "lateDelivery"]);

/** What a compactor keeps of the chain prefix it verified. */
interface VerifiedPrefix {
  /** The head, in full, and its position in the chain. */
  head?: { boundary: Boundary; length: number };
  /** Every accepted boundary id, oldest first. */
  accepted: string[];
  /** What the prefix holds for each covered turn (a frozen turn, or a later boundary's absorbed entry). */
  covered: Map<string, InputTurn>;
  /**
   * Every boundary of a retired epoch resolve listed: their packets are never
   * read again, and once the current epoch has a head they leave `chain` too
   * (resolve needs them only to find what an upgrade carries over), so a
   * compaction after an upgrade costs what one before it did.
   */
  retired: Set<string>;
}

/** The core's request form of a verified prefix: its head and the snapshot of the turns `chain` touches. */
function verifiedRequest(v: VerifiedPrefix, chain: Event[]): Verified | null {
  if (!v.head) return null;
  const turns: InputTurn[] = [];
  for (const e of chain) {
    const t = e.type === "correction" || e.type === "lateDelivery" ? v.covered.get(e.turnId) : undefined;
    if (t) turns.push(t);
  }
  return { boundary: v.head.boundary, length: v.head.length, turns };
}

/**
 * Take in a resolution from the prefix: its new boundaries leave `chain`,
 * their turns join `covered`, and the answer lists every accepted and
 * retired id again (retired ones by id, as resolve lists them).
 */
function extendVerified(v: VerifiedPrefix, chain: Event[], r: Resolution): Event[] {
  const fresh = new Set(r.accepted.slice(v.head ? 1 : 0));
  for (const e of chain) {
    if (e.type !== "boundary" || !fresh.has(e.id)) continue;
    for (const t of e.input.turns) v.covered.set(t.turnId, t);
    for (const a of e.absorbed) v.covered.set(a.turnId, { turnId: a.turnId, sourceSeq: a.sourceSeq, role: a.role, contentHash: a.contentHash });
    if (r.head?.boundaryId === e.id) {
      const { type: _type, ...boundary } = e;
      v.head = { boundary, length: r.head.length };
    }
  }
  v.accepted.push(...fresh);
  r.accepted = [...v.accepted];
  for (const id of r.retiredBoundaries) v.retired.add(id);
  r.retiredBoundaries = [...v.retired].sort();
  const settled = (id: string) => fresh.has(id) || (r.head != null && v.retired.has(id));
  return chain.filter((e) => e.type !== "boundary" || !settled(e.id));
}

/** What a compactor keeps of one conversation between calls. */
export interface State {
  /** Journal position read to. */
  seq: number;
  /** Events plan and select need: pinned turns, turns after the head, corrections, failures, tasks. */
  recent: Event[];
  /** `recent` as held in the core (sent once, then only what is new). */
  held: Slot;
  /** Frontiers, boundaries, corrections and late deliveries: what resolve needs. */
  chain: Event[];
  /** Frontiers and boundaries read so far (a conflict that brought one means another writer moved the chain head). */
  chainEvents: number;
  /** The verified resolution, until a chain event arrives. */
  res?: Resolution;
  /** Counts the resolutions taken in: names the chain state a held view was made from. */
  resolutions: number;
  /** Operations queued or running on this state: a state in use is never let go. */
  users: number;
  /** Reads run one after another. */
  reading: Promise<unknown>;
  /** Writers run one after another. */
  writing: Promise<unknown>;
  /** Appends of messages run one after another (not behind a compaction). */
  appending: Promise<unknown>;
  /** Highest source sequence of a turn read so far. */
  sourceSeq: number;
  /** The latest keyed appends read (oldest first): a sender's key (`scoped`) → last journal position, content hashes. */
  keys: Map<string, { seq: number; hashes: string[] }>;
  /** The chain prefix verified so far: resolve starts from its head, so its boundaries leave `chain`. */
  verified: VerifiedPrefix;
  /** Manual tasks requested and not yet ended. */
  openTasks: Map<string, Extract<Event, { type: "compactionTask" }>>;
  /** Turns a correction touched that the journal was read for, once (`readOriginals`). */
  lookedUp: Set<string>;
  /** The warm candidate: its packet, and its summary once the core's loop prepared and checked it. */
  warm?: { packet: Packet; result?: ModelOutput; preparing?: Promise<void> };
}

/**
 * A sender's idempotency key as `State.keys` holds it: a key is its
 * sender's (two members of a room may pick the same one), each message's
 * sender as the journal holds it (empty for none). A key has no space.
 */
export function scoped(sender: string, key: string): string {
  return `${key} ${sender}`;
}

export function isTurn(e: Event): e is Extract<Event, { type: "message" | "lateDelivery" | "turnMeta" }> {
  return e.type === "message" || e.type === "lateDelivery" || e.type === "turnMeta";
}

/** A pinned turn (a system or developer message, a document, a turn marked pinned): never folded. */
export function isPinned(e: Event): boolean {
  return isTurn(e) && (e.pinned === true || PINNED_ROLES.has(e.role));
}

/**
 * The state of a conversation, marked most recently used (a new one when not
 * kept). Past `kept` conversations the least recently used that no
 * operation is using is let go — what the core holds of it released — and
 * read from the journal again at its next call, so memory stays bounded
 * however many conversations a compactor serves.
 */
export function state(c: Ctx, id: string): State {
  let s = c.states.get(id);
  if (s) {
    c.states.delete(id);
    c.states.set(id, s);
    return s;
  }
  for (const [k, old] of c.states) {
    if (c.states.size < c.kept) break;
    if (old.users > 0) continue;
    c.states.delete(k);
    releaseSlot(old.held);
  }
  s = {
    seq: 0, sourceSeq: 0, keys: new Map(), recent: [], held: newSlot(), resolutions: 0, chain: [], chainEvents: 0, openTasks: new Map(), verified: { accepted: [], covered: new Map(), retired: new Set() }, lookedUp: new Set(),
    users: 0, reading: Promise.resolve(), writing: Promise.resolve(), appending: Promise.resolve(),
  };
  c.states.set(id, s);
  return s;
}

/** `work` queued on `s`: the state counts it as a user until it settles. */
export function using<T>(s: State, work: Promise<T>): Promise<T> {
  s.users++;
  return work.finally(() => {
    s.users--;
  });
}

/** Read what is new since the last read, check it, and fold it into the state. */
export function sync(c: Ctx, id: string): Promise<State> {
  const s = state(c, id);
  const next = using(s, s.reading.then(async () => {
    const fresh = await c.o.journal.readEvents(id, s.seq);
    if (fresh.length === 0) return s;
    // A journal written by someone else may hold a bad event: name its
    // position. What the journal vouches it checked on append is not
    // checked again.
    const unchecked = fresh.filter((f) => f.checked !== true);
    try {
      if (unchecked.length > 0) validate({ kind: "events", route: c.routeOf(id), events: unchecked.map((f) => f.event) });
    } catch (e) {
      if (!(e instanceof FoldlineError)) throw e;
      const at = /events\[(\d+)\]/.exec(e.message);
      const pos = at ? unchecked[Number(at[1])]?.seq : e.ids.length ? unchecked.find((f) => isTurn(f.event) && e.ids.includes(f.event.turnId))?.seq : undefined;
      throw new FoldlineError({
        code: e.code, ids: e.ids,
        message: `the journal of ${id} holds an event foldline cannot use${pos ? ` at position ${pos}` : ""}: ${e.message.replace(/^[a-z_]+: /, "")}`,
      });
    }
    for (const { event, seq } of fresh) {
      if (isTurn(event) && event.sourceSeq > s.sourceSeq) s.sourceSeq = event.sourceSeq;
      const at = event.type === "message" ? event.turnId.lastIndexOf("@") : -1;
      if (event.type === "message" && at >= 0) {
        const key = scoped(event.sender ?? "", event.turnId.slice(at + 1));
        const k = s.keys.get(key);
        if (k) { k.seq = seq; k.hashes.push(event.contentHash ?? ""); }
        else {
          s.keys.set(key, { seq, hashes: [event.contentHash ?? ""] });
          if (s.keys.size > KEPT_KEYS) s.keys.delete(s.keys.keys().next().value as string);
        }
      }
      if (CHAIN_TYPES.has(event.type)) {
        s.chain.push(event);
        if (event.type === "boundary" || event.type === "frontier") s.chainEvents++;
        s.res = undefined;
      }
      if (event.type !== "boundary" && event.type !== "frontier") s.recent.push(event);
      if (event.type === "compactionTask") {
        if (event.state === "requested") s.openTasks.set(event.taskId, event);
        else s.openTasks.delete(event.taskId);
      }
    }
    s.seq = fresh[fresh.length - 1].seq;
    return s;
  }));
  s.reading = next.catch(() => undefined);
  return next;
}

/**
 * Boundaries one resolve settles at most: a longer chain (a cold read of a
 * long conversation) is resolved in steps, each from the head the last one
 * verified, as a compactor that had read it as it grew would have, so what
 * one resolve holds at once (the packets, the request, the core's memory)
 * does not grow with the chain. The Rust driver's `RESOLVE_STEP`.
 */
const RESOLVE_STEP = 64;

/** The state, read to the journal's end, with its chain resolved. */
export async function load(c: Ctx, id: string, readNew = true): Promise<{ s: State; res: Resolution; events: Event[] }> {
  // `readNew: false`: the state as the last read left it (a read made
  // earlier in the same operation; every write of the driver's is read back).
  const s = readNew ? await sync(c, id) : state(c, id);
  if (!s.res) {
    // In turn with the reads, so no read changes the chain between steps.
    const done = using(s, s.reading.then(() => resolveChain(c, id, s)));
    s.reading = done.catch(() => undefined);
    await done;
  }
  return { s, res: s.res as Resolution, events: s.recent };
}

/** Resolve `s.chain` from the verified head, in steps of at most `RESOLVE_STEP` boundaries to settle. */
async function resolveChain(c: Ctx, id: string, s: State): Promise<void> {
  if (s.res) return; // a load in turn before this one resolved it
  await readOriginals(c, id, s);
  const pending = s.chain;
  s.chain = [];
  // Boundaries a step found retired wait beside the later steps (no step
  // settles them) and rejoin the last, whose answer alone needs them (what
  // an upgrade carries over, their ids): each is sent at most twice.
  let aside: Event[] = [];
  let i = 0;
  for (;;) {
    let settling = 0;
    for (; i < pending.length; i++) {
      const e = pending[i];
      if (e.type === "boundary" && !s.verified.retired.has(e.id)) {
        if (settling === RESOLVE_STEP) break;
        settling++;
      }
      s.chain.push(e);
    }
    if (i === pending.length) { s.chain = s.chain.concat(aside); aside = []; }
    let r: Resolution;
    try {
      r = await resolveStep(c, id, s);
    } catch (e) {
      s.chain = s.chain.concat(aside, pending.slice(i));
      throw e;
    }
    if (i === pending.length) {
      s.res = r;
      return;
    }
    const retired = (e: Event) => e.type === "boundary" && s.verified.retired.has(e.id);
    aside = aside.concat(s.chain.filter(retired));
    s.chain = s.chain.filter((e) => !retired(e));
  }
}

/**
 * Resolve `chain` (the chain events after `s`'s verified head) from that
 * head; `s` is left as it is. Only boundaries after the head are sent (and
 * re-settled), so only their packets are read (a retired one's never).
 */
export async function resolveFrom(c: Ctx, id: string, s: State, chain: Event[]): Promise<Resolution> {
  const fresh = chain.filter((e): e is Extract<Event, { type: "boundary" }> => e.type === "boundary" && !s.verified.retired.has(e.id));
  const packets = (await Promise.all(fresh.map((b) => c.o.journal.getPacket(id, b.packetId)))).filter((p): p is Packet => p !== undefined);
  // The corrected turns themselves (kept, or read once: `readOriginals`): a
  // correction keeps the tool calls and results its turn had and it does not
  // carry, so the turn it makes — what a boundary froze — can only be told
  // from the turn itself; given the correction alone, resolve found a
  // difference that was not there (a false amendment, past its bound a chain
  // that never resolved again). The Rust driver's `corrected::originals`.
  const touched = targets(chain);
  const originals = touched.size === 0 ? [] : s.recent.filter((e) => e.type === "message" && touched.has(e.turnId));
  const r = validate({
    kind: "resolve", declaration: c.o.declaration, compactor: c.o.compactorDeclaration ?? { ...c.o.declaration, role: "compactor" },
    route: c.routeOf(id), events: chain.concat(originals), packets, verified: verifiedRequest(s.verified, chain),
  });
  if (r.kind !== "resolved") throw new Error("unexpected validate answer");
  return r;
}

/** The turn ids `events`' corrections touch. */
function targets(events: Event[]): Set<string> {
  const out = new Set<string>();
  for (const e of events) if (e.type === "correction") out.add(e.turnId);
  return out;
}

/**
 * Read from the journal, once, the turns `s`'s corrections touch that it no
 * longer holds (a turn corrected after a summary covered it, and so let go):
 * resolve is given every corrected turn, as a compactor that read the
 * journal cold gives it. With `chain`, those its corrections touch, read
 * each time: a correction only checked, not yet written, whose turn may be
 * let go again before it is. The Rust driver's `read_originals`.
 */
export async function readOriginals(c: Ctx, id: string, s: State, chain?: Event[]): Promise<void> {
  const wanted = [...targets(chain ?? s.chain)].filter((t) => !s.lookedUp.has(t));
  if (wanted.length === 0) return;
  const held = new Set(s.recent.filter((e) => e.type === "message").map((e) => (e as { turnId: string }).turnId));
  const missing = wanted.filter((t) => !held.has(t));
  if (missing.length === 0) return;
  const lacking = new Set(missing);
  for (const { event, seq } of await c.o.journal.readEvents(id, 0)) {
    if (seq <= s.seq && event.type === "message" && lacking.has(event.turnId)) s.recent.push(event);
  }
  rebuiltSlot(s.held);
  if (!chain) for (const t of missing) s.lookedUp.add(t);
}

/** Whether `s`'s verified prefix covers turn `turnId`. */
export function covers(s: State, turnId: string): boolean {
  return s.verified.covered.has(turnId);
}

/**
 * The conversation's pinned turns as `s` holds them, each as its latest
 * correction makes it (what admission counts: never folded, they must
 * leave a context room). The Rust driver's `corrected.rs`.
 */
export function pinnedTurns(s: State): Event[] {
  const fixes = new Map<string, Extract<Event, { type: "correction" }>>();
  for (const e of s.recent) {
    if (e.type !== "correction") continue;
    const had = fixes.get(e.turnId);
    if (!had || e.correctionSeq >= had.correctionSeq) fixes.set(e.turnId, e);
  }
  return s.recent.filter(isPinned).map((e) => {
    const fix = fixes.get((e as { turnId: string }).turnId);
    return fix && e.type !== "turnMeta" ? corrected(e as Extract<Event, { type: "message" | "lateDelivery" }>, fix) : e;
  });
}

/** The id a part links by (a tool call or result, an approval's request or answer). */
function linkOf(p: Part): string | undefined {
  return p.type === "toolCall" || p.type === "toolResult" ? p.callId
    : p.type === "approvalRequest" || p.type === "approvalResponse" ? p.approvalId
    : undefined;
}

/**
 * `turn` as `fix` makes it: what it says replaced, the tool calls and results
 * `fix` does not carry kept (the core's `corrected_parts`), its hash left to
 * the check.
 */
export function corrected<T extends Extract<Event, { type: "message" | "lateDelivery" }>>(turn: T, fix: { parts: T["parts"]; tokens?: number }): T {
  const { contentHash: _hash, tokens: _tokens, ...rest } = turn;
  const carried = new Set(fix.parts.map(linkOf).filter((id) => id !== undefined));
  const kept = turn.parts.filter((p) => { const id = linkOf(p); return id !== undefined && !carried.has(id); });
  return { ...rest, parts: [...fix.parts, ...kept], ...(fix.tokens === undefined ? {} : { tokens: fix.tokens }) } as T;
}

/** One resolve of `s.chain` from the verified head, taken into `s`. */
async function resolveStep(c: Ctx, id: string, s: State): Promise<Resolution> {
  const r = await resolveFrom(c, id, s, s.chain);
  s.chain = extendVerified(s.verified, s.chain, r);
  s.resolutions++;
  // What lies before the frontier or under the head never reaches plan
  // or select again: their cost does not grow with covered history.
  // (`keepFromSeq`: the core's answer, after the head and from the frontier.)
  const from = r.keepFromSeq;
  if (from > 0) {
    const corrected = targets(s.recent); // kept: resolve is given them with their corrections
    s.recent = s.recent.filter((e) => !isTurn(e) || isPinned(e) || e.sourceSeq >= from || corrected.has(e.turnId));
    rebuiltSlot(s.held); // the list is no longer what the core holds
  }
  return r;
}

/** What the core plans from: the state read to the journal's end, as a plan request. */
export async function view(c: Ctx, id: string, trigger: Trigger, prepareWarm = false, taskOwner?: string): Promise<{ s: State; request: PlanRequest; seq: number; key: string }> {
  const { s, events, res } = await load(c, id);
  const route = c.routeOf(id);
  const owner = taskOwner ?? c.o.owner?.(id) ?? null;
  return {
    s, seq: s.seq, key: viewKey(s, route, owner),
    request: {
      ...chainView(c, res, route, owner), events, trigger,
      // The held candidate's packet: once prepared, or to prepare it.
      warm: s.warm?.result || prepareWarm ? (s.warm?.packet ?? null) : null,
    },
  };
}

/**
 * A conversation's chain view, as the core holds it for `step` and for
 * `context` alike under one key: one definition, so whichever call holds it
 * first holds the same view (the compactor's `compression` included).
 */
export function chainView(c: Ctx, res: Resolution, route: Route, owner: string | null): HeldView["view"] {
  return {
    declaration: c.o.declaration, route, owner, frontier: res.frontier, head: res.head, amendment: res.amendment,
    carried: res.carried ?? null, ...(c.o.compression ? { compression: c.o.compression } : {}),
  };
}

/** Names a view's chain state: the same key, the same declaration, route, owner, frontier, head and amendment. */
export function viewKey(s: State, route: Route, owner: string | null): string {
  return `${s.resolutions}|${JSON.stringify(route)}|${owner}`;
}
