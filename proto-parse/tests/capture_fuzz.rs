//! Arbitrary bytes, truncations and corruptions never panic, never loop,
//! and keep everything read before the damage.

mod capture_util;

use capture_util::{Item, Trickle, drain, frame, records};
use proptest::prelude::*;
use proto_parse::capture::{PcapNgWriter, PcapOptions, PcapWriter, Reader};

fn valid_pcap(big_endian: bool, nanos: bool) -> Vec<u8> {
    let opts = PcapOptions {
        big_endian,
        nanos,
        ..PcapOptions::default()
    };
    let mut w = PcapWriter::with_options(Vec::new(), opts).unwrap();
    for i in 0..12usize {
        w.write_frame(
            1_700_000_000_000_000_000 + i as u64 * 777,
            &frame(i, 20 + i * 5),
        )
        .unwrap();
    }
    w.into_inner().unwrap()
}

fn valid_pcapng(big_endian: bool) -> Vec<u8> {
    let mut w = PcapNgWriter::with_byte_order(Vec::new(), big_endian).unwrap();
    let a = w.add_interface(1, 0).unwrap();
    let b = w.add_interface_with(113, 50, 0x80 | 16, -5).unwrap();
    for i in 0..10usize {
        w.write_packet(
            [a, b][i % 2],
            1_700_000_000_000_000_000 + i as u64,
            &frame(i, 10 + i * 3),
        )
        .unwrap();
        if i == 4 {
            w.write_block(0x55aa, &[1, 2, 3, 4, 5]).unwrap();
            w.new_section(!big_endian).unwrap();
            w.add_interface(1, 0).unwrap();
            w.add_interface(276, 0).unwrap();
        }
    }
    w.write_simple_packet(&frame(99, 33)).unwrap();
    w.into_inner().unwrap()
}

/// Reads everything (or fails to open); returns the items.
fn read_any(bytes: &[u8], capacity: usize) -> Option<Vec<Item>> {
    let mut r = Reader::with_capacity(bytes, capacity).ok()?;
    let items = drain(&mut r, bytes.len() + 10);
    let st = r.stats();
    assert_eq!(st.records as usize, records(&items).len());
    assert_eq!(st.errors as usize, items.len() - records(&items).len());
    assert!(st.file_bytes <= bytes.len() as u64);
    Some(items)
}

fn all_valid() -> Vec<Vec<u8>> {
    vec![
        valid_pcap(false, true),
        valid_pcap(true, false),
        valid_pcapng(false),
        valid_pcapng(true),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(
        prefix in prop::sample::select(vec![
            vec![],
            vec![0xd4, 0xc3, 0xb2, 0xa1],
            vec![0xa1, 0xb2, 0x3c, 0x4d],
            vec![0x34, 0xcd, 0xb2, 0xa1],
            vec![0x0a, 0x0d, 0x0d, 0x0a],
        ]),
        body in prop::collection::vec(any::<u8>(), 0..600),
        capacity in 1usize..300,
    ) {
        let mut bytes = prefix;
        bytes.extend(body);
        read_any(&bytes, capacity);
    }

    #[test]
    fn pcapng_shaped_garbage_never_panics(
        be in any::<bool>(),
        blocks in prop::collection::vec(
            (prop::sample::select(vec![1u32, 3, 5, 6, 0x0A0D_0D0A, 0xbad]),
             0u32..200,
             prop::collection::vec(any::<u8>(), 0..64)),
            0..8),
    ) {
        let mut w = PcapNgWriter::with_byte_order(Vec::new(), be).unwrap();
        w.add_interface(1, 0).unwrap();
        let mut bytes = w.into_inner().unwrap();
        let u32b = |x: u32| if be { x.to_be_bytes() } else { x.to_le_bytes() };
        for (t, len, body) in blocks {
            bytes.extend(u32b(t));
            bytes.extend(u32b(len));
            bytes.extend(body);
            bytes.extend(u32b(len));
        }
        read_any(&bytes, 64);
    }

    #[test]
    fn truncations_keep_the_prefix(which in 0usize..4, cut_frac in 0.0f64..1.0, capacity in 16usize..512) {
        let file = &all_valid()[which];
        let full = records(&read_any(file, 4096).unwrap());
        let cut = (file.len() as f64 * cut_frac) as usize;
        if let Some(items) = read_any(&file[..cut], capacity) {
            let got = records(&items);
            prop_assert!(got.len() <= full.len());
            prop_assert_eq!(&got[..], &full[..got.len()]);
            // Every record followed by another one that starts before the
            // cut lies whole before the cut, and is read.
            let fitting = full.windows(2).filter(|w| w[1].offset as usize <= cut).count();
            prop_assert!(got.len() >= fitting, "{} < {}", got.len(), fitting);
        }
    }

    #[test]
    fn corruptions_never_panic(
        which in 0usize..4,
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        capacity in 16usize..512,
        chunk in 1usize..64,
    ) {
        let mut file = all_valid()[which].clone();
        for (at, v) in flips {
            let i = at.index(file.len());
            file[i] = v;
        }
        if let Ok(mut r) = Reader::with_capacity(Trickle::new(&file, chunk), capacity) {
            let items = drain(&mut r, file.len() + 10);
            prop_assert_eq!(r.stats().records as usize, records(&items).len());
        }
    }
}

#[test]
fn every_truncation_of_every_valid_file() {
    for (n, file) in all_valid().iter().enumerate() {
        let full = records(&read_any(file, 4096).unwrap());
        for cut in 0..=file.len() {
            if let Some(items) = read_any(&file[..cut], 64) {
                let got = records(&items);
                assert_eq!(&got[..], &full[..got.len()], "file {n} cut {cut}");
                if cut == file.len() {
                    assert_eq!(got.len(), full.len());
                    assert_eq!(items.len(), full.len(), "no error on the whole file");
                }
            }
        }
    }
}
