//! The `weir` server binary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// Weir: a streaming SQL database speaking the PostgreSQL protocol.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9347")]
    listen: SocketAddr,
    /// Directory for tables, views and checkpoints.
    #[arg(long, default_value = "./weir-data")]
    data_dir: PathBuf,
    /// Time between barriers (epoch boundaries) in milliseconds.
    #[arg(long, default_value_t = weir::engine::DEFAULT_BARRIER_INTERVAL_MS)]
    barrier_interval_ms: u64,
    /// Where checkpoints are written (default: <data-dir>/checkpoints).
    #[arg(long)]
    checkpoint_dir: Option<PathBuf>,
    /// Time between the tables' snapshots (native RocksDB checkpoints, taken when a table
    /// changed) in milliseconds: a restart opens the newest and replays only the changelog
    /// written after it.
    #[arg(long, default_value_t = weir::engine::DEFAULT_TABLE_SNAPSHOT_INTERVAL_MS)]
    table_snapshot_interval_ms: u64,
    /// A server-wide default for a session variable, e.g. `--set checkpoint.interval=1s`
    /// (repeatable). Sessions start with it and RESET returns to it.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_setting)]
    settings: Vec<(String, String)>,
    /// Memory budget of the state backend (RocksDB block cache and write buffers), e.g.
    /// `1GB` or `512MB` (default: a quarter of the machine's memory). Rows of tables, indexes
    /// and views beyond it live on disk; see `weir_catalog.memory`.
    #[arg(long, value_parser = weir::state::backend::parse_memory_size)]
    memory_limit: Option<u64>,
    /// Authentication of connections from a loopback address: `trust` (any user, no
    /// password) or `scram-sha-256` (a role's password).
    #[arg(long, default_value = "trust")]
    local_auth: weir::server::AuthMethod,
    /// Authentication of connections from any other address: `scram-sha-256` or `trust`.
    #[arg(long, default_value = "scram-sha-256")]
    host_auth: weir::server::AuthMethod,
    /// Creates (or updates) this superuser at start, with the password in
    /// `WEIR_SUPERUSER_PASSWORD`: the first role of a server that asks for passwords.
    #[arg(long, requires = "superuser_password")]
    superuser: Option<String>,
    /// The `--superuser`'s password.
    #[arg(
        long,
        env = "WEIR_SUPERUSER_PASSWORD",
        hide_env_values = true,
        requires = "superuser"
    )]
    superuser_password: Option<String>,
    /// TLS certificate chain (PEM): clients may then use `sslmode=require`.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) of `--tls-cert`.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
}

fn parse_setting(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| format!("expected NAME=VALUE, got \"{s}\""))
}

/// The signals that stop the server: SIGTERM and SIGINT (Ctrl-C).
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers; from now on these signals no longer kill the process.
    fn new() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// Waits for the first of them; returns its name.
    async fn recv(mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => "SIGTERM",
                _ = self.int.recv() => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(weir::THREAD_STACK_BYTES)
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        // Signals are caught from here on: one arriving while the data directory is opened
        // shuts the server down as soon as it is up.
        let signals = Signals::new()?;
        let mut config = weir::engine::EngineConfig::new(&args.data_dir);
        config.barrier_interval = Duration::from_millis(args.barrier_interval_ms.max(1));
        config.table_snapshot_interval = Duration::from_millis(args.table_snapshot_interval_ms);
        config.checkpoint_dir = args.checkpoint_dir.clone();
        config.defaults = args.settings.clone();
        if let Some(limit) = args.memory_limit {
            config.memory_limit = limit;
        }
        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(weir::server::auth::tls_acceptor(cert, key)?),
            _ => None,
        };
        let server_config = weir::server::ServerConfig {
            local_auth: args.local_auth,
            host_auth: args.host_auth,
            tls,
        };
        let engine = weir::open_with(config).await?;
        let listener = async {
            if let (Some(name), Some(password)) = (&args.superuser, &args.superuser_password) {
                engine.ensure_superuser(name, password)?;
            }
            Ok::<_, weir::error::Error>(tokio::net::TcpListener::bind(args.listen).await?)
        };
        let listener = match listener.await {
            Ok(l) => l,
            Err(e) => {
                if let Err(stop) = engine.shutdown().await {
                    tracing::warn!(error = %stop, "engine shutdown failed");
                }
                return Err(e);
            }
        };
        tracing::info!(listen = %args.listen, data_dir = %args.data_dir.display(), "weir started");
        let shutdown = async {
            let signal = signals.recv().await;
            tracing::info!(signal, "shutting down");
        };
        // Stops accepting and closes every connection once a signal arrives.
        let served =
            weir::server::run_with(listener, Arc::clone(&engine), server_config, shutdown).await;
        let stopped = engine.shutdown().await;
        // Normally the last reference: the store and the jobs' databases close here (else when
        // the statement still holding one ends, before the runtime is gone).
        drop(engine);
        served.and(stopped)
    });
    // Waits for blocking tasks still running (a statement whose connection was closed), so
    // that nothing uses the databases when the process exits.
    drop(runtime);
    match result {
        Ok(()) => {
            tracing::info!("stopped");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!(error = %e, "weir stopped");
            eprintln!("weir: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
