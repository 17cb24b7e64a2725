//! Registration: protocol, fields, subtrees, expert infos (the lint's from
//! its registry), preferences, init/cleanup routines, and the handoff to
//! UDP.

use std::ffi::{c_char, c_int, c_void};
use std::panic::catch_unwind;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicI32, Ordering};

use epan_sys as ws;
use proto_parse::metaroce;
use ws::compat::Truth;

use super::dissect::{dissect_cb, heur_cb};
use super::*;
use crate::decode;
use crate::fields::{
    Base, Custom, EXPERTS, ExpertDef, FIELDS, FieldDef, Group, Kind, Names, Severity, is_rocev2,
};
use crate::state;

pub(super) unsafe extern "C" fn register_protoinfo() {
    // SAFETY: called once by Wireshark at protocol registration time.
    guard("registration", || unsafe { register() });
}

pub(super) unsafe extern "C" fn register_handoff() {
    // SAFETY: called once by Wireshark after every protocol is registered.
    guard("handoff", || unsafe { handoff() });
}

/// The engine settings from the preferences (`None`: analysis off).
fn analysis_config() -> Option<analyzer::Config> {
    let metaroce = PREF_ANALYZE.load(Ordering::Relaxed).truth();
    let rocev2 = PREF_ROCE.load(Ordering::Relaxed).truth();
    (metaroce || rocev2).then(|| analyzer::Config {
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
    let (proto, roce) = unsafe {
        (
            ws::proto_register_protocol(
                c"MetaRoCE".as_ptr(),
                c"MetaRoCE".as_ptr(),
                c"metaroce".as_ptr(),
            ),
            ws::proto_register_protocol(
                c"RoCEv2 analysis (MetaRoCE toolkit)".as_ptr(),
                c"RoCEv2 analysis".as_ptr(),
                c"rocev2".as_ptr(),
            ),
        )
    };
    PROTO.store(proto, Ordering::Relaxed);
    PROTO_ROCE.store(roce, Ordering::Relaxed);
    if std::env::var_os("METAROCE_DISSECTOR_TEST_PANIC").is_some() {
        TEST_PANIC.store(1, Ordering::Relaxed);
    }

    // Each field and expert info under its protocol, by its name's prefix.
    for (id, rocev2) in [(proto, false), (roce, true)] {
        let hf: Vec<ws::hf_register_info> = FIELDS
            .iter()
            .zip(HF.iter())
            .filter(|(def, _)| is_rocev2(def.abbrev) == rocev2)
            .map(|(def, slot)| hf_register_info(slot, def))
            .collect();
        let hf = Box::leak(hf.into_boxed_slice());
        // SAFETY: the array is leaked ('static) as Wireshark requires; every
        // pointer in it is 'static.
        unsafe { ws::proto_register_field_array(id, hf.as_mut_ptr(), hf.len() as c_int) };
    }

    let ett: Vec<*mut c_int> = ETT.iter().map(AtomicI32::as_ptr).collect();
    let ett = Box::leak(ett.into_boxed_slice());
    // SAFETY: pointers to static atomics (same layout as int), array leaked.
    unsafe { ws::proto_register_subtree_array(ett.as_ptr(), ett.len() as c_int) };

    let mut modules = [null_mut(); 2];
    for (module, (id, rocev2)) in modules.iter_mut().zip([(proto, false), (roce, true)]) {
        let ei: Vec<ws::ei_register_info> = EXPERTS
            .iter()
            .zip(EI.iter())
            .filter(|(def, _)| is_rocev2(def.abbrev) == rocev2)
            .map(|(def, slot)| ei_register_info(slot, def))
            .collect();
        let ei = Box::leak(ei.into_boxed_slice());
        // SAFETY: as above; the ids point at static EiSlots laid out as
        // expert_field.
        *module = unsafe {
            let module = ws::expert_register_protocol(id);
            ws::expert_register_field_array(module, ei.as_mut_ptr(), ei.len() as c_int);
            module
        };
    }
    // One expert info per lint rule, from the registry, under the
    // protocol of the rule.
    let slots: &'static [EiSlot] = Box::leak(
        analyzer::lint::rules()
            .map(|_| EiSlot {
                ei: AtomicI32::new(-1),
                hf: AtomicI32::new(-1),
            })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    for (module, protocol) in modules.into_iter().zip([
        analyzer::lint::Protocol::MetaRoce,
        analyzer::lint::Protocol::RoceV2,
    ]) {
        let lint: Vec<ws::ei_register_info> = analyzer::lint::rules()
            .zip(slots.iter())
            .filter(|((_, rule), _)| rule.protocol == protocol)
            .map(|((_, rule), slot)| {
                let leak = |s: String| &*Box::leak(cstring(&s).into_boxed_c_str());
                let def: &'static ExpertDef = Box::leak(Box::new(ExpertDef {
                    abbrev: leak(crate::fields::lint_abbrev(rule)),
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
    }
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
        let prefs = ws::prefs_register_protocol(roce, None);
        ws::prefs_register_bool_preference(
            prefs,
            c"analyze".as_ptr(),
            c"Analyze RoCEv2 beside the InfiniBand dissector (rocev2.analysis.*)".as_ptr(),
            c"For every frame the InfiniBand dissector decodes as RoCEv2: the analyzer's PSN \
              sequence analysis, request/response pairing, NAKs, READ completeness, CNP \
              pacing, the ICRC check and the RC-* lint rules (with metaroce.lint)"
                .as_ptr(),
            PREF_ROCE.as_ptr(),
        );
        let post = ws::create_dissector_handle(Some(super::rocev2::postdissect_cb), roce);
        ws::register_postdissector(post);
        let handle = ws::register_dissector(c"metaroce".as_ptr(), Some(dissect_cb), proto);
        HANDLE.store(handle, Ordering::Relaxed);
        crate::taps::register(proto);
        crate::rocev2_tap::register();
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
