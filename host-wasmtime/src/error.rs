//! Host errors: every failure is typed, with a stable code.

/// A host failure.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The core answered with a typed error.
    #[error("{0}")]
    Core(#[from] foldline_core::Error),
    /// The module speaks another ABI major version: code
    /// `unsupported_version`, as the JS package reports it.
    #[error("unsupported_version: the module speaks ABI {found}, this host speaks {expected}")]
    AbiMismatch {
        /// Found major version.
        found: u32,
        /// Expected major version.
        expected: u32,
    },
    /// The call ran out of fuel (its instruction budget).
    #[error("fuel_exhausted: the call exceeded its budget of {0} fuel units")]
    FuelExhausted(u64),
    /// The call ran past its time limit.
    #[error("time_limit: the call exceeded its time limit of {} ms", .0.as_millis())]
    TimeLimit(std::time::Duration),
    /// The call needed more memory than its limit.
    #[error("memory_limit: the call exceeded its memory limit of {0} bytes")]
    MemoryLimit(usize),
    /// The module trapped.
    #[error("trap: {0}")]
    Trap(String),
    /// The module answered something that is not the JSON envelope.
    #[error("malformed_output: {0}")]
    MalformedOutput(String),
    /// The module could not be loaded.
    #[error("load_failed: {0}")]
    Load(String),
    /// The journal's store failed (SQLite, PostgreSQL, its pool): the
    /// store's own words, for the log. (Not the drivers' error types, so the
    /// public API does not depend on rusqlite or postgres.)
    #[error("journal: {0}")]
    Storage(String),
    /// A file could not be read or written.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// Input (a file to import, a request) is not valid.
    #[error("invalid_input: {0}")]
    Input(String),
    /// The model call failed (the audit reason; members see a generic notice).
    #[error("model: {0}")]
    Model(String),
    /// A compare-and-append lost the race: the journal's head moved.
    #[error(
        "conflict: expected the journal at position {expected}, found {found}; nothing was written"
    )]
    Conflict {
        /// The position the batch was planned from.
        expected: u64,
        /// The journal's position.
        found: u64,
    },
    /// The storage could not take the write in time (a row the write needs
    /// is held by a stalled writer: the database's lock timeout passed). The
    /// transaction was rolled back: nothing was written; try again.
    #[error("busy: {0}; nothing was written")]
    Busy(String),
    /// The writer lease this batch was fenced by was granted to a newer
    /// writer since: a stale holder's append is refused.
    #[error("lease_lost: a newer writer lease was granted (fence {fence} is stale); nothing was written")]
    LeaseLost {
        /// The stale fencing token.
        fence: u64,
    },
    /// An append under an idempotency key already written with other
    /// messages (`Driver::append_keyed`).
    #[error("idempotency_key_reused: this idempotency key was used for other messages; nothing was written")]
    IdempotencyKeyReused,
    /// A correction on behalf of a sender of a turn another sent
    /// (`Driver::correct` with `by`).
    #[error("not_author: {0}; nothing was written")]
    NotAuthor(String),
}

impl HostError {
    /// What to give a call that ran out of `bytes` of memory, in MiB: four
    /// times as much, at least 2,048 (what a call takes whole of a
    /// conversation — the newest turns, the oldest a fold may take — is
    /// bounded in count, not in length).
    pub fn more_memory_mib(bytes: usize) -> usize {
        (bytes >> 20).saturating_mul(4).max(2048)
    }

    /// The stable code.
    pub fn code(&self) -> &str {
        match self {
            HostError::Core(e) => e.code.as_str(),
            HostError::AbiMismatch { .. } => "unsupported_version",
            HostError::FuelExhausted(_) => "fuel_exhausted",
            HostError::TimeLimit(_) => "time_limit",
            HostError::MemoryLimit(_) => "memory_limit",
            HostError::Trap(_) => "trap",
            HostError::MalformedOutput(_) => "malformed_output",
            HostError::Load(_) => "load_failed",
            HostError::Storage(_) => "journal",
            HostError::Io(_) => "io",
            HostError::Input(_) => "invalid_input",
            HostError::Model(_) => "model",
            HostError::Conflict { .. } => "conflict",
            HostError::Busy(_) => "busy",
            HostError::LeaseLost { .. } => "lease_lost",
            HostError::IdempotencyKeyReused => "idempotency_key_reused",
            HostError::NotAuthor(_) => "not_author",
        }
    }
}

/// The host's result type.
pub type Result<T> = std::result::Result<T, HostError>;

#[cfg(feature = "sqlite")]
impl From<rusqlite::Error> for HostError {
    fn from(e: rusqlite::Error) -> HostError {
        HostError::Storage(format!("sqlite: {e}"))
    }
}
