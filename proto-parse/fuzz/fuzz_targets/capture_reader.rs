//! The capture reader on arbitrary file contents: every record and error
//! until the end, never a panic or an endless loop.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proto_parse::capture::Reader;

fuzz_target!(|bytes: &[u8]| {
    let Ok(mut reader) = Reader::from_reader(std::io::Cursor::new(bytes)) else { return };
    let mut steps = 0usize;
    while let Some(next) = reader.next_record() {
        if let Ok(record) = next {
            let _ = (record.ts_ns, record.data.len());
        }
        steps += 1;
        assert!(steps <= bytes.len() + 1, "the reader must make progress");
    }
});
