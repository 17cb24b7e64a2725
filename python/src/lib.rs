//! `metaroce`: the flow engine for Python (README.md).
//!
//! - [`packets`]: `read_packets(path)`, one capture's `packets` table (the
//!   rows and columns of `metaroce-analyze export`) as a `pyarrow.Table`;
//! - [`report`]: `report(paths, ...)`, what `metaroce-analyze report
//!   --json` prints, as a dict;
//! - the Spark reduce (cluster/metaroce_cluster/between.py): [`shard`]
//!   cuts a host's sightings into bucket blobs (the engine's
//!   `analyzer::engine::blob`, compressed to cross Spark: [`packed`]), [`buckets`]
//!   matches one bucket of every host once and reads the match twice
//!   (path sums, then mergeable partials), [`assemble`]
//!   turns the summed partials into the report, and [`tables`] reads
//!   a bucket's match for its per-transmission tables (`--tables`);
//! - [`matching`]: `Matcher`, the same matcher over Arrow record batches
//!   row by row, for a caller that partitions the sightings itself.
//!
//! Arrow data crosses into and out of Python through the Arrow C data
//! interface (`arrow-pyarrow`): columns, never a Python object per row.
// The pyo3 macros expand to the FFI glue of the module (unsafe blocks).
#![allow(unsafe_code)]

mod assemble;
/// The sightings' wire format, the engine's own.
use analyzer::engine::blob;
mod buckets;
mod columns;
mod digest;
mod matching;
mod packed;
mod packets;
mod report;
mod shard;
mod tables;

use pyo3::prelude::*;

/// The engine's version (the crate's and a hash of its sources): the
/// Spark job checks that its driver, its executors and the exports it
/// reads all ran the same one.
#[pyfunction]
fn engine_version() -> &'static str {
    analyzer::ENGINE_VERSION
}

#[pymodule]
fn metaroce(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(engine_version, m)?)?;
    m.add_function(wrap_pyfunction!(packets::read_packets, m)?)?;
    m.add_function(wrap_pyfunction!(report::report, m)?)?;
    m.add_function(wrap_pyfunction!(shard::shard, m)?)?;
    m.add_function(wrap_pyfunction!(shard::stalls, m)?)?;
    m.add_function(wrap_pyfunction!(buckets::match_paths, m)?)?;
    m.add_function(wrap_pyfunction!(buckets::merge_paths, m)?)?;
    m.add_function(wrap_pyfunction!(buckets::offsets, m)?)?;
    m.add_function(wrap_pyfunction!(buckets::match_partials, m)?)?;
    m.add_function(wrap_pyfunction!(tables::match_tables, m)?)?;
    m.add_function(wrap_pyfunction!(assemble::assemble, m)?)?;
    m.add_class::<matching::Matcher>()?;
    Ok(())
}
