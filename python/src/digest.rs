//! What pass 2 reads of a bucket as pass 1 matched it ([`Digest`]): per
//! match, its path (an index into the bucket's paths), both copies'
//! capture times and hops; the unmatched transmissions' rows and how they
//! left the window. [`crate::buckets::match_partials`] needs no more. It
//! takes 40 % of the bytes of the whole match at 16 x 150 ([`Matched`],
//! every row with all its fields, which the per-transmission tables
//! read), and pass 2 finds each match's path by index, not by a lookup.
//!
//! Encoded as little-endian columns at their fields' widths: the paths
//! (MessagePack), the unmatched rows (the engine's sightings encoding),
//! then a column per field of the matches and of their hops. Decoding
//! checks every count, index and hop range and names what is wrong.

use analyzer::engine::Fate;
use rustc_hash::FxHashMap;

use crate::blob::{Hop, Reader, Sightings, Widths};
use crate::buckets::{Matched, PathKey, in_capture_order, path_of};

/// "MRD1": the digest's tag and version.
pub(crate) const MAGIC: u32 = 0x3144_524d;

/// A match: its path, the capture times of its copies in captures a and b
/// of the path (a < b), and how many hops each copy carries (its
/// [`Digest::hops`] follow those of the matches before it, a's first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    pub ts_a: u64,
    pub ts_b: u64,
    pub path: u32,
    pub hops_a: u16,
    pub hops_b: u16,
}

impl Pair {
    /// `ts_b - ts_a`, as [`in_capture_order`] gives it.
    pub fn delta(&self) -> i64 {
        (i128::from(self.ts_b) - i128::from(self.ts_a)).clamp(i64::MIN.into(), i64::MAX.into())
            as i64
    }
}

/// A bucket as pass 2 reads it (the module's doc).
#[derive(Debug, Default, PartialEq)]
pub struct Digest {
    pub paths: Vec<PathKey>,
    pub pairs: Vec<Pair>,
    pub hops: Vec<Hop>,
    /// The unmatched transmissions' rows (no hops), with the flows.
    pub unmatched: Sightings,
    /// Per unmatched row: `Some(Lost)` when it left the window, `None`
    /// when it waited to the end.
    pub fates: Vec<Option<Fate>>,
}

/// The bucket's paths, and each match's (an index into them).
pub fn paths(m: &Matched) -> (Vec<PathKey>, Vec<u32>) {
    let s = &m.s;
    let mut keys = Vec::new();
    // (a, b, flow, ev) -> its index in `keys`.
    let mut index: FxHashMap<(u16, u16, u32, u16), u32> = FxHashMap::default();
    let of_match = m
        .pairs
        .iter()
        .map(|&(j, i)| {
            let (lo, hi, _) = in_capture_order(s, j, i);
            let later = &s.rows[i as usize];
            let local = (
                s.rows[lo as usize].capture,
                s.rows[hi as usize].capture,
                later.flow,
                later.ev,
            );
            *index.entry(local).or_insert_with(|| {
                keys.push(path_of(s, j, i).0);
                (keys.len() - 1) as u32
            })
        })
        .collect();
    (keys, of_match)
}

impl Digest {
    /// `m` digested, its paths given ([`paths`]).
    pub fn of(m: &Matched, paths: Vec<PathKey>, path_of_match: &[u32]) -> Digest {
        let s = &m.s;
        let mut d = Digest {
            paths,
            pairs: Vec::with_capacity(m.pairs.len()),
            ..Digest::default()
        };
        for (&(j, i), &path) in m.pairs.iter().zip(path_of_match) {
            let (lo, hi, _) = in_capture_order(s, j, i);
            let (a, b) = (&s.rows[lo as usize], &s.rows[hi as usize]);
            d.hops.extend_from_slice(s.hops(a));
            d.hops.extend_from_slice(s.hops(b));
            d.pairs.push(Pair {
                ts_a: a.ts,
                ts_b: b.ts,
                path,
                hops_a: a.hop_count,
                hops_b: b.hop_count,
            });
        }
        d.unmatched = Sightings {
            host: Sightings::ALL,
            flows: s.flows.clone(),
            rows: m
                .unmatched
                .iter()
                .map(|&(i, _)| {
                    let mut row = s.rows[i as usize];
                    (row.hop_start, row.hop_count) = (0, 0);
                    row
                })
                .collect(),
            hops: Vec::new(),
        };
        d.fates = m.unmatched.iter().map(|&(_, fate)| fate).collect();
        d
    }

    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let paths = rmp_serde::to_vec(&self.paths).map_err(|e| e.to_string())?;
        let mut out = MAGIC.to_le_bytes().to_vec();
        put_u32(&mut out, paths.len());
        out.extend_from_slice(&paths);
        out.extend_from_slice(&self.unmatched.encode(Widths::Full));
        put_u32(&mut out, self.fates.len());
        out.extend(self.fates.iter().map(|f| match f {
            None => 0,
            Some(Fate::Lost) => 1,
            Some(Fate::Unknown) => 2,
        }));
        put_u32(&mut out, self.pairs.len());
        out.reserve(self.pairs.len() * 24 + 4 + self.hops.len() * 8);
        let p = &self.pairs;
        p.iter()
            .for_each(|p| out.extend_from_slice(&p.ts_a.to_le_bytes()));
        p.iter()
            .for_each(|p| out.extend_from_slice(&p.ts_b.to_le_bytes()));
        p.iter()
            .for_each(|p| out.extend_from_slice(&p.path.to_le_bytes()));
        p.iter()
            .for_each(|p| out.extend_from_slice(&p.hops_a.to_le_bytes()));
        p.iter()
            .for_each(|p| out.extend_from_slice(&p.hops_b.to_le_bytes()));
        put_u32(&mut out, self.hops.len());
        let h = &self.hops;
        h.iter()
            .for_each(|h| out.extend_from_slice(&h.0.to_le_bytes()));
        h.iter()
            .for_each(|h| out.extend_from_slice(&h.1.to_le_bytes()));
        h.iter()
            .for_each(|h| out.extend_from_slice(&h.2.to_le_bytes()));
        Ok(out)
    }

    pub fn decode(bytes: &[u8]) -> Result<Digest, String> {
        let mut r = Reader::new(bytes, 0);
        let magic = r.u32("the header")?;
        if magic != MAGIC {
            return Err(format!(
                "not a digest: tag {magic:#010x} (legal: {MAGIC:#010x})"
            ));
        }
        let n = r.u32("the paths' length")? as usize;
        let paths: Vec<PathKey> = rmp_serde::from_slice(r.take(n, "the paths")?)
            .map_err(|e| format!("the paths do not decode: {e}"))?;
        let (unmatched, end) = Sightings::decode(&bytes[r.at()..])?;
        let mut r = Reader::new(bytes, r.at() + end);
        let n = r.u32("the fates' count")? as usize;
        let fates = r
            .take(n, "the fates")?
            .iter()
            .map(|&f| match f {
                0 => Ok(None),
                1 => Ok(Some(Fate::Lost)),
                2 => Ok(Some(Fate::Unknown)),
                v => Err(format!("an unmatched row's fate is {v} (legal: 0, 1, 2)")),
            })
            .collect::<Result<Vec<_>, String>>()?;
        if fates.len() != unmatched.rows.len() {
            return Err(format!(
                "{} fates for {} unmatched rows",
                fates.len(),
                unmatched.rows.len()
            ));
        }
        let n = r.u32("the matches' count")? as usize;
        // Each column is checked against the bytes left before anything
        // is allocated for it.
        let ts_a = r.take(n.saturating_mul(8), "the matches' ts_a")?;
        let ts_b = r.take(n.saturating_mul(8), "the matches' ts_b")?;
        let path = r.take(n.saturating_mul(4), "the matches' paths")?;
        let hops_a = r.take(n.saturating_mul(2), "the matches' hops in a")?;
        let hops_b = r.take(n.saturating_mul(2), "the matches' hops in b")?;
        let mut pairs = Vec::with_capacity(n);
        let mut hop_total = 0usize;
        for k in 0..n {
            let pair = Pair {
                ts_a: u64::from_le_bytes(le(ts_a, k)),
                ts_b: u64::from_le_bytes(le(ts_b, k)),
                path: u32::from_le_bytes(le(path, k)),
                hops_a: u16::from_le_bytes(le(hops_a, k)),
                hops_b: u16::from_le_bytes(le(hops_b, k)),
            };
            if pair.path as usize >= paths.len() {
                return Err(format!(
                    "match {k} names path {} of {}",
                    pair.path,
                    paths.len()
                ));
            }
            hop_total += usize::from(pair.hops_a) + usize::from(pair.hops_b);
            pairs.push(pair);
        }
        let n = r.u32("the hops' count")? as usize;
        if n != hop_total {
            return Err(format!("{n} hops for matches that carry {hop_total}"));
        }
        let switch = r.take(n.saturating_mul(4), "the hops' switches")?;
        let queue = r.take(n.saturating_mul(2), "the hops' queues")?;
        let latency = r.take(n.saturating_mul(2), "the hops' latencies")?;
        let hops = (0..n)
            .map(|k| {
                (
                    u32::from_le_bytes(le(switch, k)),
                    u16::from_le_bytes(le(queue, k)),
                    u16::from_le_bytes(le(latency, k)),
                )
            })
            .collect();
        r.end()?;
        Ok(Digest {
            paths,
            pairs,
            hops,
            unmatched,
            fates,
        })
    }
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

/// Value `k` of a column of `N`-byte values.
fn le<const N: usize>(column: &[u8], k: usize) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&column[k * N..(k + 1) * N]);
    a
}
