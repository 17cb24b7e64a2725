//! Per-capture state. Wireshark calls `register_init_routine` before a
//! capture file is read and `register_cleanup_routine` after it is closed;
//! both call [`reset`], so opening a second file starts clean.

use std::sync::{Mutex, PoisonError};

use analyzer::engine::Config;

use crate::analysis::Analysis;

/// The state of the current capture.
pub struct State {
    /// The sequence analysis (`None` when the preference turns it off).
    pub analysis: Option<Analysis>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

/// Forgets everything about the previous capture and starts a new one with
/// these settings (`None`: no sequence analysis).
pub fn reset(cfg: Option<Config>) {
    let mut state = STATE.lock().unwrap_or_else(PoisonError::into_inner);
    *state = Some(State {
        analysis: cfg.map(Analysis::new),
    });
}

/// Runs `f` on the current capture's state (started with the default
/// settings if no capture was reset yet).
pub fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut state = STATE.lock().unwrap_or_else(PoisonError::into_inner);
    let state = state.get_or_insert_with(|| State {
        analysis: Some(Analysis::new(Config::default())),
    });
    f(state)
}
