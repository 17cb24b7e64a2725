//! The benchmarks, one file each. Each prints its table and returns its
//! figures for the doc's table (`crate::figures`).

pub mod analyzer;
pub mod connections;
pub mod html;
pub mod lint;
pub mod mirror;
pub mod plugin;
pub mod stack;
pub mod tui;
