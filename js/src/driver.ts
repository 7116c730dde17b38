// The driver: resolve → plan → persist the packet → call the model → settle →
// append the boundary; and select for a model request. Same shape as the Rust
// host's driver.
//
// Incremental: a compactor keeps a small state per conversation (the journal
// position it has read to, the events, the verified resolution) and reads only
// what is new; the chain is resolved again only when a chain event (frontier,
// boundary, correction, late delivery) arrived. Safe under concurrency: calls
// that may write are serialized per conversation, every write is a
// compare-and-append at the position the plan was made from, fenced by the
// writer lease's token, and the lease is renewed while a model call runs.

import { plan, select, timeline, validate, FoldlineError } from "./core.js";
import type {
  Code, Declaration, Event, MessagesOf, Format, Packet, Part, PlanOutcome, Resolution, Route, Selection, Timeline,
  FailureKind, FailureReport, StreamReport, Boundary, Trigger, InputTurn, Verified,
} from "./types.js";
import type { Journal } from "./journal/journal.js";
import { aiSdkToOpenAi, anthropicToOpenAi, fromOpenAiMessages, type AiSdkMessage, type AnthropicMessage, type OpenAiChatMessage } from "./convert.js";
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
  /** Writer-lease holder id and time to live (renewed while work runs). */
  holder?: string;
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
}

/** Messages `append` takes: OpenAI chat (default), Anthropic, or AI SDK `ModelMessage`s. */
export type AppendMessages =
  | { format?: "openai"; messages: OpenAiChatMessage | readonly OpenAiChatMessage[] }
  | { format: "anthropic"; messages: AnthropicMessage | readonly AnthropicMessage[]; system?: string }
  | { format: "ai-sdk"; messages: AiSdkMessage | readonly AiSdkMessage[] };

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

export interface ContextOptions {
  format?: Format;
  prompt?: Part[];
  limit?: number;
  render?: boolean;
}

export interface Compactor {
  /**
   * Append messages to the journal as the conversation's next turns
   * (numbered after its last one; checked, nothing written on bad input;
   * compare-and-append, so concurrent appends never collide). OpenAI chat
   * messages directly, or `{ format: "anthropic" | "ai-sdk", messages }`.
   * Returns the journal position and the events written.
   */
  append(conversationId: string, messages: OpenAiChatMessage | readonly OpenAiChatMessage[] | AppendMessages): Promise<{ seq: number; events: Event[] }>;
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
  context<F extends Format = "foldline">(conversationId: string, options?: ContextOptions & { format?: F }): Promise<Selection<MessagesOf[F]>>;
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
  /** Frontiers, boundaries, corrections and late deliveries: what resolve needs. */
  chain: Event[];
  /** The verified resolution, until a chain event arrives. */
  res?: Resolution;
  /** Reads run one after another. */
  reading: Promise<unknown>;
  /** Writers run one after another. */
  writing: Promise<unknown>;
  /** Appends of messages run one after another (not behind a compaction). */
  appending: Promise<unknown>;
  /** Highest source sequence of a turn read so far. */
  sourceSeq: number;
  /** The chain prefix verified so far: resolve starts from its head, so its boundaries leave `chain`. */
  verified: VerifiedPrefix;
  /** Manual tasks requested and not yet ended. */
  openTasks: Map<string, Extract<Event, { type: "compactionTask" }>>;
  /** The warm candidate: its packet, and its verified summary once ready. */
  warm?: { packet: Packet; result?: ModelResult; preparing?: Promise<void> };
}

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
  const leaseMs = o.leaseMs ?? 60_000;
  const states = new Map<string, State>();

  function state(id: string): State {
    let s = states.get(id);
    if (!s) {
      s = {
        seq: 0, sourceSeq: 0, recent: [], chain: [], openTasks: new Map(), verified: { accepted: [], covered: new Map() },
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
      // A journal written by someone else may hold a bad event: name its position.
      try {
        validate({ kind: "events", route: routeOf(id), events: fresh.map((f) => f.event) });
      } catch (e) {
        if (!(e instanceof FoldlineError)) throw e;
        const at = /events\[(\d+)\]/.exec(e.message);
        const pos = at ? fresh[Number(at[1])]?.seq : e.ids.length ? fresh.find((f) => isTurn(f.event) && e.ids.includes(f.event.turnId))?.seq : undefined;
        throw new FoldlineError({
          code: e.code, ids: e.ids,
          message: `the journal of ${id} holds an event foldline cannot use${pos ? ` at position ${pos}` : ""}: ${e.message.replace(/^[a-z_]+: /, "")}`,
        });
      }
      for (const { event } of fresh) {
        if (isTurn(event) && event.sourceSeq > s.sourceSeq) s.sourceSeq = event.sourceSeq;
        if (CHAIN_TYPES.has(event.type)) {
          s.chain.push(event);
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
      // What lies before the frontier or under the head never reaches plan
      // or select again: their cost does not grow with covered history.
      const covered = r.head?.coveredThroughSeq;
      const start = r.frontier?.startSeq;
      if (covered !== undefined || start !== undefined) {
        s.recent = s.recent.filter((e) => !isTurn(e) || e.pinned === true || PINNED_ROLES.has(e.role)
          || ((covered === undefined || e.sourceSeq > covered) && (start === undefined || e.sourceSeq >= start)));
      }
    }
    return { s, res: s.res, events: s.recent };
  }

  function headSeq(events: Event[]): number {
    let max = 0;
    for (const e of events) if ((e.type === "message" || e.type === "lateDelivery") && e.sourceSeq > max) max = e.sourceSeq;
    return max;
  }

  /** Append a batch at the position the state was read to, under the lease's fence. */
  async function append(id: string, s: State, batch: Event[], fence: number): Promise<number> {
    for (;;) {
      try {
        const at = await o.journal.append(id, batch, { expectedSeq: s.seq, fence });
        await sync(id);
        return at;
      } catch (e) {
        if (!(e instanceof FoldlineError) || e.code !== "conflict") throw e;
        // Messages arrived meanwhile: they cannot change what this batch
        // extends, so append after them. A chain event means another writer
        // moved the head: give up, the fork is refused.
        const before = s.chain.length;
        await sync(id);
        if (s.chain.length !== before) {
          throw new FoldlineError({ code: "fork", message: "another writer extended the chain head first; nothing was written" });
        }
      }
    }
  }

  /** Stream a summary under a deadline; provisional text stays here. One buffered replay only before content. */
  async function summarize(packet: Packet): Promise<ModelResult | FailureReport> {
    const deadline = AbortSignal.timeout(o.modelTimeoutMs ?? 120_000);
    let text = "";
    let done: ModelResult | undefined;
    let ended: StreamReport["ended"] = "complete";
    let error: unknown;
    try {
      for await (const c of o.model.stream(packet, deadline)) {
        if (c.type === "delta") text += c.text; // provisional: never leaves the driver
        else done = { text, modelId: c.modelId, usage: c.usage, finishReason: c.finishReason };
      }
      if (!done) ended = "dropped";
    } catch (e) {
      ended = "dropped";
      error = e;
    }
    if (deadline.aborted) return classify("timeout", `no summary within ${o.modelTimeoutMs ?? 120_000} ms`);
    const d = validate({ kind: "stream", contentReceived: text.length > 0, ended, replaysUsed: 0 });
    if (d.kind !== "stream") throw new Error("unexpected validate answer");
    switch (d.decision.action) {
      case "settle":
        return done ?? classify("streamDropped", "no evidence");
      case "replayBuffered":
        if (error !== undefined && failureKindOf(error) !== "other") return classify(failureKindOf(error), detailOf(error));
        try {
          return await o.model.complete(packet, deadline);
        } catch (e) {
          return classify(deadline.aborted ? "timeout" : failureKindOf(e), detailOf(e));
        }
      case "fail":
        return error === undefined
          ? d.decision.failure
          : { ...d.decision.failure, auditReason: `${d.decision.failure.auditReason}: ${detailOf(error)}` };
    }
  }

  function classify(failure: FailureKind, detail: string): FailureReport {
    const r = validate({ kind: "failure", failure, detail });
    if (r.kind !== "failure") throw new Error("unexpected validate answer");
    return { failure: r.failure, notice: r.notice, auditReason: r.auditReason };
  }

  /** Run `fn` after every earlier writer of this conversation on this compactor. */
  function serial<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const s = state(id);
    const next = s.writing.then(fn);
    s.writing = next.catch(() => undefined);
    return next;
  }

  async function run(id: string, trigger: Trigger, taskId?: string, onAccepted?: (seq: number) => void): Promise<OnMessageResult> {
    const fence = await o.journal.acquireLease(id, holder, leaseMs);
    if (fence === undefined) return { status: "busy" };
    // Renewed while work runs, so a long model call keeps it.
    const renew = setInterval(() => void o.journal.acquireLease(id, holder, leaseMs).catch(() => undefined), Math.max(1, Math.floor(leaseMs / 3)));
    try {
      await endInterruptedTasks(id, fence);
      for (;;) {
        const { s, events, res } = await load(id);
        const warm = s.warm?.result ? s.warm : undefined;
        const outcome = plan({
          declaration: o.declaration, route: routeOf(id), owner: o.owner?.(id) ?? null,
          frontier: res.frontier, head: res.head, amendment: res.amendment, events, trigger,
          warm: warm?.packet ?? null,
        });
        switch (outcome.outcome) {
          case "activate":
            await append(id, s, [{ type: "frontier", ...outcome.frontier }], fence);
            continue;
          case "skip":
            return { status: "skipped", outcome };
          case "paused":
            return { status: "paused", outcome };
          case "warm":
            // One candidate per head: kept while it is prepared, judged by the
            // core when compaction is due, dropped then either way.
            if (o.warmCandidates !== false && !s.warm) {
              s.warm = { packet: outcome.packet };
              await o.journal.putPacket(id, outcome.packet); // persisted before the model sees it
              s.warm.preparing = prepareWarm(id, s.warm); // off the critical path: not awaited
            }
            return { status: "warm", outcome };
          case "refuse":
            return { status: "refused", code: outcome.error.code, message: outcome.error.message };
          case "compact": {
            // A valid warm candidate with a ready summary is used as is.
            const ready = warm && outcome.warm?.valid && trigger.kind === "automatic" ? warm : undefined;
            s.warm = undefined;
            return await compact(id, s, events, res, ready?.packet ?? outcome.packet, trigger, fence, { taskId, onAccepted }, ready?.result);
          }
        }
      }
    } finally {
      clearInterval(renew);
      await o.journal.releaseLease(id, holder);
    }
  }

  /** A manual task whose holder crashed between `requested` and its end is ended as failed. */
  async function endInterruptedTasks(id: string, fence: number): Promise<void> {
    const s = await sync(id);
    const open = s.openTasks;
    if (open.size === 0) return;
    await append(id, s, [...open.values()].map((t) => ({ ...t, state: "failed" as const })), fence);
  }

  /** Summarize a warm candidate under its own lease and keep the summary if settle accepts it. */
  async function prepareWarm(id: string, w: NonNullable<State["warm"]>): Promise<void> {
    const key = `${id}#warm`;
    try {
      if ((await o.journal.acquireLease(key, holder, o.warmLeaseMs ?? 900_000)) === undefined) return;
      try {
        const answer = await summarize(w.packet);
        if ("notice" in answer) return; // the compaction that is due will try itself
        validate({
          kind: "settle", packet: w.packet,
          output: { packetId: w.packet.id, runId: "warm-check", modelId: answer.modelId, usage: answer.usage, finishReason: answer.finishReason, summary: answer.text },
        });
        w.result = answer;
      } finally {
        await o.journal.releaseLease(key, holder);
      }
    } catch {
      // A warm candidate is an optimization: any failure leaves it unprepared.
    }
  }

  async function compact(
    id: string, s: State, events: Event[], res: Resolution, packet: Packet, trigger: Trigger, fence: number,
    { taskId, onAccepted }: { taskId?: string; onAccepted?: (seq: number) => void },
    prepared?: ModelResult,
  ): Promise<OnMessageResult> {
    await o.journal.putPacket(id, packet); // persisted before dispatch: a retry reuses it
    const head = headSeq(events);
    const attempt = 1 + events.filter((e) => e.type === "compactionFailed" && e.packetId === packet.id).length;
    const runId = `run:${packet.id.slice(7, 23)}:${attempt}`; // derived, as in the Rust driver
    const actor = trigger.kind === "manual" ? trigger.actor : undefined;
    const task = (state: "requested" | "completed" | "failed", boundaryId?: string): Event => ({
      type: "compactionTask", taskId: taskId ?? "", state, actor: actor ?? "", headSeq: head, ...(boundaryId ? { boundaryId } : {}),
    });
    if (taskId && actor) {
      // Written whether or not the caller listens (an optional call would skip its arguments).
      const at = await append(id, s, [task("requested")], fence);
      onAccepted?.(at);
    }
    const answer = prepared ?? (await summarize(packet));
    let report: FailureReport;
    if ("notice" in answer) {
      report = answer;
    } else {
      try {
        const v = validate({
          kind: "settle", packet, expectedRunId: runId,
          output: { packetId: packet.id, runId, modelId: answer.modelId, usage: answer.usage, finishReason: answer.finishReason, summary: answer.text },
        });
        if (v.kind !== "settled") throw new Error("unexpected validate answer");
        // The boundary and its task event are one batch.
        await append(id, s, [{ type: "boundary", ...v.boundary }, ...(taskId && actor ? [task("completed", v.boundary.id)] : [])], fence);
        return { status: "compacted", boundary: v.boundary };
      } catch (e) {
        if (!(e instanceof FoldlineError) || ["fork", "conflict", "lease_lost"].includes(e.code)) throw e;
        report = classify("unusableSummary", e.code);
      }
    }
    // The audit record is committed before the failure returns.
    await append(id, s, [
      {
        type: "compactionFailed", runId, packetId: packet.id,
        ...(res.head ? { previousBoundaryId: res.head.boundaryId } : {}),
        trigger: trigger.kind, headSeq: head, reason: report.auditReason,
      },
      ...(taskId && actor ? [task("failed")] : []),
    ], fence);
    o.audit?.(id, report);
    return { status: "failed", notice: report.notice };
  }

  function counted(events: Event[]): Event[] {
    const count = o.countTokens;
    if (!count) return events;
    return events.map((e) => {
      if (e.type !== "message") return e;
      let tokens = 0;
      for (const p of e.parts) {
        tokens += p.type === "text" ? count(p.text) : p.type === "toolCall" ? count(p.name) + count(p.arguments) : count(p.content);
      }
      return { ...e, tokens };
    });
  }

  async function appendMessages(id: string, input: OpenAiChatMessage | readonly OpenAiChatMessage[] | AppendMessages): Promise<{ seq: number; events: Event[] }> {
    const spec: AppendMessages = Array.isArray(input) || !("messages" in (input as object))
      ? { messages: input as OpenAiChatMessage | readonly OpenAiChatMessage[] }
      : (input as AppendMessages);
    const list = <T,>(m: T | readonly T[]): readonly T[] => (Array.isArray(m) ? m : [m as T]);
    const openai = spec.format === "anthropic" ? anthropicToOpenAi(list(spec.messages), spec.system)
      : spec.format === "ai-sdk" ? aiSdkToOpenAi(list(spec.messages))
      : list(spec.messages);
    if (openai.length === 0) throw new FoldlineError({ code: "invalid_request", message: "no messages to append" });
    fromOpenAiMessages(openai, { conversation: id }); // checked before anything is read or written
    const s = state(id);
    const next = s.appending.then(async () => {
      for (;;) {
        await sync(id);
        const events = counted(fromOpenAiMessages(openai, { conversation: id, afterSeq: s.sourceSeq }));
        try {
          const seq = await o.journal.append(id, events, { expectedSeq: s.seq });
          await sync(id);
          return { seq, events };
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
    onMessage: (id) => serial(id, () => run(id, { kind: "automatic" })),
    compactNow: (id, actor, sessionBusy = false) =>
      serial(id, () => run(id, { kind: "manual", actor, sessionBusy }, `task-${holder}-${++tasks}-${Date.now()}`)),
    compactTask: (id, t) =>
      serial(id, () => run(id, { kind: "manual", actor: t.actor, sessionBusy: t.sessionBusy ?? false }, t.id, t.onAccepted)),
    endInterrupted: (id) =>
      serial(id, async () => {
        const fence = await o.journal.acquireLease(id, holder, leaseMs);
        if (fence === undefined) return false;
        try {
          await endInterruptedTasks(id, fence);
          return true;
        } finally {
          await o.journal.releaseLease(id, holder);
        }
      }),
    async context<F extends Format = "foldline">(id: string, opts: ContextOptions & { format?: F } = {}): Promise<Selection<MessagesOf[F]>> {
      const { events, res } = await load(id);
      // `select` takes either spelling of the AI SDK format.
      return select({
        declaration: o.declaration, route: routeOf(id), frontier: res.frontier, head: res.head,
        amendment: res.amendment, events, prompt: opts.prompt ?? null, format: opts.format ?? "foldline",
        limit: opts.limit ?? null, render: opts.render ?? true,
      }) as Selection<MessagesOf[F]>;
    },
    async timeline(id) {
      let accepted: string[] = [];
      let seq = 0;
      try {
        const { s, res } = await load(id);
        accepted = res.accepted;
        seq = s.seq;
      } catch (e) {
        if (!(e instanceof FoldlineError)) throw e; // a rejected chain draws no completed divider
        seq = state(id).seq;
      }
      // The timeline shows the whole conversation: read from the journal when
      // asked (as far as the resolution was read), not kept in memory per message.
      const events = (await o.journal.readEvents(id, 0)).filter((e) => e.seq <= seq).map((e) => e.event);
      return timeline(events, accepted);
    },
    async resolve(id) {
      return (await load(id)).res;
    },
  };
}
