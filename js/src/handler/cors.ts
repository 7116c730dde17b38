// Calls from pages of other origins (`allowOrigins`): the twin of the Rust
// server's serve/cors.rs (tower-http's `CorsLayer`), header for header, so a
// page meets the same answers from both servers. A page's requests carry a
// bearer token, so the browser asks first (a preflight `OPTIONS`) and reads
// an answer only when it names the page's origin. Given no origins, no CORS
// header at all: pages of the handler's own origin only.

import { FoldlineError } from "../error.js";

/** The methods of the routes. */
const METHODS = "GET,POST,PUT,DELETE";
/** What a page may send: its token, its body's type, an idempotency key, the ETag of the timeline it holds, the last task event it saw. */
const REQUEST_HEADERS = "authorization,content-type,idempotency-key,if-none-match,last-event-id";
/** What a page may read beside a body: the timeline's ETag, whether an append was a replay, when to ask again after `429`. */
const ANSWER_HEADERS = "etag,idempotent-replayed,retry-after";
/** Every answer varies with these (tower-http's default). */
const VARY = "origin, access-control-request-method, access-control-request-headers";
/** How long a browser may keep a preflight's answer, in seconds. */
const PREFLIGHT_KEPT = "600";
/** An origin as a browser sends it: `http` or `https`, `://`, a host and an optional port, nothing after. */
const ORIGIN = /^https?:\/\/[a-z0-9\-._:[\]]+$/;

/** The origins a handler lets call it. */
export interface Cors { any: boolean; origins: ReadonlySet<string> }

/**
 * `origins` checked as the Rust server checks them (each `scheme://host[:port]`,
 * or `*` for any; in ASCII lower case, as browsers send them), `undefined`
 * for none.
 */
export function corsOf(origins: readonly string[] | undefined): Cors | undefined {
  if (origins === undefined) return undefined;
  if (!Array.isArray(origins) || origins.some((o) => typeof o !== "string")) {
    throw new FoldlineError({ code: "invalid_request", message: "createHandler: allowOrigins must be an array of origins (strings)" });
  }
  const list = new Set<string>();
  for (const o of origins) {
    if (o === "*") continue;
    // ASCII only, as the Rust server: `toLowerCase` maps some non-ASCII letters (the Kelvin sign) to ASCII ones.
    const lower = o.replace(/[A-Z]/g, (c: string) => c.toLowerCase());
    if (!ORIGIN.test(lower) || lower.endsWith(":")) {
      throw new FoldlineError({
        code: "invalid_request",
        message: `createHandler: allowed origin ${JSON.stringify(o)} is not an origin: scheme://host[:port] as a browser sends it (http or https, nothing after the port), or * for any`,
      });
    }
    list.add(lower);
  }
  return origins.length === 0 ? undefined : { any: origins.includes("*"), origins: list };
}

/** `answer`'s response with the CORS headers for `req`; a preflight answered here. */
export async function withCors(cors: Cors, req: Request, answer: () => Promise<Response>): Promise<Response> {
  const origin = req.headers.get("origin");
  const allowed = cors.any ? "*" : origin !== null && cors.origins.has(origin) ? origin : undefined;
  if (req.method === "OPTIONS") {
    const headers = new Headers({
      vary: VARY,
      "access-control-allow-methods": METHODS,
      "access-control-allow-headers": REQUEST_HEADERS,
      "access-control-max-age": PREFLIGHT_KEPT,
    });
    if (allowed !== undefined) headers.set("access-control-allow-origin", allowed);
    return new Response(null, { status: 200, headers });
  }
  const r = await answer();
  const headers = new Headers(r.headers);
  headers.append("vary", VARY);
  headers.set("access-control-expose-headers", ANSWER_HEADERS);
  if (allowed !== undefined) headers.set("access-control-allow-origin", allowed);
  return new Response(r.body, { status: r.status, statusText: r.statusText, headers });
}
