//! The barrier clock and the epoch: closing an epoch at every table, running it through the
//! jobs, triggering checkpoints, handling failures by the restart strategy, and publishing
//! every view's rows together.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use tracing::{debug, error, info, warn};

use crate::checkpoint::StateBackendKind;
use crate::common::{ChangeBatch, Epoch, RelationId};
use crate::error::{Error, Result};
use crate::stream::EpochContext;
use crate::stream::job::{BackfillSource, Job, JobStatus};

use super::{Dataflow, Engine, JobInfo, ViewState, Visible, lock};

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
        let mut slot = lock(&self.clock_task);
        if slot.as_ref().is_some_and(|h| !h.is_finished()) || self.is_stopping() {
            return;
        }
        let weak = Arc::downgrade(self);
        let tick_request = Arc::clone(&self.tick_request);
        let mut stopping = self.stopping.subscribe();
        let interval = self.barrier_interval;
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
                let Some(engine) = weak.upgrade() else {
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

    /// Waits until every write acknowledged before the call is visible in every view, or
    /// until the engine shuts down.
    pub async fn flush(&self) {
        let target = lock(&self.clock).open;
        let mut rx = self.visible.subscribe();
        let mut stopping = self.stopping.subscribe();
        self.tick_request.notify_one();
        tokio::select! {
            _ = rx.wait_for(|v| v.epoch >= target) => {}
            _ = stopping.wait_for(|s| *s) => {}
        }
    }

    /// A job failed at run time: it and the views over it stop; its restart strategy decides
    /// between a restart after a pause and failing for good.
    pub(super) fn on_failure(
        &self,
        df: &mut Dataflow,
        id: RelationId,
        error: &Error,
        now: Instant,
    ) {
        let affected = df.downstream_closure(id);
        for m in &affected {
            if let Some(c) = df.jobs.get(m).and_then(|j| j.coordinator.as_ref()) {
                c.abort_all("the job failed before the checkpoint completed");
            }
        }
        let Some(job) = df.jobs.get_mut(&id) else {
            return;
        };
        let name = job.name.clone();
        let message = error.to_string();
        match job.restart.on_failure(now) {
            Some(pause) => {
                warn!(view = %name, error = %message, pause_ms = pause.as_millis() as u64, "view failed; restarting");
                for m in &affected {
                    if let Some(j) = df.jobs.get_mut(m) {
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
                    if let Some(j) = df.jobs.get_mut(m) {
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
                self.on_failure(&mut df, id, &e, now);
            }
            touched.extend(group.iter().copied());
        }
        let (epoch, changes) = {
            let mut clock = lock(&self.clock);
            let epoch = clock.open;
            clock.open = Epoch(epoch.0 + 1);
            let mut changes: HashMap<RelationId, Vec<ChangeBatch>> = HashMap::new();
            for (id, t) in lock(&self.tables).iter() {
                let mut t = lock(t);
                if !t.pending.is_empty() {
                    let drained: Vec<ChangeBatch> = t.pending.drain(..).map(|(_, c)| c).collect();
                    changes.insert(*id, drained);
                }
            }
            *lock(&self.backlog) = 0;
            self.backlog_taken.notify_all();
            (epoch, changes)
        };
        let rows: usize = changes.values().flatten().map(|c| c.len()).sum();
        let mut input = EpochContext { epoch, changes };
        touched.extend(input.changes.keys().copied());
        let mut rebuilt: HashSet<RelationId> = HashSet::new();
        let ids: Vec<RelationId> = df.jobs.keys().copied().collect();
        for id in ids {
            let (status, upstream_rebuilt, reads_change) = {
                let job = &df.jobs[&id];
                (
                    job.status.clone(),
                    job.sources.iter().any(|s| rebuilt.contains(s)),
                    job.sources.iter().any(|s| touched.contains(s)),
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
                    match job.process(&input) {
                        Ok(out) => {
                            if !out.is_empty() {
                                input.changes.insert(id, out);
                                touched.insert(id);
                            }
                        }
                        Err(e) => {
                            self.on_failure(&mut df, id, &e, now);
                            touched.insert(id);
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
                self.on_failure(df, *id, &e, now);
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
            if let Some(c) = job.coordinator.as_mut() {
                c.trigger(epoch, source, tables, offsets);
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
                let t = self.table(*s)?;
                let t = lock(&t);
                t.processed_contents(*s)
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
            });
        }
        let epoch = tick.map(|(e, _)| e).unwrap_or(old.epoch);
        self.visible
            .send_replace(Arc::new(Visible { epoch, views, jobs }));
        Ok(())
    }
}
