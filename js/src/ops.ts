// The core's entry points, each one call into the loaded .wasm: a typed
// value back, or a FoldlineError with the core's stable code. The package's
// face (core.ts) re-exports them; the drivers, journals and handler import
// them from here, so nothing inside the package depends on its face.

import { FoldlineError } from "./error.js";
import { loadedCore, release } from "./load.js";
import { call } from "./call.js";
import type {
  PlanRequest, StepRequest, Step, PlanOutcome, ValidateRequest, ValidateResponse, SelectRequest,
  Selection, Timeline, TimelinePage, Event, TrimResult, Format, MessagesOf, ToolResultRequest, ToolResultResponse, SettingsRequest,
  SettingsResponse,
} from "./types.js";

/** Crate, ruleset and ABI versions of the loaded core. */
export function version(): { crate: string; ruleset: string; abi: { major: number; minor: number } } {
  return JSON.parse(loadedCore().version());
}

/** `plan`: when to compact and exactly what to freeze. Refusals come back as `outcome: "refuse"`. */
export function plan(request: PlanRequest): PlanOutcome {
  return call<PlanOutcome>("plan", request);
}

/**
 * `step`: the compaction loop, one effect at a time. Feed what was read
 * (`view`, `seq`) or the result of the last effect (`last`, with the state the
 * last step answered); do the effect it answers, until `done`.
 */
export function step(request: StepRequest): Step {
  return call<Step>("step", request);
}

/** `validate`: settle, resolve, declarations, stream decisions, failure classification. */
export function validate(request: ValidateRequest): ValidateResponse {
  return call<ValidateResponse>("validate", request);
}

/** `select`: the model-bound context and its manifest. */
export function select<F extends Format = "foldline">(request: SelectRequest & { format?: F }): Selection<MessagesOf[F]> {
  return call<Selection<MessagesOf[F]>>("select", request);
}

/**
 * The chat timeline: messages and dividers, derived only from durable events.
 * With `accepted` (a resolution's `accepted` ids), only those boundaries draw
 * as completed dividers; without it, only boundaries that hold together on
 * their own (hash matches content, linked to a drawn previous boundary, no
 * other boundary in their chain slot) — a tampered or forked one never draws.
 * `retired` (a resolution's `retiredBoundaries`, with `accepted`): those of
 * them that hold together draw too, marked `retired` — an upgrade does not
 * make history disappear from the chat.
 */
export function timeline(events: Event[], accepted?: string[], retired?: string[], page: TimelinePage = {}): Timeline {
  const { limit, before } = page;
  return call<Timeline>("timeline", { events, ...(accepted ? { accepted, ...(retired?.length ? { retired } : {}) } : {}), limit, before });
}

/** Prompt trim of the model-bound copy of a member's message. */
export function trimPrompt(text: string): TrimResult {
  return call<TrimResult>("trimPrompt", { text });
}

/** Tool-result compression of the model-bound copy. */
export function compressToolResult(request: ToolResultRequest): ToolResultResponse {
  return call<ToolResultResponse>("compressToolResult", request);
}

/** The settings projection, plain-speak fragment and self-inspection answer. */
export function settingsProjection(request: SettingsRequest): SettingsResponse {
  return call<SettingsResponse>("settings", request);
}

/** Any entry point, JSON string in and canonical JSON string out (the conformance path). */
export function callJson(entry: string, request: string): string {
  if (typeof entry !== "string" || typeof request !== "string") {
    throw new FoldlineError({ code: "invalid_request", message: "callJson takes the entry point's name and the request as JSON text (two strings)" });
  }
  const answer = loadedCore().call(entry, request);
  release();
  return answer;
}
