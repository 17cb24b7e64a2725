//! Per-capture state. Wireshark calls `register_init_routine` before a
//! capture file is read and `register_cleanup_routine` after it is closed;
//! both reset everything here, so opening a second file starts clean.

use std::sync::Mutex;

/// Counters of the current capture (the per-packet decode keeps no state).
#[derive(Debug, Default)]
pub struct State {
    /// Packets dissected since the last reset (first pass and later ones).
    pub dissected: u64,
}

static STATE: Mutex<State> = Mutex::new(State { dissected: 0 });

/// Forgets everything about the previous capture.
pub fn reset() {
    let mut state = STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *state = State::default();
}

/// Runs `f` on the current capture's state.
pub fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut state = STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&mut state)
}
