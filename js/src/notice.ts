// The one generic notice a member sees for a failed compaction (the core's
// `MEMBER_NOTICE`, core/src/ops/stream.rs; the reason stays in the audit
// record). Here for what shows it without the core: the handler's task
// stream and the chat client.

/** The member-facing notice of a failed compaction. */
export const MEMBER_NOTICE = "The chat could not be compacted.";
