//! Walks 100k records (142-byte UDP-sized frames) through the capture
//! reader: from memory (pure parsing) and from a file in the page cache
//! (parsing plus `read` calls). Throughput is reported in records/s.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use proto_parse::capture::{PcapNgWriter, PcapWriter, Reader};

const RECORDS: usize = 100_000;
const FRAME_LEN: usize = 142;

fn pcap_bytes() -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::with_capacity(RECORDS * (FRAME_LEN + 16) + 24)).unwrap();
    let frame: Vec<u8> = (0..FRAME_LEN).map(|i| i as u8).collect();
    for i in 0..RECORDS {
        w.write_frame(1_700_000_000_000_000_000 + i as u64 * 1_000, &frame)
            .unwrap();
    }
    w.into_inner().unwrap()
}

fn pcapng_bytes() -> Vec<u8> {
    let mut w = PcapNgWriter::new(Vec::with_capacity(RECORDS * (FRAME_LEN + 36) + 64)).unwrap();
    w.add_interface(1, 0).unwrap();
    let frame: Vec<u8> = (0..FRAME_LEN).map(|i| i as u8).collect();
    for i in 0..RECORDS {
        w.write_packet(0, 1_700_000_000_000_000_000 + i as u64 * 1_000, &frame)
            .unwrap();
    }
    w.into_inner().unwrap()
}

/// Sums a byte of every frame so the walk cannot be optimised away.
fn walk<R: std::io::Read>(mut reader: Reader<R>) -> u64 {
    let mut sum = 0u64;
    while let Some(rec) = reader.next_record() {
        let rec = rec.expect("valid capture");
        sum = sum.wrapping_add(rec.ts_ns ^ u64::from(rec.data[FRAME_LEN / 2]));
    }
    assert_eq!(reader.stats().records, RECORDS as u64);
    sum
}

fn bench(c: &mut Criterion) {
    let pcap = pcap_bytes();
    let pcapng = pcapng_bytes();
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capture_walk.pcap");
    std::fs::write(&path, &pcap).unwrap();

    let mut g = c.benchmark_group("capture_walk");
    g.throughput(Throughput::Elements(RECORDS as u64));
    g.bench_function("pcap_memory_100k", |b| {
        b.iter(|| walk(Reader::from_reader(black_box(&pcap[..])).unwrap()))
    });
    g.bench_function("pcapng_memory_100k", |b| {
        b.iter(|| walk(Reader::from_reader(black_box(&pcapng[..])).unwrap()))
    });
    g.bench_function("pcap_file_100k", |b| {
        b.iter(|| walk(Reader::open(&path).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
