// A journey: a long scripted conversation through the real JS driver — a
// pinned system prompt, tool calls and results, member corrections, manual
// `/compact` tasks, a model that is refused or drops its stream now and then,
// a second compactor taking over mid-way (a restart), and now and then two
// compactors racing on one journal, and once a journal failure between the
// stored packet and the boundary (the run errs, a new compactor takes over),
// and a policy upgrade near the end (a new epoch) — with the seeds' outcomes
// asserted after every step, not snapshots:
//
// - the journal is never edited: each step's journal extends the last one;
// - the chain verifies, and no head has two boundaries;
// - the context fits its limit, or a typed refusal says why;
// - the exact tail is a suffix of the conversation, in order;
// - the summary appears once per head, as the user-role
//   `untrusted-history-summary` envelope;
// - a tool result never reaches the model without its call;
// - the timeline draws only boundaries the chain accepts.
//
// The same module runs in Node (memory journal), Chromium (IndexedDB) and
// workerd; each answers a digest of the final journal and context, and the
// runtimes must agree byte for byte (test/journey/run.mjs).

const DECLARATION = {
  targetId: "assistant",
  compactorId: "assistant-compactor",
  budget: { kind: "chars", trigger: 20000, retain: 8000 },
  summary: { maxChars: 1500 },
};

// The policy upgrade five sixths of the way in: a new declaration (a shorter
// summary bound) is a new epoch — the old boundaries retire, a new frontier
// and chain start, and nothing of the old epoch bricks the conversation.
const UPGRADED = { ...DECLARATION, summary: { maxChars: 1200 } };

const TOPICS = ["the Lisbon flat", "the Porto train", "the budget", "Ana's visa", "the Douro tour", "the return flight"];

/** The script: what each step appends (OpenAI chat messages), and whether a member corrects or asks `/compact`. */
export function script(turns) {
  const steps = [{ messages: [{ role: "system", content: "You are a travel planner. Keep every booking reference." }] }];
  for (let i = 1; i < turns; i++) {
    const topic = TOPICS[i % TOPICS.length];
    let messages;
    if (i % 9 === 4) {
      // An assistant turn that calls a tool, and the tool's result.
      messages = [
        { role: "assistant", content: `Checking ${topic}.`, tool_calls: [{ id: `call-${i}`, type: "function", function: { name: "search", arguments: JSON.stringify({ q: topic, day: i % 10 }) } }] },
        { role: "tool", tool_call_id: `call-${i}`, content: `Found 3 options for ${topic}: ${120 + (i % 40)} euros, booking ref FL-${1000 + i}.` },
      ];
    } else if (i % 2) {
      messages = [{ role: "user", content: `Question ${i}: what about ${topic} on day ${i % 10}? We have ${900 + i} euros left. `.repeat(3) }];
    } else {
      messages = [{ role: "assistant", content: `Answer ${i}: for ${topic}, I propose option ${i % 4}; decided with Ana on step ${i}. `.repeat(3) }];
    }
    steps.push({ messages, correct: i % 97 === 96, manual: i % 150 === 149 });
  }
  return steps;
}

/** The offline model, refused by its provider every 5th call and dropping its stream before any content every 7th. */
export function flakyModel(f) {
  let calls = 0;
  const answer = (packet) => ({
    text: `Summary of ${packet.input.turnCount} turns through ${packet.coveredThroughTurnId}: plans for ${TOPICS.join(", ")}.`,
    modelId: "journey-1",
    usage: { inputTokens: 1000, outputTokens: 40 },
    finishReason: "stop",
  });
  return {
    async *stream(packet) {
      calls++;
      if (calls % 5 === 0) throw new f.ModelError("providerRefusal", "refused by the provider");
      if (calls % 7 === 0) throw new Error("connection reset");
      const a = answer(packet);
      yield { type: "delta", text: a.text };
      yield { type: "done", modelId: a.modelId, usage: a.usage, finishReason: a.finishReason };
    },
    async complete(packet) {
      return answer(packet);
    },
  };
}

export function fail(step, why) {
  throw new Error(`journey step ${step}: ${why}`);
}

/** Every seed outcome, checked against the journal as it is now. Answers the journal's events as JSON lines. */
export async function check(f, c, journal, id, before, step) {
  const stored = await journal.readEvents(id, 0);
  // Exactly as stored: any change to an earlier event, even of a default, is an edit.
  const now = stored.map((s) => JSON.stringify(s.event));
  if (now.length < before.length || before.some((e, i) => e !== now[i])) fail(step, "the journal was edited");
  const events = stored.map((s) => s.event);
  // The chain verifies; no head has two boundaries.
  const r = await c.resolve(id);
  const heads = new Set();
  for (const e of events) {
    if (e.type !== "boundary") continue;
    const head = e.previous?.boundaryId ?? e.frontier.id;
    if (heads.has(head)) fail(step, "two boundaries on one head");
    heads.add(head);
  }
  // The context fits, or a typed refusal says why: one turn over the whole
  // budget, or an amendment (corrections of frozen turns, kept until a
  // compaction absorbs them) that leaves the budget no room — it fails
  // closed, never truncated (seed 000).
  let ctx;
  try {
    ctx = await c.context(id);
  } catch (e) {
    const allowed = e.code === "tail_turn_too_large" || (e.code === "over_budget" && r.amendment);
    if (!allowed) fail(step, `context: ${e.code ?? e}: ${e.message}`);
    return now;
  }
  const m = ctx.manifest;
  if (m.sizes.total > m.limit) fail(step, `${m.sizes.total} > ${m.limit}`);
  const messages = ctx.messages ?? [];
  // One summary per head, as the user-role envelope (after an upgrade,
  // until the new epoch's first boundary, the one it carried over).
  const summaries = messages.filter((x) => x.kind === "summary");
  const inForce = r.head ?? r.carried;
  if (summaries.length !== (inForce ? 1 : 0)) fail(step, `${summaries.length} summaries, head ${r.head?.boundaryId}, carried ${r.carried?.boundaryId}`);
  if (inForce && m.boundaryId !== inForce.boundaryId) fail(step, `the summary is ${m.boundaryId}, not ${inForce.boundaryId}`);
  for (const s of summaries) {
    if (s.role !== "user" || !s.parts[0].text.startsWith("[untrusted-history-summary")) fail(step, `summary ${JSON.stringify(s).slice(0, 200)}`);
  }
  // The exact tail is a suffix of the conversation.
  // (Late deliveries take their place by source sequence.)
  const turns = events
    .filter((e) => (e.type === "message" || e.type === "lateDelivery") && e.role !== "system")
    .sort((a, b) => a.sourceSeq - b.sourceSeq)
    .map((e) => e.turnId);
  const tail = messages.filter((x) => x.kind === "turn").map((x) => x.turnId);
  if (tail.length === 0 && turns.length > 0) fail(step, "an empty tail");
  if (tail.some((t, i) => t !== turns[turns.length - tail.length + i])) fail(step, `the tail is not an exact suffix: ${tail.slice(0, 3)}…`);
  // No tool result without its call.
  const parts = messages.flatMap((x) => x.parts ?? []);
  const calls = new Set(parts.filter((p) => p.type === "toolCall").map((p) => p.callId));
  for (const p of parts) if (p.type === "toolResult" && !calls.has(p.callId)) fail(step, `result ${p.callId} without its call`);
  // The timeline draws only accepted boundaries as completed, and a
  // retired epoch's as retired (an upgrade keeps its dividers).
  const dividers = (await c.timeline(id)).items.filter((item) => item.type === "divider" && item.state === "completed");
  for (const d of dividers) {
    const ok = d.retired ? r.retiredBoundaries.includes(d.boundaryId) : r.accepted.includes(d.boundaryId);
    if (!ok) fail(step, `${d.boundaryId} drawn but not ${d.retired ? "retired" : "accepted"}`);
  }
  if (r.head && !dividers.some((d) => d.boundaryId === r.head.boundaryId)) fail(step, "the chain head has no completed divider");
  return now;
}

/** The canonical encoding (keys sorted, no whitespace): the same bytes the Rust host writes for the same value. */
export function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v).filter((k) => v[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}`;
  }
  return JSON.stringify(v);
}

/**
 * An event without its default-valued members (`""`, `0`, `false`, `null`,
 * `[]`): the JS driver omits them where the Rust host writes them out, and
 * decoding gives absent members exactly those values, so two journals that
 * agree after this agree in meaning.
 */
export function withoutDefaults(v) {
  if (Array.isArray(v)) return v.map(withoutDefaults);
  if (v !== null && typeof v === "object") {
    const out = {};
    for (const [k, x] of Object.entries(v)) {
      if (x === "" || x === 0 || x === false || x === null || x === undefined || (Array.isArray(x) && x.length === 0)) continue;
      out[k] = withoutDefaults(x);
    }
    return out;
  }
  return v;
}

async function sha256(text) {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return [...d].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Run the journey over `journal` with package module `f`; answers counts and
 * the digests of the final journal and context (runtime-independent).
 */
/**
 * The journal, failing once — the first boundary append after it is armed —
 * as a crash between the stored packet and the boundary would: nothing of
 * the batch is written, the run ends in an error, the next run starts over.
 */
function failingOnce(journal) {
  const state = { armed: false, fired: false };
  const j = {
    readEvents: (...a) => journal.readEvents(...a),
    putPacket: (...a) => journal.putPacket(...a),
    getPacket: (...a) => journal.getPacket(...a),
    listPackets: (...a) => journal.listPackets(...a),
    acquireLease: (...a) => journal.acquireLease(...a),
    releaseLease: (...a) => journal.releaseLease(...a),
    async append(id, events, options) {
      const batch = Array.isArray(events) ? events : [events];
      if (state.armed && !state.fired && batch.some((e) => e.type === "boundary")) {
        state.fired = true;
        throw new Error("injected failure before the boundary is written");
      }
      return journal.append(id, events, options);
    },
  };
  return { journal: j, state };
}

export async function journey(f, store, { turns = 600, id = "journey", dump = false } = {}) {
  const { journal, state: failure } = failingOnce(store);
  const failAt = Math.floor((turns * 2) / 3);
  const model = flakyModel(f);
  let declaration = DECLARATION;
  const compactor = (holder = "journey") => f.createCompactor({ journal, model, declaration, holder, owner: () => "owner" });
  let c = compactor();
  let other = compactor("journey-2");
  let before = [];
  let compactedBeforeUpgrade = 0;
  const counts = { compacted: 0, failed: 0, manual: 0, corrections: 0, races: 0, crashes: 0, upgrades: 0 };
  const users = [];
  const callers = [];
  const steps = script(turns);
  for (const [step, s] of steps.entries()) {
    const { events } = await c.append(id, s.messages);
    for (const e of events) {
      if (e.role === "user") users.push(e.turnId);
      if (e.parts.some((p) => p.type === "toolCall")) callers.push(e.turnId);
    }
    // Now and then a member corrects their recent message, or an assistant
    // turn that called a tool (its text changes; its call stays).
    const target = Math.floor(step / 97) % 2 === 0 ? users[users.length - 2] : callers[callers.length - 1];
    if (s.correct && target) {
      await journal.append(id, { type: "correction", turnId: target, correctionSeq: step, parts: [{ type: "text", text: `corrected at step ${step}: the budget is 1,200 euros.` }] });
      counts.corrections++;
    }
    if (step === failAt) failure.armed = true;
    let r;
    if (failure.armed && !failure.fired) {
      try {
        r = await c.onMessage(id);
      } catch (e) {
        if (!String(e).includes("injected failure")) throw e;
        // The process "restarts": a new compactor over the same journal.
        counts.crashes++;
        c = compactor();
        r = { status: "crashed" };
      }
    } else if (s.manual) {
      counts.manual++;
      r = await c.compactTask(id, { id: `task-${step}`, actor: "owner" });
    } else if (step % 61 === 60) {
      // Two writers at once (a second compactor on the same journal, as a
      // second tab or replica would be): the writer lease lets one through;
      // never two boundaries, never a fork, nothing written by the other.
      const [a, b] = await Promise.all([c.onMessage(id), other.onMessage(id)]);
      if (a.status === "compacted" && b.status === "compacted") fail(step, "two writers both compacted");
      counts.races++;
      r = a.status === "compacted" ? a : b;
    } else {
      r = await c.onMessage(id);
    }
    if (r.status === "compacted") counts.compacted++;
    if (r.status === "failed") counts.failed++;
    // A restart in the middle: a new compactor over the same journal.
    if (step === Math.floor(turns / 2)) c = compactor();
    if (step === Math.floor((turns * 5) / 6)) {
      declaration = UPGRADED;
      c = compactor();
      other = compactor("journey-2");
      counts.upgrades++;
      compactedBeforeUpgrade = counts.compacted;
    }
    before = await check(f, c, journal, id, before, step);
  }
  if (counts.compacted < Math.floor(turns / 200)) throw new Error(`only ${counts.compacted} compactions`);
  // Long enough (the default 600 turns), every hazard has happened.
  if (turns >= 600 && counts.failed < 1) throw new Error("the failing model was never exercised");
  if (turns >= 600 && counts.crashes !== 1) throw new Error("the injected failure never fired");
  if (turns >= 600 && counts.compacted === compactedBeforeUpgrade) throw new Error("no compaction in the upgraded epoch");
  const ctx = await c.context(id, { format: "openai" });
  // Across drivers the journals are compared in meaning: canonical, without
  // the default-valued members only one of them writes out.
  const lines = (await journal.readEvents(id, 0)).map((s) => canonical(withoutDefaults(s.event)));
  return { ...counts, events: lines.length, journal: await sha256(lines.join("\n")), context: await sha256(canonical(ctx)), lines: dump ? lines : undefined };
}
