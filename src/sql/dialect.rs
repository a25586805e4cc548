//! Weir's SQL dialect: sqlparser's PostgreSQL dialect with named function arguments read
//! as PostgreSQL reads them (`f(name => value)`, `f(name := value)`: the name is an
//! identifier).
//!
//! sqlparser's PostgreSQL dialect lets an argument's name be any expression (for
//! `json_object('label': 'value')`), so it parses every argument once as a would-be name, and,
//! when no `=>` or `:` follows, once more as the argument. Nested calls therefore parse in
//! time exponential in their depth: `abs(abs(...abs(1)...))` 24 deep took 23 s, and a few
//! dozen levels held a server thread for good. PostgreSQL's grammar (`func_arg_expr`:
//! `a_expr | param_name COLON_EQUALS a_expr | param_name EQUALS_GREATER a_expr`) names an
//! argument by an identifier only, which sqlparser checks with one token of lookahead.
//!
//! Every other behaviour is the PostgreSQL dialect's: each method it overrides is forwarded,
//! and the dialect reports PostgreSQL's type, so the parser's `dialect_of!` checks take their
//! PostgreSQL branches.

use std::any::TypeId;

use datafusion::sql::sqlparser::ast::{Expr, Statement};
use datafusion::sql::sqlparser::dialect::{Dialect, PostgreSqlDialect, Precedence};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};

/// sqlparser's [`PostgreSqlDialect`] whose named function arguments are identifiers, as in
/// PostgreSQL (see the module docs). Use it wherever statement text is parsed or tokenized.
#[derive(Debug, Default, Clone, Copy)]
pub struct WeirDialect;

const PG: PostgreSqlDialect = PostgreSqlDialect {};

impl Dialect for WeirDialect {
    fn dialect(&self) -> TypeId {
        TypeId::of::<PostgreSqlDialect>()
    }

    fn supports_named_fn_args_with_expr_name(&self) -> bool {
        false
    }

    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        PG.identifier_quote_style(identifier)
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        PG.is_delimited_identifier_start(ch)
    }
    fn is_identifier_start(&self, ch: char) -> bool {
        PG.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        PG.is_identifier_part(ch)
    }
    fn supports_unicode_string_literal(&self) -> bool {
        PG.supports_unicode_string_literal()
    }
    /// `ON` is reserved in PostgreSQL: `INSERT INTO t SELECT 1, 1 ON CONFLICT ...` ends the
    /// select list at `ON` (sqlparser read `1 ON` as an alias and failed at `CONFLICT`).
    fn is_column_alias(&self, kw: &Keyword, _parser: &mut Parser<'_>) -> bool {
        *kw != Keyword::ON
            && !datafusion::sql::sqlparser::keywords::RESERVED_FOR_COLUMN_ALIAS.contains(kw)
    }

    fn is_reserved_for_identifier(&self, kw: Keyword) -> bool {
        PG.is_reserved_for_identifier(kw)
    }
    fn is_custom_operator_part(&self, ch: char) -> bool {
        PG.is_custom_operator_part(ch)
    }
    fn get_next_precedence(&self, parser: &Parser<'_>) -> Option<Result<u8, ParserError>> {
        PG.get_next_precedence(parser)
    }
    fn supports_filter_during_aggregation(&self) -> bool {
        PG.supports_filter_during_aggregation()
    }
    fn supports_group_by_expr(&self) -> bool {
        PG.supports_group_by_expr()
    }
    fn prec_value(&self, prec: Precedence) -> u8 {
        PG.prec_value(prec)
    }
    fn allow_extract_custom(&self) -> bool {
        PG.allow_extract_custom()
    }
    fn allow_extract_single_quotes(&self) -> bool {
        PG.allow_extract_single_quotes()
    }
    fn supports_create_index_with_clause(&self) -> bool {
        PG.supports_create_index_with_clause()
    }
    fn supports_explain_with_utility_options(&self) -> bool {
        PG.supports_explain_with_utility_options()
    }
    fn supports_listen_notify(&self) -> bool {
        PG.supports_listen_notify()
    }
    fn supports_factorial_operator(&self) -> bool {
        PG.supports_factorial_operator()
    }
    fn supports_bitwise_shift_operators(&self) -> bool {
        PG.supports_bitwise_shift_operators()
    }
    fn supports_comment_on(&self) -> bool {
        PG.supports_comment_on()
    }
    fn supports_load_extension(&self) -> bool {
        PG.supports_load_extension()
    }
    fn supports_named_fn_args_with_colon_operator(&self) -> bool {
        PG.supports_named_fn_args_with_colon_operator()
    }
    fn supports_empty_projections(&self) -> bool {
        PG.supports_empty_projections()
    }
    fn supports_nested_comments(&self) -> bool {
        PG.supports_nested_comments()
    }
    fn supports_string_escape_constant(&self) -> bool {
        PG.supports_string_escape_constant()
    }
    fn supports_numeric_literal_underscores(&self) -> bool {
        PG.supports_numeric_literal_underscores()
    }
    fn supports_array_typedef_with_brackets(&self) -> bool {
        PG.supports_array_typedef_with_brackets()
    }
    fn supports_geometric_types(&self) -> bool {
        PG.supports_geometric_types()
    }
    fn supports_set_names(&self) -> bool {
        PG.supports_set_names()
    }
    fn supports_alter_column_type_using(&self) -> bool {
        PG.supports_alter_column_type_using()
    }
    fn supports_notnull_operator(&self) -> bool {
        PG.supports_notnull_operator()
    }
    fn supports_interval_options(&self) -> bool {
        PG.supports_interval_options()
    }
    fn supports_insert_table_alias(&self) -> bool {
        PG.supports_insert_table_alias()
    }
    fn supports_create_table_like_parenthesized(&self) -> bool {
        PG.supports_create_table_like_parenthesized()
    }
    fn supports_select_wildcard_with_alias(&self) -> bool {
        PG.supports_select_wildcard_with_alias()
    }
    fn supports_comma_separated_trim(&self) -> bool {
        PG.supports_comma_separated_trim()
    }
    fn supports_xml_expressions(&self) -> bool {
        PG.supports_xml_expressions()
    }
    fn supports_comment_optimizer_hint(&self) -> bool {
        PG.supports_comment_optimizer_hint()
    }
    fn parse_prefix(&self, parser: &mut Parser<'_>) -> Option<Result<Expr, ParserError>> {
        PG.parse_prefix(parser)
    }
    fn parse_infix(
        &self,
        parser: &mut Parser<'_>,
        expr: &Expr,
        precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        PG.parse_infix(parser, expr, precedence)
    }
    fn parse_statement(&self, parser: &mut Parser<'_>) -> Option<Result<Statement, ParserError>> {
        PG.parse_statement(parser)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArguments, SelectItem, SetExpr};

    use super::*;

    fn parse(sql: &str) -> Statement {
        Parser::parse_sql(&WeirDialect, sql)
            .expect("parses")
            .pop()
            .expect("one statement")
    }

    #[test]
    fn deep_calls_parse_in_linear_time() {
        // 24 levels took 23 s with the expression-named arguments (2^24 parses).
        let depth = 200;
        let sql = format!("SELECT {}1{}", "abs(".repeat(depth), ")".repeat(depth));
        let start = Instant::now();
        Parser::new(&WeirDialect)
            .with_recursion_limit(10 * depth)
            .try_with_sql(&sql)
            .and_then(|mut p| p.parse_statements())
            .expect("parses");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn named_arguments_are_identifiers() {
        let Statement::Query(q) = parse("SELECT f(a => 1, b => 2, 3)") else {
            panic!("a query")
        };
        let SetExpr::Select(s) = *q.body else {
            panic!("a select")
        };
        let SelectItem::UnnamedExpr(Expr::Function(f)) = &s.projection[0] else {
            panic!("a call")
        };
        let FunctionArguments::List(list) = &f.args else {
            panic!("an argument list")
        };
        let names: Vec<String> = list
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Named { name, .. } => name.value.clone(),
                FunctionArg::Unnamed(_) => "-".into(),
                other => panic!("unexpected argument {other:?}"),
            })
            .collect();
        assert_eq!(names, ["a", "b", "-"]);
    }

    #[test]
    fn postgres_syntax_still_parses() {
        assert!((&WeirDialect as &dyn Dialect).is::<PostgreSqlDialect>());
        for sql in [
            "SELECT x::int, 2 ^ 3, 5 !, 'a' || 'b', E'\\n', U&'d\\0061t' FROM t",
            "SELECT a FROM t WHERE a ILIKE 'x%' AND b NOTNULL AND c ~ '^a' AND d @> ARRAY[1]",
            "SELECT count(*) FILTER (WHERE a > 1) FROM t GROUP BY a",
            "LISTEN ch",
            "SELECT $1::int[], 1_000, x AT TIME ZONE 'UTC' FROM t",
        ] {
            Parser::parse_sql(&WeirDialect, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
}
