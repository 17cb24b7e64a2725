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
    Completion, CompletionKind, Config, ConnStats, Connection, Event, HANDSHAKE_TIMED_OUT, MIN_MTU,
    Misbehaviour, Mode, RxMeta, Spray,
};
pub use memory::Memory;
pub use path::PathStats;
pub use trace::{TraceEvent, TraceRecord, TxCause};

/// Time in nanoseconds on the caller's monotonic clock.
pub type Time = u64;

/// ECN codepoint of an outgoing datagram: proto-parse's, the one statement
/// of the codepoints.
pub use proto_parse::frame::Ecn;

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
    /// By handle; a handle is never reused.
    conns: BTreeMap<usize, Connection>,
    next_handle: usize,
    by_id: BTreeMap<u32, usize>,
    by_peer: BTreeMap<(SocketAddr, u32), usize>,
    /// Registered memory regions, shared by the connections.
    pub memory: Memory,
    rng: ChaCha8Rng,
    accept: bool,
    stats: EndpointStats,
    /// Round-robin between connections: the handle to try first.
    rr: usize,
    events: VecDeque<(ConnHandle, Event)>,
    /// Trace records of connections dropped before they were polled.
    trace: VecDeque<TraceRecord>,
}

impl Endpoint {
    /// `seed` drives connection ids and initial PSNs (determinism);
    /// `accept`: whether CONNECTs are accepted (a server).
    pub fn new(cfg: Config, seed: u64, accept: bool) -> Self {
        Endpoint {
            cfg,
            conns: BTreeMap::new(),
            next_handle: 0,
            by_id: BTreeMap::new(),
            by_peer: BTreeMap::new(),
            memory: Memory::default(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            accept,
            stats: EndpointStats::default(),
            rr: 0,
            events: VecDeque::new(),
            trace: VecDeque::new(),
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
        let h = self.insert(c);
        self.by_id.insert(id, h);
        ConnHandle(h)
    }

    fn insert(&mut self, c: Connection) -> usize {
        let h = self.next_handle;
        self.next_handle += 1;
        self.conns.insert(h, c);
        h
    }

    /// The connection of handle `h`, until its drain period after closing
    /// is over ([`Connection::is_drained`]).
    pub fn get(&self, h: ConnHandle) -> Option<&Connection> {
        self.conns.get(&h.0)
    }

    pub fn get_mut(&mut self, h: ConnHandle) -> Option<&mut Connection> {
        self.conns.get_mut(&h.0)
    }

    /// The connection of handle `h`.
    ///
    /// # Panics
    /// When the connection was dropped after its drain period (use
    /// [`Endpoint::get`] where that can happen).
    pub fn conn(&self, h: ConnHandle) -> &Connection {
        self.get(h)
            .expect("connection dropped after its drain period")
    }

    /// The connection of handle `h`.
    ///
    /// # Panics
    /// When the connection was dropped after its drain period (use
    /// [`Endpoint::get_mut`] where that can happen).
    pub fn conn_mut(&mut self, h: ConnHandle) -> &mut Connection {
        self.get_mut(h)
            .expect("connection dropped after its drain period")
    }

    /// Connections not closed.
    pub fn live_conns(&self) -> usize {
        self.conns.values().filter(|c| !c.is_closed()).count()
    }

    /// Connections held, closed ones in their drain period included.
    pub fn conn_count(&self) -> usize {
        self.conns.len()
    }

    /// Handles of the connections held, oldest first.
    pub fn handles(&self) -> impl Iterator<Item = ConnHandle> + '_ {
        self.conns.keys().copied().map(ConnHandle)
    }

    /// Drops connection `i`, closed and drained, and its routing entries.
    fn drop_conn(&mut self, i: usize) {
        if let Some(c) = self.conns.remove(&i) {
            self.by_id.remove(&c.local_id);
            if self.by_peer.get(&(c.remote, c.remote_id)) == Some(&i) {
                self.by_peer.remove(&(c.remote, c.remote_id));
            }
        }
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
                    match self.on_connect(now, remote, repr.src_conn, ctrl) {
                        Some(i) => i,
                        None => return,
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
        let Some(conn) = self.conns.get_mut(&idx) else {
            self.stats.unknown_conn += 1;
            return;
        };
        if conn.remote.ip() != remote.ip() {
            self.stats.wrong_peer += 1;
            return;
        }
        // Once the peer id is known, the source id must match.
        if conn.remote_id != 0 && repr.src_conn != conn.remote_id {
            self.stats.unknown_conn += 1;
            return;
        }
        if conn.is_established() && conn.crc_negotiated() && !repr.crc {
            self.stats.missing_crc += 1;
            return;
        }
        conn.handle_packet(now, meta, &repr, trimmed, &mut self.memory);
        self.collect_events(idx);
    }

    /// A CONNECT (dst_conn 0) from `remote` with the peer's id `peer_id`:
    /// the live connection it repeats (our ACCEPT was lost), or `None`
    /// once it is accepted as a new connection, refused (`MAX_CONNS`) or
    /// counted as unknown (this endpoint does not accept).
    fn on_connect(
        &mut self,
        now: Time,
        remote: SocketAddr,
        peer_id: u32,
        ctrl: &proto_parse::metaroce::CtrlRepr,
    ) -> Option<usize> {
        let known = self
            .by_peer
            .get(&(remote, peer_id))
            .copied()
            .filter(|i| self.conns.get(i).is_some_and(|c| !c.is_closed()));
        if known.is_some() {
            return known;
        }
        if !self.accept {
            self.stats.unknown_conn += 1;
            return None;
        }
        if self.live_conns() >= MAX_CONNS {
            self.stats.refused_connects += 1;
            return None;
        }
        let id = self.fresh_id();
        let init: u32 = self.rng.random();
        let c = Connection::new_server(self.cfg.clone(), now, id, remote, peer_id, ctrl, init);
        let i = self.insert(c);
        self.by_id.insert(id, i);
        self.by_peer.insert((remote, peer_id), i);
        self.stats.connects_accepted += 1;
        self.collect_events(i);
        None
    }

    fn collect_events(&mut self, i: usize) {
        if let Some(c) = self.conns.get_mut(&i) {
            while let Some(e) = c.poll_event() {
                self.events.push_back((ConnHandle(i), e));
            }
        }
    }

    /// Handles the timers of every connection due by `now`; connections
    /// closed and drained are dropped (their events and trace records were
    /// collected).
    pub fn handle_timeout(&mut self, now: Time) {
        let due: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.poll_timeout().is_some_and(|t| t <= now))
            .map(|(&i, _)| i)
            .collect();
        for i in due {
            let Some(c) = self.conns.get_mut(&i) else {
                continue;
            };
            c.handle_timeout(now);
            let drained = c.is_drained();
            self.collect_events(i);
            if drained {
                self.collect_trace(i);
                self.drop_conn(i);
            }
        }
    }

    pub fn poll_timeout(&self) -> Option<Time> {
        self.conns
            .values()
            .filter_map(Connection::poll_timeout)
            .min()
    }

    /// The next datagram of any connection (round-robin between them).
    pub fn poll_transmit(&mut self, now: Time, buf: &mut Vec<u8>) -> Option<Transmit> {
        let order: Vec<usize> = self
            .conns
            .range(self.rr..)
            .chain(self.conns.range(..self.rr))
            .map(|(&i, _)| i)
            .collect();
        for i in order {
            let Some(c) = self.conns.get_mut(&i) else {
                continue;
            };
            if let Some(t) = c.poll_transmit(now, buf) {
                self.rr = i + 1;
                self.collect_events(i);
                return Some(t);
            }
        }
        None
    }

    pub fn poll_event(&mut self) -> Option<(ConnHandle, Event)> {
        let handles: Vec<usize> = self.conns.keys().copied().collect();
        for i in handles {
            self.collect_events(i);
        }
        self.events.pop_front()
    }

    /// Keeps the trace records of a connection about to be dropped.
    fn collect_trace(&mut self, i: usize) {
        if let Some(c) = self.conns.get_mut(&i) {
            while let Some(r) = c.poll_trace() {
                self.trace.push_back(r);
            }
        }
    }

    /// Ground-truth trace records of every connection (when `Config::trace`).
    pub fn poll_trace(&mut self) -> Option<TraceRecord> {
        self.trace
            .pop_front()
            .or_else(|| self.conns.values_mut().find_map(Connection::poll_trace))
    }
}
