// The chat client (`foldline/client`): what a member's app calls to talk to
// `foldline serve` or the edge handler (`createHandler`) with a member's
// token. `/compact` is a client action, never a chat message: `send` starts
// the exclusive condense task instead of appending it, streams the task's
// durable events, and keeps only the task pointer (in `localStorage` by
// default) so a reload picks the task up where it was and shows its end.
// Refusals come back typed, with the wording a member should see. It keeps
// a local copy of the conversation's member-visible events, kept current by
// the events route (a long poll resumable by position), and projects the
// timeline locally with the function it is given (the core's `timeline`, the
// same .wasm the servers run). No WebAssembly of its own: it runs wherever
// `fetch` does.

import { MEMBER_NOTICE } from "./notice.js";

/** Where the client keeps the task pointer (`localStorage`'s shape). */
export interface TaskStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export interface ClientOptions {
  /** The server's origin, e.g. `http://127.0.0.1:8787` (`""`: the page's own). */
  baseUrl: string;
  /** The member's bearer token. */
  token: string;
  /** The conversation. */
  conversation: string;
  /** Where the task pointer lives (default: `localStorage` when there is one; `null`: nowhere). */
  storage?: TaskStorage | null;
  /** A `fetch` of your own (default: the global one). */
  fetch?: typeof fetch;
  /**
   * The local projection: the core's `timeline` (`import { timeline } from
   * "foldline"`, after `init()`), applied to the local copy of the events
   * with the chain's accepted and retired boundaries as the server last
   * answered them. Without it `localTimeline` is not available.
   */
  project?: (events: unknown[], accepted: string[], retired: string[], page?: { limit?: number; before?: number }) => { items: Array<Record<string, unknown>>; earlier?: number };
}

/** One member-visible journal event, as the events route sends it. */
export interface StoredEventCopy { seq: number; event: Record<string, unknown> }

/** One durable event of a condense task, as its stream sends it. */
export interface TaskEvent {
  /** `requested`, then `completed` or `failed`. */
  state: "requested" | "completed" | "failed";
  /** Its journal position (the stream's `id`). */
  seq: number;
  /** `completed`: the boundary it made. */
  boundaryId?: string;
  /** `failed`: the one generic notice. */
  notice?: string;
}

/** A running (or resumed) condense task: the pointer the client keeps. */
export interface TaskPointer {
  task: string;
  /** The path of its event stream. */
  events: string;
  /** The last event seen (resumed from after a reload). */
  lastSeq: number;
}

/** A refusal, typed by its stable code, with what to show the member. */
export class ClientError extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    /** The wording a member should see. */
    readonly memberMessage: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
    this.name = "ClientError";
  }
}

/** What a member sees for each refusal of a send or a `/compact`. */
export const MEMBER_WORDING: Readonly<Record<string, string>> = {
  session_busy: "An answer is being written. Try /compact again when it has finished.",
  not_owner: "Only the owner of this conversation can compact it.",
  nothing_to_fold: "There is nothing earlier to compact yet.",
  rate_limited: "Too many /compact requests. Wait a minute and try again.",
  busy: "The conversation is being compacted right now. Try again in a moment.",
  unauthorized: "You are not signed in to this server.",
  not_author: "You can edit only your own messages.",
};

/**
 * What a member sees when a conversation they are not in refuses them
 * anything but a compaction (`not_owner` on a read, a message, an edit):
 * another member's conversation they were not let into, or let out of.
 */
export const NOT_IN_ROOM_WORDING = "This conversation belongs to another member, who has not let you in.";

/** The one notice a failed compaction shows (the reason stays in the audit record). */
export const FAILED_NOTICE = MEMBER_NOTICE;

/** Options of `send`. */
export interface SendOptions {
  /** The message's idempotency key (1 to 128 of `A-Z a-z 0-9 . _ : -`; default: a fresh random one). */
  idempotencyKey?: string;
}

/** How many times `send` sends a message again after a connection lost before its answer. */
export const SEND_RETRIES = 3;

/**
 * A fresh idempotency key for `send`: 128 random bits
 * (`crypto.getRandomValues`, in every browser — insecure origins too —
 * worker and Node).
 */
export function newSendKey(): string {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(16));
  return `send-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

/** What `send` did. */
export type Sent = { kind: "message"; appended: number } | { kind: "compact"; task: TaskPointer };

export interface Client {
  /**
   * Send what the member typed: `/compact` (alone on the line) starts the
   * condense task and is never appended; anything else is appended as the
   * member's message, under an idempotency key (`idempotencyKey`, or a
   * fresh random one): a connection lost before the answer came (the
   * message may have been written) is sent again under the same key, up
   * to `SEND_RETRIES` times 0.5 s apart, and the server writes it once. An
   * app that offers "try again" after a failed send passes the key it
   * used, so a message the server did write is not written twice.
   */
  send(text: string, options?: SendOptions): Promise<Sent>;
  /** Start the condense task (what `/compact` does). */
  compact(): Promise<TaskPointer>;
  /**
   * Edit a message the member sent (a timeline item's `turnId`): a
   * correction the server checks and writes, the original kept in the
   * journal; the timeline then marks it `corrected`. Another member's
   * message is refused `not_author`.
   */
  edit(turnId: string, text: string): Promise<{ seq: number; correctionSeq: number }>;
  /** The member the token belongs to (a timeline message's `sender` when they sent it). */
  me(): Promise<string>;
  /** The task pointer kept from an earlier page, if a task had not ended. */
  pending(): TaskPointer | undefined;
  /**
   * Follow a task's events (resuming after `lastSeq`) until its terminal
   * event; the pointer is updated as events arrive and dropped at the end.
   */
  follow(task: TaskPointer, onEvent?: (e: TaskEvent) => void, signal?: AbortSignal): Promise<TaskEvent>;
  /**
   * The conversation's timeline (messages and dividers) as the server
   * projects it, or a page of it: the latest `limit` items at positions
   * below `before` (walk back with the answer's `earlier`). The last answer
   * of each page is kept with the server's tag: asked again, a page nothing
   * changed is `304` on the wire and the kept answer with `unchanged: true`;
   * with `waitMs` (at most 25,000) the server holds the request until
   * something is written — a live chat page at no cost while it is idle.
   */
  timeline(page?: { limit?: number; before?: number; waitMs?: number }): Promise<TimelineAnswer>;
  /**
   * Bring the local copy up to date: the member-visible events after the
   * last one held, page after page (waiting up to `waitMs` for something
   * new: a long poll). Answers how many arrived.
   */
  sync(waitMs?: number): Promise<number>;
  /** The local copy of the conversation's member-visible events, in order. */
  events(): readonly StoredEventCopy[];
  /** The timeline projected locally from the local copy (needs `project`), or a page of it as `timeline` takes one. */
  localTimeline(page?: { limit?: number; before?: number }): { items: Array<Record<string, unknown>>; earlier?: number };
}

/** A timeline (or a page of it) as the server drew it. */
export interface TimelineAnswer {
  items: Array<Record<string, unknown>>;
  /** The page left earlier items out: the `before` that asks for them. */
  earlier?: number;
  /** Nothing was written since this page was last answered (the kept answer). */
  unchanged?: boolean;
}

/** Whether `text` is the `/compact` command. */
export function isCompactCommand(text: string): boolean {
  return text.trim() === "/compact";
}

/** A client for one member and one conversation. */
/** A refused request as the member-facing `ClientError`. */
async function refused(res: Response, compacting = false): Promise<never> {
  let code = "internal";
  let message = `HTTP ${res.status}`;
  try {
    const body = (await res.json()) as { error?: { code?: string; message?: string } };
    code = body.error?.code ?? code;
    message = body.error?.message ?? message;
  } catch {
    // not the error shape: keep the status
  }
  const wording = code === "not_owner" && !compacting ? NOT_IN_ROOM_WORDING : MEMBER_WORDING[code];
  throw new ClientError(code, res.status, wording ?? `Something went wrong (${code}). Try again.`, message);
}

/** A PUT of `body` as JSON, answered 200 with JSON (a refusal typed). */
async function put<T>(f: typeof fetch, url: string, auth: Record<string, string>, body: unknown): Promise<T> {
  const res = await f(url, { method: "PUT", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify(body) });
  if (res.status !== 200) return refused(res);
  return (await res.json()) as T;
}

/** The events of one SSE response body, as they arrive. */
async function* taskEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<TaskEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const field = (name: string) => block.split("\n").find((l) => l.startsWith(`${name}:`))?.slice(name.length + 1).trim();
      const state = field("event");
      if (state !== "requested" && state !== "completed" && state !== "failed") continue;
      const data = JSON.parse(field("data") ?? "{}") as { boundaryId?: string; notice?: string };
      yield { state, seq: Number(field("id") ?? 0), ...(data.boundaryId ? { boundaryId: data.boundaryId } : {}), ...(state === "failed" ? { notice: data.notice ?? FAILED_NOTICE } : {}) };
    }
  }
}

/** The task pointer kept under `key`, if it is one. */
function readPointer(storage: TaskStorage | undefined, key: string): TaskPointer | undefined {
  const raw = storage?.getItem(key);
  if (!raw) return undefined;
  try {
    const p = JSON.parse(raw) as TaskPointer;
    return typeof p.task === "string" && typeof p.events === "string" ? p : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Follow a task's events until it ends (resumed after what was seen when a
 * connection drops); the pointer is kept while it runs and dropped after.
 */
async function followTask(
  f: typeof fetch, baseUrl: string, auth: Record<string, string>, keep: (p: TaskPointer | undefined) => void,
  task: TaskPointer, onEvent?: (e: TaskEvent) => void, signal?: AbortSignal,
): Promise<TaskEvent> {
  const origin = baseUrl.replace(/\/$/, "");
  for (;;) {
    try {
      const res = await f(`${origin}${task.events}`, { headers: { ...auth, "last-event-id": String(task.lastSeq) }, signal });
      if (!res.ok || !res.body) return await refused(res);
      for await (const e of taskEvents(res.body)) {
        task = { ...task, lastSeq: e.seq };
        onEvent?.(e);
        if (e.state === "requested") {
          keep(task);
          continue;
        }
        keep(undefined);
        return e;
      }
    } catch (e) {
      // A refusal ends the follow; a dropped connection (a server
      // restarting) is resumed below after what was seen.
      if (e instanceof ClientError || signal?.aborted) throw e;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * `send`'s request, sent again while the connection is lost before an
 * answer (`fetch` rejects), at most `SEND_RETRIES` times 0.5 s apart: under
 * its idempotency key the server writes the message once.
 */
async function retried(request: () => Promise<Response>): Promise<Response> {
  for (let tries = 0; ; tries++) {
    try {
      return await request();
    } catch (e) {
      if (tries >= SEND_RETRIES) throw e;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/** Kept timeline answers, by the page's URL, with their tags. */
type Drawn = Map<string, { tag: string; answer: TimelineAnswer }>;

/** A timeline page: asked with the kept tag (a `304` answers the kept page), and kept with the new one. */
async function timelinePage(f: typeof fetch, base: string, auth: Record<string, string>, drawn: Drawn, page: { limit?: number; before?: number; waitMs?: number }): Promise<TimelineAnswer> {
  const q = new URLSearchParams();
  if (page.limit !== undefined) q.set("limit", String(page.limit));
  if (page.before !== undefined) q.set("before", String(page.before));
  const url = `${base}/timeline${q.toString() ? `?${q}` : ""}`;
  const held = drawn.get(url);
  if (held && page.waitMs) q.set("wait", String(Math.max(0, Math.floor(page.waitMs))));
  const res = await f(q.has("wait") ? `${base}/timeline?${q}` : url, {
    headers: held ? { ...auth, "if-none-match": held.tag } : auth,
  });
  if (res.status === 304 && held) return { ...held.answer, unchanged: true };
  if (!res.ok) return refused(res);
  const answer = (await res.json()) as TimelineAnswer;
  const tag = res.headers.get("etag");
  if (tag) drawn.set(url, { tag, answer });
  return answer;
}

/** A member's client of one conversation on `foldline serve` or the edge handler. */
export function createClient(o: ClientOptions): Client {
  const local: StoredEventCopy[] = [];
  // The last answer of each timeline page and its tag.
  const drawn: Drawn = new Map();
  let chain: { accepted: string[]; retired: string[] } = { accepted: [], retired: [] };
  const f = o.fetch ?? ((...a: Parameters<typeof fetch>) => fetch(...a));
  const storage = o.storage === undefined ? (globalThis as { localStorage?: TaskStorage }).localStorage : o.storage ?? undefined;
  const base = `${o.baseUrl.replace(/\/$/, "")}/api/conversations/${encodeURIComponent(o.conversation)}`;
  const key = `foldline:task:${o.baseUrl}:${o.conversation}`;
  const auth = { authorization: `Bearer ${o.token}` };

  function keep(p: TaskPointer | undefined): void {
    if (!storage) return;
    if (p) storage.setItem(key, JSON.stringify(p));
    else storage.removeItem(key);
  }

  async function compact(): Promise<TaskPointer> {
    const res = await f(`${base}/condense`, { method: "POST", headers: auth });
    if (res.status !== 202) return refused(res, true);
    const body = (await res.json()) as { task: string; events: string };
    const p = { task: body.task, events: body.events, lastSeq: 0 };
    keep(p);
    return p;
  }


  return {
    async send(text, options = {}) {
      if (isCompactCommand(text)) return { kind: "compact", task: await compact() };
      const init = {
        method: "POST", headers: { ...auth, "content-type": "application/json", "idempotency-key": options.idempotencyKey ?? newSendKey() },
        body: JSON.stringify({ role: "user", content: text }),
      };
      const res = await retried(() => f(`${base}/messages`, init));
      if (res.status !== 201) return refused(res);
      const body = (await res.json()) as { appended?: number };
      return { kind: "message", appended: body.appended ?? 1 };
    },
    compact,
    edit: (turnId, text) => put(f, `${base}/messages/${encodeURIComponent(turnId)}`, auth, { content: text }),
    async me() {
      const res = await f(`${o.baseUrl.replace(/\/$/, "")}/api/members/me`, { headers: auth });
      if (res.status !== 200) return refused(res);
      return ((await res.json()) as { id: string }).id;
    },
    pending: () => readPointer(storage, key),
    follow: (task, onEvent, signal) => followTask(f, o.baseUrl, auth, keep, task, onEvent, signal),
    timeline: (page = {}) => timelinePage(f, base, auth, drawn, page),
    async sync(waitMs = 0) {
      // Page after page (the server answers at most a page, with `more`),
      // the first of them a long poll.
      let taken = 0;
      for (let wait = Math.max(0, Math.floor(waitMs)); ; wait = 0) {
        const after = local.at(-1)?.seq ?? 0;
        const res = await f(`${base}/events?after=${after}&wait=${wait}`, { headers: auth });
        if (!res.ok) return refused(res);
        const body = (await res.json()) as { events: StoredEventCopy[]; more?: boolean; accepted?: string[]; retired?: string[] };
        // Positions only grow: anything at or before what is held is not taken twice.
        const fresh = body.events.filter((e) => e.seq > after);
        local.push(...fresh);
        taken += fresh.length;
        chain = { accepted: body.accepted ?? chain.accepted, retired: body.retired ?? chain.retired };
        if (!body.more || fresh.length === 0) return taken;
      }
    },
    events() {
      return local;
    },
    localTimeline(page) {
      if (!o.project) throw new TypeError("createClient: localTimeline needs the `project` option (the core's timeline)");
      return o.project(local.map((e) => e.event), chain.accepted, chain.retired, page);
    },
  };
}
