import type { Event, Packet, SkipRecord } from "../types.js";
import { FoldlineError } from "../error.js";
import { advance, chainSlot, checkAppend, checkTurns, conflict, type AppendOptions, type Journal, type Progress, type StoredEvent } from "./journal.js";

/** An in-memory journal: tests, demos, and clients that keep state elsewhere. Holds the journal contract. */
export class MemoryJournal implements Journal {
  private events = new Map<string, StoredEvent[]>();
  private slots = new Map<string, Set<string>>();
  private packets = new Map<string, Map<string, Packet>>();
  private leases = new Map<string, { holder: string; until: number; token: number }>();
  private tokens = new Map<string, number>();
  private progresses = new Map<string, Progress>();
  private turns = new Map<string, Map<string, string>>();
  constructor(private readonly now: () => number = () => Date.now()) {}

  async readEvents(conversationId: string, sinceSeq = 0): Promise<StoredEvent[]> {
    return this.read(conversationId, sinceSeq, Infinity);
  }
  async readEventsPage(conversationId: string, sinceSeq: number, limit: number): Promise<StoredEvent[]> {
    return this.read(conversationId, sinceSeq, limit);
  }
  private read(conversationId: string, sinceSeq: number, limit: number): StoredEvent[] {
    const list = this.events.get(conversationId) ?? [];
    // Positions are 1-based and dense: position n is list[n - 1].
    // Only `append` writes here, after `checkAppend`: the events are checked.
    const from = Math.max(0, sinceSeq);
    return list.slice(from, from + Math.max(0, limit)).map((e) => ({ seq: e.seq, event: structuredClone(e.event), checked: true }));
  }
  async append(conversationId: string, events: Event | Event[], options: AppendOptions = {}): Promise<number> {
    const batch = await checkAppend(conversationId, Array.isArray(events) ? events : [events]);
    // From here on nothing awaits: the checks and the write are one step.
    const list = this.events.get(conversationId) ?? [];
    if (options.expectedSeq !== undefined && options.expectedSeq !== list.length) throw conflict(options.expectedSeq, list.length);
    if (options.fence !== undefined && options.fence !== this.tokens.get(conversationId)) {
      throw new FoldlineError({ code: "lease_lost", message: `a newer writer lease was granted (fence ${options.fence} is stale); nothing was written` });
    }
    const turns = this.turns.get(conversationId) ?? new Map<string, string>();
    const claims = checkTurns((id) => turns.get(id), batch);
    const slots = this.slots.get(conversationId) ?? new Set<string>();
    const taken = new Set<string>();
    for (const e of batch) {
      const slot = chainSlot(e);
      if (slot === undefined) continue;
      if (slots.has(slot) || taken.has(slot)) {
        throw new FoldlineError({ code: "fork", message: "a boundary already extends this chain head; nothing was written" });
      }
      taken.add(slot);
    }
    for (const e of batch) list.push({ seq: list.length + 1, event: structuredClone(e) });
    for (const s of taken) slots.add(s);
    for (const [id, claim] of claims) turns.set(id, claim);
    this.turns.set(conversationId, turns);
    this.events.set(conversationId, list);
    this.slots.set(conversationId, slots);
    return list.length;
  }
  async putPacket(conversationId: string, packet: Packet): Promise<void> {
    const m = this.packets.get(conversationId) ?? new Map<string, Packet>();
    if (!m.has(packet.id)) m.set(packet.id, structuredClone(packet));
    this.packets.set(conversationId, m);
  }
  async getPacket(conversationId: string, id: string): Promise<Packet | undefined> {
    const p = this.packets.get(conversationId)?.get(id);
    return p && structuredClone(p);
  }
  async listPackets(conversationId: string): Promise<Packet[]> {
    return [...(this.packets.get(conversationId)?.values() ?? [])].map((p) => structuredClone(p));
  }
  async acquireLease(conversationId: string, holder: string, ttlMs: number): Promise<number | undefined> {
    const l = this.leases.get(conversationId);
    const now = this.now();
    if (l && l.holder !== holder && l.until > now) return undefined;
    // The same live holder renews under its token; a new grant gets a new one.
    const token = l && l.holder === holder && l.until > now ? l.token : (this.tokens.get(conversationId) ?? 0) + 1;
    this.tokens.set(conversationId, token);
    this.leases.set(conversationId, { holder, until: now + ttlMs, token });
    return token;
  }
  async releaseLease(conversationId: string, holder: string): Promise<void> {
    if (this.leases.get(conversationId)?.holder === holder) this.leases.delete(conversationId);
  }  async noteSkipped(conversationId: string, record: SkipRecord): Promise<void> {
    this.progresses.set(conversationId, advance(this.progresses.get(conversationId), structuredClone(record)));
  }
  async progress(conversationId: string): Promise<Progress | undefined> {
    const p = this.progresses.get(conversationId);
    return p && structuredClone(p);
  }

}
