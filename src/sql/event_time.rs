//! Event-time clauses of DDL, taken off the statement text before it is parsed (sqlparser
//! reads neither): a table's `WATERMARK FOR` and `APPEND ONLY`, and a materialized view's
//! `EMIT ON WINDOW CLOSE`. The forms are RisingWave's (and Flink SQL's for the watermark):
//!
//! ```text
//!  CREATE TABLE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP,
//!                    WATERMARK FOR date_time AS date_time - INTERVAL '5 seconds') APPEND ONLY
//!  CREATE MATERIALIZED VIEW v AS SELECT ... GROUP BY window_start EMIT ON WINDOW CLOSE
//! ```
//!
//! A table's watermark is the largest `date_time` written in the epochs closed so far minus
//! the delay; a row whose time is below it when it is written is late (see
//! [`crate::engine`]'s tables).

use crate::sql::dialect::WeirDialect;
use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr};
use datafusion::sql::sqlparser::parser::Parser as SqlParser;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::{Error, Result};

/// A table's `WATERMARK FOR column AS column [- INTERVAL '...']` clause.
#[derive(Debug, Clone, PartialEq)]
pub struct WatermarkClause {
    /// The event-time column (lower-case unless it was quoted).
    pub column: String,
    /// How far the watermark trails the largest time seen, in microseconds (>= 0).
    pub delay_us: i64,
    /// The expression as written, for `weir_catalog` and error messages.
    pub text: String,
}

/// The event-time clauses of a `CREATE TABLE`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableTimeClauses {
    /// The watermark, if declared.
    pub watermark: Option<WatermarkClause>,
    /// `APPEND ONLY`: the table takes inserts only.
    pub append_only: bool,
}

fn tokens(sql: &str) -> Option<Vec<Token>> {
    Tokenizer::new(&WeirDialect, sql).tokenize().ok()
}

fn is_word(t: &Token, word: &str) -> bool {
    matches!(t, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

fn join(tokens: &[Token]) -> String {
    tokens.iter().map(|t| t.to_string()).collect()
}

/// The indexes of the tokens that are not whitespace or comments.
fn solid(tokens: &[Token]) -> Vec<usize> {
    (0..tokens.len())
        .filter(|&i| !matches!(tokens[i], Token::Whitespace(_)))
        .collect()
}

/// Takes `WATERMARK FOR ...` (an element of the column list) and `APPEND ONLY` (after it) off
/// a `CREATE TABLE` statement. Returns `None` for other statements and for tables with
/// neither clause; otherwise the statement without them and the clauses.
///
/// # Errors
/// `42601` for a malformed clause or a second watermark; `0A000` for a watermark expression
/// other than the column or the column minus a constant interval of fixed length (no months).
pub fn split_table_clauses(sql: &str) -> Result<Option<(String, TableTimeClauses)>> {
    let lower = sql.to_ascii_lowercase();
    if !lower.contains("watermark") && !lower.contains("append") {
        return Ok(None);
    }
    let Some(tokens) = tokens(sql) else {
        return Ok(None);
    };
    let s = solid(&tokens);
    if s.len() < 2 || !is_word(&tokens[s[0]], "create") || !is_word(&tokens[s[1]], "table") {
        return Ok(None);
    }
    let Some(open) = tokens.iter().position(|t| *t == Token::LParen) else {
        return Ok(None);
    };
    let mut drop = vec![false; tokens.len()];
    let mut clauses = TableTimeClauses::default();
    // The column list's elements at depth 1, each as (first token, end token exclusive).
    let mut depth = 0usize;
    let mut start = open + 1;
    let mut close = None;
    let mut elements: Vec<(usize, usize)> = Vec::new();
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t {
            Token::LParen => depth += 1,
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    elements.push((start, i));
                    close = Some(i);
                    break;
                }
            }
            Token::Comma if depth == 1 => {
                elements.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
    }
    let Some(close) = close else {
        return Ok(None);
    };
    for (k, &(from, to)) in elements.iter().enumerate() {
        let words: Vec<usize> = (from..to)
            .filter(|&i| !matches!(tokens[i], Token::Whitespace(_)))
            .collect();
        if words.len() < 2 || !is_word(&tokens[words[0]], "watermark") {
            continue;
        }
        if !is_word(&tokens[words[1]], "for") {
            continue;
        }
        if clauses.watermark.is_some() {
            return Err(Error::Parse(
                "a table can have only one WATERMARK clause".into(),
            ));
        }
        let malformed =
            || Error::Parse("expected WATERMARK FOR column AS column - INTERVAL '...'".into());
        if words.len() < 5 || !is_word(&tokens[words[3]], "as") {
            return Err(malformed());
        }
        let column = match &tokens[words[2]] {
            Token::Word(w) if w.quote_style.is_some() => w.value.clone(),
            Token::Word(w) => w.value.to_ascii_lowercase(),
            _ => return Err(malformed()),
        };
        let text = join(&tokens[words[4]..to]).trim().to_string();
        let delay_us = watermark_delay(&column, &text)?;
        clauses.watermark = Some(WatermarkClause {
            column,
            delay_us,
            text,
        });
        // The element and the comma before it (or after it, for the first element).
        drop[from..to].iter_mut().for_each(|d| *d = true);
        if k > 0 {
            drop[from - 1] = true;
        } else if elements.len() > 1 {
            drop[to] = true;
        }
    }
    // APPEND ONLY after the column list, at depth 0.
    let after: Vec<usize> = s.iter().copied().filter(|&i| i > close).collect();
    for w in after.windows(2) {
        if is_word(&tokens[w[0]], "append") && is_word(&tokens[w[1]], "only") {
            drop[w[0]] = true;
            drop[w[1]] = true;
            clauses.append_only = true;
            break;
        }
    }
    if clauses == TableTimeClauses::default() {
        return Ok(None);
    }
    let rest: String = tokens
        .iter()
        .zip(&drop)
        .filter(|(_, d)| !**d)
        .map(|(t, _)| t.to_string())
        .collect();
    Ok(Some((rest.trim().to_string(), clauses)))
}

/// The delay of a watermark expression on `column`, in microseconds.
fn watermark_delay(column: &str, text: &str) -> Result<i64> {
    let expr = SqlParser::new(&WeirDialect)
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| Error::Parse(format!("watermark expression: {e}")))?;
    let names_column = |e: &Expr| match e {
        Expr::Identifier(id) => {
            let name = if id.quote_style.is_some() {
                id.value.clone()
            } else {
                id.value.to_ascii_lowercase()
            };
            name == column
        }
        _ => false,
    };
    let unsupported = || {
        Error::not_supported(format!(
            "watermark expression {text}: only {column} or {column} - INTERVAL '...' (days, hours, minutes, seconds; no months) is supported"
        ))
    };
    match &expr {
        e if names_column(e) => Ok(0),
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Minus,
            right,
        } if names_column(left) => {
            let us = crate::sql::windows::interval_micros_any(right).ok_or_else(unsupported)?;
            if us < 0 {
                return Err(Error::data(
                    "22023",
                    format!("watermark delay {right} is negative"),
                ));
            }
            Ok(us)
        }
        _ => Err(unsupported()),
    }
}

/// Takes a trailing `EMIT ON WINDOW CLOSE` off a `CREATE MATERIALIZED VIEW` statement (or
/// an `EXPLAIN` of one): `Some(statement without it)` when present.
pub fn split_emit_on_window_close(sql: &str) -> Option<String> {
    let tokens = tokens(sql)?;
    let s = solid(&tokens);
    let first = s.first().map(|&i| &tokens[i])?;
    if !is_word(first, "create") && !is_word(first, "explain") {
        return None;
    }
    strip_emit(sql)
}

/// A stored view query (as written after `AS`, with `EMIT ON WINDOW CLOSE` kept at its end)
/// without the clause, and whether it had it.
pub fn stored_view_query(query: &str) -> (String, bool) {
    match strip_emit(query) {
        Some(q) => (q, true),
        None => (query.to_string(), false),
    }
}

/// The clause that marks a stored view query as emitting on window close.
pub const EMIT_ON_WINDOW_CLOSE: &str = "EMIT ON WINDOW CLOSE";

fn strip_emit(sql: &str) -> Option<String> {
    if !sql.to_ascii_lowercase().contains("emit") {
        return None;
    }
    let tokens = tokens(sql)?;
    let s = solid(&tokens);
    let mut end = s.len();
    while end > 0 && tokens[s[end - 1]] == Token::SemiColon {
        end -= 1;
    }
    if end < 5 {
        return None;
    }
    let tail = &s[end - 4..end];
    let words = ["emit", "on", "window", "close"];
    if !tail.iter().zip(words).all(|(&i, w)| is_word(&tokens[i], w)) {
        return None;
    }
    Some(join(&tokens[..tail[0]]).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_watermark_and_append_only_off_the_statement() {
        let (rest, c) = split_table_clauses(
            "CREATE TABLE bid (a BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5 seconds') APPEND ONLY",
        )
        .unwrap()
        .unwrap();
        assert_eq!(rest, "CREATE TABLE bid (a BIGINT, ts TIMESTAMP)");
        assert!(c.append_only);
        let w = c.watermark.unwrap();
        assert_eq!((w.column.as_str(), w.delay_us), ("ts", 5_000_000));
        assert_eq!(w.text, "ts - INTERVAL '5 seconds'");

        let (rest, c) = split_table_clauses(
            "create table t (watermark for \"Ts\" as \"Ts\" - interval '2' minute, \"Ts\" timestamp) with (x = 'y')",
        )
        .unwrap()
        .unwrap();
        assert_eq!(rest, "create table t ( \"Ts\" timestamp) with (x = 'y')");
        assert!(!c.append_only);
        assert_eq!(c.watermark.unwrap().delay_us, 120_000_000);

        let (rest, c) = split_table_clauses("CREATE TABLE t (a INT) APPEND ONLY")
            .unwrap()
            .unwrap();
        assert_eq!(rest, "CREATE TABLE t (a INT)");
        assert_eq!(c.watermark, None);
        // A column named watermark is a column.
        assert_eq!(
            split_table_clauses("CREATE TABLE t (watermark INT)").unwrap(),
            None
        );
        assert_eq!(split_table_clauses("SELECT 'watermark'").unwrap(), None);
        let (_, c) = split_table_clauses(
            "CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '0 seconds') APPEND ONLY",
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.watermark.unwrap().delay_us, 0);
    }

    #[test]
    fn refuses_other_watermark_expressions() {
        let err = |sql: &str| split_table_clauses(sql).unwrap_err().sqlstate();
        assert_eq!(
            err("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS ts + INTERVAL '1 second')"),
            "0A000"
        );
        assert_eq!(
            err("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1 month')"),
            "0A000"
        );
        assert_eq!(
            err("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS other - INTERVAL '1 second')"),
            "0A000"
        );
        assert_eq!(
            err("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '-1 second')"),
            "22023"
        );
        assert_eq!(
            err("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts)"),
            "42601"
        );
        assert_eq!(
            err("CREATE TABLE t (ts TIMESTAMP, WATERMARK FOR ts AS ts, WATERMARK FOR ts AS ts)"),
            "42601"
        );
    }

    #[test]
    fn takes_emit_on_window_close_off_a_view() {
        assert_eq!(
            split_emit_on_window_close(
                "CREATE MATERIALIZED VIEW v AS SELECT 1 GROUP BY x EMIT ON WINDOW CLOSE;"
            )
            .as_deref(),
            Some("CREATE MATERIALIZED VIEW v AS SELECT 1 GROUP BY x")
        );
        assert_eq!(
            split_emit_on_window_close("CREATE MATERIALIZED VIEW v AS SELECT 'emit'"),
            None
        );
        assert_eq!(
            split_emit_on_window_close("SELECT 1 AS emit ON window CLOSE"),
            None
        );
        assert_eq!(
            stored_view_query("SELECT 1 GROUP BY x EMIT ON WINDOW CLOSE"),
            ("SELECT 1 GROUP BY x".to_string(), true)
        );
        assert_eq!(
            stored_view_query("SELECT 1"),
            ("SELECT 1".to_string(), false)
        );
    }
}
