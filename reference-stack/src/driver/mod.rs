//! The UDP driver: owns the sockets and the clock, and drives an
//! [`Endpoint`] (the quinn split: the core decides, the driver does the
//! system calls).
//!
//! Sockets (IPv4 or IPv6, the family of `bind`): one receive socket bound to `bind:port` (the MetaRoCE
//! port, 4794 by default) and one transmit socket per ev bound to
//! `bind:udp_source_port(ev)`, so every packet leaves with the source port
//! the spec derives from its ev (ECMP hashes on it); over IPv6 with the ev
//! as its flow label too (spec 1), set per datagram in its destination
//! address (`sys::set_flow_labels`). Peers are addressed at
//! their MetaRoCE port. Client and server on one host therefore need two
//! addresses (loopback: 127.0.0.1 for the server and 127.0.0.2 for the
//! client, the defaults). Transmit sockets are created on demand (feedback
//! travels on the peer's evs); if a port cannot be bound the receive
//! socket sends instead (counted in `DriverStats::fallback_tx`).
//!
//! Batching: up to `batch` datagrams per `recvmmsg`; transmits of one
//! turn leave in the order the core produced them, each run of consecutive
//! datagrams on one ev socket in one `sendmmsg` call. The TOS byte
//! (`IP_RECVTOS`) or traffic class (`IPV6_RECVTCLASS`) of received
//! datagrams gives the CE bit (and IPv6's `IPV6_FLOWINFO` the flow label
//! `--pcap` records); transmit sockets mark ECT(0). The driver never sends to an address nobody asked for:
//! only to the peer given on the command line, or to the source of a
//! CONNECT the server accepted.

pub mod relay;
mod sys;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use proto_parse::metaroce::field::CRC_LEN;
use proto_parse::metaroce::{DEFAULT_PORT, DataOp, Packet, udp_source_port};
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};

use crate::impair::{ImpairStats, Impairer, Impairment};
use crate::pcap::PcapSink;
use crate::{Endpoint, RxMeta, Time};

/// Driver settings.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// Our address; its family (IPv4 or IPv6) is that of every socket.
    pub bind: IpAddr,
    /// Our MetaRoCE (receive) port.
    pub port: u16,
    /// The port peers listen on.
    pub peer_port: u16,
    /// Datagrams per `recvmmsg` and most transmits per turn.
    pub batch: usize,
    pub impair_tx: Impairment,
    pub impair_rx: Impairment,
    pub seed: u64,
    pub pcap: Option<PathBuf>,
    pub events: Option<PathBuf>,
    /// Spin instead of sleeping when the next timer is close.
    pub busy_poll: bool,
    /// Send with the don't-fragment bit (path MTU discovery): a datagram
    /// larger than the path MTU is refused by the kernel, never fragmented.
    /// Off only to produce fragmented traffic on purpose (tests).
    pub dont_fragment: bool,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: DEFAULT_PORT,
            peer_port: DEFAULT_PORT,
            batch: 64,
            impair_tx: Impairment::default(),
            impair_rx: Impairment::default(),
            seed: 1,
            pcap: None,
            events: None,
            busy_poll: true,
            dont_fragment: true,
        }
    }
}

/// System-call level counters.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DriverStats {
    pub tx_datagrams: u64,
    pub tx_bytes: u64,
    pub rx_datagrams: u64,
    pub rx_bytes: u64,
    pub tx_syscalls: u64,
    pub rx_syscalls: u64,
    pub fallback_tx: u64,
    /// Datagrams the kernel refused as larger than the path MTU.
    pub tx_too_big: u64,
    pub impair_tx: ImpairStats,
    pub impair_rx: ImpairStats,
}

/// Datagrams queued before they are handed to the kernel mid-turn.
const TX_FLUSH: usize = 16;

/// A wait shorter than this yields instead of sleeping (with `busy_poll`).
const BUSY_POLL_NS: u64 = 20_000;

/// `recvmmsg` calls per turn at most (then the turn transmits, so that
/// feedback is not starved by a flood of input).
const RX_BATCHES_PER_TURN: usize = 16;

#[derive(Debug, Clone, Copy)]
struct TxMeta {
    remote: SocketAddr,
    ev: u16,
}

/// Where a received datagram came from, kept with it through the receive
/// impairment for `--pcap`.
#[derive(Debug, Clone, Copy)]
struct RxFrom {
    from: SocketAddr,
    /// IPv6: its flow label (0 on IPv4).
    flow_label: u32,
}

/// The IPv6 flow label of a datagram on `ev` (spec 1: it SHOULD equal the
/// ev, as the UDP source port derives from it).
fn flow_label(ev: u16) -> u32 {
    u32::from(ev)
}

/// Sockets, clock, impairment, capture and event log around an endpoint.
pub struct Driver {
    cfg: DriverConfig,
    rx: UdpSocket,
    tx: BTreeMap<u16, Option<UdpSocket>>,
    start: Instant,
    epoch_ns: u64,
    pub endpoint: Endpoint,
    imp_tx: Impairer<TxMeta>,
    imp_rx: Impairer<RxFrom>,
    pcap: Option<PcapSink>,
    events: Option<BufWriter<File>>,
    pub stats: DriverStats,
    rxb: sys::RecvBatch,
    out: Vec<(u16, SocketAddr, Vec<u8>)>,
    buf: Vec<u8>,
}

/// `dont_fragment`: `None` keeps the kernel's default (the relay).
fn bind_udp(
    addr: SocketAddr,
    nonblocking: bool,
    dont_fragment: Option<bool>,
) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        // This address only: no IPv4-mapped traffic on an IPv6 socket.
        s.set_only_v6(true)?;
    }
    s.bind(&addr.into())?;
    s.set_nonblocking(nonblocking)?;
    // ECT(0) on everything we send; the ECN bits of what we receive.
    if addr.is_ipv6() {
        s.set_tclass_v6(2)?;
        s.set_recv_tclass_v6(true)?;
    } else {
        s.set_tos_v4(2)?;
        s.set_recv_tos_v4(true)?;
    }
    if addr.is_ipv6() {
        sys::set_flow_labels(s.as_raw_fd())?;
    }
    let u: UdpSocket = s.into();
    sys::force_buffers(u.as_raw_fd(), 16 << 20);
    if let Some(on) = dont_fragment {
        sys::set_dont_fragment(u.as_raw_fd(), addr.is_ipv6(), on)?;
    }
    Ok(u)
}

/// IP (IPv4 without options, or the fixed IPv6 header) and UDP header
/// bytes in front of every MetaRoCE packet.
fn ip_udp_overhead(ip: IpAddr) -> u32 {
    let ip_header = if ip.is_ipv6() { 40 } else { 20 };
    ip_header + 8
}

/// The default payload MTU when the path allows more: 4096, the largest
/// RoCE MTU.
pub const MAX_DEFAULT_MTU: u16 = 4096;

/// The largest payload MTU (CTRL `mtu`) whose DATA packets fit an IP MTU
/// of `ip_mtu` over the IP version of `ip`: the IP and UDP headers, the
/// largest DATA header (WRITE_IMM) and, with `crc`, the CRC32C trailer
/// come off.
pub fn payload_mtu(ip_mtu: u32, ip: IpAddr, crc: bool) -> u32 {
    let header = DataOp::WriteImm.header_len() + if crc { CRC_LEN } else { 0 };
    ip_mtu.saturating_sub(ip_udp_overhead(ip) + header as u32)
}

/// The MTU of the route from `local` to `peer` (see [`payload_mtu`]).
pub fn route_mtu(local: IpAddr, peer: SocketAddr) -> io::Result<u32> {
    sys::route_mtu(local, peer)
}

/// The interface that holds `addr` and its MTU; `None` for an address no
/// interface holds (0.0.0.0, ::).
pub fn interface_mtu(addr: IpAddr) -> io::Result<Option<(String, u32)>> {
    let Some(name) = sys::interface_of(addr)? else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))?;
    let mtu = text.trim().parse::<u32>().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("/sys/class/net/{name}/mtu: {e}"),
        )
    })?;
    Ok(Some((name, mtu)))
}

impl Driver {
    /// Binds the sockets. `endpoint` should have `Config::trace` set when
    /// an event log is wanted.
    pub fn new(cfg: DriverConfig, endpoint: Endpoint) -> anyhow::Result<Self> {
        let local = SocketAddr::new(cfg.bind, cfg.port);
        let rx = bind_udp(local, true, Some(cfg.dont_fragment))
            .with_context(|| format!("binding the receive socket to {local}"))?;
        let pcap = match &cfg.pcap {
            Some(p) => {
                Some(PcapSink::create(p).with_context(|| format!("creating {}", p.display()))?)
            }
            None => None,
        };
        let events = match &cfg.events {
            Some(p) => Some(BufWriter::with_capacity(
                1 << 20,
                File::create(p).with_context(|| format!("creating {}", p.display()))?,
            )),
            None => None,
        };
        let epoch_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut d = Driver {
            imp_tx: Impairer::new(cfg.impair_tx.clone(), cfg.seed ^ 0x7A),
            imp_rx: Impairer::new(cfg.impair_rx.clone(), cfg.seed ^ 0x5A),
            rxb: sys::RecvBatch::new(cfg.batch.max(1)),
            cfg,
            rx,
            tx: BTreeMap::new(),
            start: Instant::now(),
            epoch_ns,
            endpoint,
            pcap,
            events,
            stats: DriverStats::default(),
            out: Vec::new(),
            buf: vec![0; 65536],
        };
        for ev in d.endpoint.config().evs.clone() {
            d.tx_socket(ev);
        }
        Ok(d)
    }

    /// Nanoseconds since the driver started: the clock handed to the core.
    pub fn now(&self) -> Time {
        self.start.elapsed().as_nanos() as u64
    }

    /// The local MetaRoCE address.
    pub fn local_addr(&self) -> SocketAddr {
        SocketAddr::new(self.cfg.bind, self.cfg.port)
    }

    fn tx_socket(&mut self, ev: u16) -> Option<&UdpSocket> {
        let (bind, df) = (self.cfg.bind, self.cfg.dont_fragment);
        self.tx
            .entry(ev)
            .or_insert_with(|| {
                bind_udp(SocketAddr::new(bind, udp_source_port(ev)), false, Some(df)).ok()
            })
            .as_ref()
    }

    /// One turn: receive, run timers, transmit, log; sleeps (at most
    /// `max_wait_ns`) when there was nothing to do. Returns whether any
    /// datagram moved.
    pub fn turn(&mut self, max_wait_ns: u64) -> anyhow::Result<bool> {
        let (received, drained) = self.receive()?;
        let now = self.now();
        while let Some(r) = self.imp_rx.pop_due(now) {
            self.capture_rx(now, r.meta, r.ce, &r.bytes)?;
            let remote = SocketAddr::new(r.meta.from.ip(), self.cfg.peer_port);
            self.endpoint
                .handle_datagram(now, remote, RxMeta { ce: r.ce }, &r.bytes);
        }
        // Timers run only once the socket is drained: after a stall (this
        // process or the peer descheduled), feedback that is already here
        // must be seen before a timer concludes that nothing came back.
        // (Impairment-held datagrams due later are not pending input.)
        if drained && self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.endpoint.handle_timeout(now);
        }
        let sent = self.transmit()?;
        self.write_trace()?;
        let busy = received || sent;
        if !busy {
            self.wait_for_work(max_wait_ns)?;
        }
        Ok(busy)
    }

    /// Receives up to `RX_BATCHES_PER_TURN` batches and hands them to the
    /// endpoint (or the receive impairment); whether any datagram came and
    /// whether the socket was drained.
    fn receive(&mut self) -> anyhow::Result<(bool, bool)> {
        let mut received = false;
        for _ in 0..RX_BATCHES_PER_TURN {
            let n = sys::recv_batch(self.rx.as_raw_fd(), &mut self.rxb)?;
            self.stats.rx_syscalls += 1;
            if n == 0 {
                return Ok((received, true));
            }
            received = true;
            let now = self.now();
            for i in 0..n {
                self.receive_one(now, i)?;
            }
            if n < self.rxb.lens.len() {
                return Ok((received, true));
            }
        }
        Ok((received, false))
    }

    /// Records a datagram the endpoint receives in the capture (`--pcap`).
    /// With receive impairment, as the impairment layer releases it (late,
    /// trimmed, CE-marked, twice, or never): the impairment stands for the
    /// network, and the capture shows what reached this host.
    fn capture_rx(&mut self, now: Time, from: RxFrom, ce: bool, bytes: &[u8]) -> io::Result<()> {
        let to = SocketAddr::new(self.cfg.bind, self.cfg.port);
        record_rx(&mut self.pcap, self.epoch_ns + now, from, to, ce, bytes)
    }

    /// Datagram `i` of the receive batch: to the endpoint (and captured),
    /// or to the receive impairment.
    fn receive_one(&mut self, now: Time, i: usize) -> anyhow::Result<()> {
        let from = RxFrom {
            from: self.rxb.from[i],
            flow_label: self.rxb.flow_label[i],
        };
        let ce = self.rxb.ce[i];
        self.stats.rx_datagrams += 1;
        self.stats.rx_bytes += self.rxb.datagram(i).len() as u64;
        let bytes = self.rxb.datagram(i);
        if self.imp_rx.is_passthrough() {
            let to = SocketAddr::new(self.cfg.bind, self.cfg.port);
            record_rx(&mut self.pcap, self.epoch_ns + now, from, to, ce, bytes)?;
            let remote = SocketAddr::new(from.from.ip(), self.cfg.peer_port);
            self.endpoint
                .handle_datagram(now, remote, RxMeta { ce }, bytes);
        } else {
            let ev = Packet::new_checked(bytes).map_or(0, |p| p.ev());
            let owned = bytes.to_vec();
            self.imp_rx.submit(now, ev, from, owned, ce);
        }
        Ok(())
    }

    /// Polls the endpoint's transmits (at most `4 x batch`), captures them
    /// and sends them through the transmit impairment; whether any left.
    fn transmit(&mut self) -> anyhow::Result<bool> {
        let mut busy = false;
        let mut buf = std::mem::take(&mut self.buf);
        let mut sent = 0;
        while sent < self.cfg.batch * 4 {
            let now = self.now();
            let Some(t) = self.endpoint.poll_transmit(now, &mut buf) else {
                break;
            };
            sent += 1;
            // Only a peer of our own family can be reached.
            let remote = t.remote;
            if remote.is_ipv6() != self.cfg.bind.is_ipv6() {
                continue;
            }
            let bytes = buf[..t.len].to_vec();
            if let Some(p) = &mut self.pcap {
                let src = SocketAddr::new(self.cfg.bind, t.src_port);
                let ecn = t.ecn.bits();
                let label = flow_label(t.ev);
                p.record(self.epoch_ns + now, src, remote, ecn, label, &bytes)?;
            }
            if self.imp_tx.is_passthrough() {
                self.out.push((t.ev, remote, bytes));
            } else {
                self.imp_tx
                    .submit(now, t.ev, TxMeta { remote, ev: t.ev }, bytes, false);
                while let Some(r) = self.imp_tx.pop_due(now) {
                    self.out.push((r.meta.ev, r.meta.remote, r.bytes));
                }
            }
            // Small flushes: the core stamped each datagram's send time
            // (T1) when it was polled, so a datagram should not wait for a
            // whole turn's worth of packets to be built first.
            if self.out.len() >= TX_FLUSH {
                busy = true;
                self.flush_out()?;
            }
        }
        self.buf = buf;
        let now = self.now();
        while let Some(r) = self.imp_tx.pop_due(now) {
            self.out.push((r.meta.ev, r.meta.remote, r.bytes));
        }
        if !self.out.is_empty() {
            busy = true;
            self.flush_out()?;
        }
        Ok(busy)
    }

    /// Nothing moved: sleeps until the next timer or impairment release,
    /// at most `max_wait_ns` (spins instead when it is close).
    fn wait_for_work(&mut self, max_wait_ns: u64) -> io::Result<()> {
        let now = self.now();
        let next = [
            self.endpoint.poll_timeout(),
            self.imp_rx.next_release(),
            self.imp_tx.next_release(),
        ]
        .into_iter()
        .flatten()
        .min();
        let wait = next.map_or(max_wait_ns, |t| t.saturating_sub(now).min(max_wait_ns));
        if wait > 0 {
            if self.cfg.busy_poll && wait < BUSY_POLL_NS {
                std::thread::yield_now();
            } else {
                sys::wait_readable(self.rx.as_raw_fd(), wait)?;
            }
        }
        Ok(())
    }

    /// Sends the queued datagrams in the order the core produced them: one
    /// `sendmmsg` per run of consecutive datagrams on the same ev. Grouping
    /// a whole turn per ev socket instead would let a datagram polled first
    /// leave after everything queued on lower evs (a millisecond on a
    /// loaded host): the core stamps `sent_at` when it polls, so its loss
    /// detection would see reordering that no network made.
    fn flush_out(&mut self) -> io::Result<()> {
        let out = std::mem::take(&mut self.out);
        let mut start = 0;
        while start < out.len() {
            let ev = out[start].0;
            let end = out[start..]
                .iter()
                .position(|(e, _, _)| *e != ev)
                .map_or(out.len(), |k| start + k);
            let msgs: Vec<(SocketAddr, &[u8])> = out[start..end]
                .iter()
                .map(|(_, a, b)| (*a, &b[..]))
                .collect();
            self.send_on(ev, &msgs)?;
            start = end;
        }
        self.out = out;
        self.out.clear();
        Ok(())
    }

    /// Raw baseline: one `sendmmsg` per ev socket (no order to keep).
    fn flush_out_grouped(&mut self) -> io::Result<()> {
        let out = std::mem::take(&mut self.out);
        let mut by_ev: BTreeMap<u16, Vec<(SocketAddr, &[u8])>> = BTreeMap::new();
        for (ev, a, b) in &out {
            by_ev.entry(*ev).or_default().push((*a, &b[..]));
        }
        for (ev, msgs) in by_ev {
            self.send_on(ev, &msgs)?;
        }
        self.out = out;
        self.out.clear();
        Ok(())
    }

    fn send_on(&mut self, ev: u16, msgs: &[(SocketAddr, &[u8])]) -> io::Result<()> {
        let fd = match self.tx_socket(ev) {
            Some(s) => s.as_raw_fd(),
            None => {
                self.stats.fallback_tx += msgs.len() as u64;
                self.rx.as_raw_fd()
            }
        };
        let sent = sys::send_batch(fd, msgs, flow_label(ev))?;
        self.stats.tx_syscalls += sent.calls as u64;
        self.stats.tx_too_big += sent.too_big as u64;
        self.stats.tx_datagrams += msgs.len() as u64;
        self.stats.tx_bytes += msgs.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
        Ok(())
    }

    fn write_trace(&mut self) -> io::Result<()> {
        let epoch = self.epoch_ns;
        while let Some(mut rec) = self.endpoint.poll_trace() {
            if let Some(w) = &mut self.events {
                rec.t_ns += epoch;
                serde_json::to_writer(&mut *w, &rec)?;
                w.write_all(b"\n")?;
            }
        }
        Ok(())
    }

    /// Sends raw UDP payloads (the baseline of the benchmark) through the
    /// same batching path: `payloads` round-robin over the ev sockets.
    pub fn send_raw(
        &mut self,
        remote: SocketAddr,
        evs: &[u16],
        payloads: &[&[u8]],
    ) -> io::Result<()> {
        for (i, p) in payloads.iter().enumerate() {
            let ev = evs[i % evs.len().max(1)];
            self.out.push((ev, remote, p.to_vec()));
        }
        self.flush_out_grouped()
    }

    /// Receives raw datagrams (baseline), returning the bytes received.
    pub fn recv_raw(&mut self) -> io::Result<u64> {
        let mut total = 0;
        loop {
            let n = sys::recv_batch(self.rx.as_raw_fd(), &mut self.rxb)?;
            self.stats.rx_syscalls += 1;
            if n == 0 {
                return Ok(total);
            }
            for i in 0..n {
                total += self.rxb.lens[i] as u64;
            }
            self.stats.rx_datagrams += n as u64;
        }
    }

    /// Waits for the receive socket (baseline receiver).
    pub fn wait(&self, ns: u64) -> io::Result<bool> {
        sys::wait_readable(self.rx.as_raw_fd(), ns)
    }

    pub fn impair_stats(&mut self) -> DriverStats {
        self.stats.impair_tx = self.imp_tx.stats;
        self.stats.impair_rx = self.imp_rx.stats;
        self.stats.clone()
    }

    /// Flushes the capture and the event log.
    pub fn finish(&mut self) -> io::Result<()> {
        self.write_trace()?;
        if let Some(p) = &mut self.pcap {
            p.flush()?;
        }
        if let Some(w) = &mut self.events {
            w.flush()?;
        }
        Ok(())
    }

    pub fn pcap_frames(&self) -> u64 {
        self.pcap.as_ref().map_or(0, |p| p.frames)
    }

    pub fn peer(&self, ip: IpAddr) -> SocketAddr {
        SocketAddr::new(ip, self.cfg.peer_port)
    }
}

/// Records a received datagram (ECN CE or ECT(0), as the socket reported).
fn record_rx(
    pcap: &mut Option<PcapSink>,
    ts_ns: u64,
    from: RxFrom,
    to: SocketAddr,
    ce: bool,
    bytes: &[u8],
) -> io::Result<()> {
    let ecn = if ce { 3 } else { 2 };
    match pcap {
        Some(p) => p.record(ts_ns, from.from, to, ecn, from.flow_label, bytes),
        None => Ok(()),
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// Every socket the driver binds sends with the don't-fragment setting
    /// it was asked for, IPv4 and IPv6 alike (read back from the kernel).
    #[test]
    fn sockets_keep_their_dont_fragment_setting_in_both_families() {
        for addr in ["127.0.0.1:0", "[::1]:0"] {
            let addr: SocketAddr = addr.parse().unwrap();
            for on in [true, false] {
                let s = bind_udp(addr, true, Some(on)).unwrap();
                let df = sys::dont_fragment(s.as_raw_fd(), addr.is_ipv6()).unwrap();
                assert_eq!(df, on, "{addr}");
            }
        }
    }

    #[test]
    fn payload_mtu_takes_off_the_ip_header_of_its_family() {
        let (v4, v6): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "fd00::1".parse().unwrap());
        // IP, UDP 8, WRITE_IMM header 56, CRC 4.
        assert_eq!(payload_mtu(1500, v4, true), 1500 - 20 - 8 - 56 - 4);
        assert_eq!(payload_mtu(1500, v6, true), 1500 - 40 - 8 - 56 - 4);
        assert_eq!(payload_mtu(1500, v6, false), 1500 - 40 - 8 - 56);
        assert_eq!(payload_mtu(64, v6, true), 0);
    }
}
