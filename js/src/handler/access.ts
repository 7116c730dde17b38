// Who may do what: the caller from its bearer token, conversation ids and
// path segments, the owner and room checks, the request body within the
// limit. The Rust server's access.rs.

import { BODY_DEPTH } from "../defaults.js";
import { ApiError } from "./reply.js";
import type { App } from "./state.js";

/** The SHA-256 of `text` (UTF-8), in hex. */
export async function sha256Hex(text: string): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Equal strings, compared in full (timing says nothing about a near match). */
function same(a: string, b: string): boolean {
  let d = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) d |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0);
  return d === 0;
}

export const ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A path segment, percent-decoded; escapes that are not UTF-8 are refused (`invalid_input`), never a 500. */
export function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ApiError(400, "invalid_input", "the request's path cannot be read (percent-escapes must be UTF-8)");
  }
}
export async function caller(app: App, req: Request): Promise<string> {
  // The scheme is case-insensitive (RFC 9110, section 11.1).
  const m = /^\s*bearer\s+(.+)$/i.exec(req.headers.get("authorization") ?? "");
  const token = m ? m[1].trim() : undefined;
  if (token) {
    const hash = await sha256Hex(token);
    let found: string | undefined;
    for (const m of app.members) if (same(m.tokenSha256, hash)) found = m.id;
    if (found) return found;
  }
  throw unauthorized();
}

/** The refusal of a request without a member's token (`401 unauthorized`). */
function unauthorized(): ApiError {
  return new ApiError(401, "unauthorized", "a member's bearer token is needed: Authorization: Bearer <token>");
}

/**
 * Refuse a query parameter given more than once (`?format=openai&format=anthropic`):
 * `400 invalid_input` naming it, rather than one of its values chosen (the
 * Rust server refuses it the same way).
 */
export function onceEach(url: URL): void {
  const seen = new Set<string>();
  for (const k of url.searchParams.keys()) {
    if (seen.has(k)) throw new ApiError(400, "invalid_input", `${k} is given more than once`);
    seen.add(k);
  }
}

export function checkId(id: string): void {
  if (!ID.test(id) || id === "." || id === "..") throw new ApiError(400, "invalid_input", "a conversation id is 1 to 128 of A-Z a-z 0-9 . _ : -, other than . and ..");
}

export async function owned(app: App, id: string, member: string): Promise<void> {
  checkId(id);
  const owner = await app.owners.get(id);
  if (owner === undefined) throw new ApiError(404, "not_found", `no conversation ${JSON.stringify(id)}`);
  if (owner !== member) throw new ApiError(403, "not_owner", "this conversation belongs to another member");
}

/** The owner or a member of the conversation's room. */
/**
 * A long poll that waited, admitted again before it answers what was
 * written meanwhile: a member no longer among the handler's members is
 * refused (`unauthorized`), one let out of the room too (`not_owner`),
 * never sent what came after (foldline serve's `still_admitted`).
 */
export async function stillAdmitted(app: App, id: string, member: string): Promise<void> {
  if (!app.members.some((m) => m.id === member)) throw unauthorized();
  await admitted(app, id, member);
}

export async function admitted(app: App, id: string, member: string): Promise<void> {
  try {
    await owned(app, id, member);
  } catch (e) {
    if (!(e instanceof ApiError) || e.code !== "not_owner" || !(await app.owners.room(id)).includes(member)) throw e;
  }
}

export async function body(app: App, req: Request): Promise<unknown> {
  const declared = Number(req.headers.get("content-length") ?? "0");
  const tooLarge = () => new ApiError(413, "body_too_large", "the request body is larger than the server's limit");
  if (declared > app.bodyLimit) throw tooLarge();
  const text = await req.text();
  if (new TextEncoder().encode(text).length > app.bodyLimit) throw tooLarge();
  if (nesting(text) > BODY_DEPTH) throw new ApiError(400, "invalid_input", `the body nests arrays and objects deeper than ${BODY_DEPTH}`);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, "invalid_input", `the body is not JSON: ${(e as Error).message}`);
  }
  // What foldline serve's parser refuses, JSON.parse reads: a number past
  // the largest double (`1e400`, Infinity here) and a lone surrogate's
  // escape (`"\ud800"`), in a value or in a key the message does not use.
  const odd = unreadable(v);
  if (odd) throw new ApiError(400, "invalid_input", `the body is not JSON: ${odd}`);
  return v;
}

/**
 * The deepest nesting of arrays and objects in JSON text, strings skipped:
 * a limit both servers apply before parsing (the Rust server's `nesting`),
 * so they refuse the same bodies (their JSON parsers stop at different depths).
 */
export function nesting(text: string): number {
  let depth = 0, deepest = 0, inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash: the next unit is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (c === 0x5d || c === 0x7d) depth = Math.max(0, depth - 1);
  }
  return deepest;
}

const LONE_SURROGATE = /\p{Cs}/u;

/** What in a parsed value foldline serve's parser would refuse, if anything (walked without recursion). */
function unreadable(v: unknown): string | undefined {
  const stack = [v];
  while (stack.length > 0) {
    const x = stack.pop();
    if (typeof x === "number" && !Number.isFinite(x)) return "a number is out of range";
    if (typeof x === "string" && LONE_SURROGATE.test(x)) return "a string holds a lone surrogate";
    if (typeof x === "object" && x !== null) {
      for (const [k, y] of Object.entries(x)) {
        if (LONE_SURROGATE.test(k)) return "a key holds a lone surrogate";
        stack.push(y);
      }
    }
  }
  return undefined;
}
