//! `frame::decode` of arbitrary bytes under every supported link type, with
//! the heuristic on, so every layer and both protocols are reached; and
//! `frame::ipv4_udp`, the hot loops' shortcut, checked against it.
#![no_main]

use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use proto_parse::frame::{DecodeConfig, LinkType, decode, ipv4_udp};

fuzz_target!(|input: &[u8]| {
    let Some((&selector, bytes)) = input.split_first() else { return };
    let link = LinkType::SUPPORTED[usize::from(selector) % LinkType::SUPPORTED.len()];
    let config = DecodeConfig { heuristic: selector & 0x80 != 0, ..DecodeConfig::default() };
    let frame = decode(link, bytes, &config);
    let _ = (frame.icrc_status(), frame.metaroce().map(|p| p.psn()), format!("{:?}", frame.error));
    if let Some(fast) = ipv4_udp(link, bytes) {
        let (ip, udp) = (frame.ip.expect("ip"), frame.udp.expect("udp"));
        assert_eq!((ip.src, ip.dst, ip.ecn), (IpAddr::V4(fast.src), IpAddr::V4(fast.dst), fast.ecn));
        assert_eq!(
            (udp.src_port, udp.dst_port, udp.payload, udp.payload_wire_len),
            (fast.src_port, fast.dst_port, fast.payload, fast.payload_wire_len)
        );
    }
});
