//! A real PostgreSQL server for a test: Debian's binaries, a data folder
//! and socket in a temp dir, a loopback port, `fsync` off (on for the
//! benchmarks: [`Pg::start_durable`]); stopped (with its files removed)
//! when dropped. PostgreSQL refuses to run as root, so
//! as root the server runs as the `postgres` user.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running server.
pub struct Pg {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
}

fn bin_dir() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").exists())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| {
        panic!(
            "PostgreSQL is needed for this test: apt-get install postgresql (scripts/setup does)"
        )
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Run a PostgreSQL binary, as `postgres` when this process is root.
fn run(bin: &Path, args: &[String]) {
    assert!(try_run(bin, args), "{} {args:?} failed", bin.display());
}

fn try_run(bin: &Path, args: &[String]) -> bool {
    let out = if is_root() {
        let line = std::iter::once(bin.display().to_string())
            .chain(args.iter().map(|a| format!("'{a}'")))
            .collect::<Vec<_>>()
            .join(" ");
        Command::new("su")
            .args(["postgres", "-s", "/bin/sh", "-c", &line])
            .output()
    } else {
        Command::new(bin).args(args).output()
    }
    .expect("run a PostgreSQL binary");
    if !out.status.success() {
        eprintln!(
            "{} failed:\n{}{}",
            bin.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out.status.success()
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Pg {
    /// Start a fresh server, `fsync` off (a test's data need not survive a
    /// power loss).
    #[allow(dead_code)]
    pub fn start() -> Pg {
        Pg::start_with(false)
    }

    /// Start a fresh server that flushes each commit to disk, as a
    /// production server does (and as the SQLite journal does): what the
    /// benchmarks compare with a SQLite file.
    #[allow(dead_code)]
    pub fn start_durable() -> Pg {
        Pg::start_with(true)
    }

    fn start_with(durable: bool) -> Pg {
        let bin = bin_dir();
        let dir = tempfile::tempdir().expect("temp dir");
        if is_root() {
            let status = Command::new("chown")
                .args(["postgres:postgres", &dir.path().display().to_string()])
                .status()
                .expect("chown");
            assert!(status.success());
        }
        let data = dir.path().join("data").display().to_string();
        run(
            &bin.join("initdb"),
            &[
                "-D".into(),
                data.clone(),
                "-U".into(),
                "foldline".into(),
                "--auth=trust".into(),
                "-E".into(),
                "UTF8".into(),
                "--no-sync".into(),
            ],
        );
        // A port found free may be taken again before the server binds it
        // (by another test's server or by a client connection's ephemeral
        // port), so a start that could not bind tries another port.
        let log = dir.path().join("log");
        for _ in 0..8 {
            let port = free_port();
            let opts = format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync={} -c max_connections=200",
                dir.path().display(),
                if durable { "on" } else { "off" }
            );
            let _ = std::fs::remove_file(&log);
            let started = try_run(
                &bin.join("pg_ctl"),
                &[
                    "-D".into(),
                    data.clone(),
                    "-o".into(),
                    opts,
                    "-l".into(),
                    log.display().to_string(),
                    "-w".into(),
                    "start".into(),
                ],
            );
            if started {
                return Pg { dir, bin, port };
            }
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(
                said.contains("Address already in use"),
                "PostgreSQL did not start: {said}"
            );
        }
        panic!("PostgreSQL found no free port in 8 tries")
    }

    /// The URL of a new, empty database on this server.
    /// The URL of database `name` on this server, created or not.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://foldline@127.0.0.1:{}/{name}", self.port)
    }

    pub fn database(&self, name: &str) -> String {
        let mut c = postgres::Client::connect(
            &format!("postgres://foldline@127.0.0.1:{}/postgres", self.port),
            postgres::NoTls,
        )
        .expect("connect");
        c.batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create database");
        self.url(name)
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        run(
            &self.bin.join("pg_ctl"),
            &[
                "-D".into(),
                self.dir.path().join("data").display().to_string(),
                "-m".into(),
                "immediate".into(),
                "stop".into(),
            ],
        );
    }
}

/// PgBouncer in front of a [`Pg`] (Debian's `pgbouncer`, run as
/// `postgres` when this process is root), in `mode` (`session` or
/// `transaction`), on a loopback port of its own; stopped when dropped.
/// (The tools that share this file start none.)
#[allow(dead_code)]
pub struct Bouncer {
    dir: tempfile::TempDir,
    port: u16,
}

#[allow(dead_code)]
impl Bouncer {
    /// Start one before `pg`, for every database on it.
    pub fn start(pg: &Pg, mode: &str) -> Bouncer {
        let bin = Path::new("/usr/sbin/pgbouncer");
        assert!(
            bin.exists(),
            "PgBouncer is needed for this test: apt-get install pgbouncer (scripts/setup does)"
        );
        let dir = tempfile::tempdir().expect("a folder for PgBouncer");
        let d = dir.path().display();
        for _ in 0..8 {
            let port = free_port();
            std::fs::write(
                dir.path().join("bouncer.ini"),
                format!(
                    "[databases]\n* = host=127.0.0.1 port={}\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nauth_type = trust\nauth_file = {d}/users.txt\npool_mode = {mode}\ndefault_pool_size = 100\nmax_client_conn = 1000\nunix_socket_dir = {d}\npidfile = {d}/bouncer.pid\nlogfile = {d}/bouncer.log\n",
                    pg.port
                ),
            )
            .expect("write bouncer.ini");
            std::fs::write(dir.path().join("users.txt"), "\"foldline\" \"\"\n")
                .expect("write users.txt");
            if is_root() {
                let status = Command::new("chown")
                    .args(["-R", "postgres"])
                    .arg(dir.path())
                    .status()
                    .expect("chown");
                assert!(status.success());
            }
            if try_run(bin, &["-d".into(), format!("{d}/bouncer.ini")]) {
                return Bouncer { dir, port };
            }
        }
        panic!("PgBouncer found no free port in 8 tries")
    }

    /// The URL of database `name` through this pooler.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://foldline@127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("bouncer.pid")) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
    }
}
