//! Filled by its issue; see ARCHITECTURE.md.
