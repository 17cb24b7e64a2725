//! Classic pcap: both magics, both byte orders, the writer, corruption,
//! truncation, non-capture files, small buffers and trickling pipes.

mod capture_util;

use capture_util::{Item, Trickle, drain, errors, frame, read_bytes, records, tmp_path};
use proto_parse::capture::{
    Format, LINKTYPE_ERF, LINKTYPE_ETHERNET, OpenError, PcapOptions, PcapWriter, Reader,
};
use proto_parse::{ErrorKind, Layer, LenSource};

/// Hand-built file header: `magic` as it reads in the file's own order.
fn header(magic: u32, be: bool, snaplen: u32, linktype: u32) -> Vec<u8> {
    let mut v = Vec::new();
    let u32b = |x: u32| if be { x.to_be_bytes() } else { x.to_le_bytes() };
    let u16b = |x: u16| if be { x.to_be_bytes() } else { x.to_le_bytes() };
    v.extend_from_slice(&u32b(magic));
    v.extend_from_slice(&u16b(2));
    v.extend_from_slice(&u16b(4));
    v.extend_from_slice(&[0; 8]);
    v.extend_from_slice(&u32b(snaplen));
    v.extend_from_slice(&u32b(linktype));
    v
}

/// Hand-built record.
fn record(be: bool, sec: u32, frac: u32, data: &[u8], orig_len: u32) -> Vec<u8> {
    let u32b = |x: u32| if be { x.to_be_bytes() } else { x.to_le_bytes() };
    let mut v = Vec::new();
    v.extend_from_slice(&u32b(sec));
    v.extend_from_slice(&u32b(frac));
    v.extend_from_slice(&u32b(data.len() as u32));
    v.extend_from_slice(&u32b(orig_len));
    v.extend_from_slice(data);
    v
}

#[test]
fn hand_built_both_orders_both_resolutions() {
    for be in [false, true] {
        for (magic, nanos) in [(0xa1b2_c3d4u32, false), (0xa1b2_3c4d, true)] {
            let mut file = header(magic, be, 65535, 1);
            file.extend(record(be, 1_700_000_000, 123_456, &[1, 2, 3], 60));
            file.extend(record(be, 1_700_000_001, 999_999, &[], 0));
            file.extend(record(be, 1_700_000_002, 7, &frame(2, 1514), 1514));
            let mut reader = Reader::from_reader(&file[..]).unwrap();
            assert_eq!(
                reader.format(),
                Format::Pcap {
                    nanos,
                    big_endian: be,
                    modified: false,
                    linktype: 1,
                    snaplen: 65535
                },
                "be={be} nanos={nanos}"
            );
            let items = drain(&mut reader, 10);
            let recs = records(&items);
            assert_eq!(recs.len(), 3, "be={be} nanos={nanos}: {items:?}");
            let scale = if nanos { 1 } else { 1000 };
            assert_eq!(recs[0].ts_ns, 1_700_000_000_000_000_000 + 123_456 * scale);
            assert_eq!(recs[1].ts_ns, 1_700_000_001_000_000_000 + 999_999 * scale);
            assert_eq!(recs[2].ts_ns, 1_700_000_002_000_000_000 + 7 * scale);
            assert_eq!(recs[0].data, [1, 2, 3]);
            assert_eq!(recs[0].orig_len, 60);
            assert!(recs[1].data.is_empty());
            assert_eq!(recs[2].data, frame(2, 1514));
            assert_eq!(recs.iter().map(|r| r.index).collect::<Vec<_>>(), [1, 2, 3]);
            assert_eq!(
                recs.iter().map(|r| r.offset).collect::<Vec<_>>(),
                [24, 24 + 19, 24 + 19 + 16]
            );
            assert!(
                recs.iter()
                    .all(|r| r.linktype == 1 && r.interface.is_none())
            );
            let st = reader.stats();
            assert_eq!((st.records, st.errors, st.resyncs), (3, 0, 0));
            assert_eq!(st.bytes, 3 + 1514);
            assert_eq!(st.file_bytes, file.len() as u64);
        }
    }
}

#[test]
fn modified_pcap_and_fcs_bits_in_linktype() {
    // Kuznetzov's "modified" pcap: 24-byte record headers.
    let mut file = header(0xa1b2_cd34, false, 65535, 1 | 0x1400_0000);
    let mut rec = record(false, 10, 20, &[9, 8, 7], 3);
    rec.splice(16..16, [0u8; 8]);
    file.extend(rec);
    let (items, _) = read_bytes(&file, 64);
    let recs = records(&items);
    assert_eq!(recs.len(), 1, "{items:?}");
    assert_eq!(recs[0].data, [9, 8, 7]);
    assert_eq!(recs[0].linktype, 1);
    assert_eq!(recs[0].ts_ns, 10_000_020_000);
}

#[test]
fn writer_roundtrip_all_variants() {
    for nanos in [false, true] {
        for big_endian in [false, true] {
            let opts = PcapOptions {
                linktype: LINKTYPE_ERF,
                snaplen: 1000,
                nanos,
                big_endian,
            };
            let mut w = PcapWriter::with_options(Vec::new(), opts).unwrap();
            let mut expect = Vec::new();
            for i in 0..200usize {
                let ts = 1_600_000_000_000_000_000 + i as u64 * 1_234_567_891;
                let data = frame(i, (i * 37) % 1600);
                w.write_frame(ts, &data).unwrap();
                let ts_back = if nanos { ts } else { ts / 1000 * 1000 };
                expect.push((ts_back, data.len().min(1000), data.len() as u32));
            }
            assert_eq!(w.records(), 200);
            let file = w.into_inner().unwrap();
            // Several buffer sizes, including one smaller than a record.
            for cap in [64, 1000, 1 << 20] {
                let (items, stats) = read_bytes(&file, cap);
                let recs = records(&items);
                assert_eq!(recs.len(), 200, "cap {cap}");
                assert_eq!(stats.errors, 0);
                for (i, (r, (ts, caplen, orig))) in recs.iter().zip(&expect).enumerate() {
                    assert_eq!(r.index, i as u64 + 1);
                    assert_eq!(r.ts_ns, *ts);
                    assert_eq!(r.data, frame(i, *caplen));
                    assert_eq!(r.orig_len, *orig);
                    assert_eq!(r.linktype, LINKTYPE_ERF);
                }
            }
        }
    }
}

#[test]
fn file_open_and_trickling_pipe_agree() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for i in 0..300usize {
        w.write_frame(i as u64 * 1000, &frame(i, 60 + i % 90))
            .unwrap();
    }
    // One record larger than the small buffer: it must grow.
    w.write_frame(5, &frame(9, 9000)).unwrap();
    let file = w.into_inner().unwrap();
    let path = tmp_path("trickle.pcap");
    std::fs::write(&path, &file).unwrap();
    let mut from_file = Reader::open(&path).unwrap();
    let want = drain(&mut from_file, 1000);
    assert_eq!(records(&want).len(), 301);
    for chunk in [1, 3, 7, 4096] {
        let mut r = Reader::with_capacity(Trickle::new(&file, chunk), 100).unwrap();
        assert_eq!(drain(&mut r, 1000), want, "chunk {chunk}");
        assert_eq!(r.stats().file_bytes, file.len() as u64);
    }
    std::fs::remove_file(path).ok();
}

#[test]
fn corrupt_record_in_the_middle_resyncs() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let mut offsets = Vec::new();
    let mut pos = 24u64;
    for i in 0..10usize {
        offsets.push(pos);
        let data = frame(i, 100 + i);
        w.write_frame(1_700_000_000_000_000_000 + i as u64 * 1_000_000, &data)
            .unwrap();
        pos += 16 + data.len() as u64;
    }
    let mut file = w.into_inner().unwrap();
    // Record 5 (index 4): an absurd caplen.
    let bad = offsets[4] as usize;
    file[bad + 8..bad + 12].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    for cap in [64, 4096] {
        let (items, stats) = read_bytes(&file, cap);
        let errs = errors(&items);
        assert_eq!(errs.len(), 1, "{items:?}");
        assert_eq!(errs[0].layer, Layer::Capture);
        assert_eq!(errs[0].offset, bad + 8, "the FILE offset of caplen");
        assert!(
            matches!(
                errs[0].kind,
                ErrorKind::BadValue {
                    value: 0x7fff_0000,
                    ..
                }
            ),
            "{:?}",
            errs[0]
        );
        assert!(
            errs[0]
                .to_string()
                .starts_with(&format!("capture at byte {}", bad + 8))
        );
        // The error comes in order: after 4 records, before the rest.
        assert!(matches!(items[4], Item::Err(_)));
        let recs = records(&items);
        assert_eq!(recs.len(), 9);
        let offs: Vec<u64> = recs.iter().map(|r| r.offset).collect();
        let mut want = offsets.clone();
        want.remove(4);
        assert_eq!(offs, want);
        assert_eq!(recs[4].data, frame(5, 105));
        assert_eq!(recs[4].index, 5, "indices count yielded records");
        assert_eq!(stats.errors, 1);
        assert_eq!(stats.resyncs, 1);
        assert_eq!(stats.skipped_bytes, 16 + 104);
        assert_eq!(stats.records, 9);
    }
}

/// Resynchronisation trusts a candidate header only near the last good
/// record's time: two chained record headers dated 1970, hidden in the
/// payload after a corrupt header, are skipped, not read as records.
#[test]
fn resync_skips_headers_far_from_the_last_good_time() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let base_ns = 1_700_000_000_000_000_000u64;
    let decoy = [
        record(false, 1000, 0, &[0; 8], 8),
        record(false, 1000, 0, &[0; 8], 8),
    ]
    .concat();
    // The file header, then three records of 64 bytes before the decoy's.
    let bad = 24 + 3 * (16 + 64);
    for i in 0..6usize {
        if i == 3 {
            w.write_frame(base_ns + i as u64 * 1000, &decoy).unwrap();
        } else {
            w.write_frame(base_ns + i as u64 * 1000, &frame(i, 64))
                .unwrap();
        }
    }
    let mut file = w.into_inner().unwrap();
    file[bad + 8..bad + 12].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    for cap in [64, 4096] {
        let (items, stats) = read_bytes(&file, cap);
        assert_eq!(errors(&items).len(), 1, "{items:?}");
        let recs = records(&items);
        assert!(
            recs.iter().all(|r| r.ts_ns >= base_ns),
            "a 1970 decoy was read as a record: {recs:?}"
        );
        assert_eq!(recs.len(), 5);
        assert_eq!(recs[3].data, frame(4, 64));
        assert_eq!(stats.skipped_bytes, 16 + decoy.len() as u64);
    }
}

#[test]
fn garbage_between_records_resyncs() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for i in 0..3usize {
        w.write_frame(1_700_000_000_000_000_000 + i as u64, &frame(i, 64))
            .unwrap();
    }
    let head = w.into_inner().unwrap();
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for i in 3..6usize {
        w.write_frame(1_700_000_000_000_000_000 + i as u64, &frame(i, 64))
            .unwrap();
    }
    let tail = w.into_inner().unwrap();
    let mut file = head.clone();
    file.extend(std::iter::repeat_n(0xffu8, 37)); // 37 bytes of 0xff
    file.extend(&tail[24..]);
    let (items, stats) = read_bytes(&file, 128);
    assert_eq!(errors(&items).len(), 1, "{items:?}");
    assert_eq!(errors(&items)[0].offset, head.len() + 8);
    let recs = records(&items);
    assert_eq!(recs.len(), 6);
    assert_eq!(recs[3].data, frame(3, 64));
    assert_eq!(recs[3].offset, head.len() as u64 + 37);
    assert_eq!(stats.skipped_bytes, 37);
}

#[test]
fn corrupt_without_a_way_back_stops_cleanly() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    w.write_frame(1, &frame(0, 64)).unwrap();
    let mut file = w.into_inner().unwrap();
    file.extend(std::iter::repeat_n(0xeeu8, 500));
    let (items, stats) = read_bytes(&file, 64);
    assert_eq!(records(&items).len(), 1);
    assert_eq!(errors(&items).len(), 1);
    assert_eq!(stats.resyncs, 0);
    assert_eq!(stats.skipped_bytes, 500);
}

#[test]
fn truncated_tail_is_reported() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for i in 0..5usize {
        w.write_frame(i as u64, &frame(i, 100)).unwrap();
    }
    let file = w.into_inner().unwrap();
    let last = 24 + 4 * 116;
    // Cut inside the last record's data, then inside its header.
    for (cut, required, available) in [(last + 16 + 40, 116, 56), (last + 9, 16, 9)] {
        let (items, stats) = read_bytes(&file[..cut], 4096);
        assert_eq!(records(&items).len(), 4);
        let errs = errors(&items);
        assert_eq!(errs.len(), 1);
        assert!(matches!(items.last(), Some(Item::Err(_))));
        assert_eq!(errs[0].offset, cut, "Truncated names the end of the data");
        assert_eq!(
            errs[0].kind,
            ErrorKind::Truncated {
                required,
                available,
                source: LenSource::File
            }
        );
        assert!(errs[0].is_capture_truncation());
        assert!(
            errs[0].to_string().contains("the file ends after"),
            "{}",
            errs[0]
        );
        assert_eq!(stats.records, 4);
        assert_eq!(stats.errors, 1);
    }
}

#[test]
fn not_a_capture() {
    let path = tmp_path("notes.txt");
    std::fs::write(&path, "Hello, this is a text file\n").unwrap();
    let err = Reader::open(&path).unwrap_err();
    assert!(matches!(err, OpenError::NotCapture { magic: 0x4865_6c6c }));
    assert_eq!(
        err.to_string(),
        "not a pcap or pcapng file: magic 0x48656c6c"
    );
    std::fs::remove_file(path).ok();

    let err = Reader::from_reader(&b"ab"[..]).unwrap_err();
    assert_eq!(err.to_string(), "not a pcap or pcapng file: only 2 bytes");
    assert!(matches!(
        Reader::from_reader(&b""[..]),
        Err(OpenError::TooShort { len: 0 })
    ));
    // A pcap magic with a cut header.
    let err = Reader::from_reader(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0][..]).unwrap_err();
    assert!(matches!(err, OpenError::BadHeader(_)), "{err}");
    let err = Reader::open(tmp_path("does-not-exist.pcap")).unwrap_err();
    assert!(matches!(err, OpenError::Io(_)));
    // A directory opens but cannot be read.
    let err = Reader::open(env!("CARGO_TARGET_TMPDIR")).unwrap_err();
    assert!(matches!(err, OpenError::Io(_)), "{err}");
    assert!(err.to_string().starts_with("cannot read capture: "));
}

#[test]
fn header_only_file_has_no_records() {
    let file = PcapWriter::new(Vec::new()).unwrap().into_inner().unwrap();
    let (items, stats) = read_bytes(&file, 4096);
    assert!(items.is_empty());
    assert_eq!(stats.records, 0);
    assert_eq!(stats.file_bytes, 24);
}

#[test]
fn io_error_keeps_what_was_read() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for i in 0..10usize {
        w.write_frame(i as u64, &frame(i, 50)).unwrap();
    }
    let file = w.into_inner().unwrap();
    let mut src = Trickle::new(&file, 1000);
    src.fail_after = Some(24 + 3 * 66 + 10);
    let mut r = Reader::with_capacity(src, 64).unwrap();
    let items = drain(&mut r, 100);
    assert_eq!(records(&items).len(), 3);
    assert_eq!(errors(&items).len(), 1);
    assert_eq!(
        r.io_error().map(|e| e.to_string()),
        Some("disk on fire".into())
    );
}

#[test]
fn for_each_and_create() {
    let path = tmp_path("create.pcap");
    let mut w = PcapWriter::create(&path).unwrap();
    for i in 0..20usize {
        w.write_frame(i as u64 * 10, &frame(i, 70)).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let mut r = Reader::open_or_stdin(&path).unwrap();
    let mut seen = 0;
    let stats = r.for_each(|rec| {
        let rec = rec.unwrap();
        assert_eq!(rec.linktype, LINKTYPE_ETHERNET);
        seen += 1;
    });
    assert_eq!(seen, 20);
    assert_eq!(stats.records, 20);
    std::fs::remove_file(path).ok();
}
