// Loop-level fuzzing: random interleavings of appends (ordinary turns, tool
// calls and results, late deliveries, corrections), automatic and manual
// compactions, model failures (refusals, dropped streams, a stream that breaks
// after some text, slow answers), crashes between the stored packet and the
// boundary, restarts and concurrent callers (overlapping calls on one
// compactor, two compactors on one journal, a member appending while a
// compaction runs) — all against the real driver, with the journey's seed
// invariants (journey.mjs `check`) after every step, plus: nothing appended
// is lost, and every manual task that was accepted has exactly one end.
//
// Each case is a seed; a breach names the seed, the step, the invariant and
// the last operations, and `FOLDLINE_FUZZ_SEED=<seed>` replays that one case.
// Short profile in `npm test` (test/journey/run.mjs); a long one:
//   FOLDLINE_FUZZ_CASES=500 FOLDLINE_FUZZ_STEPS=400 node test/journey/fuzz-run.mjs

import { check } from "./journey.mjs";

/** The compactor's context equals `select` over the whole journal with its resolution, or both refuse alike. */
async function sameAsStateless(f, c, id, stored) {
  const outcome = async (fn) => {
    try {
      return { ok: await fn() };
    } catch (e) {
      return { error: e?.code ?? String(e) };
    }
  };
  const r = await outcome(() => c.resolve(id));
  if (!r.ok) return; // a chain the driver refuses has no context to compare
  const events = stored.filter((e) => e.type !== "boundary" && e.type !== "frontier");
  const held = await outcome(() => c.context(id, { format: "openai" }));
  const plain = await outcome(async () => f.select({
    declaration: DECLARATION, route: { conversation: id, chat: "", sender: "" },
    frontier: r.ok.frontier, head: r.ok.head, amendment: r.ok.amendment, events, format: "openai",
  }));
  if (JSON.stringify(held) !== JSON.stringify(plain)) {
    throw new Error(`the compactor's context differs from the stateless select: ${JSON.stringify(held).slice(0, 300)} vs ${JSON.stringify(plain).slice(0, 300)}`);
  }
}

const DECLARATION = {
  targetId: "assistant",
  compactorId: "assistant-compactor",
  budget: { kind: "chars", trigger: 6000, retain: 2400 },
  summary: { maxChars: 500 },
};

/** A small deterministic PRNG (mulberry32): the same seed, the same case. */
function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (n) => Math.floor(next() * n), pick: (xs) => xs[Math.floor(next() * xs.length)] };
}

/** A model whose next answers the case chooses: ok, refused, dropped, broken mid-stream, or slow. */
function scriptedModel(f) {
  const state = { mode: "ok", calls: 0 };
  const answer = (packet) => `Summary of ${packet.input.turnCount} turns through ${packet.coveredThroughTurnId}.`;
  const model = {
    async *stream(packet) {
      state.calls++;
      const mode = state.mode;
      if (mode === "refuse") throw new f.ModelError("providerRefusal", "refused by the provider");
      if (mode === "drop") throw new Error("connection reset");
      if (mode === "slow") await new Promise((r) => setTimeout(r, 2));
      yield { type: "delta", text: answer(packet).slice(0, 10) };
      if (mode === "break") throw new Error("stream broke after some text");
      yield { type: "delta", text: answer(packet).slice(10) };
      yield { type: "done", modelId: "fuzz-1", usage: { inputTokens: 100, outputTokens: 20 }, finishReason: "stop" };
    },
    async complete(packet) {
      state.calls++;
      if (state.mode === "refuse") throw new f.ModelError("providerRefusal", "refused by the provider");
      return { text: answer(packet), modelId: "fuzz-1", usage: { inputTokens: 100, outputTokens: 20 }, finishReason: "stop" };
    },
  };
  return { model, state };
}

/**
 * The journal, with crashes the case arms: the next append of a boundary
 * (after the packet is stored), or the next packet store, fails as a crash
 * of the process there would — nothing of that write happens, and the dead
 * process releases nothing: its writer lease stays until it lapses (or its
 * holder, restarted, takes it back).
 */
function crashable(journal) {
  const armed = { boundary: false, packet: false, dead: false };
  const j = {
    readEvents: (...a) => journal.readEvents(...a),
    getPacket: (...a) => journal.getPacket(...a),
    listPackets: (...a) => journal.listPackets(...a),
    acquireLease: (...a) => journal.acquireLease(...a),
    async releaseLease(...a) {
      if (armed.dead) {
        armed.dead = false;
        return;
      }
      return journal.releaseLease(...a);
    },
    async putPacket(...a) {
      if (armed.packet) {
        armed.packet = false;
        armed.dead = true;
        throw new Error("injected crash: the packet store failed");
      }
      return journal.putPacket(...a);
    },
    async append(id, events, options) {
      const batch = Array.isArray(events) ? events : [events];
      if (armed.boundary && batch.some((e) => e.type === "boundary")) {
        armed.boundary = false;
        armed.dead = true;
        throw new Error("injected crash: before the boundary was written");
      }
      return journal.append(id, events, options);
    },
  };
  return { journal: j, armed };
}

const WORDS = ["Lisbon", "Porto", "budget", "visa", "train", "hotel", "Ana", "flight", "museum", "dinner", "ferry", "ticket"];

/** One fuzz case: `steps` random operations from `seed`; answers its counts, or throws naming the breach. */
export async function fuzzCase(f, store, { seed, steps = 120, id = `fuzz-${seed}` }) {
  const r = rng(seed);
  const { journal, armed } = crashable(store);
  const { model, state } = scriptedModel(f);
  const owner = () => "owner";
  // The first compactor keeps one conversation: a call for another lets
  // this case's go (when no call is using it), to be read again.
  const make = (holder) => f.createCompactor({
    journal, model, declaration: DECLARATION, holder, owner, modelTimeoutMs: 5000, ...(holder === "fuzz-1" ? { conversationsKept: 1 } : {}),
  });
  let c = make("fuzz-1");
  let other = make("fuzz-2");
  let k = 0; // the next ordinary turn's number
  let calls = 0;
  const appended = []; // turn ids in journal order, as this case appended them
  const late = new Set();
  const tasks = new Map(); // task id → accepted?
  const counts = { compacted: 0, failed: 0, busy: 0, refused: 0, crashes: 0, races: 0, manual: 0, late: 0, corrections: 0 };
  const log = [];
  let before = [];

  const text = () => {
    const n = 1 + r.int(r.next() < 0.1 ? 40 : 8);
    const words = [];
    for (let i = 0; i < n * 8; i++) words.push(r.next() < 0.15 ? String(r.int(5000)) : r.pick(WORDS));
    return `${words.join(" ")}.`;
  };
  const message = (role, parts, turnId = `t${++k}`, sourceSeq = k * 10) => ({
    type: "message", conversation: id, sourceSeq, turnId, role, parts,
  });
  const say = () => {
    const roll = r.next();
    if (roll < 0.2) {
      const call = `call-${k + 1}`;
      return [
        message("assistant", [{ type: "text", text: "Checking." }, { type: "toolCall", callId: call, name: "search", arguments: JSON.stringify({ q: r.pick(WORDS) }) }]),
        message("tool", [{ type: "toolResult", callId: call, name: "search", content: text() }]),
      ];
    }
    return [message(roll < 0.6 ? "user" : "assistant", [{ type: "text", text: text() }])];
  };
  const appendTurns = async () => {
    const events = say();
    await journal.append(id, events);
    for (const e of events) appended.push(e.turnId);
  };
  /** An outcome the driver may answer; anything else (a thrown error) is a breach unless a crash was injected. */
  const tally = (res) => {
    if (res.status === "compacted") counts.compacted++;
    else if (res.status === "failed") counts.failed++;
    else if (res.status === "busy") counts.busy++;
    else if (res.status === "refused") {
      counts.refused++;
      counts[`refused:${res.code}`] = (counts[`refused:${res.code}`] ?? 0) + 1;
    }
    return res;
  };
  /** `fn` of compactor `who` (1: `c`, 2: `other`); an injected crash restarts that compactor. */
  const guarded = async (fn, who = 1) => {
    try {
      return tally(await fn());
    } catch (e) {
      if (!String(e?.message ?? e).startsWith("injected crash")) throw e;
      // The process "restarts": a new compactor over the same journal.
      counts.crashes++;
      if (who === 1) c = make("fuzz-1");
      else other = make("fuzz-2");
      return { status: "crashed" };
    }
  };
  const manual = async () => {
    const task = `task-${calls++}`;
    counts.manual++;
    return guarded(async () => {
      try {
        return await c.compactTask(id, { id: task, actor: "owner", onAccepted: () => tasks.set(task, true) });
      } catch (e) {
        if (e.code === "nothing_to_fold") return { status: "refused", code: e.code };
        throw e;
      }
    });
  };

  const ops = [
    [30, "append", appendTurns],
    [20, "onMessage", () => guarded(() => c.onMessage(id))],
    [6, "append while compacting", async () => {
      counts.races++;
      await Promise.all([guarded(() => c.onMessage(id)), appendTurns()]);
    }],
    [5, "overlapping onMessage ×3", async () => {
      // Serialized on one compactor: each may compact a later head, never one
      // head twice (check() after the step).
      counts.races++;
      await Promise.all([0, 1, 2].map(() => guarded(() => c.onMessage(id))));
    }],
    [5, "two compactors", async () => {
      counts.races++;
      await Promise.all([guarded(() => c.onMessage(id)), guarded(() => other.onMessage(id), 2)]);
    }],
    [4, "manual /compact", () => manual()],
    [2, "manual /compact racing onMessage", async () => {
      counts.races++;
      await Promise.all([manual(), guarded(() => other.onMessage(id), 2)]);
    }],
    [3, "late delivery", async () => {
      // A turn that belongs between two earlier ones, arriving now.
      const j = 1 + r.int(Math.max(1, k));
      if (late.has(j)) return;
      late.add(j);
      counts.late++;
      await journal.append(id, { ...message("user", [{ type: "text", text: `late: ${text()}` }], `late-${j}`, j * 10 + 5), type: "lateDelivery" });
      appended.push(`late-${j}`);
    }],
    [3, "correction", async () => {
      const users = appended.filter((t) => t.startsWith("t"));
      if (users.length === 0) return;
      counts.corrections++;
      await journal.append(id, { type: "correction", turnId: r.pick(users), correctionSeq: calls++, parts: [{ type: "text", text: `corrected: ${text()}` }] });
    }],
    [6, "model mode", () => {
      state.mode = r.pick(["ok", "ok", "ok", "refuse", "drop", "break", "slow"]);
    }],
    [3, "arm a crash", () => {
      if (r.next() < 0.5) armed.boundary = true;
      else armed.packet = true;
    }],
    [4, "another conversation", async () => {
      // Racing this conversation's check or not: its state is let go only
      // while no call is using it.
      const elsewhere = () => guarded(() => c.position(`elsewhere-${r.int(3)}`));
      await (r.next() < 0.5 ? elsewhere() : Promise.all([guarded(() => c.onMessage(id)), elsewhere()]));
    }],
    [2, "restart", () => {
      c = make("fuzz-1");
    }],
  ];
  const total = ops.reduce((s, [w]) => s + w, 0);

  await appendTurns();
  for (let step = 0; step < steps; step++) {
    let roll = r.int(total);
    const [, name, op] = ops.find(([w]) => (roll -= w) < 0);
    log.push(`${step}:${name}`);
    try {
      await op();
      if (name === "model mode") log[log.length - 1] += `=${state.mode}`;
      before = await check(f, c, journal, id, before, step);
      // Nothing appended is lost: every turn this case appended is in the journal, in order.
      const stored = (await journal.readEvents(id, 0)).map((s) => s.event);
      // What the compactor keeps between calls (its read position, verified
      // chain, events held in the core) changes nothing: its context is the
      // stateless select of everything the journal holds.
      await sameAsStateless(f, c, id, stored);
      const turns = stored.filter((e) => e.type === "message" || e.type === "lateDelivery").map((e) => e.turnId);
      if (turns.length !== appended.length || turns.some((t, i) => t !== appended[i])) {
        throw new Error(`journey step ${step}: an appended turn is missing or out of order`);
      }
      // Every accepted manual task has its requested event and at most one end.
      for (const task of tasks.keys()) {
        const evs = stored.filter((e) => e.type === "compactionTask" && e.taskId === task);
        const ends = evs.filter((e) => e.state !== "requested").length;
        if (evs[0]?.state !== "requested" || ends > 1) throw new Error(`journey step ${step}: task ${task} has ${ends} ends`);
      }
    } catch (e) {
      const err = new Error(`fuzz seed ${seed}, step ${step} (${name}): ${e?.message ?? e}\n  last operations: ${log.slice(-12).join(", ")}`);
      err.stack = `${err.message}\n${e?.stack ?? ""}`;
      throw err;
    }
  }
  // The end of a run: a healthy model and a fresh compactor end every
  // interrupted task, and every accepted task then has exactly one end.
  state.mode = "ok";
  armed.boundary = armed.packet = false;
  c = make("fuzz-1");
  await c.endInterrupted(id);
  const stored = (await journal.readEvents(id, 0)).map((s) => s.event);
  for (const task of tasks.keys()) {
    const ends = stored.filter((e) => e.type === "compactionTask" && e.taskId === task && e.state !== "requested").length;
    if (ends !== 1) throw new Error(`fuzz seed ${seed}: task ${task} ended ${ends} times after recovery`);
  }
  return { ...counts, turns: appended.length, modelCalls: state.calls };
}
