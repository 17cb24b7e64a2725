//! A virtual-time test harness: two endpoints joined by one simulated link
//! per (direction, ev), like quinn-proto's `tests/util.rs` `Pair`.
//!
//! Each link has a propagation latency, jitter, a bandwidth with a FIFO queue
//! (drop-tail, or trimming when enabled), an ECN marking threshold and
//! seeded random loss, duplication, reordering, trimming, CE marking and
//! blackhole intervals. All randomness comes from one `ChaCha8Rng`: a run
//! is a pure function of its seed.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::SocketAddr;

use proto_parse::metaroce::{Packet, PacketType};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{Config, ConnHandle, Endpoint, Event, RxMeta, Time};

/// One direction of one path.
#[derive(Debug, Clone, Copy)]
pub struct LinkConfig {
    pub latency: u64,
    pub jitter: u64,
    /// Gbit/s; 0 = infinite.
    pub rate_gbps: f64,
    pub loss: f64,
    pub dup: f64,
    /// Probability that a packet is held back by `reorder_delay`.
    pub reorder: f64,
    pub reorder_delay: u64,
    /// Probability that a DATA packet is trimmed (payload cut).
    pub trim: f64,
    /// Probability of a CE mark (besides queue-based marking).
    pub ce: f64,
    /// Queue bytes beyond which packets are dropped (or trimmed).
    pub queue_limit: u64,
    /// Queue bytes beyond which packets are CE-marked.
    pub ecn_threshold: u64,
    /// Trim DATA packets instead of dropping them when the queue is full.
    pub trim_on_overflow: bool,
    /// Every packet is dropped in `[from, until)`.
    pub blackhole: Option<(Time, Time)>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            latency: 10_000,
            jitter: 0,
            rate_gbps: 25.0,
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            reorder_delay: 0,
            trim: 0.0,
            ce: 0.0,
            queue_limit: 1 << 20,
            ecn_threshold: 256 << 10,
            trim_on_overflow: false,
            blackhole: None,
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SimStats {
    pub sent: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub trimmed: u64,
    pub ce_marked: u64,
    pub delivered: u64,
}

#[derive(Debug)]
struct InFlight {
    to_server: bool,
    from: SocketAddr,
    bytes: Vec<u8>,
    ce: bool,
}

#[derive(Debug, Clone, Copy)]
struct LinkState {
    cfg: LinkConfig,
    busy_until: Time,
}

/// Two endpoints and the simulated fabric between them.
pub struct Pair {
    pub client: Endpoint,
    pub server: Endpoint,
    pub client_addr: SocketAddr,
    pub server_addr: SocketAddr,
    pub time: Time,
    default_link: LinkConfig,
    links: BTreeMap<(bool, u16), LinkState>,
    queue: BinaryHeap<Reverse<(Time, u64)>>,
    in_flight: BTreeMap<u64, InFlight>,
    seq: u64,
    rng: ChaCha8Rng,
    buf: Vec<u8>,
    pub stats: SimStats,
    pub client_events: Vec<(ConnHandle, Event)>,
    pub server_events: Vec<(ConnHandle, Event)>,
    /// Optional hook run on every datagram before the link (tests inject
    /// hostile traffic with it): returns extra datagrams to deliver to the
    /// same receiver at the same time.
    #[allow(clippy::type_complexity)]
    pub inject: Option<Box<dyn FnMut(&mut ChaCha8Rng, bool, &[u8]) -> Vec<Vec<u8>>>>,
}

impl Pair {
    pub fn new(client_cfg: Config, server_cfg: Config, seed: u64, link: LinkConfig) -> Self {
        Pair {
            client: Endpoint::new(client_cfg, seed ^ 0xC11E, false),
            server: Endpoint::new(server_cfg, seed ^ 0x5E4E, true),
            client_addr: "10.0.0.2:4794".parse().expect("literal address"),
            server_addr: "10.0.0.1:4794".parse().expect("literal address"),
            time: 1_000_000,
            default_link: link,
            links: BTreeMap::new(),
            queue: BinaryHeap::new(),
            in_flight: BTreeMap::new(),
            seq: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            buf: vec![0; 65536],
            stats: SimStats::default(),
            client_events: Vec::new(),
            server_events: Vec::new(),
            inject: None,
        }
    }

    /// Sets the link of one ev, both directions.
    pub fn set_link(&mut self, ev: u16, cfg: LinkConfig) {
        for dir in [false, true] {
            self.links
                .insert((dir, ev), LinkState { cfg, busy_until: 0 });
        }
    }

    /// Changes the link of one ev, both directions, keeping its queue.
    pub fn update_link(&mut self, ev: u16, f: impl Fn(&mut LinkConfig)) {
        for dir in [false, true] {
            let default = self.default_link;
            let l = self.links.entry((dir, ev)).or_insert(LinkState {
                cfg: default,
                busy_until: 0,
            });
            f(&mut l.cfg);
        }
    }

    /// Opens a connection and drives until both sides are established.
    pub fn connect(&mut self) -> (ConnHandle, ConnHandle) {
        let server_addr = self.server_addr;
        let h = self.client.connect(self.time, server_addr);
        let deadline = self.time + 2_000_000_000;
        self.drive_until(deadline, |p| {
            p.client.conn(h).is_established() && p.server.handles().next().is_some()
        });
        let s = self.server.handles().last().expect("server accepted");
        (h, s)
    }

    fn link(&mut self, to_server: bool, ev: u16) -> &mut LinkState {
        let default = self.default_link;
        self.links.entry((to_server, ev)).or_insert(LinkState {
            cfg: default,
            busy_until: 0,
        })
    }

    fn schedule(&mut self, at: Time, f: InFlight) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq)));
        self.in_flight.insert(self.seq, f);
    }

    /// Sends a datagram through the link of `ev`.
    fn send(&mut self, to_server: bool, ev: u16, mut bytes: Vec<u8>) {
        self.stats.sent += 1;
        let now = self.time;
        let from = if to_server {
            self.client_addr
        } else {
            self.server_addr
        };
        let link = *self.link(to_server, ev);
        let cfg = link.cfg;
        if let Some((a, b)) = cfg.blackhole
            && now >= a
            && now < b
        {
            self.stats.dropped += 1;
            return;
        }
        if cfg.loss > 0.0 && self.rng.random_bool(cfg.loss.min(1.0)) {
            self.stats.dropped += 1;
            return;
        }
        let is_data =
            Packet::new_checked(&bytes[..]).is_ok_and(|p| p.packet_type() == PacketType::Data);
        let mut trim = cfg.trim > 0.0 && is_data && self.rng.random_bool(cfg.trim.min(1.0));
        // Queue model.
        let start = link.busy_until.max(now);
        let queued_bytes = if cfg.rate_gbps > 0.0 {
            ((start - now) as f64 * cfg.rate_gbps / 8.0) as u64
        } else {
            0
        };
        if queued_bytes > cfg.queue_limit {
            if cfg.trim_on_overflow && is_data {
                trim = true;
            } else {
                self.stats.dropped += 1;
                return;
            }
        }
        if trim {
            self.trim(&mut bytes);
        }
        let mut ce = queued_bytes > cfg.ecn_threshold;
        if cfg.ce > 0.0 && self.rng.random_bool(cfg.ce.min(1.0)) {
            ce = true;
        }
        if ce {
            self.stats.ce_marked += 1;
        }
        let ser = if cfg.rate_gbps > 0.0 {
            (bytes.len() as f64 * 8.0 / cfg.rate_gbps) as u64
        } else {
            0
        };
        let depart = start + ser;
        self.link(to_server, ev).busy_until = depart;
        let mut at = depart + cfg.latency;
        if cfg.jitter > 0 {
            at += self.rng.random_range(0..cfg.jitter);
        }
        if cfg.reorder > 0.0 && self.rng.random_bool(cfg.reorder.min(1.0)) {
            at += cfg.reorder_delay;
        }
        self.deliver(
            at,
            &cfg,
            InFlight {
                to_server,
                from,
                bytes,
                ce,
            },
        );
    }

    /// Cuts a DATA packet to its header (the parser's layout says where it
    /// ends), as a trimming switch does.
    fn trim(&mut self, bytes: &mut Vec<u8>) {
        if let Ok(layout) = Packet::new_checked(&bytes[..]).and_then(|p| p.layout(bytes.len()))
            && layout.payload.end > layout.payload.start
        {
            bytes.truncate(layout.header_len);
            self.stats.trimmed += 1;
        }
    }

    /// Schedules `f` to arrive at `at`, with a duplicate (the link's `dup`)
    /// and the test hook's injected datagrams.
    fn deliver(&mut self, at: Time, cfg: &LinkConfig, f: InFlight) {
        let InFlight {
            to_server,
            from,
            bytes,
            ce,
        } = f;
        if cfg.dup > 0.0 && self.rng.random_bool(cfg.dup.min(1.0)) {
            self.stats.duplicated += 1;
            let extra = at + self.rng.random_range(0..cfg.latency.max(1));
            self.schedule(
                extra,
                InFlight {
                    to_server,
                    from,
                    bytes: bytes.clone(),
                    ce,
                },
            );
        }
        if let Some(mut inject) = self.inject.take() {
            for extra in inject(&mut self.rng, to_server, &bytes) {
                self.schedule(
                    at,
                    InFlight {
                        to_server,
                        from,
                        bytes: extra,
                        ce: false,
                    },
                );
            }
            self.inject = Some(inject);
        }
        self.schedule(
            at,
            InFlight {
                to_server,
                from,
                bytes,
                ce,
            },
        );
    }

    /// Moves every pending transmit of both endpoints onto the links.
    pub fn flush(&mut self) {
        loop {
            let mut any = false;
            let now = self.time;
            let mut buf = std::mem::take(&mut self.buf);
            while let Some(t) = self.client.poll_transmit(now, &mut buf) {
                let bytes = buf[..t.len].to_vec();
                self.send(true, t.ev, bytes);
                any = true;
            }
            while let Some(t) = self.server.poll_transmit(now, &mut buf) {
                let bytes = buf[..t.len].to_vec();
                self.send(false, t.ev, bytes);
                any = true;
            }
            self.buf = buf;
            self.collect();
            if !any {
                break;
            }
        }
    }

    fn collect(&mut self) {
        while let Some(e) = self.client.poll_event() {
            self.client_events.push(e);
        }
        while let Some(e) = self.server.poll_event() {
            self.server_events.push(e);
        }
    }

    /// The next time something happens.
    pub fn next_wakeup(&self) -> Option<Time> {
        let q = self.queue.peek().map(|Reverse((t, _))| *t);
        [q, self.client.poll_timeout(), self.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Advances virtual time to the next event and processes it. False
    /// when nothing is left to do.
    pub fn step(&mut self) -> bool {
        self.flush();
        let Some(next) = self.next_wakeup() else {
            return false;
        };
        self.time = self.time.max(next);
        let now = self.time;
        while let Some(Reverse((t, id))) = self.queue.peek().copied() {
            if t > now {
                break;
            }
            self.queue.pop();
            if let Some(f) = self.in_flight.remove(&id) {
                self.stats.delivered += 1;
                let meta = RxMeta { ce: f.ce };
                if f.to_server {
                    self.server.handle_datagram(now, f.from, meta, &f.bytes);
                } else {
                    self.client.handle_datagram(now, f.from, meta, &f.bytes);
                }
            }
        }
        self.client.handle_timeout(now);
        self.server.handle_timeout(now);
        self.collect();
        true
    }

    /// Steps until `done` holds or virtual time passes `deadline`. Returns
    /// whether `done` held.
    pub fn drive_until(&mut self, deadline: Time, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if self.time > deadline || !self.step() {
                return done(self);
            }
        }
    }
}

/// The RDMA operation a workload uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkOp {
    Write,
    WriteImm,
    Read,
    Send,
}

/// What a workload run observed.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub completed: usize,
    pub messages: usize,
    /// Virtual time from the first post to the last completion.
    pub elapsed_ns: u64,
    pub goodput_gbps: f64,
    /// Every byte at the destination equals what was sent.
    pub byte_exact: bool,
    /// Every message completed exactly once on both sides.
    pub exactly_once: bool,
    pub retransmissions: u64,
    pub spurious: u64,
}

/// Deterministic message contents: message `i` of a run.
pub fn pattern(i: usize, len: usize) -> Vec<u8> {
    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

impl Pair {
    /// Posts `messages` operations of `size` bytes from the client and
    /// drives until all complete (or `budget` ns of virtual time pass);
    /// then checks byte-exactness and exactly-once completion.
    pub fn run_workload(
        &mut self,
        c: ConnHandle,
        s: ConnHandle,
        op: WorkOp,
        messages: usize,
        size: usize,
        budget: u64,
    ) -> RunResult {
        use crate::CompletionKind as K;
        let start = self.time;
        let c0 = self.client_events.len();
        let s0 = self.server_events.len();
        let (rkey, wr_ids) = self.post_workload(c, s, op, messages, size);
        let want_kind = match op {
            WorkOp::Write | WorkOp::WriteImm => K::Write,
            WorkOp::Read => K::Read,
            WorkOp::Send => K::Send,
        };
        let count = |events: &[(ConnHandle, Event)], k: K| {
            events
                .iter()
                .filter(|(h, e)| *h == c && matches!(e, Event::Completion(x) if x.kind == k))
                .count()
        };
        let deadline = start + budget;
        let mut last_done = start;
        self.drive_until(deadline, |p| {
            let n = count(&p.client_events[c0..], want_kind);
            if n >= messages {
                last_done = p.time;
                true
            } else {
                false
            }
        });
        // Let late duplicates and acks drain a little, to catch double
        // completions.
        let settle = self.time + 2_000_000;
        self.drive_until(settle, |p| p.time >= settle);
        let (client_done, server_done) = self.completions(c, s, want_kind, c0, s0);
        let mut ids: Vec<u64> = client_done.iter().map(|x| x.wr_id).collect();
        ids.sort_unstable();
        let mut want = wr_ids.clone();
        want.sort_unstable();
        let exactly_once = ids == want && client_done.iter().all(|x| x.ok);
        let placed = Placed {
            rkey,
            wr_ids: &wr_ids,
            client_done: &client_done,
            server_done: &server_done,
        };
        let (byte_exact, server_once) = self.check_data(op, messages, size, &placed);
        let elapsed = last_done.saturating_sub(start).max(1);
        let completed = client_done.len();
        let stats = self.client.conn(c).stats().clone();
        let sstats = self.server.conn(s).stats().clone();
        RunResult {
            completed,
            messages,
            elapsed_ns: elapsed,
            goodput_gbps: (completed * size) as f64 * 8.0 / elapsed as f64,
            byte_exact: byte_exact && completed == messages,
            exactly_once: exactly_once && server_once,
            retransmissions: stats.retransmissions + sstats.retransmissions,
            spurious: stats.spurious_retransmissions + sstats.spurious_retransmissions,
        }
    }

    /// Registers the server's target region (filled with the patterns for
    /// READ), posts its receives (SEND) and the client's `messages`
    /// operations; the region's rkey and the work request ids.
    fn post_workload(
        &mut self,
        c: ConnHandle,
        s: ConnHandle,
        op: WorkOp,
        messages: usize,
        size: usize,
    ) -> (u32, Vec<u64>) {
        const BASE: u64 = 0x4000_0000;
        let total = messages * size;
        let rkey = self.server.memory.register(BASE, total.max(1));
        if op == WorkOp::Read {
            for i in 0..messages {
                let va = BASE + (i * size) as u64;
                self.server.memory.write(rkey, va, &pattern(i, size));
            }
        }
        if op == WorkOp::Send {
            for _ in 0..messages {
                self.server.conn_mut(s).post_recv(size as u32);
            }
        }
        let now = self.time;
        let mut wr_ids = Vec::new();
        for i in 0..messages {
            let va = BASE + (i * size) as u64;
            let conn = self.client.conn_mut(c);
            let id = match op {
                WorkOp::Write => conn.post_write(now, pattern(i, size), va, rkey, None),
                WorkOp::WriteImm => {
                    conn.post_write(now, pattern(i, size), va, rkey, Some(i as u32))
                }
                WorkOp::Read => conn.post_read(now, size as u32, va, rkey),
                WorkOp::Send => conn.post_send(now, pattern(i, size), None),
            };
            wr_ids.push(id);
        }
        (rkey, wr_ids)
    }

    /// The client's completions of `kind` and all the server's, since
    /// events `c0` and `s0`.
    fn completions(
        &self,
        c: ConnHandle,
        s: ConnHandle,
        kind: crate::CompletionKind,
        c0: usize,
        s0: usize,
    ) -> (Vec<crate::Completion>, Vec<crate::Completion>) {
        let client_done: Vec<_> = self.client_events[c0..]
            .iter()
            .filter_map(|(h, e)| match e {
                Event::Completion(x) if *h == c && x.kind == kind => Some(x.clone()),
                _ => None,
            })
            .collect();
        let server_done: Vec<_> = self.server_events[s0..]
            .iter()
            .filter_map(|(h, e)| match e {
                Event::Completion(x) if *h == s => Some(x.clone()),
                _ => None,
            })
            .collect();
        (client_done, server_done)
    }

    /// Whether the data arrived byte-exact (server memory, READ data or
    /// received SENDs) and the server completed each message once.
    fn check_data(&self, op: WorkOp, messages: usize, size: usize, p: &Placed<'_>) -> (bool, bool) {
        use crate::CompletionKind as K;
        let (client_done, server_done) = (p.client_done, p.server_done);
        let mut exactly_once = true;
        let mut byte_exact = true;
        match op {
            WorkOp::Write | WorkOp::WriteImm => {
                let region = self.server.memory.region(p.rkey).expect("registered");
                for i in 0..messages {
                    let at = i * size;
                    if region.data[at..at + size] != pattern(i, size)[..] {
                        byte_exact = false;
                    }
                }
                let mut msg_ids: Vec<u32> = server_done
                    .iter()
                    .filter(|x| matches!(x.kind, K::RemoteWrite | K::RecvWriteImm))
                    .map(|x| x.msg_id)
                    .collect();
                msg_ids.sort_unstable();
                msg_ids.dedup();
                exactly_once &= msg_ids.len() == messages && server_done.len() == messages;
            }
            WorkOp::Read => {
                for x in client_done {
                    let i = p
                        .wr_ids
                        .iter()
                        .position(|w| *w == x.wr_id)
                        .unwrap_or(usize::MAX);
                    if i == usize::MAX || x.data.as_deref() != Some(&pattern(i, size)[..]) {
                        byte_exact = false;
                    }
                }
            }
            WorkOp::Send => {
                let mut got: Vec<Vec<u8>> = server_done
                    .iter()
                    .filter(|x| x.kind == K::Recv)
                    .map(|x| x.data.clone().unwrap_or_default())
                    .collect();
                let mut sent: Vec<Vec<u8>> = (0..messages).map(|i| pattern(i, size)).collect();
                got.sort();
                sent.sort();
                byte_exact = got == sent;
                exactly_once &= server_done.len() == messages;
            }
        }
        (byte_exact, exactly_once)
    }
}

/// What a workload posted and what completed, for its checks.
struct Placed<'a> {
    rkey: u32,
    wr_ids: &'a [u64],
    client_done: &'a [crate::Completion],
    server_done: &'a [crate::Completion],
}
