//! `proto-parse`: the one parser (and emitter) of the MetaRoCE wire format,
//! RoCEv2, the outer Ethernet/IP/UDP layers and capture files. Every other
//! crate of the workspace decodes bytes through this crate and nowhere else.
//!
//! # Panics and checks
//! When parsing untrusted input, construct views with `new_checked` (or go
//! through [`frame::decode`]); getters of a checked view never panic. When
//! emitting, build a `Repr` and call `emit` on a buffer of `buffer_len()`
//! bytes.
#![deny(unsafe_code)]

pub mod build;
pub mod capture;
pub mod defrag;
pub mod error;
pub mod frame;
pub mod link;
pub mod metaroce;
pub mod mirror;
pub mod rocev2;

pub use error::{Error, ErrorKind, Layer, LenSource, Warning};
