import type { Event, Packet } from "../types.js";

/** An event as the journal stores it: its position and the event. */
export interface StoredEvent { seq: number; event: Event }

/**
 * What foldline needs from a conversation journal. The journal is append-only:
 * foldline never edits or deletes an event.
 */
export interface Journal {
  /** Events of a conversation with a journal position greater than `sinceSeq` (default: all), in order. */
  readEvents(conversationId: string, sinceSeq?: number): Promise<StoredEvent[]>;
  /** Append one event; returns its position. */
  append(conversationId: string, event: Event): Promise<number>;
  /** Store a packet document by its id (idempotent). */
  putPacket(conversationId: string, packet: Packet): Promise<void>;
  /** A stored packet, or undefined. */
  getPacket(conversationId: string, id: string): Promise<Packet | undefined>;
  /** Every stored packet of a conversation. */
  listPackets(conversationId: string): Promise<Packet[]>;
  /** Take the per-conversation writer lease for `ttlMs`; false when another holder has it. */
  acquireLease(conversationId: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Release the lease if `holder` has it. */
  releaseLease(conversationId: string, holder: string): Promise<void>;
}
