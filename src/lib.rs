//! Weir: a streaming SQL database. Clients speak the PostgreSQL wire protocol; tables are
//! durable changelogs in RocksDB; materialized views are compiled from DataFusion's logical
//! plans into dataflows of Arrow change batches and maintained incrementally, epoch by epoch.
//!
//! ```text
//!   psql / drivers ──pgwire──► server ─► session ─► sql ─┬─► engine.write ─► changelog (RocksDB)
//!                                                        ├─► DataFusion SELECT over snapshots
//!                                                        └─► CREATE MATERIALIZED VIEW ─► sql::stream_plan
//!   barrier clock ─► closes epoch e ─► every job runs e (scan ─► filter/project ─► join/agg ─►
//!                   materialize) ─► all views visible at e together
//! ```
//!
//! Module map, top down (dependencies point down only): [`server`] (pgwire), [`session`]
//! (connections, statement dispatch), [`sql`] (planning, the streaming planner), [`engine`]
//! (tables, epochs, jobs), [`stream`] (operators, jobs, stream plans), [`checkpoint`], [`state`]
//! (store, state backend and state tables), [`catalog`], [`settings`] (session variables),
//! [`common`] (epochs, change batches), [`error`] (SQLSTATE-carrying errors).

pub mod catalog;
pub mod checkpoint;
pub mod common;
pub mod connectors;
pub mod engine;
pub mod error;
pub mod failpoint;
pub mod server;
pub mod session;
pub mod settings;
pub mod sql;
pub mod state;
pub mod stream;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The stack of each thread that plans or evaluates SQL (the runtime's workers and blocking
/// threads, the dataflow's parallel instances): 64 MiB of address space, of which a thread
/// touches only what its recursion needs. It holds expressions of
/// [`sql::parse::MAX_EXPRESSION_DEPTH`] levels (a thread's default, 2 MiB, overflowed at
/// about 700 and aborted the process).
pub const THREAD_STACK_BYTES: usize = 64 << 20;

pub use engine::Engine;
pub use error::{Error, Result};

/// Opens the data directory, replays tables, recompiles views and starts the barrier clock.
///
/// # Errors
/// [`Error::State`] when the directory is in use by another server or unreadable.
pub async fn open(data_dir: &Path, barrier_interval: Duration) -> Result<Arc<Engine>> {
    let mut config = engine::EngineConfig::new(data_dir);
    config.barrier_interval = barrier_interval;
    open_with(config).await
}

/// Opens with a full configuration (checkpoint directory, server-wide setting defaults):
/// replays tables, recovers every view from its latest checkpoint, starts the barrier clock.
///
/// # Errors
/// [`Error::State`] when the directory is in use or unreadable; `22023`/`42704` for an
/// invalid default.
pub async fn open_with(config: engine::EngineConfig) -> Result<Arc<Engine>> {
    let engine = Engine::open_with(config)?;
    session::recover_views(&engine).await?;
    engine.start_barrier_clock();
    engine.start_sources()?;
    Ok(engine)
}

/// Runs a server on `listen` over `data_dir` until `shutdown` resolves, then closes the
/// connections and shuts the engine down ([`Engine::shutdown`]).
///
/// # Errors
/// Startup errors (data directory locked, address in use); errors of the shutdown.
pub async fn serve(
    listen: SocketAddr,
    data_dir: &Path,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let engine = open(
        data_dir,
        Duration::from_millis(engine::DEFAULT_BARRIER_INTERVAL_MS),
    )
    .await?;
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            if let Err(stop) = engine.shutdown().await {
                tracing::warn!(error = %stop, "engine shutdown failed");
            }
            return Err(e.into());
        }
    };
    let served = server::run(listener, Arc::clone(&engine), shutdown).await;
    let stopped = engine.shutdown().await;
    served.and(stopped)
}

/// The process's allocator: jemalloc, serving Rust and, through the unprefixed `malloc`,
/// RocksDB's C++ allocations too. Under glibc's malloc the 10 M-row scaling bench peaked
/// 28% higher (per-thread arenas keep freed memory; see `docs/performance.md`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read when the allocator starts (the `MALLOC_CONF` environment variable
/// still overrides them): a background thread purges freed pages, dirty pages go back to the
/// OS after 1 s instead of 10 s, and none are kept lazily freed ("muzzy"). Options are
/// described in jemalloc's manual, section TUNING / `opt.*`.
#[unsafe(no_mangle)]
#[used]
#[allow(non_upper_case_globals)]
static malloc_conf: &[u8; 60] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";
