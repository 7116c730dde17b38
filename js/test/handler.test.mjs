// The fetch handler's scenario in Node: the handler is called directly.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as f from "../dist/node.js";
import { world, scenario, clientScenario, ALICE, BOB } from "./handler-scenario.mjs";

await f.init();

test("the fetch handler passes the foldline serve scenario", async () => {
  const w = await world(f);
  const pending = [];
  const ctx = { waitUntil: (p) => pending.push(p) };
  await scenario({
    call: (method, path, token, body, headers = {}) => w.fetch(new Request(`http://local${path}`, {
      method, body, headers: { ...headers, ...(token ? { authorization: `Bearer ${token}` } : {}) },
    }), ctx),
    journal: (c) => w.journal.readEvents(c),
    setMode: w.setMode,
    crash: w.crash,
  });
  await Promise.allSettled(pending);
});

// The chat client (`foldline/client`) against the handler: `/compact` is a
// client action (never appended), its task followed to the end, the pointer
// kept while it runs and dropped after; another member's `/compact` comes
// back typed with the member-facing wording.
test("the chat client: /compact through the handler, never a message", async () => {
  const { createClient, ClientError, MEMBER_WORDING } = await import("../dist/client.js");
  const w = await world(f);
  const pending = [];
  const ctx = { waitUntil: (p) => pending.push(p) };
  const through = (input, init) => w.fetch(new Request(input, init), ctx);
  const store = new Map();
  const storage = { getItem: (k) => store.get(k) ?? null, setItem: (k, v) => store.set(k, v), removeItem: (k) => store.delete(k) };
  const alice = createClient({ baseUrl: "http://local", token: ALICE, conversation: "room", storage, fetch: through });
  for (let i = 0; i < 40; i++) {
    const sent = await alice.send(`Message ${i}: ${"plans for the launch ".repeat(16)}`);
    if (sent.kind !== "message") throw new Error(JSON.stringify(sent));
  }
  const sent = await alice.send("/compact");
  if (sent.kind !== "compact") throw new Error("/compact was not a client action");
  if (!alice.pending()) throw new Error("no task pointer kept while the task runs");
  const seen = [];
  const end = await alice.follow(sent.task, (e) => seen.push(e.state));
  if (end.state !== "completed" || seen[0] !== "requested") throw new Error(`${seen.join(",")}`);
  if (alice.pending()) throw new Error("the pointer outlived the task");
  const events = (await w.journal.readEvents("room")).map((s) => s.event);
  if (events.some((e) => e.type === "message" && JSON.stringify(e.parts).includes("/compact"))) throw new Error("/compact was appended");
  const items = (await alice.timeline()).items;
  if (!items.some((i) => i.type === "divider" && i.kind === "manual" && i.state === "completed")) throw new Error("no completed manual divider");
  const bob = createClient({ baseUrl: "http://local", token: BOB, conversation: "room", storage: null, fetch: through });
  // A room: bob is let in by the owner; he posts (the sender is who he is)
  // and reads the same timeline; only the owner condenses.
  let refused;
  try { await bob.timeline(); } catch (e) { refused = e; }
  if (refused?.code !== "not_owner") throw new Error(`a member outside the room read it: ${refused}`);
  const put = await through(new Request("http://local/api/conversations/room/members/bob", { method: "PUT", headers: { authorization: `Bearer ${ALICE}` } }));
  if (put.status !== 204) throw new Error(`admit: ${put.status}`);
  const byBob = await through(new Request("http://local/api/conversations/room/members/bob", { method: "PUT", headers: { authorization: `Bearer ${BOB}` } }));
  if (byBob.status !== 403) throw new Error("a room member managed the room");
  await bob.send("Bob here: I can join on Friday.");
  const last = (await w.journal.readEvents("room")).map((s) => s.event).filter((e) => e.type === "message").at(-1);
  if (last.sender !== "bob") throw new Error(`sender ${last.sender}`);
  if (JSON.stringify(await bob.timeline()) !== JSON.stringify(await alice.timeline())) throw new Error("the room reads different timelines");
  let caught;
  try { await bob.send("/compact"); } catch (e) { caught = e; }
  if (!(caught instanceof ClientError) || caught.code !== "not_owner" || caught.memberMessage !== MEMBER_WORDING.not_owner) throw new Error(String(caught));
  if ((await alice.me()) !== "alice" || (await bob.me()) !== "bob") throw new Error("me() names another member");
  // Each member edits only what they sent; the timeline marks the edit.
  const mine = (await bob.timeline()).items.filter((i) => i.type === "message").at(-1);
  const edited = await bob.edit(mine.turnId, "Bob here: I can join on Saturday.");
  if (edited.correctionSeq !== 1) throw new Error(JSON.stringify(edited));
  const shown = (await alice.timeline()).items.find((i) => i.turnId === mine.turnId);
  if (!shown.corrected || !JSON.stringify(shown).includes("Saturday")) throw new Error(JSON.stringify(shown));
  let notMine;
  try { await bob.edit(items.find((i) => i.type === "message").turnId, "not bob's"); } catch (e) { notMine = e; }
  if (!(notMine instanceof ClientError) || notMine.code !== "not_author" || notMine.memberMessage !== MEMBER_WORDING.not_author) throw new Error(String(notMine));
  await Promise.allSettled(pending);
});

// The client's local copy against the handler (also run in workerd:
// test/workerd/run.mjs).
test("the chat client keeps a local copy and projects the timeline with the core", async () => {
  const client = await import("../dist/client.js");
  const w = await world(f);
  const pending = [];
  const ctx = { waitUntil: (p) => pending.push(p) };
  await clientScenario({
    client,
    project: (events, accepted, retired, page) => f.timeline(events, accepted, retired, page),
    fetch: (input, init) => w.fetch(new Request(input, init), ctx),
    journal: (c) => w.journal.readEvents(c),
    setMode: w.setMode,
  });
  await Promise.allSettled(pending);
});

// Both servers answer each stable code with one status (tests/http/status.json;
// the Rust server's status_of is tested against the same table).
test("the HTTP status of every code is the shared table's", async () => {
  const { readFile } = await import("node:fs/promises");
  const table = JSON.parse(await readFile(new URL("../../tests/http/status.json", import.meta.url), "utf8"));
  const codes = Object.entries(table.codes);
  if (codes.length < 40) throw new Error(`${codes.length} codes in the table`);
  for (const [code, status] of codes) {
    if (f.httpStatusOf(code) !== status) throw new Error(`${code}: ${f.httpStatusOf(code)}, the table says ${status}`);
  }
  if (f.httpStatusOf("a_code_nobody_knows") !== table.default) throw new Error("the default differs");
});

// Allowed origins (CORS) are checked as the Rust server checks them
// (tests/http/origins.json; serve/cors.rs is tested against the same table),
// and a page of an allowed origin gets what a browser needs to call: a
// preflight answered before any route, its origin named on every answer (a
// refusal too) and the ETag readable; another origin's page is named on
// none. (The two servers' headers are compared in test/servers/run.mjs, and
// a real browser calls across origins in test/chat/run.mjs.)
test("allowed origins: the shared table, preflights and the headers a page reads", async () => {
  const { readFile } = await import("node:fs/promises");
  const table = JSON.parse(await readFile(new URL("../../tests/http/origins.json", import.meta.url), "utf8"));
  const base = { journal: new f.MemoryJournal(), model: f.modelFromFunction(async () => "S."), declaration: { targetId: "a", compactorId: "a-c" }, members: [] };
  for (const given of table.refused) {
    assert.throws(() => f.createHandler({ ...base, allowOrigins: [given] }), (e) => e.code === "invalid_request", given);
    assert.throws(() => f.createHandler({ ...base, allowOrigins: ["*", given] }), (e) => e.code === "invalid_request", given);
  }
  const token = "cors-token";
  const members = [{ id: "alice", tokenSha256: createHash("sha256").update(token).digest("hex") }];
  for (const [given, taken] of Object.entries(table.accepted)) {
    const h = f.createHandler({ ...base, members, allowOrigins: [given] });
    const pre = await h(new Request("http://local/api/conversations/c/messages", {
      method: "OPTIONS", headers: { origin: taken, "access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type" },
    }));
    assert.equal(pre.status, 200, given);
    assert.equal(pre.headers.get("access-control-allow-origin"), taken, given);
    assert.match(pre.headers.get("access-control-allow-headers"), /authorization.*content-type.*idempotency-key/);
  }
  const h = f.createHandler({ ...base, members, allowOrigins: ["https://app.example"] });
  const call = (origin, path, init = {}) => h(new Request(`http://local${path}`, { ...init, headers: { ...(init.headers ?? {}), ...(origin ? { origin } : {}) } }));
  const refused = await call("https://app.example", "/api/conversations/c/timeline", { headers: { authorization: "Bearer wrong" } });
  assert.equal(refused.status, 401);
  assert.equal(refused.headers.get("access-control-allow-origin"), "https://app.example");
  const posted = await call("https://app.example", "/api/conversations/c/messages", {
    method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: JSON.stringify({ role: "user", content: "hi" }),
  });
  assert.equal(posted.status, 201);
  const page = await call("https://app.example", "/api/conversations/c/timeline", { headers: { authorization: `Bearer ${token}` } });
  assert.equal(page.headers.get("access-control-allow-origin"), "https://app.example");
  assert.ok(page.headers.get("etag"));
  assert.match(page.headers.get("access-control-expose-headers"), /etag/);
  const stranger = await call("https://evil.example", "/api/conversations/c/timeline", { headers: { authorization: `Bearer ${token}` } });
  assert.equal(stranger.headers.get("access-control-allow-origin"), null);
  const strangersPreflight = await call("https://evil.example", "/api/conversations/c/timeline", { method: "OPTIONS", headers: { "access-control-request-method": "GET" } });
  assert.equal(strangersPreflight.headers.get("access-control-allow-origin"), null);
  // Without allowed origins: no CORS header, and OPTIONS is a method no route takes.
  const plain = f.createHandler({ ...base, members });
  const none = await plain(new Request("http://local/api/conversations/c/timeline", { method: "OPTIONS", headers: { origin: "https://app.example" } }));
  assert.equal(none.status, 405);
  assert.equal(none.headers.get("access-control-allow-origin"), null);
});

// Pages following one conversation (a room's members, a member's tabs) all
// wake on a write: they share one drawing of the timeline instead of one each.
test("pages following one conversation share one drawing per write", async () => {
  const { createClient } = await import("../dist/client.js");
  // No kept text: each drawing reads the conversation whole, so the whole
  // reads count the drawings.
  const w = await world(f, { timelineTextChars: 0 });
  const pending = [];
  const ctx = { waitUntil: (p) => pending.push(p) };
  const through = (input, init) => w.fetch(new Request(input, init), ctx);
  const page = () => createClient({ baseUrl: "http://local", token: ALICE, conversation: "shared", storage: null, fetch: through });
  const alice = page();
  for (let i = 0; i < 30; i++) await alice.send(`Message ${i}.`);
  await Promise.allSettled(pending);
  // A drawing reads the whole conversation (from position 0).
  let drawings = 0;
  const read = w.journal.readEvents.bind(w.journal);
  w.journal.readEvents = (c, after) => {
    if (c === "shared" && !after) drawings++;
    return read(c, after);
  };
  const pages = Array.from({ length: 5 }, page);
  for (const p of pages) await p.timeline({ limit: 10 });
  if (drawings !== 1) throw new Error(`five first answers took ${drawings} drawings`);
  drawings = 0;
  const following = pages.map((p) => p.timeline({ limit: 10, waitMs: 10_000 }));
  await new Promise((r) => setTimeout(r, 100));
  await alice.send("A message for every page.");
  const answers = await Promise.all(following);
  if (answers.some((a) => a.unchanged || JSON.stringify(a.items) !== JSON.stringify(answers[0].items))) throw new Error("the pages answered differently");
  if (!JSON.stringify(answers[0].items).includes("A message for every page.")) throw new Error("the write is not on the page");
  if (drawings !== 1) throw new Error(`five pages woken by one write took ${drawings} drawings`);
  await Promise.allSettled(pending);
});

// A task's event stream reads the journal from the task on, not whole: the
// handler remembers where the tasks it started or followed begin, and one
// that knows nothing of a task finds it reading a page at a time.
test("a task's event stream reads from the task, not the whole conversation", async () => {
  const w = await world(f, { bodyLimit: 1 << 20 });
  const pending = [];
  const ctx = { waitUntil: (p) => pending.push(p) };
  const call = (method, path, body) => w.fetch(new Request(`http://local${path}`, {
    method, body, headers: { authorization: `Bearer ${ALICE}`, ...(body ? { "content-type": "application/json" } : {}) },
  }), ctx);
  for (let i = 0; i < 3; i++) {
    const batch = Array.from({ length: 1000 }, (_, k) => ({ role: k % 2 ? "assistant" : "user", content: `Message ${i * 1000 + k}: ${"word ".repeat(20)}` }));
    assert.equal((await call("POST", "/api/conversations/long/messages", JSON.stringify(batch))).status, 201);
  }
  await Promise.allSettled(pending);
  assert.equal((await call("POST", "/api/conversations/long/messages", JSON.stringify({ role: "user", content: "x ".repeat(3000) }))).status, 201);
  await Promise.allSettled(pending);
  const started = await call("POST", "/api/conversations/long/condense");
  assert.equal(started.status, 202);
  const { events: path } = await started.json();
  await Promise.allSettled(pending);
  const total = (await w.journal.readEvents("long", 0)).length;
  // Count the events the handler reads of the conversation, in either way.
  let read = 0, largest = 0;
  for (const name of ["readEvents", "readEventsPage"]) {
    const own = w.journal[name].bind(w.journal);
    w.journal[name] = async (c, ...rest) => {
      const got = await own(c, ...rest);
      if (c === "long") [read, largest] = [read + got.length, Math.max(largest, got.length)];
      return got;
    };
  }
  const follow = async () => {
    [read, largest] = [0, 0];
    const r = await call("GET", path);
    assert.equal(r.status, 200);
    return { events: (await r.text()).match(/^event: .*$/gm), read, largest };
  };
  const here = await follow();
  assert.deepEqual(here.events, ["event: requested", "event: completed"]);
  assert.ok(here.read < 50, `followed where it started: ${here.read} of ${total} events read`);
  // A handler that knows nothing of the task (a restart, another isolate)
  // reads from the position the task's id carries.
  assert.match(path, /\/tasks\/task-\d+-[0-9a-f]{32}\/events$/);
  w.crash();
  const fresh = await follow();
  assert.deepEqual(fresh.events, here.events);
  assert.ok(fresh.read < 50, `found from the id's position: ${fresh.read} of ${total} events read`);
  const again = await follow();
  assert.deepEqual(again.events, here.events);
  assert.ok(again.read < 50, `followed again: ${again.read} of ${total} events read`);
  // A task id of another form (one a compactor was handed: its events
  // written again under that id) is found by reading the conversation a
  // page at a time.
  const taskEvents = (await w.journal.readEvents("long", 0)).map((s) => s.event).filter((e) => e.type === "compactionTask");
  await w.journal.append("long", taskEvents.map((e) => ({ ...e, taskId: "task-handed" })));
  w.crash();
  [read, largest] = [0, 0];
  const other = await call("GET", "/api/conversations/long/tasks/task-handed/events");
  assert.equal(other.status, 200);
  assert.ok(largest <= 1000 && read >= total, `found by pages: ${read} events read, ${largest} at once`);
});

// A HEAD of a task's event stream answers as GET without the body, and the
// stream it did not send stops following the journal at once (it polled
// until the task ended).
test("a HEAD of a pending task's event stream stops following the journal", async () => {
  const journal = new f.MemoryJournal();
  let reads = 0;
  for (const name of ["readEvents", "readEventsPage"]) {
    const own = journal[name].bind(journal);
    journal[name] = (...a) => { reads++; return own(...a); };
  }
  let release, hang = Promise.resolve();
  const answer = { text: "Summary.", modelId: "m", usage: { inputTokens: 1, outputTokens: 1 }, finishReason: "stop" };
  const model = {
    async *stream() { await hang; yield { type: "delta", text: answer.text }; yield { type: "done", ...answer }; },
    async complete() { await hang; return answer; },
  };
  const member = { id: "alice", tokenSha256: createHash("sha256").update(ALICE).digest("hex") };
  const handler = f.createHandler({ journal, model, declaration: { targetId: "assistant", compactorId: "assistant-compactor" }, members: [member], pollMs: 20 });
  const pending = [];
  const call = (method, path, body) => handler(new Request(`http://local${path}`, {
    method, body, headers: { authorization: `Bearer ${ALICE}`, "content-type": "application/json" },
  }), { waitUntil: (p) => pending.push(p) });
  const batch = (n, word) => JSON.stringify(Array.from({ length: n }, (_, k) => ({ role: k % 2 ? "assistant" : "user", content: `${word} `.repeat(400) })));
  assert.equal((await call("POST", "/api/conversations/c/messages", batch(40, "word"))).status, 201);
  await Promise.allSettled(pending);
  hang = new Promise((r) => (release = r)); // the manual task's model call waits
  assert.equal((await call("POST", "/api/conversations/c/messages", batch(10, "more"))).status, 201);
  const started = await call("POST", "/api/conversations/c/condense");
  assert.equal(started.status, 202);
  const head = await call("HEAD", (await started.json()).events);
  assert.equal(head.status, 200);
  assert.equal(head.headers.get("content-type"), "text/event-stream");
  try {
    await new Promise((r) => setTimeout(r, 100));
    const before = reads;
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(reads - before, 0, "journal reads after the HEAD was answered");
  } finally {
    release();
    await Promise.allSettled(pending);
  }
});

// Answers whose lease lapsed without being given back are let go once the
// handler holds 1,024 of them: a long-lived process keeps none per
// conversation ever answered. Before, a lapsed answer could still be given
// back (as foldline serve allows); after, it is one that holds nothing.
test("answers that lapsed without being given back are let go", async () => {
  const member = { id: "alice", tokenSha256: createHash("sha256").update(ALICE).digest("hex") };
  const model = { async *stream() {}, async complete() { throw new Error("not called"); } };
  const handler = f.createHandler({ journal: new f.MemoryJournal(), model, declaration: { targetId: "assistant", compactorId: "assistant-compactor" }, members: [member], answerLeaseMs: 1 });
  const pending = [];
  const call = (method, path, body) => handler(new Request(`http://local${path}`, {
    method, body, headers: { authorization: `Bearer ${ALICE}`, "content-type": "application/json" },
  }), { waitUntil: (p) => pending.push(p) });
  const answers = [];
  const answer = async (i) => {
    assert.equal((await call("POST", `/api/conversations/c${i}/messages`, JSON.stringify({ role: "user", content: "hello" }))).status, 201);
    const r = await call("POST", `/api/conversations/c${i}/answer`);
    assert.equal(r.status, 201);
    answers[i] = (await r.json()).answer;
  };
  for (let i = 0; i < 1023; i++) await answer(i);
  await new Promise((r) => setTimeout(r, 5));
  assert.equal((await call("DELETE", `/api/conversations/c0/answer/${answers[0]}`)).status, 204, "a lapsed answer is given back");
  for (let i = 1023; i < 1025; i++) await answer(i); // 1,024 held
  await answer(1025); // the lapsed ones are let go first
  const gone = await call("DELETE", `/api/conversations/c1/answer/${answers[1]}`);
  assert.equal(gone.status, 404);
  assert.equal((await gone.json()).error.code, "not_found");
  assert.equal((await call("DELETE", `/api/conversations/c1025/answer/${answers[1025]}`)).status, 204, "the answer just started is kept");
  await Promise.allSettled(pending);
});

// `countTokens` reaches the handler's compactor (`foldline serve
// --tokenizer`): a posted message and a member's edit of it are stored with
// the host's count and its framing.
test("the handler stores the host's token counts", async () => {
  const member = { id: "alice", tokenSha256: createHash("sha256").update(ALICE).digest("hex") };
  const model = { async *stream() {}, async complete() { throw new Error("not called"); } };
  const journal = new f.MemoryJournal();
  const words = (t) => t.split(/\s+/).filter(Boolean).length;
  const handler = f.createHandler({ journal, model, declaration: { targetId: "assistant", compactorId: "assistant-compactor" }, members: [member], countTokens: words, messageOverheadTokens: 3 });
  const pending = [];
  const call = (method, path, body) => handler(new Request(`http://local${path}`, {
    method, body, headers: { authorization: `Bearer ${ALICE}`, "content-type": "application/json" },
  }), { waitUntil: (p) => pending.push(p) });
  assert.equal((await call("POST", "/api/conversations/c/messages", JSON.stringify({ role: "user", content: "one two three four" }))).status, 201);
  assert.equal((await call("PUT", "/api/conversations/c/messages/c-1", JSON.stringify({ content: "one two" }))).status, 200);
  await Promise.allSettled(pending);
  const stored = (await journal.readEvents("c")).map((s) => s.event);
  assert.equal(stored.find((e) => e.type === "message").tokens, 4 + 3);
  assert.equal(stored.find((e) => e.type === "correction").tokens, 2 + 3);
  assert.throws(() => f.createHandler({ journal, model, declaration: { targetId: "assistant", compactorId: "assistant-compactor" }, members: [member], countTokens: 4 }), (e) => e.code === "invalid_request");
});

// The chat client sends each message under an idempotency key: an answer
// lost on the way back (the message written) is sent again under the same
// key and written once; a send that failed and is sent again with the key
// it used (as the reference page does) is written once too; a connection
// that stays down is the caller's error after the retries.
test("the chat client: a message whose answer was lost is written once", async () => {
  const { createClient, SEND_RETRIES } = await import("../dist/client.js");
  const w = await world(f);
  const pending = [];
  const ctx = { waitUntil: (p) => pending.push(p) };
  let drop = 0;
  let posts = 0;
  const through = async (input, init) => {
    const res = await w.fetch(new Request(input, init), ctx);
    if (init?.method === "POST") posts++;
    if (init?.method === "POST" && drop > 0) {
      drop--;
      throw new TypeError("fetch failed: the connection dropped after the request");
    }
    return res;
  };
  const alice = createClient({ baseUrl: "http://local", token: ALICE, conversation: "lossy", storage: null, fetch: through });
  drop = 1;
  assert.deepEqual(await alice.send("Is the venue booked?"), { kind: "message", appended: 1 });
  assert.equal(posts, 2, "sent again once");
  drop = SEND_RETRIES + 1;
  await assert.rejects(alice.send("And the caterer?", { idempotencyKey: "page-1" }), TypeError);
  assert.equal(posts, 2 + SEND_RETRIES + 1);
  assert.deepEqual(await alice.send("And the caterer?", { idempotencyKey: "page-1" }), { kind: "message", appended: 1 });
  const texts = (await w.journal.readEvents("lossy")).map((s) => s.event).filter((e) => e.type === "message").map((e) => e.parts[0].text);
  assert.deepEqual(texts, ["Is the venue booked?", "And the caterer?"]);
  await Promise.allSettled(pending);
});

// The handler's members replaced while it runs (foldline serve reads its
// members file again on SIGHUP): a member taken out is refused 401 from the
// next request, a long poll of theirs already waiting too once something is
// written; a list createHandler would refuse leaves the members as they were.
test("setMembers: a member taken out is refused, a waiting long poll of theirs too", async () => {
  const w = await world(f);
  const pending = [];
  const ctx = { waitUntil: (p) => pending.push(p) };
  const call = (token, method, path, body) => w.fetch(new Request(`http://local/api/conversations/m1${path}`, {
    method, body: body && JSON.stringify(body), headers: { authorization: `Bearer ${token}` },
  }), ctx);
  assert.equal((await call(ALICE, "POST", "/messages", { role: "user", content: "hello" })).status, 201);
  assert.equal((await call(ALICE, "PUT", "/members/bob")).status, 204);
  const last = (await (await call(BOB, "GET", "/events?after=0")).json()).last;
  const poll = call(BOB, "GET", `/events?after=${last}&wait=10000`);
  await new Promise((r) => setTimeout(r, 200));
  w.setMembers(w.members.filter((m) => m.id !== "bob"));
  assert.equal((await call(ALICE, "POST", "/messages", { role: "user", content: "after bob" })).status, 201);
  const answered = await poll;
  assert.deepEqual([answered.status, (await answered.json()).error.code], [401, "unauthorized"]);
  assert.equal((await call(BOB, "GET", "/timeline")).status, 401);
  assert.throws(() => w.setMembers([]), (e) => e.code === "invalid_request");
  assert.equal((await call(ALICE, "GET", "/timeline")).status, 200, "the members stay as they were");
  assert.equal((await call(BOB, "GET", "/timeline")).status, 401);
  await Promise.allSettled(pending);
});
