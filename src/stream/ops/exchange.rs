//! `Exchange`: a keyed operator (aggregate, join, OVER window) split into parallel instances
//! by the hash of its key, as Flink's and RisingWave's hash exchanges split a keyed operator
//! (see the seed's "Parallel dataflow" and Flink's "Parallel Dataflows" documentation).
//!
//! ```text
//!  upstream ──► hash(key) ─┬─► feed 0 ─► instance 0 (own state tables) ─┐
//!                          └─► feed 1 ─► instance 1 (own state tables) ─┴─► outputs, in order
//! ```
//!
//! Every row of one key reaches the same instance (in the order its upstream emitted it), so
//! each instance holds the whole state of its keys and computes what the single operator
//! would have for them; the union of the instances' outputs is the operator's output. The
//! upstream watermarks are broadcast to every instance. The exchange gathers all instances'
//! outputs before it returns, so the epoch's barrier is aligned at it: no instance's output of
//! epoch *e* goes downstream before all of them have processed *e*.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, UInt32Array};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::PhysicalExpr;

use crate::common::ChangeBatch;
use crate::error::{Error, Result};
use crate::stream::{EpochContext, Operator, StateVisitor, Watermarks, input_path};

/// Inputs smaller than this many rows (over all of an epoch batch's inputs) run the instances
/// one after the other on the job's thread: starting threads would cost more than it saves.
/// The output is the same either way.
pub const PARALLEL_MIN_ROWS: usize = 4096;

/// A marker an instance's [`Feed`] writes into EXPLAIN output, replaced by the exchange with
/// its upstream's lines.
const FEED_MARKER: &str = "\u{1}feed:";

/// What a [`Feed`] hands its instance in one call: the changes routed to it and the upstream's
/// watermarks.
#[derive(Default)]
struct FeedSlot {
    changes: Vec<ChangeBatch>,
    watermarks: Watermarks,
}

type SharedSlot = Arc<Mutex<FeedSlot>>;

fn lock(slot: &SharedSlot) -> MutexGuard<'_, FeedSlot> {
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

/// The input of one parallel instance: the changes the exchange routed to it.
pub struct Feed {
    slot: SharedSlot,
    schema: SchemaRef,
    input: usize,
}

impl Operator for Feed {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn process(&mut self, _ctx: &EpochContext) -> Result<Vec<ChangeBatch>> {
        Ok(std::mem::take(&mut lock(&self.slot).changes))
    }

    fn watermarks(&self, _ctx: &EpochContext) -> Watermarks {
        lock(&self.slot).watermarks.clone()
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        out.push(format!("{}{FEED_MARKER}{}", "  ".repeat(depth), self.input));
    }

    fn visit_state(&mut self, _path: &str, _f: &mut StateVisitor<'_>) -> Result<()> {
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        Ok(())
    }
}

/// One upstream of an exchange and how its rows are routed.
pub struct ExchangeInput {
    /// The upstream operator (runs on the job's thread).
    pub upstream: Box<dyn Operator>,
    /// Its edge in state table paths (`input`, `left`, `right`), as the keyed operator names it.
    pub edge: &'static str,
    /// The key expressions over the upstream's rows (the keyed operator's own).
    pub keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The keys' types (what the expressions return; the keyed operator encodes them so).
    pub key_types: Vec<DataType>,
}

/// A keyed operator run as `n` instances, each on the rows whose key hashes to it.
///
/// State: none of its own; instance `i`'s state tables are named under the path `<path>#<i>`
/// (`root#1:hash_agg.groups`), the upstreams' under their usual edges, so a plan of
/// parallelism 1 (no exchange) keeps the names it always had.
///
/// Routing: the key's encoding in Arrow's row format (the keyed operator's own encoding of
/// it), hashed with XXH32 (seed 0; a fixed, specified function, so a key's instance is the
/// same in every run and build), modulo `n`.
pub struct Exchange {
    inputs: Vec<ExchangeInput>,
    converters: Vec<RowConverter>,
    /// `[instance][input]`.
    feeds: Vec<Vec<SharedSlot>>,
    instances: Vec<Box<dyn Operator>>,
    /// Alignment time of the job's epochs, in ns, added to by each gather (shared with the job).
    alignment_ns: Arc<AtomicU64>,
}

impl Exchange {
    /// `n` instances of the operator `make` builds over one [`Feed`] per input (in the order
    /// of `inputs`).
    ///
    /// # Errors
    /// `make`'s errors; Arrow's when a key type has no row encoding.
    pub fn try_new(
        inputs: Vec<ExchangeInput>,
        n: usize,
        alignment_ns: Arc<AtomicU64>,
        make: impl Fn(Vec<Box<dyn Operator>>) -> Result<Box<dyn Operator>>,
    ) -> Result<Self> {
        let n = n.max(1);
        let converters = inputs
            .iter()
            .map(|i| {
                Ok(RowConverter::new(
                    i.key_types.iter().cloned().map(SortField::new).collect(),
                )?)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut feeds = Vec::with_capacity(n);
        let mut instances = Vec::with_capacity(n);
        for _ in 0..n {
            let slots: Vec<SharedSlot> = inputs.iter().map(|_| SharedSlot::default()).collect();
            let ops: Vec<Box<dyn Operator>> = slots
                .iter()
                .zip(&inputs)
                .enumerate()
                .map(|(i, (slot, input))| {
                    Box::new(Feed {
                        slot: Arc::clone(slot),
                        schema: input.upstream.schema(),
                        input: i,
                    }) as Box<dyn Operator>
                })
                .collect();
            instances.push(make(ops)?);
            feeds.push(slots);
        }
        Ok(Exchange {
            inputs,
            converters,
            feeds,
            instances,
            alignment_ns,
        })
    }

    /// Splits `change` by key hash into one piece per instance (empty pieces left out).
    fn route(
        &self,
        input: usize,
        change: &ChangeBatch,
        into: &mut [Vec<ChangeBatch>],
    ) -> Result<()> {
        let n = into.len();
        let rows = change.len();
        let spec = &self.inputs[input];
        let cols = spec
            .keys
            .iter()
            .map(|e| Ok(e.evaluate(&change.batch)?.into_array(rows)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let keys = self.converters[input].convert_columns(&cols)?;
        // One pass over the rows: each row's index goes to its instance's list.
        let mut picks: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, key) in keys.iter().enumerate() {
            picks[twox_hash::XxHash32::oneshot(0, key.data()) as usize % n].push(i as u32);
        }
        for (pick, piece) in picks.into_iter().zip(into.iter_mut()) {
            if pick.len() == rows {
                piece.push(change.clone());
            } else if !pick.is_empty() {
                piece.push(change.take(&UInt32Array::from(pick))?);
            }
        }
        Ok(())
    }

    /// Runs every instance on its feed: on threads of their own (joined before returning)
    /// when the input is large enough, else one after the other. Returns each instance's
    /// result in instance order and the alignment time (from the first instance's end to the
    /// last one's).
    fn run_instances(
        &mut self,
        ctx: &EpochContext,
        rows: usize,
    ) -> (Vec<Result<Vec<ChangeBatch>>>, Duration) {
        if rows < PARALLEL_MIN_ROWS {
            let out = self
                .instances
                .iter_mut()
                .map(|op| op.process(ctx))
                .collect();
            return (out, Duration::ZERO);
        }
        let start = Instant::now();
        let timed: Vec<(Result<Vec<ChangeBatch>>, Duration)> = std::thread::scope(|scope| {
            let mut ops = self.instances.iter_mut();
            let first = ops.next();
            let handles: Vec<_> = ops
                .map(|op| {
                    std::thread::Builder::new()
                        .stack_size(crate::THREAD_STACK_BYTES)
                        .spawn_scoped(scope, move || {
                            let r = op.process(ctx);
                            (r, start.elapsed())
                        })
                })
                .collect();
            let mut timed = Vec::with_capacity(handles.len() + 1);
            if let Some(op) = first {
                let r = op.process(ctx);
                timed.push((r, start.elapsed()));
            }
            for h in handles {
                let joined = match h {
                    Ok(h) => h.join().unwrap_or_else(|_| {
                        (
                            Err(Error::Internal("a parallel instance panicked".into())),
                            start.elapsed(),
                        )
                    }),
                    Err(e) => (
                        Err(Error::Internal(format!(
                            "cannot start a parallel instance's thread: {e}"
                        ))),
                        start.elapsed(),
                    ),
                };
                timed.push(joined);
            }
            timed
        });
        let first_done = timed.iter().map(|(_, d)| *d).min().unwrap_or_default();
        let last_done = timed.iter().map(|(_, d)| *d).max().unwrap_or_default();
        (
            timed.into_iter().map(|(r, _)| r).collect(),
            last_done - first_done,
        )
    }
}

impl Operator for Exchange {
    fn schema(&self) -> SchemaRef {
        self.instances[0].schema()
    }

    fn process(&mut self, ctx: &EpochContext) -> Result<Vec<ChangeBatch>> {
        let n = self.instances.len();
        let mut rows = 0;
        for i in 0..self.inputs.len() {
            let changes = self.inputs[i].upstream.process(ctx)?;
            let watermarks = self.inputs[i].upstream.watermarks(ctx);
            let mut pieces: Vec<Vec<ChangeBatch>> = vec![Vec::new(); n];
            for change in changes.iter().filter(|c| !c.is_empty()) {
                rows += change.len();
                self.route(i, change, &mut pieces)?;
            }
            for (s, part) in pieces.into_iter().enumerate() {
                let mut slot = lock(&self.feeds[s][i]);
                slot.changes = part;
                slot.watermarks = watermarks.clone();
            }
        }
        let (results, alignment) = self.run_instances(ctx, rows);
        self.alignment_ns
            .fetch_add(alignment.as_nanos() as u64, Ordering::Relaxed);
        let mut out = Vec::new();
        for r in results {
            out.extend(r?);
        }
        Ok(out)
    }

    fn watermarks(&self, ctx: &EpochContext) -> Watermarks {
        let each: Vec<Watermarks> = self.instances.iter().map(|i| i.watermarks(ctx)).collect();
        crate::stream::watermark::least_of(&each, self.schema().fields().len())
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let mut own = Vec::new();
        self.instances[0].explain(depth, &mut own);
        for line in own {
            let Some(at) = line.find(FEED_MARKER) else {
                out.push(line);
                continue;
            };
            let input: usize = line[at + FEED_MARKER.len()..].parse().unwrap_or(0);
            let inner = at / 2;
            let Some(spec) = self.inputs.get(input) else {
                continue;
            };
            let keys: Vec<String> = spec.keys.iter().map(|k| k.to_string()).collect();
            out.push(format!(
                "{}StreamExchange: hash({}) into {} parallel instances",
                "  ".repeat(inner),
                keys.join(", "),
                self.instances.len()
            ));
            spec.upstream.explain(inner + 1, out);
        }
    }

    fn visit_state(&mut self, path: &str, f: &mut StateVisitor<'_>) -> Result<()> {
        for (i, op) in self.instances.iter_mut().enumerate() {
            op.visit_state(&format!("{path}#{i}"), f)?;
        }
        for input in &mut self.inputs {
            input
                .upstream
                .visit_state(&input_path(path, input.edge), f)?;
        }
        Ok(())
    }

    fn restore(&mut self) -> Result<()> {
        for input in &mut self.inputs {
            input.upstream.restore()?;
        }
        for op in &mut self.instances {
            op.restore()?;
        }
        Ok(())
    }
}
