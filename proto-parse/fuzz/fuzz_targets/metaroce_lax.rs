//! `metaroce::parse_lax` on arbitrary bytes with an arbitrary wire length,
//! then every accessor a consumer may call.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto_parse::metaroce::parse_lax;

fuzz_target!(|input: &[u8]| {
    let Some((&extra, bytes)) = input.split_first() else { return };
    let lax = parse_lax(bytes, bytes.len() + usize::from(extra % 64));
    if let Some(packet) = lax.packet {
        let _ = (packet.version(), packet.packet_type(), packet.flags(), packet.header_len());
        if let Some(data) = packet.data() {
            let _ = (data.op(), data.payload_len(), data.remote_va(), data.rkey(), data.imm_data());
        }
        if let Some(ack) = packet.ack() {
            let _ = (ack.sack_ranges(), ack.sacked_psns().count(), ack.feedback().credit());
        }
        let _ = (packet.nack().map(|n| n.code()), packet.cnp_reason(), packet.ctrl().map(|c| c.features()));
        for tlv in packet.tlvs().flatten() {
            let _ = (tlv.hop_telemetry().map(Iterator::count), tlv.path_status().map(Iterator::count), tlv.ts64());
        }
        let _ = packet.warnings();
        if let Some(layout) = &lax.layout {
            let _ = (packet.payload(layout), packet.crc_status(layout));
        }
    }
});
