//! The engine side of an analysis with several capture points (several
//! files, or mirror sessions in one file): one engine per point and the
//! cross-capture matcher, points made and announced to the sink as they
//! turn up.

use std::io;
use std::path::PathBuf;

use analyzer::engine::{Config, MultiEngine, Observation};
use proto_parse::mirror::MirrorSource;

use super::batch::Side;
use super::item::Item;
use super::reassembly::{Datagram, Defrag};
use super::{CaptureResult, ReadStats, Sink, hand_over_findings};
use crate::points::{Assigned, CapturePoint, Points};

/// The engine side of an analysis with several capture points (several
/// files, or mirror sessions in one): one engine per point and the
/// cross-capture matcher, points made as they turn up.
pub(super) struct Multi<'a> {
    pub(super) multi: MultiEngine,
    pub(super) points: Points,
    pub(super) cfg: Config,
    pub(super) paths: &'a [PathBuf],
    pub(super) stems: &'a [String],
}

impl Multi<'_> {
    /// The point of a packet of file `file`, plain or of mirror session
    /// `source`, made (and announced to the sink) if new.
    fn point_of<S: Sink + ?Sized>(
        &mut self,
        file: usize,
        source: Option<MirrorSource>,
        sink: &mut S,
    ) -> usize {
        let assigned = match source {
            Some(source) => self.points.session(file, source, self.stems),
            None => self.points.plain(file, self.stems),
        };
        match assigned {
            Assigned::Known(p) => p,
            Assigned::New(p) | Assigned::Renamed(p) => {
                if let Assigned::New(_) = assigned {
                    let made = self.multi.add_capture(self.cfg);
                    debug_assert_eq!(made, p.min(254));
                }
                let point = self.points.point(p);
                sink.begin_capture(p, &self.paths[point.file], &point.name);
                p
            }
        }
    }

    /// One item of file `file`, in capture order (several files: merged
    /// by timestamp); `side` is its batch's.
    pub(super) fn item<S: Sink + ?Sized>(
        &mut self,
        file: usize,
        item: &Item,
        side: &Side,
        defrag: &mut Defrag,
        sink: &mut S,
    ) {
        if let Item::Packet { obs, session } = item {
            let source = session.map(|index| side.sources[usize::from(index)]);
            let i = self.point_of(file, source, sink);
            self.observed(i, obs, sink);
            return;
        }
        match defrag.datagram(item, side) {
            Some(datagram) => self.datagram(file, &datagram, sink),
            None => {
                // Other frames count in the file's own point.
                self.points.saw(file, item.ts_ns(), false);
                self.multi.ingest_other(file, item.ts_ns());
            }
        }
    }

    /// A datagram of file `file` rebuilt from IP fragments, plain or a
    /// mirror's copy.
    pub(super) fn datagram<S: Sink + ?Sized>(
        &mut self,
        file: usize,
        datagram: &Datagram,
        sink: &mut S,
    ) {
        let i = self.point_of(file, datagram.mirror, sink);
        self.observed(i, &datagram.obs, sink);
    }

    /// A packet of point `i`.
    fn observed<S: Sink + ?Sized>(&mut self, i: usize, obs: &Observation, sink: &mut S) {
        self.points.saw(i, obs.ts_ns, true);
        let v = self.multi.ingest(i, obs);
        sink.packet(i, obs, &v, self.multi.messages_done(i));
        if let Some(engine) = self.multi.engine(i) {
            sink.flow_state(i, obs, &v, engine);
        }
        // A transmission matched in another capture may give a finding
        // (two-capture rules) in either capture, on a frame ingested
        // earlier.
        let matched = self.multi.matched_capture();
        if (!v.lint.is_empty() || matched.is_some())
            && let Some(engine) = self.multi.engine_mut(i)
        {
            hand_over_findings(engine, i, sink);
        }
        if let Some(m) = matched
            && let Some(engine) = self.multi.engine_mut(m)
        {
            hand_over_findings(engine, m, sink);
        }
    }

    /// Ends every point and makes one result per point; `reads[f]` is
    /// file f's reading totals (given to the file's own point).
    pub(super) fn finish<S: Sink + ?Sized>(
        mut self,
        reads: Vec<ReadStats>,
        sink: &mut S,
    ) -> io::Result<Vec<CaptureResult>> {
        self.multi.finish(&self.points.ends());
        for i in 0..self.points.len() {
            if let Some(engine) = self.multi.engine_mut(i) {
                hand_over_findings(engine, i, sink);
            }
        }
        let files = self.paths.len() as u64;
        let reports = self.multi.snapshots();
        let points = self.points.into_points();
        let mut reads: Vec<Option<ReadStats>> = reads.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(points.len());
        for (i, (mut report, point)) in reports.into_iter().zip(points).enumerate() {
            report.capture.files = files;
            sink.end_capture(i, &report)?;
            let read = reads
                .get_mut(point.file)
                .and_then(Option::take)
                .unwrap_or_default();
            let CapturePoint { file, mirror, name } = point;
            let mut result = CaptureResult::new(self.paths[file].clone(), name, read, report);
            result.mirror = mirror;
            out.push(result);
        }
        Ok(out)
    }
}
