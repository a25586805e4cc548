//! Window table functions: `TUMBLE` and `HOP` in a `FROM` clause, rewritten before planning
//! into relational SQL that the batch engine and the streaming planner already run.
//!
//! The forms follow RisingWave's and Flink SQL's documentation ("Time windows"; Flink's
//! "Windowing table-valued functions"):
//!
//! ```text
//!  FROM TUMBLE(t, ts, size [, offset]) [AS a]
//!  FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size [, offset])) [AS a]        (Flink's form)
//!  FROM HOP(t, ts, slide, size [, offset]) [AS a]
//!  FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), slide, size [, offset])) [AS a]
//! ```
//!
//! Each yields `t`'s columns plus `window_start` and `window_end` (the type of `ts`): the
//! windows `[window_start, window_end)` that contain `ts`, aligned to the Unix epoch (plus
//! `offset`). A row whose `ts` is NULL is in no window. A tumbling window is one bin of
//! `date_bin`:
//!
//! ```text
//!  TUMBLE(t, ts, size)  ─►  (SELECT *, date_bin(size, ts) AS window_start,
//!                                      date_bin(size, ts) + size AS window_end
//!                            FROM t WHERE ts IS NOT NULL) AS t
//! ```
//!
//! A row is in `k = ceil(size / slide)` hopping windows, those starting at
//! `date_bin(slide, ts) - i * slide` for `i` in `0..k`; the rewrite is a `UNION ALL` of `k`
//! such projections (with a filter `window_end > ts` when `size` is not a multiple of
//! `slide`). A materialized view over them is maintained like any other: an aggregate
//! grouped by `window_start` keeps one group per window, updated (and retracted) as rows
//! arrive.
//!
//! Session windows, per key or over all rows:
//!
//! ```text
//!  FROM SESSION(t, ts, gap) [AS a]
//!  FROM TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), gap)) [AS a]    (Flink's form)
//!  ─►  (SELECT *, weir_session_start(ts, gap) OVER (PARTITION BY k ORDER BY ts) AS window_start,
//!                 weir_session_end(ts, gap) OVER (PARTITION BY k ORDER BY ts) AS window_end
//!       FROM t WHERE ts IS NOT NULL) AS t
//! ```
//!
//! (window functions of [`crate::sql::functions::session`]; a view maintains them over the
//! sessions each change touches, not the whole partition).

use std::ops::ControlFlow;

use crate::sql::dialect::WeirDialect;
use datafusion::sql::sqlparser::ast::{
    DateTimeField, Expr, FunctionArg, FunctionArgExpr, Ident, ObjectName, Statement, TableAlias,
    TableFactor, Value, ValueWithSpan, VisitMut, VisitorMut,
};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser as SqlParser;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::{Error, Result};

/// The window table functions by name, lower-case.
const WINDOW_FUNCTIONS: [&str; 3] = ["tumble", "hop", "session"];

/// The call Flink's `TABLE t PARTITION BY k1, ...` becomes among a `SESSION`'s arguments.
const PARTITION_MARKER: &str = "__weir_partition_by";

/// Rewrites Flink's spelling `TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))` into
/// `TUMBLE(t, ts, ...)` at the token level (sqlparser reads neither `TABLE t` nor
/// `DESCRIPTOR(ts)` as a function argument). `None` when the text has no such call.
pub fn normalize_flink_windows(sql: &str) -> Option<String> {
    // Every statement passes here: look for the keyword without copying the text.
    if !sql
        .as_bytes()
        .windows(b"descriptor".len())
        .any(|w| w.eq_ignore_ascii_case(b"descriptor"))
    {
        return None;
    }
    let tokens = Tokenizer::new(&WeirDialect, sql).tokenize().ok()?;
    let is_ws = |t: &Token| matches!(t, Token::Whitespace(_));
    let next_solid = |from: usize| (from..tokens.len()).find(|&j| !is_ws(&tokens[j]));
    let word_is = |t: &Token, k: Keyword| matches!(t, Token::Word(w) if w.keyword == k);
    let mut drop = vec![false; tokens.len()];
    let mut replace: Vec<Option<String>> = vec![None; tokens.len()];
    let mut changed = false;
    let mut i = 0;
    while i < tokens.len() {
        // TABLE ( <window function> ( ... ) )
        let Some(window) = (|| {
            if !word_is(&tokens[i], Keyword::TABLE) {
                return None;
            }
            let open = next_solid(i + 1)?;
            (tokens[open] == Token::LParen).then_some(())?;
            let name = next_solid(open + 1)?;
            match &tokens[name] {
                Token::Word(w)
                    if WINDOW_FUNCTIONS.contains(&w.value.to_ascii_lowercase().as_str()) => {}
                _ => return None,
            }
            let inner = next_solid(name + 1)?;
            (tokens[inner] == Token::LParen).then_some((open, inner))
        })() else {
            i += 1;
            continue;
        };
        let (open, inner) = window;
        // The closing parentheses of the call and of TABLE( ).
        let mut depth = 0usize;
        let mut inner_close = None;
        for (j, t) in tokens.iter().enumerate().skip(inner) {
            match t {
                Token::LParen => depth += 1,
                Token::RParen => {
                    depth -= 1;
                    if depth == 0 {
                        inner_close = Some(j);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(inner_close) = inner_close else {
            break;
        };
        let Some(outer_close) = next_solid(inner_close + 1) else {
            break;
        };
        if tokens[outer_close] != Token::RParen {
            i += 1;
            continue;
        }
        drop[i] = true;
        drop[open] = true;
        drop[outer_close] = true;
        // Inside the call, at its own depth: `TABLE t` → `t`, `DESCRIPTOR(ts)` → `ts`.
        let mut depth = 0usize;
        let mut j = inner;
        while j < inner_close {
            match &tokens[j] {
                Token::LParen => depth += 1,
                Token::RParen => depth -= 1,
                t if depth == 1 && word_is(t, Keyword::TABLE) => drop[j] = true,
                // `TABLE t PARTITION BY k` / `PARTITION BY (k1, k2)` (SESSION's keys):
                // `t, __weir_partition_by(k1, k2)`.
                t if depth == 1
                    && word_is(t, Keyword::PARTITION)
                    && next_solid(j + 1).is_some_and(|b| word_is(&tokens[b], Keyword::BY)) =>
                {
                    let by = next_solid(j + 1).unwrap_or(j);
                    replace[j] = Some(format!(", {PARTITION_MARKER}("));
                    drop[by] = true;
                    // The keys end before the next comma at this depth (or the call's end).
                    let mut d = 0usize;
                    let mut last = by;
                    let mut k = by + 1;
                    while k < inner_close {
                        match &tokens[k] {
                            Token::LParen => d += 1,
                            Token::RParen => d = d.saturating_sub(1),
                            Token::Comma if d == 0 => break,
                            _ => {}
                        }
                        if !is_ws(&tokens[k]) {
                            last = k;
                        }
                        k += 1;
                    }
                    // A parenthesized list gives its parentheses to the marker call.
                    let first = next_solid(by + 1).unwrap_or(last);
                    if tokens[first] == Token::LParen
                        && tokens[last] == Token::RParen
                        && first < last
                    {
                        drop[first] = true;
                    } else {
                        replace[last] = Some(format!("{})", tokens[last]));
                    }
                    j = k;
                    continue;
                }
                Token::Word(w) if depth == 1 && w.value.eq_ignore_ascii_case("descriptor") => {
                    if let Some(p) = next_solid(j + 1)
                        && tokens[p] == Token::LParen
                        && let Some(col) = next_solid(p + 1)
                        && let Some(close) = next_solid(col + 1)
                        && tokens[close] == Token::RParen
                    {
                        drop[j] = true;
                        drop[p] = true;
                        drop[close] = true;
                        j = close;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        changed = true;
        i = outer_close + 1;
    }
    changed.then(|| {
        tokens
            .iter()
            .zip(&drop)
            .zip(&replace)
            .filter(|((_, d), _)| !**d)
            .map(|((t, _), r)| r.clone().unwrap_or_else(|| t.to_string()))
            .collect()
    })
}

/// Replaces every window table function in `stmt`'s `FROM` clauses by its relational form
/// (see the module documentation).
///
/// # Errors
/// `42601` for a call with the wrong arguments (`TUMBLE` takes 3 or 4, `HOP` 4 or 5; the first
/// a relation's name, the second a column's); `22023` for a `HOP` slide or size that is not a
/// positive interval of days, hours, minutes, seconds or fractions of a second written as a
/// literal, or a `SESSION` gap that is not.
pub fn rewrite_window_functions(stmt: &mut Statement) -> Result<()> {
    let mut v = WindowVisitor;
    match VisitMut::visit(stmt, &mut v) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

struct WindowVisitor;

impl VisitorMut for WindowVisitor {
    type Break = Error;

    fn post_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<Error> {
        let TableFactor::Table {
            name,
            alias,
            args: Some(args),
            ..
        } = factor
        else {
            return ControlFlow::Continue(());
        };
        let Some(function) = name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(|i| i.value.to_ascii_lowercase())
            .filter(|n| WINDOW_FUNCTIONS.contains(&n.as_str()))
        else {
            return ControlFlow::Continue(());
        };
        match window_subquery(&function, &args.args, alias.take()) {
            Ok(derived) => {
                *factor = derived;
                ControlFlow::Continue(())
            }
            Err(e) => ControlFlow::Break(e),
        }
    }
}

/// The arguments of a window function call as expressions.
fn plain_args(function: &str, args: &[FunctionArg]) -> Result<Vec<Expr>> {
    args.iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e.clone()),
            _ => Err(Error::Parse(format!(
                "{} arguments are a relation, a column and intervals: {a}",
                function.to_ascii_uppercase()
            ))),
        })
        .collect()
}

/// The relation named by a window function's first argument.
fn relation_name(function: &str, e: &Expr) -> Result<ObjectName> {
    match e {
        Expr::Identifier(i) => Ok(ObjectName::from(vec![i.clone()])),
        Expr::CompoundIdentifier(parts) => Ok(ObjectName::from(parts.clone())),
        _ => Err(Error::Parse(format!(
            "the first argument of {} must name a table or view, not {e}",
            function.to_ascii_uppercase()
        ))),
    }
}

/// The time column named by a window function's second argument.
fn time_column(function: &str, e: &Expr) -> Result<Ident> {
    match e {
        Expr::Identifier(i) => Ok(i.clone()),
        Expr::CompoundIdentifier(parts) if !parts.is_empty() => Ok(parts[parts.len() - 1].clone()),
        _ => Err(Error::Parse(format!(
            "the second argument of {} must name a time column, not {e}",
            function.to_ascii_uppercase()
        ))),
    }
}

/// The derived table that replaces `function(args) [AS alias]`.
fn window_subquery(
    function: &str,
    args: &[FunctionArg],
    alias: Option<TableAlias>,
) -> Result<TableFactor> {
    let upper = function.to_ascii_uppercase();
    let mut args = plain_args(function, args)?;
    if function == "session" {
        return session_subquery(&mut args, alias);
    }
    let (arity, usage) = match function {
        "tumble" => (3..=4, "TUMBLE(relation, time_column, size [, offset])"),
        _ => (4..=5, "HOP(relation, time_column, slide, size [, offset])"),
    };
    if !arity.contains(&args.len()) {
        return Err(Error::Parse(format!(
            "{upper} takes {} to {} arguments: {usage}",
            arity.start(),
            arity.end()
        )));
    }
    let relation = relation_name(function, &args[0])?;
    let ts = time_column(function, &args[1])?;
    let origin = args
        .get(*arity.start())
        .map(|offset| format!(", TIMESTAMP '1970-01-01 00:00:00' + {offset}"))
        .unwrap_or_default();
    let sql = if function == "tumble" {
        let size = &args[2];
        // A window has a positive length (date_bin would take a negative one and give
        // window_end before window_start).
        interval_micros(size).ok_or_else(|| bad_interval(&upper, "size", size))?;
        let start = format!("date_bin({size}, {ts}{origin})");
        format!(
            "SELECT *, {start} AS window_start, {start} + {size} AS window_end FROM {relation} \
             WHERE {ts} IS NOT NULL"
        )
    } else {
        let (slide, size) = (&args[2], &args[3]);
        let slide_us =
            interval_micros(slide).ok_or_else(|| bad_interval(&upper, "slide", slide))?;
        let size_us = interval_micros(size).ok_or_else(|| bad_interval(&upper, "size", size))?;
        let k = (size_us + slide_us - 1) / slide_us;
        if k > 1024 {
            return Err(Error::data(
                "22023",
                format!(
                    "HOP size {size} is {k} slides of {slide}; at most 1024 windows per row are allowed"
                ),
            ));
        }
        let bin = format!("date_bin({slide}, {ts}{origin})");
        let branches: Vec<String> = (0..k)
            .map(|i| {
                let start = if i == 0 {
                    bin.clone()
                } else {
                    format!("{bin} - INTERVAL '{} microseconds'", i * slide_us)
                };
                let filter = if size_us % slide_us == 0 {
                    format!(" WHERE {ts} IS NOT NULL")
                } else {
                    format!(" WHERE {start} + {size} > {ts}")
                };
                format!(
                    "SELECT *, {start} AS window_start, {start} + {size} AS window_end FROM {relation}{filter}"
                )
            })
            .collect();
        branches.join(" UNION ALL ")
    };
    derived(&sql, &upper, &relation, function, alias)
}

/// The derived table of the query `sql` under `alias` (by default the relation's name).
fn derived(
    sql: &str,
    upper: &str,
    relation: &ObjectName,
    function: &str,
    alias: Option<TableAlias>,
) -> Result<TableFactor> {
    let subquery = SqlParser::new(&WeirDialect)
        .try_with_sql(sql)
        .and_then(|mut p| p.parse_query())
        .map_err(|e| Error::Parse(format!("{upper}: {e}")))?;
    let alias = alias.unwrap_or_else(|| TableAlias {
        explicit: true,
        name: relation
            .0
            .last()
            .and_then(|p| p.as_ident())
            .cloned()
            .unwrap_or_else(|| Ident::new(function)),
        columns: vec![],
        at: None,
    });
    Ok(TableFactor::Derived {
        lateral: false,
        subquery,
        alias: Some(alias),
        sample: None,
    })
}

/// The derived table that replaces `SESSION(relation, ts, gap)`, its arguments with Flink's
/// keys already made a [`PARTITION_MARKER`] call: the relation's rows whose `ts` is not
/// NULL, with the bounds of their sessions ([`crate::sql::functions::session`]).
fn session_subquery(args: &mut Vec<Expr>, alias: Option<TableAlias>) -> Result<TableFactor> {
    let usage = "SESSION(relation, time_column, gap), or Flink's \
                 TABLE(SESSION(TABLE relation PARTITION BY key, DESCRIPTOR(time_column), gap))";
    let marker = args.iter().position(|a| {
        matches!(a, Expr::Function(f) if f.name.to_string().eq_ignore_ascii_case(PARTITION_MARKER))
    });
    let keys: Vec<String> = match marker.map(|i| args.remove(i)) {
        Some(Expr::Function(f)) => match &f.args {
            datafusion::sql::sqlparser::ast::FunctionArguments::List(list) => {
                list.args.iter().map(|a| a.to_string()).collect()
            }
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    if args.len() != 3 {
        return Err(Error::Parse(format!("SESSION takes 3 arguments: {usage}")));
    }
    let relation = relation_name("session", &args[0])?;
    let ts = time_column("session", &args[1])?;
    let gap = &args[2];
    interval_micros(gap).ok_or_else(|| bad_interval("SESSION", "gap", gap))?;
    let partition = if keys.is_empty() {
        String::new()
    } else {
        format!("PARTITION BY {} ", keys.join(", "))
    };
    let over = format!("OVER ({partition}ORDER BY {ts})");
    let sql = format!(
        "SELECT *, {start}({ts}, {gap}) {over} AS window_start, \
         {end}({ts}, {gap}) {over} AS window_end FROM {relation} WHERE {ts} IS NOT NULL",
        start = crate::sql::functions::session::SESSION_START,
        end = crate::sql::functions::session::SESSION_END,
    );
    derived(&sql, "SESSION", &relation, "session", alias)
}

fn bad_interval(function: &str, what: &str, e: &Expr) -> Error {
    Error::data(
        "22023",
        format!(
            "{function} {what} must be a positive literal interval of days, hours, minutes, \
             seconds or milliseconds (e.g. INTERVAL '2' SECOND), not {e}"
        ),
    )
}

/// Microseconds of a literal interval without months (`INTERVAL '10' SECOND`,
/// `INTERVAL '1 minute 30 seconds'`, `INTERVAL '00:00:10'`), if it is positive.
pub(crate) fn interval_micros(e: &Expr) -> Option<i64> {
    interval_micros_any(e).filter(|us| *us >= 1)
}

/// Microseconds of a literal interval without months, of any sign (see [`interval_micros`]).
pub(crate) fn interval_micros_any(e: &Expr) -> Option<i64> {
    let Expr::Interval(iv) = e else {
        return None;
    };
    let Expr::Value(ValueWithSpan {
        value: Value::SingleQuotedString(text),
        ..
    }) = iv.value.as_ref()
    else {
        return None;
    };
    let unit_micros = |u: &str| -> Option<f64> {
        let u = u.to_ascii_lowercase();
        Some(match u.as_str() {
            "us" => 1.0,
            "ms" => 1e3,
            _ => match u.trim_end_matches('s') {
                "microsecond" => 1.0,
                "millisecond" => 1e3,
                "second" | "sec" => 1e6,
                "minute" | "min" | "m" => 60e6,
                "hour" | "hr" | "h" => 3_600e6,
                "day" | "d" => 86_400e6,
                "week" | "w" => 604_800e6,
                _ => return None,
            },
        })
    };
    let micros = if let Some(field) = &iv.leading_field {
        let unit = match field {
            DateTimeField::Microsecond | DateTimeField::Microseconds => 1.0,
            DateTimeField::Millisecond | DateTimeField::Milliseconds => 1e3,
            DateTimeField::Second | DateTimeField::Seconds => 1e6,
            DateTimeField::Minute | DateTimeField::Minutes => 60e6,
            DateTimeField::Hour | DateTimeField::Hours => 3_600e6,
            DateTimeField::Day | DateTimeField::Days => 86_400e6,
            DateTimeField::Week(_) | DateTimeField::Weeks => 604_800e6,
            _ => return None,
        };
        if iv.last_field.is_some() {
            return None;
        }
        text.trim().parse::<f64>().ok()? * unit
    } else if text.contains(':') {
        // hh:mm:ss[.fff]
        let parts: Vec<&str> = text.trim().split(':').collect();
        if parts.len() != 3 {
            return None;
        }
        let h: f64 = parts[0].parse().ok()?;
        let m: f64 = parts[1].parse().ok()?;
        let s: f64 = parts[2].parse().ok()?;
        ((h * 60.0 + m) * 60.0 + s) * 1e6
    } else {
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.is_empty() || !words.len().is_multiple_of(2) {
            return None;
        }
        let mut total = 0.0;
        for pair in words.chunks(2) {
            total += pair[0].parse::<f64>().ok()? * unit_micros(pair[1])?;
        }
        total
    };
    let micros = micros.round();
    (-1e17..1e17).contains(&micros).then_some(micros as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flink_form_becomes_the_call() {
        let words = |s: String| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let sql = "SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) AS w";
        assert_eq!(
            words(normalize_flink_windows(sql).unwrap()),
            "SELECT * FROM TUMBLE( bid, date_time, INTERVAL '10' SECOND) AS w"
        );
        let hop = "select 1 from table ( hop ( table  s.bid , descriptor ( ts ), interval '2' second, interval '10' second ) )";
        assert_eq!(
            words(normalize_flink_windows(hop).unwrap()),
            "select 1 from hop ( s.bid , ts , interval '2' second, interval '10' second )"
        );
        assert_eq!(normalize_flink_windows("SELECT 'descriptor'"), None);
    }

    #[test]
    fn literal_intervals_in_microseconds() {
        let parse = |s: &str| {
            let e = SqlParser::new(&WeirDialect)
                .try_with_sql(s)
                .unwrap()
                .parse_expr()
                .unwrap();
            interval_micros(&e)
        };
        assert_eq!(parse("INTERVAL '10' SECOND"), Some(10_000_000));
        assert_eq!(parse("INTERVAL '2 seconds'"), Some(2_000_000));
        assert_eq!(parse("INTERVAL '1 minute 30 seconds'"), Some(90_000_000));
        assert_eq!(parse("INTERVAL '00:01:00'"), Some(60_000_000));
        assert_eq!(parse("INTERVAL '500 milliseconds'"), Some(500_000));
        assert_eq!(parse("INTERVAL '1' MONTH"), None);
        assert_eq!(parse("INTERVAL '0 seconds'"), None);
        assert_eq!(parse("INTERVAL '-5' SECOND"), None);
    }
}
