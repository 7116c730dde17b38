// The routes of `foldline serve`, each behind a member's bearer token: which
// path goes where, and the conversation routes themselves (append, answer,
// context, settings, timeline, verify). The Rust server's routes.rs.

import { FoldlineError } from "../error.js";
import { settingsProjection } from "../ops.js";
import type { AppendMessages } from "../driver/api.js";
import type { Event, Format, Part } from "../types.js";
import { fromOpenAiMessages } from "../convert.js";
import { FORMATS } from "../defaults.js";
import { admitted, body, caller, checkId, decode, onceEach, owned } from "./access.js";
import { preferencesOf, preferencesView, runState, surface } from "./compression.js";
import { feed, readSome } from "./feed.js";
import { timelineRoute } from "./timeline.js";
import { ApiError, json } from "./reply.js";
import { answering, schedule, wrote, type App } from "./state.js";
import { condense, events } from "./tasks.js";
import type { ExecutionContext } from "./api.js";

const ROUTE = /^\/api\/conversations\/([^/]*)\/(messages|condense|answer|context|timeline|verify|settings|events)$/;
const COMPRESSION = /^\/api\/members\/me\/compression(\/stats)?$/;
const ANSWER = /^\/api\/conversations\/([^/]*)\/answer\/([^/]+)$/;
const MEMBERS = /^\/api\/conversations\/([^/]*)\/members(?:\/([^/]+))?$/;
const EVENTS = /^\/api\/conversations\/([^/]*)\/tasks\/([^/]+)\/events$/;
const MESSAGE = /^\/api\/conversations\/([^/]*)\/messages\/([^/]+)$/;
/** A load balancer's probe: no token. */
const HEALTH = "/api/health";
/** Who the bearer token belongs to. */
const ME = "/api/members/me";

/** A path that names an endpoint, with a method it does not take: 405, as foldline serve answers. */
const wrongMethod = () => new ApiError(405, "method_not_allowed", "this endpoint does not take that method");

/** The methods the endpoint a path names takes; undefined when it names none. */
function methodsOf(path: string): string[] | undefined {
  if (path === HEALTH || path === ME || EVENTS.test(path)) return ["GET"];
  const members = MEMBERS.exec(path);
  if (members) return members[2] === undefined ? ["GET"] : ["PUT", "DELETE"];
  if (ANSWER.test(path)) return ["DELETE"];
  if (MESSAGE.test(path)) return ["PUT"];
  const compression = COMPRESSION.exec(path);
  if (compression) return compression[1] === undefined ? ["GET", "PUT"] : ["GET"];
  const name = ROUTE.exec(path)?.[2];
  if (name === undefined) return undefined;
  return ["messages", "condense", "answer"].includes(name) ? ["POST"] : ["GET"];
}

/** A request, to the route its path and method name. */
export async function route(app: App, req: Request, ctx?: ExecutionContext): Promise<Response> {
  const url = new URL(req.url);
  // The path and the method first, then the caller: foldline serve routes before it authenticates.
  const methods = methodsOf(url.pathname);
  if (methods === undefined) throw new ApiError(404, "not_found", "no such endpoint");
  if (!methods.includes(req.method)) throw wrongMethod();
  if (url.pathname === HEALTH) {
    // `{"ok": true}` once the journal answers a read, as foldline serve answers it.
    await readSome(app.o.journal, "health", 0, 1);
    return json(200, { ok: true });
  }
  const member = await caller(app, req);
  // `{"id"}`: what a chat page needs to offer Edit on the member's own messages only.
  if (url.pathname === ME) return json(200, { id: member });
  // From here on the method is one the path's endpoint takes (methodsOf).
  let m = EVENTS.exec(url.pathname);
  if (m) {
    const id = decode(m[1]);
    await admitted(app, id, member);
    return events(app, req, id, decode(m[2]));
  }
  m = MEMBERS.exec(url.pathname);
  if (m) return room(app, req, decode(m[1]), m[2] === undefined ? undefined : decode(m[2]), member);
  m = ANSWER.exec(url.pathname);
  if (m) return answerEnd(app, decode(m[1]), decode(m[2]), member, ctx);
  m = MESSAGE.exec(url.pathname);
  if (m) return correct(app, req, decode(m[1]), decode(m[2]), member, ctx);
  m = COMPRESSION.exec(url.pathname);
  if (m) return compressionRoute(app, req, m[1] !== undefined, member);
  m = ROUTE.exec(url.pathname);
  if (!m) throw new ApiError(404, "not_found", "no such endpoint");
  const id = decode(m[1]);
  switch (`${req.method} ${m[2]}`) {
    case "POST messages": return append(app, req, url, id, member, ctx);
    case "POST condense": return condense(app, id, member, ctx);
    case "POST answer": return answerStart(app, id, member);
    case "GET context": return context(app, url, id, member);
    case "GET settings": {
      await admitted(app, id, member);
      const input = (await runState(app, id, member)) ?? {};
      return json(200, settingsProjection({ availability: input.availability, preferences: input.preferences }));
    }
    case "GET events":
      onceEach(url);
      await admitted(app, id, member);
      return feed(app, id, url, member);
    case "GET timeline":
      onceEach(url);
      await admitted(app, id, member);
      return timelineRoute(app, req, id, url, member);
    case "GET verify": return verify(app, id, member);
    default:
      throw wrongMethod();
  }
}

/** `…/members` (GET: the room) and `…/members/{member}` (PUT: let in, DELETE: take out; the owner only). */
async function room(app: App, req: Request, id: string, who: string | undefined, member: string): Promise<Response> {
  // The route let through only GET …/members and PUT or DELETE …/members/{member} (methodsOf).
  if (who === undefined) {
    await admitted(app, id, member);
    return json(200, { owner: await app.owners.get(id), members: await app.owners.room(id) });
  }
  await owned(app, id, member);
  if (req.method === "PUT") {
    if (!app.members.some((x) => x.id === who)) throw new ApiError(404, "not_found", `no member ${JSON.stringify(who)} on this server`);
    if (who !== member) await app.owners.admit(id, who);
  } else if (!(await app.owners.dismiss(id, who))) {
    throw new ApiError(404, "not_found", `${JSON.stringify(who)} is not in this room`);
  }
  return new Response(null, { status: 204 });
}

/** `DELETE …/answer/{answer}`: the answer gives the session back; the automatic check runs. */
async function answerEnd(app: App, id: string, answer: string, member: string, ctx?: ExecutionContext): Promise<Response> {
  await admitted(app, id, member);
  if (!(await app.answers.endAnswer(id, answer))) throw new ApiError(404, "not_found", `no answer ${JSON.stringify(answer)} holds this session`);
  await app.o.journal.releaseLease(id, `answer:${answer}`);
  schedule(app, id, ctx);
  return new Response(null, { status: 204 });
}

/** `…/members/me/compression` (GET, PUT) and `…/compression/stats` (GET). */
async function compressionRoute(app: App, req: Request, stats: boolean, member: string): Promise<Response> {
  // In foldline serve's order (the method was checked by the route): the body, then whether the surface is on.
  if (stats) {
    surface(app);
    return json(200, { passes: await app.compression.stats(member) });
  }
  if (req.method === "GET") {
    surface(app);
    return preferencesView(app, (await app.compression.preferences(member)) ?? {});
  }
  const p = preferencesOf(await body(app, req));
  surface(app);
  await app.compression.setPreferences(member, p);
  return preferencesView(app, p);
}

/**
 * `POST …/messages[?format=openai-responses|anthropic|ai-sdk]`: one OpenAI-style message or an array (or Responses API items, Anthropic or AI SDK messages), checked before
 * anything is claimed or written (ownership included): they convert, and
 * each is one a compaction could take. The sender is the authenticated
 * member, never the body; the automatic check runs after the answer.
 */
async function append(app: App, req: Request, url: URL, id: string, member: string, ctx?: ExecutionContext): Promise<Response> {
  onceEach(url);
  checkId(id);
  const format = incoming(url.searchParams.get("format"));
  const b = await body(app, req);
  const request = format === "anthropic" ? anthropicRequest(b) : undefined;
  const list = request?.messages ?? (Array.isArray(b) ? b : [b]);
  if (list.length === 0 && !request?.system?.length) throw new ApiError(400, "invalid_input", "no messages in the body");
  const spec = { format, messages: list, ...(request?.system?.length ? { system: request.system } : {}) } as AppendMessages;
  try {
    app.compactor.check(id, spec);
  } catch (e) {
    if (e instanceof FoldlineError && e.code === "turn_too_large") throw e;
    if (e instanceof FoldlineError) throw new ApiError(400, "invalid_input", e.message.replace(/^[a-z_]+: /, ""));
    throw e;
  }
  if ((await app.owners.claim(id, member)) !== member && !(await app.owners.room(id)).includes(member)) {
    throw new ApiError(403, "not_owner", "this conversation belongs to another member, who has not let you into its room");
  }
  const key = req.headers.get("idempotency-key") ?? undefined;
  if (key !== undefined && !/^[A-Za-z0-9._:-]{1,128}$/.test(key)) throw new ApiError(400, "invalid_input", "an Idempotency-Key is 1 to 128 of A-Z a-z 0-9 . _ : -");
  const r = await app.compactor.append(id, spec, { idempotencyKey: key, sender: member });
  if (r.replayed) return json(201, { seq: r.seq, appended: r.count }, { "idempotent-replayed": "true" });
  wrote(app, id);
  schedule(app, id, ctx);
  return json(201, { seq: r.seq, appended: r.count });
}

/**
 * `PUT …/messages/{turn}`: a member corrects what a message they sent says —
 * body `{"content": …}`, a string or OpenAI content parts — as a `correction`
 * (the journal keeps the original), checked as every correction is; 200
 * `{seq, correctionSeq}`, a turn the conversation does not show a model 404
 * `not_found`, another member's 403 `not_author`. As foldline serve's `correct`.
 */
async function correct(app: App, req: Request, id: string, turn: string, member: string, ctx?: ExecutionContext): Promise<Response> {
  checkId(id);
  const parts = correctionParts(await body(app, req));
  await admitted(app, id, member);
  let done;
  try {
    done = await app.compactor.correct(id, turn, parts, { sender: member });
  } catch (e) {
    if (e instanceof FoldlineError && e.code === "invalid_request") throw new ApiError(404, "not_found", e.message.replace(/^[a-z_]+: /, ""));
    throw e;
  }
  wrote(app, id);
  // A covered turn's correction is an amendment the next compaction absorbs.
  schedule(app, id, ctx);
  return json(200, { seq: done.seq, correctionSeq: done.correctionSeq });
}

/** The parts of a correction's body, `{"content": …}`: what an OpenAI-style message's content converts to (as foldline serve's `correction_parts`). */
function correctionParts(b: unknown): Part[] {
  if (typeof b !== "object" || b === null || Array.isArray(b)) throw new ApiError(400, "invalid_input", 'a correction\'s body is {"content": …}');
  const other = Object.keys(b).filter((k) => k !== "content").sort()[0];
  if (other !== undefined) throw new ApiError(400, "invalid_input", `a correction's body holds content only, not ${JSON.stringify(other)}`);
  const content = (b as { content?: unknown }).content;
  if (typeof content !== "string" && !Array.isArray(content)) throw new ApiError(400, "invalid_input", "content is a string or an array of content parts");
  let events: Event[];
  try {
    events = fromOpenAiMessages([{ role: "user", content }], { conversation: "c" });
  } catch (e) {
    if (e instanceof FoldlineError) throw new ApiError(400, "invalid_input", e.message.replace(/^[a-z_]+: /, ""));
    throw e;
  }
  const [m] = events;
  if (m?.type !== "message") throw new ApiError(400, "invalid_input", "content converts to no message");
  return m.parts;
}

/**
 * An Anthropic body in a request's shape, `{"system", "messages"}` (as the
 * driver's `append` takes it): the system prompt, a string or text blocks,
 * goes in as a system turn before the messages. Undefined for an array or one message.
 * As foldline serve's `import::anthropic_request`.
 */
function anthropicRequest(b: unknown): { system?: string | unknown[]; messages: unknown[] } | undefined {
  if (typeof b !== "object" || b === null || Array.isArray(b) || "role" in b || !("messages" in b)) return undefined;
  const other = Object.keys(b).filter((k) => k !== "system" && k !== "messages").sort()[0];
  if (other !== undefined) throw new ApiError(400, "invalid_input", `a request-shaped body holds system and messages only, not ${JSON.stringify(other)}: post the new messages, not the whole request`);
  const { system, messages } = b as { system?: unknown; messages: unknown };
  if (system !== undefined && typeof system !== "string" && !Array.isArray(system)) throw new ApiError(400, "invalid_input", "system must be a string or an array of text blocks");
  if (!Array.isArray(messages)) throw new ApiError(400, "invalid_input", "messages must be an array of Anthropic messages");
  return { system, messages };
}

/** The shape of a messages body: `?format=` absent or `openai` (chat), `openai-responses`, `anthropic` or `ai-sdk` (as foldline serve's `Incoming`). */
function incoming(name: string | null): "openai" | "openai-responses" | "anthropic" | "ai-sdk" {
  if (name === null || name === "openai") return "openai";
  if (name === "openai-responses" || name === "openaiResponses") return "openai-responses";
  if (name === "anthropic") return "anthropic";
  if (name === "ai-sdk" || name === "aiSdk") return "ai-sdk";
  throw new ApiError(400, "invalid_input", `messages are openai (chat), openai-responses, anthropic or ai-sdk, not ${JSON.stringify(name)}`);
}

/** `POST …/answer`: an answer holds the session (and captures the member's compression state) until given back or its lease ends. */
async function answerStart(app: App, id: string, member: string): Promise<Response> {
  await admitted(app, id, member);
  if (await answering(app, id)) throw new ApiError(409, "busy", "another answer holds the session");
  const answer = `answer-${crypto.randomUUID().replaceAll("-", "")}`;
  const holder = `answer:${answer}`;
  if ((await app.o.journal.acquireLease(id, holder, app.answerLeaseMs)) === undefined) {
    throw new ApiError(409, "busy", "a compaction is running; ask again in a moment");
  }
  // The member's compression state enters the run once, here.
  const preferences = app.availability.surface ? (await app.compression.preferences(member)) ?? {} : {};
  const now = Date.now();
  if (!(await app.answers.startAnswer(id, { id: answer, until: now + app.answerLeaseMs, preferences }, now))) {
    // Another handler's answer took the session since it was looked at.
    await app.o.journal.releaseLease(id, holder);
    throw new ApiError(409, "busy", "another answer holds the session");
  }
  return json(201, { answer, expiresInMs: app.answerLeaseMs });
}

/** `GET …/context?format=…[&messages=true]`: the model-bound context; its member-compression passes recorded. */
async function context(app: App, url: URL, id: string, member: string): Promise<Response> {
  onceEach(url);
  await admitted(app, id, member);
  const f = url.searchParams.get("format") ?? "foldline";
  if (!FORMATS.has(f)) throw new ApiError(400, "invalid_input", `unknown format ${JSON.stringify(f)}: foldline, openai, openai-responses, anthropic or ai-sdk`);
  const memberState = await runState(app, id, member);
  const s = await app.compactor.context(id, { format: f as Format, member: memberState });
  if (s.manifest.member && s.manifest.member.passes.length > 0) await app.compression.record(member, id, s.manifest.member.passes);
  const only = ["true", "1"].includes(url.searchParams.get("messages") ?? "");
  return json(200, only ? s.messages : s);
}

/** `GET …/verify`: the chain intact (with the compactor's progress) or broken, naming the rule. */
async function verify(app: App, id: string, member: string): Promise<Response> {
  await admitted(app, id, member);
  try {
    return json(200, { ok: true, resolution: await app.compactor.resolve(id), progress: (await app.o.journal.progress?.(id)) ?? null });
  } catch (e) {
    if (!(e instanceof FoldlineError)) throw e;
    return json(200, { ok: false, error: { code: e.code, message: e.message } });
  }
}
