//! SQL text to sqlparser statements, with only the PostgreSQL-compatibility rewrites that keep
//! a query's meaning.
//!
//! ```text
//!  text ─► sqlparser (PostgreSQL dialect) ─► meaning-preserving rewrites ─► Statement
//!                                              (pg_catalog names, operators, casts, ANY)
//!  client catalog queries that fail to plan ─► datafusion-pg-catalog's full compatibility layer
//! ```
//!
//! datafusion-pg-catalog's parser applies rewrites meant for the catalog queries of client
//! tools, two of which change the answer of ordinary queries: it replaces a correlated
//! subquery in a SELECT list with `NULL` and stamps `LIMIT 1` on the others (hiding
//! PostgreSQL's error 21000 "more than one row returned by a subquery used as an
//! expression"), and it lowers `x = ANY(array)` to a containment test that loses SQL's NULL
//! rule. User queries therefore get only the rewrites listed in [`Parser::new`]; the full
//! layer is a fallback for queries over `pg_catalog` or `information_schema` that do not plan
//! otherwise (see [`mentions_catalog`]).

use std::ops::ControlFlow;
use std::sync::{Arc, LazyLock};

use crate::sql::dialect::WeirDialect;
use datafusion::sql::sqlparser::ast::{
    AccessExpr, Array, ArrayElemTypeDef, BinaryOperator, CastKind, DataType as SqlDataType, Expr,
    Function, FunctionArg, FunctionArgExpr, FunctionArgumentClause, FunctionArgumentList,
    FunctionArguments, GroupByExpr, Ident, ObjectName, OrderBy, OrderByKind, Query, Select,
    SelectItem, SetExpr, Statement, TableAlias, TableAliasColumnDef, TableFactor, UnaryOperator,
    Value, ValueWithSpan, Visit, VisitMut, Visitor, VisitorMut, visit_expressions_mut,
};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser as SqlParser;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
use datafusion_pg_catalog::sql::PostgresCompatibilityParser;
use datafusion_pg_catalog::sql::rules::{
    FixArrayLiteral, FixVersionColumnName, PrependUnqualifiedPgTableName, RewritePgCatalogOperator,
    RewriteRegCastToSubquery, SqlStatementRewriteRule, StripCallableQualifier, StripCollate,
};

use crate::error::{Error, Result};

/// Name of the scalar function that evaluates `x op ANY(array)` with PostgreSQL's NULL rule
/// (see [`crate::sql::semantics`]).
pub const ANY_OP_FUNCTION: &str = "weir_any_op";

/// Name of the scalar function that stands for `x op '<array text>'` until the analyzer knows
/// `x`'s type ([`crate::sql::semantics`]): `weir_array_text_compare(x, '{1,2}', '=')`.
pub const ARRAY_TEXT_COMPARE_FUNCTION: &str = "weir_array_text_compare";

/// The statement parser: sqlparser's PostgreSQL dialect plus the rewrites that keep meaning.
struct Parser {
    rules: Vec<Arc<dyn SqlStatementRewriteRule>>,
    compat: PostgresCompatibilityParser,
}

impl Parser {
    fn new() -> Self {
        Parser {
            rules: vec![
                // `1e3`, `1.5`, `99999999999999999999` are `numeric` literals, as PostgreSQL
                // reads them (first: the other rules see the literal's final text).
                Arc::new(NumericLiteralRule),
                // `pg_class` means `pg_catalog.pg_class`, as PostgreSQL's search_path has it.
                Arc::new(PrependUnqualifiedPgTableName),
                // ... and the views of `pg_catalog` Weir adds (`pg_indexes`).
                Arc::new(WeirCatalogViewsRule),
                // `pg_catalog.pg_get_userbyid(...)` names the same function unqualified.
                Arc::new(StripCallableQualifier),
                // `pg_get_serial_sequence(...)` is NULL: Weir has no sequences.
                Arc::new(NoSequencesRule),
                // `pg_get_viewdef(oid)` is the view's query, looked up by name.
                Arc::new(ViewDefinitionRule),
                // `'{a,"b c",NULL}'::text[]` read as PostgreSQL reads array text.
                Arc::new(ArrayTextRule),
                // `'{a,b}'::text[]` array literals (the forms the rule above leaves).
                Arc::new(FixArrayLiteral),
                // `current_schema`, `current_role` without parentheses are calls.
                Arc::new(CurrentSchemaRule),
                // `SELECT v::text ... ORDER BY v` sorts by the output column `v`.
                Arc::new(OrderByOutputNamesRule),
                // `FETCH FIRST n ROWS ONLY` is `LIMIT n`.
                Arc::new(FetchFirstRule),
                // `substring(s FROM x [FOR n])` is a call of `substring` (its regex form too).
                Arc::new(SubstringCallRule),
                // `array_ndims` and `array_dims` of an empty array are NULL.
                Arc::new(ArrayDimsRule),
                // `array_length`, `cardinality`, ... return `integer`.
                Arc::new(IntegerArrayFunctionsRule),
                // `current_date`, `localtimestamp`, ... on the session zone's clock.
                Arc::new(SessionClockRule),
                // `COLLATE` clauses (Weir has one collation).
                Arc::new(StripCollate),
                // `OPERATOR(pg_catalog.~)` is the plain operator.
                Arc::new(RewritePgCatalogOperator),
                // `x::regclass` shown (or cast to text) is the relation's name.
                Arc::new(RegNameOutputRule),
                // `'name'::regclass` looks the oid up.
                Arc::new(RewriteRegCastToSubquery::new()),
                // `SELECT version()` names its column `version`.
                Arc::new(FixVersionColumnName),
                // `x op ANY(array)` with PostgreSQL's NULL rule.
                Arc::new(AnyOpRule),
                // `INTERVAL '1 day 02:03:04'` in PostgreSQL's input forms.
                Arc::new(IntervalLiteralRule),
                // `ts AT TIME ZONE zone` with PostgreSQL's meaning.
                Arc::new(AtTimeZoneRule),
                // `@ x`, `json_agg(x)`, `make_interval(days => 3)` in forms DataFusion plans.
                Arc::new(PgCallFormsRule),
                // `ARRAY(subquery)`: an aggregate over the subquery's rows.
                Arc::new(ArraySubqueryRule),
                // `row_number()`, `rank()`, `dense_rank()` are bigint, `ntile()` integer.
                Arc::new(RankingTypeRule),
                // `a IS DISTINCT FROM b AND c` is `(a IS DISTINCT FROM b) AND c`.
                Arc::new(DistinctFromPrecedence),
                // `x::varchar(n)` keeps the first n characters.
                Arc::new(VarcharLengthRule),
                // `FROM generate_series(1, 3) g` names its column `g`.
                Arc::new(SeriesColumnName),
                // `(row).field` reads a field of a composite value.
                Arc::new(FieldSelectionRule),
                // `generate_subscripts(a, d)`, `_pg_expandarray(a)` in a SELECT list.
                Arc::new(SetReturningCallRule),
                // `(SELECT 6)`, `(SELECT t.x + 1)`: the expression itself.
                Arc::new(ConstantSubqueryRule),
                // A query's scalar subquery without an aggregate, correlated or not.
                Arc::new(ScalarSubqueryRule),
                // `SELECT x + 1 FROM t GROUP BY x ORDER BY 1`.
                Arc::new(GroupedOrdinalRule),
                // `LATERAL (SELECT max(v), true AS seen ...)`: `seen` on rows without matches.
                Arc::new(crate::sql::lateral_aggregates::LateralAggregateRule),
                // `count(b.*)` over the padded side of `a LEFT JOIN b`.
                Arc::new(crate::sql::count_row::CountRowRule),
                // `FROM (SELECT count(*) FROM t) s` names its column `count` (last: it names
                // the other rules' forms as PostgreSQL names what they replaced).
                Arc::new(DerivedColumnNamesRule),
            ],
            compat: PostgresCompatibilityParser::new(),
        }
    }
}

/// How deeply expressions and subqueries may nest (sqlparser's default is 50, which refuses
/// machine-written predicates of 60 levels of parentheses that PostgreSQL runs). The parser
/// and DataFusion grow their stacks on demand (their `recursive` protection); this bound
/// keeps Weir's own recursive passes over the tree (rewrites, printing) within a worker
/// thread's stack. Deeper statements are refused with `54001`.
const PARSER_RECURSION_LIMIT: usize = 256;

static PARSER: LazyLock<Parser> = LazyLock::new(Parser::new);

fn parse_error(e: impl std::fmt::Display) -> Error {
    let message = e.to_string();
    if message.contains("recursion limit exceeded") {
        // PostgreSQL's answer to a statement nested past its stack (`54001`), not a
        // syntax error: the text is valid.
        return Error::data(
            "54001",
            format!(
                "stack depth limit exceeded: the statement nests deeper than Weir's parser \
                 takes ({PARSER_RECURSION_LIMIT} levels of calls, subqueries or parentheses)"
            ),
        );
    }
    Error::Parse(
        e.to_string()
            .replace("sql parser error: ", "syntax error: "),
    )
}

fn exactly_one(mut stmts: Vec<Statement>) -> Result<Statement> {
    match stmts.len() {
        0 => Err(Error::Parse("empty statement".into())),
        1 => Ok(stmts.remove(0)),
        _ => Err(Error::Parse("expected one statement".into())),
    }
}

/// Parses one statement with the meaning-preserving rewrites.
///
/// Processing-time temporal joins (`FOR SYSTEM_TIME AS OF`, [`crate::sql::lookup_join`]) and
/// window table functions (`TUMBLE`, `HOP`, `SESSION`) are rewritten first
/// ([`crate::sql::windows`]).
///
/// # Errors
/// [`Error::Parse`] (`42601`) when the text does not parse or holds more than one statement;
/// `42702` for an ambiguous `ORDER BY` name
/// ([`crate::sql::names::check_order_by_ambiguity`]); `0A000` for `count(DISTINCT t.*)`
/// ([`crate::sql::count_row::check_count_distinct_row`]); the errors of
/// [`crate::sql::lookup_join::normalize_system_time`],
/// [`crate::sql::windows::rewrite_window_functions`] and
/// [`crate::sql::named_windows::resolve_named_windows`].
pub fn parse_one(sql: &str) -> Result<Statement> {
    parse_with(sql, false)
}

/// [`parse_one`] for a materialized view's query: also rewrites its subquery comparisons
/// into shapes a view maintains ([`view_subquery_values`]), before the other rewrites.
///
/// # Errors
/// As [`parse_one`].
pub fn parse_view_query(sql: &str) -> Result<Statement> {
    parse_with(sql, true)
}

fn parse_with(sql: &str, view: bool) -> Result<Statement> {
    check_expression_depth(sql)?;
    let lookup = crate::sql::lookup_join::normalize_system_time(sql)?;
    let sql = lookup.as_deref().unwrap_or(sql);
    let flink = crate::sql::windows::normalize_flink_windows(sql);
    let statements = SqlParser::new(&WeirDialect)
        .with_recursion_limit(PARSER_RECURSION_LIMIT)
        .try_with_sql(flink.as_deref().unwrap_or(sql))
        .and_then(|mut p| p.parse_statements())
        .map_err(parse_error)?;
    let mut stmt = crate::sql::dml_with::lift(exactly_one(statements)?)?;
    check_cast_lengths(&stmt)?;
    check_fetch_with_ties(&stmt)?;
    crate::sql::names::check_order_by_ambiguity(&stmt)?;
    crate::sql::count_row::check_count_distinct_row(&stmt)?;
    crate::sql::lateral_aggregates::check_having(&stmt)?;
    crate::sql::windows::rewrite_window_functions(&mut stmt)?;
    crate::sql::named_windows::resolve_named_windows(&mut stmt)?;
    one_row_in(&mut stmt);
    if view {
        view_subquery_values(&mut stmt);
    }
    for rule in &PARSER.rules {
        stmt = rule.rewrite(stmt);
    }
    Ok(stmt)
}

/// The deepest expression a statement may hold, counted by [`expression_depth`]. Planning,
/// Weir's rewrites and evaluation walk an expression recursively, so a statement of a
/// chain of 5,000 `+` would overflow a thread's stack and abort the whole process;
/// PostgreSQL refuses such a statement too (`54001`, past its `max_stack_depth`). Threads
/// that plan or evaluate expressions have [`crate::THREAD_STACK_BYTES`] of stack, which holds
/// this depth with room to spare.
pub const MAX_EXPRESSION_DEPTH: usize = 1_000;

/// How deep the expressions of `sql` nest, estimated from its tokens without building the
/// tree (so without recursion). Parentheses and brackets each add a level. Within a level,
/// binary operators are counted per precedence tier (PostgreSQL docs, 4.1.6 "Operator
/// Precedence": `OR` < `AND` < `NOT` < comparisons < `+ - ||` < `* / %` < `^` < `::`): each
/// operator extends the chain of its tier and starts the tighter tiers' chains afresh, so
/// `a = 1 OR a = 2 OR ...` of `n` terms is `n + 1` deep, as its tree is. A comma and the
/// clause keywords (`WHEN`, `THEN`, `WHERE`, ...) start a new expression at their level.
/// Text that does not tokenize counts 0 (the parser reports it).
pub fn expression_depth(sql: &str) -> usize {
    const TIERS: usize = 8;
    let Ok(tokens) = Tokenizer::new(&WeirDialect, sql).tokenize() else {
        return 0;
    };
    let tier = |t: &Token| -> Option<usize> {
        Some(match t {
            Token::Word(w) if w.keyword == Keyword::OR => 0,
            Token::Word(w) if w.keyword == Keyword::AND => 1,
            Token::Word(w) if w.keyword == Keyword::NOT => 2,
            Token::Eq
            | Token::Neq
            | Token::Lt
            | Token::Gt
            | Token::LtEq
            | Token::GtEq
            | Token::Tilde
            | Token::ExclamationMarkTilde
            | Token::TildeAsterisk
            | Token::ExclamationMarkTildeAsterisk => 3,
            Token::Plus
            | Token::Minus
            | Token::StringConcat
            | Token::Ampersand
            | Token::Pipe
            | Token::ShiftLeft
            | Token::ShiftRight => 4,
            Token::Mul | Token::Div | Token::Mod => 5,
            Token::Caret => 6,
            Token::DoubleColon => 7,
            _ => return None,
        })
    };
    // Per open parenthesis: the depth it starts at and its chains' lengths by tier.
    let mut levels: Vec<(usize, [usize; TIERS])> = vec![(0, [0; TIERS])];
    let depth = |l: &(usize, [usize; TIERS])| l.0 + l.1.iter().sum::<usize>();
    let mut deepest = 0;
    for t in &tokens {
        let current = levels.last().map_or(0, depth);
        match t {
            Token::LParen | Token::LBracket => levels.push((current + 1, [0; TIERS])),
            Token::RParen | Token::RBracket => {
                if levels.len() > 1 {
                    levels.pop();
                }
            }
            Token::Comma | Token::SemiColon => {
                if let Some(l) = levels.last_mut() {
                    l.1 = [0; TIERS];
                }
            }
            Token::Word(w)
                if matches!(
                    w.keyword,
                    Keyword::WHEN
                        | Keyword::THEN
                        | Keyword::ELSE
                        | Keyword::END
                        | Keyword::SELECT
                        | Keyword::FROM
                        | Keyword::WHERE
                        | Keyword::HAVING
                        | Keyword::ON
                        | Keyword::SET
                        | Keyword::VALUES
                        | Keyword::LIMIT
                        | Keyword::OFFSET
                        | Keyword::RETURNING
                ) =>
            {
                if let Some(l) = levels.last_mut() {
                    l.1 = [0; TIERS];
                }
            }
            other => {
                if let (Some(k), Some(l)) = (tier(other), levels.last_mut()) {
                    l.1[k] += 1;
                    for c in &mut l.1[k + 1..] {
                        *c = 0;
                    }
                }
            }
        }
        deepest = deepest.max(levels.last().map_or(0, depth));
    }
    deepest
}

/// Refuses a statement whose expressions nest deeper than [`MAX_EXPRESSION_DEPTH`].
///
/// # Errors
/// `54001` `stack depth limit exceeded`, as PostgreSQL words it.
fn check_expression_depth(sql: &str) -> Result<()> {
    check_subquery_depth(sql)?;
    // Most statements are far too short to reach the limit: each level takes a token of at
    // least one character.
    if sql.len() <= MAX_EXPRESSION_DEPTH {
        return Ok(());
    }
    let depth = expression_depth(sql);
    if depth > MAX_EXPRESSION_DEPTH {
        return Err(Error::data(
            "54001",
            format!(
                "stack depth limit exceeded: the statement's expressions nest {depth} deep; \
                 Weir takes at most {MAX_EXPRESSION_DEPTH} (split a long chain of AND, OR or \
                 + into parts, or use IN (...) or a join)"
            ),
        ));
    }
    Ok(())
}

/// The deepest nesting of subqueries a statement may have. DataFusion's optimizer visits a
/// subquery's plan again for every level above it, so planning time doubles with each level
/// (`SELECT (SELECT (SELECT ...))` 20 deep took 3 s, 30 deep more than 15 minutes, holding a
/// runtime thread); 16 levels plan in well under a second.
pub const MAX_SUBQUERY_DEPTH: usize = 16;

/// Refuses a statement whose subqueries nest deeper than [`MAX_SUBQUERY_DEPTH`]: a
/// parenthesis whose first token is `SELECT`, `WITH`, `VALUES` or `TABLE` opens one.
///
/// # Errors
/// `54001` `stack depth limit exceeded`.
fn check_subquery_depth(sql: &str) -> Result<()> {
    // A statement needs a `SELECT`-like word per level: most have far fewer.
    let lower = sql.to_ascii_lowercase();
    let words = ["select", "with", "values", "table"]
        .iter()
        .map(|w| lower.matches(w).count())
        .sum::<usize>();
    if words <= MAX_SUBQUERY_DEPTH {
        return Ok(());
    }
    let Ok(tokens) = Tokenizer::new(&WeirDialect, sql).tokenize() else {
        return Ok(());
    };
    let mut open: Vec<bool> = Vec::new();
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut after_paren = false;
    for t in tokens.iter().filter(|t| !matches!(t, Token::Whitespace(_))) {
        if after_paren
            && let Token::Word(w) = t
            && matches!(
                w.keyword,
                Keyword::SELECT | Keyword::WITH | Keyword::VALUES | Keyword::TABLE
            )
            && let Some(last) = open.last_mut()
        {
            *last = true;
            depth += 1;
            deepest = deepest.max(depth);
        }
        after_paren = matches!(t, Token::LParen);
        match t {
            Token::LParen => open.push(false),
            Token::RParen if open.pop() == Some(true) => depth -= 1,
            _ => {}
        }
    }
    if deepest > MAX_SUBQUERY_DEPTH {
        return Err(Error::data(
            "54001",
            format!(
                "stack depth limit exceeded: the statement's subqueries nest {deepest} deep; \
                 Weir takes at most {MAX_SUBQUERY_DEPTH} (planning time doubles with each \
                 level)"
            ),
        ));
    }
    Ok(())
}

/// The deepest nesting of function calls [`parse_one_compat`] takes. datafusion-pg-catalog
/// parses with sqlparser's PostgreSQL dialect, which reads each call argument twice (see
/// [`crate::sql::dialect`]), so its time doubles with each level; 12 levels stay under a
/// tenth of a second, and client catalog queries nest a handful.
const COMPAT_MAX_CALL_DEPTH: usize = 12;

/// How deep the function calls of `sql` nest: a parenthesis right after a name opens a call.
/// Text that does not tokenize counts 0.
fn call_depth(sql: &str) -> usize {
    let Ok(tokens) = Tokenizer::new(&WeirDialect, sql).tokenize() else {
        return 0;
    };
    let mut open: Vec<bool> = Vec::new();
    let (mut calls, mut deepest) = (0usize, 0usize);
    let mut previous_is_name = false;
    for t in &tokens {
        match t {
            Token::Whitespace(_) => continue,
            Token::LParen => {
                open.push(previous_is_name);
                if previous_is_name {
                    calls += 1;
                    deepest = deepest.max(calls);
                }
            }
            Token::RParen if open.pop() == Some(true) => calls -= 1,
            _ => {}
        }
        previous_is_name = matches!(t, Token::Word(_));
    }
    deepest
}

/// Refuses `FETCH ... WITH TIES` in a query without `ORDER BY`, as PostgreSQL's grammar
/// does (`42601`, "WITH TIES cannot be specified without ORDER BY clause").
///
/// # Errors
/// [`Error::Parse`] as above.
fn check_fetch_with_ties(stmt: &Statement) -> Result<()> {
    struct Ties;
    impl Visitor for Ties {
        type Break = Error;
        fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<Error> {
            let ordered = matches!(
                &q.order_by,
                Some(OrderBy { kind: OrderByKind::Expressions(keys), .. }) if !keys.is_empty()
            );
            if q.fetch.as_ref().is_some_and(|f| f.with_ties) && !ordered {
                return ControlFlow::Break(Error::Parse(
                    "WITH TIES cannot be specified without ORDER BY clause".into(),
                ));
            }
            ControlFlow::Continue(())
        }
    }
    match stmt.visit(&mut Ties) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Refuses a cast to `varchar(n)` or `char(n)` whose length PostgreSQL refuses
/// (`anychar_typmodin`): `22023` `length for type varchar must be at least 1` for 0, and
/// `... cannot exceed 10485760` above that; and a cast of array text to an array type that
/// PostgreSQL's `array_in` refuses (`'{{1,2},{3}}'::int[]`, `'{1,,2}'::int[]`, `'1,2'::int[]`
/// without braces, `'{{}}'::int[]`, `'[1:3]={1,2}'::int[]`).
///
/// # Errors
/// `22023` as above; `22P02` `malformed array literal` for the array text; those of
/// [`undecorated_array_text`] for its dimension decoration.
fn check_cast_lengths(stmt: &Statement) -> Result<()> {
    use datafusion::sql::sqlparser::ast::CharacterLength;
    struct Lengths;
    impl Visitor for Lengths {
        type Break = Error;
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<Error> {
            let Expr::Cast {
                data_type, expr, ..
            } = e
            else {
                return ControlFlow::Continue(());
            };
            if let SqlDataType::Array(
                ArrayElemTypeDef::SquareBracket(..) | ArrayElemTypeDef::AngleBracket(_),
            ) = data_type
                && let Expr::Value(ValueWithSpan {
                    value: Value::SingleQuotedString(text),
                    ..
                }) = expr.as_ref()
            {
                // A dimension decoration that does not fit its contents, or lower bounds
                // other than 1.
                if let Err(e) = undecorated_array_text(text) {
                    return ControlFlow::Break(e);
                }
                if parse_array_text(text).is_some() {
                    return ControlFlow::Continue(());
                }
                // PostgreSQL's array_in refuses it so (`{{1,2},{3}}`, `{1,,2}`, `{1`);
                // the compatibility layer's rewrite made a parser error of it.
                return ControlFlow::Break(Error::data(
                    "22P02",
                    format!("malformed array literal: \"{text}\""),
                ));
            }
            let (name, length) = match data_type {
                SqlDataType::Varchar(l) | SqlDataType::CharacterVarying(l) => ("varchar", l),
                SqlDataType::Char(l) | SqlDataType::Character(l) => ("char", l),
                _ => return ControlFlow::Continue(()),
            };
            match length {
                Some(CharacterLength::IntegerLength { length: 0, .. }) => {
                    ControlFlow::Break(Error::data(
                        "22023",
                        format!("length for type {name} must be at least 1"),
                    ))
                }
                Some(CharacterLength::IntegerLength { length, .. }) if *length > 10_485_760 => {
                    ControlFlow::Break(Error::data(
                        "22023",
                        format!("length for type {name} cannot exceed 10485760"),
                    ))
                }
                _ => ControlFlow::Continue(()),
            }
        }
    }
    match stmt.visit(&mut Lengths) {
        ControlFlow::Break(e) => Err(e),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Parses one statement with datafusion-pg-catalog's whole compatibility layer, including
/// its substitutions of known client catalog queries. Only for queries that read the system
/// catalogs, where it is the better approximation than an error.
///
/// # Errors
/// [`Error::Parse`] (`42601`).
pub fn parse_one_compat(sql: &str) -> Result<Statement> {
    check_expression_depth(sql)?;
    let calls = call_depth(sql);
    if calls > COMPAT_MAX_CALL_DEPTH {
        return Err(Error::Parse(format!(
            "function calls nest {calls} deep; the catalog compatibility parser takes at most \
             {COMPAT_MAX_CALL_DEPTH}"
        )));
    }
    let stmt = exactly_one(PARSER.compat.parse(sql).map_err(parse_error)?)?;
    Ok(NumericLiteralRule.rewrite(stmt))
}

/// The statement text with each parameter `$n` whose type the client declared (a non-zero
/// type in the Parse message, `declared[n - 1]`, given as a PostgreSQL type name) read as that
/// type: `$n` becomes `($n::type)`. PostgreSQL types a declared parameter so (protocol docs
/// 55.2.3, "Extended Query"): `WHERE int_col = $1` with `$1` declared `numeric` compares as
/// numeric, so `1.5` matches no integer, where reading it as the inferred `integer` would cut
/// it to `1`. The text is rewritten token by token, so literals, comments and identifiers
/// stay as written; text that does not tokenize is returned unchanged (its parse error comes
/// later).
pub fn declare_parameter_types(sql: &str, declared: &[Option<&str>]) -> String {
    if declared.iter().all(Option::is_none) {
        return sql.to_string();
    }
    let Ok(tokens) = Tokenizer::new(&WeirDialect, sql).tokenize() else {
        return sql.to_string();
    };
    let mut out = String::with_capacity(sql.len() + 16 * declared.len());
    for t in &tokens {
        let typed = match t {
            Token::Placeholder(p) => p
                .strip_prefix('$')
                .and_then(|n| n.parse::<usize>().ok())
                .and_then(|n| declared.get(n.checked_sub(1)?).copied().flatten()),
            _ => None,
        };
        match typed {
            Some(type_name) => out.push_str(&format!("({t}::{type_name})")),
            None => out.push_str(&t.to_string()),
        }
    }
    out
}

/// A table's `WITH (...)` options: (key, value) pairs in the order written.
pub type TableOptions = Vec<(String, String)>;

/// Takes the `WITH (key = value, ...)` clause off a `CREATE TABLE` statement: the statement
/// without it and the options (keys lower-case, may be dotted as in `nexmark.table`; values
/// as written, a quoted string unquoted). `None` for other statements and tables without the
/// clause. Values are single-quoted strings or bare words and numbers.
///
/// # Errors
/// `42601` for an option list that is not `key = value, ...`.
pub fn split_table_options(sql: &str) -> Result<Option<(String, TableOptions)>> {
    let mut words = sql.split_whitespace();
    let create = words
        .next()
        .is_some_and(|w| w.eq_ignore_ascii_case("create"));
    if !create
        || !words
            .next()
            .is_some_and(|w| w.eq_ignore_ascii_case("table"))
    {
        return Ok(None);
    }
    let bytes = sql.as_bytes();
    let (mut depth, mut i, mut columns_closed) = (0usize, 0usize, false);
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let b = bytes[i];
        if let Some(q) = quote {
            if b == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match b {
            b'\'' | b'"' => quote = Some(b),
            b'(' => depth += 1,
            b')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    columns_closed = true;
                }
            }
            _ if depth == 0
                && columns_closed
                && bytes.len() - i >= 4
                && bytes[i..i + 4].eq_ignore_ascii_case(b"with")
                && !bytes[i - 1].is_ascii_alphanumeric()
                && sql[i + 4..].trim_start().starts_with('(') =>
            {
                let open = i + 4 + (sql[i + 4..].len() - sql[i + 4..].trim_start().len());
                let close = closing_paren(sql, open)?;
                let options = parse_options(&sql[open + 1..close])?;
                let rest = format!("{} {}", &sql[..i], &sql[close + 1..]);
                return Ok(Some((rest.trim().to_string(), options)));
            }
            _ => {}
        }
        i += 1;
    }
    Ok(None)
}

fn syntax(message: &str) -> Error {
    Error::Parse(format!("syntax error in table options: {message}"))
}

/// The index of the `)` closing the `(` at `open`, outside quotes.
fn closing_paren(sql: &str, open: usize) -> Result<usize> {
    let mut quote: Option<u8> = None;
    let mut depth = 0usize;
    for (i, b) in sql.bytes().enumerate().skip(open) {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'\'' | b'"') => quote = Some(b),
            (None, b'(') => depth += 1,
            (None, b')') => {
                depth -= 1;
                if depth == 0 {
                    return Ok(i);
                }
            }
            _ => {}
        }
    }
    Err(syntax("unterminated option list"))
}

/// `key = value, ...` split at commas outside quotes.
fn parse_options(text: &str) -> Result<TableOptions> {
    let mut parts = Vec::new();
    let (mut start, mut quote) = (0usize, None::<u8>);
    for (i, b) in text.bytes().enumerate() {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'\'' | b'"') => quote = Some(b),
            (None, b',') => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    let mut out = Vec::new();
    for part in parts {
        let part = part.trim();
        if part.is_empty() {
            return Err(syntax("empty option"));
        }
        let Some((key, value)) = part.split_once('=') else {
            return Err(syntax(&format!("expected key = value, got \"{part}\"")));
        };
        let key = key.trim();
        let key = match key.strip_prefix('"').and_then(|k| k.strip_suffix('"')) {
            Some(quoted) => quoted.to_string(),
            None => key.to_ascii_lowercase(),
        };
        let value = value.trim();
        let value = match value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
            Some(quoted) => quoted.replace("''", "'"),
            None => value.to_string(),
        };
        if key.is_empty() || value.is_empty() {
            return Err(syntax(&format!("expected key = value, got \"{part}\"")));
        }
        out.push((key, value));
    }
    Ok(out)
}

/// True when `stmt` reads a relation of `pg_catalog` or `information_schema` (or calls a
/// `pg_catalog` function): a client's catalog query.
pub fn mentions_catalog(stmt: &Statement) -> bool {
    struct Finder(bool);
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_relation(&mut self, name: &ObjectName) -> ControlFlow<()> {
            let text = name.to_string().to_ascii_lowercase();
            if text.starts_with("pg_catalog.")
                || text.starts_with("information_schema.")
                || text.starts_with("pg_")
            {
                self.0 = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = expr {
                let text = f.name.to_string().to_ascii_lowercase();
                if text.starts_with("pg_") || text.starts_with("pg_catalog.") {
                    self.0 = true;
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut f = Finder(false);
    let _ = stmt.visit(&mut f);
    f.0
}

/// `CREATE TABLE ... AS query WITH [NO] DATA` without its trailing clause, which the parser
/// does not take, and whether the rows are wanted (`WITH DATA`, the default, is `true`);
/// `None` for any other statement.
pub fn split_with_data(sql: &str) -> Option<(String, bool)> {
    let words: Vec<String> = sql
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if words.first().map(String::as_str) != Some("create")
        || !words.iter().take(4).any(|w| w == "table")
    {
        return None;
    }
    let n = words.len();
    let (drop, with_data) = if n >= 3 && words[n - 3..] == ["with", "no", "data"] {
        (3, false)
    } else if n >= 2 && words[n - 2..] == ["with", "data"] {
        (2, true)
    } else {
        return None;
    };
    // The text up to the start of the clause's first word.
    let mut rest = sql.trim_end();
    for _ in 0..drop {
        let cut = rest.trim_end().rfind(char::is_whitespace)?;
        rest = rest[..cut].trim_end();
    }
    Some((rest.to_string(), with_data))
}

/// The text of the query of `CREATE MATERIALIZED VIEW name [(columns)] AS query` (or of
/// `CREATE TABLE name [(columns)] AS query`), exactly as the user wrote it (so it is planned
/// again from the same text at restart, not from a printed tree that may not parse back the
/// same: sqlparser prints `- -x` as a comment).
///
/// # Errors
/// [`Error::Parse`] when no top-level `AS` follows the view's or table's name.
pub fn view_query_text(sql: &str) -> Result<String> {
    let tokens = Tokenizer::new(&WeirDialect, sql)
        .tokenize_with_location()
        .map_err(parse_error)?;
    let mut depth = 0i32;
    let mut seen_view = false;
    // Byte offset of each line start, to turn (line, column) locations into offsets.
    let mut line_starts = vec![0usize];
    for (i, c) in sql.char_indices() {
        if c == '\n' {
            line_starts.push(i + 1);
        }
    }
    let offset = |line: u64, column: u64| -> Option<usize> {
        let start = *line_starts.get(usize::try_from(line).ok()?.checked_sub(1)?)?;
        let col = usize::try_from(column).ok()?.checked_sub(1)?;
        sql[start..]
            .char_indices()
            .nth(col)
            .map(|(i, _)| start + i)
            .or(Some(sql.len()))
    };
    for t in &tokens {
        match &t.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            Token::Word(w) if matches!(w.keyword, Keyword::VIEW | Keyword::TABLE) => {
                seen_view = true
            }
            Token::Word(w) if w.keyword == Keyword::AS && depth == 0 && seen_view => {
                let end = offset(t.span.end.line, t.span.end.column)
                    .ok_or_else(|| Error::Parse("syntax error at AS".into()))?;
                let text = sql[end..].trim().trim_end_matches(';').trim();
                return Ok(text.to_string());
            }
            _ => {}
        }
    }
    Err(Error::Parse("syntax error: expected AS query".into()))
}

/// Rewrites `x op ANY(array)` and `x op SOME(array)` (an array, not a subquery) into
/// [`ANY_OP_FUNCTION`]`(x, array, 'op')`, which follows PostgreSQL: true if some element
/// compares true, else NULL if some comparison is NULL, else false (PostgreSQL docs, 9.24.3
/// "ANY/SOME (array)"). A string literal `'{a,b}'` as the array is read as an array of text,
/// as clients send it.
#[derive(Debug)]
struct AnyOpRule;

/// `current_schema` and `current_role` written without parentheses (PostgreSQL's
/// SQL-standard spelling) are the functions `current_schema()` and `current_role()`.
/// sqlparser already reads `current_user`, `session_user`, `user` and `current_catalog` as
/// calls without arguments; they keep their names, which are registered as functions
/// ([`crate::sql::functions::pg_info::register_user`]) and name their columns as in
/// PostgreSQL.
#[derive(Debug)]
struct CurrentSchemaRule;

impl SqlStatementRewriteRule for CurrentSchemaRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut CurrentSchemaVisitor);
        s
    }
}

struct CurrentSchemaVisitor;

impl VisitorMut for CurrentSchemaVisitor {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Identifier(ident) = expr
            && ident.quote_style.is_none()
            && ["current_schema", "current_role"]
                .iter()
                .any(|n| ident.value.eq_ignore_ascii_case(n))
        {
            *expr = function_call(&ident.value.to_ascii_lowercase(), vec![]);
        }
        ControlFlow::Continue(())
    }
}

/// `substring(s FROM x [FOR n])` (and `substring(s FOR n)`, from 1) as the call
/// `substring(s, x [, n])`, which resolves through the function registry to Weir's
/// `substring` ([`crate::sql::functions::regex::PgSubstring`]: a text `x` is a regular
/// expression); DataFusion's planner would call its own `substr` directly.
#[derive(Debug)]
struct SubstringCallRule;

impl SqlStatementRewriteRule for SubstringCallRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = visit_expressions_mut(&mut s, |e| {
            if let Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } = e
            {
                let from = match substring_from.take() {
                    Some(f) => *f,
                    None if substring_for.is_some() => {
                        Expr::value(Value::Number("1".into(), false))
                    }
                    None => return ControlFlow::<()>::Continue(()),
                };
                let mut args = vec![(**expr).clone(), from];
                if let Some(n) = substring_for.take() {
                    args.push(*n);
                }
                *e = function_call("substring", args);
            }
            ControlFlow::Continue(())
        });
        s
    }
}

/// Calls of the array functions that count or find (`array_length`, `cardinality`,
/// `array_position`, `array_ndims`) cast to `integer`, their type in PostgreSQL; DataFusion's
/// return an unsigned 64-bit integer, which would go out as `numeric`. Rewritten in the
/// statement, so that the types of the expressions around a call are resolved against
/// `integer` (DataFusion's own uses of these functions, as in `x > ALL(array)`, keep theirs).
#[derive(Debug)]
struct IntegerArrayFunctionsRule;

impl SqlStatementRewriteRule for IntegerArrayFunctionsRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        // Post-order: the cast's own call is not visited again.
        let _ = visit_expressions_mut(&mut s, |e| {
            if let Expr::Function(f) = e
                && f.name.0.len() == 1
                && f.name.0[0].as_ident().is_some_and(|i| {
                    [
                        "array_length",
                        "cardinality",
                        "array_position",
                        "array_ndims",
                    ]
                    .iter()
                    .any(|n| i.value.eq_ignore_ascii_case(n))
                })
            {
                *e = Expr::Cast {
                    kind: datafusion::sql::sqlparser::ast::CastKind::Cast,
                    expr: Box::new(e.clone()),
                    data_type: datafusion::sql::sqlparser::ast::DataType::Integer(None),
                    array: false,
                    format: None,
                };
            }
            ControlFlow::<()>::Continue(())
        });
        s
    }
}

/// Gives each unaliased SELECT-list item of `s` (in every query of it) for which `name_of`
/// says a name that name as its alias, so that a rule rewriting the item's expression keeps
/// the column name PostgreSQL shows for what was written (`SELECT current_date` is column
/// `current_date`).
fn alias_unnamed_items(s: &mut Statement, name_of: impl Fn(&Expr) -> Option<String>) {
    struct Names<F>(F);
    impl<F: Fn(&Expr) -> Option<String>> VisitorMut for Names<F> {
        type Break = ();
        fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
            if let SetExpr::Select(select) = q.body.as_mut() {
                for item in &mut select.projection {
                    if let SelectItem::UnnamedExpr(e) = item
                        && let Some(name) = (self.0)(e)
                    {
                        let plain = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                            && name
                                .chars()
                                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                        *item = SelectItem::ExprWithAlias {
                            expr: e.clone(),
                            alias: if plain {
                                Ident::new(name)
                            } else {
                                Ident::with_quote('"', name)
                            },
                        };
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(s, &mut Names(name_of));
}

/// The `pg_catalog` views Weir adds to the library's (`pg_indexes`, see
/// `crate::sql::system`), named without their schema, read from `pg_catalog` as PostgreSQL
/// finds them (it searches `pg_catalog` first).
#[derive(Debug)]
struct WeirCatalogViewsRule;

impl SqlStatementRewriteRule for WeirCatalogViewsRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        struct Views;
        impl VisitorMut for Views {
            type Break = ();
            fn pre_visit_table_factor(&mut self, t: &mut TableFactor) -> ControlFlow<()> {
                if let TableFactor::Table { name, .. } = t
                    && name.0.len() == 1
                    && name.0[0]
                        .as_ident()
                        .is_some_and(|i| i.value.eq_ignore_ascii_case("pg_indexes"))
                {
                    name.0.insert(
                        0,
                        datafusion::sql::sqlparser::ast::ObjectNamePart::Identifier(Ident::new(
                            "pg_catalog",
                        )),
                    );
                }
                ControlFlow::Continue(())
            }
        }
        let _ = VisitMut::visit(&mut s, &mut Views);
        s
    }
}

/// `array_ndims(a)` and `array_dims(a)` as PostgreSQL answers them (docs 9.19 "Array Functions
/// and Operators"): NULL for an empty array (DataFusion's `array_ndims` says 1), and
/// `array_dims` is the text `[1:n]` (DataFusion's is the list `{n}`); arrays here have one
/// dimension (Weir refuses others) starting at 1.
#[derive(Debug)]
struct ArrayDimsRule;

impl SqlStatementRewriteRule for ArrayDimsRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        alias_unnamed_items(&mut s, |e| match e {
            Expr::Function(f) => f
                .name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.to_ascii_lowercase())
                .filter(|n| n == "array_ndims" || n == "array_dims"),
            _ => None,
        });
        // Post-order: the calls built here are not visited again.
        let _ = visit_expressions_mut(&mut s, |e| {
            let Expr::Function(f) = e else {
                return ControlFlow::<()>::Continue(());
            };
            let Some(name) = f
                .name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(|i| i.value.to_ascii_lowercase())
            else {
                return ControlFlow::Continue(());
            };
            let FunctionArguments::List(list) = &f.args else {
                return ControlFlow::Continue(());
            };
            let [FunctionArg::Unnamed(FunctionArgExpr::Expr(array))] = list.args.as_slice() else {
                return ControlFlow::Continue(());
            };
            let text = match name.as_str() {
                "array_ndims" => {
                    format!("CASE WHEN cardinality(({array})) > 0 THEN array_ndims(({array})) END")
                }
                "array_dims" => format!(
                    "CASE WHEN cardinality(({array})) > 0 \
                     THEN '[1:' || CAST(cardinality(({array})) AS TEXT) || ']' END"
                ),
                _ => return ControlFlow::Continue(()),
            };
            let parsed = SqlParser::new(&WeirDialect)
                .try_with_sql(&text)
                .and_then(|mut p| p.parse_expr());
            if let Ok(rewritten) = parsed {
                *e = rewritten;
            }
            ControlFlow::Continue(())
        });
        s
    }
}

/// `current_date`, `current_time`, `localtime` and `localtimestamp` are the statement's start
/// (`now()`) on the clock of the session's zone (PostgreSQL docs 9.9.5 "Current Date/Time"):
/// they become casts of `now()` to `date`, `time` and `timestamp`, which Weir's semantics
/// take in the session zone (DataFusion's own `current_date` and `current_time` read UTC,
/// and it has no `localtime` or `localtimestamp`). An unaliased item of a SELECT list keeps
/// the function's name as its column name. `current_time` is a `time` here (PostgreSQL's is
/// a `time with time zone`, which Weir does not have). In a materialized view they are what
/// `now()` cast is: a temporal filter's bound, refused elsewhere (`0A000`).
#[derive(Debug)]
struct SessionClockRule;

impl SessionClockRule {
    /// The cast standing for `e` when it is one of the functions, with its name.
    fn replacement(e: &Expr) -> Option<(Expr, &'static str)> {
        let name = match e {
            Expr::Function(f)
                if f.name.0.len() == 1 && matches!(f.args, FunctionArguments::None) =>
            {
                f.name.0[0].as_ident()?.value.to_ascii_lowercase()
            }
            Expr::Identifier(i) if i.quote_style.is_none() => i.value.to_ascii_lowercase(),
            _ => return None,
        };
        let (name, data_type) = match name.as_str() {
            "current_date" => ("current_date", SqlDataType::Date),
            "current_time" => (
                "current_time",
                SqlDataType::Time(None, datafusion::sql::sqlparser::ast::TimezoneInfo::None),
            ),
            "localtime" => (
                "localtime",
                SqlDataType::Time(None, datafusion::sql::sqlparser::ast::TimezoneInfo::None),
            ),
            "localtimestamp" => (
                "localtimestamp",
                SqlDataType::Timestamp(None, datafusion::sql::sqlparser::ast::TimezoneInfo::None),
            ),
            _ => return None,
        };
        let now = Expr::Function(Function {
            name: ObjectName::from(vec![Ident::new("now")]),
            uses_odbc_syntax: false,
            parameters: FunctionArguments::None,
            args: FunctionArguments::List(FunctionArgumentList {
                duplicate_treatment: None,
                args: vec![],
                clauses: vec![],
            }),
            filter: None,
            null_treatment: None,
            over: None,
            within_group: vec![],
        });
        let cast = Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(now),
            data_type,
            array: false,
            format: None,
        };
        Some((cast, name))
    }
}

impl SqlStatementRewriteRule for SessionClockRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        alias_unnamed_items(&mut s, |e| {
            Self::replacement(e).map(|(_, name)| name.to_string())
        });
        let _ = visit_expressions_mut(&mut s, |e| {
            if let Some((cast, _)) = Self::replacement(e) {
                *e = cast;
            }
            ControlFlow::<()>::Continue(())
        });
        s
    }
}

/// `[OFFSET m {ROW | ROWS}] FETCH {FIRST | NEXT} [n] {ROW | ROWS} ONLY`, the SQL standard's
/// spelling of `LIMIT n` (PostgreSQL's reference page "SELECT", "LIMIT Clause"; `n` omitted is
/// 1), which ORMs write and DataFusion does not plan, becomes `LIMIT n [OFFSET m]`.
///
/// `... WITH TIES` also returns the rows that tie, in the `ORDER BY` keys, with the last of
/// the `n`: the rows after the first `m` whose rank is at most `m + n` (a row tied with the
/// `(m + n)`-th has fewer than `m + n` rows strictly before it, and a row after it that does
/// not tie has at least `m + n`). It becomes a `QUALIFY` on `rank()` and `row_number()` over
/// the query's `ORDER BY` (see [`with_ties`]), which a materialized view maintains as a
/// Top-N. `PERCENT`, a query with both `LIMIT` and `FETCH`, and counts that are not integer
/// constants are left as written (DataFusion refuses them).
#[derive(Debug)]
struct FetchFirstRule;

/// ORDER BY names of output columns as their positions
/// ([`crate::sql::names::order_by_output_names`]).
#[derive(Debug)]
struct OrderByOutputNamesRule;

impl SqlStatementRewriteRule for OrderByOutputNamesRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        crate::sql::names::order_by_output_names(&mut s);
        s
    }
}

impl SqlStatementRewriteRule for FetchFirstRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut FetchFirstVisitor);
        s
    }
}

struct FetchFirstVisitor;

impl VisitorMut for FetchFirstVisitor {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::LimitClause;
        let Some(fetch) = &query.fetch else {
            return ControlFlow::Continue(());
        };
        if fetch.percent {
            return ControlFlow::Continue(());
        }
        if fetch.with_ties {
            with_ties(query);
            return ControlFlow::Continue(());
        }
        let n = fetch
            .quantity
            .clone()
            .unwrap_or_else(|| Expr::value(Value::Number("1".into(), false)));
        match &mut query.limit_clause {
            None => {
                query.limit_clause = Some(LimitClause::LimitOffset {
                    limit: Some(n),
                    offset: None,
                    limit_by: vec![],
                });
            }
            Some(LimitClause::LimitOffset { limit, .. }) if limit.is_none() => *limit = Some(n),
            Some(_) => return ControlFlow::Continue(()),
        }
        query.fetch = None;
        ControlFlow::Continue(())
    }
}

/// A non-negative integer constant of a `FETCH` or `OFFSET` clause.
fn count_constant(e: &Expr) -> Option<u64> {
    match e {
        Expr::Value(ValueWithSpan {
            value: Value::Number(n, _),
            ..
        }) => n.parse().ok(),
        Expr::Nested(e) => count_constant(e),
        _ => None,
    }
}

/// The name a `SELECT` item gives its column when it is an alias or a column reference.
fn item_name(item: &SelectItem) -> Option<Ident> {
    match item {
        SelectItem::ExprWithAlias { alias, .. } => Some(alias.clone()),
        SelectItem::UnnamedExpr(Expr::Identifier(i)) => Some(i.clone()),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(parts)) => parts.last().cloned(),
        _ => None,
    }
}

/// The `SELECT` list a query body's output columns come from (the first of a set operation).
fn output_items(body: &SetExpr) -> Option<&[SelectItem]> {
    match body {
        SetExpr::Select(s) => Some(&s.projection),
        SetExpr::SetOperation { left, .. } => output_items(left),
        SetExpr::Query(q) => output_items(&q.body),
        _ => None,
    }
}

/// Rewrites `ORDER BY keys [OFFSET m] FETCH FIRST n ROWS WITH TIES` (see [`FetchFirstRule`])
/// into `QUALIFY rank() OVER (ORDER BY keys) <= m + n [AND row_number() OVER (ORDER BY
/// keys) > m] ORDER BY keys`. The window's keys name what the query's keys name: an ordinal or an
/// output column's alias becomes that column. A `SELECT` with `DISTINCT`, its own `QUALIFY`,
/// or a set operation is first wrapped as `SELECT * FROM (body)`, so the ranks count its
/// output rows. `n = 0` is no rows (no rank is 0). A query this cannot rewrite (no `ORDER BY`,
/// counts that are not integer constants, an ordinal over `*`) is left for DataFusion to
/// refuse.
fn with_ties(query: &mut Query) {
    use datafusion::sql::sqlparser::ast::{LimitClause, Offset};
    let Some(fetch) = &query.fetch else { return };
    let n = match &fetch.quantity {
        None => Some(1),
        Some(e) => count_constant(e),
    };
    let m = match &query.limit_clause {
        None => Some(0),
        Some(LimitClause::LimitOffset {
            limit: None,
            offset: None,
            limit_by,
        }) if limit_by.is_empty() => Some(0),
        Some(LimitClause::LimitOffset {
            limit: None,
            offset: Some(Offset { value, .. }),
            limit_by,
        }) if limit_by.is_empty() => count_constant(value),
        Some(_) => None,
    };
    let (Some(n), Some(m)) = (n, m) else { return };
    let Some(OrderBy {
        kind: OrderByKind::Expressions(keys),
        ..
    }) = &query.order_by
    else {
        return;
    };
    if keys.is_empty() {
        return;
    }
    let wrap = match query.body.as_ref() {
        SetExpr::Select(s) => s.distinct.is_some() || s.qualify.is_some(),
        _ => true,
    };
    // The window's keys: what each ORDER BY key names.
    let mut window_keys = Vec::with_capacity(keys.len());
    for key in keys {
        let mut key = key.clone();
        let items = output_items(&query.body);
        let ordinal = count_constant(&key.expr).filter(|_| {
            matches!(
                key.expr,
                Expr::Value(ValueWithSpan {
                    value: Value::Number(_, _),
                    ..
                })
            )
        });
        if let Some(k) = ordinal {
            let Some(item) = items.and_then(|items| {
                usize::try_from(k)
                    .ok()
                    .and_then(|k| k.checked_sub(1))
                    .and_then(|k| items.get(k))
            }) else {
                return;
            };
            key.expr = match (wrap, item) {
                (false, SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }) => {
                    e.clone()
                }
                _ => match item_name(item) {
                    Some(name) => Expr::Identifier(name),
                    None => return,
                },
            };
        } else if wrap && let Expr::CompoundIdentifier(parts) = &key.expr {
            // `t.a` of the wrapped body is the output column `a`.
            match parts.last() {
                Some(last) => key.expr = Expr::Identifier(last.clone()),
                None => return,
            }
        } else if !wrap && let Expr::Identifier(id) = &key.expr {
            // An output column's alias (PostgreSQL looks output names up first).
            let aliased = items.into_iter().flatten().find_map(|item| match item {
                SelectItem::ExprWithAlias { expr, alias }
                    if alias.value.eq_ignore_ascii_case(&id.value) =>
                {
                    Some(expr.clone())
                }
                _ => None,
            });
            if let Some(expr) = aliased {
                key.expr = expr;
            }
        }
        window_keys.push(key);
    }
    let over = format!(
        "OVER (ORDER BY {})",
        window_keys
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    let filter = if m == 0 || n == 0 {
        format!("rank() {over} <= {n}")
    } else {
        format!(
            "rank() {over} <= {} AND row_number() {over} > {m}",
            m.saturating_add(n)
        )
    };
    let Ok(filter) = SqlParser::new(&WeirDialect)
        .try_with_sql(&filter)
        .and_then(|mut p| p.parse_expr())
    else {
        return;
    };
    if wrap {
        let Ok(mut outer) = SqlParser::new(&WeirDialect)
            .try_with_sql("SELECT * FROM (SELECT 1) AS weir_ties")
            .and_then(|mut p| p.parse_query())
        else {
            return;
        };
        let SetExpr::Select(select) = outer.body.as_mut() else {
            return;
        };
        let Some(TableFactor::Derived { subquery, .. }) =
            select.from.first_mut().map(|f| &mut f.relation)
        else {
            return;
        };
        std::mem::swap(&mut subquery.body, &mut query.body);
        query.body = outer.body;
        if let Some(OrderBy {
            kind: OrderByKind::Expressions(keys),
            ..
        }) = &mut query.order_by
        {
            *keys = window_keys;
        }
    }
    let SetExpr::Select(select) = query.body.as_mut() else {
        return;
    };
    select.qualify = Some(filter);
    query.fetch = None;
    query.limit_clause = None;
}

/// The column of `generate_series` (and of `unnest` of one array) in `FROM` is named as in
/// PostgreSQL (docs, 7.2.1.4 "Table
/// Functions": a function returning a base type names its one column after the table alias,
/// or after the function without one), where DataFusion names it `value`:
///
/// ```text
///  FROM generate_series(1, 3) g       ─►  FROM generate_series(1, 3) AS g(g)
///  FROM generate_series(1, 3)         ─►  FROM generate_series(1, 3) AS generate_series(generate_series)
///  FROM generate_series(1, 3) AS s(x)     (unchanged)
///  FROM pg_catalog.unnest(a) x         ─►  FROM UNNEST(a) AS x(x)
/// ```
#[derive(Debug)]
struct SeriesColumnName;

impl SqlStatementRewriteRule for SeriesColumnName {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut SeriesColumnVisitor);
        s
    }
}

struct SeriesColumnVisitor;

impl VisitorMut for SeriesColumnVisitor {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        // `pg_catalog.unnest(a)` is `unnest(a)`, which the parser reads as UNNEST only
        // without the qualifier (an earlier rule may have stripped it already).
        if let TableFactor::Table {
            name,
            alias,
            args: Some(args),
            with_ordinality,
            ..
        } = factor
            && (name.0.len() == 1
                || name.0.len() == 2
                    && name.0[0]
                        .as_ident()
                        .is_some_and(|i| i.value.eq_ignore_ascii_case("pg_catalog")))
        {
            let unnest = name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .is_some_and(|i| i.value.eq_ignore_ascii_case("unnest"));
            let exprs: Option<Vec<Expr>> = args
                .args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
                    _ => None,
                })
                .collect();
            if unnest && let Some(array_exprs) = exprs {
                *factor = TableFactor::UNNEST {
                    alias: alias.take(),
                    array_exprs,
                    with_offset: false,
                    with_offset_alias: None,
                    with_ordinality: *with_ordinality,
                };
            }
        }
        if let TableFactor::UNNEST {
            alias,
            array_exprs,
            with_offset: false,
            with_ordinality: false,
            ..
        } = factor
            && array_exprs.len() == 1
        {
            name_single_column(alias, "unnest");
            return ControlFlow::Continue(());
        }
        if let TableFactor::Table {
            name,
            alias,
            args: Some(args),
            with_ordinality: false,
            ..
        } = factor
            && let Some(function) = name.0.last().and_then(|p| p.as_ident())
            && (function.value.eq_ignore_ascii_case("generate_series")
                || (function.value.eq_ignore_ascii_case("unnest") && args.args.len() == 1))
        {
            let function = function.value.to_ascii_lowercase();
            name_single_column(alias, &function);
        }
        ControlFlow::Continue(())
    }
}

/// Names the one column of a function in `FROM` after its table alias, or `function` (and
/// the alias too) without one; a column list in the alias stays.
fn name_single_column(alias: &mut Option<TableAlias>, function: &str) {
    match alias {
        Some(a) if a.columns.is_empty() => {
            a.columns = vec![TableAliasColumnDef::from_name(a.name.value.clone())];
        }
        Some(_) => {}
        None => {
            *alias = Some(TableAlias {
                explicit: true,
                name: Ident::new(function),
                columns: vec![TableAliasColumnDef::from_name(function)],
                at: None,
            });
        }
    }
}

/// `ARRAY(subquery)` (PostgreSQL docs, 4.2.12 "Array Constructors": an array of the
/// subquery's one column, in its row order; `{}` when it returns no rows) as a scalar
/// subquery DataFusion plans and decorrelates:
///
/// ```text
///  ARRAY(SELECT e FROM f WHERE w ORDER BY o)
///    ─► weir_array_or_empty((SELECT array_agg(e ORDER BY o) FROM f WHERE w))
///  ARRAY(q)   (other shapes: DISTINCT, GROUP BY, aggregates, LIMIT, set operations;
///             uncorrelated only, and the order of q's rows is not kept)
///    ─► weir_array_or_empty((SELECT array_agg(s.c) FROM (q) AS s(c)))
/// ```
///
/// `weir_array_or_empty` turns the NULL of no rows into `{}`. It is not `coalesce(..,
/// make_array())`: DataFusion simplifies `coalesce` into a `CASE` that names its first
/// argument twice, so each level of nested subqueries doubled the plan (an `IN` nested ten
/// deep outside a top-level conjunct took seconds to plan, eleven deep half a minute).
///
/// The first form keeps references to the outer query working (psql's `\du` lists each
/// role's memberships that way); DataFusion does not resolve outer references inside a
/// derived table, so a correlated subquery of the second shape still fails to plan.
#[derive(Debug)]
struct ArraySubqueryRule;

impl SqlStatementRewriteRule for ArraySubqueryRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut ArraySubqueryVisitor);
        s
    }
}

struct ArraySubqueryVisitor;

/// PostgreSQL's aggregate functions by name (docs, 9.21), which the first form of
/// [`ArraySubqueryRule`] must not wrap in another aggregate.
pub(crate) const AGGREGATES: [&str; 24] = [
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "array_agg",
    "string_agg",
    "bool_and",
    "bool_or",
    "every",
    "bit_and",
    "bit_or",
    "bit_xor",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "variance",
    "var_pop",
    "var_samp",
    "json_agg",
    "jsonb_agg",
    "percentile_cont",
    "percentile_disc",
    "mode",
];

/// Whether a SELECT item calls an aggregate or a window function.
fn has_aggregate(item: &SelectItem) -> bool {
    struct Finder;
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = e {
                let name = f.name.to_string().to_ascii_lowercase();
                if f.over.is_some() || AGGREGATES.contains(&name.as_str()) {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        }
    }
    Visit::visit(item, &mut Finder).is_break()
}

/// The replacement of `ARRAY(query)` (see [`ArraySubqueryRule`]), built as a tree: printing
/// it and parsing the text again would parse each nested subquery once per level, and
/// sqlparser tries a parenthesized argument more than one way, so that cost grew
/// exponentially with the depth of nested subqueries.
fn array_subquery_expr(query: &Query) -> Expr {
    let mut q = query.clone();
    let simple = q.with.is_none()
        && q.limit_clause.is_none()
        && q.fetch.is_none()
        && match q.body.as_mut() {
            SetExpr::Select(select) => {
                let plain = select.distinct.is_none()
                    && select.having.is_none()
                    && matches!(&select.group_by, GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty())
                    && select.projection.len() == 1
                    && !select.projection.iter().any(has_aggregate);
                let item = match select.projection.first() {
                    Some(SelectItem::UnnamedExpr(e)) => Some(e.clone()),
                    Some(SelectItem::ExprWithAlias { expr, .. }) => Some(expr.clone()),
                    _ => None,
                };
                match (plain, item) {
                    (true, Some(item)) => {
                        let mut agg = function_call("array_agg", vec![item]);
                        if let Some(OrderBy {
                            kind: OrderByKind::Expressions(exprs),
                            ..
                        }) = q.order_by.take()
                            && !exprs.is_empty()
                            && let Expr::Function(Function {
                                args: FunctionArguments::List(list),
                                ..
                            }) = &mut agg
                        {
                            list.clauses.push(FunctionArgumentClause::OrderBy(exprs));
                        }
                        select.projection = vec![SelectItem::UnnamedExpr(agg)];
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        };
    let subquery = if simple {
        q
    } else {
        // SELECT array_agg(s.c) FROM (q) AS s(c): the template parsed, then q put in.
        let mut outer = match SqlParser::new(&WeirDialect)
            .try_with_sql("SELECT array_agg(s.c) FROM (SELECT 1) AS s(c)")
            .and_then(|mut p| p.parse_query())
        {
            Ok(outer) => *outer,
            Err(_) => return Expr::Subquery(Box::new(q)),
        };
        if let SetExpr::Select(select) = outer.body.as_mut()
            && let Some(TableFactor::Derived { subquery, .. }) =
                select.from.first_mut().map(|f| &mut f.relation)
        {
            **subquery = q;
        }
        outer
    };
    function_call(
        ARRAY_OR_EMPTY_FUNCTION,
        vec![Expr::Subquery(Box::new(subquery))],
    )
}

impl VisitorMut for ArraySubqueryVisitor {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Function(Function {
            name,
            args: FunctionArguments::Subquery(query),
            ..
        }) = expr
            && name.to_string().eq_ignore_ascii_case("array")
        {
            *expr = array_subquery_expr(query);
        }
        ControlFlow::Continue(())
    }
}

/// PostgreSQL's ranking window functions return `bigint` (`row_number`, `rank`, `dense_rank`)
/// and `integer` (`ntile`) (docs, 9.22 "Window Functions"); DataFusion's return unsigned
/// 64-bit integers, which clients would see as `numeric`. Each call with `OVER` is cast to
/// PostgreSQL's type; the column keeps the function's name (a cast keeps a strong name, see
/// [`crate::sql::names`]).
#[derive(Debug)]
struct RankingTypeRule;

impl SqlStatementRewriteRule for RankingTypeRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut RankingTypeVisitor);
        s
    }
}

struct RankingTypeVisitor;

impl VisitorMut for RankingTypeVisitor {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(f) = expr else {
            return ControlFlow::Continue(());
        };
        if f.over.is_none() {
            return ControlFlow::Continue(());
        }
        let name = f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(|i| i.value.to_ascii_lowercase());
        let data_type = match name.as_deref() {
            Some("row_number" | "rank" | "dense_rank") => SqlDataType::BigInt(None),
            Some("ntile") => SqlDataType::Integer(None),
            _ => return ControlFlow::Continue(()),
        };
        let call = std::mem::replace(expr, Expr::value(Value::Null));
        *expr = Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(call),
            data_type,
            array: false,
            format: None,
        };
        ControlFlow::Continue(())
    }
}

/// `IS [NOT] DISTINCT FROM` binds tighter than `NOT`, `AND` and `OR` (PostgreSQL docs, 4.1.6
/// "Operator Precedence"), but sqlparser reads the whole rest of the expression as its right
/// operand: `a IS DISTINCT FROM b AND c` came out as `a IS DISTINCT FROM (b AND c)`. A right
/// operand that is an unparenthesized `AND`/`OR` is rotated back:
/// `IS DISTINCT FROM(a, b AND c)` becomes `IS DISTINCT FROM(a, b) AND c` (a parenthesized
/// operand is an `Expr::Nested` and stays).
#[derive(Debug)]
struct DistinctFromPrecedence;

impl SqlStatementRewriteRule for DistinctFromPrecedence {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut DistinctFromVisitor);
        s
    }
}

struct DistinctFromVisitor;

/// `a IS [NOT] DISTINCT FROM rhs` with `rhs`'s leading `AND`/`OR` operands pulled out.
fn rotate_distinct(a: Expr, rhs: Expr, not: bool) -> Expr {
    match rhs {
        Expr::BinaryOp { left, op, right }
            if matches!(op, BinaryOperator::And | BinaryOperator::Or) =>
        {
            Expr::BinaryOp {
                left: Box::new(rotate_distinct(a, *left, not)),
                op,
                right,
            }
        }
        rhs if not => Expr::IsNotDistinctFrom(Box::new(a), Box::new(rhs)),
        rhs => Expr::IsDistinctFrom(Box::new(a), Box::new(rhs)),
    }
}

/// `a IS DISTINCT FROM 'text'` as `(a <> 'text') IS NOT FALSE`, and `a IS NOT DISTINCT FROM
/// 'text'` as `(a = 'text') IS TRUE` (either side the untyped literal), the same values as
/// the literal is never NULL; `None` for other operands. The comparison types the literal as
/// PostgreSQL does beside an `interval` or a date and time type (DataFusion plans `IS
/// DISTINCT FROM` without that hook and finds no common type of `interval` and text).
fn distinct_from_literal(a: &mut Box<Expr>, b: &mut Box<Expr>, not: bool) -> Option<Expr> {
    let untyped = |e: &Expr| {
        matches!(
            e,
            Expr::Value(ValueWithSpan {
                value: Value::SingleQuotedString(_),
                ..
            })
        )
    };
    if !(untyped(a) || untyped(b)) {
        return None;
    }
    let a = std::mem::replace(a.as_mut(), Expr::value(Value::Null));
    let b = std::mem::replace(b.as_mut(), Expr::value(Value::Null));
    let compare = |op| {
        Box::new(Expr::Nested(Box::new(Expr::BinaryOp {
            left: Box::new(a),
            op,
            right: Box::new(b),
        })))
    };
    Some(if not {
        Expr::IsTrue(compare(BinaryOperator::Eq))
    } else {
        Expr::IsNotFalse(compare(BinaryOperator::NotEq))
    })
}

/// `NOT` applied to the leftmost operand of a chain of `AND`/`OR`.
fn rotate_not(e: Expr) -> Expr {
    match e {
        Expr::BinaryOp { left, op, right }
            if matches!(op, BinaryOperator::And | BinaryOperator::Or) =>
        {
            Expr::BinaryOp {
                left: Box::new(rotate_not(*left)),
                op,
                right,
            }
        }
        e => Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr: Box::new(e),
        },
    }
}

impl VisitorMut for DistinctFromVisitor {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        // `NOT a IS DISTINCT FROM b AND c` came out as `NOT (a IS DISTINCT FROM (b AND c))`,
        // rotated above into `NOT ((a IS DISTINCT FROM b) AND c)`; NOT binds tighter than AND
        // and OR, and sqlparser never gives NOT an unparenthesized AND/OR operand otherwise.
        if let Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr: inner,
        } = expr
            && matches!(
                inner.as_ref(),
                Expr::BinaryOp {
                    op: BinaryOperator::And | BinaryOperator::Or,
                    ..
                }
            )
        {
            let inner = std::mem::replace(inner.as_mut(), Expr::value(Value::Null));
            *expr = rotate_not(inner);
            return ControlFlow::Continue(());
        }
        let (a, b, not) = match expr {
            Expr::IsDistinctFrom(a, b) => (a, b, false),
            Expr::IsNotDistinctFrom(a, b) => (a, b, true),
            _ => return ControlFlow::Continue(()),
        };
        if !matches!(
            b.as_ref(),
            Expr::BinaryOp {
                op: BinaryOperator::And | BinaryOperator::Or,
                ..
            }
        ) {
            if let Some(e) = distinct_from_literal(a, b, not) {
                *expr = e;
            }
            return ControlFlow::Continue(());
        }
        let a = std::mem::replace(a.as_mut(), Expr::value(Value::Null));
        let b = std::mem::replace(b.as_mut(), Expr::value(Value::Null));
        *expr = rotate_distinct(a, b, not);
        ControlFlow::Continue(())
    }
}

/// `CAST(x AS varchar(n))` (also `character varying(n)`, `char(n)`, `character(n)`; `char`
/// alone is `char(1)`) as `varchar(CAST(x AS varchar), n)` or `bpchar(...)` (`left` under the
/// names PostgreSQL gives the cast's column, registered by [`crate::sql::semantics::register`]): PostgreSQL's
/// explicit cast to a length-limited string truncates to `n` characters (docs, 8.3
/// "Character Types"), where DataFusion's `varchar` drops the length and keeps the whole
/// text. In `CREATE TABLE`, the long spellings become `varchar(n)` and `char(n)`.
#[derive(Debug)]
struct VarcharLengthRule;

impl SqlStatementRewriteRule for VarcharLengthRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut VarcharLengthVisitor);
        s
    }
}

struct VarcharLengthVisitor;

impl VisitorMut for VarcharLengthVisitor {
    type Break = ();

    fn post_visit_statement(&mut self, stmt: &mut Statement) -> ControlFlow<()> {
        // `character varying(n)` and `character(n)`, as psql's `\d` and pg_dump write them,
        // are `varchar(n)` and `char(n)` (DataFusion plans only the short spellings).
        if let Statement::CreateTable(ct) = stmt {
            for c in &mut ct.columns {
                c.data_type = match std::mem::replace(&mut c.data_type, SqlDataType::Text) {
                    SqlDataType::CharacterVarying(l) | SqlDataType::CharVarying(l) => {
                        SqlDataType::Varchar(l)
                    }
                    SqlDataType::Character(l) => SqlDataType::Char(l),
                    other => other,
                };
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        use datafusion::sql::sqlparser::ast::CharacterLength;
        let Expr::Cast { data_type, .. } = expr else {
            return ControlFlow::Continue(());
        };
        let name = if matches!(data_type, SqlDataType::Char(_) | SqlDataType::Character(_)) {
            "bpchar"
        } else {
            "varchar"
        };
        let length = match data_type {
            SqlDataType::Varchar(l)
            | SqlDataType::CharacterVarying(l)
            | SqlDataType::CharVarying(l) => match l {
                Some(CharacterLength::IntegerLength { length, .. }) => Some(*length),
                _ => None,
            },
            // `char` alone is `char(1)`.
            SqlDataType::Char(l) | SqlDataType::Character(l) => match l {
                Some(CharacterLength::IntegerLength { length, .. }) => Some(*length),
                None => Some(1),
                Some(CharacterLength::Max) => None,
            },
            _ => return ControlFlow::Continue(()),
        };
        *data_type = SqlDataType::Varchar(None);
        let Some(length) = length.filter(|n| *n > 0) else {
            // No length (or PostgreSQL's refused 0): the whole text.
            return ControlFlow::Continue(());
        };
        let cast = std::mem::replace(expr, Expr::value(Value::Null));
        *expr = function_call(
            name,
            vec![cast, Expr::value(Value::Number(length.to_string(), false))],
        );
        ControlFlow::Continue(())
    }
}

/// A call `name(args...)` of a plain function.
pub(crate) fn function_call(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new(name)]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|a| FunctionArg::Unnamed(FunctionArgExpr::Expr(a)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

/// Rewrites the text of `INTERVAL '...'` literals (without a unit qualifier) from
/// PostgreSQL's input forms into ones DataFusion's interval parser takes (see
/// [`crate::sql::functions::datetime_input::interval_text`]).
#[derive(Debug)]
struct IntervalLiteralRule;

impl SqlStatementRewriteRule for IntervalLiteralRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut IntervalLiteralVisitor);
        s
    }
}

struct IntervalLiteralVisitor;

impl VisitorMut for IntervalLiteralVisitor {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        // `-INTERVAL '1 day 1 sec'` negates the whole interval; DataFusion's planner would
        // put the minus in front of the text instead (`'-1 day 1 sec'`: -1 day +1 s).
        if let Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: inner,
        } = expr
            && matches!(inner.as_ref(), Expr::Interval(_))
        {
            let interval = std::mem::replace(inner.as_mut(), Expr::value(Value::Null));
            **inner = Expr::Nested(Box::new(interval));
        }
        if let Expr::Interval(interval) = expr
            && interval.leading_field.is_none()
            && let Expr::Value(ValueWithSpan {
                value: Value::SingleQuotedString(text),
                ..
            }) = interval.value.as_mut()
        {
            let rewritten = crate::sql::functions::datetime_input::interval_text(text);
            if let std::borrow::Cow::Owned(t) = rewritten {
                *text = t;
            }
        }
        ControlFlow::Continue(())
    }
}

/// The most digits a numeric literal may have and stay `numeric` (Arrow's `Decimal128`).
const NUMERIC_LITERAL_MAX_DIGITS: usize = 38;

/// Number literals typed as PostgreSQL types them (`make_const` in parser/parse_node.c): an
/// integer that fits `bigint` is an integer, any other number (a decimal point, an exponent,
/// or an integer beyond `bigint`) is `numeric`, exact. The session plans decimal literals as
/// decimals (DataFusion's `parse_float_as_decimal`); this rule gives each literal a text that
/// DataFusion reads as the same `numeric` value and scale PostgreSQL's `numeric_in` gives:
///
/// ```text
///   1.50              ─► 1.50        numeric(3, 2)
///   1.5e-3            ─► 0.0015      numeric(4, 4)
///   1e3               ─► 1000e0      numeric(4, 0)   (an exponent of 0: no negative scale)
///   99999999999999999999 ─► 99999999999999999999e0   numeric(20, 0)
///   -9223372036854775808 ─► -9223372036854775808     bigint (a minus folded into the literal)
/// ```
///
/// A literal of more than 38 digits (precision or scale) has no `Decimal128`; it is read as
/// `double precision` (`CAST('1e100' AS DOUBLE PRECISION)`), an approximation PostgreSQL
/// does not make.
#[derive(Debug)]
struct NumericLiteralRule;

impl SqlStatementRewriteRule for NumericLiteralRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut NumericLiteralVisitor);
        s
    }
}

struct NumericLiteralVisitor;

impl VisitorMut for NumericLiteralVisitor {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        // `-9223372036854775808` is one `bigint` literal (PostgreSQL's grammar negates a
        // constant in place, `doNegate`), as DataFusion plans a minus over a number.
        if let Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr: inner,
        } = expr
            && let Expr::Value(ValueWithSpan {
                value: Value::Number(n, long),
                ..
            }) = inner.as_ref()
            && !n.starts_with('-')
        {
            *expr = Expr::value(Value::Number(format!("-{n}"), *long));
        }
        if let Expr::Value(ValueWithSpan {
            value: Value::Number(n, _),
            ..
        }) = expr
        {
            match numeric_literal(n) {
                NumericLiteral::AsWritten => {}
                NumericLiteral::Numeric(text) => *n = text,
                NumericLiteral::Double => {
                    *expr = Expr::Cast {
                        kind: CastKind::Cast,
                        expr: Box::new(Expr::value(Value::SingleQuotedString(n.clone()))),
                        data_type: SqlDataType::DoublePrecision,
                        array: false,
                        format: None,
                    };
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// How a number literal's text is planned (see [`NumericLiteralRule`]).
#[derive(Debug, PartialEq)]
enum NumericLiteral {
    /// DataFusion reads the text as PostgreSQL does (a `bigint`, or a plain decimal).
    AsWritten,
    /// This text, which DataFusion reads as the literal's `numeric` value and scale.
    Numeric(String),
    /// Beyond 38 digits: read as `double precision`.
    Double,
}

/// The plan of one number literal's text (an optional `-`, digits, an optional `.` and
/// digits, an optional exponent). Text with `_` separators is left to DataFusion.
fn numeric_literal(text: &str) -> NumericLiteral {
    if text.contains('_') || text.parse::<i64>().is_ok() {
        return NumericLiteral::AsWritten;
    }
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => {
            let exponent = &unsigned[at + 1..];
            match exponent.parse::<i64>() {
                Ok(e) => (&unsigned[..at], e),
                // An exponent past 64 bits: far beyond 38 digits either way.
                Err(_)
                    if exponent
                        .trim_start_matches(['+', '-'])
                        .bytes()
                        .all(|b| b.is_ascii_digit()) =>
                {
                    return NumericLiteral::Double;
                }
                Err(_) => return NumericLiteral::AsWritten,
            }
        }
        None => (unsigned, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if !(whole.bytes().chain(fraction.bytes())).all(|b| b.is_ascii_digit()) {
        return NumericLiteral::AsWritten;
    }
    // value = digits * 10^-scale
    let mut digits: String = whole.chars().chain(fraction.chars()).collect();
    let mut scale = (fraction.len() as i64).saturating_sub(exponent);
    if scale < 0 {
        if scale < -(NUMERIC_LITERAL_MAX_DIGITS as i64) {
            return NumericLiteral::Double;
        }
        digits.extend(std::iter::repeat_n('0', scale.unsigned_abs() as usize));
        scale = 0;
    }
    let significant = digits.trim_start_matches('0');
    let scale = scale as usize;
    if significant.len().max(scale) > NUMERIC_LITERAL_MAX_DIGITS {
        return NumericLiteral::Double;
    }
    let sign = if negative { "-" } else { "" };
    let normal = if scale == 0 {
        // An exponent of 0 makes DataFusion read a decimal of scale 0, not an integer.
        format!(
            "{sign}{}e0",
            if significant.is_empty() {
                "0"
            } else {
                significant
            }
        )
    } else {
        let padded = format!("{significant:0>width$}", width = scale + 1);
        let (int_part, frac_part) = padded.split_at(padded.len() - scale);
        format!("{sign}{int_part}.{frac_part}")
    };
    if normal == text {
        NumericLiteral::AsWritten
    } else {
        NumericLiteral::Numeric(normal)
    }
}

/// `ts AT TIME ZONE zone` as `timezone(zone, ts)`
/// ([`crate::sql::functions::at_time_zone::AtTimeZone`]): DataFusion plans it as a cast that
/// keeps a `timestamptz` the same instant, where PostgreSQL gives the wall-clock time in
/// `zone` as a `timestamp` (and a `timestamp` read in `zone` as a `timestamptz`).
#[derive(Debug)]
struct AtTimeZoneRule;

impl SqlStatementRewriteRule for AtTimeZoneRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut AtTimeZoneVisitor);
        s
    }
}

struct AtTimeZoneVisitor;

impl VisitorMut for AtTimeZoneVisitor {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::AtTimeZone {
            timestamp,
            time_zone,
        } = expr
        {
            let ts = std::mem::replace(timestamp.as_mut(), Expr::value(Value::Null));
            let zone = std::mem::replace(time_zone.as_mut(), Expr::value(Value::Null));
            *expr = function_call("timezone", vec![zone, ts]);
        }
        ControlFlow::Continue(())
    }
}

/// PostgreSQL call forms DataFusion has no form for, as calls it plans:
///
/// ```text
///  @ x                              abs(x)
///  json_agg(args), jsonb_agg(args)  json_agg(array_agg(args)): the aggregate gathers, the
///                                   scalar json_agg formats ([`crate::sql::functions::json`]);
///                                   ORDER BY, DISTINCT, FILTER and OVER go with array_agg
///  make_interval(days => 3)         make_interval(0, 0, 0, 3, 0, 0, 0.0): every argument
///                                   (years, months, weeks, days, hours, mins, secs) in
///                                   place, PostgreSQL's defaults for the missing ones
/// ```
#[derive(Debug)]
struct PgCallFormsRule;

impl SqlStatementRewriteRule for PgCallFormsRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        // `SELECT @ -5` is column `?column?` (an operator), not `abs`.
        alias_unnamed_items(&mut s, |e| {
            matches!(
                e,
                Expr::UnaryOp {
                    op: UnaryOperator::PGAbs
                        | UnaryOperator::PGSquareRoot
                        | UnaryOperator::PGCubeRoot,
                    ..
                }
            )
            .then(|| "?column?".to_string())
        });
        let _ = VisitMut::visit(&mut s, &mut PgCallFormsVisitor);
        s
    }
}

struct PgCallFormsVisitor;

/// `make_interval`'s parameters, in order (PostgreSQL docs, 9.9 "Date/Time Functions").
const MAKE_INTERVAL_PARAMETERS: [&str; 7] =
    ["years", "months", "weeks", "days", "hours", "mins", "secs"];

/// The single unqualified name of `f`, lowercased.
fn plain_function_name(f: &Function) -> Option<String> {
    match f.name.0.as_slice() {
        [part] => part.as_ident().map(|i| i.value.to_ascii_lowercase()),
        _ => None,
    }
}

/// `make_interval`'s arguments with names or fewer than seven, all seven in place (missing
/// ones PostgreSQL's default 0); `None` when an argument is not one of its parameters (the
/// call is left to fail as written) or the call already has seven positional arguments.
fn make_interval_args(list: &FunctionArgumentList) -> Option<Vec<Expr>> {
    let mut slots: [Option<Expr>; 7] = Default::default();
    let mut named = false;
    for (i, arg) in list.args.iter().enumerate() {
        // PostgreSQL's dialect reads `days => 3` as a named argument whose name is an
        // expression (an identifier).
        let (name, e) = match arg {
            // A positional argument after a named one is PostgreSQL's 42601: left as written.
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) if i < 7 && !named => {
                slots[i] = Some(e.clone());
                continue;
            }
            FunctionArg::Named {
                name,
                arg: FunctionArgExpr::Expr(e),
                ..
            } => (name, e),
            FunctionArg::ExprNamed {
                name: Expr::Identifier(name),
                arg: FunctionArgExpr::Expr(e),
                ..
            } => (name, e),
            _ => return None,
        };
        let at = MAKE_INTERVAL_PARAMETERS
            .iter()
            .position(|p| p.eq_ignore_ascii_case(&name.value))?;
        if slots[at].is_some() {
            return None;
        }
        slots[at] = Some(e.clone());
        named = true;
    }
    if !named && list.args.len() == 7 {
        return None;
    }
    Some(
        slots
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                e.unwrap_or_else(|| {
                    Expr::value(Value::Number(
                        if i == 6 { "0.0" } else { "0" }.into(),
                        false,
                    ))
                })
            })
            .collect(),
    )
}

impl VisitorMut for PgCallFormsVisitor {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(rows) = row_forms(expr) {
            *expr = rows;
            return ControlFlow::Continue(());
        }
        match expr {
            // `@ x`, `|/ x`, `||/ x`: abs, square root, cube root (PostgreSQL docs, 9.3).
            Expr::UnaryOp {
                op:
                    op
                    @ (UnaryOperator::PGAbs | UnaryOperator::PGSquareRoot | UnaryOperator::PGCubeRoot),
                expr: operand,
            } => {
                let name = match op {
                    UnaryOperator::PGAbs => "abs",
                    UnaryOperator::PGSquareRoot => "sqrt",
                    _ => "cbrt",
                };
                let operand = std::mem::replace(operand.as_mut(), Expr::value(Value::Null));
                *expr = Expr::Nested(Box::new(function_call(name, vec![operand])));
            }
            // `EXTRACT(f FROM x)` is `numeric`, unlike `date_part` (see
            // `functions::extract`).
            Expr::Extract {
                field,
                expr: source,
                ..
            } => {
                let field = Expr::value(Value::SingleQuotedString(field.to_string()));
                let source = std::mem::replace(source.as_mut(), Expr::value(Value::Null));
                *expr = function_call(
                    crate::sql::functions::extract::DatePart::EXTRACT,
                    vec![field, source],
                );
            }
            Expr::Function(f) => {
                let Some(name) = plain_function_name(f) else {
                    return ControlFlow::Continue(());
                };
                match name.as_str() {
                    "json_agg" | "jsonb_agg" => {
                        // Already gathered (a statement planned again from its text).
                        let gathered = matches!(&f.args, FunctionArguments::List(l)
                            if matches!(l.args.as_slice(), [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Function(g)))]
                                if plain_function_name(g).as_deref() == Some("array_agg")));
                        if !gathered {
                            let mut inner = f.clone();
                            inner.name = ObjectName::from(vec![Ident::new("array_agg")]);
                            *expr = function_call(&name, vec![Expr::Function(inner)]);
                        }
                    }
                    "make_interval" => {
                        if let FunctionArguments::List(list) = &f.args
                            && let Some(args) = make_interval_args(list)
                        {
                            *expr = function_call("make_interval", args);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// A row comparison or NULL test field by field (see [`row_comparison`]); `None` for
/// other expressions.
fn row_forms(expr: &Expr) -> Option<Expr> {
    match expr {
        Expr::BinaryOp { left, op, right } => row_comparison(left, op, right),
        Expr::IsDistinctFrom(left, right) | Expr::IsNotDistinctFrom(left, right) => {
            let (Expr::Tuple(l), Expr::Tuple(r)) = (left.as_ref(), right.as_ref()) else {
                return None;
            };
            if l.len() != r.len() || l.is_empty() {
                return None;
            }
            let distinct = matches!(expr, Expr::IsDistinctFrom(..));
            let pairs = l.iter().zip(r).map(|(a, b)| {
                let (a, b) = (Box::new(a.clone()), Box::new(b.clone()));
                if distinct {
                    Expr::IsDistinctFrom(a, b)
                } else {
                    Expr::IsNotDistinctFrom(a, b)
                }
            });
            let joiner = if distinct {
                BinaryOperator::Or
            } else {
                BinaryOperator::And
            };
            Some(join_nested(pairs, joiner))
        }
        // `(a, b) [NOT] IN ((1, 'x'), (2, 'y'))`: `[NOT] ((a, b) = (1, 'x') OR ...)`, each
        // a row comparison (PostgreSQL docs, 9.24.1: a NULL field makes an item's comparison
        // NULL, not equal; DataFusion compared the rows as structs, NULL equal to NULL).
        Expr::InList {
            expr: row,
            list,
            negated,
        } => {
            let Expr::Tuple(fields) = row.as_ref() else {
                return None;
            };
            let items = list
                .iter()
                .map(|item| match item {
                    Expr::Tuple(values) if values.len() == fields.len() => {
                        row_comparison(row, &BinaryOperator::Eq, item)
                    }
                    _ => None,
                })
                .collect::<Option<Vec<Expr>>>()?;
            if items.is_empty() {
                return None;
            }
            let any = Expr::Nested(Box::new(join_nested(items.into_iter(), BinaryOperator::Or)));
            Some(if *negated {
                Expr::UnaryOp {
                    op: UnaryOperator::Not,
                    expr: Box::new(any),
                }
            } else {
                any
            })
        }
        // `(a, b) IS NULL`: every field is NULL; `IS NOT NULL`: none is.
        Expr::IsNull(row) | Expr::IsNotNull(row) => {
            let Expr::Tuple(fields) = row.as_ref() else {
                return None;
            };
            if fields.is_empty() {
                return None;
            }
            let null = matches!(expr, Expr::IsNull(_));
            let tests = fields.iter().map(|f| {
                let f = Box::new(f.clone());
                if null {
                    Expr::IsNull(f)
                } else {
                    Expr::IsNotNull(f)
                }
            });
            Some(join_nested(tests, BinaryOperator::And))
        }
        _ => None,
    }
}

/// `parts` joined by `joiner` (`AND`, `OR`), in parentheses.
fn join_nested(parts: impl Iterator<Item = Expr>, joiner: BinaryOperator) -> Expr {
    let joined = parts
        .reduce(|acc, p| Expr::BinaryOp {
            left: Box::new(acc),
            op: joiner.clone(),
            right: Box::new(p),
        })
        .unwrap_or_else(|| Expr::value(Value::Boolean(true)));
    Expr::Nested(Box::new(joined))
}

/// A comparison of two rows of one length, pair by pair (PostgreSQL docs, 9.24.5 "Row
/// Constructor Comparison"): `=` when every pair is equal, `<>` when one is not, `<`, `<=`,
/// `>`, `>=` decided by the first unequal pair. A NULL in a pair that decides makes the
/// result NULL, as SQL's three-valued `AND` and `OR` of the pairs give. `None` when `left`
/// and `right` are not such rows or `op` is another operator. DataFusion compared the rows
/// as structs, where NULL is a value (`(1, NULL) = (1, 2)` was false, not NULL).
fn row_comparison(left: &Expr, op: &BinaryOperator, right: &Expr) -> Option<Expr> {
    let (Expr::Tuple(l), Expr::Tuple(r)) = (left, right) else {
        return None;
    };
    if l.len() != r.len() || l.is_empty() {
        return None;
    }
    let pair = |a: &Expr, op: BinaryOperator, b: &Expr| Expr::BinaryOp {
        left: Box::new(a.clone()),
        op,
        right: Box::new(b.clone()),
    };
    let pairs = || l.iter().zip(r.iter());
    Some(match op {
        BinaryOperator::Eq => join_nested(
            pairs().map(|(a, b)| pair(a, BinaryOperator::Eq, b)),
            BinaryOperator::And,
        ),
        BinaryOperator::NotEq => join_nested(
            pairs().map(|(a, b)| pair(a, BinaryOperator::NotEq, b)),
            BinaryOperator::Or,
        ),
        BinaryOperator::Lt | BinaryOperator::LtEq | BinaryOperator::Gt | BinaryOperator::GtEq => {
            let strict = match op {
                BinaryOperator::Lt | BinaryOperator::LtEq => BinaryOperator::Lt,
                _ => BinaryOperator::Gt,
            };
            // From the last pair outwards: a_i strict b_i OR (a_i = b_i AND rest).
            let n = l.len();
            let mut acc = pair(&l[n - 1], op.clone(), &r[n - 1]);
            for i in (0..n - 1).rev() {
                let equal_then = Expr::BinaryOp {
                    left: Box::new(pair(&l[i], BinaryOperator::Eq, &r[i])),
                    op: BinaryOperator::And,
                    right: Box::new(Expr::Nested(Box::new(acc))),
                };
                acc = Expr::BinaryOp {
                    left: Box::new(pair(&l[i], strict.clone(), &r[i])),
                    op: BinaryOperator::Or,
                    right: Box::new(Expr::Nested(Box::new(equal_then))),
                };
            }
            Expr::Nested(Box::new(acc))
        }
        _ => return None,
    })
}

/// The OID alias types whose values print as a name (PostgreSQL docs, 8.19 "Object Identifier
/// Types"): the lookup of the name, a query whose `WHERE` ends in `= weir_reg_value` (its
/// aliases are Weir's, so that the value may read the outer query's `c` or `n`).
fn reg_name_lookup(cast_type: &SqlDataType) -> Option<&'static str> {
    let name = match cast_type {
        SqlDataType::Regclass => "regclass".to_string(),
        SqlDataType::Custom(name, args) if args.is_empty() => name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map(|i| i.value.to_ascii_lowercase())?,
        _ => return None,
    };
    Some(match name.as_str() {
        // A relation outside the search path (`public`, and `pg_catalog` always) is
        // schema-qualified, as PostgreSQL's regclassout prints it.
        "regclass" => {
            "SELECT CASE WHEN weir_reg_n.nspname IN ('public', 'pg_catalog') \
             THEN quote_ident(weir_reg_c.relname) \
             ELSE quote_ident(weir_reg_n.nspname) || '.' || quote_ident(weir_reg_c.relname) END \
             FROM pg_catalog.pg_class weir_reg_c \
             JOIN pg_catalog.pg_namespace weir_reg_n ON weir_reg_n.oid = weir_reg_c.relnamespace \
             WHERE weir_reg_c.oid = weir_reg_value"
        }
        "regtype" => {
            "SELECT format_type(weir_reg_t.oid, NULL) FROM pg_catalog.pg_type weir_reg_t \
             WHERE weir_reg_t.oid = weir_reg_value"
        }
        "regnamespace" => {
            "SELECT quote_ident(weir_reg_n.nspname) FROM pg_catalog.pg_namespace weir_reg_n \
             WHERE weir_reg_n.oid = weir_reg_value"
        }
        "regrole" => {
            "SELECT quote_ident(weir_reg_r.rolname) FROM pg_catalog.pg_roles weir_reg_r \
             WHERE weir_reg_r.oid = weir_reg_value"
        }
        _ => return None,
    })
}

/// `value` (an `x::regclass`-like cast) as its name: `COALESCE((lookup), value::text)`, the
/// OID's digits when no object has it, as PostgreSQL prints an unknown OID.
fn reg_name_expr(value: Expr, lookup: &str) -> Expr {
    let Ok(mut query) = SqlParser::new(&WeirDialect)
        .try_with_sql(lookup)
        .and_then(|mut p| p.parse_query())
    else {
        return value;
    };
    if let SetExpr::Select(select) = query.body.as_mut()
        && let Some(Expr::BinaryOp { right, .. }) = &mut select.selection
    {
        **right = value.clone();
    }
    let digits = Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(value),
        data_type: SqlDataType::Text,
        array: false,
        format: None,
    };
    function_call("coalesce", vec![Expr::Subquery(query), digits])
}

/// PostgreSQL prints a value of an OID alias type (`regclass`, `regtype`, `regnamespace`,
/// `regrole`) as the object's name, and casts it to text as that name (docs, 8.19): psql's
/// `\d+` shows `reloftype::regtype::text`, asyncpg reads `elemtype::regtype::text`, and users
/// write `SELECT 't'::regclass` or `attrelid::regclass`. Weir's values of these types are
/// OIDs (integers), so a query's
/// - output column that is such a cast, and
/// - cast of such a cast to `text`, `varchar` or `name`, anywhere in it,
///
/// become a lookup of the name in `pg_catalog` ([`reg_name_expr`]). Elsewhere (`WHERE
/// c.oid = 't'::regclass`) the value stays the OID it compares as. The output column is
/// `text` where PostgreSQL's is the alias type, and it sorts by name where PostgreSQL's
/// sorts by OID. Statements other than queries (a view's definition) are left alone.
#[derive(Debug)]
struct RegNameOutputRule;

impl SqlStatementRewriteRule for RegNameOutputRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        if let Statement::Query(query) = &mut s {
            name_reg_columns(&mut query.body);
            let _ = VisitMut::visit(query.as_mut(), &mut RegTextVisitor);
            reg_output_columns(&mut query.body);
        }
        s
    }
}

/// Aliases the unaliased output columns that hold an OID alias cast to the name PostgreSQL
/// gives them, before the casts are rewritten (`1043::regtype::text` is `text`).
fn name_reg_columns(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            for item in &mut select.projection {
                let SelectItem::UnnamedExpr(e) = item else {
                    continue;
                };
                let mut found = false;
                let _ = Visit::visit(e, &mut RegCastFinder(&mut found));
                if found {
                    let alias = Ident::with_quote('"', crate::sql::names::figure_name(e));
                    let expr = std::mem::replace(e, Expr::value(Value::Null));
                    *item = SelectItem::ExprWithAlias { expr, alias };
                }
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            name_reg_columns(left);
            name_reg_columns(right);
        }
        SetExpr::Query(q) => name_reg_columns(&mut q.body),
        _ => {}
    }
}

/// Sets its flag on a cast to an OID alias type that prints as a name.
struct RegCastFinder<'a>(&'a mut bool);

impl Visitor for RegCastFinder<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
        if let Expr::Cast { data_type, .. } = e
            && reg_name_lookup(data_type).is_some()
        {
            *self.0 = true;
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

/// The output columns of a query body (each branch of a set operation) that are an OID alias
/// cast, as names ([`RegNameOutputRule`]), keeping the column's name.
fn reg_output_columns(body: &mut SetExpr) {
    match body {
        SetExpr::Select(select) => {
            for item in &mut select.projection {
                let (expr, alias) = match item {
                    SelectItem::UnnamedExpr(e) => (e, None),
                    SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.clone())),
                    _ => continue,
                };
                let Expr::Cast { data_type, .. } = &*expr else {
                    continue;
                };
                let Some(lookup) = reg_name_lookup(data_type) else {
                    continue;
                };
                let alias = alias.unwrap_or_else(|| {
                    Ident::with_quote('"', crate::sql::names::figure_name(expr))
                });
                let value = std::mem::replace(expr, Expr::value(Value::Null));
                *item = SelectItem::ExprWithAlias {
                    expr: reg_name_expr(value, lookup),
                    alias,
                };
            }
        }
        SetExpr::SetOperation { left, right, .. } => {
            reg_output_columns(left);
            reg_output_columns(right);
        }
        SetExpr::Query(q) => reg_output_columns(&mut q.body),
        _ => {}
    }
}

/// `x::regclass::text` (and `::varchar`, `::name`) as the name (see [`RegNameOutputRule`]).
struct RegTextVisitor;

impl VisitorMut for RegTextVisitor {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Cast {
            expr: inner,
            data_type,
            ..
        } = expr
        else {
            return ControlFlow::Continue(());
        };
        let textual = match data_type {
            SqlDataType::Text | SqlDataType::Varchar(_) | SqlDataType::CharacterVarying(_) => true,
            SqlDataType::Custom(name, args) if args.is_empty() => {
                name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| {
                    ["text", "name", "varchar"].contains(&i.value.to_ascii_lowercase().as_str())
                })
            }
            _ => false,
        };
        if !textual {
            return ControlFlow::Continue(());
        }
        let Expr::Cast {
            data_type: inner_type,
            ..
        } = inner.as_ref()
        else {
            return ControlFlow::Continue(());
        };
        if let Some(lookup) = reg_name_lookup(inner_type) {
            let value = std::mem::replace(inner.as_mut(), Expr::value(Value::Null));
            **inner = reg_name_expr(value, lookup);
        }
        ControlFlow::Continue(())
    }
}

/// `ORDER BY k` of a grouped SELECT as `ORDER BY <its k-th item>` (the item's expression, or
/// its alias): DataFusion refuses an ordinal that names an expression over the group key
/// (`SELECT x + 1 FROM t GROUP BY x ORDER BY 1`: "column ... must appear in the GROUP BY
/// clause"), which PostgreSQL sorts by (docs, 7.5 "Sorting Rows": an output column's number).
/// A SELECT list with a wildcard is left alone (its positions are not known here).
#[derive(Debug)]
struct GroupedOrdinalRule;

impl SqlStatementRewriteRule for GroupedOrdinalRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut GroupedOrdinalVisitor);
        s
    }
}

struct GroupedOrdinalVisitor;

impl VisitorMut for GroupedOrdinalVisitor {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let SetExpr::Select(select) = query.body.as_ref() else {
            return ControlFlow::Continue(());
        };
        let grouped = matches!(&select.group_by, GroupByExpr::Expressions(e, _) if !e.is_empty());
        let wildcard = select.projection.iter().any(|i| {
            matches!(
                i,
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
            )
        });
        let Some(OrderBy {
            kind: OrderByKind::Expressions(exprs),
            ..
        }) = &mut query.order_by
        else {
            return ControlFlow::Continue(());
        };
        if !grouped || wildcard {
            return ControlFlow::Continue(());
        }
        for o in exprs {
            let Expr::Value(ValueWithSpan {
                value: Value::Number(n, _),
                ..
            }) = &o.expr
            else {
                continue;
            };
            let item = n
                .parse::<usize>()
                .ok()
                .and_then(|k| k.checked_sub(1))
                .and_then(|k| select.projection.get(k));
            o.expr = match item {
                Some(SelectItem::UnnamedExpr(e)) => e.clone(),
                Some(SelectItem::ExprWithAlias { alias, .. }) => Expr::Identifier(alias.clone()),
                // Out of range: DataFusion's error says so.
                _ => continue,
            };
        }
        ControlFlow::Continue(())
    }
}

/// The unaliased items of a subquery in `FROM` or a `WITH` query, aliased to the names
/// PostgreSQL gives them ([`crate::sql::names::figure_name`]), so that the outer query sees
/// (and may name) `count`, `?column?`, `x` where DataFusion would name the columns by their
/// text (`count(*)`, `weir_any_op(...)`). An item keeps DataFusion's name when its name
/// would repeat another item's (PostgreSQL allows that; a DataFusion plan does not), when
/// the SELECT list has a wildcard (whose names are not known here), and when the subquery's
/// alias lists the column names.
#[derive(Debug)]
struct DerivedColumnNamesRule;

impl SqlStatementRewriteRule for DerivedColumnNamesRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut DerivedColumnNamesVisitor);
        s
    }
}

struct DerivedColumnNamesVisitor;

/// The names (lower-cased, the last part of a qualified name) of the columns `e` reads.
fn read_names(e: &impl Visit, out: &mut Vec<String>) {
    struct Names<'a>(&'a mut Vec<String>);
    impl Visitor for Names<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            let ident = match e {
                Expr::Identifier(i) => Some(i),
                Expr::CompoundIdentifier(parts) => parts.last(),
                _ => None,
            };
            if let Some(i) = ident {
                self.0.push(match i.quote_style {
                    Some(_) => i.value.clone(),
                    None => i.value.to_lowercase(),
                });
            }
            ControlFlow::Continue(())
        }
    }
    let _ = e.visit(&mut Names(out));
}

/// Aliases the unaliased items of every SELECT of `query` (see [`DerivedColumnNamesRule`]).
/// A name that its query's `ORDER BY`, `GROUP BY`, `HAVING` or `QUALIFY` reads is not given:
/// there DataFusion would take it for the output column, where PostgreSQL reads an input
/// column of that name (`SELECT x::text FROM t ORDER BY -x`).
fn name_derived_columns(query: &mut Query) {
    let mut read = Vec::new();
    if let Some(order) = &query.order_by {
        read_names(order, &mut read);
    }
    name_select_columns(&mut query.body, &read);
}

fn name_select_columns(body: &mut SetExpr, read: &[String]) {
    match body {
        SetExpr::Select(select) => {
            let mut read = read.to_vec();
            read_names(&select.group_by, &mut read);
            if let Some(h) = &select.having {
                read_names(h, &mut read);
            }
            if let Some(q) = &select.qualify {
                read_names(q, &mut read);
            }
            let items = &mut select.projection;
            if items.iter().any(|i| {
                matches!(
                    i,
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
                )
            }) {
                return;
            }
            let names: Vec<String> = items
                .iter()
                .map(|i| match i {
                    SelectItem::UnnamedExpr(e) => crate::sql::names::figure_name(e),
                    SelectItem::ExprWithAlias { alias, .. } => match alias.quote_style {
                        Some(_) => alias.value.clone(),
                        None => alias.value.to_lowercase(),
                    },
                    _ => String::new(),
                })
                .collect();
            for (i, item) in items.iter_mut().enumerate() {
                let SelectItem::UnnamedExpr(e) = item else {
                    continue;
                };
                // A column keeps its own name; so does a repeated name or one read above.
                if matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
                    || names.iter().filter(|n| **n == names[i]).count() > 1
                    || read.contains(&names[i])
                {
                    continue;
                }
                let expr = std::mem::replace(e, Expr::value(Value::Null));
                *item = SelectItem::ExprWithAlias {
                    expr,
                    alias: Ident::with_quote('"', names[i].clone()),
                };
            }
        }
        SetExpr::Query(q) => name_derived_columns(q),
        SetExpr::SetOperation { left, right, .. } => {
            name_select_columns(left, read);
            name_select_columns(right, read);
        }
        _ => {}
    }
}

impl VisitorMut for DerivedColumnNamesVisitor {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &mut TableFactor) -> ControlFlow<()> {
        if let TableFactor::Derived {
            subquery, alias, ..
        } = factor
            && alias.as_ref().is_none_or(|a| a.columns.is_empty())
        {
            name_derived_columns(subquery);
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Some(with) = &mut query.with {
            for cte in &mut with.cte_tables {
                if cte.alias.columns.is_empty() {
                    name_derived_columns(&mut cte.query);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// Whether `s` is a query, or the `EXPLAIN` of one (which must show the plan the query runs
/// with), rather than a materialized view's definition or another statement.
fn is_query(s: &Statement) -> bool {
    match s {
        Statement::Query(_) => true,
        Statement::Explain { statement, .. } => matches!(statement.as_ref(), Statement::Query(_)),
        _ => false,
    }
}

impl SqlStatementRewriteRule for AnyOpRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let query = is_query(&s);
        let _ = VisitMut::visit(
            &mut s,
            &mut AnyOpVisitor {
                query,
                conjuncts: Vec::new(),
            },
        );
        s
    }
}

struct AnyOpVisitor {
    /// Whether the statement is a query (not a materialized view's definition).
    query: bool,
    /// The top-level conjuncts of the WHERE and HAVING clauses seen so far (by address; the
    /// tree does not move while it is visited): where a NULL comparison counts as false.
    conjuncts: Vec<*const Expr>,
}

/// The top-level conjuncts of a WHERE or HAVING clause: `e` itself, or the operands of its
/// `AND`s, through parentheses.
fn top_conjuncts(e: &Expr, out: &mut Vec<*const Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            top_conjuncts(left, out);
            top_conjuncts(right, out);
        }
        Expr::Nested(inner) => top_conjuncts(inner, out),
        other => out.push(other as *const Expr),
    }
}

/// In a materialized view's query, `x [NOT] IN (subquery)` under `OR`, `NOT` or as a
/// value, and `x op ALL (subquery)` / `x op ANY (subquery)` anywhere (except the forms that
/// are semi and anti joins: a top-level conjunct `IN`, `= ANY`, `NOT IN`, `<> ALL`), become
/// shapes a view maintains incrementally: a correlated `EXISTS` (a join on the value) and
/// uncorrelated single-row aggregates of the subquery (joined with every row, refreshed only
/// when their value moves). PostgreSQL's NULL rules (docs, 9.23 "Subquery Expressions") are
/// kept, with `S` the subquery's rows and `v` its one column:
///
/// ```text
///  x IN (S)      ─► CASE WHEN EXISTS (SELECT 1 FROM S WHERE v = x) THEN true
///                        ELSE CASE (SELECT 0 if S is empty, 2 if a v is NULL, else 1)
///                             WHEN 0 THEN false WHEN 2 THEN NULL
///                             ELSE CASE WHEN x IS NULL THEN NULL ELSE false END END END
///  x > ALL (S)   ─► CASE WHEN (SELECT count(*) FROM S) = 0 THEN true
///                        WHEN NOT (x > (SELECT max(v) FROM S)) THEN false
///                        WHEN x IS NULL OR (SELECT count(*) - count(v) FROM S) > 0 THEN NULL
///                        ELSE true END            (>= with max; < and <= with min)
///  x = ALL (S)   ─► the same, false when x differs from min(v) or from max(v)
///  x <> ALL (S)  ─► NOT (x IN (S));   x op ANY (S) ─► NOT (x op' ALL (S)), op' the negation
/// ```
///
/// Queries keep their own forms (an array of the subquery's rows, which a single run reads
/// once). A subquery of more than one column is left as written.
fn view_subquery_values(s: &mut Statement) {
    let _ = VisitMut::visit(s, &mut ViewSubqueryValueVisitor);
}

struct ViewSubqueryValueVisitor;

impl VisitorMut for ViewSubqueryValueVisitor {
    type Break = ();

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        let mut conjuncts = Vec::new();
        if let Some(w) = &select.selection {
            top_conjuncts(w, &mut conjuncts);
        }
        let mut values = SubqueryValues {
            depth: 0,
            conjuncts,
        };
        if let Some(w) = &mut select.selection {
            let _ = VisitMut::visit(w, &mut values);
        }
        values.conjuncts.clear();
        for item in &mut select.projection {
            // A comparison's column is `?column?` (PostgreSQL's FigureColname), which the
            // CASE it becomes would not be.
            if let SelectItem::UnnamedExpr(e) = item
                && matches!(
                    e,
                    Expr::InSubquery { .. } | Expr::AnyOp { .. } | Expr::AllOp { .. }
                )
            {
                let expr = std::mem::replace(e, Expr::value(Value::Null));
                *item = SelectItem::ExprWithAlias {
                    expr,
                    alias: Ident::with_quote('"', "?column?"),
                };
            }
            if let SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } = item {
                let _ = VisitMut::visit(e, &mut values);
            }
        }
        ControlFlow::Continue(())
    }
}

/// Rewrites the subquery comparisons of one clause (see [`view_subquery_values`]), not
/// those of the subqueries within it (their own `SELECT` is visited on its own).
struct SubqueryValues {
    /// How many subqueries deep the visit is.
    depth: usize,
    /// The clause's top-level conjuncts (by address), where `IN` is a semi join.
    conjuncts: Vec<*const Expr>,
}

impl VisitorMut for SubqueryValues {
    type Break = ();

    fn pre_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _: &mut Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if self.depth > 0 {
            return ControlFlow::Continue(());
        }
        let conjunct = self.conjuncts.contains(&(expr as *const Expr));
        let rewritten = match expr {
            Expr::InSubquery {
                expr: x,
                subquery,
                negated,
            } if !conjunct => in_value(x, subquery, *negated),
            Expr::AnyOp {
                left,
                compare_op,
                right,
                ..
            } => match (right.as_ref(), compare_op) {
                (Expr::Subquery(_), BinaryOperator::Eq) if conjunct => None,
                (Expr::Subquery(q), op) => {
                    negated_op(op).and_then(|op| all_value(left, &op, q).map(not))
                }
                _ => None,
            },
            Expr::AllOp {
                left,
                compare_op,
                right,
            } => match (right.as_ref(), compare_op) {
                (Expr::Subquery(_), BinaryOperator::NotEq) if conjunct => None,
                (Expr::Subquery(q), op) => all_value(left, op, q),
                _ => None,
            },
            _ => None,
        };
        if let Some(rewritten) = rewritten {
            *expr = rewritten;
        }
        ControlFlow::Continue(())
    }
}

/// `x [NOT] IN (subquery)` where the subquery is an aggregate without `GROUP BY`, `HAVING`
/// or a limit (`SELECT count(*) FROM b WHERE b.k = a.k`), which yields exactly one row, as
/// `x = (subquery)` (`<>`): the same value, NULLs included, and a scalar subquery whose
/// `count` of no rows is 0 where a semi join on the aggregate's rows had no row for a key
/// without input rows (see also `crate::sql::decorrelate::SingleRowSubqueries`).
fn one_row_in(stmt: &mut Statement) {
    struct OneRowIn;
    impl VisitorMut for OneRowIn {
        type Break = ();
        fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
            if let Expr::InSubquery {
                expr: x,
                subquery,
                negated,
            } = expr
                && one_row_aggregate(subquery)
            {
                let op = if *negated {
                    BinaryOperator::NotEq
                } else {
                    BinaryOperator::Eq
                };
                let left = std::mem::replace(x.as_mut(), Expr::value(Value::Null));
                let query = std::mem::replace(subquery.as_mut(), *empty_query());
                *expr = Expr::BinaryOp {
                    left: Box::new(left),
                    op,
                    right: Box::new(Expr::Subquery(Box::new(query))),
                };
            }
            ControlFlow::Continue(())
        }
    }
    let _ = VisitMut::visit(stmt, &mut OneRowIn);
}

/// A placeholder query (`SELECT 1`) to move a subquery out of an expression with.
fn empty_query() -> Box<Query> {
    match SqlParser::new(&WeirDialect)
        .try_with_sql("SELECT 1")
        .and_then(|mut p| p.parse_query())
    {
        Ok(q) => q,
        Err(_) => unreachable!("invariant: SELECT 1 parses"),
    }
}

/// Whether `q` is a single `SELECT` of aggregates without `GROUP BY`, `HAVING`, window
/// functions, `WITH`, `ORDER BY ... LIMIT` or `OFFSET`: exactly one row.
fn one_row_aggregate(q: &Query) -> bool {
    let SetExpr::Select(select) = q.body.as_ref() else {
        return false;
    };
    let no_groups = match &select.group_by {
        GroupByExpr::Expressions(exprs, modifiers) => exprs.is_empty() && modifiers.is_empty(),
        GroupByExpr::All(_) => false,
    };
    if !no_groups
        || select.having.is_some()
        || q.with.is_some()
        || q.limit_clause.is_some()
        || q.fetch.is_some()
    {
        return false;
    }
    struct Calls {
        aggregate: bool,
        window: bool,
    }
    impl Visitor for Calls {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if let Expr::Function(f) = e {
                if f.over.is_some() {
                    self.window = true;
                } else if AGGREGATES.contains(&f.name.to_string().to_ascii_lowercase().as_str()) {
                    self.aggregate = true;
                }
            }
            ControlFlow::Continue(())
        }
        // A subquery within: its aggregates are its own; left as written.
        fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            ControlFlow::Break(())
        }
    }
    let mut calls = Calls {
        aggregate: false,
        window: false,
    };
    for item in &select.projection {
        if Visit::visit(item, &mut calls).is_break() {
            return false;
        }
    }
    calls.aggregate && !calls.window
}

/// `NOT (e)`.
fn not(e: Expr) -> Expr {
    Expr::UnaryOp {
        op: UnaryOperator::Not,
        expr: Box::new(Expr::Nested(Box::new(e))),
    }
}

/// The comparison that is true exactly where `op` is false (for non-NULL operands).
fn negated_op(op: &BinaryOperator) -> Option<BinaryOperator> {
    Some(match op {
        BinaryOperator::Eq => BinaryOperator::NotEq,
        BinaryOperator::NotEq => BinaryOperator::Eq,
        BinaryOperator::Lt => BinaryOperator::GtEq,
        BinaryOperator::LtEq => BinaryOperator::Gt,
        BinaryOperator::Gt => BinaryOperator::LtEq,
        BinaryOperator::GtEq => BinaryOperator::Lt,
        _ => return None,
    })
}

/// The subquery's rows as the one column `weir_sq_v` of `FROM (q) AS weir_sq(weir_sq_v)`;
/// `None` unless `q` has exactly one output column.
fn one_column_rows(q: &Query) -> Option<String> {
    let items = output_items(&q.body)?;
    match items {
        [SelectItem::UnnamedExpr(_) | SelectItem::ExprWithAlias { .. }] => {
            Some(format!("({q}) AS weir_sq(weir_sq_v)"))
        }
        _ => None,
    }
}

/// An expression parsed from Weir's own text (`None` if it does not parse).
fn parsed_expr(text: &str) -> Option<Expr> {
    SqlParser::new(&WeirDialect)
        .with_recursion_limit(PARSER_RECURSION_LIMIT)
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .ok()
}

/// `x [NOT] IN (q)` as a value (see [`view_subquery_values`]).
fn in_value(x: &Expr, q: &Query, negated: bool) -> Option<Expr> {
    if matches!(x, Expr::Tuple(_)) {
        return None;
    }
    let rows = one_column_rows(q)?;
    let value = parsed_expr(&format!(
        "CASE WHEN EXISTS (SELECT 1 FROM {rows} WHERE weir_sq_v = ({x})) THEN TRUE \
         ELSE CASE (SELECT CASE WHEN count(*) = 0 THEN 0 \
                                WHEN count(*) > count(weir_sq_v) THEN 2 ELSE 1 END FROM {rows}) \
              WHEN 0 THEN FALSE WHEN 2 THEN NULL \
              ELSE CASE WHEN ({x}) IS NULL THEN NULL ELSE FALSE END END END"
    ))?;
    Some(if negated { not(value) } else { value })
}

/// `x op ALL (q)` as a value (see [`view_subquery_values`]); `<> ALL` is `NOT IN`.
fn all_value(x: &Expr, op: &BinaryOperator, q: &Query) -> Option<Expr> {
    if matches!(x, Expr::Tuple(_)) {
        return None;
    }
    let rows = one_column_rows(q)?;
    let extreme = |f: &str| format!("(SELECT {f}(weir_sq_v) FROM {rows})");
    let differs = match op {
        BinaryOperator::NotEq => return in_value(x, q, true),
        BinaryOperator::Gt | BinaryOperator::GtEq => {
            format!("NOT (({x}) {op} {})", extreme("max"))
        }
        BinaryOperator::Lt | BinaryOperator::LtEq => {
            format!("NOT (({x}) {op} {})", extreme("min"))
        }
        BinaryOperator::Eq => format!(
            "(({x}) <> {} OR ({x}) <> {})",
            extreme("min"),
            extreme("max")
        ),
        _ => return None,
    };
    parsed_expr(&format!(
        "CASE WHEN (SELECT count(*) FROM {rows}) = 0 THEN TRUE \
         WHEN {differs} THEN FALSE \
         WHEN ({x}) IS NULL OR (SELECT count(*) - count(weir_sq_v) FROM {rows}) > 0 THEN NULL \
         ELSE TRUE END"
    ))
}

/// A string literal in PostgreSQL's array form (`'{1,2}'`) as an `ARRAY[...]` of its
/// elements ([`parse_array_text`]); other expressions unchanged.
fn array_literal(e: &Expr) -> Expr {
    if let Expr::Value(ValueWithSpan {
        value: Value::SingleQuotedString(text),
        ..
    }) = e
        && let Some(node) = parse_array_text(text)
    {
        return node.to_expr();
    }
    e.clone()
}

/// One level of an array value read from PostgreSQL's text form: an element (`None` for
/// NULL) or a sub-array.
#[derive(Debug, Clone, PartialEq)]
enum ArrayText {
    Element(Option<String>),
    Array(Vec<ArrayText>),
}

impl ArrayText {
    /// `ARRAY[...]` of string literals and NULLs, nested as the text is.
    fn to_expr(&self) -> Expr {
        match self {
            ArrayText::Element(Some(s)) => {
                Expr::Value(Value::SingleQuotedString(s.clone()).with_empty_span())
            }
            ArrayText::Element(None) => Expr::Value(Value::Null.with_empty_span()),
            ArrayText::Array(items) => Expr::Array(Array {
                elem: items.iter().map(ArrayText::to_expr).collect(),
                named: true,
            }),
        }
    }

    /// The number of nested levels (1 for `{1,2}`), the same for every sub-array; `None`
    /// for sub-arrays of different depths or lengths (PostgreSQL's "multidimensional arrays
    /// must have sub-arrays with matching dimensions").
    fn depth(&self) -> Option<usize> {
        match self {
            ArrayText::Element(_) => Some(0),
            ArrayText::Array(items) => {
                let mut depth = None;
                let mut len = None;
                for item in items {
                    let d = item.depth()?;
                    if *depth.get_or_insert(d) != d {
                        return None;
                    }
                    // An empty sub-array (`{{}}`) is malformed, as in PostgreSQL.
                    if let ArrayText::Array(sub) = item
                        && (sub.is_empty() || *len.get_or_insert(sub.len()) != sub.len())
                    {
                        return None;
                    }
                }
                Some(depth.unwrap_or(0) + 1)
            }
        }
    }

    /// The length of each dimension, outermost first (`[2, 1]` for `{{1},{2}}`).
    fn shape(&self) -> Vec<usize> {
        let mut shape = Vec::new();
        let mut node = self;
        while let ArrayText::Array(items) = node {
            shape.push(items.len());
            match items.first() {
                Some(first) => node = first,
                None => break,
            }
        }
        shape
    }
}

/// A dimension's lower and upper bound in array text (`[1:2]`).
type Bounds = (i64, i64);

/// The dimension decoration in front of array text (`[1:2]={1,2}`, `[2]={1,2}`, `[1:2][1:1]=
/// {{1},{2}}`; docs, 8.15.6): each dimension's lower and upper bound (a lower bound of 1
/// when only the upper is written) and the text after the `=`. `Ok(None)` for text without
/// one (not starting with `[`).
///
/// # Errors
/// `22P02` `malformed array literal` for a decoration PostgreSQL's `array_in` cannot read,
/// `2202E` when an upper bound is below its lower bound.
fn array_dimensions(text: &str) -> Result<Option<(Vec<Bounds>, &str)>> {
    let malformed = || Error::data("22P02", format!("malformed array literal: \"{text}\""));
    let mut rest = text.trim_start();
    if !rest.starts_with('[') {
        return Ok(None);
    }
    let bound = |s: &str| s.trim().parse::<i64>().map_err(|_| malformed());
    let mut dims = Vec::new();
    while let Some(after) = rest.strip_prefix('[') {
        let close = after.find(']').ok_or_else(malformed)?;
        let inside = &after[..close];
        let (lower, upper) = match inside.split_once(':') {
            Some((l, u)) => (bound(l)?, bound(u)?),
            None => (1, bound(inside)?),
        };
        if upper < lower {
            return Err(Error::data(
                "2202E",
                "upper bound cannot be less than lower bound",
            ));
        }
        dims.push((lower, upper));
        rest = after[close + 1..].trim_start();
    }
    let body = rest.strip_prefix('=').ok_or_else(malformed)?;
    Ok(Some((dims, body)))
}

/// Checks array text with a dimension decoration ([`array_dimensions`]) against its
/// contents, and returns the text without it.
///
/// # Errors
/// As [`array_dimensions`]; `22P02` when the contents are malformed or their dimensions
/// differ from the decoration's (PostgreSQL's "Specified array dimensions do not match array
/// contents."); `0A000` for a lower bound other than 1 (Weir's arrays start at 1 and keep
/// no bounds).
pub fn undecorated_array_text(text: &str) -> Result<&str> {
    let Some((dims, body)) = array_dimensions(text)? else {
        return Ok(text);
    };
    let malformed = || Error::data("22P02", format!("malformed array literal: \"{text}\""));
    let node = parse_array_text(body).ok_or_else(malformed)?;
    let sizes: Vec<usize> = dims
        .iter()
        .map(|(l, u)| usize::try_from(u - l + 1).unwrap_or(usize::MAX))
        .collect();
    if node.shape() != sizes {
        return Err(malformed());
    }
    if dims.iter().any(|(l, _)| *l != 1) {
        return Err(Error::not_supported(
            "arrays with a lower bound other than 1 are not supported",
        ));
    }
    Ok(body)
}

/// Reads PostgreSQL's array text (docs, 8.15.6 "Array Input and Output Syntax"): `{`
/// elements separated by `,` `}`, nested for more dimensions; an element double-quoted
/// (`\` escapes the next character) or bare (white space around it dropped, `\` escaping,
/// `NULL` in any case a NULL), with an optional dimension decoration whose lower bounds are 1
/// (`[1:2]={1,2}`, [`undecorated_array_text`]). `None` for text PostgreSQL would refuse or
/// Weir does not read, which is left to the cast as written.
fn parse_array_text(text: &str) -> Option<ArrayText> {
    if text.trim_start().starts_with('[') {
        return parse_array_text(undecorated_array_text(text).ok()?);
    }
    fn array(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<ArrayText> {
        // The opening brace has been read.
        let mut items = Vec::new();
        loop {
            while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                chars.next();
            }
            match chars.peek()? {
                '}' if items.is_empty() => {
                    chars.next();
                    return Some(ArrayText::Array(items));
                }
                '{' => {
                    chars.next();
                    items.push(array(chars)?);
                }
                '"' => {
                    chars.next();
                    let mut s = String::new();
                    loop {
                        match chars.next()? {
                            '"' => break,
                            '\\' => s.push(chars.next()?),
                            c => s.push(c),
                        }
                    }
                    items.push(ArrayText::Element(Some(s)));
                }
                _ => {
                    let mut s = String::new();
                    let mut escaped = false;
                    // Where the text ends but for trailing white space.
                    let mut kept = 0;
                    while let Some(&c) = chars.peek() {
                        match c {
                            ',' | '}' => break,
                            '{' | '"' => return None,
                            '\\' => {
                                chars.next();
                                s.push(chars.next()?);
                                escaped = true;
                                kept = s.len();
                                continue;
                            }
                            _ => {
                                s.push(c);
                                if !c.is_ascii_whitespace() {
                                    kept = s.len();
                                }
                            }
                        }
                        chars.next();
                    }
                    s.truncate(kept);
                    if s.is_empty() {
                        return None;
                    }
                    let null = !escaped && s.eq_ignore_ascii_case("null");
                    items.push(ArrayText::Element((!null).then_some(s)));
                }
            }
            while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                chars.next();
            }
            match chars.next()? {
                ',' => {}
                '}' => return Some(ArrayText::Array(items)),
                _ => return None,
            }
        }
    }
    let mut chars = text.trim().chars().peekable();
    if chars.next()? != '{' {
        return None;
    }
    let node = array(&mut chars)?;
    if chars.next().is_some() {
        return None;
    }
    node.depth()?;
    Some(node)
}

/// The elements of a one-dimensional array in PostgreSQL's text form (`{1,NULL,"a b"}`;
/// `None` for a NULL element), read as [`parse_array_text`] reads them; `None` for text
/// that is not such an array (more dimensions, or malformed).
pub fn array_text_elements(text: &str) -> Option<Vec<Option<String>>> {
    match parse_array_text(text)? {
        ArrayText::Array(items) => items
            .into_iter()
            .map(|item| match item {
                ArrayText::Element(e) => Some(e),
                ArrayText::Array(_) => None,
            })
            .collect(),
        ArrayText::Element(_) => None,
    }
}

/// `'{...}'::type[]` (and `CAST('{...}' AS type[])`) of one dimension: the literal read as
/// PostgreSQL reads array text ([`parse_array_text`]), as `ARRAY[...]::type[]`. The
/// compatibility layer's own rewrite, which sees what this one leaves, split the text at
/// every comma, kept the quotes (`'{"b c"}'` gave `"b c"` with them) and read `NULL` as
/// text.
#[derive(Debug)]
struct ArrayTextRule;

impl SqlStatementRewriteRule for ArrayTextRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        // `SELECT '{a}'::text[]` is column `text` (a cast of a constant: its type's name),
        // not the `array` of the `ARRAY[...]` it becomes.
        alias_unnamed_items(&mut s, |e| {
            matches!(
                e,
                Expr::Cast {
                    expr: inner,
                    data_type: SqlDataType::Array(_),
                    ..
                } if matches!(
                    inner.as_ref(),
                    Expr::Value(ValueWithSpan { value: Value::SingleQuotedString(_), .. })
                )
            )
            .then(|| crate::sql::names::figure_name(e))
        });
        let _ = visit_expressions_mut(&mut s, |e| {
            if let Expr::Cast {
                expr: inner,
                data_type:
                    SqlDataType::Array(
                        ArrayElemTypeDef::SquareBracket(element, _)
                        | ArrayElemTypeDef::AngleBracket(element),
                    ),
                ..
            } = e
                && let Expr::Value(ValueWithSpan {
                    value: Value::SingleQuotedString(text),
                    ..
                }) = inner.as_ref()
                && let Some(node) = parse_array_text(text)
            {
                // More dimensions become an array of arrays, which the cast to the array
                // type refuses (`0A000`); the compatibility layer's rewrite split such text at
                // every comma (`'{{a,b}}'::text[]` was `{"{a","b}"}`).
                let mut array = node.to_expr();
                if matches!(element.as_ref(), SqlDataType::Bytea) {
                    // Each element read as `bytea` input (`\x00` is one zero byte); the
                    // cast of the whole array took the element's text as its bytes.
                    let _ = visit_expressions_mut(&mut array, |el| {
                        if matches!(el, Expr::Value(_)) {
                            *el = bytea_cast(el);
                        }
                        ControlFlow::<()>::Continue(())
                    });
                }
                **inner = array;
            }
            ControlFlow::<()>::Continue(())
        });
        // `ARRAY['\x01'::bytea, NULL]`: a NULL beside `bytea` elements is a `bytea` NULL
        // (DataFusion finds no common type of `bytea` and an untyped NULL).
        let _ = visit_expressions_mut(&mut s, |e| {
            if let Expr::Array(array) = e
                && array.elem.iter().any(|el| {
                    matches!(
                        el,
                        Expr::Cast {
                            data_type: SqlDataType::Bytea,
                            ..
                        }
                    )
                })
            {
                for el in &mut array.elem {
                    if matches!(
                        el,
                        Expr::Value(ValueWithSpan {
                            value: Value::Null,
                            ..
                        })
                    ) {
                        *el = bytea_cast(el);
                    }
                }
            }
            ControlFlow::<()>::Continue(())
        });
        array_text_comparisons(&mut s);
        array_containment(&mut s);
        s
    }
}

/// `x op '{...}'` (and `'{...}' op x`) for the comparisons, `IS [NOT] DISTINCT FROM` and
/// `@>`/`<@`, with text that looks like an array (`{` or a dimension decoration first) on one
/// side and no literal on the other, as [`ARRAY_TEXT_COMPARE_FUNCTION`]`(x, '{...}', 'op')`, the operator turned
/// around when the text was on the left. DataFusion plans `int_array = '{1,2}'` as a
/// comparison of a list and text, which it refuses while planning; PostgreSQL reads the
/// untyped literal as the other side's type. The analyzer turns the call back into the
/// comparison, with the text read as the array when `x` is one and as it was otherwise
/// (`json_text = '{"a":1}'`). An unnamed SELECT item keeps PostgreSQL's name, `?column?`.
fn array_text_comparisons(s: &mut Statement) {
    // Any spelling of a string constant: `'...'`, `E'...'`, `U&'...'`, `$$...$$` (the
    // parser has read its escapes).
    fn array_text(e: &Expr) -> Option<&str> {
        let t = match e {
            Expr::Value(ValueWithSpan {
                value:
                    Value::SingleQuotedString(t)
                    | Value::EscapedStringLiteral(t)
                    | Value::UnicodeStringLiteral(t),
                ..
            }) => t.as_str(),
            Expr::Value(ValueWithSpan {
                value: Value::DollarQuotedString(d),
                ..
            }) => d.value.as_str(),
            _ => return None,
        };
        t.trim_start().starts_with(['{', '[']).then_some(t)
    }
    fn operator(op: &BinaryOperator, swapped: bool) -> Option<&'static str> {
        Some(match (op, swapped) {
            (BinaryOperator::Eq, _) => "=",
            (BinaryOperator::NotEq, _) => "<>",
            (BinaryOperator::Lt, false) | (BinaryOperator::Gt, true) => "<",
            (BinaryOperator::LtEq, false) | (BinaryOperator::GtEq, true) => "<=",
            (BinaryOperator::Gt, false) | (BinaryOperator::Lt, true) => ">",
            (BinaryOperator::GtEq, false) | (BinaryOperator::LtEq, true) => ">=",
            (BinaryOperator::AtArrow, false) | (BinaryOperator::ArrowAt, true) => "@>",
            (BinaryOperator::ArrowAt, false) | (BinaryOperator::AtArrow, true) => "<@",
            _ => return None,
        })
    }
    fn call(e: &Expr) -> Option<Expr> {
        let (left, op, right) = match e {
            Expr::BinaryOp { left, op, right } => (left, Some(op), right),
            Expr::IsDistinctFrom(left, right) => (left, None, right),
            Expr::IsNotDistinctFrom(left, right) => (left, None, right),
            _ => return None,
        };
        let (other, text, swapped) = match (array_text(left), array_text(right)) {
            (None, Some(t)) if !matches!(left.as_ref(), Expr::Value(_)) => (left, t, false),
            (Some(t), None) if !matches!(right.as_ref(), Expr::Value(_)) => (right, t, true),
            _ => return None,
        };
        let op = match (op, e) {
            (Some(op), _) => operator(op, swapped)?,
            (None, Expr::IsDistinctFrom(..)) => "IS DISTINCT FROM",
            (None, _) => "IS NOT DISTINCT FROM",
        };
        let lit = |t: &str| Expr::Value(Value::SingleQuotedString(t.into()).with_empty_span());
        Some(function_call(
            ARRAY_TEXT_COMPARE_FUNCTION,
            vec![other.as_ref().clone(), lit(text), lit(op)],
        ))
    }
    alias_unnamed_items(s, |e| call(e).map(|_| crate::sql::names::figure_name(e)));
    let _ = visit_expressions_mut(s, |e| {
        if let Some(c) = call(e) {
            *e = c;
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `a @> b` as `arraycontains(a, b)` and `a <@ b` as `arraycontains(b, a)`, PostgreSQL's
/// containment ([`crate::sql::functions::array_cmp::ArrayContains`]), which takes arrays of
/// any dimensions on either side; DataFusion planned the operators as `array_has_all`, which
/// matches NULL elements and refuses arrays of different dimensions while planning. Weir has
/// no other type with these operators. An unnamed SELECT item keeps PostgreSQL's name,
/// `?column?`.
fn array_containment(s: &mut Statement) {
    fn call(e: &Expr) -> Option<Expr> {
        let Expr::BinaryOp { left, op, right } = e else {
            return None;
        };
        let (a, b) = match op {
            BinaryOperator::AtArrow => (left, right),
            BinaryOperator::ArrowAt => (right, left),
            _ => return None,
        };
        Some(function_call(
            crate::sql::functions::array_cmp::ARRAY_CONTAINS_FUNCTION,
            vec![a.as_ref().clone(), b.as_ref().clone()],
        ))
    }
    alias_unnamed_items(s, |e| call(e).map(|_| crate::sql::names::figure_name(e)));
    let _ = visit_expressions_mut(s, |e| {
        if let Some(c) = call(e) {
            *e = c;
        }
        ControlFlow::<()>::Continue(())
    });
}

/// `CAST(e AS bytea)`.
fn bytea_cast(e: &Expr) -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(e.clone()),
        data_type: SqlDataType::Bytea,
        array: false,
        format: None,
    }
}

#[cfg(test)]
mod array_text_tests {
    use super::*;

    fn el(s: &str) -> ArrayText {
        ArrayText::Element(Some(s.to_string()))
    }

    #[test]
    fn array_text_reads_as_postgresql_reads_it() {
        assert_eq!(
            parse_array_text(r#"{a,"b c",NULL,"NULL","",  d e  ,x\,y}"#),
            Some(ArrayText::Array(vec![
                el("a"),
                el("b c"),
                ArrayText::Element(None),
                el("NULL"),
                el(""),
                el("d e"),
                el("x,y"),
            ]))
        );
        assert_eq!(parse_array_text("{}"), Some(ArrayText::Array(vec![])));
        let nested = parse_array_text("{{1,2},{3,4}}").unwrap();
        assert_eq!(nested.depth(), Some(2));
        assert_eq!(parse_array_text("{{1,2},{3}}"), None);
        assert_eq!(parse_array_text("{1,2"), None);
        assert_eq!(parse_array_text("{1,,2}"), None);
        // A dimension decoration with lower bounds 1 is read; others are not.
        assert_eq!(
            parse_array_text(" [1:2] = {1,2}"),
            Some(ArrayText::Array(vec![el("1"), el("2")]))
        );
        assert_eq!(parse_array_text("[0:1]={1,2}"), None);
        assert_eq!(parse_array_text("[1:3]={1,2}"), None);
        assert_eq!(parse_array_text("{{}}"), None);
        assert_eq!(
            undecorated_array_text("[1:0]={}").unwrap_err().sqlstate(),
            "2202E"
        );
        assert_eq!(
            undecorated_array_text("[0:1]={1,2}")
                .unwrap_err()
                .sqlstate(),
            "0A000"
        );
        assert_eq!(
            parse_array_text(r#"{"a\"b"}"#),
            Some(ArrayText::Array(vec![el("a\"b")]))
        );
    }
}

/// `x op ANY (subquery)` and `x op ALL (subquery)` (PostgreSQL docs, 9.23.4 and 9.23.5) in
/// forms DataFusion plans right (its own plan of `ANY (subquery)` loses the comparison and
/// answers as if every row matched):
///
/// ```text
///  x = ANY (q)     ─►  x IN (q)                  a top-level conjunct of WHERE or HAVING
///  x <> ALL (q)    ─►  x NOT IN (q)              a top-level conjunct of WHERE or HAVING
///  x op ANY (q)    ─►  weir_any_op(x, ARRAY(q), 'op')
///  x op ALL (q)    ─►  NOT weir_any_op(x, ARRAY(q), 'negated op')
///  x IN (q)        ─►  weir_any_op(x, ARRAY(q), '=')        in a query, not a top-level
///  x NOT IN (q)    ─►  NOT weir_any_op(x, ARRAY(q), '=')    conjunct of WHERE or HAVING
/// ```
///
/// DataFusion runs `IN (subquery)` as a semi or anti join, which takes a NULL comparison for
/// false: right where only true rows pass (a top-level conjunct of a filter), wrong under
/// `NOT`, `OR`, `IS NULL` or in a SELECT list, where the array form keeps the NULL. `IN` is defined as `= ANY` and `NOT IN` as `<> ALL`. `ALL` is true when no comparison is
/// false, NULL when none is false and one is NULL, so it is the negation of `ANY` with the
/// negated operator under SQL's three-valued logic (an empty subquery: `ANY` false, `ALL`
/// true). `ARRAY(q)` is then rewritten by [`ArraySubqueryRule`].
fn subquery_comparison(expr: &Expr, in_filter: bool) -> Option<Expr> {
    let eq = BinaryOperator::Eq;
    let (left, op, query, all) = match expr {
        Expr::InSubquery {
            expr,
            subquery,
            negated,
        } if !in_filter => (expr, &eq, subquery, *negated),
        Expr::AnyOp {
            left,
            compare_op,
            right,
            ..
        } => match right.as_ref() {
            Expr::Subquery(q) => (left, compare_op, q, false),
            _ => return None,
        },
        Expr::AllOp {
            left,
            compare_op,
            right,
        } => match right.as_ref() {
            Expr::Subquery(q) => (left, compare_op, q, true),
            _ => return None,
        },
        _ => return None,
    };
    match (op, all) {
        (BinaryOperator::Eq, false) | (BinaryOperator::NotEq, true) if in_filter => {
            return Some(Expr::InSubquery {
                expr: left.clone(),
                subquery: query.clone(),
                negated: all,
            });
        }
        _ => {}
    }
    if let Expr::InSubquery { negated, .. } = expr {
        let any = function_call(
            ANY_OP_FUNCTION,
            vec![
                left.as_ref().clone(),
                array_of(query),
                Expr::Value(Value::SingleQuotedString("=".into()).with_empty_span()),
            ],
        );
        return Some(if *negated {
            Expr::UnaryOp {
                op: UnaryOperator::Not,
                expr: Box::new(Expr::Nested(Box::new(any))),
            }
        } else {
            any
        });
    }
    let (op, negated) = match op {
        BinaryOperator::Eq => ("=", "<>"),
        BinaryOperator::NotEq => ("<>", "="),
        BinaryOperator::Lt => ("<", ">="),
        BinaryOperator::LtEq => ("<=", ">"),
        BinaryOperator::Gt => (">", "<="),
        BinaryOperator::GtEq => (">=", "<"),
        _ => return None,
    };
    let array = array_of(query);
    let text = |o: &str| Expr::Value(Value::SingleQuotedString(o.to_string()).with_empty_span());
    let call = |o: &str| {
        function_call(
            ANY_OP_FUNCTION,
            vec![left.as_ref().clone(), array.clone(), text(o)],
        )
    };
    Some(if all {
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr: Box::new(Expr::Nested(Box::new(call(negated)))),
        }
    } else {
        call(op)
    })
}

/// A row compared with a subquery's rows, `(a, b) [NOT] IN (SELECT x, y ...)` (PostgreSQL
/// docs, 9.23.2 "Row-Wise Comparison"), as a top-level conjunct of WHERE or HAVING, where a
/// NULL result counts as false:
///
/// ```text
///  (a, b) IN (q)       ─►  EXISTS (SELECT 1 FROM (q) AS r (c1, c2) WHERE r.c1 = a AND r.c2 = b)
///  (a, b) NOT IN (q)   ─►  NOT EXISTS (SELECT 1 FROM (q) AS r (c1, c2)
///                              WHERE (r.c1 = a OR r.c1 IS NULL OR a IS NULL) AND ...)
/// ```
///
/// `IN` is true when some row is equal in every column; `NOT IN` when every row differs in
/// some column with neither side NULL (a row that might be equal makes it NULL). DataFusion
/// refused a row on the left of `IN`. `None` for other expressions and on a subquery text
/// that does not parse again.
fn row_in_subquery(expr: &Expr) -> Option<Expr> {
    let Expr::InSubquery {
        expr: left,
        subquery,
        negated,
    } = expr
    else {
        return None;
    };
    let items = match left.as_ref() {
        Expr::Tuple(items) => items,
        Expr::Nested(inner) => match inner.as_ref() {
            Expr::Tuple(items) => items,
            _ => return None,
        },
        _ => return None,
    };
    let row = "__weir_in_row";
    let columns: Vec<String> = (1..=items.len())
        .map(|i| format!("__weir_in_{i}"))
        .collect();
    let conditions: Vec<String> = items
        .iter()
        .zip(&columns)
        .map(|(item, c)| {
            if *negated {
                format!("({row}.{c} = ({item}) OR {row}.{c} IS NULL OR ({item}) IS NULL)")
            } else {
                format!("{row}.{c} = ({item})")
            }
        })
        .collect();
    let text = format!(
        "{}EXISTS (SELECT 1 FROM ({subquery}) AS {row} ({}) WHERE {})",
        if *negated { "NOT " } else { "" },
        columns.join(", "),
        conditions.join(" AND ")
    );
    SqlParser::new(&WeirDialect)
        .try_with_sql(&text)
        .and_then(|mut p| p.parse_expr())
        .ok()
}

/// `ARRAY(query)`, which [`ArraySubqueryRule`] rewrites later.
fn array_of(query: &Query) -> Expr {
    Expr::Function(Function {
        name: ObjectName::from(vec![Ident::new("array")]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::Subquery(Box::new(query.clone())),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

impl VisitorMut for AnyOpVisitor {
    type Break = ();

    fn pre_visit_select(&mut self, select: &mut Select) -> ControlFlow<()> {
        for clause in [&select.selection, &select.having].into_iter().flatten() {
            top_conjuncts(clause, &mut self.conjuncts);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let in_filter = self.conjuncts.contains(&(expr as *const Expr));
        if in_filter && let Some(rewritten) = row_in_subquery(expr) {
            *expr = rewritten;
            return ControlFlow::Continue(());
        }
        if matches!(expr, Expr::InSubquery { .. }) && (in_filter || !self.query) {
            return ControlFlow::Continue(());
        }
        if let Some(rewritten) = subquery_comparison(expr, in_filter) {
            *expr = rewritten;
            return ControlFlow::Continue(());
        }
        match expr {
            Expr::AnyOp {
                left,
                compare_op,
                right,
                ..
            } if !matches!(right.as_ref(), Expr::Subquery(_)) => {
                let op = match compare_op {
                    BinaryOperator::Eq => "=",
                    BinaryOperator::NotEq => "<>",
                    BinaryOperator::Lt => "<",
                    BinaryOperator::LtEq => "<=",
                    BinaryOperator::Gt => ">",
                    BinaryOperator::GtEq => ">=",
                    _ => return ControlFlow::Continue(()),
                };
                let args = vec![
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(left.as_ref().clone())),
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(array_literal(right))),
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(
                        Value::SingleQuotedString(op.to_string()).with_empty_span(),
                    ))),
                ];
                *expr = Expr::Function(Function {
                    name: ObjectName::from(vec![Ident::new(ANY_OP_FUNCTION)]),
                    uses_odbc_syntax: false,
                    parameters: FunctionArguments::None,
                    args: FunctionArguments::List(FunctionArgumentList {
                        duplicate_treatment: None,
                        args,
                        clauses: vec![],
                    }),
                    filter: None,
                    null_treatment: None,
                    over: None,
                    within_group: vec![],
                });
            }
            Expr::AllOp { right, .. } if !matches!(right.as_ref(), Expr::Subquery(_)) => {
                **right = array_literal(right);
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Field selection from a composite value, `(expression).name` (PostgreSQL docs, 4.2.4
/// "Field Selection"), as DataFusion's struct field access: the field name is an
/// identifier, folded to lower case unless quoted, where DataFusion takes only a string
/// (`(expression)['name']`). `table.column` and `schema.table.column` are left to the
/// planner's name resolution.
///
/// ```text
///  (r.k).x                       ─►  (r.k)['x']
///  (_pg_expandarray(a)).n        ─►  (_pg_expandarray(a))['n']
/// ```
#[derive(Debug)]
struct FieldSelectionRule;

impl SqlStatementRewriteRule for FieldSelectionRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut FieldSelectionVisitor);
        s
    }
}

struct FieldSelectionVisitor;

impl VisitorMut for FieldSelectionVisitor {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::CompoundFieldAccess { root, access_chain } = expr
            && !matches!(root.as_ref(), Expr::Identifier(_))
        {
            for access in access_chain.iter_mut() {
                if let AccessExpr::Dot(Expr::Identifier(ident)) = access {
                    let name = match ident.quote_style {
                        Some(_) => ident.value.clone(),
                        None => ident.value.to_lowercase(),
                    };
                    *access = AccessExpr::Dot(Expr::Value(
                        Value::SingleQuotedString(name).with_empty_span(),
                    ));
                }
            }
        }
        ControlFlow::Continue(())
    }
}

/// Name of the scalar function behind `information_schema._pg_expandarray`: an array's
/// elements with their 1-based positions, as a list of `(x, n)` structs
/// ([`crate::sql::functions::pg_info`]).
pub const EXPAND_ARRAY_FUNCTION: &str = "_pg_expandarray";

/// PostgreSQL's set-returning functions over an array, in a SELECT list (where PostgreSQL
/// runs several of them in lockstep, as DataFusion does with `unnest`), as `unnest` over a
/// list:
///
/// ```text
///  generate_subscripts(a, d)   ─►  unnest(generate_series(1, array_length(a, d)))
///  _pg_expandarray(a)          ─►  unnest(_pg_expandarray(a))     rows of (x, n)
///  generate_series(a, b [, s]) ─►  unnest(generate_series(a, b [, s]))
/// ```
///
/// (DataFusion's `generate_series` in an expression is one list; PostgreSQL's is rows:
/// `SELECT x, generate_series(1, x)` gave `{1,2}` where PostgreSQL gives two rows.)
///
/// `generate_subscripts` (PostgreSQL docs, 9.26 "Set Returning Functions") yields the
/// subscripts of dimension `d`; Weir's arrays start at 1, so they run from 1 to the
/// dimension's length, and an empty or NULL array yields no rows.
/// `information_schema._pg_expandarray` is the helper PostgreSQL's `information_schema` and
/// pgjdbc's `getPrimaryKeys` and `getIndexInfo` use.
#[derive(Debug)]
struct SetReturningCallRule;

impl SqlStatementRewriteRule for SetReturningCallRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        // `SELECT generate_series(1, 3)` is column `generate_series`, not the `unnest` it
        // becomes.
        alias_unnamed_items(&mut s, |e| match e {
            Expr::Function(f)
                if f.over.is_none()
                    && f.name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| {
                        [
                            "generate_series",
                            "generate_subscripts",
                            EXPAND_ARRAY_FUNCTION,
                        ]
                        .contains(&i.value.to_lowercase().as_str())
                    }) =>
            {
                Some(crate::sql::names::figure_name(e))
            }
            _ => None,
        });
        let _ = VisitMut::visit(&mut s, &mut SetReturningCallVisitor);
        s
    }
}

struct SetReturningCallVisitor;

impl VisitorMut for SetReturningCallVisitor {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(f) = expr else {
            return ControlFlow::Continue(());
        };
        let Some(name) = f.name.0.last().and_then(|p| p.as_ident()) else {
            return ControlFlow::Continue(());
        };
        let name = name.value.to_lowercase();
        let FunctionArguments::List(list) = &f.args else {
            return ControlFlow::Continue(());
        };
        let args: Vec<Expr> = list
            .args
            .iter()
            .filter_map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
                _ => None,
            })
            .collect();
        if args.len() != list.args.len() || f.over.is_some() {
            return ControlFlow::Continue(());
        }
        match (name.as_str(), args.as_slice()) {
            ("generate_subscripts", [array, dimension]) => {
                let length = function_call("array_length", vec![array.clone(), dimension.clone()]);
                let one = Expr::Value(Value::Number("1".into(), false).with_empty_span());
                *expr = function_call(
                    "unnest",
                    vec![function_call("generate_series", vec![one, length])],
                );
            }
            (EXPAND_ARRAY_FUNCTION, [array]) => {
                *expr = function_call(
                    "unnest",
                    vec![function_call(EXPAND_ARRAY_FUNCTION, vec![array.clone()])],
                );
            }
            ("generate_series", [_, _] | [_, _, _]) => {
                *expr = function_call("unnest", vec![Expr::Function(f.clone())]);
            }
            // A statement rewritten before (planned again from its text): the series is
            // unnested once.
            ("unnest", [Expr::Function(inner)])
                if inner
                    .name
                    .0
                    .last()
                    .and_then(|p| p.as_ident())
                    .is_some_and(|i| i.value.eq_ignore_ascii_case("unnest"))
                    && matches!(&inner.args, FunctionArguments::List(l)
                    if matches!(l.args.as_slice(), [FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Function(g)))]
                        if g.name.0.last().and_then(|p| p.as_ident()).is_some_and(|i| i.value.eq_ignore_ascii_case("generate_series")))) =>
            {
                *expr = Expr::Function(inner.clone());
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Name of the scalar function that gives `{}` for a NULL list and the list otherwise: the
/// value of `ARRAY(subquery)` from the subquery's rows gathered by `array_agg`
/// ([`ArraySubqueryRule`]).
pub const ARRAY_OR_EMPTY_FUNCTION: &str = "weir_array_or_empty";

/// Name of the scalar function that takes a scalar subquery's rows, gathered into a list, to
/// its value: NULL for none, the one value, or PostgreSQL's error `21000` for more
/// ([`ScalarSubqueryRule`]).
pub const ONE_ROW_FUNCTION: &str = "weir_one_row";

/// A scalar subquery of a query (PostgreSQL docs, 4.2.11 "Scalar Subqueries": its value is
/// its one row's, NULL when it returns none, and more than one row is error `21000`) that
/// has no aggregate, as one that has, so that DataFusion decorrelates it (it plans a
/// correlated scalar subquery only when it is aggregated: "Correlated scalar subquery must be
/// aggregated to return at most one row"):
///
/// ```text
///  (SELECT e FROM f WHERE w)   ─►  weir_one_row((SELECT array_agg(e) FROM f WHERE w), 'e')
/// ```
///
/// The second argument is the name PostgreSQL gives the subquery's column (its item's alias
/// or [`crate::sql::names::figure_name`]), for [`crate::sql::names`] to show.
///
/// The aggregate gathers the rows of each outer row's subquery; `weir_one_row` then gives the
/// value or the error, for the outer rows that the subquery runs for only. Only a plain
/// SELECT of one item is rewritten (no `GROUP BY`, `HAVING`, `DISTINCT`, `ORDER BY`,
/// `LIMIT`, `WITH`, aggregates or window functions), and only in a query (`SELECT`), an
/// `UPDATE` or a `DELETE`: a materialized view's subqueries keep DataFusion's plan. The
/// subquery of `x op ANY (subquery)` and `ALL` is not a scalar subquery and is left alone.
#[derive(Debug)]
struct ScalarSubqueryRule;

impl SqlStatementRewriteRule for ScalarSubqueryRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        if is_query(&s) || matches!(s, Statement::Update(_) | Statement::Delete(_)) {
            let _ = VisitMut::visit(
                &mut s,
                &mut ScalarSubqueryVisitor {
                    not_scalar: Vec::new(),
                },
            );
        }
        s
    }
}

/// A scalar subquery that is a SELECT of one expression without `FROM`, `WHERE` or any
/// other clause (`(SELECT 6)`, `(SELECT t.x + 1)`) as that expression: its one row's value
/// (PostgreSQL docs, 4.2.11). A materialized view plans no scalar subquery that is not an
/// aggregate, and these are the common ones. An expression with a function call or a
/// subquery is left alone (`(SELECT random())` is computed once per statement, not per row).
/// An unnamed SELECT item keeps PostgreSQL's name (`?column?`, or the subquery item's
/// alias).
#[derive(Debug)]
struct ConstantSubqueryRule;

impl SqlStatementRewriteRule for ConstantSubqueryRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        fn inlined(e: &Expr) -> Option<Expr> {
            let Expr::Subquery(q) = e else {
                return None;
            };
            if q.with.is_some()
                || q.limit_clause.is_some()
                || q.fetch.is_some()
                || q.order_by.is_some()
            {
                return None;
            }
            let SetExpr::Select(select) = q.body.as_ref() else {
                return None;
            };
            let plain = select.from.is_empty()
                && select.selection.is_none()
                && select.distinct.is_none()
                && select.having.is_none()
                && select.qualify.is_none()
                && select.named_window.is_empty()
                && matches!(&select.group_by, GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty());
            let item = match select.projection.as_slice() {
                [SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }] => e,
                _ => return None,
            };
            let calls = datafusion::sql::sqlparser::ast::visit_expressions(item, |x| {
                if matches!(
                    x,
                    Expr::Function(_)
                        | Expr::Subquery(_)
                        | Expr::Exists { .. }
                        | Expr::InSubquery { .. }
                ) {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            });
            if !(plain && calls.is_continue()) {
                return None;
            }
            // A whole number stays a value, not a column's position (`GROUP BY (SELECT 1)`
            // groups by the constant): cast to its type, as the literal has.
            let item = match item {
                Expr::Value(ValueWithSpan {
                    value: Value::Number(n, _),
                    ..
                }) if n.parse::<i64>().is_ok() => Expr::Cast {
                    kind: CastKind::Cast,
                    expr: Box::new(item.clone()),
                    data_type: if n.parse::<i32>().is_ok() {
                        SqlDataType::Integer(None)
                    } else {
                        SqlDataType::BigInt(None)
                    },
                    array: false,
                    format: None,
                },
                other => other.clone(),
            };
            Some(Expr::Nested(Box::new(item)))
        }
        alias_unnamed_items(&mut s, |e| {
            inlined(e).map(|_| crate::sql::names::figure_name(e))
        });
        let _ = visit_expressions_mut(&mut s, |e| {
            if let Some(x) = inlined(e) {
                *e = x;
            }
            ControlFlow::<()>::Continue(())
        });
        s
    }
}

struct ScalarSubqueryVisitor {
    /// The subqueries of `ANY` and `ALL` seen so far (by address; the tree does not move
    /// while it is visited).
    not_scalar: Vec<*const Query>,
}

/// The one item of `q`'s SELECT when `q` is a plain SELECT of one unaggregated item (see
/// [`ScalarSubqueryRule`]).
fn plain_scalar_item(q: &mut Query) -> Option<&mut SelectItem> {
    if q.with.is_some() || q.limit_clause.is_some() || q.fetch.is_some() || q.order_by.is_some() {
        return None;
    }
    let SetExpr::Select(select) = q.body.as_mut() else {
        return None;
    };
    let plain = select.distinct.is_none()
        && select.having.is_none()
        && matches!(&select.group_by, GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty())
        && select.projection.len() == 1
        && !select.projection.iter().any(has_aggregate);
    match select.projection.first_mut() {
        Some(item @ (SelectItem::UnnamedExpr(_) | SelectItem::ExprWithAlias { .. })) if plain => {
            Some(item)
        }
        _ => None,
    }
}

impl VisitorMut for ScalarSubqueryVisitor {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::AnyOp { right, .. } | Expr::AllOp { right, .. } = expr
            && let Expr::Subquery(q) = right.as_ref()
        {
            self.not_scalar.push(q.as_ref() as *const Query);
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Subquery(q) = expr else {
            return ControlFlow::Continue(());
        };
        if self.not_scalar.contains(&(q.as_ref() as *const Query)) {
            return ControlFlow::Continue(());
        }
        let Some(item) = plain_scalar_item(q) else {
            return ControlFlow::Continue(());
        };
        let (inner, name) = match item {
            SelectItem::UnnamedExpr(e) => (e.clone(), crate::sql::names::figure_name(e)),
            SelectItem::ExprWithAlias { expr, alias } => (
                expr.clone(),
                match alias.quote_style {
                    Some(_) => alias.value.clone(),
                    None => alias.value.to_lowercase(),
                },
            ),
            _ => return ControlFlow::Continue(()),
        };
        *item = SelectItem::UnnamedExpr(function_call("array_agg", vec![inner]));
        let subquery = std::mem::replace(expr, Expr::Value(Value::Null.with_empty_span()));
        let name = Expr::Value(Value::SingleQuotedString(name).with_empty_span());
        *expr = function_call(ONE_ROW_FUNCTION, vec![subquery, name]);
        ControlFlow::Continue(())
    }
}

/// `pg_get_serial_sequence(table, column)` (PostgreSQL docs, 9.26 "System Information
/// Functions": the sequence a column's default or identity uses, NULL if none) is NULL for
/// every column of Weir, which has no sequences; the call is replaced by `NULL::text`
/// before the `regclass` casts around it are turned into catalog lookups. Clients wrap it
/// in casts inside correlated subqueries (SQLAlchemy's column reflection:
/// `CAST(CAST(pg_get_serial_sequence(CAST(CAST(attrelid AS REGCLASS) AS TEXT), attname) AS
/// REGCLASS) AS OID)`), whose lookups would otherwise be subqueries nested in a correlated
/// subquery, which DataFusion cannot plan. The function itself stays registered for other
/// uses ([`crate::sql::functions::pg_info`]).
#[derive(Debug)]
struct NoSequencesRule;

impl SqlStatementRewriteRule for NoSequencesRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut NoSequencesVisitor);
        s
    }
}

struct NoSequencesVisitor;

impl VisitorMut for NoSequencesVisitor {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Expr::Function(f) = expr
            && f.over.is_none()
            && f.name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .is_some_and(|i| i.value.eq_ignore_ascii_case("pg_get_serial_sequence"))
            && matches!(&f.args, FunctionArguments::List(l) if l.args.len() == 2)
        {
            *expr = Expr::Cast {
                kind: CastKind::DoubleColon,
                expr: Box::new(Expr::Value(Value::Null.with_empty_span())),
                data_type: SqlDataType::Text,
                array: false,
                format: None,
            };
        }
        ControlFlow::Continue(())
    }
}

/// `pg_get_viewdef(view_oid [, pretty])` (PostgreSQL docs, 9.26 "System Information
/// Functions") is the view's name looked up in `pg_class`, then its query
/// ([`crate::sql::system::ViewDefinition`]):
///
/// ```text
///  pg_get_viewdef(x [, pretty])
///    ─► (SELECT weir_view_definition(weir_vd.relname) FROM pg_catalog.pg_class weir_vd
///        WHERE weir_vd.oid = x)
/// ```
///
/// NULL for an OID that is no materialized view (PostgreSQL errors for an OID that is no
/// relation). The `pretty` flag and a wrap column have no effect: the query is shown as it was
/// written.
#[derive(Debug)]
struct ViewDefinitionRule;

impl SqlStatementRewriteRule for ViewDefinitionRule {
    fn rewrite(&self, mut s: Statement) -> Statement {
        let _ = VisitMut::visit(&mut s, &mut ViewDefinitionVisitor);
        s
    }
}

struct ViewDefinitionVisitor;

impl VisitorMut for ViewDefinitionVisitor {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(f) = expr else {
            return ControlFlow::Continue(());
        };
        let FunctionArguments::List(list) = &f.args else {
            return ControlFlow::Continue(());
        };
        if f.over.is_some()
            || !(1..=2).contains(&list.args.len())
            || !f
                .name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .is_some_and(|i| i.value.eq_ignore_ascii_case("pg_get_viewdef"))
        {
            return ControlFlow::Continue(());
        }
        let FunctionArg::Unnamed(FunctionArgExpr::Expr(oid)) = &list.args[0] else {
            return ControlFlow::Continue(());
        };
        let Ok(mut query) = SqlParser::new(&WeirDialect)
            .try_with_sql(
                "SELECT weir_view_definition(weir_vd.relname) FROM pg_catalog.pg_class weir_vd \
                 WHERE weir_vd.oid = weir_vd_value",
            )
            .and_then(|mut p| p.parse_query())
        else {
            return ControlFlow::Continue(());
        };
        if let SetExpr::Select(select) = query.body.as_mut()
            && let Some(Expr::BinaryOp { right, .. }) = &mut select.selection
        {
            **right = oid.clone();
        }
        *expr = Expr::Subquery(query);
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn declared_parameter_types_wrap_placeholders_only() {
        let sql = "SELECT '$1', $1 + $2 -- $1\nFROM t WHERE \"$2\" = $2 AND $3 > 0";
        assert_eq!(
            super::declare_parameter_types(sql, &[Some("numeric"), None, Some("int8")]),
            "SELECT '$1', ($1::numeric) + $2 -- $1\nFROM t WHERE \"$2\" = $2 AND ($3::int8) > 0"
        );
        assert_eq!(super::declare_parameter_types(sql, &[None, None]), sql);
    }

    use super::*;

    #[test]
    fn subqueries_nest_at_most_the_limit() {
        let nested = |n: usize| format!("SELECT {}1{}", "(SELECT ".repeat(n), ")".repeat(n));
        assert!(check_subquery_depth(&nested(MAX_SUBQUERY_DEPTH)).is_ok());
        let err = check_subquery_depth(&nested(MAX_SUBQUERY_DEPTH + 1)).unwrap_err();
        assert_eq!(err.sqlstate(), "54001");
        // Many subqueries side by side are not deep.
        let wide = format!("SELECT {}", vec!["(SELECT 1)"; 40].join(" + "));
        assert!(check_subquery_depth(&wide).is_ok());
    }

    #[test]
    fn call_depth_counts_nested_calls_only() {
        assert_eq!(
            call_depth("SELECT abs(abs(x)) + (1 + (2)), f(g(h(1)), 2)"),
            3
        );
        assert_eq!(call_depth("SELECT 1 + ((1))"), 0);
        let deep = format!("SELECT {}1{}", "abs(".repeat(40), ")".repeat(40));
        assert_eq!(call_depth(&deep), 40);
        assert!(parse_one_compat(&deep).is_err());
        assert!(parse_one(&deep).is_ok());
    }

    #[test]
    fn expression_depth_follows_the_tree() {
        // A chain of n operators is n deep (plus its operands' own depth).
        let plus = format!("SELECT {}", ["1"; 11].join(" + "));
        assert_eq!(expression_depth(&plus), 10);
        // `a = i OR ...`: the comparisons sit one below the OR chain.
        let ors = (0..10)
            .map(|i| format!("a = {i}"))
            .collect::<Vec<_>>()
            .join(" OR ");
        assert_eq!(
            expression_depth(&format!("SELECT 1 FROM t WHERE {ors}")),
            10
        );
        // Commas and clauses start afresh; parentheses add a level. (An estimate: a looser
        // operator's chain does not add its operands' own chains.)
        assert_eq!(
            expression_depth("SELECT a + b, c + d FROM t WHERE e + f > 0"),
            1
        );
        assert_eq!(expression_depth("SELECT (a + (b + c))"), 4);
        assert_eq!(
            expression_depth("INSERT INTO t VALUES (-1, -2), (-3, -4)"),
            2
        );
        let refused = format!("SELECT {}", vec!["1"; MAX_EXPRESSION_DEPTH + 2].join("+"));
        let e = parse_one(&refused).unwrap_err();
        assert_eq!(e.sqlstate(), "54001");
        let taken = format!("SELECT {}", vec!["1"; MAX_EXPRESSION_DEPTH].join("+"));
        assert!(check_expression_depth(&taken).is_ok());
    }

    #[test]
    fn number_literals_read_as_postgresql_types_them() {
        use NumericLiteral::{AsWritten, Double, Numeric};
        let n = |t: &str| Numeric(t.to_string());
        // Values and scales as PostgreSQL 15's `numeric_in` gives them (`SELECT 1e3`: 1000,
        // `1.5e-3`: 0.0015, `2.50e1`: 25.0, `.5`: 0.5, `5.`: 5, `-0.0`: 0.0).
        assert_eq!(numeric_literal("1"), AsWritten);
        assert_eq!(numeric_literal("-9223372036854775808"), AsWritten);
        assert_eq!(
            numeric_literal("9223372036854775808"),
            n("9223372036854775808e0")
        );
        assert_eq!(
            numeric_literal("-9223372036854775809"),
            n("-9223372036854775809e0")
        );
        assert_eq!(numeric_literal("1.50"), AsWritten);
        assert_eq!(numeric_literal("-1.5"), AsWritten);
        assert_eq!(numeric_literal("1e3"), n("1000e0"));
        assert_eq!(numeric_literal("1E+2"), n("100e0"));
        assert_eq!(numeric_literal("1.5e-3"), n("0.0015"));
        assert_eq!(numeric_literal("2.50e1"), n("25.0"));
        assert_eq!(numeric_literal(".5"), n("0.5"));
        assert_eq!(numeric_literal("5."), n("5e0"));
        assert_eq!(numeric_literal("-0.0"), AsWritten);
        assert_eq!(numeric_literal("00012.5"), n("12.5"));
        assert_eq!(numeric_literal("0e5"), n("0e0"));
        // 38 nines fit a Decimal128; 39 digits, or a scale past 38, do not.
        let nines = "9".repeat(38);
        assert_eq!(numeric_literal(&nines), n(&format!("{nines}e0")));
        assert_eq!(numeric_literal(&format!("9{nines}")), Double);
        assert_eq!(numeric_literal("1e38"), Double);
        assert_eq!(
            numeric_literal("1e-38"),
            n(&format!("0.{}1", "0".repeat(37)))
        );
        assert_eq!(numeric_literal("1e-39"), Double);
        assert_eq!(numeric_literal("1e-1000000000"), Double);
        assert_eq!(numeric_literal("1e99999999999999999999"), Double);
        assert_eq!(numeric_literal("1e-99999999999999999999"), Double);
        assert_eq!(numeric_literal("1e-9223372036854775808"), Double);
        assert_eq!(numeric_literal("1e9223372036854775807"), Double);
        assert_eq!(numeric_literal("1_000.5"), AsWritten);
    }

    #[test]
    fn table_options_are_taken_off_create_table() {
        let sql = "CREATE TABLE t (a BIGINT, b VARCHAR(3)) WITH (connector = 'nexmark', \
                   Nexmark.Table = 'bid', nexmark.events = 100, \"Odd.Key\" = 'it''s, (x)')";
        let (rest, options) = split_table_options(sql).unwrap().unwrap();
        assert_eq!(rest, "CREATE TABLE t (a BIGINT, b VARCHAR(3))");
        let options: Vec<(&str, &str)> = options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            options,
            [
                ("connector", "nexmark"),
                ("nexmark.table", "bid"),
                ("nexmark.events", "100"),
                ("Odd.Key", "it's, (x)"),
            ]
        );
        // No clause, another statement, a column named like the keyword.
        assert!(
            split_table_options("CREATE TABLE t (a INT)")
                .unwrap()
                .is_none()
        );
        assert!(
            split_table_options("SELECT 1 WITH (a = 1)")
                .unwrap()
                .is_none()
        );
        assert!(
            split_table_options("create table t (with_x INT)")
                .unwrap()
                .is_none()
        );
        assert!(
            split_table_options("CREATE TABLE t (a INT) — é with")
                .unwrap()
                .is_none()
        );
        // Malformed lists are 42601.
        for bad in [
            "CREATE TABLE t (a INT) WITH (connector)",
            "CREATE TABLE t (a INT) WITH (connector = 'x',)",
            "CREATE TABLE t (a INT) WITH (connector = 'x'",
        ] {
            let e = split_table_options(bad).unwrap_err();
            assert_eq!(e.sqlstate(), "42601", "{bad}");
        }
    }

    #[test]
    fn view_text_is_kept_verbatim() {
        let sql = "CREATE MATERIALIZED VIEW v (a, b) AS SELECT - - x AS y, (1) AS z FROM t;";
        assert_eq!(
            view_query_text(sql).unwrap(),
            "SELECT - - x AS y, (1) AS z FROM t"
        );
        let sql = "create materialized view if not exists \"As\"\nas\n  select 1 as a";
        assert_eq!(view_query_text(sql).unwrap(), "select 1 as a");
    }

    #[test]
    fn correlated_subquery_is_not_replaced() {
        let stmt =
            parse_one("SELECT (SELECT count(*) FROM t AS x WHERE x.b < t.b) AS n FROM t").unwrap();
        let text = stmt.to_string();
        assert!(text.contains("x.b < t.b"), "{text}");
        assert!(!text.contains("LIMIT"), "{text}");
    }

    #[test]
    fn any_becomes_the_null_aware_function() {
        let stmt = parse_one("SELECT 2 < ANY(ARRAY[1, NULL])").unwrap();
        assert_eq!(
            stmt.to_string(),
            format!("SELECT {ANY_OP_FUNCTION}(2, ARRAY[1, NULL], '<')")
        );
    }

    #[test]
    fn catalog_queries_are_recognised() {
        assert!(mentions_catalog(
            &parse_one("SELECT relname FROM pg_catalog.pg_class").unwrap()
        ));
        assert!(!mentions_catalog(&parse_one("SELECT a FROM t").unwrap()));
    }
}
