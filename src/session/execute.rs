//! Statement dispatch for a session: parse, classify, plan with DataFusion, execute.
//!
//! ```text
//!  SQL text ─► split ─► SET/SHOW/RESET/FLUSH/BEGIN... (here)        ─► Output
//!                    └► sqlparser (PostgreSQL dialect, pg_catalog rewrites)
//!                        ├─ CREATE/DROP TABLE, CREATE/DROP MATERIALIZED VIEW ─► Engine (catalog, jobs)
//!                        ├─ INSERT/UPDATE/DELETE ─► DataFusion plans the rows ─► Engine::write
//!                        ├─ COPY FROM STDIN ─► CopyIn, then copy::parse ─► Engine::write
//!                        └─ SELECT/EXPLAIN ─► DataFusion over the catalog's providers
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use crate::sql::parse::parse_one;
use crate::sql::{copy, event_time, names, oid_columns, parse, provider, stream_plan, subplan};
use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ParamValues;
use datafusion::logical_expr::logical_plan::Projection;
use datafusion::logical_expr::{DdlStatement, DmlStatement, LogicalPlan, WriteOp};
use datafusion::prelude::Expr;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{CopySource, CopyTarget, ObjectType, SelectItem, Statement};

use super::{PendingCopy, Session, TransactionBlock, cursors};
use crate::common::{ChangeBatch, RelationId};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::state::table::consolidate;

/// A query's physical plan and the task context to run it in.
type PhysicalQuery = (
    Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    Arc<datafusion::execution::TaskContext>,
);

/// What a statement returns to the client.
#[derive(Debug)]
pub enum Output {
    /// Rows with their schema.
    Rows {
        /// Column names and types.
        schema: SchemaRef,
        /// The rows.
        batches: Vec<RecordBatch>,
    },
    /// A command tag such as `INSERT 0 3` or `CREATE TABLE`.
    Command(String),
    /// Rows a data-changing statement returned (`INSERT ... RETURNING`), with the command
    /// tag before its row count (`INSERT 0`, `UPDATE`, `DELETE`).
    Returning {
        /// Column names and types.
        schema: SchemaRef,
        /// The rows.
        batches: Vec<RecordBatch>,
        /// The tag's command part; the row count follows it.
        tag: String,
    },
    /// BEGIN (the session enters a transaction block).
    TransactionStart(String),
    /// COMMIT or ROLLBACK.
    TransactionEnd(String),
    /// COPY FROM STDIN started: the client now sends data for this many columns.
    CopyIn {
        /// Number of columns in the data.
        columns: usize,
        /// Whether the data is in PostgreSQL's binary COPY format (else text or CSV).
        binary: bool,
    },
    /// `COPY ... TO STDOUT`: the rows to send as copy data, in `format` (text or CSV).
    CopyOut {
        /// Column names and types.
        schema: SchemaRef,
        /// The rows.
        batches: Vec<RecordBatch>,
        /// Text or CSV, delimiter, NULL string, header, quoting.
        format: copy::CopyFormat,
    },
    /// An empty statement.
    Empty,
}

/// Splits a query string into statements at semicolons outside quotes and comments.
pub fn split_statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                cur.push(c);
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => {
                    quote = Some(c);
                    cur.push(c);
                }
                '-' if chars.peek() == Some(&'-') => {
                    for c in chars.by_ref() {
                        if c == '\n' {
                            cur.push('\n');
                            break;
                        }
                    }
                }
                ';' => {
                    if !cur.trim().is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                    cur.clear();
                }
                _ => cur.push(c),
            },
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

impl Session {
    /// Applies the `set_config(name, value, is_local)` calls of `stmt` to the session's
    /// settings before it is planned (their value is the result; `is_local` is taken as
    /// `false`: Weir's settings are the session's).
    ///
    /// # Errors
    /// `0A000` for a call whose name or value is not a string constant; the setting's own
    /// errors (`42704`, `22023`).
    fn apply_set_config(&mut self, stmt: &Statement) -> Result<()> {
        use datafusion::sql::sqlparser::ast::{
            Expr as SqlExpr, FunctionArg, FunctionArgExpr, FunctionArguments, Value,
            visit_expressions,
        };
        let mut calls: Vec<Option<(String, String)>> = Vec::new();
        let _ = visit_expressions(stmt, |e| {
            if let SqlExpr::Function(f) = e
                && f.name
                    .0
                    .last()
                    .and_then(|p| p.as_ident())
                    .is_some_and(|i| i.value.eq_ignore_ascii_case("set_config"))
            {
                let text = |a: &FunctionArg| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(SqlExpr::Value(v))) => {
                        match &v.value {
                            Value::SingleQuotedString(s) => Some(s.clone()),
                            _ => None,
                        }
                    }
                    _ => None,
                };
                let call = match &f.args {
                    FunctionArguments::List(l) if l.args.len() == 3 => {
                        text(&l.args[0]).zip(text(&l.args[1]))
                    }
                    _ => None,
                };
                calls.push(call);
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        for call in calls {
            let Some((name, value)) = call else {
                return Err(Error::not_supported(
                    "set_config with a name or value that is not a string constant",
                ));
            };
            self.vars.set(&name, &value)?;
            self.settings_changed();
        }
        Ok(())
    }
}

/// Names the unnamed output columns of an `INSERT ... SELECT` (`__weir_insert_<i>`): the
/// insert takes them by position, and DataFusion refuses a projection with two columns of one
/// name (`SELECT 1, 1`, `SELECT v, v`), which PostgreSQL allows. Every branch of a set
/// operation (`SELECT 1, 1 UNION SELECT 2, 2`) and a parenthesized source (`(SELECT 1, 1)`)
/// is named too.
fn name_insert_select_columns(stmt: &mut Statement) {
    use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, Ident, SetExpr};
    fn name(body: &mut SetExpr) {
        match body {
            SetExpr::Select(select) => {
                // A bare column keeps its name (an `ORDER BY` of a union may name it) unless
                // it is selected twice.
                let texts: Vec<String> = select.projection.iter().map(|i| i.to_string()).collect();
                for (i, item) in select.projection.iter_mut().enumerate() {
                    if let SelectItem::UnnamedExpr(e) = item {
                        let column =
                            matches!(e, SqlExpr::Identifier(_) | SqlExpr::CompoundIdentifier(_));
                        if column && texts.iter().filter(|t| **t == texts[i]).count() == 1 {
                            continue;
                        }
                        *item = SelectItem::ExprWithAlias {
                            expr: e.clone(),
                            alias: Ident::new(format!("__weir_insert_{i}")),
                        };
                    }
                }
            }
            SetExpr::Query(q) => name(q.body.as_mut()),
            SetExpr::SetOperation { left, right, .. } => {
                name(left.as_mut());
                name(right.as_mut());
            }
            _ => {}
        }
    }
    let Statement::Insert(insert) = stmt else {
        return;
    };
    if let Some(source) = insert.source.as_mut() {
        name(source.body.as_mut());
    }
}

/// DataFusion types every `VALUES` list in an `INSERT`'s source by the table's columns, by
/// position, as it types `INSERT ... VALUES` (its `PlannerContext` keeps the table's schema
/// for the whole source): `INSERT INTO t (a, b) SELECT y, x FROM (VALUES (1.5, 61)) v(x, y)`
/// read `1.5` as `a`'s `integer` (2), and a `VALUES` list of another width failed. Such a
/// source (one that is not itself a `VALUES` list but holds one) is planned alone: this
/// returns it. The insert is then planned over [`placeholder_source`] and given the source
/// by [`with_insert_source`].
fn standalone_source(stmt: &Statement) -> Option<datafusion::sql::sqlparser::ast::Query> {
    use datafusion::sql::sqlparser::ast::SetExpr;
    let Statement::Insert(i) = stmt else {
        return None;
    };
    let source = i.source.as_ref()?;
    if matches!(source.body.as_ref(), SetExpr::Values(_))
        || !source.to_string().to_ascii_uppercase().contains("VALUES")
    {
        return None;
    }
    Some(source.as_ref().clone())
}

/// The name of the `i`-th column of [`placeholder_source`].
fn placeholder_column(i: usize) -> String {
    format!("__weir_source_{i}")
}

/// `SELECT NULL AS __weir_source_0, ...`: `width` untyped columns, which an insert's
/// planning casts to the table's columns.
fn placeholder_source(width: usize) -> Result<datafusion::sql::sqlparser::ast::Query> {
    let items: Vec<String> = (0..width)
        .map(|i| format!("NULL AS {}", placeholder_column(i)))
        .collect();
    match parse_one(&format!("SELECT {}", items.join(", ")))? {
        Statement::Query(q) => Ok(*q),
        _ => Err(Error::Internal("a SELECT did not parse as a query".into())),
    }
}

/// `plan` (an insert planned over [`placeholder_source`]) reading `source` instead: the
/// insert's projection takes the placeholder's `i`-th column from `source`'s `i`-th.
///
/// # Errors
/// `XX000` when the insert did not plan as a projection over its source.
fn with_insert_source(plan: LogicalPlan, source: LogicalPlan) -> Result<LogicalPlan> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    let LogicalPlan::Dml(mut dml) = plan else {
        return Err(Error::Internal("INSERT did not plan as DML".into()));
    };
    let LogicalPlan::Projection(p) = dml.input.as_ref() else {
        return Err(Error::Internal(
            "INSERT did not plan as a projection of its source".into(),
        ));
    };
    let source_schema = Arc::clone(source.schema());
    let exprs = p
        .expr
        .iter()
        .map(|e| {
            e.clone()
                .transform_up(|e| {
                    let at = match &e {
                        Expr::Column(c) => (0..source_schema.fields().len())
                            .find(|i| c.name == placeholder_column(*i)),
                        _ => None,
                    };
                    Ok(match at {
                        Some(i) => Transformed::yes(Expr::Column(
                            datafusion::common::Column::from(source_schema.qualified_field(i)),
                        )),
                        None => Transformed::no(e),
                    })
                })
                .map(|t| t.data)
        })
        .collect::<datafusion::common::Result<Vec<_>>>()?;
    let projection = Projection::try_new(exprs, Arc::new(source))?;
    dml.input = Arc::new(LogicalPlan::Projection(projection));
    Ok(LogicalPlan::Dml(dml))
}

/// DataFusion checks `NOT NULL` on an `INSERT ... VALUES` at the `VALUES` columns, whose
/// names are `column1`, `column2`, ...: the error names the table's column instead, the one
/// the insert's projection fills from that `VALUES` column, as PostgreSQL does.
fn not_null_of_table_column(e: Error, input: &LogicalPlan, table: &str) -> Error {
    let Error::Data {
        code: "23502",
        message,
    } = &e
    else {
        return e;
    };
    let (Some(values_column), LogicalPlan::Projection(p)) = (message.split('"').nth(1), input)
    else {
        return e;
    };
    let target = p
        .expr
        .iter()
        .zip(p.schema.fields())
        .find(|(expr, _)| expr.column_refs().iter().any(|c| c.name == values_column))
        .map(|(_, f)| f.name().clone());
    match target {
        Some(column) => Error::data(
            "23502",
            format!(
                "null value in column \"{column}\" of relation \"{table}\" violates not-null \
                 constraint"
            ),
        ),
        None => e,
    }
}

/// The statement's first word, lower case, up to the first character that is not a letter
/// (`fetch/*x*/ 1 from c` is a FETCH).
fn leading_word(sql: &str) -> String {
    sql.trim_start()
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_lowercase()
}

fn words(sql: &str) -> Vec<String> {
    sql.split_whitespace()
        .map(|w| w.to_ascii_lowercase())
        .collect()
}

fn text_rows(names: &[&str], rows: Vec<Vec<String>>) -> Result<Output> {
    let schema = Arc::new(Schema::new(
        names
            .iter()
            .map(|n| Field::new(*n, DataType::Utf8, true))
            .collect::<Vec<_>>(),
    ));
    let columns: Vec<ArrayRef> = (0..names.len())
        .map(|i| {
            Arc::new(StringArray::from(
                rows.iter().map(|r| r[i].clone()).collect::<Vec<_>>(),
            )) as ArrayRef
        })
        .collect();
    let batch = crate::state::table::batch_from_columns(&schema, columns, rows.len())?;
    Ok(Output::Rows {
        schema,
        batches: vec![batch],
    })
}

/// Fills in the types of parameters DataFusion leaves open but PostgreSQL infers from a cast
/// of the bare parameter (`$1::int` is an `integer` parameter), so that drivers send values
/// of that type.
fn cast_parameter_types(plan: &LogicalPlan, out: &mut [Option<DataType>]) {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    let _ = plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                if let Expr::Cast(c) = e
                    && let Expr::Placeholder(p) = c.expr.as_ref()
                    && let Ok(i) = p.id.trim_start_matches('$').parse::<usize>()
                    && let Some(slot) = i.checked_sub(1).and_then(|i| out.get_mut(i))
                    && slot.is_none()
                {
                    *slot = Some(c.field.data_type().clone());
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    });
}

/// Types PostgreSQL gives parameters that DataFusion leaves untyped (`None` in `out`):
/// `LIMIT $n` and `OFFSET $n` are `bigint`; a parameter that is a whole SELECT-list item
/// (`SELECT $1`) is `text`, as PostgreSQL resolves an unknown-typed output column.
fn implied_parameter_types(plan: &LogicalPlan, out: &mut [Option<DataType>]) {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::ExprSchemable;
    let mut set = |e: &Expr, t: DataType| {
        let e = match e {
            Expr::Alias(a) => a.expr.as_ref(),
            other => other,
        };
        if let Expr::Placeholder(p) = e
            && let Ok(i) = p.id.trim_start_matches('$').parse::<usize>()
            && let Some(slot) = i.checked_sub(1).and_then(|i| out.get_mut(i))
            && slot.is_none()
        {
            *slot = Some(t);
        }
    };
    let _ = plan.apply_with_subqueries(|node| {
        // `x op ANY($n)`: `$n` is an array of `x`'s type (PostgreSQL describes
        // `id = ANY($1)` with a bigint `id` as `bigint[]`).
        if let Some(input) = node.inputs().first() {
            let schema = input.schema();
            let _ = node.apply_expressions(|e| {
                e.apply(|e| {
                    if let Expr::ScalarFunction(f) = e
                        && f.name() == parse::ANY_OP_FUNCTION
                        && let [x, array, _] = f.args.as_slice()
                        && matches!(array, Expr::Placeholder(_))
                        && let Ok(t) = x.get_type(schema)
                        && t != DataType::Null
                    {
                        set(array, DataType::new_list(t, true));
                    }
                    Ok(TreeNodeRecursion::Continue)
                })
            });
        }
        match node {
            LogicalPlan::Limit(l) => {
                for e in [&l.skip, &l.fetch].into_iter().flatten() {
                    set(e, DataType::Int64);
                }
            }
            LogicalPlan::Projection(p) => {
                for e in &p.expr {
                    set(e, DataType::Utf8);
                }
            }
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    });
}

/// Takes the RETURNING list off an INSERT, UPDATE or DELETE (DataFusion plans the statement
/// without it; the session evaluates it over the written rows).
fn take_returning(stmt: &mut Statement) -> Option<Vec<SelectItem>> {
    match stmt {
        Statement::Insert(i) => i.returning.take(),
        Statement::Update(u) => u.returning.take(),
        Statement::Delete(d) => d.returning.take(),
        _ => None,
    }
}

/// Takes an `ON CONFLICT` clause and the `AS` alias off an INSERT (DataFusion plans the
/// insert without either; the session resolves conflicts over the proposed rows, and
/// `RETURNING` and `ON CONFLICT` see the table under the alias).
fn take_on_conflict(
    stmt: &mut Statement,
) -> (
    Option<datafusion::sql::sqlparser::ast::OnConflict>,
    Option<datafusion::sql::sqlparser::ast::Ident>,
) {
    use datafusion::sql::sqlparser::ast::OnInsert;
    let Statement::Insert(i) = stmt else {
        return (None, None);
    };
    let alias = i.table_alias.take().map(|a| a.alias);
    if !matches!(i.on, Some(OnInsert::OnConflict(_))) {
        return (None, alias);
    }
    match i.on.take() {
        Some(OnInsert::OnConflict(clause)) => (Some(clause), alias),
        _ => (None, alias),
    }
}

/// Splits `text` at `sep` outside single quotes.
fn split_top_level(text: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in text.chars() {
        if c == '\'' {
            quoted = !quoted;
        }
        if c == sep && !quoted {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

/// Strips matching quotes from a SET value.
fn unquote(v: &str) -> String {
    let v = v.trim();
    if v.len() >= 2
        && ((v.starts_with('\'') && v.ends_with('\'')) || (v.starts_with('"') && v.ends_with('"')))
    {
        v[1..v.len() - 1].replace("''", "'")
    } else {
        v.to_string()
    }
}

impl Session {
    /// Executes one statement (no parameters).
    ///
    /// # Errors
    /// Any error of parsing, planning or execution, with its SQLSTATE.
    pub async fn execute(&mut self, sql: &str) -> Result<Output> {
        self.execute_with_params(sql, None).await
    }

    /// Executes one statement, binding `$n` parameters when given.
    ///
    /// # Errors
    /// Any error of parsing, planning or execution, with its SQLSTATE.
    pub async fn execute_with_params(
        &mut self,
        sql: &str,
        params: Option<ParamValues>,
    ) -> Result<Output> {
        // A statement containing the failpoint's message panics (tests of the connection's
        // panic guard; other statements are unaffected).
        if let Some(marker) = crate::failpoint::eval("session::statement_panic")
            && sql.contains(marker.as_str())
        {
            panic!("failpoint session::statement_panic");
        }
        if self.transaction.as_ref().is_some_and(|t| t.aborted) {
            return self.in_aborted_block(sql).await;
        }
        // Pin one snapshot of all views for the whole statement.
        self.schema.pin(Some(self.engine.visible()));
        let result = self.dispatch(sql, params).await;
        self.schema.pin(None);
        if result.is_err()
            && let Some(log) = &mut self.transaction
        {
            log.aborted = true;
        }
        result
    }

    /// A statement in a transaction block a failed statement aborted (PostgreSQL's rules):
    /// `ROLLBACK` drops the block; `ROLLBACK TO SAVEPOINT` drops the writes after the
    /// savepoint and resumes the block; `COMMIT` drops the block too and says `ROLLBACK`;
    /// anything else is `25P02`.
    ///
    /// # Errors
    /// `25P02` for other statements; the errors of the undo.
    async fn in_aborted_block(&mut self, sql: &str) -> Result<Output> {
        let w = words(sql.trim().trim_end_matches(';'));
        let first = w.first().map(String::as_str).unwrap_or("");
        match first {
            "rollback" | "abort" if w.iter().any(|x| x == "to") => {
                let name = w.last().cloned().unwrap_or_default();
                self.rollback_to(&name).await?;
                if let Some(log) = &mut self.transaction {
                    log.aborted = false;
                }
                Ok(Output::Command("ROLLBACK".into()))
            }
            "rollback" | "abort" | "commit" | "end" => {
                self.cursors.rollback();
                if let Some(block) = self.transaction.take() {
                    self.rollback_block_and_settings(block).await?;
                }
                Ok(Output::TransactionEnd("ROLLBACK".into()))
            }
            _ => Err(Error::plan(
                "25P02",
                "current transaction is aborted, commands ignored until end of transaction block",
            )),
        }
    }

    async fn dispatch(&mut self, sql: &str, params: Option<ParamValues>) -> Result<Output> {
        let trimmed = sql.trim().trim_end_matches(';').trim();
        if trimmed.is_empty() {
            return Ok(Output::Empty);
        }
        let mut params = params;
        if let Some(out) = self.cursor_statement(trimmed, &mut params).await? {
            return Ok(out);
        }
        if let Some(out) = self.special(trimmed).await? {
            return Ok(out);
        }
        // Clauses the parser does not take are taken off first: a view's trailing
        // `EMIT ON WINDOW CLOSE`, a connector table's `WITH (...)` options (their keys are
        // dotted names), a table's `WATERMARK FOR` and `APPEND ONLY`.
        let without_emit = event_time::split_emit_on_window_close(trimmed);
        let emit = without_emit.is_some();
        let trimmed = without_emit.as_deref().unwrap_or(trimmed);
        let (text, with_options) = match parse::split_table_options(trimmed)? {
            Some((rest, options)) => (rest, Some(options)),
            None => (trimmed.to_string(), None),
        };
        let (text, time) = match event_time::split_table_clauses(&text)? {
            Some((rest, clauses)) => (rest, Some(clauses)),
            None => (text, None),
        };
        let (text, with_data) = match parse::split_with_data(&text) {
            Some((rest, with_data)) => (rest, with_data),
            None => (text, true),
        };
        let stmt = parse_one(&text)?;
        self.apply_set_config(&stmt)?;
        if emit
            && !matches!(&stmt, Statement::CreateView(cv) if cv.materialized)
            && !matches!(&stmt, Statement::Explain { statement, .. }
                if matches!(statement.as_ref(), Statement::CreateView(cv) if cv.materialized))
        {
            return Err(Error::Parse(
                "EMIT ON WINDOW CLOSE applies to CREATE MATERIALIZED VIEW only".into(),
            ));
        }
        let ddl = match &stmt {
            Statement::CreateTable(_) => Some("CREATE TABLE".to_string()),
            Statement::CreateIndex(_) => Some("CREATE INDEX".to_string()),
            Statement::CreateView(_) => Some("CREATE MATERIALIZED VIEW".to_string()),
            Statement::Drop { object_type, .. } => Some(format!("DROP {object_type}")),
            Statement::Truncate(_) => Some("TRUNCATE TABLE".to_string()),
            _ => None,
        };
        if let Some(command) = ddl {
            self.check_read_write(&command)?;
        }
        match stmt {
            Statement::CreateTable(ref ct) if ct.query.is_some() => {
                if with_options.is_some() || time.is_some() {
                    return Err(Error::not_supported(
                        "CREATE TABLE ... AS with connector options, WATERMARK or APPEND ONLY",
                    ));
                }
                let ct = ct.clone();
                self.create_table_as(ct, &text, with_data).await
            }
            Statement::CreateTable(ref ct) => {
                let name = object_name(&ct.name)?;
                let existed = self.engine.relation(&name).map(|r| r.id);
                let out = self.create_table(stmt, with_options, time).await?;
                self.note_created(&name, existed);
                Ok(out)
            }
            Statement::CreateIndex(ci) => self.create_index(ci).await,
            Statement::CreateView(cv) => {
                if !cv.materialized {
                    return Err(Error::not_supported(
                        "CREATE VIEW is not supported; use CREATE MATERIALIZED VIEW",
                    ));
                }
                if cv.or_replace {
                    return Err(Error::not_supported(
                        "CREATE OR REPLACE MATERIALIZED VIEW is not supported",
                    ));
                }
                let name = object_name(&cv.name)?;
                let existed = self.engine.relation(&name).map(|r| r.id);
                let columns: Vec<String> = cv.columns.iter().map(|c| ident(&c.name)).collect();
                // The query as written: printing the parsed tree back is not always SQL that
                // parses to the same tree.
                let query = parse::view_query_text(trimmed)?;
                // Every write acknowledged before the CREATE is in the backfill.
                self.engine.flush().await;
                let query = self.view_query_with_columns(&query, &columns).await?;
                let (plan, reads) = self.plan_query_reading(&query).await?;
                // The stored query keeps the clause, so that recovery plans it alike.
                let query = if emit {
                    format!("{query} {}", event_time::EMIT_ON_WINDOW_CLOSE)
                } else {
                    query
                };
                let settings = self.vars.job_settings();
                let engine = Arc::clone(&self.engine);
                let if_not_exists = cv.if_not_exists;
                let txn = Some(self.txn);
                let view = name.clone();
                let created = tokio::task::spawn_blocking(move || {
                    engine.create_view(
                        &view,
                        &query,
                        &reads,
                        || stream_plan::plan_view(&plan, emit),
                        settings,
                        if_not_exists,
                        txn,
                    )
                })
                .await
                .map_err(|e| Error::Internal(e.to_string()))??;
                if !created {
                    self.already_exists(&name);
                }
                self.note_created(&name, existed);
                Ok(Output::Command("CREATE MATERIALIZED VIEW".into()))
            }
            Statement::Drop {
                object_type,
                if_exists,
                names,
                cascade,
                ..
            } => {
                let deferrable = matches!(
                    object_type,
                    ObjectType::Table | ObjectType::MaterializedView | ObjectType::Index
                );
                if self.transaction.is_some() || (self.implicit_ddl.is_some() && deferrable) {
                    return self
                        .defer_drop(object_type, if_exists, cascade, &names)
                        .await;
                }
                if object_type == ObjectType::Index {
                    for n in &names {
                        let name = object_name(n)?;
                        let engine = Arc::clone(&self.engine);
                        let target = name.clone();
                        let dropped = tokio::task::spawn_blocking(move || {
                            engine.drop_index(&target, if_exists)
                        })
                        .await
                        .map_err(|e| Error::Internal(e.to_string()))??;
                        if !dropped {
                            self.does_not_exist("index", &name);
                        }
                    }
                    return Ok(Output::Command("DROP INDEX".into()));
                }
                let (table, tag) = match object_type {
                    ObjectType::Table => (true, "DROP TABLE"),
                    ObjectType::MaterializedView => (false, "DROP MATERIALIZED VIEW"),
                    other => {
                        return Err(Error::not_supported(format!(
                            "DROP {other} is not supported"
                        )));
                    }
                };
                for n in &names {
                    let name = object_name(n)?;
                    let engine = Arc::clone(&self.engine);
                    let target = name.clone();
                    let dropped = tokio::task::spawn_blocking(move || {
                        engine.drop_relation(&target, table, if_exists, cascade)
                    })
                    .await
                    .map_err(|e| Error::Internal(e.to_string()))??;
                    if !dropped {
                        self.does_not_exist(
                            if table { "table" } else { "materialized view" },
                            &name,
                        );
                    }
                }
                Ok(Output::Command(tag.into()))
            }
            Statement::Insert(_) | Statement::Update { .. } | Statement::Delete(_) => {
                self.dml(stmt, params).await
            }
            Statement::Truncate(t) => self.truncate(t).await,
            Statement::Query(_) => {
                let catalog = parse::mentions_catalog(&stmt);
                let result = match self.plan_select(trimmed, stmt).await {
                    Ok((plan, names)) => match bind(plan, params.clone()) {
                        Ok(plan) => self.run_query(plan, names).await,
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(e),
                };
                match result {
                    // A client's catalog query DataFusion cannot run as written (correlated
                    // subqueries psql sends) gets the whole compatibility layer.
                    Err(e) if catalog => match parse::parse_one_compat(trimmed) {
                        Ok(compat) => match self.plan_statement(compat).await {
                            Ok(plan) => match bind(plan, params) {
                                Ok(plan) => self.run_query(plan, None).await.map_err(|_| e),
                                Err(_) => Err(e),
                            },
                            Err(_) => Err(e),
                        },
                        Err(_) => Err(e),
                    },
                    other => other,
                }
            }
            Statement::Explain { ref statement, .. } => {
                if let Statement::CreateView(cv) = statement.as_ref()
                    && cv.materialized
                {
                    return self.explain_view(cv, trimmed, emit).await;
                }
                let plan = self.plan_with_fallback(trimmed, stmt).await?;
                self.run_query(plan, None).await
            }
            Statement::Copy {
                source,
                to,
                target,
                options,
                legacy_options,
                ..
            } => {
                if to {
                    if !matches!(target, CopyTarget::Stdout) {
                        return Err(Error::not_supported(
                            "COPY TO a server file or program is not supported; use COPY ... TO STDOUT (psql's \\copy)",
                        ));
                    }
                    let format = copy::CopyFormat::from_options(&options, &legacy_options)?;
                    if format.binary {
                        return Err(Error::not_supported(
                            "COPY TO STDOUT in binary format (use text or CSV)",
                        ));
                    }
                    let query = match source {
                        CopySource::Table {
                            table_name,
                            columns,
                        } => {
                            let list = if columns.is_empty() {
                                "*".to_string()
                            } else {
                                columns
                                    .iter()
                                    .map(ToString::to_string)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            };
                            format!("SELECT {list} FROM {table_name}")
                        }
                        CopySource::Query(q) => q.to_string(),
                    };
                    let stmt = parse_one(&query)?;
                    let (plan, names) = self.plan_select(&query, stmt).await?;
                    let Output::Rows { schema, batches } = self.run_query(plan, names).await?
                    else {
                        return Err(Error::Internal("COPY TO: a query without rows".into()));
                    };
                    return Ok(Output::CopyOut {
                        schema,
                        batches,
                        format,
                    });
                }
                if !matches!(target, CopyTarget::Stdin) {
                    return Err(Error::not_supported(
                        "COPY FROM a server file or program is not supported; use COPY ... FROM STDIN (psql's \\copy)",
                    ));
                }
                let CopySource::Table {
                    table_name,
                    columns,
                } = source
                else {
                    return Err(Error::not_supported("COPY (query) FROM is not supported"));
                };
                self.check_read_write("COPY FROM")?;
                let name = object_name(&table_name)?;
                let def = self.engine.relation(&name).ok_or_else(|| {
                    Error::catalog("42P01", format!("relation \"{name}\" does not exist"))
                })?;
                if !def.is_table() {
                    return Err(Error::plan(
                        "42809",
                        format!("cannot copy to materialized view \"{name}\""),
                    ));
                }
                let cols = if columns.is_empty() {
                    (0..def.schema.fields().len()).collect()
                } else {
                    columns
                        .iter()
                        .map(|c| {
                            let c = ident(c);
                            def.schema.index_of(&c).map_err(|_| {
                                Error::plan(
                                    "42703",
                                    format!("column \"{c}\" of relation \"{name}\" does not exist"),
                                )
                            })
                        })
                        .collect::<Result<Vec<_>>>()?
                };
                self.engine.check_writable(def.id)?;
                let mut format = copy::CopyFormat::from_options(&options, &legacy_options)?;
                let zone = self.vars.time_zone();
                if zone.setting != "UTC" {
                    format.zone = Some(zone.arrow);
                }
                let n = cols.len();
                let binary = format.binary;
                self.copy = Some(PendingCopy {
                    table: def.id,
                    table_name: def.name.clone(),
                    columns: cols,
                    format,
                    data: Vec::new(),
                });
                Ok(Output::CopyIn { columns: n, binary })
            }
            Statement::ShowTables { .. } => {
                let rows = self
                    .engine
                    .catalog()
                    .visible()
                    .filter(|r| r.is_table())
                    .map(|r| vec![r.name.clone()])
                    .collect();
                text_rows(&["name"], rows)
            }
            other => {
                let kind = other.to_string();
                let kind: Vec<&str> = kind.split_whitespace().take(2).collect();
                Err(Error::not_supported(format!(
                    "statement {} is not supported",
                    kind.join(" ")
                )))
            }
        }
    }

    /// `ALTER MATERIALIZED VIEW name SET (setting = value, ...)` and
    /// `ALTER MATERIALIZED VIEW name RESUME`.
    async fn alter_view(&mut self, sql: &str) -> Result<Output> {
        let body = sql.trim().trim_end_matches(';').trim();
        // Skip the three keywords.
        let mut rest = body;
        for _ in 0..3 {
            rest = rest.trim_start();
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            rest = &rest[end..];
        }
        let rest = rest.trim();
        let (name, tail) = if let Some(stripped) = rest.strip_prefix('"') {
            let end = stripped
                .find('"')
                .ok_or_else(|| Error::Parse("syntax error: unterminated quoted name".into()))?;
            (stripped[..end].to_string(), stripped[end + 1..].trim())
        } else {
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '(')
                .unwrap_or(rest.len());
            (rest[..end].to_ascii_lowercase(), rest[end..].trim())
        };
        if name.is_empty() {
            return Err(Error::Parse(
                "syntax error: ALTER MATERIALIZED VIEW needs a name".into(),
            ));
        }
        // Views live in schema public.
        let name = name
            .strip_prefix("public.")
            .map(str::to_string)
            .unwrap_or(name);
        let lower = tail.to_ascii_lowercase();
        let engine = Arc::clone(&self.engine);
        if lower == "resume" {
            tokio::task::spawn_blocking(move || engine.resume_view(&name))
                .await
                .map_err(|e| Error::Internal(e.to_string()))??;
            return Ok(Output::Command("ALTER MATERIALIZED VIEW".into()));
        }
        let Some(list) = lower
            .strip_prefix("set")
            .map(|_| tail[3..].trim())
            .and_then(|t| t.strip_prefix('('))
            .and_then(|t| t.strip_suffix(')'))
        else {
            if lower.starts_with("set") {
                return Err(Error::Parse(
                    "syntax error: expected ALTER MATERIALIZED VIEW name SET (setting = value, ...)"
                        .into(),
                ));
            }
            let what = tail.split_whitespace().next().unwrap_or("").to_uppercase();
            return Err(Error::NotSupported(format!(
                "ALTER MATERIALIZED VIEW ... {what} is not supported; use SET (setting = value, ...) or RESUME"
            )));
        };
        let mut changes = Vec::new();
        for item in split_top_level(list, ',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let (k, v) = item.split_once('=').ok_or_else(|| {
                Error::Parse(format!(
                    "syntax error in ALTER MATERIALIZED VIEW: \"{item}\""
                ))
            })?;
            changes.push((unquote(k.trim()).to_ascii_lowercase(), unquote(v.trim())));
        }
        if changes.is_empty() {
            return Err(Error::Parse(
                "syntax error: ALTER MATERIALIZED VIEW ... SET needs at least one setting".into(),
            ));
        }
        tokio::task::spawn_blocking(move || engine.alter_view_settings(&name, &changes))
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
        Ok(Output::Command("ALTER MATERIALIZED VIEW".into()))
    }

    /// `DECLARE ... CURSOR`, `FETCH`, `MOVE` and `CLOSE` (see [`cursors`]). A cursor's query
    /// is planned as a query (the same rewrites and names) and its stream kept open; `FETCH`
    /// reads the next rows from it, under the tag `FETCH n`. `DECLARE` takes the statement's
    /// parameters; other statements leave them.
    ///
    /// # Errors
    /// `25P01` for `DECLARE` without `WITH HOLD` outside a transaction block (as in
    /// PostgreSQL); the errors of [`cursors::parse_declare`], [`cursors::parse_fetch`] and
    /// [`cursors::Cursors`]; the query's planning and execution errors.
    async fn cursor_statement(
        &mut self,
        sql: &str,
        params: &mut Option<ParamValues>,
    ) -> Result<Option<Output>> {
        let verb = leading_word(sql);
        match verb.as_str() {
            "declare" => {
                let declare = cursors::parse_declare(sql)?;
                if !declare.hold && self.transaction.is_none() {
                    return Err(Error::plan(
                        "25P01",
                        "DECLARE CURSOR can only be used in transaction blocks",
                    ));
                }
                let stmt = parse_one(&declare.query)?;
                if !matches!(stmt, Statement::Query(_)) {
                    return Err(Error::Parse(
                        "syntax error: a cursor's FOR clause must be a query".into(),
                    ));
                }
                let (plan, names) = self.plan_select(&declare.query, stmt).await?;
                let plan = bind(plan, params.take())?;
                let (physical, task, schema) = self.physical_query(plan, names).await?;
                let stream = datafusion::physical_plan::execute_stream(physical, task)?;
                let in_block = self.transaction.is_some();
                self.cursors.declare(
                    declare.name,
                    cursors::Cursor::new(schema, stream, declare.hold, in_block),
                )?;
                Ok(Some(Output::Command("DECLARE CURSOR".into())))
            }
            "fetch" | "move" => {
                let fetch = cursors::parse_fetch(sql)?;
                let cursor = self.cursors.get(&fetch.name)?;
                let batches = cursor.take(fetch.count).await?;
                if verb == "move" {
                    let n: usize = batches.iter().map(RecordBatch::num_rows).sum();
                    return Ok(Some(Output::Command(format!("MOVE {n}"))));
                }
                Ok(Some(Output::Returning {
                    schema: cursor.schema.clone(),
                    batches,
                    tag: "FETCH".into(),
                }))
            }
            "close" => match cursors::parse_close(sql)? {
                None => {
                    self.cursors.close_all();
                    Ok(Some(Output::Command("CLOSE CURSOR ALL".into())))
                }
                Some(name) => {
                    self.cursors.close(&name)?;
                    Ok(Some(Output::Command("CLOSE CURSOR".into())))
                }
            },
            _ => Ok(None),
        }
    }

    /// Handles the statements sqlparser does not know or that need session state.
    async fn special(&mut self, sql: &str) -> Result<Option<Output>> {
        let w = words(sql);
        if let Some(out) = self.role_statement(sql, &w).await? {
            return Ok(Some(out));
        }
        let first = w[0].as_str();
        let out = match first {
            "flush" if w.len() == 1 => {
                // A finite, unthrottled connector stream is whole before the epoch closes.
                self.engine.wait_for_sources().await;
                self.engine.flush().await;
                Output::Command("FLUSH".into())
            }
            "alter" if w.len() >= 3 && w[1] == "materialized" && w[2] == "view" => {
                self.alter_view(sql).await?
            }
            "begin" | "start" => {
                if self.transaction.is_some() {
                    self.notify(
                        super::NoticeLevel::Warning,
                        "25001",
                        "there is already a transaction in progress",
                    );
                } else {
                    // The implicit transaction's writes so far become the block's, as in
                    // PostgreSQL.
                    let read_only = w.windows(2).any(|p| p[0] == "read" && p[1] == "only");
                    self.transaction = Some(TransactionBlock {
                        applied: self.implicit.take().unwrap_or_default(),
                        ddl: self.implicit_ddl.take().unwrap_or_default(),
                        read_only,
                        settings_at_begin: Some(self.vars.clone()),
                        ..TransactionBlock::default()
                    });
                }
                Output::TransactionStart("BEGIN".into())
            }
            "commit" | "end" => {
                // Outside a block, COMMIT ends the implicit transaction (PostgreSQL warns
                // that no transaction is in progress).
                self.commit_implicit().await?;
                self.cursors.commit();
                match self.transaction.take() {
                    Some(mut block) => {
                        let without_local = block.settings_without_local.take();
                        self.commit_block(block).await?;
                        if let Some(vars) = without_local {
                            self.restore_settings(vars);
                        }
                    }
                    None => self.no_transaction(),
                }
                Output::TransactionEnd("COMMIT".into())
            }
            // Savepoints mark a place in the block's writes; prepared statements and
            // portals are the connection's (the protocol layer replaces one of the same
            // name); Weir has no notification channels.
            "rollback" | "abort" if w.iter().any(|x| x == "to") => {
                let name = w.last().cloned().unwrap_or_default();
                self.rollback_to(&name).await?;
                Output::Command("ROLLBACK".into())
            }
            "rollback" | "abort" => {
                self.cursors.rollback();
                if self.transaction.is_none() {
                    self.abort_implicit().await;
                    self.no_transaction();
                }
                if let Some(block) = self.transaction.take() {
                    self.rollback_block_and_settings(block).await?;
                }
                Output::TransactionEnd("ROLLBACK".into())
            }
            "savepoint" if w.len() == 2 => {
                let settings = self.vars.clone();
                let Some(log) = &mut self.transaction else {
                    return Err(Error::plan(
                        "25P01",
                        "SAVEPOINT can only be used in transaction blocks",
                    ));
                };
                log.savepoints.push(super::Savepoint {
                    name: w[1].clone(),
                    writes: log.writes.len(),
                    created: log.ddl.created.len(),
                    hid: log.ddl.hid.len(),
                    index_drops: log.ddl.index_drops.len(),
                    created_indexes: log.ddl.created_indexes.len(),
                    settings,
                    settings_without_local: log.settings_without_local.clone(),
                });
                Output::Command("SAVEPOINT".into())
            }
            "release" if (2..=3).contains(&w.len()) => {
                let Some(log) = &mut self.transaction else {
                    return Err(Error::plan(
                        "25P01",
                        "RELEASE SAVEPOINT can only be used in transaction blocks",
                    ));
                };
                let name = &w[w.len() - 1];
                let Some(i) = log.savepoints.iter().rposition(|s| s.name == *name) else {
                    return Err(Error::plan(
                        "3B001",
                        format!("savepoint \"{name}\" does not exist"),
                    ));
                };
                log.savepoints.truncate(i);
                Output::Command("RELEASE".into())
            }
            // The block's access mode (PostgreSQL's SET TRANSACTION READ ONLY | READ WRITE).
            "set"
                if w.len() >= 4
                    && w[1] == "transaction"
                    && w.windows(2)
                        .any(|p| p[0] == "read" && (p[1] == "only" || p[1] == "write")) =>
            {
                if let Some(block) = &mut self.transaction {
                    block.read_only = w.windows(2).any(|p| p[0] == "read" && p[1] == "only");
                }
                Output::Command("SET".into())
            }
            "discard" if w.len() == 2 => match w[1].as_str() {
                "all" => {
                    self.cursors.close_all();
                    self.vars.reset_all();
                    self.settings_changed();
                    Output::Command("DISCARD ALL".into())
                }
                "plans" | "sequences" => {
                    Output::Command(format!("DISCARD {}", w[1].to_uppercase()))
                }
                "temp" | "temporary" => Output::Command("DISCARD TEMP".into()),
                _ => return Ok(None),
            },
            "deallocate" if (2..=3).contains(&w.len()) => {
                if w.last().is_some_and(|x| x == "all") {
                    Output::Command("DEALLOCATE ALL".into())
                } else {
                    Output::Command("DEALLOCATE".into())
                }
            }
            "unlisten" if w.len() == 2 => Output::Command("UNLISTEN".into()),
            "set" => {
                let rest = sql[3..].trim();
                let rest = rest
                    .strip_prefix("SESSION ")
                    .or_else(|| rest.strip_prefix("session "))
                    .unwrap_or(rest)
                    .trim();
                if rest.to_ascii_lowercase().starts_with("transaction") {
                    return Ok(Some(Output::Command("SET".into())));
                }
                // `SET LOCAL` lasts until the block ends; outside one it does nothing but
                // warn (PostgreSQL's reference page "SET").
                let local = rest.len() > 6 && rest[..6].eq_ignore_ascii_case("local ");
                let rest = if local { rest[6..].trim() } else { rest };
                if local {
                    match &mut self.transaction {
                        None => {
                            self.notify(
                                super::NoticeLevel::Warning,
                                "25P01",
                                "SET LOCAL can only be used in transaction blocks",
                            );
                            return Ok(Some(Output::Command("SET".into())));
                        }
                        Some(block) => {
                            if block.settings_without_local.is_none() {
                                block.settings_without_local = Some(self.vars.clone());
                            }
                        }
                    }
                }
                let lower = rest.to_ascii_lowercase();
                let (name, value) = if let Some(v) = lower.strip_prefix("time zone") {
                    (
                        "timezone".to_string(),
                        rest[rest.len() - v.len()..].trim().to_string(),
                    )
                } else if let Some(i) = rest.find('=') {
                    (
                        rest[..i].trim().to_string(),
                        rest[i + 1..].trim().to_string(),
                    )
                } else if let Some(i) = lower.find(" to ") {
                    (
                        rest[..i].trim().to_string(),
                        rest[i + 4..].trim().to_string(),
                    )
                } else {
                    return Err(Error::Parse(format!("syntax error in SET: {sql}")));
                };
                let name = unquote(&name);
                let local_zone =
                    name.eq_ignore_ascii_case("timezone") && value.eq_ignore_ascii_case("local");
                let reset = value.eq_ignore_ascii_case("default") || local_zone;
                let apply = |vars: &mut crate::settings::SessionVars| {
                    if reset {
                        vars.reset(&name)
                    } else {
                        vars.set(&name, &unquote(&value))
                    }
                };
                apply(&mut self.vars)?;
                // A plain SET after a SET LOCAL in the block outlives the block.
                if !local
                    && let Some(vars) = self
                        .transaction
                        .as_mut()
                        .and_then(|b| b.settings_without_local.as_mut())
                {
                    apply(vars)?;
                }
                self.settings_changed();
                Output::Command("SET".into())
            }
            // `RESET TIME ZONE` is `RESET timezone` (as `SET TIME ZONE` is `SET timezone`).
            "reset" if w.len() == 2 || (w.len() == 3 && w[1] == "time" && w[2] == "zone") => {
                let apply = |vars: &mut crate::settings::SessionVars| {
                    if w[1] == "all" {
                        vars.reset_all();
                        Ok(())
                    } else if w.len() == 3 {
                        vars.reset("timezone")
                    } else {
                        vars.reset(&w[1])
                    }
                };
                apply(&mut self.vars)?;
                if let Some(vars) = self
                    .transaction
                    .as_mut()
                    .and_then(|b| b.settings_without_local.as_mut())
                {
                    apply(vars)?;
                }
                self.settings_changed();
                Output::Command("RESET".into())
            }
            "show" if w.len() >= 2 => {
                let what = w[1..].join(" ");
                match what.as_str() {
                    "all" => {
                        let rows = self
                            .vars
                            .all()
                            .into_iter()
                            .map(|(n, v, d)| vec![n, v, d])
                            .collect();
                        text_rows(&["name", "setting", "description"], rows)?
                    }
                    "materialized views" => {
                        let rows = self
                            .engine
                            .catalog()
                            .visible()
                            .filter(|r| !r.is_table())
                            .map(|r| vec![r.name.clone()])
                            .collect();
                        text_rows(&["name"], rows)?
                    }
                    "tables" => {
                        let rows = self
                            .engine
                            .catalog()
                            .visible()
                            .filter(|r| r.is_table())
                            .map(|r| vec![r.name.clone()])
                            .collect();
                        text_rows(&["name"], rows)?
                    }
                    _ if w.len() == 2 => {
                        let name = unquote(&w[1]);
                        let v = self.vars.get(&name)?;
                        // PostgreSQL names the column after the setting: its canonical
                        // spelling for its own (`TimeZone`), the whole name otherwise
                        // (`streaming.parallelism`).
                        let col = match name.to_ascii_lowercase().as_str() {
                            "timezone" => "TimeZone".to_string(),
                            "datestyle" => "DateStyle".to_string(),
                            "intervalstyle" => "IntervalStyle".to_string(),
                            lower => lower.to_string(),
                        };
                        text_rows(&[col.as_str()], vec![vec![v]])?
                    }
                    "time zone" => {
                        text_rows(&["TimeZone"], vec![vec![self.vars.get("timezone")?]])?
                    }
                    _ if w.len() == 4 && w[1] == "transaction" && w[2] == "isolation" => text_rows(
                        &["transaction_isolation"],
                        vec![vec!["read committed".into()]],
                    )?,
                    _ => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(out))
    }

    async fn plan_statement(&self, stmt: Statement) -> Result<LogicalPlan> {
        let state = self.ctx.state();
        match self.plan_columns_known(stmt.clone()).await {
            // A column alias list shorter than its relation (`t AS j(a)`) renames the first
            // columns only: filled up with the others' names, the statement is planned again
            // from the start (its USING joins see the filled names).
            Err(e) if crate::sql::alias_lists::is_alias_list_error(&e.to_string()) => {
                let mut stmt = stmt;
                let probes = crate::sql::alias_lists::probes(&stmt);
                let columns = probe_columns(&state, probes).await;
                if crate::sql::alias_lists::fill(&mut stmt, columns)? {
                    self.plan_columns_known(stmt).await
                } else {
                    Err(e)
                }
            }
            other => other,
        }
    }

    /// [`Self::plan_statement`] once the statement's alias lists name every column.
    async fn plan_columns_known(&self, mut stmt: Statement) -> Result<LogicalPlan> {
        let state = self.ctx.state();
        crate::sql::using_joins::derive_aliased_joins(&mut stmt);
        // USING and NATURAL joins get PostgreSQL's merged columns: the rewrite needs the
        // columns of the joined relations, planned here one by one.
        let probes = crate::sql::using_joins::probes(&stmt);
        if !probes.is_empty() {
            let columns = probe_columns(&state, probes).await;
            crate::sql::using_joins::rewrite(&mut stmt, columns);
        }
        plan_final(&state, stmt).await
    }

    /// Plans and optimizes a view's query.
    async fn plan_query(&self, query: &str) -> Result<LogicalPlan> {
        Ok(self.plan_query_reading(query).await?.0)
    }

    /// Plans and optimizes a view's query; also the names of the tables and views (schema
    /// `public`) the query names, read from the plan before the optimizer may drop a scan
    /// (`WHERE 1 = 0`): the view depends on each of them, as a PostgreSQL view on every
    /// relation its query mentions.
    async fn plan_query_reading(&self, query: &str) -> Result<(LogicalPlan, Vec<String>)> {
        let stmt = parse_one(query)?;
        if !matches!(stmt, Statement::Query(_)) {
            return Err(Error::Parse(
                "a materialized view needs a SELECT query".into(),
            ));
        }
        // The view's forms of subquery comparisons; where they do not plan (a correlated
        // subquery), the query's forms, and their errors.
        let view_stmt = parse::parse_view_query(query)?;
        let plan = if view_stmt == stmt {
            self.plan_naming_casts(stmt).await?
        } else {
            match self.plan_naming_casts(view_stmt).await {
                Ok(plan) => plan,
                Err(_) => self.plan_naming_casts(stmt).await?,
            }
        };
        let mut reads = Vec::new();
        plan.apply_with_subqueries(|node| {
            if let LogicalPlan::TableScan(scan) = node
                && scan
                    .table_name
                    .schema()
                    .is_none_or(|s| s.eq_ignore_ascii_case("public"))
                && !reads.iter().any(|r| r == scan.table_name.table())
            {
                reads.push(scan.table_name.table().to_string());
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        })?;
        // `now()` stays a function of the epoch (temporal filters), not the planning time.
        let plan = crate::sql::temporal::mark_now(plan)?;
        // Without `eliminate_join`: it turns an inner join whose output needs only one
        // side, the other unique on the key, into a semi join, carrying the join's
        // non-equality conditions into a semi join filter the dataflow does not take
        // (Nexmark q5: `ON starttime = starttime_c AND num >= maxn`); the inner join with
        // those conditions it does take.
        // Without `replace_distinct_aggregate` when there is a `DISTINCT ON`: it becomes an
        // aggregate of `first_value(... ORDER BY ...)` calls, where the dataflow keeps it a
        // Top-1 per key instead (ordered state, so a retracted first row is replaced).
        let distinct_on = datafusion::common::tree_node::TreeNode::exists(&plan, |node| {
            Ok(matches!(
                node,
                LogicalPlan::Distinct(datafusion::logical_expr::Distinct::On(_))
            ))
        })?;
        let state = self.ctx.state();
        let rules = state
            .optimizers()
            .iter()
            .filter(|r| {
                r.name() != "eliminate_join"
                    && !(distinct_on && r.name() == "replace_distinct_aggregate")
            })
            .cloned()
            .collect();
        let mut state = datafusion::execution::SessionStateBuilder::new_from_existing(state)
            .with_optimizer_rules(rules)
            .build();
        // An uncorrelated scalar subquery becomes a join with its one row, which the dataflow
        // maintains, instead of a value computed once when the plan runs.
        state
            .config_mut()
            .options_mut()
            .optimizer
            .enable_physical_uncorrelated_scalar_subquery = false;
        let plan = off_runtime(move |_| Ok(state.optimize(&plan)?)).await?;
        Ok((self.materialize_table_functions(plan).await?, reads))
    }

    /// Replaces each scan of a table function (`generate_series`, `range`) in a view's plan by
    /// its rows (a constant relation), evaluated once under the session's memory limit.
    async fn materialize_table_functions(&self, plan: LogicalPlan) -> Result<LogicalPlan> {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        let mut scans = Vec::new();
        plan.apply(|node| {
            if let LogicalPlan::TableScan(scan) = node
                && is_table_function_scan(scan)
            {
                scans.push(node.clone());
            }
            Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
        })?;
        if scans.is_empty() {
            return Ok(plan);
        }
        let mut rows = Vec::with_capacity(scans.len());
        for scan in &scans {
            let df = self.ctx.execute_logical_plan(scan.clone()).await?;
            // The rows become literal expressions (about `size_of::<Expr>()` bytes a value):
            // counted against the session's query memory limit as they stream in, so that
            // `generate_series(1, 3000000000)` fails the statement instead of the server.
            let limit = self.vars.query_memory_limit_bytes();
            let mut held = 0usize;
            let mut batches = Vec::new();
            let mut stream = df.execute_stream().await?;
            while let Some(batch) = futures::StreamExt::next(&mut stream).await {
                let batch = batch?;
                held = held
                    .saturating_add(batch.get_array_memory_size())
                    .saturating_add(
                        batch.num_rows() * batch.num_columns().max(1) * std::mem::size_of::<Expr>(),
                    );
                if held > limit {
                    return Err(Error::data(
                        "53200",
                        format!(
                            "out of memory: the rows of a table function in a materialized view \
                             exceed query.memory_limit_mb ({} MiB)",
                            limit / (1024 * 1024)
                        ),
                    ));
                }
                batches.push(batch);
            }
            let mut values = Vec::new();
            for b in &batches {
                for r in 0..b.num_rows() {
                    let row = b
                        .columns()
                        .iter()
                        .map(|c| {
                            Ok(Expr::Literal(
                                datafusion::common::ScalarValue::try_from_array(c, r)?,
                                None,
                            ))
                        })
                        .collect::<Result<Vec<_>>>()?;
                    values.push(row);
                }
            }
            rows.push((scan.clone(), values));
        }
        let replaced = plan.transform_up(|node| {
            for (scan, values) in &rows {
                if &node == scan {
                    let schema = node.schema().clone();
                    let replacement = if values.is_empty() {
                        LogicalPlan::EmptyRelation(datafusion::logical_expr::EmptyRelation {
                            produce_one_row: false,
                            schema,
                        })
                    } else {
                        LogicalPlan::Values(datafusion::logical_expr::Values {
                            schema,
                            values: values.clone(),
                        })
                    };
                    return Ok(Transformed::yes(replacement));
                }
            }
            Ok(Transformed::no(node))
        })?;
        Ok(replaced.data)
    }

    async fn explain_view(
        &mut self,
        cv: &datafusion::sql::sqlparser::ast::CreateView,
        sql: &str,
        emit: bool,
    ) -> Result<Output> {
        let name = object_name(&cv.name)?;
        let plan = self.plan_query(&parse::view_query_text(sql)?).await?;
        let job_settings = self.vars.job_settings();
        let parallelism = job_settings
            .get("streaming.parallelism")
            .and_then(|p| p.parse().ok())
            .unwrap_or(1);
        let mut lines =
            self.engine
                .explain_view(&name, stream_plan::plan_view(&plan, emit)?, parallelism)?;
        let settings: Vec<String> = job_settings
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        lines.push(format!("Job settings: {}", settings.join(", ")));
        text_rows(
            &["QUERY PLAN"],
            lines.into_iter().map(|l| vec![l]).collect(),
        )
    }

    /// Runs a query; `names` are the output column names when they differ from the plan's
    /// (a SELECT list may repeat a name, which a DataFusion plan may not).
    /// A query's physical plan, its task context, and the schema its rows are shown with:
    /// the executed plan's types (after Weir's rewrites) under the names to show, the
    /// columns derived from OIDs marked as such ([`oid_columns`]).
    async fn physical_query(
        &self,
        plan: LogicalPlan,
        names: Option<Vec<String>>,
    ) -> Result<(
        Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        Arc<datafusion::execution::TaskContext>,
        SchemaRef,
    )> {
        let kinds = oid_columns::oid_columns(&plan);
        let (physical, task) = self.physical_plan(plan, 0).await?;
        let schema = oid_columns::mark(
            output_schema(physical.schema().as_ref(), names.as_deref()),
            &kinds,
        );
        Ok((physical, task, schema))
    }

    /// A query's physical plan and task context. When DataFusion cannot plan a correlated
    /// scalar subquery, each one is evaluated first, once per distinct outer value, and the
    /// values joined in ([`subplan`]); `depth` counts the subqueries evaluated inside others.
    ///
    /// # Errors
    /// `21000` a subquery returned more than one row; `0A000` more than
    /// [`subplan::MAX_SUBPLAN_VALUES`] outer values, or subqueries nested deeper than 8;
    /// planning and execution errors of the query and its subqueries.
    fn physical_plan(
        &self,
        plan: LogicalPlan,
        depth: usize,
    ) -> futures::future::BoxFuture<'_, Result<PhysicalQuery>> {
        Box::pin(async move {
            let mut plan = plan;
            // First as it is; then with the shapes DataFusion cannot decorrelate evaluated;
            // then with every correlated scalar subquery evaluated (those DataFusion would
            // join, only if the plan still cannot run).
            for pass in [None, Some(true), Some(false)] {
                if let Some(hard_only) = pass {
                    plan = self.evaluate_subqueries(plan, depth, hard_only).await?;
                }
                let df = self.ctx.execute_logical_plan(plan.clone()).await?;
                let task = Arc::new(df.task_ctx());
                let e = match off_runtime(move |rt| Ok(rt.block_on(df.create_physical_plan())))
                    .await?
                {
                    Ok(physical) => return Ok((physical, task)),
                    Err(e) => e,
                };
                // DataFusion's decorrelation fails on some shapes instead of leaving them (a
                // recursive CTE in the subquery: "ambiguous field"), so any failure of a plan
                // that holds such a subquery is retried.
                let next = match pass {
                    None => true,
                    Some(true) => false,
                    Some(false) => return Err(e.into()),
                };
                if !subplan::is_unplannable_subquery(&e)
                    && subplan::candidate(&plan, next)?.is_none()
                {
                    return Err(e.into());
                }
                if depth >= 8 {
                    return Err(Error::not_supported(
                        "correlated subqueries nested more than 8 deep",
                    ));
                }
            }
            Err(Error::Internal("the last pass returns".into()))
        })
    }

    /// Replaces each correlated scalar subquery of `plan` (with `hard_only`, each of a shape
    /// DataFusion cannot decorrelate) by its values, one evaluation per distinct outer value
    /// (see [`subplan`]).
    async fn evaluate_subqueries(
        &self,
        mut plan: LogicalPlan,
        depth: usize,
        hard_only: bool,
    ) -> Result<LogicalPlan> {
        let mut n = 0usize;
        while let Some(c) = subplan::candidate(&plan, hard_only)? {
            let (physical, task) = self.physical_plan(c.keys.clone(), depth + 1).await?;
            let batches = datafusion::physical_plan::collect(physical, task).await?;
            let count: usize = batches.iter().map(RecordBatch::num_rows).sum();
            if count > subplan::MAX_SUBPLAN_VALUES {
                return Err(Error::not_supported(format!(
                    "a correlated subquery of this shape over more than {} distinct outer \
                     values (it is evaluated once per value)",
                    subplan::MAX_SUBPLAN_VALUES
                )));
            }
            let mut rows = Vec::with_capacity(count);
            for b in &batches {
                for r in 0..b.num_rows() {
                    rows.push(
                        b.columns()
                            .iter()
                            .map(|col| datafusion::common::ScalarValue::try_from_array(col, r))
                            .collect::<std::result::Result<Vec<_>, _>>()?,
                    );
                }
            }
            let mut values = Vec::with_capacity(rows.len());
            for row in &rows {
                let bound = c.bound(row)?;
                let field = bound.schema().field(0).clone();
                let (physical, task) = self.physical_plan(bound, depth + 1).await?;
                let out = datafusion::physical_plan::collect(physical, task).await?;
                match subplan::single_value(&out, &field)? {
                    Some(v) => values.push(v),
                    None => {
                        return Err(Error::data(
                            "21000",
                            "more than one row returned by a subquery used as an expression",
                        ));
                    }
                }
            }
            let replaced = c.replace(plan.clone(), rows, values)?;
            if replaced == plan || n == 64 {
                // Not expected: the node is in the plan, each replacement removes a subquery.
                return Err(Error::not_supported(
                    "this correlated scalar subquery (it could not be evaluated per outer value)",
                ));
            }
            plan = replaced;
            n += 1;
        }
        Ok(plan)
    }

    async fn run_query(&self, plan: LogicalPlan, names: Option<Vec<String>>) -> Result<Output> {
        let (physical, task, schema) = self.physical_query(plan, names).await?;
        // The rows gathered count against `query.memory_limit_mb` as they come (with the
        // operators' own reservations), so a result too big fails before it is all held.
        let reservation = super::memory::result_reservation(&self.memory);
        let mut stream = datafusion::physical_plan::execute_stream(physical, task)?;
        let mut batches = Vec::new();
        while let Some(batch) = futures::StreamExt::next(&mut stream).await {
            let batch = batch?;
            super::memory::reserve_result(
                &reservation,
                super::memory::batch_bytes(&batch),
                self.memory.limit(),
            )?;
            batches.push(batch);
        }
        let batches = batches
            .into_iter()
            .map(|b| {
                let options =
                    arrow::array::RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
                Ok(RecordBatch::try_new_with_options(
                    schema.clone(),
                    b.columns().to_vec(),
                    &options,
                )?)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Output::Rows { schema, batches })
    }

    /// Plans `stmt`; when its plan repeats a name because expressions differ only in a cast
    /// (DataFusion names a cast by its argument: `max(ts), max(ts::date)`), plans it again with
    /// each cast of an expression named by its type ([`names::name_casts`]). A repeated name can
    /// also surface only in the optimizer (`SELECT x::text, x ... GROUP BY x::text, x`: the
    /// aggregate's projection), so such a statement's plan is optimized once to find out.
    ///
    /// Errors: the first planning error that is not a repeated name.
    async fn plan_naming_casts(&self, stmt: Statement) -> Result<LogicalPlan> {
        let named = names::name_casts(&stmt);
        if named == stmt {
            return self.plan_statement(stmt).await;
        }
        match self.plan_statement(stmt).await {
            Ok(plan) => {
                let state = self.ctx.state();
                let probe = plan.clone();
                let optimized = off_runtime(move |_| Ok(state.optimize(&probe)?)).await;
                match optimized {
                    Err(e) if is_duplicate_name_error(&e) => {}
                    // Other optimizer failures are the caller's to meet (a correlated subquery
                    // DataFusion cannot decorrelate is evaluated when the plan runs).
                    _ => return Ok(plan),
                }
            }
            Err(e) if is_duplicate_name_error(&e) => {}
            Err(e) => return Err(e),
        }
        self.plan_statement(named).await
    }

    /// Plans a statement; a client's catalog query that does not plan is tried again through
    /// datafusion-pg-catalog's whole compatibility layer (see [`parse`]).
    async fn plan_with_fallback(&self, sql: &str, stmt: Statement) -> Result<LogicalPlan> {
        let catalog = parse::mentions_catalog(&stmt);
        match self.plan_statement(stmt).await {
            Ok(plan) => Ok(plan),
            Err(e) if catalog => match parse::parse_one_compat(sql) {
                Ok(compat) => self.plan_statement(compat).await.map_err(|_| e),
                Err(_) => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// Plans a SELECT and returns the output names to show when they differ from the plan's
    /// (PostgreSQL's names, [`names::shown_names`]); when its output names repeat (legal in
    /// PostgreSQL: `SELECT 1, 1`), plans it with unique internal names. A catalog query that
    /// plans neither way gets the compatibility layer's version ([`Self::plan_with_fallback`]);
    /// repeated names are tried first, as Weir's own rewrites hold for them and the layer's
    /// need not (`SELECT 23::regtype, 25::regtype` shows two type names).
    async fn plan_select(
        &self,
        sql: &str,
        stmt: Statement,
    ) -> Result<(LogicalPlan, Option<Vec<String>>)> {
        let err = match self.plan_naming_casts(stmt.clone()).await {
            Ok(plan) => {
                let shown = names::shown_names(&stmt, &field_names(&plan));
                return Ok((plan, shown));
            }
            Err(e) if is_duplicate_name_error(&e) => {
                // Repeated output names; or names repeated inside the plan by expressions that
                // differ only in a cast (`max(ts), max(ts::date)`).
                let (renamed, shown) = match names::unique_output_names(&stmt) {
                    Some((renamed, shown)) => (renamed, Some(shown)),
                    None => (stmt.clone(), None),
                };
                let mut err = e;
                for attempt in [renamed.clone(), names::name_casts(&renamed)] {
                    if attempt == stmt {
                        continue;
                    }
                    match self.plan_statement(attempt).await {
                        Ok(plan) => {
                            let shown =
                                shown.or_else(|| names::shown_names(&stmt, &field_names(&plan)));
                            return Ok((plan, shown));
                        }
                        Err(again) if is_duplicate_name_error(&again) => err = again,
                        Err(other) => {
                            err = other;
                            break;
                        }
                    }
                }
                err
            }
            Err(e) => e,
        };
        if parse::mentions_catalog(&stmt)
            && let Ok(compat) = parse::parse_one_compat(sql)
            && let Ok(plan) = self.plan_statement(compat).await
        {
            let shown = names::shown_names(&stmt, &field_names(&plan));
            return Ok((plan, shown));
        }
        Err(err)
    }

    /// The view query to store for `CREATE MATERIALIZED VIEW name (columns) AS query`: the
    /// query itself, or, with a column list, the query renamed by it (PostgreSQL: the list
    /// names the first columns; the rest keep their names).
    ///
    /// # Errors
    /// `42601` more names than columns; `42701` a column name repeated.
    async fn view_query_with_columns(&self, query: &str, columns: &[String]) -> Result<String> {
        let stmt = parse_one(query)?;
        if !matches!(stmt, Statement::Query(_)) {
            return Err(Error::Parse(
                "a materialized view needs a SELECT query".into(),
            ));
        }
        let (plan, shown) = self.plan_select(query, stmt.clone()).await?;
        let planned = field_names(&plan);
        // With repeated output names the plan has internal unique names and the subquery
        // below needs them (`SELECT 38 AS c, -x AS c`); PostgreSQL allows them when the list
        // renames them.
        let mut inner = query.to_string();
        if planned
            .iter()
            .any(|n| n.starts_with(names::INTERNAL_PREFIX))
            && let Some((renamed, _)) = names::unique_output_names(&stmt)
        {
            let text = renamed.to_string();
            // The printed tree must parse back to itself (see `parse::view_query_text`).
            if parse_one(&text).ok().as_ref() == Some(&renamed) {
                inner = text;
            }
        }
        let own: Vec<String> = shown.unwrap_or_else(|| planned.clone());
        if columns.len() > own.len() {
            return Err(Error::plan(
                "42601",
                "CREATE MATERIALIZED VIEW specifies more column names than columns",
            ));
        }
        let mut all: Vec<String> = columns.to_vec();
        all.extend(own[columns.len()..].iter().cloned());
        let mut seen = std::collections::HashSet::new();
        for n in &all {
            if !seen.insert(n.as_str()) {
                return Err(Error::plan(
                    "42701",
                    format!("column \"{n}\" specified more than once"),
                ));
            }
        }
        // Unaliased expressions are named PostgreSQL's way (`count`, not `count(*)`).
        if all == planned {
            return Ok(query.to_string());
        }
        let list: Vec<String> = all
            .iter()
            .map(|n| format!("\"{}\"", n.replace('"', "\"\"")))
            .collect();
        Ok(format!(
            "SELECT * FROM ({inner}) AS weir_view_columns({})",
            list.join(", ")
        ))
    }

    /// `CREATE [UNIQUE] INDEX [IF NOT EXISTS] [name] ON relation [USING btree|hash]
    /// (column [ASC|DESC], ...) [INCLUDE (...)]`: a secondary index on a table or a
    /// materialized view ([`Engine::create_index`]). Without a name it is named as
    /// PostgreSQL names it (`t_a_b_idx`, then `t_a_b_idx1`, ...). Every index holds all the
    /// relation's columns, so `INCLUDE` changes nothing.
    ///
    /// # Errors
    /// `0A000` for expressions, operator classes, `NULLS FIRST/LAST`, partial indexes,
    /// storage parameters, `NULLS NOT DISTINCT` and access methods other than btree/hash;
    /// `42P01` unknown relation; `42703` unknown column; the engine's errors.
    async fn create_index(
        &mut self,
        ci: datafusion::sql::sqlparser::ast::CreateIndex,
    ) -> Result<Output> {
        use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, IndexType};
        if ci.predicate.is_some() {
            return Err(Error::not_supported(
                "partial indexes (CREATE INDEX ... WHERE) are not supported",
            ));
        }
        if !ci.with.is_empty() || !ci.index_options.is_empty() || !ci.alter_options.is_empty() {
            return Err(Error::not_supported(
                "index options (WITH ...) are not supported",
            ));
        }
        if ci.nulls_distinct == Some(false) {
            return Err(Error::not_supported(
                "NULLS NOT DISTINCT in a unique index is not supported",
            ));
        }
        match &ci.using {
            None | Some(IndexType::BTree) | Some(IndexType::Hash) => {}
            Some(other) => {
                return Err(Error::not_supported(format!(
                    "index access method \"{other}\" is not supported (Weir's indexes are ordered: btree)"
                )));
            }
        }
        let relation = object_name(&ci.table_name)?;
        let def = self.engine.relation(&relation).ok_or_else(|| {
            Error::catalog("42P01", format!("relation \"{relation}\" does not exist"))
        })?;
        let mut columns: Vec<crate::catalog::IndexColumn> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for c in &ci.columns {
            let id = match &c.column.expr {
                SqlExpr::Identifier(id) => id.clone(),
                SqlExpr::Nested(inner) if matches!(inner.as_ref(), SqlExpr::Identifier(_)) => {
                    let SqlExpr::Identifier(id) = inner.as_ref() else {
                        unreachable!()
                    };
                    id.clone()
                }
                other => {
                    return Err(Error::not_supported(format!(
                        "an index on an expression ({other}) is not supported; index columns by name"
                    )));
                }
            };
            if c.operator_class.is_some() {
                return Err(Error::not_supported(
                    "operator classes in an index are not supported",
                ));
            }
            if c.column.options.nulls_first.is_some() {
                return Err(Error::not_supported(
                    "NULLS FIRST/LAST in an index column is not supported (ASC and DESC are)",
                ));
            }
            let name = ident(&id);
            let column = def
                .schema
                .index_of(&name)
                .map_err(|_| Error::plan("42703", format!("column \"{name}\" does not exist")))?;
            // A repeated column adds nothing to the order.
            if columns.iter().any(|c| c.column == column) {
                continue;
            }
            columns.push(crate::catalog::IndexColumn {
                column,
                descending: c.column.options.asc == Some(false),
            });
            names.push(name);
        }
        if columns.is_empty() {
            return Err(Error::Parse("an index needs at least one column".into()));
        }
        let name = match &ci.name {
            Some(n) => object_name(n)?,
            None => {
                let base = format!("{}_{}_idx", def.name, names.join("_"));
                let catalog = self.engine.catalog();
                let mut name = base.clone();
                let mut n = 0;
                while catalog.name_taken(&name, Some(self.txn)) {
                    n += 1;
                    name = format!("{base}{n}");
                }
                name
            }
        };
        let engine = Arc::clone(&self.engine);
        let (unique, if_not_exists) = (ci.unique, ci.if_not_exists);
        let txn = Some(self.txn);
        let index = name.clone();
        let created = tokio::task::spawn_blocking(move || {
            engine.create_index(&index, &relation, columns, unique, if_not_exists, txn)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
        if !created {
            self.already_exists(&name);
        } else if let Some(ddl) = self.open_ddl() {
            ddl.created_indexes.push(name);
        }
        Ok(Output::Command("CREATE INDEX".into()))
    }

    async fn create_table(
        &mut self,
        stmt: Statement,
        with_options: Option<Vec<(String, String)>>,
        clauses: Option<event_time::TableTimeClauses>,
    ) -> Result<Output> {
        refuse_unsupported_columns(&stmt)?;
        let type_modifiers = declared_type_modifiers(&stmt)?;
        let column_defaults = super::defaults::declared(&stmt);
        let plan = self.plan_statement(stmt).await?;
        let LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(c)) = plan else {
            return Err(Error::not_supported(
                "this form of CREATE TABLE is not supported",
            ));
        };
        if !matches!(c.input.as_ref(), LogicalPlan::EmptyRelation(_)) {
            return Err(Error::not_supported(
                "this form of CREATE TABLE ... AS is not supported",
            ));
        }
        if c.or_replace {
            return Err(Error::not_supported(
                "CREATE OR REPLACE TABLE is not supported",
            ));
        }
        let mut pk = Vec::new();
        for constraint in c.constraints.iter() {
            match constraint {
                datafusion::common::Constraint::PrimaryKey(cols) => pk = cols.clone(),
                datafusion::common::Constraint::Unique(_) => {
                    return Err(Error::not_supported("UNIQUE constraints are not supported"));
                }
            }
        }
        let arrow_schema = c.input.schema().as_arrow();
        let fields: Vec<Field> = arrow_schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let f = f.as_ref().clone();
                if pk.contains(&i) {
                    f.with_nullable(false)
                } else {
                    f
                }
            })
            .collect();
        for f in &fields {
            check_column_type(f.data_type(), f.name())?;
        }
        let clauses = clauses.unwrap_or_default();
        let mut time = crate::catalog::TableTime {
            append_only: clauses.append_only || with_options.is_some(),
            ..Default::default()
        };
        let mut fields = fields;
        if let Some(w) = clauses.watermark {
            let column = fields
                .iter()
                .position(|f| *f.name() == w.column)
                .ok_or_else(|| {
                    Error::plan(
                        "42703",
                        format!(
                            "column \"{}\" of the WATERMARK clause does not exist",
                            w.column
                        ),
                    )
                })?;
            if !matches!(fields[column].data_type(), DataType::Timestamp(..)) {
                return Err(Error::plan(
                    "42804",
                    format!(
                        "the WATERMARK column \"{}\" must be a timestamp or timestamptz, not {}",
                        w.column,
                        crate::sql::functions::pg_type_name(fields[column].data_type())
                    ),
                ));
            }
            if !time.append_only {
                return Err(Error::not_supported(format!(
                    "WATERMARK FOR {} on a table that is not APPEND ONLY (a retraction could \
                     reopen a closed window); add APPEND ONLY after the column list",
                    w.column
                )));
            }
            // Every row needs a time to be compared with the watermark.
            fields[column] = fields[column].clone().with_nullable(false);
            time.watermark = Some(crate::catalog::WatermarkDef {
                column,
                delay_us: w.delay_us,
                text: w.text,
            });
        }
        let schema = Arc::new(Schema::new(fields));
        let connector = match &with_options {
            Some(options) => {
                if !pk.is_empty() {
                    return Err(Error::not_supported(
                        "a connector table cannot have a PRIMARY KEY",
                    ));
                }
                Some(crate::engine::connector_def(options, &schema)?)
            }
            None => None,
        };
        let name = c.name.table().to_string();
        let engine = Arc::clone(&self.engine);
        let if_not_exists = c.if_not_exists;
        let txn = Some(self.txn);
        let create_name = name.clone();
        let created = tokio::task::spawn_blocking(move || {
            let spec = crate::engine::TableSpec {
                schema,
                primary_key: pk,
                connector,
                time,
                type_modifiers,
                column_defaults,
            };
            let created = engine.create_table(&create_name, spec, if_not_exists, txn)?;
            engine.start_sources()?;
            Ok::<_, Error>(created)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
        if !created {
            self.already_exists(&name);
        }
        Ok(Output::Command("CREATE TABLE".into()))
    }

    /// `CREATE TABLE [IF NOT EXISTS] name [(column, ...)] AS query [WITH [NO] DATA]`
    /// (PostgreSQL's reference page "CREATE TABLE AS"): a table whose columns are the
    /// query's output columns (their names, or the names listed, which may be fewer; types as
    /// the query gives them, `text` for an untyped `NULL` or string; every column nullable,
    /// no key), filled with the query's rows by `INSERT INTO name query` unless `WITH NO
    /// DATA`. The command tag is `SELECT n` (`n` rows inserted). Outside a transaction block
    /// a failed insert drops the table again; inside one, the block's `ROLLBACK` does.
    ///
    /// # Errors
    /// `42601` when more names are listed than the query has columns, `42701` for a column
    /// name given twice, `0A000` for a column type tables do not store (arrays, structs),
    /// `42P07` when the table exists (without `IF NOT EXISTS`), and the query's own errors.
    async fn create_table_as(
        &mut self,
        ct: datafusion::sql::sqlparser::ast::CreateTable,
        text: &str,
        with_data: bool,
    ) -> Result<Output> {
        use arrow::datatypes::TimeUnit;
        let name = object_name(&ct.name)?;
        if ct.or_replace {
            return Err(Error::not_supported(
                "CREATE OR REPLACE TABLE is not supported",
            ));
        }
        if !ct.constraints.is_empty() {
            return Err(Error::not_supported(
                "constraints in CREATE TABLE ... AS are not supported",
            ));
        }
        let query_text = parse::view_query_text(text)?;
        let query = parse_one(&query_text)?;
        if !matches!(query, Statement::Query(_)) {
            return Err(Error::Parse("CREATE TABLE ... AS needs a query".into()));
        }
        let (plan, shown) = self.plan_select(&query_text, query).await?;
        let mut names = shown.unwrap_or_else(|| field_names(&plan));
        if ct.columns.len() > names.len() {
            return Err(Error::Parse("too many column names were specified".into()));
        }
        for (i, c) in ct.columns.iter().enumerate() {
            names[i] = ident(&c.name);
        }
        let mut fields = Vec::with_capacity(names.len());
        for (i, (n, f)) in names.iter().zip(plan.schema().fields()).enumerate() {
            if names[..i].contains(n) {
                return Err(Error::plan(
                    "42701",
                    format!("column \"{n}\" specified more than once"),
                ));
            }
            let data_type = match f.data_type() {
                DataType::Null | DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
                DataType::Timestamp(TimeUnit::Nanosecond, tz) => {
                    DataType::Timestamp(TimeUnit::Microsecond, tz.clone())
                }
                other => other.clone(),
            };
            check_column_type(&data_type, n)?;
            fields.push(Field::new(n.clone(), data_type, true));
        }
        let existed = self.engine.relation(&name).map(|r| r.id);
        let spec = crate::engine::TableSpec {
            type_modifiers: vec![crate::catalog::TypeModifier::None; fields.len()],
            column_defaults: vec![None; fields.len()],
            schema: Arc::new(Schema::new(fields)),
            primary_key: Vec::new(),
            connector: None,
            time: crate::catalog::TableTime::default(),
        };
        let engine = Arc::clone(&self.engine);
        let create_name = name.clone();
        let if_not_exists = ct.if_not_exists;
        let txn = Some(self.txn);
        let created = tokio::task::spawn_blocking(move || {
            engine.create_table(&create_name, spec, if_not_exists, txn)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
        if !created {
            self.already_exists(&name);
            return Ok(Output::Command("CREATE TABLE AS".into()));
        }
        self.note_created(&name, existed);
        if !with_data {
            return Ok(Output::Command("CREATE TABLE AS".into()));
        }
        let insert = parse_one(&format!(
            "INSERT INTO {} {query_text}",
            crate::sql::functions::text_format::quote_ident(&name)
        ))?;
        match self.dml(insert, None).await {
            Ok(Output::Command(tag)) => {
                let n = tag.rsplit(' ').next().unwrap_or("0");
                Ok(Output::Command(format!("SELECT {n}")))
            }
            Ok(_) => Err(Error::Internal("an INSERT returned rows".into())),
            Err(e) => {
                if self.transaction.is_none() {
                    let engine = Arc::clone(&self.engine);
                    let dropped = tokio::task::spawn_blocking(move || {
                        engine.drop_relation(&name, true, true, false)
                    })
                    .await;
                    if let Ok(Err(drop_error)) = dropped {
                        tracing::warn!(%drop_error, "could not drop a table whose CREATE TABLE AS failed");
                    }
                }
                Err(e)
            }
        }
    }

    /// `TRUNCATE [TABLE] name [, ...] [RESTART IDENTITY | CONTINUE IDENTITY] [CASCADE |
    /// RESTRICT]` (PostgreSQL's reference page "TRUNCATE"): every row of each table is
    /// deleted, as `DELETE FROM name` would (so a view over the table retracts them, an
    /// append-only table refuses it with `0A000`, and in a transaction block `ROLLBACK`
    /// undoes it); its cost grows with the rows deleted, not constant as PostgreSQL's. The
    /// names are checked before any row goes: `42P01` for a missing relation, `42809` for a
    /// materialized view. Weir has no sequences or foreign keys, so the options change
    /// nothing.
    async fn truncate(&mut self, t: datafusion::sql::sqlparser::ast::Truncate) -> Result<Output> {
        for target in &t.table_names {
            let name = object_name(&target.name)?;
            let def = self.engine.relation(&name).ok_or_else(|| {
                Error::catalog("42P01", format!("relation \"{name}\" does not exist"))
            })?;
            if !def.is_table() {
                return Err(Error::plan("42809", format!("\"{name}\" is not a table")));
            }
        }
        for target in &t.table_names {
            let delete = parse_one(&format!("DELETE FROM {}", target.name))?;
            self.dml(delete, None).await?;
        }
        Ok(Output::Command("TRUNCATE TABLE".into()))
    }

    /// Plans a data-changing statement (after [`Self::prepare_dml`]); an `INSERT` whose
    /// source holds a `VALUES` list plans the source on its own (see [`standalone_source`]).
    async fn plan_dml(&self, mut stmt: Statement) -> Result<LogicalPlan> {
        match standalone_source(&stmt) {
            Some(source) => {
                let source = self
                    .plan_statement(Statement::Query(Box::new(source)))
                    .await?;
                let placeholder = placeholder_source(source.schema().fields().len())?;
                if let Statement::Insert(i) = &mut stmt {
                    i.source = Some(Box::new(placeholder));
                }
                let plan = self.plan_statement(stmt).await?;
                with_insert_source(plan, source)
            }
            None => self.plan_statement(stmt).await,
        }
    }

    async fn dml(&mut self, mut stmt: Statement, params: Option<ParamValues>) -> Result<Output> {
        let command = match &stmt {
            Statement::Insert(_) => "INSERT",
            Statement::Update { .. } => "UPDATE",
            _ => "DELETE",
        };
        self.check_read_write(command)?;
        let returning = take_returning(&mut stmt);
        let (on_conflict, alias) = take_on_conflict(&mut stmt);
        self.prepare_dml(&mut stmt)?;
        let plan = self.plan_dml(stmt).await?;
        // The parameters again for ON CONFLICT's SET and WHERE and for RETURNING, which are
        // planned apart from the statement.
        let bound = params.clone();
        let plan = bind(plan, params)?;
        let LogicalPlan::Dml(DmlStatement {
            table_name,
            op,
            input,
            ..
        }) = plan
        else {
            return Err(Error::Internal("DML did not plan as DML".into()));
        };
        let name = table_name.table().to_string();
        let def = self.engine.relation(&name).ok_or_else(|| {
            Error::catalog("42P01", format!("relation \"{name}\" does not exist"))
        })?;
        if !def.is_table() {
            return Err(Error::plan(
                "42809",
                format!("cannot change materialized view \"{name}\""),
            ));
        }
        self.engine.check_writable(def.id)?;
        if def.time.append_only && !matches!(op, WriteOp::Insert(_)) {
            self.engine.check_retractable(def.id)?;
        }
        let schema = def.schema_ref();
        let upsert = match &on_conflict {
            Some(clause) => Some(super::upsert::resolve(
                clause,
                &def,
                &self.engine.indexes_on(def.id),
                alias.as_ref(),
            )?),
            None => None,
        };
        // The name RETURNING sees the table by.
        let target = alias.as_ref().map(ident).unwrap_or_else(|| name.clone());
        // Rows an `ON CONFLICT` insert inserted or updated (the command tag's count).
        let mut upserted = None;
        // The change, its command tag (before the row count) and the rows RETURNING sees.
        let (change, tag, rows) = match op {
            WriteOp::Insert(_) => {
                let input = self
                    .values_subqueries_evaluated(input.as_ref().clone())
                    .await?;
                let batches = self
                    .collect_interruptible(input.clone())
                    .await
                    .map_err(|e| not_null_of_table_column(e, &input, &name))?;
                let mut batch = concat_as(&schema, &batches)?;
                if def.time.watermark.is_some() {
                    batch = self.engine.drop_late_rows(def.id, batch)?;
                }
                match &upsert {
                    Some(u) => {
                        let outcome = self.upsert(&def, u, batch, bound.as_ref()).await?;
                        upserted = Some(outcome.count);
                        (outcome.change, "INSERT 0", outcome.rows)
                    }
                    None => (ChangeBatch::inserts(batch.clone()), "INSERT 0", batch),
                }
            }
            WriteOp::Delete => {
                let batches = self.collect_interruptible(input.as_ref().clone()).await?;
                let batch = concat_as(&schema, &batches)?;
                (ChangeBatch::deletes(batch.clone()), "DELETE", batch)
            }
            WriteOp::Update => {
                let LogicalPlan::Projection(p) = input.as_ref() else {
                    return Err(Error::not_supported("this form of UPDATE is not supported"));
                };
                // New values followed by the old row, in one pass over the matching rows.
                let mut exprs = p.expr.clone();
                for (i, col) in p.input.schema().columns().into_iter().enumerate() {
                    exprs.push(Expr::Column(col).alias(format!("__weir_old_{i}")));
                }
                let both = LogicalPlan::Projection(Projection::try_new(exprs, p.input.clone())?);
                let batches = self.collect_interruptible(both).await?;
                let k = schema.fields().len();
                let mut news = Vec::new();
                let mut olds = Vec::new();
                for b in &batches {
                    let new_cols = cast_columns(&schema, &b.columns()[..k])?;
                    let old_cols = cast_columns(&schema, &b.columns()[k..2 * k])?;
                    news.push(crate::state::table::batch_from_columns(
                        &schema,
                        new_cols,
                        b.num_rows(),
                    )?);
                    olds.push(crate::state::table::batch_from_columns(
                        &schema,
                        old_cols,
                        b.num_rows(),
                    )?);
                }
                let new = concat_as(&schema, &news)?;
                let old = concat_as(&schema, &olds)?;
                let both = ChangeBatch::concat(
                    &schema,
                    &[ChangeBatch::deletes(old), ChangeBatch::inserts(new.clone())],
                )?;
                (both, "UPDATE", new)
            }
            other => return Err(Error::not_supported(format!("{other} is not supported"))),
        };
        // RETURNING is evaluated before the write, so an error in it writes nothing.
        let returned = match &returning {
            Some(items) => Some(
                self.returning_rows(&target, rows.clone(), items, bound.as_ref(), false)
                    .await?,
            ),
            None => None,
        };
        let engine = Arc::clone(&self.engine);
        let id = def.id;
        let inserted = if self.transaction.is_some() {
            self.write_in_block(id, change).await?
        } else {
            let written = self
                .logs_writes(def.time.append_only)
                .then(|| change.clone());
            // The write lands in `landed` from the blocking thread, so a write whose
            // statement was dropped meanwhile (its connection closed) is still undone with
            // the rest.
            let mut landed = Arc::clone(&self.landed).lock_owned().await;
            let interrupt = Arc::clone(&self.interrupt);
            tokio::task::spawn_blocking(move || {
                let n = engine.write_unless(id, change, &|| interrupt.check())?;
                if let Some(change) = written {
                    landed.push((id, change));
                }
                Ok::<usize, Error>(n)
            })
            .await
            .map_err(|e| Error::Internal(e.to_string()))??
        };
        // An insert counts the rows written: a table with a watermark drops late rows.
        let n = if let Some(n) = upserted {
            n
        } else if tag == "INSERT 0" {
            inserted
        } else {
            rows.num_rows()
        };
        self.log_landed().await;
        Ok(match returned {
            Some((schema, batches)) => Output::Returning {
                schema,
                batches,
                tag: tag.to_string(),
            },
            None => Output::Command(format!("{tag} {n}")),
        })
    }

    /// The change of an `INSERT ... ON CONFLICT` into table `def` whose proposed rows are
    /// `proposed` (see [`super::upsert`]): the stored rows sharing an arbiter key with them
    /// looked up by key, seen as this session sees the table (an open block's changes to
    /// it merged in), then each proposed row skipped, replacing its stored row, or inserted.
    /// O(proposed rows × log n), plus the block's rows of the table in a block.
    ///
    /// # Errors
    /// `21000` for a key proposed twice under `DO UPDATE`; errors of the `SET` and `WHERE`
    /// expressions; store errors.
    async fn upsert(
        &self,
        def: &crate::catalog::RelationDef,
        upsert: &super::upsert::Upsert,
        proposed: RecordBatch,
        params: Option<&ParamValues>,
    ) -> Result<super::upsert::Outcome> {
        use super::upsert::{Action, decide, row_column, update_input};
        let schema = def.schema_ref();
        let nullable = crate::common::schema::nullable_schema(&schema);
        // The stored rows of each arbiter key, once each.
        let engine = Arc::clone(&self.engine);
        let (id, arbiters, probe) = (def.id, upsert.arbiters.clone(), proposed.clone());
        let found = tokio::task::spawn_blocking(move || {
            arbiters
                .iter()
                .map(|a| engine.rows_with_key(id, a.index, &probe))
                .collect::<Result<Vec<_>>>()
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
        let mut parts: Vec<ChangeBatch> = Vec::new();
        for b in &found {
            let cols = cast_columns(&nullable, b.columns())?;
            parts.push(ChangeBatch::inserts(
                crate::state::table::batch_from_columns(&nullable, cols, b.num_rows())?,
            ));
        }
        let stored = crate::state::table::consolidate(&nullable, &parts)?;
        // A row found under two keys counts once; the block's own changes on top.
        let once = arrow::array::Int64Array::from(vec![1; stored.len()]);
        let mut parts = vec![ChangeBatch::new(stored.batch.clone(), once)?];
        if let Some(net) = self
            .transaction
            .as_ref()
            .and_then(|b| b.net.get(&def.id).cloned())
        {
            let cols = cast_columns(&nullable, net.batch.columns())?;
            let batch = crate::state::table::batch_from_columns(&nullable, cols, net.len())?;
            parts.push(ChangeBatch::new(batch, net.weights.clone())?);
        }
        let visible = crate::state::table::consolidate(&nullable, &parts)?;
        let keep = arrow::array::BooleanArray::from(
            visible
                .weights
                .values()
                .iter()
                .map(|w| *w > 0)
                .collect::<Vec<_>>(),
        );
        let stored = arrow::compute::filter_record_batch(&visible.batch, &keep)?;
        let (inserts, updates) = decide(upsert, &nullable, &proposed, &stored)?;
        let inserted = arrow::compute::take_record_batch(
            &proposed,
            &arrow::array::UInt32Array::from(inserts),
        )?;
        let mut olds = RecordBatch::new_empty(nullable.clone());
        let mut news = RecordBatch::new_empty(nullable.clone());
        // SET and WHERE are planned even when no row conflicts, so a bad expression fails
        // the statement whatever the data (as PostgreSQL plans them with it).
        if let Action::Update {
            assignments,
            selection,
        } = &upsert.action
        {
            let input = update_input(&nullable, &stored, &proposed, &updates)?;
            let mut df = self.ctx.read_batch(input)?.alias(&upsert.target)?;
            if let Some(cond) = selection {
                let cond = df.parse_sql_expr(&cond.to_string())?;
                df = df.filter(cond)?;
            }
            let mut exprs = Vec::new();
            for (c, f) in nullable.fields().iter().enumerate() {
                let col = Expr::Column(datafusion::common::Column::new(
                    Some(upsert.target.as_str()),
                    f.name(),
                ));
                let value = match assignments.iter().find(|(d, _)| *d == c) {
                    Some((_, e)) => df.parse_sql_expr(&e.to_string())?,
                    None => col,
                };
                exprs.push(value.alias(f.name()));
            }
            exprs.push(Expr::Column(datafusion::common::Column::new(
                Some(upsert.target.as_str()),
                row_column(),
            )));
            let mut out = df.select(exprs)?;
            if let Some(p) = params {
                out = out.with_param_values(p.clone())?;
            }
            let batches = out.collect().await?;
            let k = nullable.fields().len();
            // The pairs whose WHERE held, by number, with their new values.
            let mut passed: HashMap<usize, (usize, usize)> = HashMap::new();
            let mut new_parts = Vec::new();
            for (bi, b) in batches.iter().enumerate() {
                let cols = cast_columns(&nullable, &b.columns()[..k])?;
                new_parts.push(crate::state::table::batch_from_columns(
                    &nullable,
                    cols,
                    b.num_rows(),
                )?);
                let rows =
                    arrow::array::AsArray::as_primitive::<arrow::datatypes::Int64Type>(b.column(k));
                for (ri, r) in rows.values().iter().enumerate() {
                    passed.insert(*r as usize, (bi, ri));
                }
            }
            // In proposal order: the first pair of a stored row whose WHERE holds updates it;
            // any later pair of that row is 21000 (PostgreSQL's rule for a row the statement
            // already changed), a pair whose WHERE fails leaves the row as it is.
            let mut affected = std::collections::HashSet::new();
            let mut taken: Vec<u32> = Vec::new();
            let mut picks: Vec<(usize, usize)> = Vec::new();
            for (n, (stored_row, _)) in updates.iter().enumerate() {
                if affected.contains(stored_row) {
                    return Err(super::upsert::twice());
                }
                if let Some(at) = passed.get(&n) {
                    affected.insert(*stored_row);
                    taken.push(*stored_row);
                    picks.push(*at);
                }
            }
            let picked: Vec<RecordBatch> = picks
                .iter()
                .map(|(bi, ri)| new_parts[*bi].slice(*ri, 1))
                .collect();
            news = concat_as(&schema, &picked)?;
            olds = arrow::compute::take_record_batch(
                &stored,
                &arrow::array::UInt32Array::from(taken),
            )?;
        }
        let count = inserted.num_rows() + news.num_rows();
        let change = ChangeBatch::concat(
            &nullable,
            &[
                ChangeBatch::deletes(olds),
                ChangeBatch::inserts(news.clone()),
                ChangeBatch::inserts(inserted.clone()),
            ],
        )?;
        let rows = arrow::compute::concat_batches(&nullable, &[inserted, news])?;
        Ok(super::upsert::Outcome {
            change,
            rows,
            count,
        })
    }

    /// Evaluates a RETURNING list over the rows a statement wrote (inserted or updated rows'
    /// new values, deleted rows), the table's name (or its `AS` alias) qualifying its columns,
    /// `params` the statement's parameters; columns are named as PostgreSQL names a SELECT
    /// list's. `describe_only`: the columns alone, nothing evaluated (parameters unbound).
    ///
    /// # Errors
    /// Planning and evaluation errors of the expressions (unknown columns `42703`, ...).
    async fn returning_rows(
        &self,
        table: &str,
        rows: RecordBatch,
        items: &[SelectItem],
        params: Option<&ParamValues>,
        describe_only: bool,
    ) -> Result<(SchemaRef, Vec<RecordBatch>)> {
        let df = self.ctx.read_batch(rows)?.alias(table)?;
        let mut exprs = Vec::new();
        for item in items {
            match item {
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                    exprs.extend(df.schema().columns().into_iter().map(Expr::Column));
                }
                SelectItem::UnnamedExpr(e) => {
                    let name = names::figure_name(e);
                    exprs.push(df.parse_sql_expr(&e.to_string())?.alias(name));
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    let name = alias.value.clone();
                    exprs.push(df.parse_sql_expr(&expr.to_string())?.alias(name));
                }
                SelectItem::ExprWithAliases { .. } => {
                    return Err(Error::not_supported(
                        "a list of aliases in RETURNING is not supported",
                    ));
                }
            }
        }
        let mut out = df.select(exprs)?;
        let schema = Arc::new(out.schema().as_arrow().clone());
        // Described only (a Parse's or a portal's Describe): the parameters may be unbound.
        if describe_only {
            return Ok((schema, Vec::new()));
        }
        if let Some(p) = params {
            out = out.with_param_values(p.clone())?;
        }
        let batches = out.collect().await?;
        Ok((schema, batches))
    }

    /// The result columns of a data-changing statement's RETURNING list (no rows are
    /// written).
    async fn returning_schema(
        &self,
        stmt: &Statement,
        items: &[SelectItem],
        alias: Option<String>,
    ) -> Result<Option<SchemaRef>> {
        use datafusion::sql::sqlparser::ast::{FromTable, TableFactor, TableObject};
        let relation = |t: &TableFactor| match t {
            TableFactor::Table { name, .. } => Some(name.clone()),
            _ => None,
        };
        let table = match stmt {
            Statement::Insert(i) => match &i.table {
                TableObject::TableName(n) => Some(n.clone()),
                _ => None,
            },
            Statement::Update(u) => relation(&u.table.relation),
            Statement::Delete(d) => match &d.from {
                FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => {
                    t.first().and_then(|t| relation(&t.relation))
                }
            },
            _ => None,
        };
        let Some(table) = table else {
            return Ok(None);
        };
        let name = object_name(&table)?;
        let def = self.engine.relation(&name).ok_or_else(|| {
            Error::catalog("42P01", format!("relation \"{name}\" does not exist"))
        })?;
        let empty = RecordBatch::new_empty(def.schema_ref());
        let target = alias.unwrap_or(name);
        let (schema, _) = self
            .returning_rows(&target, empty, items, None, true)
            .await?;
        Ok(Some(schema))
    }

    /// An `INSERT ... SELECT`'s columns named ([`name_insert_select_columns`]), the
    /// target table's column defaults filled in ([`super::defaults::fill`]) and `UPDATE ...
    /// FROM` / `DELETE ... USING` rewritten ([`super::dml_joins`]), before the statement is
    /// planned (to run it or to describe it).
    fn prepare_dml(&self, stmt: &mut Statement) -> Result<()> {
        name_insert_select_columns(stmt);
        super::dml_joins::split_assignment_tuples(stmt)?;
        check_assignments(stmt)?;
        if let Some(def) = self.dml_target(stmt)? {
            super::defaults::fill(stmt, &def)?;
        }
        super::dml_joins::rewrite_joins(stmt)
    }

    /// The table an `INSERT` or `UPDATE` writes, if it exists (planning reports one that
    /// does not).
    fn dml_target(&self, stmt: &Statement) -> Result<Option<crate::catalog::RelationDef>> {
        use datafusion::sql::sqlparser::ast::{TableFactor, TableObject};
        let table = match stmt {
            Statement::Insert(i) => match &i.table {
                TableObject::TableName(n) => Some(n.clone()),
                _ => None,
            },
            Statement::Update(u) => match &u.table.relation {
                TableFactor::Table { name, .. } => Some(name.clone()),
                _ => None,
            },
            _ => None,
        };
        let Some(table) = table else {
            return Ok(None);
        };
        Ok(self.engine.relation(&object_name(&table)?))
    }

    /// `plan` with each scalar subquery in a `VALUES` list (`INSERT INTO t VALUES ((SELECT
    /// max(a) FROM t) + 1)`) replaced by its value, computed first: DataFusion plans such
    /// subqueries in projections and filters but not in `VALUES`. A `VALUES` list cannot
    /// refer to outer columns, so each is evaluated once, as PostgreSQL does.
    ///
    /// # Errors
    /// `21000` when a subquery returns more than one row; the errors of running it.
    async fn values_subqueries_evaluated(&self, plan: LogicalPlan) -> Result<LogicalPlan> {
        use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
        let mut subqueries: Vec<datafusion::logical_expr::Subquery> = Vec::new();
        plan.apply(|node| {
            if let LogicalPlan::Values(v) = node {
                for e in v.values.iter().flatten() {
                    e.apply(|x| {
                        if let Expr::ScalarSubquery(q) = x
                            && !subqueries.contains(q)
                        {
                            subqueries.push(q.clone());
                        }
                        Ok(TreeNodeRecursion::Continue)
                    })?;
                }
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        if subqueries.is_empty() {
            return Ok(plan);
        }
        let mut values = Vec::with_capacity(subqueries.len());
        for q in &subqueries {
            let field = q.subquery.schema().field(0).clone();
            let batches = self
                .collect_interruptible(q.subquery.as_ref().clone())
                .await?;
            let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
            let value = match batches.iter().find(|b| b.num_rows() > 0) {
                _ if rows > 1 => {
                    return Err(Error::data(
                        "21000",
                        "more than one row returned by a subquery used as an expression",
                    ));
                }
                Some(b) => datafusion::common::ScalarValue::try_from_array(b.column(0), 0)?,
                None => datafusion::common::ScalarValue::try_from(field.data_type())?,
            };
            values.push(value);
        }
        let plan = plan
            .transform_up(|node| {
                let LogicalPlan::Values(mut v) = node else {
                    return Ok(Transformed::no(node));
                };
                for e in v.values.iter_mut().flatten() {
                    *e = e
                        .clone()
                        .transform_up(|x| match &x {
                            Expr::ScalarSubquery(q) => {
                                match subqueries.iter().position(|s| s == q) {
                                    Some(i) => {
                                        Ok(Transformed::yes(Expr::Literal(values[i].clone(), None)))
                                    }
                                    None => Ok(Transformed::no(x)),
                                }
                            }
                            _ => Ok(Transformed::no(x)),
                        })?
                        .data;
                }
                Ok(Transformed::yes(LogicalPlan::Values(v)))
            })?
            .data;
        Ok(plan)
    }

    /// The rows of a data-changing statement's source ([`Self::collect`]), abandoned with
    /// `57014` when a cancel request or the `statement_timeout` deadline comes first: nothing
    /// is written before the source is whole, so stopping here loses nothing.
    async fn collect_interruptible(&self, plan: LogicalPlan) -> Result<Vec<RecordBatch>> {
        let interrupt = Arc::clone(&self.interrupt);
        tokio::select! {
            rows = self.collect(plan) => rows,
            e = interrupt.interrupted() => Err(e),
        }
    }

    async fn collect(&self, plan: LogicalPlan) -> Result<Vec<RecordBatch>> {
        let df = self.ctx.execute_logical_plan(plan).await?;
        let task = Arc::new(df.task_ctx());
        let physical = off_runtime(move |rt| Ok(rt.block_on(df.create_physical_plan())?)).await?;
        Ok(datafusion::physical_plan::collect(physical, task).await?)
    }

    /// Receives data of a COPY FROM STDIN.
    pub fn copy_data(&mut self, data: &[u8]) {
        if let Some(c) = &mut self.copy {
            c.data.extend_from_slice(data);
        }
    }

    /// Ends a COPY FROM STDIN: parses all its data and writes it as one change.
    /// Returns the number of rows.
    ///
    /// # Errors
    /// Any bad row refuses the whole COPY (nothing is written); inside a transaction block
    /// the failure aborts the block.
    pub async fn copy_done(&mut self) -> Result<usize> {
        let result = self.finish_copy().await;
        if result.is_err()
            && let Some(log) = &mut self.transaction
        {
            log.aborted = true;
        }
        result
    }

    /// [`Session::copy_done`] without the transaction bookkeeping.
    async fn finish_copy(&mut self) -> Result<usize> {
        let Some(copy) = self.copy.take() else {
            return Err(Error::Internal("COPY data without COPY".into()));
        };
        let def = self
            .engine
            .catalog()
            .get(copy.table)
            .cloned()
            .ok_or_else(|| {
                Error::catalog(
                    "42P01",
                    format!("relation \"{}\" does not exist", copy.table_name),
                )
            })?;
        let engine = Arc::clone(&self.engine);
        let table = copy.table;
        let defaults = self.copy_defaults(&def, &copy.columns).await?;
        let append_only = def.time.append_only;
        let parse = move || {
            let schema = def.schema_ref();
            let batch = copy::parse(
                &copy.data,
                &copy.format,
                &copy.table_name,
                &schema,
                &copy.columns,
            )?;
            fill_defaults(batch, defaults).map(ChangeBatch::inserts)
        };
        if self.transaction.is_some() {
            let change = tokio::task::spawn_blocking(parse)
                .await
                .map_err(|e| Error::Internal(e.to_string()))??;
            return self.write_in_block(table, change).await;
        }
        let logged = self.logs_writes(append_only);
        // As for INSERT: the write lands in `landed` from the blocking thread.
        let mut landed = Arc::clone(&self.landed).lock_owned().await;
        let interrupt = Arc::clone(&self.interrupt);
        let n = tokio::task::spawn_blocking(move || {
            let change = parse()?;
            let n = engine.write_unless(table, change.clone(), &|| interrupt.check())?;
            if logged {
                landed.push((table, change));
            }
            Ok::<usize, Error>(n)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
        self.log_landed().await;
        Ok(n)
    }

    /// The values of the `DEFAULT`s of the columns a `COPY` leaves out (column index, value
    /// of the column's type), each evaluated once for the statement, as `INSERT` evaluates
    /// them (`now()` is the statement's time); columns without one stay NULL.
    ///
    /// # Errors
    /// Errors of evaluating a default or casting it to its column's type.
    async fn copy_defaults(
        &self,
        def: &crate::catalog::RelationDef,
        columns: &[usize],
    ) -> Result<Vec<(usize, datafusion::common::ScalarValue)>> {
        let mut out = Vec::new();
        for (i, text) in def.column_defaults.iter().enumerate() {
            let Some(text) = text else { continue };
            if columns.contains(&i) {
                continue;
            }
            let batches = self
                .ctx
                .sql(&format!("SELECT {text}"))
                .await?
                .collect()
                .await?;
            let value = match batches.iter().find(|b| b.num_rows() > 0) {
                Some(b) => datafusion::common::ScalarValue::try_from_array(b.column(0), 0)?,
                None => datafusion::common::ScalarValue::Null,
            };
            out.push((i, value.cast_to(def.schema.field(i).data_type())?));
        }
        Ok(out)
    }

    /// True when a write is to be kept for undoing: inside a transaction block, or in an
    /// implicit transaction unless the table is append-only.
    fn logs_writes(&self, append_only: bool) -> bool {
        self.transaction.is_some() || (self.implicit.is_some() && !append_only)
    }

    /// Moves the writes that landed (see [`Session::landed`]) to the undo log. Waits for a
    /// write still running, which holds the list's lock until it has landed.
    async fn log_landed(&mut self) {
        let writes = std::mem::take(&mut *self.landed.lock().await);
        for (table, change) in writes {
            self.log_write(table, change);
        }
    }

    /// Keeps a write for undoing, in the block's (a write made before its `BEGIN`) or else
    /// the implicit transaction's.
    fn log_write(&mut self, table: RelationId, change: ChangeBatch) {
        if let Some(log) = &mut self.transaction {
            log.applied.push((table, change));
        } else if let Some(writes) = &mut self.implicit {
            writes.push((table, change));
        }
    }

    /// Starts an implicit transaction (see [`Session::implicit`]) unless a block or one is
    /// open: at an extended-protocol Execute, or at the start of a simple Query.
    pub fn begin_implicit(&mut self) {
        if self.transaction.is_none() && self.implicit.is_none() {
            self.implicit = Some(Vec::new());
        }
    }

    /// [`Self::begin_implicit`] for a statement of a simple Query of several statements:
    /// the implicit transaction also keeps its DDL (see [`Session::implicit_ddl`]), so that
    /// a later statement's failure undoes a `CREATE` and keeps what a `DROP` dropped.
    pub fn begin_implicit_of_several(&mut self) {
        if self.transaction.is_none() && self.implicit.is_none() {
            self.implicit = Some(Vec::new());
            self.implicit_ddl = Some(super::TransactionDdl::default());
        }
    }

    /// Ends the implicit transaction, keeping its writes (at Sync, or at the end of a simple
    /// Query whose statements all succeeded).
    ///
    /// # Errors
    /// Those of [`Self::commit_ddl`] (its `DROP`s, made now).
    pub async fn commit_implicit(&mut self) -> Result<()> {
        self.implicit = None;
        match self.implicit_ddl.take() {
            Some(ddl) => self.commit_ddl(ddl).await,
            None => Ok(()),
        }
    }

    /// A statement failed, wherever its error came from (parsing, binding its parameters,
    /// running, sending its rows): an open transaction block is aborted (`25P02` until its
    /// end, as in PostgreSQL) and the implicit transaction undone ([`Self::abort_implicit`]).
    pub async fn statement_failed(&mut self) {
        if let Some(log) = &mut self.transaction {
            log.aborted = true;
        }
        self.abort_implicit().await;
    }

    /// Ends the implicit transaction after one of its statements failed, undoing its writes,
    /// newest first. An undo that fails (another session changed the rows since) is logged;
    /// the statement's own error is what the client sees.
    pub async fn abort_implicit(&mut self) {
        // Its writes first (some may be to the tables it created), then its tables.
        let writes = self.implicit.take().unwrap_or_default();
        if !writes.is_empty()
            && let Err(e) = self.undo(writes).await
        {
            tracing::warn!(error = %e, "undoing a failed implicit transaction");
        }
        if let Some(ddl) = self.implicit_ddl.take() {
            self.rollback_ddl(ddl).await;
        }
    }

    /// `ROLLBACK TO [SAVEPOINT] name`: drops the block's writes, DDL and settings changes
    /// after the savepoint, which stays (PostgreSQL's rule).
    ///
    /// # Errors
    /// `25P01` outside a transaction block; `3B001` when no savepoint has that name.
    async fn rollback_to(&mut self, name: &str) -> Result<()> {
        let Some(log) = &mut self.transaction else {
            return Err(Error::plan(
                "25P01",
                "ROLLBACK TO SAVEPOINT can only be used in transaction blocks",
            ));
        };
        let Some(i) = log.savepoints.iter().rposition(|s| s.name == name) else {
            return Err(Error::plan(
                "3B001",
                format!("savepoint \"{name}\" does not exist"),
            ));
        };
        let at = log.savepoints[i].clone();
        log.savepoints.truncate(i + 1);
        log.writes.truncate(at.writes);
        // The `SET`s and `SET LOCAL`s after the savepoint are undone too.
        log.settings_without_local = at.settings_without_local.clone();
        // The DDL after the savepoint is undone too, as in PostgreSQL.
        let after = super::TransactionDdl {
            created: log
                .ddl
                .created
                .split_off(at.created.min(log.ddl.created.len())),
            hid: log.ddl.hid.split_off(at.hid.min(log.ddl.hid.len())),
            index_drops: log
                .ddl
                .index_drops
                .split_off(at.index_drops.min(log.ddl.index_drops.len())),
            created_indexes: log
                .ddl
                .created_indexes
                .split_off(at.created_indexes.min(log.ddl.created_indexes.len())),
        };
        // Each table's net change again, from the writes kept.
        let mut by_table: HashMap<RelationId, Vec<ChangeBatch>> = HashMap::new();
        for (table, change) in &log.writes {
            by_table.entry(*table).or_default().push(change.clone());
        }
        let mut net = HashMap::new();
        for (table, changes) in by_table {
            let schema = changes[0].batch.schema();
            net.insert(table, Arc::new(consolidate(&schema, &changes)?));
        }
        self.schema.set_pending(net.clone());
        log.net = net;
        self.rollback_ddl(after).await;
        self.restore_settings(at.settings);
        Ok(())
    }

    /// `25006` inside a `BEGIN READ ONLY` block, naming `command` (`INSERT`, ...), as in
    /// PostgreSQL.
    ///
    /// # Errors
    /// As said.
    fn check_read_write(&self, command: &str) -> Result<()> {
        if self.transaction.as_ref().is_some_and(|b| b.read_only) {
            return Err(Error::plan(
                "25006",
                format!("cannot execute {command} in a read-only transaction"),
            ));
        }
        Ok(())
    }

    /// Records that the open transaction block (or implicit transaction of several
    /// statements) created the table or materialized view `name`, for its rollback to drop
    /// (not when `existed` is its id: `IF NOT EXISTS` found it).
    fn note_created(&mut self, name: &str, existed: Option<RelationId>) {
        let Some(id) = self.engine.relation(name).map(|r| r.id) else {
            return;
        };
        if existed == Some(id) {
            return;
        }
        if let Some(block) = &mut self.transaction {
            block.ddl.created.push(id);
        } else if let Some(ddl) = &mut self.implicit_ddl {
            ddl.created.push(id);
        }
    }

    /// `DROP` inside a transaction block (or an implicit transaction of several
    /// statements): a table or view is hidden at once (`42P01` to the block's later
    /// statements and to other sessions, its name free to the block only; see
    /// [`Engine::hide_relation`]) and dropped at `COMMIT`, so a `ROLLBACK` keeps it and its
    /// rows; an index is checked now (`42704` unless `IF EXISTS`) and dropped at `COMMIT`.
    ///
    /// # Errors
    /// Those of [`Engine::hide_relation`] (`42P01`, `42809`, `2BP01`); `0A000` for other
    /// objects. Names before the failing one stay hidden until the block ends.
    async fn defer_drop(
        &mut self,
        object_type: ObjectType,
        if_exists: bool,
        cascade: bool,
        names: &[datafusion::sql::sqlparser::ast::ObjectName],
    ) -> Result<Output> {
        let (table, tag) = match object_type {
            ObjectType::Table => (true, "DROP TABLE"),
            ObjectType::MaterializedView => (false, "DROP MATERIALIZED VIEW"),
            ObjectType::Index => {
                let mut drops = Vec::new();
                for n in names {
                    let name = object_name(n)?;
                    if self.engine.check_drop_index(&name, if_exists)? {
                        drops.push(name);
                    } else {
                        self.does_not_exist("index", &name);
                    }
                }
                if let Some(ddl) = self.open_ddl() {
                    ddl.index_drops.extend(drops);
                }
                return Ok(Output::Command("DROP INDEX".into()));
            }
            other => {
                return Err(Error::not_supported(format!(
                    "DROP {other} is not supported"
                )));
            }
        };
        for n in names {
            let name = object_name(n)?;
            let engine = Arc::clone(&self.engine);
            let txn = self.txn;
            let target = name.clone();
            let hid = tokio::task::spawn_blocking(move || {
                engine.hide_relation(&target, table, if_exists, cascade, txn)
            })
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
            if hid.is_empty() {
                self.does_not_exist(if table { "table" } else { "materialized view" }, &name);
            }
            if let Some(ddl) = self.open_ddl() {
                ddl.hid.extend(hid);
            }
        }
        Ok(Output::Command(tag.into()))
    }

    /// PostgreSQL's notice for a `CREATE ... IF NOT EXISTS` of a name taken (`42P07`).
    fn already_exists(&mut self, name: &str) {
        self.notify(
            super::NoticeLevel::Notice,
            "42P07",
            format!("relation \"{name}\" already exists, skipping"),
        );
    }

    /// PostgreSQL's notice for a `DROP ... IF EXISTS` of a `kind` (`table`, `materialized
    /// view`, `index`) that does not exist.
    fn does_not_exist(&mut self, kind: &str, name: &str) {
        self.notify(
            super::NoticeLevel::Notice,
            "00000",
            format!("{kind} \"{name}\" does not exist, skipping"),
        );
    }

    /// The DDL record of the open transaction block, or else of the implicit transaction of
    /// several statements.
    fn open_ddl(&mut self) -> Option<&mut super::TransactionDdl> {
        match &mut self.transaction {
            Some(block) => Some(&mut block.ddl),
            None => self.implicit_ddl.as_mut(),
        }
    }

    /// Makes a transaction's DDL final at its `COMMIT`: its `DROP INDEX`es are made and the
    /// relations its `DROP`s hid dropped.
    ///
    /// # Errors
    /// Those of the drops (store errors; `57P01` at shutdown: the hidden relations then
    /// come back at the next start, see [`crate::catalog::Catalog::resolve_hidden`]).
    async fn commit_ddl(&mut self, ddl: super::TransactionDdl) -> Result<()> {
        if ddl.index_drops.is_empty() && ddl.hid.is_empty() {
            return Ok(());
        }
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || {
            for name in &ddl.index_drops {
                engine.drop_index(name, true)?;
            }
            engine.drop_hidden(&ddl.hid)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))?
    }

    /// Undoes a transaction's DDL when it rolls back: the indexes it created are dropped,
    /// then the relations it created (newest first, with the views on them), then those its
    /// `DROP`s hid shown again.
    /// Failures are logged (at shutdown the next start finishes the work, see
    /// [`crate::catalog::Catalog::resolve_hidden`]).
    async fn rollback_ddl(&mut self, ddl: super::TransactionDdl) {
        if ddl.created.is_empty() && ddl.hid.is_empty() && ddl.created_indexes.is_empty() {
            return;
        }
        let engine = Arc::clone(&self.engine);
        let undone = tokio::task::spawn_blocking(move || {
            for name in ddl.created_indexes.iter().rev() {
                if let Err(e) = engine.drop_index(name, true) {
                    tracing::warn!(index = %name, error = %e, "dropping an index a rolled-back transaction created");
                }
            }
            if let Err(e) = engine.drop_created(&ddl.created) {
                tracing::warn!(error = %e, "dropping what a rolled-back transaction created");
            }
            if let Err(e) = engine.unhide(&ddl.hid) {
                tracing::warn!(error = %e, "restoring what a rolled-back transaction dropped");
            }
        })
        .await;
        if let Err(e) = undone {
            tracing::warn!(error = %e, "undoing a rolled-back transaction's DDL");
        }
    }

    /// Checks a write of the open transaction block (constraints against the table's
    /// committed rows plus the block's earlier writes, see [`Engine::check_write`]) and
    /// keeps it for `COMMIT`; the session's reads of the table see it from now on. Returns
    /// the rows of the change. O(rows of the block's writes to the table).
    ///
    /// # Errors
    /// Those of [`Engine::check_write`]: constraint violations, `0A000` for a table
    /// statements cannot write.
    async fn write_in_block(&mut self, table: RelationId, change: ChangeBatch) -> Result<usize> {
        let pending = self
            .transaction
            .as_ref()
            .and_then(|b| b.net.get(&table).cloned());
        let engine = Arc::clone(&self.engine);
        let (change, net) = tokio::task::spawn_blocking(move || {
            engine.check_write(table, pending.as_deref(), change)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
        let n = change.len();
        if let Some(block) = &mut self.transaction {
            block.writes.push((table, change));
            block.net.insert(table, Arc::new(net));
            self.schema.set_pending(block.net.clone());
        }
        Ok(n)
    }

    /// `COMMIT`: writes the block's net change of each table at once (durable together,
    /// seen by views at one epoch, see [`Engine::write_many`]).
    ///
    /// # Errors
    /// Those of the write (`40001` when another session changed a row the block changes
    /// since the block read it, `23505` when it took a key the block inserts): the block is
    /// rolled back then, as PostgreSQL rolls back a transaction whose commit fails.
    async fn commit_block(&mut self, block: TransactionBlock) -> Result<()> {
        self.schema.set_pending(HashMap::new());
        let TransactionBlock {
            net, applied, ddl, ..
        } = block;
        let writes: Vec<(RelationId, ChangeBatch)> = net
            .into_iter()
            .map(|(table, change)| (table, Arc::unwrap_or_clone(change)))
            .collect();
        let engine = Arc::clone(&self.engine);
        let dropped = ddl.hid.clone();
        // The writes first (to tables the block did not drop: writes to those go with
        // them), then the drops: a failed write rolls the whole block back.
        let written = tokio::task::spawn_blocking(move || {
            let writes: Vec<(RelationId, ChangeBatch)> = writes
                .into_iter()
                .filter(|(id, _)| !dropped.contains(id))
                .collect();
            engine.write_many(writes)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))
        .and_then(|r| r);
        if let Err(e) = written {
            if let Err(undo) = self.undo(applied).await {
                tracing::warn!(error = %undo, "undoing a transaction whose commit failed");
            }
            self.rollback_ddl(ddl).await;
            return Err(e);
        }
        self.commit_ddl(ddl).await
    }

    /// `ROLLBACK` of a block ([`Self::rollback_block`]), and the settings as they were at
    /// its `BEGIN` (its `SET`s undone).
    ///
    /// # Errors
    /// Those of [`Self::rollback_block`] (the settings are restored first).
    async fn rollback_block_and_settings(&mut self, mut block: TransactionBlock) -> Result<()> {
        if let Some(vars) = block.settings_at_begin.take() {
            self.restore_settings(vars);
        }
        self.rollback_block(block).await
    }

    /// Puts back settings saved when a block began or ran its first `SET LOCAL`.
    fn restore_settings(&mut self, vars: crate::settings::SessionVars) {
        self.vars = vars;
        self.settings_changed();
    }

    /// PostgreSQL's warning for `COMMIT` or `ROLLBACK` outside a block.
    fn no_transaction(&mut self) {
        self.notify(
            super::NoticeLevel::Warning,
            "25P01",
            "there is no transaction in progress",
        );
    }

    /// `ROLLBACK` of a block: its writes are dropped (never written) and the implicit
    /// transaction's writes it took over undone.
    ///
    /// # Errors
    /// Those of [`Self::undo`].
    async fn rollback_block(&mut self, block: TransactionBlock) -> Result<()> {
        self.schema.set_pending(HashMap::new());
        let undone = self.undo(block.applied).await;
        self.rollback_ddl(block.ddl).await;
        undone
    }

    /// Writes the inverse of `writes`, newest first: what ROLLBACK does to the block's
    /// changes. A table dropped since is skipped.
    ///
    /// # Errors
    /// `40001` when a write cannot be undone because another session changed its rows since
    /// (a row no longer there to delete, a key taken again); the other writes are undone
    /// all the same.
    async fn undo(&mut self, writes: Vec<(RelationId, ChangeBatch)>) -> Result<()> {
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || {
            let mut failed: Option<Error> = None;
            for (table, change) in writes.into_iter().rev() {
                if engine.catalog().get(table).is_none() {
                    continue;
                }
                if let Err(e) = engine.write(table, change.negate()) {
                    failed.get_or_insert(e);
                }
            }
            match failed {
                None => Ok(()),
                Some(e) => Err(Error::plan(
                    "40001",
                    format!(
                        "ROLLBACK could not undo every write of the block: another session \
                         changed its rows since ({e})"
                    ),
                )),
            }
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))?
    }

    /// Ends the session when its connection closes: an open transaction block is rolled
    /// back (as by ROLLBACK) and its cursors closed.
    ///
    /// # Errors
    /// Those of [`Self::undo`] (`40001` when another session changed the rows since).
    pub async fn end_connection(&mut self) -> Result<()> {
        self.cursors.rollback();
        // A statement dropped with its connection (at shutdown) may have a write still
        // running: wait for it, and undo it with its block or implicit transaction.
        self.log_landed().await;
        // Statements sent without their Sync are not committed, as in PostgreSQL.
        self.abort_implicit().await;
        match self.transaction.take() {
            Some(block) => self.rollback_block(block).await,
            None => Ok(()),
        }
    }

    /// Puts the session back in order after a statement panicked (a bug in Weir or in a
    /// library it calls, caught at the connection): the statement's view snapshot is
    /// released, a COPY in progress abandoned, and an open transaction block marked aborted
    /// (as after any failed statement), so the connection goes on.
    pub fn after_panic(&mut self) {
        self.schema.pin(None);
        self.copy = None;
        if let Some(log) = &mut self.transaction {
            log.aborted = true;
        }
    }

    /// Abandons a COPY (the client sent CopyFail).
    pub fn copy_fail(&mut self) {
        self.copy = None;
    }

    /// Describes a statement for the extended protocol: parameter types and result schema.
    ///
    /// # Errors
    /// Parse and planning errors.
    pub async fn describe(
        &mut self,
        sql: &str,
    ) -> Result<(Vec<Option<DataType>>, Option<SchemaRef>)> {
        let trimmed = sql.trim().trim_end_matches(';').trim();
        if trimmed.is_empty() {
            return Ok((vec![], None));
        }
        let w = words(trimmed);
        if w[0] == "show" {
            // SHOW returns text columns; run it to learn them (it has no side effects).
            if let Some(Output::Rows { schema, .. }) = self.special(trimmed).await? {
                return Ok((vec![], Some(schema)));
            }
        }
        if matches!(
            w[0].as_str(),
            "set"
                | "reset"
                | "flush"
                | "begin"
                | "start"
                | "commit"
                | "end"
                | "rollback"
                | "abort"
                | "savepoint"
                | "release"
                | "discard"
                | "deallocate"
                | "close"
                | "move"
                | "unlisten"
        ) || (w[0] == "alter" && w.get(1).is_some_and(|x| x == "materialized"))
            || (matches!(w[0].as_str(), "create" | "alter" | "drop")
                && w.get(1).is_some_and(|x| x == "role" || x == "user"))
        {
            return Ok((vec![], None));
        }
        // DECLARE returns no rows; its query's parameters are the statement's.
        if leading_word(trimmed) == "declare" {
            let declare = cursors::parse_declare(trimmed)?;
            let (params, _) = Box::pin(self.describe(&declare.query)).await?;
            return Ok((params, None));
        }
        if leading_word(trimmed) == "fetch" {
            let fetch = cursors::parse_fetch(trimmed)?;
            return Ok((vec![], Some(self.cursors.get(&fetch.name)?.schema.clone())));
        }
        // CREATE TABLE returns no rows; its options are checked when it runs.
        if w[0] == "create" && w.get(1).is_some_and(|x| x == "table") {
            return Ok((vec![], None));
        }
        // A view's EMIT ON WINDOW CLOSE is checked when it runs.
        let without_emit = event_time::split_emit_on_window_close(trimmed);
        let stmt = parse_one(without_emit.as_deref().unwrap_or(trimmed))?;
        if let Statement::Explain { statement, .. } = &stmt {
            if matches!(statement.as_ref(), Statement::CreateView(_)) {
                let schema = Arc::new(Schema::new(vec![Field::new(
                    "QUERY PLAN",
                    DataType::Utf8,
                    true,
                )]));
                return Ok((vec![], Some(schema)));
            }
            let plan = self.plan_with_fallback(trimmed, stmt).await?;
            return Ok((vec![], Some(Arc::new(plan.schema().as_arrow().clone()))));
        }
        let is_query = matches!(stmt, Statement::Query(_));
        let is_dml = matches!(
            stmt,
            Statement::Insert(_) | Statement::Update { .. } | Statement::Delete(_)
        );
        if !is_query && !is_dml {
            return Ok((vec![], None));
        }
        let mut stmt = stmt;
        // Planned without it, as a plain insert (see `Self::upsert`).
        let (_, alias) = take_on_conflict(&mut stmt);
        self.prepare_dml(&mut stmt)?;
        let returning = if is_dml {
            match take_returning(&mut stmt) {
                Some(items) => {
                    self.returning_schema(&stmt, &items, alias.as_ref().map(ident))
                        .await?
                }
                None => None,
            }
        } else {
            None
        };
        self.schema.pin(Some(self.engine.visible()));
        let plan = if is_query {
            self.plan_select(trimmed, stmt).await
        } else {
            self.plan_dml(stmt).await.map(|p| (p, None))
        };
        self.schema.pin(None);
        let (plan, names) = plan?;
        let types = plan.get_parameter_types()?;
        let mut params: Vec<(usize, Option<DataType>)> = types
            .into_iter()
            .filter_map(|(k, v)| {
                k.trim_start_matches('$')
                    .parse::<usize>()
                    .ok()
                    .map(|i| (i, v))
            })
            .collect();
        params.sort_by_key(|(i, _)| *i);
        let n = params.last().map(|(i, _)| *i).unwrap_or(0);
        let mut out = vec![None; n];
        for (i, t) in params {
            out[i - 1] = t;
        }
        cast_parameter_types(&plan, &mut out);
        implied_parameter_types(&plan, &mut out);
        let schema = if is_query {
            // The analyzed plan's schema: analyzer rules may change result types (sum(bigint)
            // is numeric); the rows executed later have these types.
            let kinds = oid_columns::oid_columns(&plan);
            let state = self.ctx.state();
            let analyzed = off_runtime(move |_| {
                Ok(state
                    .analyzer()
                    .execute_and_check(plan.clone(), state.config_options(), |_, _| {})
                    .unwrap_or(plan))
            })
            .await?;
            Some(oid_columns::mark(
                output_schema(analyzed.schema().as_arrow(), names.as_deref()),
                &kinds,
            ))
        } else {
            returning
        };
        Ok((out, schema))
    }
}

/// Recompiles every materialized view at start, planning each stored query with a fresh
/// session, in creation order (so a view's inputs exist before it).
///
/// # Errors
/// Planning errors of a stored query.
/// Runs `work` (planning: DataFusion's SQL-to-plan, optimizer and physical planner, all CPU
/// work with no await point) on the runtime's blocking threads, given the runtime's handle for
/// the async parts. On a worker thread a slow plan held every session queued there, and the
/// statement's cancel and `statement_timeout` could not fire until it ended; here the waiting
/// future is dropped on `57014` (the work finishes in the background, bounded by the parser's
/// depth limits) and other sessions run meanwhile. A panic in `work` is raised again here, for
/// the connection's panic guard.
///
/// # Errors
/// `work`'s error; `57P01` when the runtime shuts down before `work` starts.
async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce(&tokio::runtime::Handle) -> Result<T> + Send + 'static,
) -> Result<T> {
    let rt = tokio::runtime::Handle::current();
    match tokio::task::spawn_blocking(move || work(&rt)).await {
        Ok(result) => result,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => Err(Error::data("57P01", "the server is shutting down")),
        },
    }
}

/// Recompiles every materialized view at start, in creation order, then recovers their
/// state ([`Engine::recover_all`]). A view whose stored query no longer plans (a relation it
/// names is gone, as a data directory of an older version could leave it) is left out with
/// an error in the log, with the views that read it: it reads "materialized view ... is not
/// available" and can be dropped, and the server serves everything else.
///
/// # Errors
/// State errors recovering a view, and internal ones.
pub async fn recover_views(engine: &Arc<Engine>) -> Result<()> {
    let mut left_out: std::collections::BTreeSet<crate::common::RelationId> =
        std::collections::BTreeSet::new();
    for def in engine.views_to_recover() {
        let crate::catalog::RelationKind::MaterializedView { query, .. } = &def.kind else {
            continue;
        };
        if let Some(upstream) = def.depends_on.iter().find(|d| left_out.contains(*d)) {
            tracing::error!(
                view = %def.name,
                upstream,
                "materialized view left out at start: a view it reads could not be planned"
            );
            left_out.insert(def.id);
            continue;
        }
        let mut session = Session::new(Arc::clone(engine))?;
        // Planned in the time zone it was created in.
        if let crate::catalog::RelationKind::MaterializedView { settings, .. } = &def.kind
            && let Some(zone) = settings.get("timezone")
        {
            session.vars.set("timezone", zone)?;
            session.settings_changed();
        }
        let (query, emit) = event_time::stored_view_query(query);
        let planned = session
            .plan_query(&query)
            .await
            .and_then(|plan| stream_plan::plan_view(&plan, emit));
        let plan = match planned {
            Ok(plan) => plan,
            Err(e) => {
                tracing::error!(
                    view = %def.name,
                    error = %e,
                    "materialized view left out at start: its query no longer plans; DROP it"
                );
                left_out.insert(def.id);
                continue;
            }
        };
        let engine2 = Arc::clone(engine);
        tokio::task::spawn_blocking(move || engine2.recover_view(&def, plan))
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
    }
    let engine2 = Arc::clone(engine);
    tokio::task::spawn_blocking(move || engine2.recover_all())
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
    Ok(())
}

fn bind(plan: LogicalPlan, params: Option<ParamValues>) -> Result<LogicalPlan> {
    match params {
        Some(p) => Ok(plan.with_param_values(p)?),
        None => Ok(plan),
    }
}

fn ident(i: &datafusion::sql::sqlparser::ast::Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_ascii_lowercase()
    }
}

fn object_name(n: &datafusion::sql::sqlparser::ast::ObjectName) -> Result<String> {
    let parts: Vec<String> =
        n.0.iter()
            .map(|p| {
                p.as_ident()
                    .map(ident)
                    .ok_or_else(|| Error::Parse(format!("invalid name {n}")))
            })
            .collect::<Result<_>>()?;
    match parts.as_slice() {
        [name] => Ok(name.clone()),
        [schema, name] if schema == "public" => Ok(name.clone()),
        _ => Err(Error::not_supported(format!(
            "schema-qualified name {n} is not supported (only public)"
        ))),
    }
}

/// Refuses column types Weir cannot store or encode.
fn check_column_type(t: &DataType, name: &str) -> Result<()> {
    match t {
        DataType::Boolean
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::Float32
        | DataType::Float64
        | DataType::Decimal128(..)
        | DataType::Utf8
        | DataType::Date32
        | DataType::Timestamp(..)
        | DataType::Interval(_) => Ok(()),
        other => Err(Error::not_supported(format!(
            "column \"{name}\" has type {}, which tables do not support",
            crate::sql::functions::pg_type_name(other)
        ))),
    }
}

fn cast_columns(schema: &SchemaRef, cols: &[ArrayRef]) -> Result<Vec<ArrayRef>> {
    use arrow::datatypes::TimeUnit;
    cols.iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(c.clone())
            } else if let (
                DataType::Timestamp(TimeUnit::Microsecond | TimeUnit::Nanosecond, _),
                DataType::Timestamp(unit @ (TimeUnit::Second | TimeUnit::Millisecond), tz),
            ) = (c.data_type(), f.data_type())
            {
                // Stored in a `timestamp(0)` / `timestamp(3)` column: rounded to its
                // precision, as PostgreSQL stores it.
                use crate::sql::functions::datetime_input::{round_timestamps, unit_step};
                let micros = arrow::compute::cast(
                    c,
                    &DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
                )?;
                let rounded = round_timestamps(&micros, unit_step(*unit))?;
                Ok(arrow::compute::cast(&rounded, f.data_type())?)
            } else {
                // Not `cast`: it makes a value that does not convert NULL. A statement
                // prepared before its table was created again with other column types
                // reaches here with the old types, and must fail, not store NULLs.
                let options = arrow::compute::CastOptions {
                    safe: false,
                    ..Default::default()
                };
                Ok(arrow::compute::cast_with_options(
                    c,
                    f.data_type(),
                    &options,
                )?)
            }
        })
        .collect()
}

/// Concatenates batches under the table schema (names and nullability of the table).
fn concat_as(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<RecordBatch> {
    // Nullable here: NOT NULL is checked by the engine with PostgreSQL's error.
    let schema = &crate::common::schema::nullable_schema(schema);
    let mut parts = Vec::with_capacity(batches.len());
    for b in batches {
        let cols = cast_columns(schema, b.columns())?;
        parts.push(crate::state::table::batch_from_columns(
            schema,
            cols,
            b.num_rows(),
        )?);
    }
    Ok(arrow::compute::concat_batches(schema, &parts)?)
}

/// The declared type modifiers of a `CREATE TABLE`'s columns, by column index
/// (`varchar(n)`, `char(n)`, `numeric(p, s)`; `char` alone is `char(1)` as in PostgreSQL).
///
/// # Errors
/// `22023` for a length of 0 or above 10,485,760 (PostgreSQL's messages), `0A000` for
/// `VARCHAR(MAX)` or a length in octets.
fn declared_type_modifiers(stmt: &Statement) -> Result<Vec<crate::catalog::TypeModifier>> {
    use crate::catalog::TypeModifier;
    use datafusion::sql::sqlparser::ast::{
        CharLengthUnits, CharacterLength, DataType as SqlType, ExactNumberInfo,
    };
    let Statement::CreateTable(ct) = stmt else {
        return Ok(Vec::new());
    };
    let length = |l: &Option<CharacterLength>, name: &str| -> Result<Option<u32>> {
        match l {
            None => Ok(None),
            Some(CharacterLength::IntegerLength { length, unit }) => {
                if matches!(unit, Some(CharLengthUnits::Octets)) {
                    return Err(Error::not_supported(format!("{name} lengths in OCTETS")));
                }
                match u32::try_from(*length) {
                    Ok(0) => Err(Error::data(
                        "22023",
                        format!("length for type {name} must be at least 1"),
                    )),
                    Ok(n) if n <= 10_485_760 => Ok(Some(n)),
                    _ => Err(Error::data(
                        "22023",
                        format!("length for type {name} cannot exceed 10485760"),
                    )),
                }
            }
            Some(CharacterLength::Max) => {
                Err(Error::not_supported(format!("{name}(MAX) (use text)")))
            }
        }
    };
    ct.columns
        .iter()
        .map(|c| {
            Ok(match &c.data_type {
                SqlType::Varchar(l) | SqlType::CharacterVarying(l) | SqlType::CharVarying(l) => {
                    TypeModifier::Varchar(length(l, "varchar")?)
                }
                SqlType::Char(l) | SqlType::Character(l) => {
                    TypeModifier::Char(length(l, "char")?.unwrap_or(1))
                }
                SqlType::Numeric(n) | SqlType::Decimal(n) | SqlType::Dec(n) => match n {
                    // Out-of-range precisions fail in planning (Arrow's decimal); shown
                    // without a modifier here.
                    ExactNumberInfo::Precision(p) => {
                        u8::try_from(*p).map_or(TypeModifier::None, |p| TypeModifier::Numeric(p, 0))
                    }
                    ExactNumberInfo::PrecisionAndScale(p, s) => {
                        match (u8::try_from(*p), i8::try_from(*s)) {
                            (Ok(p), Ok(s)) => TypeModifier::Numeric(p, s),
                            _ => TypeModifier::None,
                        }
                    }
                    ExactNumberInfo::None => TypeModifier::None,
                },
                _ => TypeModifier::None,
            })
        })
        .collect()
}

/// Refuses the column and table constraints Weir does not enforce or compute, which would
/// otherwise be dropped without a word (an identity column read NULL, a CHECK was not
/// checked): identity and generated columns, `CHECK` and `FOREIGN KEY`.
///
/// # Errors
/// `0A000` naming the construct and the column.
fn refuse_unsupported_columns(stmt: &Statement) -> Result<()> {
    use datafusion::sql::sqlparser::ast::{ColumnOption, TableConstraint};
    let Statement::CreateTable(ct) = stmt else {
        return Ok(());
    };
    for c in &ct.columns {
        for o in &c.options {
            let construct = match &o.option {
                ColumnOption::Generated { .. }
                | ColumnOption::Identity(_)
                | ColumnOption::Materialized(_)
                | ColumnOption::Ephemeral(_)
                | ColumnOption::Alias(_) => "identity and generated columns",
                ColumnOption::Check(_) => "CHECK constraints",
                ColumnOption::ForeignKey(_) => "FOREIGN KEY constraints",
                _ => continue,
            };
            return Err(Error::not_supported(format!(
                "{construct} are not supported (column \"{}\")",
                c.name.value
            )));
        }
    }
    for constraint in &ct.constraints {
        let construct = match constraint {
            TableConstraint::Check(_) => "CHECK constraints",
            TableConstraint::ForeignKey(_) => "FOREIGN KEY constraints",
            _ => continue,
        };
        return Err(Error::not_supported(format!(
            "{construct} are not supported"
        )));
    }
    Ok(())
}

/// True when planning failed because two output columns have the same name.
fn is_duplicate_name_error(e: &Error) -> bool {
    let m = e.to_string().to_ascii_lowercase();
    // DataFusion also refuses a qualified and an unqualified output column of one name
    // (`SELECT a.k, 1 AS k`): "Schema contains qualified field name a.k and unqualified
    // field name k which would be ambiguous".
    // DataFusion's "duplicate unqualified field name" reaches here as PostgreSQL's
    // "specified more than once" (`crate::error`).
    m.contains("unique expression names")
        || m.contains("duplicate")
        || m.contains("specified more than once")
        || m.contains("would be ambiguous")
}

/// The output column names of a plan.
fn field_names(plan: &LogicalPlan) -> Vec<String> {
    plan.schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

/// `schema` with its fields renamed to `names` (when given and of the same length).
fn output_schema(schema: &Schema, names: Option<&[String]>) -> SchemaRef {
    match names {
        Some(names) if names.len() == schema.fields().len() => Arc::new(Schema::new(
            schema
                .fields()
                .iter()
                .zip(names)
                .map(|(f, n)| f.as_ref().clone().with_name(n))
                .collect::<Vec<_>>(),
        )),
        _ => Arc::new(schema.clone()),
    }
}

/// True for a scan of a table function (`generate_series`, `range`): a constant relation.
fn is_table_function_scan(scan: &datafusion::logical_expr::TableScan) -> bool {
    let Ok(provider) = datafusion::datasource::source_as_provider(&scan.source) else {
        return false;
    };
    provider
        .as_ref()
        .downcast_ref::<provider::RelationProvider>()
        .is_none()
        && scan.table_name.schema().is_none()
        && (scan.table_name.table().starts_with("generate_series")
            || scan.table_name.table().starts_with("range"))
}

/// `42601` when an `UPDATE` sets a column twice (`SET x = 1, x = 2`), as in PostgreSQL.
///
/// # Errors
/// As said.
fn check_assignments(stmt: &Statement) -> Result<()> {
    use datafusion::sql::sqlparser::ast::AssignmentTarget;
    let Statement::Update(u) = stmt else {
        return Ok(());
    };
    let mut seen = std::collections::HashSet::new();
    for a in &u.assignments {
        let targets = match &a.target {
            AssignmentTarget::ColumnName(n) => vec![n],
            AssignmentTarget::Tuple(ns) => ns.iter().collect(),
        };
        for n in targets {
            let name = match n.0.last() {
                Some(datafusion::sql::sqlparser::ast::ObjectNamePart::Identifier(i)) => ident(i),
                Some(other) => other.to_string(),
                None => continue,
            };
            if !seen.insert(name.clone()) {
                return Err(Error::plan(
                    "42601",
                    format!("multiple assignments to same column \"{name}\""),
                ));
            }
        }
    }
    Ok(())
}

/// `batch` with the columns of `defaults` (column index, value) set to their value on every
/// row.
///
/// # Errors
/// Arrow errors building the columns.
fn fill_defaults(
    batch: RecordBatch,
    defaults: Vec<(usize, datafusion::common::ScalarValue)>,
) -> Result<RecordBatch> {
    if defaults.is_empty() {
        return Ok(batch);
    }
    let mut columns = batch.columns().to_vec();
    for (i, value) in defaults {
        columns[i] = value.to_array_of_size(batch.num_rows())?;
    }
    let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        batch.schema(),
        columns,
        &options,
    )?)
}

/// The output column names of each probe query, `None` for one that does not plan.
async fn probe_columns(
    state: &datafusion::execution::SessionState,
    probes: Vec<datafusion::sql::sqlparser::ast::Query>,
) -> Vec<Option<Vec<String>>> {
    let mut columns = Vec::with_capacity(probes.len());
    for probe in probes {
        let state = state.clone();
        let planned = off_runtime(move |rt| {
            rt.block_on(state.statement_to_plan(DfStatement::Statement(Box::new(
                Statement::Query(Box::new(probe)),
            ))))
            .map_err(Error::from)
        })
        .await;
        columns.push(planned.ok().map(|p| {
            p.schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect()
        }));
    }
    columns
}

/// A statement's logical plan, with PostgreSQL's integer types for its literals and
/// `numeric` parameters ([`crate::sql::semantics`]).
async fn plan_final(
    state: &datafusion::execution::SessionState,
    stmt: Statement,
) -> Result<LogicalPlan> {
    let state = state.clone();
    off_runtime(move |rt| {
        let plan = rt.block_on(state.statement_to_plan(DfStatement::Statement(Box::new(stmt))))?;
        let plan = crate::sql::semantics::int4_output_literals(plan)?;
        Ok(crate::sql::semantics::unconstrained_numeric_parameters(
            plan,
        )?)
    })
    .await
}
