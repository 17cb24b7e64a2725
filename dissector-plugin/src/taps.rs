//! What the dissector hands to Wireshark's statistics, through the
//! `metaroce` tap: one [`Record`] per packet, queued only while a listener
//! is attached.
//!
//! - Conversations and endpoints (Statistics > Conversations / Endpoints,
//!   `tshark -z conv,metaroce` / `-z endpoints,metaroce`): one conversation
//!   per address pair and connection-id pair, the connection ids in the
//!   "port" columns.
//! - A stats tree (Statistics > MetaRoCE, `tshark -z metaroce,tree`):
//!   packets by type, and the trouble the analysis found.
//!
//! The same calls and callback types exist in Wireshark 4.0, 4.4 and 4.6.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicI32, Ordering};

use epan_sys as ws;
use proto_parse::metaroce::PacketType;
use ws::compat::c_bool;

use crate::tap::Tap;

/// The `metaroce` tap.
pub(crate) static TAP: Tap<Record> = Tap::new();

/// What one packet tells the statistics. Lives in the packet's pool: the
/// listeners run before the packet is done.
#[derive(Clone, Copy)]
pub(crate) struct Record {
    pub src: ws::address,
    pub dst: ws::address,
    /// `(src_conn, dst_conn)` once the base header is there.
    pub conns: Option<(u32, u32)>,
    pub packet_type: Option<PacketType>,
    /// Bytes on the wire of the frame.
    pub frame_len: u32,
    pub retransmission: bool,
    pub path_loss: bool,
    pub stall: bool,
    pub malformed: bool,
    pub bad_crc: bool,
}

/// Registers the tap, the conversation table and the stats tree.
///
/// # Safety
/// Called once, from protocol registration, with the protocol's id.
pub(crate) unsafe fn register(proto: c_int) {
    // SAFETY: literals are 'static; the callbacks have the C signatures the
    // tables expect.
    unsafe {
        TAP.register(c"metaroce");
        ws::register_conversation_table(
            proto,
            c_bool(false),
            Some(conversation_packet),
            Some(endpoint_packet),
        );
        ws::stats_tree_register_plugin(
            c"metaroce".as_ptr(),
            c"metaroce".as_ptr(),
            c"MetaRoCE".as_ptr(),
            0,
            Some(tree_packet),
            Some(tree_init),
            None,
        );
    }
}

/// The "port" filter fields of a conversation: the connection ids.
unsafe extern "C" fn conversation_filter(
    item: *mut ws::conv_item_t,
    filter: ws::conv_filter_type_e,
) -> *const c_char {
    // SAFETY: Wireshark passes one of its conversation items.
    let v6 = !item.is_null() && unsafe { (*item).src_address.type_ } as u32 == ws::AT_IPv6;
    filter_name(filter, v6).as_ptr()
}

unsafe extern "C" fn endpoint_filter(
    item: *mut ws::endpoint_item_t,
    filter: ws::conv_filter_type_e,
) -> *const c_char {
    // SAFETY: Wireshark passes one of its endpoint items.
    let v6 = !item.is_null() && unsafe { (*item).myaddress.type_ } as u32 == ws::AT_IPv6;
    filter_name(filter, v6).as_ptr()
}

fn filter_name(filter: ws::conv_filter_type_e, v6: bool) -> &'static CStr {
    match (filter, v6) {
        (ws::CONV_FT_SRC_ADDRESS, false) => c"ip.src",
        (ws::CONV_FT_DST_ADDRESS, false) => c"ip.dst",
        (ws::CONV_FT_ANY_ADDRESS, false) => c"ip.addr",
        (ws::CONV_FT_SRC_ADDRESS, true) => c"ipv6.src",
        (ws::CONV_FT_DST_ADDRESS, true) => c"ipv6.dst",
        (ws::CONV_FT_ANY_ADDRESS, true) => c"ipv6.addr",
        (ws::CONV_FT_SRC_PORT, _) => c"metaroce.src_conn",
        (ws::CONV_FT_DST_PORT, _) => c"metaroce.dst_conn",
        // The hidden field that holds either connection id.
        (ws::CONV_FT_ANY_PORT, _) => c"metaroce.conn",
        _ => c"INVALID",
    }
}

static CT_INFO: ws::ct_dissector_info_t = ws::ct_dissector_info_t {
    get_filter_type: Some(conversation_filter),
};
static ET_INFO: ws::et_dissector_info_t = ws::et_dissector_info_t {
    get_filter_type: Some(endpoint_filter),
};

/// The [`Record`] a listener is handed, if it has connection ids.
///
/// # Safety
/// `data` is NULL or a Record queued by [`queue`].
unsafe fn record<'a>(data: *const c_void) -> Option<&'a Record> {
    // SAFETY: per the contract.
    unsafe { data.cast::<Record>().as_ref() }
}

/// The [`Record`] and its `(src_conn, dst_conn)`, if it has them (the
/// conversation and endpoint tables are keyed by them).
///
/// # Safety
/// As [`record`].
unsafe fn connection_record<'a>(data: *const c_void) -> Option<(&'a Record, u32, u32)> {
    // SAFETY: per the contract.
    let r = unsafe { record(data) }?;
    let (src_conn, dst_conn) = r.conns?;
    Some((r, src_conn, dst_conn))
}

unsafe extern "C" fn conversation_packet(
    tapdata: *mut c_void,
    pinfo: *mut ws::packet_info,
    _edt: *mut ws::epan_dissect_t,
    data: *const c_void,
    _flags: ws::tap_flags_t,
) -> ws::tap_packet_status {
    // SAFETY: data is our Record; tapdata is the table's conv_hash_t;
    // pinfo is the packet's. add_conversation_table_data copies what it keeps.
    unsafe {
        let Some((r, src_conn, dst_conn)) = connection_record(data) else {
            return ws::TAP_PACKET_DONT_REDRAW;
        };
        ws::add_conversation_table_data(
            tapdata.cast(),
            &r.src,
            &r.dst,
            src_conn,
            dst_conn,
            1,
            r.frame_len as c_int,
            &mut (*pinfo).rel_ts,
            &mut (*pinfo).abs_ts,
            (&raw const CT_INFO).cast_mut(),
            ws::CONVERSATION_NONE,
        );
    }
    ws::TAP_PACKET_REDRAW
}

unsafe extern "C" fn endpoint_packet(
    tapdata: *mut c_void,
    _pinfo: *mut ws::packet_info,
    _edt: *mut ws::epan_dissect_t,
    data: *const c_void,
    _flags: ws::tap_flags_t,
) -> ws::tap_packet_status {
    // SAFETY: as in conversation_packet.
    unsafe {
        let Some((r, src_conn, dst_conn)) = connection_record(data) else {
            return ws::TAP_PACKET_DONT_REDRAW;
        };
        let info = (&raw const ET_INFO).cast_mut();
        let len = r.frame_len as c_int;
        let (hash, none) = (tapdata.cast(), ws::CONVERSATION_NONE);
        ws::add_endpoint_table_data(hash, &r.src, src_conn, c_bool(true), 1, len, info, none);
        ws::add_endpoint_table_data(hash, &r.dst, dst_conn, c_bool(false), 1, len, info, none);
    }
    ws::TAP_PACKET_REDRAW
}

/// Stats tree node ids, set by [`tree_init`].
static NODE_PACKETS: AtomicI32 = AtomicI32::new(0);
static NODE_ANALYSIS: AtomicI32 = AtomicI32::new(0);

unsafe extern "C" fn tree_init(st: *mut ws::stats_tree) {
    // SAFETY: st is the tree being set up; the names are copied.
    unsafe {
        let packets = ws::stats_tree_create_node(
            st,
            c"Packets by type".as_ptr(),
            0,
            ws::STAT_DT_INT,
            c_bool(true),
        );
        let analysis = ws::stats_tree_create_node(
            st,
            c"Analysis and errors".as_ptr(),
            0,
            ws::STAT_DT_INT,
            c_bool(true),
        );
        NODE_PACKETS.store(packets, Ordering::Relaxed);
        NODE_ANALYSIS.store(analysis, Ordering::Relaxed);
    }
}

/// Adds one to the node `name` under `parent` (`tick_stat_node`).
///
/// # Safety
/// A valid stats tree.
unsafe fn tick(st: *mut ws::stats_tree, name: &CStr, parent: c_int) {
    // SAFETY: per the contract; the name is copied.
    unsafe {
        ws::stats_tree_manip_node_int(
            ws::MN_INCREASE,
            st,
            name.as_ptr(),
            parent,
            c_bool(parent == 0),
            1,
        );
    }
}

unsafe extern "C" fn tree_packet(
    st: *mut ws::stats_tree,
    _pinfo: *mut ws::packet_info,
    _edt: *mut ws::epan_dissect_t,
    data: *const c_void,
    _flags: ws::tap_flags_t,
) -> ws::tap_packet_status {
    // SAFETY: data is our Record.
    let Some(r) = (unsafe { record(data) }) else {
        return ws::TAP_PACKET_DONT_REDRAW;
    };
    let r = *r;
    let name = catch_unwind(AssertUnwindSafe(|| {
        CString::new(match r.packet_type {
            Some(t) => t.to_string(),
            None => "(no base header)".to_owned(),
        })
        .unwrap_or_default()
    }))
    .unwrap_or_default();
    let packets = NODE_PACKETS.load(Ordering::Relaxed);
    let analysis = NODE_ANALYSIS.load(Ordering::Relaxed);
    // SAFETY: st is the tree the listener draws; names are copied.
    unsafe {
        tick(st, c"Packets by type", 0);
        tick(st, &name, packets);
        let trouble = [
            (r.retransmission, c"Retransmission"),
            (r.path_loss, c"Path loss"),
            (r.stall, c"Stall"),
            (r.malformed, c"Malformed"),
            (r.bad_crc, c"Bad CRC"),
        ];
        if trouble.iter().any(|(on, _)| *on) {
            // The parent counts packets with any trouble.
            tick(st, c"Analysis and errors", 0);
        }
        for (on, label) in trouble {
            if on {
                tick(st, label, analysis);
            }
        }
    }
    ws::TAP_PACKET_REDRAW
}
