//! Panes, one file each; [`app`] lays them out.

pub mod app;
pub mod columns;
pub mod connections;
pub mod detail;
pub mod events;
pub mod fmt;
pub mod help;
pub mod latency;
pub mod paths;
pub mod status;
