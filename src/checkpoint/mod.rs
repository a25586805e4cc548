//! Checkpoints: the per-job [`CheckpointCoordinator`], checkpoint storage (incremental RocksDB
//! snapshots or full in-memory snapshots written to files), recovery and restart strategies.
//!
//! The model is Flink's (Carbone et al., "Lightweight Asynchronous Snapshots for Distributed
//! Dataflows", 2015; Flink docs "Checkpointing" and "Task Failure Recovery"):
//!
//! ```text
//!  barrier clock closes epoch e ─► every job runs e ─► coordinator: trigger now? (interval,
//!  min_pause, max_concurrent) ─► sync phase: each state table's changes since the previous
//!  checkpoint are written to the job's RocksDB, which is flushed and hard-linked (native
//!  RocksDB checkpoint) ─► async phase: new SST files move into shared/, the manifest
//!  chk-<id>/_metadata.json is written atomically ─► COMPLETED (or EXPIRED after the timeout)
//! ```
//!
//! A checkpoint records the epoch it was taken at; the job's sources (table changelogs, whose
//! entries are stamped with their epoch) resume after that epoch on recovery.

pub mod coordinator;
pub mod restart;
pub mod storage;

use std::collections::BTreeMap;

pub use coordinator::{
    CheckpointCoordinator, CheckpointRecord, CheckpointStatus, History, StoppedWriter,
};
pub use restart::{RestartStrategy, RestartTracker};
pub use storage::{
    CheckpointStorage, Manifest, Restored, SnapshotSource, StateImage, StateTableEntry,
};

use crate::error::{Error, Result};
use crate::settings::parse_duration_ms;

/// Consistency of a job's checkpoints (setting `checkpoint.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointMode {
    /// Multi-input operators align barriers; recovery gives exactly the failure-free result.
    ExactlyOnce,
    /// Barriers are not aligned; after recovery records may count twice, never be lost.
    AtLeastOnce,
}

/// Where a job keeps its state (setting `state.backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateBackendKind {
    /// State tables in memory; each checkpoint writes a full snapshot file.
    Memory,
    /// State tables flushed to a per-job RocksDB; checkpoints are incremental (new SSTs only).
    RocksDb,
}

/// A job's checkpoint and restart settings, parsed from the values it captured.
#[derive(Debug, Clone)]
pub struct JobSettings {
    /// `checkpoint.interval` in ms; 0 = checkpointing off.
    pub interval_ms: u64,
    /// `checkpoint.mode`.
    pub mode: CheckpointMode,
    /// `checkpoint.timeout` in ms.
    pub timeout_ms: u64,
    /// `checkpoint.min_pause` in ms.
    pub min_pause_ms: u64,
    /// `checkpoint.max_concurrent` (checkpoints in flight).
    pub max_concurrent: usize,
    /// `checkpoint.tolerable_failures` (consecutive failed or expired checkpoints).
    pub tolerable_failures: u32,
    /// `checkpoint.retained` (completed checkpoints kept).
    pub retained: usize,
    /// `state.backend`.
    pub backend: StateBackendKind,
    /// `restart.*`.
    pub restart: RestartStrategy,
    /// `streaming.parallelism`: instances of each keyed operator (1 for views created before
    /// the setting existed, so their state tables keep their names).
    pub parallelism: usize,
    /// The captured values as text, as `weir_catalog.jobs` and EXPLAIN show them.
    pub values: BTreeMap<String, String>,
}

impl JobSettings {
    /// Parses captured settings (normalized by [`crate::settings`]); missing names take
    /// their defaults.
    ///
    /// # Errors
    /// `22023` when a value does not parse (a corrupt catalog entry).
    pub fn from_values(values: &BTreeMap<String, String>) -> Result<Self> {
        let text = |name: &str, default: &str| -> String {
            values
                .get(name)
                .cloned()
                .unwrap_or_else(|| default.to_string())
        };
        let ms = |name: &str, default: &str| -> Result<u64> {
            parse_duration_ms(&text(name, default))
                .map_err(|m| Error::setting(format!("{name}: {m}")))
        };
        let int = |name: &str, default: &str| -> Result<u64> {
            text(name, default)
                .parse::<u64>()
                .map_err(|_| Error::setting(format!("{name}: expected an integer")))
        };
        let float = |name: &str, default: &str| -> Result<f64> {
            text(name, default)
                .parse::<f64>()
                .map_err(|_| Error::setting(format!("{name}: expected a number")))
        };
        let interval_ms = ms("checkpoint.interval", "off")?;
        let mode = match text("checkpoint.mode", "exactly_once").as_str() {
            "at_least_once" => CheckpointMode::AtLeastOnce,
            _ => CheckpointMode::ExactlyOnce,
        };
        let backend = match text("state.backend", "rocksdb").as_str() {
            "memory" => StateBackendKind::Memory,
            _ => StateBackendKind::RocksDb,
        };
        let default_strategy = if interval_ms > 0 {
            "exponential-delay"
        } else {
            "none"
        };
        let restart = match text("restart.strategy", default_strategy).as_str() {
            "fixed-delay" => RestartStrategy::FixedDelay {
                attempts: int("restart.attempts", "1")? as u32,
                delay_ms: ms("restart.delay", "1s")?,
            },
            "failure-rate" => RestartStrategy::FailureRate {
                max_failures: int("restart.failure_rate.max_failures", "1")? as u32,
                interval_ms: ms("restart.failure_rate.interval", "1min")?,
                delay_ms: ms("restart.delay", "1s")?,
            },
            "exponential-delay" => RestartStrategy::ExponentialDelay {
                initial_ms: ms("restart.backoff.initial", "1s")?,
                max_ms: ms("restart.backoff.max", "1min")?,
                multiplier: float("restart.backoff.multiplier", "1.5")?,
                jitter: float("restart.backoff.jitter", "0.1")?,
            },
            _ => RestartStrategy::None,
        };
        Ok(JobSettings {
            interval_ms,
            mode,
            timeout_ms: ms("checkpoint.timeout", "10min")?,
            min_pause_ms: ms("checkpoint.min_pause", "0")?,
            max_concurrent: int("checkpoint.max_concurrent", "1")?.max(1) as usize,
            tolerable_failures: int("checkpoint.tolerable_failures", "0")? as u32,
            retained: int("checkpoint.retained", "1")?.max(1) as usize,
            backend,
            restart,
            parallelism: int("streaming.parallelism", "1")?.clamp(1, 64) as usize,
            values: values.clone(),
        })
    }
}
