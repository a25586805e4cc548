//! Fault injection for tests, compiled in only with the `failpoints` cargo feature (the test
//! command turns it on; release builds have every failpoint as a no-op returning `None`).
//!
//! A failpoint is a named place in the code ([`eval`]). Its action is set with [`cfg`] in
//! process, or for a server binary with the environment variable
//! `WEIR_FAILPOINTS="name=action;name=action"`, read on first use. Actions:
//! `sleep(ms)` pauses there, `return` or `return(message)` makes it fail, `off` clears it.
//!
//! Failpoints in Weir: `checkpoint::async_phase` (a checkpoint's async phase: make it slow or
//! fail), `job::process` (a job's epoch processing: make the job fail) and
//! `session::statement_panic` (`return(marker)`: a statement whose text contains `marker`
//! panics, to test that a connection survives a statement's panic).

#[cfg(feature = "failpoints")]
mod imp {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    use std::time::Duration;

    #[derive(Clone, Debug)]
    enum Action {
        Sleep(u64),
        Return(String),
    }

    fn registry() -> &'static Mutex<HashMap<String, Action>> {
        static REGISTRY: OnceLock<Mutex<HashMap<String, Action>>> = OnceLock::new();
        REGISTRY.get_or_init(|| {
            let mut map = HashMap::new();
            if let Ok(spec) = std::env::var("WEIR_FAILPOINTS") {
                for item in spec.split(';').filter(|s| !s.trim().is_empty()) {
                    if let Some((name, action)) = item.split_once('=')
                        && let Ok(Some(a)) = parse(action)
                    {
                        map.insert(name.trim().to_string(), a);
                    }
                }
            }
            Mutex::new(map)
        })
    }

    fn parse(action: &str) -> Result<Option<Action>, String> {
        let a = action.trim();
        if a == "off" {
            return Ok(None);
        }
        if a == "return" {
            return Ok(Some(Action::Return("injected failure".into())));
        }
        let inner = |prefix: &str| {
            a.strip_prefix(prefix)
                .and_then(|r| r.strip_prefix('('))
                .and_then(|r| r.strip_suffix(')'))
        };
        if let Some(ms) = inner("sleep") {
            return ms
                .trim()
                .parse()
                .map(|ms| Some(Action::Sleep(ms)))
                .map_err(|_| format!("bad sleep duration in \"{a}\""));
        }
        if let Some(msg) = inner("return") {
            return Ok(Some(Action::Return(msg.to_string())));
        }
        Err(format!(
            "unknown failpoint action \"{a}\"; use sleep(ms), return, return(message) or off"
        ))
    }

    pub fn eval(name: &str) -> Option<String> {
        let action = registry()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned();
        match action? {
            Action::Sleep(ms) => {
                std::thread::sleep(Duration::from_millis(ms));
                None
            }
            Action::Return(msg) => Some(msg),
        }
    }

    pub fn cfg(name: &str, action: &str) -> Result<(), String> {
        let mut map = registry().lock().unwrap_or_else(|e| e.into_inner());
        match parse(action)? {
            Some(a) => map.insert(name.to_string(), a),
            None => map.remove(name),
        };
        Ok(())
    }
}

/// Evaluates failpoint `name`: sleeps if so configured, and returns `Some(message)` when it is
/// set to fail. Always `None` without the `failpoints` feature.
#[inline]
pub fn eval(name: &str) -> Option<String> {
    #[cfg(feature = "failpoints")]
    {
        imp::eval(name)
    }
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = name;
        None
    }
}

/// Sets failpoint `name` to `action` (`sleep(ms)`, `return`, `return(message)`, `off`).
///
/// # Errors
/// A message for an unknown action, or when built without the `failpoints` feature.
pub fn cfg(name: &str, action: &str) -> Result<(), String> {
    #[cfg(feature = "failpoints")]
    {
        imp::cfg(name, action)
    }
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = (name, action);
        Err("this build has no failpoints (build with --features failpoints)".into())
    }
}
