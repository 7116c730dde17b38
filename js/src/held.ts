// Events held in the core between calls (`foldline_core::held`): the driver
// sends a conversation's live events once, then only each new one, and
// `step` and `select` run with them in front of the request's own — the same
// answers as sending them every time, without parsing them every time.
//
// What is held lives in the loaded WebAssembly instance, so it is bounded
// here (at most MAX_SLOTS conversations, MAX_BYTES of events in all, least
// recently used dropped first) and sent again after the instance was
// replaced (`generation()`). Whatever cannot be held is sent inline.

import { call } from "./call.js";
import { loadedCore, generation } from "./load.js";
import type { Event, Packet, PlanRequest, SelectRequest, StepRequest } from "./types.js";

/** Conversations held at once. */
export const MAX_SLOTS = 64;
/** JSON bytes of events held in all (a conversation over it is sent inline). */
export const MAX_BYTES = 4 * 1024 * 1024;

/** What one conversation holds in the core. */
export interface Slot {
  /** Its id in the core. */
  id: number;
  /** The instance it was held in. */
  generation: number;
  /** Events held: the first `count` of the driver's list. */
  count: number;
  /** JSON bytes sent. */
  bytes: number;
  /** Id of the warm candidate's packet held, if any. */
  warm?: string;
  /** Key of the view held (the driver's: its chain state's version), if any. */
  view?: string;
  /** Over its share of MAX_BYTES: sent inline until the driver's list is rebuilt. */
  inline?: boolean;
}

const slots = new Map<number, Slot>(); // in order of last use
let nextId = 1;
let heldBytes = 0;

function drop(slot: Slot): void {
  if (slots.delete(slot.id)) heldBytes -= slot.bytes;
  // Also when it never answered: a first call that failed may have left an
  // update held.
  if (slot.generation === generation()) loadedCore().forget(slot.id);
}

/** A new, empty slot for a conversation. */
export function newSlot(): Slot {
  return { id: nextId++, generation: -1, count: 0, bytes: 0 };
}

/** The driver's list was rebuilt: forget what the slot holds, and try to hold the new list on the next call. */
export function rebuiltSlot(slot: Slot): void {
  resetSlot(slot);
  slot.inline = false;
}

/** Let the core drop what a slot holds (its conversation is let go). */
export function releaseSlot(slot: Slot): void {
  resetSlot(slot);
}

/** Forget what a slot holds: the next call sends it all again. */
function resetSlot(slot: Slot): void {
  drop(slot);
  slot.count = 0;
  slot.bytes = 0;
  slot.warm = undefined;
  slot.view = undefined;
}

/** The view's chain state, held under the driver's key for it. */
export interface HeldView {
  key: string;
  view: Omit<PlanRequest, "events" | "trigger" | "warm">;
}

/** A held call: what the core holds before it, the update to apply first, and the slot's bookkeeping once it answered. */
interface HeldCall {
  id: number;
  count: number;
  update: string;
  apply(): void;
}

/**
 * What brings the slot up to `events` (which extend what it holds, unless it
 * was reset), `warm` (`undefined`: as held) and `view`, applied by the call
 * itself; `undefined` when they cannot be held (then send them inline).
 */
function prepare(slot: Slot, events: readonly Event[], warm: Packet | null | undefined, view: HeldView): HeldCall | undefined {
  if (slot.inline) return undefined; // not written out again only to be refused
  if (slot.generation !== generation() || !slots.has(slot.id)) {
    resetSlot(slot);
    slot.generation = generation();
  }
  const live = slots.has(slot.id);
  const fresh = events.slice(slot.count);
  const warmChange = warm !== undefined && (warm?.id ?? undefined) !== slot.warm;
  const viewChange = view.key !== slot.view;
  let update = "";
  if (fresh.length > 0 || warmChange || viewChange || !live) {
    const u: Record<string, unknown> = { reset: !live, events: fresh };
    if (warmChange) {
      if (warm) u.warm = warm;
      else u.clearWarm = true;
    }
    if (viewChange) u.view = { ...view.view, events: [] };
    update = JSON.stringify(u);
    if (slot.bytes + update.length > MAX_BYTES / 4) {
      resetSlot(slot);
      slot.inline = true;
      return undefined;
    }
  }
  return {
    id: slot.id, count: slot.count, update,
    apply() {
      slots.delete(slot.id); // most recently used last; the oldest go first
      slots.set(slot.id, slot);
      slot.count += fresh.length;
      slot.bytes += update.length;
      heldBytes += update.length;
      if (warmChange) slot.warm = warm?.id;
      slot.view = view.key;
      for (const old of slots.values()) {
        if (slots.size <= MAX_SLOTS && heldBytes <= MAX_BYTES) break;
        if (old !== slot) drop(old);
      }
    },
  };
}

/** The call through the held slot; any error leaves nothing held (the next call sends it all again). */
function through<T>(slot: Slot, held: HeldCall, entry: string, request: unknown): T {
  try {
    const out = call<T>(entry, request, held);
    held.apply();
    return out;
  } catch (e) {
    resetSlot(slot);
    throw e;
  }
}

/**
 * `step` with its view held in `slot` (`key` names the view's chain state:
 * the same key, the same declaration, route, owner, frontier, head and
 * amendment): a starting step then sends no view at all.
 */
export function stepHeld<T>(slot: Slot, request: StepRequest, key: string): T {
  const view = request.view;
  if (!view) return call<T>("step", request);
  const { events, trigger: _trigger, warm, ...rest } = view;
  const held = prepare(slot, events, warm ?? null, { key, view: rest });
  if (!held) return call<T>("step", request);
  const { view: _view, ...without } = request;
  return through<T>(slot, held, "step", without);
}

/**
 * `select` with its events and `view` held in `slot`: the held `context`
 * entry, which takes only the options. `view` is the one `step` holds under
 * the same key (the driver's `chainView`), whichever call holds it first.
 */
export function selectHeld<T>(slot: Slot, request: SelectRequest, view: HeldView): T {
  const { events, prompt, promptSender, format, limit, render, member } = request;
  const held = prepare(slot, events, undefined, view);
  return held ? through<T>(slot, held, "context", { prompt, promptSender: promptSender ?? null, format, limit, render, member: member ?? null }) : call<T>("select", request);
}
