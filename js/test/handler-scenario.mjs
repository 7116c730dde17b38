// The scenario of `foldline serve`, run against the package's fetch handler:
// in Node (the handler called directly) and in workerd (over miniflare's HTTP).
// The Rust server passes the same scenario in host-wasmtime/tests/serve.rs.
//
// `world(f)` builds what a worker holds: a journal, a model whose answers
// the test sets, members, and a handler; `crash()` replaces the handler by a
// new one over the same journal while the old one's journal access dies (a
// process that stopped mid-task). `scenario(api)` drives it over an `api`
// of plain HTTP calls.

export const ALICE = "alice-token-1";
export const BOB = "bob-token-2";
export const CAROL = "carol-token-3";

async function sha256Hex(text) {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Demo turns, ~250–500 characters each, with a tool call and result every ninth. */
export function turns(n) {
  const topics = ["the train from Lisbon to Porto", "a budget of 1,400 euros", "vegetarian restaurants", "a day trip to the Douro valley", "museum hours"];
  const out = [{ role: "system", content: "You are a careful travel assistant." }];
  for (let i = 0; out.length < n; i++) {
    const topic = topics[i % topics.length];
    if (i % 9 === 8) {
      out.push({ role: "assistant", content: null, tool_calls: [{ id: `call_${i}`, type: "function", function: { name: "run_code", arguments: `{"code":"budget_left(${1400 - i * 3})"}` } }] });
      out.push({ role: "tool", tool_call_id: `call_${i}`, name: "run_code", content: `remaining budget: ${1400 - i * 3} euros\n${"ok\n".repeat(20)}` });
    } else if (i % 2 === 0) {
      out.push({ role: "user", content: `Turn ${i}: a question about ${topic}. ${"I read several posts about this and they disagree with each other. ".repeat(1 + (i % 4))}` });
    } else {
      out.push({ role: "assistant", content: `Turn ${i}: about ${topic}: ${"The options differ in price and timing; the cheaper one needs booking two weeks ahead. ".repeat(2 + (i % 5))}` });
    }
  }
  return out.slice(0, n);
}

/** How many demo turns hold about `chars` characters. */
export function turnsFor(chars) {
  let sum = 0;
  const all = turns(2000);
  for (let i = 0; i < all.length; i++) {
    sum += (all[i].content ?? "").length;
    if (sum >= chars) return i + 1;
  }
  return all.length;
}

export const declaration = {
  targetId: "assistant", compactorId: "assistant-compactor",
  budget: { kind: "chars", trigger: 20000, retain: 8000 }, summary: { maxChars: 1500 },
};

export async function world(f, stores = {}) {
  // The durable stores (in memory unless given: D1 in workerd), and the
  // handler's other options.
  const { journal = new f.MemoryJournal(), owners = new f.MemoryOwners(), ...options } = stores;
  let mode = "ok";
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const model = {
    async *stream() {
      while (mode === "hang") await sleep(20);
      if (mode === "fail") throw new f.ModelError("other", "SECRET-PROVIDER-DETAIL quota of org-42");
      yield { type: "delta", text: "Alice planned the launch; open question: the date." };
      yield { type: "done", modelId: "fake-1", usage: { inputTokens: 9, outputTokens: 9 }, finishReason: "stop" };
    },
    async complete() {
      while (mode === "hang") await sleep(20);
      if (mode === "fail") throw new f.ModelError("other", "SECRET-PROVIDER-DETAIL quota of org-42");
      return { text: "Alice planned the launch.", modelId: "fake-1", usage: { inputTokens: 9, outputTokens: 5 }, finishReason: "stop" };
    },
  };
  const members = [
    { id: "alice", tokenSha256: await sha256Hex(ALICE) },
    { id: "bob", tokenSha256: await sha256Hex(BOB) },
    { id: "carol", tokenSha256: await sha256Hex(CAROL) },
  ];
  let generation = 0;
  const make = () => {
    const g = ++generation;
    // The journal as this handler sees it: gone once the handler "crashed".
    const alive = new Proxy(journal, {
      get(target, prop) {
        const v = target[prop];
        if (typeof v !== "function") return v;
        return (...args) => (g === generation ? v.apply(target, args) : Promise.reject(new Error("this handler crashed")));
      },
    });
    return f.createHandler({
      journal: alive, model, declaration, members, owners, leaseMs: 300, pollMs: 50,
      bodyLimit: 4000, condensePerMinute: 6, holder: `handler-${g}`, ...options,
    });
  };
  let handler = make();
  return {
    journal,
    fetch: (req, ctx) => handler(req, ctx),
    setMembers: (list) => handler.setMembers(list),
    members,
    setMode: (m) => { mode = m; },
    crash: () => { handler = make(); },
  };
}

function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}
function eq(a, b, msg = "") {
  const x = JSON.stringify(a), y = JSON.stringify(b);
  if (x !== y) throw new Error(`${msg}\n  got:      ${x}\n  expected: ${y}`);
}

/** Parse a text/event-stream body as EventSource does. */
export async function readEvents(res) {
  eq(res.headers.get("content-type"), "text/event-stream", "content type");
  const text = await res.text();
  const out = [];
  for (const block of text.split("\n\n")) {
    let id, event, data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith("id:")) id = Number(line.slice(3).trim());
      else if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data += line.slice(5).trimStart();
    }
    if (data) out.push({ id, event, data: JSON.parse(data) });
  }
  return out;
}

/**
 * `api.call(method, path, token?, body?, headers?)` → Response;
 * `api.journal(conversation)` → the stored events; `api.setMode(m)`; `api.crash()`.
 */
export async function scenario(api) {
  const call = async (method, path, token, body, headers = {}) => {
    const res = await api.call(method, path, token, body, headers);
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* empty */ }
    return { status: res.status, json, headers: res.headers };
  };
  const code = (r) => r.json?.error?.code;
  const append = async (conv, from, to, token = ALICE) => {
    const all = turns(to);
    for (let i = from; i < to; i++) {
      const r = await call("POST", `/api/conversations/${conv}/messages`, token, JSON.stringify(all[i]));
      eq(r.status, 201, `append ${i}: ${JSON.stringify(r.json)}`);
    }
  };
  const events = (path, token, last) => api.call("GET", path, token, undefined, last === undefined ? {} : { "last-event-id": String(last) }).then(readEvents);
  const boundaries = async (conv) => (await api.journal(conv)).filter((s) => s.event.type === "boundary").map((s) => s.event.id);
  const waitFor = async (what, fn) => {
    const start = Date.now();
    while (!(await fn())) {
      if (Date.now() - start > 20_000) throw new Error(`waited for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  // 1. Automatic compaction, off the request path.
  const n = turnsFor(30_000);
  await append("c1", 0, n);
  await waitFor("an automatic boundary", async () => (await boundaries("c1")).length >= 1);
  let r = await call("GET", "/api/conversations/c1/verify", ALICE);
  eq([r.status, r.json.ok], [200, true], "verify after automatic compaction");

  // 2. Condense to completion; a reload resumes after its last id.
  await append("c1", n, n + turnsFor(5_000));
  r = await call("POST", "/api/conversations/c1/condense", ALICE);
  eq(r.status, 202, `condense: ${JSON.stringify(r.json)}`);
  const path = r.json.events;
  const all = await events(path, ALICE);
  eq(all.map((e) => e.event), ["requested", "completed"], "task events");
  eq(all[0].id, r.json.requestedSeq, "the first id is the requested event's position");
  const boundary = all[1].data.boundaryId;
  eq((await boundaries("c1")).filter((b) => b === boundary).length, 1, "the task's boundary, once");
  eq((await events(path, ALICE, all[0].id)).map((e) => e.event), ["completed"], "resumed");
  eq((await events(path, ALICE, all[1].id)).length, 0, "nothing after the terminal event");
  r = await call("GET", "/api/conversations/c1/context?format=openai", ALICE);
  eq(r.status, 200, "context");
  eq(r.json.messages.filter((m) => typeof m.content === "string" && m.content.startsWith("[untrusted-history-summary]")).length, 1, "one summary envelope");
  r = await call("GET", "/api/conversations/c1/timeline", ALICE);
  assert(JSON.stringify(r.json).includes(boundary), "the timeline shows the boundary");
  // A second /compact folds what the exact tail still held (down to the
  // newest unit); after it nothing is left to fold.
  r = await call("POST", "/api/conversations/c1/condense", ALICE);
  eq(r.status, 202, `the second /compact folds the rest: ${JSON.stringify(r.json)}`);
  eq((await events(r.json.events, ALICE)).map((e) => e.event), ["requested", "completed"], "the second task");
  r = await call("POST", "/api/conversations/c1/condense", ALICE);
  eq([r.status, code(r)], [409, "nothing_to_fold"], "nothing left to fold");
  r = await call("GET", "/api/conversations/c1/verify", ALICE);
  eq(r.json.resolution.accepted.length, (await boundaries("c1")).length, "every boundary accepted, no fork");

  // 3. Strangers and bad input.
  const m2 = turnsFor(15_000);
  await append("c2", 0, m2);
  const before = (await api.journal("c2")).length;
  for (const [token, status, c] of [[undefined, 401, "unauthorized"], ["guess", 401, "unauthorized"], [BOB, 403, "not_owner"]]) {
    for (const [m, p] of [["GET", "context"], ["GET", "timeline"], ["GET", "verify"], ["POST", "condense"], ["POST", "answer"]]) {
      r = await call(m, `/api/conversations/c2/${p}`, token);
      eq([r.status, code(r)], [status, c], `${m} ${p} as ${token}`);
    }
    r = await call("POST", "/api/conversations/c2/messages", token, JSON.stringify(turns(1)[0]));
    eq([r.status, code(r)], [status, c], `append as ${token}`);
  }
  eq(code(await call("GET", "/api/conversations/nope/context", ALICE)), "not_found", "nobody's conversation");
  eq(code(await call("GET", "/api/conversations/a%20b/verify", ALICE)), "invalid_input", "a bad id");
  for (const body of ['{"role":"wizard","content":"x"}', '{"type":"frontier"}', "not json", "[]"]) {
    r = await call("POST", "/api/conversations/c2/messages", ALICE, body);
    eq([r.status, code(r)], [400, "invalid_input"], body);
  }
  r = await call("POST", "/api/conversations/c2/messages", ALICE, JSON.stringify({ role: "user", content: "x".repeat(5000) }));
  eq([r.status, code(r)], [413, "body_too_large"], "big body");
  eq((await api.journal("c2")).length, before, "refused bodies wrote nothing");
  eq(code(await call("GET", "/api/conversations/c2/context?format=xml", ALICE)), "invalid_input", "bad format");
  // `ai-sdk` is the core's alias of `aiSdk`: the same messages.
  const dashed = await call("GET", "/api/conversations/c2/context?format=ai-sdk&messages=true", ALICE);
  const camel = await call("GET", "/api/conversations/c2/context?format=aiSdk&messages=true", ALICE);
  eq(dashed.status, 200, "format=ai-sdk");
  assert(Array.isArray(dashed.json) && dashed.json.length > 0, "format=ai-sdk: messages");
  eq(dashed.json, camel.json, "format=ai-sdk reads as aiSdk");
  // A name every JavaScript object answers to is no format either.
  for (const f of ["constructor", "toString", "__proto__", "hasOwnProperty"]) {
    eq(code(await call("GET", `/api/conversations/c2/context?format=${f}`, ALICE)), "invalid_input", `format=${f}`);
  }

  // 4. An answer owns the session.
  r = await call("POST", "/api/conversations/c2/answer", ALICE);
  eq(r.status, 201, "answer");
  const answer = r.json.answer;
  eq(code(await call("POST", "/api/conversations/c2/condense", ALICE)), "session_busy", "condense during an answer");
  eq(code(await call("POST", "/api/conversations/c2/answer", ALICE)), "busy", "a second answer");
  await append("c2", m2, m2 + 1);
  eq((await call("DELETE", `/api/conversations/c2/answer/${answer}`, ALICE)).status, 204, "answer ends");
  eq(code(await call("DELETE", `/api/conversations/c2/answer/${answer}`, ALICE)), "not_found", "ended once");

  // 5. The per-member condense rate (6 a minute here).
  await append("c5", 0, turnsFor(15_000), CAROL);
  let last;
  for (let i = 0; i < 7; i++) last = await call("POST", "/api/conversations/c5/condense", CAROL);
  eq([last.status, code(last)], [429, "rate_limited"], "seventh condense in a minute");
  assert(Number(last.headers.get("retry-after")) > 0, "Retry-After");
  // The first folds; a later one either finds it running (busy) or folds
  // what the exact tail held; then nothing is left to fold.
  const folded = (await boundaries("c5")).length;
  assert(folded >= 1 && folded <= 2, `${folded} of the six folded`);

  // 6. Provider text stays in the audit.
  await api.setMode("fail");
  await append("c3", 0, turnsFor(15_000));
  r = await call("POST", "/api/conversations/c3/condense", ALICE);
  eq(r.status, 202, `condense c3: ${JSON.stringify(r.json)}`);
  const failed = await events(r.json.events, ALICE);
  eq(failed.at(-1).event, "failed", "failed task");
  eq(failed.at(-1).data.notice, "The chat could not be compacted.", "generic notice");
  for (const p of ["timeline", "context", "verify"]) {
    r = await call("GET", `/api/conversations/c3/${p}`, ALICE);
    assert(!JSON.stringify(r.json).includes("SECRET"), `${p} leaks provider text`);
  }
  assert((await api.journal("c3")).some((s) => s.event.type === "compactionFailed" && s.event.reason.includes("SECRET-PROVIDER-DETAIL")), "audit keeps it");

  // 7. A handler that stops mid-task: the next one ends the task, then one boundary.
  await api.setMode("hang");
  await append("c4", 0, turnsFor(15_000));
  r = await call("POST", "/api/conversations/c4/condense", ALICE);
  eq(r.status, 202, `condense c4: ${JSON.stringify(r.json)}`);
  const requested = r.json.requestedSeq;
  await api.crash();
  await api.setMode("ok");
  const rest = await events(r.json.events, ALICE, requested);
  eq(rest.map((e) => e.event), ["failed"], "the interrupted task ends");
  eq((await boundaries("c4")).length, 0, "no boundary from the stopped handler");
  r = await call("POST", "/api/conversations/c4/condense", ALICE);
  eq(r.status, 202, `condense c4 again: ${JSON.stringify(r.json)}`);
  eq((await events(r.json.events, ALICE)).at(-1).event, "completed", "the new task completes");
  eq((await boundaries("c4")).length, 1, "exactly one boundary");
  r = await call("GET", "/api/conversations/c4/verify", ALICE);
  eq(r.json.ok, true, "verify c4");
  // 8. Hostile input (the server's admission rules): never a 5xx, every
  // refusal in the one error shape, nothing written by a refused request
  // (ownership included), and the conversation still selects and verifies.
  const shape = (r, what) => {
    assert(r.status < 500, `${what}: ${r.status} ${JSON.stringify(r.json)}`);
    if (r.status >= 400) assert(typeof r.json?.error?.code === "string" && typeof r.json?.error?.message === "string", `${what}: ${JSON.stringify(r.json)}`);
  };
  for (const path of ["/api/conversations/%FF%FE/context", "/api/conversations/c1/tasks/%FF/events", "/api/conversations/%E0%A4%A/verify"]) {
    r = await call("GET", path, ALICE);
    shape(r, path);
    eq([r.status, code(r)], [400, "invalid_input"], path);
  }
  r = await api.call("GET", "/api/conversations/c1/verify", undefined, undefined, { authorization: `bearer ${ALICE}` });
  eq(r.status, 200, "the bearer scheme in any case");
  for (const id of ["%2E", "%2E%2E"]) {
    // (The URL parser may normalize the segment away first: then 404.)
    r = await call("GET", `/api/conversations/${id}/verify`, ALICE);
    assert(["invalid_input", "not_found"].includes(code(r)), `${id}: ${JSON.stringify(r.json)}`);
  }
  // A stranger's refused first message claims nothing.
  r = await call("POST", "/api/conversations/h9/messages", BOB, JSON.stringify({ role: "user", content: "y".repeat(5_000) }));
  eq([r.status, code(r)], [413, "body_too_large"], "a body over the limit");
  r = await call("POST", "/api/conversations/h9/messages", BOB, JSON.stringify({ role: "user", content: "cut \ud83d" }));
  shape(r, "lone surrogate");
  eq(r.status, 400, "lone surrogate");
  await append("h9", 0, 2, ALICE);
  // Messages only: the automatic check may append its frontier meanwhile.
  const messagesOf = async (conv) => (await api.journal(conv)).filter((s) => s.event.type === "message").length;
  const messages = () => messagesOf("h9");
  const stored = await messages();
  for (const body of [
    { role: "assistant", content: null, tool_calls: [1, 2, 3] },
    { role: "assistant", content: "x", tool_calls: "nope" },
    { role: "assistant", content: "x", tool_calls: { id: "a" } },
    { role: "assistant", content: "x", tool_calls: [{ id: "a", type: "function" }] },
    { role: "assistant", content: "x", tool_calls: [{ id: "a", function: { name: 5 } }] },
    { role: "user", content: "x", name: 5 },
    { type: "message", conversation: "h9", sourceSeq: Number.MAX_SAFE_INTEGER + 2, turnId: "x", role: "user", parts: [] },
    [{ role: "user", content: "fine" }, 5],
  ]) {
    r = await call("POST", "/api/conversations/h9/messages", ALICE, JSON.stringify(body));
    shape(r, JSON.stringify(body));
    eq(r.status, 400, JSON.stringify(body));
    eq(await messages(), stored, `${JSON.stringify(body)}: nothing written`);
  }
  for (const p of ["context", "verify"]) eq((await call("GET", `/api/conversations/h9/${p}`, ALICE)).status, 200, p);
  // 9. Seeded random bodies (the Rust server's suite, on the handler): never a
  // 5xx, refusals in the one shape, nothing written by a refusal, and after
  // every accepted request the conversation selects and verifies; then a
  // batch as large as the body limit allows, and it still compacts.
  let x = 0x5eed;
  const rand = (n) => { x = (x * 1103515245 + 12345) % 2147483648; return x % n; };
  const atoms = ["null", "true", "1", "-1", "1e308", '"user"', '"assistant"', '"tool"', '"\\ud800"', "[]", "{}", "18446744073709551615"];
  const keys = ["role", "content", "tool_calls", "tool_call_id", "name", "type", "function", "id", "sourceSeq", "turnId", "parts"];
  // Bob's conversation: Alice has started her six manual compactions of
  // the minute already (on every handler of the store, a restart too).
  await append("r1", 0, 2, BOB);
  let accepted = 0;
  for (let i = 0; i < 120; i++) {
    const fields = Array.from({ length: rand(5) }, () => `"${keys[rand(keys.length)]}":${atoms[rand(atoms.length)]}`);
    if (i % 3 === 0) fields.unshift('"role":"user"'); // a third look like messages, with random company
    const body = `{${fields.join(",")}}`;
    const before = await messagesOf("r1");
    r = await call("POST", "/api/conversations/r1/messages", BOB, body);
    shape(r, body);
    if (r.status >= 400) eq(await messagesOf("r1"), before, `${body}: nothing written`);
    else accepted++;
    for (const p of ["context", "verify"]) {
      const q = await call("GET", `/api/conversations/r1/${p}`, BOB);
      assert(q.status === 200 || code(q) === "tail_turn_too_large", `${body}: ${p} ${q.status} ${JSON.stringify(q.json)}`);
    }
  }
  assert(accepted >= 1, "some random bodies are ordinary messages");
  const batch = JSON.stringify(Array.from({ length: 100 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: `m${i}` })));
  assert(batch.length < 4000, "under the body limit");
  r = await call("POST", "/api/conversations/r1/messages", BOB, batch);
  eq(r.status, 201, `a batch of 100: ${JSON.stringify(r.json)}`);
  await append("r1", 2, turnsFor(30_000), BOB);
  r = await call("POST", "/api/conversations/r1/condense", BOB);
  assert(r.status === 202 || code(r) === "nothing_to_fold", `condense r1: ${JSON.stringify(r.json)}`);
  if (r.status === 202) eq((await events(r.json.events, BOB)).at(-1).event, "completed", "condense r1 completes");
  eq((await call("GET", "/api/conversations/r1/verify", BOB)).json.ok, true, "verify r1");
}


/**
 * The chat client's local copy against a handler: after a provider outage
 * and compactions, `sync` brings every member-visible event (no audit
 * reason), the timeline projected locally with the core equals the
 * server's, its pages walked back are the whole of it, asked again it is
 * `304` on the wire, a long poll (of the events or the timeline) wakes on
 * the next write, and a bad position or page is refused. `c`: `{ client (foldline/client), project, fetch, journal(conv),
 * setMode(mode) }` — the handler may run in this process or in workerd.
 */
export async function clientScenario(c) {
  // Pages of 7 events (the server answers at most a page, with `more`):
  // `sync` reads page after page.
  const paged = (u, i) => c.fetch(String(u).includes("/events?") ? `${u}&limit=7` : u, i);
  const alice = c.client.createClient({ baseUrl: "http://local", token: ALICE, conversation: "feed", storage: null, fetch: paged, project: c.project });
  const until = async (what, ok) => {
    for (let i = 0; i < 400; i++) {
      if (ok((await c.journal("feed")).map((s) => s.event))) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`never: ${what}`);
  };
  await c.setMode("fail");
  for (let i = 0; i < 70; i++) await alice.send(`Message ${i}: ${"plans for the launch ".repeat(16)}`);
  await until("a failed compaction", (e) => e.some((x) => x.type === "compactionFailed"));
  await c.setMode("ok");
  for (let i = 70; i < 110; i++) await alice.send(`Message ${i}: ${"plans for the launch ".repeat(16)}`);
  await until("a compaction", (e) => e.some((x) => x.type === "boundary"));
  // Background checks may still write: compare once the journal is still.
  let n = -1;
  for (let now = (await c.journal("feed")).length; now !== n; now = (await c.journal("feed")).length) {
    n = now;
    await new Promise((r) => setTimeout(r, 150));
  }
  const got = await alice.sync();
  const stored = (await c.journal("feed")).length;
  if (got === 0 || alice.events().length !== stored) throw new Error(`synced ${got}, holding ${alice.events().length} of ${stored}`);
  if (JSON.stringify(alice.events()).includes("SECRET-PROVIDER-DETAIL")) throw new Error("an audit reason reached the member");
  if (!alice.events().some((e) => e.event.type === "compactionFailed")) throw new Error("the failure is not in the copy");
  const local = alice.localTimeline();
  const server = await alice.timeline();
  if (JSON.stringify(local) !== JSON.stringify(server)) throw new Error("the local projection differs from the server's");
  const localPage = alice.localTimeline({ limit: 9 });
  if (localPage.earlier === undefined || JSON.stringify(localPage) !== JSON.stringify(await alice.timeline({ limit: 9 }))) throw new Error("the local page differs from the server's");
  if ((await alice.sync()) !== 0) throw new Error("events taken twice");
  // Timeline pages, walked back by `earlier`, are the whole timeline; asked
  // again with nothing written, the wire says 304 and the kept answer
  // returns; a long poll on it answers the next write.
  const statuses = [];
  const pager = c.client.createClient({
    baseUrl: "http://local", token: ALICE, conversation: "feed", storage: null,
    fetch: (u, i) => c.fetch(u, i).then((r) => (statuses.push(r.status), r)),
  });
  let walked = [];
  let pageCount = 0;
  for (let before; ; pageCount++) {
    const p = await pager.timeline({ limit: 9, before });
    walked = [...p.items, ...walked];
    if (p.earlier === undefined) break;
    before = p.earlier;
  }
  if (pageCount < 3 || JSON.stringify(walked) !== JSON.stringify(server.items)) throw new Error(`${pageCount + 1} pages are not the whole timeline`);
  const first = await pager.timeline();
  const again = await pager.timeline();
  if (!again.unchanged || statuses.at(-1) !== 304 || JSON.stringify(again.items) !== JSON.stringify(first.items)) throw new Error(`asked again: ${statuses.at(-1)}`);
  const livePage = pager.timeline({ waitMs: 10_000 });
  await new Promise((r) => setTimeout(r, 50));
  await alice.send("A message for the page.");
  const moved = await livePage;
  if (moved.unchanged || moved.items.length <= first.items.length) throw new Error("the timeline's long poll missed the write");
  const badPage = await c.fetch("http://local/api/conversations/feed/timeline?limit=-1", { headers: { authorization: `Bearer ${ALICE}` } });
  if (badPage.status !== 400) throw new Error(`limit=-1 answered ${badPage.status}`);
  // A parameter given twice is refused, not one of its values chosen (the Rust server answers the same).
  for (const q of ["timeline?limit=1&limit=2", "events?after=0&after=3", "context?format=openai&format=anthropic"]) {
    const r = await c.fetch(`http://local/api/conversations/feed/${q}`, { headers: { authorization: `Bearer ${ALICE}` } });
    const v = await r.json();
    if (r.status !== 400 || v.error?.code !== "invalid_input" || !v.error.message.includes("given more than once")) throw new Error(`${q} answered ${r.status} ${JSON.stringify(v)}`);
  }
  if ((await alice.sync()) < 1) throw new Error("the copy missed the page's message");
  const waiting = alice.sync(10_000);
  await new Promise((r) => setTimeout(r, 50));
  await alice.send("One more thing.");
  if ((await waiting) < 1) throw new Error("the long poll missed the write");
  const page = await (await c.fetch("http://local/api/conversations/feed/events?after=0&limit=5", { headers: { authorization: `Bearer ${ALICE}` } })).json();
  if (page.events.length !== 5 || page.more !== true || page.last !== page.events[4].seq) throw new Error(`a page of 5: ${page.events.length} events, more ${page.more}`);
  const bad = await c.fetch("http://local/api/conversations/feed/events?after=x", { headers: { authorization: `Bearer ${ALICE}` } });
  if (bad.status !== 400) throw new Error(`after=x answered ${bad.status}`);
}
