//! `metaroce.analysis.*`: the sequence analysis of spec section 9, computed
//! by the `analyzer` crate's flow engine (the same engine as the
//! `metaroce-analyze` CLI and the TUI). This module only feeds the engine
//! and turns its [`Verdict`]s into tree items and expert notes; it holds no
//! flow logic.
//!
//! Wireshark dissects every frame once in capture order on the first pass
//! (frame not yet visited) and again, in any order, on later passes. The
//! engine is fed on the first pass only; verdicts are kept per frame number
//! and shown on every pass. [`crate::state::reset`] drops everything when a
//! capture is opened or closed.
//!
//! Some verdicts are only known after the fact: a DUP feedback shows an
//! earlier retransmission spurious (spec 11.10). When the engine's verdict
//! of a DUP names that retransmission (`dup_of_frame`), its kept verdict
//! gets the link back (`shown_spurious_by`), so later passes (tshark `-2`,
//! the GUI, which dissects every frame before showing a tree) mark it as
//! the report counts it.
//!
//! With the lint on (`Config::lint`), the engine also checks the rules of
//! `metaroce-analyze lint` on each packet: the findings of a frame are kept
//! (the engine's list, drained after each packet) and shown as one expert
//! info per rule ([`add_lint`]).

use std::net::IpAddr;

use analyzer::engine::{
    Config, Engine, FlowLabel, MrChecks, ObsKind, Observation, RoceFacts, Verdict,
};
use analyzer::lint::Finding;
use proto_parse::frame::{self, DecodeConfig, LinkType};
use proto_parse::metaroce;

use crate::decode::{Dissection, Item, LintNote, Note, Value};
use crate::fields::{Ei, Ett, Hf};

/// What the engine needs about a frame besides the MetaRoCE bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameMeta {
    /// Frame number (1-based).
    pub frame: u32,
    pub ts_ns: u64,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The two IP ECN bits (3 = CE).
    pub ecn: u8,
    /// The UDP ports (the lint checks the source port, spec section 1).
    pub src_port: u16,
    pub dst_port: u16,
    /// The IPv6 flow label (the lint compares it with the ev, MR-PKT-015).
    pub flow_label: Option<u32>,
}

/// What the engine needs of the IP and UDP headers around a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outer {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The two IP ECN bits.
    pub ecn: u8,
    pub src_port: u16,
    pub dst_port: u16,
    /// IPv6 only.
    pub flow_label: Option<u32>,
}

/// The outer layers of a frame, decoded by `proto_parse::frame` from the
/// frame's bytes: the IP addresses, ECN bits and UDP ports of the packet whose UDP
/// payload is `udp_payload` (`None` when the frame's UDP payload is another
/// one, e.g. inside a tunnel, or the link type is not supported).
///
/// When `udp_payload` lies inside `frame_bytes` (the plugin passes both
/// without copying), the check is a pointer comparison, not a `memcmp`.
pub fn outer_layers(link: LinkType, frame_bytes: &[u8], udp_payload: &[u8]) -> Option<Outer> {
    let same = |payload: &[u8]| std::ptr::eq(payload, udp_payload) || payload == udp_payload;
    // The common frame (Ethernet, IPv4, UDP) in one pass, without building
    // a `Frame`; anything else (or another UDP payload: a tunnel) goes
    // through the full decode.
    if let Some(udp) = frame::ipv4_udp(link, frame_bytes)
        && same(udp.payload)
    {
        return Some(Outer {
            src: udp.src.into(),
            dst: udp.dst.into(),
            ecn: udp.ecn.bits(),
            src_port: udp.src_port,
            dst_port: udp.dst_port,
            flow_label: None,
        });
    }
    let cfg = DecodeConfig {
        verify_crc: false,
        ..DecodeConfig::default()
    };
    let decoded = frame::decode(link, frame_bytes, &cfg);
    let ip = decoded.ip?;
    let udp = decoded.udp?;
    same(udp.payload).then_some(Outer {
        src: ip.src,
        dst: ip.dst,
        ecn: ip.ecn.bits(),
        src_port: udp.src_port,
        dst_port: udp.dst_port,
        flow_label: ip.flow_label,
    })
}

/// `flows[frame]` of a frame with no flow (or not analysed).
const NO_FLOW: u32 = u32::MAX;

/// The engine and the verdicts of the current capture.
///
/// Per-frame results are kept compactly: the flow of every analysed frame
/// in a `Vec` indexed by frame number (4 bytes a frame), and the verdicts
/// with something to show besides the flow in a `Vec` sorted by frame
/// (frames arrive in order on the first pass, so it is an append).
pub struct Analysis {
    engine: Engine,
    /// The lint is on (`Config::lint`): observations carry its checks.
    lint: bool,
    /// Verdicts with something to show besides the flow, by frame.
    verdicts: Vec<Verdict>,
    /// The flow of every analysed frame (`NO_FLOW`: none), by frame number.
    flows: Vec<u32>,
    /// The lint's findings (with `Config::lint`), in frame order.
    findings: Vec<Finding>,
    /// RoCEv2 requests: the expected PSN (`NO_PSN`: none), by frame number.
    expected_psn: Vec<u32>,
    /// RoCEv2 facts besides the expected PSN, by frame (sorted).
    roce_facts: Vec<(u64, RoceFacts)>,
    /// RoCEv2 flows' keys (request source, destination and destination
    /// QP), by flow index. An index the engine reuses after evicting a
    /// flow (beyond `Config::max_flows` live flows) shows the newer key on
    /// later passes.
    roce_keys: Vec<Option<RoceKey>>,
}

/// `expected_psn[frame]` of a frame with none.
const NO_PSN: u32 = u32::MAX;

/// The RoCEv2 analysis of one frame ([`Analysis::ingest_rocev2`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceAnalysed {
    pub verdict: Verdict,
    pub facts: RoceFacts,
    /// The flow's request source, destination and destination QP.
    pub key: Option<RoceKey>,
}

/// A RoCEv2 RC flow as the engine keys it: its requests' source and
/// destination addresses and destination QP.
pub type RoceKey = (IpAddr, IpAddr, u32);

impl Analysis {
    pub fn new(cfg: Config) -> Self {
        Analysis {
            lint: cfg.lint.is_some(),
            engine: Engine::new(cfg),
            verdicts: Vec::new(),
            flows: Vec::new(),
            findings: Vec::new(),
            expected_psn: Vec::new(),
            roce_facts: Vec::new(),
            roce_keys: Vec::new(),
        }
    }

    /// First pass: feeds a RoCEv2 observation (from the RoCEv2
    /// post-dissector) to the engine, once per frame, and keeps what it
    /// said. A frame already fed returns what was kept.
    pub fn ingest_rocev2(&mut self, obs: &Observation) -> Option<RoceAnalysed> {
        let frame = u32::try_from(obs.frame).ok()?;
        if let Some(kept) = self.lookup_rocev2(frame) {
            return Some(kept);
        }
        let v = self.engine.ingest(obs);
        let facts = self.engine.rocev2_facts();
        self.keep(v);
        let key = v
            .flow
            .and_then(|f| Some((f, self.engine.rocev2_flow_key(f)?)));
        if let Some((flow, key)) = key {
            let at = flow as usize;
            if self.roce_keys.len() <= at {
                self.roce_keys.resize(at + 1, None);
            }
            self.roce_keys[at] = Some(key);
        }
        let key = key.map(|(_, k)| k);
        if let Some(psn) = facts.expected_psn {
            let at = frame as usize;
            if self.expected_psn.len() <= at {
                self.expected_psn.resize(at + 1, NO_PSN);
            }
            self.expected_psn[at] = psn;
        }
        let rest = RoceFacts {
            expected_psn: None,
            ..facts
        };
        if rest != RoceFacts::default() {
            self.roce_facts.push((obs.frame, rest));
        }
        Some(RoceAnalysed {
            verdict: v,
            facts,
            key,
        })
    }

    /// Later passes: what [`Analysis::ingest_rocev2`] kept for `frame`.
    pub fn lookup_rocev2(&self, frame: u32) -> Option<RoceAnalysed> {
        let verdict = self.lookup(frame)?;
        let at = u64::from(frame);
        let mut facts = self
            .roce_facts
            .binary_search_by_key(&at, |(f, _)| *f)
            .map_or(RoceFacts::default(), |i| self.roce_facts[i].1);
        facts.expected_psn = self
            .expected_psn
            .get(frame as usize)
            .copied()
            .filter(|&p| p != NO_PSN);
        let key = verdict
            .flow
            .and_then(|f| self.roce_keys.get(f as usize).copied().flatten());
        Some(RoceAnalysed {
            verdict,
            facts,
            key,
        })
    }

    /// Keeps a verdict: its flow by frame, and the verdict itself when it
    /// says more than the flow.
    fn keep(&mut self, v: Verdict) {
        let found = self.engine.findings();
        if !found.is_empty() {
            // Frames come in order on the first pass: an append.
            self.findings.extend_from_slice(found);
            self.engine.clear_findings();
        }
        if let Some(flow) = v.flow.filter(|&f| f != NO_FLOW)
            && let Ok(at) = usize::try_from(v.frame)
        {
            if self.flows.len() <= at {
                self.flows.resize(at + 1, NO_FLOW);
            }
            self.flows[at] = flow;
        }
        let plain = Verdict {
            frame: v.frame,
            flow: v.flow,
            ..Verdict::default()
        };
        if v != plain {
            // Sorted by frame: an append on the first pass.
            match self.verdicts.last() {
                Some(last) if last.frame >= v.frame => {
                    if let Err(at) = self.verdicts.binary_search_by_key(&v.frame, |x| x.frame) {
                        self.verdicts.insert(at, v);
                    }
                }
                _ => self.verdicts.push(v),
            }
        }
    }

    /// First pass: feeds the packet to the engine, once per frame, and keeps
    /// its verdict. A frame already fed returns its kept verdict.
    pub fn ingest(
        &mut self,
        meta: &FrameMeta,
        captured: &[u8],
        wire_len: usize,
    ) -> Option<Verdict> {
        self.ingest_parsed(meta, &metaroce::parse_lax(captured, wire_len))
    }

    /// [`Analysis::ingest`] of a packet already parsed (the plugin parses
    /// each packet once for the decode and the analysis).
    pub fn ingest_parsed(&mut self, meta: &FrameMeta, lax: &metaroce::Lax<'_>) -> Option<Verdict> {
        if let Some(v) = self.lookup(meta.frame) {
            return Some(v);
        }
        let (Some(packet), Some(layout)) = (&lax.packet, &lax.layout) else {
            self.engine.ingest_other(meta.ts_ns);
            return None;
        };
        let mut obs = Observation::from_metaroce(
            meta.frame.into(),
            meta.ts_ns,
            meta.src,
            meta.dst,
            meta.ecn,
            packet,
            layout,
        );
        // The ports as captured (from_metaroce assumes the spec's).
        obs.src_port = meta.src_port;
        obs.dst_port = meta.dst_port;
        // What only the lint reads (MR-PKT-013..015): the parser's
        // warnings, the CRC32C check and the IPv6 flow label.
        if self.lint
            && !obs.malformed
            && let ObsKind::MetaRoce(mr) = &mut obs.kind
        {
            mr.checks = MrChecks::of(packet, layout);
            mr.checks.flow_label_not_ev = meta
                .flow_label
                .and_then(|label| FlowLabel::not_ev(label, mr.ev));
        }
        let v = self.engine.ingest(&obs);
        self.keep(v);
        if let Some(retx) = v.dup_of_frame {
            self.shown_spurious(retx, v.frame);
        }
        Some(v)
    }

    /// The DUP feedback in frame `dup` shows the retransmission in frame
    /// `retx` spurious: its kept verdict says so from now on, unless it was
    /// already spurious when captured.
    fn shown_spurious(&mut self, retx: u64, dup: u64) {
        let Ok(at) = self.verdicts.binary_search_by_key(&retx, |x| x.frame) else {
            return;
        };
        if let Some(r) = &mut self.verdicts[at].retransmission
            && !r.spurious()
        {
            r.shown_spurious_by = Some(dup);
        }
    }

    /// Later passes: the verdict kept for `frame`.
    pub fn lookup(&self, frame: u32) -> Option<Verdict> {
        if let Some(v) = self.kept(frame) {
            return Some(v);
        }
        let flow = *self.flows.get(frame as usize)?;
        (flow != NO_FLOW).then(|| Verdict {
            frame: frame.into(),
            flow: Some(flow),
            ..Verdict::default()
        })
    }

    fn kept(&self, frame: u32) -> Option<Verdict> {
        let frame = u64::from(frame);
        // The common case on the first pass: the verdict just kept.
        match self.verdicts.last() {
            Some(last) if last.frame == frame => Some(*last),
            Some(last) if last.frame < frame => None,
            _ => self
                .verdicts
                .binary_search_by_key(&frame, |x| x.frame)
                .ok()
                .map(|i| self.verdicts[i]),
        }
    }

    /// The lint's findings on `frame`, and the host the capture is judged
    /// from (as decided so far: a later pass knows more than the first).
    pub fn lint(&self, frame: u32) -> (&[Finding], Option<IpAddr>) {
        let frame = u64::from(frame);
        let start = self.findings.partition_point(|f| f.frame < frame);
        let end = start + self.findings[start..].partition_point(|f| f.frame == frame);
        (&self.findings[start..end], self.engine.lint_host())
    }

    /// Frames the engine has seen.
    pub fn frames(&self) -> u64 {
        self.engine.snapshot().capture.frames
    }
}

pub(crate) fn time(hf: Hf, ns: u64) -> Item {
    generated(hf, Value::Time(i64::try_from(ns).unwrap_or(i64::MAX)))
}

pub(crate) fn generated(hf: Hf, value: Value) -> Item {
    Item::field(hf, 0..0, value).generated()
}

pub(crate) fn uint(hf: Hf, v: impl Into<u64>) -> Item {
    generated(hf, Value::Uint(v.into()))
}

pub(crate) fn marker(hf: Hf) -> Item {
    generated(hf, Value::Marker)
}

pub(crate) fn note(ei: Ei, text: impl Into<String>) -> Note {
    Note {
        ei,
        text: text.into(),
        range: 0..0,
    }
}

pub(crate) fn fmt_ns(ns: i64) -> String {
    let abs = ns.unsigned_abs();
    let sign = if ns < 0 { "-" } else { "" };
    if abs >= 1_000_000 {
        format!("{sign}{:.3} ms", abs as f64 / 1e6)
    } else if abs >= 1_000 {
        format!("{sign}{:.3} us", abs as f64 / 1e3)
    } else {
        format!("{sign}{abs} ns")
    }
}

/// Adds the analysis of one packet to `d`: its items (after the decoded
/// ones), its expert notes and, when `tags` (the Info line is built), its
/// Info tags (" [Retransmission]").
///
/// As TCP shows `[Stream index]` on every segment but `[SEQ/ACK analysis]`
/// only when there is something to say, the flow is a top-level item and
/// the `[Sequence analysis]` subtree is there only when the verdict has
/// more than the flow.
pub fn add_items(v: &Verdict, d: &mut Dissection, tags: bool) {
    if let Some(flow) = v.flow {
        d.add(uint(Hf::AnFlow, flow));
    }
    let tag = |d: &mut Dissection, t: &str| {
        if tags {
            d.info.push_str(" [");
            d.info.push_str(t);
            d.info.push(']');
        }
    };
    // The subtree's head; taken out again below if nothing goes under it
    // (the common case: cheaper than comparing the verdict first).
    let head = d.items.len();
    let title = d.push_text("Sequence analysis");
    d.open(Item::text(title, 0..0).generated(), Ett::Analysis);
    if let Some(r) = v.retransmission {
        d.open(marker(Hf::AnRetx), Ett::Analysis);
        if let Some(orig) = r.original_frame {
            d.add(uint(Hf::AnRetxOriginal, orig));
        }
        d.add(uint(Hf::AnRetxAttempt, r.attempt));
        let kind = d.push_text(r.kind.as_str());
        d.add(generated(Hf::AnRetxKind, Value::Text(kind)));
        d.close();
        if r.spurious() {
            d.add(marker(Hf::AnSpurious));
            match r.shown_spurious_by {
                Some(dup) => {
                    d.add(uint(Hf::AnShownSpuriousBy, dup));
                    d.notes.push(note(
                        Ei::SpuriousRetransmission,
                        format!(
                            "Spurious retransmission: the DUP feedback in frame {dup} shows the PSN had already arrived"
                        ),
                    ));
                }
                None => d.notes.push(note(
                    Ei::SpuriousRetransmission,
                    "Spurious retransmission: the PSN was already acknowledged",
                )),
            }
            tag(d, "Spurious Retransmission");
        } else {
            let orig = r
                .original_frame
                .map_or(String::new(), |f| format!(" of frame {f}"));
            d.notes.push(note(
                Ei::Retransmission,
                format!("Retransmission ({}){orig}", r.kind.as_str()),
            ));
            tag(d, "Retransmission");
        }
    }
    if let Some(n) = v.out_of_order {
        d.add(uint(Hf::AnOutOfOrder, n));
        d.notes.push(note(
            Ei::OutOfOrder,
            format!("Out of order: {n} PSNs below the highest seen"),
        ));
        tag(d, "Out-Of-Order");
    }
    if let Some(n) = v.path_loss {
        d.add(uint(Hf::AnPathLoss, n));
        d.notes.push(note(
            Ei::PathLoss,
            format!("Path loss: {n} path_seq values missing on this path"),
        ));
        tag(d, "Path Loss");
    }
    if v.ce_marked {
        d.add(marker(Hf::AnCeMarked));
        d.notes
            .push(note(Ei::CeMarked, "IP ECN CE (congestion experienced)"));
    }
    if v.ece {
        d.add(marker(Hf::AnEce));
    }
    if let Some(rtt) = v.ack_rtt_ns {
        d.add(time(Hf::AnAckRtt, rtt));
    }
    if let Some(rtt) = v.fabric_rtt_ns {
        d.add(generated(Hf::AnFabricRtt, Value::Time(rtt)));
    }
    if let Some(f) = v.acked_frame {
        d.add(uint(Hf::AnAckedFrame, f));
    }
    if let Some(f) = v.dup_of_frame {
        d.add(uint(Hf::AnDupOfFrame, f));
    }
    if let Some(n) = v.cum_ack_advance {
        d.add(uint(Hf::AnCumAckAdvance, n));
    }
    if let Some(m) = v.message {
        let view = match m.view {
            analyzer::engine::MsgView::Acked => "acked",
            analyzer::engine::MsgView::Delivered => "delivered",
            analyzer::engine::MsgView::Read => "read",
        };
        d.open(uint(Hf::AnMsgCount, v.messages_completed), Ett::Analysis);
        d.add(uint(Hf::AnMsgId, m.msg_id));
        let op = d.push_text(m.op);
        d.add(generated(Hf::AnMsgOp, Value::Text(op)));
        let view = d.push_text(view);
        d.add(generated(Hf::AnMsgView, Value::Text(view)));
        d.add(time(Hf::AnMsgLatency, m.latency_ns));
        d.close();
    }
    if let Some(s) = v.stall {
        d.open(marker(Hf::AnStall), Ett::Analysis);
        d.add(time(Hf::AnStallElapsed, s.elapsed_ns));
        d.add(generated(Hf::AnStallEnded, Value::Bits(s.ended.into())));
        d.close();
        d.notes.push(note(
            Ei::Stall,
            format!(
                "Stall: no cumulative-ack advance for {}{}",
                fmt_ns(i64::try_from(s.elapsed_ns).unwrap_or(i64::MAX)),
                if s.ended {
                    " (ended by this packet)"
                } else {
                    ""
                }
            ),
        ));
        tag(d, if s.ended { "Stall End" } else { "Stall" });
    }
    d.close();
    if d.items.len() == head + 1 {
        // Nothing besides the flow.
        d.items.truncate(head);
    }
}

/// Adds the lint's findings on one packet to `d`: a `metaroce.lint` item
/// (the rule id) and an expert info of the rule (its statement and the
/// finding's evidence) per finding that holds from `host` (`None`:
/// unknown, only findings any capture point can judge), as `Report::lint`
/// counts them.
pub fn add_lint(findings: &[Finding], host: Option<IpAddr>, d: &mut Dissection) {
    for f in findings {
        let rule = f.rule();
        if !f.judged_from(host) {
            continue;
        }
        let hf = match rule.protocol {
            analyzer::lint::Protocol::MetaRoce => Hf::Lint,
            analyzer::lint::Protocol::RoceV2 => Hf::RcLint,
        };
        let id = d.push_text(rule.id);
        d.add(generated(hf, Value::Text(id)));
        d.lint.push(LintNote {
            rule: f.rule.index(),
            text: format!("[{}] {} Here: {}", rule.id, rule.statement, f.evidence()),
        });
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::decode::Label;
    use proto_parse::metaroce::{Body, DataRepr, Flags, Op, Repr};
    use std::net::Ipv4Addr;

    fn data_packet(psn: u32, tx_attempt: u8) -> Vec<u8> {
        Repr {
            flags: Flags::SOM | Flags::EOM,
            tx_attempt,
            ev: 1,
            path_seq: 1,
            dst_conn: 2,
            src_conn: 1,
            psn,
            tx_ts: 0,
            body: Body::Data(DataRepr {
                op: Op::Send,
                payload_len: 0,
                msg_id: psn,
                msg_offset: 0,
                msg_len: 0,
            }),
            tlvs: Vec::new(),
            payload: &[],
            crc: false,
        }
        .to_vec()
    }

    fn meta(frame: u32) -> FrameMeta {
        FrameMeta {
            frame,
            ts_ns: u64::from(frame) * 1000,
            src: Ipv4Addr::new(10, 0, 0, 1).into(),
            dst: Ipv4Addr::new(10, 0, 0, 2).into(),
            ecn: 2,
            src_port: metaroce::udp_source_port(1),
            dst_port: metaroce::DEFAULT_PORT,
            flow_label: None,
        }
    }

    /// A packet from the wrong UDP source port breaks MR-PKT-002: its
    /// frame gets the rule's item and expert note (with the evidence), the
    /// other frames none, on the first pass and on a later one.
    #[test]
    fn lint_findings_are_kept_per_frame_and_shown_as_notes() {
        let mut a = Analysis::new(Config {
            lint: Some(Default::default()),
            ..Config::default()
        });
        let p = data_packet(10, 0);
        a.ingest(&meta(1), &p, p.len());
        let bad = FrameMeta {
            src_port: 50_000,
            ..meta(2)
        };
        let p2 = data_packet(11, 0);
        let v = a.ingest(&bad, &p2, p2.len()).unwrap();
        let rule = analyzer::lint::RuleId::find("MR-PKT-002").unwrap();
        assert!(v.lint.contains(rule), "{v:?}");
        assert!(a.lint(1).0.is_empty());
        // (Other rules may fire too: both packets reuse path_seq 1.)
        let (found, host) = a.lint(2);
        let found: Vec<_> = found.iter().filter(|f| f.rule == rule).copied().collect();
        assert_eq!(found.len(), 1);
        let mut d = Dissection::default();
        add_lint(&found, host, &mut d);
        assert_eq!(d.lint.len(), 1);
        assert_eq!(d.lint[0].rule, rule.index());
        assert!(
            d.lint[0]
                .text
                .starts_with("[MR-PKT-002] The UDP source port is")
                && d.lint[0].text.contains("UDP source port 50000 (ev 1)"),
            "{}",
            d.lint[0].text
        );
        assert!(matches!(
            d.items[0].label,
            Label::Field(Hf::Lint, Value::Text(_))
        ));
        // A later pass: the same.
        assert_eq!(a.lookup(2), Some(v));
        assert!(a.lint(2).0.iter().any(|f| f.rule == rule));
        assert!(a.lint(3).0.is_empty());
    }

    #[test]
    fn retransmission_is_found_once_and_kept_for_later_passes() {
        let mut a = Analysis::new(Config::default());
        let first = data_packet(10, 0);
        let again = data_packet(10, 1);
        a.ingest(&meta(1), &first, first.len());
        let v = a.ingest(&meta(2), &again, again.len()).unwrap();
        let r = v.retransmission.expect("a retransmission");
        assert_eq!(r.original_frame, Some(1));
        // A second pass over frame 2 does not feed the engine again.
        assert_eq!(a.ingest(&meta(2), &again, again.len()), Some(v));
        assert_eq!(a.lookup(2), Some(v));
        assert_eq!(a.frames(), 2);
        let mut d = Dissection::default();
        add_items(&v, &mut d, true);
        assert!(d.notes.iter().any(|n| n.ei == Ei::Retransmission));
        assert_eq!(d.info, " [Retransmission]");
        // The flow at top level, then the subtree with the retransmission.
        let top: Vec<_> = (0..d.items.len())
            .filter(|&i| d.items[i].depth == 0)
            .collect();
        assert_eq!(top.len(), 2);
        assert_eq!(d.items[top[0]].hf(), Some(Hf::AnFlow));
        assert_eq!(d.item_text(&d.items[top[1]]), Some("Sequence analysis"));
        assert!(matches!(d.items[top[1]].label, Label::Text(_)));
        let retx: Vec<_> = d.children(top[1]).collect();
        assert_eq!(d.items[retx[0]].hf(), Some(Hf::AnRetx));
        let kids: Vec<_> = d.children(retx[0]).map(|i| d.items[i].hf()).collect();
        assert_eq!(
            kids,
            [
                Some(Hf::AnRetxOriginal),
                Some(Hf::AnRetxAttempt),
                Some(Hf::AnRetxKind)
            ]
        );
        // Without tags the Info line is left alone.
        let mut quiet = Dissection::default();
        add_items(&v, &mut quiet, false);
        assert!(quiet.info.is_empty());
        assert_eq!(quiet.items, d.items);
        // A verdict with only a flow: no subtree.
        let plain = Verdict {
            frame: 1,
            flow: Some(0),
            ..Verdict::default()
        };
        let mut d = Dissection::default();
        add_items(&plain, &mut d, true);
        assert_eq!(d.items.len(), 1);
        assert!(d.notes.is_empty() && d.info.is_empty());
    }

    /// The one-pass reading of the common frame gives what the full
    /// decode gives, on the frame and on every bit flip of its outer
    /// headers (and with a VLAN tag, IPv6, an ECN mark: the full decode).
    #[test]
    fn outer_layers_fast_path_agrees_with_the_full_decode() {
        use proto_parse::build::UdpFrameBuilder;
        let reference = |data: &[u8], payload: &[u8]| {
            let cfg = DecodeConfig {
                verify_crc: false,
                ..DecodeConfig::default()
            };
            let f = frame::decode(LinkType::Ethernet, data, &cfg);
            let (ip, udp) = (f.ip?, f.udp?);
            (udp.payload == payload).then_some(Outer {
                src: ip.src,
                dst: ip.dst,
                ecn: ip.ecn.bits(),
                src_port: udp.src_port,
                dst_port: udp.dst_port,
                flow_label: ip.flow_label,
            })
        };
        let packet = data_packet(7, 0);
        let v4 = |port| std::net::SocketAddr::from(([10, 0, 0, port], 4794));
        let v6 = |port| std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port));
        let frames = [
            UdpFrameBuilder::new(v4(1), v4(2)).build(&packet),
            UdpFrameBuilder::new(v4(1), v4(2))
                .with_ecn(3)
                .build(&packet),
            UdpFrameBuilder::new(v4(1), v4(2))
                .with_vlan(5)
                .build(&packet),
            UdpFrameBuilder::new(v6(1), v6(4794)).build(&packet),
        ];
        let mut fast = 0;
        for frame in &frames {
            let at = frame.len() - packet.len();
            for i in 0..at {
                for bit in 0..=8 {
                    let mut f = frame.clone();
                    if bit < 8 {
                        f[i] ^= 1 << bit;
                    }
                    let payload = &f[at..];
                    let got = outer_layers(LinkType::Ethernet, &f, payload);
                    assert_eq!(got, reference(&f, payload), "byte {i} bit {bit}");
                    fast += usize::from(frame::ipv4_udp(LinkType::Ethernet, &f).is_some());
                }
            }
        }
        assert!(fast > 0);
        let marked = &frames[1];
        let o = outer_layers(LinkType::Ethernet, marked, &marked[42..]).unwrap();
        assert_eq!(
            (o.src, o.ecn, o.src_port, o.dst_port),
            (IpAddr::from(Ipv4Addr::new(10, 0, 0, 1)), 3, 4794, 4794)
        );
    }

    fn dup_ack(cum: u32, echo_psn: u32, echo_tx_ts: u32) -> Vec<u8> {
        use proto_parse::metaroce::{AckRepr, FbFlags, FeedbackRepr, SackBitmap};
        Repr {
            flags: Flags::empty(),
            tx_attempt: 0,
            ev: 1,
            path_seq: 0,
            dst_conn: 1,
            src_conn: 2,
            psn: cum,
            tx_ts: 0,
            body: Body::Ack(AckRepr {
                feedback: FeedbackRepr {
                    flags: FbFlags::DUP,
                    echo_psn,
                    echo_tx_ts,
                    credit: u32::MAX,
                    ..FeedbackRepr::default()
                },
                sack_base: cum,
                sack: SackBitmap::default(),
            }),
            tlvs: Vec::new(),
            payload: &[],
            crc: false,
        }
        .to_vec()
    }

    /// A DUP feedback captured after a retransmission shows it spurious
    /// (spec 11.10): the kept verdict of the retransmission gets the link,
    /// so a later pass marks it, as the report counts it.
    #[test]
    fn a_later_dup_marks_the_kept_retransmission_spurious() {
        let mut a = Analysis::new(Config::default());
        let first = data_packet(10, 0);
        let again = data_packet(10, 1);
        a.ingest(&meta(1), &first, first.len());
        let at_capture = a.ingest(&meta(2), &again, again.len()).unwrap();
        assert!(!at_capture.retransmission.unwrap().spurious());
        let mut back = meta(3);
        (back.src, back.dst) = (back.dst, back.src);
        let dup = dup_ack(11, 10, 0);
        let v = a.ingest(&back, &dup, dup.len()).unwrap();
        assert_eq!(v.dup_of_frame, Some(2));
        let later = a.lookup(2).unwrap().retransmission.unwrap();
        assert_eq!(later.shown_spurious_by, Some(3));
        assert!(later.spurious());
        let mut d = Dissection::default();
        add_items(&a.lookup(2).unwrap(), &mut d, true);
        let hfs: Vec<_> = d.items.iter().filter_map(|i| i.hf()).collect();
        assert!(hfs.contains(&Hf::AnSpurious), "{hfs:?}");
        assert!(hfs.contains(&Hf::AnShownSpuriousBy), "{hfs:?}");
        assert_eq!(d.info, " [Spurious Retransmission]");
    }

    #[test]
    fn malformed_packets_only_advance_time() {
        let mut a = Analysis::new(Config::default());
        assert_eq!(a.ingest(&meta(1), &[0x20; 30], 30), None);
        assert_eq!(a.lookup(1), None);
        assert_eq!(a.frames(), 1);
    }
}
