//! A `foldline serve` process for a test: started, waited for until it
//! listens, killed and waited for when dropped (also on a panic).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

/// A running server process.
pub struct Server {
    /// The process.
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `cmd` (a `foldline … serve --listen 127.0.0.1:0 …`) and wait for
/// its "listening on" line; the rest of its log goes to the test's stderr.
pub fn start(mut cmd: Command) -> Server {
    let child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .expect("start foldline serve");
    let mut srv = Server {
        child,
        base: String::new(),
    };
    let mut err = BufReader::new(srv.child.stderr.take().expect("stderr"));
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap_or(0) > 0,
            "the server stopped before listening"
        );
        if let Some(addr) = line.trim().strip_prefix("foldline serve: listening on ") {
            srv.base = addr.to_owned();
            std::thread::spawn(move || {
                let mut rest = String::new();
                let _ = err.read_to_string(&mut rest);
                eprint!("{rest}");
            });
            return srv;
        }
    }
}
