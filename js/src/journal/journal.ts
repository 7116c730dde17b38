import type { SkipRecord, Event, Packet } from "../types.js";
import { FoldlineError } from "../error.js";
import { validate } from "../ops.js";

/**
 * An event as the journal stores it: its position and the event. `checked`:
 * the journal guarantees the event passed {@link checkAppend} and is returned
 * exactly as checked (an in-process journal whose only way in is `append`),
 * so a reader need not check it again. Leave it out when the storage can be
 * written by anything else.
 */
export interface StoredEvent { seq: number; event: Event; checked?: boolean }

/** Where and under which lease a batch may be appended. */
export interface AppendOptions {
  /**
   * Compare-and-append: the batch is written only if the conversation's last
   * position is exactly this; otherwise nothing is written and the journal
   * throws `conflict`. Omitted, the batch goes at the end (source messages).
   */
  expectedSeq?: number;
  /**
   * The fencing token of the writer lease the batch is written under; the
   * journal refuses it (`lease_lost`) once a newer lease was granted.
   */
  fence?: number;
}

/**
 * What foldline needs from a conversation journal — the journal contract
 * (docs/journal.md). The journal is append-only: foldline never edits or
 * deletes an event. Every implementation, including a user's own, must:
 *
 * - check events when they are appended ({@link checkAppend}): a typed error
 *   naming the field, and nothing written;
 * - append a batch atomically, and only at `expectedSeq` when given
 *   (compare-and-append), so two writers can never both extend one head;
 * - refuse a boundary whose chain slot (its previous boundary, or its
 *   frontier for the first) is already taken (`fork`);
 * - grant the writer lease to one holder at a time with a fencing token that
 *   grows with every grant, and refuse a batch fenced by an older token.
 */
export interface Journal {
  /** Events of a conversation with a journal position greater than `sinceSeq` (default: all), in order. */
  readEvents(conversationId: string, sinceSeq?: number): Promise<StoredEvent[]>;
  /**
   * At most `limit` of the events {@link Journal.readEvents} reads after
   * `sinceSeq`, the first of them: a page, so that a reader of a long
   * conversation (the events feed) does not read all of it for each page.
   * Optional: without it, the reader reads all and keeps the page.
   */
  readEventsPage?(conversationId: string, sinceSeq: number, limit: number): Promise<StoredEvent[]>;
  /** Append a batch (or one event) atomically; returns the last position. */
  append(conversationId: string, events: Event | Event[], options?: AppendOptions): Promise<number>;
  /** Store a packet document by its id (idempotent). */
  putPacket(conversationId: string, packet: Packet): Promise<void>;
  /** A stored packet, or undefined. */
  getPacket(conversationId: string, id: string): Promise<Packet | undefined>;
  /** Every stored packet of a conversation. */
  listPackets(conversationId: string): Promise<Packet[]>;
  /**
   * Take (or renew, for the same holder) the per-conversation writer lease
   * for `ttlMs`: its fencing token, or undefined while another holder has it.
   */
  acquireLease(conversationId: string, holder: string, ttlMs: number): Promise<number | undefined>;
  /** Release the lease if `holder` has it. */
  releaseLease(conversationId: string, holder: string): Promise<void>;
  /**
   * Record a skipped run (below the trigger, no model call): the
   * conversation's compactor progress advances to the record's
   * `checkedThroughSeq` and its skipped-run count grows by one. A watermark
   * beside the journal, overwritten in place — never an event, so checks
   * below the trigger do not double the journal. Optional: a journal without
   * it keeps no progress.
   */
  noteSkipped?(conversationId: string, record: SkipRecord): Promise<void>;
  /** The conversation's compactor progress, when kept. */
  progress?(conversationId: string): Promise<Progress | undefined>;
}

/** How far the compactor got without inference: the skipped runs and the latest one's content-dark record. */
export interface Progress { skippedRuns: number; last: SkipRecord }

/** The progress after one more skipped run: the count grown, the record replaced unless it checked less far. */
export function advance(cur: Progress | undefined, record: SkipRecord): Progress {
  const newer = !cur || record.checkedThroughSeq >= cur.last.checkedThroughSeq;
  return { skippedRuns: (cur?.skippedRuns ?? 0) + 1, last: newer ? record : cur.last };
}

/** The chain slot a boundary takes: one boundary per head, per epoch. */
export function chainSlot(e: Event): string | undefined {
  if (e.type !== "boundary") return undefined;
  return `${e.declarationFingerprint}|${e.previous?.boundaryId ?? e.frontier.id}`;
}

/**
 * The journal contract's append check, for journals to call before they
 * write: every event decodes (a malformed one is named by its path, a lone
 * UTF-16 surrogate is refused), its turns belong to `conversationId`, a
 * declared content hash matches its parts. Returns the events with content
 * hashes filled in by the core (hashed once, when they enter). One core call
 * per run of events on the same chat.
 */
export async function checkAppend(conversationId: string, events: Event[]): Promise<Event[]> {
  const chatOf = (e: Event): string => ("chat" in e && typeof e.chat === "string" ? e.chat : "");
  const out: Event[] = [];
  for (let start = 0; start < events.length;) {
    const chat = chatOf(events[start]);
    let end = start + 1;
    while (end < events.length && chatOf(events[end]) === chat) end++;
    const run = events.slice(start, end);
    let answer;
    try {
      answer = validate({ kind: "events", route: { conversation: conversationId, chat, sender: "" }, events: run });
    } catch (err) {
      if (!(err instanceof FoldlineError)) throw err;
      const at = start;
      const message = err.message.replace(/^[a-z_]+: /, "").replace(/events\[(\d+)\]/g, (_, j: string) => `events[${at + Number(j)}]`);
      throw new FoldlineError({ code: err.code, message: `append refused, nothing written: ${message}`, ids: err.ids });
    }
    if (answer.kind !== "events") throw new Error("unexpected validate answer");
    run.forEach((e, j) => {
      const hash = answer.contentHashes[j];
      out.push((e.type === "message" || e.type === "lateDelivery") && hash && e.contentHash !== hash ? { ...e, contentHash: hash } : e);
    });
    start = end;
  }
  return out;
}

/**
 * What each message (or late delivery) of a checked batch (`checkAppend`:
 * content hashes filled in) claims for its turn id: the JSON array of what
 * the core compares when the same turn is delivered again — chat, sender,
 * source, sourceSeq, index, role, authorAgent, contentHash, tokens, pinned,
 * sensitive — defaults filled in. A journal keeps one per turn id and
 * refuses a batch that would give a used id other content
 * (`conflicting_turn`): such an event, once written, would leave the
 * conversation unable to select or compact, for good. The Rust journals
 * keep the same text (host-wasmtime/src/journal/claims.rs; both held to
 * tests/journal/turn-claims.json), so a database written by one kind of
 * host takes redeliveries from the other.
 */
export function turnClaims(batch: Event[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const e of batch) {
    if (e.type !== "message" && e.type !== "lateDelivery") continue;
    out.push([e.turnId, JSON.stringify([
      e.chat ?? "", e.sender ?? "", e.source ?? "", e.sourceSeq, e.index ?? 0, e.role, e.authorAgent ?? null,
      e.contentHash ?? null, e.tokens ?? null, e.pinned ?? false, e.sensitive ?? false,
    ])]);
  }
  return out;
}

/**
 * Check `batch`'s turn claims against those a journal holds (`known`) and
 * against each other: a turn id already used with other content is refused
 * (`conflicting_turn`, naming it; nothing written); a repeat that says the
 * same is allowed. Answers the claims to keep once the batch is written.
 */
export function checkTurns(known: (turnId: string) => string | undefined, batch: Event[]): Array<[string, string]> {
  const fresh = new Map<string, string>();
  for (const [id, claim] of turnClaims(batch)) {
    const earlier = fresh.get(id) ?? known(id);
    if (earlier !== undefined && earlier !== claim) {
      throw new FoldlineError({ code: "conflicting_turn", message: `append refused, nothing written: turn ${JSON.stringify(id)} is already in the journal with other content; a turn id names one message`, ids: [id] });
    }
    fresh.set(id, claim);
  }
  return [...fresh];
}

/** The error a journal throws when a compare-and-append loses the race. */
export function conflict(expected: number, actual: number): FoldlineError {
  return new FoldlineError({ code: "conflict", message: `expected the journal at position ${expected}, found ${actual}; nothing was written` });
}
