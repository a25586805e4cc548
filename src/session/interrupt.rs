//! Canceling a session's running statement: PostgreSQL's cancel request and
//! `statement_timeout` (docs, 55.2.7 "Canceling Requests in Progress" and 20.11
//! "Client Connection Defaults"), both reported as `57014`.
//!
//! ```text
//!  cancel request (another connection, pid + secret key) ─► Interrupt::cancel ─┐
//!  statement_timeout (deadline set at Interrupt::start) ───────────────────────┤
//!                                                                              ▼
//!  the connection's statement future, raced against Interrupt::interrupted ─► dropped, 57014
//!  pg_sleep's wait, checking Interrupt::check every 10 ms ───────────────────► 57014
//! ```
//!
//! A cancel request that comes while no statement runs does nothing, as in PostgreSQL.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crate::error::Error;

/// PostgreSQL's message for a statement canceled by a client's cancel request.
pub const USER_REQUEST: &str = "canceling statement due to user request";
/// PostgreSQL's message for a statement that ran past `statement_timeout`.
pub const STATEMENT_TIMEOUT: &str = "canceling statement due to statement timeout";

const IDLE: u8 = 0;
const RUNNING: u8 = 1;
const CANCELED: u8 = 2;

/// One session's cancel state: whether a statement runs, whether it was canceled, and its
/// deadline.
#[derive(Debug)]
pub struct Interrupt {
    state: AtomicU8,
    deadline: Mutex<Option<Instant>>,
    wake: tokio::sync::Notify,
}

impl Default for Interrupt {
    fn default() -> Self {
        Interrupt {
            state: AtomicU8::new(IDLE),
            deadline: Mutex::new(None),
            wake: tokio::sync::Notify::new(),
        }
    }
}

impl Interrupt {
    /// A statement starts; it may run for `timeout` (`None`: no limit).
    pub fn start(&self, timeout: Option<Duration>) {
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner()) =
            timeout.map(|t| Instant::now() + t);
        self.state.store(RUNNING, Ordering::SeqCst);
    }

    /// The statement ended; a cancel request from now on does nothing.
    pub fn finish(&self) {
        self.state.store(IDLE, Ordering::SeqCst);
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// A client's cancel request: cancels the running statement, if there is one.
    pub fn cancel(&self) {
        if self
            .state
            .compare_exchange(RUNNING, CANCELED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            self.wake.notify_one();
        }
    }

    /// The `57014` error when the running statement is canceled or past its deadline.
    pub fn check(&self) -> Option<Error> {
        if self.state.load(Ordering::SeqCst) == CANCELED {
            return Some(Error::QueryCanceled(USER_REQUEST));
        }
        let deadline = *self.deadline.lock().unwrap_or_else(|p| p.into_inner());
        match deadline {
            Some(d) if Instant::now() >= d => Some(Error::QueryCanceled(STATEMENT_TIMEOUT)),
            _ => None,
        }
    }

    /// Resolves with the `57014` error once the running statement is canceled or past its
    /// deadline; never while neither happens.
    pub async fn interrupted(&self) -> Error {
        loop {
            if let Some(e) = self.check() {
                return e;
            }
            let deadline = *self.deadline.lock().unwrap_or_else(|p| p.into_inner());
            match deadline {
                Some(d) => {
                    tokio::select! {
                        () = self.wake.notified() => {}
                        () = tokio::time::sleep_until(d.into()) => {}
                    }
                }
                None => self.wake.notified().await,
            }
        }
    }

    /// Sleeps `wait` (on the calling thread), returning early with the `57014` error if the
    /// statement is canceled or reaches its deadline meanwhile; checks every 10 ms.
    ///
    /// # Errors
    /// [`Error::QueryCanceled`].
    pub fn sleep(&self, wait: Duration) -> Result<(), Error> {
        let end = Instant::now() + wait;
        loop {
            if let Some(e) = self.check() {
                return Err(e);
            }
            let now = Instant::now();
            if now >= end {
                return Ok(());
            }
            std::thread::sleep((end - now).min(Duration::from_millis(10)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_only_while_running() {
        let i = Interrupt::default();
        i.cancel();
        assert!(i.check().is_none(), "a cancel while idle does nothing");
        i.start(None);
        assert!(i.check().is_none());
        i.cancel();
        assert_eq!(i.check().map(|e| e.sqlstate()), Some("57014"));
        i.finish();
        i.start(None);
        assert!(i.check().is_none(), "the next statement starts afresh");
    }

    #[test]
    fn deadline_ends_a_sleep() {
        let i = Interrupt::default();
        i.start(Some(Duration::from_millis(30)));
        let started = Instant::now();
        let e = i.sleep(Duration::from_secs(10)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(e.to_string(), STATEMENT_TIMEOUT);
        i.finish();
        assert!(i.sleep(Duration::from_millis(1)).is_ok());
    }

    #[tokio::test]
    async fn interrupted_resolves_on_cancel() {
        let i = std::sync::Arc::new(Interrupt::default());
        i.start(None);
        let waiter = {
            let i = std::sync::Arc::clone(&i);
            tokio::spawn(async move { i.interrupted().await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        i.cancel();
        let e = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("resolves")
            .expect("joins");
        assert_eq!(e.to_string(), USER_REQUEST);
    }
}
