// Warm candidates (seed 002): a packet summarized ahead of need, under a
// lease of its own. The core's loop prepares it (`prepareWarm`: the
// streaming rule and its one buffered replay, the answer checked by settle,
// nothing written) and decides when it is used. The Rust driver's warm.rs.

import { WARM_LEASE_MS } from "../defaults.js";
import type { Ctx, State } from "./read.js";
import { drive } from "./loop.js";

/** Prepare a held warm candidate under its own lease, through the core's loop; its checked summary is kept. */
export async function prepareWarm(c: Ctx, id: string, w: NonNullable<State["warm"]>): Promise<void> {
  const key = `${id}#warm`;
  try {
    const fence = await c.o.journal.acquireLease(key, c.holder, c.o.warmLeaseMs ?? WARM_LEASE_MS);
    if (fence === undefined) return;
    try {
      const f = await drive(c, id, { kind: "automatic" }, fence, { prepareWarm: true });
      if (f.status === "prepared") w.result = f.summary; // else the compaction that is due will try itself
    } finally {
      await c.o.journal.releaseLease(key, c.holder);
    }
  } catch {
    // A warm candidate is an optimization: any failure leaves it unprepared.
  }
}
