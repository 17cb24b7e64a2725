//! Filled by its issue; see ARCHITECTURE.md.
pub mod decode;
