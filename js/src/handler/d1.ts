// The edge handler's durable stores on Cloudflare D1: owners, rooms and
// the answers holding sessions, member compression's opt-ins and pass
// records. With `D1Journal`, every
// isolate of a worker (and every worker bound to the database) serves the
// same conversations, rooms and opt-ins.

import { ensureSchema, type D1Like } from "../journal/d1.js";
import type { Pass, Preferences } from "../types.js";
import { passKey, type AnswerHold, type CompressionStore, type Owners, type PassStats } from "./api.js";

/** Tables of {@link D1Owners} and {@link D1Compression} (created if missing). */
const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS foldline_owners (conversation TEXT PRIMARY KEY, owner TEXT NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS foldline_rooms (conversation TEXT NOT NULL, member TEXT NOT NULL, PRIMARY KEY (conversation, member))`,
  `CREATE TABLE IF NOT EXISTS foldline_answers (conversation TEXT PRIMARY KEY, answer TEXT NOT NULL, until_ms INTEGER NOT NULL, preferences TEXT NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS foldline_condense_starts (member TEXT NOT NULL, at_ms INTEGER NOT NULL)`,
  `CREATE INDEX IF NOT EXISTS foldline_condense_starts_member ON foldline_condense_starts (member, at_ms)`,
  `CREATE TABLE IF NOT EXISTS foldline_member_preferences (member TEXT PRIMARY KEY, body TEXT NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS foldline_member_passes (member TEXT NOT NULL, conversation TEXT NOT NULL, pass TEXT NOT NULL, tool TEXT NOT NULL, status TEXT NOT NULL, eligible_bytes INTEGER NOT NULL, delivered_bytes INTEGER NOT NULL, PRIMARY KEY (member, conversation, pass))`,
];

/** Create the tables of the handler's D1 stores if they are missing. */
function ensure(db: D1Like): Promise<void> {
  return ensureSchema(db, SCHEMA);
}

/** The rows of a statement's answer. */
async function rows<T>(db: D1Like, sql: string, ...values: unknown[]): Promise<T[]> {
  const { results = [] } = await db.prepare(sql).bind(...values).all();
  return results as T[];
}

/**
 * Owners, rooms and the answers holding sessions on D1: the first member to
 * append owns the conversation, and one live answer holds a session,
 * each decided by the database (an answer started on one isolate is given
 * back, seen busy and runs with the state it captured on any).
 */
export class D1Owners implements Owners {
  private constructor(private readonly db: D1Like) {}

  /** Create the tables if they are missing and open the store on `db`, a D1 binding. */
  static async open(db: D1Like): Promise<D1Owners> {
    await ensure(db);
    return new D1Owners(db);
  }

  async get(conversationId: string): Promise<string | undefined> {
    return (await rows<{ owner: string }>(this.db, "SELECT owner FROM foldline_owners WHERE conversation = ?1", conversationId))[0]?.owner;
  }

  async claim(conversationId: string, member: string): Promise<string> {
    // One statement: the row written, or the one there kept and returned.
    const [row] = await rows<{ owner: string }>(this.db,
      "INSERT INTO foldline_owners (conversation, owner) VALUES (?1, ?2) ON CONFLICT (conversation) DO UPDATE SET owner = foldline_owners.owner RETURNING owner",
      conversationId, member);
    return row.owner;
  }

  async room(conversationId: string): Promise<string[]> {
    return (await rows<{ member: string }>(this.db, "SELECT member FROM foldline_rooms WHERE conversation = ?1 ORDER BY member", conversationId)).map((r) => r.member);
  }

  async admit(conversationId: string, member: string): Promise<void> {
    await this.db.prepare("INSERT OR IGNORE INTO foldline_rooms (conversation, member) VALUES (?1, ?2)").bind(conversationId, member).run();
  }

  async dismiss(conversationId: string, member: string): Promise<boolean> {
    return (await rows(this.db, "DELETE FROM foldline_rooms WHERE conversation = ?1 AND member = ?2 RETURNING member", conversationId, member)).length > 0;
  }

  async takeCondense(member: string, now: number, perMinute: number): Promise<number> {
    // One statement takes it: D1 runs a database's statements one at a time.
    const since = now - 60_000;
    await this.db.prepare("DELETE FROM foldline_condense_starts WHERE at_ms <= ?1").bind(since).run();
    const taken = await rows(this.db,
      `INSERT INTO foldline_condense_starts (member, at_ms) SELECT ?1, ?2
       WHERE (SELECT count(*) FROM foldline_condense_starts WHERE member = ?1 AND at_ms > ?3) < ?4 RETURNING at_ms`,
      member, now, since, perMinute);
    if (taken.length > 0) return 0;
    const [oldest] = await rows<{ at: number | null }>(this.db,
      "SELECT min(at_ms) AS at FROM foldline_condense_starts WHERE member = ?1 AND at_ms > ?2", member, since);
    return Math.ceil(Math.max(1, (oldest?.at ?? now) + 60_000 - now) / 1000);
  }

  async startAnswer(conversationId: string, hold: AnswerHold, now: number): Promise<boolean> {
    // One statement: written unless a live answer holds the session.
    return (await rows(this.db,
      `INSERT INTO foldline_answers (conversation, answer, until_ms, preferences) VALUES (?1, ?2, ?3, ?4)
       ON CONFLICT (conversation) DO UPDATE SET answer = excluded.answer, until_ms = excluded.until_ms, preferences = excluded.preferences
       WHERE foldline_answers.until_ms <= ?5 RETURNING answer`,
      conversationId, hold.id, hold.until, JSON.stringify(hold.preferences), now)).length > 0;
  }

  async answer(conversationId: string, now: number): Promise<AnswerHold | undefined> {
    const [row] = await rows<{ answer: string; until_ms: number; preferences: string }>(this.db,
      "SELECT answer, until_ms, preferences FROM foldline_answers WHERE conversation = ?1 AND until_ms > ?2", conversationId, now);
    return row && { id: row.answer, until: row.until_ms, preferences: JSON.parse(row.preferences) as Preferences };
  }

  async endAnswer(conversationId: string, answer: string): Promise<boolean> {
    return (await rows(this.db,
      "UPDATE foldline_answers SET until_ms = 0 WHERE conversation = ?1 AND answer = ?2 AND until_ms > 0 RETURNING answer",
      conversationId, answer)).length > 0;
  }
}

/** Member compression's opt-ins and pass records on D1: one record per pass, however often a context is asked for. */
export class D1Compression implements CompressionStore {
  private constructor(private readonly db: D1Like) {}

  /** Create the tables if they are missing and open the store on `db`, a D1 binding. */
  static async open(db: D1Like): Promise<D1Compression> {
    await ensure(db);
    return new D1Compression(db);
  }

  async preferences(member: string): Promise<Preferences | undefined> {
    const [row] = await rows<{ body: string }>(this.db, "SELECT body FROM foldline_member_preferences WHERE member = ?1", member);
    return row && (JSON.parse(row.body) as Preferences);
  }

  async setPreferences(member: string, preferences: Preferences): Promise<void> {
    await this.db.prepare("INSERT INTO foldline_member_preferences (member, body) VALUES (?1, ?2) ON CONFLICT (member) DO UPDATE SET body = excluded.body")
      .bind(member, JSON.stringify(preferences)).run();
  }

  async record(member: string, conversationId: string, passes: Pass[]): Promise<void> {
    if (passes.length === 0) return;
    await this.db.batch(passes.map((p) => this.db.prepare(
      "INSERT OR IGNORE INTO foldline_member_passes (member, conversation, pass, tool, status, eligible_bytes, delivered_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    ).bind(member, conversationId, passKey(p), p.tool, p.measurement.status, p.measurement.eligibleBytes, p.measurement.deliveredBytes)));
  }

  async stats(member: string): Promise<PassStats[]> {
    // In the order of `MemoryCompression`'s: by tool, then status (binary order).
    return (await rows<{ tool: PassStats["tool"]; status: PassStats["status"]; passes: number; eligible: number; delivered: number }>(this.db,
      `SELECT tool, status, COUNT(*) AS passes, SUM(eligible_bytes) AS eligible, SUM(delivered_bytes) AS delivered
       FROM foldline_member_passes WHERE member = ?1 GROUP BY tool, status ORDER BY tool, status`, member))
      .map((r) => ({ tool: r.tool, status: r.status, passes: r.passes, eligibleBytes: r.eligible, deliveredBytes: r.delivered }));
  }
}
