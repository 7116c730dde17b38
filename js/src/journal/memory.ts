import type { Event, Packet } from "../types.js";
import type { Journal, StoredEvent } from "./journal.js";
import { withContentHash } from "../hash.js";

/** An in-memory journal: tests, demos, and clients that keep state elsewhere. */
export class MemoryJournal implements Journal {
  private events = new Map<string, StoredEvent[]>();
  private packets = new Map<string, Map<string, Packet>>();
  private leases = new Map<string, { holder: string; until: number }>();
  constructor(private readonly now: () => number = () => Date.now()) {}

  async readEvents(conversationId: string, sinceSeq = 0): Promise<StoredEvent[]> {
    return (this.events.get(conversationId) ?? []).filter((e) => e.seq > sinceSeq).map((e) => structuredClone(e));
  }
  async append(conversationId: string, event: Event): Promise<number> {
    const list = this.events.get(conversationId) ?? [];
    const seq = list.length + 1;
    list.push({ seq, event: structuredClone(await withContentHash(event)) });
    this.events.set(conversationId, list);
    return seq;
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
  async acquireLease(conversationId: string, holder: string, ttlMs: number): Promise<boolean> {
    const l = this.leases.get(conversationId);
    const now = this.now();
    if (l && l.holder !== holder && l.until > now) return false;
    this.leases.set(conversationId, { holder, until: now + ttlMs });
    return true;
  }
  async releaseLease(conversationId: string, holder: string): Promise<void> {
    if (this.leases.get(conversationId)?.holder === holder) this.leases.delete(conversationId);
  }
}
