//! The engine's MetaRoCE directions (beside `rocev2::RoceTable`): found
//! by key through a small direct-mapped cache, then a map; made at their
//! first packet, evicted least recently seen first beyond
//! `Config::max_flows`. Each packet goes to the direction that sent it
//! and, for a feedback, to the direction it acknowledges; CTRL packets
//! also announce the sender's timestamp unit and whether its start was
//! captured.

use std::net::IpAddr;

use proto_parse::metaroce::{CtrlOp, DEFAULT_TS_UNIT_PS};
use rustc_hash::FxHashMap;

use super::{DirKey, Direction, PackedKey};
use crate::engine::StateSize;
use crate::engine::context::PacketContext;
use crate::observation::{MrBody, MrObs, Observation};

/// Slots of the direction cache (a power of two).
const CACHE_SLOTS: usize = 128;

/// A direction's slot in the cache: the low bits of both addresses and
/// both connection ids, mixed by a multiplication (the two directions of a
/// connection get different slots).
#[inline]
fn cache_slot(key: &DirKey) -> usize {
    let low = |ip: IpAddr| match ip {
        IpAddr::V4(a) => a.to_bits(),
        IpAddr::V6(a) => a.to_bits() as u32,
    };
    let x = (u64::from(low(key.src) ^ key.dst_conn) << 32) | u64::from(low(key.dst) ^ key.src_conn);
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - CACHE_SLOTS.trailing_zeros())) as usize
}

/// The live MetaRoCE directions, by index (a verdict's `flow`).
pub(crate) struct DirectionTable {
    dirs: Vec<Option<Direction>>,
    free: Vec<u32>,
    index: FxHashMap<PackedKey, u32>,
    /// Directions by a hash of their key's low bits (direct-mapped): most
    /// packets find their direction here, without hashing the whole key
    /// for `index`.
    cache: Box<[Option<(DirKey, u32)>; CACHE_SLOTS]>,
    /// ts_unit_ps announced by CTRL, by (sender IP, sender conn).
    units: FxHashMap<(IpAddr, u32), u32>,
    /// Senders (IP, conn) whose CONNECT or ACCEPT was captured.
    started: FxHashMap<(IpAddr, u32), ()>,
    /// Directions evicted so far.
    pub evicted: u64,
}

impl Default for DirectionTable {
    fn default() -> Self {
        DirectionTable {
            dirs: Vec::new(),
            free: Vec::new(),
            index: FxHashMap::default(),
            cache: Box::new([None; CACHE_SLOTS]),
            units: FxHashMap::default(),
            started: FxHashMap::default(),
            evicted: 0,
        }
    }
}

/// Direction `i`, if live (a free function so the table's other fields
/// stay borrowable beside it).
fn dir_mut(dirs: &mut [Option<Direction>], i: u32) -> Option<&mut Direction> {
    dirs.get_mut(i as usize).and_then(Option::as_mut)
}

impl DirectionTable {
    /// Every slot, by index (`None`: free).
    pub fn dirs(&self) -> &[Option<Direction>] {
        &self.dirs
    }

    /// Direction `i`, if live.
    pub fn get(&self, i: u32) -> Option<&Direction> {
        self.dirs.get(i as usize).and_then(Option::as_ref)
    }

    /// The index of the live direction `key`.
    pub fn find(&self, key: &DirKey) -> Option<u32> {
        self.index.get(&key.packed()).copied()
    }

    /// Live directions.
    pub fn live(&self) -> usize {
        self.index.len()
    }

    /// One MetaRoCE packet (not malformed): returns the index of the
    /// direction that sent it and, for a feedback, of the direction it
    /// acknowledges; `None` when its direction could not be made.
    /// `on_new` is called with the index of each direction made (new, or
    /// reusing an evicted one's slot).
    #[inline]
    pub fn ingest(
        &mut self,
        obs: &Observation,
        mr: &MrObs,
        pkt: &mut PacketContext<'_>,
        mut on_new: impl FnMut(u32),
    ) -> Option<(u32, Option<u32>)> {
        let key = DirKey {
            src: obs.src,
            dst: obs.dst,
            src_conn: mr.src_conn,
            dst_conn: mr.dst_conn,
        };
        let ts = pkt.ts;
        let ce = obs.ce();
        let own = self.index_of(key, pkt, None, &mut on_new);
        let dir = dir_mut(&mut self.dirs, own)?;
        dir.last_ts = ts;
        if !matches!(mr.body, MrBody::Ctrl(_)) {
            dir.on_path_packet(mr, ce, pkt.cfg, pkt.v);
        }
        // The direction a feedback acknowledges.
        let mut peer = None;
        match &mr.body {
            MrBody::Data(d) => {
                pkt.v.flow = Some(own);
                let read_done = dir.on_data(pkt, mr, d, ce);
                if let Some(msg_id) = read_done {
                    // The READ_REQ was sent by the reverse direction.
                    if let Some(&req) = self.index.get(&key.reverse().packed())
                        && let Some(req_dir) = dir_mut(&mut self.dirs, req)
                    {
                        req_dir.complete_read(pkt, msg_id);
                    }
                }
            }
            MrBody::Feedback(fb) => {
                dir.c.feedback_sent += 1;
                if ce {
                    pkt.v.ce_marked = true;
                }
                let hold_units = mr.tx_ts.wrapping_sub(fb.rx_ts);
                let unit_ps = if self.units.is_empty() {
                    DEFAULT_TS_UNIT_PS
                } else {
                    self.units
                        .get(&(obs.src, mr.src_conn))
                        .copied()
                        .unwrap_or(DEFAULT_TS_UNIT_PS)
                };
                // u32 x u32 fits a u64.
                let hold_ns = u64::from(hold_units) * u64::from(unit_ps) / 1000;
                let acked = self.index_of(key.reverse(), pkt, Some(own), &mut on_new);
                peer = Some(acked);
                pkt.v.flow = Some(acked);
                if let Some(dir) = dir_mut(&mut self.dirs, acked) {
                    dir.last_ts = ts;
                    dir.on_feedback(pkt, mr.psn, fb, hold_ns);
                }
            }
            MrBody::Ctrl(c) => {
                pkt.v.flow = Some(own);
                dir.c.ctrl += 1;
                let starts = matches!(c.op, CtrlOp::Connect | CtrlOp::Accept);
                if starts {
                    dir.start_seen = true;
                }
                let unit = if c.ts_unit_ps == 0 {
                    DEFAULT_TS_UNIT_PS
                } else {
                    c.ts_unit_ps
                };
                if self.units.len() < 4 * pkt.cfg.max_flows {
                    self.units.insert((obs.src, mr.src_conn), unit);
                }
                // The connection's start is in the capture: every path of
                // this sender starts at path_seq 1.
                if starts && self.started.len() < 4 * pkt.cfg.max_flows {
                    self.started.insert((obs.src, mr.src_conn), ());
                }
            }
            MrBody::Probe => {
                pkt.v.flow = Some(own);
                dir.on_probe(pkt.frame, ts, mr);
            }
            MrBody::Other | MrBody::Malformed => {}
        }
        Some((own, peer))
    }

    /// The index of direction `key`, made if new (evicting others, but
    /// not `protect`, when the table is full).
    #[inline]
    fn index_of(
        &mut self,
        key: DirKey,
        pkt: &PacketContext<'_>,
        protect: Option<u32>,
        on_new: &mut impl FnMut(u32),
    ) -> u32 {
        if let Some((k, i)) = self.cache[cache_slot(&key)]
            && k == key
        {
            return i;
        }
        self.lookup(key, pkt, protect, on_new)
    }

    /// [`DirectionTable::index_of`] past the cache: the map, or a new
    /// direction.
    #[inline(never)]
    fn lookup(
        &mut self,
        key: DirKey,
        pkt: &PacketContext<'_>,
        protect: Option<u32>,
        on_new: &mut impl FnMut(u32),
    ) -> u32 {
        let packed = key.packed();
        if let Some(&i) = self.index.get(&packed) {
            self.cache[cache_slot(&key)] = Some((key, i));
            return i;
        }
        if self.index.len() >= pkt.cfg.max_flows {
            self.evict(protect, pkt.cfg.max_flows);
        }
        let mut dir = Direction::new(key, pkt.frame, pkt.ts, pkt.cfg);
        dir.start_seen = self.started.contains_key(&(key.src, key.src_conn));
        let i = match self.free.pop() {
            Some(i) => {
                self.dirs[i as usize] = Some(dir);
                i
            }
            None => {
                self.dirs.push(Some(dir));
                (self.dirs.len() - 1) as u32
            }
        };
        self.index.insert(packed, i);
        self.cache[cache_slot(&key)] = Some((key, i));
        on_new(i);
        i
    }

    /// Evicts the least recently seen sixteenth of the directions.
    fn evict(&mut self, protect: Option<u32>, max_flows: usize) {
        let mut ages: Vec<(u64, u32)> = self
            .dirs
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.as_ref().map(|d| (d.last_ts, i as u32)))
            .filter(|(_, i)| Some(*i) != protect)
            .collect();
        if ages.is_empty() {
            return;
        }
        // Evicted slots are reused: no cache entry may point at one.
        self.cache.fill(None);
        let n = (ages.len() / 16).max(1);
        ages.select_nth_unstable(n - 1);
        for &(_, i) in &ages[..n] {
            if let Some(dir) = self.dirs[i as usize].take() {
                self.index.remove(&dir.key.packed());
                self.free.push(i);
                self.evicted += 1;
            }
        }
        if self.units.len() > max_flows {
            self.units.clear();
        }
        if self.started.len() > max_flows {
            self.started.clear();
        }
    }

    /// Every live direction, mutable (the clock moved without a packet).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Direction> {
        self.dirs.iter_mut().flatten()
    }

    /// Adds the table's sizes to `s`.
    pub fn add_size(&self, s: &mut StateSize) {
        s.directions += self.index.len();
        s.ts_units += self.units.len() + self.started.len();
        for dir in self.dirs.iter().flatten() {
            let d = dir.size();
            s.window_slots += d.window_slots;
            s.paths += d.paths;
            s.messages += d.messages;
            s.pending += d.pending_last + d.pending_reads + d.retx_psns;
            s.late_echoes += d.late_echoes;
            s.stalls += d.stalls;
            s.paths_overflow += dir.paths_overflow;
        }
    }
}
