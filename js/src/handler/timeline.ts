// `…/timeline[?limit=N][&before=S][&wait=ms]`: the chat timeline or one page
// of it, with an `ETag` naming the journal position and declarations it was
// drawn at; `If-None-Match` with that tag is `304` while nothing was
// written (with `wait`, a long poll); the pages that wake on one write share
// one drawing. The Rust server's timeline.rs and drawn.rs.

import { TIMELINE_KEPT_BYTES, TIMELINE_SLOTS } from "../defaults.js";
import { canonical } from "../hash.js";
import { sha256Hex, stillAdmitted } from "./access.js";
import { nap, number, waitDeadline } from "./feed.js";
import { holding, type App, type TimelineSlot } from "./state.js";

/** The timeline route, for an admitted member. */
export async function timelineRoute(app: App, req: Request, id: string, url: URL, member: string): Promise<Response> {
  const page = { limit: number(url, "limit"), before: number(url, "before") };
  const deadline = waitDeadline(url);
  const known = req.headers.get("if-none-match");
  if (known !== null) {
    const unchanged = await holding(app, member, deadline, async () => {
      for (let waited = false; ; waited = true) {
        const now = await tag(app, await app.compactor.position(id));
        if (!matches(known, now)) {
          // Admitted again after a wait: a member let out of the room meanwhile is refused.
          if (waited) await stillAdmitted(app, id, member);
          return undefined;
        }
        if (Date.now() >= deadline) return tagged(new Response(null, { status: 304 }), now);
        await nap(app, id, deadline);
      }
    });
    if (unchanged) return unchanged;
  }
  // One drawing per page and write: requests for the same page take turns
  // on its slot; the first draws, the others answer from what it kept.
  const slot = slotOf(app, `${id}\n${page.limit ?? ""}\n${page.before ?? ""}`);
  slot.users++;
  const turn = slot.turn.then(async () => {
    // The position is read before drawing: a write in between draws with
    // this answer and is named by the next tag, never hidden behind this one.
    const now = await tag(app, await app.compactor.position(id));
    if (slot.kept?.tag === now) return slot.kept;
    const drawn = { tag: now, body: new TextEncoder().encode(JSON.stringify(await app.compactor.timeline(id, page))) };
    slot.kept = drawn.body.length <= TIMELINE_KEPT_BYTES ? drawn : undefined;
    return drawn;
  });
  slot.turn = turn.then(() => undefined, () => undefined);
  try {
    const { tag: t, body } = await turn;
    return tagged(new Response(body, { status: 200, headers: { "content-type": "application/json" } }), t);
  } finally {
    slot.users--;
  }
}

function slotOf(app: App, key: string): TimelineSlot {
  if (app.drawn.size >= TIMELINE_SLOTS) for (const [k, s] of app.drawn) if (s.users === 0) app.drawn.delete(k);
  let slot = app.drawn.get(key);
  if (!slot) app.drawn.set(key, (slot = { turn: Promise.resolve(), users: 0 }));
  return slot;
}

/** The tag of a timeline drawn at `seq` under this handler's declarations. */
async function tag(app: App, seq: number): Promise<string> {
  app.declarationsHash ??= sha256Hex(canonical([app.o.declaration, app.o.compactorDeclaration ?? null]));
  return `"${seq}-${(await app.declarationsHash).slice(0, 16)}"`;
}

/** Whether an `If-None-Match` list names `tag` (weak or strong, or `*`). */
function matches(list: string, tag: string): boolean {
  return list.split(",").map((t) => t.trim().replace(/^W\//, "")).some((t) => t === tag || t === "*");
}

/** `r` with its tag, to be revalidated on every use. */
function tagged(r: Response, tag: string): Response {
  r.headers.set("etag", tag);
  r.headers.set("cache-control", "private, no-cache");
  return r;
}
