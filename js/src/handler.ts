// The HTTP surface of `foldline serve` as a `fetch` handler, for edge
// workers, Deno, Bun or Node: the same routes, codes and task events as the
// Rust server (docs/serve.md), over a journal and a model the host supplies.
//
//   export default { fetch: createHandler({ journal, model, declaration, members }) };
//
// One file per job under handler/, as the Rust server's serve/: api (what a
// host passes), state, access, routes, tasks, feed, compression, reply.

import { createCompactor } from "./driver.js";
import { checkMembers, checkOptions } from "./options.js";
import { ANSWER_LEASE_MS, BODY_LIMIT_BYTES, CONDENSE_PER_MINUTE, POLL_MS } from "./defaults.js";
import { answersOf, MemoryCompression, MemoryOwners, type ExecutionContext, type FoldlineHandler, type HandlerOptions, type Member } from "./handler/api.js";
import { failure } from "./handler/reply.js";
import { route } from "./handler/routes.js";
import { corsOf, withCors } from "./handler/cors.js";
import type { App } from "./handler/state.js";

export { MemoryAnswers, MemoryCompression, MemoryOwners, passKey } from "./handler/api.js";
export type { AnswerHold, Answers, CompressionStore, ExecutionContext, FoldlineHandler, Handler, HandlerOptions, Member, Owners, PassStats } from "./handler/api.js";
export { httpStatusOf } from "./handler/reply.js";

/**
 * A `fetch` handler with the routes of `foldline serve`: append, condense (a
 * durable task answered `202` once its `requested` event is written),
 * Server-Sent Events of a task resumable with `Last-Event-ID`, answers that
 * hold the session, context, timeline and verify — every route but
 * `/api/health` (a load balancer's probe) behind a
 * member's bearer token and owner-scoped.
 */
export function createHandler(o: HandlerOptions): FoldlineHandler {
  checkOptions("createHandler", o);
  checkMembers(o.members);
  const owners = o.owners ?? new MemoryOwners();
  const app: App = {
    o,
    members: o.members,
    owners,
    compactor: createCompactor({
      journal: o.journal, model: o.model, declaration: o.declaration, compactorDeclaration: o.compactorDeclaration,
      holder: o.holder, leaseMs: o.leaseMs, modelTimeoutMs: o.modelTimeoutMs, audit: o.audit, timelineTextChars: o.timelineTextChars, conversationsKept: o.conversationsKept,
      compression: o.compression, countTokens: o.countTokens, messageOverheadTokens: o.messageOverheadTokens,
    }),
    bodyLimit: o.bodyLimit ?? BODY_LIMIT_BYTES,
    perMinute: o.condensePerMinute ?? CONDENSE_PER_MINUTE,
    answerLeaseMs: o.answerLeaseMs ?? ANSWER_LEASE_MS,
    pollMs: o.pollMs ?? POLL_MS,
    checks: new Map(),
    answers: answersOf(owners),
    availability: o.compression ?? {},
    compression: o.compressionStore ?? new MemoryCompression(),
    rate: new Map(),
    running: new Set(),
    taskStarts: new Map(),
    wakers: new Map(),
    waiting: new Map(),
    drawn: new Map(),
  };
  const answer = async (req: Request, ctx?: ExecutionContext): Promise<Response> => {
    // HEAD is GET without the body, as foldline serve (axum) answers it.
    if (req.method !== "HEAD") return route(app, req, ctx).catch(failure);
    const r = await route(app, new Request(req, { method: "GET" }), ctx).catch(failure);
    // The body is never read: cancelled, so a task's event stream stops
    // following the journal at once.
    r.body?.cancel().catch(() => undefined);
    return new Response(null, { status: r.status, headers: r.headers });
  };
  const cors = corsOf(o.allowOrigins);
  const handle = cors ? (req: Request, ctx?: ExecutionContext) => withCors(cors, req, () => answer(req, ctx)) : answer;
  return Object.assign(handle, {
    setMembers(members: Member[]): void {
      checkMembers(members);
      app.members = members;
    },
  });
}
