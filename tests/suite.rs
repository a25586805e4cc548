//! Weir's integration tests, as one test binary so that a build links DataFusion and RocksDB
//! into a test executable once rather than once per file. Each file below is a module; run one
//! with a filter, e.g. `cargo test --release --features failpoints --test suite crash::`.
//!
//! Two files are binaries of their own, because they look at or change the whole process:
//! `checkpoints.rs` sets failpoints (process-wide; they must not reach the views of tests
//! running beside it) and `shutdown.rs` counts the process's checkpointing threads.

mod common;

mod auth;
mod clients;
mod crash;
mod differential;
mod event_time;
mod integration;
mod nexmark_gen;
mod nexmark_queries;
mod nexmark_source;
mod pg_differential;
mod sqllogictests;
mod table_snapshots;
mod transactions;
