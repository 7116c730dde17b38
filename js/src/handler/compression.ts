// Member compression's routes and the state a run captures: availability,
// each member's opt-ins (off until set), the settings view. The Rust
// server's compression.rs.

import { settingsProjection } from "../ops.js";
import type { MemberInput, Preferences } from "../types.js";
import { ApiError, json } from "./reply.js";
import type { App } from "./state.js";

const PREFERENCE_FIELDS = ["master", "toolResult", "plainSpeak", "promptTrim"] as const;

/** A `PUT …/compression` body: only the four booleans. */
export function preferencesOf(b: unknown): Preferences {
  if (typeof b !== "object" || b === null || Array.isArray(b)) throw new ApiError(400, "invalid_input", "compression preferences: an object is needed (fields: master, toolResult, plainSpeak, promptTrim)");
  const out: Preferences = {};
  for (const [k, v] of Object.entries(b)) {
    if (!(PREFERENCE_FIELDS as readonly string[]).includes(k)) throw new ApiError(400, "invalid_input", `compression preferences: unknown field ${JSON.stringify(k)} (fields: master, toolResult, plainSpeak, promptTrim)`);
    if (typeof v !== "boolean") throw new ApiError(400, "invalid_input", `compression preferences: ${k} must be true or false`);
    out[k as (typeof PREFERENCE_FIELDS)[number]] = v;
  }
  return out;
}

export function surface(app: App): void {
  if (!app.availability.surface) throw new ApiError(404, "not_available", "member compression is not available on this server (MEMBER_COMPRESSION_ENABLED)");
}

/** The state a run uses: what the answer holding the session captured at its start, else the member's current opt-ins. */
export async function runState(app: App, id: string, member: string): Promise<MemberInput | undefined> {
  if (!app.availability.surface) return undefined;
  const a = await app.answers.answer(id, Date.now());
  const preferences = a ? a.preferences : (await app.compression.preferences(member)) ?? {};
  return { availability: app.availability, preferences };
}

export async function preferencesView(app: App, p: Preferences): Promise<Response> {
  // Every field, each false unless set, as foldline serve answers.
  const availability = { surface: false, toolResult: false, plainSpeak: false, promptTrim: false, ...app.availability };
  const preferences = { master: false, toolResult: false, plainSpeak: false, promptTrim: false, ...p };
  return json(200, { availability, preferences, state: settingsProjection({ availability, preferences }).state });
}
