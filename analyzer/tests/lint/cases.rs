//! The harness of the lint's case table: a [`Case`] builds a capture that
//! breaks one rule and names the frame that breaks it; [`run`] decodes the
//! capture's frames as the CLI does (`Observation::decode`) and feeds the
//! engine with the lint on.
//!
//! Captures are built with proto-parse's emit API (`Repr`,
//! `UdpFrameBuilder`), never by writing bytes: most cases take the clean
//! [`conversation`] (a handshake, a two-packet WRITE and its ACKs, a close)
//! and change one packet ([`edited`]), or script the packets between a
//! handshake and a close ([`whole`]: A's WRITE from [`message`], feedback
//! from [`ack`], [`nack`], [`cnp`], changed with [`Pkt::with_fb`],
//! [`Pkt::with_sack`], ...), or read a capture the fixtures generator
//! wrote. To add a case: append `Case { rule, what, build, point }` to your
//! family's `cases()`; `build` returns the frames and the numbers of the
//! frames that must be found (exactly those).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::Path;

use analyzer::engine::{Config, Engine, MergeConfig, MultiEngine, Observation, Report, Verdict};
use analyzer::lint::{CapturePoint, Finding, LintOptions, LintReport, LintTimings};
use proto_parse::build::{ECN_ECT0, UdpFrameBuilder};
use proto_parse::capture::Reader;
use proto_parse::frame::{DecodeConfig, LinkType};
use proto_parse::metaroce::{
    AckRepr, Body, CcAlgo, CnpReason, CnpRepr, CtrlOp, CtrlRepr, DEFAULT_PORT, DataRepr, FbFlags,
    Features, FeedbackRepr, Flags, NackCode, NackRepr, Op, Packet, Repr, SackBitmap,
    udp_source_port,
};

/// One violating case of the table.
#[derive(Clone)]
pub struct Case {
    /// The rule it breaks (`MR-PKT-002`).
    pub rule: &'static str,
    /// How, in a few words.
    pub what: &'static str,
    pub build: fn() -> Capture,
    /// Where the capture is taken (side-specific rules need a host).
    pub point: CapturePoint,
}

/// The first case of `rule` in `cases` (a family's table).
pub fn case_of(cases: Vec<Case>, rule: &str) -> Case {
    cases
        .into_iter()
        .find(|c| c.rule == rule)
        .unwrap_or_else(|| panic!("no case of {rule}"))
}

impl Case {
    /// The first finding of the case's rule on its capture.
    pub fn first_finding(&self) -> Finding {
        let capture = (self.build)();
        run(&capture.frames, self.point)
            .findings
            .into_iter()
            .find(|f| f.rule().id == self.rule)
            .unwrap_or_else(|| panic!("{}: no finding", self.what))
    }
}

/// Frames (Ethernet) and the numbers of the frames that break the rule.
pub struct Capture {
    pub frames: Vec<Frame>,
    pub expect: Vec<u64>,
}

#[derive(Clone)]
pub struct Frame {
    pub ts_ns: u64,
    pub bytes: Vec<u8>,
}

/// What the engine said about a capture.
pub struct Outcome {
    /// Every finding, those made when the capture ended last.
    pub findings: Vec<Finding>,
    /// The findings made when the capture ended (`Engine::finish`): no
    /// packet's verdict holds their rule.
    pub at_end: Vec<Finding>,
    pub verdicts: Vec<Verdict>,
    pub report: LintReport,
    #[allow(dead_code)] // for the families' own checks
    pub full: Report,
}

impl Outcome {
    /// The frames of every finding of `rule`.
    pub fn found(&self, rule: &str) -> Vec<u64> {
        self.frames_where(|f| f.rule().id == rule)
    }

    /// The frames of the findings of `rule` that hold at the capture point
    /// given or decided ([`LintReport::keeps`]).
    pub fn kept(&self, rule: &str) -> Vec<u64> {
        self.frames_where(|f| f.rule().id == rule && self.report.keeps(f))
    }

    fn frames_where(&self, keep: impl Fn(&Finding) -> bool) -> Vec<u64> {
        self.findings
            .iter()
            .filter(|f| keep(f))
            .map(|f| f.frame)
            .collect()
    }
}

/// Lints `frames` (numbered from 1) as `metaroce-analyze lint` does.
pub fn run(frames: &[Frame], point: CapturePoint) -> Outcome {
    run_with(frames, point, LintTimings::default())
}

/// [`run`] with the rules' timing bounds `timings` (the CLI's
/// `--ack-delay`, `--nack-min`, ...).
pub fn run_with(frames: &[Frame], point: CapturePoint, timings: LintTimings) -> Outcome {
    let mut engine = Engine::new(Config {
        lint: Some(LintOptions {
            point,
            timings,
            ..LintOptions::default()
        }),
        ..Config::default()
    });
    let decode = DecodeConfig::default();
    let mut findings = Vec::new();
    let mut verdicts = Vec::new();
    let mut last = 0;
    for (i, f) in frames.iter().enumerate() {
        let n = i as u64 + 1;
        last = f.ts_ns;
        match Observation::decode(n, f.ts_ns, LinkType::Ethernet, &f.bytes, &decode) {
            Some(obs) => verdicts.push(engine.ingest(&obs)),
            None => engine.ingest_other(f.ts_ns),
        }
        findings.extend_from_slice(engine.findings());
        engine.clear_findings();
    }
    engine.finish(last);
    let at_end = engine.findings().to_vec();
    findings.extend_from_slice(&at_end);
    let full = engine.snapshot();
    Outcome {
        findings,
        at_end,
        verdicts,
        report: full.lint.clone().expect("the lint ran"),
        full,
    }
}

/// A violating case of a rule of vantage two-capture: the same traffic
/// captured at two points, each capture with the frames that must be
/// found in it.
#[derive(Clone)]
pub struct TwoCaptureCase {
    pub rule: &'static str,
    pub what: &'static str,
    pub build: fn() -> [Capture; 2],
}

/// What the engines said about captures linted together.
pub struct TwoOutcome {
    /// Per capture, every finding (those made when the captures ended
    /// last).
    pub findings: [Vec<Finding>; 2],
    pub reports: [LintReport; 2],
}

/// Lints two captures together as `metaroce-analyze lint A B` does: the
/// frames merged by capture time (ties: the first capture's first) into
/// a `MultiEngine`, each capture's findings taken after every packet.
pub fn run_two(captures: [&[Frame]; 2]) -> TwoOutcome {
    let mut multi = MultiEngine::new(
        2,
        Config {
            lint: Some(Default::default()),
            ..Config::default()
        },
        MergeConfig::default(),
    );
    let decode = DecodeConfig::default();
    let mut findings: [Vec<Finding>; 2] = Default::default();
    let mut next = [0usize; 2];
    let take = |multi: &mut MultiEngine, findings: &mut [Vec<Finding>; 2]| {
        for (c, out) in findings.iter_mut().enumerate() {
            let engine = multi.engine_mut(c).expect("two engines");
            out.extend_from_slice(engine.findings());
            engine.clear_findings();
        }
    };
    loop {
        let head = |c: usize| captures[c].get(next[c]).map(|f| f.ts_ns);
        let c = match (head(0), head(1)) {
            (Some(a), Some(b)) => usize::from(b < a),
            (Some(_), None) => 0,
            (None, Some(_)) => 1,
            (None, None) => break,
        };
        let f = &captures[c][next[c]];
        next[c] += 1;
        let n = next[c] as u64;
        match Observation::decode(n, f.ts_ns, LinkType::Ethernet, &f.bytes, &decode) {
            Some(obs) => {
                multi.ingest(c, &obs);
            }
            None => multi.ingest_other(c, f.ts_ns),
        }
        take(&mut multi, &mut findings);
    }
    let ends = captures.map(|frames| frames.last().map_or(0, |f| f.ts_ns));
    multi.finish(&ends);
    take(&mut multi, &mut findings);
    let reports = multi
        .snapshots()
        .into_iter()
        .map(|r| r.lint.expect("the lint ran"))
        .collect::<Vec<_>>()
        .try_into()
        .expect("two reports");
    TwoOutcome { findings, reports }
}

/// A capture of `fixtures/generated`.
pub fn read_fixture(name: &str) -> Vec<Frame> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/generated")
        .join(name);
    let mut reader = Reader::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut frames = Vec::new();
    while let Some(record) = reader.next_record() {
        let record = record.expect("a readable record");
        assert_eq!(u32::from(record.linktype), 1, "Ethernet");
        frames.push(Frame {
            ts_ns: record.ts_ns,
            bytes: record.data.to_vec(),
        });
    }
    frames
}

/// The capture time of the first frame of [`render`].
const RENDER_START_NS: u64 = 1_764_000_000_000_000_000;

pub const A: [u8; 4] = [10, 9, 0, 1];
pub const B: [u8; 4] = [10, 9, 0, 2];
pub const A_CONN: u32 = 0x100;
pub const B_CONN: u32 = 0x200;
pub const A_INIT_PSN: u32 = 1000;
pub const B_INIT_PSN: u32 = 7000;
pub const MTU: u16 = 1024;
pub const PAYLOAD: usize = 512;
static BYTES: [u8; PAYLOAD] = [0x5A; PAYLOAD];

/// A and B over IPv6 ([`render_ipv6`]).
pub const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 9, 0, 0, 0, 0, 0, 1);
pub const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 9, 0, 0, 0, 0, 0, 2);

pub fn ip(a: [u8; 4]) -> IpAddr {
    IpAddr::from(a)
}

/// One packet of a scripted conversation.
#[derive(Clone)]
pub struct Pkt {
    pub from_a: bool,
    pub repr: Repr<'static>,
    /// UDP source port; `None`: `udp_source_port(ev)`.
    pub src_port: Option<u16>,
    pub ecn: u8,
    /// The IPv6 flow label ([`render_ipv6`]); `None`: the ev.
    pub flow_label: Option<u32>,
    /// Numbered by `render` (path_seq + 1 per packet on its ev; CTRL 0).
    pub auto_path_seq: bool,
    /// Changes the emitted packet through proto-parse's setters (what
    /// `Repr`, always canonical, cannot say: reserved bits, a stale CRC).
    pub after_emit: Option<fn(&mut Packet<&mut [u8]>)>,
}

impl Pkt {
    pub fn new(from_a: bool, repr: Repr<'static>) -> Pkt {
        Pkt {
            from_a,
            repr,
            src_port: None,
            ecn: ECN_ECT0,
            flow_label: None,
            auto_path_seq: true,
            after_emit: None,
        }
    }
}

/// A base header with `body`, CRC on.
pub fn header(from_a: bool, ev: u16, psn: u32, body: Body) -> Repr<'static> {
    let (src_conn, dst_conn) = if from_a {
        (A_CONN, B_CONN)
    } else {
        (B_CONN, A_CONN)
    };
    Repr {
        flags: Flags::empty(),
        tx_attempt: 0,
        ev,
        path_seq: 0,
        dst_conn,
        src_conn,
        psn,
        tx_ts: 0,
        body,
        tlvs: Vec::new(),
        payload: &[],
        crc: true,
    }
}

pub fn ctrl(from_a: bool, op: CtrlOp) -> Pkt {
    let init_psn = match op {
        CtrlOp::Connect | CtrlOp::Accept if from_a => A_INIT_PSN,
        CtrlOp::Connect | CtrlOp::Accept => B_INIT_PSN,
        _ => 0,
    };
    let mut repr = header(
        from_a,
        0,
        0,
        Body::Ctrl(CtrlRepr {
            op,
            cc_algo: CcAlgo::DelayBased,
            mtu: MTU,
            init_psn,
            features: Features::CRC | Features::PATH_SEQ,
            ts_unit_ps: 1000,
        }),
    );
    if op == CtrlOp::Connect {
        repr.dst_conn = 0;
    }
    Pkt::new(from_a, repr)
}

/// Packet `index` of a WRITE of `packets` x [`PAYLOAD`] bytes.
pub fn write(from_a: bool, ev: u16, psn: u32, msg_id: u32, index: u32, packets: u32) -> Pkt {
    let mut flags = Flags::empty();
    flags.set(Flags::SOM, index == 0);
    flags.set(Flags::EOM, index + 1 == packets);
    let repr = Repr {
        flags,
        payload: &BYTES,
        ..header(
            from_a,
            ev,
            psn,
            Body::Data(DataRepr {
                op: Op::Write {
                    remote_va: 0x10_0000,
                    rkey: 0x42,
                },
                payload_len: PAYLOAD as u16,
                msg_id,
                msg_offset: index * PAYLOAD as u32,
                msg_len: packets * PAYLOAD as u32,
            }),
        )
    };
    Pkt::new(from_a, repr)
}

/// An ACK of `echo` (a DATA packet of the other side) with cumulative ack
/// `cum`, on the ev `echo` came on. `tx_ts` is filled by [`render`].
pub fn ack(echo: &Pkt, cum: u32) -> Pkt {
    let body = Body::Ack(AckRepr {
        feedback: FeedbackRepr {
            flags: FbFlags::empty(),
            echo_ev: echo.repr.ev,
            echo_psn: echo.repr.psn,
            echo_tx_ts: 0,
            rx_ts: 0,
            ce_count: 0,
            rx_buf_level: 0,
            fwd_hops: 0,
            credit: u32::MAX,
        },
        sack_base: cum,
        sack: SackBitmap::default(),
    });
    Pkt::new(!echo.from_a, header(!echo.from_a, echo.repr.ev, cum, body))
}

/// A clean conversation: A connects to B, WRITEs two packets on ev 0 and
/// 1, B acks each, A closes. Frames: 1 CONNECT, 2 ACCEPT, 3 DATA 1000,
/// 4 ACK, 5 DATA 1001, 6 ACK, 7 CLOSE, 8 CLOSE_ACK.
pub fn conversation() -> Vec<Pkt> {
    let d0 = write(true, 0, A_INIT_PSN, 1, 0, 2);
    let d1 = write(true, 1, A_INIT_PSN + 1, 1, 1, 2);
    vec![
        ctrl(true, CtrlOp::Connect),
        ctrl(false, CtrlOp::Accept),
        d0.clone(),
        ack(&d0, A_INIT_PSN + 1),
        d1.clone(),
        ack(&d1, A_INIT_PSN + 2),
        ctrl(true, CtrlOp::Close),
        ctrl(false, CtrlOp::CloseAck),
    ]
}

/// The packets of one WRITE of `N` packets from A: packet `i` carries PSN
/// `A_INIT_PSN + i` on ev `i`.
pub fn message<const N: usize>() -> [Pkt; N] {
    std::array::from_fn(|i| {
        let i = i as u32;
        write(true, i as u16, A_INIT_PSN + i, 1, i, N as u32)
    })
}

/// A capture of a whole connection with `middle` between the handshake
/// and the close ([`with_handshake`]: `middle[0]` is frame 3), `expect`
/// the frames that break the rule.
pub fn whole(middle: Vec<Pkt>, expect: &[u64]) -> Capture {
    Capture {
        frames: render(&with_handshake(middle)),
        expect: expect.to_vec(),
    }
}

/// CONNECT and ACCEPT, `middle`, CLOSE and CLOSE_ACK: `middle[0]` is
/// frame 3.
pub fn with_handshake(middle: Vec<Pkt>) -> Vec<Pkt> {
    let mut pkts = vec![ctrl(true, CtrlOp::Connect), ctrl(false, CtrlOp::Accept)];
    pkts.extend(middle);
    pkts.push(ctrl(true, CtrlOp::Close));
    pkts.push(ctrl(false, CtrlOp::CloseAck));
    pkts
}

impl Capture {
    /// Frame `n` (1-based) and those after it captured `ns` later.
    pub fn delayed_from(mut self, n: u64, ns: u64) -> Capture {
        delay(&mut self.frames, n, ns);
        self
    }
}

/// Frames rendered from `pkts`, frame `n` (1-based) and those after it
/// captured `ns` later.
pub fn delayed(pkts: &[Pkt], n: u64, ns: u64) -> Vec<Frame> {
    let mut frames = render(pkts);
    delay(&mut frames, n, ns);
    frames
}

fn delay(frames: &mut [Frame], n: u64, ns: u64) {
    for f in frames.iter_mut().skip(n as usize - 1) {
        f.ts_ns += ns;
    }
}

/// The render's clock: frame `i` (0-based) is captured, and was sent, at
/// this time ([`render`]).
pub fn render_ts(i: usize) -> u64 {
    RENDER_START_NS + i as u64 * 10_000
}

/// The feedback block of `p` (an ACK, NACK or CNP).
pub fn fb_mut(p: &mut Pkt) -> &mut FeedbackRepr {
    match &mut p.repr.body {
        Body::Ack(a) => &mut a.feedback,
        Body::Nack(n) => &mut n.feedback,
        Body::Cnp(c) => &mut c.feedback,
        _ => panic!("not a feedback"),
    }
}

impl Pkt {
    /// This feedback with its feedback block changed by `edit`.
    pub fn with_fb(mut self, edit: impl FnOnce(&mut FeedbackRepr)) -> Pkt {
        edit(fb_mut(&mut self));
        self
    }

    /// This ACK with a SACK bitmap from `base` holding `psns`.
    pub fn with_sack(mut self, base: u32, psns: &[u32]) -> Pkt {
        if let Body::Ack(a) = &mut self.repr.body {
            a.sack_base = base;
            a.sack = SackBitmap::from_psns(base, psns.iter().copied());
        }
        self
    }

    /// This packet on `ev` with path_seq `seq`, not numbered by the
    /// render.
    pub fn with_path_seq(mut self, ev: u16, seq: u16) -> Pkt {
        self.repr.ev = ev;
        self.repr.path_seq = seq;
        self.auto_path_seq = false;
        self
    }
}

/// A NACK `code` for `nack_psn` with cumulative ack `cum`, echoing `echo`.
pub fn nack(echo: &Pkt, cum: u32, code: NackCode, nack_psn: u32) -> Pkt {
    let mut p = ack(echo, cum);
    let feedback = *fb_mut(&mut p);
    p.repr.body = Body::Nack(NackRepr {
        feedback,
        code,
        rnr_timer: 0,
        nack_psn,
    });
    p
}

/// A CNP (ECN) with cumulative ack `cum` echoing `echo`, which the render
/// makes frame `echo_index` + 1 (the CNP's echo_tx_ts is set here: the
/// render fills it for ACKs and NACKs only).
pub fn cnp(echo: &Pkt, echo_index: usize, cum: u32) -> Pkt {
    let mut p = ack(echo, cum);
    let mut feedback = *fb_mut(&mut p);
    feedback.flags = FbFlags::ECE;
    feedback.echo_tx_ts = render_ts(echo_index) as u32;
    p.repr.body = Body::Cnp(CnpRepr {
        feedback,
        reason: CnpReason::Ecn,
    });
    p
}

/// A retransmission of `p` (tx_attempt `attempt`) on `ev`.
pub fn again(p: &Pkt, ev: u16, attempt: u8) -> Pkt {
    let mut r = p.clone();
    r.repr.ev = ev;
    r.repr.tx_attempt = attempt;
    r
}

/// Frame numbers of [`conversation`].
pub const CONNECT: u64 = 1;
pub const ACCEPT: u64 = 2;
pub const DATA_0: u64 = 3;
pub const ACK_0: u64 = 4;
pub const DATA_1: u64 = 5;
pub const CLOSE: u64 = 7;
pub const CLOSE_ACK: u64 = 8;

/// The packet of frame `frame` (1-based).
pub fn at(pkts: &mut [Pkt], frame: u64) -> &mut Pkt {
    &mut pkts[frame as usize - 1]
}

/// The frames of a conversation, both ends' packets as one capture, 10 us
/// apart. Each packet's tx_ts is its capture time; an ACK (or NACK) whose
/// echo_tx_ts the case left 0 echoes the tx_ts of the latest packet of
/// the other side with its echo_psn, and its rx_ts is the capture time of
/// its own (the hold time is 0).
pub fn render(pkts: &[Pkt]) -> Vec<Frame> {
    render_between(pkts, (ip(A), ip(B)))
}

/// [`render`] as captured on one end (`on_a`: on A): the other end's
/// packets are captured a one-way delay after their tx_ts that varies
/// from packet to packet (1 to 4 us), so that the capture point guess
/// (`CapturePoint::Auto`) decides that end.
pub fn render_on(pkts: &[Pkt], on_a: bool) -> Vec<Frame> {
    let mut frames = render(pkts);
    for (i, (f, p)) in frames.iter_mut().zip(pkts).enumerate() {
        if p.from_a != on_a {
            f.ts_ns += 1_000 * (1 + i as u64 % 4);
        }
    }
    frames
}

/// [`render`] over IPv6, from [`A6`] and [`B6`], each packet with its flow
/// label (`Pkt::flow_label`, by default its ev).
pub fn render_ipv6(pkts: &[Pkt]) -> Vec<Frame> {
    render_between(pkts, (IpAddr::V6(A6), IpAddr::V6(B6)))
}

/// [`render`] with A and B at `hosts`.
fn render_between(pkts: &[Pkt], hosts: (IpAddr, IpAddr)) -> Vec<Frame> {
    let mut path_seq: std::collections::HashMap<(bool, u16), u16> = Default::default();
    let mut sent: Vec<(bool, u32, u32)> = Vec::new();
    let mut frames = Vec::new();
    for (i, p) in pkts.iter().enumerate() {
        let ts = render_ts(i);
        let mut repr = p.repr.clone();
        repr.tx_ts = ts as u32;
        if p.auto_path_seq && !matches!(repr.body, Body::Ctrl(_)) {
            let seq = path_seq.entry((p.from_a, repr.ev)).or_insert(0);
            *seq += 1;
            repr.path_seq = *seq;
        }
        let echo = |fb: &mut FeedbackRepr| {
            if fb.echo_tx_ts != 0 {
                // Set by the case: kept.
                return;
            }
            if let Some(&(_, _, tx_ts)) = sent
                .iter()
                .rev()
                .find(|(from_a, psn, _)| *from_a != p.from_a && *psn == fb.echo_psn)
            {
                fb.echo_tx_ts = tx_ts;
                fb.rx_ts = ts as u32;
            }
        };
        match &mut repr.body {
            Body::Ack(a) => echo(&mut a.feedback),
            Body::Nack(n) => echo(&mut n.feedback),
            Body::Data(_) => sent.push((p.from_a, repr.psn, repr.tx_ts)),
            _ => {}
        }
        let (src, dst) = if p.from_a { hosts } else { (hosts.1, hosts.0) };
        let port = p.src_port.unwrap_or(udp_source_port(repr.ev));
        let mut payload = repr.to_vec();
        if let Some(edit) = p.after_emit {
            edit(&mut Packet::new_unchecked(&mut payload[..]));
        }
        let bytes = UdpFrameBuilder::new(
            SocketAddr::from((src, port)),
            SocketAddr::from((dst, DEFAULT_PORT)),
        )
        .with_ecn(p.ecn)
        .with_flow_label(p.flow_label.unwrap_or(u32::from(repr.ev)))
        .build(&payload);
        frames.push(Frame { ts_ns: ts, bytes });
    }
    frames
}

/// A case's capture: the conversation changed by `edit`, `expect` the
/// frame that breaks the rule.
pub fn edited(expect: u64, edit: impl FnOnce(&mut Vec<Pkt>)) -> Capture {
    edited_many(&[expect], edit)
}

/// [`edited`] with several frames breaking the rule.
pub fn edited_many(expect: &[u64], edit: impl FnOnce(&mut Vec<Pkt>)) -> Capture {
    let mut pkts = conversation();
    edit(&mut pkts);
    Capture {
        frames: render(&pkts),
        expect: expect.to_vec(),
    }
}
