//! Connection rules: the CTRL handshake (CONNECT, ACCEPT), the connection
//! ids it sets, the first PSN it announces, and close (spec section 5).
//! A CLOSE never answered (MR-CONN-010) is judged when the capture ends
//! ([`State::finish`]).
//!
//! The state is per endpoint, `(address, own connection id)`, since a
//! connection's CTRL packets travel on directions of their own (a CONNECT
//! has dst_conn 0). What an endpoint announced is also what the packet
//! rules judge against ([`Announced`]): each direction keeps a copy of its
//! two endpoints, refreshed when any CTRL packet changed the table, so a
//! packet costs no lookup.

use std::net::IpAddr;

use proto_parse::metaroce::{CtrlOp, Features, psn_lt};
use rustc_hash::FxHashMap;

use super::rule::{Protocol, Rule, RuleId, Severity, Vantage};
use super::{Conn, Ctx, DirLint, Evidence, Finding, Recorder};
use crate::engine::direction::Direction;
use crate::observation::{CtrlObs, MrBody, MrObs};

const fn rule(
    id: &'static str,
    vantage: Vantage,
    spec_section: &'static str,
    statement: &'static str,
    evidence: &'static str,
) -> Rule {
    Rule::new(Protocol::MetaRoce, id, spec_section, statement, evidence).judged_from(vantage)
}

pub(super) const RULES: &[Rule] = &[
    rule(
        "MR-CONN-001",
        Vantage::Either,
        "5",
        "A CONNECT is sent with dst_conn 0.",
        "CONNECT with dst_conn {observed} (must be 0).",
    )
    .because("the CTRL packet alone"),
    rule(
        "MR-CONN-002",
        Vantage::Either,
        "2, 5",
        "Every packet but a CONNECT carries the peer's connection id as dst_conn, never 0.",
        "dst_conn 0 on a packet that is not a CONNECT.",
    )
    .because("the packet's ids, the same at every capture point"),
    rule(
        "MR-CONN-003",
        Vantage::Either,
        "5",
        "An ACCEPT answers a CONNECT: its dst_conn is the src_conn of a CONNECT its \
         destination sent.",
        "ACCEPT to connection id {observed}, which no CONNECT captured from that host \
         carries.",
    )
    .because(
        "CTRL packets, the same at every capture point; an ACCEPT passes any point after the \
         CONNECT it answers",
    ),
    rule(
        "MR-CONN-004",
        Vantage::Either,
        "5",
        "After the handshake each end sends with dst_conn set to the id the other end chose \
         (the ACCEPT's src_conn for the initiator, the CONNECT's for the responder).",
        "dst_conn {observed} where the handshake (frame {related}) set {expected}.",
    )
    .because("the packet's ids against the CTRL packets, the same at every capture point"),
    rule(
        "MR-CONN-005",
        Vantage::Either,
        "5",
        "An initiator sends no DATA before the ACCEPT of its CONNECT.",
        "DATA before any ACCEPT of the CONNECT in frame {related}.",
    )
    .because("causality: the ACCEPT passes any point on the way before the DATA it allows"),
    rule(
        "MR-CONN-006",
        Vantage::Either,
        "5",
        "An endpoint that sent CLOSE or ABORT sends no new DATA on the connection.",
        "DATA (tx_attempt 0) after the sender's CLOSE or ABORT in frame {related}.",
    )
    .because("an endpoint's CLOSE passes any point on the way before the new DATA it forbids"),
    rule(
        "MR-CONN-007",
        Vantage::Either,
        "5",
        "A CLOSE_ACK answers a CLOSE the peer sent.",
        "CLOSE_ACK with no CLOSE captured from the peer since the handshake (frame {related}).",
    )
    .because("CTRL packets: a CLOSE passes any point on the way before the CLOSE_ACK it causes"),
    rule(
        "MR-CONN-008",
        Vantage::Either,
        "5",
        "No DATA PSN of a direction is below the init_psn its sender announced.",
        "PSN {observed} below the sender's init_psn {expected} (CTRL in frame {related}).",
    )
    .because("the DATA's PSN against the CTRL packet, the same at every capture point"),
    rule(
        "MR-CONN-009",
        Vantage::Sender,
        "5",
        "A direction's first DATA carries the init_psn its sender announced.",
        "first DATA with PSN {observed} where the sender's CTRL (frame {related}) announced \
         init_psn {expected}.",
    )
    .because(
        "the first DATA captured where it left is the first sent; elsewhere a later PSN on a \
         faster path may come first",
    ),
    rule(
        "MR-CONN-010",
        Vantage::Either,
        "5",
        "A CLOSE is answered: the peer's CLOSE_ACK (or ABORT) is captured before the capture \
         has gone on for the close wait after it (--close-wait, default 10 ms).",
        "no CLOSE_ACK from the peer in the {observed} us the capture went on after this CLOSE \
         (close wait {expected} us).",
    )
    .with_severity(Severity::Warning)
    .because(
        "the answer passes any point on the way back; one lost before the capture point is \
         reported too (a warning)",
    ),
];

const CONNECT_DST_ZERO: RuleId = RuleId::of("MR-CONN-001");
const DST_CONN_SET: RuleId = RuleId::of("MR-CONN-002");
const ACCEPT_ANSWERS: RuleId = RuleId::of("MR-CONN-003");
const IDS_AFTER_HANDSHAKE: RuleId = RuleId::of("MR-CONN-004");
const NO_DATA_BEFORE_ACCEPT: RuleId = RuleId::of("MR-CONN-005");
const NO_DATA_AFTER_CLOSE: RuleId = RuleId::of("MR-CONN-006");
const CLOSE_ACK_ANSWERS: RuleId = RuleId::of("MR-CONN-007");
const PSN_FROM_INIT: RuleId = RuleId::of("MR-CONN-008");
const FIRST_PSN_INIT: RuleId = RuleId::of("MR-CONN-009");
const CLOSE_ANSWERED: RuleId = RuleId::of("MR-CONN-010");

/// Most endpoints remembered; beyond, the table starts again (as the
/// engine's per-sender maps do).
const MAX_ENDPOINTS: usize = 1 << 16;

/// What one endpoint announced in its CONNECT or ACCEPT, and how far its
/// connection went.
#[derive(Debug, Clone, Copy)]
struct Endpoint {
    /// Its latest CONNECT or ACCEPT.
    frame: u64,
    features: u32,
    mtu: u16,
    init_psn: u32,
    initiator: bool,
    /// The other end `(address, connection id)`, once the handshake is
    /// captured.
    peer: Option<(IpAddr, u32)>,
    /// The frame of its CLOSE or ABORT.
    closed: Option<u64>,
}

/// What the CTRL packets of a packet's connection announced, for the
/// packet rules.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Announced {
    /// Both ends announced their features: whether both asked for CRC.
    pub crc: Option<bool>,
    /// The sender's announced mtu.
    pub mtu: Option<u16>,
    /// The sender announced the path_seq feature.
    pub path_seq: bool,
    /// The sender's CTRL that announced it.
    pub frame: Option<u64>,
}

/// The endpoint table.
#[derive(Debug, Default)]
pub(super) struct State {
    endpoints: FxHashMap<(IpAddr, u32), Endpoint>,
    /// (initiator, responder) addresses with a CONNECT captured.
    connects: FxHashMap<(IpAddr, IpAddr), ()>,
    /// Changes of the table (directions refresh their copies).
    epoch: u64,
    /// CLOSEs the peer has not answered, by the endpoint that sent them.
    closes: FxHashMap<(IpAddr, u32), PendingClose>,
}

/// A CLOSE awaiting its CLOSE_ACK (MR-CONN-010): its first
/// transmission.
#[derive(Debug, Clone, Copy)]
struct PendingClose {
    frame: u64,
    ts_ns: u64,
    conn: Conn,
}

/// A direction's copy of its two endpoints.
#[derive(Debug, Default)]
pub(super) struct DirState {
    /// `State::epoch` of the copy; 0: never made.
    epoch: u64,
    own: Option<Endpoint>,
    peer: Option<Endpoint>,
    /// A DATA of this direction was seen (MR-CONN-009 judges the first).
    data_seen: bool,
    /// What the direction's packets are judged against when they break no
    /// connection rule, worked out by the full check at the copy's epoch
    /// ([`State::steady`]); `None`: its packets take the full check.
    steady: Option<Steady>,
}

/// The connection rules of a direction whose packets all pass them but
/// for a per-packet compare: its ids are right (MR-CONN-002, 004: the ids
/// are part of the direction), and for DATA its handshake is done, its
/// sender sent no CLOSE and its first DATA was seen (MR-CONN-005, 006,
/// 009), so only MR-CONN-008's PSN is left to compare.
#[derive(Debug, Clone, Copy)]
enum Steady {
    /// No CTRL of the sender captured: nothing announced, nothing else to
    /// judge.
    Unannounced,
    Announced {
        announced: Announced,
        /// The sender's init_psn (MR-CONN-008).
        init_psn: u32,
        /// A DATA needs nothing but the PSN compare; otherwise it takes
        /// the full check.
        data: bool,
    },
}

/// What the connection rules say of a packet without their full check
/// ([`State::steady`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Passes<'a> {
    /// No saying: the full check ([`State::on_packet`]).
    FullCheck,
    /// No rule broken, nothing announced to judge the packet against.
    Unannounced,
    /// No rule broken; the packet rules judge it against this.
    Announced(&'a Announced),
}

impl State {
    /// Checks one MetaRoCE packet and returns what its connection's CTRL
    /// packets announced. A packet of a direction no CTRL named, itself
    /// no CTRL and with its dst_conn set, has nothing to check: that is
    /// decided inline, the rest is out of line.
    #[inline(always)]
    pub(super) fn on_packet(
        &mut self,
        ctx: &mut Ctx<'_>,
        mr: &MrObs,
        dir: &mut DirState,
    ) -> Announced {
        match self.steady(mr, dir) {
            Passes::Unannounced => Announced::default(),
            Passes::Announced(announced) => *announced,
            Passes::FullCheck => self.on_packet_slow(ctx, mr, dir),
        }
    }

    /// Whether a packet breaks no connection rule and changes nothing
    /// here, told without the full check: a packet other than CTRL of a
    /// direction whose copy is current and [`Steady`], a DATA at or above
    /// its sender's init_psn. [`State::on_packet`]'s short path, also read
    /// by the lint's fast path (`LintState::metaroce`).
    #[inline(always)]
    pub(super) fn steady<'a>(&self, mr: &MrObs, dir: &'a DirState) -> Passes<'a> {
        match &dir.steady {
            _ if dir.epoch != self.epoch || matches!(mr.body, MrBody::Ctrl(_)) => Passes::FullCheck,
            None => Passes::FullCheck,
            Some(Steady::Unannounced) => Passes::Unannounced,
            Some(Steady::Announced {
                announced,
                init_psn,
                data,
            }) => match &mr.body {
                MrBody::Data(_) if !data || psn_lt(mr.psn, *init_psn) => Passes::FullCheck,
                _ => Passes::Announced(announced),
            },
        }
    }

    #[inline(never)]
    fn on_packet_slow(&mut self, ctx: &mut Ctx<'_>, mr: &MrObs, dir: &mut DirState) -> Announced {
        if let MrBody::Ctrl(c) = &mr.body {
            self.on_ctrl(ctx, mr, c);
        } else if mr.dst_conn == 0 {
            ctx.report(DST_CONN_SET, Evidence::default().ev(mr.ev));
        }
        let obs = ctx.obs;
        if dir.epoch != self.epoch {
            dir.epoch = self.epoch;
            dir.own = self.endpoints.get(&(obs.src, mr.src_conn)).copied();
            dir.peer = dir
                .own
                .and_then(|own| own.peer)
                .and_then(|p| self.endpoints.get(&p).copied());
        }
        let Some(own) = dir.own else {
            // No CTRL of the sender captured: only the ids to check.
            dir.steady = (mr.dst_conn != 0).then_some(Steady::Unannounced);
            return Announced::default();
        };
        let wrong_peer = own.peer.is_some_and(|(peer_ip, peer_conn)| {
            peer_ip == obs.dst && mr.dst_conn != peer_conn && mr.dst_conn != 0
        });
        if wrong_peer && let Some((_, peer_conn)) = own.peer {
            ctx.report(
                IDS_AFTER_HANDSHAKE,
                Evidence::new(mr.dst_conn, peer_conn).related(Some(own.frame)),
            );
        }
        if let MrBody::Data(_) = &mr.body {
            if own.initiator && own.peer.is_none() {
                ctx.report(
                    NO_DATA_BEFORE_ACCEPT,
                    Evidence::default().related(Some(own.frame)),
                );
            }
            if let Some(close) = own.closed
                && mr.tx_attempt == 0
            {
                ctx.report(
                    NO_DATA_AFTER_CLOSE,
                    Evidence::default().related(Some(close)),
                );
            }
            if psn_lt(mr.psn, own.init_psn) {
                ctx.report(
                    PSN_FROM_INIT,
                    Evidence::new(mr.psn, own.init_psn).related(Some(own.frame)),
                );
            }
            if !dir.data_seen {
                dir.data_seen = true;
                if ctx.judges(Vantage::Sender) && mr.psn != own.init_psn {
                    ctx.report(
                        FIRST_PSN_INIT,
                        Evidence::new(mr.psn, own.init_psn).related(Some(own.frame)),
                    );
                }
            }
        }
        let announced = Announced {
            crc: dir.peer.map(|peer| {
                Features::from_bits_retain(own.features & peer.features).contains(Features::CRC)
            }),
            mtu: Some(own.mtu),
            path_seq: Features::from_bits_retain(own.features).contains(Features::PATH_SEQ),
            frame: Some(own.frame),
        };
        dir.steady = (mr.dst_conn != 0 && !wrong_peer).then_some(Steady::Announced {
            announced,
            init_psn: own.init_psn,
            data: (!own.initiator || own.peer.is_some()) && own.closed.is_none() && dir.data_seen,
        });
        announced
    }

    fn on_ctrl(&mut self, ctx: &mut Ctx<'_>, mr: &MrObs, c: &CtrlObs) {
        let obs = ctx.obs;
        let me = (obs.src, mr.src_conn);
        if c.op != CtrlOp::Connect && mr.dst_conn == 0 {
            ctx.report(DST_CONN_SET, Evidence::default().ev(mr.ev));
        }
        if self.endpoints.len() >= MAX_ENDPOINTS {
            self.endpoints.clear();
            self.connects.clear();
        }
        let announced = Endpoint {
            frame: obs.frame,
            features: c.features,
            mtu: c.mtu,
            init_psn: c.init_psn,
            initiator: c.op == CtrlOp::Connect,
            peer: None,
            closed: None,
        };
        match c.op {
            CtrlOp::Connect => {
                if mr.dst_conn != 0 {
                    ctx.report(CONNECT_DST_ZERO, Evidence::new(mr.dst_conn, 0u32));
                }
                // A CONNECT sent again keeps the handshake already seen.
                let peer = self.endpoints.get(&me).and_then(|e| e.peer);
                self.endpoints.insert(me, Endpoint { peer, ..announced });
                self.connects.insert((obs.src, obs.dst), ());
            }
            CtrlOp::Accept => {
                let initiator = (obs.dst, mr.dst_conn);
                match self.endpoints.get_mut(&initiator) {
                    Some(i) if i.initiator => i.peer = Some(me),
                    _ => {
                        if self.connects.contains_key(&(obs.dst, obs.src)) {
                            ctx.report(ACCEPT_ANSWERS, Evidence::new(mr.dst_conn, 0u32));
                        }
                    }
                }
                self.endpoints.insert(
                    me,
                    Endpoint {
                        peer: Some(initiator),
                        ..announced
                    },
                );
            }
            CtrlOp::Close | CtrlOp::Abort => {
                if let Some(e) = self.endpoints.get_mut(&me) {
                    e.closed.get_or_insert(obs.frame);
                }
                if c.op == CtrlOp::Close {
                    if self.closes.len() >= MAX_ENDPOINTS {
                        self.closes.clear();
                    }
                    self.closes.entry(me).or_insert(PendingClose {
                        frame: obs.frame,
                        ts_ns: obs.ts_ns,
                        conn: ctx.conn(),
                    });
                } else {
                    // The peer's ABORT ends the connection too.
                    self.closes.remove(&(obs.dst, mr.dst_conn));
                }
            }
            CtrlOp::CloseAck => {
                self.closes.remove(&(obs.dst, mr.dst_conn));
                if let Some(own) = self.endpoints.get(&me)
                    && let Some(peer) = own.peer
                    && let Some(p) = self.endpoints.get(&peer)
                    && p.closed.is_none()
                {
                    ctx.report(
                        CLOSE_ACK_ANSWERS,
                        Evidence::default().related(Some(own.frame)),
                    );
                }
            }
            _ => return,
        }
        self.epoch += 1;
    }
}

impl State {
    /// The end of the capture at `end_ns`: MR-CONN-010 on every CLOSE
    /// still unanswered that the capture outlived by the close wait, in
    /// capture order. The finding counts for the CLOSE's direction when
    /// the engine still holds it (`dirs`, the engine's; `lints`, the
    /// lint's by the same index), at the top level otherwise.
    pub(super) fn finish(
        &mut self,
        end_ns: u64,
        dirs: &[Option<Direction>],
        lints: &mut [DirLint],
        out: &mut Recorder,
    ) {
        let wait = out.timings.close_wait_ns;
        let mut unanswered: Vec<PendingClose> = self
            .closes
            .drain()
            .map(|(_, close)| close)
            .filter(|close| end_ns.saturating_sub(close.ts_ns) > wait)
            .collect();
        if unanswered.is_empty() {
            return;
        }
        unanswered.sort_unstable_by_key(|close| close.frame);
        let index: FxHashMap<(IpAddr, IpAddr, u32, u32), usize> = dirs
            .iter()
            .enumerate()
            .filter_map(|(i, dir)| dir.as_ref().map(|d| (d.key, i)))
            .map(|(k, i)| ((k.src, k.dst, k.src_conn, k.dst_conn), i))
            .collect();
        for close in unanswered {
            let counts = match close.conn {
                Conn::MetaRoce {
                    src,
                    dst,
                    src_conn,
                    dst_conn,
                } => index.get(&(src, dst, src_conn, dst_conn)),
                Conn::RoceV2 { .. } => None,
            }
            .and_then(|&i| lints.get_mut(i))
            .map(|lint| &mut lint.counts);
            out.record(
                counts,
                Finding {
                    rule: CLOSE_ANSWERED,
                    frame: close.frame,
                    ts_ns: close.ts_ns,
                    related_frame: None,
                    conn: close.conn,
                    ev: None,
                    observed: (end_ns - close.ts_ns) / 1000,
                    expected: wait / 1000,
                    vantage: CLOSE_ANSWERED.rule().vantage,
                },
            );
        }
    }
}
