// The room members' compression fragments take beside the pinned turns,
// for admission: while the deployment's surface exists every context
// carries them and the plan keeps them room, so admitted pinned turns must
// leave it too, or no compaction could ever fit beside them. Measured by
// the core's own `select` over every member state (the largest is the
// room `plan` keeps); the Rust driver's `fragments_turn` (append.rs).

import { FoldlineError } from "../error.js";
import { select, validate } from "../ops.js";
import type { Event, ValidateRequest } from "../types.js";
import type { Ctx } from "./read.js";

const measured = new WeakMap<Ctx, number>();

/** The fragments' room in the declaration's metric (0 while the surface is off). */
function room(c: Ctx): number {
  const known = measured.get(c);
  if (known !== undefined) return known;
  const availability = c.o.compression;
  let most = 0;
  if (availability?.surface) {
    const probe: Event = { type: "message", conversation: "room", sourceSeq: 1, index: 0, turnId: "room-1", role: "user", parts: [{ type: "text", text: "?" }] };
    for (let bits = 0; bits < 16; bits++) {
      const preferences = { master: (bits & 1) > 0, toolResult: (bits & 2) > 0, plainSpeak: (bits & 4) > 0, promptTrim: (bits & 8) > 0 };
      const s = select({ declaration: c.o.declaration, route: { conversation: "room" }, events: [probe], render: false, member: { availability, preferences } });
      most = Math.max(most, s.manifest.sizes.member ?? 0);
    }
  }
  measured.set(c, most);
  return most;
}

/** The members' fragments' room as a pinned turn's metadata (none while the surface is off). */
export function fragments(c: Ctx, id: string): Event[] {
  const r = room(c);
  const route = c.routeOf(id);
  return r > 0
    ? [{ type: "turnMeta", conversation: route.conversation, ...(route.chat ? { chat: route.chat } : {}), sourceSeq: 0, index: 0, turnId: "member-fragments", role: "system", chars: r, tokens: r, contentHash: "sha256:" }]
    : [];
}

/**
 * The append check of `events` beside the conversation's `pinned` turns and
 * the members' fragments' room: `pinned_too_large` says the room was counted.
 */
export function checkBesidePinned(c: Ctx, id: string, events: Event[], pinned: Event[]): void {
  const r = room(c);
  const route = c.routeOf(id);
  const request: ValidateRequest = { kind: "events", route, events, declaration: c.o.declaration, pinned: [...pinned, ...fragments(c, id)] };
  try {
    validate(request);
  } catch (e) {
    if (r > 0 && e instanceof FoldlineError && e.code === "pinned_too_large") {
      throw new FoldlineError({ code: e.code, message: `${e.message.replace(/^[a-z_]+: /, "")} (counted with the room members' compression fragments take beside them)`, ids: e.ids });
    }
    throw e;
  }
}
