//! The FFI edge: the symbols Wireshark looks for in a plugin, registration
//! of the tables of [`crate::fields`], and the dissector callbacks. The same
//! code builds for Wireshark 4.0, 4.4 and 4.6: where their headers differ,
//! it uses the names of `epan_sys::compat`.
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

use std::any::Any;
use std::ffi::{CString, c_char, c_int, c_void};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::{null, null_mut};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};

use epan_sys as ws;
use proto_parse::frame::LinkType;
use proto_parse::metaroce;
use ws::compat::{CBool, PrefBool, Truth, c_bool};

use crate::analysis::{self, FrameMeta};
use crate::decode::{self, Checksum, Dissection, Item, Label, MAX_DEPTH, Options, Value};
use crate::fields::{
    Base, Custom, EXPERTS, Ei, Ett, ExpertDef, FIELDS, FieldDef, Group, Hf, Kind, Names, Severity,
};
use crate::{state, taps};

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
    register_protoinfo: Some(register_protoinfo),
    register_handoff: Some(register_handoff),
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

unsafe extern "C" fn register_protoinfo() {
    // SAFETY: called once by Wireshark at protocol registration time.
    guard("registration", || unsafe { register() });
}

unsafe extern "C" fn register_handoff() {
    // SAFETY: called once by Wireshark after every protocol is registered.
    guard("handoff", || unsafe { handoff() });
}

/// The engine settings from the preferences (`None`: analysis off).
fn analysis_config() -> Option<analyzer::Config> {
    PREF_ANALYZE
        .load(Ordering::Relaxed)
        .truth()
        .then(|| analyzer::Config {
            stall_threshold_ns: u64::from(PREF_STALL_US.load(Ordering::Relaxed)) * 1000,
            lint: PREF_LINT
                .load(Ordering::Relaxed)
                .truth()
                .then(analyzer::lint::LintOptions::default),
            ..analyzer::Config::default()
        })
}

unsafe extern "C" fn init_routine() {
    guard("init", || state::reset(analysis_config()));
}

unsafe extern "C" fn cleanup_routine() {
    guard("cleanup", || state::reset(analysis_config()));
}

fn value_strings<S: AsRef<str>>(values: impl Iterator<Item = (u8, S)>) -> *const c_void {
    let mut vs: Vec<ws::value_string> = values
        .map(|(value, name)| ws::value_string {
            value: value.into(),
            strptr: cstring(name.as_ref()).into_raw(),
        })
        .collect();
    vs.push(ws::value_string {
        value: 0,
        strptr: null(),
    });
    Box::leak(vs.into_boxed_slice()).as_ptr().cast()
}

fn ft(kind: Kind) -> ws::ftenum {
    match kind {
        Kind::U8 => ws::FT_UINT8,
        Kind::U16 => ws::FT_UINT16,
        Kind::U32 => ws::FT_UINT32,
        Kind::U64 => ws::FT_UINT64,
        Kind::Bool(_) => ws::FT_BOOLEAN,
        Kind::Bytes => ws::FT_BYTES,
        Kind::Str => ws::FT_STRING,
        Kind::Marker => ws::FT_NONE,
        Kind::Time => ws::FT_RELATIVE_TIME,
        Kind::FrameNum => ws::FT_FRAMENUM,
    }
}

/// `ITEM_LABEL_LENGTH` (proto.h): the size of the buffer a `BASE_CUSTOM`
/// function writes its label into.
const ITEM_LABEL_LENGTH: usize = 240;

/// Writes `text` into Wireshark's label buffer, cut to fit, NUL-terminated.
///
/// # Safety
/// `buf` points at `ITEM_LABEL_LENGTH` writable bytes.
unsafe fn write_label(buf: *mut c_char, text: &str) {
    let n = text.len().min(ITEM_LABEL_LENGTH - 1);
    // SAFETY: n + 1 <= ITEM_LABEL_LENGTH bytes, per the contract; the
    // regions do not overlap (text is Rust memory).
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
}

/// A `custom_fmt_func_t` for each [`Custom`] label: Wireshark calls it
/// only when it fills the item's label (the item is shown).
macro_rules! custom_fns {
    ($($name:ident => $custom:expr),* $(,)?) => {
        $(
            unsafe extern "C" fn $name(buf: *mut c_char, value: u32) {
                let text = catch_unwind(|| decode::custom_label($custom, value));
                let text = text.as_deref().unwrap_or("?");
                // SAFETY: Wireshark passes an ITEM_LABEL_LENGTH buffer.
                unsafe { write_label(buf, text) };
            }
        )*
    };
}

custom_fns! {
    label_words => Custom::Words,
    label_rnr_timer => Custom::RnrTimer,
    label_credit => Custom::Credit,
}

fn custom_fn(custom: Custom) -> *const c_void {
    let f: unsafe extern "C" fn(*mut c_char, u32) = match custom {
        Custom::Words => label_words,
        Custom::RnrTimer => label_rnr_timer,
        Custom::Credit => label_credit,
    };
    f as *const c_void
}

fn display(def: &FieldDef) -> c_int {
    if let Names::Custom(_) = def.names {
        return ws::BASE_CUSTOM as c_int;
    }
    match (def.kind, def.base) {
        (Kind::Bool(bits), _) => bits.into(),
        (Kind::Time | Kind::FrameNum, _) => ws::BASE_NONE as c_int,
        (_, Base::Dec) => ws::BASE_DEC as c_int,
        (_, Base::Hex) => ws::BASE_HEX as c_int,
        (_, Base::NoBase) => ws::BASE_NONE as c_int,
    }
}

fn hf_register_info(slot: &'static AtomicI32, def: &'static FieldDef) -> ws::hf_register_info {
    let strings = match def.names {
        Names::No => null(),
        Names::Table(values) => value_strings(values.iter().copied()),
        Names::FlagNames(set) => {
            value_strings((0..=u8::MAX).map(|b| (b, decode::flag_names(set, b))))
        }
        Names::Custom(custom) => custom_fn(custom),
        // Only the address of Wireshark's exported table is taken.
        Names::ChecksumStatus => (&raw const ws::proto_checksum_vals).cast(),
    };
    ws::hf_register_info {
        p_id: slot.as_ptr(),
        hfinfo: ws::header_field_info {
            name: def.name.as_ptr(),
            abbrev: def.abbrev.as_ptr(),
            type_: ft(def.kind),
            display: display(def),
            strings,
            bitmask: def.mask,
            blurb: def.blurb.map_or(null(), |b| b.as_ptr()),
            // HFILL
            id: -1,
            parent: 0,
            ref_type: ws::HF_REF_TYPE_NONE,
            same_name_prev_id: -1,
            same_name_next: null_mut(),
        },
    }
}

fn ei_register_info(slot: &'static EiSlot, def: &'static ExpertDef) -> ws::ei_register_info {
    let group = match def.group {
        Group::Malformed => ws::PI_MALFORMED,
        Group::Undecoded => ws::PI_UNDECODED,
        Group::Sequence => ws::PI_SEQUENCE,
        Group::Checksum => ws::PI_CHECKSUM,
        Group::Protocol => ws::PI_PROTOCOL,
    };
    let severity = match def.severity {
        Severity::Note => ws::PI_NOTE,
        Severity::Warn => ws::PI_WARN,
        Severity::Error => ws::PI_ERROR,
    };
    ws::ei_register_info {
        ids: (slot as *const EiSlot).cast_mut().cast(),
        eiinfo: ws::expert_field_info {
            name: def.abbrev.as_ptr(),
            group: group as c_int,
            severity: severity as c_int,
            summary: def.summary.as_ptr(),
            // EXPFILL
            id: 0,
            protocol: null(),
            orig_severity: 0,
            hf_info: ws::hf_register_info {
                p_id: null_mut(),
                hfinfo: ws::header_field_info {
                    name: null(),
                    abbrev: null(),
                    type_: ws::FT_NONE,
                    display: ws::BASE_NONE as c_int,
                    strings: null(),
                    bitmask: 0,
                    blurb: null(),
                    id: -1,
                    parent: 0,
                    ref_type: ws::HF_REF_TYPE_NONE,
                    same_name_prev_id: -1,
                    same_name_next: null_mut(),
                },
            },
        },
    }
}

/// # Safety
/// Called once, from Wireshark's protocol registration.
unsafe fn register() {
    // SAFETY: the names are C string literals ('static); Wireshark keeps them.
    let proto = unsafe {
        ws::proto_register_protocol(
            c"MetaRoCE".as_ptr(),
            c"MetaRoCE".as_ptr(),
            c"metaroce".as_ptr(),
        )
    };
    PROTO.store(proto, Ordering::Relaxed);
    if std::env::var_os("METAROCE_DISSECTOR_TEST_PANIC").is_some() {
        TEST_PANIC.store(1, Ordering::Relaxed);
    }

    let hf: Vec<ws::hf_register_info> = FIELDS
        .iter()
        .zip(HF.iter())
        .map(|(def, slot)| hf_register_info(slot, def))
        .collect();
    let hf = Box::leak(hf.into_boxed_slice());
    // SAFETY: the array is leaked ('static) as Wireshark requires; every
    // pointer in it is 'static.
    unsafe { ws::proto_register_field_array(proto, hf.as_mut_ptr(), hf.len() as c_int) };

    let ett: Vec<*mut c_int> = ETT.iter().map(AtomicI32::as_ptr).collect();
    let ett = Box::leak(ett.into_boxed_slice());
    // SAFETY: pointers to static atomics (same layout as int), array leaked.
    unsafe { ws::proto_register_subtree_array(ett.as_ptr(), ett.len() as c_int) };

    let ei: Vec<ws::ei_register_info> = EXPERTS
        .iter()
        .zip(EI.iter())
        .map(|(def, slot)| ei_register_info(slot, def))
        .collect();
    let ei = Box::leak(ei.into_boxed_slice());
    // SAFETY: as above; the ids point at static EiSlots laid out as expert_field.
    let module = unsafe {
        let module = ws::expert_register_protocol(proto);
        ws::expert_register_field_array(module, ei.as_mut_ptr(), ei.len() as c_int);
        module
    };
    // One expert info per lint rule, from the registry.
    let slots: &'static [EiSlot] = Box::leak(
        analyzer::lint::rules()
            .map(|_| EiSlot {
                ei: AtomicI32::new(-1),
                hf: AtomicI32::new(-1),
            })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let lint: Vec<ws::ei_register_info> = analyzer::lint::rules()
        .zip(slots.iter())
        .map(|((_, rule), slot)| {
            let leak = |s: String| &*Box::leak(cstring(&s).into_boxed_c_str());
            let def: &'static ExpertDef = Box::leak(Box::new(ExpertDef {
                abbrev: leak(crate::fields::lint_abbrev(rule.id)),
                group: Group::Protocol,
                severity: crate::fields::lint_severity(rule),
                summary: leak(format!("[{}] {}", rule.id, rule.statement)),
            }));
            ei_register_info(slot, def)
        })
        .collect();
    let lint = Box::leak(lint.into_boxed_slice());
    // SAFETY: as above: the array, the slots and every string are leaked.
    unsafe { ws::expert_register_field_array(module, lint.as_mut_ptr(), lint.len() as c_int) };
    let _ = LINT_EI.set(slots);

    // SAFETY: literals are 'static; the preference variables are static
    // atomics with the layout of the C boolean the headers use (CBool).
    unsafe {
        let prefs = ws::prefs_register_protocol(proto, None);
        ws::prefs_register_bool_preference(
            prefs,
            c"check_crc".as_ptr(),
            c"Verify the CRC32C trailer".as_ptr(),
            c"Whether to verify the CRC32C trailer of packets with flags.CRC (status good/bad); \
              when off the status is \"unverified\""
                .as_ptr(),
            PREF_CHECK_CRC.as_ptr(),
        );
        ws::prefs_register_bool_preference(
            prefs,
            c"heuristic_source_port".as_ptr(),
            c"Heuristic: require the entropy source port".as_ptr(),
            c"The UDP heuristic takes a packet only if its UDP source port is \
              0xC000 | (ev & 0x3FFF), as MetaRoCE senders set it (spec section 1)"
                .as_ptr(),
            PREF_HEUR_SRC_PORT.as_ptr(),
        );
        ws::prefs_register_bool_preference(
            prefs,
            c"analyze".as_ptr(),
            c"Analyze sequences (metaroce.analysis.*)".as_ptr(),
            c"Run the analyzer's flow engine over the capture: retransmissions, spurious \
              retransmissions, out-of-order packets, path loss, CE marks, RTTs, message \
              completion and stalls"
                .as_ptr(),
            PREF_ANALYZE.as_ptr(),
        );
        ws::prefs_register_bool_preference(
            prefs,
            c"lint".as_ptr(),
            c"Conformance lint (metaroce.lint.*)".as_ptr(),
            c"With the analysis on, check the rules of metaroce-analyze lint (docs/lint.md) on \
              every packet: each rule a packet breaks is an expert info metaroce.lint.<rule>, \
              and metaroce.lint names the rule"
                .as_ptr(),
            PREF_LINT.as_ptr(),
        );
        ws::prefs_register_uint_preference(
            prefs,
            c"stall_threshold_us".as_ptr(),
            c"Stall threshold (us)".as_ptr(),
            c"An interval longer than this with unacknowledged data and no cumulative-ack \
              advance is a stall (spec section 9)"
                .as_ptr(),
            10,
            PREF_STALL_US.as_ptr(),
        );
        let handle = ws::register_dissector(c"metaroce".as_ptr(), Some(dissect_cb), proto);
        HANDLE.store(handle, Ordering::Relaxed);
        crate::taps::register(proto);
        ws::register_init_routine(Some(init_routine));
        ws::register_cleanup_routine(Some(cleanup_routine));
    }
}

/// # Safety
/// Called once, from Wireshark's handoff phase.
unsafe fn handoff() {
    let handle = HANDLE.load(Ordering::Relaxed);
    // SAFETY: the handle was returned by register_dissector; the table and
    // heuristic list names are literals.
    unsafe {
        ws::dissector_add_uint_with_preference(
            c"udp.port".as_ptr(),
            metaroce::DEFAULT_PORT.into(),
            handle,
        );
        ws::heur_dissector_add(
            c"udp".as_ptr(),
            Some(heur_cb),
            c"MetaRoCE over UDP".as_ptr(),
            c"metaroce_udp".as_ptr(),
            PROTO.load(Ordering::Relaxed),
            ws::HEURISTIC_ENABLE,
        );
    }
}

/// What a dissection left to do once every Rust value is dropped.
#[derive(Debug, Clone, Copy)]
struct Done {
    consumed: c_int,
    /// (offset, length) of the captured payload for the `data` dissector.
    payload: Option<(c_int, c_int)>,
}

/// The captured bytes of `tvb` (never more: `tvb_get_ptr` throws past the
/// captured length), without copying them: for a tvb over real data (a
/// frame, or a subset of one, as UDP hands us) Wireshark returns a pointer
/// into the frame's buffer.
///
/// # Safety
/// `tvb` must be a valid tvbuff, and the slice must not outlive the
/// dissection of the current packet (Wireshark frees the data after it).
unsafe fn captured_bytes<'a>(tvb: *mut ws::tvbuff_t) -> &'a [u8] {
    // SAFETY: tvb is valid; tvb_captured_length never throws.
    let len = unsafe { ws::tvb_captured_length(tvb) };
    let Ok(n) = c_int::try_from(len) else {
        return &[];
    };
    if n == 0 {
        return &[];
    }
    // SAFETY: 0..len is exactly the captured range, so tvb_get_ptr does
    // not throw; it returns `len` contiguous bytes that live as long as the
    // packet's data (the caller's contract).
    unsafe {
        let ptr = ws::tvb_get_ptr(tvb, 0, n);
        if ptr.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(ptr, len as usize)
    }
}

unsafe extern "C" fn dissect_cb(
    tvb: *mut ws::tvbuff_t,
    pinfo: *mut ws::packet_info,
    tree: *mut ws::proto_tree,
    _data: *mut c_void,
) -> c_int {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: Wireshark passes a valid tvb and pinfo; tree may be NULL.
        let bytes = unsafe { captured_bytes(tvb) };
        // SAFETY: as above.
        unsafe { dissect_packet(tvb, pinfo, tree, bytes) }
    }));
    // SAFETY: as above; `finish` may throw, but this frame owns nothing.
    unsafe { finish(outcome, tvb, pinfo, tree) }
}

unsafe extern "C" fn heur_cb(
    tvb: *mut ws::tvbuff_t,
    pinfo: *mut ws::packet_info,
    tree: *mut ws::proto_tree,
    _data: *mut c_void,
) -> CBool {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: Wireshark passes a valid tvb and pinfo; tree may be NULL.
        let bytes = unsafe { captured_bytes(tvb) };
        // SAFETY: as above; reading two integers of pinfo.
        let (wire, src_port) = unsafe { (ws::tvb_reported_length(tvb) as usize, (*pinfo).srcport) };
        if !heuristic_accepts(bytes, wire, src_port) {
            return None;
        }
        // SAFETY: as above.
        Some(unsafe { dissect_packet(tvb, pinfo, tree, bytes) })
    }));
    match outcome {
        Ok(None) => c_bool(false),
        // SAFETY: as above; this frame owns nothing.
        Ok(Some(done)) => unsafe {
            finish(Ok(done), tvb, pinfo, tree);
            c_bool(true)
        },
        // SAFETY: as above.
        Err(panic) => unsafe { c_bool(finish(Err(panic), tvb, pinfo, tree) != 0) },
    }
}

/// The heuristic: a complete, fully valid packet (`metaroce::looks_like`)
/// whose UDP source port carries its entropy value (unless that
/// preference is off).
fn heuristic_accepts(bytes: &[u8], wire_len: usize, src_port: u32) -> bool {
    if bytes.len() != wire_len || !metaroce::looks_like(bytes) {
        return false;
    }
    if !PREF_HEUR_SRC_PORT.load(Ordering::Relaxed).truth() {
        return true;
    }
    metaroce::Packet::new_checked(bytes)
        .is_ok_and(|p| u32::from(metaroce::udp_source_port(p.ev())) == src_port)
}

/// Ends a callback: calls the data dissector, or reports a caught panic as a
/// dissector bug. Both may throw; the caller's frame and this one own no
/// value with a destructor by then.
///
/// # Safety
/// Valid Wireshark pointers, as passed to the callback.
unsafe fn finish(
    outcome: std::thread::Result<Done>,
    tvb: *mut ws::tvbuff_t,
    pinfo: *mut ws::packet_info,
    tree: *mut ws::proto_tree,
) -> c_int {
    match outcome {
        Ok(done) => {
            if let Some((offset, len)) = done.payload {
                // SAFETY: offset/len lie within the captured bytes (checked in
                // dissect_packet); caplen == reported length, so the data
                // dissector cannot run past it.
                unsafe {
                    let sub = ws::tvb_new_subset_length_caplen(tvb, offset, len, len);
                    ws::call_data_dissector(sub, pinfo, tree);
                }
            }
            done.consumed
        }
        Err(panic) => {
            let mut msg = [0u8; 256];
            panic_message(panic.as_ref(), &mut msg);
            drop(panic);
            // SAFETY: a literal format and a NUL-terminated stack buffer.
            // This throws (or aborts under WIRESHARK_ABORT_ON_DISSECTOR_BUG).
            unsafe {
                ws::proto_report_dissector_bug(
                    c"MetaRoCE dissector panicked: %s".as_ptr(),
                    msg.as_ptr().cast::<c_char>(),
                );
            }
            0
        }
    }
}

fn panic_message(panic: &(dyn Any + Send), out: &mut [u8; 256]) {
    let text = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("unknown panic");
    let n = text.len().min(out.len() - 1);
    out[..n].copy_from_slice(&text.as_bytes()[..n]);
    out[n] = 0;
}

thread_local! {
    /// The Dissection of the thread's previous packet, for its buffers.
    static SPARE: std::cell::Cell<Dissection> = std::cell::Cell::new(Dissection::default());
}

/// Decodes `bytes` (the captured bytes of `tvb`) and fills the columns and
/// the tree.
///
/// # Safety
/// Valid Wireshark pointers; `bytes` are the captured bytes of `tvb`.
unsafe fn dissect_packet(
    tvb: *mut ws::tvbuff_t,
    pinfo: *mut ws::packet_info,
    tree: *mut ws::proto_tree,
    bytes: &[u8],
) -> Done {
    // SAFETY: pinfo is valid; column calls never throw; the protocol name is
    // a literal (col_set_str keeps the pointer).
    let (cinfo, wire) = unsafe {
        let cinfo = (*pinfo).cinfo;
        ws::col_set_str(cinfo, ws::COL_PROTOCOL as c_int, c"MetaRoCE".as_ptr());
        ws::col_clear(cinfo, ws::COL_INFO as c_int);
        (cinfo, ws::tvb_reported_length(tvb) as usize)
    };
    assert!(
        TEST_PANIC.load(Ordering::Relaxed) == 0,
        "test panic (METAROCE_DISSECTOR_TEST_PANIC is set)"
    );
    // SAFETY: tvb is valid; tvb_raw_offset only reads (never throws).
    let frame_offset = unsafe { ws::tvb_raw_offset(tvb) };
    // SAFETY: tree is NULL or a valid proto_tree.
    let visible = unsafe { tree_visible(tree) };
    let opts = Options {
        check_crc: PREF_CHECK_CRC.load(Ordering::Relaxed).truth(),
        frame_offset: usize::try_from(frame_offset).unwrap_or(0),
        // No columns (tshark -T fields): no Info line to build.
        info: !cinfo.is_null(),
        // An invisible tree never shows labels (Wireshark drops them).
        labels: visible,
    };
    // One parse for the decode and the analysis.
    let lax = metaroce::parse_lax(bytes, wire);
    // The previous packet's Dissection, emptied and refilled: its buffers
    // are reused (taken, not borrowed: a dissection that never comes back
    // only costs a new one).
    let mut d = SPARE.take();
    decode::dissect_parsed_into(bytes, &lax, &opts, &mut d);
    // SAFETY: valid pointers (see above).
    let analysed = unsafe { verdict(pinfo, bytes, &lax) };
    let verdict = analysed.as_ref().map(|a| a.verdict);
    if let Some(a) = &analysed {
        analysis::add_items(&a.verdict, &mut d, opts.info || opts.labels);
        analysis::add_lint(&a.lint, a.host, &mut d);
    }
    if taps::wanted() {
        // SAFETY: valid pointers (see above).
        unsafe { taps::queue(pinfo, tap_record(pinfo, bytes, &d, verdict.as_ref())) };
    }
    if opts.info {
        let info = cstring(&d.info);
        // SAFETY: col_add_str copies the string.
        unsafe { ws::col_add_str(cinfo, ws::COL_INFO as c_int, info.as_ptr()) };
    }

    let emit = Emitter {
        tvb,
        pinfo,
        captured: bytes.len(),
        visible,
    };
    // SAFETY: valid pointers; every range is checked by the emitter.
    unsafe { emit.tree(tree, &d, bytes) };

    let payload = d.payload.as_ref().and_then(|p| {
        (p.end <= bytes.len() && !p.is_empty()).then(|| (p.start as c_int, p.len() as c_int))
    });
    SPARE.set(d);
    Done {
        consumed: c_int::try_from(wire).unwrap_or(c_int::MAX),
        payload,
    }
}

/// What this packet tells the statistics ([`taps`]).
///
/// # Safety
/// Valid `pinfo`, during the dissection of its packet.
unsafe fn tap_record(
    pinfo: *mut ws::packet_info,
    bytes: &[u8],
    d: &Dissection,
    verdict: Option<&analyzer::Verdict>,
) -> taps::Record {
    let conns = metaroce::Packet::new_checked(bytes)
        .ok()
        .map(|p| (p.src_conn(), p.dst_conn()));
    // SAFETY: pinfo and its frame_data are valid during dissection; the
    // addresses are copied as Wireshark's (shallow) structs, valid for the
    // packet.
    let (src, dst, frame_len) = unsafe {
        let fd = (*pinfo).fd;
        let len = if fd.is_null() { 0 } else { (*fd).pkt_len };
        ((*pinfo).src, (*pinfo).dst, len)
    };
    taps::Record {
        src,
        dst,
        conns,
        packet_type: d.packet_type,
        frame_len,
        retransmission: verdict.is_some_and(|v| v.retransmission.is_some()),
        path_loss: verdict.is_some_and(|v| v.path_loss.is_some()),
        stall: verdict.is_some_and(|v| v.stall.is_some()),
        malformed: d.notes.iter().any(|n| matches!(n.ei, Ei::Malformed)),
        bad_crc: matches!(d.checksum, Checksum::Present { stored, computed: Some(c), .. } if c != stored),
    }
}

/// The analysis of one frame: its verdict and, when it broke lint rules,
/// their findings and the host the capture is judged from.
struct Analysed {
    verdict: analyzer::Verdict,
    /// Empty (no allocation) unless the verdict names lint rules.
    lint: Vec<analyzer::lint::Finding>,
    host: Option<IpAddr>,
}

/// The sequence analysis of this frame: fed to the engine on the first
/// pass, looked up on later ones. `None` when the analysis is off or the
/// packet could not be analysed.
///
/// # Safety
/// Valid Wireshark pointers; `bytes` are the captured bytes of `tvb`.
unsafe fn verdict(
    pinfo: *mut ws::packet_info,
    bytes: &[u8],
    lax: &metaroce::Lax<'_>,
) -> Option<Analysed> {
    if !PREF_ANALYZE.load(Ordering::Relaxed).truth() {
        return None;
    }
    // SAFETY: pinfo and its frame_data are valid during dissection.
    let (num, visited) = unsafe {
        let fd = (*pinfo).fd;
        ((*pinfo).num, !fd.is_null() && (*fd).visited() != 0)
    };
    // SAFETY: as above (only read on the first pass).
    let meta = (!visited).then(|| unsafe { frame_meta(pinfo, bytes) });
    state::with(|s| {
        let a = s.analysis.as_mut()?;
        let verdict = match &meta {
            Some(meta) => a.ingest_parsed(meta, lax),
            None => a.lookup(num),
        }?;
        let (lint, host) = if verdict.lint.is_empty() {
            (Vec::new(), None)
        } else {
            let (found, host) = a.lint(num);
            (found.to_vec(), host)
        };
        Some(Analysed {
            verdict,
            lint,
            host,
        })
    })
}

/// `WTAP_ENCAP_*` to the link types `proto_parse::frame` decodes.
fn link_type(encap: u32) -> Option<LinkType> {
    Some(match encap {
        ws::WTAP_ENCAP_ETHERNET => LinkType::Ethernet,
        ws::WTAP_ENCAP_SLL => LinkType::LinuxSll,
        ws::WTAP_ENCAP_SLL2 => LinkType::LinuxSll2,
        ws::WTAP_ENCAP_RAW_IP => LinkType::Raw,
        ws::WTAP_ENCAP_RAW_IP4 => LinkType::Ipv4,
        ws::WTAP_ENCAP_RAW_IP6 => LinkType::Ipv6,
        ws::WTAP_ENCAP_NULL => LinkType::Null,
        ws::WTAP_ENCAP_LOOP => LinkType::Loop,
        _ => return None,
    })
}

/// Frame number, time, IP addresses and ECN bits of the packet. The IP
/// layer is decoded by `proto_parse::frame` from the frame's bytes (so the
/// engine sees what the `metaroce-analyze` CLI sees); when that is not
/// possible (another link type, a tunnel) the addresses come from
/// Wireshark's `pinfo` and the ECN bits are taken as not-CE.
///
/// # Safety
/// Valid Wireshark pointers; `bytes` are the captured bytes of the packet.
unsafe fn frame_meta(pinfo: *mut ws::packet_info, bytes: &[u8]) -> FrameMeta {
    // SAFETY: pinfo is valid; abs_ts and num are plain values.
    let (num, ts) = unsafe { ((*pinfo).num, (*pinfo).abs_ts) };
    let ts_ns = u64::try_from(ts.secs)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.nsecs).unwrap_or(0));
    // SAFETY: as above; rec, data_src and the data source are valid or NULL.
    let outer = unsafe {
        let rec = (*pinfo).rec;
        let link = if rec.is_null() || (*rec).rec_type != 0 {
            None
        } else {
            link_type((*rec).rec_header.packet_header.pkt_encap as u32)
        };
        let ds = (*pinfo).data_src;
        match (link, ds.is_null()) {
            (Some(link), false) => {
                let frame_tvb = ws::get_data_source_tvb((*ds).data as *const ws::data_source);
                if frame_tvb.is_null() {
                    None
                } else {
                    // The frame's bytes, not copied: `bytes` usually points
                    // into them, so outer_layers compares pointers.
                    let frame = captured_bytes(frame_tvb);
                    analysis::outer_layers(link, frame, bytes)
                }
            }
            _ => None,
        }
    };
    let outer = outer.unwrap_or_else(|| {
        // SAFETY: pinfo is valid; the addresses are read per their type/len.
        unsafe {
            analysis::Outer {
                src: address(&(*pinfo).src),
                dst: address(&(*pinfo).dst),
                ecn: 0,
                src_port: u16::try_from((*pinfo).srcport).unwrap_or(0),
                dst_port: u16::try_from((*pinfo).destport).unwrap_or(0),
            }
        }
    });
    FrameMeta {
        frame: num,
        ts_ns,
        src: outer.src,
        dst: outer.dst,
        ecn: outer.ecn,
        src_port: outer.src_port,
        dst_port: outer.dst_port,
    }
}

/// An IPv4/IPv6 Wireshark address (unspecified for other types).
///
/// # Safety
/// `addr.data` points at `addr.len` bytes when non-NULL.
unsafe fn address(addr: &ws::address) -> IpAddr {
    let len = usize::try_from(addr.len).unwrap_or(0);
    if addr.data.is_null() {
        return IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    }
    // SAFETY: per the contract above.
    let data = unsafe { std::slice::from_raw_parts(addr.data.cast::<u8>(), len) };
    match (addr.type_ as u32, data.len()) {
        (ws::AT_IPv4, 4) => IpAddr::V4(Ipv4Addr::new(data[0], data[1], data[2], data[3])),
        (ws::AT_IPv6, 16) => {
            let mut o = [0u8; 16];
            o.copy_from_slice(data);
            IpAddr::V6(Ipv6Addr::from(o))
        }
        _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    }
}

/// Replays a [`Dissection`] into Wireshark's tree, over checked ranges.
struct Emitter {
    tvb: *mut ws::tvbuff_t,
    pinfo: *mut ws::packet_info,
    captured: usize,
    /// The tree is shown (GUI, `-V`, PDML/JSON): every item is added. When
    /// not, Wireshark fakes (drops) every item whose field is not
    /// referenced by a filter or `-e`, and every text item; the emitter
    /// skips those itself, before preparing them (their children still go
    /// to the parent tree, as with a faked item).
    visible: bool,
}

/// Whether `tree` is shown (`PTREE_DATA(tree)->visible`).
///
/// # Safety
/// `tree` is NULL or a valid proto_tree.
unsafe fn tree_visible(tree: *mut ws::proto_tree) -> bool {
    if tree.is_null() {
        return false;
    }
    // SAFETY: a valid proto_tree has valid tree_data while the packet is
    // dissected.
    unsafe {
        let data = (*tree).tree_data;
        !data.is_null() && (*data).visible.truth()
    }
}

impl Emitter {
    /// `(start, length)` of `range` if it lies within the captured bytes,
    /// else `(0, 0)` (an item with no bytes never makes a tvb throw).
    fn span(&self, range: &std::ops::Range<usize>) -> (c_int, c_int) {
        if range.start <= range.end && range.end <= self.captured {
            (range.start as c_int, range.len() as c_int)
        } else {
            (0, 0)
        }
    }

    /// # Safety
    /// Valid pointers; `bytes` are the captured bytes.
    unsafe fn tree(&self, tree: *mut ws::proto_tree, d: &Dissection, bytes: &[u8]) {
        let (start, len) = self.span(&d.header);
        // SAFETY: checked range; the summary is copied by Wireshark.
        let root = unsafe {
            let item = ws::proto_tree_add_item(
                tree,
                PROTO.load(Ordering::Relaxed),
                self.tvb,
                start,
                len,
                ws::ENC_NA,
            );
            if self.visible && d.packet_type.is_some() {
                // The protocol item reads "MetaRoCE, <Info line>" once the
                // base header is there. Setting the whole text skips the
                // label Wireshark would first fill in to append to
                // (proto_item_append_text: ~170 instructions more);
                // proto_tree_add_protocol_format costs more still (2 500
                // against 1 650 for the item and the appended text).
                let (n, text) = text_arg(&d.info);
                ws::proto_item_set_text(item, c"MetaRoCE, %.*s".as_ptr(), n, text);
            }
            ws::proto_item_add_subtree(item, ett_id(Ett::Root))
        };
        if !root.is_null() {
            // SAFETY: as above.
            unsafe { self.items(root, d, bytes) };
        }
        // SAFETY: as above.
        unsafe { self.checksum(root, d.checksum) };
        for note in &d.notes {
            let (start, len) = self.span(&note.range);
            let (n, text) = text_arg(&note.text);
            // SAFETY: checked range; literal format; text copied.
            unsafe {
                ws::proto_tree_add_expert_format(
                    root,
                    self.pinfo,
                    ei_ptr(note.ei),
                    self.tvb,
                    start,
                    len,
                    c"%.*s".as_ptr(),
                    n,
                    text,
                );
            }
        }
        for note in &d.lint {
            let Some(ei) = lint_ei_ptr(note.rule) else {
                continue;
            };
            let (n, text) = text_arg(&note.text);
            // SAFETY: an item with no bytes; literal format; text copied;
            // `ei` is a registered (leaked) expert field.
            unsafe {
                ws::proto_tree_add_expert_format(
                    root,
                    self.pinfo,
                    ei,
                    self.tvb,
                    0,
                    0,
                    c"%.*s".as_ptr(),
                    n,
                    text,
                );
            }
        }
    }

    /// Adds `items` (a flat list in tree order, see [`Item`]) under `root`
    /// in one pass: `trees[d]` is the tree that takes the items of depth
    /// `d`, i.e. the subtree of the last item of depth `d - 1`.
    ///
    /// # Safety
    /// Valid pointers; `bytes` are the captured bytes.
    unsafe fn items(&self, root: *mut ws::proto_tree, d: &Dissection, bytes: &[u8]) {
        let items = &d.items[..];
        let mut trees = [null_mut::<ws::proto_tree>(); MAX_DEPTH as usize + 2];
        trees[0] = root;
        for (i, item) in items.iter().enumerate() {
            let depth = usize::from(item.depth.min(MAX_DEPTH));
            let parent = trees[depth];
            let has_children = items.get(i + 1).is_some_and(|n| n.depth > item.depth);
            // SAFETY: parent is root, a subtree added during this packet, or
            // NULL (accepted by every proto_tree_add_* call).
            trees[depth + 1] = unsafe { self.item(parent, d, item, has_children, bytes) };
        }
    }

    /// Adds one item to `tree`; returns the tree its children go to.
    ///
    /// # Safety
    /// Valid pointers; `bytes` are the captured bytes.
    unsafe fn item(
        &self,
        tree: *mut ws::proto_tree,
        d: &Dissection,
        item: &Item,
        has_children: bool,
        bytes: &[u8],
    ) -> *mut ws::proto_tree {
        if !self.visible {
            let wanted = match &item.label {
                Label::Text(_) => false,
                // SAFETY: tree is NULL or a valid proto_tree; the id is
                // registered.
                Label::Field(hf, _) => unsafe {
                    !tree.is_null() && ws::proto_field_is_referenced(tree, hf_id(*hf)).truth()
                },
            };
            if !wanted {
                // What Wireshark does with a faked item: no item, the
                // children go to the parent tree.
                return tree;
            }
        }
        let (start, len) = self.span(&item.range);
        let tvb = self.tvb;
        let ett = ett_id(item.subtree.unwrap_or(Ett::Root));
        // SAFETY: checked range; literal formats; strings are copied by
        // Wireshark; the bytes pointer covers `len` bytes at `start`.
        let added = unsafe {
            match &item.label {
                Label::Text(text) => {
                    let (n, text) = text_arg(d.text(*text));
                    let mut added: *mut ws::proto_item = null_mut();
                    let sub = ws::proto_tree_add_subtree_format(
                        tree,
                        tvb,
                        start,
                        len,
                        ett,
                        &mut added,
                        c"%.*s".as_ptr(),
                        n,
                        text,
                    );
                    if item.generated {
                        set_generated(added);
                    }
                    return sub;
                }
                Label::Field(hf, value) => {
                    let id = hf_id(*hf);
                    match (value, hf.def().kind) {
                        (Value::Uint(v), Kind::U64) => {
                            ws::proto_tree_add_uint64(tree, id, tvb, start, len, *v)
                        }
                        (Value::Uint(v), _) => {
                            ws::proto_tree_add_uint(tree, id, tvb, start, len, *v as u32)
                        }
                        (Value::Bits(v), Kind::Bool(_)) => {
                            // A guint32 in 4.0, a uint64_t from 4.4 on.
                            #[allow(clippy::useless_conversion)]
                            let value = (*v).into();
                            ws::proto_tree_add_boolean(tree, id, tvb, start, len, value)
                        }
                        (Value::Bits(v), _) => {
                            ws::proto_tree_add_uint(tree, id, tvb, start, len, *v)
                        }
                        (Value::Bytes, _) => {
                            let at = start as usize;
                            let ptr = bytes
                                .get(at..at + len as usize)
                                .map_or(null(), <[u8]>::as_ptr);
                            ws::proto_tree_add_bytes(tree, id, tvb, start, len, ptr)
                        }
                        (Value::Text(t), _) => with_cstr(d.text(*t), |t| {
                            ws::proto_tree_add_string(tree, id, tvb, start, len, t)
                        }),
                        (Value::Marker, _) => {
                            ws::proto_tree_add_item(tree, id, tvb, start, len, ws::ENC_NA)
                        }
                        (Value::Time(ns), _) => {
                            let t = ws::nstime_t {
                                secs: (*ns / 1_000_000_000) as ws::time_t,
                                nsecs: (*ns % 1_000_000_000) as c_int,
                            };
                            ws::proto_tree_add_time(tree, id, tvb, start, len, &t)
                        }
                    }
                }
            }
        };
        if item.generated {
            // SAFETY: added is NULL or a valid proto_item.
            unsafe { set_generated(added) };
        }
        if has_children {
            // SAFETY: added is NULL or valid (NULL gives a NULL subtree,
            // which the children's proto_tree_add_* calls accept).
            unsafe { ws::proto_item_add_subtree(added, ett) }
        } else {
            null_mut()
        }
    }

    /// # Safety
    /// Valid pointers.
    unsafe fn checksum(&self, tree: *mut ws::proto_tree, checksum: Checksum) {
        let status = |value: ws::proto_checksum_enum_e| {
            // SAFETY: an item with no bytes; valid tree/tvb.
            unsafe {
                let item =
                    ws::proto_tree_add_uint(tree, hf_id(Hf::CrcStatus), self.tvb, 0, 0, value);
                set_generated(item);
            }
        };
        match checksum {
            Checksum::Absent => {}
            Checksum::Missing { trimmed: true } => status(ws::PROTO_CHECKSUM_E_NOT_PRESENT),
            Checksum::Missing { trimmed: false } => status(ws::PROTO_CHECKSUM_E_UNVERIFIED),
            Checksum::Present {
                offset,
                stored,
                computed,
            } => {
                if offset + 4 > self.captured {
                    status(ws::PROTO_CHECKSUM_E_UNVERIFIED);
                    return;
                }
                if computed == Some(stored) {
                    // A good CRC: the value and "[CRC32C status: Good]".
                    // proto_tree_add_checksum would also format
                    // " [correct]" into the value's label on every packet;
                    // the status item says it already.
                    // SAFETY: the 4 trailer bytes are captured (checked
                    // above); valid tree/tvb.
                    unsafe {
                        ws::proto_tree_add_uint(
                            tree,
                            hf_id(Hf::Crc),
                            self.tvb,
                            offset as c_int,
                            4,
                            stored,
                        );
                    }
                    status(ws::PROTO_CHECKSUM_E_GOOD);
                    return;
                }
                let (value, flags) = match computed {
                    Some(c) => (c, ws::PROTO_CHECKSUM_VERIFY),
                    None => (0, ws::PROTO_CHECKSUM_NO_FLAGS),
                };
                // SAFETY: the 4 trailer bytes are captured (checked above), so
                // reading them cannot throw.
                unsafe {
                    ws::proto_tree_add_checksum(
                        tree,
                        self.tvb,
                        offset as u32,
                        hf_id(Hf::Crc),
                        hf_id(Hf::CrcStatus),
                        ei_ptr(Ei::CrcBad),
                        self.pinfo,
                        value,
                        ws::ENC_BIG_ENDIAN,
                        flags,
                    );
                }
            }
        }
    }
}

/// `proto_item_set_generated` (a static inline function in proto.h).
///
/// # Safety
/// `item` is NULL or a valid proto_item.
unsafe fn set_generated(item: *mut ws::proto_item) {
    if item.is_null() {
        return;
    }
    // SAFETY: item is valid; finfo is NULL or valid (FI_SET_FLAG checks it).
    unsafe {
        let fi = (*item).finfo;
        if !fi.is_null() {
            (*fi).flags |= ws::FI_GENERATED;
        }
    }
}
