//! A private PostgreSQL server for tests that stop, start or otherwise disturb the
//! server (the shared one at 127.0.0.1:5432 must never be touched that way): `initdb`
//! into a fresh temporary directory and `pg_ctl start` on a free port, with its socket in
//! that directory. `initdb` refuses to run as root, so as root the server binaries run
//! as the `postgres` OS user (`runuser -u postgres --`).
//!
//! The methods are blocking (they run `pg_ctl`); in async tests call them from
//! `tokio::task::block_in_place` or `spawn_blocking` when other tasks must keep running.
//! Dropping the value stops the server (immediately) and removes its directory.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sqlx::{Connection, Executor, PgConnection};

use crate::in_ci;

/// xids per `pg_xact` segment file: 32 pages of 8 KiB, 4 transactions per byte.
const XIDS_PER_XACT_SEGMENT: u64 = 32 * 8192 * 4;

/// A private PostgreSQL server.
#[derive(Debug)]
pub struct PrivatePg {
    dir: PathBuf,
    data: PathBuf,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    running: bool,
}

/// The directory with `initdb`, `pg_ctl`, `pg_resetwal`: `$PM_TEST_PG_BIN`, else the
/// directory `initdb` on `PATH` links to, else the newest `/usr/lib/postgresql/*/bin`.
fn bin_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("PM_TEST_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let has_tools = |d: &Path| d.join("initdb").is_file() && d.join("pg_resetwal").is_file();
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("initdb"))
            .find(|p| p.is_file())
            .and_then(|p| std::fs::canonicalize(p).ok())
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .filter(|d| has_tools(d))
    });
    if on_path.is_some() {
        return on_path;
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .filter(|d| has_tools(d))
        .collect();
    versions.sort_by_key(|d| {
        d.parent()
            .and_then(Path::file_name)
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    versions.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn skip_or_fail(why: &str) -> Option<PrivatePg> {
    if in_ci() {
        panic!("a private PostgreSQL server is needed under CI=true: {why}");
    }
    eprintln!("\n!!!!! SKIPPING a private-PostgreSQL test: {why} !!!!!\n");
    None
}

impl PrivatePg {
    /// `initdb` and start a server on a free port (`fsync=off`: it survives its own
    /// crashes, not the machine's, which is all these tests need). `None` (with a loud
    /// message) when PostgreSQL's server binaries are missing or `initdb` fails, outside
    /// CI.
    ///
    /// # Panics
    /// Under `CI=true` when the server cannot be had.
    pub fn start() -> Option<Self> {
        let Some(bin) = bin_dir() else {
            return skip_or_fail("no initdb/pg_resetwal found (set PM_TEST_PG_BIN)");
        };
        let dir = std::env::temp_dir().join(format!("pm-pg-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let as_postgres = is_root();
        let mut pg = Self {
            data: dir.join("data"),
            dir,
            bin,
            port: free_port(),
            as_postgres,
            running: false,
        };
        if as_postgres {
            let chown = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&pg.dir)
                .status();
            if !chown.is_ok_and(|s| s.success()) {
                return skip_or_fail("cannot chown the server directory to the postgres user");
            }
        }
        let data = pg.data.display().to_string();
        let init = pg.tool(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
        );
        if !init.status.success() {
            return skip_or_fail(&format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&init.stderr)
            ));
        }
        let conf = format!(
            "\nport = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             fsync = off\nmax_connections = 200\nlog_min_messages = warning\n",
            pg.port,
            pg.dir.display()
        );
        let conf_path = pg.data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path).expect("postgresql.conf");
        text.push_str(&conf);
        std::fs::write(&conf_path, text).expect("postgresql.conf");
        pg.start_again();
        Some(pg)
    }

    /// Runs one of the server's tools (as `postgres` when we are root).
    fn tool(&self, name: &str, args: &[&str]) -> Output {
        let exe = self.bin.join(name);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {name}: {e}"))
    }

    fn pg_ctl(&self, args: &[&str]) -> Output {
        let data = self.data.display().to_string();
        let mut all = vec!["-D", &data];
        all.extend_from_slice(args);
        self.tool("pg_ctl", &all)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        self.url_for("postgres")
    }

    /// The URL of database `name` on this server.
    pub fn url_for(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates database `name`; returns its URL.
    ///
    /// # Panics
    /// When the server does not run or refuses.
    pub async fn create_database(&self, name: &str) -> String {
        let mut conn = PgConnection::connect(&self.url())
            .await
            .expect("connect to the private server");
        conn.execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .expect("create database");
        let _ = conn.close().await;
        self.url_for(name)
    }

    /// Whether the server runs (as far as this value knows).
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// `pg_ctl start -w` (after a stop).
    ///
    /// # Panics
    /// When the server does not start (with its log).
    pub fn start_again(&mut self) {
        let log = self.dir.join("postgres.log").display().to_string();
        let out = self.pg_ctl(&["-l", &log, "-w", "-t", "60", "start"]);
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        self.running = true;
    }

    fn stop(&mut self, mode: &str) {
        let out = self.pg_ctl(&["-m", mode, "-w", "-t", "60", "stop"]);
        assert!(
            out.status.success(),
            "pg_ctl stop -m {mode} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.running = false;
    }

    /// `pg_ctl stop -m fast`: clients are disconnected, the server shuts down cleanly.
    pub fn stop_fast(&mut self) {
        self.stop("fast");
    }

    /// `pg_ctl stop -m immediate`: the server quits at once, as in a crash (recovery on
    /// the next start).
    pub fn stop_immediate(&mut self) {
        self.stop("immediate");
    }

    /// Sets the next transaction id (`pg_resetwal -x`) of the stopped server, e.g. just
    /// below a power of ten, and makes the `pg_xact` segment that id falls in (zeroed,
    /// as PostgreSQL would) so the server can start.
    ///
    /// # Panics
    /// While the server runs, or when `pg_resetwal` fails.
    pub fn reset_next_xid(&mut self, xid: u64) {
        assert!(!self.running, "stop the server before pg_resetwal");
        let data = self.data.display().to_string();
        let out = self.tool("pg_resetwal", &["-x", &xid.to_string(), "-D", &data]);
        assert!(
            out.status.success(),
            "pg_resetwal -x {xid} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The segments of this id and the next (for ids used after it).
        for segment in [xid / XIDS_PER_XACT_SEGMENT, xid / XIDS_PER_XACT_SEGMENT + 1] {
            let file = self.data.join("pg_xact").join(format!("{segment:04X}"));
            if !file.exists() {
                std::fs::write(&file, vec![0u8; 32 * 8192]).expect("pg_xact segment");
                if self.as_postgres {
                    let _ = Command::new("chown")
                        .arg("postgres:postgres")
                        .arg(&file)
                        .status();
                }
            }
        }
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default()
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        if self.running {
            let _ = self.pg_ctl(&["-m", "immediate", "-w", "-t", "30", "stop"]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
