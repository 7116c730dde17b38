// The model-bound context a compactor answers: the core's `select` over
// what the compactor has read, within its limit as the host counts (the
// texts the core measures by its estimate counted too), and a member's
// context that finds no room for their compression's fragments sent
// without them. host-wasmtime/src/driver/context.rs is its twin.

import { FoldlineError } from "../error.js";
import { selectHeld } from "../held.js";
import type { Format, MemberInput, MessagesOf } from "../types.js";
import type { ContextOptions, RenderedSelection } from "./api.js";
import { chainView, load, viewKey, type Ctx } from "./read.js";
import { uncounted } from "./tokens.js";

/** Whether a `select` failed for lack of room: the pinned turns, the envelopes and the prompt over the limit, or the newest turn past what they leave. */
const noRoom = (e: unknown) => e instanceof FoldlineError && (e.code === "over_budget" || e.code === "tail_turn_too_large");

/**
 * The model-bound context of a conversation, from its state read to the
 * journal's end. A member's context that finds no room for their
 * compression's fragments beside the pinned turns and the newest turn (a
 * conversation admitted before the members' surface existed, whose
 * admission left the fragments no room) goes without the member's state,
 * as every context went before — its manifest then carries no `member` —
 * rather than fail every time the member writes.
 */
export async function selectContext<F extends Format = "foldline">(c: Ctx, id: string, opts: ContextOptions & { format?: F }, readNew = true): Promise<RenderedSelection<MessagesOf[F]>> {
  const { s, events, res } = await load(c, id, readNew);
  const format = opts.format ?? "foldline";
  const route = c.routeOf(id);
  const owner = c.o.owner?.(id) ?? null;
  const view = chainView(c, res, route, owner);
  // `messages` is there unless `render: false` (the second overload).
  const within = (limit: number | null, member: MemberInput | null) => selectHeld<RenderedSelection<MessagesOf[F]>>(s.held, {
    declaration: view.declaration, route, frontier: view.frontier, head: view.head,
    amendment: view.amendment, events, prompt: opts.prompt ?? null, promptSender: opts.promptSender ?? null, format,
    limit, render: opts.render ?? true, member,
    carried: view.carried,
  }, { key: viewKey(s, route, owner), view });
  const counted = (member: MemberInput | null) => {
    const sel = within(opts.limit ?? null, member);
    const m = sel.manifest;
    const excess = m.metric === "tokens" ? uncounted(c, view.head ?? view.carried, view.amendment, opts.prompt) : 0;
    // As the host counts, the texts the core estimates (the summary, the
    // amendment, the prompt) put the context over its limit: it is selected
    // again within the limit less their excess (when the pinned turns, the
    // summary and the prompt leave the newest turn room there; else it goes
    // as it was).
    if (excess === 0 || m.sizes.total + excess <= m.limit) return sel;
    try {
      return within(Math.max(0, m.limit - excess), member);
    } catch (e) {
      if (noRoom(e)) return sel;
      throw e;
    }
  };
  try {
    return counted(opts.member ?? null);
  } catch (e) {
    if (opts.member && noRoom(e)) return counted(null);
    throw e;
  }
}
