//! PostgreSQL's `character(n)` comparisons (docs 8.3 "Character Types"): trailing spaces of a
//! `character(n)` value are insignificant, so `'ab'::char(5) = 'ab   '` and a `char(5)`
//! column equals a `varchar` column holding `'ab  '`. An untyped literal or a parameter
//! compared with a `character(n)` operand is read as `character(n)` (docs 10.2
//! "Operators": an `unknown` operand takes the other's type), and `varchar` converts to
//! `character` implicitly where `text` does not (`char_col = 'ab  '::text` compares texts, and
//! is false).
//!
//! Weir keeps a `character(n)` value without its trailing spaces (see
//! [`crate::sql::functions::bpchar`]) and knows an operand's string type from its field
//! metadata ([`PgTextType`]). A comparison of a `character(n)` operand with an untyped
//! literal, a parameter or a `varchar` operand drops the other side's trailing spaces; the
//! same for `IN` lists and a simple `CASE`'s values. `LIKE` matches PostgreSQL's padded value
//! (`'ab'::char(5) LIKE 'ab'` is false, `LIKE 'ab%'` true) when `n` is known.

use datafusion::common::tree_node::Transformed;
use datafusion::common::{DFSchema, Result, ScalarValue};
use datafusion::logical_expr::expr::{InList, Like};
use datafusion::logical_expr::{BinaryExpr, Case, Expr, ExprSchemable, lit};

use crate::common::schema::PgTextType;

/// What an operand is, as far as `character(n)` comparisons go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operand {
    /// `character(n)`, with `n` when known.
    Char(Option<usize>),
    /// An untyped string literal, a parameter or a `varchar` value: read as `character(n)`
    /// beside one.
    Converts,
    /// Anything else (`text`, numbers, ...).
    Other,
}

fn operand(e: &Expr, schema: &DFSchema) -> Operand {
    if matches!(e, Expr::Literal(ScalarValue::Utf8(Some(_)), _)) {
        return Operand::Converts;
    }
    // A cast to text is `text`, whatever it casts (`char_col::text = 'ab  '` compares texts);
    // DataFusion's field of a text-to-text cast keeps its operand's `character(n)` marking.
    if let Expr::Cast(c) = e
        && matches!(
            c.field.data_type(),
            arrow::datatypes::DataType::Utf8
                | arrow::datatypes::DataType::LargeUtf8
                | arrow::datatypes::DataType::Utf8View
        )
    {
        return Operand::Other;
    }
    let Ok((_, field)) = e.to_field(schema) else {
        return Operand::Other;
    };
    if !matches!(
        field.data_type(),
        arrow::datatypes::DataType::Utf8
            | arrow::datatypes::DataType::LargeUtf8
            | arrow::datatypes::DataType::Utf8View
    ) {
        return Operand::Other;
    }
    if matches!(e, Expr::Placeholder(_)) {
        return Operand::Converts;
    }
    match PgTextType::of(field.metadata()) {
        PgTextType::Bpchar(n) => Operand::Char(n),
        PgTextType::Varchar => Operand::Converts,
        PgTextType::Text => Operand::Other,
    }
}

/// `e` as a `character(n)` value: without trailing spaces (a literal's are dropped here).
fn as_char(e: Expr) -> Expr {
    match e {
        Expr::Literal(ScalarValue::Utf8(Some(s)), m) => Expr::Literal(
            ScalarValue::Utf8(Some(s.trim_end_matches(' ').to_string())),
            m,
        ),
        other => datafusion::functions::string::expr_fn::rtrim(vec![other, lit(" ")]),
    }
}

/// One node of the rule (see the module docs), for [`crate::sql::semantics::PgOperandTypes`].
///
/// # Errors
/// None of its own; an operand's type that cannot be computed leaves the node as it is.
pub fn char_operands(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if super::equal_keys::is_comparison(op) =>
        {
            let (l, r) = (operand(&left, schema), operand(&right, schema));
            let (left, right) = match (l, r) {
                (Operand::Char(_), Operand::Converts) => (*left, as_char(*right)),
                (Operand::Converts, Operand::Char(_)) => (as_char(*left), *right),
                _ => {
                    return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
                        left,
                        op,
                        right,
                    })));
                }
            };
            Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr::new(
                Box::new(left),
                op,
                Box::new(right),
            ))))
        }
        Expr::InList(InList {
            expr,
            list,
            negated,
        }) if matches!(operand(&expr, schema), Operand::Char(_))
            && list.iter().any(|v| operand(v, schema) == Operand::Converts) =>
        {
            let list = list
                .into_iter()
                .map(|v| match operand(&v, schema) {
                    Operand::Converts => as_char(v),
                    _ => v,
                })
                .collect();
            Ok(Transformed::yes(Expr::InList(InList {
                expr,
                list,
                negated,
            })))
        }
        Expr::Case(Case {
            expr: Some(subject),
            when_then_expr,
            else_expr,
        }) if matches!(operand(&subject, schema), Operand::Char(_))
            && when_then_expr
                .iter()
                .any(|(w, _)| operand(w, schema) == Operand::Converts) =>
        {
            let when_then_expr = when_then_expr
                .into_iter()
                .map(|(w, t)| match operand(&w, schema) {
                    Operand::Converts => (Box::new(as_char(*w)), t),
                    _ => (w, t),
                })
                .collect();
            Ok(Transformed::yes(Expr::Case(Case {
                expr: Some(subject),
                when_then_expr,
                else_expr,
            })))
        }
        Expr::Like(like) => {
            let Operand::Char(Some(n)) = operand(&like.expr, schema) else {
                return Ok(Transformed::no(Expr::Like(like)));
            };
            let Ok(n) = i64::try_from(n) else {
                return Ok(Transformed::no(Expr::Like(like)));
            };
            let padded = datafusion::functions::unicode::expr_fn::rpad(vec![*like.expr, lit(n)]);
            Ok(Transformed::yes(Expr::Like(Like {
                expr: Box::new(padded),
                ..like
            })))
        }
        other => Ok(Transformed::no(other)),
    }
}
