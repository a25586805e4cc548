//! Recovery at start and after a failure: views recompiled, their state restored from the
//! newest completed checkpoint (or rebuilt from their inputs), and the changelog after it
//! replayed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use tracing::{info, warn};

use crate::catalog::{RelationDef, RelationKind};
use crate::checkpoint::{CheckpointCoordinator, CheckpointStorage, JobSettings};
use crate::common::{Epoch, RelationId};
use crate::error::{Error, Result};
use crate::stream::job::{Job, JobStatus, Recovery};
use crate::stream::plan::StreamPlan;
use crate::stream::{EpochContext, Watermarks};

use super::{Dataflow, Engine, Visible, lock};

impl Engine {
    /// The materialized views to recompile at start, in creation order.
    pub fn views_to_recover(&self) -> Vec<RelationDef> {
        lock(&self.catalog)
            .relations()
            .filter(|r| !r.is_table())
            .cloned()
            .collect()
    }

    pub(super) fn coordinator(
        &self,
        id: RelationId,
        name: &str,
        settings: &BTreeMap<String, String>,
    ) -> Result<CheckpointCoordinator> {
        let settings = JobSettings::from_values(settings)?;
        let storage = CheckpointStorage::open(
            self.checkpoint_dir.join(id.to_string()),
            self.data_dir.join("jobs").join(id.to_string()),
            settings.backend,
        )?;
        Ok(CheckpointCoordinator::new(
            name.to_string(),
            settings,
            storage,
        ))
    }

    /// Recompiles one materialized view at start from its planned query; its state is
    /// recovered by [`Engine::recover_all`] once every view is compiled.
    ///
    /// # Errors
    /// `0A000` if the stored query no longer compiles; state errors opening its checkpoints.
    pub fn recover_view(&self, def: &RelationDef, plan: StreamPlan) -> Result<()> {
        let settings = match &def.kind {
            RelationKind::MaterializedView { settings, .. } => settings.clone(),
            RelationKind::Table { .. } => BTreeMap::new(),
        };
        let coordinator = self.coordinator(def.id, &def.name, &settings)?;
        let mut job = Job::try_new(
            def.id,
            def.name.clone(),
            plan,
            def.schema_ref(),
            Some(coordinator),
            self.rows_in.clone(),
        )?;
        for index in lock(&self.catalog).indexes_on(def.id) {
            job.add_index(&index)?;
        }
        let discarded = job.discard_mismatched_checkpoints()?;
        if !discarded.is_empty() {
            warn!(
                view = %def.name,
                checkpoints = ?discarded,
                "checkpoints of another plan discarded; the view recovers without them"
            );
        }
        lock(&self.dataflow).jobs.insert(def.id, job);
        Ok(())
    }

    /// Recovers every job at start: each restores its latest usable checkpoint and replays
    /// its sources from there (see [`Engine::recover_jobs`]), then all views are published.
    ///
    /// # Errors
    /// Internal errors only; a view that cannot be recovered is left failed.
    pub fn recover_all(&self) -> Result<()> {
        let mut df = lock(&self.dataflow);
        let ids: BTreeSet<RelationId> = df.jobs.keys().copied().collect();
        // Epochs keep growing across restarts: checkpoints may have been taken at epochs after
        // the last table write, so the clock resumes after the newest checkpoint too.
        let newest_checkpoint = df
            .jobs
            .values()
            .filter_map(|j| j.coordinator.as_ref())
            .flat_map(|c| c.completed())
            .map(|(_, e)| e)
            .max()
            .unwrap_or(Epoch(0));
        let mut target = self.visible().epoch;
        if newest_checkpoint > target {
            target = newest_checkpoint;
            *self.clock.open() = Epoch(target.0 + 1);
            self.visible.send_replace(Arc::new(Visible {
                epoch: target,
                views: HashMap::new(),
                jobs: Vec::new(),
            }));
        }
        let now = Instant::now();
        for (id, e) in self.recover_jobs(&mut df, &ids, target)? {
            df.on_failure(id, &e, now);
        }
        // What the restart replayed is made durable before the server serves: the tables take
        // a snapshot and every job's instance flushes its memtables (so its first checkpoint
        // is quick). Otherwise a server that fails again soon after a long replay would replay
        // all of it again, and more each time.
        self.snapshot_tables(&df, self.visible().epoch, true);
        for job in df.jobs.values() {
            if let Err(e) = job.flush_state() {
                warn!(view = %job.name, error = %e, "cannot flush the recovered state");
            }
        }
        self.publish(&df, None)
    }

    /// Recovers `members` (a set closed under view-on-view edges) to epoch `target`. Returns
    /// the members that failed (their restart strategy decides what follows); the views over
    /// a failed member are left to that decision too.
    ///
    /// Downstream first, each member gets a bound: the target, lowered to the epoch of every
    /// checkpoint a downstream member picked (and to the bound of a downstream member that
    /// picked none), and picks its newest completed checkpoint at or before its bound, or
    /// none. Upstream first, each member gets its start epoch: its checkpoint's, or without
    /// one the newest start of its upstream members, or (reading only tables) its bound, where
    /// it is backfilled from the tables' contents as of that epoch. So every upstream member
    /// starts at or before the epoch its readers restored, even when an upstream checkpoint
    /// the readers relied on is missing. Then the epochs are replayed in segments between
    /// the start epochs, every active member in creation order, a segment's changelog entries
    /// summed into one change batch: a member joins at its start epoch (restored or
    /// backfilled from its inputs' contents at that epoch).
    pub(super) fn recover_jobs(
        &self,
        df: &mut Dataflow,
        members: &BTreeSet<RelationId>,
        target: Epoch,
    ) -> Result<Vec<(RelationId, Error)>> {
        // 1. Bounds and checkpoints, downstream first.
        let mut picked: BTreeMap<RelationId, Option<(u64, Epoch)>> = BTreeMap::new();
        let mut bound: BTreeMap<RelationId, Epoch> = BTreeMap::new();
        for id in members.iter().rev() {
            let b = members
                .iter()
                .filter(|d| df.jobs.get(d).is_some_and(|j| j.sources.contains(id)))
                .filter_map(|d| match picked.get(d).copied().flatten() {
                    Some((_, e)) => Some(e),
                    None => bound.get(d).copied(),
                })
                .min()
                .unwrap_or(target)
                .min(target);
            let pick = df
                .jobs
                .get(id)
                .and_then(|j| j.coordinator.as_ref())
                .and_then(|c| c.completed().into_iter().rfind(|(_, e)| *e <= b));
            bound.insert(*id, b);
            picked.insert(*id, pick);
        }
        // 2. Start epochs, upstream first: the checkpoint's, or the newest upstream member's,
        //    or (reading only tables) the bound: backfilled from the tables' contents as of
        //    the bound (their current contents minus the changelog after it, which is kept
        //    for every retained checkpoint, see `changelog_needed_after`).
        let mut start: BTreeMap<RelationId, Epoch> = BTreeMap::new();
        for id in members {
            let e = match picked[id] {
                Some((_, e)) => e,
                None => df.jobs[id]
                    .sources
                    .iter()
                    .filter_map(|s| start.get(s).copied())
                    .max()
                    .unwrap_or(bound[id]),
            };
            start.insert(*id, e);
        }
        for id in members {
            if let Some(job) = df.jobs.get(id)
                && let Some(c) = &job.coordinator
            {
                c.abort_all("the job was restarted before the checkpoint completed");
            }
        }
        let mut bounds: BTreeSet<Epoch> = start.values().copied().collect();
        bounds.insert(target);
        let mut active: BTreeSet<RelationId> = BTreeSet::new();
        let mut failed: BTreeMap<RelationId, Error> = BTreeMap::new();
        let mut replayed: BTreeMap<RelationId, u64> = BTreeMap::new();
        let mut prev = Epoch(0);
        for b in bounds {
            if b > target {
                break;
            }
            if b > prev && !active.is_empty() {
                let watermarks = if b == target {
                    self.tables.watermarks()
                } else {
                    HashMap::new()
                };
                self.replay_segment(
                    df,
                    &active,
                    (prev, b, watermarks),
                    &mut failed,
                    &mut replayed,
                )?;
                active.retain(|id| !failed.contains_key(id));
            }
            for id in members.iter().filter(|id| start[*id] == b) {
                if failed.contains_key(id) {
                    continue;
                }
                match self.activate(df, *id, picked[id], b) {
                    Ok(()) => {
                        active.insert(*id);
                    }
                    Err(e) => {
                        failed.insert(*id, e);
                    }
                }
            }
            prev = b;
        }
        let mut failures = Vec::new();
        for id in members {
            let Some(job) = df.jobs.get_mut(id) else {
                continue;
            };
            if let Some(e) = failed.remove(id) {
                warn!(view = %job.name, error = %e, "view failed while recovering");
                failures.push((*id, e));
                continue;
            }
            if !active.contains(id) {
                // An upstream member failed; its failure handling covers this view too.
                continue;
            }
            job.status = JobStatus::Running;
            let rec = Recovery {
                checkpoint_id: picked[id].map(|(c, _)| c),
                epoch: start[id],
                replayed_rows: replayed.get(id).copied().unwrap_or(0),
            };
            info!(
                view = %job.name,
                checkpoint = ?rec.checkpoint_id,
                epoch = rec.epoch.0,
                replayed_rows = rec.replayed_rows,
                "view recovered"
            );
            job.last_recovery = Some(rec);
            if let Some(c) = &job.coordinator {
                c.reset_failures();
            }
        }
        Ok(failures)
    }

    /// Brings member `id` into a recovery at epoch `at`: restores its checkpoint, or backfills
    /// it from its inputs as of `at`.
    pub(super) fn activate(
        &self,
        df: &mut Dataflow,
        id: RelationId,
        pick: Option<(u64, Epoch)>,
        at: Epoch,
    ) -> Result<()> {
        let backfill = match pick {
            Some(_) => None,
            None => {
                let job = &df.jobs[&id];
                let mut sources = Vec::new();
                for s in &job.sources {
                    sources.push(if let Some(up) = df.jobs.get(s) {
                        up.contents_for_backfill()?
                    } else {
                        self.tables.contents_at(*s, at)?
                    });
                }
                Some(sources)
            }
        };
        let job = df
            .jobs
            .get_mut(&id)
            .ok_or_else(|| Error::Internal("job vanished".into()))?;
        match (pick, backfill) {
            (Some((checkpoint, _)), _) => {
                let coordinator = job
                    .coordinator
                    .as_ref()
                    .ok_or_else(|| Error::Internal("job without coordinator".into()))?;
                let restored = coordinator
                    .restore(checkpoint, self.rows_in.as_deref())
                    .and_then(|r| job.load(r));
                if let Err(e) = restored {
                    // A checkpoint that cannot be restored (a state file missing or damaged)
                    // would fail every restart alike: it is dropped, and the restart the
                    // failure leads to takes an older checkpoint or rebuilds from the inputs.
                    warn!(
                        view = %job.name,
                        checkpoint,
                        error = %e,
                        "discarding a checkpoint that cannot be restored"
                    );
                    if let Some(c) = &job.coordinator {
                        c.discard_damaged(checkpoint);
                    }
                    return Err(e);
                }
            }
            (None, input) => {
                job.reset()?;
                if let Some(sources) = input {
                    job.backfill(&sources)?;
                }
            }
        }
        Ok(())
    }

    /// Replays epochs `(after, upto]` through the `active` members as one step, with the
    /// tables' `watermarks` at its end: the current ones for the last segment, none before
    /// it (a window closed by a later watermark while rows of later segments are still to
    /// come would be emitted twice).
    pub(super) fn replay_segment(
        &self,
        df: &mut Dataflow,
        active: &BTreeSet<RelationId>,
        (after, upto, watermarks): (Epoch, Epoch, HashMap<RelationId, Watermarks>),
        failed: &mut BTreeMap<RelationId, Error>,
        replayed: &mut BTreeMap<RelationId, u64>,
    ) -> Result<()> {
        let mut input = EpochContext::new(upto);
        input.watermarks = watermarks;
        let mut rows_of: HashMap<RelationId, u64> = HashMap::new();
        for id in active {
            for s in &df.jobs[id].sources {
                if df.jobs.contains_key(s) || input.changes.contains_key(s) {
                    continue;
                }
                let (change, rows) = self.tables.changes_between(*s, after, upto)?;
                rows_of.insert(*s, rows);
                input.changes.insert(*s, vec![change]);
            }
        }
        for id in active {
            let Some(job) = df.jobs.get_mut(id) else {
                continue;
            };
            if job.sources.iter().any(|s| failed.contains_key(s)) {
                failed.insert(
                    *id,
                    Error::data(
                        "55000",
                        "an upstream materialized view failed while recovering",
                    ),
                );
                continue;
            }
            let rows: u64 = job.sources.iter().filter_map(|s| rows_of.get(s)).sum();
            *replayed.entry(*id).or_default() += rows;
            match job.process(&input) {
                Ok(out) => {
                    if !job.watermarks.is_empty() {
                        input.watermarks.insert(*id, job.watermarks.clone());
                    }
                    input.changes.insert(*id, out);
                }
                Err(e) => {
                    failed.insert(*id, e);
                }
            }
        }
        Ok(())
    }
}
