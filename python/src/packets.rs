//! `read_packets(path)`: one capture's `packets` table.

use std::path::{Path, PathBuf};

use analyzer::engine::{Config, MsgDone, Observation, Verdict};
use arrow_array::RecordBatch;
use arrow_pyarrow::PyArrowType;
use metaroce_analyze::pipeline::{self, NoProgress, Options, Sink};
use metaroce_analyze::rows::CapturePackets;
use proto_parse::frame::DecodeConfig;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

use crate::columns::arrow_array;

/// The export's sink, without the files: the rows of one capture.
struct Rows {
    decode: DecodeConfig,
    packets: CapturePackets,
}

impl Sink for Rows {
    fn begin_capture(&mut self, _index: usize, path: &Path, _stem: &str) {
        self.packets = CapturePackets::new(path, self.decode);
    }

    fn packet(&mut self, _capture: usize, obs: &Observation, verdict: &Verdict, _: &[MsgDone]) {
        self.packets.push(obs, verdict);
    }
}

/// The `packets` table of the capture at `path` (pcap or pcapng, plain or
/// gzip-compressed): one row per MetaRoCE or RoCEv2 packet, the columns
/// and values of `metaroce-analyze export`'s table (analyzer/cli/src/
/// export.rs), `capture_host` the file's stem.
#[pyfunction]
#[pyo3(signature = (path, *, port = 4794, rocev2_port = 4791, heuristic = false))]
pub fn read_packets(
    py: Python<'_>,
    path: PathBuf,
    port: u16,
    rocev2_port: u16,
    heuristic: bool,
) -> PyResult<PyArrowType<arrow_pyarrow::Table>> {
    let decode = DecodeConfig {
        metaroce_port: port,
        rocev2_port,
        heuristic,
        ..DecodeConfig::default()
    };
    let batch = py.detach(|| -> PyResult<RecordBatch> {
        let opts = Options::new(decode, Config::default());
        let mut rows = Rows {
            decode,
            packets: CapturePackets::default(),
        };
        let results = pipeline::analyze(std::slice::from_ref(&path), &opts, &mut rows, &NoProgress)
            .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
        let stem = results.first().map(|r| r.stem.clone()).unwrap_or_default();
        let columns = rows.packets.rows.take_columns(&stem);
        let named = columns.into_iter().map(|c| (c.name, arrow_array(c)));
        RecordBatch::try_from_iter(named).map_err(|e| PyValueError::new_err(e.to_string()))
    })?;
    let schema = batch.schema();
    let table = arrow_pyarrow::Table::try_new(vec![batch], schema)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyArrowType(table))
}
