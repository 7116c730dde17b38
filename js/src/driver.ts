// The driver: resolve → plan → persist the packet → call the model → settle →
// append the boundary; and select for a model request. Same shape as the Rust
// host's driver.

import { plan, select, timeline, validate, FoldlineError } from "./index.js";
import type {
  Declaration, Event, Format, Packet, Part, PlanOutcome, Resolution, Route, Selection, Timeline,
  FailureKind, FailureReport, StreamReport, Boundary, Trigger,
} from "./types.js";
import type { Journal } from "./journal/journal.js";
import type { Model, ModelResult } from "./model/model.js";

export interface CompactorOptions {
  journal: Journal;
  model: Model;
  declaration: Declaration;
  /** The compactor declaration, checked for agreement on every resolve. */
  compactorDeclaration?: Declaration;
  /** Route of a conversation (default: `{ conversation: id }`). */
  route?: (conversationId: string) => Route;
  /** Owner of a conversation, for manual requests. */
  owner?: (conversationId: string) => string | undefined;
  /** Writer-lease holder id and time to live. */
  holder?: string;
  leaseMs?: number;
  /** Run ids (default: a counter with the holder's id). */
  runId?: () => string;
  /** Receives the audit reason of each failure (never member-facing). */
  audit?: (conversationId: string, report: FailureReport) => void;
}

export type OnMessageResult =
  | { status: "busy" }
  | { status: "skipped" | "paused" | "warm"; outcome: PlanOutcome }
  | { status: "compacted"; boundary: Boundary }
  | { status: "refused"; code: string; message: string }
  | { status: "failed"; notice: string };

export interface ContextOptions {
  format?: Format;
  prompt?: Part[];
  limit?: number;
  render?: boolean;
}

export interface Compactor {
  /** On a new message: compact if the budget says so. */
  onMessage(conversationId: string): Promise<OnMessageResult>;
  /** A member's `/compact`. */
  compactNow(conversationId: string, actor: string, sessionBusy?: boolean): Promise<OnMessageResult>;
  /** The model-bound context. */
  context<M = unknown>(conversationId: string, options?: ContextOptions): Promise<Selection<M>>;
  /** The chat timeline. */
  timeline(conversationId: string): Promise<Timeline>;
  /** The resolved chain. */
  resolve(conversationId: string): Promise<Resolution>;
}

/** Build a compactor over a journal and a model. */
export function createCompactor(o: CompactorOptions): Compactor {
  const routeOf = o.route ?? ((id: string) => ({ conversation: id, chat: "", sender: "" }));
  const holder = o.holder ?? `js-${Math.random().toString(36).slice(2)}`;
  let runs = 0;
  const nextRun = o.runId ?? (() => `${holder}-run-${++runs}`);

  async function load(id: string): Promise<{ events: Event[]; res: Resolution }> {
    const events = (await o.journal.readEvents(id)).map((s) => s.event);
    const packets = await o.journal.listPackets(id);
    // The chain needs only frontiers, boundaries and what can amend covered history.
    const chain = events.filter((e) => e.type === "frontier" || e.type === "boundary" || e.type === "correction" || e.type === "lateDelivery");
    const r = validate({
      kind: "resolve", declaration: o.declaration, compactor: o.compactorDeclaration ?? null,
      route: routeOf(id), events: chain, packets,
    });
    if (r.kind !== "resolved") throw new Error("unexpected validate answer");
    // Plan and select need pinned turns, turns after the covered sequence,
    // corrections and failures: their cost does not grow with covered history.
    const covered = r.head?.coveredThroughSeq;
    const pinnedRoles = new Set(["system", "developer", "document"]);
    const recent = events.filter((e) => {
      if (e.type === "message" || e.type === "lateDelivery" || e.type === "turnMeta") {
        return e.pinned === true || pinnedRoles.has(e.role) || covered === undefined || e.sourceSeq > covered;
      }
      return e.type !== "boundary" && e.type !== "frontier";
    });
    return { events: recent, res: r };
  }

  function headSeq(events: Event[]): number {
    let max = 0;
    for (const e of events) if ((e.type === "message" || e.type === "lateDelivery") && e.sourceSeq > max) max = e.sourceSeq;
    return max;
  }

  /** Stream a summary; provisional text stays here. One buffered replay only before content. */
  async function summarize(packet: Packet): Promise<ModelResult | FailureReport> {
    let text = "";
    let done: ModelResult | undefined;
    let ended: StreamReport["ended"] = "complete";
    try {
      for await (const c of o.model.stream(packet)) {
        if (c.type === "delta") text += c.text; // provisional: never leaves the driver
        else done = { text, modelId: c.modelId, usage: c.usage, finishReason: c.finishReason };
      }
      if (!done) ended = "dropped";
    } catch {
      ended = "dropped";
    }
    const d = validate({ kind: "stream", contentReceived: text.length > 0, ended, replaysUsed: 0 });
    if (d.kind !== "stream") throw new Error("unexpected validate answer");
    switch (d.decision.action) {
      case "settle":
        return done ?? classify("streamDropped", "no evidence");
      case "replayBuffered":
        try {
          return await o.model.complete(packet);
        } catch (e) {
          return classify("other", String(e));
        }
      case "fail":
        return d.decision.failure;
    }
  }

  function classify(failure: FailureKind, detail: string): FailureReport {
    const r = validate({ kind: "failure", failure, detail });
    if (r.kind !== "failure") throw new Error("unexpected validate answer");
    return { failure: r.failure, notice: r.notice, auditReason: r.auditReason };
  }

  async function run(id: string, trigger: Trigger, taskId?: string): Promise<OnMessageResult> {
    if (!(await o.journal.acquireLease(id, holder, o.leaseMs ?? 60_000))) return { status: "busy" };
    try {
      for (;;) {
        const { events, res } = await load(id);
        const outcome = plan({
          declaration: o.declaration, route: routeOf(id), owner: o.owner?.(id) ?? null,
          frontier: res.frontier, head: res.head, amendment: res.amendment, events, trigger,
        });
        switch (outcome.outcome) {
          case "activate":
            await o.journal.append(id, { type: "frontier", ...outcome.frontier });
            continue;
          case "skip":
            return { status: "skipped", outcome };
          case "paused":
            return { status: "paused", outcome };
          case "warm":
            return { status: "warm", outcome };
          case "refuse":
            return { status: "refused", code: outcome.error.code, message: outcome.error.message };
          case "compact": {
            const packet = outcome.packet;
            await o.journal.putPacket(id, packet); // persisted before dispatch: a retry reuses it
            const runId = nextRun();
            const head = headSeq(events);
            if (taskId && trigger.kind === "manual") {
              await o.journal.append(id, { type: "compactionTask", taskId, state: "requested", actor: trigger.actor, headSeq: head });
            }
            const answer = await summarize(packet);
            if ("notice" in answer) return fail(id, packet, runId, answer, trigger, head, res, taskId);
            try {
              const s = validate({
                kind: "settle", packet,
                output: { packetId: packet.id, runId, modelId: answer.modelId, usage: answer.usage, finishReason: answer.finishReason, summary: answer.text },
              });
              if (s.kind !== "settled") throw new Error("unexpected validate answer");
              await o.journal.append(id, { type: "boundary", ...s.boundary });
              if (taskId && trigger.kind === "manual") {
                await o.journal.append(id, {
                  type: "compactionTask", taskId, state: "completed", actor: trigger.actor, headSeq: head, boundaryId: s.boundary.id,
                });
              }
              return { status: "compacted", boundary: s.boundary };
            } catch (e) {
              const detail = e instanceof FoldlineError ? e.code : String(e);
              return fail(id, packet, runId, classify("unusableSummary", detail), trigger, head, res, taskId);
            }
          }
        }
      }
    } finally {
      await o.journal.releaseLease(id, holder);
    }
  }

  async function fail(
    id: string, packet: Packet, runId: string, report: FailureReport, trigger: Trigger, head: number, res: Resolution,
    taskId?: string,
  ): Promise<OnMessageResult> {
    await o.journal.append(id, {
      type: "compactionFailed", runId, packetId: packet.id,
      ...(res.head ? { previousBoundaryId: res.head.boundaryId } : {}),
      trigger: trigger.kind, headSeq: head, reason: report.auditReason,
    });
    if (taskId && trigger.kind === "manual") {
      await o.journal.append(id, { type: "compactionTask", taskId, state: "failed", actor: trigger.actor, headSeq: head });
    }
    o.audit?.(id, report);
    return { status: "failed", notice: report.notice };
  }

  return {
    onMessage: (id) => run(id, { kind: "automatic" }),
    compactNow: (id, actor, sessionBusy = false) =>
      run(id, { kind: "manual", actor, sessionBusy }, `task-${nextRun()}`),
    async context<M>(id: string, opts: ContextOptions = {}): Promise<Selection<M>> {
      const { events, res } = await load(id);
      return select<M>({
        declaration: o.declaration, route: routeOf(id), frontier: res.frontier, head: res.head,
        amendment: res.amendment, events, prompt: opts.prompt ?? null, format: opts.format ?? "foldline",
        limit: opts.limit ?? null, render: opts.render ?? true,
      });
    },
    async timeline(id) {
      return timeline((await o.journal.readEvents(id)).map((s) => s.event));
    },
    async resolve(id) {
      return (await load(id)).res;
    },
  };
}
