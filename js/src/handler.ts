// The HTTP surface of `foldline serve` as a `fetch` handler, for edge
// workers, Deno, Bun or Node: the same routes, codes and task events as the
// Rust server (docs/serve.md), over a journal and a model the host supplies.
//
//   export default { fetch: createHandler({ journal, model, declaration, members }) };

import { createCompactor, type OnMessageResult } from "./driver.js";
import { type OpenAiChatMessage } from "./convert.js";
import { FoldlineError } from "./error.js";
import { settingsProjection } from "./ops.js";
import { ANSWER_LEASE_MS, BODY_LIMIT_BYTES, CONDENSE_PER_MINUTE, POLL_MS } from "./defaults.js";
import { MEMBER_NOTICE } from "./notice.js";
import type { Journal } from "./journal/journal.js";
import type { Model } from "./model/model.js";
import type { Availability, Declaration, Event, FailureReport, Format, MemberInput, Pass, Preferences } from "./types.js";

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
}

/** Owners and rooms kept in memory (one isolate or process); a deployment with several uses a durable store. */
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

/** Compression preferences and stats kept in memory (one isolate or process); a deployment with several uses a durable store. */
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

const PREFERENCE_FIELDS = ["master", "toolResult", "plainSpeak", "promptTrim"] as const;

/** A `PUT …/compression` body: only the four booleans. */
function preferencesOf(b: unknown): Preferences {
  if (typeof b !== "object" || b === null || Array.isArray(b)) throw new ApiError(400, "invalid_input", "compression preferences: an object is needed (fields: master, toolResult, plainSpeak, promptTrim)");
  const out: Preferences = {};
  for (const [k, v] of Object.entries(b)) {
    if (!(PREFERENCE_FIELDS as readonly string[]).includes(k)) throw new ApiError(400, "invalid_input", `compression preferences: unknown field ${JSON.stringify(k)} (fields: master, toolResult, plainSpeak, promptTrim)`);
    if (typeof v !== "boolean") throw new ApiError(400, "invalid_input", `compression preferences: ${k} must be true or false`);
    out[k as (typeof PREFERENCE_FIELDS)[number]] = v;
  }
  return out;
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
   * the member routes answer `not_available`.
   */
  compression?: Availability;
  /** Where opt-ins and pass records live (default: in memory). */
  compressionStore?: CompressionStore;
}

/** What edge runtimes pass beside the request: work that outlives the response. */
export interface ExecutionContext { waitUntil(promise: Promise<unknown>): void }

/** A `fetch` handler. */
export type Handler = (request: Request, ctx?: ExecutionContext) => Promise<Response>;

class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string, readonly retryAfter?: number) {
    super(message);
  }
}

/**
 * The HTTP status of a stable code, as both servers answer it (the table is
 * tests/http/status.json; the Rust server's `status_of` is tested against it
 * too): 4xx the caller's to mend, 409 try again later or another writer won,
 * 422 the core refuses what the journal holds, 500 the server failed.
 */
export function httpStatusOf(code: string): number {
  switch (code) {
    case "unauthorized": return 401;
    case "not_owner": return 403;
    case "not_found": return 404;
    case "body_too_large": case "turn_too_large": return 413;
    case "timeout": return 408;
    case "method_not_allowed": return 405;
    case "rate_limited": return 429;
    case "session_busy": case "nothing_to_fold": case "busy": case "conflict": case "fork": case "lease_lost": case "shutting_down": return 409;
    case "invalid_input": case "invalid_request": case "wrong_route": case "conflicting_turn": return 400;
    case "journal": case "io": case "trap": case "malformed_output": case "load_failed": case "unsupported_version":
    case "fuel_exhausted": case "memory_limit": case "model": return 500;
    default: return 422;
  }
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

function failure(e: unknown): Response {
  if (e instanceof ApiError) {
    return json(e.status, { error: { code: e.code, message: e.message } }, {
      ...(e.status === 401 ? { "www-authenticate": "Bearer" } : {}),
      ...(e.retryAfter !== undefined ? { "retry-after": String(e.retryAfter) } : {}),
    });
  }
  if (e instanceof FoldlineError) return json(httpStatusOf(e.code), { error: { code: e.code, message: e.message } });
  console.error("foldline handler:", e);
  return json(500, { error: { code: "internal", message: "the server failed; the details are in its log" } });
}

async function sha256Hex(text: string): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Equal strings, compared in full (timing says nothing about a near match). */
function same(a: string, b: string): boolean {
  let d = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) d |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0);
  return d === 0;
}

const ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A path segment, percent-decoded; escapes that are not UTF-8 are refused (`invalid_input`), never a 500. */
function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ApiError(400, "invalid_input", "the request's path cannot be read (percent-escapes must be UTF-8)");
  }
}
const ROUTE = /^\/api\/conversations\/([^/]+)\/(messages|condense|answer|context|timeline|verify|settings|events)$/;
/** The longest a long poll of `…/events` waits. */
const MAX_WAIT_MS = 25_000;
const COMPRESSION = /^\/api\/members\/me\/compression(\/stats)?$/;
const ANSWER = /^\/api\/conversations\/([^/]+)\/answer\/([^/]+)$/;
const MEMBERS = /^\/api\/conversations\/([^/]+)\/members(?:\/([^/]+))?$/;
const EVENTS = /^\/api\/conversations\/([^/]+)\/tasks\/([^/]+)\/events$/;
const FORMATS: Record<string, Format> = { foldline: "foldline", openai: "openai", anthropic: "anthropic", "ai-sdk": "aiSdk", aiSdk: "aiSdk" };

/**
 * A `fetch` handler with the routes of `foldline serve`: append, condense (a
 * durable task answered `202` once its `requested` event is written),
 * Server-Sent Events of a task resumable with `Last-Event-ID`, answers that
 * hold the session, context, timeline and verify — every route behind a
 * member's bearer token and owner-scoped.
 */
export function createHandler(o: HandlerOptions): Handler {
  if (o.members.length === 0) throw new TypeError("createHandler: no members, so no request could ever be served");
  for (const m of o.members) {
    if (!/^[0-9a-f]{64}$/.test(m.tokenSha256)) throw new TypeError(`createHandler: member ${JSON.stringify(m.id)}: tokenSha256 must be 64 lowercase hex digits`);
  }
  const owners = o.owners ?? new MemoryOwners();
  const ownerOf = new Map<string, string>();
  const compactor = createCompactor({
    journal: o.journal, model: o.model, declaration: o.declaration, compactorDeclaration: o.compactorDeclaration,
    holder: o.holder, leaseMs: o.leaseMs, modelTimeoutMs: o.modelTimeoutMs, audit: o.audit,
    owner: (id) => ownerOf.get(id),
  });
  const bodyLimit = o.bodyLimit ?? BODY_LIMIT_BYTES;
  const perMinute = o.condensePerMinute ?? CONDENSE_PER_MINUTE;
  const answerLeaseMs = o.answerLeaseMs ?? ANSWER_LEASE_MS;
  const pollMs = o.pollMs ?? POLL_MS;
  const checks = new Map<string, boolean>();
  const answers = new Map<string, { id: string; until: number; preferences: Preferences }>();
  const availability: Availability = o.compression ?? {};
  const compression = o.compressionStore ?? new MemoryCompression();

  function surface(): void {
    if (!availability.surface) throw new ApiError(404, "not_available", "member compression is not available on this server (MEMBER_COMPRESSION_ENABLED)");
  }

  /** The state a run uses: what the answer holding the session captured at its start, else the member's current opt-ins. */
  async function runState(id: string, member: string): Promise<MemberInput | undefined> {
    if (!availability.surface) return undefined;
    const a = answers.get(id);
    const preferences = a && a.until > Date.now() ? a.preferences : (await compression.preferences(member)) ?? {};
    return { availability, preferences };
  }

  async function preferencesView(p: Preferences): Promise<Response> {
    return json(200, { availability, preferences: p, state: settingsProjection({ availability, preferences: p }).state });
  }
  const rate = new Map<string, number[]>();
  const running = new Set<string>();
  const wakers = new Set<() => void>();

  const wrote = () => { for (const w of [...wakers]) w(); };
  const later = (p: Promise<unknown>, ctx?: ExecutionContext) => {
    const q = p.catch((e) => console.error("foldline handler:", e));
    ctx?.waitUntil(q);
  };

  async function caller(req: Request): Promise<string> {
    // The scheme is case-insensitive (RFC 9110, section 11.1).
    const m = /^\s*bearer\s+(.+)$/i.exec(req.headers.get("authorization") ?? "");
    const token = m ? m[1].trim() : undefined;
    if (token) {
      const hash = await sha256Hex(token);
      let found: string | undefined;
      for (const m of o.members) if (same(m.tokenSha256, hash)) found = m.id;
      if (found) return found;
    }
    throw new ApiError(401, "unauthorized", "a member's bearer token is needed: Authorization: Bearer <token>");
  }

  function checkId(id: string): void {
    if (!ID.test(id) || id === "." || id === "..") throw new ApiError(400, "invalid_input", "a conversation id is 1 to 128 of A-Z a-z 0-9 . _ : -, other than . and ..");
  }

  async function owned(id: string, member: string): Promise<void> {
    checkId(id);
    const owner = await owners.get(id);
    if (owner === undefined) throw new ApiError(404, "not_found", `no conversation ${JSON.stringify(id)}`);
    if (owner !== member) throw new ApiError(403, "not_owner", "this conversation belongs to another member");
    ownerOf.set(id, owner);
  }

  /** The owner or a member of the conversation's room. */
  async function admitted(id: string, member: string): Promise<void> {
    try {
      await owned(id, member);
    } catch (e) {
      if (!(e instanceof ApiError) || e.code !== "not_owner" || !(await owners.room(id)).includes(member)) throw e;
    }
  }

  async function body(req: Request): Promise<unknown> {
    const declared = Number(req.headers.get("content-length") ?? "0");
    const tooLarge = () => new ApiError(413, "body_too_large", "the request body is larger than the server's limit");
    if (declared > bodyLimit) throw tooLarge();
    const text = await req.text();
    if (new TextEncoder().encode(text).length > bodyLimit) throw tooLarge();
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new ApiError(400, "invalid_input", `the body is not JSON: ${(e as Error).message}`);
    }
  }

  /** The automatic check, after the answer; checks of one conversation never overlap, one more runs if asked meanwhile. */
  function schedule(id: string, ctx?: ExecutionContext): void {
    if (checks.has(id)) { checks.set(id, true); return; }
    checks.set(id, false);
    later((async () => {
      try {
        for (;;) {
          const r = await compactor.onMessage(id);
          if (r.status === "compacted" || r.status === "failed") wrote();
          if (!checks.get(id)) break;
          checks.set(id, false);
        }
      } finally {
        checks.delete(id);
      }
    })(), ctx);
  }

  const answering = (id: string) => (answers.get(id)?.until ?? 0) > Date.now();

  function takeCondense(member: string): void {
    const now = Date.now();
    const w = (rate.get(member) ?? []).filter((t) => now - t < 60_000);
    rate.set(member, w);
    if (w.length >= perMinute) {
      const wait = Math.max(1, Math.ceil((60_000 - (now - w[0])) / 1000));
      throw new ApiError(429, "rate_limited", `at most ${perMinute} manual compactions per minute; try again in ${wait} s`, wait);
    }
    w.push(now);
  }

  async function condense(id: string, member: string, ctx?: ExecutionContext): Promise<Response> {
    await owned(id, member);
    if (answering(id)) throw new ApiError(409, "session_busy", "an answer owns the session; compact after it ends");
    takeCondense(member);
    const task = `task-${crypto.randomUUID().replaceAll("-", "")}`;
    type First = { seq: number } | { result: OnMessageResult } | { error: unknown };
    let settle!: (f: First) => void;
    const first = new Promise<First>((r) => (settle = r));
    const key = `${id}\n${task}`;
    running.add(key);
    const work = compactor.compactTask(id, { id: task, actor: member, onAccepted: (seq) => { wrote(); settle({ seq }); } })
      .then((result) => { wrote(); settle({ result }); }, (error) => { wrote(); settle({ error }); })
      .finally(() => running.delete(key));
    later(work, ctx);
    const f = await first;
    if ("seq" in f) {
      return json(202, { task, conversation: id, requestedSeq: f.seq, events: `/api/conversations/${id}/tasks/${task}/events` });
    }
    if ("error" in f) throw f.error;
    const r = f.result;
    if (r.status === "refused") throw new ApiError(httpStatusOf(r.code), r.code, r.message);
    if (r.status === "busy") throw new ApiError(409, "busy", "another writer is compacting this conversation; ask again in a moment");
    throw new ApiError(409, "nothing_to_fold", `no compaction was due (${r.status})`);
  }

  async function events(req: Request, id: string, task: string): Promise<Response> {
    const all = await o.journal.readEvents(id, 0);
    const start = all.find((s) => s.event.type === "compactionTask" && s.event.taskId === task && s.event.state === "requested");
    if (!start) throw new ApiError(404, "not_found", `no task ${JSON.stringify(task)} in this conversation`);
    const sent = Number(req.headers.get("last-event-id") ?? "0") || 0;
    let since = start.seq - 1;
    let closed = false;
    const enc = new TextEncoder();
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        try {
          for (;;) {
            for (const s of await o.journal.readEvents(id, since)) {
              since = s.seq;
              const e = s.event as Event;
              if (e.type !== "compactionTask" || e.taskId !== task) continue;
              const data = e.state === "requested" ? { task, state: e.state, headSeq: e.headSeq }
                : e.state === "completed" ? { task, state: e.state, boundaryId: e.boundaryId }
                : { task, state: e.state, notice: MEMBER_NOTICE };
              if (s.seq > sent) controller.enqueue(enc.encode(`id: ${s.seq}\nevent: ${e.state}\ndata: ${JSON.stringify(data)}\n\n`));
              if (e.state !== "requested") { controller.close(); return; }
            }
            if (closed) return;
            // Not running here: a writer that stopped mid-task is ended once its lease lapses.
            if (!running.has(`${id}\n${task}`) && (await compactor.endInterrupted(id))) continue;
            await new Promise<void>((resolve) => {
              const done = () => { clearTimeout(t); wakers.delete(done); resolve(); };
              const t = setTimeout(done, pollMs);
              wakers.add(done);
            });
          }
        } catch (e) {
          console.error("foldline handler: task events:", e);
          controller.error(e);
        }
      },
      cancel() { closed = true; },
    });
    return new Response(stream, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
  }

  /**
   * `…/events?after=N[&wait=ms]`: the member-visible events after position
   * `N` (a failed compaction's audit reason taken out), for a client that
   * projects its timeline locally; with `wait` (at most 25 s) a long poll.
   */
  async function feed(id: string, url: URL): Promise<Response> {
    const num = (name: string) => {
      const v = url.searchParams.get(name);
      if (v === null) return 0;
      if (!/^\d+$/.test(v)) throw new ApiError(400, "invalid_input", `${name} must be a whole number`);
      return Number(v);
    };
    const after = num("after");
    const deadline = Date.now() + Math.min(num("wait"), MAX_WAIT_MS);
    for (;;) {
      const found = await o.journal.readEvents(id, after);
      if (found.length > 0 || Date.now() >= deadline) {
        const events = found.map((s) => ({ seq: s.seq, event: s.event.type === "compactionFailed" ? { ...s.event, reason: "" } : s.event }));
        // The chain's verdict, for the local projection.
        let accepted: string[] = [];
        let retired: string[] = [];
        try {
          const r = await compactor.resolve(id);
          [accepted, retired] = [r.accepted, r.retiredBoundaries];
        } catch (e) {
          if (!(e instanceof FoldlineError)) throw e; // a rejected chain draws no completed divider
        }
        return json(200, { events, last: found.at(-1)?.seq ?? after, accepted, retired });
      }
      await new Promise<void>((resolve) => {
        const done = () => { clearTimeout(t); wakers.delete(done); resolve(); };
        const t = setTimeout(done, Math.max(1, Math.min(pollMs, deadline - Date.now())));
        wakers.add(done);
      });
    }
  }

  async function route(req: Request, ctx?: ExecutionContext): Promise<Response> {
    const url = new URL(req.url);
    const member = await caller(req);
    let m = EVENTS.exec(url.pathname);
    if (m && req.method === "GET") {
      const id = decode(m[1]);
      await admitted(id, member);
      return events(req, id, decode(m[2]));
    }
    m = MEMBERS.exec(url.pathname);
    if (m) {
      const id = decode(m[1]);
      if (m[2] === undefined && req.method === "GET") {
        await admitted(id, member);
        return json(200, { owner: await owners.get(id), members: await owners.room(id) });
      }
      if (m[2] !== undefined && (req.method === "PUT" || req.method === "DELETE")) {
        const who = decode(m[2]);
        await owned(id, member);
        if (req.method === "PUT") {
          if (!o.members.some((x) => x.id === who)) throw new ApiError(404, "not_found", `no member ${JSON.stringify(who)} on this server`);
          if (who !== member) await owners.admit(id, who);
        } else if (!(await owners.dismiss(id, who))) {
          throw new ApiError(404, "not_found", `${JSON.stringify(who)} is not in this room`);
        }
        return new Response(null, { status: 204 });
      }
      throw new ApiError(405, "method_not_allowed", "the members route takes GET, and PUT or DELETE …/members/{member}");
    }
    m = ANSWER.exec(url.pathname);
    if (m && req.method === "DELETE") {
      const [id, answer] = [decode(m[1]), decode(m[2])];
      await admitted(id, member);
      if (answers.get(id)?.id !== answer) throw new ApiError(404, "not_found", `no answer ${JSON.stringify(answer)} holds this session`);
      answers.delete(id);
      await o.journal.releaseLease(id, `answer:${answer}`);
      schedule(id, ctx);
      return new Response(null, { status: 204 });
    }
    m = COMPRESSION.exec(url.pathname);
    if (m) {
      surface();
      if (m[1] === undefined && req.method === "GET") return preferencesView((await compression.preferences(member)) ?? {});
      if (m[1] === undefined && req.method === "PUT") {
        const p = preferencesOf(await body(req));
        await compression.setPreferences(member, p);
        return preferencesView(p);
      }
      if (m[1] !== undefined && req.method === "GET") return json(200, { passes: await compression.stats(member) });
      throw new ApiError(405, "method_not_allowed", "…/compression takes GET and PUT; …/compression/stats takes GET");
    }
    m = ROUTE.exec(url.pathname);
    if (!m) throw new ApiError(404, "not_found", "no such endpoint");
    const id = decode(m[1]);
    switch (`${req.method} ${m[2]}`) {
      case "POST messages": {
        checkId(id);
        const b = await body(req);
        const list = Array.isArray(b) ? b : [b];
        if (list.length === 0) throw new ApiError(400, "invalid_input", "no messages in the body");
        // Checked before anything is claimed or written (ownership
        // included): they convert, and each is one a compaction could take.
        try {
          compactor.check(id, list as OpenAiChatMessage[]);
        } catch (e) {
          if (e instanceof FoldlineError && e.code === "turn_too_large") throw e;
          if (e instanceof FoldlineError) throw new ApiError(400, "invalid_input", e.message.replace(/^[a-z_]+: /, ""));
          throw e;
        }
        if ((await owners.claim(id, member)) !== member && !(await owners.room(id)).includes(member)) {
          throw new ApiError(403, "not_owner", "this conversation belongs to another member, who has not let you into its room");
        }
        const key = req.headers.get("idempotency-key") ?? undefined;
        if (key !== undefined && !/^[A-Za-z0-9._:-]{1,128}$/.test(key)) throw new ApiError(400, "invalid_input", "an Idempotency-Key is 1 to 128 of A-Z a-z 0-9 . _ : -");
        // The sender is the authenticated member, never the body.
        const r = await compactor.append(id, list as OpenAiChatMessage[], { idempotencyKey: key, sender: member });
        if (r.replayed) return json(201, { seq: r.seq, appended: r.count }, { "idempotent-replayed": "true" });
        wrote();
        schedule(id, ctx);
        return json(201, { seq: r.seq, appended: r.count });
      }
      case "POST condense":
        return condense(id, member, ctx);
      case "POST answer": {
        await admitted(id, member);
        if (answering(id)) throw new ApiError(409, "busy", "another answer holds the session");
        const answer = `answer-${crypto.randomUUID().replaceAll("-", "")}`;
        if ((await o.journal.acquireLease(id, `answer:${answer}`, answerLeaseMs)) === undefined) {
          throw new ApiError(409, "busy", "a compaction is running; ask again in a moment");
        }
        // The member's compression state enters the run once, here.
        const preferences = availability.surface ? (await compression.preferences(member)) ?? {} : {};
        answers.set(id, { id: answer, until: Date.now() + answerLeaseMs, preferences });
        return json(201, { answer, expiresInMs: answerLeaseMs });
      }
      case "GET context": {
        await admitted(id, member);
        const f = url.searchParams.get("format") ?? "foldline";
        const format = FORMATS[f];
        if (!format) throw new ApiError(400, "invalid_input", `unknown format ${JSON.stringify(f)}: foldline, openai, anthropic or ai-sdk`);
        const memberState = await runState(id, member);
        const s = await compactor.context(id, { format, member: memberState });
        if (s.manifest.member && s.manifest.member.passes.length > 0) await compression.record(member, id, s.manifest.member.passes);
        const only = ["true", "1"].includes(url.searchParams.get("messages") ?? "");
        return json(200, only ? s.messages : s);
      }
      case "GET settings": {
        await admitted(id, member);
        const input = (await runState(id, member)) ?? {};
        const r = settingsProjection({ availability: input.availability, preferences: input.preferences });
        return json(200, r);
      }
      case "GET events":
        await admitted(id, member);
        return feed(id, url);
      case "GET timeline":
        await admitted(id, member);
        return json(200, await compactor.timeline(id));
      case "GET verify": {
        await admitted(id, member);
        try {
          return json(200, { ok: true, resolution: await compactor.resolve(id), progress: (await o.journal.progress?.(id)) ?? null });
        } catch (e) {
          if (!(e instanceof FoldlineError)) throw e;
          return json(200, { ok: false, error: { code: e.code, message: e.message } });
        }
      }
      default:
        throw new ApiError(404, "not_found", "no such endpoint");
    }
  }

  return (req, ctx) => route(req, ctx).catch(failure);
}
