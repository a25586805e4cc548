//! The `weir` server binary.

use std::net::SocketAddr;
use std::path::PathBuf;
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
    /// A server-wide default for a session variable, e.g. `--set checkpoint.interval=1s`
    /// (repeatable). Sessions start with it and RESET returns to it.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_setting)]
    settings: Vec<(String, String)>,
}

fn parse_setting(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| format!("expected NAME=VALUE, got \"{s}\""))
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
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let mut config = weir::engine::EngineConfig::new(&args.data_dir);
        config.barrier_interval = Duration::from_millis(args.barrier_interval_ms.max(1));
        config.checkpoint_dir = args.checkpoint_dir.clone();
        config.defaults = args.settings.clone();
        let engine = weir::open_with(config).await?;
        let listener = tokio::net::TcpListener::bind(args.listen).await?;
        tracing::info!(listen = %args.listen, data_dir = %args.data_dir.display(), "weir started");
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
            tracing::info!("shutting down");
        };
        weir::server::run(listener, engine, shutdown).await
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "weir stopped");
            eprintln!("weir: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
