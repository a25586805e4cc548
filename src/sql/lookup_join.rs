//! Processing-time temporal joins (Flink SQL's "lookup join", `FOR SYSTEM_TIME AS OF` a
//! processing-time attribute): each row of the stream side is joined with the rows the
//! other table holds when the row is processed; later changes of that table change no row
//! already joined.
//!
//! ```text
//!  FROM s JOIN t FOR SYSTEM_TIME AS OF s.p_time [AS a] ON ...     (p_time: PROCTIME())
//!  ─►  FROM s JOIN (SELECT * FROM t WHERE weir_lookup_side()) AS a ON ...
//! ```
//!
//! The rewrite is made on the statement's text (PostgreSQL's grammar, which Weir parses, has
//! no `FOR SYSTEM_TIME`); [`LOOKUP_SIDE`] marks the table's side for the streaming planner,
//! which maintains the join without reacting to that side's changes
//! ([`crate::stream::ops::hash_join::HashJoin::with_lookup`]). In a query the marker is true
//! and the join an ordinary one: a query runs at one processing time. Only processing time
//! is supported: the `AS OF` expression must be `PROCTIME()` or a column the statement
//! defines as `PROCTIME() AS column`; a versioned join on event time is `0A000`.

use crate::sql::dialect::WeirDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use crate::error::{Error, Result};

/// The function that marks the lookup side of a join (always true).
pub const LOOKUP_SIDE: &str = "weir_lookup_side";

/// Rewrites every `table FOR SYSTEM_TIME AS OF expr` of `sql` (see the module docs); `None`
/// when the text has none.
///
/// # Errors
/// `0A000` for an `AS OF` expression that is not processing time; `42601` for a
/// `FOR SYSTEM_TIME AS OF` without a table before it or an expression after it.
pub fn normalize_system_time(sql: &str) -> Result<Option<String>> {
    if !sql
        .as_bytes()
        .windows(b"system_time".len())
        .any(|w| w.eq_ignore_ascii_case(b"system_time"))
    {
        return Ok(None);
    }
    let Ok(tokens) = Tokenizer::new(&WeirDialect, sql).tokenize() else {
        return Ok(None);
    };
    let solid: Vec<usize> = (0..tokens.len())
        .filter(|&i| !matches!(tokens[i], Token::Whitespace(_)))
        .collect();
    let word =
        |i: usize, w: &str| matches!(&tokens[i], Token::Word(x) if x.value.eq_ignore_ascii_case(w));
    // Columns the statement defines as PROCTIME() [AS] name.
    let mut proctime_columns: Vec<String> = Vec::new();
    for s in 0..solid.len().saturating_sub(3) {
        if !(word(solid[s], "proctime")
            && tokens[solid[s + 1]] == Token::LParen
            && tokens[solid[s + 2]] == Token::RParen)
        {
            continue;
        }
        let at = if word(solid[s + 3], "as") {
            s + 4
        } else {
            s + 3
        };
        if let Some(Token::Word(name)) = solid.get(at).map(|&i| &tokens[i])
            && (at == s + 4 || name.keyword == Keyword::NoKeyword)
        {
            proctime_columns.push(name.value.to_ascii_lowercase());
        }
    }
    let mut out: Vec<String> = tokens.iter().map(|t| t.to_string()).collect();
    let mut changed = false;
    let mut s = 0;
    while s + 3 < solid.len() {
        if !(word(solid[s], "for")
            && word(solid[s + 1], "system_time")
            && word(solid[s + 2], "as")
            && word(solid[s + 3], "of"))
        {
            s += 1;
            continue;
        }
        // The table's (possibly qualified) name before FOR.
        let mut first = s;
        while first > 0 && matches!(tokens[solid[first - 1]], Token::Word(_)) {
            first -= 1;
            if first > 0 && tokens[solid[first - 1]] == Token::Period {
                first -= 1;
            } else {
                break;
            }
        }
        if first == s {
            return Err(Error::Parse(
                "FOR SYSTEM_TIME AS OF must follow a table's name".into(),
            ));
        }
        let name: String = (first..s).map(|k| tokens[solid[k]].to_string()).collect();
        let last = tokens[solid[s - 1]].to_string();
        // The AS OF expression: up to the alias (after AS, or a name right after an
        // operand), ON, USING, a comma or the end, at depth 0.
        let mut depth = 0usize;
        let mut end = s + 4;
        let mut after_operand = false;
        while end < solid.len() {
            let token = &tokens[solid[end]];
            if depth == 0
                && after_operand
                && matches!(token, Token::Word(w) if w.keyword == Keyword::NoKeyword)
            {
                break;
            }
            after_operand = matches!(
                token,
                Token::Word(_) | Token::RParen | Token::Number(..) | Token::SingleQuotedString(_)
            );
            match token {
                Token::LParen => depth += 1,
                Token::RParen if depth == 0 => break,
                Token::RParen => depth -= 1,
                Token::Comma | Token::SemiColon if depth == 0 => break,
                Token::Word(w)
                    if depth == 0
                        && matches!(
                            w.keyword,
                            Keyword::AS
                                | Keyword::ON
                                | Keyword::USING
                                | Keyword::JOIN
                                | Keyword::INNER
                                | Keyword::LEFT
                                | Keyword::RIGHT
                                | Keyword::FULL
                                | Keyword::CROSS
                                | Keyword::WHERE
                                | Keyword::GROUP
                                | Keyword::ORDER
                        ) =>
                {
                    break;
                }
                _ => {}
            }
            end += 1;
        }
        if end == s + 4 {
            return Err(Error::Parse(
                "FOR SYSTEM_TIME AS OF needs a time expression".into(),
            ));
        }
        // Outer parentheses do not matter: `AS OF (b.p_time)`.
        let (mut from, mut to) = (s + 4, end);
        while to - from >= 2
            && tokens[solid[from]] == Token::LParen
            && tokens[solid[to - 1]] == Token::RParen
        {
            from += 1;
            to -= 1;
        }
        let expr: Vec<String> = (from..to)
            .map(|k| tokens[solid[k]].to_string().to_ascii_lowercase())
            .collect();
        let shown: String = tokens[solid[s + 4]..=solid[end - 1]]
            .iter()
            .map(|t| t.to_string())
            .collect();
        let processing_time = expr.join("") == "proctime()"
            || (expr.len() == 1 || (expr.len() == 3 && expr[1] == "."))
                && proctime_columns.contains(&expr[expr.len() - 1].trim_matches('"').to_string());
        if !processing_time {
            return Err(Error::not_supported(format!(
                "FOR SYSTEM_TIME AS OF {shown}: only processing time is supported (AS OF \
                 PROCTIME() or a column defined as PROCTIME() AS column); a versioned join on \
                 event time is not"
            )));
        }
        // An alias after the expression stays; without one the table's name is the alias.
        let aliased = end < solid.len()
            && (word(solid[end], "as")
                || matches!(&tokens[solid[end]], Token::Word(w) if w.keyword == Keyword::NoKeyword));
        let replacement = format!(
            "(SELECT * FROM {name} WHERE {LOOKUP_SIDE}()){}",
            if aliased {
                String::new()
            } else {
                format!(" AS {last}")
            }
        );
        let (from, to) = (solid[first], solid[end - 1]);
        out[from] = replacement;
        for o in out.iter_mut().take(to + 1).skip(from + 1) {
            o.clear();
        }
        changed = true;
        s = end;
    }
    Ok(changed.then(|| out.concat()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> String {
        s.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    #[test]
    fn rewrites_a_processing_time_join() {
        let sql = "SELECT b.auction, s.value FROM (SELECT *, PROCTIME() AS p_time FROM bid) AS b \
                   JOIN side_input FOR SYSTEM_TIME AS OF b.p_time AS s ON b.auction = s.key";
        assert_eq!(
            words(&normalize_system_time(sql).unwrap().unwrap()),
            words(
                "SELECT b.auction, s.value FROM (SELECT *, PROCTIME() AS p_time FROM bid) AS b \
                 JOIN (SELECT * FROM side_input WHERE weir_lookup_side()) AS s ON b.auction = s.key"
            )
        );
        // No alias: the table's name.
        let sql = "SELECT * FROM bid AS b JOIN public.side FOR SYSTEM_TIME AS OF PROCTIME() \
                   ON b.auction = side.key";
        assert_eq!(
            words(&normalize_system_time(sql).unwrap().unwrap()),
            words(
                "SELECT * FROM bid AS b JOIN (SELECT * FROM public.side WHERE \
                 weir_lookup_side()) AS side ON b.auction = side.key"
            )
        );
        assert_eq!(normalize_system_time("SELECT 'system_time'").unwrap(), None);
        // An alias without AS, a column named without AS, parentheses around the time.
        let sql = "SELECT * FROM (SELECT *, PROCTIME() pt FROM bid) b JOIN side FOR SYSTEM_TIME \
                   AS OF (b.pt) s ON b.auction = s.key";
        assert_eq!(
            words(&normalize_system_time(sql).unwrap().unwrap()),
            words(
                "SELECT * FROM (SELECT *, PROCTIME() pt FROM bid) b JOIN (SELECT * FROM side \
                 WHERE weir_lookup_side()) s ON b.auction = s.key"
            )
        );
        let sql = "SELECT * FROM bid b JOIN side FOR SYSTEM_TIME AS OF PROCTIME() s ON true";
        assert_eq!(
            words(&normalize_system_time(sql).unwrap().unwrap()),
            words(
                "SELECT * FROM bid b JOIN (SELECT * FROM side WHERE weir_lookup_side()) s ON true"
            )
        );
    }

    #[test]
    fn refuses_event_time() {
        let sql = "SELECT * FROM bid AS b JOIN side FOR SYSTEM_TIME AS OF b.date_time ON true";
        let e = normalize_system_time(sql).unwrap_err();
        assert_eq!(e.sqlstate(), "0A000");
    }
}
