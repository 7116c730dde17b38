// The driver: an interpreter of the core's compaction loop (`step`). The
// core decides every effect — append a batch at an expected position, store
// the packet, call the model (stream or the one buffered replay), done — and
// the modules of driver/ carry them out against a journal and a model, as
// the Rust host's driver/ does (one file per job, the same names: read,
// run, lease, warm; here also summary, append, and api for the types): the same behaviour by construction, held by the effect
// vectors (tests/vectors/step.json). Also `select` for a model request.
//
// Incremental: a compactor keeps a small state per conversation (the journal
// position it has read to, the events, the verified resolution) and reads only
// what is new; the chain is resolved again only when a chain event (frontier,
// boundary, correction, late delivery) arrived. Safe under concurrency: calls
// that may write are serialized per conversation, every write is a
// compare-and-append at the position the plan was made from, fenced by the
// writer lease's token, and the lease is renewed while a model call runs.

import { FoldlineError } from "./error.js";
import { checkOptions } from "./options.js";
import { validate } from "./ops.js";
import { CONVERSATIONS_KEPT_JS, LEASE_MS } from "./defaults.js";
import { selectContext } from "./driver/context.js";
import type { Format, MessagesOf } from "./types.js";
import type { Compactor, CompactorOptions, ContextOptions } from "./driver/api.js";
import { load, state, type Ctx } from "./driver/read.js";
import { leased, serial } from "./driver/lease.js";
import { drawTimeline, Texts } from "./driver/text.js";
import { drive } from "./driver/loop.js";
import { run } from "./driver/run.js";
import { admitted, appendMessages } from "./driver/append.js";
import { correctTurn } from "./driver/correct.js";
import { checkNewest } from "./driver/newest.js";

export { MESSAGE_OVERHEAD_TOKENS } from "./driver/api.js";
export type {
  AppendMessages, AppendMessagesOptions, Appended, Compactor, CorrectOptions, Corrected, CompactorOptions, ContextOptions, ManualTask, OnMessageResult, RenderedSelection,
} from "./driver/api.js";

/** Build a compactor over a journal and a model. */
export function createCompactor(o: CompactorOptions): Compactor {
  checkOptions("createCompactor", o);
  const c: Ctx = {
    o,
    routeOf: o.route ?? ((id: string) => ({ conversation: id, chat: "", sender: "" })),
    holder: o.holder ?? `js-${Math.random().toString(36).slice(2)}`,
    leaseMs: o.leaseMs ?? LEASE_MS,
    states: new Map(),
    kept: Math.max(1, o.conversationsKept ?? CONVERSATIONS_KEPT_JS),
  };
  // The declaration is checked when the compactor is built (once the core is
  // loaded): a rule it breaks throws `invalid_declaration` naming the rule
  // and its numbers here, not on the first message.
  try {
    validate({ kind: "events", route: c.routeOf(""), events: [], declaration: o.declaration });
  } catch (e) {
    if (!(e instanceof FoldlineError) || e.code !== "not_initialized") throw e;
  }
  let tasks = 0;
  const texts = new Texts(o.timelineTextChars);
  return {
    append: (id, input, options) => appendMessages(c, id, input, options),
    correct: (id, turnId, content, options) => correctTurn(c, id, turnId, content, options?.sender),
    check: (id, input) => checkNewest(c, id, admitted(c, id, input).events, () => []),
    onMessage: (id) => serial(c, id, () => run(c, id, { kind: "automatic" })),
    compactNow: (id, actor, sessionBusy = false) =>
      serial(c, id, () => run(c, id, { kind: "manual", actor, sessionBusy }, { id: `task-${c.holder}-${++tasks}-${Date.now()}` })),
    compactTask: (id, t) =>
      serial(c, id, () => run(c, id, { kind: "manual", actor: t.actor, sessionBusy: t.sessionBusy ?? false }, t)),
    endInterrupted: (id) =>
      serial(c, id, async () => (await leased(c, id, (fence) => drive(c, id, { kind: "automatic" }, fence, { endInterruptedOnly: true }))) !== undefined),
    context<F extends Format = "foldline">(id: string, opts: ContextOptions & { format?: F } = {}) {
      return selectContext<F>(c, id, opts);
    },
    async onMessageAndContext<F extends Format = "foldline">(id: string, opts: ContextOptions & { format?: F } = {}) {
      const outcome = await serial(c, id, () => run(c, id, { kind: "automatic" }));
      // The context is the journal as the check read it (every write of the
      // check's is read back after it, in `appendAt`); after a busy check
      // (another writer holds the conversation and may be writing) it reads
      // again.
      const readNew = outcome.status === "busy";
      return { outcome, context: await selectContext<F>(c, id, opts, readNew) };
    },
    timeline: (id, page) => drawTimeline(c, texts, id, page),
    async position(id) {
      try {
        return (await load(c, id)).s.seq;
      } catch (e) {
        if (!(e instanceof FoldlineError)) throw e; // a rejected chain still has a position
        return state(c, id).seq;
      }
    },
    async resolve(id) {
      return (await load(c, id)).res;
    },
    remembered: () => c.states.size,
  };
}
