//! Password authentication (SCRAM-SHA-256) and TLS of the real server binary, seen through
//! `psql` as a user sees them: `sslmode=require` with the right password connects over TLS,
//! a wrong password, an unknown user and an unknown database are refused with PostgreSQL's
//! messages, roles made with `CREATE USER ... PASSWORD` log in, and roles survive a restart.
//!
//! Needs `psql` (postgresql-client) and `openssl` (for a throwaway certificate).

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::free_port;

/// A self-signed certificate and key for `localhost`, valid one day.
fn make_certificate(dir: &Path) -> (String, String) {
    let cert = dir.join("server.crt");
    let key = dir.join("server.key");
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl (install the openssl package)");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        cert.to_str().unwrap().to_string(),
        key.to_str().unwrap().to_string(),
    )
}

/// Starts `weir` asking loopback clients for passwords, with TLS and a first superuser.
fn start(dir: &Path, port: u16, cert: &str, key: &str) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--data-dir", dir.join("data").to_str().unwrap()])
        .args(["--local-auth", "scram-sha-256", "--superuser", "admin"])
        .args(["--tls-cert", cert, "--tls-key", key])
        .env("WEIR_SUPERUSER_PASSWORD", "first secret")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start weir")
}

/// Runs `sql` (or a psql meta-command) through psql; unaligned, tuples only.
fn psql(port: u16, user: &str, password: &str, db: &str, sslmode: &str, sql: &str) -> Output {
    Command::new("psql")
        .arg(format!(
            "host=127.0.0.1 port={port} user={user} dbname={db} sslmode={sslmode}"
        ))
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "10")
        .env_remove("PGSERVICE")
        .output()
        .expect("run psql (install postgresql-client)")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

/// Asserts psql succeeded and returns its output.
fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "psql failed: {}\n{}",
        stderr(&out),
        stdout(&out)
    );
    stdout(&out)
}

/// Asserts psql failed with `message` on stderr.
fn refused(out: Output, message: &str) {
    assert!(!out.status.success(), "psql succeeded: {}", stdout(&out));
    assert!(
        stderr(&out).contains(message),
        "expected \"{message}\" in: {}",
        stderr(&out)
    );
}

/// Waits until the admin can connect.
fn wait_ready(port: u16, child: &mut Child) {
    let start = Instant::now();
    loop {
        let out = psql(port, "admin", "first secret", "weir", "require", "SELECT 1");
        if out.status.success() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("server exited during start: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "server did not come up: {}",
            stderr(&out)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn stop(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().ok();
            child.wait().ok();
            panic!("the server did not stop");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn passwords_tls_and_roles_through_psql() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = make_certificate(dir.path());
    let port = free_port();
    let mut server = start(dir.path(), port, &cert, &key);
    wait_ready(port, &mut server);
    let admin = |sql: &str| ok(psql(port, "admin", "first secret", "weir", "require", sql));

    // The right password over TLS: psql reports an SSL connection.
    let info = admin("\\conninfo");
    assert!(info.contains("SSL connection"), "{info}");
    assert_eq!(admin("SELECT current_user"), "admin");
    // Without TLS the password is asked all the same (SCRAM never sends it).
    ok(psql(
        port,
        "admin",
        "first secret",
        "weir",
        "disable",
        "SELECT 1",
    ));

    // A wrong password, an unknown user, an unknown database.
    refused(
        psql(port, "admin", "wrong", "weir", "require", "SELECT 1"),
        "password authentication failed for user \"admin\"",
    );
    refused(
        psql(
            port,
            "nobody",
            "first secret",
            "weir",
            "require",
            "SELECT 1",
        ),
        "password authentication failed for user \"nobody\"",
    );
    refused(
        psql(port, "admin", "first secret", "nope", "require", "SELECT 1"),
        "database \"nope\" does not exist",
    );

    // A user made with SQL logs in with its password; it is no superuser.
    admin("CREATE USER alice WITH PASSWORD 'wonder land'");
    assert_eq!(
        ok(psql(
            port,
            "alice",
            "wonder land",
            "weir",
            "require",
            "SELECT session_user"
        )),
        "alice"
    );
    // PostgreSQL's read-only `is_superuser` tells the two apart.
    let alice = |sql: &str| ok(psql(port, "alice", "wonder land", "weir", "require", sql));
    assert_eq!(alice("SHOW is_superuser"), "off");
    assert_eq!(alice("SELECT current_setting('is_superuser')"), "off");
    assert_eq!(admin("SHOW is_superuser"), "on");
    refused(
        psql(
            port,
            "alice",
            "wonder land",
            "weir",
            "require",
            "CREATE ROLE mallory",
        ),
        "permission denied to create role",
    );
    // A user may change its own password; the old one stops working.
    ok(psql(
        port,
        "alice",
        "wonder land",
        "weir",
        "require",
        "ALTER USER alice PASSWORD 'looking glass'",
    ));
    refused(
        psql(port, "alice", "wonder land", "weir", "require", "SELECT 1"),
        "password authentication failed for user \"alice\"",
    );
    ok(psql(
        port,
        "alice",
        "looking glass",
        "weir",
        "disable",
        "SELECT 1",
    ));

    // NOLOGIN roles may not connect, whatever the password.
    admin("CREATE ROLE reader PASSWORD 'r'");
    refused(
        psql(port, "reader", "r", "weir", "require", "SELECT 1"),
        "role \"reader\" is not permitted to log in",
    );

    // Roles and their passwords survive a restart.
    stop(&mut server);
    let mut server = start(dir.path(), port, &cert, &key);
    wait_ready(port, &mut server);
    ok(psql(
        port,
        "alice",
        "looking glass",
        "weir",
        "require",
        "SELECT 1",
    ));
    refused(
        psql(port, "alice", "wonder land", "weir", "require", "SELECT 1"),
        "password authentication failed for user \"alice\"",
    );
    // The password is stored hashed: it appears nowhere in the data directory.
    for entry in walk(&dir.path().join("data")) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !bytes.windows(13).any(|w| w == b"looking glass"),
            "the password is in {}",
            entry.display()
        );
    }
    stop(&mut server);
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
