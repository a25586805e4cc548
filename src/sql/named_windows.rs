//! Named windows referenced with changes: `OVER (w ORDER BY x)`, `OVER (w ROWS ...)`, and
//! `WINDOW w2 AS (w1 ORDER BY x)`, resolved into inline window specifications before
//! planning (DataFusion's planner drops the referenced window's clauses in these forms).
//!
//! PostgreSQL's rules (docs, 4.2.8 "Window Function Calls", and `transformWindowDefinitions`):
//! the new window takes the referenced one's `PARTITION BY` and may not add its own; it takes
//! the referenced one's `ORDER BY` unless it has its own, and may not give one when the
//! referenced one has one; it may not copy a window that has a frame clause; its frame is its
//! own. Violations are `42P20` (windowing_error), as in PostgreSQL. A bare `OVER w` is left to
//! DataFusion, unless `w` is itself defined from another window.

use std::collections::HashMap;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, Ident, NamedWindowDefinition, NamedWindowExpr, Query, Select, SetExpr, Statement,
    VisitMut, VisitorMut, WindowSpec, WindowType,
};

use crate::error::{Error, Result};

/// Resolves every window that refers to a named window in `stmt` (see the module docs).
///
/// # Errors
/// `42P20` for an override PostgreSQL refuses; `42704` for a window name that is not defined.
pub fn resolve_named_windows(stmt: &mut Statement) -> Result<()> {
    let mut v = Resolver { error: None };
    let _ = VisitMut::visit(stmt, &mut v);
    match v.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

struct Resolver {
    error: Option<Error>,
}

impl VisitorMut for Resolver {
    type Break = ();

    // After the children: a subquery's own windows are resolved before its outer query's.
    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        if let Err(e) = resolve_set_expr(&mut query.body) {
            self.error = Some(e);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

fn resolve_set_expr(body: &mut SetExpr) -> Result<()> {
    match body {
        SetExpr::Select(select) => resolve_select(select),
        SetExpr::SetOperation { left, right, .. } => {
            resolve_set_expr(left)?;
            resolve_set_expr(right)
        }
        _ => Ok(()),
    }
}

fn windowing_error(message: String) -> Error {
    Error::plan("42P20", message)
}

/// `spec` on top of the named window `base` (already resolved), by PostgreSQL's rules.
fn merge(name: &Ident, base: &WindowSpec, spec: &WindowSpec) -> Result<WindowSpec> {
    if !spec.partition_by.is_empty() {
        return Err(windowing_error(format!(
            "cannot override PARTITION BY clause of window \"{}\"",
            name.value
        )));
    }
    if !spec.order_by.is_empty() && !base.order_by.is_empty() {
        return Err(windowing_error(format!(
            "cannot override ORDER BY clause of window \"{}\"",
            name.value
        )));
    }
    if base.window_frame.is_some() {
        return Err(windowing_error(format!(
            "cannot copy window \"{}\" because it has a frame clause",
            name.value
        )));
    }
    Ok(WindowSpec {
        window_name: None,
        partition_by: base.partition_by.clone(),
        order_by: if spec.order_by.is_empty() {
            base.order_by.clone()
        } else {
            spec.order_by.clone()
        },
        window_frame: spec.window_frame.clone(),
    })
}

fn undefined(name: &Ident) -> Error {
    Error::plan("42704", format!("window \"{}\" does not exist", name.value))
}

fn resolve_select(select: &mut Select) -> Result<()> {
    if select.named_window.is_empty() {
        return Ok(());
    }
    // The definitions in order; each may refer to an earlier one.
    let mut defined: HashMap<String, WindowSpec> = HashMap::new();
    let mut chained = false;
    for NamedWindowDefinition(name, expr) in &mut select.named_window {
        let resolved = match expr {
            NamedWindowExpr::NamedWindow(other) => {
                chained = true;
                defined
                    .get(&other.value)
                    .cloned()
                    .ok_or_else(|| undefined(other))?
            }
            NamedWindowExpr::WindowSpec(spec) => match &spec.window_name {
                Some(base) => {
                    chained = true;
                    let b = defined.get(&base.value).ok_or_else(|| undefined(base))?;
                    merge(base, b, spec)?
                }
                None => spec.clone(),
            },
        };
        *expr = NamedWindowExpr::WindowSpec(resolved.clone());
        defined.insert(name.value.clone(), resolved);
    }
    let mut calls = Calls {
        defined: &defined,
        inline_named: chained,
        error: None,
    };
    for item in &mut select.projection {
        let _ = VisitMut::visit(item, &mut calls);
    }
    if let Some(q) = &mut select.qualify {
        let _ = VisitMut::visit(q, &mut calls);
    }
    if let Some(h) = &mut select.having {
        let _ = VisitMut::visit(h, &mut calls);
    }
    match calls.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Rewrites the window calls of one SELECT's expressions.
struct Calls<'a> {
    defined: &'a HashMap<String, WindowSpec>,
    /// Whether a bare `OVER w` is inlined too (when a definition was chained).
    inline_named: bool,
    error: Option<Error>,
}

impl VisitorMut for Calls<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        let Expr::Function(f) = expr else {
            return ControlFlow::Continue(());
        };
        let resolved = match &f.over {
            Some(WindowType::WindowSpec(spec)) => match &spec.window_name {
                Some(name) => self
                    .defined
                    .get(&name.value)
                    .ok_or_else(|| undefined(name))
                    .and_then(|base| merge(name, base, spec)),
                None => return ControlFlow::Continue(()),
            },
            Some(WindowType::NamedWindow(name)) if self.inline_named => self
                .defined
                .get(&name.value)
                .cloned()
                .ok_or_else(|| undefined(name)),
            _ => return ControlFlow::Continue(()),
        };
        match resolved {
            Ok(spec) => {
                f.over = Some(WindowType::WindowSpec(spec));
                ControlFlow::Continue(())
            }
            Err(e) => {
                self.error = Some(e);
                ControlFlow::Break(())
            }
        }
    }
}
