//! `metaroce-top`: a live terminal view of MetaRoCE and RoCEv2 traffic.
//!
//! ```text
//!  libpcap (-i) ─┐                          ┌─ Snapshot (Arc, short lock) ─▶ render/ (UI thread)
//!                ├─▶ capture thread: decode ─┤
//!  replay (-r) ──┘   (proto_parse) ─▶ Engine └─ --headless: JSON at the end
//! ```
//!
//! - [`pipeline`]: frames ─▶ `proto_parse::frame::decode` ─▶
//!   `Observation::from_frame` ─▶ the analyzer's flow `Engine`; builds the
//!   [`model::Snapshot`] (engine report, capture statistics, rates, latency
//!   histogram, event log). No I/O, no clock: tests drive it directly.
//! - [`source`]: the capture thread (libpcap in non-blocking mode with
//!   polling, or a paced replay of a capture file) and its handle.
//! - [`metrics`]: `--metrics`, the snapshots served to Prometheus.
//! - [`app`] + [`keys`]: UI state and the key-binding table; [`render`]: one
//!   file per pane; [`term`]: terminal setup, restore and panic hook.
#![forbid(unsafe_code)]

pub mod app;
pub mod events;
pub mod keys;
pub mod latency;
pub mod metrics;
pub mod model;
pub mod pipeline;
pub mod points;
pub mod render;
pub mod source;
pub mod term;
