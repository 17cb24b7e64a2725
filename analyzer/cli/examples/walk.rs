//! The analyzer benchmark's baseline (`cargo xtask bench analyzer`): read
//! every record of a capture, memory-mapped as `metaroce-analyze report`
//! reads it, and decode every frame into an observation, without the
//! analysis; with `--engine`, also feed every packet to the engine on this
//! one thread, so that the analysis' instruction count does not depend on
//! how the report's two threads shared the decoding; with `--lint`, the
//! engine with the conformance lint on and the decoding `lint` does (the
//! parser's checks), as `metaroce-analyze lint` analyses.
//!
//!     walk CAPTURE [--engine | --lint]
//!
//! Prints one JSON object: frames, MetaRoCE and RoCEv2 packets, corrupt
//! records, seconds and frames per second.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use analyzer::engine::{Config, Engine};
use metaroce_analyze::pipeline::{self, Options};
use proto_parse::frame::DecodeConfig;

fn main() -> ExitCode {
    let mut capture = None;
    let mut engine = false;
    let mut lint = false;
    for arg in std::env::args_os().skip(1) {
        match arg.to_str() {
            Some("--engine") => engine = true,
            Some("--lint") => lint = true,
            _ if capture.is_none() => capture = Some(PathBuf::from(arg)),
            _ => capture = None,
        }
    }
    let Some(capture) = capture else {
        eprintln!("usage: walk CAPTURE [--engine | --lint]");
        return ExitCode::from(1);
    };
    // The decode settings of the analysis (the ICRC check off), and the
    // lint's checks on as `metaroce-analyze lint` asks for them.
    let mut decode = Options::new(DecodeConfig::default(), Config::default()).decode;
    decode.verify_crc = lint;
    let cfg = Config {
        lint: lint.then(analyzer::lint::LintOptions::default),
        ..Config::default()
    };
    let start = Instant::now();
    match pipeline::walk(
        &capture,
        &decode,
        (engine || lint).then(|| Engine::new(cfg)),
    ) {
        Ok(stats) => {
            let secs = start.elapsed().as_secs_f64();
            println!(
                "{{\"frames\": {}, \"metaroce\": {}, \"rocev2\": {}, \"corrupt_records\": {}, \"seconds\": {secs:.4}, \"frames_per_s\": {:.0}}}",
                stats.frames,
                stats.metaroce,
                stats.rocev2,
                stats.corrupt_records,
                stats.frames as f64 / secs.max(1e-9)
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("walk: {err}");
            ExitCode::from(1)
        }
    }
}
