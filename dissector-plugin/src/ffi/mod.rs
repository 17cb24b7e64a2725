//! The FFI edge: the symbols Wireshark looks for in a plugin, the ids
//! Wireshark hands back at registration, and the helpers every callback
//! shares. The same code builds for Wireshark 4.0, 4.4 and 4.6: where their
//! headers differ, it uses the names of `epan_sys::compat`.
//!
//! - `register`: the tables of [`crate::fields`], preferences, handoff;
//! - `dissect`: the MetaRoCE dissector and heuristic callbacks, the
//!   analysis of a frame;
//! - `rocev2`: the RoCEv2 analysis post-dissector (beside Wireshark's
//!   InfiniBand dissector);
//! - `emit`: replays a [`crate::decode::Dissection`] into Wireshark's tree.
//!
//! Rules kept here:
//! - every callback runs its Rust work inside `catch_unwind`; a caught panic
//!   becomes `proto_report_dissector_bug`, called only after every Rust value
//!   with a destructor is gone (it throws, i.e. longjmps);
//! - the captured bytes are copied once (`tvb_captured_length`) and decoded in
//!   safe Rust ([`crate::decode`]); items are added only over ranges checked
//!   against the captured length, so no tvb accessor throws over Rust frames;
//! - the `data` dissector (which may throw) is called last, from a frame that
//!   owns nothing, over a sub-tvb whose reported length is its captured length;
//! - everything Wireshark keeps a pointer to (names, value strings, the hf/ett/
//!   ei arrays, the `proto_plugin`) is `'static`: literals, statics or leaked
//!   once at registration.
#![allow(unsafe_code)]

use std::ffi::{CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::null_mut;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};

use epan_sys as ws;
use ws::compat::{PrefBool, c_bool};

use crate::fields::{Ei, Ett, Hf};

mod dissect;
mod emit;
mod register;
mod rocev2;

const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");

const fn version_bytes<const N: usize>() -> [u8; N] {
    let src = VERSION.as_bytes();
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = src[i];
        i += 1;
    }
    out
}

/// `const char plugin_version[]`: the plugin's version, NUL-terminated.
#[unsafe(no_mangle)]
#[used]
pub static plugin_version: [u8; VERSION.len()] = version_bytes();

/// The Wireshark major version this plugin was built against.
#[unsafe(no_mangle)]
#[used]
pub static plugin_want_major: c_int = ws::WIRESHARK_VERSION_MAJOR as c_int;

/// The Wireshark minor version this plugin was built against (must match).
#[unsafe(no_mangle)]
#[used]
pub static plugin_want_minor: c_int = ws::WIRESHARK_VERSION_MINOR as c_int;

static PLUGIN: ws::proto_plugin = ws::proto_plugin {
    register_protoinfo: Some(register::register_protoinfo),
    register_handoff: Some(register::register_handoff),
};

/// What the plugin registers (4.4 and later require this symbol; 4.0 does
/// not look for it).
#[unsafe(no_mangle)]
pub extern "C" fn plugin_describe() -> u32 {
    ws::compat::PLUGIN_DESC_DISSECTOR
}

/// Called by Wireshark when it loads the plugin.
#[unsafe(no_mangle)]
pub extern "C" fn plugin_register() {
    // SAFETY: PLUGIN is a static with valid function pointers; Wireshark
    // keeps the pointer for the life of the process.
    unsafe { ws::proto_register_plugin(&PLUGIN) }
}

// Ids Wireshark writes at registration (through the pointers we give it).
static PROTO: AtomicI32 = AtomicI32::new(-1);
/// The "RoCEv2 analysis" protocol of the post-dissector (`rocev2`).
static PROTO_ROCE: AtomicI32 = AtomicI32::new(-1);
static HF: [AtomicI32; Hf::COUNT] = [const { AtomicI32::new(-1) }; Hf::COUNT];
static ETT: [AtomicI32; Ett::COUNT] = [const { AtomicI32::new(-1) }; Ett::COUNT];

/// Layout-compatible with Wireshark's `expert_field { int ei; int hf; }`.
#[repr(C)]
struct EiSlot {
    ei: AtomicI32,
    hf: AtomicI32,
}

static EI: [EiSlot; Ei::COUNT] = [const {
    EiSlot {
        ei: AtomicI32::new(-1),
        hf: AtomicI32::new(-1),
    }
}; Ei::COUNT];

/// One expert info per lint rule, in registry order (`RuleId::index`),
/// made and leaked at registration.
static LINT_EI: OnceLock<&'static [EiSlot]> = OnceLock::new();

/// Boolean preferences Wireshark writes to.
static PREF_CHECK_CRC: PrefBool = PrefBool::new(c_bool(true));
static PREF_HEUR_SRC_PORT: PrefBool = PrefBool::new(c_bool(true));
static PREF_ANALYZE: PrefBool = PrefBool::new(c_bool(true));
static PREF_LINT: PrefBool = PrefBool::new(c_bool(true));
static PREF_ROCE: PrefBool = PrefBool::new(c_bool(true));
/// `guint` preference: the stall threshold in microseconds.
static PREF_STALL_US: AtomicU32 = AtomicU32::new(1000);

static HANDLE: AtomicPtr<ws::dissector_handle> = AtomicPtr::new(null_mut());

/// Set at registration when `METAROCE_DISSECTOR_TEST_PANIC` is in the
/// environment: the dissector then panics on every packet, so the tests can
/// check that a panic becomes a dissector bug report, not an abort.
static TEST_PANIC: AtomicI32 = AtomicI32::new(0);

fn hf_id(hf: Hf) -> c_int {
    HF[hf as usize].load(Ordering::Relaxed)
}

fn ett_id(ett: Ett) -> c_int {
    ETT[ett as usize].load(Ordering::Relaxed)
}

fn ei_ptr(ei: Ei) -> *mut ws::expert_field {
    (&raw const EI[ei as usize]).cast_mut().cast()
}

/// The expert field of the lint rule at `index` in the registry (`None`
/// before registration).
fn lint_ei_ptr(index: usize) -> Option<*mut ws::expert_field> {
    let slot = LINT_EI.get()?.get(index)?;
    Some((slot as *const EiSlot).cast_mut().cast())
}

/// A C string for Wireshark to copy (never fails: NULs are replaced).
fn cstring(s: &str) -> CString {
    if s.as_bytes().contains(&0) {
        CString::new(s.replace('\0', "\u{fffd}")).unwrap_or_default()
    } else {
        CString::new(s).unwrap_or_default()
    }
}

/// Calls `f` with `s` as a C string for Wireshark to copy: from a stack
/// buffer when it is short (no allocation), else as [`cstring`].
fn with_cstr<R>(s: &str, f: impl FnOnce(*const c_char) -> R) -> R {
    let mut buf = [0u8; 128];
    if s.len() < buf.len() && !s.as_bytes().contains(&0) {
        buf[..s.len()].copy_from_slice(s.as_bytes());
        f(buf.as_ptr().cast())
    } else {
        f(cstring(s).as_ptr())
    }
}

/// `(length, pointer)` of `s` for a `"%.*s"` format argument: Wireshark
/// formats (copies) at most `length` bytes, so the text needs no NUL
/// terminator and no copy (a NUL inside ends it early, harmlessly).
fn text_arg(s: &str) -> (c_int, *const c_char) {
    let len = c_int::try_from(s.len()).unwrap_or(c_int::MAX);
    (len, s.as_ptr().cast())
}

/// Runs registration code, reporting (not propagating) a panic.
fn guard(what: &str, f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        eprintln!("metaroce: panic during {what}; the plugin may be incomplete");
    }
}
