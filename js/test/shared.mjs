// The suite every runtime runs: Node (node:test), headless Chromium and
// workerd. It takes the loaded package and returns [name, fn] cases; it uses
// no runtime-specific API.

export function check(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

export function equal(a, b, msg = "") {
  const x = JSON.stringify(a), y = JSON.stringify(b);
  if (x !== y) throw new Error(`${msg}\n  got:      ${x}\n  expected: ${y}`);
}

export const declaration = {
  targetId: "agent",
  compactorId: "agent-compactor",
  budget: { kind: "chars", trigger: 4000, retain: 2000 },
  summary: { maxChars: 300 },
};

export function say(seq, role, text) {
  return { type: "message", conversation: "c1", chat: "", sender: "", sourceSeq: seq, turnId: `t${seq}`, role, parts: [{ type: "text", text }] };
}

/** A model that answers deterministically; knobs simulate stream failures. */
export function fakeModel(opts = {}) {
  const calls = { stream: 0, complete: 0 };
  return {
    calls,
    async *stream(packet) {
      calls.stream++;
      if (opts.dropBeforeContent) throw new Error("connection reset");
      yield { type: "delta", text: "Summary of " };
      if (opts.dropAfterContent) throw new Error("connection reset");
      yield { type: "delta", text: `${packet.input.turnCount} turns.` };
      yield { type: "done", modelId: "fake-1", usage: { inputTokens: 100, outputTokens: 5 }, finishReason: "stop" };
    },
    async complete(packet) {
      calls.complete++;
      return { text: `Buffered summary of ${packet.input.turnCount} turns.`, modelId: "fake-1", usage: { inputTokens: 100, outputTokens: 6 }, finishReason: "stop" };
    },
  };
}

export async function chat(compactor, journal, from, to) {
  let last;
  for (let s = from; s <= to; s++) {
    await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `message ${s} `.padEnd(300, "x")));
    last = await compactor.onMessage("c1");
  }
  return last;
}

export function suite(f, makeJournal) {
  // A compactor on the README's token budget, and `until(status)`: messages
  // until a check answers `status` (at most `most` in all).
  const onTokens = async (model, most = 200) => {
    const journal = await makeJournal();
    const tokens = { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "tokens", window: 8192 } };
    const c = f.createCompactor({ journal, model, declaration: tokens });
    let s = 0;
    const until = async (status) => {
      let r;
      do {
        s++;
        await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `message ${s} `.padEnd(300, "x")));
        r = await c.onMessage("c1");
      } while (r.status !== status && s < most);
      equal(r.status, status);
      return r;
    };
    return { journal, until };
  };
  // A warm candidate through the driver: prepared off the critical path
  // (`summaries` model calls: the stream, and the buffered replay when the
  // stream drops before content) and used when compaction is due.
  const warmCandidate = async (model, summaries) => {
    const { journal, until } = await onTokens(model);
    let r = await until("warm");
    const warmId = r.outcome.packet.id;
    // The candidate is summarized in the background; wait for it, as time passes between messages.
    const made = () => model.calls.stream + model.calls.complete;
    for (let i = 0; i < 100 && made() < summaries; i++) await new Promise((ok) => setTimeout(ok, 10));
    await new Promise((ok) => setTimeout(ok, 20));
    const calls = made();
    check(calls >= summaries, `the warm candidate was summarized (${calls} calls)`);
    check(await journal.getPacket("c1", warmId), "the warm packet is persisted");
    r = await until("compacted");
    equal(r.boundary.packetId, warmId, "the warm candidate became the boundary");
    equal(made(), calls, "the message that needed compaction made no model call");
  };
  return [
    ["loads the core and reports versions", async () => {
      const v = f.version();
      equal(v.abi.major, 1, "abi major");
      check(v.ruleset.startsWith("foldline-ruleset/"), "ruleset");
      check(/^sha256:[0-9a-f]{64}$/.test(f.artifactSha256), "artifact sha");
    }],
    ["plan refuses an invalid declaration with every violation", async () => {
      const o = f.plan({ declaration: { targetId: "a", compactorId: "a", budget: { kind: "chars", trigger: 10, retain: 10 } }, route: { conversation: "c1" }, events: [] });
      equal(o.outcome, "refuse");
      equal(o.error.code, "invalid_declaration");
      equal(o.errors.map((e) => e.ids[0]), ["compactorId", "budget.retain"]);
    }],
    ["errors cross as typed values with their code", async () => {
      let caught;
      try { f.select({ declaration, route: { conversation: "c1" }, events: [], bogus: 1 }); } catch (e) { caught = e; }
      check(caught instanceof f.FoldlineError, "FoldlineError");
      equal(caught.code, "invalid_request");
      check(caught.message.includes("bogus"), caught.message);
    }],
    ["the string form answers canonical JSON", async () => {
      equal(f.callJson("validate", '{"kind":"failure","failure":"timeout"}'),
        '{"ok":{"auditReason":"timeout","failure":"timeout","kind":"failure","notice":"The chat could not be compacted."}}');
    }],
    ["the driver compacts, selects and draws a divider", async () => {
      const journal = await makeJournal();
      const model = fakeModel();
      const c = f.createCompactor({ journal, model, declaration });
      const r = await chat(c, journal, 1, 16);
      const all = (await journal.readEvents("c1")).map((e) => e.event.type);
      check(all.includes("frontier"), "frontier appended");
      check(all.includes("boundary"), `boundary appended (last result ${JSON.stringify(r)})`);
      const head = (await c.resolve("c1")).head;
      check(head && head.summary.startsWith("Summary of"), "head summary");
      const ctx = await c.context("c1", { format: "openai" });
      equal(ctx.messages[0].role, "user");
      check(ctx.messages[0].content.startsWith("[untrusted-history-summary]"), "envelope first");
      equal(ctx.manifest.boundaryId, head.boundaryId);
      check(ctx.manifest.sizes.total <= ctx.manifest.limit, "within budget");
      const t = await c.timeline("c1");
      const dividers = t.items.filter((i) => i.type === "divider");
      check(dividers.length >= 1 && dividers[0].state === "completed", "divider");
      check(model.calls.complete === 0, "no replay needed");
    }],
    ["a page of events is the first of what a full read from the same position gives", async () => {
      const journal = await makeJournal();
      for (let s = 1; s <= 12; s++) await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `page ${s}`));
      check(typeof journal.readEventsPage === "function", "the journal reads pages");
      for (const [since, limit] of [[0, 5], [5, 5], [10, 5], [12, 5], [0, 12], [3, 0], [40, 3]]) {
        const all = await journal.readEvents("c1", since);
        const page = await journal.readEventsPage("c1", since, limit);
        equal(JSON.stringify(page.map((e) => [e.seq, e.event])), JSON.stringify(all.slice(0, limit).map((e) => [e.seq, e.event])), `after ${since}, ${limit}`);
      }
      equal((await journal.readEventsPage("other", 0, 5)).length, 0, "a conversation of none");
    }],
    ["skipped runs advance the journal's progress watermark, never its events", async () => {
      const journal = await makeJournal();
      const c = f.createCompactor({ journal, model: fakeModel(), declaration });
      for (let s = 1; s <= 5; s++) {
        await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `short ${s}`));
        equal((await c.onMessage("c1")).status, "skipped");
      }
      const p = await journal.progress("c1");
      equal(p.skippedRuns, 5);
      equal(p.last.checkedThroughSeq, 5);
      equal((await journal.readEvents("c1")).length, 6, "five messages and the frontier");
    }],
    ["a turn id already used with other content is refused at append; an identical repeat is not", async () => {
      const journal = await makeJournal();
      const c = f.createCompactor({ journal, model: fakeModel(), declaration });
      await journal.append("c1", [say(1, "user", "Book the 9:10 train."), say(2, "assistant", "Booked.")]);
      let refused;
      try { await journal.append("c1", say(3, "user", "something else")); } catch (e) { refused = e; }
      check(refused === undefined, "a fresh turn id is fine");
      refused = undefined;
      try { await journal.append("c1", { ...say(1, "user", "Book the 6:05 train instead."), sourceSeq: 4 }); } catch (e) { refused = e; }
      equal(refused?.code, "conflicting_turn");
      // Within one batch, too.
      refused = undefined;
      try { await journal.append("c1", [say(5, "user", "a"), { ...say(5, "user", "b"), turnId: "t5" }]); } catch (e) { refused = e; }
      equal(refused?.code, "conflicting_turn");
      equal((await journal.readEvents("c1")).length, 3, "nothing written");
      await journal.append("c1", say(1, "user", "Book the 9:10 train."));
      const ctx = await c.context("c1");
      check(ctx.manifest.included.includes("t1"), "the conversation still selects");
    }],
    ["a stream that drops before content is replayed once, buffered", async () => {
      const journal = await makeJournal();
      const model = fakeModel({ dropBeforeContent: true });
      const c = f.createCompactor({ journal, model, declaration });
      await chat(c, journal, 1, 16);
      equal(model.calls.complete >= 1, true, "replayed");
      const head = (await c.resolve("c1")).head;
      check(head.summary.startsWith("Buffered summary"), head.summary);
    }],
    ["a stream that drops after content is never replayed", async () => {
      const journal = await makeJournal();
      const model = fakeModel({ dropAfterContent: true });
      const audits = [];
      const c = f.createCompactor({ journal, model, declaration, audit: (_, r) => audits.push(r) });
      const r = await chat(c, journal, 1, 16);
      equal(model.calls.complete, 0, "no buffered replay");
      const failed = (await journal.readEvents("c1")).filter((e) => e.event.type === "compactionFailed");
      check(failed.length >= 1, "failure recorded");
      check(audits[0].auditReason.startsWith("stream_dropped"), audits[0].auditReason);
      check(r.status === "failed" || r.status === "paused", JSON.stringify(r));
      check(!JSON.stringify(await c.context("c1")).includes("Summary of"), "provisional text never leaves");
    }],
    ["manual compaction draws a manual divider; a non-owner is refused", async () => {
      const journal = await makeJournal();
      const c = f.createCompactor({ journal, model: fakeModel(), declaration: { ...declaration, budget: { kind: "chars", trigger: 40000, retain: 2000 } }, owner: () => "member" });
      await chat(c, journal, 1, 12);
      const no = await c.compactNow("c1", "intruder");
      equal(no.status, "refused");
      equal(no.code, "not_owner");
      const yes = await c.compactNow("c1", "member");
      equal(yes.status, "compacted");
      const d = (await c.timeline("c1")).items.filter((i) => i.type === "divider");
      equal(d.length, 1);
      equal([d[0].kind, d[0].state], ["manual", "completed"]);
      check(d[0].taskId.startsWith("task-"), "task id");
      // The task's `requested` event is durable before its end, whether or
      // not the caller listens for it (the cross-driver journey found it missing).
      const tasks = (await journal.readEvents("c1")).map((s) => s.event).filter((e) => e.type === "compactionTask");
      equal(tasks.map((t) => t.state), ["requested", "completed"]);
    }],
    ["overlapping onMessage calls never fork a conversation", async () => {
      const journal = await makeJournal();
      const c = f.createCompactor({ journal, model: fakeModel(), declaration });
      for (let s = 1; s <= 16; s++) await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `message ${s} `.padEnd(300, "x")));
      // Fire-and-forget, the common chat-client pattern.
      const results = await Promise.all([1, 2, 3, 4, 5].map(() => c.onMessage("c1")));
      equal(results.filter((r) => r.status === "compacted").length, 1, JSON.stringify(results));
      await chat(c, journal, 17, 40);
      const res = await c.resolve("c1");
      const boundaries = (await journal.readEvents("c1")).filter((e) => e.event.type === "boundary");
      equal(res.accepted.length, boundaries.length, "every boundary is on the one chain");
      check(boundaries.length >= 2, "compacts again later");
    }],
    ["two compactors sharing a journal never fork it", async () => {
      const journal = await makeJournal();
      const a = f.createCompactor({ journal, model: fakeModel(), declaration, holder: "a" });
      const b = f.createCompactor({ journal, model: fakeModel(), declaration, holder: "b" });
      for (let s = 1; s <= 60; s++) {
        await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `message ${s} `.padEnd(300, "x")));
        await Promise.all([a.onMessage("c1"), b.onMessage("c1")]);
      }
      const res = await a.resolve("c1");
      const all = (await journal.readEvents("c1")).map((e) => e.event);
      equal(res.accepted.length, all.filter((e) => e.type === "boundary").length, "one chain");
      check(res.accepted.length >= 3, `compacted (${res.accepted.length})`);
      equal(all.filter((e) => e.type === "message").length, 60, "nothing lost");
      equal((await b.context("c1")).manifest.boundaryId, res.head.boundaryId);
    }],
    ["a crash before the boundary is appended: the retry reuses the packet and appends one boundary", async () => {
      const inner = await makeJournal();
      let crashes = 1;
      const journal = Object.create(inner);
      journal.append = async (id, events, opts) => {
        const batch = Array.isArray(events) ? events : [events];
        if (crashes > 0 && batch.some((e) => e.type === "boundary")) {
          crashes--;
          throw new Error("injected crash before the boundary append");
        }
        return inner.append(id, events, opts);
      };
      for (const m of ["readEvents", "putPacket", "getPacket", "listPackets", "acquireLease", "releaseLease"]) journal[m] = inner[m].bind(inner);
      const c = f.createCompactor({ journal, model: fakeModel(), declaration, owner: () => "member" });
      for (let s = 1; s <= 16; s++) await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `message ${s} `.padEnd(300, "x")));
      let crashed;
      try { await c.onMessage("c1"); } catch (e) { crashed = e; }
      check(crashed && /injected crash/.test(crashed.message), String(crashed));
      const packets = await inner.listPackets("c1");
      equal(packets.length, 1, "the packet was persisted before the model call");
      // Concurrent retries, automatic and manual, after the crash.
      const results = await Promise.all([c.onMessage("c1"), c.compactNow("c1", "member"), c.onMessage("c1")]);
      const boundaries = (await inner.readEvents("c1")).filter((e) => e.event.type === "boundary").map((e) => e.event);
      check(boundaries.length >= 1, JSON.stringify(results));
      equal(boundaries[0].packetId, packets[0].id, "the retry reused the persisted packet");
      equal((await c.resolve("c1")).accepted.length, boundaries.length, "one chain, no fork");
    }],
    ["onMessageAndContext answers from the check's read, as onMessage then context", async () => {
      const inner = await makeJournal();
      let reads = 0;
      const journal = Object.create(inner);
      journal.readEvents = (id, since) => { reads++; return inner.readEvents(id, since); };
      for (const m of ["append", "putPacket", "getPacket", "listPackets", "acquireLease", "releaseLease"]) journal[m] = inner[m].bind(inner);
      const c = f.createCompactor({ journal, model: fakeModel(), declaration });
      const seen = { skipped: 0, compacted: 0 };
      for (let s = 1; s <= 40; s++) {
        await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `message ${s} `.padEnd(300, "x")));
        const before = reads;
        const { outcome, context } = await c.onMessageAndContext("c1", { format: "openai" });
        seen[outcome.status] = (seen[outcome.status] ?? 0) + 1;
        // The check's read(s), and none for the context after a skip past
        // the activation (which reads back the frontier it wrote).
        if (outcome.status === "skipped" && seen.skipped > 1) equal(reads - before, 1, `message ${s}: one read`);
        if (outcome.status === "compacted") equal(context.manifest.boundaryId, outcome.boundary.id, "the context stands on the new boundary");
        equal(context.manifest.included.at(-1), `t${s}`, "the message appended before the call is in its context");
        equal(context, await c.context("c1", { format: "openai" }), `message ${s}: as onMessage then context`);
      }
      check(seen.skipped > 10 && seen.compacted > 0, JSON.stringify(seen));
    }],
    ["a malformed event is refused at append, naming the field; nothing is written", async () => {
      const journal = await makeJournal();
      const c = f.createCompactor({ journal, model: fakeModel(), declaration });
      await chat(c, journal, 1, 3);
      let caught;
      try { await journal.append("c1", { role: "user", content: "hi" }); } catch (e) { caught = e; }
      check(caught instanceof f.FoldlineError, String(caught));
      equal(caught.code, "invalid_request");
      check(caught.message.includes("type"), caught.message);
      equal((await journal.readEvents("c1")).length, 4, "nothing written (3 messages + the frontier)");
      await chat(c, journal, 4, 16);
      check((await c.resolve("c1")).head, "the conversation goes on");
    }],
    ["an event the journal did not check is checked when read, and refused by its position", async () => {
      const journal = await makeJournal();
      await journal.append("c1", [say(1, "user", "hello"), say(2, "assistant", "hi")]);
      // What a journal written by something else may hand back: a stored
      // event that never passed the append check, not vouched for.
      const bad = { ...say(3, "user", "changed"), contentHash: "sha256:" + "0".repeat(64) };
      const tampered = Object.create(journal);
      tampered.readEvents = async (id, since) => [
        ...(await journal.readEvents(id, since)).map((e) => ({ seq: e.seq, event: e.event })),
        ...(since < 3 ? [{ seq: 3, event: bad }] : []),
      ];
      const c = f.createCompactor({ journal: tampered, model: fakeModel(), declaration });
      let caught;
      try { await c.context("c1"); } catch (e) { caught = e; }
      check(caught instanceof f.FoldlineError, String(caught));
      equal(caught.code, "invalid_request");
      check(caught.message.includes("at position 3") && caught.message.includes("contentHash"), caught.message);
    }],
    ["a lone UTF-16 surrogate is refused at append, never hashed", async () => {
      const journal = await makeJournal();
      let caught;
      try { await journal.append("c1", say(1, "user", "half an emoji \ud83d")); } catch (e) { caught = e; }
      equal(caught && caught.code, "invalid_request");
      check(caught.message.includes("surrogate"), caught.message);
      equal((await journal.readEvents("c1")).length, 0, "nothing written");
    }],
    ["a hanging model times out and releases the conversation", async () => {
      const journal = await makeJournal();
      const hanging = {
        async *stream(_p, signal) { await new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))); },
        async complete() { throw new Error("unreachable"); },
      };
      const audits = [];
      const c = f.createCompactor({ journal, model: hanging, declaration, modelTimeoutMs: 50, audit: (_, r) => audits.push(r) });
      const r = await chat(c, journal, 1, 16);
      check(audits.length >= 1 && audits[0].failure === "timeout", JSON.stringify(audits));
      check(["failed", "skipped", "paused"].includes(r.status), JSON.stringify(r));
      const other = f.createCompactor({ journal, model: fakeModel(), declaration, holder: "other" });
      equal((await other.compactNow("c1", "")).status, "refused", "the lease was released (refused for ownership, not busy)");
    }],
    ["provider failures are typed in the audit, and a refusal is not replayed", async () => {
      for (const [status, failure] of [[429, "budgetStop"], [400, "providerRefusal"]]) {
        const journal = await makeJournal();
        let requests = 0;
        const model = new f.OpenAiCompatibleModel({
          baseUrl: "http://provider.invalid/v1", model: "m",
          fetch: async () => { requests++; return new Response("no", { status }); },
        });
        const audits = [];
        const c = f.createCompactor({ journal, model, declaration, audit: (_, r) => audits.push(r) });
        await chat(c, journal, 1, 16);
        check(audits.length >= 1, `${status}: audited`);
        equal(audits[0].failure, failure, `${status}`);
        equal(requests, audits.length, `${status}: one request per attempt, no buffered replay`);
      }
    }],
    ["a manual task interrupted by a crash ends as failed, never pending forever", async () => {
      const journal = await makeJournal();
      const c = f.createCompactor({ journal, model: fakeModel(), declaration });
      await chat(c, journal, 1, 3);
      await journal.append("c1", { type: "compactionTask", taskId: "task-crashed", state: "requested", actor: "m", headSeq: 3 });
      equal((await c.timeline("c1")).items.filter((i) => i.type === "divider")[0].state, "pending");
      await chat(c, journal, 4, 4);
      const d = (await c.timeline("c1")).items.filter((i) => i.type === "divider");
      equal([d[0].taskId, d[0].state], ["task-crashed", "failed"]);
    }],
    ["a warm candidate is prepared off the critical path and used when compaction is due", () => warmCandidate(fakeModel(), 1)],
    // The loop's replay rule (stream::replay_buffered) for warm candidates too:
    // an untyped failure before any content is replayed once, buffered.
    ["a warm candidate whose stream drops before any content is replayed once, buffered, and used", () => warmCandidate(fakeModel({ dropBeforeContent: true }), 2)],
    // The core's `prepareWarm`: a preparation that fails writes nothing (as the Rust driver's test says).
    ["a failed warm preparation writes nothing and leaves the compaction to call the model", async () => {
      const base = fakeModel();
      let first = true;
      const model = {
        calls: base.calls, complete: base.complete,
        async *stream(p) {
          if (!first) return yield* base.stream(p);
          first = false;
          base.calls.stream++;
          yield { type: "delta", text: "Summ" };
          throw new Error("connection reset"); // after content: no replay
        },
      };
      const { journal, until } = await onTokens(model, 300);
      await until("warm");
      for (let i = 0; i < 100 && base.calls.stream < 1; i++) await new Promise((ok) => setTimeout(ok, 10));
      await new Promise((ok) => setTimeout(ok, 20));
      equal(base.calls.stream, 1, "the preparation called the model once");
      const types = (await journal.readEvents("c1")).map((e) => e.event.type);
      check(!types.includes("compactionFailed") && !types.includes("boundary"), `nothing written: ${types.join(",")}`);
      await until("compacted");
      equal(base.calls.stream, 2, "the compaction due called the model itself");
    }],
    ["every default compacts a long conversation through the driver", async () => {
      for (const [name, budget, size, n] of [
        ["tokens 8192 (seed 002)", { kind: "tokens", window: 8192 }, 300, 120],
        ["tokens 128k", { kind: "tokens", window: 128000 }, 4000, 120],
        ["chars 80k/40k (seed 000)", { kind: "chars" }, 2000, 120],
      ]) {
        const journal = await makeJournal();
        const c = f.createCompactor({ journal, model: fakeModel(), declaration: { targetId: "agent", compactorId: "agent-compactor", budget } });
        let compacted = 0;
        for (let s = 1; s <= n; s++) {
          await journal.append("c1", say(s, s % 2 ? "user" : "assistant", `message ${s} `.padEnd(size, "x")));
          const r = await c.onMessage("c1");
          check(!["refused", "failed"].includes(r.status), `${name}, message ${s}: ${JSON.stringify(r)}`);
          if (r.status === "compacted") compacted++;
        }
        check(compacted >= 1, `${name}: compacted`);
        const ctx = await c.context("c1", { format: "openai" });
        check(ctx.manifest.sizes.total <= ctx.manifest.limit, `${name}: fits`);
        equal(ctx.messages[ctx.messages.length - 1].content, `message ${n} `.padEnd(size, "x"), `${name}: newest turn verbatim`);
        check(ctx.messages[0].content.startsWith("[untrusted-history-summary]"), `${name}: summary envelope`);
      }
    }],
    ["compaction resumes after a provider outage of any length; backlogs fold in bounded steps", async () => {
      // Seed 002's token defaults; answers of ordinary length (~300 tokens).
      const turn = (s) => say(s, s % 2 ? "user" : "assistant", `${s % 2 ? "Question" : "Answer"} ${s}: the plan for week ${s % 9} keeps the budget. `.repeat(20).slice(0, s % 2 ? 200 : 1200));
      for (const [budget, outage] of [[{ kind: "tokens", window: 8192 }, 20], [{ kind: "tokens", window: 8192 }, 100], [{ kind: "tokens", window: 8192 }, 300], [{ kind: "chars" }, 300]]) {
        const name = `${budget.kind}, outage of ${outage} exchanges`;
        const journal = await makeJournal();
        const inner = fakeModel();
        let down = false;
        let calls = 0;
        const model = {
          async *stream(p) { calls++; if (down) throw new f.ModelError("providerRefusal", "unavailable"); yield* inner.stream(p); },
          async complete(p) { calls++; if (down) throw new f.ModelError("providerRefusal", "unavailable"); return inner.complete(p); },
        };
        const c = f.createCompactor({ journal, model, declaration: { targetId: "agent", compactorId: "agent-compactor", budget } });
        let s = 0;
        const next = async () => {
          s++;
          await journal.append("c1", turn(s));
          const before = calls;
          const r = await c.onMessage("c1");
          check(calls - before <= 4, `${name}, message ${s}: ${calls - before} model calls, over the bound of MAX_FOLDS_PER_RUN`);
          check(r.status !== "refused", `${name}, message ${s}: ${JSON.stringify(r)}`);
          return r;
        };
        for (let i = 0; i < 80; i++) await next();
        down = true;
        // (A warm candidate summarized before the outage may still settle once.)
        let during = 0;
        for (let i = 0; i < outage * 2; i++) if ((await next()).status === "compacted") during++;
        check(during <= 1, `${name}: ${during} compactions while the provider was down`);
        down = false;
        let clean;
        for (let n = 1; n <= 40; n++) {
          const r = await next();
          if (n === 1) equal(r.status, "compacted", `${name}: compaction resumes with the first message after recovery`);
          const ctx = await c.context("c1");
          check(ctx.manifest.sizes.total <= ctx.manifest.limit, `${name}: fits`);
          equal(ctx.manifest.included[ctx.manifest.included.length - 1], `t${s}`, `${name}: the newest turn`);
          const left = ctx.manifest.omitted.filter((o) => o.reason === "budget").length;
          if (left === 0 && clean === undefined) clean = n;
          check(clean === undefined || left === 0, `${name}: message ${n} after recovery left ${left} turns out (clean since ${clean})`);
        }
        check(clean !== undefined && clean <= 10, `${name}: clean from message ${clean}`);
        let last = 0;
        for (const { event: e } of await journal.readEvents("c1")) {
          if (e.type !== "boundary") continue;
          for (const t of e.input.turns) { check(t.sourceSeq > last, `${t.turnId} folded twice`); last = t.sourceSeq; }
        }
        check((await c.resolve("c1")).head, "the chain verifies");
      }
    }],
    ["a frontier that lands behind a long history (another writer raced it) recovers in bounded steps", async () => {
      const inner = await makeJournal();
      const turn = (s) => say(s, s % 2 ? "user" : "assistant", `${s % 2 ? "Question" : "Answer"} ${s}: the plan for week ${s % 9}. `.repeat(40).slice(0, s % 2 ? 200 : 1200));
      let raced = false;
      // Another writer appends 150 messages between the driver's read and its
      // compare-and-append of the activation frontier.
      const journal = new Proxy(inner, {
        get(target, prop) {
          const v = target[prop];
          if (prop !== "append") return typeof v === "function" ? v.bind(target) : v;
          return async (id, events, opts) => {
            const list = Array.isArray(events) ? events : [events];
            if (!raced && list.some((e) => e.type === "frontier")) {
              raced = true;
              for (let s = 2; s <= 151; s++) await target.append(id, turn(s));
            }
            return target.append(id, events, opts);
          };
        },
      });
      const c = f.createCompactor({ journal, model: fakeModel(), declaration: { targetId: "agent", compactorId: "agent-compactor", budget: { kind: "tokens", window: 8192 } } });
      await journal.append("c1", turn(1));
      await c.onMessage("c1");
      check(raced, "the race happened");
      equal((await c.resolve("c1")).frontier.startSeq, 1, "the frontier starts at source 1");
      let clean;
      for (let s = 152; s <= 170; s++) {
        await journal.append("c1", turn(s));
        const r = await c.onMessage("c1");
        check(!["refused", "failed"].includes(r.status), `message ${s}: ${JSON.stringify(r)}`);
        const ctx = await c.context("c1");
        const left = ctx.manifest.omitted.filter((o) => o.reason === "budget").length;
        if (left === 0 && clean === undefined) clean = s;
        check(clean === undefined || left === 0, `message ${s} left ${left} turns out (clean since ${clean})`);
      }
      check(clean !== undefined && clean <= 160, `clean from ${clean}`);
      check((await c.resolve("c1")).head, "the chain verifies");
    }],
    ["a message no compaction could take is refused at append (turn_too_large), nothing written", async () => {
      const journal = await makeJournal();
      const small = { ...declaration, prefixBounds: { maxChars: 30000 } };
      const c = f.createCompactor({ journal, model: fakeModel(), declaration: small });
      await c.append("c1", { role: "user", content: "hello" });
      let caught;
      try { await c.append("c1", { role: "assistant", content: "z".repeat(20000) }); } catch (e) { caught = e; }
      check(caught instanceof f.FoldlineError, String(caught));
      equal(caught.code, "turn_too_large");
      let checked;
      try { c.check("c1", [{ role: "user", content: "z".repeat(20000) }]); } catch (e) { checked = e; }
      equal(checked?.code, "turn_too_large", "check refuses the same without writing");
      equal((await journal.readEvents("c1")).length, 1, "nothing written");
      await c.append("c1", { role: "assistant", content: "z".repeat(5000) });
      equal((await journal.readEvents("c1")).length, 2, "a message a compaction could take is accepted");
    }],
    ["while members may opt in to compression, pinned turns leave their fragments room: refused past it, and a conversation within it compacts with a member's context whole", async () => {
      const journal = await makeJournal();
      const surface = { surface: true, toolResult: true, plainSpeak: true, promptTrim: true };
      const plain = f.createCompactor({ journal, model: fakeModel(), declaration });
      const a = f.createCompactor({ journal, model: fakeModel(), declaration, compression: surface });
      // 2,585 leave pinned turns a context room; the fragments take some of it.
      let refused;
      try { await a.append("c1", { role: "system", content: "s".repeat(2500) }); } catch (e) { refused = e; }
      equal(refused?.code, "pinned_too_large", String(refused));
      check(/compression fragments/.test(refused.message), refused.message);
      equal((await journal.readEvents("c1")).length, 0, "nothing written");
      equal((await plain.append("c2", { role: "system", content: "s".repeat(2500) })).count, 1, "without the surface it has the room");
      await a.append("c1", { role: "system", content: "s".repeat(1500) });
      const member = { availability: surface, preferences: { master: true, plainSpeak: true } };
      for (let i = 0; i < 20; i++) {
        await a.append("c1", { role: i % 2 ? "assistant" : "user", content: `turn ${i} `.repeat(30) });
        const r = await a.onMessage("c1");
        check(!["refused", "failed"].includes(r.status), `turn ${i}: ${JSON.stringify(r)}`);
      }
      const ctx = await a.context("c1", { member });
      check(ctx.manifest.sizes.member > 0 && !ctx.manifest.uncoveredOmitted, JSON.stringify(ctx.manifest));
      check((await a.resolve("c1")).head, "compacted");
    }],
    ["pinned turns past the context room are refused at append (pinned_too_large), another writer's counted", async () => {
      // The declaration's 4,000 characters leave pinned turns 2,585: the
      // least summary (200 in its 191-character envelope) and a turn of 1,024.
      const journal = await makeJournal();
      const a = f.createCompactor({ journal, model: fakeModel(), declaration });
      const b = f.createCompactor({ journal, model: fakeModel(), declaration });
      await a.append("c1", { role: "system", content: "s".repeat(2500) });
      await b.append("c1", { role: "developer", content: "d".repeat(85) });
      let caught;
      try { await a.append("c1", [{ role: "user", content: "hi" }, { role: "developer", content: "d" }]); } catch (e) { caught = e; }
      equal(caught?.code, "pinned_too_large", String(caught));
      equal((await journal.readEvents("c1")).length, 2, "nothing written");
      for (let i = 0; i < 20; i++) {
        await a.append("c1", { role: i % 2 ? "assistant" : "user", content: `turn ${i} `.repeat(30) });
        const r = await a.onMessage("c1");
        check(!["refused", "failed"].includes(r.status), `turn ${i}: ${JSON.stringify(r)}`);
        await a.context("c1");
      }
    }],
    ["a turn corrected on behalf of a sender is one that sender sent: another's is not_author, a covered turn a cold compactor let go read back to tell", async () => {
      const journal = await makeJournal();
      const a = f.createCompactor({ journal, model: fakeModel(), declaration });
      for (let i = 0; i < 30; i++) {
        await a.append("c1", { role: "user", content: `turn ${i} `.repeat(30) }, { sender: i % 2 ? "bob" : "alice" });
        await a.onMessage("c1");
      }
      const turns = (await journal.readEvents("c1")).map((e) => e.event).filter((e) => e.type === "message").map((e) => e.turnId);
      check((await a.resolve("c1")).head.coveredThroughSeq > 2, "turns 1 and 2 covered");
      const cold = f.createCompactor({ journal, model: fakeModel(), declaration });
      const count = (await journal.readEvents("c1")).length;
      for (const [who, turn, by] of [[cold, turns[0], "bob"], [a, turns.at(-1), "alice"]]) {
        let caught;
        try { await who.correct("c1", turn, "someone else's words", { sender: by }); } catch (e) { caught = e; }
        equal(caught?.code, "not_author", String(caught));
        equal((await journal.readEvents("c1")).length, count, "nothing written");
      }
      equal((await cold.correct("c1", turns[1], "bob, corrected", { sender: "bob" })).correctionSeq, 1);
      await a.correct("c1", turns.at(-1), "bob again", { sender: "bob" });
      const now = JSON.stringify(await a.context("c1"));
      check(now.includes("bob, corrected") && now.includes("bob again"), now.slice(0, 300));
    }],
    ["a turn corrected through the compactor is checked as every correction is, numbered after another writer's, and seen in the context", async () => {
      const journal = await makeJournal();
      const a = f.createCompactor({ journal, model: fakeModel(), declaration });
      const b = f.createCompactor({ journal, model: fakeModel(), declaration });
      await a.append("c1", { role: "system", content: "Be brief." });
      for (let i = 0; i < 30; i++) {
        await a.append("c1", { role: i % 2 ? "assistant" : "user", content: `turn ${i} `.repeat(30) });
        await a.onMessage("c1");
      }
      const turns = (await journal.readEvents("c1")).map((e) => e.event).filter((e) => e.type === "message").map((e) => e.turnId);
      check((await a.resolve("c1")).head, "compacted");
      const newest = turns.at(-1);
      equal((await a.correct("c1", newest, "first fix")).correctionSeq, 1);
      equal((await b.correct("c1", newest, "second fix")).correctionSeq, 2, "numbered after the other writer's");
      const now = JSON.stringify(await a.context("c1"));
      check(now.includes("second fix") && !now.includes("first fix"), "the latest correction is in force");
      await a.correct("c1", turns[2], "the covered turn, corrected");
      const amended = await a.context("c1");
      check(amended.manifest.amendmentHash, "a covered turn's correction is the amendment");
      check(JSON.stringify(amended).includes("the covered turn, corrected"));
      const count = (await journal.readEvents("c1")).length;
      for (const [turn, content, code] of [
        [turns[3], "a".repeat(20000), "amendment_too_large"],
        [turns[0], "s".repeat(3000), "pinned_too_large"],
        [newest, "n".repeat(500000), "turn_too_large"],
        ["nowhere", "x", "invalid_request"],
      ]) {
        let caught;
        try { await a.correct("c1", turn, content); } catch (e) { caught = e; }
        equal(caught?.code, code, `${turn}: ${caught}`);
        equal((await journal.readEvents("c1")).length, count, "nothing written");
      }
      // The system prompt corrected to 2,500 characters counts as that at
      // the next pinned turn's append (2,585 leave a context room).
      await a.correct("c1", turns[0], "s".repeat(2500));
      let pinned;
      try { await b.append("c1", { role: "developer", content: "d".repeat(100) }); } catch (e) { pinned = e; }
      equal(pinned?.code, "pinned_too_large", String(pinned));
      for (let i = 0; i < 20; i++) {
        await b.append("c1", { role: i % 2 ? "assistant" : "user", content: `more ${i} `.repeat(30) });
        const r = await b.onMessage("c1");
        check(!["refused", "failed"].includes(r.status), `turn ${i}: ${JSON.stringify(r)}`);
        await a.context("c1");
      }
      check(!(await a.resolve("c1")).amendment, "a compaction absorbed the amendment");
      // A tool result keeps its content when a correction says something
      // else (it replaces what a turn says, not what it did): the turn it
      // makes is measured with it.
      let probe;
      try { a.check("c1", [{ role: "user", content: "z".repeat(500000) }]); } catch (e) { probe = e; }
      const bound = Number(/over the (\d+) characters/.exec(probe.message)[1]);
      await a.append("c1", [
        { role: "assistant", content: null, tool_calls: [{ id: "k9", type: "function", function: { name: "f", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "k9", content: "r".repeat(bound - 300) },
        { role: "assistant", content: "done" }, // a result alone as the newest turn must fit the context (newest.ts)
      ]);
      const answered = (await journal.readEvents("c1")).map((e) => e.event).filter((e) => e.type === "message").at(-2).turnId;
      let big;
      try { await a.correct("c1", answered, "t".repeat(400)); } catch (e) { big = e; }
      equal(big?.code, "turn_too_large", String(big));
      await a.correct("c1", answered, "a short note");
    }],
    ["a member's message or a tool's result past the room a context leaves its newest turn is refused; an assistant's answer is kept", async () => {
      // Seed 002's token defaults: a 4,000-character system prompt leaves
      // the newest turn 2,235 tokens beside it and the least summary. A
      // pasted document past that was accepted, and every context then
      // failed tail_turn_too_large until the next message.
      const journal = await makeJournal();
      const c = f.createCompactor({ journal, model: fakeModel(), declaration: { targetId: "assistant", compactorId: "assistant-compactor", budget: { kind: "tokens", window: 8192 } } });
      await c.append("c1", [{ role: "system", content: "You are a careful analyst. " + "Follow the house style guide strictly and cite sources. ".repeat(70) }, { role: "user", content: "hello" }, { role: "assistant", content: "hi" }]);
      const stored = async () => (await journal.readEvents("c1")).length;
      const before = await stored();
      const doc = "Please review this document: " + "The quarterly report shows growth in all regions. ".repeat(200);
      for (const batch of [{ role: "user", content: doc }, [{ role: "assistant", content: null, tool_calls: [{ id: "k1", type: "function", function: { name: "fetch", arguments: "{}" } }] }, { role: "tool", tool_call_id: "k1", content: doc }]]) {
        let refused;
        try { await c.append("c1", batch); } catch (e) { refused = e; }
        equal(refused?.code, "turn_too_large", String(refused));
        check(/newest turn/.test(refused.message) && /2235 left/.test(refused.message), refused.message);
        equal(await stored(), before, "nothing written");
      }
      // `check` (reading nothing) holds the last turn to the room beside
      // the batch's own pinned turns.
      let checked;
      try { c.check("c1", { role: "user", content: "The quarterly report shows growth in all regions. ".repeat(280) }); } catch (e) { checked = e; }
      equal(checked?.code, "turn_too_large", String(checked));
      c.check("c1", { role: "user", content: doc }); // fits beside no pinned turn
      // Within the room: accepted, and the context holds it whole.
      const fits = "Please review this document: " + "The quarterly report shows growth in all regions. ".repeat(170);
      await c.append("c1", { role: "user", content: fits });
      await c.onMessage("c1");
      equal((await c.context("c1", { format: "openai" })).messages.at(-1).content, fits);
      // An edit of the newest turn is held to the same room.
      const newest = (await journal.readEvents("c1")).map((e) => e.event).filter((e) => e.type === "message").at(-1).turnId;
      const written = await stored();
      let edit;
      try { await c.correct("c1", newest, doc); } catch (e) { edit = e; }
      equal(edit?.code, "turn_too_large", String(edit));
      equal(await stored(), written, "the edit wrote nothing");
      // An assistant's answer as long is kept (no call waits on it); the
      // next message folds it.
      await c.append("c1", { role: "assistant", content: doc });
      await c.append("c1", { role: "user", content: "thanks" });
      await c.onMessage("c1");
      equal((await c.context("c1", { format: "openai" })).messages.at(-1).content, "thanks");
    }],
    ["a corrected tool turn is frozen as it reads: no amendment follows its compaction, and a compactor reading cold resolves alike", async () => {
      // A correction keeps the tool calls and results it does not carry;
      // resolve is given the corrected turn itself (the correction alone
      // compared unlike the frozen turn: a false amendment).
      const journal = await makeJournal();
      const a = f.createCompactor({ journal, model: fakeModel(), declaration });
      await a.append("c1", { role: "user", content: "look it up" });
      await a.append("c1", [
        { role: "assistant", content: "looking", tool_calls: [{ id: "k1", type: "function", function: { name: "f", arguments: "{}" } }] },
        { role: "tool", tool_call_id: "k1", content: "the result" },
      ]);
      const ids = (await journal.readEvents("c1")).map((e) => e.event).filter((e) => e.type === "message").map((e) => e.turnId);
      await a.correct("c1", ids[2], "the corrected result");
      for (let i = 0; i < 30; i++) {
        await a.append("c1", { role: i % 2 ? "assistant" : "user", content: `turn ${i} `.repeat(30) });
        await a.onMessage("c1");
        // Never, not even until the next compaction absorbs it.
        const r = await a.resolve("c1");
        check(!r.amendment, `message ${i}: no amendment: ${JSON.stringify(r.amendment)}`);
      }
      const r = await a.resolve("c1");
      check(r.head && r.head.coveredThroughSeq >= 3, "the corrected turn is covered");
      // Corrected after it was covered: an amendment, the same cold.
      await a.correct("c1", ids[1], "looked it up again");
      const warm = await a.context("c1");
      check(warm.manifest.amendmentHash, "an amendment");
      const cold = f.createCompactor({ journal, model: fakeModel(), declaration });
      equal(await cold.resolve("c1"), await a.resolve("c1"), "resolved alike cold");
      equal(await cold.context("c1"), warm, "the same context cold");
    }],
    ["a request's prompt appended with each turn joins the pinned turns once, in any format (another compactor's too)", async () => {
      const journal = await makeJournal();
      const a = f.createCompactor({ journal, model: fakeModel(), declaration });
      const turn = (c, system, messages, o) => c.append("c1", { format: "anthropic", system, messages }, o);
      const user = (content) => [{ role: "user", content }];
      equal((await turn(a, "Be brief.", user("one"))).count, 2);
      equal((await turn(a, "Be brief.", user("two"), { idempotencyKey: "k" })).count, 1);
      equal((await turn(a, "Be brief.", user("two"), { idempotencyKey: "k" })).replayed, true, "a retry is recognized");
      const b = f.createCompactor({ journal, model: fakeModel(), declaration });
      equal((await turn(b, [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }], user("three"))).count, 1);
      equal((await turn(b, "Be brief.", [])).count, 0, "the prompt alone: nothing new");
      equal((await turn(a, "Be kind.", user("four"))).count, 2, "a changed prompt joins it");
      const ctx = await a.context("c1", { format: "anthropic" });
      equal(ctx.messages.system, "Be brief.\n\nBe kind.");
      // Messages that open with the prompt, in any format: written once too.
      const chat = (c, head, content) => c.append("c2", [head, { role: "user", content }]);
      equal((await chat(a, { role: "system", content: "Be brief." }, "one")).count, 2);
      equal((await chat(b, { role: "system", content: "Be brief." }, "two")).count, 1, "held: not written again");
      equal((await chat(a, { role: "developer", content: "Be brief." }, "three")).count, 2, "a developer message is another turn");
      equal((await chat(a, { role: "developer", content: "Be brief." }, "four")).count, 1);
      equal((await a.append("c2", { format: "ai-sdk", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "five" }] })).count, 1);
      equal((await a.append("c2", [{ role: "system", content: "Be brief." }])).count, 0, "the prompt alone: nothing new");
      equal((await a.append("c2", [{ role: "user", content: "six" }, { role: "system", content: "Be brief." }])).count, 2, "only a leading one is the prompt");
      const pinned = (await journal.readEvents("c2")).map((e) => e.event).filter((e) => e.type === "message" && e.role !== "user");
      equal(pinned.map((e) => e.role), ["system", "developer", "system"]);
      // Held as its corrections make it: the corrected prompt is held, its first wording no longer.
      await a.correct("c2", pinned[0].turnId, "Answer in euros.");
      equal((await chat(a, { role: "system", content: "Answer in euros." }, "seven")).count, 1);
      equal((await chat(a, { role: "system", content: "Be brief." }, "eight")).count, 1, "another system turn holds it");
    }],
    ["an append retried under its idempotency key never writes twice (another compactor, a restart)", async () => {
      const journal = await makeJournal();
      const batch = [{ role: "user", content: "one" }, { role: "assistant", content: "two" }];
      const a = f.createCompactor({ journal, model: fakeModel(), declaration });
      const first = await a.append("c1", batch, { idempotencyKey: "req-1" });
      equal([first.count, first.replayed], [2, false]);
      const again = await a.append("c1", batch, { idempotencyKey: "req-1" });
      equal([again.seq, again.count, again.replayed, again.events.length], [first.seq, 2, true, 0], "the first answer again");
      // Another compactor on the same journal (a replica, a restarted process) reads the key back.
      const b = f.createCompactor({ journal, model: fakeModel(), declaration });
      equal((await b.append("c1", batch, { idempotencyKey: "req-1" })).replayed, true, "recognized from the journal");
      let caught;
      try { await b.append("c1", [{ role: "user", content: "else" }], { idempotencyKey: "req-1" }); } catch (e) { caught = e; }
      equal(caught?.code, "idempotency_key_reused");
      try { await b.append("c1", batch, { idempotencyKey: "bad key!" }); caught = undefined; } catch (e) { caught = e; }
      equal(caught?.code, "invalid_request");
      equal((await b.append("c1", batch, { idempotencyKey: "req-2" })).replayed, false);
      equal((await journal.readEvents("c1")).filter((e) => e.event.type === "message").length, 4, "each batch once");
      check((await b.resolve("c1")), "the conversation resolves");
    }],
    ["a key is its sender's: two members' same key, each their own message; a batch of several senders recognized whole", async () => {
      const journal = await makeJournal();
      const a = f.createCompactor({ journal, model: fakeModel(), declaration });
      const says = async (who, content, key) => {
        try {
          const r = await a.append("room", { role: "user", content }, { idempotencyKey: key, sender: who });
          return `${r.count}${r.replayed ? " replayed" : ""}`;
        } catch (e) { return e.code; }
      };
      equal(await says("alice", "yes", "1"), "1");
      equal(await says("bob", "yes", "1"), "1", "bob's own message");
      equal(await says("bob", "yes", "1"), "1 replayed");
      equal(await says("bob", "no", "2"), "1");
      equal(await says("alice", "yes", "2"), "1", "not refused for bob's");
      equal(await says("bob", "yes", "2"), "idempotency_key_reused");
      const named = [{ role: "user", name: "carol", content: "hi" }, { role: "assistant", content: "hello" }];
      const first = await a.append("room", named, { idempotencyKey: "3" });
      // Another compactor reads the keys back from the journal.
      const b = f.createCompactor({ journal, model: fakeModel(), declaration });
      const again = await b.append("room", named, { idempotencyKey: "3" });
      equal([again.seq, again.count, again.replayed], [first.seq, 2, true]);
      equal((await b.append("room", { role: "user", content: "yes" }, { idempotencyKey: "1", sender: "bob" })).replayed, true);
      const senders = (await journal.readEvents("room")).map((e) => e.event).filter((e) => e.type === "message").map((e) => e.sender ?? "");
      equal(senders, ["alice", "bob", "bob", "alice", "carol", ""]);
    }],
    ["member compression runs in the core", async () => {
      const t = f.trimPrompt("Could you please explain how Rust lifetimes work?");
      equal(t.text, "Explain how Rust lifetimes work?");
      equal(t.measurement.status, "applied");
      const r = f.compressToolResult({ tool: "search", result: { stdout: "\u001b[31mx\u001b[0m" } });
      equal(r.measurement.status, "bypassed");
      const s = f.settingsProjection({ availability: { surface: true, promptTrim: true }, preferences: {} });
      equal(s.state.promptTrim.offReason, "masterOff");
    }],
    ["append numbers OpenAI, Anthropic and AI SDK messages as the next turns, with countTokens", async () => {
      const journal = await makeJournal();
      const words = (t) => t.split(/\s+/).filter(Boolean).length;
      const c = f.createCompactor({ journal, model: fakeModel(), declaration, countTokens: words });
      await c.append("c1", [{ role: "system", content: "You are terse." }, { role: "user", content: "What is the weather in Porto?" }]);
      await c.append("c1", {
        format: "anthropic",
        messages: [
          { role: "assistant", content: [{ type: "text", text: "Let me look." }, { type: "tool_use", id: "tu1", name: "weather", input: { city: "Porto" } }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "tu1", content: "sunny, 24 C" }] },
        ],
      });
      await c.append("c1", {
        format: "ai-sdk",
        messages: [
          { role: "assistant", content: [{ type: "tool-call", toolCallId: "tc2", toolName: "forecast", input: { days: 2 } }] },
          { role: "tool", content: [{ type: "tool-result", toolCallId: "tc2", toolName: "forecast", output: { type: "error-text", value: "quota" } }] },
          { role: "assistant", content: "Sunny today; no forecast." },
        ],
      });
      const stored = (await journal.readEvents("c1")).map((s) => s.event);
      equal(stored.map((e) => e.sourceSeq), [1, 2, 3, 4, 5, 6, 7], "numbered in order, across formats");
      equal(stored.map((e) => e.role), ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"], "roles");
      equal(stored[2].parts.map((p) => p.type), ["text", "toolCall"], "text and tool call stay one turn");
      equal(stored[2].parts[1], { type: "toolCall", callId: "tu1", name: "weather", arguments: '{"city":"Porto"}' }, "tool call as data");
      equal(stored[3].parts[0].callId, "tu1", "tool result answers its call");
      equal([stored[5].parts[0].content, stored[5].parts[0].isError], ["quota", true], "an error result keeps its status, its text unchanged");
      equal(stored[1].tokens, 6 + f.MESSAGE_OVERHEAD_TOKENS, "countTokens recorded, with the message's framing");
      // Approvals, JSON-text input and custom tool calls arrive as their kinds.
      await c.append("c1", {
        format: "ai-sdk",
        messages: [
          { role: "assistant", content: [{ type: "tool-call", toolCallId: "tc3", toolName: "pay", input: '{"invoice": 7}' }, { type: "tool-approval-request", approvalId: "ap1", toolCallId: "tc3" }] },
          { role: "tool", content: [{ type: "tool-approval-response", approvalId: "ap1", approved: false, reason: "later" }, { type: "tool-result", toolCallId: "tc3", toolName: "pay", output: { type: "execution-denied", reason: "later" } }] },
        ],
      });
      await c.append("c1", { role: "assistant", content: null, tool_calls: [{ id: "k1", type: "custom", custom: { name: "grep", input: "warn|error" } }] });
      // Unanswered, the call goes to a provider as the assistant's text (it would refuse the request otherwise).
      equal((await c.context("c1", { format: "openai" })).messages.at(-1), { content: "[tool call grep] warn|error", role: "assistant" }, "an unanswered call is text");
      await c.append("c1", { role: "tool", tool_call_id: "k1", content: "2 warnings" });
      const more = (await journal.readEvents("c1")).map((s) => s.event).slice(7);
      equal(more[0].parts, [
        { type: "toolCall", callId: "tc3", name: "pay", arguments: '{"invoice": 7}' },
        { type: "approvalRequest", approvalId: "ap1", callId: "tc3" },
      ], "JSON-text input kept as the JSON it is; the approval request kept with its call");
      equal(more[1].parts[0], { type: "approvalResponse", approvalId: "ap1", approved: false, reason: "later" }, "the answer");
      equal([more[1].parts[1].isError, more[1].parts[1].content], [true, "execution denied: later"], "a denied execution is an error result");
      equal(more[2].parts[0], { type: "toolCall", callId: "k1", name: "grep", arguments: "warn|error", custom: true }, "a custom tool call keeps its kind");
      const ai = (await c.context("c1", { format: "ai-sdk" })).messages;
      const kinds = ai.flatMap((m) => (Array.isArray(m.content) ? m.content.map((p) => p.type) : []));
      for (const k of ["tool-approval-request", "tool-approval-response", "tool-result", "tool-call"]) check(kinds.includes(k), `${k} comes back in the AI SDK format`);
      const back = ai.find((m) => m.role === "assistant" && Array.isArray(m.content) && m.content.some((p) => p.toolCallId === "tc3"));
      equal(back.content[0].input, { invoice: 7 }, "the input comes back as the object, not double-encoded");
      const oa = (await c.context("c1", { format: "openai" })).messages;
      equal(oa.at(-2).tool_calls, [{ custom: { input: "warn|error", name: "grep" }, id: "k1", type: "custom" }], "OpenAI gets its custom call back");
      equal(oa.at(-1), { content: "2 warnings", role: "tool", tool_call_id: "k1" }, "and its result");
      let caught;
      try { await c.append("c1", { format: "ai-sdk", messages: [{ role: "user", content: "ok" }, { role: "tool", content: [{ type: "tool-approval-response", approved: true }] }] }); } catch (e) { caught = e; }
      equal(caught?.code, "invalid_request");
      check(/item 2: content\[0\]: approvalId/.test(caught.message), `the caller's item and part are named: ${caught.message}`);
      check(stored.every((e) => typeof e.contentHash === "string"), "hashed when they entered");
    }],
    ["append refuses a bad message and writes nothing", async () => {
      const journal = await makeJournal();
      const c = f.createCompactor({ journal, model: fakeModel(), declaration });
      let caught;
      try { await c.append("c1", [{ role: "user", content: "ok" }, { role: "wizard", content: "x" }]); } catch (e) { caught = e; }
      equal(caught?.code, "invalid_request", "code");
      check(/item 2/.test(caught.message), `names the item: ${caught.message}`);
      equal((await journal.readEvents("c1")).length, 0, "nothing written");
    }],
    ["modelFromFunction compacts, and context takes the ai-sdk spelling", async () => {
      const journal = await makeJournal();
      const seen = [];
      const model = f.modelFromFunction(async (packet) => { seen.push(packet.messages.length); return `Summary of ${packet.input.turnCount} turns.`; });
      const c = f.createCompactor({ journal, model, declaration });
      for (let i = 1; i <= 40; i++) {
        await c.append("c1", { role: i % 2 ? "user" : "assistant", content: `message ${i} `.padEnd(200, "x") });
        await c.onMessage("c1");
      }
      const r = await c.resolve("c1");
      check(r.accepted.length >= 1, "compacted");
      check(seen.length >= 1 && seen[0] > 0, "the function got the packet's messages");
      const a = await c.context("c1", { format: "ai-sdk" });
      const b = await c.context("c1", { format: "aiSdk" });
      equal(a.messages, b.messages, "ai-sdk is aiSdk");
    }],
  ];
}
