//! What the engine's parts are given with each packet they handle.

use super::Config;
use super::verdict::{MsgDone, Verdict};

/// One packet as the part of the engine that handles it sees it: when it
/// was captured, the engine's settings, and where its analysis goes (the
/// packet's verdict and the messages it completed), instead of five
/// arguments threaded through every call.
pub(crate) struct PacketContext<'a> {
    /// The packet's frame number.
    pub frame: u64,
    /// The packet's capture time (ns).
    pub ts: u64,
    pub cfg: &'a Config,
    pub v: &'a mut Verdict,
    /// Every message the packet completed (`Engine::messages_done`).
    pub done: &'a mut Vec<MsgDone>,
}
