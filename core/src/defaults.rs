//! The hosts' defaults, defined once. The Rust driver, `foldline serve` and
//! the program take these constants; the JS package's `js/src/defaults.ts`
//! is written from them (`FOLDLINE_WRITE_CONTRACT=1 cargo test -p
//! foldline-core --lib schema`, in `entry/schema.rs`, beside the type
//! contract), and a test fails when it says otherwise.
//! The core itself decides nothing by the clock: these are what a host
//! gives it (a deadline, a lease) or keeps around it (limits of its server).

/// Deadline of one model call, in milliseconds.
pub const MODEL_TIMEOUT_MS: u64 = 120_000;
/// Time to live of a run's writer lease, in milliseconds; renewed every
/// third of it while a model call runs, so it lapses this long after a
/// holder stopped.
pub const LEASE_MS: u64 = 120_000;
/// Time to live of a warm candidate's lease (seed 002,
/// `CONTEXT_COMPACTION_WARM_CANDIDATE_LEASE_SECONDS`: 900 s).
pub const WARM_LEASE_MS: u64 = 900_000;
/// A core instance is replaced after a call grows its memory past this.
pub const MEMORY_RESET_BYTES: u64 = 16 * 1024 * 1024;
/// The servers' largest request body, in bytes.
pub const BODY_LIMIT_BYTES: u64 = 1 << 20;
/// The deepest nesting of arrays and objects the servers read in a request
/// body (a message needs five or six; JSON parsers differ past a hundred).
pub const BODY_DEPTH: u64 = 64;
/// The conversations a Rust driver keeps state for (the verified chain,
/// the live events): the least recently used is let go when another comes
/// in, and read from the journal again at its next call.
pub const CONVERSATIONS_KEPT: u64 = 1_024;
/// The same bound for the JS driver: smaller, for browser tabs and edge
/// isolates (128 MB of memory on Cloudflare Workers).
pub const CONVERSATIONS_KEPT_JS: u64 = 256;
/// The servers' manual compactions per member per minute.
pub const CONDENSE_PER_MINUTE: u64 = 6;
/// How long an answer holds a conversation's session unless given back.
pub const ANSWER_LEASE_MS: u64 = 300_000;
/// How often a task's event stream looks for another writer's events.
pub const POLL_MS: u64 = 250;
/// The longest the servers hold a long poll (`wait` of `…/events` and
/// `…/timeline`), in milliseconds.
pub const LONG_POLL_MS: u64 = 25_000;
/// The most long polls one member holds waiting on one server at a time
/// (each costs a journal read per write to its conversation and per poll
/// interval); one more is refused with `rate_limited`.
pub const WAITS_PER_MEMBER: u64 = 16;
/// The most events one answer of the servers' `…/events` holds.
pub const FEED_PAGE_EVENTS: u64 = 1_000;
/// The largest timeline answer the servers keep for the pages that wake on
/// the same write, in bytes (a longer one is drawn anew).
pub const TIMELINE_KEPT_BYTES: u64 = 512 * 1024;
/// Timeline slots (conversation and page) the servers keep before those no
/// request is using are let go.
pub const TIMELINE_SLOTS: u64 = 256;
/// The most text of conversations' events the Rust driver keeps between
/// timeline drawings, all conversations together (a drawing after a write
/// then reads and encodes only what is new), in bytes.
pub const TIMELINE_TEXT_BYTES: u64 = 64 * 1024 * 1024;
/// The same bound for the JS driver, in UTF-16 units: smaller, since it
/// runs in browser tabs and edge isolates (128 MB of memory on Cloudflare
/// Workers), where a string of Latin text costs a byte a unit and of other
/// text two.
pub const TIMELINE_TEXT_CHARS: u64 = 16 * 1024 * 1024;
/// The items of each core call when a host draws a whole timeline: it
/// draws it in pages from the latest back, so no call takes a whole long
/// conversation.
pub const TIMELINE_PAGE_ITEMS: u64 = 5_000;
/// Output tokens the OpenAI-compatible adapters add to a summary's cap once
/// the endpoint asks for `max_completion_tokens` (OpenAI's reasoning models,
/// which count their reasoning within the cap: at the summary's own cap they
/// can spend it all on reasoning and answer nothing), unless a cap is set.
pub const REASONING_ROOM_TOKENS: u64 = 8_192;
/// Tokens of framing the estimate counts for each message beside its
/// content (`estimate_tokens`), and what a host's counter adds to each
/// counted message unless told its provider's (OpenAI's chat: 3).
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// Least exact tail, in characters, a character budget must keep (an
/// ordinary turn: admitted pinned turns always leave a context room for
/// one beside the least summary).
pub const MIN_TAIL_CHARS: u64 = 1_024;
/// Least exact tail, in tokens, a token budget must leave after the summary
/// reserve and the document budget.
pub const MIN_TAIL_TOKENS: u64 = 256;
/// Least size of a derived summary (characters; a quarter of it in tokens):
/// a budget that leaves less is refused, and a plan narrows a summary to
/// the room there is down to it.
pub const SUMMARY_MIN_CHARS: u64 = 200;

/// Every default by its TypeScript name, in the order `defaults.ts` lists them.
pub const ALL: [(&str, u64, &str); 24] = [
    ("MODEL_TIMEOUT_MS", MODEL_TIMEOUT_MS, "Deadline of one model call, in milliseconds."),
    ("LEASE_MS", LEASE_MS, "Time to live of a run's writer lease, in milliseconds (renewed every third of it while a model call runs)."),
    ("WARM_LEASE_MS", WARM_LEASE_MS, "Time to live of a warm candidate's lease, in milliseconds (seed 002: 900 s)."),
    ("MEMORY_RESET_BYTES", MEMORY_RESET_BYTES, "A core instance is replaced after a call grows its memory past this."),
    ("BODY_LIMIT_BYTES", BODY_LIMIT_BYTES, "The servers' largest request body, in bytes."),
    ("BODY_DEPTH", BODY_DEPTH, "The deepest nesting of arrays and objects the servers read in a request body (a message needs five or six; JSON parsers differ past a hundred)."),
    ("CONVERSATIONS_KEPT", CONVERSATIONS_KEPT, "The conversations a Rust driver keeps state for (the verified chain, the live events); the least recently used is let go when another comes in, and read from the journal again at its next call."),
    ("CONVERSATIONS_KEPT_JS", CONVERSATIONS_KEPT_JS, "The same bound for the JS driver: smaller, for browser tabs and edge isolates (128 MB on Cloudflare Workers)."),
    ("CONDENSE_PER_MINUTE", CONDENSE_PER_MINUTE, "The servers' manual compactions per member per minute."),
    ("ANSWER_LEASE_MS", ANSWER_LEASE_MS, "How long an answer holds a conversation's session unless given back, in milliseconds."),
    ("POLL_MS", POLL_MS, "How often a task's event stream looks for another writer's events, in milliseconds."),
    ("LONG_POLL_MS", LONG_POLL_MS, "The longest the servers hold a long poll (`wait` of `…/events` and `…/timeline`), in milliseconds."),
    ("WAITS_PER_MEMBER", WAITS_PER_MEMBER, "The most long polls one member holds waiting on one server at a time (each costs a journal read per write to its conversation and per poll interval); one more is refused with `rate_limited`."),
    ("FEED_PAGE_EVENTS", FEED_PAGE_EVENTS, "The most events one answer of the servers' `…/events` holds."),
    ("TIMELINE_KEPT_BYTES", TIMELINE_KEPT_BYTES, "The largest timeline answer the servers keep for the pages that wake on the same write (a longer one is drawn anew)."),
    ("TIMELINE_SLOTS", TIMELINE_SLOTS, "Timeline slots (conversation and page) the servers keep before those no request is using are let go."),
    ("TIMELINE_TEXT_BYTES", TIMELINE_TEXT_BYTES, "The most text of conversations' events the Rust driver keeps between timeline drawings, all conversations together (a drawing after a write reads and encodes only what is new), in bytes."),
    ("TIMELINE_TEXT_CHARS", TIMELINE_TEXT_CHARS, "The same bound for the JS driver, in UTF-16 units: smaller, since it runs in browser tabs and edge isolates (128 MB on Cloudflare Workers)."),
    ("TIMELINE_PAGE_ITEMS", TIMELINE_PAGE_ITEMS, "The items of each core call when a host draws a whole timeline: it draws it in pages from the latest back, so no call takes a whole long conversation."),
    ("REASONING_ROOM_TOKENS", REASONING_ROOM_TOKENS, "Output tokens the OpenAI-compatible adapters add to a summary's cap once the endpoint asks for `max_completion_tokens` (a reasoning model counts its reasoning within the cap), unless a cap is set."),
    ("SUMMARY_MIN_CHARS", SUMMARY_MIN_CHARS, "The least summary a compaction writes, in characters (a plan narrows a summary to the room there is): the hosts' append checks measure a member's or a tool's newest turn beside it."),
    ("MESSAGE_OVERHEAD_TOKENS", MESSAGE_OVERHEAD_TOKENS, "Tokens of framing each message costs beside its content: the estimate's, and what a host's token counter adds unless told its provider's (OpenAI's chat: 3)."),
    ("MIN_TAIL_CHARS", MIN_TAIL_CHARS, "An ordinary turn, in characters: admitted pinned turns always leave a context room for one beside the least summary."),
    ("MIN_TAIL_TOKENS", MIN_TAIL_TOKENS, "An ordinary turn, in tokens (the same room in token budgets)."),
];
