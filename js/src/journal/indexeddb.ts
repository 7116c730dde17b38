import type { Event, Packet, SkipRecord } from "../types.js";
import { FoldlineError } from "../error.js";
import { advance, chainSlot, checkAppend, checkTurns, conflict, turnClaims, type AppendOptions, type Journal, type Progress, type StoredEvent } from "./journal.js";

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

/** The database's schema version (what `open` upgrades an older one to). */
const VERSION = 4;

function newer(name: string): FoldlineError {
  return new FoldlineError({ code: "unsupported_version", message: `a newer version of this app upgraded the foldline database "${name}" (past version ${VERSION}): reload this page` });
}

/**
 * The connection `r` opens. While another connection holds the database
 * at an older version and does not yield (a tab of an app from before the
 * upgrade), the open would wait until that tab closes: it is refused
 * instead (the upgrade still runs once that tab goes; the connection it
 * then opens is closed).
 */
function opened(r: IDBOpenDBRequest, name: string): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    let refused = false;
    r.onsuccess = () => (refused ? r.result.close() : resolve(r.result));
    r.onerror = () => reject(r.error?.name === "VersionError" ? newer(name) : r.error);
    r.onblocked = () => {
      refused = true;
      reject(new FoldlineError({
        code: "journal_blocked",
        message: `the foldline database "${name}" is open at an older version in another tab or window: close or reload it, then open it again`,
      }));
    };
  });
}

/**
 * A browser journal on IndexedDB: an append-only `events` store keyed by
 * (conversation, seq), `slots` (one boundary per chain head), `packets` by
 * (conversation, id), `leases` by conversation with a fencing token,
 * `progress` (the compactor's skipped-run watermark) by conversation, `turns`
 * (what each turn id claims) by (conversation, turn id). Each
 * append is one transaction — check position, fence and chain slots, then
 * write — so a reload loses nothing and two tabs can never fork a chain.
 */
export class IndexedDbJournal implements Journal {
  /** Set when a newer version of the app upgraded the database in another tab: this connection closed for it. */
  private upgraded = false;

  private constructor(private readonly db: IDBDatabase, private readonly now: () => number, private readonly name: string) {
    // Yield to a newer version opened in another tab (else its upgrade
    // would wait on this tab for good); this journal's calls then refuse.
    db.onversionchange = () => {
      db.close();
      this.upgraded = true;
    };
  }

  /**
   * Open (or create) the database. Refused, never left waiting: while
   * another tab or window holds it open at an older version (an app not
   * yet reloaded after an upgrade), `journal_blocked`; a database a newer
   * version of the app upgraded, `unsupported_version`.
   */
  static async open(name = "foldline", now: () => number = () => Date.now()): Promise<IndexedDbJournal> {
    const r = indexedDB.open(name, VERSION);
    r.onupgradeneeded = (ev) => {
      const db = r.result;
      if (ev.oldVersion < 1) {
        db.createObjectStore("events", { keyPath: ["conversation", "seq"] });
        db.createObjectStore("packets", { keyPath: ["conversation", "id"] });
        db.createObjectStore("leases", { keyPath: "conversation" });
      }
      if (ev.oldVersion < 2) db.createObjectStore("slots", { keyPath: ["conversation", "slot"] });
      if (ev.oldVersion < 3) db.createObjectStore("progress", { keyPath: "conversation" });
      if (ev.oldVersion < 4) {
        // What each turn id claims, so a used id is never given other
        // content; a database from before is filled in from its events.
        const turns = db.createObjectStore("turns", { keyPath: ["conversation", "turnId"] });
        if (ev.oldVersion >= 1) {
          const cursor = r.transaction!.objectStore("events").openCursor();
          cursor.onsuccess = () => {
            const c = cursor.result;
            if (!c) return;
            const row = c.value as { conversation: string; event: Event };
            for (const [turnId, claim] of turnClaims([row.event])) turns.put({ conversation: row.conversation, turnId, claim });
            c.continue();
          };
        }
      }
    };
    return new IndexedDbJournal(await opened(r, name), now, name);
  }

  /** A transaction on `stores`: refused once a newer version of the app upgraded the database. */
  private tx(stores: string | string[], mode: IDBTransactionMode): IDBTransaction {
    if (this.upgraded) throw newer(this.name);
    return this.db.transaction(stores, mode);
  }

  close(): void {
    this.db.close();
  }

  async readEvents(conversationId: string, sinceSeq = 0): Promise<StoredEvent[]> {
    return this.read(conversationId, sinceSeq);
  }

  async readEventsPage(conversationId: string, sinceSeq: number, limit: number): Promise<StoredEvent[]> {
    // getAll's count of 0 means all: a page of none reads none.
    return limit >= 1 ? this.read(conversationId, sinceSeq, Math.floor(limit)) : [];
  }

  private async read(conversationId: string, sinceSeq: number, count?: number): Promise<StoredEvent[]> {
    const tx = this.tx("events", "readonly");
    const range = IDBKeyRange.bound([conversationId, sinceSeq + 1], [conversationId, Number.MAX_SAFE_INTEGER]);
    const rows = (await req(tx.objectStore("events").getAll(range, count))) as { seq: number; event: Event }[];
    return rows.map((r) => ({ seq: r.seq, event: r.event }));
  }

  async append(conversationId: string, events: Event | Event[], options: AppendOptions = {}): Promise<number> {
    const batch = await checkAppend(conversationId, Array.isArray(events) ? events : [events]);
    const tx = this.tx(["events", "slots", "leases", "turns"], "readwrite");
    const store = tx.objectStore("events");
    const range = IDBKeyRange.bound([conversationId, 0], [conversationId, Number.MAX_SAFE_INTEGER]);
    const last = await req(store.openCursor(range, "prev"));
    const head = last ? (last.value as { seq: number }).seq : 0;
    const refuse = (e: FoldlineError) => {
      tx.abort();
      return e;
    };
    if (options.expectedSeq !== undefined && options.expectedSeq !== head) throw refuse(conflict(options.expectedSeq, head));
    if (options.fence !== undefined) {
      const lease = (await req(tx.objectStore("leases").get(conversationId))) as { token?: number } | undefined;
      if (lease?.token !== undefined && lease.token !== options.fence) {
        throw refuse(new FoldlineError({ code: "lease_lost", message: `a newer writer lease was granted (fence ${options.fence} is stale); nothing was written` }));
      }
    }
    const turnStore = tx.objectStore("turns");
    const stored = new Map<string, string>();
    for (const [id] of turnClaims(batch)) {
      const row = (await req(turnStore.get([conversationId, id]))) as { claim: string } | undefined;
      if (row) stored.set(id, row.claim);
    }
    let claims: Array<[string, string]>;
    try {
      claims = checkTurns((id) => stored.get(id), batch);
    } catch (e) {
      throw e instanceof FoldlineError ? refuse(e) : e;
    }
    const slots = tx.objectStore("slots");
    for (const e of batch) {
      const slot = chainSlot(e);
      if (slot === undefined) continue;
      if (await req(slots.get([conversationId, slot]))) {
        throw refuse(new FoldlineError({ code: "fork", message: "a boundary already extends this chain head; nothing was written" }));
      }
      slots.add({ conversation: conversationId, slot });
    }
    let seq = head;
    for (const event of batch) store.add({ conversation: conversationId, seq: ++seq, event });
    for (const [turnId, claim] of claims) turnStore.put({ conversation: conversationId, turnId, claim });
    await done(tx);
    return seq;
  }

  async putPacket(conversationId: string, packet: Packet): Promise<void> {
    const tx = this.tx("packets", "readwrite");
    tx.objectStore("packets").put({ conversation: conversationId, id: packet.id, packet });
    await done(tx);
  }

  async getPacket(conversationId: string, id: string): Promise<Packet | undefined> {
    const tx = this.tx("packets", "readonly");
    const row = (await req(tx.objectStore("packets").get([conversationId, id]))) as { packet: Packet } | undefined;
    return row?.packet;
  }

  async listPackets(conversationId: string): Promise<Packet[]> {
    const tx = this.tx("packets", "readonly");
    const range = IDBKeyRange.bound([conversationId, ""], [conversationId, "\uffff"]);
    const rows = (await req(tx.objectStore("packets").getAll(range))) as { packet: Packet }[];
    return rows.map((r) => r.packet);
  }

  async acquireLease(conversationId: string, holder: string, ttlMs: number): Promise<number | undefined> {
    const tx = this.tx("leases", "readwrite");
    const store = tx.objectStore("leases");
    const cur = (await req(store.get(conversationId))) as { holder: string; until: number; token?: number } | undefined;
    const now = this.now();
    if (cur && cur.holder !== holder && cur.until > now) {
      await done(tx);
      return undefined;
    }
    const live = cur && cur.holder === holder && cur.until > now;
    const token = live && cur.token !== undefined ? cur.token : (cur?.token ?? 0) + 1;
    store.put({ conversation: conversationId, holder, until: now + ttlMs, token });
    await done(tx);
    return token;
  }

  async releaseLease(conversationId: string, holder: string): Promise<void> {
    const tx = this.tx("leases", "readwrite");
    const store = tx.objectStore("leases");
    const cur = (await req(store.get(conversationId))) as { holder: string; token?: number } | undefined;
    // Keep the token, so the next grant's is newer and this holder's fence goes stale.
    if (cur?.holder === holder) store.put({ ...cur, holder: "", until: 0 });
    await done(tx);
  }
  async noteSkipped(conversationId: string, record: SkipRecord): Promise<void> {
    const tx = this.tx("progress", "readwrite");
    const store = tx.objectStore("progress");
    const cur = (await req(store.get(conversationId))) as (Progress & { conversation: string }) | undefined;
    store.put({ conversation: conversationId, ...advance(cur && { skippedRuns: cur.skippedRuns, last: cur.last }, record) });
    await done(tx);
  }

  async progress(conversationId: string): Promise<Progress | undefined> {
    const tx = this.tx("progress", "readonly");
    const cur = (await req(tx.objectStore("progress").get(conversationId))) as (Progress & { conversation: string }) | undefined;
    return cur && { skippedRuns: cur.skippedRuns, last: cur.last };
  }

}
