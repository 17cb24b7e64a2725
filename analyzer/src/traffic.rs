//! What a capture held besides MetaRoCE and RoCEv2: the mirrored frames
//! decapsulated per encapsulation, the encapsulated frames that could not
//! be, and what the rest was (EtherType, IP protocol, UDP port). And the
//! one explanation ([`explain`]) every tool gives when a capture has frames
//! but none of our packets, so that nothing is dropped silently.

use std::collections::BTreeMap;
use std::fmt;

use proto_parse::frame::{self, DecodeConfig, LinkType};
use proto_parse::mirror::MirrorKind;
use proto_parse::{Error, ErrorKind, Layer, LenSource};
use rustc_hash::FxHashMap;

use crate::observation::MirrorTag;

/// What a frame that was no packet of ours was (its innermost layers,
/// when it was mirrored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Seen {
    /// Not IP: its EtherType (or link protocol).
    EtherType(u16),
    /// IP of a protocol other than UDP.
    IpProtocol(u8),
    /// UDP, by the lower of its two ports (the service's, as a rule).
    UdpPort(u16),
    /// Its headers did not decode: the layer that broke.
    Undecodable(Layer),
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Seen::EtherType(t) => {
                let name = match t {
                    0x0806 => " (ARP)",
                    0x88CC => " (LLDP)",
                    0x8915 => " (RoCE v1)",
                    0x88F7 => " (PTP)",
                    _ => "",
                };
                write!(f, "EtherType 0x{t:04x}{name}")
            }
            Seen::IpProtocol(p) => {
                let name = match p {
                    1 => " (ICMP)",
                    6 => " (TCP)",
                    47 => " (GRE)",
                    58 => " (ICMPv6)",
                    _ => "",
                };
                write!(f, "IP protocol {p}{name}")
            }
            Seen::UdpPort(p) => write!(f, "UDP port {p}"),
            Seen::Undecodable(layer) => write!(f, "undecodable {layer} header"),
        }
    }
}

/// Why an encapsulated frame was not (wholly) decapsulated: the layer and
/// the error without its offsets and lengths, so that alike frames count
/// together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Problem {
    layer: Layer,
    what: ProblemKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ProblemKind {
    Truncated(LenSource),
    BadValue(&'static str, u64, &'static str),
    /// What, and its value (none for an IP fragment inside a mirror: its
    /// offset would make a line per fragment).
    Unsupported(&'static str, Option<u64>),
}

impl Problem {
    fn of(err: &Error) -> Problem {
        let what = match err.kind {
            ErrorKind::Truncated { source, .. } => ProblemKind::Truncated(source),
            ErrorKind::BadValue {
                field,
                value,
                expected,
            } => ProblemKind::BadValue(field, value, expected),
            ErrorKind::Unsupported { what, value } => {
                let fragment = matches!(err.layer, Layer::Ipv4 | Layer::Ipv6Extension);
                ProblemKind::Unsupported(what, (!fragment).then_some(value))
            }
        };
        Problem {
            layer: err.layer,
            what,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.what {
            ProblemKind::Truncated(LenSource::Captured) => {
                write!(f, "{} cut by the snaplen", self.layer)
            }
            ProblemKind::Truncated(LenSource::Header) => {
                write!(f, "{} longer than its length field allows", self.layer)
            }
            ProblemKind::Truncated(LenSource::File) => {
                write!(f, "{} cut by the end of the file", self.layer)
            }
            ProblemKind::BadValue(field, value, expected) => {
                write!(f, "{} {field} {value} (expected {expected})", self.layer)
            }
            ProblemKind::Unsupported(what, Some(value)) if what == "GRE protocol type" => {
                write!(f, "{}: unsupported {what} 0x{value:04x}", self.layer)
            }
            ProblemKind::Unsupported(what, Some(value)) => {
                write!(f, "{}: unsupported {what} {value}", self.layer)
            }
            ProblemKind::Unsupported(_, None) => {
                write!(
                    f,
                    "{}: IP fragment inside a mirrored frame (not reassembled)",
                    self.layer
                )
            }
        }
    }
}

/// Counts of one capture's traffic that the engine does not see whole.
/// Fed by whoever decodes the frames ([`Census::mirrored`] for a mirrored
/// packet of ours, [`Census::other`] for any frame that made no
/// observation); cheap for mirrored packets, a full decode for the rest.
#[derive(Debug, Clone, Default)]
pub struct Census {
    decapsulated: [u64; MirrorKind::ALL.len()],
    mirror_truncated: u64,
    problems: FxHashMap<Problem, u64>,
    seen: FxHashMap<Seen, u64>,
}

/// The index of `kind` in [`MirrorKind::ALL`] (its declaration order),
/// counted per mirrored packet: a cast, inlined.
#[inline(always)]
fn kind_index(kind: MirrorKind) -> usize {
    kind as usize
}

impl Census {
    /// A mirrored frame that carried a packet of ours.
    #[inline]
    pub fn mirrored(&mut self, tag: &MirrorTag) {
        self.decapsulated[kind_index(tag.source.kind)] += 1;
        self.mirror_truncated += u64::from(tag.truncated);
    }

    /// A frame that made no observation: what it was.
    #[cold]
    pub fn other(&mut self, link: LinkType, data: &[u8], cfg: &DecodeConfig) {
        self.count_other(link, data, cfg, true);
    }

    /// A mirrored frame, already counted with [`Census::mirrored`], whose
    /// copy made no observation: what it was (the decapsulation is not
    /// counted again).
    #[cold]
    pub fn other_in_counted_mirror(&mut self, link: LinkType, data: &[u8], cfg: &DecodeConfig) {
        self.count_other(link, data, cfg, false);
    }

    fn count_other(&mut self, link: LinkType, data: &[u8], cfg: &DecodeConfig, mirror: bool) {
        frame::decode_with(link, data, cfg, |f| {
            let broken = f.error.as_ref();
            if let Some(m) = &f.mirror
                && mirror
            {
                self.decapsulated[kind_index(m.kind)] += 1;
                self.mirror_truncated += u64::from(m.truncated);
            }
            let encapsulation = matches!(
                broken.map(|e| e.layer),
                Some(Layer::Gre | Layer::Erspan | Layer::Vxlan)
            );
            if let Some(err) = broken
                && (encapsulation || f.mirror.is_some())
            {
                *self.problems.entry(Problem::of(err)).or_default() += 1;
                if encapsulation {
                    return;
                }
            }
            let seen = if let Some(udp) = f.udp {
                Seen::UdpPort(udp.src_port.min(udp.dst_port))
            } else if let Some(ip) = f.ip {
                Seen::IpProtocol(ip.protocol)
            } else if let Some(err) = broken {
                Seen::Undecodable(err.layer)
            } else if let Some(t) = f.ether_type {
                Seen::EtherType(t)
            } else {
                Seen::Undecodable(Layer::Capture)
            };
            *self.seen.entry(seen).or_default() += 1;
        });
    }

    /// Adds another census (a batch's) to this one.
    pub fn add(&mut self, other: &Census) {
        for (a, b) in self.decapsulated.iter_mut().zip(other.decapsulated) {
            *a += b;
        }
        self.mirror_truncated += other.mirror_truncated;
        for (k, v) in &other.problems {
            *self.problems.entry(*k).or_default() += v;
        }
        for (k, v) in &other.seen {
            *self.seen.entry(*k).or_default() += v;
        }
    }

    pub fn clear(&mut self) {
        *self = Census {
            problems: std::mem::take(&mut self.problems),
            seen: std::mem::take(&mut self.seen),
            ..Census::default()
        };
        self.problems.clear();
        self.seen.clear();
    }

    /// True when nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.decapsulated.iter().all(|&n| n == 0)
            && self.problems.is_empty()
            && self.seen.is_empty()
    }

    /// The report's view.
    pub fn report(&self) -> TrafficReport {
        let mut seen: Vec<(Seen, u64)> = self.seen.iter().map(|(k, v)| (*k, *v)).collect();
        // Most frequent first; ties by name, so that the order is stable.
        seen.sort_by(|a, b| {
            b.1.cmp(&a.1)
                .then_with(|| a.0.to_string().cmp(&b.0.to_string()))
        });
        TrafficReport {
            decapsulated: MirrorKind::ALL
                .iter()
                .zip(self.decapsulated)
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| (k.as_str(), n))
                .collect(),
            mirror_truncated: self.mirror_truncated,
            mirror_problems: self
                .problems
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            not_analysed: seen
                .into_iter()
                .take(TrafficReport::TOP)
                .map(|(what, frames)| SeenCount {
                    what: what.to_string(),
                    udp_port: match what {
                        Seen::UdpPort(p) => Some(p),
                        _ => None,
                    },
                    frames,
                })
                .collect(),
            note: None,
        }
    }
}

/// One line of [`TrafficReport::not_analysed`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SeenCount {
    pub what: String,
    #[cfg_attr(feature = "serde", serde(skip))]
    pub udp_port: Option<u16>,
    pub frames: u64,
}

/// The capture section's account of mirrored frames and of the frames the
/// engine did not analyse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct TrafficReport {
    /// Mirrored frames decapsulated, per encapsulation (`gre`, `erspan1`,
    /// `erspan2`, `erspan3`, `vxlan`).
    pub decapsulated: BTreeMap<&'static str, u64>,
    /// Mirrored copies the switch cut (ERSPAN's T bit).
    pub mirror_truncated: u64,
    /// Encapsulated frames not decapsulated, or whose mirrored frame broke,
    /// per reason (GRE in a mirror, an unknown ERSPAN version, a header cut
    /// by the snaplen...).
    pub mirror_problems: BTreeMap<String, u64>,
    /// What the frames that made no MetaRoCE or RoCEv2 packet were (the
    /// mirrored frame's layers for a mirror), most frequent first.
    pub not_analysed: Vec<SeenCount>,
    /// [`explain`]'s sentence, when the capture had frames but none of
    /// our packets.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub note: Option<String>,
}

impl TrafficReport {
    /// Lines kept in `not_analysed`.
    pub const TOP: usize = 8;

    /// Joins another capture's account into this one.
    pub fn merge(&mut self, other: &TrafficReport) {
        for (k, v) in &other.decapsulated {
            *self.decapsulated.entry(k).or_default() += v;
        }
        self.mirror_truncated += other.mirror_truncated;
        for (k, v) in &other.mirror_problems {
            *self.mirror_problems.entry(k.clone()).or_default() += v;
        }
        for s in &other.not_analysed {
            match self.not_analysed.iter_mut().find(|m| m.what == s.what) {
                Some(m) => m.frames += s.frames,
                None => self.not_analysed.push(s.clone()),
            }
        }
        self.not_analysed
            .sort_by_key(|s| std::cmp::Reverse(s.frames));
        self.not_analysed.truncate(Self::TOP);
    }
}

/// Why a capture of `frames` frames held no MetaRoCE or RoCEv2 packet
/// (`packets` is how many it held), from what it did hold: `None` when it
/// held some, or nothing at all. The one wording of `report`, `lint`,
/// `trace`, `export` and `metaroce-top`.
pub fn explain(frames: u64, packets: u64, traffic: &TrafficReport) -> Option<String> {
    if frames == 0 || packets > 0 {
        return None;
    }
    let mut out = format!("no MetaRoCE or RoCEv2 packet in {frames} frames");
    let decapsulated: u64 = traffic.decapsulated.values().sum();
    if decapsulated > 0 {
        let kinds: Vec<String> = traffic
            .decapsulated
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        out += &format!(" ({decapsulated} decapsulated: {})", kinds.join(", "));
    }
    if !traffic.not_analysed.is_empty() {
        let top: Vec<String> = traffic
            .not_analysed
            .iter()
            .take(4)
            .map(|s| format!("{} ({})", s.what, s.frames))
            .collect();
        out += &format!("; seen: {}", top.join(", "));
    }
    let problems: u64 = traffic.mirror_problems.values().sum();
    let udp = traffic
        .not_analysed
        .iter()
        .find(|s| s.udp_port.is_some() && s.frames * 10 >= frames);
    let cause = if problems * 4 >= frames {
        let what = traffic
            .mirror_problems
            .iter()
            .max_by_key(|(_, n)| **n)
            .map_or("", |(what, _)| what.as_str());
        format!(
            "likely cause: an encapsulation this tool does not decapsulate ({what}); GRE, ERSPAN I/II/III and VXLAN are read (docs/mirrors.md)"
        )
    } else if let Some(s) = udp {
        let port = s.udp_port.unwrap_or_default();
        format!(
            "likely cause: the RDMA traffic uses another UDP port: try --port {port} (MetaRoCE), --rocev2-port {port} (RoCEv2) or --heuristic"
        )
    } else if decapsulated > 0 {
        "likely cause: the mirror session does not select the RDMA traffic (check its source ports, VLANs or ACL)".to_string()
    } else {
        "likely cause: the RDMA traffic was not in the capture: RDMA bypasses the host's kernel, so capture it from a switch mirror (ERSPAN, GRE) or the NIC's sniffer (docs/capture.md)".to_string()
    };
    Some(format!("{out}; {cause}"))
}

#[cfg(test)]
mod test {
    use super::*;

    fn report(seen: &[(&str, Option<u16>, u64)]) -> TrafficReport {
        TrafficReport {
            not_analysed: seen
                .iter()
                .map(|&(what, udp_port, frames)| SeenCount {
                    what: what.into(),
                    udp_port,
                    frames,
                })
                .collect(),
            ..TrafficReport::default()
        }
    }

    #[test]
    fn says_nothing_when_there_were_packets_or_no_frames() {
        assert_eq!(explain(10, 1, &TrafficReport::default()), None);
        assert_eq!(explain(0, 0, &TrafficReport::default()), None);
    }

    #[test]
    fn names_another_port_when_one_udp_port_dominates() {
        let r = report(&[
            ("UDP port 5000", Some(5000), 90),
            ("EtherType 0x0806 (ARP)", None, 10),
        ]);
        let note = explain(100, 0, &r).unwrap();
        assert!(note.starts_with("no MetaRoCE or RoCEv2 packet in 100 frames; seen: UDP port 5000 (90), EtherType 0x0806 (ARP) (10)"), "{note}");
        assert!(note.contains("--port 5000"), "{note}");
    }

    #[test]
    fn names_an_unsupported_encapsulation() {
        let mut r = report(&[]);
        r.mirror_problems
            .insert("gre: unsupported GRE protocol type 0x8847".into(), 50);
        let note = explain(50, 0, &r).unwrap();
        assert!(
            note.contains("does not decapsulate (gre: unsupported GRE protocol type 0x8847)"),
            "{note}"
        );
    }

    #[test]
    fn otherwise_the_traffic_was_not_captured() {
        let r = report(&[("IP protocol 6 (TCP)", None, 40)]);
        assert!(
            explain(40, 0, &r)
                .unwrap()
                .contains("was not in the capture")
        );
    }

    #[test]
    fn kind_indexes_follow_the_order_of_all_kinds() {
        for (i, kind) in MirrorKind::ALL.into_iter().enumerate() {
            assert_eq!(kind_index(kind), i, "{kind}");
        }
    }

    #[test]
    fn census_names_what_it_saw() {
        use proto_parse::build::UdpFrameBuilder;
        let cfg = DecodeConfig::default();
        let mut census = Census::default();
        let udp = UdpFrameBuilder::new(
            "10.0.0.1:49152".parse().unwrap(),
            "10.0.0.2:5000".parse().unwrap(),
        )
        .build(&[0; 20]);
        for _ in 0..3 {
            census.other(LinkType::Ethernet, &udp, &cfg);
        }
        let mut arp = udp.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        census.other(LinkType::Ethernet, &arp, &cfg);
        let r = census.report();
        let seen: Vec<(&str, u64)> = r
            .not_analysed
            .iter()
            .map(|s| (s.what.as_str(), s.frames))
            .collect();
        assert_eq!(seen, [("UDP port 5000", 3), ("EtherType 0x0806 (ARP)", 1)]);
    }
}
