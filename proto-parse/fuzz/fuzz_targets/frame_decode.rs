//! `frame::decode` of arbitrary bytes under every supported link type, with
//! the heuristic on, so every layer and both protocols are reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto_parse::frame::{DecodeConfig, LinkType, decode};

fuzz_target!(|input: &[u8]| {
    let Some((&selector, bytes)) = input.split_first() else { return };
    let link = LinkType::SUPPORTED[usize::from(selector) % LinkType::SUPPORTED.len()];
    let config = DecodeConfig { heuristic: selector & 0x80 != 0, ..DecodeConfig::default() };
    let frame = decode(link, bytes, &config);
    let _ = (frame.icrc_status(), frame.metaroce().map(|p| p.psn()), format!("{:?}", frame.error));
});
