//! Gzip-compressed captures read like the plain ones: the same records,
//! errors and statistics, and a cut compressed stream keeps what was read.

mod capture_util;

use std::io::{Cursor, Write};

use capture_util::{Item, drain, frame, read_bytes, records};
use flate2::Compression;
use flate2::write::GzEncoder;
use proto_parse::capture::{OpenError, PcapNgWriter, PcapWriter, Reader};

fn pcap() -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for i in 0..200usize {
        w.write_frame(
            1_700_000_000_000_000_000 + i as u64 * 1000,
            &frame(i, 60 + i % 40),
        )
        .unwrap();
    }
    w.into_inner().unwrap()
}

fn pcapng() -> Vec<u8> {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let iface = w.add_interface(1, 0).unwrap();
    for i in 0..50usize {
        w.write_packet(
            iface,
            1_700_000_000_000_000_000 + i as u64,
            &frame(i, 30 + i),
        )
        .unwrap();
    }
    w.into_inner().unwrap()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn read_gzip(compressed: Vec<u8>) -> (Vec<Item>, Reader<Box<dyn std::io::Read + Send>>) {
    let len = compressed.len();
    let mut reader = Reader::from_maybe_gzip(Cursor::new(compressed)).expect("opens");
    let items = drain(&mut reader, 100 * len + 10);
    (items, reader)
}

#[test]
fn compressed_and_plain_read_the_same() {
    for plain in [pcap(), pcapng()] {
        let (expected, expected_stats) = read_bytes(&plain, 4096);
        assert!(records(&expected).len() >= 50);
        let compressed = gzip(&plain);
        let (items, reader) = read_gzip(compressed.clone());
        assert!(reader.is_gzip());
        assert_eq!(items, expected);
        assert_eq!(*reader.stats(), expected_stats);
        assert!(reader.io_error().is_none());
        // Progress counts the compressed input, all of it at the end.
        assert_eq!(reader.input_position(), compressed.len() as u64);
        assert_eq!(reader.position(), plain.len() as u64);

        // Not compressed: read as it is, and said so.
        let (items, reader) = read_gzip(plain.clone());
        assert!(!reader.is_gzip());
        assert_eq!(items, expected);
        assert_eq!(reader.input_position(), plain.len() as u64);
    }
}

#[test]
fn a_cut_compressed_stream_keeps_what_was_read() {
    let plain = pcap();
    let full = records(&read_bytes(&plain, 4096).0);
    let compressed = gzip(&plain);
    // Not even the file header: the decompressor's error, at open.
    let header_only = Reader::from_maybe_gzip(Cursor::new(compressed[..12].to_vec()));
    assert!(matches!(header_only, Err(OpenError::Io(_))));
    for cut in [
        compressed.len() / 3,
        compressed.len() / 2,
        compressed.len() - 9,
    ] {
        let (items, reader) = read_gzip(compressed[..cut].to_vec());
        let got = records(&items);
        assert!(
            !got.is_empty() && got.len() <= full.len(),
            "cut {cut}: {} records",
            got.len()
        );
        assert_eq!(&got[..], &full[..got.len()], "cut {cut}");
        // The decompressor's complaint ends the stream and is kept.
        assert!(
            reader.io_error().is_some() || items.iter().any(|i| i.err().is_some()),
            "cut {cut}: the damage is reported"
        );
    }
}

#[test]
fn open_or_stdin_takes_a_gz_file() {
    let dir = std::env::temp_dir().join(format!("proto-parse-gzip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.pcap.gz");
    std::fs::write(&path, gzip(&pcap())).unwrap();
    let mut reader = Reader::open_or_stdin(&path).unwrap();
    let items = drain(&mut reader, 1 << 20);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(reader.is_gzip());
    assert_eq!(records(&items).len(), 200);
}
