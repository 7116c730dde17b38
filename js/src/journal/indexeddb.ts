import type { Event, Packet } from "../types.js";
import type { Journal, StoredEvent } from "./journal.js";
import { withContentHash } from "../hash.js";

function req<T>(r: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}

function done(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error);
  });
}

/**
 * A browser journal on IndexedDB: an append-only `events` store keyed by
 * (conversation, seq), `packets` by (conversation, id), `leases` by
 * conversation. Each append is one transaction, so a reload loses nothing.
 */
export class IndexedDbJournal implements Journal {
  private constructor(private readonly db: IDBDatabase, private readonly now: () => number) {}

  /** Open (or create) the database. */
  static async open(name = "foldline", now: () => number = () => Date.now()): Promise<IndexedDbJournal> {
    const r = indexedDB.open(name, 1);
    r.onupgradeneeded = () => {
      const db = r.result;
      db.createObjectStore("events", { keyPath: ["conversation", "seq"] });
      db.createObjectStore("packets", { keyPath: ["conversation", "id"] });
      db.createObjectStore("leases", { keyPath: "conversation" });
    };
    return new IndexedDbJournal(await req(r), now);
  }

  close(): void {
    this.db.close();
  }

  async readEvents(conversationId: string, sinceSeq = 0): Promise<StoredEvent[]> {
    const tx = this.db.transaction("events", "readonly");
    const range = IDBKeyRange.bound([conversationId, sinceSeq + 1], [conversationId, Number.MAX_SAFE_INTEGER]);
    const rows = (await req(tx.objectStore("events").getAll(range))) as { seq: number; event: Event }[];
    return rows.map((r) => ({ seq: r.seq, event: r.event }));
  }

  async append(conversationId: string, event: Event): Promise<number> {
    event = await withContentHash(event); // hashed once, when it enters
    const tx = this.db.transaction("events", "readwrite");
    const store = tx.objectStore("events");
    const range = IDBKeyRange.bound([conversationId, 0], [conversationId, Number.MAX_SAFE_INTEGER]);
    const last = await req(store.openCursor(range, "prev"));
    const seq = last ? (last.value as { seq: number }).seq + 1 : 1;
    store.add({ conversation: conversationId, seq, event });
    await done(tx);
    return seq;
  }

  async putPacket(conversationId: string, packet: Packet): Promise<void> {
    const tx = this.db.transaction("packets", "readwrite");
    tx.objectStore("packets").put({ conversation: conversationId, id: packet.id, packet });
    await done(tx);
  }

  async getPacket(conversationId: string, id: string): Promise<Packet | undefined> {
    const tx = this.db.transaction("packets", "readonly");
    const row = (await req(tx.objectStore("packets").get([conversationId, id]))) as { packet: Packet } | undefined;
    return row?.packet;
  }

  async listPackets(conversationId: string): Promise<Packet[]> {
    const tx = this.db.transaction("packets", "readonly");
    const range = IDBKeyRange.bound([conversationId, ""], [conversationId, "\uffff"]);
    const rows = (await req(tx.objectStore("packets").getAll(range))) as { packet: Packet }[];
    return rows.map((r) => r.packet);
  }

  async acquireLease(conversationId: string, holder: string, ttlMs: number): Promise<boolean> {
    const tx = this.db.transaction("leases", "readwrite");
    const store = tx.objectStore("leases");
    const cur = (await req(store.get(conversationId))) as { holder: string; until: number } | undefined;
    const now = this.now();
    if (cur && cur.holder !== holder && cur.until > now) {
      await done(tx);
      return false;
    }
    store.put({ conversation: conversationId, holder, until: now + ttlMs });
    await done(tx);
    return true;
  }

  async releaseLease(conversationId: string, holder: string): Promise<void> {
    const tx = this.db.transaction("leases", "readwrite");
    const store = tx.objectStore("leases");
    const cur = (await req(store.get(conversationId))) as { holder: string } | undefined;
    if (cur?.holder === holder) store.delete(conversationId);
    await done(tx);
  }
}
