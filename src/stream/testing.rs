//! Test support for streaming operators: a tiny text format for change batches, a printer that
//! consolidates an operator's output into sorted lines of the same format, and helpers that
//! feed text batches to an operator through a [`Scan`] leaf.
//!
//! The format, one change batch:
//!
//! ```text
//! batch   := schema NL row*            blank lines and lines starting with '#' are skipped
//! schema  := column (SP column)*       column := name ':' type
//! type    := i64 | i32 | f64 | utf8 | bool | decimal(P,S)      every column is nullable
//! row     := weight '|' [value (',' value)*]                   one value per column
//! weight  := ('+' | '-') digits (not zero);   value := NULL | 'text' ('' escapes ') | literal
//! ```
//!
//! A literal is an integer (`-3`), a float (`2.5`, `1e20`, `NaN`), `true`/`false` or a decimal
//! (`1.50`); `utf8` values are always quoted, other values never. For example:
//!
//! ```text
//! id:i64 name:utf8 v:f64
//! +1 | 1, 'a', 2.5
//! -2 | 3, NULL, 0.0
//! ```
//!
//! Printed lines have the canonical shape `+W | v1, v2` (no values: `+W |`) with values as
//! Arrow's display formats them (floats always with a fraction or exponent, decimals with all
//! their scale digits), strings quoted; NULL is `NULL`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, RecordBatchOptions, StringArray};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::row::{OwnedRow, RowConverter, SortField};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::DFSchema;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::prelude::SessionContext;

use crate::common::ChangeBatch;
use crate::common::RelationId;
use crate::error::{Error, Result};
use crate::stream::ops::scan::Scan;
use crate::stream::{EpochContext, Operator};

/// A format error (bad schema, row or value), naming what was wrong.
fn bad(message: impl Into<String>) -> Error {
    Error::data("22P02", message)
}

/// Parses a schema line (`id:i64 name:utf8 amount:decimal(10,2)`): whitespace-separated
/// `name:type` columns, all nullable, names unique.
///
/// # Errors
/// An empty line, a column without `:`, an unknown type or a repeated name.
pub(crate) fn parse_schema(line: &str) -> Result<SchemaRef> {
    let mut fields: Vec<Field> = Vec::new();
    for column in line.split_whitespace() {
        let (name, ty) = column
            .split_once(':')
            .ok_or_else(|| bad(format!("column {column:?} is not name:type")))?;
        if name.is_empty() {
            return Err(bad(format!("column {column:?} has no name")));
        }
        if fields.iter().any(|f| f.name() == name) {
            return Err(bad(format!("column {name:?} appears twice")));
        }
        fields.push(Field::new(name, parse_type(ty)?, true));
    }
    if fields.is_empty() {
        return Err(bad("a schema needs at least one column"));
    }
    Ok(Arc::new(Schema::new(fields)))
}

fn parse_type(ty: &str) -> Result<DataType> {
    Ok(match ty {
        "i64" => DataType::Int64,
        "i32" => DataType::Int32,
        "f64" => DataType::Float64,
        "utf8" => DataType::Utf8,
        "bool" => DataType::Boolean,
        _ => {
            let args = ty
                .strip_prefix("decimal(")
                .and_then(|t| t.strip_suffix(')'))
                .ok_or_else(|| bad(format!("unknown type {ty:?}")))?;
            let (p, s) = args
                .split_once(',')
                .ok_or_else(|| bad(format!("{ty:?} is not decimal(P,S)")))?;
            let p: u8 = p
                .trim()
                .parse()
                .map_err(|_| bad(format!("bad precision in {ty:?}")))?;
            let s: i8 = s
                .trim()
                .parse()
                .map_err(|_| bad(format!("bad scale in {ty:?}")))?;
            if !(1..=38).contains(&p) || s < 0 || s as u8 > p {
                return Err(bad(format!("{ty:?} needs 1 <= P <= 38 and 0 <= S <= P")));
            }
            DataType::Decimal128(p, s)
        }
    })
}

/// One value token of a row.
#[derive(Debug, PartialEq)]
enum Token {
    Null,
    /// A quoted string, unescaped.
    Quoted(String),
    /// Anything else, as written.
    Bare(String),
}

/// Splits a row's value list at the commas outside quotes; each piece trimmed, quotes kept.
fn split_values(text: &str) -> Result<Vec<String>> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in text.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                current.push(c);
            }
            ',' if !quoted => out.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    if quoted {
        return Err(bad(format!("unterminated quote in {text:?}")));
    }
    out.push(current);
    let out: Vec<String> = out.into_iter().map(|v| v.trim().to_string()).collect();
    if out.iter().any(|v| v.is_empty()) {
        return Err(bad(format!("empty value in {text:?}")));
    }
    Ok(out)
}

fn token(raw: &str) -> Result<Token> {
    if raw.eq_ignore_ascii_case("null") {
        return Ok(Token::Null);
    }
    let Some(inner) = raw.strip_prefix('\'') else {
        if raw.contains('\'') {
            return Err(bad(format!("stray quote in {raw:?}")));
        }
        return Ok(Token::Bare(raw.to_string()));
    };
    let inner = inner
        .strip_suffix('\'')
        .ok_or_else(|| bad(format!("text after the closing quote in {raw:?}")))?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\'' && chars.next() != Some('\'') {
            return Err(bad(format!("text after the closing quote in {raw:?}")));
        }
        out.push(c);
    }
    Ok(Token::Quoted(out))
}

/// Parses a row's weight: an explicit sign, then digits; zero is refused.
fn parse_weight(text: &str) -> Result<i64> {
    let text = text.trim();
    if !text.starts_with(['+', '-']) {
        return Err(bad(format!("weight {text:?} needs a sign (+1, -1)")));
    }
    let w: i64 = text
        .parse()
        .map_err(|_| bad(format!("weight {text:?} is not an integer")))?;
    if w == 0 {
        return Err(bad("a weight of zero is not a change"));
    }
    Ok(w)
}

/// Parses row lines (no schema line) into one change batch of `schema` (see the module docs
/// for the grammar); no rows give an empty batch.
///
/// # Errors
/// A line without `|`, a bad weight, the wrong number of values, a value that does not fit
/// its column's type (an unquoted string, a quoted number, `1.5` for an integer, an overflow).
pub(crate) fn parse_rows(schema: &SchemaRef, text: &str) -> Result<ChangeBatch> {
    let width = schema.fields().len();
    let mut weights: Vec<i64> = Vec::new();
    let mut columns: Vec<Vec<Option<String>>> = vec![Vec::new(); width];
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |e: Error| bad(format!("line {}: {e}", n + 1));
        let (w, values) = line
            .split_once('|')
            .ok_or_else(|| at(bad(format!("{line:?} has no '|' after the weight"))))?;
        weights.push(parse_weight(w).map_err(at)?);
        let values = split_values(values).map_err(at)?;
        if values.len() != width {
            return Err(at(bad(format!(
                "{} values for {width} columns in {line:?}",
                values.len()
            ))));
        }
        for ((raw, field), column) in values.iter().zip(schema.fields()).zip(&mut columns) {
            let value = match (token(raw).map_err(at)?, field.data_type()) {
                (Token::Null, _) => None,
                (Token::Quoted(s), DataType::Utf8) => Some(s),
                (Token::Bare(b), DataType::Boolean) => {
                    if !(b.eq_ignore_ascii_case("true") || b.eq_ignore_ascii_case("false")) {
                        return Err(at(bad(format!("{b:?} is not true or false"))));
                    }
                    Some(b)
                }
                (Token::Bare(b), t) if *t != DataType::Utf8 => Some(b),
                (_, t) => {
                    return Err(at(bad(format!(
                        "{raw:?} does not fit column {} of type {t} (utf8 values are quoted, \
                         others are not)",
                        field.name()
                    ))));
                }
            };
            column.push(value);
        }
    }
    let options = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    let arrays = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(values, field)| {
            let text: ArrayRef = Arc::new(StringArray::from(values));
            cast_with_options(&text, field.data_type(), &options)
                .map_err(|e| bad(format!("column {}: {e}", field.name())))
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let batch = RecordBatch::try_new_with_options(
        Arc::clone(schema),
        arrays,
        &RecordBatchOptions::new().with_row_count(Some(weights.len())),
    )?;
    ChangeBatch::new(batch, Int64Array::from(weights))
}

/// Parses a whole change batch: the schema line (the first line that is not blank or a
/// comment), then its rows.
///
/// # Errors
/// As [`parse_schema`] and [`parse_rows`]; no schema line.
pub(crate) fn parse_batch(text: &str) -> Result<ChangeBatch> {
    let mut lines = text.lines();
    let schema = lines
        .by_ref()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .ok_or_else(|| bad("no schema line"))?;
    let schema = parse_schema(schema)?;
    let rest: Vec<&str> = lines.collect();
    parse_rows(&schema, &rest.join("\n"))
}

/// The printed line of a row: weight with its sign, then the values.
fn line(weight: i64, values: &[String]) -> String {
    format!("{weight:+} | {}", values.join(", "))
        .trim_end()
        .to_string()
}

/// Sorts lines by their values, then by weight, so that a retraction sits next to the
/// insert of the same key.
fn sort_lines(lines: &mut [String]) {
    let key = |l: &String| -> (String, i64) {
        let (w, v) = l.split_once('|').unwrap_or((l.as_str(), ""));
        (v.trim().to_string(), w.trim().parse().unwrap_or(0))
    };
    lines.sort_by_cached_key(key);
}

/// The net changes of `parts` as sorted lines of the text format (no schema line): identical
/// rows summed over all batches, rows whose weights cancel left out, so that the result does
/// not depend on how the rows were split into batches or ordered.
///
/// # Errors
/// Batches whose column types differ; rows that Arrow cannot encode or display.
pub(crate) fn format_changes(parts: &[ChangeBatch]) -> Result<Vec<String>> {
    let Some(first) = parts.first() else {
        return Ok(Vec::new());
    };
    let schema = first.schema();
    let types: Vec<DataType> = schema
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    for p in parts {
        let theirs: Vec<DataType> = p
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        if theirs != types {
            return Err(bad(format!(
                "batches of different column types: {types:?} and {theirs:?}"
            )));
        }
    }
    if types.is_empty() {
        let total: i64 = parts.iter().flat_map(|p| p.weights.values().iter()).sum();
        return Ok(if total == 0 {
            Vec::new()
        } else {
            vec![line(total, &[])]
        });
    }
    let converter = RowConverter::new(types.iter().cloned().map(SortField::new).collect())?;
    let mut net: HashMap<OwnedRow, i64> = HashMap::new();
    let mut order: Vec<OwnedRow> = Vec::new();
    for p in parts.iter().filter(|p| !p.is_empty()) {
        let rows = converter.convert_columns(p.batch.columns())?;
        for (i, w) in p.weights.values().iter().enumerate() {
            let row = rows.row(i).owned();
            match net.get_mut(&row) {
                Some(sum) => *sum += w,
                None => {
                    net.insert(row.clone(), *w);
                    order.push(row);
                }
            }
        }
    }
    let kept: Vec<(OwnedRow, i64)> = order
        .into_iter()
        .map(|r| {
            let w = net[&r];
            (r, w)
        })
        .filter(|(_, w)| *w != 0)
        .collect();
    let columns = converter.convert_rows(kept.iter().map(|(r, _)| r.row()))?;
    let options = FormatOptions::default().with_null("NULL");
    let formatters = columns
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let mut lines = Vec::with_capacity(kept.len());
    for (i, (_, w)) in kept.iter().enumerate() {
        let values: Vec<String> = formatters
            .iter()
            .zip(&columns)
            .map(|(f, c)| {
                let text = f.value(i).to_string();
                let is_text = matches!(
                    c.data_type(),
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                );
                if is_text && c.is_valid(i) {
                    format!("'{}'", text.replace('\'', "''"))
                } else {
                    text
                }
            })
            .collect();
        lines.push(line(*w, &values));
    }
    sort_lines(&mut lines);
    Ok(lines)
}

/// [`format_changes`] for tests: the consolidated, sorted lines of `parts`.
///
/// # Panics
/// When the batches cannot be consolidated (see [`format_changes`]).
pub(crate) fn consolidated(parts: &[ChangeBatch]) -> Vec<String> {
    format_changes(parts).expect("output batches consolidate")
}

/// Expected lines written by hand, in the canonical shape [`consolidated`] prints: blank and
/// `#` lines skipped, whitespace around `|` and `,` normalized, weights given their sign,
/// lines sorted. Values are compared as written, so write them as they print.
///
/// # Panics
/// On a malformed line (no `|`, a bad weight, a bad quote).
pub(crate) fn expect(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (w, values) = l
                .split_once('|')
                .unwrap_or_else(|| panic!("expected line {l:?} has no '|'"));
            let w = parse_weight(w).unwrap_or_else(|e| panic!("expected line {l:?}: {e}"));
            let values = split_values(values).unwrap_or_else(|e| panic!("{l:?}: {e}"));
            for v in &values {
                token(v).unwrap_or_else(|e| panic!("expected line {l:?}: {e}"));
            }
            line(w, &values)
        })
        .collect();
    sort_lines(&mut lines);
    lines
}

/// [`parse_schema`] for tests.
///
/// # Panics
/// On a malformed schema line.
pub(crate) fn schema(line: &str) -> SchemaRef {
    parse_schema(line).unwrap_or_else(|e| panic!("schema {line:?}: {e}"))
}

/// A source relation of a test: its id and schema, the leaf of the operator under test.
pub(crate) struct Rel {
    /// The relation id its changes come under in an [`EpochContext`].
    pub id: RelationId,
    /// Its rows' schema (every column nullable).
    pub schema: SchemaRef,
}

impl Rel {
    /// A relation with the given id and schema line.
    ///
    /// # Panics
    /// On a malformed schema line.
    pub(crate) fn new(id: RelationId, schema_line: &str) -> Self {
        Rel {
            id,
            schema: schema(schema_line),
        }
    }

    /// A scan of all its columns: the leaf that feeds its changes to the operator under test.
    pub(crate) fn scan(&self) -> Box<dyn Operator> {
        Box::new(Scan {
            relation: self.id,
            name: format!("r{}", self.id),
            projection: None,
            schema: Arc::clone(&self.schema),
        })
    }

    /// A change batch of its rows (row lines only).
    ///
    /// # Panics
    /// On malformed rows.
    pub(crate) fn batch(&self, rows: &str) -> ChangeBatch {
        parse_rows(&self.schema, rows).unwrap_or_else(|e| panic!("rows of r{}: {e}", self.id))
    }
}

/// An epoch's input: one change batch per `(relation, rows)` pair, in order (a relation may
/// appear several times: several batches; empty rows: an empty batch).
///
/// # Panics
/// On malformed rows.
pub(crate) fn epoch(changes: &[(&Rel, &str)]) -> EpochContext {
    let mut input = EpochContext::default();
    for (rel, rows) in changes {
        input
            .changes
            .entry(rel.id)
            .or_default()
            .push(rel.batch(rows));
    }
    input
}

/// An epoch's input from whole text batches (schema line and rows) per relation id, in order.
///
/// # Errors
/// As [`parse_batch`].
pub(crate) fn epoch_input(changes: &[(RelationId, &str)]) -> Result<EpochContext> {
    let mut input = EpochContext::default();
    for (id, text) in changes {
        input
            .changes
            .entry(*id)
            .or_default()
            .push(parse_batch(text)?);
    }
    Ok(input)
}

/// A DataFusion physical expression from SQL text over `schema` (type coercion applied), as
/// the planner would build it: `v > 1`, `name IS NULL`, `v * 2`.
///
/// # Panics
/// When the text does not parse or plan.
pub(crate) fn physical(sql: &str, schema: &SchemaRef) -> Arc<dyn PhysicalExpr> {
    let ctx = SessionContext::new();
    let df = DFSchema::try_from(schema.as_ref().clone()).expect("schema converts");
    let expr = ctx
        .parse_sql_expr(sql, &df)
        .unwrap_or_else(|e| panic!("{sql:?} does not parse: {e}"));
    ctx.create_physical_expr(expr, &df)
        .unwrap_or_else(|e| panic!("{sql:?} does not plan: {e}"))
}

/// Runs one epoch through `op` and returns its consolidated output lines, after checking that
/// every output batch has the operator's column types and one weight per row.
///
/// # Panics
/// When `process` fails or an output batch does not fit the operator's schema.
pub(crate) fn run<O: Operator + ?Sized>(op: &mut O, input: &EpochContext) -> Vec<String> {
    let out = op.process(input).expect("process succeeds");
    let schema = op.schema();
    for b in &out {
        let got: Vec<&DataType> = b
            .batch
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.data_type())
            .collect();
        let want: Vec<&DataType> = schema.fields().iter().map(|f| f.data_type()).collect();
        assert_eq!(
            got, want,
            "output batch types differ from the operator's schema"
        );
        assert_eq!(b.weights.len(), b.len(), "one weight per row");
        assert_eq!(b.weights.null_count(), 0, "no NULL weights");
    }
    consolidated(&out)
}

/// Copies the state tables of `from` into the same-shaped operator `to`, each by its name (as
/// a checkpoint image is loaded), then calls `to.restore()`: `to` then stands for `from`
/// rebuilt after a restart.
///
/// # Errors
/// The two operators' state tables differ by name; state or restore errors.
pub(crate) fn restore_into<A, B>(from: &mut A, to: &mut B) -> Result<()>
where
    A: Operator + ?Sized,
    B: Operator + ?Sized,
{
    let mut tables = std::collections::BTreeMap::new();
    from.visit_state("root", &mut |name, t| {
        tables.insert(name.to_string(), t.rows()?);
        Ok(())
    })?;
    to.visit_state("root", &mut |name, t| {
        let rows = tables
            .remove(name)
            .ok_or_else(|| Error::Internal(format!("no state table {name} in the image")))?;
        t.load_rows(rows.iter().map(|(k, c)| (k.as_ref(), *c)))
    })?;
    if let Some(name) = tables.keys().next() {
        return Err(Error::Internal(format!(
            "state table {name} of the image was not restored"
        )));
    }
    to.restore()
}

#[cfg(test)]
mod tests {
    use arrow::array::{AsArray, BooleanArray, Decimal128Array, Float64Array, Int32Array};
    use arrow::datatypes::{Decimal128Type, Int64Type};

    use super::*;

    const ALL_TYPES: &str = "a:i64 b:i32 c:f64 d:utf8 e:bool f:decimal(10,2)";

    #[test]
    fn schema_line_gives_nullable_columns_of_each_type() {
        let s = schema(ALL_TYPES);
        let types: Vec<DataType> = s.fields().iter().map(|f| f.data_type().clone()).collect();
        assert_eq!(
            types,
            vec![
                DataType::Int64,
                DataType::Int32,
                DataType::Float64,
                DataType::Utf8,
                DataType::Boolean,
                DataType::Decimal128(10, 2),
            ]
        );
        assert!(s.fields().iter().all(|f| f.is_nullable()));
        assert_eq!(s.field(3).name(), "d");
    }

    #[test]
    fn bad_schema_lines_are_errors() {
        for line in [
            "",
            "   ",
            "a",
            ":i64",
            "a:int",
            "a:i64 a:i32",
            "a:decimal(10)",
            "a:decimal(0,0)",
            "a:decimal(39,2)",
            "a:decimal(5,6)",
            "a:decimal(x,2)",
            "a:decimal(10,2",
        ] {
            assert!(parse_schema(line).is_err(), "{line:?} should not parse");
        }
    }

    #[test]
    fn rows_parse_into_typed_columns_and_weights() {
        let b = parse_batch(
            "# all types\n\
             a:i64 b:i32 c:f64 d:utf8 e:bool f:decimal(10,2)\n\
             +1 | 1, -2, 2.5, 'x', true, 1.50\n\
             \n\
             -3 | NULL, NULL, NULL, NULL, NULL, NULL\n",
        )
        .unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b.weights.values().to_vec(), vec![1, -3]);
        let cols = b.batch.columns();
        assert_eq!(cols[0].as_primitive::<Int64Type>().value(0), 1);
        assert_eq!(
            cols[1]
                .as_any()
                .downcast_ref::<Int32Array>()
                .unwrap()
                .value(0),
            -2
        );
        assert_eq!(
            cols[2]
                .as_any()
                .downcast_ref::<Float64Array>()
                .unwrap()
                .value(0),
            2.5
        );
        assert_eq!(cols[3].as_string::<i32>().value(0), "x");
        assert!(
            cols[4]
                .as_any()
                .downcast_ref::<BooleanArray>()
                .unwrap()
                .value(0)
        );
        let d: &Decimal128Array = cols[5].as_primitive::<Decimal128Type>();
        assert_eq!(d.value(0), 150);
        for c in cols {
            assert!(c.is_null(1));
            assert!(c.is_valid(0));
        }
    }

    #[test]
    fn printing_round_trips_through_the_parser() {
        let text = "+1 | 1, -2, 2.5, 'x', true, 1.50\n\
                    -3 | NULL, NULL, NULL, NULL, NULL, NULL\n\
                    +2 | -7, 0, 1.0, 'it''s, | here', false, -0.05\n\
                    +1 | 9223372036854775807, 2147483647, 1e20, '', true, 99999999.99";
        let s = schema(ALL_TYPES);
        let printed = consolidated(&[parse_rows(&s, text).unwrap()]);
        assert_eq!(printed, expect(text));
        let reparsed = parse_rows(&s, &printed.join("\n")).unwrap();
        assert_eq!(consolidated(&[reparsed]), printed);
    }

    #[test]
    fn null_is_a_keyword_and_quoted_null_is_text() {
        let s = schema("s:utf8 n:i64");
        let b = parse_rows(&s, "+1 | 'NULL', null\n+1 | NULL, 1").unwrap();
        let strings = b.batch.column(0).as_string::<i32>();
        assert_eq!(strings.value(0), "NULL");
        assert!(strings.is_null(1));
        assert!(b.batch.column(1).is_null(0));
        assert_eq!(
            consolidated(&[b]),
            expect("+1 | 'NULL', NULL\n+1 | NULL, 1")
        );
    }

    #[test]
    fn consolidation_sums_rows_across_batches_and_drops_zeros() {
        let s = schema("k:utf8 v:i64");
        let parts = [
            parse_rows(&s, "+1 | 'a', 1\n+2 | 'b', NULL\n-1 | 'c', 3").unwrap(),
            parse_rows(&s, "").unwrap(),
            parse_rows(&s, "+1 | 'a', 1\n-2 | 'b', NULL\n+1 | 'c', 3\n+1 | 'c', 3").unwrap(),
        ];
        assert_eq!(consolidated(&parts), expect("+2 | 'a', 1\n+1 | 'c', 3"));
        let mut reversed = parts.to_vec();
        reversed.reverse();
        assert_eq!(consolidated(&reversed), consolidated(&parts));
        assert!(consolidated(&[]).is_empty());
        assert!(consolidated(&parts[1..2]).is_empty());
    }

    #[test]
    fn lines_sort_by_values_then_weight() {
        let s = schema("k:utf8 v:i64");
        let b = parse_rows(&s, "+1 | 'b', 1\n+1 | 'a', 2\n-1 | 'a', 1").unwrap();
        assert_eq!(
            consolidated(&[b]),
            vec!["-1 | 'a', 1", "+1 | 'a', 2", "+1 | 'b', 1"]
        );
    }

    #[test]
    fn expected_text_is_normalized() {
        assert_eq!(
            expect("  -1|'a' ,NULL  \n\n# comment\n+2 |  'x, y',3"),
            vec!["-1 | 'a', NULL", "+2 | 'x, y', 3"]
        );
        assert_eq!(expect(""), Vec::<String>::new());
    }

    #[test]
    fn batches_of_different_types_do_not_consolidate() {
        let a = parse_rows(&schema("v:i64"), "+1 | 1").unwrap();
        let b = parse_rows(&schema("v:i32"), "+1 | 1").unwrap();
        assert!(format_changes(&[a, b]).is_err());
    }

    #[test]
    fn bad_rows_are_errors_not_panics() {
        let s = schema("a:i64 b:utf8 c:bool d:i32 e:decimal(5,2) f:f64");
        let ok = "+1 | 1, 'x', true, 1, 1.00, 1.0";
        assert!(parse_rows(&s, ok).is_ok());
        for row in [
            "1 | 1, 'x', true, 1, 1.00, 1.0",
            "+0 | 1, 'x', true, 1, 1.00, 1.0",
            "+x | 1, 'x', true, 1, 1.00, 1.0",
            "+1 1, 'x', true, 1, 1.00, 1.0",
            "+1 | 1, 'x', true, 1, 1.00",
            "+1 | 1, 'x', true, 1, 1.00, 1.0, 7",
            "+1 | 1, 'x', true, 1, 1.00,",
            "+1 | 1,, true, 1, 1.00, 1.0",
            "+1 | 1.5, 'x', true, 1, 1.00, 1.0",
            "+1 | '1', 'x', true, 1, 1.00, 1.0",
            "+1 | 1, x, true, 1, 1.00, 1.0",
            "+1 | 1, 'x, true, 1, 1.00, 1.0",
            "+1 | 1, 'x'y', true, 1, 1.00, 1.0",
            "+1 | 1, 'x'', true, 1, 1.00, 1.0",
            "+1 | 1, it's, true, 1, 1.00, 1.0",
            "+1 | 1, 'x', yes, 1, 1.00, 1.0",
            "+1 | 1, 'x', true, 2147483648, 1.00, 1.0",
            "+1 | 99999999999999999999, 'x', true, 1, 1.00, 1.0",
            "+1 | 1, 'x', true, 1, 1234.00, 1.0",
            "+1 | 1, 'x', true, 1, abc, 1.0",
            "+1 | 1, 'x', true, 1, 1.00, abc",
            "+99999999999999999999 | 1, 'x', true, 1, 1.00, 1.0",
        ] {
            assert!(parse_rows(&s, row).is_err(), "{row:?} should not parse");
        }
        assert!(parse_batch("").is_err());
        assert!(parse_batch("# only a comment\n").is_err());
    }

    #[test]
    fn epoch_helpers_feed_batches_through_a_scan() {
        let r = Rel::new(7, "k:utf8 v:i64");
        let input = epoch(&[(&r, "+1 | 'a', 1"), (&r, ""), (&r, "-1 | 'b', 2")]);
        assert_eq!(input.of(7).len(), 3);
        assert!(input.of(8).is_empty());
        let mut scan = r.scan();
        assert_eq!(
            run(scan.as_mut(), &input),
            expect("+1 | 'a', 1\n-1 | 'b', 2")
        );
        let input = epoch_input(&[(3, "x:bool\n+2 | true"), (3, "x:bool\n-1 | NULL")]).unwrap();
        assert_eq!(consolidated(input.of(3)), expect("+2 | true\n-1 | NULL"));
        assert!(epoch_input(&[(3, "x:bool\n+2 | 1")]).is_err());
    }
}
