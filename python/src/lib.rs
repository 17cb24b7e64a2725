//! `metaroce`: the flow engine for Python (README.md).
//!
//! - [`packets`]: `read_packets(path)`, one capture's `packets` table (the
//!   rows and columns of `metaroce-analyze export`) as a `pyarrow.Table`;
//! - [`report`]: `report(paths, ...)`, what `metaroce-analyze report
//!   --json` prints, as a dict;
//! - [`matching`]: `Matcher` and `Between`, the engine's cross-capture
//!   matcher over Arrow record batches, for the Spark reduce
//!   (cluster/metaroce_cluster/between.py).
//!
//! Arrow data crosses into and out of Python through the Arrow C data
//! interface (`arrow-pyarrow`): columns, never a Python object per row.
// The pyo3 macros expand to the FFI glue of the module (unsafe blocks).
#![allow(unsafe_code)]

mod columns;
mod matching;
mod packets;
mod report;

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
    m.add_class::<matching::Matcher>()?;
    m.add_class::<matching::Between>()?;
    Ok(())
}
