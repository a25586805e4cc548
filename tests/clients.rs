//! The client compatibility matrix (`docs/clients.md`): real PostgreSQL drivers and tools run
//! their scripts in `tests/clients/` against the `weir` binary, and each named check's outcome
//! must be the one written in `tests/clients/expected.txt`. A check that starts to pass fails
//! this test too until the expectation (and the matrix in the docs) says so.
//!
//! Needs the clients `.ci/run` installs: psql and pgbench (PostgreSQL's Debian packages), a
//! Python virtual environment with psycopg 3, psycopg2, asyncpg, SQLAlchemy and pandas, the
//! npm package `pg` with Node.js, and Java with the PostgreSQL JDBC driver. Where they are:
//!
//! - `WEIR_CLIENTS_PYTHON`: the virtual environment's interpreter (default
//!   `$HOME/.cache/weir-clients/venv/bin/python`);
//! - `WEIR_CLIENTS_NODE_MODULES`: the `node_modules` folder holding `pg` (default
//!   `$HOME/.cache/weir-clients/node/node_modules`);
//! - `WEIR_CLIENTS_JDBC_JAR`: the driver's jar (default `/usr/share/java/postgresql.jar`);
//! - `WEIR_CLIENTS_PGBENCH`: the pgbench binary (default: `pgbench` on `PATH`, else the newest
//!   `/usr/lib/postgresql/*/bin/pgbench`).

use crate::common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::free_port;

/// How long one client's script may run before it is killed and the test fails.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// What to install when a client is missing.
const INSTALL_HINT: &str = "run .ci/run to install the clients";

/// A check's outcome, as a script prints it and as `expected.txt` records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Pass,
    Fail,
}

impl Outcome {
    fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
        }
    }
}

/// One client of the matrix: its name in the PASS/FAIL lines and how to run its script.
struct Client {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

fn home_cache(rest: &str) -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_default();
    Path::new(&home).join(".cache/weir-clients").join(rest)
}

fn env_path(name: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or(default)
}

/// Whether `program args...` runs and exits 0 (its output is discarded).
fn runs(program: &Path, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// pgbench: `WEIR_CLIENTS_PGBENCH`, else on `PATH`, else PostgreSQL's newest install.
fn find_pgbench() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("WEIR_CLIENTS_PGBENCH").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if runs(Path::new("pgbench"), &["--version"]) {
        return Some(PathBuf::from("pgbench"));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin/pgbench"))
        .filter(|p| p.exists())
        .collect();
    // The folders are PostgreSQL's major versions: the greatest is the newest.
    found.sort_by_key(|p| {
        p.parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .and_then(|v| v.to_str()?.parse::<u32>().ok())
    });
    found.pop()
}

/// The clients, after checking each one's tools are installed; panics naming what is missing.
fn clients() -> Vec<Client> {
    let dir = clients_dir();
    let script = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let python = env_path("WEIR_CLIENTS_PYTHON", home_cache("venv/bin/python"));
    let node_modules = env_path("WEIR_CLIENTS_NODE_MODULES", home_cache("node/node_modules"));
    let jar = env_path(
        "WEIR_CLIENTS_JDBC_JAR",
        PathBuf::from("/usr/share/java/postgresql.jar"),
    );
    let pgbench = find_pgbench();

    let mut missing = Vec::new();
    if !runs(
        &python,
        &[
            "-c",
            "import psycopg, psycopg2, asyncpg, sqlalchemy, pandas",
        ],
    ) {
        missing.push(format!(
            "Python with psycopg, psycopg2, asyncpg, sqlalchemy and pandas at {}",
            python.display()
        ));
    }
    if !runs(Path::new("node"), &["--version"]) || !node_modules.join("pg").is_dir() {
        missing.push(format!(
            "node and the npm package pg in {}",
            node_modules.display()
        ));
    }
    if !runs(Path::new("java"), &["-version"]) || !jar.is_file() {
        missing.push(format!(
            "java and the PostgreSQL JDBC driver at {}",
            jar.display()
        ));
    }
    if !runs(Path::new("psql"), &["--version"]) {
        missing.push("psql (postgresql-client)".to_string());
    }
    if !pgbench.as_deref().is_some_and(|p| runs(p, &["--version"])) {
        missing.push("pgbench (the postgresql package)".to_string());
    }
    assert!(
        missing.is_empty(),
        "missing clients ({INSTALL_HINT}): {}",
        missing.join("; ")
    );

    let python_client = |name: &'static str, file: &str| Client {
        name,
        program: python.clone(),
        args: vec![script(file)],
        env: vec![("PYTHONDONTWRITEBYTECODE".into(), "1".into())],
    };
    vec![
        Client {
            name: "psql",
            program: PathBuf::from("bash"),
            args: vec![script("psql.sh")],
            env: vec![],
        },
        python_client("psycopg3", "psycopg3.py"),
        python_client("psycopg2", "psycopg2_check.py"),
        python_client("asyncpg", "asyncpg_check.py"),
        python_client("sqlalchemy", "sqlalchemy_check.py"),
        Client {
            name: "node-pg",
            program: PathBuf::from("node"),
            args: vec![script("node_pg.js")],
            env: vec![(
                "NODE_PATH".into(),
                node_modules.to_str().unwrap().to_string(),
            )],
        },
        Client {
            name: "jdbc",
            // Java runs a single source file without a separate compile step.
            program: PathBuf::from("java"),
            args: vec![
                "-cp".into(),
                jar.to_str().unwrap().to_string(),
                script("Jdbc.java"),
            ],
            env: vec![],
        },
        Client {
            name: "pgbench",
            program: PathBuf::from("bash"),
            args: vec![script("pgbench.sh")],
            env: vec![(
                "PGBENCH".into(),
                pgbench.unwrap().to_str().unwrap().to_string(),
            )],
        },
    ]
}

/// `tests/clients/expected.txt`: `<client> <check> pass|fail` per line, `#` comments.
fn expectations() -> BTreeMap<(String, String), Outcome> {
    let path = clients_dir().join("expected.txt");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let outcome = match fields.as_slice() {
            [_, _, "pass"] => Outcome::Pass,
            [_, _, "fail"] => Outcome::Fail,
            _ => panic!(
                "expected.txt line {}: not `<client> <check> pass|fail`: {line}",
                i + 1
            ),
        };
        let key = (fields[0].to_string(), fields[1].to_string());
        assert!(
            out.insert(key, outcome).is_none(),
            "expected.txt line {}: repeated check {line}",
            i + 1
        );
    }
    out
}

/// The running server; dropping it kills the process if it is still there.
struct Server {
    child: Child,
    log: PathBuf,
}

impl Server {
    fn start(dir: &Path, port: u16) -> Server {
        let log = dir.join("server.log");
        let child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--data-dir", dir.join("data").to_str().unwrap()])
            // Debug logging: each statement runs inside a tracing span, which must follow
            // its future across worker threads (a span entered across an await once panicked
            // connection tasks under this setting).
            .env("RUST_LOG", "weir=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .expect("start weir");
        let mut server = Server { child, log };
        server.wait_ready(port);
        server
    }

    /// Waits until the server accepts connections: it listens once its tables are loaded.
    fn wait_ready(&mut self, port: u16) {
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "server exited during start: {status}\n{}",
                    self.log_tail(40)
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "server never came up\n{}",
                self.log_tail(40)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The log's panic messages (a panicking connection task drops the client's connection).
    fn panics(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let mut out = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if line.contains("panicked at") {
                out.extend(lines[i..(i + 2).min(lines.len())].iter().copied());
            }
        }
        out.join("\n")
    }

    /// SIGTERM, then waits for a clean exit.
    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "server exited with {status}");
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the server did not stop"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What one script printed: its checks in order, with the reason of each failure.
struct Report {
    checks: Vec<(String, Outcome, String)>,
    elapsed: Duration,
}

/// Runs a client's script to the end (killed after [`SCRIPT_TIMEOUT`]); panics if it does not
/// exit 0 or prints a line that is not a check of this client.
fn run_client(client: &Client, port: u16, dir: &Path, server: &Server) -> Report {
    let out_path = dir.join(format!("{}.out", client.name));
    let err_path = dir.join(format!("{}.err", client.name));
    let start = Instant::now();
    let mut cmd = Command::new(&client.program);
    cmd.args(&client.args)
        .current_dir(clients_dir())
        .env("PGHOST", "127.0.0.1")
        .env("PGPORT", port.to_string())
        .env("PGUSER", "weir")
        .env("PGDATABASE", "weir")
        .env("PGCONNECT_TIMEOUT", "10")
        .env_remove("PGSERVICE")
        .env_remove("PGPASSWORD")
        .env_remove("PGOPTIONS")
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap());
    for (k, v) in &client.env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!(
            "{}: cannot run {} ({INSTALL_HINT}): {e}",
            client.name,
            client.program.display()
        )
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{}: still running after {SCRIPT_TIMEOUT:?}; killed\n{}",
                client.name,
                std::fs::read_to_string(&out_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(
        status.success(),
        "{}: the script exited with {status} ({INSTALL_HINT} if a module or tool is \
         missing)\nstdout:\n{stdout}\nstderr:\n{stderr}\nserver log:\n{}",
        client.name,
        server.log_tail(30)
    );
    let mut checks = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let (outcome, rest) = if let Some(rest) = line.strip_prefix("PASS ") {
            (Outcome::Pass, rest)
        } else if let Some(rest) = line.strip_prefix("FAIL ") {
            (Outcome::Fail, rest)
        } else {
            panic!("{}: unexpected output line: {line}", client.name);
        };
        let (head, reason) = rest.split_once(": ").unwrap_or((rest, ""));
        let mut words = head.split_whitespace();
        let (Some(name), Some(check), None) = (words.next(), words.next(), words.next()) else {
            panic!("{}: malformed check line: {line}", client.name);
        };
        assert_eq!(name, client.name, "a check of another client: {line}");
        checks.push((check.to_string(), outcome, reason.to_string()));
    }
    Report { checks, elapsed }
}

#[test]
fn client_matrix_matches_expectations() {
    let clients = clients();
    let expected = expectations();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = Server::start(dir.path(), port);

    let total = Instant::now();
    let mut summary = String::new();
    let mut mismatches = Vec::new();
    let mut seen = BTreeMap::new();
    for client in &clients {
        let report = run_client(client, port, dir.path(), &server);
        let passed = report
            .checks
            .iter()
            .filter(|c| c.1 == Outcome::Pass)
            .count();
        writeln!(
            summary,
            "{:<11} {:>2} passed, {:>2} failed  ({:.1} s)",
            client.name,
            passed,
            report.checks.len() - passed,
            report.elapsed.as_secs_f64()
        )
        .unwrap();
        for (check, outcome, reason) in &report.checks {
            let key = (client.name.to_string(), check.clone());
            if seen.insert(key.clone(), *outcome).is_some() {
                mismatches.push(format!("{} {check}: reported twice", client.name));
            }
            match expected.get(&key) {
                None => mismatches.push(format!(
                    "{} {check}: {} but not in expected.txt{}",
                    client.name,
                    outcome.word(),
                    if reason.is_empty() {
                        String::new()
                    } else {
                        format!(" ({reason})")
                    }
                )),
                Some(want) if want != outcome => mismatches.push(format!(
                    "{} {check}: expected {}, got {}{}",
                    client.name,
                    want.word(),
                    outcome.word(),
                    if reason.is_empty() {
                        String::new()
                    } else {
                        format!(": {reason}")
                    }
                )),
                Some(_) => {}
            }
        }
    }
    for (client, check) in expected.keys() {
        if !seen.contains_key(&(client.clone(), check.clone())) {
            mismatches.push(format!("{client} {check}: in expected.txt but not run"));
        }
    }
    println!(
        "client matrix ({:.1} s):\n{summary}",
        total.elapsed().as_secs_f64()
    );
    let panics = server.panics();
    server.stop();
    assert!(
        panics.is_empty(),
        "the server panicked while the clients ran:\n{panics}"
    );
    assert!(
        mismatches.is_empty(),
        "the client matrix differs from tests/clients/expected.txt (update it and \
         docs/clients.md when a check changes):\n{}",
        mismatches.join("\n")
    );
}
