//! Session variables: `SET`, `SHOW`, `RESET`, with types, defaults and validation.
//!
//! Below the session layer: the engine, checkpointing and the system tables read settings
//! without depending on the session that changes them.
//!
//! Weir's own settings follow Flink's checkpointing options (see the Flink documentation,
//! "Checkpointing" and "Task Failure Recovery"); the PostgreSQL ones that drivers send on
//! connect are accepted and echoed back.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// The type of a setting's value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// A duration; stored in ms. `off`/`0` allowed when `off_ok`.
    Duration { min_ms: u64, off_ok: bool },
    /// One of a fixed list of words.
    Enum(&'static [&'static str]),
    /// An integer in `[min, max]`.
    Int { min: i64, max: i64 },
    /// A float in `[min, max]`.
    Float { min: f64, max: f64 },
    /// `true`/`false` (also on/off, yes/no, 1/0).
    Bool,
    /// Free text (PostgreSQL compatibility settings).
    Text,
    /// A time zone: an IANA name or hours east of UTC (`TimeZone`).
    TimeZone,
    /// `DateStyle`: an output style and a field order, comma-separated, either may be left
    /// out (PostgreSQL docs, 20.11.2). Weir writes dates in the ISO style only, so that is
    /// the style it takes.
    DateStyle,
}

struct Spec {
    name: &'static str,
    kind: Kind,
    default: &'static str,
    description: &'static str,
}

const RESTART_STRATEGIES: &[&str] = &["none", "fixed-delay", "failure-rate", "exponential-delay"];

const SPECS: &[Spec] = &[
    Spec {
        name: "checkpoint.interval",
        kind: Kind::Duration {
            min_ms: 10,
            off_ok: true,
        },
        default: "off",
        description: "Time between checkpoint triggers of a view's job; off disables checkpointing (minimum 10ms).",
    },
    Spec {
        name: "checkpoint.mode",
        kind: Kind::Enum(&["exactly_once", "at_least_once"]),
        default: "exactly_once",
        description: "Barrier alignment: exactly_once aligns barriers; at_least_once does not block and may replay records twice after a failure.",
    },
    Spec {
        name: "checkpoint.timeout",
        kind: Kind::Duration {
            min_ms: 10,
            off_ok: false,
        },
        default: "10min",
        description: "A checkpoint still running after this long is aborted (EXPIRED).",
    },
    Spec {
        name: "checkpoint.min_pause",
        kind: Kind::Duration {
            min_ms: 0,
            off_ok: true,
        },
        default: "0",
        description: "Minimum time between the completion of one checkpoint and the trigger of the next.",
    },
    Spec {
        name: "checkpoint.max_concurrent",
        kind: Kind::Int { min: 1, max: 64 },
        default: "1",
        description: "Checkpoints of one job in flight at once.",
    },
    Spec {
        name: "checkpoint.tolerable_failures",
        kind: Kind::Int {
            min: 0,
            max: 1_000_000,
        },
        default: "0",
        description: "Consecutive checkpoint failures tolerated before the job fails.",
    },
    Spec {
        name: "checkpoint.retained",
        kind: Kind::Int { min: 1, max: 1000 },
        default: "1",
        description: "Completed checkpoints kept per job.",
    },
    Spec {
        name: "checkpoint.force",
        kind: Kind::Bool,
        default: "false",
        description: "Checkpoint jobs with a feedback edge (records in flight on the loop may be lost).",
    },
    Spec {
        name: "state.backend",
        kind: Kind::Enum(&["rocksdb", "memory"]),
        default: "rocksdb",
        description: "Where a job keeps its state and writes its checkpoints.",
    },
    Spec {
        name: "restart.strategy",
        kind: Kind::Enum(RESTART_STRATEGIES),
        default: "",
        description: "What a failed job does: none, fixed-delay, failure-rate or exponential-delay (default: exponential-delay with checkpointing on, none with it off).",
    },
    Spec {
        name: "restart.attempts",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        default: "1",
        description: "fixed-delay: restarts before the job fails.",
    },
    Spec {
        name: "restart.delay",
        kind: Kind::Duration {
            min_ms: 0,
            off_ok: false,
        },
        default: "1s",
        description: "fixed-delay and failure-rate: pause before a restart.",
    },
    Spec {
        name: "restart.failure_rate.max_failures",
        kind: Kind::Int {
            min: 1,
            max: i32::MAX as i64,
        },
        default: "1",
        description: "failure-rate: failures allowed per interval.",
    },
    Spec {
        name: "restart.failure_rate.interval",
        kind: Kind::Duration {
            min_ms: 1,
            off_ok: false,
        },
        default: "1min",
        description: "failure-rate: the measuring interval.",
    },
    Spec {
        name: "restart.backoff.initial",
        kind: Kind::Duration {
            min_ms: 1,
            off_ok: false,
        },
        default: "1s",
        description: "exponential-delay: first pause.",
    },
    Spec {
        name: "restart.backoff.max",
        kind: Kind::Duration {
            min_ms: 1,
            off_ok: false,
        },
        default: "1min",
        description: "exponential-delay: longest pause.",
    },
    Spec {
        name: "restart.backoff.multiplier",
        kind: Kind::Float {
            min: 1.0,
            max: 1000.0,
        },
        default: "1.5",
        description: "exponential-delay: growth of the pause per restart.",
    },
    Spec {
        name: "restart.backoff.jitter",
        kind: Kind::Float { min: 0.0, max: 1.0 },
        default: "0.1",
        description: "exponential-delay: random fraction added to each pause.",
    },
    Spec {
        name: "streaming.parallelism",
        kind: Kind::Int { min: 0, max: 64 },
        default: "0",
        description: "Parallel instances of each keyed operator (aggregate, join, OVER window) of a new materialized view, split by key hash; 0 means one per CPU core.",
    },
    Spec {
        name: "query.memory_limit_mb",
        kind: Kind::Int {
            min: 16,
            max: 1_048_576,
        },
        default: "2048",
        description: "Memory one query may hold in its operators (sorts, hash tables), in MiB; past it the query fails with 53200.",
    },
    Spec {
        name: "application_name",
        kind: Kind::Text,
        default: "",
        description: "Name of the client application.",
    },
    Spec {
        name: "jit",
        kind: Kind::Enum(&["on", "off"]),
        default: "off",
        description: "JIT compilation of expressions (PostgreSQL compatibility: Weir compiles none; drivers turn it off).",
    },
    Spec {
        name: "client_encoding",
        kind: Kind::Enum(&["utf8", "unicode"]),
        default: "UTF8",
        description: "Client character set (only UTF8).",
    },
    Spec {
        name: "client_min_messages",
        kind: Kind::Enum(&[
            "debug5", "debug4", "debug3", "debug2", "debug1", "log", "notice", "warning", "error",
        ]),
        default: "notice",
        description: "Lowest message level sent to the client.",
    },
    Spec {
        name: "datestyle",
        kind: Kind::DateStyle,
        default: "ISO, MDY",
        description: "Display format for dates.",
    },
    Spec {
        name: "extra_float_digits",
        kind: Kind::Int { min: -15, max: 3 },
        default: "1",
        description: "Extra digits for floating-point output.",
    },
    Spec {
        name: "intervalstyle",
        kind: Kind::Enum(&["postgres"]),
        default: "postgres",
        description: "Display format for intervals.",
    },
    Spec {
        name: "search_path",
        kind: Kind::Text,
        default: "public",
        description: "Schema search order.",
    },
    Spec {
        name: "standard_conforming_strings",
        kind: Kind::Enum(&["on"]),
        default: "on",
        description: "Backslashes in ordinary string literals are literal.",
    },
    Spec {
        name: "statement_timeout",
        kind: Kind::Duration {
            min_ms: 0,
            off_ok: true,
        },
        default: "0",
        description: "A query (SELECT, SHOW, EXPLAIN, FLUSH) running longer than this is canceled with 57014; 0 waits without limit.",
    },
    Spec {
        name: "lock_timeout",
        kind: Kind::Text,
        default: "0",
        description: "Accepted for compatibility.",
    },
    Spec {
        name: "idle_in_transaction_session_timeout",
        kind: Kind::Text,
        default: "0",
        description: "Accepted for compatibility.",
    },
    Spec {
        name: "timezone",
        kind: Kind::TimeZone,
        default: "UTC",
        description: "Time zone timestamptz values are shown in (an IANA name such as Europe/Berlin, or hours east of UTC); they are stored in UTC.",
    },
    Spec {
        name: "bytea_output",
        kind: Kind::Text,
        default: "hex",
        description: "Accepted for compatibility.",
    },
    Spec {
        name: "default_transaction_isolation",
        kind: Kind::Text,
        default: "read committed",
        description: "Accepted for compatibility.",
    },
    Spec {
        name: "transaction_isolation",
        kind: Kind::Text,
        default: "read committed",
        description: "Accepted for compatibility.",
    },
    Spec {
        name: "server_version",
        kind: Kind::Text,
        default: "16.6",
        description: "PostgreSQL version Weir's protocol follows.",
    },
    Spec {
        name: "server_encoding",
        kind: Kind::Text,
        default: "UTF8",
        description: "Server character set.",
    },
    Spec {
        name: "integer_datetimes",
        kind: Kind::Text,
        default: "on",
        description: "Timestamps are 64-bit integers.",
    },
    Spec {
        name: "max_identifier_length",
        kind: Kind::Text,
        default: "63",
        description: "Longest identifier.",
    },
    Spec {
        name: "is_superuser",
        kind: Kind::Text,
        default: "on",
        description: "The user is a superuser.",
    },
    Spec {
        name: "row_security",
        kind: Kind::Text,
        default: "off",
        description: "Accepted for compatibility.",
    },
    Spec {
        name: "synchronous_commit",
        kind: Kind::Text,
        default: "on",
        description: "Accepted for compatibility (writes are always synced).",
    },
    Spec {
        name: "work_mem",
        kind: Kind::Text,
        default: "4MB",
        description: "Accepted for compatibility.",
    },
    Spec {
        name: "enable_seqscan",
        kind: Kind::Text,
        default: "on",
        description: "Accepted for compatibility.",
    },
];

/// Read-only settings (SET is refused with `55P02`-like `22023`).
const READ_ONLY: &[&str] = &[
    "server_version",
    "server_encoding",
    "integer_datetimes",
    "max_identifier_length",
    "is_superuser",
];

/// One session's variables.
#[derive(Debug, Clone, Default)]
pub struct SessionVars {
    values: BTreeMap<&'static str, String>,
    /// Server-wide defaults (`--set` flags); `RESET` returns to these.
    defaults: BTreeMap<&'static str, String>,
    /// Whether the session's user is a superuser (`is_superuser`, read-only; `None` before
    /// a user is known reads as `on`, the trusted default user).
    superuser: Option<bool>,
}

/// Parses a duration: integer milliseconds, or a number with unit `ms`, `s`, `min`, `h`, `d`
/// (also `sec`, `second(s)`, `minute(s)`, `hour(s)`), or `off`. Returns ms (`0` for off).
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_duration_ms(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    if t == "off" || t == "0" {
        return Ok(0);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| {
        "expected a duration such as '500ms', '1s', '2min' or integer milliseconds".to_string()
    })?;
    let factor = match unit.trim() {
        "" | "ms" | "millisecond" | "milliseconds" => 1.0,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000.0,
        "min" | "mins" | "minute" | "minutes" | "m" => 60_000.0,
        "h" | "hour" | "hours" => 3_600_000.0,
        "d" | "day" | "days" => 86_400_000.0,
        other => {
            return Err(format!(
                "unknown duration unit \"{other}\"; use ms, s, min, h or d"
            ));
        }
    };
    let ms = n * factor;
    if !ms.is_finite() || !(0.0..=1e15).contains(&ms) {
        return Err("duration out of range".into());
    }
    Ok(ms.round() as u64)
}

/// Formats milliseconds in the largest exact unit (`1s`, `500ms`, `10min`).
pub fn format_duration_ms(ms: u64) -> String {
    if ms == 0 {
        "0".into()
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}min", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// True when `name` names one of PostgreSQL's client encodings (`SQL_ASCII`, `LATIN1`,
/// `WIN1252`, ...; docs, 24.3.1 "Supported Character Sets", and their aliases), compared as
/// PostgreSQL's `pg_char_to_encoding` compares them: case and non-alphanumeric characters
/// ignored.
fn is_pg_encoding(name: &str) -> bool {
    const ENCODINGS: &[&str] = &[
        "sqlascii",
        "utf8",
        "unicode",
        "eucjp",
        "euccn",
        "euckr",
        "euctw",
        "eucjis2004",
        "muleinternal",
        "latin1",
        "latin2",
        "latin3",
        "latin4",
        "latin5",
        "latin6",
        "latin7",
        "latin8",
        "latin9",
        "latin10",
        "iso88591",
        "iso88592",
        "iso88593",
        "iso88594",
        "iso88599",
        "iso885910",
        "iso885913",
        "iso885914",
        "iso885915",
        "iso885916",
        "iso88595",
        "iso88596",
        "iso88597",
        "iso88598",
        "win1250",
        "win1251",
        "win1252",
        "win1253",
        "win1254",
        "win1255",
        "win1256",
        "win1257",
        "win1258",
        "win866",
        "win874",
        "win",
        "alt",
        "koi8",
        "koi8r",
        "koi8u",
        "sjis",
        "shiftjis",
        "shiftjis2004",
        "big5",
        "gbk",
        "uhc",
        "gb18030",
        "johab",
        "tcvn",
        "tcvn5712",
        "vscii",
        "abc",
        "mskanji",
        "windows932",
        "windows936",
        "windows949",
        "windows950",
        "windows1250",
        "windows1251",
        "windows1252",
        "windows1253",
        "windows1254",
        "windows1255",
        "windows1256",
        "windows1257",
        "windows1258",
        "windows866",
        "windows874",
        "cp866",
        "cp874",
        "cp932",
        "cp936",
        "cp949",
        "cp950",
        "cp1250",
        "cp1251",
        "cp1252",
        "cp1253",
        "cp1254",
        "cp1255",
        "cp1256",
        "cp1257",
        "cp1258",
    ];
    let clean: String = name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    ENCODINGS.contains(&clean.as_str())
}

/// The settings a StartupMessage's `options` parameter gives: `-c name=value`,
/// `-cname=value` and `--name=value` (a `-` in the name read as `_`), as PostgreSQL reads
/// the switches of its command line; words are split at spaces, and a backslash keeps the
/// character after it (a backslash and a space: a space). Other switches are skipped.
fn option_switches(options: &str) -> Vec<(String, String)> {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut chars = options.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            word.extend(chars.next());
        } else if c.is_ascii_whitespace() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let mut switches = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        let setting = if let Some(rest) = word.strip_prefix("--") {
            Some(rest.to_string())
        } else if word == "-c" {
            i += 1;
            words.get(i).cloned()
        } else {
            word.strip_prefix("-c").map(str::to_string)
        };
        if let Some((name, value)) = setting.as_deref().and_then(|s| s.split_once('=')) {
            switches.push((name.replace('-', "_"), value.to_string()));
        }
        i += 1;
    }
    switches
}

fn spec(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.name == name)
}

impl SessionVars {
    /// Normalizes a setting name (case-insensitive, as PostgreSQL).
    fn key(name: &str) -> Result<&'static Spec> {
        let lower = name.trim().to_ascii_lowercase();
        spec(&lower).ok_or_else(|| Error::Setting {
            code: "42704",
            message: format!("unrecognized configuration parameter \"{lower}\""),
        })
    }

    /// The current value of a setting, as SHOW prints it.
    ///
    /// # Errors
    /// `42704` for an unknown name.
    pub fn get(&self, name: &str) -> Result<String> {
        let s = Self::key(name)?;
        Ok(self.effective(s))
    }

    fn value(&self, s: &Spec) -> String {
        if let Some(v) = self
            .values
            .get(s.name)
            .or_else(|| self.defaults.get(s.name))
        {
            return v.clone();
        }
        if s.name == "restart.strategy" {
            // Flink's default: exponential-delay when checkpointing is on, none when off.
            return if self.interval_ms() > 0 {
                "exponential-delay".into()
            } else {
                "none".into()
            };
        }
        if s.name == "application_name" {
            return String::new();
        }
        if s.name == "is_superuser" && self.superuser == Some(false) {
            return "off".into();
        }
        s.default.to_string()
    }

    /// The effective value of `s`: [`SessionVars::value`] with `streaming.parallelism` 0
    /// resolved to the number of CPU cores.
    fn effective(&self, s: &Spec) -> String {
        let v = self.value(s);
        if s.name == "streaming.parallelism" && v == "0" {
            return default_parallelism().to_string();
        }
        v
    }

    fn ms(&self, name: &str) -> u64 {
        spec(name)
            .map(|s| parse_duration_ms(&self.value(s)).unwrap_or(0))
            .unwrap_or(0)
    }

    fn int(&self, name: &str) -> i64 {
        spec(name)
            .and_then(|s| self.value(s).parse().ok())
            .unwrap_or(0)
    }

    /// `query.memory_limit_mb` in bytes.
    pub fn query_memory_limit_bytes(&self) -> usize {
        usize::try_from(self.int("query.memory_limit_mb"))
            .unwrap_or(2048)
            .saturating_mul(1024 * 1024)
    }

    /// The session's time zone (`TimeZone`; UTC if it does not parse), that `timestamptz`
    /// values are shown in and text without an offset is read in.
    pub fn time_zone(&self) -> crate::sql::functions::datetime_input::TimeZoneSetting {
        use crate::sql::functions::datetime_input::{TimeZoneSetting, parse_time_zone};
        self.get("timezone")
            .ok()
            .and_then(|v| parse_time_zone(&v))
            .unwrap_or_else(|| TimeZoneSetting {
                setting: "UTC".into(),
                arrow: "+00:00".into(),
                zone: crate::session::utc_zone(),
            })
    }

    /// `statement_timeout` in ms (0 = no limit).
    pub fn statement_timeout_ms(&self) -> u64 {
        self.ms("statement_timeout")
    }

    /// `checkpoint.interval` in ms (0 = off).
    pub fn interval_ms(&self) -> u64 {
        self.ms("checkpoint.interval")
    }

    /// Sets a variable after validating its value and the seed's rules across settings.
    ///
    /// # Errors
    /// `42704` unknown name; `22023` bad value (naming what is allowed) or a broken rule.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        let s = Self::key(name)?;
        if READ_ONLY.contains(&s.name) {
            return Err(Error::Setting {
                code: "55P02",
                message: format!("parameter \"{}\" cannot be changed", s.name),
            });
        }
        let normalized = normalize(s, value)?;
        let mut next = self.clone();
        next.values.insert(s.name, normalized);
        next.check_rules()?;
        *self = next;
        Ok(())
    }

    /// Restores a variable's default (`RESET name`).
    ///
    /// # Errors
    /// `42704` unknown name; `22023` if the default breaks a rule with other settings.
    pub fn reset(&mut self, name: &str) -> Result<()> {
        let s = Self::key(name)?;
        let mut next = self.clone();
        next.values.remove(s.name);
        next.check_rules()?;
        *self = next;
        Ok(())
    }

    /// Records whether the session's user is a superuser, which `SHOW is_superuser` reports
    /// (PostgreSQL's read-only status setting).
    pub fn set_superuser(&mut self, superuser: bool) {
        self.superuser = Some(superuser);
    }

    /// Restores every default (`RESET ALL`).
    pub fn reset_all(&mut self) {
        self.values.clear();
    }

    /// The seed's rules between checkpoint settings.
    ///
    /// # Errors
    /// `22023` naming both settings and the rule.
    pub fn check_rules(&self) -> Result<()> {
        let interval = self.interval_ms();
        let pause = self.ms("checkpoint.min_pause");
        if interval > 0 && pause > 0 && interval < pause {
            return Err(Error::setting(format!(
                "checkpoint.interval ({}) must not be smaller than checkpoint.min_pause ({}): the next checkpoint cannot start sooner than the minimum pause after the previous one completed",
                format_duration_ms(interval),
                format_duration_ms(pause)
            )));
        }
        let concurrent = self.int("checkpoint.max_concurrent");
        if concurrent > 1 && pause > 0 {
            return Err(Error::setting(format!(
                "checkpoint.max_concurrent ({concurrent}) greater than 1 cannot be combined with checkpoint.min_pause ({}): a minimum pause implies at most one checkpoint in flight",
                format_duration_ms(pause)
            )));
        }
        Ok(())
    }

    /// Every setting: (name, value, description), as `SHOW ALL` lists them.
    pub fn all(&self) -> Vec<(String, String, String)> {
        SPECS
            .iter()
            .map(|s| {
                (
                    s.name.to_string(),
                    self.effective(s),
                    s.description.to_string(),
                )
            })
            .collect()
    }

    /// Applies a connection's startup parameters as the session's defaults, as PostgreSQL
    /// applies them (protocol docs, 55.7 "StartupMessage"; `postgres --help`'s `-c`): each
    /// `name = value` pair of the StartupMessage other than `user`, `database`,
    /// `replication` and `options`, then the `-c name=value` and `--name=value` switches of
    /// `options` (words split at spaces, `\ ` keeps a space; the pairs win over them).
    /// `RESET` returns to these values. A name Weir has no setting for is skipped
    /// (PostgreSQL refuses it, but drivers send settings of PostgreSQL's Weir does not
    /// have), and so is a `client_encoding` of PostgreSQL's other than UTF8 (Weir speaks
    /// UTF8 only; psql in a C locale asks for `SQL_ASCII`).
    ///
    /// # Errors
    /// `22023` for a value a setting refuses (naming what is allowed) or an encoding
    /// PostgreSQL does not have, `55P02` for a read-only setting, as `SET` would.
    pub fn apply_startup<'a>(
        &mut self,
        params: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<()> {
        // The switches of `options` first, then the other pairs, which win (PostgreSQL's
        // `process_startup_options` order).
        let mut options = Vec::new();
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (name, value) in params {
            match name {
                "user" | "database" | "replication" => {}
                "options" => options.extend(option_switches(value)),
                _ => pairs.push((name.to_string(), value.to_string())),
            }
        }
        options.extend(pairs);
        for (name, value) in options {
            let Ok(s) = Self::key(&name) else {
                tracing::debug!(%name, "startup parameter without a setting skipped");
                continue;
            };
            if s.name == "client_encoding" && normalize(s, &value).is_err() {
                if !is_pg_encoding(&value) {
                    return Err(Error::setting(format!(
                        "invalid value for parameter \"client_encoding\": \"{value}\""
                    )));
                }
                tracing::debug!(%value, "startup client_encoding other than UTF8 skipped");
                continue;
            }
            self.set(&name, &value)?;
        }
        let values = std::mem::take(&mut self.values);
        self.defaults.extend(values);
        Ok(())
    }

    /// Turns the values set so far into server-wide defaults: sessions start from them and
    /// `RESET` returns to them.
    pub fn into_defaults(mut self) -> SessionVars {
        let values = std::mem::take(&mut self.values);
        self.defaults.extend(values);
        self
    }

    /// Validates a job's settings: `base` (captured values) with `changes` applied, checked
    /// value by value and against the seed's rules. Returns the job's new settings.
    ///
    /// # Errors
    /// `42704` unknown name; `22023` bad value (naming what is allowed) or a broken rule.
    pub fn validate_job_settings(
        base: &BTreeMap<String, String>,
        changes: &[(String, String)],
    ) -> Result<BTreeMap<String, String>> {
        let mut v = SessionVars::default();
        for (k, val) in base {
            let s = Self::key(k)?;
            v.values.insert(s.name, normalize(s, val)?);
        }
        for (k, val) in changes {
            let s = Self::key(k)?;
            v.values.insert(s.name, normalize(s, val)?);
        }
        v.check_rules()?;
        Ok(v.job_settings())
    }

    /// The settings a materialized view's job captures (`checkpoint.*`, `restart.*`,
    /// `state.backend`, `streaming.parallelism`), with their effective values; and
    /// `timezone` when it is not UTC, which the view's query was planned in (a
    /// `timestamptz`'s date, fields and day arithmetic depend on it), so that recovery plans
    /// the stored query alike.
    pub fn job_settings(&self) -> BTreeMap<String, String> {
        let mut captured: BTreeMap<String, String> = SPECS
            .iter()
            .filter(|s| {
                s.name.starts_with("checkpoint.")
                    || s.name.starts_with("restart.")
                    || s.name == "state.backend"
                    || s.name == "streaming.parallelism"
            })
            .map(|s| (s.name.to_string(), self.effective(s)))
            .collect();
        let zone = self.time_zone().setting;
        if zone != "UTC" {
            captured.insert("timezone".to_string(), zone);
        }
        captured
    }
}

/// The default `streaming.parallelism`: the number of CPU cores the process may use (1 when
/// unknown).
pub fn default_parallelism() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(64)
}

fn normalize(s: &Spec, value: &str) -> Result<String> {
    let v = value.trim();
    let bad = |allowed: String| {
        Error::setting(format!(
            "invalid value for parameter \"{}\": \"{}\"; {}",
            s.name, v, allowed
        ))
    };
    match s.kind {
        Kind::Duration { min_ms, off_ok } => {
            let ms = parse_duration_ms(v).map_err(bad)?;
            if ms == 0 {
                if off_ok {
                    return Ok(if s.name == "checkpoint.interval" {
                        "off".into()
                    } else {
                        "0".into()
                    });
                }
                return Err(bad(format!(
                    "a duration of at least {} is required",
                    format_duration_ms(min_ms.max(1))
                )));
            }
            if ms < min_ms {
                return Err(bad(format!(
                    "the minimum is {}{}",
                    format_duration_ms(min_ms),
                    if off_ok { " (or 0/off)" } else { "" }
                )));
            }
            Ok(format_duration_ms(ms))
        }
        Kind::Enum(words) => {
            let lower = v.to_ascii_lowercase();
            if let Some(w) = words.iter().find(|w| **w == lower) {
                if s.name == "client_encoding" {
                    return Ok("UTF8".into());
                }
                Ok((*w).to_string())
            } else {
                Err(bad(format!("allowed values are: {}", words.join(", "))))
            }
        }
        Kind::Int { min, max } => match v.parse::<i64>() {
            Ok(n) if n >= min && n <= max => Ok(n.to_string()),
            _ => Err(bad(format!(
                "an integer between {min} and {max} is required"
            ))),
        },
        Kind::Float { min, max } => match v.parse::<f64>() {
            Ok(n) if n >= min && n <= max => Ok(n.to_string()),
            _ => Err(bad(format!("a number between {min} and {max} is required"))),
        },
        Kind::Bool => match v.to_ascii_lowercase().as_str() {
            "true" | "on" | "yes" | "1" | "t" => Ok("true".into()),
            "false" | "off" | "no" | "0" | "f" => Ok("false".into()),
            _ => Err(bad("allowed values are: true, false".into())),
        },
        Kind::Text => Ok(v.to_string()),
        Kind::DateStyle => {
            // An output style and a field order (`ISO`, `ISO, DMY`, `YMD`); PostgreSQL shows
            // the two together. The order only matters for dates written with slashes or
            // dots (`01/02/2024`), which Weir reads in no order, so each is taken and shown.
            let mut order = "MDY";
            for part in v.split(',') {
                match part.trim().to_ascii_lowercase().as_str() {
                    "iso" | "default" => {}
                    "mdy" | "us" | "noneuropean" => order = "MDY",
                    "dmy" | "european" => order = "DMY",
                    "ymd" => order = "YMD",
                    _ => {
                        return Err(bad(
                            "allowed values are: ISO with MDY, DMY or YMD (Weir writes dates in the ISO style only)"
                                .into(),
                        ));
                    }
                }
            }
            Ok(format!("ISO, {order}"))
        }
        Kind::TimeZone => crate::sql::functions::datetime_input::parse_time_zone(v)
            .map(|z| z.setting)
            .ok_or_else(|| {
                bad("allowed values are time zone names of the IANA database (UTC, Europe/Berlin, America/New_York, ...) or a number of hours east of UTC (-7, 5.5)".into())
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallelism_defaults_to_the_cores() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get().min(64));
        let v = SessionVars::default();
        assert_eq!(v.job_settings()["streaming.parallelism"], cores.to_string());
        let mut one = SessionVars::default();
        one.set("streaming.parallelism", "1").unwrap();
        assert_eq!(one.job_settings()["streaming.parallelism"], "1");
    }

    #[test]
    fn durations_parse_and_format() {
        assert_eq!(parse_duration_ms("500ms").unwrap(), 500);
        assert_eq!(parse_duration_ms("1s").unwrap(), 1000);
        assert_eq!(parse_duration_ms("2min").unwrap(), 120_000);
        assert_eq!(parse_duration_ms("1500").unwrap(), 1500);
        assert_eq!(parse_duration_ms("off").unwrap(), 0);
        assert!(parse_duration_ms("fast").is_err());
        assert_eq!(format_duration_ms(600_000), "10min");
    }

    #[test]
    fn seed_rules_are_enforced() {
        let mut v = SessionVars::default();
        v.set("checkpoint.min_pause", "2s").unwrap();
        let e = v.set("checkpoint.interval", "1s").unwrap_err();
        assert_eq!(e.sqlstate(), "22023");
        assert!(e.to_string().contains("checkpoint.min_pause"));
        let e = v.set("checkpoint.max_concurrent", "2").unwrap_err();
        assert_eq!(e.sqlstate(), "22023");
        v.set("checkpoint.interval", "5s").unwrap();
        assert_eq!(v.get("restart.strategy").unwrap(), "exponential-delay");
        assert_eq!(v.set("nope", "1").unwrap_err().sqlstate(), "42704");
        assert_eq!(
            v.set("checkpoint.interval", "5ms").unwrap_err().sqlstate(),
            "22023"
        );
    }

    #[test]
    fn startup_parameters_become_the_defaults() {
        let mut v = SessionVars::default();
        v.apply_startup([
            ("user", "alice"),
            ("database", "weir"),
            ("application_name", "psql"),
            ("client_encoding", "SQL_ASCII"),
            ("geqo", "off"),
            (
                "options",
                r"-c statement_timeout=5s --search-path=a\ b -cTimeZone=UTC -x",
            ),
        ])
        .unwrap();
        assert_eq!(v.get("application_name").unwrap(), "psql");
        assert_eq!(v.get("client_encoding").unwrap(), "UTF8");
        assert_eq!(v.get("statement_timeout").unwrap(), "5s");
        assert_eq!(v.get("search_path").unwrap(), "a b");
        assert_eq!(v.get("timezone").unwrap(), "UTC");
        v.set("application_name", "other").unwrap();
        v.reset("application_name").unwrap();
        assert_eq!(v.get("application_name").unwrap(), "psql");
        v.reset_all();
        assert_eq!(v.get("application_name").unwrap(), "psql");

        let mut v = SessionVars::default();
        let e = v.apply_startup([("TimeZone", "Nowhere/Else")]).unwrap_err();
        assert_eq!(e.sqlstate(), "22023");
        let e = v.apply_startup([("server_version", "9")]).unwrap_err();
        assert_eq!(e.sqlstate(), "55P02");
        let e = v.apply_startup([("client_encoding", "bogus")]).unwrap_err();
        assert_eq!(e.sqlstate(), "22023");

        // The pairs win over the switches of `options`.
        let mut v = SessionVars::default();
        v.apply_startup([
            ("options", "-c TimeZone=Asia/Kolkata -c application_name=a"),
            ("TimeZone", "UTC"),
        ])
        .unwrap();
        assert_eq!(v.get("timezone").unwrap(), "UTC");
        assert_eq!(v.get("application_name").unwrap(), "a");
        v.apply_startup([("client_encoding", "latin-1")]).unwrap();
    }
}
