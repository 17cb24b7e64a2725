//! A sightings blob as it crosses Spark: zstd-compressed (level 1). What
//! the job moves from a host's task to its bucket's partition is Spark's
//! costliest step (pickled, piped to the JVM, written to and read from
//! the shuffle), and the blob's columns compress to about a quarter.
//! The kept match between a bucket's two passes stays on its executor's
//! disk uncompressed: there, compressing costs more than it saves.

/// zstd's fastest level that still compresses the rows well.
const LEVEL: i32 = 1;

pub fn pack(blob: &[u8]) -> Result<Vec<u8>, String> {
    zstd::bulk::compress(blob, LEVEL).map_err(|e| format!("compressing a bucket blob: {e}"))
}

/// The blob `pack` made, or what is wrong with `bytes`.
pub fn unpack(bytes: &[u8]) -> Result<Vec<u8>, String> {
    zstd::stream::decode_all(bytes)
        .map_err(|e| format!("not a compressed bucket blob ({} bytes): {e}", bytes.len()))
}
