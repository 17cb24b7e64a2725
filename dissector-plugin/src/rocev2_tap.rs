//! The `rocev2` tap and its stats tree (Statistics > RoCEv2 QPs, `tshark
//! -z rocev2,tree`): one node per RC flow (request source and destination
//! and the requests' destination QP, as the engine keys it), counting its
//! packets and what the analysis found in them. Records are queued by the
//! RoCEv2 post-dissector only while a listener is attached.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_int, c_void};
use std::net::IpAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicI32, Ordering};

use analyzer::engine::RetxKind;
use epan_sys as ws;
use proto_parse::rocev2::{IcrcStatus, Syndrome};
use ws::compat::c_bool;

use crate::tap::Tap;

use crate::analysis::RoceAnalysed;
use crate::rocev2::RocePacket;

/// The `rocev2` tap.
pub(crate) static TAP: Tap<Record> = Tap::new();

/// What one RoCEv2 packet tells the stats tree. Plain data (no
/// destructor): it lives in the packet's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    /// The flow's request source, destination and destination QP (`None`:
    /// no RC flow, e.g. an unmatched response or a UD packet).
    pub flow: Option<(IpAddr, IpAddr, u32)>,
    pub retransmission: bool,
    pub duplicate: bool,
    pub psn_gap: bool,
    pub nak: bool,
    pub rnr_nak: bool,
    pub cnp: bool,
    pub ce_marked: bool,
    pub bad_icrc: bool,
}

impl Record {
    /// The record of a packet: its analysis (if any) and what was read
    /// from it.
    pub(crate) fn of(a: Option<&RoceAnalysed>, p: &RocePacket) -> Record {
        let v = a.map(|a| a.verdict).unwrap_or_default();
        let retx = v.retransmission;
        let psn_gap = a.is_some_and(|a| {
            a.facts.expected_psn.is_some_and(|e| {
                let ahead = p.psn.wrapping_sub(e) & 0x00FF_FFFF;
                retx.is_none() && ahead != 0 && ahead < 0x80_0000
            })
        });
        let syndrome = v.rocev2_nak.map(Syndrome::from_byte);
        Record {
            flow: a.and_then(|a| a.key),
            retransmission: retx.is_some(),
            duplicate: retx.is_some_and(|r| r.kind == RetxKind::Spurious),
            psn_gap,
            nak: matches!(syndrome, Some(Syndrome::Nak(_) | Syndrome::Reserved { .. })),
            rnr_nak: matches!(syndrome, Some(Syndrome::RnrNak { .. })),
            cnp: v.cnp_rocev2,
            ce_marked: v.ce_marked,
            bad_icrc: matches!(p.icrc, IcrcStatus::Bad { .. }),
        }
    }
}

/// Registers the tap and the stats tree.
///
/// # Safety
/// Called once, from protocol registration.
pub(crate) unsafe fn register() {
    // SAFETY: literals are 'static; the callbacks have the C signatures
    // stats_tree expects.
    unsafe {
        TAP.register(c"rocev2");
        ws::stats_tree_register_plugin(
            c"rocev2".as_ptr(),
            c"rocev2".as_ptr(),
            c"RoCEv2 QPs".as_ptr(),
            0,
            Some(tree_packet),
            Some(tree_init),
            None,
        );
    }
}

static NODE_FLOWS: AtomicI32 = AtomicI32::new(0);

unsafe extern "C" fn tree_init(st: *mut ws::stats_tree) {
    // SAFETY: st is the tree being set up; the name is copied.
    let flows = unsafe {
        ws::stats_tree_create_node(
            st,
            c"RC flows (QPs)".as_ptr(),
            0,
            ws::STAT_DT_INT,
            c_bool(true),
        )
    };
    NODE_FLOWS.store(flows, Ordering::Relaxed);
}

/// Adds one to the node `name` under `parent`; returns its id.
///
/// # Safety
/// A valid stats tree.
unsafe fn tick(st: *mut ws::stats_tree, name: &CStr, parent: c_int) -> c_int {
    // SAFETY: per the contract; the name is copied.
    unsafe {
        ws::stats_tree_manip_node_int(ws::MN_INCREASE, st, name.as_ptr(), parent, c_bool(true), 1)
    }
}

unsafe extern "C" fn tree_packet(
    st: *mut ws::stats_tree,
    _pinfo: *mut ws::packet_info,
    _edt: *mut ws::epan_dissect_t,
    data: *const c_void,
    _flags: ws::tap_flags_t,
) -> ws::tap_packet_status {
    // SAFETY: data is NULL or our Record.
    let Some(r) = (unsafe { data.cast::<Record>().as_ref() }).copied() else {
        return ws::TAP_PACKET_DONT_REDRAW;
    };
    let Some((src, dst, qp)) = r.flow else {
        return ws::TAP_PACKET_DONT_REDRAW;
    };
    let name = catch_unwind(AssertUnwindSafe(|| {
        CString::new(format!("{src} -> {dst} QP 0x{qp:06x}")).unwrap_or_default()
    }))
    .unwrap_or_default();
    // SAFETY: st is the tree the listener draws; names are copied.
    unsafe {
        tick(st, c"RC flows (QPs)", 0);
        let flow = tick(st, &name, NODE_FLOWS.load(Ordering::Relaxed));
        let found = [
            (r.retransmission, c"Retransmissions"),
            (r.duplicate, c"Duplicates"),
            (r.psn_gap, c"PSN gaps"),
            (r.nak, c"NAKs"),
            (r.rnr_nak, c"RNR NAKs"),
            (r.cnp, c"CNPs"),
            (r.ce_marked, c"CE-marked"),
            (r.bad_icrc, c"Bad ICRC"),
        ];
        for (on, label) in found {
            if on {
                tick(st, label, flow);
            }
        }
    }
    ws::TAP_PACKET_REDRAW
}
