//! Restart strategies: what a job does after a run-time failure.
//!
//! The strategies and their parameters are Flink's ("Task Failure Recovery" in the Flink
//! documentation): `none`, `fixed-delay`, `failure-rate` and `exponential-delay`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A restart strategy with its parameters (times in ms).
#[derive(Debug, Clone, PartialEq)]
pub enum RestartStrategy {
    /// Never restart: the first failure fails the job.
    None,
    /// Restart up to `attempts` times, waiting `delay_ms` before each.
    FixedDelay {
        /// Restarts allowed before the job fails.
        attempts: u32,
        /// Pause before each restart (ms).
        delay_ms: u64,
    },
    /// Restart while at most `max_failures` failures happened within `interval_ms`.
    FailureRate {
        /// Failures allowed per interval.
        max_failures: u32,
        /// The measuring interval (ms).
        interval_ms: u64,
        /// Pause before each restart (ms).
        delay_ms: u64,
    },
    /// Restart forever, the pause growing from `initial_ms` by `multiplier` up to `max_ms`,
    /// plus a random `jitter` fraction of it.
    ExponentialDelay {
        /// First pause (ms).
        initial_ms: u64,
        /// Longest pause (ms).
        max_ms: u64,
        /// Growth per restart.
        multiplier: f64,
        /// Random fraction (0..=1) of the pause added to it.
        jitter: f64,
    },
}

/// Applies a [`RestartStrategy`] to a job's failures over time.
#[derive(Debug, Clone)]
pub struct RestartTracker {
    strategy: RestartStrategy,
    attempts: u32,
    failures: VecDeque<Instant>,
    next_backoff_ms: Option<f64>,
}

impl RestartTracker {
    /// A tracker with no failures yet.
    pub fn new(strategy: RestartStrategy) -> Self {
        RestartTracker {
            strategy,
            attempts: 0,
            failures: VecDeque::new(),
            next_backoff_ms: None,
        }
    }

    /// Records a failure at `now`: `Some(pause)` before the restart, or `None` when the
    /// strategy gives up and the job must fail.
    pub fn on_failure(&mut self, now: Instant) -> Option<Duration> {
        match &self.strategy {
            RestartStrategy::None => None,
            RestartStrategy::FixedDelay { attempts, delay_ms } => {
                if self.attempts < *attempts {
                    self.attempts += 1;
                    Some(Duration::from_millis(*delay_ms))
                } else {
                    None
                }
            }
            RestartStrategy::FailureRate {
                max_failures,
                interval_ms,
                delay_ms,
            } => {
                let window = Duration::from_millis(*interval_ms);
                self.failures.push_back(now);
                while let Some(first) = self.failures.front() {
                    if now.duration_since(*first) > window {
                        self.failures.pop_front();
                    } else {
                        break;
                    }
                }
                if self.failures.len() as u32 > *max_failures {
                    None
                } else {
                    Some(Duration::from_millis(*delay_ms))
                }
            }
            RestartStrategy::ExponentialDelay {
                initial_ms,
                max_ms,
                multiplier,
                jitter,
            } => {
                let base = self.next_backoff_ms.unwrap_or(*initial_ms as f64);
                self.next_backoff_ms = Some((base * multiplier).min(*max_ms as f64));
                let extra = base * jitter * pseudo_random_fraction(now);
                Some(Duration::from_millis(
                    (base + extra).min(*max_ms as f64) as u64
                ))
            }
        }
    }

    /// Forgets past failures (after `ALTER MATERIALIZED VIEW ... RESUME`).
    pub fn reset(&mut self) {
        *self = RestartTracker::new(self.strategy.clone());
    }
}

/// A fraction in [0, 1) from the clock's low bits: enough to spread restarts apart.
fn pseudo_random_fraction(now: Instant) -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let _ = now;
    let mut x = u64::from(nanos) ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x % 1_000_000) as f64 / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_delay_gives_up_after_attempts() {
        let mut t = RestartTracker::new(RestartStrategy::FixedDelay {
            attempts: 2,
            delay_ms: 10,
        });
        let now = Instant::now();
        assert_eq!(t.on_failure(now), Some(Duration::from_millis(10)));
        assert_eq!(t.on_failure(now), Some(Duration::from_millis(10)));
        assert_eq!(t.on_failure(now), None);
    }

    #[test]
    fn failure_rate_counts_within_the_interval() {
        let mut t = RestartTracker::new(RestartStrategy::FailureRate {
            max_failures: 2,
            interval_ms: 1000,
            delay_ms: 0,
        });
        let t0 = Instant::now();
        assert!(t.on_failure(t0).is_some());
        assert!(t.on_failure(t0 + Duration::from_millis(10)).is_some());
        assert!(t.on_failure(t0 + Duration::from_millis(20)).is_none());
        // Two seconds later the old failures have left the window.
        let mut t = RestartTracker::new(RestartStrategy::FailureRate {
            max_failures: 1,
            interval_ms: 1000,
            delay_ms: 0,
        });
        assert!(t.on_failure(t0).is_some());
        assert!(t.on_failure(t0 + Duration::from_secs(2)).is_some());
    }

    #[test]
    fn exponential_delay_grows_to_the_cap() {
        let mut t = RestartTracker::new(RestartStrategy::ExponentialDelay {
            initial_ms: 100,
            max_ms: 300,
            multiplier: 2.0,
            jitter: 0.0,
        });
        let now = Instant::now();
        let pauses: Vec<u64> = (0..4)
            .map(|_| t.on_failure(now).unwrap().as_millis() as u64)
            .collect();
        assert_eq!(pauses, vec![100, 200, 300, 300]);
    }

    #[test]
    fn none_never_restarts() {
        let mut t = RestartTracker::new(RestartStrategy::None);
        assert_eq!(t.on_failure(Instant::now()), None);
    }
}
