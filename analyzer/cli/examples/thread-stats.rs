//! How the analysis pipeline's two threads shared the work on a capture
//! (`cargo xtask bench analyzer` prints it per round, to tell which thread
//! set the wall time): runs the analysis `metaroce-analyze report` runs and
//! prints, for each capture, the batches sent, how many of them were sent
//! raw (decoded on the engine thread), and each thread's waits for the
//! other (count and nanoseconds).
//!
//!     thread-stats CAPTURE...

use std::path::PathBuf;
use std::process::ExitCode;

use analyzer::engine::Config;
use metaroce_analyze::pipeline::{self, NoProgress, NoSink, Options};
use proto_parse::frame::DecodeConfig;

fn main() -> ExitCode {
    let captures: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if captures.is_empty() {
        eprintln!("usage: thread-stats CAPTURE...");
        return ExitCode::from(1);
    }
    let opts = Options::new(DecodeConfig::default(), Config::default());
    let results = match pipeline::analyze(&captures, &opts, &mut NoSink, &NoProgress) {
        Ok(results) => results,
        Err(err) => {
            eprintln!("thread-stats: {err}");
            return ExitCode::from(1);
        }
    };
    for r in &results {
        let t = &r.read.threads;
        println!(
            "threads: {}: batches {} raw {} parser_waits {} parser_wait_ns {} engine_waits {} engine_wait_ns {}",
            r.path.display(),
            t.batches,
            t.raw_batches,
            t.parser_waits,
            t.parser_wait_ns,
            t.engine_waits,
            t.engine_wait_ns
        );
    }
    ExitCode::SUCCESS
}
