// The writer lease of a run, renewed while it works, and the one-at-a-time
// order of a conversation's writers on this compactor. The Rust driver's
// lease.rs.

import { state, using, type Ctx } from "./read.js";

/** Run `fn` under the writer lease (renewed while it runs, so a long model call keeps it); `undefined`: another writer holds it. */
export async function leased<T>(c: Ctx, id: string, fn: (fence: number) => Promise<T>): Promise<T | undefined> {
  const fence = await c.o.journal.acquireLease(id, c.holder, c.leaseMs);
  if (fence === undefined) return undefined;
  const renew = setInterval(() => void c.o.journal.acquireLease(id, c.holder, c.leaseMs).catch(() => undefined), Math.max(1, Math.floor(c.leaseMs / 3)));
  try {
    return await fn(fence);
  } finally {
    clearInterval(renew);
    await c.o.journal.releaseLease(id, c.holder);
  }
}

/** Run `fn` after every earlier writer of this conversation on this compactor. */
export function serial<T>(c: Ctx, id: string, fn: () => Promise<T>): Promise<T> {
  const s = state(c, id);
  const next = using(s, s.writing.then(fn));
  s.writing = next.catch(() => undefined);
  return next;
}
