//! pcapng: sections, interfaces and their resolutions, packet block kinds,
//! skipped blocks, corruption and truncation.

mod capture_util;

use capture_util::{Item, errors, frame, read_bytes, records};
use proto_parse::capture::{Format, Interface, PcapNgWriter, Reader};
use proto_parse::{ErrorKind, Layer, LenSource};

/// Hand-built block in the given byte order; `body` is padded to 32 bits.
fn block(be: bool, block_type: u32, body: &[u8]) -> Vec<u8> {
    let u32b = |x: u32| if be { x.to_be_bytes() } else { x.to_le_bytes() };
    let pad = (4 - body.len() % 4) % 4;
    let total = (12 + body.len() + pad) as u32;
    let mut v = Vec::new();
    v.extend_from_slice(&u32b(block_type));
    v.extend_from_slice(&u32b(total));
    v.extend_from_slice(body);
    v.extend(std::iter::repeat_n(0u8, pad));
    v.extend_from_slice(&u32b(total));
    v
}

fn shb(be: bool) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&if be {
        0x1a2b_3c4du32.to_be_bytes()
    } else {
        0x1a2b_3c4du32.to_le_bytes()
    });
    let (maj, min) = if be {
        (1u16.to_be_bytes(), 0u16.to_be_bytes())
    } else {
        (1u16.to_le_bytes(), 0u16.to_le_bytes())
    };
    body.extend_from_slice(&maj);
    body.extend_from_slice(&min);
    body.extend_from_slice(&[0xff; 8]);
    block(be, 0x0A0D_0D0A, &body)
}

/// IDB with optional `if_tsresol` and `if_tsoffset` options.
fn idb(
    be: bool,
    linktype: u16,
    snaplen: u32,
    tsresol: Option<u8>,
    tsoffset: Option<i64>,
) -> Vec<u8> {
    let u16b = |x: u16| if be { x.to_be_bytes() } else { x.to_le_bytes() };
    let u32b = |x: u32| if be { x.to_be_bytes() } else { x.to_le_bytes() };
    let mut body = Vec::new();
    body.extend_from_slice(&u16b(linktype));
    body.extend_from_slice(&[0, 0]);
    body.extend_from_slice(&u32b(snaplen));
    // An if_name option first, to check options are walked.
    body.extend_from_slice(&u16b(2));
    body.extend_from_slice(&u16b(3));
    body.extend_from_slice(b"et0\0");
    if let Some(r) = tsresol {
        body.extend_from_slice(&u16b(9));
        body.extend_from_slice(&u16b(1));
        body.extend_from_slice(&[r, 0, 0, 0]);
    }
    if let Some(o) = tsoffset {
        body.extend_from_slice(&u16b(14));
        body.extend_from_slice(&u16b(8));
        body.extend_from_slice(&if be { o.to_be_bytes() } else { o.to_le_bytes() });
    }
    body.extend_from_slice(&[0; 4]);
    block(be, 1, &body)
}

fn epb(be: bool, if_id: u32, units: u64, data: &[u8], orig_len: u32) -> Vec<u8> {
    let u32b = |x: u32| if be { x.to_be_bytes() } else { x.to_le_bytes() };
    let mut body = Vec::new();
    body.extend_from_slice(&u32b(if_id));
    body.extend_from_slice(&u32b((units >> 32) as u32));
    body.extend_from_slice(&u32b(units as u32));
    body.extend_from_slice(&u32b(data.len() as u32));
    body.extend_from_slice(&u32b(orig_len));
    body.extend_from_slice(data);
    body.extend(std::iter::repeat_n(0u8, (4 - data.len() % 4) % 4));
    // An epb_flags option.
    body.extend_from_slice(&u32b(0x0004_0002u32.rotate_left(16)));
    body.extend_from_slice(&u32b(1));
    body.extend_from_slice(&[0; 4]);
    block(be, 6, &body)
}

fn spb(be: bool, orig_len: u32, data: &[u8]) -> Vec<u8> {
    let mut body = if be {
        orig_len.to_be_bytes().to_vec()
    } else {
        orig_len.to_le_bytes().to_vec()
    };
    body.extend_from_slice(data);
    block(be, 3, &body)
}

/// Two sections (little- then big-endian), several interfaces with
/// different resolutions, EPB and SPB, skipped blocks.
fn sample() -> (Vec<u8>, Vec<usize>) {
    let mut f = Vec::new();
    let mut offsets = Vec::new();
    f.extend(shb(false));
    f.extend(idb(false, 1, 0, None, None)); // 0: microseconds (default)
    f.extend(idb(false, 276, 0, Some(9), Some(-3))); // 1: ns, -3 s
    f.extend(idb(false, 113, 0, Some(0x80 | 10), None)); // 2: 1/1024 s
    f.extend(block(false, 5, &[0; 8])); // an ISB: skipped
    offsets.push(f.len());
    f.extend(epb(false, 0, 1_700_000_000_000_001, &frame(0, 5), 5));
    offsets.push(f.len());
    f.extend(epb(
        false,
        1,
        1_700_000_000_000_000_007,
        &frame(1, 64),
        1500,
    ));
    f.extend(block(false, 0x1234_5678, b"unknown block type")); // skipped
    offsets.push(f.len());
    f.extend(epb(false, 2, 3 * 1024 + 512, &frame(2, 3), 3));
    f.extend(shb(true));
    f.extend(idb(true, 1, 4, Some(12), Some(1000))); // 0: ps, +1000 s, snaplen 4
    offsets.push(f.len());
    f.extend(epb(true, 0, 5_000_000_000_000, &frame(3, 4), 4));
    offsets.push(f.len());
    f.extend(spb(true, 6, &frame(4, 6))); // cut to the snaplen of 4
    (f, offsets)
}

#[test]
fn sections_interfaces_resolutions() {
    let (file, offsets) = sample();
    for cap in [64, 100, 1 << 16] {
        let mut reader = Reader::with_capacity(&file[..], cap).unwrap();
        assert_eq!(reader.format(), Format::PcapNg { big_endian: false });
        let items = capture_util::drain(&mut reader, 100);
        assert!(errors(&items).is_empty(), "{items:?}");
        let r = records(&items);
        assert_eq!(r.len(), 5);
        assert_eq!(
            r.iter().map(|r| r.offset as usize).collect::<Vec<_>>(),
            offsets
        );
        assert_eq!(
            r.iter().map(|r| r.index).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );

        assert_eq!(r[0].ts_ns, 1_700_000_000_000_001_000);
        assert_eq!(r[0].data, frame(0, 5), "padding cut to caplen");
        assert_eq!((r[0].linktype, r[0].interface), (1, Some(0)));

        assert_eq!(r[1].ts_ns, 1_699_999_997_000_000_007);
        assert_eq!((r[1].data.len(), r[1].orig_len), (64, 1500));
        assert_eq!((r[1].linktype, r[1].interface), (276, Some(1)));

        assert_eq!(r[2].ts_ns, 3_500_000_000);
        assert_eq!((r[2].linktype, r[2].interface), (113, Some(2)));

        assert_eq!(r[3].ts_ns, 1_005_000_000_000);
        assert_eq!((r[3].linktype, r[3].interface), (1, Some(0)));

        assert_eq!(r[4].ts_ns, 0, "simple packets have no timestamp");
        assert_eq!(r[4].data, frame(4, 4));
        assert_eq!(r[4].orig_len, 6);

        assert_eq!(
            reader.interfaces(),
            &[Interface {
                linktype: 1,
                snaplen: 4,
                tsresol: 12,
                tsoffset: 1000
            }]
        );
        let st = reader.stats();
        assert_eq!((st.sections, st.blocks_skipped, st.errors), (2, 2, 0));
        assert_eq!(st.file_bytes, file.len() as u64);
    }
}

#[test]
fn bad_interface_id_is_an_error_and_reading_goes_on() {
    let mut f = shb(false);
    f.extend(idb(false, 1, 0, None, None));
    let bad_at = f.len();
    f.extend(epb(false, 7, 1, &[1, 2], 2));
    f.extend(epb(false, 0, 2, &[3, 4], 2));
    let (items, stats) = read_bytes(&f, 4096);
    let errs = errors(&items);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].offset, bad_at + 8);
    assert!(matches!(errs[0].kind, ErrorKind::BadValue { value: 7, .. }));
    assert_eq!(records(&items).len(), 1);
    assert_eq!(stats.resyncs, 0);
    // A packet before any interface.
    let mut f = shb(false);
    f.extend(spb(false, 2, &[1, 2]));
    f.extend(epb(false, 0, 2, &[3, 4], 2));
    let (items, _) = read_bytes(&f, 4096);
    assert_eq!(errors(&items).len(), 2);
}

#[test]
fn caplen_beyond_the_block_is_an_error() {
    let mut f = shb(false);
    f.extend(idb(false, 1, 0, None, None));
    let at = f.len();
    let mut b = epb(false, 0, 1, &[1, 2, 3, 4], 4);
    b[20..24].copy_from_slice(&1000u32.to_le_bytes());
    f.extend(b);
    f.extend(epb(false, 0, 2, &[5], 1));
    let (items, _) = read_bytes(&f, 4096);
    let errs = errors(&items);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].offset, at + 20);
    assert!(matches!(
        errs[0].kind,
        ErrorKind::Truncated {
            required: 1000,
            source: LenSource::Header,
            ..
        }
    ));
    assert_eq!(records(&items).len(), 1);
}

#[test]
fn corrupt_block_length_resyncs() {
    let (file, offsets) = sample();
    // Break the leading length of the second packet's block.
    let mut f = file.clone();
    let at = offsets[1];
    f[at + 4..at + 8].copy_from_slice(&0x0fff_fff1u32.to_le_bytes());
    let (items, stats) = read_bytes(&f, 64);
    let errs = errors(&items);
    assert_eq!(errs.len(), 1, "{items:?}");
    assert_eq!(errs[0].layer, Layer::Capture);
    assert_eq!(errs[0].offset, at + 4);
    assert!(matches!(items[1], Item::Err(_)));
    let r = records(&items);
    assert_eq!(r.len(), 4);
    assert_eq!(
        r.iter().map(|r| r.offset as usize).collect::<Vec<_>>(),
        [offsets[0], offsets[2], offsets[3], offsets[4]]
    );
    assert_eq!(stats.resyncs, 1);
    // The broken EPB and the unknown block after it (resync accepts only
    // known block types).
    assert_eq!(stats.skipped_bytes, (offsets[2] - at) as u64);

    // Break the trailing length instead.
    let mut f = file.clone();
    let len = u32::from_le_bytes(f[at + 4..at + 8].try_into().unwrap()) as usize;
    f[at + len - 4] ^= 0x40;
    let (items, stats) = read_bytes(&f, 64);
    let errs = errors(&items);
    assert_eq!(errs.len(), 1, "{items:?}");
    assert_eq!(errs[0].offset, at + len - 4);
    assert_eq!(records(&items).len(), 4);
    assert_eq!(stats.resyncs, 1);
}

#[test]
fn truncated_tail_is_reported() {
    let (file, offsets) = sample();
    for cut in [offsets[4] + 5, offsets[4] + 13, file.len() - 1] {
        let (items, stats) = read_bytes(&file[..cut], 4096);
        assert_eq!(records(&items).len(), 4, "cut {cut}");
        assert!(matches!(items.last(), Some(Item::Err(_))));
        let errs = errors(&items);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].offset, cut);
        assert!(errs[0].is_capture_truncation());
        assert_eq!(stats.errors, 1);
    }
}

#[test]
fn bad_section_headers() {
    // Unsupported major version: the rest cannot be read.
    let mut f = shb(false);
    f[12] = 2;
    f.extend(idb(false, 1, 0, None, None));
    let (items, stats) = read_bytes(&f, 4096);
    assert_eq!(items.len(), 1);
    assert!(matches!(
        errors(&items)[0].kind,
        ErrorKind::Unsupported { value: 2, .. }
    ));
    assert_eq!(stats.errors, 1);
    // A bad byte-order magic in the first SHB is an open error.
    let mut f = shb(false);
    f[8] = 0;
    let err = Reader::from_reader(&f[..]).unwrap_err();
    assert!(err.to_string().contains("byte-order magic"), "{err}");
}

#[test]
fn writer_roundtrip_with_simple_packets() {
    for be in [false, true] {
        let mut w = PcapNgWriter::with_byte_order(Vec::new(), be).unwrap();
        let a = w.add_interface(1, 100).unwrap();
        let b = w.add_interface_with(101, 0, 0x80 | 30, 7).unwrap();
        for i in 0..100usize {
            let ts = 1_700_000_000_000_000_000 + (i as u64) * 3_000_000_001;
            w.write_packet([a, b][i % 2], ts, &frame(i, i + 1)).unwrap();
        }
        w.write_simple_packet(&frame(7, 150)).unwrap();
        let file = w.into_inner().unwrap();
        let (items, _) = read_bytes(&file, 256);
        let r = records(&items);
        assert_eq!(r.len(), 101);
        for (i, rec) in r[..100].iter().enumerate() {
            let ts = 1_700_000_000_000_000_000 + (i as u64) * 3_000_000_001;
            if i % 2 == 0 {
                assert_eq!(rec.ts_ns, ts);
            } else {
                // 2^-30 s units: within one unit below.
                assert!(rec.ts_ns <= ts && ts - rec.ts_ns <= 1, "{i}: {}", rec.ts_ns);
                assert_eq!(rec.linktype, 101);
            }
            assert_eq!(rec.data, frame(i, i + 1));
        }
        assert_eq!(
            r[100].data,
            frame(7, 100),
            "SPB cut to interface 0's snaplen"
        );
        assert_eq!(r[100].orig_len, 150);
    }
}
