//! Capture points of an analysis. Each capture file is one; each mirror
//! session in a file (the switch's address and its session id, as
//! `proto_parse::mirror::MirrorSource` names it) is one more, made when its
//! first copy arrives. A collector's capture of two mirror sessions is thus
//! analysed like the two sessions' captures taken apart: one engine per
//! point, and the cross-capture matcher between them.
//!
//! A file's own point (index = the file's index) takes its plain packets;
//! the first mirror session of a file whose own point has no packet yet
//! takes that point over, so that a collector's capture of one session is
//! one point, not an empty one and the session's.

use proto_parse::mirror::MirrorSource;

/// One capture point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturePoint {
    /// The capture file (its index in the order given).
    pub file: usize,
    /// The mirror session, for a point made of mirrored copies.
    pub mirror: Option<MirrorSource>,
    /// The point's name: the file's stem, with the mirror's kind, switch
    /// address and session for a mirror session
    /// (`collector-erspan3-192.0.2.1-s1`); a path component.
    pub name: String,
}

impl CapturePoint {
    /// The name of mirror session `source` in the file of stem `stem`.
    pub fn mirror_name(stem: &str, source: &MirrorSource) -> String {
        let switch = source.switch.to_string().replace(':', "_");
        format!(
            "{stem}-{}-{switch}-s{}",
            source.kind.as_str(),
            source.session
        )
    }
}

#[derive(Debug)]
struct State {
    point: CapturePoint,
    packets: u64,
    last_ts: u64,
}

/// What happened when an item was given its point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Assigned {
    /// An existing point.
    Known(usize),
    /// A point made now: the engine needs one more capture.
    New(usize),
    /// A file's own point renamed to a mirror session (no packet yet).
    Renamed(usize),
}

impl Assigned {
    pub(crate) fn index(self) -> usize {
        match self {
            Assigned::Known(i) | Assigned::New(i) | Assigned::Renamed(i) => i,
        }
    }
}

/// The points of an analysis and the way to them.
#[derive(Debug)]
pub(crate) struct Points {
    states: Vec<State>,
    /// Per file: the point of its plain packets (`None` once a mirror
    /// session took the file's own point: a new one is made if needed).
    plain: Vec<Option<usize>>,
    /// (file, session) -> point.
    sessions: Vec<(usize, MirrorSource, usize)>,
    /// The session found last (most copies follow one of the same).
    last: Option<(usize, MirrorSource, usize)>,
}

impl Points {
    /// One point per file, named by the file's stem.
    pub(crate) fn new(stems: &[String]) -> Points {
        Points {
            states: stems
                .iter()
                .enumerate()
                .map(|(file, stem)| State {
                    point: CapturePoint {
                        file,
                        mirror: None,
                        name: stem.clone(),
                    },
                    packets: 0,
                    last_ts: 0,
                })
                .collect(),
            plain: (0..stems.len()).map(Some).collect(),
            sessions: Vec::new(),
            last: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.states.len()
    }

    pub(crate) fn point(&self, index: usize) -> &CapturePoint {
        &self.states[index].point
    }

    fn push(&mut self, point: CapturePoint) -> usize {
        self.states.push(State {
            point,
            packets: 0,
            last_ts: 0,
        });
        self.states.len() - 1
    }

    /// True while file `file`'s plain packets go to its own point.
    #[inline]
    pub(crate) fn plain_is_own(&self, file: usize) -> bool {
        self.plain[file] == Some(file)
    }

    /// True when mirror session `source` of file `file` is, or would be
    /// made, the file's own point.
    #[inline]
    pub(crate) fn is_own_session(&self, file: usize, source: MirrorSource) -> bool {
        let known = match self.last {
            Some((f, s, p)) if f == file && s == source => Some(p),
            _ => self
                .sessions
                .iter()
                .find(|(f, s, _)| *f == file && *s == source)
                .map(|&(_, _, p)| p),
        };
        match known {
            Some(p) => p == file,
            None => self.plain[file] == Some(file) && self.states[file].packets == 0,
        }
    }

    /// The point of file `file`'s plain packets.
    pub(crate) fn plain(&mut self, file: usize, stems: &[String]) -> Assigned {
        if let Some(p) = self.plain[file] {
            return Assigned::Known(p);
        }
        let p = self.push(CapturePoint {
            file,
            mirror: None,
            name: format!("{}-plain", stems[file]),
        });
        self.plain[file] = Some(p);
        Assigned::New(p)
    }

    /// The point of mirror session `source` in file `file`.
    #[inline]
    pub(crate) fn session(
        &mut self,
        file: usize,
        source: MirrorSource,
        stems: &[String],
    ) -> Assigned {
        if let Some((f, s, p)) = self.last
            && f == file
            && s == source
        {
            return Assigned::Known(p);
        }
        if let Some(&found) = self
            .sessions
            .iter()
            .find(|(f, s, _)| *f == file && *s == source)
        {
            self.last = Some(found);
            return Assigned::Known(found.2);
        }
        let name = CapturePoint::mirror_name(&stems[file], &source);
        let own_unused = self.plain[file] == Some(file) && self.states[file].packets == 0;
        let assigned = if own_unused {
            self.plain[file] = None;
            self.states[file].point.mirror = Some(source);
            self.states[file].point.name = name;
            Assigned::Renamed(file)
        } else {
            Assigned::New(self.push(CapturePoint {
                file,
                mirror: Some(source),
                name,
            }))
        };
        self.sessions.push((file, source, assigned.index()));
        assigned
    }

    /// A packet (or, with `packet` false, any frame) of point `p` at `ts`.
    pub(crate) fn saw(&mut self, p: usize, ts: u64, packet: bool) {
        let s = &mut self.states[p];
        s.packets += u64::from(packet);
        s.last_ts = s.last_ts.max(ts);
    }

    /// The last time of each point (for `MultiEngine::finish`).
    pub(crate) fn ends(&self) -> Vec<u64> {
        self.states.iter().map(|s| s.last_ts).collect()
    }

    /// Every point, in index order.
    pub(crate) fn into_points(self) -> Vec<CapturePoint> {
        self.states.into_iter().map(|s| s.point).collect()
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proto_parse::mirror::MirrorKind;

    fn source(switch: &str, session: u32) -> MirrorSource {
        MirrorSource {
            kind: MirrorKind::ErspanIII,
            switch: switch.parse().unwrap(),
            session,
        }
    }

    #[test]
    fn the_first_session_takes_an_unused_file_point_and_the_next_are_new() {
        let stems = vec!["collector".to_string()];
        let mut points = Points::new(&stems);
        let a = source("192.0.2.1", 1);
        assert_eq!(points.session(0, a, &stems), Assigned::Renamed(0));
        assert_eq!(points.point(0).name, "collector-erspan3-192.0.2.1-s1");
        points.saw(0, 5, true);
        assert_eq!(points.session(0, a, &stems), Assigned::Known(0));
        assert_eq!(
            points.session(0, source("2001:db8::2", 7), &stems),
            Assigned::New(1)
        );
        assert_eq!(points.point(1).name, "collector-erspan3-2001_db8__2-s7");
        // Plain packets after that get a point of their own.
        assert_eq!(points.plain(0, &stems), Assigned::New(2));
        assert_eq!(points.plain(0, &stems), Assigned::Known(2));
        assert_eq!(points.ends(), [5, 0, 0]);
    }

    #[test]
    fn a_file_with_plain_packets_keeps_its_point() {
        let stems = vec!["a".to_string(), "b".to_string()];
        let mut points = Points::new(&stems);
        assert_eq!(points.plain(1, &stems), Assigned::Known(1));
        points.saw(1, 1, true);
        assert_eq!(
            points.session(1, source("192.0.2.1", 1), &stems),
            Assigned::New(2)
        );
        assert_eq!(points.point(2).file, 1);
    }
}
