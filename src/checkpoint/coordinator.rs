//! The per-job checkpoint coordinator: when to trigger, what is in flight, timeouts, failures.
//!
//! Trigger policy (Flink's `CheckpointRequestDecider`, restated): at an epoch boundary a job
//! triggers a checkpoint when checkpointing is on, at least `checkpoint.interval` has passed
//! since the previous trigger (or since the job started), at least `checkpoint.min_pause` has
//! passed since the previous checkpoint *completed*, and fewer than
//! `checkpoint.max_concurrent` are in flight. A checkpoint in flight longer than
//! `checkpoint.timeout` is aborted (`EXPIRED`) and its files dropped; each failed or expired
//! checkpoint counts against `checkpoint.tolerable_failures` (consecutive), a completed one
//! resets the count.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracing::{debug, info, warn};

use super::JobSettings;
use super::storage::{
    CheckpointStorage, Manifest, PendingSnapshot, Restored, SnapshotSource, StateTableEntry,
};
use crate::common::Epoch;
use crate::error::{Error, Result};
use crate::state::StateBackend;

/// Records kept per job for `weir_catalog.checkpoints`.
const HISTORY: usize = 1000;

/// A checkpoint's state, as `weir_catalog.checkpoints` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointStatus {
    /// Triggered; files are being written.
    InProgress,
    /// Its manifest is written: recovery may use it.
    Completed,
    /// It failed (I/O error, or the job restarted while it ran).
    Failed,
    /// It outlived `checkpoint.timeout` and was aborted.
    Expired,
}

impl CheckpointStatus {
    /// The upper-case name shown in system tables.
    pub fn as_str(&self) -> &'static str {
        match self {
            CheckpointStatus::InProgress => "IN_PROGRESS",
            CheckpointStatus::Completed => "COMPLETED",
            CheckpointStatus::Failed => "FAILED",
            CheckpointStatus::Expired => "EXPIRED",
        }
    }
}

/// One row of `weir_catalog.checkpoints`.
#[derive(Debug, Clone)]
pub struct CheckpointRecord {
    /// The view's name.
    pub job: String,
    /// Checkpoint id (increasing per job).
    pub checkpoint_id: u64,
    /// The epoch it snapshots.
    pub epoch: u64,
    /// Its status.
    pub status: CheckpointStatus,
    /// Trigger time, ms since the Unix epoch.
    pub trigger_unix_ms: i64,
    /// End time, ms since the Unix epoch (None while in progress).
    pub end_unix_ms: Option<i64>,
    /// Time from trigger to end (ms).
    pub duration_ms: Option<i64>,
    /// Time spent aligning barriers (ms).
    pub alignment_ms: i64,
    /// Full size of the state (bytes).
    pub state_bytes: Option<i64>,
    /// Bytes this checkpoint wrote.
    pub persisted_bytes: Option<i64>,
    /// Why it failed or expired.
    pub failure_reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flight {
    Running,
    Aborted,
    Done,
}

struct InFlight {
    id: u64,
    epoch: Epoch,
    trigger: Instant,
    state: Arc<Mutex<Flight>>,
}

/// State shared between the coordinator and its checkpoints' async phases.
#[derive(Default)]
struct Shared {
    records: VecDeque<CheckpointRecord>,
    in_flight: Vec<InFlight>,
    last_completion: Option<Instant>,
    consecutive_failures: u32,
    last_completed: Option<(u64, Epoch)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Shared {
    fn record(&mut self, id: u64) -> Option<&mut CheckpointRecord> {
        self.records
            .iter_mut()
            .rev()
            .find(|r| r.checkpoint_id == id)
    }

    fn finish(&mut self, id: u64, status: CheckpointStatus, reason: Option<String>) {
        self.in_flight.retain(|f| f.id != id);
        if status == CheckpointStatus::Completed {
            self.consecutive_failures = 0;
            self.last_completion = Some(Instant::now());
        } else {
            self.consecutive_failures += 1;
        }
        let now = unix_ms();
        if let Some(r) = self.record(id) {
            r.status = status;
            r.end_unix_ms = Some(now);
            r.duration_ms = Some(now - r.trigger_unix_ms);
            r.failure_reason = reason;
        }
    }
}

/// A live view of one job's checkpoint history, readable without the dataflow lock.
#[derive(Clone)]
pub struct History(Arc<Mutex<Shared>>);

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("History")
    }
}

impl History {
    /// The records, oldest first.
    pub fn records(&self) -> Vec<CheckpointRecord> {
        lock(&self.0).records.iter().cloned().collect()
    }

    /// The latest completed checkpoint (id, epoch).
    pub fn last_completed(&self) -> Option<(u64, Epoch)> {
        lock(&self.0).last_completed
    }
}

/// The job's state-writer thread and the channel that feeds it.
struct Writer {
    tx: std::sync::mpsc::Sender<WriteTask>,
    thread: std::thread::JoinHandle<()>,
}

/// The state-writer thread of a stopped coordinator, to be joined outside any lock the thread
/// needs ([`CheckpointCoordinator::stop`]).
#[must_use = "the thread is only waited for by `join`"]
pub struct StoppedWriter {
    job: String,
    thread: std::thread::JoinHandle<()>,
}

impl std::fmt::Debug for StoppedWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoppedWriter")
            .field("job", &self.job)
            .finish()
    }
}

impl StoppedWriter {
    /// Waits until the state writer has written every checkpoint handed to it and its upload
    /// threads have finished.
    ///
    /// # Errors
    /// [`Error::Internal`] when the thread panicked.
    pub fn join(self) -> Result<()> {
        self.thread
            .join()
            .map_err(|_| Error::Internal(format!("the state writer of job {} panicked", self.job)))
    }
}

/// Coordinates one job's checkpoints.
///
/// It owns the job's state-writer thread (started with the first checkpoint), which owns the
/// checkpoints' upload threads. [`CheckpointCoordinator::stop`] or dropping the coordinator
/// stops the writer after the checkpoints already handed to it and joins it.
pub struct CheckpointCoordinator {
    job: String,
    settings: JobSettings,
    storage: Arc<Mutex<CheckpointStorage>>,
    shared: Arc<Mutex<Shared>>,
    next_id: u64,
    last_trigger: Instant,
    writer: Option<Writer>,
    /// Set by [`CheckpointCoordinator::stop`]: no checkpoint is triggered any more.
    stopped: bool,
}

impl std::fmt::Debug for CheckpointCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointCoordinator")
            .field("job", &self.job)
            .field("next_id", &self.next_id)
            .finish()
    }
}

impl CheckpointCoordinator {
    /// A coordinator over `storage`; its history starts with the completed checkpoints found
    /// there.
    pub fn new(job: String, settings: JobSettings, storage: CheckpointStorage) -> Self {
        let mut shared = Shared::default();
        for m in storage.completed() {
            shared.records.push_back(CheckpointRecord {
                job: job.clone(),
                checkpoint_id: m.id,
                epoch: m.epoch,
                status: CheckpointStatus::Completed,
                trigger_unix_ms: m.trigger_unix_ms,
                end_unix_ms: Some(m.end_unix_ms),
                duration_ms: Some(m.end_unix_ms - m.trigger_unix_ms),
                alignment_ms: 0,
                state_bytes: Some(m.state_bytes as i64),
                persisted_bytes: Some(m.persisted_bytes as i64),
                failure_reason: None,
            });
            shared.last_completed = Some((m.id, Epoch(m.epoch)));
        }
        let next_id = storage.max_id() + 1;
        CheckpointCoordinator {
            job,
            settings,
            storage: Arc::new(Mutex::new(storage)),
            shared: Arc::new(Mutex::new(shared)),
            next_id,
            last_trigger: Instant::now(),
            writer: None,
            stopped: false,
        }
    }

    /// Stops checkpointing: no checkpoint is triggered afterwards, and the state writer's
    /// channel is closed, so the writer ends once it has handled the checkpoints already
    /// triggered (their uploads included). Returns the writer thread, if one was started, for
    /// the caller to join once it holds no lock the thread needs (the coordinator's storage
    /// and history locks). Idempotent.
    pub fn stop(&mut self) -> Option<StoppedWriter> {
        self.stopped = true;
        self.writer.take().map(|w| {
            drop(w.tx);
            StoppedWriter {
                job: self.job.clone(),
                thread: w.thread,
            }
        })
    }

    /// [`CheckpointCoordinator::stop`], then waits for the state writer to finish.
    ///
    /// # Errors
    /// [`Error::Internal`] when the state writer panicked.
    pub fn shutdown(&mut self) -> Result<()> {
        match self.stop() {
            Some(w) => w.join(),
            None => Ok(()),
        }
    }

    /// The job's settings.
    pub fn settings(&self) -> &JobSettings {
        &self.settings
    }

    /// Replaces the settings (`ALTER MATERIALIZED VIEW ... SET`); the interval counts from now.
    pub fn set_settings(&mut self, settings: JobSettings) {
        self.settings = settings;
        self.last_trigger = Instant::now();
    }

    /// The job's checkpoint storage.
    pub fn storage(&self) -> &Arc<Mutex<CheckpointStorage>> {
        &self.storage
    }

    /// A live handle on the checkpoint history.
    pub fn history(&self) -> History {
        History(self.shared.clone())
    }

    /// Applies the retention policy (see [`CheckpointStorage::retain_policy`]).
    pub fn retain_policy(&self, bounds: &[u64]) -> Vec<u64> {
        lock(&self.storage).retain_policy(self.settings.retained, bounds)
    }

    /// The epochs of the checkpoints in flight (triggered, not yet completed or aborted).
    pub fn in_flight_epochs(&self) -> Vec<u64> {
        lock(&self.shared)
            .in_flight
            .iter()
            .map(|f| f.epoch.0)
            .collect()
    }

    /// Discards the completed checkpoints whose state tables are not exactly `names` (see
    /// [`CheckpointStorage::discard_mismatched`]); returns their ids.
    pub fn discard_mismatched(&self, names: &std::collections::BTreeSet<String>) -> Vec<u64> {
        lock(&self.storage).discard_mismatched(names)
    }

    /// Completed checkpoints (id, epoch), oldest first.
    pub fn completed(&self) -> Vec<(u64, Epoch)> {
        lock(&self.storage)
            .completed()
            .map(|m| (m.id, Epoch(m.epoch)))
            .collect()
    }

    /// Consecutive failed or expired checkpoints exceed `checkpoint.tolerable_failures`.
    pub fn failures_exceeded(&self) -> bool {
        lock(&self.shared).consecutive_failures > self.settings.tolerable_failures
    }

    /// Starts counting failures afresh (after a restart).
    pub fn reset_failures(&self) {
        lock(&self.shared).consecutive_failures = 0;
    }

    /// Whether a checkpoint is due at `now` (see the module docs for the rules).
    pub fn should_trigger(&self, now: Instant) -> bool {
        let s = &self.settings;
        if s.interval_ms == 0 || self.stopped {
            return false;
        }
        if now.duration_since(self.last_trigger) < Duration::from_millis(s.interval_ms) {
            return false;
        }
        let shared = lock(&self.shared);
        if shared.in_flight.len() >= s.max_concurrent {
            return false;
        }
        if let Some(done) = shared.last_completion
            && now.duration_since(done) < Duration::from_millis(s.min_pause_ms)
        {
            return false;
        }
        true
    }

    /// Aborts checkpoints in flight longer than `checkpoint.timeout` (status `EXPIRED`).
    pub fn expire(&self, now: Instant) {
        let timeout = Duration::from_millis(self.settings.timeout_ms);
        let mut shared = lock(&self.shared);
        let expired: Vec<(u64, Arc<Mutex<Flight>>)> = shared
            .in_flight
            .iter()
            .filter(|f| now.duration_since(f.trigger) > timeout)
            .map(|f| (f.id, f.state.clone()))
            .collect();
        for (id, state) in expired {
            let mut st = lock(&state);
            if *st == Flight::Running {
                *st = Flight::Aborted;
                drop(st);
                warn!(job = %self.job, checkpoint = id, "checkpoint expired");
                shared.finish(
                    id,
                    CheckpointStatus::Expired,
                    Some(format!(
                        "checkpoint expired before completing: checkpoint.timeout is {} ms",
                        self.settings.timeout_ms
                    )),
                );
            }
        }
    }

    /// Aborts every checkpoint in flight (status `FAILED`, with `reason`), e.g. on restart.
    pub fn abort_all(&self, reason: &str) {
        let mut shared = lock(&self.shared);
        let flights: Vec<(u64, Arc<Mutex<Flight>>)> = shared
            .in_flight
            .iter()
            .map(|f| (f.id, f.state.clone()))
            .collect();
        for (id, state) in flights {
            let mut st = lock(&state);
            if *st == Flight::Running {
                *st = Flight::Aborted;
                drop(st);
                shared.finish(id, CheckpointStatus::Failed, Some(reason.to_string()));
            }
        }
        // Aborts for restarts do not count against tolerable failures.
        shared.consecutive_failures = 0;
    }

    /// Triggers a checkpoint of `epoch`: runs the sync phase now (a native checkpoint of the
    /// job's live RocksDB instance: flush and hard links; or the full image for `memory`) and
    /// the async phase on its own thread. `tables` are the job's state tables (names, ids,
    /// counts), `offsets` the sources' positions.
    ///
    /// A failure of the sync phase is recorded as a `FAILED` checkpoint. `alignment_ms` is
    /// how long the barrier of `epoch` waited at the job's exchanges (shown as the record's
    /// `alignment_ms`).
    pub fn trigger(
        &mut self,
        epoch: Epoch,
        source: SnapshotSource,
        tables: Vec<StateTableEntry>,
        offsets: BTreeMap<u64, u64>,
        alignment_ms: i64,
    ) {
        let now = Instant::now();
        self.last_trigger = now;
        let id = self.next_id;
        self.next_id += 1;
        let trigger_unix_ms = unix_ms();
        let state = Arc::new(Mutex::new(Flight::Running));
        {
            let mut shared = lock(&self.shared);
            shared.records.push_back(CheckpointRecord {
                job: self.job.clone(),
                checkpoint_id: id,
                epoch: epoch.0,
                status: CheckpointStatus::InProgress,
                trigger_unix_ms,
                end_unix_ms: None,
                duration_ms: None,
                alignment_ms,
                state_bytes: None,
                persisted_bytes: None,
                failure_reason: None,
            });
            while shared.records.len() > HISTORY {
                shared.records.pop_front();
            }
            shared.in_flight.push(InFlight {
                id,
                epoch,
                trigger: now,
                state: state.clone(),
            });
        }
        debug!(job = %self.job, checkpoint = id, epoch = epoch.0, "checkpoint triggered");
        if self.stopped {
            self.fail(id, &state, "checkpointing was stopped".into());
            return;
        }
        let (pending, generation) = {
            let mut storage = lock(&self.storage);
            (storage.snapshot(id, source), storage.generation())
        };
        let pending = match pending {
            Ok(p) => p,
            Err(e) => {
                self.fail(id, &state, e.to_string());
                return;
            }
        };
        let task = WriteTask {
            id,
            epoch,
            pending,
            manifest: Manifest {
                id,
                epoch: epoch.0,
                backend: String::new(),
                files: vec![],
                state_bytes: 0,
                persisted_bytes: 0,
                trigger_unix_ms,
                end_unix_ms: 0,
                offsets,
                state_format: crate::checkpoint::storage::STATE_FORMAT,
                tables,
            },
            state,
            generation,
        };
        if self.writer.is_none() {
            let (tx, rx) = std::sync::mpsc::channel::<WriteTask>();
            let storage = self.storage.clone();
            let shared = self.shared.clone();
            let job = self.job.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("state-writer-{}", self.job))
                .spawn(move || state_writer(job, storage, shared, rx));
            match spawned {
                Ok(thread) => self.writer = Some(Writer { tx, thread }),
                Err(e) => {
                    let reason = format!("cannot start the state writer: {e}");
                    self.fail(task.id, &task.state, reason);
                    return;
                }
            }
        }
        if let Some(w) = &self.writer
            && let Err(e) = w.tx.send(task)
        {
            let task = e.0;
            // The writer is gone (it panicked): reap it; the next checkpoint starts a new one.
            if let Some(w) = self.writer.take() {
                drop(w.tx);
                if w.thread.join().is_err() {
                    warn!(job = %self.job, "the state writer panicked");
                }
            }
            lock(&self.storage).discard_pending(task.pending);
            self.fail(task.id, &task.state, "the state writer stopped".into());
        }
    }

    fn fail(&self, id: u64, state: &Arc<Mutex<Flight>>, reason: String) {
        *lock(state) = Flight::Done;
        warn!(job = %self.job, checkpoint = id, reason = %reason, "checkpoint failed");
        lock(&self.shared).finish(id, CheckpointStatus::Failed, Some(reason));
    }

    /// Keeps the completed checkpoints in `keep` and deletes the rest.
    pub fn retain(&self, keep: &std::collections::BTreeSet<u64>) {
        lock(&self.storage).retain(keep);
    }

    /// Restores checkpoint `id`: as the job's live database (a sibling of `root`), or as rows.
    ///
    /// # Errors
    /// [`crate::Error::State`] when the checkpoint cannot be read.
    pub fn restore(&self, id: u64, root: Option<&StateBackend>) -> Result<Restored> {
        lock(&self.storage).restore(id, root)
    }

    /// Deletes checkpoint `id`, which could not be restored (see
    /// [`super::storage::CheckpointStorage::discard_damaged`]).
    pub fn discard_damaged(&self, id: u64) {
        lock(&self.storage).discard_damaged(id);
    }

    /// Deletes the job's checkpoints and working state (the view was dropped).
    pub fn destroy(&self) {
        lock(&self.storage).destroy();
    }

    /// Starts from empty state: a fresh live database, a sibling of `root`.
    ///
    /// # Errors
    /// [`crate::Error::State`] on I/O errors.
    pub fn reset_working(&self, root: &StateBackend) -> Result<Arc<StateBackend>> {
        lock(&self.storage).reset_working(root)
    }
}

impl Drop for CheckpointCoordinator {
    /// Stops the state writer and joins it (see [`CheckpointCoordinator::stop`]).
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            warn!(job = %self.job, error = %e, "state writer stopped abnormally");
        }
    }
}

/// What the sync phase hands to the job's state writer.
struct WriteTask {
    id: u64,
    epoch: Epoch,
    pending: PendingSnapshot,
    manifest: Manifest,
    state: Arc<Mutex<Flight>>,
    generation: u64,
}

/// Joins the upload threads that have finished (all of them with `all`), logging panics.
fn reap_uploads(job: &str, uploads: &mut Vec<std::thread::JoinHandle<()>>, all: bool) {
    let mut running = Vec::with_capacity(uploads.len());
    for handle in uploads.drain(..) {
        if all || handle.is_finished() {
            if handle.join().is_err() {
                warn!(job = %job, "a checkpoint upload panicked");
            }
        } else {
            running.push(handle);
        }
    }
    *uploads = running;
}

/// The job's state writer: takes each checkpoint's snapshot in trigger order and hands it to
/// an upload thread (so that up to `max_concurrent` uploads overlap). Runs until the coordinator closes the channel
/// (it is stopped or dropped), then joins the upload threads still running.
fn state_writer(
    job: String,
    storage: Arc<Mutex<CheckpointStorage>>,
    shared: Arc<Mutex<Shared>>,
    rx: std::sync::mpsc::Receiver<WriteTask>,
) {
    let mut uploads: Vec<std::thread::JoinHandle<()>> = Vec::new();
    while let Ok(task) = rx.recv() {
        reap_uploads(&job, &mut uploads, false);
        let fail = |reason: String| {
            *lock(&task.state) = Flight::Done;
            warn!(job = %job, checkpoint = task.id, reason = %reason, "checkpoint failed");
            lock(&shared).finish(task.id, CheckpointStatus::Failed, Some(reason));
        };
        let pending = task.pending;
        {
            let mut st = lock(&storage);
            if st.generation() != task.generation {
                // The job was restored meanwhile: the snapshot is of the old state.
                st.discard_pending(pending);
                drop(st);
                if *lock(&task.state) == Flight::Running {
                    fail("the job was restarted before the checkpoint completed".into());
                }
                continue;
            }
        }
        let (storage2, shared2, job2, state, manifest, epoch) = (
            storage.clone(),
            shared.clone(),
            job.clone(),
            task.state.clone(),
            task.manifest,
            task.epoch,
        );
        let id = task.id;
        let spawned = std::thread::Builder::new()
            .name(format!("checkpoint-{id}"))
            .spawn(move || async_phase(job2, storage2, shared2, state, manifest, pending, epoch));
        match spawned {
            Ok(handle) => uploads.push(handle),
            Err(e) => {
                // The snapshot went with the closure; the checkpoint is marked failed here.
                let reason = format!("cannot start a checkpoint upload: {e}");
                *lock(&task.state) = Flight::Done;
                warn!(job = %job, checkpoint = id, reason = %reason, "checkpoint failed");
                lock(&shared).finish(id, CheckpointStatus::Failed, Some(reason));
            }
        }
    }
    reap_uploads(&job, &mut uploads, true);
}

/// The async phase: move files into checkpoint storage, then commit the manifest unless the
/// checkpoint was aborted meanwhile.
fn async_phase(
    job: String,
    storage: Arc<Mutex<CheckpointStorage>>,
    shared: Arc<Mutex<Shared>>,
    state: Arc<Mutex<Flight>>,
    mut manifest: Manifest,
    pending: PendingSnapshot,
    epoch: Epoch,
) {
    let id = manifest.id;
    let injected = crate::failpoint::eval("checkpoint::async_phase");
    if let Some(reason) = injected {
        lock(&storage).discard_pending(pending);
        *lock(&state) = Flight::Done;
        warn!(job = %job, checkpoint = id, reason = %reason, "checkpoint failed");
        lock(&shared).finish(id, CheckpointStatus::Failed, Some(reason));
        return;
    }
    let mut storage = lock(&storage);
    if *lock(&state) == Flight::Aborted {
        // Checked under the storage lock: a restore (which aborts first) cannot interleave.
        storage.discard_pending(pending);
        return;
    }
    let persisted = storage.persist(manifest.clone(), pending);
    let persisted = match persisted {
        Ok(m) => m,
        Err(e) => {
            drop(storage);
            *lock(&state) = Flight::Done;
            warn!(job = %job, checkpoint = id, error = %e, "checkpoint failed");
            lock(&shared).finish(id, CheckpointStatus::Failed, Some(e.to_string()));
            return;
        }
    };
    let mut st = lock(&state);
    if *st == Flight::Aborted {
        storage.discard(&persisted);
        return;
    }
    manifest = persisted;
    manifest.end_unix_ms = unix_ms();
    let (state_bytes, persisted_bytes) = (manifest.state_bytes, manifest.persisted_bytes);
    match storage.commit(manifest) {
        Ok(()) => {
            *st = Flight::Done;
            drop(st);
            drop(storage);
            let mut sh = lock(&shared);
            sh.finish(id, CheckpointStatus::Completed, None);
            sh.last_completed = Some((id, epoch));
            if let Some(r) = sh.record(id) {
                r.state_bytes = Some(state_bytes as i64);
                r.persisted_bytes = Some(persisted_bytes as i64);
            }
            info!(
                job = %job,
                checkpoint = id,
                epoch = epoch.0,
                state_bytes,
                persisted_bytes,
                "checkpoint completed"
            );
        }
        Err(e) => {
            *st = Flight::Done;
            drop(st);
            drop(storage);
            warn!(job = %job, checkpoint = id, error = %e, "checkpoint failed");
            lock(&shared).finish(id, CheckpointStatus::Failed, Some(e.to_string()));
        }
    }
}
