//! `reference-stack`: a reference implementation of the MetaRoCE transport.
//!
//! The core ([`Endpoint`], [`Connection`]) is a deterministic state machine in
//! the style of quinn-proto: it performs no I/O and never reads a clock. The
//! caller passes `now` (nanoseconds on any monotonic clock it likes) and
//! datagrams in, and polls datagrams, timeouts, events and trace records
//! out. Poll order after every input (`handle_datagram`, `handle_timeout`,
//! a posted work request):
//!
//! 1. `poll_transmit(now, &mut buf)` until it returns `None`;
//! 2. `poll_event()` and `poll_trace()` until `None`;
//! 3. `poll_timeout()`: call `handle_timeout(t)` when the clock reaches `t`.
//!
//! Every byte is emitted and parsed through `proto_parse::metaroce`.
//!
//! Around the core: [`sim`] (a virtual-time `Pair` harness with seeded
//! per-path latency, bandwidth, loss, reordering, duplication, trimming, CE
//! marking and blackholes), [`impair`] (the same impairments for the UDP
//! driver), [`driver`] (sockets, batching), [`pcap`] (capture writer).

pub mod cc;
pub mod conn;
pub mod driver;
pub mod impair;
pub mod memory;
pub mod path;
pub mod pcap;
pub mod sim;
pub mod trace;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;

use proto_parse::metaroce::{Body, CtrlOp, Packet, PacketType, Repr};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

pub use conn::{
    Completion, CompletionKind, Config, ConnStats, Connection, Event, Mode, RxMeta, Spray,
};
pub use memory::Memory;
pub use path::PathStats;
pub use trace::{TraceEvent, TraceRecord, TxCause};

/// Time in nanoseconds on the caller's monotonic clock.
pub type Time = u64;

/// ECN codepoint of an outgoing datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Ecn {
    NotEct,
    Ect0,
    Ce,
}

impl Ecn {
    /// The two IP ECN bits.
    pub fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }
}

/// A datagram to send, written to the front of the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    pub remote: SocketAddr,
    /// The entropy value (path) of the packet.
    pub ev: u16,
    /// `udp_source_port(ev)`: the UDP source port the driver must use.
    pub src_port: u16,
    pub len: usize,
    pub ecn: Ecn,
    pub kind: PacketType,
    /// Local connection id.
    pub conn: u32,
}

/// Handle of a connection inside its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnHandle(pub usize);

/// Datagrams the endpoint refused, by reason.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct EndpointStats {
    pub datagrams_rx: u64,
    /// Not a valid MetaRoCE packet (proto-parse refused it).
    pub malformed: u64,
    /// Valid layout, unknown type or op.
    pub unsupported: u64,
    pub bad_crc: u64,
    /// CRC negotiated but the packet carried none.
    pub missing_crc: u64,
    pub unknown_conn: u64,
    /// Arrived from another address than the connection's peer.
    pub wrong_peer: u64,
    pub connects_accepted: u64,
    /// CONNECTs refused because `MAX_CONNS` connections are open.
    pub refused_connects: u64,
}

/// Open connections an accepting endpoint keeps at most.
pub const MAX_CONNS: usize = 1024;

/// An endpoint: its connections, its registered memory and its counters.
#[derive(Debug)]
pub struct Endpoint {
    cfg: Config,
    conns: Vec<Connection>,
    by_id: BTreeMap<u32, usize>,
    by_peer: BTreeMap<(SocketAddr, u32), usize>,
    /// Registered memory regions, shared by the connections.
    pub memory: Memory,
    rng: ChaCha8Rng,
    accept: bool,
    stats: EndpointStats,
    rr: usize,
    events: VecDeque<(ConnHandle, Event)>,
}

impl Endpoint {
    /// `seed` drives connection ids and initial PSNs (determinism);
    /// `accept`: whether CONNECTs are accepted (a server).
    pub fn new(cfg: Config, seed: u64, accept: bool) -> Self {
        Endpoint {
            cfg,
            conns: Vec::new(),
            by_id: BTreeMap::new(),
            by_peer: BTreeMap::new(),
            memory: Memory::default(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            accept,
            stats: EndpointStats::default(),
            rr: 0,
            events: VecDeque::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    fn fresh_id(&mut self) -> u32 {
        loop {
            let id: u32 = self.rng.random();
            if id != 0 && !self.by_id.contains_key(&id) {
                return id;
            }
        }
    }

    /// Opens a connection to `remote` (which listens on the MetaRoCE port).
    pub fn connect(&mut self, now: Time, remote: SocketAddr) -> ConnHandle {
        let id = self.fresh_id();
        let init: u32 = self.rng.random();
        let c = Connection::new_client(self.cfg.clone(), now, id, remote, init);
        self.conns.push(c);
        let h = self.conns.len() - 1;
        self.by_id.insert(id, h);
        ConnHandle(h)
    }

    pub fn conn(&self, h: ConnHandle) -> &Connection {
        &self.conns[h.0]
    }

    pub fn conn_mut(&mut self, h: ConnHandle) -> &mut Connection {
        &mut self.conns[h.0]
    }

    /// Connections not closed.
    pub fn live_conns(&self) -> usize {
        self.conns.iter().filter(|c| !c.is_closed()).count()
    }

    pub fn handles(&self) -> impl Iterator<Item = ConnHandle> + '_ {
        (0..self.conns.len()).map(ConnHandle)
    }

    /// Processes one received UDP payload from `remote`. Malformed or
    /// hostile datagrams are counted and dropped.
    pub fn handle_datagram(&mut self, now: Time, remote: SocketAddr, meta: RxMeta, bytes: &[u8]) {
        self.stats.datagrams_rx += 1;
        let packet = match Packet::new_checked(bytes) {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        let Ok(layout) = packet.layout(bytes.len()) else {
            self.stats.malformed += 1;
            return;
        };
        if matches!(
            packet.crc_status(&layout),
            proto_parse::metaroce::CrcStatus::Bad { .. }
        ) {
            self.stats.bad_crc += 1;
            return;
        }
        let repr = match Repr::parse(&packet) {
            Ok(r) => r,
            Err(_) => {
                self.stats.unsupported += 1;
                return;
            }
        };
        let trimmed = layout.trimmed;
        let idx = if repr.dst_conn == 0 {
            match &repr.body {
                Body::Ctrl(ctrl) if ctrl.op == CtrlOp::Connect => {
                    let known = self
                        .by_peer
                        .get(&(remote, repr.src_conn))
                        .copied()
                        .filter(|&i| !self.conns[i].is_closed());
                    if let Some(i) = known {
                        i
                    } else if self.accept && self.live_conns() >= MAX_CONNS {
                        self.stats.refused_connects += 1;
                        return;
                    } else if self.accept {
                        let id = self.fresh_id();
                        let init: u32 = self.rng.random();
                        let c = Connection::new_server(
                            self.cfg.clone(),
                            now,
                            id,
                            remote,
                            repr.src_conn,
                            ctrl,
                            init,
                        );
                        self.conns.push(c);
                        let i = self.conns.len() - 1;
                        self.by_id.insert(id, i);
                        self.by_peer.insert((remote, repr.src_conn), i);
                        self.stats.connects_accepted += 1;
                        // Fall through so the repeated-CONNECT logic does not run.
                        self.collect_events(i);
                        return;
                    } else {
                        self.stats.unknown_conn += 1;
                        return;
                    }
                }
                _ => {
                    self.stats.unknown_conn += 1;
                    return;
                }
            }
        } else {
            match self.by_id.get(&repr.dst_conn) {
                Some(&i) => i,
                None => {
                    self.stats.unknown_conn += 1;
                    return;
                }
            }
        };
        let conn = &mut self.conns[idx];
        if conn.remote.ip() != remote.ip() {
            self.stats.wrong_peer += 1;
            return;
        }
        // Once the peer id is known, the source id must match.
        if conn.remote_id != 0 && repr.src_conn != conn.remote_id {
            self.stats.unknown_conn += 1;
            return;
        }
        if conn.is_established() && conn_requires_crc(conn) && !repr.crc {
            self.stats.missing_crc += 1;
            return;
        }
        conn.handle_packet(now, meta, &repr, trimmed, &mut self.memory);
        self.collect_events(idx);
    }

    fn collect_events(&mut self, i: usize) {
        while let Some(e) = self.conns[i].poll_event() {
            self.events.push_back((ConnHandle(i), e));
        }
    }

    pub fn handle_timeout(&mut self, now: Time) {
        for i in 0..self.conns.len() {
            if self.conns[i].poll_timeout().is_some_and(|t| t <= now) {
                self.conns[i].handle_timeout(now);
                self.collect_events(i);
            }
        }
    }

    pub fn poll_timeout(&self) -> Option<Time> {
        self.conns.iter().filter_map(Connection::poll_timeout).min()
    }

    /// The next datagram of any connection (round-robin between them).
    pub fn poll_transmit(&mut self, now: Time, buf: &mut Vec<u8>) -> Option<Transmit> {
        let n = self.conns.len();
        for k in 0..n {
            let i = (self.rr + k) % n;
            if let Some(t) = self.conns[i].poll_transmit(now, buf) {
                self.rr = i + 1;
                self.collect_events(i);
                return Some(t);
            }
        }
        None
    }

    pub fn poll_event(&mut self) -> Option<(ConnHandle, Event)> {
        for i in 0..self.conns.len() {
            self.collect_events(i);
        }
        self.events.pop_front()
    }

    /// Ground-truth trace records of every connection (when `Config::trace`).
    pub fn poll_trace(&mut self) -> Option<TraceRecord> {
        self.conns.iter_mut().find_map(Connection::poll_trace)
    }
}

fn conn_requires_crc(conn: &Connection) -> bool {
    conn.crc_negotiated()
}
