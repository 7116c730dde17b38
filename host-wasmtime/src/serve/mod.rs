//! `foldline serve`: the driver and journal behind an owner-scoped HTTP API.
//!
//! | Route | What |
//! |---|---|
//! | `POST /api/conversations/{id}/messages` | append OpenAI-style messages (checked; nothing written on bad input); the automatic compaction check runs after the answer, off the request's path |
//! | `POST /api/conversations/{id}/condense` | the manual `/compact`: an exclusive durable task, `202` with its pointer, or `session_busy` / `not_owner` / `nothing_to_fold` / `busy` / `rate_limited` |
//! | `GET /api/conversations/{id}/tasks/{task}/events` | Server-Sent Events of the task's durable events, resumable with `Last-Event-ID` |
//! | `POST /api/conversations/{id}/answer`, `DELETE …/answer/{answer}` | an agent run takes and gives back the session: while it holds it, manual compaction answers `session_busy` and no compaction interleaves |
//! | `GET …/context?format=`, `GET …/timeline`, `GET …/verify` | the model-bound context, the chat timeline, the chain check |
//! | `GET /`, `GET /chat.js` (with `--web`) | the reference chat page (`js/examples/chat`, built into `web/`) |
//! | `GET …/members`, `PUT`/`DELETE …/members/{member}` | the conversation's room: who may read and post beside its owner |
//! | `GET`/`PUT /api/members/me/compression`, `GET …/compression/stats` | the caller's member-compression opt-ins and their recorded passes (`serve/compression.rs`) |
//! | `GET …/settings` | the settings projection the model would see for the caller |
//! | `GET /api/health` | `{"ok": true}` once the journal answers a read: a load balancer's probe, no token |
//! | `GET …/events?after=N[&wait=ms]` | the member-visible events after position `N` (long poll), for a client projecting its timeline locally (`serve/feed.rs`) |
//!
//! Every route but `/api/health` needs `Authorization: Bearer <token>` of a member
//! ([`members`]); a conversation belongs to the member who first appended
//! to it; the members it lets into its room read, post and answer, and
//! only the owner condenses; no one else can read it.

mod access;
mod compression;
pub mod cors;
mod drawn;
mod feed;
pub mod listen;
pub mod members;
mod reply;
mod routes;
mod state;
pub mod store;
mod tasks;
mod timeline;
mod wakes;
mod watcher;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use members::{hash_token, Members};
pub use reply::ApiError;
pub use store::Location;

use foldline_core::defaults;
use foldline_core::member::settings::Availability;

use crate::driver::Driver;
use crate::error::{HostError, Result};
use crate::journal::Journal;
use crate::model::Model;

/// The driver a server runs: any journal (SQLite or Postgres) and any model.
pub type ServeDriver = Driver<Box<dyn Journal>, Box<dyn Model + Send + Sync>>;

/// Automatic compaction checks a server runs at once by default
/// ([`ServeConfig::compactions`]).
pub const COMPACTIONS: usize = 16;

/// How a server runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Where the journal lives (the server's ownership, task and answer
    /// tables live beside it).
    pub journal: Location,
    /// Who may call, by token hash ([`Server::set_members`] replaces them
    /// while it runs).
    pub members: Members,
    /// The members file they were read from: [`serve`] reads it again on
    /// `SIGHUP` (Unix), so a token is added or revoked without a restart.
    pub members_file: Option<std::path::PathBuf>,
    /// This server's name as a writer (`serve:<replica>` holds leases): keep
    /// it across restarts, so a restarted server ends the tasks it was running.
    pub replica: String,
    /// Largest request body, in bytes.
    pub body_limit: usize,
    /// Longest a request may take (streams of task events excepted).
    pub request_timeout: Duration,
    /// Manual compactions a member may start per minute.
    pub condense_per_minute: u32,
    /// How long an answer holds the session unless given back.
    pub answer_lease: Duration,
    /// How often the journal is looked at for what another process wrote:
    /// the server's watch of the journal each interval (`serve/watcher.rs`;
    /// a journal that keeps no watch: every waiting long poll reads again),
    /// and a task's event stream. This process's writes wake at once.
    pub poll: Duration,
    /// Serve the reference chat page at `/` (and its script at `/chat.js`).
    pub web: bool,
    /// Member compression's availability (`MEMBER_COMPRESSION_ENABLED` and
    /// the three tool flags): never opts anyone in. With the surface off,
    /// contexts carry no member state and the member routes answer
    /// `not_available`.
    pub compression: Availability,
    /// The origins whose pages may call from a browser (CORS): each
    /// `scheme://host[:port]`, or `*` for any; none (the default): pages of
    /// the server's own origin only ([`cors`]).
    pub allow_origins: Vec<String>,
    /// Automatic compaction checks running at once (each may hold a model
    /// call and a blocking thread until the provider answers or times
    /// out); the rest wait their turn without holding a thread, so a
    /// provider that hangs cannot take every thread the requests need.
    pub compactions: usize,
}

impl ServeConfig {
    /// Defaults (`foldline_core::defaults`, shared with the edge handler):
    /// 1 MiB bodies, 6 condense requests per member per minute, 5-minute
    /// answers, 250 ms polls; 30 s requests, replica `local`, 16
    /// compaction checks at once.
    pub fn new(listen: SocketAddr, journal: Location, members: Members) -> ServeConfig {
        ServeConfig {
            listen,
            journal,
            members,
            members_file: None,
            replica: "local".into(),
            body_limit: defaults::BODY_LIMIT_BYTES as usize,
            request_timeout: Duration::from_secs(30),
            condense_per_minute: defaults::CONDENSE_PER_MINUTE as u32,
            answer_lease: Duration::from_millis(defaults::ANSWER_LEASE_MS),
            poll: Duration::from_millis(defaults::POLL_MS),
            web: false,
            compression: Availability::default(),
            allow_origins: Vec::new(),
            compactions: COMPACTIONS,
        }
    }
}

/// The server's routes, to mount in an application of your own (an axum
/// service with its own runtime, listener and routes): open it (blocking:
/// before your runtime starts, or on `spawn_blocking`), merge
/// [`Server::router`] into your router, and call [`Server::shutdown`] when
/// you stop serving. [`serve`] is this with a runtime and listener of its
/// own. `config.listen` is not used here: your listener is. Serve it with
/// [`listen::run`] rather than `axum::serve`, which installs no timer and so
/// keeps a client that never sends a request's head for good.
pub struct Server {
    app: Arc<state::App>,
}

impl Server {
    /// Open the stores (the journal, the ownership, task and answer tables)
    /// and end the tasks a previous run left open.
    ///
    /// # Errors
    /// Opening the journal, storage failures at start.
    pub fn open(driver: ServeDriver, config: ServeConfig) -> Result<Server> {
        let app = Arc::new(state::App::open(driver, config)?);
        app.recover();
        watcher::start(&app);
        Ok(Server { app })
    }

    /// The routes (every one under `/api/`), as an axum `Router` to serve
    /// or to merge into yours: `Router::new().route("/health", …).merge(server.router())`.
    pub fn router(&self) -> axum::Router {
        routes::router(self.app.clone())
    }

    /// Replace the members: from the next request on, only their tokens
    /// are served. A member no longer listed is refused (`401
    /// unauthorized`), a long poll of theirs already waiting too when
    /// something is written; their conversations stay theirs.
    pub fn set_members(&self, members: Members) {
        self.app.set_members(members);
    }

    /// Stop: the streams of running tasks go on until their terminal event,
    /// and this resolves once every running task has written it. Call it
    /// after your listener stopped accepting.
    pub async fn shutdown(&self) {
        self.app.stopping.cancel();
        self.app.tracker.close();
        self.app.tracker.wait().await;
    }
}

/// Run a server until `stop` resolves (the program passes [`signal`]): end
/// the tasks a previous run left open, serve (`ready` gets the bound
/// address), then stop accepting, let every running task write its terminal
/// event, close the streams and return.
///
/// # Errors
/// Binding the address, opening the journal, storage failures at start.
pub fn serve(
    driver: ServeDriver,
    config: ServeConfig,
    ready: impl FnOnce(SocketAddr) + Send + 'static,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<()> {
    // Blocking storage calls run before the runtime starts, or on its
    // blocking pool, never on its async workers.
    let listen = config.listen;
    listen::raise_open_files_limit();
    let server = Arc::new(Server::open(driver, config)?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let inner = server.clone();
    let result = rt.block_on(async move {
        let server = inner;
        // The address named: "Address already in use" alone does not say which.
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| std::io::Error::new(e.kind(), format!("listening on {listen}: {e}")))?;
        let addr = listener.local_addr()?;
        if let Some(path) = server.app.config.members_file.clone() {
            tokio::spawn(members::reload_on_hangup(server.clone(), path));
        }
        ready(addr);
        let (stopping, tracker) = (server.app.stopping.clone(), server.app.tracker.clone());
        let stopped = async move {
            stop.await;
            // Streams of running tasks go on until their terminal event.
            stopping.cancel();
            tracker.close();
        };
        let timeout = server.app.config.request_timeout;
        listen::run(listener, server.router(), timeout, stopped).await;
        // No new requests: let the running tasks end with their terminal events.
        server.shutdown().await;
        Ok::<(), HostError>(())
    });
    // The storage clients (the Postgres client blocks on drop) are dropped
    // here, after the runtime, never on one of its async workers.
    drop(rt);
    drop(server);
    result
}

/// Resolves on SIGINT or SIGTERM.
pub async fn signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
