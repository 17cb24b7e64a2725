//! Parquet/CSV export (feature `export`). Work in progress.

use std::path::PathBuf;

use super::pipeline::Sink;
use crate::engine::{Observation, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Parquet,
    Csv,
}

pub struct Exporter {
    #[allow(dead_code)]
    targets: Vec<(Format, PathBuf)>,
}

impl Exporter {
    pub fn new(targets: Vec<(Format, PathBuf)>) -> Exporter {
        Exporter { targets }
    }
    pub fn summary(&self) -> String {
        String::new()
    }
}

impl Sink for Exporter {
    fn packet(&mut self, _obs: &Observation, _verdict: &Verdict) {}
}
