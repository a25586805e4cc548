//! A throwaway PostgreSQL server for tests that check Weir's answers against PostgreSQL's.
//!
//! `WEIR_PG_URL` (a libpq connection string) names a running server to use; otherwise one is
//! started from the installed PostgreSQL binaries (`/usr/lib/postgresql/<version>/bin`, the
//! Debian `postgresql` package) in a temporary directory, as the `postgres` user when the
//! tests run as root, and stopped when dropped.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A PostgreSQL server for the test's lifetime.
pub struct Postgres {
    /// Connection string.
    pub url: String,
    /// Data directory and `pg_ctl`, when this test started the server.
    owned: Option<(tempfile::TempDir, PathBuf, bool)>,
}

fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Runs a PostgreSQL binary, as `postgres` when we are root (initdb refuses root).
fn run(bin: &std::path::Path, args: &[&str], as_postgres: bool) -> Result<(), String> {
    let out = if as_postgres {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(bin)
            .args(args)
            .output()
    } else {
        Command::new(bin).args(args).output()
    }
    .map_err(|e| format!("{}: {e}", bin.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} {args:?} failed: {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl Postgres {
    /// Connects to `WEIR_PG_URL` or starts a server.
    ///
    /// # Panics
    /// When neither is possible: these tests need PostgreSQL (`apt-get install postgresql`).
    pub fn start() -> Postgres {
        if let Ok(url) = std::env::var("WEIR_PG_URL") {
            return Postgres { url, owned: None };
        }
        let bin = bin_dir().expect(
            "PostgreSQL is needed to check answers against it: install the postgresql package \
             (.ci/run does) or set WEIR_PG_URL",
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let root = is_root();
        let data = dir.path().join("data");
        let path = |p: &std::path::Path| p.to_string_lossy().to_string();
        if root {
            let status = Command::new("chown")
                .args(["-R", "postgres", &path(dir.path())])
                .status()
                .expect("chown");
            assert!(status.success(), "chown of the PostgreSQL directory failed");
        }
        run(
            &bin.join("initdb"),
            &[
                "-D",
                &path(&data),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            root,
        )
        .expect("initdb");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c TimeZone=UTC",
            path(dir.path())
        );
        run(
            &bin.join("pg_ctl"),
            &[
                "-D",
                &path(&data),
                "-o",
                &options,
                "-l",
                &path(&dir.path().join("log")),
                "-w",
                "start",
            ],
            root,
        )
        .expect("pg_ctl start");
        Postgres {
            url: format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"),
            owned: Some((dir, bin.join("pg_ctl"), root)),
        }
    }

    /// A connected client.
    pub async fn client(&self) -> tokio_postgres::Client {
        let mut last = None;
        for _ in 0..50 {
            match tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await {
                Ok((client, conn)) => {
                    tokio::spawn(async move {
                        let _ = conn.await;
                    });
                    return client;
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("cannot connect to PostgreSQL at {}: {last:?}", self.url);
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some((dir, pg_ctl, root)) = &self.owned {
            let data = dir.path().join("data").to_string_lossy().to_string();
            let _ = run(pg_ctl, &["-D", &data, "-m", "immediate", "stop"], *root);
        }
    }
}
