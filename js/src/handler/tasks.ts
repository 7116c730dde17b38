// Manual compaction as a durable task: `POST …/condense` (answered once
// the `requested` event is written) and the task's events as Server-Sent
// Events. The Rust server's tasks.rs.

import type { OnMessageResult } from "../driver/api.js";
import { FEED_PAGE_EVENTS } from "../defaults.js";
import { MEMBER_NOTICE } from "../notice.js";
import type { Event } from "../types.js";
import { owned } from "./access.js";
import { readSome, safeWhole } from "./feed.js";
import { ApiError, httpStatusOf, json } from "./reply.js";
import { answering, later, napOn, takeCondense, wrote, type App } from "./state.js";
import type { ExecutionContext } from "./api.js";

export async function condense(app: App, id: string, member: string, ctx?: ExecutionContext): Promise<Response> {
  await owned(app, id, member);
  if (await answering(app, id)) throw new ApiError(409, "session_busy", "an answer owns the session; compact after it ends");
  await takeCondense(app, member);
  // The id carries the journal's position before the task: its `requested`
  // event is written after it, so a handler that never saw the task (a
  // restart, another isolate) reads from there, not the whole conversation.
  const task = `task-${await app.compactor.position(id)}-${crypto.randomUUID().replaceAll("-", "")}`;
  type First = { seq: number } | { result: OnMessageResult } | { error: unknown };
  let settle!: (f: First) => void;
  const first = new Promise<First>((r) => (settle = r));
  const key = `${id}\n${task}`;
  app.running.add(key);
  // `owned` found the member to be the owner: the task carries it, as foldline serve's.
  const work = app.compactor.compactTask(id, { id: task, actor: member, owner: member, onAccepted: (seq) => { remember(app, key, seq); wrote(app, id); settle({ seq }); } })
    .then((result) => { wrote(app, id); settle({ result }); }, (error) => { wrote(app, id); settle({ error }); })
    .finally(() => app.running.delete(key));
  later(work, ctx);
  const f = await first;
  if ("seq" in f) {
    return json(202, { task, conversation: id, requestedSeq: f.seq, events: `/api/conversations/${id}/tasks/${task}/events` });
  }
  if ("error" in f) throw f.error;
  const r = f.result;
  if (r.status === "refused") throw new ApiError(httpStatusOf(r.code), r.code, r.message);
  if (r.status === "busy") throw new ApiError(409, "busy", "another writer is compacting this conversation; ask again in a moment");
  throw new ApiError(409, "nothing_to_fold", `no compaction was due (${r.status})`);
}

/** At most this many tasks' starts are remembered by one handler. */
const TASK_STARTS = 1024;

/** Remember where a task's `requested` event is, the least recently used let go first. */
function remember(app: App, key: string, seq: number): void {
  app.taskStarts.delete(key);
  app.taskStarts.set(key, seq);
  if (app.taskStarts.size > TASK_STARTS) app.taskStarts.delete(app.taskStarts.keys().next().value!);
}

/** The journal position a task id says its task began after (`task-<position>-<uuid>`); 0 for an id of another form. */
function begunAfter(task: string): number {
  const m = /^task-(\d{1,15})-[0-9a-f]{32}$/.exec(task);
  return m ? Number(m[1]) : 0;
}

/**
 * Where the task's `requested` event is: remembered for a task started or
 * followed here, else found by reading the journal a page at a time from
 * the position its id carries.
 */
async function taskStart(app: App, id: string, task: string): Promise<number | undefined> {
  const key = `${id}\n${task}`;
  const known = app.taskStarts.get(key);
  if (known !== undefined) {
    remember(app, key, known);
    return known;
  }
  for (let after = begunAfter(task); ;) {
    const page = await readSome(app.o.journal, id, after, FEED_PAGE_EVENTS);
    const start = page.find((s) => s.event.type === "compactionTask" && s.event.taskId === task && s.event.state === "requested");
    if (start) {
      remember(app, key, start.seq);
      return start.seq;
    }
    if (page.length < FEED_PAGE_EVENTS) return undefined;
    after = page.at(-1)!.seq;
  }
}

export async function events(app: App, req: Request, id: string, task: string): Promise<Response> {
  const start = await taskStart(app, id, task);
  if (start === undefined) throw new ApiError(404, "not_found", `no task ${JSON.stringify(task)} in this conversation`);
  // An id this handler did not send (not a position) is no position: the
  // stream starts from the task's first event, as the Rust server's.
  const sent = safeWhole(req.headers.get("last-event-id")?.trim() ?? "") ?? 0;
  let since = start - 1;
  let closed = false;
  const enc = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      try {
        for (;;) {
          const page = await readSome(app.o.journal, id, since, FEED_PAGE_EVENTS);
          for (const s of page) {
            since = s.seq;
            const e = s.event as Event;
            if (e.type !== "compactionTask" || e.taskId !== task) continue;
            const data = e.state === "requested" ? { task, state: e.state, headSeq: e.headSeq }
              : e.state === "completed" ? { task, state: e.state, boundaryId: e.boundaryId }
              : { task, state: e.state, notice: MEMBER_NOTICE };
            if (s.seq > sent) controller.enqueue(enc.encode(`id: ${s.seq}\nevent: ${e.state}\ndata: ${JSON.stringify(data)}\n\n`));
            if (e.state !== "requested") { controller.close(); return; }
          }
          if (closed) return;
          if (page.length >= FEED_PAGE_EVENTS) continue; // more written already: read on
          // Not running here: a writer that stopped mid-task is ended once its lease lapses.
          if (!app.running.has(`${id}\n${task}`) && (await app.compactor.endInterrupted(id))) continue;
          await napOn(app, id, app.pollMs);
        }
      } catch (e) {
        console.error("foldline handler: task events:", e);
        controller.error(e);
      }
    },
    cancel() { closed = true; },
  });
  return new Response(stream, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
}
