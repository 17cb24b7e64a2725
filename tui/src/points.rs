//! Capture points of a live view. A mirror collector receives a copy of
//! one transmission from every switch session whose port it crossed; one
//! engine fed every copy would count each again (as retransmissions,
//! duplicates, RTT samples taken at two places). So each host pair is
//! analysed from one capture point, the first that carried a packet of it
//! (plain frames are one point, each mirror session another), and the
//! copies the other points carry of it are counted per point, not
//! analysed. `metaroce-analyze report` of a recording of the collector
//! analyses every point apart and matches the copies (docs/mirrors.md).
//!
//! While one point has been seen, no table is kept: a host's own capture
//! or a single session costs one comparison a packet.

use std::net::IpAddr;

use analyzer::engine::Report;
use proto_parse::mirror::MirrorSource;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// Points kept apart; the copies of later sessions are counted on the last.
pub const MAX_POINTS: usize = 256;
/// Host pairs whose point is remembered; past it, a new pair is analysed
/// from every point that carries it (counted in [`PointView::unchecked`]).
pub const MAX_PAIRS: usize = 1 << 20;

/// One capture point as the status line and the saved snapshot show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PointView {
    /// "plain" or the mirror session ("ERSPAN III 192.0.2.1 session 1").
    pub name: String,
    /// Packets of ours it carried.
    pub packets: u64,
    /// Of those, copies of host pairs another point is analysed from.
    pub copies_not_analysed: u64,
    /// Of those, packets of host pairs past [`MAX_PAIRS`]: analysed
    /// without asking which point the pair is analysed from.
    pub unchecked: u64,
}

/// Two hosts, in either direction.
type HostPair = (IpAddr, IpAddr);

fn pair_of(a: IpAddr, b: IpAddr) -> HostPair {
    (a.min(b), a.max(b))
}

#[derive(Debug)]
struct Point {
    source: Option<MirrorSource>,
    packets: u64,
    copies_not_analysed: u64,
    unchecked: u64,
}

/// Which point each host pair is analysed from.
#[derive(Debug, Default)]
pub struct CapturePoints {
    points: Vec<Point>,
    /// `None` while a single point has been seen.
    owners: Option<FxHashMap<HostPair, u16>>,
}

impl CapturePoints {
    /// Whether a packet between `src` and `dst`, carried by `source`
    /// (`None`: a plain frame), is analysed. `known_pairs` gives the host pairs analysed so
    /// far; it is asked once, when a second point turns up.
    #[inline]
    pub fn admit(
        &mut self,
        source: Option<MirrorSource>,
        src: IpAddr,
        dst: IpAddr,
        known_pairs: impl FnOnce() -> Vec<HostPair>,
    ) -> bool {
        if let [only] = self.points.as_mut_slice()
            && only.source == source
        {
            only.packets += 1;
            return true;
        }
        let point = self.point_of(source);
        self.points[point].packets += 1;
        if self.points.len() == 1 {
            return true;
        }
        let owners = self.owners.get_or_insert_with(|| {
            // Everything analysed so far came from the first point.
            known_pairs().into_iter().map(|p| (p, 0)).collect()
        });
        let pair = pair_of(src, dst);
        let owner = match owners.get(&pair) {
            Some(&owner) => usize::from(owner),
            None if owners.len() < MAX_PAIRS => {
                owners.insert(pair, point as u16);
                point
            }
            None => {
                self.points[point].unchecked += 1;
                point
            }
        };
        if owner == point {
            true
        } else {
            self.points[point].copies_not_analysed += 1;
            false
        }
    }

    fn point_of(&mut self, source: Option<MirrorSource>) -> usize {
        if let Some(i) = self.points.iter().position(|p| p.source == source) {
            return i;
        }
        if self.points.len() == MAX_POINTS {
            return MAX_POINTS - 1;
        }
        self.points.push(Point {
            source,
            packets: 0,
            copies_not_analysed: 0,
            unchecked: 0,
        });
        self.points.len() - 1
    }

    pub fn view(&self) -> Vec<PointView> {
        self.points
            .iter()
            .map(|p| PointView {
                name: p.source.map_or("plain".to_string(), |s| s.to_string()),
                packets: p.packets,
                copies_not_analysed: p.copies_not_analysed,
                unchecked: p.unchecked,
            })
            .collect()
    }
}

/// The host pairs of a report's flows.
pub fn pairs_of(report: &Report) -> Vec<HostPair> {
    let directions = report.directions.iter().map(|d| (d.src, d.dst));
    let flows = report.rocev2.iter().map(|f| (f.src, f.dst));
    directions
        .chain(flows)
        .map(|(a, b)| pair_of(a, b))
        .collect()
}

#[cfg(test)]
mod test {
    use super::*;
    use proto_parse::mirror::MirrorKind;
    use std::net::Ipv4Addr;

    fn host(n: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, n))
    }

    fn session(n: u32) -> Option<MirrorSource> {
        Some(MirrorSource {
            kind: MirrorKind::ErspanIII,
            switch: IpAddr::V4(Ipv4Addr::new(192, 0, 2, n as u8)),
            session: n,
        })
    }

    #[test]
    fn a_pair_is_analysed_from_the_first_point_that_carried_it() {
        let mut points = CapturePoints::default();
        let none = Vec::new;
        // Session 1 carries 1<->2 first, both ways.
        assert!(points.admit(session(1), host(1), host(2), none));
        assert!(points.admit(session(1), host(2), host(1), none));
        // Session 2's copies of it are counted, not analysed; its own
        // pair 3<->4 is analysed from it.
        assert!(!points.admit(session(2), host(2), host(1), || vec![pair_of(
            host(1),
            host(2)
        )]));
        assert!(points.admit(session(2), host(3), host(4), none));
        assert!(!points.admit(session(1), host(4), host(3), none));
        assert!(points.admit(session(1), host(1), host(2), none));
        let view = points.view();
        assert_eq!(view.len(), 2);
        assert_eq!((view[0].packets, view[0].copies_not_analysed), (4, 1));
        assert_eq!((view[1].packets, view[1].copies_not_analysed), (2, 1));
        assert_eq!(view[1].name, "ERSPAN III 192.0.2.2 session 2");
    }

    #[test]
    fn plain_frames_are_a_point_of_their_own() {
        let mut points = CapturePoints::default();
        assert!(points.admit(None, host(1), host(2), Vec::new));
        assert!(!points.admit(session(1), host(1), host(2), || vec![pair_of(
            host(1),
            host(2)
        )]));
        assert_eq!(points.view()[0].name, "plain");
        assert_eq!(points.view()[1].copies_not_analysed, 1);
    }
}
