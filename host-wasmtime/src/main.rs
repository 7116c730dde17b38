//! `foldline`: import a conversation, compact, print the context or the
//! timeline, verify a chain, call the policy directly, or run the demo.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use foldline_core::declaration::Declaration;
use foldline_core::defaults;
use foldline_core::format::Format;
use foldline_core::member::seams::MemberInput;
use foldline_core::member::settings::{Availability, Preferences};
use foldline_core::timeline::{DividerState, TimelineItem};
use foldline_core::turn::Route;
use foldline_wasmtime::builder::DriverBuilder;
use foldline_wasmtime::driver::{ContextOptions, Driver, Outcome};
use foldline_wasmtime::journal::{Journal, PgJournal, SqliteJournal};
use foldline_wasmtime::model::{
    Extractive, Model, OpenAiModel, OpenAiOptions, OpenAiResponsesModel,
};
use foldline_wasmtime::runtime::{Bound, Foldline, Limits, EMBEDDED_WASM};
use foldline_wasmtime::serve::Location;
use foldline_wasmtime::{import, serve, HostError};

/// The heading of the options every command takes.
const GLOBAL: &str = "Global options";

#[derive(Parser)]
#[command(
    name = "foldline",
    about = "Conversation compaction that never edits the journal.",
    disable_version_flag = true
)]
struct Cli {
    /// Print the version and the artifact's SHA-256.
    #[arg(long)]
    version: bool,
    /// The journal: a SQLite file, or a PostgreSQL database
    /// (`postgres://user@host:port/db`) that several programs and servers share.
    #[arg(long, global = true, help_heading = GLOBAL, default_value = "foldline.db")]
    journal: String,
    /// The conversation id.
    #[arg(long, global = true, help_heading = GLOBAL, default_value = "default")]
    conversation: String,
    /// A declaration file (JSON) instead of the default declaration.
    #[arg(long, global = true, help_heading = GLOBAL)]
    declaration: Option<PathBuf>,
    /// The reciprocal compactor's declaration file (JSON); resolve checks that
    /// the pair agrees (default: derived from the target declaration).
    #[arg(long, global = true, help_heading = GLOBAL)]
    compactor_declaration: Option<PathBuf>,
    /// A .wasm artifact instead of the embedded one.
    #[arg(long, global = true, help_heading = GLOBAL)]
    wasm: Option<PathBuf>,
    /// Summarize with an OpenAI-compatible endpoint (base URL up to /v1) instead of the offline extractive summarizer.
    #[arg(long, global = true, help_heading = GLOBAL)]
    openai_base_url: Option<String>,
    /// Model name for --openai-base-url.
    #[arg(long, global = true, help_heading = GLOBAL, default_value = "gpt-4o-mini")]
    openai_model: String,
    /// The summary call's output token cap for --openai-base-url [default:
    /// the summary's limit; a reasoning model that asks for
    /// max_completion_tokens gets 8192 more].
    #[arg(long, global = true, help_heading = GLOBAL)]
    openai_max_tokens: Option<u64>,
    /// The API --openai-base-url speaks: chat (chat completions, every
    /// OpenAI-compatible server) or responses (the OpenAI Responses API, for
    /// models served only there).
    #[arg(long, global = true, help_heading = GLOBAL, value_enum, default_value = "chat")]
    openai_api: OpenAiApi,
    /// Bound each call by fuel (about one unit per wasm instruction) instead
    /// of time: where a call stops is then the same on every machine, and
    /// every call runs slower (BENCHMARKS.md).
    #[arg(long, global = true, help_heading = GLOBAL, conflicts_with = "time_limit_ms")]
    fuel: Option<u64>,
    /// Time limit per call, in milliseconds, checked every 10 ms (a call may
    /// run up to two checks past it) [default: 30000].
    #[arg(long, global = true, help_heading = GLOBAL)]
    time_limit_ms: Option<u64>,
    /// Memory limit per call, in MiB.
    #[arg(long, global = true, help_heading = GLOBAL)]
    memory_mib: Option<usize>,
    /// Where the compiled artifact is kept between runs, so a run after the
    /// first starts without compiling it: an absolute directory, or `off`
    /// [default: wasmtime's cache directory, ~/.cache/wasmtime on Linux;
    /// a run that cannot use it compiles instead].
    #[arg(
        long,
        global = true, help_heading = GLOBAL,
        env = "FOLDLINE_COMPILE_CACHE",
        value_name = "DIR|off"
    )]
    compile_cache: Option<String>,
    /// Count each message's tokens with one of OpenAI's tokenizers for a
    /// token budget, instead of the estimate (ceil(chars / 4) + 4), which
    /// undercounts code and most languages other than English.
    #[arg(long, global = true, help_heading = GLOBAL, env = "FOLDLINE_TOKENIZER", value_name = "o200k_base|cl100k_base")]
    tokenizer: Option<foldline_wasmtime::tokenizer::Tokenizer>,
    /// Tokens of framing each counted message costs beside its content
    /// (OpenAI's chat: 3) [default: 4].
    #[arg(long, global = true, help_heading = GLOBAL, requires = "tokenizer")]
    message_overhead_tokens: Option<u64>,
    #[command(flatten)]
    compression: CompressionFlags,
    #[command(subcommand)]
    command: Option<Command>,
}

/// A member-compression tool a member opts in to.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OptIn {
    PromptTrim,
    ToolResult,
    PlainSpeak,
}

/// Member compression's availability (seed 002's release gates): a flag or
/// its environment variable, for every command (plans keep room for the
/// fragments members' contexts carry). Availability never opts anyone in.
#[derive(clap::Args, Clone, Copy)]
struct CompressionFlags {
    /// The member settings surface exists.
    #[arg(long, global = true, help_heading = GLOBAL, env = "MEMBER_COMPRESSION_ENABLED", value_parser = clap::builder::BoolishValueParser::new(), default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    member_compression: bool,
    /// Tool-result compression is available.
    #[arg(long, global = true, help_heading = GLOBAL, env = "MEMBER_TOOL_RESULT_COMPRESSION_ENABLED", value_parser = clap::builder::BoolishValueParser::new(), default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    tool_result_compression: bool,
    /// Plain-speak responses are available.
    #[arg(long, global = true, help_heading = GLOBAL, env = "MEMBER_PLAIN_SPEAK_COMPRESSION_ENABLED", value_parser = clap::builder::BoolishValueParser::new(), default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    plain_speak_compression: bool,
    /// Prompt trim is available.
    #[arg(long, global = true, help_heading = GLOBAL, env = "MEMBER_PROMPT_FLUFF_COMPRESSION_ENABLED", value_parser = clap::builder::BoolishValueParser::new(), default_value = "false", num_args = 0..=1, default_missing_value = "true")]
    prompt_fluff_compression: bool,
}

impl CompressionFlags {
    fn availability(self) -> Availability {
        Availability {
            surface: self.member_compression,
            tool_result: self.tool_result_compression,
            plain_speak: self.plain_speak_compression,
            prompt_trim: self.prompt_fluff_compression,
        }
    }
}

/// The API an OpenAI-compatible summarizer speaks.
#[derive(Clone, Copy, ValueEnum)]
enum OpenAiApi {
    /// Chat completions (`/chat/completions`).
    Chat,
    /// The Responses API (`/responses`).
    Responses,
}

/// What `foldline import` reads, and whether it runs the driver.
#[derive(clap::Args)]
struct ImportArgs {
    /// The file, or `-` for stdin.
    file: PathBuf,
    /// The messages' shape: openai (chat messages, or foldline events),
    /// openai-responses (OpenAI Responses API items), anthropic (Anthropic
    /// messages) or ai-sdk (AI SDK model messages).
    #[arg(long, default_value = "openai")]
    format: import::Incoming,
    /// Only append; do not run the driver after each message.
    #[arg(long)]
    no_compact: bool,
}

/// What `foldline correct` writes, and whether it runs the driver after.
#[derive(clap::Args)]
struct CorrectArgs {
    /// The turn's id (`timeline --json` lists them).
    turn: String,
    /// What it says now (`-` reads it from stdin).
    text: String,
    /// Only write the correction; do not run the driver after it.
    #[arg(long)]
    no_compact: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Append a conversation (JSON array or JSON Lines of OpenAI-style messages or foldline events,
    /// or with --format of OpenAI Responses API items, Anthropic or AI SDK messages).
    Import(ImportArgs),
    /// Run the driver once now, as a manual request by the owner.
    Compact,
    /// Correct what a turn says (an edit): a correction, checked as every
    /// writer's is before it is written (the turn it makes; a covered
    /// turn's amendment within its bound). Its tool calls and results stay.
    Correct(CorrectArgs),
    /// Print the model-bound context as JSON: `{"messages": [...], "manifest":
    /// {...}}` (what was included, omitted, sizes, hashes), or with
    /// `--messages` the provider's message array alone, ready to send.
    Context {
        /// foldline, openai (chat), openai-responses (openaiResponses: the
        /// Responses API's input items), anthropic or ai-sdk (aiSdk): read as
        /// the core reads a format.
        #[arg(long, default_value = "foldline")]
        format: Format,
        /// Print only the message array.
        #[arg(long)]
        messages: bool,
        /// The member's compression opt-ins for this run (comma-separated;
        /// any turns the master preference on). Each needs its tool to be
        /// available (the flags below); `answer` in the output is the
        /// server-rendered reply to a settings question.
        #[arg(long, value_enum, value_delimiter = ',')]
        opt_in: Vec<OptIn>,
    },
    /// Print the timeline with its dividers.
    Timeline {
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Only the latest N items (a page; a position's items are never split).
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
        /// Only items before this position (a message's source sequence, a
        /// divider's last covered one): the `earlier` a page names.
        #[arg(long, value_name = "SEQ")]
        before: Option<u64>,
    },
    /// Resolve the chain: exit 0 when intact, 1 with the failure code when not.
    Verify,
    /// The raw policy call: JSON request (file or stdin) in, JSON out.
    Plan(Raw),
    /// The raw validate call.
    Validate(Raw),
    /// The raw select call.
    Select(Raw),
    /// A long bundled conversation through the whole loop on the offline defaults.
    Demo {
        /// Turns in the bundled conversation.
        #[arg(long, default_value_t = 400)]
        turns: usize,
    },
    /// Serve the HTTP API (append, condense with task events, context,
    /// timeline, verify, answers) for the members of a members file.
    Serve(Serve),
    /// Print the members-file entry of a bearer token read from stdin (only
    /// its SHA-256 is stored).
    HashToken {
        /// The member id.
        member: String,
    },
}

#[derive(clap::Args)]
struct Serve {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: std::net::SocketAddr,
    /// The members file: `{"members": [{"id", "tokenSha256"}]}`, read
    /// again on SIGHUP (a token added or revoked without a restart).
    #[arg(long, env = "FOLDLINE_MEMBERS")]
    members: PathBuf,
    /// This server's writer name; keep it across restarts so a restarted
    /// server ends the tasks it was running.
    #[arg(long, default_value = "local")]
    replica: String,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = defaults::BODY_LIMIT_BYTES as usize)]
    body_limit: usize,
    /// Longest a request may take, in seconds, its body included (task event streams
    /// excepted), and a connection's wait for a request's head before it is closed.
    #[arg(long, default_value_t = 30)]
    request_timeout: u64,
    /// Manual compactions a member may start per minute.
    #[arg(long, default_value_t = defaults::CONDENSE_PER_MINUTE as u32)]
    condense_per_minute: u32,
    /// How long an answer holds the session unless given back, in seconds.
    #[arg(long, default_value_t = defaults::ANSWER_LEASE_MS / 1000)]
    answer_lease: u64,
    /// The writer lease's time to live, in milliseconds (renewed while a
    /// model call runs; a stopped replica's lease lapses after it).
    #[arg(long, default_value_t = defaults::LEASE_MS)]
    lease_ms: u64,
    /// Automatic compaction checks running at once; the rest wait their
    /// turn, so a provider that hangs cannot hold every thread the
    /// requests need.
    #[arg(long, env = "FOLDLINE_COMPACTIONS", default_value_t = serve::COMPACTIONS)]
    compactions: usize,
    /// Also serve the reference chat page at `/` (sign in with
    /// `/#token=<token>&conversation=<id>`).
    #[arg(long)]
    web: bool,
    /// Let pages of this origin call from a browser (CORS), e.g.
    /// `https://app.example.com` or `http://localhost:5173`; repeat it, or
    /// `*` for any [default: none, pages of the server's own origin only].
    #[arg(
        long = "allow-origin",
        env = "FOLDLINE_ALLOW_ORIGIN",
        value_delimiter = ','
    )]
    allow_origin: Vec<String>,
}

#[derive(clap::Args)]
struct Raw {
    /// Request file (default: stdin).
    #[arg(long)]
    request: Option<PathBuf>,
}

/// The model the program runs with, chosen by its options.
type AnyModel = Box<dyn Model + Send + Sync>;

/// Print a line to stdout. A closed reader (`| head`, `jq -e`, a client that
/// hung up) ends the program quietly with success, never a panic.
macro_rules! out {
    ($($t:tt)*) => { $crate::emit(format_args!($($t)*)) };
}

mod demo;
mod import_cmd;
use demo::demo;
use import_cmd::import_file;

fn emit(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("foldline: io: cannot write to stdout: {e}");
        std::process::exit(2);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("foldline: {e}");
            if let HostError::MemoryLimit(bytes) = e {
                eprintln!("{}", memory_hint(bytes));
            }
            ExitCode::from(2)
        }
    }
}

/// What to do about a call over its memory limit. A call takes what its
/// command needs of the conversation with its content — `context` the
/// turns its tail could hold, `compact` those and the oldest turns one fold
/// may take (the prefix's turn bound), each other turn as its sizes (a
/// timeline is drawn in pages) — so it needs more only for turns that are
/// long as well as many.
fn memory_hint(bytes: usize) -> String {
    let mib = bytes >> 20;
    let more = HostError::more_memory_mib(bytes);
    format!(
        "foldline: a call takes what the command needs of the conversation with its content (context: the turns its tail could hold; compact: those and the oldest turns one fold may take; the others as their sizes); run it again with --memory-mib {more} (now {mib})"
    )
}

fn load(cli: &Cli) -> Result<Foldline, HostError> {
    let mut limits = Limits::default();
    if let Some(f) = cli.fuel {
        limits.bound = Bound::Fuel(f);
    }
    if let Some(ms) = cli.time_limit_ms {
        limits.bound = Bound::Time(std::time::Duration::from_millis(ms));
    }
    if let Some(m) = cli.memory_mib {
        limits.memory_bytes = m << 20;
    }
    let file;
    let bytes = match &cli.wasm {
        Some(p) => {
            file = std::fs::read(p)?;
            &file[..]
        }
        None => EMBEDDED_WASM,
    };
    match cli.compile_cache.as_deref() {
        Some("off") => Foldline::from_bytes(bytes, limits),
        Some(dir) => Foldline::from_bytes_cached(bytes, limits, Some(Path::new(dir))),
        // The default directory is a convenience: a home without one (read
        // only, none at all) compiles as before.
        None => Foldline::from_bytes_cached(bytes, limits, None)
            .or_else(|_| Foldline::from_bytes(bytes, limits)),
    }
}

/// The declaration (the file's or the default) with seed 002's settings by
/// their names applied over it, and what those settings change in the driver.
fn declaration(
    cli: &Cli,
) -> Result<(Declaration, foldline_wasmtime::settings::DriverSettings), HostError> {
    let mut d = match &cli.declaration {
        Some(p) => serde_json::from_str(&std::fs::read_to_string(p)?)
            .map_err(|e| HostError::Input(format!("{}: {e}", p.display())))?,
        None => Declaration::new("assistant", "assistant-compactor"),
    };
    let s = foldline_wasmtime::settings::apply(&mut d, |k| std::env::var(k).ok())?;
    Ok((d, s))
}

/// The journal the program runs on.
type AnyJournal = Box<dyn Journal>;
/// The program's driver: any journal, any model.
type ProgramDriver = Driver<AnyJournal, AnyModel>;

fn open_journal(at: &Location) -> Result<AnyJournal, HostError> {
    Ok(match at {
        Location::Sqlite(p) => Box::new(SqliteJournal::open(p)?),
        Location::Postgres(url) => Box::new(PgJournal::open(url)?),
    })
}

fn driver(cli: &Cli, journal: Location) -> Result<ProgramDriver, HostError> {
    builder(cli, journal)?.build()
}

/// The program's driver, configured from its flags and settings file, to
/// be adjusted further (the server's lease) and built.
fn builder(cli: &Cli, journal: Location) -> Result<DriverBuilder<AnyJournal, AnyModel>, HostError> {
    let model: AnyModel = match &cli.openai_base_url {
        Some(url) => {
            let o = OpenAiOptions {
                max_tokens: cli.openai_max_tokens,
                ..OpenAiOptions::new(url.clone(), cli.openai_model.clone(), None)
            };
            match cli.openai_api {
                OpenAiApi::Chat => Box::new(OpenAiModel::new(o)),
                OpenAiApi::Responses => Box::new(OpenAiResponsesModel::new(o)),
            }
        }
        // The offline summaries fit the token bound as the tokenizer counts.
        None => match cli.tokenizer {
            Some(t) => Box::new(Extractive::counting(t.counter())),
            None => Box::new(Extractive),
        },
    };
    let (declaration, settings) = declaration(cli)?;
    let mut b = Driver::builder(load(cli)?, open_journal(&journal)?, model)
        .declaration(declaration)
        .warm_candidates(
            settings.warm_candidates.unwrap_or(true),
            settings.warm_lease_ms.unwrap_or(defaults::WARM_LEASE_MS),
        )
        .owner("owner")
        .compression(cli.compression.availability());
    if let Some(t) = cli.tokenizer {
        b = b.count_tokens(t.counter());
    }
    if let Some(n) = cli.message_overhead_tokens {
        b = b.message_overhead_tokens(n);
    }
    if let Some(p) = &cli.compactor_declaration {
        b = b.compactor(
            serde_json::from_str(&std::fs::read_to_string(p)?)
                .map_err(|e| HostError::Input(format!("{}: {e}", p.display())))?,
        );
    }
    Ok(b)
}

fn route(conversation: &str) -> Route {
    Route {
        conversation: conversation.to_owned(),
        chat: String::new(),
        sender: String::new(),
    }
}

fn print_json(v: &impl serde::Serialize) -> Result<(), HostError> {
    out!(
        "{}",
        serde_json::to_string_pretty(v).map_err(|e| HostError::Input(e.to_string()))?
    );
    Ok(())
}

fn raw(cli: &Cli, entry: &str, r: &Raw) -> Result<ExitCode, HostError> {
    let mut input = Vec::new();
    match &r.request {
        Some(p) => input = std::fs::read(p)?,
        None => {
            std::io::stdin().read_to_end(&mut input)?;
        }
    }
    let out = load(cli)?.call_raw(entry, &input)?;
    out!("{}", String::from_utf8_lossy(&out));
    Ok(if out.starts_with(b"{\"ok\"") {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn run(cli: Cli) -> Result<ExitCode, HostError> {
    if cli.version {
        let f = load(&cli)?;
        out!("foldline {}", env!("CARGO_PKG_VERSION"));
        out!("artifact {}", f.sha256());
        return Ok(ExitCode::SUCCESS);
    }
    let Some(command) = &cli.command else {
        eprintln!("foldline: a subcommand is needed; try `foldline demo` or `foldline --help`");
        return Ok(ExitCode::from(2));
    };
    let conv = cli.conversation.clone();
    // The driver over `--journal`, opened only by the commands that use one.
    let open = || driver(&cli, Location::parse(&cli.journal));
    // The same, for a command about a conversation already written: a
    // mistyped `--journal` or `--conversation` is named, never answered as
    // an empty conversation (nor a new file left behind).
    let existing = || -> Result<ProgramDriver, HostError> {
        declaration(&cli)?; // a bad setting is named first
        if let Location::Sqlite(p) = Location::parse(&cli.journal) {
            if !p.exists() {
                return Err(HostError::Input(format!(
                    "no journal at {} (`foldline import` or `foldline serve` writes one)",
                    p.display()
                )));
            }
        }
        let d = open()?;
        if d.position(&conv)? == 0 {
            return Err(HostError::Input(format!(
                "no conversation {conv:?} in {}",
                cli.journal
            )));
        }
        Ok(d)
    };
    match command {
        Command::Import(a) => import_file(&open()?, &conv, a),
        Command::Compact => report(existing()?.compact_now(&conv, "owner", false)?),
        Command::Correct(a) => correct(&existing()?, &conv, a),
        Command::Context {
            format,
            messages,
            opt_in,
        } => {
            let member = member_input(opt_in, &cli.compression);
            print_context(&existing()?, &conv, *format, member, *messages)
        }
        Command::Timeline {
            json,
            limit,
            before,
        } => {
            let page = foldline_wasmtime::driver::Page {
                limit: *limit,
                before: *before,
            };
            let (t, _) = existing()?.timeline_at(&conv, page)?;
            if *json {
                print_json(&t)?;
            } else {
                print_timeline(&t.items, usize::MAX);
                if let Some(e) = t.earlier {
                    out!("  (earlier items: timeline --before {e})");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify => verify(&existing()?, &conv),
        Command::Plan(r) => raw(&cli, "plan", r),
        Command::Validate(r) => raw(&cli, "validate", r),
        Command::Select(r) => raw(&cli, "select", r),
        Command::Demo { turns } => demo(&cli, *turns),
        Command::Serve(o) => serve(&cli, o),
        Command::HashToken { member } => hash_token(member),
    }
}

/// `foldline correct`: the turn's correction written (its text from stdin
/// given `-`), or the check's refusal.
/// Write a correction, then (with `compact`) run the driver until nothing
/// is due: a correction that grows an uncovered turn past the trigger is
/// folded now, as `import`'s last correction is, rather than leave the
/// oldest turns out of every context until the next message.
fn correct(d: &ProgramDriver, conv: &str, a: &CorrectArgs) -> Result<ExitCode, HostError> {
    let (turn, text, compact) = (a.turn.as_str(), a.text.as_str(), !a.no_compact);
    let text = match text {
        "-" => {
            let mut t = String::new();
            std::io::stdin().read_to_string(&mut t)?;
            t
        }
        _ => text.to_owned(),
    };
    let seq = d
        .correct(
            conv,
            turn,
            vec![foldline_core::turn::Part::Text { text }],
            None,
        )?
        .seq;
    out!("corrected {turn} (journal position {seq})");
    let mut boundaries = 0;
    while compact && matches!(d.on_message(conv)?, Outcome::Compacted(_)) {
        boundaries += 1;
    }
    match boundaries {
        0 => {}
        1 => out!("compacted once after it"),
        n => out!("compacted {n} times after it"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The member state `foldline context --opt-in …` stands for: none unless
/// the member-compression surface is available.
fn member_input(opt_in: &[OptIn], compression: &CompressionFlags) -> Option<MemberInput> {
    let availability = compression.availability();
    availability.surface.then(|| MemberInput {
        availability,
        preferences: Preferences {
            master: !opt_in.is_empty(),
            tool_result: opt_in.contains(&OptIn::ToolResult),
            plain_speak: opt_in.contains(&OptIn::PlainSpeak),
            prompt_trim: opt_in.contains(&OptIn::PromptTrim),
        },
    })
}

/// `foldline context`: the selection (or its messages only) as JSON.
fn print_context(
    d: &ProgramDriver,
    conv: &str,
    format: Format,
    member: Option<MemberInput>,
    messages_only: bool,
) -> Result<ExitCode, HostError> {
    let options = ContextOptions {
        format,
        member,
        ..Default::default()
    };
    let selection = d.context(conv, options)?;
    if messages_only {
        print_json(&selection.messages)?;
    } else {
        print_json(&selection)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `foldline verify`: the chain intact (exit 0, with the compactor's
/// progress) or broken (exit 1, naming the rule).
fn verify(d: &ProgramDriver, conv: &str) -> Result<ExitCode, HostError> {
    match d.resolve(conv) {
        Ok(r) => {
            match r.head {
                Some(h) => out!(
                    "intact: {} boundaries, covered through source {}, head {}",
                    h.length,
                    h.covered_through_seq,
                    h.boundary_id
                ),
                None => out!("intact: no boundary yet"),
            }
            if let Some(p) = d.journal().progress(conv)? {
                out!(
                    "compactor progress: {} skipped runs (below the trigger, no model call), the latest checked through source {} at {} of {} {}",
                    p.skipped_runs,
                    p.last.checked_through_seq,
                    p.last.total,
                    p.last.trigger,
                    p.last.metric.as_str()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(HostError::Core(e)) => {
            out!("broken: {} ({})", e.code, e.message);
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e),
    }
}

/// `foldline hash-token MEMBER`: a members-file entry for the token on stdin.
fn hash_token(member: &str) -> Result<ExitCode, HostError> {
    let mut token = String::new();
    std::io::stdin().read_to_string(&mut token)?;
    let token = token.trim_end_matches(['\r', '\n']);
    if token.is_empty() {
        return Err(HostError::Input("no token on stdin".into()));
    }
    out!(
        "{}",
        serde_json::json!({"id": member, "tokenSha256": serve::hash_token(token)})
    );
    Ok(ExitCode::SUCCESS)
}

fn serve(cli: &Cli, o: &Serve) -> Result<ExitCode, HostError> {
    let text = std::fs::read_to_string(&o.members)
        .map_err(|e| HostError::Input(format!("{}: {e}", o.members.display())))?;
    let members = serve::Members::parse(&text)?;
    let mut config = serve::ServeConfig::new(o.listen, Location::parse(&cli.journal), members);
    config.members_file = Some(o.members.clone());
    config.replica = o.replica.clone();
    config.body_limit = o.body_limit;
    config.request_timeout = std::time::Duration::from_secs(o.request_timeout);
    config.condense_per_minute = o.condense_per_minute;
    config.answer_lease = std::time::Duration::from_secs(o.answer_lease);
    config.web = o.web;
    config.allow_origins = o.allow_origin.clone();
    config.compactions = o.compactions;
    config.compression = cli.compression.availability();
    let web = o.web;
    let d = builder(cli, Location::parse(&cli.journal))?
        .lease_ms(o.lease_ms)
        .build()?;
    serve::serve(
        d,
        config,
        move |addr| {
            eprintln!("foldline serve: listening on http://{addr}");
            if web {
                eprintln!("foldline serve: the chat page is at http://{addr}/#token=<your token>&conversation=chat");
            }
        },
        serve::signal(),
    )?;
    eprintln!("foldline serve: stopped; every task it ran has its terminal event");
    Ok(ExitCode::SUCCESS)
}

fn report(o: Outcome) -> Result<ExitCode, HostError> {
    out!("{o}");
    Ok(match o {
        Outcome::Refused(_) | Outcome::Failed(_) | Outcome::Busy => ExitCode::from(1),
        _ => ExitCode::SUCCESS,
    })
}

fn print_timeline(items: &[TimelineItem], width: usize) {
    for item in items {
        match item {
            TimelineItem::Message {
                source_seq,
                role,
                text,
                ..
            } => {
                let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
                let short: String = flat.chars().take(width.min(100)).collect();
                let more = if flat.chars().count() > short.chars().count() {
                    "…"
                } else {
                    ""
                };
                out!("  #{source_seq:<4} {:<9} {short}{more}", role.as_str());
            }
            TimelineItem::Divider {
                kind,
                state,
                from_seq,
                through_seq,
                count,
                notice,
                ..
            } => {
                let kind = format!("{kind:?}").to_lowercase();
                let what = match state {
                    DividerState::Completed => format!(
                        "{kind} compaction: {count} turns from #{} to #{through_seq} folded into a summary",
                        from_seq.unwrap_or(0)
                    ),
                    DividerState::Pending => format!("{kind} compaction in progress (requested at #{through_seq})"),
                    DividerState::Failed => format!("{kind} compaction failed: {}", notice.as_deref().unwrap_or("")),
                };
                out!("  ──── {what} ────");
            }
        }
    }
}
