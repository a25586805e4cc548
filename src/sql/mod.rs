//! SQL planning below the session: parsing and its PostgreSQL rewrites, semantic checks,
//! output names, COPY formats, functions, the providers that expose tables and views to
//! DataFusion, the system catalogs, and decorrelation of subqueries. Statement dispatch (what
//! a session does with a statement) lives in [`crate::session`].

pub mod alias_lists;
pub mod char_compare;
pub mod copy;
pub mod copy_binary;
pub mod count_row;
pub mod decorrelate;
pub mod dialect;
pub mod dml_with;
pub mod equal_keys;
pub mod event_time;
pub mod filter_first;
pub mod functions;
pub mod guard_fallible;
pub mod lateral_aggregates;
pub mod lookup_join;
pub mod named_windows;
pub(crate) mod names;
pub mod oid_columns;
pub mod parse;
pub mod provider;
pub mod push_down_filter;
pub mod semantics;
pub mod set_ops;
pub mod single_distinct;
pub mod stream_plan;
pub mod subplan;
pub mod system;
pub mod temporal;
pub mod using_joins;
pub mod windows;
