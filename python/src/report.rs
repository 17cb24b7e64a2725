//! `report(paths, ...)`: the report of `metaroce-analyze report --json`.

use std::path::PathBuf;

use analyzer::engine::Config;
use metaroce_analyze::parse_duration;
use metaroce_analyze::pipeline::{self, NoProgress, NoSink, Options};
use proto_parse::frame::DecodeConfig;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

/// A duration in ns given as a number (ns) or a string with a unit
/// (`"1ms"`, `"500us"`), as `--stall-threshold` takes it.
#[derive(FromPyObject)]
pub enum Duration {
    Ns(u64),
    Text(String),
}

/// The captures at `paths` analysed together, one per host, as
/// `metaroce-analyze report --json` analyses them: the same report (same
/// keys, same numbers; schema in analyzer/SCHEMA.md) as a dict. The
/// options are the command's (`stall_threshold`: ns, or a string with a
/// unit).
#[pyfunction]
#[pyo3(signature = (paths, *, stall_threshold = Duration::Ns(1_000_000), max_flows = None, port = 4794, rocev2_port = 4791, heuristic = false, mmap = true))]
#[allow(clippy::too_many_arguments)]
pub fn report(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    stall_threshold: Duration,
    max_flows: Option<usize>,
    port: u16,
    rocev2_port: u16,
    heuristic: bool,
    mmap: bool,
) -> PyResult<Py<PyAny>> {
    if paths.is_empty() {
        return Err(PyValueError::new_err("report: no capture given"));
    }
    let stall_threshold_ns = match stall_threshold {
        Duration::Ns(ns) => ns,
        Duration::Text(s) => parse_duration(&s).map_err(PyValueError::new_err)?,
    };
    let decode = DecodeConfig {
        metaroce_port: port,
        rocev2_port,
        heuristic,
        ..DecodeConfig::default()
    };
    let engine = Config {
        stall_threshold_ns,
        max_flows: max_flows.unwrap_or(Config::default().max_flows).max(1),
        ..Config::default()
    };
    let json = py.detach(|| -> PyResult<String> {
        let mut opts = Options::new(decode, engine);
        opts.map_files = mmap;
        let results = pipeline::analyze(&paths, &opts, &mut NoSink, &NoProgress)
            .map_err(|e| PyOSError::new_err(e.to_string()))?;
        let merged = pipeline::merge_reports(&results)
            .ok_or_else(|| PyValueError::new_err("report: no capture analysed"))?;
        serde_json::to_string(&merged).map_err(|e| PyValueError::new_err(e.to_string()))
    })?;
    let loads = py.import("json")?.getattr("loads")?;
    Ok(loads.call1((json,))?.unbind())
}
