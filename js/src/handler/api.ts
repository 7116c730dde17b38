// What a host gives the edge handler and gets back: its options, the
// members, the owners and rooms, member compression's store.

import type { Journal } from "../journal/journal.js";
import type { Model } from "../model/model.js";
import type { Availability, Declaration, FailureReport, Pass, Preferences } from "../types.js";

/** A member: an id and the SHA-256 (lowercase hex) of their bearer token. */
export interface Member { id: string; tokenSha256: string }

/**
 * Who owns each conversation (the member who first appended to it), and
 * who else is in its room (members the owner let in: they read and post;
 * only the owner condenses and manages the room).
 */
export interface Owners {
  get(conversationId: string): Promise<string | undefined>;
  /** The owner, making `member` the owner of a new conversation (atomically). */
  claim(conversationId: string, member: string): Promise<string>;
  /** The room's members (the owner not included), in order. */
  room(conversationId: string): Promise<string[]>;
  /** Let `member` into the room (idempotent). */
  admit(conversationId: string, member: string): Promise<void>;
  /** Take `member` out of the room; whether they were in it. */
  dismiss(conversationId: string, member: string): Promise<boolean>;
  /**
   * The answers holding sessions ({@link Answers}), when the store keeps
   * them too: give all three methods and every isolate sharing the store
   * sees which answer holds a conversation (`D1Owners` does). Without
   * them, each handler keeps its answers in its own memory.
   */
  /**
   * Take one of `member`'s `perMinute` manual compactions at `now` (ms):
   * 0 when taken, else the seconds until one is free. Given, every isolate
   * sharing the store counts a member's compactions together (`D1Owners`
   * does, as `foldline serve` replicas share theirs); without it, each
   * handler counts in its own memory.
   */
  takeCondense?(member: string, now: number, perMinute: number): Promise<number>;
  startAnswer?: Answers["startAnswer"];
  answer?: Answers["answer"];
  endAnswer?: Answers["endAnswer"];
}

/** An answer holding a conversation's session: its id, when its lease ends (ms since the epoch) and the compression state it captured at its start. */
export interface AnswerHold { id: string; until: number; preferences: Preferences }

/**
 * Which answer holds each conversation's session (`POST …/answer` until
 * `DELETE …/answer/{answer}` or its lease ends). Kept where every handler
 * serving the conversation reads it, so an answer started on one isolate
 * is given back, seen busy, and runs with the state it captured on any.
 */
export interface Answers {
  /** Record `hold` unless a live answer (one whose lease ends after `now`) holds the session; whether it was recorded. */
  startAnswer(conversationId: string, hold: AnswerHold, now: number): Promise<boolean>;
  /** The live answer holding the session at `now`, if any. */
  answer(conversationId: string, now: number): Promise<AnswerHold | undefined>;
  /** End `answer` (lapsed or not, unless already ended); whether it held the session. */
  endAnswer(conversationId: string, answer: string): Promise<boolean>;
}

/**
 * Ended or lapsed answers a {@link MemoryAnswers} keeps before letting
 * them go, so a long-lived process does not keep one per conversation ever
 * answered; a lapsed answer given back after that is `404 not_found`, as
 * one that never held the session.
 */
const ANSWERS_KEPT = 1024;

/** Answers kept in memory (one isolate or process): the handler's own when its `owners` keeps none. */
export class MemoryAnswers implements Answers {
  private holds = new Map<string, AnswerHold>();
  async startAnswer(id: string, hold: AnswerHold, now: number): Promise<boolean> {
    if ((this.holds.get(id)?.until ?? 0) > now) return false;
    if (this.holds.size >= ANSWERS_KEPT) for (const [k, a] of this.holds) if (a.until <= now) this.holds.delete(k);
    this.holds.set(id, { ...hold });
    return true;
  }
  async answer(id: string, now: number): Promise<AnswerHold | undefined> {
    const a = this.holds.get(id);
    return a && a.until > now ? a : undefined;
  }
  async endAnswer(id: string, answer: string): Promise<boolean> {
    if (this.holds.get(id)?.id !== answer) return false;
    this.holds.delete(id);
    return true;
  }
}

/** Where a handler keeps its answers: in `owners` when it keeps them, else in memory. */
export function answersOf(owners: Owners): Answers {
  const { startAnswer, answer, endAnswer } = owners;
  if (startAnswer && answer && endAnswer) {
    return { startAnswer: startAnswer.bind(owners), answer: answer.bind(owners), endAnswer: endAnswer.bind(owners) };
  }
  return new MemoryAnswers();
}

/** Owners and rooms kept in memory (one isolate or process); a deployment with several uses a durable store (`D1Owners` on Cloudflare). */
export class MemoryOwners implements Owners {
  private owners = new Map<string, string>();
  private rooms = new Map<string, Set<string>>();
  async get(id: string): Promise<string | undefined> { return this.owners.get(id); }
  async claim(id: string, member: string): Promise<string> {
    if (!this.owners.has(id)) this.owners.set(id, member);
    return this.owners.get(id)!;
  }
  async room(id: string): Promise<string[]> { return [...(this.rooms.get(id) ?? [])].sort(); }
  async admit(id: string, member: string): Promise<void> {
    const r = this.rooms.get(id) ?? new Set<string>();
    r.add(member);
    this.rooms.set(id, r);
  }
  async dismiss(id: string, member: string): Promise<boolean> { return this.rooms.get(id)?.delete(member) ?? false; }
}

/** A member's recorded passes of one tool and status, summed. */
export interface PassStats { tool: "promptTrim" | "toolResult"; status: "applied" | "bypassed" | "failed"; passes: number; eligibleBytes: number; deliveredBytes: number }

/**
 * Member compression's durable part: each member's opt-ins (all off until
 * set) and the owner-bound, content-dark stats recorder (ids, tool, status
 * and byte counts; one record per pass, however often a context is asked for).
 */
export interface CompressionStore {
  preferences(member: string): Promise<Preferences | undefined>;
  setPreferences(member: string, preferences: Preferences): Promise<void>;
  /** Record each pass once, keyed by what it shaped. */
  record(member: string, conversationId: string, passes: Pass[]): Promise<void>;
  stats(member: string): Promise<PassStats[]>;
}

/** The key a pass is recorded under: what it shaped. */
export function passKey(p: Pass): string {
  return `${p.tool}:${p.turnId ?? "prompt"}:${p.callId ?? ""}`;
}

/** Compression preferences and stats kept in memory (one isolate or process); a deployment with several uses a durable store (`D1Compression` on Cloudflare). */
export class MemoryCompression implements CompressionStore {
  private prefs = new Map<string, Preferences>();
  private passes = new Map<string, { member: string; pass: Pass }>();
  async preferences(member: string): Promise<Preferences | undefined> { return this.prefs.get(member); }
  async setPreferences(member: string, p: Preferences): Promise<void> { this.prefs.set(member, { ...p }); }
  async record(member: string, id: string, passes: Pass[]): Promise<void> {
    for (const p of passes) {
      const k = `${member}\n${id}\n${passKey(p)}`;
      if (!this.passes.has(k)) this.passes.set(k, { member, pass: p });
    }
  }
  async stats(member: string): Promise<PassStats[]> {
    const sums = new Map<string, PassStats>();
    for (const { member: m, pass } of this.passes.values()) {
      if (m !== member) continue;
      const k = `${pass.tool}\n${pass.measurement.status}`;
      const s = sums.get(k) ?? { tool: pass.tool, status: pass.measurement.status, passes: 0, eligibleBytes: 0, deliveredBytes: 0 };
      s.passes += 1;
      s.eligibleBytes += pass.measurement.eligibleBytes;
      s.deliveredBytes += pass.measurement.deliveredBytes;
      sums.set(k, s);
    }
    return [...sums.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
  }
}

export interface HandlerOptions {
  journal: Journal;
  model: Model;
  declaration: Declaration;
  compactorDeclaration?: Declaration;
  /** Who may call, by token hash. */
  members: Member[];
  owners?: Owners;
  /** Writer-lease holder and time to live. */
  holder?: string;
  leaseMs?: number;
  modelTimeoutMs?: number;
  /** The most conversations the compactor keeps state for (the compactor's `conversationsKept`; default 256). */
  conversationsKept?: number;
  /** The most text of conversations' events kept between timeline drawings (the compactor's `timelineTextChars`; default 16 Mi UTF-16 units). */
  timelineTextChars?: number;
  /**
   * Count a text's tokens (the compactor's `countTokens`: js-tiktoken,
   * gpt-tokenizer): each message the handler appends or corrects carries
   * its count and framing, so a token budget uses real counts instead of
   * the estimate (`foldline serve --tokenizer`).
   */
  countTokens?: (text: string) => number;
  /** Framing tokens each counted message costs (the compactor's `messageOverheadTokens`; default 4, OpenAI's chat 3). */
  messageOverheadTokens?: number;
  /** Largest request body in bytes (default 1 MiB). */
  bodyLimit?: number;
  /** Manual compactions a member may start per minute (default 6). */
  condensePerMinute?: number;
  /** How long an answer holds the session unless given back (default 300,000 ms). */
  answerLeaseMs?: number;
  /** How often a task's event stream looks at the journal for another writer's events (default 250 ms). */
  pollMs?: number;
  /** Receives each failure's audit reason (never sent to a member). */
  audit?: (conversationId: string, report: FailureReport) => void;
  /**
   * Member compression's availability (`MEMBER_COMPRESSION_ENABLED` and the
   * three `MEMBER_*_COMPRESSION_ENABLED` flags; default all off). It never
   * opts anyone in. With `surface` off, contexts carry no member state and
   * the member routes answer `not_available`. With it on, plans keep room
   * for the fragments members' contexts carry.
   */
  compression?: Availability;
  /** Where opt-ins and pass records live (default: in memory). */
  compressionStore?: CompressionStore;
  /**
   * The origins whose pages may call from a browser (CORS), each
   * `scheme://host[:port]` (`https://app.example.com`), or `"*"` for any;
   * default none: pages of the handler's own origin only. The same answers
   * as `foldline serve --allow-origin`.
   */
  allowOrigins?: string[];
}

/** What edge runtimes pass beside the request: work that outlives the response. */
export interface ExecutionContext { waitUntil(promise: Promise<unknown>): void }

/** A `fetch` handler. */
export type Handler = (request: Request, ctx?: ExecutionContext) => Promise<Response>;

/**
 * The handler `createHandler` makes. `setMembers` replaces its members
 * while it runs (as `foldline serve` reads its members file again on
 * SIGHUP): from the next request on only their tokens are served; a member
 * no longer listed is refused `401`, a long poll of theirs already waiting
 * too once something is written. A list `createHandler` would refuse is
 * refused the same way, and the members stay as they were.
 */
export interface FoldlineHandler extends Handler {
  setMembers(members: Member[]): void;
}
