//! `INSERT ... ON CONFLICT` (PostgreSQL docs, "INSERT", section "ON CONFLICT Clause"):
//!
//! ```text
//!  INSERT INTO t [AS a] ... ON CONFLICT [(k, ...) | ON CONSTRAINT name]
//!      DO NOTHING
//!    | DO UPDATE SET c = expr, ... [WHERE cond]      (expr and cond see a.c and excluded.c)
//! ```
//!
//! The arbiter is the primary key or a unique index whose columns are the listed ones (in
//! any order), or the named one (`t_pkey` for the primary key); `DO NOTHING` without a target
//! arbitrates on every unique key. The proposed rows are computed as for a plain `INSERT`;
//! the stored rows sharing an arbiter key with one of them are looked up by key
//! ([`crate::engine::Engine::rows_with_key`], O(proposed rows × log n), plus the open
//! transaction block's own changes to the table); then, row by row in proposal order, a row
//! whose key is stored or was proposed earlier in the statement is skipped (`DO NOTHING`) or
//! replaces the stored row by the `SET` values (`DO UPDATE`, when `WHERE` holds; a key proposed
//! twice is `21000`, as in PostgreSQL), and every other row is inserted. The statement writes
//! all of it as one change, checked as any write is: a key another session took meanwhile is
//! `23505` (PostgreSQL would wait for that session and then update).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, UInt32Array};
use arrow::datatypes::{Field, Schema, SchemaRef};
use arrow::row::{RowConverter, SortField};
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, ConflictTarget, Expr as SqlExpr, Ident, OnConflict, OnConflictAction,
    visit_expressions_mut,
};

use crate::catalog::{IndexDef, RelationDef, RelationKind};
use crate::common::{ChangeBatch, RelationId};
use crate::error::{Error, Result};

/// The prefix of the columns that carry the proposed (`excluded`) row while `SET` and `WHERE`
/// are evaluated.
const EXCLUDED: &str = "__weir_excluded_";

/// The row number column of that evaluation.
const ROW: &str = "__weir_upsert_row";

/// A unique key an `ON CONFLICT` clause arbitrates on.
#[derive(Debug, Clone)]
pub struct Arbiter {
    /// `None`: the primary key; else the unique index's id.
    pub index: Option<RelationId>,
    /// The key's columns (indexes into the table's columns).
    pub columns: Vec<usize>,
}

/// What a conflicting row does.
#[derive(Debug, Clone)]
pub enum Action {
    /// `DO NOTHING`: it is skipped.
    Nothing,
    /// `DO UPDATE SET ... [WHERE ...]`: (column index, value) pairs, and the condition; the
    /// expressions with `excluded.c` already renamed to the proposed row's columns.
    Update {
        assignments: Vec<(usize, SqlExpr)>,
        selection: Option<Box<SqlExpr>>,
    },
}

/// An `ON CONFLICT` clause resolved against its table.
#[derive(Debug, Clone)]
pub struct Upsert {
    /// The keys a proposed row may conflict on (none: the table has no unique key, every row
    /// is inserted).
    pub arbiters: Vec<Arbiter>,
    /// What a conflicting row does.
    pub action: Action,
    /// The name the stored row goes by in `SET` and `WHERE` (the table's alias or name).
    pub target: String,
}

fn ident_name(i: &Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_ascii_lowercase()
    }
}

/// Resolves `clause` for an insert into `def` (indexes `indexes`; `alias` the `AS` name).
///
/// # Errors
/// `42P10` when no unique key has the listed columns; `42704` for an unknown constraint;
/// `42703` for an unknown column; `42601` for `DO UPDATE` without a target or a column
/// assigned twice; `0A000` for forms Weir does not take (a target's `WHERE`, collations,
/// tuple assignments, `DEFAULT` values).
pub fn resolve(
    clause: &OnConflict,
    def: &RelationDef,
    indexes: &[IndexDef],
    alias: Option<&Ident>,
) -> Result<Upsert> {
    let schema = def.schema_ref();
    let column = |name: &str| -> Result<usize> {
        schema
            .fields()
            .iter()
            .position(|f| f.name() == name)
            .ok_or_else(|| {
                Error::plan(
                    "42703",
                    format!(
                        "column \"{name}\" of relation \"{}\" does not exist",
                        def.name
                    ),
                )
            })
    };
    let primary_key: Vec<usize> = match &def.kind {
        RelationKind::Table { primary_key } => primary_key.clone(),
        _ => Vec::new(),
    };
    let pk_arbiter = || Arbiter {
        index: None,
        columns: primary_key.clone(),
    };
    let index_arbiter = |i: &IndexDef| Arbiter {
        index: Some(i.id),
        columns: i.columns.iter().map(|c| c.column).collect(),
    };
    let unique: Vec<&IndexDef> = indexes.iter().filter(|i| i.unique).collect();
    let arbiters = match &clause.conflict_target {
        None => {
            if matches!(clause.action, OnConflictAction::DoUpdate(_)) {
                return Err(Error::plan(
                    "42601",
                    "ON CONFLICT DO UPDATE requires inference specification or constraint name",
                ));
            }
            let mut all = Vec::new();
            if !primary_key.is_empty() {
                all.push(pk_arbiter());
            }
            all.extend(unique.iter().map(|i| index_arbiter(i)));
            all
        }
        Some(ConflictTarget::Columns(names)) => {
            let mut wanted = names
                .iter()
                .map(|n| column(&ident_name(n)))
                .collect::<Result<Vec<_>>>()?;
            wanted.sort_unstable();
            wanted.dedup();
            let same = |cols: &[usize]| {
                let mut c = cols.to_vec();
                c.sort_unstable();
                c == wanted
            };
            if !primary_key.is_empty() && same(&primary_key) {
                vec![pk_arbiter()]
            } else if let Some(i) = unique.iter().find(|i| same(&index_arbiter(i).columns)) {
                vec![index_arbiter(i)]
            } else {
                return Err(Error::plan(
                    "42P10",
                    "there is no unique or exclusion constraint matching the ON CONFLICT \
                     specification",
                ));
            }
        }
        Some(ConflictTarget::OnConstraint(name)) => {
            let name = name
                .0
                .last()
                .and_then(|p| p.as_ident())
                .map(ident_name)
                .unwrap_or_default();
            if !primary_key.is_empty() && name == format!("{}_pkey", def.name) {
                vec![pk_arbiter()]
            } else if let Some(i) = unique.iter().find(|i| i.name == name) {
                vec![index_arbiter(i)]
            } else {
                return Err(Error::plan(
                    "42704",
                    format!(
                        "constraint \"{name}\" for table \"{}\" does not exist",
                        def.name
                    ),
                ));
            }
        }
    };
    let target = alias.map(ident_name).unwrap_or_else(|| def.name.clone());
    let action = match &clause.action {
        OnConflictAction::DoNothing => Action::Nothing,
        OnConflictAction::DoUpdate(u) => {
            let mut assignments = Vec::new();
            for a in &u.assignments {
                let AssignmentTarget::ColumnName(name) = &a.target else {
                    return Err(Error::not_supported(
                        "a tuple of columns in ON CONFLICT DO UPDATE SET",
                    ));
                };
                let [part] = name.0.as_slice() else {
                    return Err(Error::plan(
                        "42703",
                        format!(
                            "column \"{name}\" of relation \"{}\" does not exist",
                            def.name
                        ),
                    ));
                };
                let c = column(&part.as_ident().map(ident_name).unwrap_or_default())?;
                if assignments.iter().any(|(d, _)| *d == c) {
                    return Err(Error::plan(
                        "42601",
                        format!(
                            "multiple assignments to same column \"{}\"",
                            schema.field(c).name()
                        ),
                    ));
                }
                let value = excluded_as_columns(a.value.clone())?;
                assignments.push((c, value));
            }
            let selection = u
                .selection
                .clone()
                .map(|s| excluded_as_columns(s).map(Box::new))
                .transpose()?;
            Action::Update {
                assignments,
                selection,
            }
        }
    };
    Ok(Upsert {
        arbiters,
        action,
        target,
    })
}

/// `e` with `excluded.c` renamed to the proposed row's column `c`; `DEFAULT` and subqueries
/// are `0A000`. An unqualified column is the stored row's (PostgreSQL calls it ambiguous,
/// 42702).
fn excluded_as_columns(mut e: SqlExpr) -> Result<SqlExpr> {
    let mut error = None;
    let _ = visit_expressions_mut(&mut e, |e| {
        match e {
            SqlExpr::CompoundIdentifier(parts)
                if parts.len() == 2 && ident_name(&parts[0]) == "excluded" =>
            {
                let name = ident_name(&parts[1]);
                *e = SqlExpr::Identifier(Ident::with_quote('"', format!("{EXCLUDED}{name}")));
            }
            SqlExpr::Subquery(_) | SqlExpr::Exists { .. } | SqlExpr::InSubquery { .. } => {
                error.get_or_insert(Error::not_supported(
                    "a subquery in ON CONFLICT DO UPDATE SET or WHERE",
                ));
            }
            SqlExpr::Identifier(i)
                if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default") =>
            {
                error.get_or_insert(Error::not_supported("DEFAULT in ON CONFLICT DO UPDATE SET"));
            }
            _ => {}
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    match error {
        Some(e) => Err(e),
        None => Ok(e),
    }
}

/// What an upsert writes: the change, the rows `RETURNING` sees (inserted rows, then updated
/// rows' new values) and the count of the command tag.
pub struct Outcome {
    /// Deletes of the replaced rows, inserts of their new values and of the new rows.
    pub change: ChangeBatch,
    /// The inserted and the updated rows.
    pub rows: RecordBatch,
    /// Rows inserted or updated.
    pub count: usize,
}

/// A row's encoding in one key (`None` when a key column is NULL: it conflicts with nothing).
fn key_rows(
    converter: &RowConverter,
    batch: &RecordBatch,
    columns: &[usize],
) -> Result<Vec<Option<Box<[u8]>>>> {
    let cols: Vec<ArrayRef> = columns.iter().map(|c| batch.column(*c).clone()).collect();
    let rows = converter.convert_columns(&cols)?;
    Ok((0..batch.num_rows())
        .map(|i| {
            columns
                .iter()
                .all(|c| batch.column(*c).is_valid(i))
                .then(|| Box::from(rows.row(i).data()))
        })
        .collect())
}

/// `21000`: a proposed row conflicts with a row the statement inserted or updated.
pub fn twice() -> Error {
    Error::data(
        "21000",
        "ON CONFLICT DO UPDATE command cannot affect row a second time (rows proposed for \
         insertion within the same command have duplicate constrained values)",
    )
}

/// The decisions of [`decide`], by row index: the proposed rows to insert, and the (stored
/// row, proposed row) pairs that may update (in proposal order: the first whose `WHERE`
/// holds updates its stored row; a later pair of that row is then `21000`, see [`twice`]).
pub type Decisions = (Vec<u32>, Vec<(u32, u32)>);

/// Decides each proposed row (see the module docs): `stored` holds the rows of the table
/// (as this session sees it) that share a key with a proposed row.
///
/// # Errors
/// `21000` when `DO UPDATE` meets a key proposed twice; Arrow errors.
pub fn decide(
    upsert: &Upsert,
    schema: &SchemaRef,
    proposed: &RecordBatch,
    stored: &RecordBatch,
) -> Result<Decisions> {
    let mut inserts = Vec::new();
    let mut updates = Vec::new();
    let mut keys = Vec::with_capacity(upsert.arbiters.len());
    for a in &upsert.arbiters {
        let converter = RowConverter::new(
            a.columns
                .iter()
                .map(|c| SortField::new(schema.field(*c).data_type().clone()))
                .collect(),
        )?;
        let stored_keys: HashMap<Box<[u8]>, u32> = key_rows(&converter, stored, &a.columns)?
            .into_iter()
            .enumerate()
            .filter_map(|(i, k)| k.map(|k| (k, i as u32)))
            .collect();
        keys.push((
            stored_keys,
            key_rows(&converter, proposed, &a.columns)?,
            HashSet::<Box<[u8]>>::new(),
        ));
    }
    for i in 0..proposed.num_rows() {
        match &upsert.action {
            Action::Nothing => {
                let conflict = keys.iter().any(|(stored, mine, seen)| {
                    mine[i]
                        .as_ref()
                        .is_some_and(|k| stored.contains_key(k) || seen.contains(k))
                });
                if !conflict {
                    inserts.push(i as u32);
                    for (_, mine, seen) in &mut keys {
                        if let Some(k) = &mine[i] {
                            seen.insert(k.clone());
                        }
                    }
                }
            }
            Action::Update { .. } => {
                let (stored, mine, inserted) = &mut keys[0];
                let Some(k) = &mine[i] else {
                    inserts.push(i as u32);
                    continue;
                };
                if inserted.contains(k) {
                    return Err(twice());
                }
                match stored.get(k) {
                    Some(s) => updates.push((*s, i as u32)),
                    None => {
                        inserted.insert(k.clone());
                        inserts.push(i as u32);
                    }
                }
            }
        }
    }
    Ok((inserts, updates))
}

/// The batch `SET` and `WHERE` are evaluated over: the stored row's columns under their
/// names, the proposed row's as `__weir_excluded_<name>`, and the pair's number.
pub fn update_input(
    schema: &SchemaRef,
    stored: &RecordBatch,
    proposed: &RecordBatch,
    pairs: &[(u32, u32)],
) -> Result<RecordBatch> {
    let olds = UInt32Array::from(pairs.iter().map(|p| p.0).collect::<Vec<_>>());
    let news = UInt32Array::from(pairs.iter().map(|p| p.1).collect::<Vec<_>>());
    let mut fields: Vec<Field> = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for (c, f) in schema.fields().iter().enumerate() {
        fields.push(Field::new(f.name(), f.data_type().clone(), true));
        columns.push(arrow::compute::take(stored.column(c), &olds, None)?);
    }
    for (c, f) in schema.fields().iter().enumerate() {
        fields.push(Field::new(
            format!("{EXCLUDED}{}", f.name()),
            f.data_type().clone(),
            true,
        ));
        columns.push(arrow::compute::take(proposed.column(c), &news, None)?);
    }
    fields.push(Field::new(ROW, arrow::datatypes::DataType::Int64, false));
    columns.push(Arc::new(Int64Array::from_iter_values(
        0..pairs.len() as i64,
    )));
    Ok(RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns,
    )?)
}

/// The name of the pair-number column of [`update_input`].
pub fn row_column() -> &'static str {
    ROW
}
