//! The reader against tshark: the real captures (frame counts and
//! timestamps) and files written by our writers (so both the writer and the
//! reader are checked against an independent implementation).
//!
//! tshark is required: without it these tests fail (loudly, on purpose).

mod capture_util;

use std::path::{Path, PathBuf};
use std::process::Command;

use capture_util::{Owned, drain, errors, frame, records, tmp_path};
use proto_parse::capture::{
    LINKTYPE_ERF, PcapNgWriter, PcapOptions, PcapWriter, Reader, erf_ts_ns,
};

/// One tshark line: number, time in ns, frame.len, frame.cap_len, interface id.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shark {
    number: u64,
    ts_ns: u64,
    len: u32,
    cap_len: u32,
    interface: Option<u32>,
}

/// "1650970174.376937000" to nanoseconds, exactly (no floating point).
fn epoch_to_ns(s: &str) -> u64 {
    let (sec, frac) = s.split_once('.').unwrap_or((s, "0"));
    let mut frac = frac.to_string();
    assert!(frac.len() <= 9, "more than ns digits: {s}");
    while frac.len() < 9 {
        frac.push('0');
    }
    sec.parse::<u64>().expect(s) * 1_000_000_000 + frac.parse::<u64>().expect(s)
}

fn tshark(path: &Path) -> Vec<Shark> {
    let out = Command::new("tshark")
        .arg("-n")
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-E", "separator=,"])
        .args(["-e", "frame.number", "-e", "frame.time_epoch"])
        .args([
            "-e",
            "frame.len",
            "-e",
            "frame.cap_len",
            "-e",
            "frame.interface_id",
        ])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "tshark is required by this test and could not be run ({e}); \
                 install it: apt-get install -y tshark"
            )
        });
    assert!(
        out.status.success(),
        "tshark failed on {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            Shark {
                number: f[0].parse().unwrap(),
                ts_ns: epoch_to_ns(f[1]),
                len: f[2].parse().unwrap(),
                cap_len: f[3].parse().unwrap(),
                interface: f.get(4).and_then(|s| s.parse().ok()),
            }
        })
        .collect()
}

fn read_file(path: &Path) -> Vec<Owned> {
    let mut r = Reader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let items = drain(&mut r, 1_000_000);
    assert!(
        errors(&items).is_empty(),
        "{}: {:?}",
        path.display(),
        errors(&items)
    );
    records(&items)
}

/// The real captures, committed with their provenance in `fixtures/real`.
fn real_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/real")
}

#[test]
fn real_captures_match_tshark() {
    let dir = real_dir();
    let expected = [
        ("montybeatnik_roce_capture_read-write-ecn.pcap", 12),
        ("montybeatnik_test.pcap", 16),
        ("oferby_proxy_roce.pcap", 123),
        ("srinivaskoritala_infiniband.pcap", 43),
    ];
    for (name, count) in expected {
        let path = dir.join(name);
        let ours = read_file(&path);
        let theirs = tshark(&path);
        assert_eq!(theirs.len(), count, "{name}: tshark count");
        assert_eq!(ours.len(), count, "{name}: our count");
        for (o, t) in ours.iter().zip(&theirs) {
            assert_eq!(o.index, t.number, "{name}");
            if o.linktype == LINKTYPE_ERF {
                // tshark shows the ERF record's own (finer) timestamp; the
                // pcap record header holds it to the microsecond.
                assert_eq!(o.ts_ns / 1000, t.ts_ns / 1000, "{name} frame {}", t.number);
                // ... and the ERF timestamp decoded from the data, to the ns.
                assert_eq!(
                    erf_ts_ns(&o.data),
                    Some(t.ts_ns),
                    "{name} frame {}",
                    t.number
                );
            } else {
                assert_eq!(o.ts_ns, t.ts_ns, "{name} frame {}", t.number);
                assert_eq!(o.orig_len, t.len, "{name} frame {}", t.number);
                assert_eq!(o.data.len() as u32, t.cap_len, "{name} frame {}", t.number);
            }
        }
    }
}

fn compare(path: &Path, what: &str) -> Vec<Owned> {
    let ours = read_file(path);
    let theirs = tshark(path);
    assert_eq!(ours.len(), theirs.len(), "{what}: counts");
    for (o, t) in ours.iter().zip(&theirs) {
        let ctx = format!("{what} frame {}", t.number);
        assert_eq!(o.index, t.number, "{ctx}");
        assert_eq!(o.ts_ns, t.ts_ns, "{ctx}");
        assert_eq!(o.orig_len, t.len, "{ctx}");
        assert_eq!(o.data.len() as u32, t.cap_len, "{ctx}");
    }
    ours
}

#[test]
fn pcap_writer_output_matches_tshark() {
    for nanos in [false, true] {
        for big_endian in [false, true] {
            let path = tmp_path(&format!("w-{nanos}-{big_endian}.pcap"));
            let file = std::fs::File::create(&path).unwrap();
            let opts = PcapOptions {
                nanos,
                big_endian,
                snaplen: 200,
                ..PcapOptions::default()
            };
            let mut w = PcapWriter::with_options(file, opts).unwrap();
            for i in 0..50usize {
                let ts = 1_700_000_000_123_456_789 + i as u64 * 987_654_321;
                w.write_frame(ts, &frame(i, 60 + i * 7)).unwrap();
            }
            w.into_inner().unwrap();
            compare(&path, &format!("pcap nanos={nanos} be={big_endian}"));
            std::fs::remove_file(path).ok();
        }
    }
}

#[test]
fn pcapng_writer_output_matches_tshark() {
    let path = tmp_path("multi.pcapng");
    let file = std::fs::File::create(&path).unwrap();
    let mut w = PcapNgWriter::new(file).unwrap();
    let us = w.add_interface_with(1, 0, 6, 0).unwrap(); // default microseconds
    let ns = w.add_interface_with(1, 0, 9, 0).unwrap();
    let p2 = w.add_interface_with(113, 0, 0x80 | 20, 0).unwrap(); // 2^-20 s
    let off = w.add_interface_with(1, 0, 3, 1_000_000).unwrap(); // ms, +1e6 s offset
    let base = 1_700_000_000_000_000_000u64;
    for i in 0..40usize {
        let ifc = [us, ns, p2, off][i % 4];
        let ts = base + i as u64 * 1_234_567_891;
        w.write_packet(ifc, ts, &frame(i, 61 + i)).unwrap();
        if i == 10 {
            w.write_block(0x0bad_cafe, b"an unknown block, skipped")
                .unwrap();
        }
    }
    // A cut packet: 100 bytes on the wire, 30 captured.
    w.write_packet_with_len(ns, base, &frame(99, 30), 100)
        .unwrap();
    // A second section, big-endian, with its own interface numbering.
    w.new_section(true).unwrap();
    let be = w.add_interface_with(1, 0, 9, 0).unwrap();
    assert_eq!(be, 0);
    for i in 0..5usize {
        w.write_packet(be, base + i as u64, &frame(i, 64)).unwrap();
    }
    w.into_inner().unwrap();
    let ours = compare(&path, "pcapng");
    assert_eq!(ours.len(), 46);
    assert_eq!(ours[40].data.len(), 30);
    assert_eq!(ours[40].orig_len, 100);
    let ids: Vec<Option<u32>> = ours.iter().map(|r| r.interface).collect();
    assert_eq!(&ids[..4], &[Some(0), Some(1), Some(2), Some(3)]);
    assert!(ids[41..].iter().all(|i| *i == Some(0)));
    assert_eq!(ours[2].linktype, 113);
    std::fs::remove_file(path).ok();
}
