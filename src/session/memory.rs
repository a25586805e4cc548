//! The per-query memory limit: a DataFusion memory pool whose size follows the session's
//! `query.memory_limit_mb` setting.
//!
//! DataFusion's operators that hold data (sorts, hash aggregates, hash joins, ...) reserve
//! memory from the pool before they grow; a reservation past the limit fails the query with
//! SQLSTATE 53200 (`out_of_memory`) instead of letting one query exhaust the server.
//!
//! A query's result counts too: its rows as they are gathered, and those not yet sent while
//! they wait for the client to read them (a client that stops reading would otherwise hold
//! the whole result in the server), see [`reserve_result`].

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::common::DataFusionError;
use datafusion::execution::memory_pool::{MemoryLimit, MemoryPool, MemoryReservation};

/// A first-come-first-served pool (like DataFusion's `GreedyMemoryPool`) whose limit can be
/// changed while the session lives. Shared by the queries of one session, which run one at a
/// time, so it limits each query.
#[derive(Debug)]
pub struct QueryMemoryPool {
    /// Bytes reserved now.
    used: AtomicUsize,
    /// The limit in bytes.
    limit: AtomicUsize,
}

impl QueryMemoryPool {
    /// A pool of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        QueryMemoryPool {
            used: AtomicUsize::new(0),
            limit: AtomicUsize::new(limit),
        }
    }

    /// Sets the limit in bytes (applies to reservations made from now on).
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }
}

impl fmt::Display for QueryMemoryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "query memory pool ({} of {} bytes used)",
            self.used.load(Ordering::Relaxed),
            self.limit.load(Ordering::Relaxed)
        )
    }
}

impl MemoryPool for QueryMemoryPool {
    fn name(&self) -> &str {
        "query"
    }

    fn grow(&self, _reservation: &MemoryReservation, additional: usize) {
        self.used.fetch_add(additional, Ordering::Relaxed);
    }

    fn shrink(&self, _reservation: &MemoryReservation, shrink: usize) {
        self.used.fetch_sub(shrink, Ordering::Relaxed);
    }

    fn try_grow(
        &self,
        _reservation: &MemoryReservation,
        additional: usize,
    ) -> datafusion::common::Result<()> {
        let limit = self.limit.load(Ordering::Relaxed);
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                let next = used.checked_add(additional)?;
                (next <= limit).then_some(next)
            })
            .map_err(|_| {
                DataFusionError::ResourcesExhausted(format!(
                    "out of memory: the query needs more than query.memory_limit_mb = {} MB",
                    limit / (1024 * 1024)
                ))
            })?;
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.limit.load(Ordering::Relaxed))
    }
}

/// The bytes the rows of `batch` use (a slice counts its part of a shared buffer, not the
/// whole buffer).
pub fn batch_bytes(batch: &arrow::array::RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| {
            c.to_data()
                .get_slice_memory_size()
                .unwrap_or_else(|_| c.get_array_memory_size())
        })
        .sum()
}

/// An empty reservation of a query's result in `pool`, the session's pool.
pub fn result_reservation(pool: &std::sync::Arc<QueryMemoryPool>) -> MemoryReservation {
    let pool: std::sync::Arc<dyn MemoryPool> = pool.clone();
    datafusion::execution::memory_pool::MemoryConsumer::new("query result").register(&pool)
}

/// Reserves `bytes` more of a query's result in `reservation` (a consumer of the session's
/// pool).
///
/// # Errors
/// `53200` when the pool cannot hold them: the result is bigger than the
/// `query.memory_limit_mb` left.
pub fn reserve_result(
    reservation: &MemoryReservation,
    bytes: usize,
    limit: usize,
) -> crate::error::Result<()> {
    reservation.try_grow(bytes).map_err(|_| {
        crate::error::Error::data(
            "53200",
            format!(
                "out of memory: the query's result needs more than query.memory_limit_mb = {} MB until the client reads it",
                limit / (1024 * 1024)
            ),
        )
    })
}
