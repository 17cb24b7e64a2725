//! A sightings blob as it crosses Spark: an LZ4 block with its length in
//! front. What the job moves from a host's task to its bucket's partition
//! is pickled, piped to the JVM, written to and read from the shuffle;
//! the blob's columns compress to about two thirds, and LZ4 does it at a
//! few times the speed of any zstd level on one core, which is what a
//! task pays (`cluster/bench.sh`). The kept match between a bucket's two
//! passes stays on its executor's disk uncompressed.

/// LZ4 expands at most 255 times (a run of one byte): a length in front
/// beyond that is damage, refused before anything is allocated for it.
const MAX_EXPANSION: usize = 255;

pub fn pack(blob: &[u8]) -> Vec<u8> {
    lz4_flex::block::compress_prepend_size(blob)
}

/// The blob `pack` made, or what is wrong with `bytes`.
pub fn unpack(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let what = || format!("not a compressed bucket blob ({} bytes)", bytes.len());
    let announced = bytes
        .first_chunk::<4>()
        .map(|n| u32::from_le_bytes(*n) as usize)
        .ok_or_else(what)?;
    if announced > (bytes.len() - 4).saturating_mul(MAX_EXPANSION) {
        return Err(format!(
            "{}: it announces {announced} bytes, more than LZ4 makes of {}",
            what(),
            bytes.len() - 4
        ));
    }
    lz4_flex::block::decompress_size_prepended(bytes).map_err(|e| format!("{}: {e}", what()))
}
