//! The MetaRoCE dissector and heuristic callbacks: decode through
//! [`crate::decode`], analysis through [`crate::analysis`], the tap record,
//! then the tree through [`super::emit`].

use std::any::Any;
use std::ffi::{c_char, c_int, c_void};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::panic::{AssertUnwindSafe, catch_unwind};

use epan_sys as ws;
use proto_parse::frame::LinkType;
use proto_parse::metaroce;
use ws::compat::{CBool, Truth, c_bool};

use super::emit::{Emitter, tree_visible};
use super::*;
use crate::analysis::{self, FrameMeta};
use crate::decode::{self, Checksum, Dissection, Options};
use crate::{state, taps};

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
pub(super) unsafe fn captured_bytes<'a>(tvb: *mut ws::tvbuff_t) -> &'a [u8] {
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

pub(super) unsafe extern "C" fn dissect_cb(
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

pub(super) unsafe extern "C" fn heur_cb(
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

pub(super) fn panic_message(panic: &(dyn Any + Send), out: &mut [u8; 256]) {
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
    if taps::TAP.wanted() {
        // SAFETY: valid pointers (see above).
        unsafe { taps::TAP.queue(pinfo, tap_record(pinfo, bytes, &d, verdict.as_ref())) };
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
pub(super) fn link_type(encap: u32) -> Option<LinkType> {
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
                flow_label: None,
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
        flow_label: outer.flow_label,
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
