//! A mapped capture does not stay resident: the reader gives back the
//! pages it has read, so the resident set of a walk over a large file stays
//! small (its own process: other tests would move the figure).
#![cfg(target_os = "linux")]

mod capture_util;

use capture_util::{frame, tmp_path};
use proto_parse::capture::{PcapWriter, Reader};

/// VmRSS of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn walking_a_mapped_64_mib_capture_keeps_the_resident_set_small() {
    let path = tmp_path("mapped-rss.pcap");
    let mut w = PcapWriter::create(&path).unwrap();
    let data = frame(7, 1400);
    for i in 0..48_000u64 {
        w.write_frame(i * 1000, &data).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    assert!(std::fs::metadata(&path).unwrap().len() > 64 << 20);

    let mut reader = Reader::map_or_open(&path).unwrap();
    assert!(reader.is_mapped());
    let before = rss_kib();
    let (mut peak, mut sum, mut n) = (before, 0u64, 0u64);
    while let Some(rec) = reader.next_record() {
        let rec = rec.unwrap();
        // Touch every byte, as a decoder would.
        sum += rec.data.iter().map(|&b| u64::from(b)).sum::<u64>();
        n += 1;
        if n % 1000 == 0 {
            peak = peak.max(rss_kib());
        }
    }
    std::fs::remove_file(&path).unwrap();
    assert_eq!(n, 48_000);
    assert!(sum > 0);
    let growth = peak - before;
    assert!(
        growth < 16 << 10,
        "resident set grew by {growth} KiB over a 64 MiB file"
    );
}
