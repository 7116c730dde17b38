// The driver: an interpreter of the core's compaction loop (`step`). The
// core decides every effect — append a batch at an expected position, store
// the packet, call the model (stream or the one buffered replay), done — and
// this file carries them out against a journal and a model, as the Rust
// host's driver does: the same behaviour by construction, held by the effect
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
import { timeline, validate } from "./ops.js";
import { LEASE_MS, MODEL_TIMEOUT_MS, WARM_LEASE_MS } from "./defaults.js";
import { newSlot, rebuiltSlot, selectHeld, stepHeld, type Slot } from "./held.js";
import type {
  Code, Declaration, Event, MessagesOf, Format, Packet, Part, PlanOutcome, PlanRequest, Resolution, Route, Selection, Timeline,
  FailureReport, Boundary, Trigger, InputTurn, Verified, EffectResult, Finished, LoopState, ModelOutput, Run, StepRequest, Step, MemberInput,
} from "./types.js";
import type { Journal } from "./journal/journal.js";
import { eventsOf, turnIdOf, type AiSdkMessage, type AnthropicMessage, type OpenAiChatMessage } from "./convert.js";
import { failureKindOf, type Model, type ModelResult } from "./model/model.js";

export interface CompactorOptions {
  journal: Journal;
  model: Model;
  declaration: Declaration;
  /** The compactor declaration, checked for agreement on every resolve (default: the target's, under the compactor role). */
  compactorDeclaration?: Declaration;
  /** Route of a conversation (default: `{ conversation: id }`). */
  route?: (conversationId: string) => Route;
  /** Owner of a conversation, for manual requests. */
  owner?: (conversationId: string) => string | undefined;
  /** Writer-lease holder id (renewed while work runs). */
  holder?: string;
  /** The writer lease's time to live, in milliseconds (default 120,000, as the Rust driver's: `LEASE_MS`). */
  leaseMs?: number;
  /** Deadline of one model call (default 120,000 ms); a hanging model cannot hold the lease forever. */
  modelTimeoutMs?: number;
  /** Receives the audit reason of each failure (never member-facing). */
  audit?: (conversationId: string, report: FailureReport) => void;
  /**
   * Warm candidates (seed 002, default on): between the soft and eager
   * thresholds a candidate packet is persisted and summarized off the
   * critical path, under its own lease; when compaction is due and the core
   * finds the candidate still valid, its verified summary is used, so the
   * message that needs compaction does not pay for the model call.
   */
  warmCandidates?: boolean;
  /** Lease of a warm candidate's preparation (default 900,000 ms). */
  warmLeaseMs?: number;
  /**
   * Count a text's tokens (js-tiktoken, gpt-tokenizer, a provider's counter):
   * `append` records each turn's count, so token budgets use real counts
   * instead of the four-characters-a-token estimate.
   */
  countTokens?: (text: string) => number;
  /**
   * Tokens of framing each message costs beside its content (role, message
   * separators) when `countTokens` counts: added to every counted turn
   * (default {@link MESSAGE_OVERHEAD_TOKENS}, the core's own estimate's
   * overhead; OpenAI's chat framing is 3 per message). Set it to your
   * provider's framing.
   */
  messageOverheadTokens?: number;
}

/** Per-message framing added to host token counts by default: 4, as the core's estimate adds. */
export const MESSAGE_OVERHEAD_TOKENS = 4;

/** Messages `append` takes: OpenAI chat (default), Anthropic, or AI SDK `ModelMessage`s. */
export type AppendMessages =
  | { format?: "openai"; messages: OpenAiChatMessage | readonly OpenAiChatMessage[] }
  | { format: "anthropic"; messages: AnthropicMessage | readonly AnthropicMessage[]; system?: string }
  | { format: "ai-sdk"; messages: AiSdkMessage | readonly AiSdkMessage[] };

/** A context whose messages were rendered (`render` not `false`). */
export type RenderedSelection<M> = Selection<M> & { messages: M };

export type OnMessageResult =
  | { status: "busy" }
  | { status: "skipped" | "paused" | "warm"; outcome: PlanOutcome }
  | { status: "compacted"; boundary: Boundary }
  | { status: "refused"; code: Code; message: string }
  | { status: "failed"; notice: string };

/** A manual compaction task with a caller-chosen id (a server hands the id out before the work ends). */
export interface ManualTask {
  /** Unique within the conversation. */
  id: string;
  /** Who asked. */
  actor: string;
  /** Whether an answer owns the session now. */
  sessionBusy?: boolean;
  /** Called with the journal position of the task's durable `requested` event, once written. */
  onAccepted?: (seq: number) => void;
}

/** Options of `context`. */
export interface ContextOptions {
  /** The messages' shape: `foldline` (default), `openai`, `anthropic`, `ai-sdk` (or `aiSdk`). */
  format?: Format;
  /** The member's current prompt, rendered last and reserved first. */
  prompt?: Part[];
  /** A smaller budget than the declaration's for this context, in its unit (characters or tokens). */
  limit?: number;
  /** `false`: the manifest only, no messages rendered (what would be sent, cheaply). */
  render?: boolean;
  /**
   * The member's compression state, captured once when this run started
   * (availability and the member's opt-ins): the model-bound copy is shaped
   * (prompt trim, `run_code` result compression, the plain-speak fragment),
   * the settings projection follows the pinned turns, `manifest.member` has
   * one measurement per pass, and a settings question gets `answer`. The
   * journal is never touched.
   */
  member?: MemberInput;
}

/** Options of `append`. */
export interface AppendMessagesOptions {
  /**
   * An idempotency key (1 to 128 of `A-Z a-z 0-9 . _ : -`), written with the
   * batch in the same atomic append (each message's turn id ends `@<key>`):
   * a retry with the same key and messages writes nothing again and answers
   * as the first time (`replayed`); with other messages it is
   * `idempotency_key_reused`. Recognized for the latest 4,096 keyed appends
   * of a conversation, also across compactors and restarts (it is read back
   * from the journal).
   */
  idempotencyKey?: string;
  /** Who sent the messages (a room's member; written as each message's `sender`). */
  sender?: string;
}

/** What `append` did. */
export interface Appended {
  /** Journal position of the batch's last event. */
  seq: number;
  /** The events written (none when `replayed`). */
  events: Event[];
  /** Messages the append holds (the first append's count when `replayed`). */
  count: number;
  /** A retry under an idempotency key already written: nothing new was written. */
  replayed: boolean;
}

/** How many keyed appends per conversation a retry is recognized for. */
const KEPT_KEYS = 4096;
const KEY = /^[A-Za-z0-9._:-]{1,128}$/;

export interface Compactor {
  /**
   * Append messages to the journal as the conversation's next turns
   * (numbered after its last one; checked, nothing written on bad input;
   * compare-and-append, so concurrent appends never collide). OpenAI chat
   * messages directly, or `{ format: "anthropic" | "ai-sdk", messages }`.
   * Returns the journal position and the events written.
   */
  append(conversationId: string, messages: OpenAiChatMessage | readonly OpenAiChatMessage[] | AppendMessages, options?: AppendMessagesOptions): Promise<Appended>;
  /**
   * Check messages as `append` would, without reading or writing anything:
   * they convert, and each is one a compaction could take under the
   * declaration (else `turn_too_large`, naming it). Throws the typed error.
   */
  check(conversationId: string, messages: OpenAiChatMessage | readonly OpenAiChatMessage[] | AppendMessages): void;
  /** On a new message: compact if the budget says so. Overlapping calls for one conversation run one after another. */
  onMessage(conversationId: string): Promise<OnMessageResult>;
  /** A member's `/compact`. */
  compactNow(conversationId: string, actor: string, sessionBusy?: boolean): Promise<OnMessageResult>;
  /**
   * A manual task: as `compactNow`, with the task's id chosen by the caller
   * and `onAccepted` called once its `requested` event is durable. A refusal
   * (`not_owner`, `session_busy`, `nothing_to_fold`) writes nothing.
   */
  compactTask(conversationId: string, task: ManualTask): Promise<OnMessageResult>;
  /**
   * End the manual tasks whose run was interrupted (a crash between
   * `requested` and its end) with a durable `failed` event, under the writer
   * lease. `false`: another writer holds the conversation (its task may be running).
   */
  endInterrupted(conversationId: string): Promise<boolean>;
  /** The model-bound context. */
  context<F extends Format = "foldline">(conversationId: string, options?: ContextOptions & { format?: F; render?: true }): Promise<RenderedSelection<MessagesOf[F]>>;
  /** The manifest only when `render` is `false`. */
  context<F extends Format = "foldline">(conversationId: string, options: ContextOptions & { format?: F; render: boolean }): Promise<Selection<MessagesOf[F]>>;
  /** The chat timeline; only boundaries the resolved chain accepts draw as completed. */
  timeline(conversationId: string): Promise<Timeline>;
  /** The resolved chain. */
  resolve(conversationId: string): Promise<Resolution>;
}

const PINNED_ROLES = new Set(["system", "developer", "document"]);
const CHAIN_TYPES = new Set(["frontier", "boundary", "correction", "lateDelivery"]);

/** What a compactor keeps of the chain prefix it verified. */
interface VerifiedPrefix {
  /** The head, in full, and its position in the chain. */
  head?: { boundary: Boundary; length: number };
  /** Every accepted boundary id, oldest first. */
  accepted: string[];
  /** What the prefix holds for each covered turn (a frozen turn, or a later boundary's absorbed entry). */
  covered: Map<string, InputTurn>;
}

/** The core's request form of a verified prefix: its head and the snapshot of the turns `chain` touches. */
function verifiedRequest(v: VerifiedPrefix, chain: Event[]): Verified | null {
  if (!v.head) return null;
  const turns: InputTurn[] = [];
  for (const e of chain) {
    const t = e.type === "correction" || e.type === "lateDelivery" ? v.covered.get(e.turnId) : undefined;
    if (t) turns.push(t);
  }
  return { boundary: v.head.boundary, length: v.head.length, turns };
}

/**
 * Take in a resolution from the prefix: its new boundaries leave `chain`,
 * their turns join `covered`, and the answer lists every accepted id again.
 */
function extendVerified(v: VerifiedPrefix, chain: Event[], r: Resolution): Event[] {
  const fresh = new Set(r.accepted.slice(v.head ? 1 : 0));
  for (const e of chain) {
    if (e.type !== "boundary" || !fresh.has(e.id)) continue;
    for (const t of e.input.turns) v.covered.set(t.turnId, t);
    for (const a of e.absorbed) v.covered.set(a.turnId, { turnId: a.turnId, sourceSeq: a.sourceSeq, role: a.role, contentHash: a.contentHash });
    if (r.head?.boundaryId === e.id) {
      const { type: _type, ...boundary } = e;
      v.head = { boundary, length: r.head.length };
    }
  }
  v.accepted.push(...fresh);
  r.accepted = [...v.accepted];
  return chain.filter((e) => e.type !== "boundary" || !fresh.has(e.id));
}

/** What a compactor keeps of one conversation between calls. */
interface State {
  /** Journal position read to. */
  seq: number;
  /** Events plan and select need: pinned turns, turns after the head, corrections, failures, tasks. */
  recent: Event[];
  /** `recent` as held in the core (sent once, then only what is new). */
  held: Slot;
  /** Frontiers, boundaries, corrections and late deliveries: what resolve needs. */
  chain: Event[];
  /** Frontiers and boundaries read so far (a conflict that brought one means another writer moved the chain head). */
  chainEvents: number;
  /** The verified resolution, until a chain event arrives. */
  res?: Resolution;
  /** Counts the resolutions taken in: names the chain state a held view was made from. */
  resolutions: number;
  /** Reads run one after another. */
  reading: Promise<unknown>;
  /** Writers run one after another. */
  writing: Promise<unknown>;
  /** Appends of messages run one after another (not behind a compaction). */
  appending: Promise<unknown>;
  /** Highest source sequence of a turn read so far. */
  sourceSeq: number;
  /** The latest keyed appends read (oldest first): key → last journal position, content hashes. */
  keys: Map<string, { seq: number; hashes: string[] }>;
  /** The chain prefix verified so far: resolve starts from its head, so its boundaries leave `chain`. */
  verified: VerifiedPrefix;
  /** Manual tasks requested and not yet ended. */
  openTasks: Map<string, Extract<Event, { type: "compactionTask" }>>;
  /** The warm candidate: its packet, and its verified summary once ready. */
  warm?: { packet: Packet; result?: ModelResult; preparing?: Promise<void> };
}

/** What a model call answers the core. */
type ModelAnswer = Extract<EffectResult, { kind: "model" }>;

/** A failure's audit detail: its message, as the Rust host records a model error's detail. */
function detailOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function isTurn(e: Event): e is Extract<Event, { type: "message" | "lateDelivery" | "turnMeta" }> {
  return e.type === "message" || e.type === "lateDelivery" || e.type === "turnMeta";
}

/** Build a compactor over a journal and a model. */
export function createCompactor(o: CompactorOptions): Compactor {
  const routeOf = o.route ?? ((id: string) => ({ conversation: id, chat: "", sender: "" }));
  const holder = o.holder ?? `js-${Math.random().toString(36).slice(2)}`;
  const leaseMs = o.leaseMs ?? LEASE_MS;
  const states = new Map<string, State>();
  // The declaration is checked when the compactor is built (once the core is
  // loaded): a rule it breaks throws `invalid_declaration` naming the rule
  // and its numbers here, not on the first message.
  try {
    validate({ kind: "events", route: routeOf(""), events: [], declaration: o.declaration });
  } catch (e) {
    if (!(e instanceof FoldlineError) || e.code !== "not_initialized") throw e;
  }

  function state(id: string): State {
    let s = states.get(id);
    if (!s) {
      s = {
        seq: 0, sourceSeq: 0, keys: new Map(), recent: [], held: newSlot(), resolutions: 0, chain: [], chainEvents: 0, openTasks: new Map(), verified: { accepted: [], covered: new Map() },
        reading: Promise.resolve(), writing: Promise.resolve(), appending: Promise.resolve(),
      };
      states.set(id, s);
    }
    return s;
  }

  /** Read what is new since the last read, check it, and fold it into the state. */
  function sync(id: string): Promise<State> {
    const s = state(id);
    const next = s.reading.then(async () => {
      const fresh = await o.journal.readEvents(id, s.seq);
      if (fresh.length === 0) return s;
      // A journal written by someone else may hold a bad event: name its
      // position. What the journal vouches it checked on append is not
      // checked again.
      const unchecked = fresh.filter((f) => f.checked !== true);
      try {
        if (unchecked.length > 0) validate({ kind: "events", route: routeOf(id), events: unchecked.map((f) => f.event) });
      } catch (e) {
        if (!(e instanceof FoldlineError)) throw e;
        const at = /events\[(\d+)\]/.exec(e.message);
        const pos = at ? unchecked[Number(at[1])]?.seq : e.ids.length ? unchecked.find((f) => isTurn(f.event) && e.ids.includes(f.event.turnId))?.seq : undefined;
        throw new FoldlineError({
          code: e.code, ids: e.ids,
          message: `the journal of ${id} holds an event foldline cannot use${pos ? ` at position ${pos}` : ""}: ${e.message.replace(/^[a-z_]+: /, "")}`,
        });
      }
      for (const { event, seq } of fresh) {
        if (isTurn(event) && event.sourceSeq > s.sourceSeq) s.sourceSeq = event.sourceSeq;
        const at = event.type === "message" ? event.turnId.lastIndexOf("@") : -1;
        if (event.type === "message" && at >= 0) {
          const key = event.turnId.slice(at + 1);
          const k = s.keys.get(key);
          if (k) { k.seq = seq; k.hashes.push(event.contentHash ?? ""); }
          else {
            s.keys.set(key, { seq, hashes: [event.contentHash ?? ""] });
            if (s.keys.size > KEPT_KEYS) s.keys.delete(s.keys.keys().next().value as string);
          }
        }
        if (CHAIN_TYPES.has(event.type)) {
          s.chain.push(event);
          if (event.type === "boundary" || event.type === "frontier") s.chainEvents++;
          s.res = undefined;
        }
        if (event.type !== "boundary" && event.type !== "frontier") s.recent.push(event);
        if (event.type === "compactionTask") {
          if (event.state === "requested") s.openTasks.set(event.taskId, event);
          else s.openTasks.delete(event.taskId);
        }
      }
      s.seq = fresh[fresh.length - 1].seq;
      return s;
    });
    s.reading = next.catch(() => undefined);
    return next;
  }

  /** The state, read to the journal's end, with its chain resolved. */
  async function load(id: string): Promise<{ s: State; res: Resolution; events: Event[] }> {
    const s = await sync(id);
    if (!s.res) {
      // Resolved from the verified head: only boundaries after it are sent
      // (and re-settled), so only their packets are read.
      const fresh = s.chain.filter((e): e is Extract<Event, { type: "boundary" }> => e.type === "boundary");
      const packets = (await Promise.all(fresh.map((b) => o.journal.getPacket(id, b.packetId)))).filter((p): p is Packet => p !== undefined);
      const r = validate({
        kind: "resolve", declaration: o.declaration, compactor: o.compactorDeclaration ?? { ...o.declaration, role: "compactor" },
        route: routeOf(id), events: s.chain, packets, verified: verifiedRequest(s.verified, s.chain),
      });
      if (r.kind !== "resolved") throw new Error("unexpected validate answer");
      s.chain = extendVerified(s.verified, s.chain, r);
      s.res = r;
      s.resolutions++;
      // What lies before the frontier or under the head never reaches plan
      // or select again: their cost does not grow with covered history.
      const covered = r.head?.coveredThroughSeq;
      const start = r.frontier?.startSeq;
      if (covered !== undefined || start !== undefined) {
        s.recent = s.recent.filter((e) => !isTurn(e) || e.pinned === true || PINNED_ROLES.has(e.role)
          || ((covered === undefined || e.sourceSeq > covered) && (start === undefined || e.sourceSeq >= start)));
        rebuiltSlot(s.held); // the list is no longer what the core holds

      }
    }
    return { s, res: s.res, events: s.recent };
  }

  /**
   * Compare-and-append a batch at `expectedSeq` under the lease's fence; a
   * conflict reports whether a chain event arrived meanwhile (the core then
   * appends again after the new messages, or ends the run with `fork`).
   */
  async function appendAt(id: string, s: State, batch: Event[], expectedSeq: number, fence: number): Promise<EffectResult> {
    try {
      const seq = await o.journal.append(id, batch, { expectedSeq, fence });
      await sync(id);
      return { kind: "appended", seq };
    } catch (e) {
      if (!(e instanceof FoldlineError) || e.code !== "conflict") throw e;
      const before = s.chainEvents;
      await sync(id);
      return { kind: "conflict", seq: s.seq, chainMoved: s.chainEvents !== before };
    }
  }

  /**
   * One model call under its deadline: the stream (provisional text stays
   * here) or the buffered replay. What happened goes back to the core, which
   * applies the streaming rule.
   */
  async function callModel(run: Pick<Run, "packet" | "runId">, buffered: boolean, deadlineMs: number): Promise<ModelAnswer> {
    const deadline = AbortSignal.timeout(deadlineMs);
    const output = (r: ModelResult): ModelOutput => ({
      packetId: run.packet.id, runId: run.runId, modelId: r.modelId, usage: r.usage, finishReason: r.finishReason, summary: r.text,
    });
    const failed = (e: unknown, contentReceived: boolean): ModelAnswer => ({
      kind: "model", contentReceived,
      error: deadline.aborted ? { failure: "timeout", detail: `no summary within ${deadlineMs} ms` } : { failure: failureKindOf(e), detail: detailOf(e) },
    });
    if (buffered) {
      try {
        return { kind: "model", contentReceived: true, output: output(await o.model.complete(run.packet, deadline)) };
      } catch (e) {
        return failed(e, false);
      }
    }
    let text = "";
    let done: ModelResult | undefined;
    try {
      for await (const c of o.model.stream(run.packet, deadline)) {
        if (c.type === "delta") text += c.text; // provisional: never leaves the driver
        else done = { text, modelId: c.modelId, usage: c.usage, finishReason: c.finishReason };
      }
    } catch (e) {
      return failed(e, text.length > 0);
    }
    if (deadline.aborted) return failed(undefined, text.length > 0);
    return { kind: "model", contentReceived: text.length > 0, ...(done ? { output: output(done) } : {}) };
  }

  /** What the core plans from: the state read to the journal's end, as a plan request. */
  async function view(id: string, trigger: Trigger): Promise<{ s: State; request: PlanRequest; seq: number; key: string }> {
    const { s, events, res } = await load(id);
    const route = routeOf(id);
    const owner = o.owner?.(id) ?? null;
    return {
      s, seq: s.seq, key: viewKey(s, route, owner),
      request: {
        declaration: o.declaration, route, owner,
        frontier: res.frontier, head: res.head, amendment: res.amendment, carried: res.carried ?? null, events, trigger,
        warm: s.warm?.result ? s.warm.packet : null,
      },
    };
  }

  /** Names a view's chain state: the same key, the same declaration, route, owner, frontier, head and amendment. */
  function viewKey(s: State, route: Route, owner: string | null): string {
    return `${s.resolutions}|${JSON.stringify(route)}|${owner}`;
  }

  /**
   * Interpret the core's loop: read, then do each effect `step` answers
   * (append, store the packet, call the model) and feed its result back,
   * until the run is done. What to write, where and when is the core's.
   */
  async function drive(
    id: string, trigger: Trigger, fence: number,
    options: { task?: string; onAccepted?: (seq: number) => void; endInterruptedOnly?: boolean } = {},
  ): Promise<Finished> {
    const { task, onAccepted, endInterruptedOnly = false } = options;
    const timeout = o.modelTimeoutMs ?? MODEL_TIMEOUT_MS;
    let key = "";
    const fresh = async (): Promise<StepRequest> => {
      const v = await view(id, trigger);
      key = v.key;
      const w = v.s.warm;
      return {
        trigger, task: task ?? null, endInterruptedOnly, warmCandidates: o.warmCandidates !== false, warmHeld: w !== undefined,
        warmSummary: w?.result
          ? { packetId: w.packet.id, runId: "warm", modelId: w.result.modelId, usage: w.result.usage, finishReason: w.result.finishReason, summary: w.result.text }
          : null,
        modelTimeoutMs: timeout, view: v.request, seq: v.seq,
      };
    };
    const s = state(id);
    const next = (last: EffectResult, st: LoopState): StepRequest => ({ trigger, task: task ?? null, endInterruptedOnly, modelTimeoutMs: timeout, state: st, last });
    let request = await fresh();
    for (;;) {
      const { state: st, effect } = stepHeld<Step>(s.held, request, key);
      switch (effect.effect) {
        case "done":
          return effect.finished;
        case "read":
          // The state rides along: a run folding a backlog goes on with it.
          request = { ...(await fresh()), state: st };
          break;
        case "append": {
          const last = await appendAt(id, s, st.batch ?? [], effect.expectedSeq, fence);
          if (last.kind === "appended" && effect.acceptsTask) onAccepted?.(last.seq);
          request = next(last, st);
          break;
        }
        case "putPacket":
          if (!st.run) throw new Error("putPacket without a run");
          await o.journal.putPacket(id, st.run.packet); // persisted before any model sees it
          request = next({ kind: "stored" }, st);
          break;
        case "callModel":
          if (!st.run) throw new Error("callModel without a run");
          request = next(await callModel(st.run, effect.buffered, effect.deadlineMs), st);
          break;
      }
    }
  }

  /** Run `fn` under the writer lease (renewed while it runs, so a long model call keeps it); `undefined`: another writer holds it. */
  async function leased<T>(id: string, fn: (fence: number) => Promise<T>): Promise<T | undefined> {
    const fence = await o.journal.acquireLease(id, holder, leaseMs);
    if (fence === undefined) return undefined;
    const renew = setInterval(() => void o.journal.acquireLease(id, holder, leaseMs).catch(() => undefined), Math.max(1, Math.floor(leaseMs / 3)));
    try {
      return await fn(fence);
    } finally {
      clearInterval(renew);
      await o.journal.releaseLease(id, holder);
    }
  }

  /** One run of the loop, answered as the member-facing result. */
  async function run(id: string, trigger: Trigger, task?: string, onAccepted?: (seq: number) => void): Promise<OnMessageResult> {
    const f = await leased(id, (fence) => drive(id, trigger, fence, { task, onAccepted }));
    if (f === undefined) return { status: "busy" };
    const s = state(id);
    switch (f.status) {
      case "skipped":
        // The compactor's progress advances without inference: a watermark
        // beside the journal, not an event.
        if (f.outcome.outcome === "skip") await o.journal.noteSkipped?.(id, f.outcome.record);
        return { status: f.status, outcome: f.outcome };
      case "paused":
        return { status: f.status, outcome: f.outcome };
      case "warm":
        // One candidate per head: kept while it is prepared, judged by the
        // core when compaction is due, dropped then either way.
        if (f.prepare && f.packet) {
          s.warm = { packet: f.packet };
          s.warm.preparing = prepareWarm(id, s.warm); // off the critical path: not awaited
        }
        return { status: "warm", outcome: { outcome: "warm", packet: f.packet ?? s.warm?.packet ?? null } };
      case "refused":
        return { status: "refused", code: f.error.code, message: f.error.message };
      case "compacted":
        s.warm = undefined;
        return { status: "compacted", boundary: f.boundary };
      case "failed":
        s.warm = undefined;
        o.audit?.(id, f.report);
        return { status: "failed", notice: f.report.notice };
      case "ended":
        throw new Error("a compaction run ended as an interrupted-task sweep");
    }
  }

  /** Summarize a warm candidate under its own lease and keep the summary if settle accepts it. */
  async function prepareWarm(id: string, w: NonNullable<State["warm"]>): Promise<void> {
    const key = `${id}#warm`;
    try {
      if ((await o.journal.acquireLease(key, holder, o.warmLeaseMs ?? WARM_LEASE_MS)) === undefined) return;
      try {
        const at = { packet: w.packet, runId: "warm-check" };
        const ms = o.modelTimeoutMs ?? MODEL_TIMEOUT_MS;
        let answer = await callModel(at, false, ms);
        // The one buffered replay of a stream that ended before any content.
        if (!answer.output && !answer.contentReceived && !answer.error) answer = await callModel(at, true, ms);
        if (!answer.output) return; // the compaction that is due will try itself
        validate({ kind: "settle", packet: w.packet, output: answer.output });
        const { modelId, usage, finishReason, summary } = answer.output;
        w.result = { text: summary, modelId, usage: usage ?? { inputTokens: 0, outputTokens: 0 }, finishReason: finishReason ?? "stop" };
      } finally {
        await o.journal.releaseLease(key, holder);
      }
    } catch {
      // A warm candidate is an optimization: any failure leaves it unprepared.
    }
  }

  /** Run `fn` after every earlier writer of this conversation on this compactor. */
  function serial<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const s = state(id);
    const next = s.writing.then(fn);
    s.writing = next.catch(() => undefined);
    return next;
  }


  /**
   * Each message's tokens as the provider counts them: the host's count of
   * its parts plus the per-message framing (`messageOverheadTokens`), so a
   * context never exceeds the window by its framing.
   */
  function counted(events: Event[]): Event[] {
    const count = o.countTokens;
    if (!count) return events;
    const framing = o.messageOverheadTokens ?? MESSAGE_OVERHEAD_TOKENS;
    return events.map((e) => {
      if (e.type !== "message") return e;
      let tokens = framing;
      for (const p of e.parts) {
        tokens += p.type === "text" ? count(p.text)
          : p.type === "toolCall" ? count(p.name) + count(p.arguments)
          : p.type === "toolResult" ? count(p.content)
          : p.type === "approvalResponse" ? count(p.reason ?? "")
          : 0;
      }
      return { ...e, tokens };
    });
  }

  /**
   * The messages as journal events (numbered from 1; renumbered when
   * written), checked (they convert, and each is one a compaction could
   * take), with each one's token count (counted once, here) and content hash.
   */
  function admitted(id: string, input: OpenAiChatMessage | readonly OpenAiChatMessage[] | AppendMessages): { events: Event[]; hashes: string[] } {
    const spec: AppendMessages = Array.isArray(input) || !("messages" in (input as object))
      ? { messages: input as OpenAiChatMessage | readonly OpenAiChatMessage[] }
      : (input as AppendMessages);
    const list: readonly unknown[] = Array.isArray(spec.messages) ? spec.messages : [spec.messages];
    // Nothing accepted may leave the conversation unable to compact: the
    // core's admission rule, with the real token counts when there are.
    const events = counted(eventsOf(spec.format ?? "openai", list, { conversation: id, ...(spec.format === "anthropic" ? { system: spec.system } : {}) }));
    if (events.length === 0) throw new FoldlineError({ code: "invalid_request", message: "no messages to append" });
    const checked = validate({ kind: "events", route: routeOf(id), events, declaration: o.declaration });
    return { events, hashes: checked.kind === "events" ? checked.contentHashes : [] };
  }

  async function appendMessages(id: string, input: OpenAiChatMessage | readonly OpenAiChatMessage[] | AppendMessages, options: AppendMessagesOptions = {}): Promise<Appended> {
    const { events: converted, hashes } = admitted(id, input); // checked before anything is read or written
    const key = options.idempotencyKey;
    if (key !== undefined && !KEY.test(key)) throw new FoldlineError({ code: "invalid_request", message: "an idempotency key is 1 to 128 of A-Z a-z 0-9 . _ : -" });
    const s = state(id);
    const next = s.appending.then(async () => {
      for (;;) {
        await sync(id);
        const done = key === undefined ? undefined : s.keys.get(key);
        if (done) {
          if (done.hashes.join(" ") !== hashes.join(" ")) throw new FoldlineError({ code: "idempotency_key_reused", message: "this idempotency key was used for other messages" });
          return { seq: done.seq, events: [], count: done.hashes.length, replayed: true };
        }
        // Numbered after the journal's last turn, with the counts made once above.
        const events = converted.map((e, i) => {
          if (e.type !== "message") return e;
          const seq = s.sourceSeq + i + 1;
          return {
            ...e, sourceSeq: seq, turnId: `${turnIdOf(id, seq)}${key === undefined ? "" : `@${key}`}`,
            ...(options.sender === undefined ? {} : { sender: options.sender }),
          };
        });
        try {
          const seq = await o.journal.append(id, events, { expectedSeq: s.seq });
          await sync(id);
          return { seq, events, count: events.length, replayed: false };
        } catch (e) {
          // Another writer appended meanwhile: number after it and try again.
          if (!(e instanceof FoldlineError) || e.code !== "conflict") throw e;
        }
      }
    });
    s.appending = next.catch(() => undefined);
    return next;
  }

  let tasks = 0;
  return {
    append: appendMessages,
    check: (id, input) => void admitted(id, input),
    onMessage: (id) => serial(id, () => run(id, { kind: "automatic" })),
    compactNow: (id, actor, sessionBusy = false) =>
      serial(id, () => run(id, { kind: "manual", actor, sessionBusy }, `task-${holder}-${++tasks}-${Date.now()}`)),
    compactTask: (id, t) =>
      serial(id, () => run(id, { kind: "manual", actor: t.actor, sessionBusy: t.sessionBusy ?? false }, t.id, t.onAccepted)),
    endInterrupted: (id) =>
      serial(id, async () => (await leased(id, (fence) => drive(id, { kind: "automatic" }, fence, { endInterruptedOnly: true }))) !== undefined),
    async context<F extends Format = "foldline">(id: string, opts: ContextOptions & { format?: F } = {}): Promise<RenderedSelection<MessagesOf[F]>> {
      const { s, events, res } = await load(id);
      // `select` takes either spelling of the AI SDK format.
      const format = opts.format === "ai-sdk" ? "aiSdk" : opts.format ?? "foldline";
      const route = routeOf(id);
      const owner = o.owner?.(id) ?? null;
      // `messages` is there unless `render: false` (the second overload).
      return selectHeld<RenderedSelection<MessagesOf[F]>>(s.held, {
        declaration: o.declaration, route, frontier: res.frontier, head: res.head,
        amendment: res.amendment, events, prompt: opts.prompt ?? null, format,
        limit: opts.limit ?? null, render: opts.render ?? true, member: opts.member ?? null,
        carried: res.carried ?? null,
      }, owner, viewKey(s, route, owner));
    },
    async timeline(id) {
      let accepted: string[] = [];
      let retired: string[] = [];
      let seq = 0;
      try {
        const { s, res } = await load(id);
        accepted = res.accepted;
        retired = res.retiredBoundaries;
        seq = s.seq;
      } catch (e) {
        if (!(e instanceof FoldlineError)) throw e; // a rejected chain draws no completed divider
        seq = state(id).seq;
      }
      // The timeline shows the whole conversation: read from the journal when
      // asked (as far as the resolution was read), not kept in memory per message.
      const events = (await o.journal.readEvents(id, 0)).filter((e) => e.seq <= seq).map((e) => e.event);
      return timeline(events, accepted, retired);
    },
    async resolve(id) {
      return (await load(id)).res;
    },
  };
}
