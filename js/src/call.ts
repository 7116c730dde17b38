// One core call, for the package's modules (not exported to users): the
// request crosses as JSON text, the answer comes back as the envelope.

import { loadedCore, release } from "./load.js";
import { FoldlineError } from "./error.js";
import type { ErrorValue } from "./types.js";

type Envelope<T> = { ok: T } | { error: ErrorValue };

/**
 * One core call: the request crosses as JSON text and the answer comes back
 * as JSON text, parsed here. The core never calls back into JavaScript
 * during a call — Node 20's V8 crashes (a fatal "unreachable code" in
 * `Deoptimizer::DoComputeBuiltinContinuation`) when optimized code that
 * inlined a call into WebAssembly is deoptimized by objects created while
 * that call runs, which is what parsing the answer inside the call did.
 * With `held`, what is held under `id` (`count` events before `update` is
 * applied) goes in front of the request's own (`held.ts`).
 */
export function call<T>(entry: string, request: unknown, held?: { id: number; count: number; update: string }): T {
  let text: string | undefined;
  try {
    text = JSON.stringify(request);
  } catch (e) {
    throw new FoldlineError({ code: "invalid_request", message: `the request is not JSON: ${(e as Error).message}` });
  }
  if (typeof text !== "string") throw new FoldlineError({ code: "invalid_request", message: "the request is not JSON" });
  return callText(entry, text, held);
}

/** {@link call} with the request already written as JSON text. */
export function callText<T>(entry: string, text: string, held?: { id: number; count: number; update: string }): T {
  const answer = held ? loadedCore().callHeld(held.id, held.count, entry, text, held.update) : loadedCore().call(entry, text);
  release();
  const e = JSON.parse(answer) as Envelope<T>;
  if ("error" in e) throw new FoldlineError(e.error);
  return e.ok;
}

