//! A complete packet that parses must survive `Repr::parse` and re-emit to
//! a packet that parses to the same representation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto_parse::metaroce::{Packet, Repr};

fuzz_target!(|bytes: &[u8]| {
    let Ok(packet) = Packet::new_checked(bytes) else { return };
    let Ok(repr) = Repr::parse(&packet) else { return };
    let emitted = repr.to_vec();
    let again = Packet::new_checked(&emitted[..]).expect("an emitted packet is valid");
    assert_eq!(Repr::parse(&again).expect("an emitted packet parses"), repr);
});
