//! The benchmark's bare walk: every record read and decoded as the
//! analysis does, optionally fed to an engine on this thread, with none
//! of the pipeline's threads or batches.

use std::io;
use std::path::Path;

use proto_parse::frame::{DecodeConfig, LinkType};

use analyzer::engine::{Engine, ObsKind, Observation, Verdict};

use super::reading::open;

/// Totals of a bare walk (records and frame decode, no analysis).
#[derive(Debug, Clone, Copy, Default)]
pub struct WalkStats {
    pub frames: u64,
    pub metaroce: u64,
    pub rocev2: u64,
    pub corrupt_records: u64,
}

/// Reads every record (memory-mapped, as the analysis reads a file) and
/// decodes every frame, nothing else (the benchmark's baseline); with an
/// `engine`, feeds it every packet on this thread.
pub fn walk(
    path: &Path,
    decode: &DecodeConfig,
    mut engine: Option<Engine>,
) -> io::Result<WalkStats> {
    let mut reader = open(path, true)?;
    let mut stats = WalkStats::default();
    let mut verdict = Verdict::default();
    while let Some(next) = reader.next_record() {
        let Ok(record) = next else {
            stats.corrupt_records += 1;
            continue;
        };
        let link = LinkType::from(u32::from(record.linktype));
        stats.frames += 1;
        // The same decoding as the analysis (`Item::decode`).
        let obs = Observation::decode(record.index, record.ts_ns, link, record.data, decode);
        match &obs {
            Some(Observation {
                kind: ObsKind::MetaRoce(_),
                ..
            }) => stats.metaroce += 1,
            Some(Observation {
                kind: ObsKind::RoceV2(_),
                ..
            }) => stats.rocev2 += 1,
            None => {}
        }
        if let Some(engine) = &mut engine {
            match &obs {
                Some(obs) => {
                    engine.ingest_into(obs, &mut verdict);
                    std::hint::black_box(&verdict);
                }
                None => engine.ingest_other(record.ts_ns),
            }
        }
    }
    if let Some(engine) = &mut engine {
        engine.finish(engine.now());
        std::hint::black_box(engine.snapshot());
    }
    Ok(stats)
}
