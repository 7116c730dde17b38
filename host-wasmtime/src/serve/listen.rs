//! The accept loop of [`super::serve`]: axum's own `serve` (one task per
//! connection, stop accepting on the signal, let every connection finish)
//! with a timer installed, so hyper's header read timeout runs.
//!
//! `axum::serve` installs no timer, and without one hyper's 30-second
//! default for reading a request's head is silently off: a client that
//! connects and sends nothing, or half a request line, held its connection,
//! task and file descriptor for as long as it liked — enough of them and
//! the server accepts no one (`accept` fails with `EMFILE`). Here a
//! connection has `timeout` to send each request's head, the idle wait
//! between keep-alive requests included, and is closed past it; and one
//! whose client stops reading its answer is closed once a write has made
//! no progress for `timeout` (hyper has no write timeout: the answer, and
//! the connection, stayed for good). The body is the routes' business:
//! each is read under the request's deadline.

use std::future::Future;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;

/// Serve `router` on `listener` until `stop` resolves, then stop accepting
/// and wait for every open connection to finish its request (idle ones are
/// closed at once); a request's head must arrive within `timeout`, and a
/// write to a client that does not read may stall no longer than it.
pub async fn run(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    timeout: Duration,
    stop: impl Future<Output = ()>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(timeout);
    let graceful = GracefulShutdown::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    refused(&e).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let mut io = tokio_io_timeout::TimeoutStream::new(stream);
        io.set_write_timeout(Some(timeout));
        let service = TowerToHyperService::new(router.clone());
        let conn = http.serve_connection(TokioIo::new(Box::pin(io)), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            // A client gone, a head too slow or malformed: that connection's end.
            let _ = conn.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Raise this process's soft limit on open files to its hard limit, as Go's
/// runtime does for every program: the soft limit is 1,024 under systemd
/// and most shells, and each connection is a file, so a thousand slow or
/// idle clients would be enough to refuse everyone else for as long as the
/// header timeout lets them stay. A limit that cannot be raised is left as
/// it is (the server still works, with fewer connections).
pub fn raise_open_files_limit() {
    #[cfg(unix)]
    {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let limit = getrlimit(Resource::Nofile);
        // `None` is unlimited: nothing to raise, or nothing Linux would take.
        if let (Some(current), Some(maximum)) = (limit.current, limit.maximum) {
            if current >= maximum {
                return;
            }
            let _ = setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: limit.maximum,
                    maximum: limit.maximum,
                },
            );
        }
    }
}

/// After a failed `accept`: a connection that failed on its way in is that
/// client's problem (try the next at once); anything else — out of file
/// descriptors, out of memory — eases only as connections close, so wait a
/// second before trying again rather than spinning (as axum does).
async fn refused(e: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if !matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        eprintln!("foldline serve: accept: {e}; trying again in a second");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
