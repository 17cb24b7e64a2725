//! `rocev2::parse_lax` on arbitrary bytes with an arbitrary wire length.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto_parse::rocev2::parse_lax;

fuzz_target!(|input: &[u8]| {
    let Some((&extra, bytes)) = input.split_first() else { return };
    let _ = format!("{:?}", parse_lax(bytes, bytes.len() + usize::from(extra % 64)));
});
