//! `analyzer`: THE MetaRoCE / RoCEv2 flow engine ([`engine`]), shared by
//! the `metaroce-analyze` CLI (`analyzer/cli`), the live TUI and the
//! Wireshark plugin.
//!
//! The engine never reads bytes: frames are decoded by `proto_parse`, turned
//! into [`Observation`]s, and fed in capture order to [`Engine::ingest`].
#![forbid(unsafe_code)]

pub mod engine;
pub mod fmt;
pub mod observation;
pub mod traffic;

pub use engine::lint;

pub use engine::{Config, Engine, Observation, Report, Verdict};

/// The engine's version: the crate's and a hash of its sources (build.rs),
/// so that builds whose rules differ are told apart.
pub const ENGINE_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "+",
    env!("METAROCE_ENGINE_SOURCE")
);
