//! SQL cursors: `DECLARE name CURSOR FOR query`, `FETCH`, `MOVE` and `CLOSE` (PostgreSQL
//! docs: the DECLARE, FETCH, MOVE and CLOSE reference pages), as drivers use them for
//! results too large to take at once (psycopg's named cursors, pgjdbc's fetch size).
//!
//! A cursor holds its query's running stream: `FETCH FORWARD n` pulls batches until it has
//! `n` rows, and keeps the rest of the last batch for the next `FETCH`, so memory follows the
//! rows fetched, not the result's size. The query's inputs are read from the snapshot taken
//! when the cursor is declared. Cursors move forward only (`NO SCROLL`, PostgreSQL's default
//! for a query it cannot run backwards): `SCROLL`, `BACKWARD`, `PRIOR`, `FIRST`, `LAST`,
//! `ABSOLUTE` and `RELATIVE` are refused with `0A000`.

use std::collections::HashMap;

use arrow::array::{RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef;
use datafusion::execution::SendableRecordBatchStream;
use futures::StreamExt;

use crate::error::{Error, Result};

/// One open cursor.
pub struct Cursor {
    /// The rows' columns, named and typed as the query shows them.
    pub schema: SchemaRef,
    /// The query's rows not read yet. In a mutex only so that a session is `Sync`: it is
    /// read through `&mut self` (`Mutex::get_mut`), never locked.
    stream: std::sync::Mutex<SendableRecordBatchStream>,
    /// The rows of the last batch read that no `FETCH` has returned yet.
    pending: Option<RecordBatch>,
    /// `WITH HOLD`: the cursor outlives the transaction block that declared it.
    pub hold: bool,
    /// Declared in the current transaction block: `ROLLBACK` closes it even `WITH HOLD`.
    pub in_block: bool,
}

impl Cursor {
    /// A cursor over `stream`, whose batches are relabelled to `schema`.
    pub fn new(
        schema: SchemaRef,
        stream: SendableRecordBatchStream,
        hold: bool,
        in_block: bool,
    ) -> Self {
        Cursor {
            schema,
            stream: std::sync::Mutex::new(stream),
            pending: None,
            hold,
            in_block,
        }
    }

    /// The next `n` rows (`None`: all the rest), fewer at the end of the result.
    ///
    /// # Errors
    /// The errors of the query's execution.
    pub async fn take(&mut self, n: Option<u64>) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        let mut want = n;
        while want != Some(0) {
            let batch = match self.pending.take() {
                Some(b) => b,
                None => match self
                    .stream
                    .get_mut()
                    .unwrap_or_else(|p| p.into_inner())
                    .next()
                    .await
                {
                    Some(b) => b?,
                    None => break,
                },
            };
            let rows = batch.num_rows() as u64;
            match want {
                Some(w) if rows > w => {
                    let w = w as usize;
                    out.push(batch.slice(0, w));
                    self.pending = Some(batch.slice(w, batch.num_rows() - w));
                    want = Some(0);
                }
                Some(w) => {
                    out.push(batch);
                    want = Some(w - rows);
                }
                None => out.push(batch),
            }
        }
        out.into_iter()
            .map(|b| {
                let options = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
                Ok(RecordBatch::try_new_with_options(
                    self.schema.clone(),
                    b.columns().to_vec(),
                    &options,
                )?)
            })
            .collect()
    }
}

/// A session's open cursors by name.
#[derive(Default)]
pub struct Cursors {
    open: HashMap<String, Cursor>,
}

impl Cursors {
    /// Opens `cursor` as `name`.
    ///
    /// # Errors
    /// `42P03` when a cursor of that name is open.
    pub fn declare(&mut self, name: String, cursor: Cursor) -> Result<()> {
        if self.open.contains_key(&name) {
            return Err(Error::plan(
                "42P03",
                format!("cursor \"{name}\" already exists"),
            ));
        }
        self.open.insert(name, cursor);
        Ok(())
    }

    /// The open cursor `name`.
    ///
    /// # Errors
    /// `34000` when there is none.
    pub fn get(&mut self, name: &str) -> Result<&mut Cursor> {
        self.open
            .get_mut(name)
            .ok_or_else(|| Error::plan("34000", format!("cursor \"{name}\" does not exist")))
    }

    /// The columns of the open cursor `name`, if any (a Describe of the portal).
    pub fn schema(&self, name: &str) -> Option<SchemaRef> {
        self.open.get(name).map(|c| c.schema.clone())
    }

    /// Closes `name`.
    ///
    /// # Errors
    /// `34000` when there is no such cursor.
    pub fn close(&mut self, name: &str) -> Result<()> {
        self.open
            .remove(name)
            .map(|_| ())
            .ok_or_else(|| Error::plan("34000", format!("cursor \"{name}\" does not exist")))
    }

    /// Closes every cursor (`CLOSE ALL`, `DISCARD ALL`).
    pub fn close_all(&mut self) {
        self.open.clear();
    }

    /// At `COMMIT`: cursors without `WITH HOLD` close; the others now outlive the block.
    pub fn commit(&mut self) {
        self.open.retain(|_, c| c.hold);
        for c in self.open.values_mut() {
            c.in_block = false;
        }
    }

    /// At `ROLLBACK`: cursors without `WITH HOLD`, and those the block declared, close.
    pub fn rollback(&mut self) {
        self.open.retain(|_, c| c.hold && !c.in_block);
    }
}

/// How far a `FETCH` or `MOVE` goes.
#[derive(Debug, PartialEq, Eq)]
pub struct Fetch {
    /// The cursor's name (unquoted; an unquoted name folded to lower case).
    pub name: String,
    /// Rows to go forward; `None` for `ALL`.
    pub count: Option<u64>,
}

/// The words of a cursor statement, by sqlparser's tokenizer (so quoted names may hold
/// spaces and comments may stand anywhere): a word is its name (a quoted one as written, an
/// unquoted one folded to lower case; `quoted` tells which), a number its digits with a
/// leading `-` when negative.
fn statement_words(sql: &str) -> Result<Vec<(String, bool)>> {
    use crate::sql::dialect::WeirDialect;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let tokens = Tokenizer::new(&WeirDialect, sql)
        .tokenize()
        .map_err(|e| Error::Parse(format!("syntax error: {e}")))?;
    let mut out = Vec::new();
    let mut negative = false;
    for t in tokens {
        match t {
            Token::Whitespace(_) | Token::SemiColon => {}
            Token::Minus => negative = true,
            Token::Number(n, _) => {
                out.push((if negative { format!("-{n}") } else { n }, false));
                negative = false;
            }
            Token::Word(w) if w.quote_style.is_some() => {
                if w.value.is_empty() {
                    return Err(Error::Parse("zero-length delimited identifier".into()));
                }
                out.push((w.value, true));
            }
            Token::Word(w) => out.push((w.value.to_ascii_lowercase(), false)),
            other => {
                return Err(Error::Parse(format!("syntax error at or near \"{other}\"")));
            }
        }
    }
    Ok(out)
}

/// Reads `CLOSE name | ALL`: `None` for `ALL`.
///
/// # Errors
/// `42601` for a statement that does not parse.
pub fn parse_close(sql: &str) -> Result<Option<String>> {
    match statement_words(sql)?.as_slice() {
        [(verb, false), (all, false)] if verb == "close" && all == "all" => Ok(None),
        [(verb, false), (name, _)] if verb == "close" => Ok(Some(name.clone())),
        _ => Err(Error::Parse(
            "syntax error: CLOSE takes a cursor name or ALL".into(),
        )),
    }
}

/// Reads `FETCH [direction] [FROM | IN] name` (and `MOVE`, whose grammar is the same).
///
/// # Errors
/// `42601` for a statement that does not parse; `0A000` for directions other than forward.
pub fn parse_fetch(sql: &str) -> Result<Fetch> {
    let words = statement_words(sql)?;
    let Some(((verb, _), rest)) = words.split_first() else {
        return Err(Error::Parse("empty FETCH".into()));
    };
    let verb = verb.to_ascii_uppercase();
    let Some(((name, _), direction)) = rest.split_last() else {
        return Err(Error::Parse(format!(
            "syntax error: {verb} needs a cursor name"
        )));
    };
    let mut direction: Vec<&str> = direction
        .iter()
        .map(|(w, quoted)| if *quoted { "\"" } else { w.as_str() })
        .collect();
    if direction.last().is_some_and(|w| *w == "from" || *w == "in") {
        direction.pop();
    }
    let number = |w: &str| -> Result<i64> {
        w.parse::<i64>()
            .map_err(|_| Error::Parse(format!("syntax error at or near \"{w}\"")))
    };
    let forward = |n: i64, what: &str| -> Result<Option<u64>> {
        match u64::try_from(n) {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(Error::not_supported(format!(
                "{verb}{what} {n}: cursors move forward only (a count of at least 1)"
            ))),
        }
    };
    let count = match direction.as_slice() {
        [] | ["next"] | ["forward"] => Some(1),
        ["all"] | ["forward", "all"] => None,
        ["forward", n] => forward(number(n)?, " FORWARD")?,
        [n] if n.parse::<i64>().is_ok() => forward(number(n)?, "")?,
        [d, ..]
            if matches!(
                *d,
                "prior" | "first" | "last" | "absolute" | "relative" | "backward"
            ) =>
        {
            return Err(Error::not_supported(format!(
                "{verb} {}: cursors move forward only",
                d.to_ascii_uppercase()
            )));
        }
        _ => {
            return Err(Error::Parse(format!(
                "syntax error at or near \"{}\"",
                direction.join(" ")
            )));
        }
    };
    Ok(Fetch {
        name: name.clone(),
        count,
    })
}

/// A `DECLARE ... CURSOR` statement.
#[derive(Debug, PartialEq, Eq)]
pub struct Declare {
    /// The cursor's name.
    pub name: String,
    /// The query, as SQL text.
    pub query: String,
    /// `WITH HOLD`.
    pub hold: bool,
}

/// Reads `DECLARE name [BINARY] [ASENSITIVE | INSENSITIVE] [[NO] SCROLL] CURSOR [{WITH |
/// WITHOUT} HOLD] FOR query`.
///
/// # Errors
/// `42601` for a statement that does not parse; `0A000` for `BINARY` and `SCROLL`.
pub fn parse_declare(sql: &str) -> Result<Declare> {
    use crate::sql::dialect::WeirDialect;
    use datafusion::sql::sqlparser::ast::Statement;
    use datafusion::sql::sqlparser::parser::Parser;
    let parsed = Parser::parse_sql(&WeirDialect, sql).map_err(|e| {
        Error::Parse(
            e.to_string()
                .replace("sql parser error: ", "syntax error: "),
        )
    })?;
    let [Statement::Declare { stmts }] = parsed.as_slice() else {
        return Err(Error::Parse("expected one DECLARE statement".into()));
    };
    let [declare] = stmts.as_slice() else {
        return Err(Error::Parse("DECLARE declares one cursor".into()));
    };
    if declare.binary == Some(true) {
        return Err(Error::not_supported(
            "DECLARE ... BINARY CURSOR (fetch in binary through the protocol's result formats)",
        ));
    }
    if declare.scroll == Some(true) {
        return Err(Error::not_supported(
            "DECLARE ... SCROLL CURSOR: cursors move forward only",
        ));
    }
    let ([name], Some(query)) = (declare.names.as_slice(), &declare.for_query) else {
        return Err(Error::Parse(
            "syntax error: DECLARE needs one cursor name and FOR query".into(),
        ));
    };
    let name = if name.quote_style.is_some() {
        if name.value.is_empty() {
            return Err(Error::Parse("zero-length delimited identifier".into()));
        }
        name.value.clone()
    } else {
        name.value.to_ascii_lowercase()
    };
    Ok(Declare {
        name,
        query: query.to_string(),
        hold: declare.hold == Some(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declare_forms() {
        let d = parse_declare(
            "DECLARE \"Pg3_cur\" NO SCROLL CURSOR WITHOUT HOLD FOR SELECT id FROM t WHERE id <= 3",
        )
        .unwrap();
        assert_eq!(d.name, "Pg3_cur");
        assert_eq!(d.query, "SELECT id FROM t WHERE id <= 3");
        assert!(!d.hold);
        let d = parse_declare("declare C cursor with hold for select 1").unwrap();
        assert_eq!((d.name.as_str(), d.hold), ("c", true));
        for (sql, code) in [
            ("DECLARE c SCROLL CURSOR FOR SELECT 1", "0A000"),
            ("DECLARE c BINARY CURSOR FOR SELECT 1", "0A000"),
            ("DECLARE c CURSOR FOR", "42601"),
            ("DECLARE \"\" CURSOR FOR SELECT 1", "42601"),
        ] {
            assert_eq!(parse_declare(sql).unwrap_err().sqlstate(), code, "{sql}");
        }
    }

    #[test]
    fn fetch_forms() {
        let f = |s: &str| parse_fetch(s).map(|f| (f.name, f.count));
        assert_eq!(f("FETCH c").unwrap(), ("c".into(), Some(1)));
        assert_eq!(f("FETCH NEXT FROM C").unwrap(), ("c".into(), Some(1)));
        assert_eq!(
            f("FETCH FORWARD 2000 FROM \"Pg_Cur\"").unwrap(),
            ("Pg_Cur".into(), Some(2000))
        );
        assert_eq!(f("fetch 5 in c").unwrap(), ("c".into(), Some(5)));
        assert_eq!(f("FETCH ALL FROM c").unwrap(), ("c".into(), None));
        assert_eq!(f("MOVE FORWARD ALL IN c").unwrap(), ("c".into(), None));
        // Quoted names keep their spaces and quotes; comments may stand anywhere.
        assert_eq!(f("FETCH \"a b\"").unwrap(), ("a b".into(), Some(1)));
        assert_eq!(
            f("FETCH 2 IN \"a\"\"b\"").unwrap(),
            ("a\"b".into(), Some(2))
        );
        assert_eq!(
            f("fetch/*x*/ 3 /*y*/ from -- z\n c1;").unwrap(),
            ("c1".into(), Some(3))
        );
        assert_eq!(parse_close("CLOSE \"a b\"").unwrap(), Some("a b".into()));
        assert_eq!(parse_close("close ALL").unwrap(), None);
        assert_eq!(parse_close("close \"all\"").unwrap(), Some("all".into()));
        for (sql, code) in [
            ("FETCH PRIOR FROM c", "0A000"),
            ("FETCH BACKWARD 2 FROM c", "0A000"),
            ("FETCH ABSOLUTE 1 FROM c", "0A000"),
            ("FETCH -1 FROM c", "0A000"),
            ("FETCH FORWARD 0 FROM c", "0A000"),
            ("FETCH", "42601"),
            ("FETCH SIDEWAYS FROM c", "42601"),
        ] {
            assert_eq!(parse_fetch(sql).unwrap_err().sqlstate(), code, "{sql}");
        }
    }
}
