//! The memory-mapped capture reader on arbitrary file contents: it yields
//! exactly the records, errors and counters of the streaming reader.
#![no_main]

use std::io::Read;
use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use proto_parse::capture::Reader;

/// Records (timestamp, data) and errors (as text), in order.
fn items<R: Read>(mut reader: Reader<R>, limit: usize) -> (Vec<Result<(u64, Vec<u8>), String>>, String) {
    let mut out = Vec::new();
    while let Some(next) = reader.next_record() {
        out.push(next.map(|r| (r.ts_ns, r.data.to_vec())).map_err(|e| e.to_string()));
        assert!(out.len() <= limit, "the reader must make progress");
    }
    (out, format!("{:?} {}", reader.stats(), reader.position()))
}

fuzz_target!(|bytes: &[u8]| {
    // /dev/shm: a file system in memory, so each input is cheap to write.
    let path = PathBuf::from(format!("/dev/shm/capture_mapped_fuzz_{}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let streamed = Reader::open_or_stdin(&path);
    let mapped = Reader::map_or_open(&path);
    match (streamed, mapped) {
        (Ok(s), Ok(m)) => assert_eq!(items(m, bytes.len() + 1), items(s, bytes.len() + 1)),
        (Err(s), Err(m)) => assert_eq!(m.to_string(), s.to_string()),
        (s, m) => panic!("streamed: {:?}, mapped: {:?}", s.err(), m.err()),
    }
});
