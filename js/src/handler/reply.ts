// Answers: the typed API error, the HTTP status of every stable code (one
// table with the Rust server: tests/http/status.json), JSON bodies, and a
// failure as its answer (a 500 says nothing of its cause; the log does).

import { FoldlineError } from "../error.js";

/** A refusal with its HTTP status and stable code. */
export class ApiError extends Error {
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
    case "not_owner": case "not_author": return 403;
    case "not_found": return 404;
    case "body_too_large": case "turn_too_large": case "pinned_too_large": return 413;
    case "timeout": return 408;
    case "method_not_allowed": return 405;
    case "rate_limited": return 429;
    case "session_busy": case "nothing_to_fold": case "busy": case "conflict": case "fork": case "lease_lost": case "shutting_down": return 409;
    case "invalid_input": case "invalid_request": case "wrong_route": case "conflicting_turn": return 400;
    case "journal": case "io": case "trap": case "malformed_output": case "load_failed": case "unsupported_version":
    case "fuel_exhausted": case "time_limit": case "memory_limit": case "model": return 500;
    default: return 422;
  }
}

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

/** Any error as its answer. */
export function failure(e: unknown): Response {
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
