//! A driver configured in one expression and checked when it is built:
//! [`Driver::builder`] takes what a driver cannot do without (the core, a
//! journal, a model), everything else has the defaults of
//! [`Driver::new`], and [`DriverBuilder::build`] refuses a declaration that
//! breaks a rule (`invalid_declaration`) before any message arrives.

use foldline_core::declaration::{Budget, Declaration};
use foldline_core::member::settings::Availability;
use foldline_core::turn::Route;

use crate::driver::Driver;
use crate::error::Result;
use crate::journal::Journal;
use crate::model::Model;
use crate::runtime::Foldline;

/// Builds a [`Driver`]; see [`Driver::builder`].
pub struct DriverBuilder<J: Journal, M: Model> {
    driver: Driver<J, M>,
}

impl<J: Journal, M: Model> Driver<J, M> {
    /// A driver of the `assistant` target on the seed's token defaults
    /// (`Budget::default_tokens()`: an 8,192-token window), to be adjusted
    /// with the builder's methods and checked by [`DriverBuilder::build`]:
    ///
    /// ```no_run
    /// # use foldline_wasmtime::{driver::Driver, journal::SqliteJournal, model::Extractive, runtime::Foldline};
    /// let driver = Driver::builder(Foldline::embedded()?, SqliteJournal::open("journal.db")?, Extractive)
    ///     .target("support-agent", "support-agent-compactor")
    ///     .owner("alice")
    ///     .build()?;
    /// # Ok::<(), foldline_wasmtime::HostError>(())
    /// ```
    pub fn builder(foldline: Foldline, journal: J, model: M) -> DriverBuilder<J, M> {
        let mut declaration = Declaration::new("assistant", "assistant-compactor");
        declaration.budget = Budget::default_tokens();
        DriverBuilder {
            driver: Driver::new(foldline, journal, model, declaration),
        }
    }
}

impl<J: Journal, M: Model> DriverBuilder<J, M> {
    /// The target and compactor ids, keeping the rest of the declaration.
    #[must_use]
    pub fn target(mut self, target_id: &str, compactor_id: &str) -> Self {
        self.driver.declaration.target_id = target_id.to_owned();
        self.driver.declaration.compactor_id = compactor_id.to_owned();
        self.driver.compactor = Some(self.driver.declaration.reciprocal());
        self
    }

    /// The whole target declaration (its compactor declaration becomes its
    /// reciprocal, unless [`DriverBuilder::compactor`] says otherwise).
    #[must_use]
    pub fn declaration(mut self, declaration: Declaration) -> Self {
        self.driver.compactor = Some(declaration.reciprocal());
        self.driver.declaration = declaration;
        self
    }

    /// The budget (`Budget::default_tokens()` by default).
    #[must_use]
    pub fn budget(mut self, budget: Budget) -> Self {
        self.driver.declaration.budget = budget;
        self.driver.compactor = Some(self.driver.declaration.reciprocal());
        self
    }

    /// A compactor declaration other than the target's reciprocal.
    #[must_use]
    pub fn compactor(mut self, compactor: Declaration) -> Self {
        self.driver.compactor = Some(compactor);
        self
    }

    /// The member who owns the conversations, for manual requests
    /// (`/compact`): without one, `compact_now` answers `not_owner`.
    #[must_use]
    pub fn owner(mut self, owner: &str) -> Self {
        self.driver.owner = Some(owner.to_owned());
        self
    }

    /// The writer-lease holder id (default: unique per driver,
    /// `host-<pid>-<random>`).
    #[must_use]
    pub fn holder(mut self, holder: &str) -> Self {
        self.driver.holder = holder.to_owned();
        self
    }

    /// The writer lease's time to live (default 120,000 ms).
    #[must_use]
    pub fn lease_ms(mut self, ms: u64) -> Self {
        self.driver.lease_ms = ms;
        self
    }

    /// How long a model call keeps the writer lease renewed (default
    /// 120,000 ms; see [`Driver::model_timeout_ms`]).
    #[must_use]
    pub fn model_timeout_ms(mut self, ms: u64) -> Self {
        self.driver.model_timeout_ms = ms;
        self
    }

    /// Warm candidates between the soft and eager thresholds (default on),
    /// and the lease of their preparation (default 900,000 ms).
    #[must_use]
    pub fn warm_candidates(mut self, on: bool, lease_ms: u64) -> Self {
        self.driver.warm_candidates = on;
        self.driver.warm_lease_ms = lease_ms;
        self
    }

    /// Hold each conversation's live events in the core's instance between
    /// calls (default on).
    #[must_use]
    pub fn hold_events(mut self, on: bool) -> Self {
        self.driver.hold_events = on;
        self
    }

    /// The most text of conversations' events kept between timeline
    /// drawings, so a drawing after a write reads and encodes only what
    /// is new (default 64 MiB, the least recently drawn let go first; a
    /// conversation larger than it keeps where each event is and its
    /// latest messages' text, half of it, and reads the others again when
    /// a page reaches them; 0 keeps none: every drawing reads its
    /// conversation whole).
    #[must_use]
    pub fn timeline_text_bytes(mut self, bytes: usize) -> Self {
        self.driver.keep_timeline_text(bytes);
        self
    }

    /// The items of each core call when a whole timeline is drawn
    /// (default 5,000: [`TIMELINE_PAGE_ITEMS`](crate::driver::TIMELINE_PAGE_ITEMS));
    /// the pages, drawn from the latest back, make the whole timeline.
    #[must_use]
    pub fn timeline_page_items(mut self, items: u64) -> Self {
        self.driver.draw_timeline_pages_of(items);
        self
    }

    /// The most conversations the driver keeps state for — the verified
    /// chain, the live events, a prepared warm candidate (default 1,024:
    /// `CONVERSATIONS_KEPT`): past it the least recently used is let go and
    /// read from the journal again at its next call, so memory stays
    /// bounded however many conversations a server serves.
    #[must_use]
    pub fn conversations_kept(mut self, conversations: usize) -> Self {
        self.driver.keep_conversations(conversations);
        self
    }

    /// The route of a conversation id (default: the id as the conversation,
    /// no chat, no sender).
    #[must_use]
    pub fn route_of(mut self, route_of: fn(&str) -> Route) -> Self {
        self.driver.route_of = route_of;
        self
    }

    /// The deployment's member-compression availability (default: none), as
    /// its contexts are asked with it (`ContextOptions::member`): plans keep
    /// room for the largest fragments a member's context carries, so none
    /// leaves out a turn no summary covers. `foldline serve` sets it from
    /// its own configuration.
    #[must_use]
    pub fn compression(mut self, availability: Availability) -> Self {
        self.driver.compression = availability;
        self
    }

    /// Count each message's tokens with the host's tokenizer (tiktoken-rs,
    /// a provider's counter) as it is appended or corrected, plus its
    /// framing ([`DriverBuilder::message_overhead_tokens`]), so a token
    /// budget uses real counts instead of the core's estimate
    /// (`ceil(chars / 4) + 4`) and the context as the provider counts it
    /// stays within its limit (the JS driver's `countTokens`): the summary
    /// in force, the amendment and the prompt are counted too before a
    /// context is answered, and one they put over its limit is selected
    /// within the limit less their excess. Turns written before keep the
    /// count they were written with. With the offline summarizer, give it
    /// the same counter ([`Extractive::counting`](crate::model::Extractive::counting))
    /// so its summaries fit their token bound as counted.
    #[must_use]
    pub fn count_tokens(mut self, count: impl Fn(&str) -> u64 + Send + Sync + 'static) -> Self {
        self.driver.count_tokens = Some(std::sync::Arc::new(count));
        self
    }

    /// Tokens of framing each counted message costs beside its content
    /// (default [`MESSAGE_OVERHEAD_TOKENS`](crate::driver::MESSAGE_OVERHEAD_TOKENS),
    /// 4; OpenAI's chat framing is 3): set it to your provider's. Used only
    /// with [`DriverBuilder::count_tokens`].
    #[must_use]
    pub fn message_overhead_tokens(mut self, tokens: u64) -> Self {
        self.driver.message_overhead_tokens = tokens;
        self
    }

    /// The wall clock in milliseconds (leases only; default the system's).
    #[must_use]
    pub fn clock(mut self, clock: fn() -> u64) -> Self {
        self.driver.clock = clock;
        self
    }

    /// The driver, its declarations checked now.
    ///
    /// # Errors
    /// `invalid_declaration` naming each rule the target (or the compactor)
    /// declaration breaks.
    pub fn build(self) -> Result<Driver<J, M>> {
        let d = self.driver;
        d.check_declarations()?;
        Ok(d)
    }
}
