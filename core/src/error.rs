//! Typed errors with stable codes.
//!
//! Every failure of the core is an [`Error`]: a stable machine-readable
//! [`Code`], a human message, and where useful the offending ids. Codes are
//! part of the contract between runtimes and never change meaning.

use foldline_derive::{Decode, Encode};
use serde::Serialize;

/// A stable error code. Serialized in `snake_case`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Encode, Decode)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    /// The request is not valid JSON or does not match the request type.
    InvalidRequest,
    /// The declaration breaks one or more rules.
    InvalidDeclaration,
    /// Two events claim the same turn (or correction) with different content.
    ConflictingTurn,
    /// A turn belongs to another conversation, chat or sender than the route.
    WrongRoute,
    /// The newest coherent unit of turns is larger than the tail target.
    TailTurnTooLarge,
    /// The frozen prefix exceeds the declaration's prefix bounds.
    PrefixOverBounds,
    /// Compaction would not make the projection smaller.
    NotSmaller,
    /// There is nothing older than the tail to fold.
    NothingToFold,
    /// A manual request while an answer owns the session.
    SessionBusy,
    /// A manual request by someone who does not own the conversation.
    NotOwner,
    /// The model's summary is empty after whitespace.
    EmptySummary,
    /// The model's summary exceeds the summary limit.
    SummaryTooLong,
    /// The model's summary contains control characters other than newline and tab.
    SummaryNotText,
    /// The model stopped at its length limit: the summary is cut off.
    SummaryTruncated,
    /// The model output names another packet or run than the one settled.
    RunMismatch,
    /// A boundary names a predecessor that is not in the chain.
    MissingLink,
    /// Two boundaries (or frontiers) claim the same place in the chain.
    Fork,
    /// A boundary or declaration no longer matches the registered declaration.
    StaleDeclaration,
    /// A recomputed hash differs from the recorded one.
    DivergentHash,
    /// A boundary's evidence does not match the packet it claims to settle.
    FabricatedRun,
    /// A boundary does not advance coverage beyond its predecessor.
    NonAdvancing,
    /// A boundary or head belongs to another activation frontier.
    FrontierMismatch,
    /// A covered-history amendment exceeds its bound.
    AmendmentTooLarge,
    /// The call needs the content of turns given only as metadata (`ids`).
    NeedsContent,
    /// The selected context cannot fit the budget even without a tail.
    OverBudget,
    /// An arithmetic result does not fit (absurd sizes in the input).
    Overflow,
    /// One message larger than any compaction could take (`ids`): accepted,
    /// it would leave the conversation unable to compact, so admission
    /// refuses it.
    TurnTooLarge,
    /// Pinned turns (system, developer, documents, turns marked pinned)
    /// that together would leave no context room (`ids`: the turn that
    /// crosses): they are never folded, so admission refuses the turn that
    /// would leave the conversation unable to select or compact.
    PinnedTooLarge,
    /// The ABI version requested is not supported.
    UnsupportedVersion,
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A typed failure: stable code, human message, offending ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Encode, Decode, thiserror::Error)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[error("{code}: {message}")]
pub struct Error {
    /// The stable code.
    pub code: Code,
    /// A message for people; its wording may change, the code does not.
    pub message: String,
    /// Ids of the turns, boundaries or fields involved, when useful.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
}

impl Error {
    /// An error with a code and a message.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
            ids: Vec::new(),
        }
    }

    /// Attach the ids involved.
    pub fn with_ids<I, S>(mut self, ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.ids = ids.into_iter().map(Into::into).collect();
        self
    }
}

/// The core's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Checked addition that turns overflow into a typed error.
pub(crate) fn add(a: u64, b: u64) -> Result<u64> {
    a.checked_add(b)
        .ok_or_else(|| Error::new(Code::Overflow, "a size in the input is too large to add"))
}

/// Sum of an iterator of sizes, with overflow as a typed error.
pub(crate) fn sum<I: IntoIterator<Item = u64>>(it: I) -> Result<u64> {
    it.into_iter().try_fold(0u64, add)
}
