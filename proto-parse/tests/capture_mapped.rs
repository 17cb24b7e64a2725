//! Memory-mapped reading (`Reader::map_or_open`) yields exactly what
//! streaming reading (`Reader::open_or_stdin`) yields: the same records,
//! errors, resynchronisations and counters, on every capture of the
//! repository and on files several mapped windows long with corrupt records
//! across the windows' ends.

mod capture_util;

use std::path::{Path, PathBuf};

use capture_util::{Item, drain, frame, records, tmp_path};
use proto_parse::capture::{PcapNgWriter, PcapWriter, Reader, Stats};

/// Everything a reader produces, and where it ended.
#[derive(Debug, PartialEq)]
struct Run {
    items: Vec<Item>,
    stats: Stats,
    position: u64,
    gzip: bool,
    mapped: bool,
}

fn run(mut reader: Reader<Box<dyn std::io::Read + Send>>, len: u64) -> Run {
    let items = drain(&mut reader, len as usize + 10);
    Run {
        items,
        stats: *reader.stats(),
        position: reader.position(),
        gzip: reader.is_gzip(),
        mapped: reader.is_mapped(),
    }
}

/// Reads `path` both ways and checks that they agree; returns the mapped
/// run (`mapped` false when the file could not be mapped).
fn same_both_ways(path: &Path) -> Run {
    let len = std::fs::metadata(path).unwrap().len();
    let streamed = run(Reader::open_or_stdin(path).unwrap(), len);
    assert!(!streamed.mapped);
    let mut mapped = run(Reader::map_or_open(path).unwrap(), len);
    let was_mapped = std::mem::replace(&mut mapped.mapped, false);
    assert_eq!(
        mapped.items.len(),
        streamed.items.len(),
        "{}",
        path.display()
    );
    for (i, (m, s)) in mapped.items.iter().zip(&streamed.items).enumerate() {
        assert_eq!(m, s, "{}: item {i}", path.display());
    }
    assert_eq!(mapped, streamed, "{}", path.display());
    mapped.mapped = was_mapped;
    mapped
}

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

#[test]
fn every_repository_capture_reads_the_same_mapped() {
    let mut n = 0;
    for dir in ["fixtures/generated", "fixtures/real", "proto-parse/tests"] {
        for entry in std::fs::read_dir(repo(dir)).unwrap() {
            let path = entry.unwrap().path();
            let ext = path.extension().and_then(|e| e.to_str());
            if matches!(ext, Some("pcap" | "pcapng")) {
                let run = same_both_ways(&path);
                assert!(run.mapped, "{}", path.display());
                assert!(!records(&run.items).is_empty(), "{}", path.display());
                n += 1;
            }
        }
    }
    assert!(n >= 8, "only {n} captures found");
}

/// Frames of varying lengths, so that records fall across every mapped
/// window's end (the window is 1 MiB).
fn frames(count: usize) -> impl Iterator<Item = (u64, Vec<u8>)> {
    (0..count).map(|i| {
        (
            1_700_000_000_000_000_000 + i as u64 * 1000,
            frame(i, 60 + i * 37 % 1400),
        )
    })
}

/// A pcap file of `count` of [`frames`].
fn write_pcap(name: &str, count: usize) -> PathBuf {
    let path = tmp_path(name);
    let mut w = PcapWriter::create(&path).unwrap();
    for (ts, data) in frames(count) {
        w.write_frame(ts, &data).unwrap();
    }
    w.flush().unwrap();
    path
}

#[test]
fn a_large_pcap_with_corrupt_records_at_window_ends_reads_the_same_mapped() {
    let path = write_pcap("mapped-large.pcap", 6000);
    let clean = same_both_ways(&path);
    assert!(clean.mapped);
    let recs = records(&clean.items);
    assert_eq!(recs.len(), 6000);
    assert!(
        clean.position > 4 << 20,
        "{} bytes: not several windows",
        clean.position
    );

    // Corrupt the record header that straddles each MiB boundary (an
    // impossible caplen: the reader resynchronises), and cut the file
    // inside its last record.
    let mut bytes = std::fs::read(&path).unwrap();
    let mut corrupted = 0;
    for mib in 1..=4u64 {
        let boundary = mib << 20;
        let header = recs
            .iter()
            .map(|r| r.offset)
            .filter(|&o| o < boundary)
            .max()
            .unwrap() as usize;
        bytes[header + 8..header + 12].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        corrupted += 1;
    }
    bytes.truncate(bytes.len() - 100);
    std::fs::write(&path, &bytes).unwrap();
    let run = same_both_ways(&path);
    assert!(run.mapped);
    let errors = run.items.iter().filter(|i| i.err().is_some()).count();
    assert!(
        errors > corrupted,
        "{errors} errors: every corruption and the cut"
    );
    assert!(run.stats.resyncs >= corrupted as u64, "{:?}", run.stats);
    assert!(records(&run.items).len() > 5900);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_large_pcapng_reads_the_same_mapped() {
    let path = tmp_path("mapped-large.pcapng");
    let mut w = PcapNgWriter::create(&path).unwrap();
    for (ts, data) in frames(6000) {
        w.write_packet(0, ts, &data).unwrap();
    }
    drop(w);
    let run = same_both_ways(&path);
    assert!(run.mapped);
    assert_eq!(records(&run.items).len(), 6000);
    std::fs::remove_file(&path).unwrap();
}

/// What cannot be mapped is read as a stream: a gzip file, an empty file.
#[test]
fn gzip_and_empty_files_are_read_as_streams() {
    use flate2::{Compression, write::GzEncoder};
    use std::io::Write;
    let plain = write_pcap("mapped-small.pcap", 50);
    let gz = tmp_path("mapped-small.pcap.gz");
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    enc.write_all(&std::fs::read(&plain).unwrap()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let run = same_both_ways(&gz);
    assert!(run.gzip && !run.mapped);
    assert_eq!(records(&run.items).len(), 50);

    let empty = tmp_path("mapped-empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let streamed = Reader::open_or_stdin(&empty).unwrap_err().to_string();
    let mapped = Reader::map_or_open(&empty).unwrap_err().to_string();
    assert_eq!(mapped, streamed);
    for p in [plain, gz, empty] {
        std::fs::remove_file(p).unwrap();
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Random corruption and truncation of a fixture: the mapped reader
    /// still agrees with the streaming one, error for error.
    #[test]
    fn corrupted_fixtures_read_the_same_mapped(
        which in 0usize..3,
        edits in proptest::collection::vec((0.0f64..1.0, proptest::num::u8::ANY), 0..8),
        keep in 0.5f64..1.0,
    ) {
        let name = ["fixtures/generated/all_types.pcap", "fixtures/generated/malformed.pcap", "fixtures/generated/snaplen.pcap"][which];
        let mut bytes = std::fs::read(repo(name)).unwrap();
        for (at, value) in edits {
            // Past the 24-byte file header, so that both readers open it.
            let last = bytes.len() - 1;
            let i = 24 + (at * (bytes.len() - 24) as f64) as usize;
            bytes[i.min(last)] = value;
        }
        bytes.truncate(24 + ((bytes.len() - 24) as f64 * keep) as usize);
        let path = tmp_path(&format!("mapped-prop-{which}.pcap"));
        std::fs::write(&path, &bytes).unwrap();
        same_both_ways(&path);
        std::fs::remove_file(&path).unwrap();
    }
}
