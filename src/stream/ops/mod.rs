//! Streaming operators, one file each.

pub mod dynamic_filter;
pub mod exchange;
pub mod filter;
pub mod hash_agg;
pub mod hash_join;
pub mod over_window;
pub mod project;
pub mod scan;
pub mod semi_join;
pub mod temporal_filter;
pub mod union;
pub mod values;
