//! The barrier clock and the epoch: closing an epoch at every table, running it through the
//! jobs, triggering checkpoints, handling failures by the restart strategy, and publishing
//! every view's rows together.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use tracing::{debug, error, info, warn};

use crate::checkpoint::StateBackendKind;
use crate::common::{Epoch, RelationId};
use crate::error::{Error, Result};
use crate::stream::EpochContext;
use crate::stream::job::{BackfillSource, Job, JobStatus};

use super::{Dataflow, Engine, JobInfo, ViewState, Visible, lock};

/// The barrier clock, an owned part of the engine: the open epoch writes are stamped with,
/// the task that closes it every barrier interval (or at once on request), and the engine's
/// stop signal.
///
/// Lock order: the engine's `dataflow` lock, then [`BarrierClock::open`], then a table's.
pub(super) struct BarrierClock {
    /// The epoch writes are stamped with now; closed by the next tick.
    open: Mutex<Epoch>,
    /// Wakes the clock task at once (`FLUSH`, `RESUME`, a full write backlog).
    tick_request: Arc<Notify>,
    /// Becomes `true` when the engine shuts down (or is dropped): the clock task ends,
    /// `FLUSH` returns, and changes are refused.
    stopping: watch::Sender<bool>,
    /// The clock task, once started.
    task: Mutex<Option<JoinHandle<()>>>,
    /// Time between barriers.
    interval: Duration,
}

impl BarrierClock {
    /// A stopped clock whose open epoch is `open`.
    pub(super) fn new(open: Epoch, interval: Duration) -> Self {
        BarrierClock {
            open: Mutex::new(open),
            tick_request: Arc::new(Notify::new()),
            stopping: watch::Sender::new(false),
            task: Mutex::new(None),
            interval,
        }
    }

    /// The open epoch, locked: writers hold it while they append, a tick while it closes
    /// the epoch.
    pub(super) fn open(&self) -> MutexGuard<'_, Epoch> {
        lock(&self.open)
    }

    /// Asks the clock task for a tick now.
    pub(super) fn request_tick(&self) {
        self.tick_request.notify_one();
    }

    /// Whether the engine is stopping.
    pub(super) fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Marks the engine stopping (wakes the clock task and every `FLUSH`).
    pub(super) fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Resolves once the engine is stopping.
    pub(super) async fn stopped(&self) {
        let mut rx = self.stopping.subscribe();
        // An error means the sender is gone, which is a stop too.
        let _ = rx.wait_for(|s| *s).await;
    }

    /// The clock task, to join at shutdown (`None` if never started or already taken).
    pub(super) fn take_task(&self) -> Option<JoinHandle<()>> {
        lock(&self.task).take()
    }

    /// Starts the clock task on the current tokio runtime: every interval, or at once on
    /// request, it runs `engine.tick()` on the blocking pool until the engine stops or is
    /// dropped. Does nothing if the task runs already or the engine is stopping.
    fn start(&self, engine: Weak<Engine>) {
        let mut slot = lock(&self.task);
        if slot.as_ref().is_some_and(|h| !h.is_finished()) || self.is_stopping() {
            return;
        }
        let tick_request = Arc::clone(&self.tick_request);
        let mut stopping = self.stopping.subscribe();
        let interval = self.interval;
        *slot = Some(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(interval) => {}
                    _ = tick_request.notified() => {}
                    changed = stopping.changed() => {
                        if changed.is_err() {
                            // The engine was dropped.
                            break;
                        }
                    }
                }
                if *stopping.borrow() {
                    break;
                }
                let Some(engine) = engine.upgrade() else {
                    break;
                };
                match tokio::task::spawn_blocking(move || engine.tick()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => error!(error = %err, "barrier failed"),
                    Err(err) => error!(error = %err, "barrier task panicked"),
                }
            }
            debug!("barrier clock stopped");
        }));
    }
}

impl Engine {
    /// Starts the barrier clock on the current tokio runtime: an epoch closes every barrier
    /// interval, or at once on `FLUSH`. Does nothing if the clock runs already or the engine
    /// is shutting down.
    ///
    /// The clock is a task owned by the engine. Between ticks it holds only a weak reference,
    /// so dropping the last `Arc<Engine>` drops the engine (which stops the clock); during a
    /// tick it holds a strong one, so the engine is never dropped in the middle of a tick
    /// (if the tick's reference is the last, the engine is dropped on the blocking thread
    /// after it). [`Engine::shutdown`] stops the clock and waits for a tick in progress.
    pub fn start_barrier_clock(self: &Arc<Self>) {
        self.clock.start(Arc::downgrade(self));
    }

    /// Waits until every write acknowledged before the call is visible in every view, or
    /// until the engine shuts down.
    pub async fn flush(&self) {
        let target = *self.clock.open();
        let mut rx = self.visible.subscribe();
        self.clock.request_tick();
        tokio::select! {
            _ = rx.wait_for(|v| v.epoch >= target) => {}
            _ = self.clock.stopped() => {}
        }
    }

    /// Closes the open epoch and runs it through every job, then publishes the new snapshot.
    /// Restarts that are due happen first; checkpoints are triggered after the epoch. Does
    /// nothing once the engine is shutting down.
    ///
    /// # Errors
    /// Internal errors only; a failing view is handled by its restart strategy.
    pub fn tick(&self) -> Result<()> {
        let mut df = lock(&self.dataflow);
        if self.is_stopping() {
            return Ok(());
        }
        let now = Instant::now();
        let mut touched: HashSet<RelationId> = HashSet::new();
        // Restarts that are due: recover their groups to the last processed epoch.
        let due: BTreeSet<RelationId> = df
            .jobs
            .iter()
            .filter(|(_, j)| matches!(j.status, JobStatus::Restarting { at, .. } if at <= now))
            .map(|(id, _)| *id)
            .collect();
        if !due.is_empty() {
            let group = df.component(&due);
            let processed = self.visible().epoch;
            for id in &due {
                if let Some(j) = df.jobs.get_mut(id) {
                    j.restarts += 1;
                }
            }
            for (id, e) in self.recover_jobs(&mut df, &group, processed)? {
                df.on_failure(id, &e, now);
            }
            touched.extend(group.iter().copied());
        }
        let (epoch, (changes, watermarks)) = {
            let mut open = self.clock.open();
            let epoch = *open;
            *open = Epoch(epoch.0 + 1);
            (epoch, self.tables.take_pending())
        };
        let rows: usize = changes.values().flatten().map(|c| c.len()).sum();
        let mut input = EpochContext {
            epoch,
            now_ns: crate::stream::wall_clock_ns(),
            changes,
            watermarks,
        };
        touched.extend(input.changes.keys().copied());
        let mut rebuilt: HashSet<RelationId> = HashSet::new();
        let ids: Vec<RelationId> = df.jobs.keys().copied().collect();
        for id in ids {
            let (status, upstream_rebuilt, reads_change) = {
                let job = &df.jobs[&id];
                (
                    job.status.clone(),
                    job.sources.iter().any(|s| rebuilt.contains(s)),
                    job.time_driven() || job.sources.iter().any(|s| touched.contains(s)),
                )
            };
            match status {
                JobStatus::Restarting { .. } => continue,
                JobStatus::Failed { .. } if reads_change || upstream_rebuilt => {
                    // Heal: a failure in the data goes away when the data changes.
                    let snapshot = self.snapshot_input(&df, &df.jobs[&id]);
                    let job = df
                        .jobs
                        .get_mut(&id)
                        .ok_or_else(|| Error::Internal("job vanished".into()))?;
                    match snapshot.and_then(|s| job.rebuild(&s)) {
                        Ok(()) => {
                            info!(view = %job.name, epoch = epoch.0, "view rebuilt");
                            rebuilt.insert(id);
                            touched.insert(id);
                        }
                        Err(e) => debug!(view = %job.name, error = %e, "view still failing"),
                    }
                }
                JobStatus::Failed { .. } => {}
                JobStatus::Running if upstream_rebuilt => {
                    let snapshot = self.snapshot_input(&df, &df.jobs[&id]);
                    let job = df
                        .jobs
                        .get_mut(&id)
                        .ok_or_else(|| Error::Internal("job vanished".into()))?;
                    if let Err(e) = snapshot.and_then(|s| job.rebuild(&s)) {
                        debug!(view = %job.name, error = %e, "view failed while rebuilding");
                    }
                    rebuilt.insert(id);
                    touched.insert(id);
                }
                JobStatus::Running if reads_change => {
                    let job = df
                        .jobs
                        .get_mut(&id)
                        .ok_or_else(|| Error::Internal("job vanished".into()))?;
                    let watermarks_before = job.watermarks.clone();
                    match job.process(&input) {
                        Ok(out) => {
                            if !job.watermarks.is_empty() {
                                input.watermarks.insert(id, job.watermarks.clone());
                            }
                            // A watermark that moved without output rows (a join whose
                            // other side advanced) still runs the views reading this one:
                            // it may close their windows.
                            if !out.is_empty() || job.watermarks != watermarks_before {
                                touched.insert(id);
                            }
                            if !out.is_empty() {
                                input.changes.insert(id, out);
                            }
                        }
                        Err(e) => {
                            df.on_failure(id, &e, now);
                            touched.insert(id);
                            // The row that failed the view may be gone by the epoch's end
                            // (written and deleted or updated in the same epoch): a view
                            // fails only while its inputs' current contents fail it, so it
                            // heals at once when they compute.
                            if matches!(df.jobs[&id].status, JobStatus::Failed { .. }) {
                                let snapshot = self.snapshot_input(&df, &df.jobs[&id]);
                                let job = df
                                    .jobs
                                    .get_mut(&id)
                                    .ok_or_else(|| Error::Internal("job vanished".into()))?;
                                if snapshot.and_then(|s| job.rebuild(&s)).is_ok() {
                                    info!(view = %job.name, epoch = epoch.0, "view rebuilt");
                                    rebuilt.insert(id);
                                }
                            }
                        }
                    }
                }
                JobStatus::Running => {}
            }
        }
        self.checkpoints(&mut df, epoch, now, &mut touched);
        self.publish(&df, Some((epoch, &touched)))?;
        debug!(epoch = epoch.0, rows, "epoch committed");
        self.snapshot_tables(&df, epoch, false);
        Ok(())
    }

    /// After epoch `epoch`: expire overdue checkpoints, fail jobs over their tolerable
    /// failures, trigger due checkpoints, apply retention.
    pub(super) fn checkpoints(
        &self,
        df: &mut Dataflow,
        epoch: Epoch,
        now: Instant,
        touched: &mut HashSet<RelationId>,
    ) {
        let ids: Vec<RelationId> = df.jobs.keys().copied().collect();
        // The jobs due a checkpoint start flushing their instances together; each sync phase
        // below then waits for its own flush only.
        for job in df.jobs.values() {
            if matches!(job.status, JobStatus::Running)
                && job.coordinator.as_ref().is_some_and(|c| {
                    c.settings().backend == StateBackendKind::RocksDb
                        && !c.failures_exceeded()
                        && c.should_trigger(now)
                })
                && let Err(e) = job.begin_flush()
            {
                warn!(view = %job.name, error = %e, "cannot start flushing state for a checkpoint");
            }
        }
        for id in &ids {
            let Some(job) = df.jobs.get_mut(id) else {
                continue;
            };
            if !matches!(job.status, JobStatus::Running) {
                continue;
            }
            let Some(c) = &job.coordinator else {
                continue;
            };
            c.expire(now);
            if c.failures_exceeded() {
                let tolerable = c.settings().tolerable_failures;
                let e = Error::State(format!(
                    "checkpoint failures exceeded checkpoint.tolerable_failures ({tolerable})"
                ));
                df.on_failure(*id, &e, now);
                touched.insert(*id);
                continue;
            }
            if !c.should_trigger(now) {
                continue;
            }
            let backend = c.settings().backend;
            let offsets: BTreeMap<u64, u64> = job.sources.iter().map(|s| (*s, epoch.0)).collect();
            let (source, tables) = match job.checkpoint_source(backend) {
                Ok(c) => c,
                Err(e) => {
                    warn!(view = %job.name, error = %e, "cannot collect state for a checkpoint");
                    continue;
                }
            };
            let alignment_ms = match job.last_alignment {
                (e, ms) if e == epoch => ms,
                _ => 0,
            };
            if let Some(c) = job.coordinator.as_mut() {
                c.trigger(epoch, source, tables, offsets, alignment_ms);
            }
        }
        // Retention, downstream first: upstream views keep what their readers need.
        let mut bounds: HashMap<RelationId, Vec<u64>> = HashMap::new();
        for id in ids.iter().rev() {
            let Some(job) = df.jobs.get(id) else {
                continue;
            };
            let Some(c) = &job.coordinator else {
                continue;
            };
            // A checkpoint still in flight pins its upstream checkpoints too: once it
            // completes, its recovery needs them.
            let mut kept = c.retain_policy(&bounds.remove(id).unwrap_or_default());
            kept.extend(c.in_flight_epochs());
            for s in &job.sources {
                if df.jobs.contains_key(s) {
                    bounds.entry(*s).or_default().extend(kept.iter().copied());
                }
            }
        }
    }

    /// The full current contents of a job's sources, as one epoch of inserts.
    pub(super) fn snapshot_input(&self, df: &Dataflow, job: &Job) -> Result<Vec<BackfillSource>> {
        let mut sources = Vec::new();
        for s in &job.sources {
            sources.push(if let Some(upstream) = df.jobs.get(s) {
                upstream.contents_for_backfill()?
            } else {
                self.tables.processed_contents(*s)?
            });
        }
        Ok(sources)
    }

    /// Publishes the views' contents; only views in `touched` are re-read.
    pub(super) fn publish(
        &self,
        df: &Dataflow,
        tick: Option<(Epoch, &HashSet<RelationId>)>,
    ) -> Result<()> {
        let old = self.visible();
        let mut views = HashMap::new();
        let mut jobs = Vec::new();
        for (id, job) in &df.jobs {
            let changed = match tick {
                Some((_, touched)) => touched.contains(id),
                None => true,
            };
            let state = match (&job.status, old.views.get(id)) {
                (JobStatus::Failed { code, message }, _) => ViewState::Failed {
                    view: job.name.clone(),
                    code,
                    message: message.clone(),
                },
                (JobStatus::Restarting { message, .. }, _) => ViewState::Failed {
                    view: job.name.clone(),
                    code: "55000",
                    message: format!("the view is restarting after: {message}"),
                },
                (JobStatus::Running, Some(ViewState::Ready(b))) if !changed => {
                    ViewState::Ready(b.clone())
                }
                (JobStatus::Running, _) => ViewState::Ready(job.snapshot()),
            };
            views.insert(*id, state);
            jobs.push(JobInfo {
                name: job.name.clone(),
                status: job.status.as_str(),
                failure: match &job.status {
                    JobStatus::Running => None,
                    JobStatus::Restarting { message, .. } => Some(message.clone()),
                    JobStatus::Failed { message, .. } => Some(message.clone()),
                },
                restarts: job.restarts,
                settings: job.settings().map(|s| s.values.clone()).unwrap_or_default(),
                history: job.coordinator.as_ref().map(|c| c.history()),
                recovery: job.last_recovery.clone(),
                state_rows: job.state_rows.clone(),
            });
        }
        let epoch = tick.map(|(e, _)| e).unwrap_or(old.epoch);
        self.visible
            .send_replace(Arc::new(Visible { epoch, views, jobs }));
        Ok(())
    }
}

impl Dataflow {
    /// A job failed at run time: it and the views over it stop; its restart strategy decides
    /// between a restart after a pause and failing for good.
    pub(super) fn on_failure(&mut self, id: RelationId, error: &Error, now: Instant) {
        let affected = self.downstream_closure(id);
        for m in &affected {
            if let Some(c) = self.jobs.get(m).and_then(|j| j.coordinator.as_ref()) {
                c.abort_all("the job failed before the checkpoint completed");
            }
        }
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        let name = job.name.clone();
        let message = error.to_string();
        // State files damaged on disk (RocksDB: "Corruption: block checksum mismatch"): the
        // checkpoints share files with each other and with the live state (hard links), so
        // none is trusted again; the restart rebuilds the view from its inputs.
        if message.contains("Corruption:")
            && let Some(c) = &job.coordinator
        {
            let damaged: Vec<u64> = c.completed().into_iter().map(|(id, _)| id).collect();
            warn!(view = %name, checkpoints = ?damaged, "state damaged on disk; discarding the view's checkpoints");
            for checkpoint in damaged {
                c.discard_damaged(checkpoint);
            }
        }
        match job.restart.on_failure(now) {
            Some(pause) => {
                warn!(view = %name, error = %message, pause_ms = pause.as_millis() as u64, "view failed; restarting");
                for m in &affected {
                    if let Some(j) = self.jobs.get_mut(m) {
                        j.status = JobStatus::Restarting {
                            at: now + pause,
                            message: if *m == id {
                                message.clone()
                            } else {
                                format!("upstream view {name} failed: {message}")
                            },
                        };
                    }
                }
            }
            None => {
                warn!(view = %name, error = %message, "view failed");
                for m in &affected {
                    if let Some(j) = self.jobs.get_mut(m) {
                        j.status = if *m == id {
                            JobStatus::Failed {
                                code: error.sqlstate(),
                                message: message.clone(),
                            }
                        } else {
                            JobStatus::Failed {
                                code: error.sqlstate(),
                                message: format!("upstream view {name} failed: {message}"),
                            }
                        };
                    }
                }
            }
        }
    }
}
