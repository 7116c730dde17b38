// The hosts' defaults, written from core/src/defaults.rs (do not edit:
// FOLDLINE_WRITE_CONTRACT=1 cargo test -p foldline-core --lib schema).

/** Deadline of one model call, in milliseconds. */
export const MODEL_TIMEOUT_MS = 120000;

/** Time to live of a run's writer lease, in milliseconds (renewed every third of it while a model call runs). */
export const LEASE_MS = 120000;

/** Time to live of a warm candidate's lease, in milliseconds (seed 002: 900 s). */
export const WARM_LEASE_MS = 900000;

/** A core instance is replaced after a call grows its memory past this. */
export const MEMORY_RESET_BYTES = 16777216;

/** The servers' largest request body, in bytes. */
export const BODY_LIMIT_BYTES = 1048576;

/** The deepest nesting of arrays and objects the servers read in a request body (a message needs five or six; JSON parsers differ past a hundred). */
export const BODY_DEPTH = 64;

/** The conversations a Rust driver keeps state for (the verified chain, the live events); the least recently used is let go when another comes in, and read from the journal again at its next call. */
export const CONVERSATIONS_KEPT = 1024;

/** The same bound for the JS driver: smaller, for browser tabs and edge isolates (128 MB on Cloudflare Workers). */
export const CONVERSATIONS_KEPT_JS = 256;

/** The servers' manual compactions per member per minute. */
export const CONDENSE_PER_MINUTE = 6;

/** How long an answer holds a conversation's session unless given back, in milliseconds. */
export const ANSWER_LEASE_MS = 300000;

/** How often a task's event stream looks for another writer's events, in milliseconds. */
export const POLL_MS = 250;

/** The longest the servers hold a long poll (`wait` of `…/events` and `…/timeline`), in milliseconds. */
export const LONG_POLL_MS = 25000;

/** The most long polls one member holds waiting on one server at a time (each costs a journal read per write to its conversation and per poll interval); one more is refused with `rate_limited`. */
export const WAITS_PER_MEMBER = 16;

/** The most events one answer of the servers' `…/events` holds. */
export const FEED_PAGE_EVENTS = 1000;

/** The largest timeline answer the servers keep for the pages that wake on the same write (a longer one is drawn anew). */
export const TIMELINE_KEPT_BYTES = 524288;

/** Timeline slots (conversation and page) the servers keep before those no request is using are let go. */
export const TIMELINE_SLOTS = 256;

/** The most text of conversations' events the Rust driver keeps between timeline drawings, all conversations together (a drawing after a write reads and encodes only what is new), in bytes. */
export const TIMELINE_TEXT_BYTES = 67108864;

/** The same bound for the JS driver, in UTF-16 units: smaller, since it runs in browser tabs and edge isolates (128 MB on Cloudflare Workers). */
export const TIMELINE_TEXT_CHARS = 16777216;

/** The items of each core call when a host draws a whole timeline: it draws it in pages from the latest back, so no call takes a whole long conversation. */
export const TIMELINE_PAGE_ITEMS = 5000;

/** Output tokens the OpenAI-compatible adapters add to a summary's cap once the endpoint asks for `max_completion_tokens` (a reasoning model counts its reasoning within the cap), unless a cap is set. */
export const REASONING_ROOM_TOKENS = 8192;

/** The least summary a compaction writes, in characters (a plan narrows a summary to the room there is): the hosts' append checks measure a member's or a tool's newest turn beside it. */
export const SUMMARY_MIN_CHARS = 200;

/** Tokens of framing each message costs beside its content: the estimate's, and what a host's token counter adds unless told its provider's (OpenAI's chat: 3). */
export const MESSAGE_OVERHEAD_TOKENS = 4;

/** An ordinary turn, in characters: admitted pinned turns always leave a context room for one beside the least summary. */
export const MIN_TAIL_CHARS = 1024;

/** An ordinary turn, in tokens (the same room in token budgets). */
export const MIN_TAIL_TOKENS = 256;

/** Roles a compaction never folds (`Role::always_pinned`). */
export const PINNED_ROLES: ReadonlySet<string> = new Set(["system", "developer", "document"]);

/** Every name an output format is read by (the core's `Format`, with its aliases). */
export const FORMATS: ReadonlySet<string> = new Set(["foldline", "openai", "openaiResponses", "openai-responses", "anthropic", "aiSdk", "ai-sdk"]);
