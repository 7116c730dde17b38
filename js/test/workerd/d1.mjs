// The D1 stores' own rules, run inside workerd against miniflare's D1 (the
// SQLite Cloudflare runs): what the database must refuse when two isolates
// share one journal, which the shared suite (one writer at a time) cannot
// show. `d1Checks(f, fresh)` lists [name, fn]; `fresh()` answers a D1
// binding no other check has used.
import { check, equal, declaration, say } from "../shared.mjs";

/** The error `fn` throws (the check fails when it throws none). */
async function refusal(fn) {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  throw new Error("expected a refusal, the call succeeded");
}

export function d1Checks(f, fresh) {
  return [
    ["D1: of two isolates' appends at one position one is written, the other refused (conflict)", async () => {
      const db = fresh();
      const [a, b] = [await f.D1Journal.open(db), await f.D1Journal.open(db)];
      await a.append("c1", say(1, "user", "hello"));
      const results = await Promise.allSettled([
        a.append("c1", say(2, "assistant", "from a"), { expectedSeq: 1 }),
        b.append("c1", say(2, "assistant", "from b"), { expectedSeq: 1 }),
      ]);
      const written = results.filter((r) => r.status === "fulfilled");
      const refused = results.filter((r) => r.status === "rejected");
      equal(written.length, 1, "one written");
      equal(written[0].value, 2, "at position 2");
      equal(refused[0].reason.code, "conflict", String(refused[0].reason));
      equal((await b.readEvents("c1")).length, 2, "nothing else written");
      const gap = await refusal(() => a.append("c1", say(3, "user", "late"), { expectedSeq: 7 }));
      equal(gap.code, "conflict", String(gap));
      check(gap.message.includes("found 2"), gap.message);
      // Without an expected position, both isolates' messages go at the end.
      const ends = await Promise.all([a.append("c1", say(3, "user", "x")), b.append("c1", say(4, "user", "y"))]);
      equal([...ends].sort(), [3, 4], "each at its own position");
      equal((await a.readEvents("c1")).map((e) => e.seq), [1, 2, 3, 4], "dense positions");
    }],
    ["D1: a batch fenced by a stale lease token is refused (lease_lost), nothing written", async () => {
      const db = fresh();
      let now = 1_000;
      const j = await f.D1Journal.open(db, () => now);
      const first = await j.acquireLease("c1", "isolate-1", 100);
      equal(first, 1, "first token");
      equal(await j.acquireLease("c1", "isolate-2", 100), undefined, "held by another");
      equal(await j.acquireLease("c1", "isolate-1", 100), 1, "renewed under its token");
      now += 500; // lapsed
      const second = await j.acquireLease("c1", "isolate-2", 100);
      equal(second, 2, "a new holder, a newer token");
      const stale = await refusal(() => j.append("c1", say(1, "user", "hi"), { fence: first }));
      equal(stale.code, "lease_lost", String(stale));
      equal((await j.readEvents("c1")).length, 0, "nothing written");
      equal(await j.append("c1", say(1, "user", "hi"), { fence: second }), 1);
      await j.releaseLease("c1", "isolate-2");
      equal(await j.acquireLease("c1", "isolate-1", 100), 3, "released: the next grant is newer still");
      equal((await refusal(() => j.append("c1", [], { fence: second }))).code, "lease_lost", "an empty batch meets the same check");
    }],
    ["D1: a second boundary on one chain head is refused (fork); a used turn id keeps its content", async () => {
      const db = fresh();
      const j = await f.D1Journal.open(db);
      const c = f.createCompactor({ journal: j, model: f.modelFromFunction(async () => "Alice and Bob planned."), declaration });
      let s = 0;
      let boundary;
      while (!boundary && s < 200) {
        s++;
        await j.append("c1", say(s, s % 2 ? "user" : "assistant", `message ${s} `.padEnd(300, "x")));
        const r = await c.onMessage("c1");
        if (r.status === "compacted") boundary = r.boundary;
      }
      check(boundary, "compacted");
      const stored = (await j.readEvents("c1")).map((e) => e.event).find((e) => e.type === "boundary");
      equal(stored.id, boundary.id);
      const forked = await refusal(() => j.append("c1", stored));
      equal(forked.code, "fork", String(forked));
      const conflicting = await refusal(() => j.append("c1", say(1, "user", "other words under a used id")));
      equal(conflicting.code, "conflicting_turn", String(conflicting));
      check(conflicting.message.includes('"t1"'), conflicting.message);
      const head = (await j.readEvents("c1")).length;
      await j.append("c1", say(1, "user", "message 1 ".padEnd(300, "x")));
      equal((await j.readEvents("c1")).length, head + 1, "an identical repeat is written");
      equal((await c.resolve("c1")).accepted.length, 1, "one chain");
    }],
    ["D1: the events table refuses UPDATE and DELETE", async () => {
      const db = fresh();
      const j = await f.D1Journal.open(db);
      await j.append("c1", say(1, "user", "hello"));
      for (const sql of ["UPDATE events SET body = '{}'", "DELETE FROM events"]) {
        const e = await refusal(() => db.prepare(sql).run());
        check(/append-only/.test(e.message), e.message);
      }
      equal((await j.readEvents("c1"))[0].event.parts[0].text, "hello");
    }],
    ["D1: a long conversation is written in statements D1 takes and read whole, in pages", async () => {
      const db = fresh();
      const j = await f.D1Journal.open(db);
      // 5,200 events in batches of 130, at an expected position and at the
      // end in turns (each batch several statements: D1 binds at most 100
      // values to one), read back across a page of 5,000 rows.
      for (let b = 0; b < 40; b++) {
        const batch = Array.from({ length: 130 }, (_, i) => say(b * 130 + i + 1, i % 2 ? "assistant" : "user", `m${b * 130 + i + 1}`));
        equal(await j.append("c1", batch, b % 2 ? {} : { expectedSeq: b * 130 }), (b + 1) * 130);
      }
      const all = await j.readEvents("c1");
      equal(all.length, 5200);
      check(all.every((e, i) => e.seq === i + 1 && e.event.turnId === `t${i + 1}`), "in order, each once");
      const page = await j.readEventsPage("c1", 100, 5050);
      equal(page.length, 5050, "a page past one statement's rows is whole");
      equal([page[0].seq, page.at(-1).seq], [101, 5150]);
      equal((await j.readEvents("c1", 5199)).map((e) => e.seq), [5200]);
      const bad = await refusal(() => j.append("c1", say(5201, "user", "x"), { expectedSeq: "0 AS s); DROP TABLE events; --" }));
      equal(bad.code, "invalid_request", String(bad));
      equal((await j.readEvents("c1", 5190)).length, 10, "nothing written, nothing dropped");
    }],
    ["D1: a message through the handler stays far within a worker's 50 queries per invocation", async () => {
      // Every statement counted, as Cloudflare counts them (each of a batch too).
      const db = fresh();
      let statements = 0;
      const counted = (st) => ({ bind: (...v) => counted(st.bind(...v)), all: () => (statements++, st.all()), run: () => (statements++, st.run()), inner: st });
      const DB = { prepare: (sql) => counted(db.prepare(sql)), batch: (list) => ((statements += list.length), db.batch(list.map((s) => s.inner))) };
      const members = [{ id: "ana", tokenSha256: "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b" }]; // "secret"
      const open = async () => f.createHandler({
        journal: await f.D1Journal.open(DB), owners: await f.D1Owners.open(DB), compressionStore: await f.D1Compression.open(DB),
        model: f.modelFromFunction(async (p) => `Summary of ${p.input.turnCount} turns.`),
        declaration: { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "tokens", window: 8192 } }, members,
      });
      let handler = await open();
      statements = 0;
      handler = await open(); // another isolate, the tables there
      equal(statements, 3, "the three stores open in one statement each");
      const counts = [];
      for (let i = 1; i <= 120; i++) {
        if (i === 61) handler = await open(); // a cold isolate reads the conversation whole
        const waits = [];
        statements = 0;
        const r = await handler(new Request("http://edge/api/conversations/trip/messages", {
          method: "POST", headers: { authorization: "Bearer secret", "content-type": "application/json" },
          body: JSON.stringify([{ role: i % 2 ? "user" : "assistant", content: `message ${i} ` + "about the trip ".repeat(40) }]),
        }), { waitUntil: (w) => waits.push(w) });
        equal(r.status, 201, await r.clone().text());
        await Promise.all(waits);
        counts.push(statements);
      }
      const verify = await handler(new Request("http://edge/api/conversations/trip/verify", { headers: { authorization: "Bearer secret" } }));
      const v = await verify.json();
      check(v.ok && v.resolution.accepted.length >= 3, `compacted: ${JSON.stringify(v).slice(0, 300)}`);
      check(Math.max(...counts) <= 20, `statements per message: ${JSON.stringify(counts)}`);
    }],
    ["D1: owners and rooms, decided by the database across isolates", async () => {
      const db = fresh();
      const [a, b] = [await f.D1Owners.open(db), await f.D1Owners.open(db)];
      const owners = await Promise.all([a.claim("c1", "alice"), b.claim("c1", "bob")]);
      equal(owners[0], owners[1], "one owner");
      equal(await b.get("c1"), owners[0]);
      equal(await a.get("c2"), undefined);
      await a.admit("c1", "carol");
      await b.admit("c1", "bob");
      await b.admit("c1", "carol");
      equal(await b.room("c1"), ["bob", "carol"]);
      equal(await a.dismiss("c1", "carol"), true);
      equal(await a.dismiss("c1", "carol"), false);
      equal(await a.room("c1"), ["bob"]);
      // A member's manual compactions, counted by the database for every
      // isolate (two a minute here): the third on either is refused with
      // the seconds until the first is a minute old; another member's
      // are their own; a minute later one is free again.
      const t = 1_700_000_000_000;
      equal([await a.takeCondense("alice", t, 2), await b.takeCondense("alice", t + 1000, 2)], [0, 0]);
      equal(await b.takeCondense("alice", t + 2000, 2), 58);
      equal(await a.takeCondense("bob", t + 2000, 2), 0);
      equal(await a.takeCondense("alice", t + 60_001, 2), 0);
    }],
    ["D1: an answer started on one isolate holds the session on every isolate", async () => {
      const db = fresh();
      const members = [{ id: "ana", tokenSha256: "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b" }]; // "secret"
      const open = async () => f.createHandler({
        journal: await f.D1Journal.open(db), owners: await f.D1Owners.open(db), compressionStore: await f.D1Compression.open(db),
        model: f.modelFromFunction(async (p) => `Summary of ${p.input.turnCount} turns.`),
        declaration: { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "tokens", window: 8192 } }, members,
        compression: { surface: true, promptTrim: true },
      });
      const [a, b] = [await open(), await open()];
      const call = async (h, method, path, body) => {
        const waits = [];
        const r = await h(new Request(`http://edge${path}`, { method, headers: { authorization: "Bearer secret", "content-type": "application/json" }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) }), { waitUntil: (w) => waits.push(w) });
        const text = await r.text();
        await Promise.all(waits); // the automatic check an append or a given-back answer starts
        return { status: r.status, body: text ? JSON.parse(text) : undefined };
      };
      const c = "/api/conversations/trip";
      equal((await call(a, "POST", `${c}/messages`, [{ role: "user", content: "Plan the trip." }])).status, 201);
      equal((await call(a, "PUT", "/api/members/me/compression", { master: true, promptTrim: true })).status, 200);
      const started = await call(a, "POST", `${c}/answer`);
      equal(started.status, 201, JSON.stringify(started.body));
      // Another isolate sees the session held.
      const twice = await call(b, "POST", `${c}/answer`);
      equal([twice.status, twice.body.error.code, twice.body.error.message], [409, "busy", "another answer holds the session"]);
      equal((await call(b, "POST", `${c}/condense`)).body.error.code, "session_busy");
      // Opt-ins changed meanwhile apply to runs started after: the run
      // holding the session keeps what it captured, on every isolate.
      equal((await call(b, "PUT", "/api/members/me/compression", {})).status, 200);
      for (const h of [a, b]) equal((await call(h, "GET", `${c}/settings`)).body.state.promptTrim, { enabled: true }, "the answer's captured state");
      // Given back on the other isolate; the session is free on both.
      equal((await call(b, "DELETE", `${c}/answer/${started.body.answer}`)).status, 204);
      equal((await call(a, "DELETE", `${c}/answer/${started.body.answer}`)).status, 404, "given back once");
      for (const h of [a, b]) equal((await call(h, "GET", `${c}/settings`)).body.state.promptTrim, { enabled: false, offReason: "masterOff" }, "after the answer: the opt-ins of now");
      const again = await call(a, "POST", `${c}/answer`);
      equal(again.status, 201, JSON.stringify(again.body));
    }],
    ["D1: compression opt-ins and stats as MemoryCompression keeps them", async () => {
      const db = fresh();
      const d1 = await f.D1Compression.open(db);
      const mem = new f.MemoryCompression();
      const pass = (tool, turnId, status, eligible, delivered) => ({ tool, turnId, callId: tool === "toolResult" ? "call-1" : undefined, measurement: { status, eligibleBytes: eligible, deliveredBytes: delivered } });
      const passes = [pass("promptTrim", "t1", "applied", 100, 80), pass("toolResult", "t2", "bypassed", 50, 50), pass("promptTrim", "t3", "applied", 10, 9)];
      for (const s of [d1, mem]) {
        await s.record("alice", "c1", passes);
        await s.record("alice", "c1", passes.slice(0, 2)); // asked for again: recorded once
        await s.record("bob", "c1", passes.slice(2));
        await s.setPreferences("alice", { promptTrim: true });
      }
      equal(await d1.stats("alice"), await mem.stats("alice"));
      equal(await d1.stats("bob"), await mem.stats("bob"));
      equal(await d1.preferences("alice"), { promptTrim: true });
      equal(await d1.preferences("carol"), undefined);
    }],
  ];
}
