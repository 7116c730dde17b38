import type { Event, Packet, SkipRecord } from "../types.js";
import { FoldlineError } from "../error.js";
import { chainSlot, checkAppend, checkTurns, conflict, turnClaims, type AppendOptions, type Journal, type Progress, type StoredEvent } from "./journal.js";

/**
 * The part of a Cloudflare D1 binding (`D1Database` of
 * `@cloudflare/workers-types`) the D1 stores use; the binding itself is
 * passed as it is.
 */
export interface D1Like {
  prepare(query: string): D1StatementLike;
  batch(statements: D1StatementLike[]): Promise<Array<{ results?: unknown[] }>>;
}

/** A prepared D1 statement (`D1PreparedStatement`), as the D1 stores use it. */
export interface D1StatementLike {
  bind(...values: unknown[]): D1StatementLike;
  all(): Promise<{ results?: unknown[] }>;
  run(): Promise<unknown>;
}

/**
 * The journal's tables: those of the `foldline` program's SQLite journal
 * (host-wasmtime/src/journal/sqlite.rs), column for column, so a D1
 * database exported as SQLite (`wrangler d1 export`, loaded with `sqlite3`)
 * is a file `foldline --journal FILE verify` (or `timeline`, `context`)
 * reads. D1 runs no transaction a worker can read inside, only batches of
 * statements that commit or roll back together, so what the Rust journal
 * checks between its reads and writes is checked here by triggers that
 * abort the batch with a code of their own (`foldline:<code>`):
 *
 * - `events_dense`: an event goes only at the conversation's next position
 *   (a compare-and-append whose expected position is not the head fails
 *   at its first event: `conflict`);
 * - `foldline_fence` (a view): a fenced batch's token must be the
 *   conversation's current writer lease token (`lease_lost`);
 * - `foldline_turn_claims` (a view): a turn id keeps the content it was
 *   first written with (`conflicting_turn`);
 * - `events_slot`: a boundary's chain slot is taken once (`fork`; the
 *   unique index of the Rust journal is there too).
 */
const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS events (conversation TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL, chain_slot TEXT, PRIMARY KEY (conversation, seq))`,
  `CREATE UNIQUE INDEX IF NOT EXISTS events_chain_slot ON events(conversation, chain_slot) WHERE chain_slot IS NOT NULL`,
  `CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END`,
  `CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END`,
  `CREATE TRIGGER IF NOT EXISTS events_dense BEFORE INSERT ON events WHEN NEW.seq IS NOT (SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE conversation = NEW.conversation) BEGIN SELECT RAISE(ABORT, 'foldline:conflict'); END`,
  `CREATE TRIGGER IF NOT EXISTS events_slot BEFORE INSERT ON events WHEN NEW.chain_slot IS NOT NULL AND EXISTS (SELECT 1 FROM events WHERE conversation = NEW.conversation AND chain_slot = NEW.chain_slot) BEGIN SELECT RAISE(ABORT, 'foldline:fork'); END`,
  `CREATE TABLE IF NOT EXISTS packets (conversation TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (conversation, id))`,
  `CREATE TABLE IF NOT EXISTS writer_leases (conversation TEXT PRIMARY KEY, holder TEXT NOT NULL, until_ms INTEGER NOT NULL, fence INTEGER NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS foldline_progress (conversation TEXT PRIMARY KEY, skipped_runs INTEGER NOT NULL, checked_through_seq INTEGER NOT NULL, last TEXT NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS turns (conversation TEXT NOT NULL, turn_id TEXT NOT NULL, claim TEXT NOT NULL, PRIMARY KEY (conversation, turn_id))`,
  `CREATE VIEW IF NOT EXISTS foldline_fence AS SELECT NULL AS conversation, NULL AS fence`,
  `CREATE TRIGGER IF NOT EXISTS foldline_fence_check INSTEAD OF INSERT ON foldline_fence WHEN NEW.fence IS NOT (SELECT fence FROM writer_leases WHERE conversation = NEW.conversation) BEGIN SELECT RAISE(ABORT, 'foldline:lease_lost'); END`,
  `CREATE VIEW IF NOT EXISTS foldline_turn_claims AS SELECT conversation, turn_id, claim FROM turns`,
  `CREATE TRIGGER IF NOT EXISTS foldline_turn_claim INSTEAD OF INSERT ON foldline_turn_claims BEGIN SELECT RAISE(ABORT, 'foldline:conflicting_turn') WHERE EXISTS (SELECT 1 FROM turns WHERE conversation = NEW.conversation AND turn_id = NEW.turn_id AND claim IS NOT NEW.claim); INSERT OR IGNORE INTO turns (conversation, turn_id, claim) VALUES (NEW.conversation, NEW.turn_id, NEW.claim); END`,
];

/** D1 binds at most 100 values to one statement; rows are inserted in statements under it. */
const MOST_BOUND = 100;

/**
 * Events read per statement: a long conversation is read in pages, so no
 * one answer grows without bound, and in few statements (a cold read of
 * 100,000 events is 20), since every statement counts toward a worker's
 * queries per invocation (50 on Cloudflare's free plan).
 */
const READ_PAGE = 5_000;

/**
 * The statements that put `rows` through `into` for `conversationId`
 * (bound once, as `?1`), as many rows to a statement as D1's bound values
 * allow: `into` is given the statement's row source (`VALUES (k, ?2, …),
 * …`, where `k` counts its rows from 1) and how many rows went before it,
 * and answers the statement.
 */
function inserts(db: D1Like, conversationId: string, rows: unknown[][], into: (values: string, before: number) => string): D1StatementLike[] {
  const out: D1StatementLike[] = [];
  const per = Math.max(1, Math.floor((MOST_BOUND - 1) / Math.max(1, rows[0]?.length ?? 1)));
  for (let at = 0; at < rows.length; at += per) {
    const values: unknown[] = [conversationId];
    const tuples = rows.slice(at, at + per).map((row, i) => `(${i + 1}, ${row.map((v) => `?${values.push(v)}`).join(", ")})`);
    out.push(db.prepare(into(`VALUES ${tuples.join(", ")}`, at)).bind(...values));
  }
  return out;
}

/**
 * Create `statements`' tables, views and triggers unless every one is there
 * already: one statement on an isolate's first request, not the whole schema.
 */
export async function ensureSchema(db: D1Like, statements: string[]): Promise<void> {
  const names = statements.map((s) => /IF NOT EXISTS (\w+)/.exec(s)?.[1] ?? "");
  const { results = [] } = await db
    .prepare(`SELECT COUNT(*) AS n FROM sqlite_master WHERE name IN (${names.map((_, i) => `?${i + 1}`).join(", ")})`)
    .bind(...names)
    .all();
  if ((results[0] as { n: number } | undefined)?.n === names.length) return;
  await db.batch(statements.map((s) => db.prepare(s)));
}

/** The refusal of a batch fenced by a stale token. */
function leaseLost(fence: number | undefined): FoldlineError {
  return new FoldlineError({ code: "lease_lost", message: `a newer writer lease was granted (fence ${fence} is stale); nothing was written` });
}

/** The code a foldline trigger aborted a batch with, if one did. */
function abortCode(err: unknown): string | undefined {
  const m = /foldline:([a-z_]+)/.exec(err instanceof Error ? err.message : String(err));
  return m?.[1];
}

/**
 * A journal on Cloudflare D1 (SQLite at the edge): every isolate of a
 * worker, and every worker bound to the database, shares one journal that
 * holds the journal contract — each append is one D1 batch (one round trip)
 * that commits whole or not at all; a compare-and-append at a position
 * that is not the head, a batch fenced by a stale lease token, a second
 * boundary on a chain head and a used turn id with other content are each
 * refused by the database, nothing written. Its tables are the `foldline`
 * program's SQLite journal's, so an exported database verifies with it.
 */
export class D1Journal implements Journal {
  private constructor(private readonly db: D1Like, private readonly now: () => number) {}

  /**
   * Open the journal on `db`, a D1 binding, creating what of its schema is
   * missing (one statement when nothing is; run it once per isolate).
   */
  static async open(db: D1Like, now: () => number = () => Date.now()): Promise<D1Journal> {
    await ensureSchema(db, SCHEMA);
    return new D1Journal(db, now);
  }

  async readEvents(conversationId: string, sinceSeq = 0): Promise<StoredEvent[]> {
    return this.readEventsPage(conversationId, sinceSeq, Infinity);
  }

  async readEventsPage(conversationId: string, sinceSeq: number, limit: number): Promise<StoredEvent[]> {
    const out: StoredEvent[] = [];
    const most = Math.floor(limit);
    while (out.length < most) {
      const want = Math.min(most - out.length, READ_PAGE);
      const { results = [] } = await this.db
        .prepare("SELECT seq, body FROM events WHERE conversation = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3")
        .bind(conversationId, out.at(-1)?.seq ?? sinceSeq, want)
        .all();
      // Not `checked`: anything with the database's credentials may write
      // it, so the driver checks what it reads.
      for (const r of results as Array<{ seq: number; body: string }>) out.push({ seq: r.seq, event: JSON.parse(r.body) as Event });
      if (results.length < want) break;
    }
    return out;
  }

  async append(conversationId: string, events: Event | Event[], options: AppendOptions = {}): Promise<number> {
    if (options.expectedSeq !== undefined && !(Number.isSafeInteger(options.expectedSeq) && options.expectedSeq >= 0)) {
      throw new FoldlineError({ code: "invalid_request", message: `expectedSeq must be a whole number from 0 to 2^53 - 1, not ${String(options.expectedSeq)}; nothing was written` });
    }
    const batch = await checkAppend(conversationId, Array.isArray(events) ? events : [events]);
    if (batch.length === 0) return this.nothing(conversationId, options);
    const claims = checkTurns(() => undefined, batch);
    const statements: D1StatementLike[] = [];
    if (options.fence !== undefined) {
      statements.push(this.db.prepare("INSERT INTO foldline_fence (conversation, fence) VALUES (?1, ?2)").bind(conversationId, options.fence));
    }
    // The events before the turn claims: a compare-and-append that lost
    // the race is a `conflict`, whatever else its batch says. At the
    // expected positions, the trigger refuses the first unless the head is
    // there; without one, at the end, wherever it is when the batch
    // commits (each statement counts the head inside itself).
    const rows = batch.map((e) => [e.type, JSON.stringify(e), chainSlot(e) ?? null]);
    const expected = options.expectedSeq;
    const head = (before: number) => expected === undefined
      ? "(SELECT COALESCE(MAX(seq), 0) AS s FROM events WHERE conversation = ?1)"
      : `(SELECT ${expected + before} AS s)`;
    statements.push(...inserts(this.db, conversationId, rows, (values, before) =>
      `INSERT INTO events (conversation, seq, type, body, chain_slot) SELECT ?1, head.s + v.column1, v.column2, v.column3, v.column4 FROM ${head(before)} AS head, (${values}) AS v ORDER BY v.column1 RETURNING seq`));
    const written = statements.length - 1;
    statements.push(...inserts(this.db, conversationId, claims, (values) =>
      `INSERT INTO foldline_turn_claims (conversation, turn_id, claim) SELECT ?1, v.column2, v.column3 FROM (${values}) AS v`));
    let answers: Array<{ results?: unknown[] }>;
    try {
      answers = await this.db.batch(statements);
    } catch (err) {
      throw await this.refusal(conversationId, err, batch, options);
    }
    const last = answers[written]?.results as Array<{ seq: number }> | undefined;
    return Math.max(...(last ?? []).map((r) => r.seq));
  }

  /** An empty batch: the head, after the checks a batch would have met. */
  private async nothing(conversationId: string, options: AppendOptions): Promise<number> {
    const head = await this.head(conversationId);
    if (options.expectedSeq !== undefined && options.expectedSeq !== head) throw conflict(options.expectedSeq, head);
    if (options.fence !== undefined) {
      const { results = [] } = await this.db.prepare("SELECT fence FROM writer_leases WHERE conversation = ?1").bind(conversationId).all();
      if ((results[0] as { fence: number } | undefined)?.fence !== options.fence) throw leaseLost(options.fence);
    }
    return head;
  }

  /** The conversation's last position (0: none). */
  private async head(conversationId: string): Promise<number> {
    const { results = [] } = await this.db.prepare("SELECT COALESCE(MAX(seq), 0) AS head FROM events WHERE conversation = ?1").bind(conversationId).all();
    return (results[0] as { head: number } | undefined)?.head ?? 0;
  }

  /** The journal's error for a batch the database refused (`err`), naming what a trigger found. */
  private async refusal(conversationId: string, err: unknown, batch: Event[], options: AppendOptions): Promise<unknown> {
    switch (abortCode(err)) {
      case "conflict":
        return conflict(options.expectedSeq ?? 0, await this.head(conversationId));
      case "lease_lost":
        return leaseLost(options.fence);
      case "fork":
        return new FoldlineError({ code: "fork", message: "a boundary already extends this chain head; nothing was written" });
      case "conflicting_turn": {
        // Which turn: the claims the journal holds for the batch's ids.
        const ids = turnClaims(batch).map(([id]) => id);
        const stored = new Map<string, string>();
        for (const id of ids) {
          const { results = [] } = await this.db.prepare("SELECT claim FROM turns WHERE conversation = ?1 AND turn_id = ?2").bind(conversationId, id).all();
          const row = results[0] as { claim: string } | undefined;
          if (row) stored.set(id, row.claim);
        }
        try {
          checkTurns((id) => stored.get(id), batch);
        } catch (e) {
          return e;
        }
        return new FoldlineError({ code: "conflicting_turn", message: "append refused, nothing written: a turn id of the batch is already in the journal with other content" });
      }
      default:
        return err;
    }
  }

  async putPacket(conversationId: string, packet: Packet): Promise<void> {
    await this.db.prepare("INSERT OR IGNORE INTO packets (conversation, id, body) VALUES (?1, ?2, ?3)").bind(conversationId, packet.id, JSON.stringify(packet)).run();
  }

  async getPacket(conversationId: string, id: string): Promise<Packet | undefined> {
    const { results = [] } = await this.db.prepare("SELECT body FROM packets WHERE conversation = ?1 AND id = ?2").bind(conversationId, id).all();
    const row = results[0] as { body: string } | undefined;
    return row && (JSON.parse(row.body) as Packet);
  }

  async listPackets(conversationId: string): Promise<Packet[]> {
    const { results = [] } = await this.db.prepare("SELECT body FROM packets WHERE conversation = ?1 ORDER BY id").bind(conversationId).all();
    return (results as Array<{ body: string }>).map((r) => JSON.parse(r.body) as Packet);
  }

  async acquireLease(conversationId: string, holder: string, ttlMs: number): Promise<number | undefined> {
    // One statement: a first grant is token 1; the same live holder renews
    // under its token; a new holder, or any holder after a lapse, gets the
    // next token; another live holder leaves the row as it is, and no row
    // comes back.
    const now = this.now();
    const { results = [] } = await this.db.prepare(
      `INSERT INTO writer_leases AS l (conversation, holder, until_ms, fence) VALUES (?1, ?2, ?3, 1)
       ON CONFLICT (conversation) DO UPDATE SET holder = excluded.holder, until_ms = excluded.until_ms,
         fence = CASE WHEN l.holder = excluded.holder AND l.until_ms > ?4 THEN l.fence ELSE l.fence + 1 END
       WHERE l.holder = excluded.holder OR l.until_ms <= ?4
       RETURNING fence`,
    ).bind(conversationId, holder, now + ttlMs, now).all();
    return (results[0] as { fence: number } | undefined)?.fence;
  }

  async releaseLease(conversationId: string, holder: string): Promise<void> {
    // The row stays, so the next grant's token is still newer.
    await this.db.prepare("UPDATE writer_leases SET holder = '', until_ms = 0 WHERE conversation = ?1 AND holder = ?2").bind(conversationId, holder).run();
  }

  async noteSkipped(conversationId: string, record: SkipRecord): Promise<void> {
    // The Rust journal's upsert: the count grown, the record replaced unless it checked less far.
    await this.db.prepare(
      `INSERT INTO foldline_progress (conversation, skipped_runs, checked_through_seq, last) VALUES (?1, 1, ?2, ?3)
       ON CONFLICT (conversation) DO UPDATE SET skipped_runs = foldline_progress.skipped_runs + 1,
         checked_through_seq = CASE WHEN excluded.checked_through_seq >= foldline_progress.checked_through_seq THEN excluded.checked_through_seq ELSE foldline_progress.checked_through_seq END,
         last = CASE WHEN excluded.checked_through_seq >= foldline_progress.checked_through_seq THEN excluded.last ELSE foldline_progress.last END`,
    ).bind(conversationId, record.checkedThroughSeq, JSON.stringify(record)).run();
  }

  async progress(conversationId: string): Promise<Progress | undefined> {
    const { results = [] } = await this.db.prepare("SELECT skipped_runs, last FROM foldline_progress WHERE conversation = ?1").bind(conversationId).all();
    const row = results[0] as { skipped_runs: number; last: string } | undefined;
    return row && { skippedRuns: row.skipped_runs, last: JSON.parse(row.last) as SkipRecord };
  }
}
