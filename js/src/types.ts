// The JSON contract of foldline's core, as TypeScript types. Written beside
// the Rust types (serde, camelCase, unknown fields denied) and held to them:
// the core's test `schema` writes every contract type's fields (with their
// JSON kinds), variants and names to test/types/shapes.json (failing when
// the Rust types change and the file does not), and test/types/contract.mjs
// turns that file into compile-time assertions over this one (`npm run
// test:types`). The conformance vectors check the values.

/** A stable error code. */
export type Code =
  | "invalid_request" | "invalid_declaration" | "conflicting_turn" | "wrong_route"
  | "tail_turn_too_large" | "prefix_over_bounds" | "not_smaller" | "nothing_to_fold"
  | "session_busy" | "not_owner" | "empty_summary" | "summary_too_long" | "summary_not_text"
  | "summary_truncated" | "run_mismatch" | "missing_link" | "fork" | "stale_declaration"
  | "divergent_hash" | "fabricated_run" | "non_advancing" | "frontier_mismatch"
  | "amendment_too_large" | "needs_content" | "over_budget" | "overflow" | "unsupported_version"
  /** One message larger than any compaction could take: refused at admission (a journal given the declaration, the servers). */
  | "turn_too_large"
  /** Pinned turns (system, developer, documents, marked pinned; never folded) that together would leave no context room: refused at admission. */
  | "pinned_too_large"
  /** The journal's head moved: a compare-and-append at an expected position lost the race. */
  | "conflict"
  /** The writer lease is held by another holder, or a fenced append came from a stale holder. */
  | "lease_lost"
  /** An `Idempotency-Key` already used for other messages. */
  | "idempotency_key_reused"
  /** A correction on behalf of a sender (`correct` with `sender`) of a turn another sent. */
  | "not_author"
  /** A call before `init()` finished loading the core. */
  | "not_initialized"
  /** `IndexedDbJournal.open` while another tab holds the database open at an older version. */
  | "journal_blocked";

/** A typed failure. */
export interface ErrorValue { code: Code; message: string; ids?: string[] }

export type Role = "system" | "developer" | "document" | "user" | "assistant" | "tool";

export type Part =
  | { type: "text"; text: string }
  /**
   * A tool call. `providerOptions`: an AI SDK call's own (where Gemini 3 keeps its
   * `thoughtSignature`), sent back in the AI SDK's form while its tool cycle is open.
   */
  | { type: "toolCall"; callId: string; name: string; arguments: string; custom?: boolean; providerOptions?: unknown }
  | { type: "toolResult"; callId: string; name?: string; content: string; isError?: boolean }
  | { type: "approvalRequest"; approvalId: string; callId: string }
  | { type: "approvalResponse"; approvalId: string; approved: boolean; reason?: string }
  /**
   * The model's reasoning as its provider returned it (an Anthropic `thinking` or
   * `redacted_thinking` block, an AI SDK `reasoning` part, an OpenAI Responses
   * `reasoning` item with its encrypted content). Sent back only in
   * `format`, only while its tool cycle is open; never counted or summarized.
   */
  | { type: "reasoning"; format: Format; data: unknown };

export interface Route { conversation: string; chat?: string; sender?: string }

export type Budget =
  | { kind: "chars"; trigger?: number; retain?: number }
  | {
      kind: "tokens"; window?: number; reservedOutput?: number; safetyMargin?: number;
      retrievalShare?: number; soft?: number; eager?: number; target?: number; mode?: "eager" | "lazy";
    };

export interface Declaration {
  role?: "target" | "compactor";
  targetId: string;
  compactorId: string;
  enabled?: boolean;
  modelProfile?: { provider: string; model: string };
  sources?: string[];
  privacy?: { admitSensitive?: boolean };
  historyAgents?: string[];
  documents?: { ids?: string[]; budgetChars?: number };
  budget?: Budget;
  prefixBounds?: { maxTurns?: number; maxChars?: number };
  /** Summary limits; absent limits derive from the budget (a quarter of the token target, at most 2,000 tokens; half the room between retain and trigger, at most 8,000 characters). */
  summary?: { maxChars?: number; maxTokens?: number; previewChars?: number };
  amendmentMaxChars?: number;
  instructions?: { mode: "append" | "replace"; text: string };
  maxConsecutiveFailures?: number;
  /** New turns after the last failure before an open circuit breaker tries once more (default 10). */
  breakerRetryAfter?: number;
}

export interface Message {
  conversation: string; chat?: string; sender?: string; source?: string;
  sourceSeq: number; index?: number; turnId: string; role: Role; authorAgent?: string;
  parts: Part[]; tokens?: number; pinned?: boolean; sensitive?: boolean;
  /** The content hash, computed once when the message entered the journal. */
  contentHash?: string;
}

export type TriggerKind = "automatic" | "manual";

export interface Frontier {
  id: string; rulesetVersion: string; declarationFingerprint: string; targetId: string;
  compactorId: string; route: Route; policy: Budget; historyAgents: string[];
  activatingTurnId: string; activatingSeq: number; startSeq: number; established: boolean;
  /** After an upgrade: the retired epoch's last summary this epoch starts from (the frontier starts right after it). */
  carried?: PreviousRef;
}

export interface Sizes { chars: number; tokens: number }
export interface Stats {
  metric: "chars" | "tokens"; before: Sizes; pinned: Sizes; retainedTail: Sizes;
  retainedTailTurns: number; summary: Sizes; after: Sizes;
  /** The exact tail is one long newest unit over the tail target, kept whole (everything before it folded). */
  oversizedTail?: boolean;
  /** What this compaction left for the next one: a backlog larger than one compaction may take folds oldest first, in steps. */
  backlog?: Backlog;
}
/** Eligible turns between a compaction's frozen prefix and its exact tail. */
export interface Backlog { turns: number; size: Sizes }
export interface InputTurn { turnId: string; sourceSeq: number; role: Role; contentHash: string }
export interface InputEvidence {
  turnCount: number; chars: number; tokens: number; sourceCount: number; turnIdsHash: string;
  renderedHash: string; promptHash: string; renderedChars: number; turns: InputTurn[];
}
export interface PreviousRef { boundaryId: string; boundaryHash: string; coveredThroughSeq: number }
export interface AmendmentEntry {
  turnId: string; sourceSeq: number; kind: "corrected" | "late"; role: Role;
  oldHash: string | null; newHash: string; parts: Part[];
}
export interface Amendment { entries: AmendmentEntry[]; chars: number; hash: string }
/** Model usage evidence: the prompt tokens, and the summary's output tokens (a reasoning model's reasoning left out: the adapters subtract it, since `settle` holds them to the summary's cap). */
export interface Usage { inputTokens: number; outputTokens: number }

export interface Packet {
  id: string; rulesetVersion: string; declarationFingerprint: string; targetId: string;
  compactorId: string; historyAgents: string[]; route: Route; trigger: TriggerKind;
  previous: PreviousRef | null; frontier: { id: string; startSeq: number };
  amendment: Amendment | null; coveredThroughTurnId: string; coveredThroughSeq: number;
  /** A member's `/compact`: the journal head (newest source sequence) the task froze its snapshot at. */
  headSeq?: number;
  policy: Budget; bounds: { maxChars: number; maxTokens: number; previewChars: number };
  input: InputEvidence; stats: Stats;
  messages: { role: "system" | "user"; content: string }[];
}

export interface Boundary {
  id: string; hash: string; sensitive: true; outputContract: string; rulesetVersion: string;
  declarationFingerprint: string; targetId: string; compactorId: string; historyAgents: string[];
  route: Route; trigger: TriggerKind; previous: PreviousRef | null;
  frontier: { id: string; startSeq: number }; coveredThroughTurnId: string; coveredThroughSeq: number;
  /** A manual checkpoint's journal head: the covered range ends at or before it; the turns between stayed as the exact tail. */
  headSeq?: number;
  policy: Budget; stats: Stats; input: InputEvidence; amendmentHash: string | null;
  absorbed: { turnId: string; sourceSeq: number; role: Role; contentHash: string }[];
  packetId: string;
  run: { runId: string; modelId: string; usage: Usage; finishReason: string };
  summary: string; preview: string;
}

export type Event =
  | ({ type: "message" } & Message)
  | ({ type: "lateDelivery" } & Message)
  | { type: "correction"; turnId: string; correctionSeq: number; parts: Part[]; tokens?: number }
  | ({ type: "boundary" } & Boundary)
  | ({ type: "frontier" } & Frontier)
  | {
      type: "compactionTask"; taskId: string; state: "requested" | "completed" | "failed";
      actor: string; headSeq: number; boundaryId?: string;
    }
  | {
      type: "compactionFailed"; runId: string; packetId: string; previousBoundaryId?: string;
      trigger?: TriggerKind; headSeq: number;
      /** The failure's kind (absent only in records written before it existed). */
      kind?: FailureKind;
      /** Audit reason (never shown to members). */
      reason: string;
    }
  | ({ type: "turnMeta" } & TurnMeta);

/**
 * A turn known by its metadata only: `select` with `render: false` answers
 * which turns to keep (the host slices its own array); a plan that must
 * freeze it answers `needs_content` with the turn ids to send in full.
 */
export interface TurnMeta {
  conversation: string; chat?: string; sender?: string; source?: string;
  sourceSeq: number; index?: number; turnId: string; role: Role; authorAgent?: string;
  chars: number; tokens?: number; contentHash: string;
  toolCalls?: string[]; toolResults?: string[]; pinned?: boolean; sensitive?: boolean;
}

export interface ChainHead {
  boundaryId: string; boundaryHash: string; coveredThroughSeq: number;
  coveredThroughTurnId: string; frontierId: string; summary: string; length: number;
}

export type Trigger = { kind: "automatic" } | { kind: "manual"; actor: string; sessionBusy?: boolean };

export interface PlanRequest {
  declaration: Declaration; route: Route; owner?: string | null; frontier?: Frontier | null;
  head?: ChainHead | null; amendment?: Amendment | null; events: Event[]; trigger?: Trigger;
  warm?: Packet | null;
  /** A warm candidate for this head is already held (or none is wanted): between the thresholds, `warm` without a new packet. */
  warmHeld?: boolean;
  /** `resolve`'s `carried`: the retired summary an upgrade starts from. */
  carried?: ChainHead | null;
  /**
   * The deployment's member-compression availability: while its surface
   * exists, room is kept beside the pinned turns for the largest fragments
   * any member's context carries, so none leaves out a turn no summary covers.
   */
  compression?: Availability;
}

export interface SkipRecord {
  metric: "chars" | "tokens"; total: number; trigger: number; warmAt: number | null;
  pinned: number; envelopes: number; eligibleTurns: number; warmRefused?: Code;
  /** The newest source sequence this check looked at: the compactor's progress watermark. */
  checkedThroughSeq: number;
}

export type PlanOutcome =
  | { outcome: "activate"; frontier: Frontier }
  | { outcome: "skip"; record: SkipRecord }
  | { outcome: "compact"; packet: Packet; warm?: { packetId: string; valid: boolean; reason?: WarmRefusal } }
  /** `packet`: null when the request said `warmHeld` (the held candidate stands). */
  | { outcome: "warm"; packet: Packet | null }
  | { outcome: "paused"; reason: "disabled" | "circuitOpen"; consecutiveFailures: number; retryIn?: number }
  | { outcome: "refuse"; error: ErrorValue; errors?: ErrorValue[] };

export interface ModelOutput {
  packetId: string; runId: string; modelId: string; usage?: Usage; finishReason?: string; summary: string;
}

export interface ResolveRequest {
  declaration: Declaration; compactor?: Declaration | null; route: Route; events: Event[]; packets?: Packet[];
  /** Boundary ids this host verified before: not re-settled (their packets are not needed); links still checked. */
  trusted?: string[];
  /**
   * A chain prefix this host verified before (an earlier resolution's head):
   * the chain is resolved from it, so `events` hold only the boundaries after
   * it (plus frontiers, corrections and late deliveries).
   */
  verified?: Verified | null;
}

/** The head of a verified chain prefix, and what it holds for the covered turns later events touch. */
export interface Verified {
  /** The boundary at the verified head, in full. */
  boundary: Boundary;
  /** Its position in the chain (the earlier resolution's `head.length`). */
  length: number;
  /** What the prefix holds for each covered turn a correction or late delivery in `events` touches. */
  turns?: InputTurn[];
}

export interface StreamReport { contentReceived: boolean; ended: "complete" | "dropped" | "error"; replaysUsed?: number }
export type FailureKind = "providerRefusal" | "timeout" | "budgetStop" | "unusableSummary" | "streamDropped" | "other";
export interface FailureReport { failure: FailureKind; notice: string; auditReason: string }

/** A model failure as the host saw it; `detail` goes to the audit only. */
export interface FailureInput { failure: FailureKind; detail?: string }

/**
 * One step of the compaction loop (`step`): the host feeds what it read
 * (`view`, at journal position `seq`) and the result of the effect the last
 * step asked for (`last`, with that step's `state` passed back unchanged).
 */
export interface StepRequest {
  trigger?: Trigger;
  /** The manual task's id (a manual run without one writes no task events). */
  task?: string | null;
  /** Only end interrupted tasks, then finish with `ended`. */
  endInterruptedOnly?: boolean;
  /**
   * Only prepare the held warm candidate (its packet in `view.warm`): the
   * model call, checked by settle; finishes `prepared` or `failed`, writing
   * nothing. Sent with every step of the run, as `trigger` and `task` are.
   */
  prepareWarm?: boolean;
  /** Whether warm candidates are prepared (default on). */
  warmCandidates?: boolean;
  /** Whether the host already holds a warm candidate: one per head. */
  warmHeld?: boolean;
  /** The held candidate's verified summary (its packet goes in `view.warm`). */
  warmSummary?: ModelOutput | null;
  /** Deadline of one model call (default 120,000 ms). */
  modelTimeoutMs?: number;
  view?: PlanRequest | null;
  seq?: number;
  state?: LoopState | null;
  last?: EffectResult | null;
}

export type Stage = "start" | "appending" | "storingCandidate" | "storingPacket" | "streaming" | "replaying";
export type Then = "read" | "summarize" | "compacted" | "folded" | "failed";

/** A run between steps: the host passes it back unchanged. */
export interface LoopState { stage?: Stage; then?: Then; batch?: Event[]; run?: Run | null; failure?: FailureKind | null; folds?: Folds }
/** The parts of a backlog a run has folded so far (at most MAX_FOLDS_PER_RUN, 4). */
export interface Folds { count: number; last: Boundary }

/** A compaction in flight: its packet, derived run id, and where its batches go. */
export interface Run { packet: Packet; runId: string; headSeq: number; previousBoundaryId?: string | null; seq: number; prepared?: ModelOutput | null }

/** What the host did about the last effect. */
export type EffectResult =
  | { kind: "appended"; seq: number }
  | { kind: "conflict"; seq: number; chainMoved: boolean }
  | { kind: "stored" }
  | { kind: "model"; contentReceived: boolean; output?: ModelOutput | null; error?: FailureInput | null };

/** What the host does next. */
export type Effect =
  | { effect: "read" }
  | { effect: "append"; expectedSeq: number; acceptsTask: boolean }
  | { effect: "putPacket"; candidate: boolean }
  | { effect: "callModel"; buffered: boolean; deadlineMs: number }
  | { effect: "done"; finished: Finished };

/** How a run finished. */
export type Finished =
  | { status: "skipped"; outcome: PlanOutcome }
  | { status: "paused"; outcome: PlanOutcome }
  /** `packet`: the new candidate (to prepare when `prepare`), null when one was already held. */
  | { status: "warm"; packet: Packet | null; prepare: boolean }
  | { status: "compacted"; boundary: Boundary }
  | { status: "refused"; error: ErrorValue }
  /** A warm candidate's summary, checked by settle (`prepareWarm`); nothing was written. */
  | { status: "prepared"; summary: ModelOutput }
  /** Its audit record is durable (a warm preparation's failure writes none). */
  | { status: "failed"; report: FailureReport }
  | { status: "ended" };

/** A step's answer. */
export interface Step { state: LoopState; effect: Effect }

export type ValidateRequest =
  | { kind: "settle"; packet: Packet; output: ModelOutput; expectedRunId?: string | null }
  | ({ kind: "resolve" } & ResolveRequest)
  | { kind: "declarations"; target: Declaration; compactor: Declaration }
  | ({ kind: "stream" } & StreamReport)
  | { kind: "failure"; failure: FailureKind; detail?: string }
  /** `pinned`: the conversation's pinned turns already written, sent with a batch holding a pinned turn (the batch's are refused `pinned_too_large` when all together would leave no context room). */
  | { kind: "events"; route: Route; events: Event[]; declaration?: Declaration; pinned?: Event[] };

export interface Resolution {
  frontier: Frontier | null; head: ChainHead | null; amendment: Amendment | null;
  /** Ids of the current chain's boundaries, oldest first. */
  accepted: string[];
  retiredBoundaries: string[]; retiredFrontiers: string[];
  /** While the epoch has no boundary of its own: the retired summary an upgrade carries over (pass it on as `carried`). */
  carried?: ChainHead;
  /** The first source sequence plan and select still need besides pinned turns (after the head, from the frontier; 0: everything). */
  keepFromSeq: number;
}

export type StreamDecision =
  | { action: "settle" }
  | { action: "replayBuffered" }
  | { action: "fail"; failure: FailureReport };

export type ValidateResponse =
  | { kind: "settled"; boundary: Boundary }
  | ({ kind: "resolved" } & Resolution)
  | { kind: "declarations"; agree: boolean; disagreements: string[] }
  | { kind: "stream"; decision: StreamDecision }
  | ({ kind: "failure" } & FailureReport)
  /** `contentHashes`: each event's content hash, in order (`""` for events that are not messages or late deliveries). */
  | { kind: "events"; count: number; contentHashes: string[] };

/**
 * An output format; `"ai-sdk"` (the spelling of the README and the program)
 * is accepted for `"aiSdk"`, `"openai-responses"` for `"openaiResponses"`
 * (the OpenAI Responses API's `input` items).
 */
export type Format = "foldline" | "openai" | "openaiResponses" | "openai-responses" | "anthropic" | "aiSdk" | "ai-sdk";

export interface SelectRequest {
  declaration: Declaration; route: Route; frontier?: Frontier | null; head?: ChainHead | null;
  amendment?: Amendment | null; events: Event[]; prompt?: Part[] | null;
  /** Who wrote `prompt`, in a shared room: sent with the member's label once the user turns in view and the prompt come from more than one member. */
  promptSender?: string | null;
  format?: Format;
  limit?: number | null; render?: boolean;
  /** The member's compression state, captured when the run started (see `MemberInput`). */
  member?: MemberInput | null;
  /** `resolve`'s `carried`: until the new epoch's first boundary, the context's summary. */
  carried?: ChainHead | null;
}

export interface Manifest {
  metric: "chars" | "tokens"; limit: number;
  sizes: { pinned: number; summary: number; amendment: number; tail: number; prompt: number; member?: number; reasoning?: number; total: number };
  boundaryId: string | null; boundaryHash: string | null; amendmentHash: string | null;
  pinned: string[]; included: string[];
  omitted: { turnId: string; reason: "budget" | "notAdmitted" }[];
  /** Admitted turns after the summary's coverage left out for lack of room (absent when none): no summary covers them, so alert on it. */
  uncoveredOmitted?: number;
  /** How many assistant turns of the open tool cycle had their reasoning left out for lack of room (absent when none): only the last step's went, all a provider requires. */
  reasoningLeftOut?: number;
  messageCount: number; renderedHash: string;
  /** What member compression did (with a member state): the state in force and one measurement per pass. */
  member?: MemberManifest | null;
  /** What lies before the activation frontier, and why it is not in the context. */
  beforeFrontier?: { throughSeq: number; reason: "carried" | "established"; boundaryId?: string } | null;
}

export interface ContextMessage {
  kind: "pinned" | "summary" | "amendment" | "turn" | "prompt" | "member"; role: Role; turnId?: string; parts: Part[];
}

/** `answer`: the server-rendered reply when the member's newest message asks about the compression settings; deliver it instead of calling the model. */
export interface Selection<M = unknown> { messages?: M; manifest: Manifest; answer?: string | null }

/** OpenAI chat messages as `context`/`select` render them (assignable to the `openai` package's `ChatCompletionMessageParam`). */
export type OpenAiMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string }
  | {
      role: "assistant"; content: string | null;
      tool_calls?: Array<{ id: string; type: "function"; function: { name: string; arguments: string } } | { id: string; type: "custom"; custom: { name: string; input: string } }>;
    }
  | { role: "tool"; tool_call_id: string; content: string };

/**
 * OpenAI Responses API input items as `context`/`select` render them
 * (assignable to the `openai` package's `ResponseInputItem`): a message per
 * turn, an item per tool call and per result, an error result's text
 * beginning `[error] `.
 */
export type OpenAiResponsesItem =
  | { role: "system" | "user" | "assistant"; content: string }
  | { type: "function_call"; call_id: string; name: string; arguments: string }
  | { type: "custom_tool_call"; call_id: string; name: string; input: string }
  | { type: "function_call_output"; call_id: string; output: string }
  | { type: "custom_tool_call_output"; call_id: string; output: string };

/**
 * Anthropic messages as rendered: the system text apart (absent when the
 * context has none: the API refuses an empty system prompt), then the turns.
 */
export interface AnthropicRendered {
  system?: string;
  messages: Array<{
    role: "user" | "assistant";
    content: string | Array<
      | { type: "text"; text: string }
      | { type: "tool_use"; id: string; name: string; input: unknown }
      | { type: "tool_result"; tool_use_id: string; content: string; is_error?: boolean }
    >;
  }>;
}

/** AI SDK model messages as rendered (assignable to the `ai` package's `ModelMessage`). */
export type AiSdkRendered =
  | { role: "system"; content: string }
  | { role: "user"; content: string | Array<{ type: "text"; text: string }> }
  | {
      role: "assistant";
      content: string | Array<
        | { type: "text"; text: string }
        | { type: "tool-call"; toolCallId: string; toolName: string; input: unknown }
        | { type: "tool-approval-request"; approvalId: string; toolCallId: string }
      >;
    }
  | {
      role: "tool";
      content: Array<
        | { type: "tool-result"; toolCallId: string; toolName: string; output: { type: "text" | "error-text"; value: string } }
        | { type: "tool-approval-response"; approvalId: string; approved: boolean; reason?: string }
      >;
    };

/** What `messages` holds in each format. */
export interface MessagesOf {
  foldline: ContextMessage[];
  openai: OpenAiMessage[];
  openaiResponses: OpenAiResponsesItem[];
  "openai-responses": OpenAiResponsesItem[];
  anthropic: AnthropicRendered;
  aiSdk: AiSdkRendered[];
  "ai-sdk": AiSdkRendered[];
}

export type TimelineItem =
  | {
      type: "message"; turnId: string; sourceSeq: number; role: Role; text: string;
      /** The member who sent it (in a room, who of its members). */
      sender?: string;
      /** The turn's parts as data (text, tool calls and results). */
      parts: Part[]; late?: boolean; corrected?: boolean; metadataOnly?: boolean;
    }
  | {
      type: "divider"; kind: TriggerKind; state: "pending" | "completed" | "failed"; fromSeq?: number;
      /** Made under a retired policy (an upgrade): what the chat folded, no longer the chain compaction builds on. */
      retired?: boolean;
      throughSeq: number; count: number; boundaryId?: string; taskId?: string; notice?: string;
    };

export interface Timeline {
  items: TimelineItem[];
  /** A page left earlier items out: the `before` that asks for them. */
  earlier?: number;
}

/**
 * One page of the timeline: the latest `limit` items at positions below
 * `before` (a message's `sourceSeq`, a divider's `throughSeq`); the items of
 * one position are never split, so a page may hold a few more than `limit`.
 */
export interface TimelinePage { limit?: number; before?: number }

export type MemberStatus = "applied" | "bypassed" | "failed";
export interface Measurement {
  eligibleBytes: number; deliveredBytes: number; status: MemberStatus; reason?: string; rules?: string[];
}
export interface TrimResult { text: string; measurement: Measurement }
export interface ToolResultRequest { tool: string; private?: boolean; result: unknown }
export interface ToolResultResponse { result: unknown; measurement: Measurement }
/** Deployment availability (`MEMBER_COMPRESSION_ENABLED` and the three `MEMBER_*_COMPRESSION_ENABLED` flags). */
export interface Availability { surface?: boolean; toolResult?: boolean; plainSpeak?: boolean; promptTrim?: boolean }
/** A member's own choices; everything off by default. Availability never opts anyone in. */
export interface Preferences { master?: boolean; toolResult?: boolean; plainSpeak?: boolean; promptTrim?: boolean }
/** The member's state as a host captured it when the run started. */
export interface MemberInput { availability?: Availability; preferences?: Preferences }
export interface SettingsRequest {
  availability?: Availability;
  preferences?: Preferences;
  message?: string | null;
}
export interface ToolState { enabled: boolean; offReason?: "notAvailable" | "masterOff" | "notOptedIn" }
export interface EffectiveState { master: boolean; toolResult: ToolState; plainSpeak: ToolState; promptTrim: ToolState; safetyCompaction: boolean }
/** One pass's measurement, named by ids only (content-dark). */
export interface Pass { tool: "promptTrim" | "toolResult"; turnId?: string | null; callId?: string | null; measurement: Measurement }
export interface MemberManifest { state: EffectiveState; passes: Pass[] }
export interface SettingsResponse {
  state: EffectiveState;
  projection: string; plainSpeakPrompt: string | null; selfInspection: string | null;
}

/** Why a warm candidate can no longer be used. */
export type WarmRefusal =
  | "divergent_hash" | "stale_declaration" | "stale_previous" | "stale_amendment" | "not_prefix" | "diverged" | "splits_unit";
