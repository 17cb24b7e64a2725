//! `defrag::Reassembler` over a stream of arbitrary frames (split by a
//! length byte) under every supported link type, with tight bounds so the
//! eviction and timeout paths run; every datagram it hands back must decode
//! as raw IP without panicking, and the counts must add up.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto_parse::defrag::{Reassembler, Reassembly, ReassemblyConfig};
use proto_parse::frame::{DecodeConfig, LinkType, decode};

fuzz_target!(|input: &[u8]| {
    let mut r = Reassembler::new(ReassemblyConfig { max_datagrams: 4, max_bytes: 8192, timeout_ns: 1000 });
    let mut rest = input;
    let mut ts = 0u64;
    while let Some((&len, tail)) = rest.split_first() {
        let (frame, next) = tail.split_at(usize::from(len).min(tail.len()));
        rest = next;
        let link = LinkType::SUPPORTED[usize::from(len) % LinkType::SUPPORTED.len()];
        ts += u64::from(len) * 7;
        if let Reassembly::Datagram(ip) = r.push(ts, link, frame) {
            let _ = decode(LinkType::Raw, ip, &DecodeConfig::default());
        }
    }
    r.finish();
    let s = r.stats();
    assert_eq!(r.pending(), 0);
    assert!(s.datagrams + s.incomplete_datagrams <= s.fragments);
    assert!(s.incomplete_fragments <= s.fragments);
});
