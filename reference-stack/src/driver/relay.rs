//! `metaroce-stack relay`: a userspace hop between two networks (two
//! network namespaces, say) that applies the impairment layer (delay,
//! jitter, reordering, loss, duplication, trimming, blackholes) in both
//! directions — what netem would do, where the kernel has no netem.
//!
//! The relay listens on `a_bind:port` and `b_bind:port`. A datagram from
//! `a_peer` is sent to `b_peer:port` from `b_bind:<its source port>` (the
//! ev-derived port is kept, so ECMP-relevant entropy survives the hop), and
//! back the other way. It only ever sends to the two configured peers.

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Instant;

use proto_parse::metaroce::Packet;
use serde::Serialize;

use super::{bind_udp, sys};
use crate::impair::{ImpairStats, Impairer, Impairment};

#[derive(Debug, Clone)]
pub struct RelayConfig {
    pub a_bind: Ipv4Addr,
    pub a_peer: Ipv4Addr,
    pub b_bind: Ipv4Addr,
    pub b_peer: Ipv4Addr,
    pub port: u16,
    pub impair: Impairment,
    pub seed: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RelayStats {
    pub a_to_b: u64,
    pub b_to_a: u64,
    pub ignored: u64,
    pub impair_a_to_b: ImpairStats,
    pub impair_b_to_a: ImpairStats,
}

#[derive(Debug, Clone, Copy)]
struct Hop {
    to_b: bool,
    sport: u16,
}

pub struct Relay {
    cfg: RelayConfig,
    a: UdpSocket,
    b: UdpSocket,
    a_out: BTreeMap<u16, Option<UdpSocket>>,
    b_out: BTreeMap<u16, Option<UdpSocket>>,
    to_b: Impairer<Hop>,
    to_a: Impairer<Hop>,
    start: Instant,
    pub stats: RelayStats,
}

impl Relay {
    pub fn new(cfg: RelayConfig) -> io::Result<Self> {
        Ok(Relay {
            a: bind_udp(SocketAddr::from((cfg.a_bind, cfg.port)), true, None)?,
            b: bind_udp(SocketAddr::from((cfg.b_bind, cfg.port)), true, None)?,
            a_out: BTreeMap::new(),
            b_out: BTreeMap::new(),
            to_b: Impairer::new(cfg.impair.clone(), cfg.seed ^ 0xAB),
            to_a: Impairer::new(cfg.impair.clone(), cfg.seed ^ 0xBA),
            start: Instant::now(),
            stats: RelayStats::default(),
            cfg,
        })
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Runs until `stop()` returns true.
    pub fn run(&mut self, mut stop: impl FnMut(&RelayStats) -> bool) -> io::Result<()> {
        let mut buf = vec![0u8; sys::MAX_DATAGRAM];
        while !stop(&self.stats) {
            let mut busy = false;
            for side_a in [true, false] {
                loop {
                    let sock = if side_a { &self.a } else { &self.b };
                    let (n, from) = match sock.recv_from(&mut buf) {
                        Ok(x) => x,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                        Err(e) => return Err(e),
                    };
                    busy = true;
                    let SocketAddr::V4(from) = from else { continue };
                    let expected = if side_a {
                        self.cfg.a_peer
                    } else {
                        self.cfg.b_peer
                    };
                    if *from.ip() != expected {
                        self.stats.ignored += 1;
                        continue;
                    }
                    let ev = Packet::new_checked(&buf[..n]).map_or(0, |p| p.ev());
                    let now = self.now();
                    let hop = Hop {
                        to_b: side_a,
                        sport: from.port(),
                    };
                    let q = if side_a {
                        &mut self.to_b
                    } else {
                        &mut self.to_a
                    };
                    q.submit(now, ev, hop, buf[..n].to_vec(), false);
                }
            }
            let now = self.now();
            for to_b in [true, false] {
                loop {
                    let q = if to_b { &mut self.to_b } else { &mut self.to_a };
                    let Some(r) = q.pop_due(now) else { break };
                    busy = true;
                    let (bind, peer, out) = if r.meta.to_b {
                        (self.cfg.b_bind, self.cfg.b_peer, &mut self.b_out)
                    } else {
                        (self.cfg.a_bind, self.cfg.a_peer, &mut self.a_out)
                    };
                    let sock = out.entry(r.meta.sport).or_insert_with(|| {
                        bind_udp(SocketAddr::from((bind, r.meta.sport)), false, None).ok()
                    });
                    let fallback = if r.meta.to_b { &self.b } else { &self.a };
                    let s = sock.as_ref().unwrap_or(fallback);
                    let dst = SocketAddrV4::new(peer, self.cfg.port);
                    // A send error (peer not up yet) is a lost datagram.
                    let _ = s.send_to(&r.bytes, dst);
                    if r.meta.to_b {
                        self.stats.a_to_b += 1;
                    } else {
                        self.stats.b_to_a += 1;
                    }
                }
            }
            self.stats.impair_a_to_b = self.to_b.stats;
            self.stats.impair_b_to_a = self.to_a.stats;
            if !busy {
                let next = [self.to_b.next_release(), self.to_a.next_release()]
                    .into_iter()
                    .flatten()
                    .min();
                let wait = next.map_or(1_000_000, |t| t.saturating_sub(self.now()).min(1_000_000));
                if wait > 0 {
                    sys::wait_any(&[self.a.as_raw_fd(), self.b.as_raw_fd()], wait)?;
                }
            }
        }
        Ok(())
    }
}
