//! `metaroce-dissector`: a Wireshark plugin (cdylib; 4.0, 4.4 and 4.6) that dissects
//! MetaRoCE v1 (spec `metaroce-wire-v1.md`) on UDP port 4794, through Decode
//! As, and with a heuristic on UDP.
//!
//! - [`decode`]: Wireshark-free; turns captured bytes into items, Info line
//!   and expert notes, reading every byte through `proto_parse::metaroce`.
//! - [`fields`]: the registered fields (spec section 10 names), subtrees and
//!   expert infos, as plain tables.
//! - [`analysis`]: `metaroce.analysis.*`, from the `analyzer` crate's flow
//!   engine (fed on the first pass, verdicts kept per frame).
//! - [`rocev2`]: `rocev2.analysis.*`, the engine's analysis of RoCEv2
//!   beside Wireshark's InfiniBand dissector (a post-dissector).
//! - `ffi`: the plugin symbols, registration, and callbacks wrapped in
//!   `catch_unwind`; with `taps` and `rocev2_tap` (conversations,
//!   endpoints and the stats trees), the only `unsafe` code.

pub mod analysis;
pub mod decode;
mod ffi;
pub mod fields;
pub mod rocev2;
mod rocev2_tap;
pub mod state;
mod tap;
mod taps;
