//! Charts (feature `plot`). Work in progress.

use std::path::PathBuf;

use super::pipeline::Sink;
use crate::engine::{Observation, Verdict};

pub struct Plotter {
    #[allow(dead_code)]
    out: PathBuf,
    files: Vec<PathBuf>,
}

impl Plotter {
    pub fn new(out: PathBuf) -> Plotter {
        Plotter {
            out,
            files: Vec::new(),
        }
    }
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }
}

impl Sink for Plotter {
    fn packet(&mut self, _obs: &Observation, _verdict: &Verdict) {}
}
