//! The reduce's sightings as bytes: what the Spark job (the `metaroce`
//! Python package) moves from a host's task to its bucket's partition,
//! and what a bucket keeps between its two passes. The format is the
//! engine's, beside the row mode that reads it ([`super::rows`]), so it
//! is tested without Python.
//!
//! Fixed-width little-endian columns, not a self-describing format: a
//! bucket holds millions of rows, and encoding or decoding them is a copy
//! per field. The rows and the hops are stored column by column, and the
//! row columns that grow along a capture (`ts`, `frame`, `hop_start`) as
//! the difference from the row before: the job compresses the blobs to
//! move them, and columns of small, alike values compress to a fraction
//! of interleaved rows. Decoding checks every length and index and fails
//! with a message naming what is wrong, never panics.

use std::net::{IpAddr, Ipv6Addr};

use super::{FlowPath, Transmission};

/// A flow as the matcher keys it: a MetaRoCE direction, or a RoCEv2 flow
/// (`src_conn` 0, `dst_conn` its destination QP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Flow {
    pub rocev2: bool,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_conn: u32,
    pub dst_conn: u32,
}

impl Flow {
    pub fn of(tx: &Transmission) -> Flow {
        Flow {
            rocev2: tx.rocev2,
            src: tx.src,
            dst: tx.dst,
            src_conn: tx.src_conn,
            dst_conn: tx.dst_conn,
        }
    }

    pub fn path(&self, ev: u16) -> FlowPath {
        FlowPath {
            rocev2: self.rocev2,
            src: self.src,
            dst: self.dst,
            src_conn: self.src_conn,
            dst_conn: self.dst_conn,
            ev,
        }
    }

    pub fn of_path(p: &FlowPath) -> Flow {
        Flow {
            rocev2: p.rocev2,
            src: p.src,
            dst: p.dst,
            src_conn: p.src_conn,
            dst_conn: p.dst_conn,
        }
    }
}

/// A switch a copy crossed (HOP_TELEMETRY): switch id, queue depth, hop
/// latency.
pub type Hop = (u32, u16, u16);

/// One sighting: the transmission's key beyond its flow (an index into
/// [`Sightings::flows`]), where and when it was captured, and its hops
/// (`hop_count` entries of [`Sightings::hops`] from `hop_start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub capture: u16,
    pub ptype: u8,
    pub ecn: u8,
    pub ev: u16,
    pub path_seq: u16,
    pub hop_count: u16,
    pub flow: u32,
    pub psn: u32,
    pub tx_ts: u32,
    pub hop_start: u32,
    pub ts: u64,
    pub frame: u64,
}

const ROW_BYTES: usize = 2 + 1 + 1 + 2 + 2 + 2 + 4 + 4 + 4 + 4 + 8 + 8;
const FLOW_BYTES: usize = 1 + 17 + 17 + 4 + 4;
const HOP_BYTES: usize = 8;
/// "MRS3": the format's tag and version (3: columns, differences).
const MAGIC: u32 = 0x3353_524d;

/// Sightings with their flows and hops: one host's sightings of one
/// bucket (`host` its index in the job's list of hosts read, `capture`
/// 0), or a bucket's sightings of every host (`host` [`Sightings::ALL`],
/// `capture` set).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sightings {
    pub host: u32,
    pub flows: Vec<Flow>,
    pub rows: Vec<Row>,
    pub hops: Vec<Hop>,
}

impl Row {
    pub fn transmission(&self, flow: &Flow) -> Transmission {
        Transmission {
            rocev2: flow.rocev2,
            src: flow.src,
            dst: flow.dst,
            src_conn: flow.src_conn,
            dst_conn: flow.dst_conn,
            ptype: self.ptype,
            psn: self.psn,
            tx_ts: self.tx_ts,
            ev: self.ev,
            path_seq: self.path_seq,
        }
    }
}

fn put_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            out.push(4);
            out.extend_from_slice(&v4.to_ipv6_mapped().octets());
        }
        IpAddr::V6(v6) => {
            out.push(6);
            out.extend_from_slice(&v6.octets());
        }
    }
}

/// Bounds-checked reads of the encoding.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], at: usize) -> Self {
        Reader { bytes, at }
    }

    /// Fails unless every byte was read.
    pub fn end(&self) -> Result<(), String> {
        match self.bytes.len().saturating_sub(self.at) {
            0 => Ok(()),
            n => Err(format!("{n} bytes left over after byte {}", self.at)),
        }
    }

    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!(
                "truncated at byte {} reading {what} ({n} bytes wanted, {} left)",
                self.at,
                self.bytes.len().saturating_sub(self.at)
            ));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let s = self.take(N, what)?;
        let mut a = [0; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u32(&mut self, what: &str) -> Result<u32, String> {
        self.array::<4>(what).map(u32::from_le_bytes)
    }

    fn ip(&mut self, what: &str) -> Result<IpAddr, String> {
        let family = self.array::<1>(what)?[0];
        let v6 = Ipv6Addr::from(self.array::<16>(what)?);
        match family {
            4 => v6
                .to_ipv4_mapped()
                .map(IpAddr::V4)
                .ok_or_else(|| format!("{what}: an IPv4 address not stored IPv4-mapped")),
            6 => Ok(IpAddr::V6(v6)),
            f => Err(format!(
                "{what}: address family {f} (legal: 4, 6) at byte {}",
                self.at - 17
            )),
        }
    }
}

/// One fixed-width field of every item, in item order.
fn put_column<T, const N: usize>(out: &mut Vec<u8>, items: &[T], field: impl Fn(&T) -> [u8; N]) {
    for item in items {
        out.extend_from_slice(&field(item));
    }
}

/// A growing field as differences from the value before (the first from
/// 0), each `width` bytes: the low bytes of the wrapping difference,
/// which the wrapping sum of the decoder undoes.
fn put_differences(out: &mut Vec<u8>, values: impl Iterator<Item = u64>, width: usize) {
    let mut last = 0u64;
    for v in values {
        out.extend_from_slice(&v.wrapping_sub(last).to_le_bytes()[..width]);
        last = v;
    }
}

/// The columns of a section whose length was checked: each taken in turn.
struct Columns<'a>(&'a [u8]);

impl<'a> Columns<'a> {
    fn next(&mut self, len: usize) -> &'a [u8] {
        let (column, rest) = self.0.split_at(len);
        self.0 = rest;
        column
    }
}

fn le<const N: usize>(s: &[u8], at: usize) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&s[at..at + N]);
    a
}

impl Sightings {
    /// `host` of a bucket's sightings of every host.
    pub const ALL: u32 = u32::MAX;

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            16 + self.flows.len() * FLOW_BYTES
                + self.rows.len() * ROW_BYTES
                + self.hops.len() * HOP_BYTES,
        );
        for n in [
            MAGIC,
            self.host,
            self.flows.len() as u32,
            self.rows.len() as u32,
            self.hops.len() as u32,
        ] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        for f in &self.flows {
            out.push(u8::from(f.rocev2));
            put_ip(&mut out, f.src);
            put_ip(&mut out, f.dst);
            out.extend_from_slice(&f.src_conn.to_le_bytes());
            out.extend_from_slice(&f.dst_conn.to_le_bytes());
        }
        let rows = &self.rows;
        put_column(&mut out, rows, |r| r.capture.to_le_bytes());
        put_column(&mut out, rows, |r| [r.ptype]);
        put_column(&mut out, rows, |r| [r.ecn]);
        put_column(&mut out, rows, |r| r.ev.to_le_bytes());
        put_column(&mut out, rows, |r| r.path_seq.to_le_bytes());
        put_column(&mut out, rows, |r| r.hop_count.to_le_bytes());
        put_column(&mut out, rows, |r| r.flow.to_le_bytes());
        put_column(&mut out, rows, |r| r.psn.to_le_bytes());
        put_column(&mut out, rows, |r| r.tx_ts.to_le_bytes());
        put_differences(&mut out, rows.iter().map(|r| u64::from(r.hop_start)), 4);
        put_differences(&mut out, rows.iter().map(|r| r.ts), 8);
        put_differences(&mut out, rows.iter().map(|r| r.frame), 8);
        put_column(&mut out, &self.hops, |h| h.0.to_le_bytes());
        put_column(&mut out, &self.hops, |h| h.1.to_le_bytes());
        put_column(&mut out, &self.hops, |h| h.2.to_le_bytes());
        out
    }

    /// The sightings of `bytes` and where they end (a kept bucket has
    /// more after them).
    pub fn decode(bytes: &[u8]) -> Result<(Sightings, usize), String> {
        let mut r = Reader::new(bytes, 0);
        let magic = r.u32("the header")?;
        if magic != MAGIC {
            return Err(format!(
                "not a sightings blob: tag {magic:#010x} (legal: {MAGIC:#010x})"
            ));
        }
        let host = r.u32("the header")?;
        let [flows, rows, hops] = [(); 3].map(|_| r.u32("the header"));
        let (flows, rows, hops) = (flows? as usize, rows? as usize, hops? as usize);
        // Each count is checked against the bytes left before anything
        // is allocated for it.
        let left = bytes.len() - r.at;
        let need = flows
            .checked_mul(FLOW_BYTES)
            .zip(rows.checked_mul(ROW_BYTES))
            .zip(hops.checked_mul(HOP_BYTES))
            .and_then(|((f, r), h)| f.checked_add(r)?.checked_add(h));
        if need.is_none_or(|n| n > left) {
            return Err(format!(
                "{flows} flows, {rows} rows and {hops} hops announced, {left} bytes follow"
            ));
        }
        let mut out = Sightings {
            host,
            flows: Vec::with_capacity(flows),
            rows: Vec::with_capacity(rows),
            hops: Vec::with_capacity(hops),
        };
        for _ in 0..flows {
            let rocev2 = match r.array::<1>("a flow")?[0] {
                0 => false,
                1 => true,
                v => return Err(format!("a flow's rocev2 flag is {v} (legal: 0, 1)")),
            };
            out.flows.push(Flow {
                rocev2,
                src: r.ip("a flow's src")?,
                dst: r.ip("a flow's dst")?,
                src_conn: r.u32("a flow")?,
                dst_conn: r.u32("a flow")?,
            });
        }
        let mut columns = Columns(r.take(rows * ROW_BYTES, "the rows")?);
        let (capture, ptype, ecn) = (
            columns.next(2 * rows),
            columns.next(rows),
            columns.next(rows),
        );
        let (ev, path_seq, hop_count) = (
            columns.next(2 * rows),
            columns.next(2 * rows),
            columns.next(2 * rows),
        );
        let (flow, psn, tx_ts) = (
            columns.next(4 * rows),
            columns.next(4 * rows),
            columns.next(4 * rows),
        );
        let (hop_start, ts, frame) = (
            columns.next(4 * rows),
            columns.next(8 * rows),
            columns.next(8 * rows),
        );
        let (mut last_hop_start, mut last_ts, mut last_frame) = (0u32, 0u64, 0u64);
        for i in 0..rows {
            last_hop_start = last_hop_start.wrapping_add(u32::from_le_bytes(le(hop_start, 4 * i)));
            last_ts = last_ts.wrapping_add(u64::from_le_bytes(le(ts, 8 * i)));
            last_frame = last_frame.wrapping_add(u64::from_le_bytes(le(frame, 8 * i)));
            let row = Row {
                capture: u16::from_le_bytes(le(capture, 2 * i)),
                ptype: ptype[i],
                ecn: ecn[i],
                ev: u16::from_le_bytes(le(ev, 2 * i)),
                path_seq: u16::from_le_bytes(le(path_seq, 2 * i)),
                hop_count: u16::from_le_bytes(le(hop_count, 2 * i)),
                flow: u32::from_le_bytes(le(flow, 4 * i)),
                psn: u32::from_le_bytes(le(psn, 4 * i)),
                tx_ts: u32::from_le_bytes(le(tx_ts, 4 * i)),
                hop_start: last_hop_start,
                ts: last_ts,
                frame: last_frame,
            };
            if row.flow as usize >= flows {
                return Err(format!("row {i} names flow {} of {flows}", row.flow));
            }
            if row.hop_start as usize + row.hop_count as usize > hops {
                return Err(format!(
                    "row {i}'s hops {}..+{} run past the {hops} hops",
                    row.hop_start, row.hop_count
                ));
            }
            out.rows.push(row);
        }
        let mut columns = Columns(r.take(hops * HOP_BYTES, "the hops")?);
        let (switch, queue, latency) = (
            columns.next(4 * hops),
            columns.next(2 * hops),
            columns.next(2 * hops),
        );
        out.hops.extend((0..hops).map(|i| {
            (
                u32::from_le_bytes(le(switch, 4 * i)),
                u16::from_le_bytes(le(queue, 2 * i)),
                u16::from_le_bytes(le(latency, 2 * i)),
            )
        }));
        Ok((out, r.at))
    }

    pub fn flow(&self, row: &Row) -> &Flow {
        &self.flows[row.flow as usize]
    }

    pub fn hops(&self, row: &Row) -> &[Hop] {
        let start = row.hop_start as usize;
        &self.hops[start..start + row.hop_count as usize]
    }

    /// Adds another host's sightings, its rows in capture `capture`.
    pub fn append(&mut self, other: Sightings, capture: u16, flow_index: &mut FlowIndex) {
        let flows: Vec<u32> = other
            .flows
            .iter()
            .map(|f| flow_index.index(f, &mut self.flows))
            .collect();
        let hop_base = self.hops.len() as u32;
        self.rows.extend(other.rows.into_iter().map(|r| Row {
            capture,
            flow: flows[r.flow as usize],
            hop_start: r.hop_start + hop_base,
            ..r
        }));
        self.hops.extend(other.hops);
    }
}

/// Each flow's index in a list of flows.
#[derive(Default)]
pub struct FlowIndex(rustc_hash::FxHashMap<Flow, u32>);

impl FlowIndex {
    pub fn index(&mut self, flow: &Flow, flows: &mut Vec<Flow>) -> u32 {
        *self.0.entry(*flow).or_insert_with(|| {
            flows.push(*flow);
            (flows.len() - 1) as u32
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn flow(i: u8, v6: bool) -> Flow {
        let (src, dst) = if v6 {
            (
                IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(i))),
                IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, u16::from(i))),
            )
        } else {
            (IpAddr::from([10, 0, 0, i]), IpAddr::from([10, 0, 1, i]))
        };
        Flow {
            rocev2: v6,
            src,
            dst,
            src_conn: u32::from(i) * 3,
            dst_conn: u32::from(i) * 5 + 1,
        }
    }

    fn row(capture: u16, flow: u32, i: u32, hop_start: u32, hop_count: u16) -> Row {
        Row {
            capture,
            ptype: (i % 7) as u8,
            ecn: (i % 4) as u8,
            ev: (i * 11) as u16,
            path_seq: (i * 13) as u16,
            hop_count,
            flow,
            psn: i * 17,
            tx_ts: i * 19,
            hop_start,
            ts: u64::from(i) * 1_000_003,
            frame: (1 << 45) + u64::from(i),
        }
    }

    /// Two flows (IPv4 and IPv6), three rows (one with two hops, a
    /// capture past 255), three hops.
    fn sample() -> Sightings {
        Sightings {
            host: 7,
            flows: vec![flow(1, false), flow(2, true)],
            rows: vec![
                row(0, 0, 1, 0, 0),
                row(300, 1, 2, 0, 2),
                row(u16::MAX, 0, 3, 2, 1),
            ],
            hops: vec![(1, 2, 3), (4, 5, 6), (u32::MAX, u16::MAX, 0)],
        }
    }

    #[test]
    fn round_trip() {
        let s = sample();
        let bytes = s.encode();
        let (back, end) = Sightings::decode(&bytes).unwrap();
        assert_eq!(back, s);
        assert_eq!(end, bytes.len());
        assert_eq!(back.hops(&back.rows[1]), &s.hops[0..2]);
        assert_eq!(back.flow(&back.rows[1]), &s.flows[1]);
    }

    #[test]
    fn decode_stops_at_its_end() {
        let mut bytes = sample().encode();
        let len = bytes.len();
        bytes.extend_from_slice(b"kept bucket");
        assert_eq!(Sightings::decode(&bytes).unwrap().1, len);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = sample().encode();
        for n in 0..bytes.len() {
            let err = Sightings::decode(&bytes[..n]).expect_err("truncated blob decoded");
            assert!(!err.is_empty(), "{n}");
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let good = sample().encode();
        let mut tag = good.clone();
        tag[0] ^= 1;
        assert!(
            Sightings::decode(&tag)
                .unwrap_err()
                .contains("not a sightings blob")
        );
        // Row 0's flow index (the flow column follows 10 bytes of
        // columns per row) past the flows.
        let rows_at = 20 + 2 * FLOW_BYTES;
        let mut flow_ix = good.clone();
        flow_ix[rows_at + 3 * 10] = 9;
        let err = Sightings::decode(&flow_ix).unwrap_err();
        assert!(err.contains("row 0 names flow 9 of 2"), "{err}");
        // Row 2's hop count (the column after 8 bytes per row) runs past
        // the hops.
        let mut hops = good.clone();
        hops[rows_at + 3 * 8 + 2 * 2] = 5;
        let err = Sightings::decode(&hops).unwrap_err();
        assert!(err.contains("row 2's hops"), "{err}");
        // The first flow's address family.
        let mut family = good.clone();
        family[20 + 1] = 5;
        let err = Sightings::decode(&family).unwrap_err();
        assert!(err.contains("address family 5 (legal: 4, 6)"), "{err}");
        // A count larger than the bytes that follow allocates nothing.
        let mut count = good;
        count[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = Sightings::decode(&count).unwrap_err();
        assert!(err.contains("announced"), "{err}");
    }

    #[test]
    fn append_renumbers_flows_hops_and_capture() {
        let mut all = Sightings {
            host: Sightings::ALL,
            ..Sightings::default()
        };
        let mut index = FlowIndex::default();
        all.append(sample(), 1000, &mut index);
        all.append(sample(), 1001, &mut index);
        assert_eq!(all.flows.len(), 2);
        assert_eq!(all.rows.len(), 6);
        assert_eq!(all.hops.len(), 6);
        let last = all.rows[5];
        assert_eq!(last.capture, 1001);
        assert_eq!(all.hops(&last), &sample().hops[2..3]);
        assert_eq!(all.flow(&last), &sample().flows[0]);
    }

    proptest! {
        /// The differences hold whatever the order: a bucket's rows
        /// sorted by time have their hops out of order, and times and
        /// frames may be anywhere in their range.
        #[test]
        fn any_rows_round_trip(
            fields in proptest::collection::vec((any::<u64>(), any::<u64>(), 0u32..4, 0u32..10_000), 0..40),
        ) {
            let mut s = sample();
            s.rows = fields
                .iter()
                .map(|&(ts, frame, hop_start, i)| Row {
                    ts,
                    frame,
                    hop_start,
                    hop_count: (hop_start < 3).into(),
                    flow: i % 2,
                    ..row(i as u16, 0, i, 0, 0)
                })
                .collect();
            let bytes = s.encode();
            prop_assert_eq!(Sightings::decode(&bytes).unwrap(), (s, bytes.len()));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = Sightings::decode(&bytes);
        }

        #[test]
        fn corrupted_blobs_never_panic(at in 0usize..200, byte in any::<u8>()) {
            let mut bytes = sample().encode();
            let at = at % bytes.len();
            bytes[at] = byte;
            if let Ok((s, end)) = Sightings::decode(&bytes) {
                prop_assert!(end <= bytes.len());
                for r in &s.rows {
                    let _ = (s.flow(r), s.hops(r));
                }
            }
        }
    }
}
