//! The RoCEv2 analysis post-dissector. Wireshark's InfiniBand dissector
//! keeps UDP port 4791 and its own fields; after every dissector has run
//! on a frame, this callback takes the frames the InfiniBand dissector
//! decoded (`infiniband` among the frame's protocols) or that go to UDP
//! port 4791, decodes the frame's bytes with `proto_parse::frame` (as
//! `metaroce-analyze` does: a RoCEv2 packet by its destination port),
//! feeds the engine on the first pass, and adds a "RoCEv2 analysis" tree
//! ([`crate::rocev2`]), the RC-* lint findings, the Info tags and the
//! `rocev2` tap's record.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use analyzer::engine::Observation;
use epan_sys as ws;
use proto_parse::frame::{self, DecodeConfig, Transport};
use ws::compat::{Truth, c_bool};

use super::dissect::{captured_bytes, link_type, panic_message};
use super::emit::{Emitter, tree_visible};
use super::*;
use crate::analysis::RoceAnalysed;
use crate::decode::Dissection;
use crate::rocev2::{self, RocePacket};
use crate::{rocev2_tap, state};

thread_local! {
    /// The previous RoCEv2 packet's Dissection, for its buffers.
    static SPARE: Cell<Dissection> = Cell::new(Dissection::default());
}

pub(super) unsafe extern "C" fn postdissect_cb(
    tvb: *mut ws::tvbuff_t,
    pinfo: *mut ws::packet_info,
    tree: *mut ws::proto_tree,
    _data: *mut c_void,
) -> c_int {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: Wireshark passes a valid tvb (the frame's) and pinfo;
        // tree may be NULL.
        unsafe { analyse_frame(tvb, pinfo, tree) }
    }));
    match outcome {
        Ok(()) => 0,
        Err(panic) => {
            let mut msg = [0u8; 256];
            panic_message(panic.as_ref(), &mut msg);
            drop(panic);
            // SAFETY: a literal format and a NUL-terminated stack buffer;
            // this frame owns nothing with a destructor now. Throws.
            unsafe {
                ws::proto_report_dissector_bug(
                    c"RoCEv2 analysis panicked: %s".as_ptr(),
                    msg.as_ptr().cast::<c_char>(),
                );
            }
            0
        }
    }
}

/// # Safety
/// Valid Wireshark pointers, during the dissection of the frame.
unsafe fn analyse_frame(
    tvb: *mut ws::tvbuff_t,
    pinfo: *mut ws::packet_info,
    tree: *mut ws::proto_tree,
) {
    if !PREF_ROCE.load(Ordering::Relaxed).truth() {
        return;
    }
    // A frame the InfiniBand dissector took, or one to UDP port 4791
    // that another dissector took by its source port (as TFTP takes port
    // 69): what `metaroce-analyze` decodes as RoCEv2. Two cheap checks
    // before any decoding; proto_parse decides below.
    // SAFETY: pinfo is valid; `layers` lists the frame's protocols.
    let candidate = unsafe {
        (*pinfo).destport == u32::from(proto_parse::rocev2::UDP_PORT)
            || ws::proto_is_frame_protocol((*pinfo).layers, c"infiniband".as_ptr()).truth()
    };
    if !candidate {
        return;
    }
    // SAFETY: pinfo is valid; rec is NULL or the frame's record.
    let link = unsafe {
        let rec = (*pinfo).rec;
        if rec.is_null() || (*rec).rec_type != 0 {
            None
        } else {
            link_type((*rec).rec_header.packet_header.pkt_encap as u32)
        }
    };
    let Some(link) = link else { return };
    // SAFETY: the post-dissector's tvb is the frame's; the bytes live as
    // long as its dissection.
    let bytes = unsafe { captured_bytes(tvb) };
    let decoded = frame::decode(link, bytes, &DecodeConfig::default());
    let Transport::RoceV2(roce) = &decoded.payload else {
        return;
    };
    let Some(packet) = &roce.packet else { return };
    let seen = RocePacket {
        psn: packet.bth().psn(),
        icrc: roce.icrc,
        stored_icrc: packet.icrc(),
    };
    // SAFETY: pinfo and its frame_data are valid during dissection.
    let (num, visited, ts) = unsafe {
        let fd = (*pinfo).fd;
        (
            (*pinfo).num,
            !fd.is_null() && (*fd).visited() != 0,
            (*pinfo).abs_ts,
        )
    };
    let ts_ns = u64::try_from(ts.secs)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.nsecs).unwrap_or(0));
    let obs = (!visited)
        .then(|| {
            Observation::from_frame_checked(num.into(), ts_ns, &decoded, &DecodeConfig::default())
        })
        .flatten();
    let analysed = state::with(|s| {
        let a = s.analysis.as_mut()?;
        let r: RoceAnalysed = match &obs {
            Some(obs) => a.ingest_rocev2(obs),
            None => a.lookup_rocev2(num),
        }?;
        let (lint, host) = if r.verdict.lint.is_empty() {
            (Vec::new(), None)
        } else {
            let (found, host) = a.lint(num);
            (found.to_vec(), host)
        };
        Some((r, lint, host))
    });

    // SAFETY: tree is NULL or a valid proto_tree; pinfo is valid.
    let (visible, cinfo) = unsafe { (tree_visible(tree), (*pinfo).cinfo) };
    let tags = !cinfo.is_null();
    let mut d = SPARE.take();
    d.clear(bytes.len());
    match &analysed {
        Some((r, lint, host)) => {
            rocev2::add_items(r, &seen, &mut d, tags);
            crate::analysis::add_lint(lint, *host, &mut d);
        }
        // The analysis is off or the packet is not part of an RC flow:
        // the ICRC still shows.
        None => rocev2::add_icrc(&seen, &mut d, tags),
    }
    if rocev2_tap::TAP.wanted() {
        let record = rocev2_tap::Record::of(analysed.as_ref().map(|(r, _, _)| r), &seen);
        // SAFETY: valid pinfo during the dissection of its packet.
        unsafe { rocev2_tap::TAP.queue(pinfo, record) };
    }
    if tags && !d.info.is_empty() {
        let (n, text) = text_arg(&d.info);
        let info = ws::COL_INFO as c_int;
        // SAFETY: col_append_fstr copies the text; literal format. A
        // dissector before us may have made the Info column read-only (to
        // keep its payload's dissectors from overwriting it): the tags are
        // appended anyway, and the column left as it was.
        unsafe {
            let writable = ws::col_get_writable(cinfo, info).truth();
            if !writable {
                ws::col_set_writable(cinfo, info, c_bool(true));
            }
            ws::col_append_fstr(cinfo, info, c"%.*s".as_ptr(), n, text);
            if !writable {
                ws::col_set_writable(cinfo, info, c_bool(false));
            }
        }
    }
    let emit = Emitter {
        tvb,
        pinfo,
        captured: bytes.len(),
        visible,
    };
    // SAFETY: valid pointers; every item has an empty range.
    unsafe {
        emit.analysis_tree(
            tree,
            PROTO_ROCE.load(Ordering::Relaxed),
            Ett::RoceRoot,
            &d,
            bytes,
        )
    };
    SPARE.set(d);
}
