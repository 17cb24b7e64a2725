//! The reduce's sightings as bytes: what the Spark job (the `metaroce`
//! Python package) moves from a host's task to its bucket's partition,
//! and what a bucket keeps between its two passes. The format is the
//! engine's, beside the row mode that reads it ([`super::rows`]), so it
//! is tested without Python.
//!
//! Little-endian columns, not a self-describing format: a bucket holds
//! millions of rows, and encoding or decoding them is a copy per field.
//! Each column is stored at the narrowest width of 1, 2, 4 or 8 bytes that
//! holds all its values (a byte in front says which), and the columns
//! that grow along a capture (`ts`, `frame`, `hop_start`) as the
//! zigzag-coded difference from the row before: a host's rows then take
//! about half the bytes of their fields, before the job compresses them.
//! Decoding checks every width, length and index and fails with a message
//! naming what is wrong, never panics.

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

/// A row's columns and a hop's, each at least a byte wide: a count is
/// checked against the bytes that follow before anything is allocated.
const ROW_COLUMNS: usize = 12;
/// The growing columns' first values.
const FIRST_VALUES: usize = 3 * 8;
const HOP_COLUMNS: usize = 3;
/// A row's and a hop's bytes at their fields' full widths.
const ROW_BYTES_AT_MOST: usize = 2 + 1 + 1 + 2 + 2 + 2 + 4 + 4 + 4 + 8 + 8 + 8;
const HOP_BYTES_AT_MOST: usize = 4 + 2 + 2;
const FLOW_BYTES: usize = 1 + 17 + 17 + 4 + 4;
/// "MRS4": the format's tag and version (4: columns of chosen width).
const MAGIC: u32 = 0x3453_524d;

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

    /// Where the next read starts.
    pub fn at(&self) -> usize {
        self.at
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

/// How wide [`Sightings::encode`] stores each column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Widths {
    /// The narrowest that holds all of a column's values: fewer bytes to
    /// compress and move (a host's blob, which crosses Spark).
    Narrowest,
    /// Each field's own width, with no pass to find a narrower one (a
    /// kept bucket, which stays on its executor's disk).
    Full,
}

/// A column of [`put_columns`]: its field's width in bytes, and whether
/// it is stored as differences (a growing field: its first value, 8
/// bytes, then the difference of each value from the one before,
/// zigzag-coded, so that small steps either way take few bytes).
#[derive(Clone, Copy)]
struct ColumnKind {
    field_width: usize,
    differences: bool,
}

const fn plain(field_width: usize) -> ColumnKind {
    ColumnKind {
        field_width,
        differences: false,
    }
}

const GROWING: ColumnKind = ColumnKind {
    field_width: 8,
    differences: true,
};

/// `items`' `N` fields as `N` columns, each its width's byte, then each
/// value's low bytes, written in one pass over the items (a pass per
/// column would read every item `N` times).
fn put_columns<T, const N: usize>(
    out: &mut Vec<u8>,
    widths: Widths,
    kinds: [ColumnKind; N],
    items: &[T],
    fields: impl Fn(&T) -> [u64; N],
) {
    let first = items.first().map_or([0; N], &fields);
    // What each item stores, given the fields of the item before.
    let stored = |before: &mut [u64; N], item: &T| {
        let values = fields(item);
        let mut out = values;
        for k in 0..N {
            if kinds[k].differences {
                out[k] = zigzag(values[k].wrapping_sub(before[k]) as i64);
            }
        }
        *before = values;
        out
    };
    let width: [usize; N] = match widths {
        Widths::Full => kinds.map(|k| k.field_width),
        Widths::Narrowest => {
            // The highest bit set in any value (an OR of them all).
            let (mut any, mut before) = ([0; N], first);
            for item in items {
                let values = stored(&mut before, item);
                for k in 0..N {
                    any[k] |= values[k];
                }
            }
            any.map(|bits| {
                WIDTHS
                    .into_iter()
                    .find(|&w| w == 8 || bits >> (8 * w) == 0)
                    .unwrap_or(8)
            })
        }
    };
    let n = items.len();
    let mut at = [0; N];
    let mut end = out.len();
    for k in 0..N {
        if kinds[k].differences {
            end += 8;
        }
        at[k] = end + 1;
        end += 1 + n * width[k];
    }
    out.resize(end, 0);
    for k in 0..N {
        if kinds[k].differences {
            out[at[k] - 9..at[k] - 1].copy_from_slice(&first[k].to_le_bytes());
        }
        out[at[k] - 1] = width[k] as u8;
    }
    let mut before = first;
    for (i, item) in items.iter().enumerate() {
        let values = stored(&mut before, item);
        for k in 0..N {
            let (w, v) = (width[k], values[k]);
            let slot = &mut out[at[k] + i * w..at[k] + (i + 1) * w];
            match w {
                1 => slot[0] = v as u8,
                2 => slot.copy_from_slice(&(v as u16).to_le_bytes()),
                4 => slot.copy_from_slice(&(v as u32).to_le_bytes()),
                _ => slot.copy_from_slice(&v.to_le_bytes()),
            }
        }
    }
}

/// A difference either way as an unsigned number that small steps keep
/// small (0, -1, 1, -2, ... as 0, 1, 2, 3, ...).
fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn undo_zigzag(z: u64) -> u64 {
    ((z >> 1) as i64 ^ -((z & 1) as i64)) as u64
}

const WIDTHS: [usize; 4] = [1, 2, 4, 8];

/// One column as stored: `width` bytes per value.
struct Column<'a> {
    width: usize,
    bytes: &'a [u8],
}

impl Column<'_> {
    #[inline(always)]
    fn get(&self, i: usize) -> u64 {
        let at = i * self.width;
        match self.width {
            1 => u64::from(self.bytes[at]),
            2 => u64::from(u16::from_le_bytes([self.bytes[at], self.bytes[at + 1]])),
            4 => u64::from(u32::from_le_bytes(le(self.bytes, at))),
            _ => u64::from_le_bytes(le(self.bytes, at)),
        }
    }
}

fn le<const N: usize>(s: &[u8], at: usize) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(&s[at..at + N]);
    a
}

impl<'a> Reader<'a> {
    /// A column of `n` values of a field `max_width` bytes wide.
    fn column(&mut self, n: usize, max_width: usize, what: &str) -> Result<Column<'a>, String> {
        let at = self.at;
        let width = usize::from(self.array::<1>(what)?[0]);
        if !WIDTHS.contains(&width) || width > max_width {
            return Err(format!(
                "{what}: width {width} at byte {at} (legal: 1, 2, 4 or 8, at most {max_width})"
            ));
        }
        let bytes = self.take(n * width, what)?;
        Ok(Column { width, bytes })
    }
}

impl Sightings {
    /// `host` of a bucket's sightings of every host.
    pub const ALL: u32 = u32::MAX;

    pub fn encode(&self, widths: Widths) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            20 + self.flows.len() * FLOW_BYTES
                + FIRST_VALUES
                + ROW_COLUMNS
                + HOP_COLUMNS
                + self.rows.len() * ROW_BYTES_AT_MOST
                + self.hops.len() * HOP_BYTES_AT_MOST,
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
        let row_columns = [
            plain(2), // capture
            plain(1), // ptype
            plain(1), // ecn
            plain(2), // ev
            plain(2), // path_seq
            plain(2), // hop_count
            plain(4), // flow
            plain(4), // psn
            plain(4), // tx_ts
            GROWING,  // hop_start
            GROWING,  // ts
            GROWING,  // frame
        ];
        put_columns(&mut out, widths, row_columns, &self.rows, |r| {
            [
                r.capture.into(),
                r.ptype.into(),
                r.ecn.into(),
                r.ev.into(),
                r.path_seq.into(),
                r.hop_count.into(),
                r.flow.into(),
                r.psn.into(),
                r.tx_ts.into(),
                r.hop_start.into(),
                r.ts,
                r.frame,
            ]
        });
        let hop_columns = [plain(4), plain(2), plain(2)];
        put_columns(&mut out, widths, hop_columns, &self.hops, |h| {
            [h.0.into(), h.1.into(), h.2.into()]
        });
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
        // is allocated for it (every column is at least a byte wide).
        let left = bytes.len() - r.at;
        let need = flows
            .checked_mul(FLOW_BYTES)
            .zip(rows.checked_mul(ROW_COLUMNS))
            .zip(hops.checked_mul(HOP_COLUMNS))
            .and_then(|((f, r), h)| f.checked_add(r)?.checked_add(h)?.checked_add(FIRST_VALUES));
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
        // A column's width is at most its field's, so each value fits
        // its field: the casts below keep every bit.
        let mut c = |max_width, what| r.column(rows, max_width, what);
        let capture = c(2, "the capture column")?;
        let ptype = c(1, "the ptype column")?;
        let ecn = c(1, "the ecn column")?;
        let ev = c(2, "the ev column")?;
        let path_seq = c(2, "the path_seq column")?;
        let hop_count = c(2, "the hop_count column")?;
        let flow = c(4, "the flow column")?;
        let psn = c(4, "the psn column")?;
        let tx_ts = c(4, "the tx_ts column")?;
        let mut d = |what| -> Result<(u64, Column<'_>), String> {
            let first = u64::from_le_bytes(r.array::<8>(what)?);
            Ok((first, r.column(rows, 8, what)?))
        };
        let (mut last_hop_start, hop_start) = d("the hop_start column")?;
        let (mut last_ts, ts) = d("the ts column")?;
        let (mut last_frame, frame) = d("the frame column")?;
        for i in 0..rows {
            last_hop_start = last_hop_start.wrapping_add(undo_zigzag(hop_start.get(i)));
            last_ts = last_ts.wrapping_add(undo_zigzag(ts.get(i)));
            last_frame = last_frame.wrapping_add(undo_zigzag(frame.get(i)));
            let row = Row {
                capture: capture.get(i) as u16,
                ptype: ptype.get(i) as u8,
                ecn: ecn.get(i) as u8,
                ev: ev.get(i) as u16,
                path_seq: path_seq.get(i) as u16,
                hop_count: hop_count.get(i) as u16,
                flow: flow.get(i) as u32,
                psn: psn.get(i) as u32,
                tx_ts: tx_ts.get(i) as u32,
                hop_start: u32::try_from(last_hop_start).map_err(|_| {
                    format!("row {i}'s hops start at {last_hop_start}, past any count")
                })?,
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
        let mut c = |max_width, what| r.column(hops, max_width, what);
        let switch = c(4, "the hops' switch column")?;
        let queue = c(2, "the hops' queue column")?;
        let latency = c(2, "the hops' latency column")?;
        out.hops.extend((0..hops).map(|i| {
            (
                switch.get(i) as u32,
                queue.get(i) as u16,
                latency.get(i) as u16,
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

/// Each flow's index in a list of flows. The last flow looked up is
/// remembered: a capture's rows come in bursts of one flow.
#[derive(Default)]
pub struct FlowIndex {
    index: rustc_hash::FxHashMap<Flow, u32>,
    last: Option<(Flow, u32)>,
}

impl FlowIndex {
    pub fn index(&mut self, flow: &Flow, flows: &mut Vec<Flow>) -> u32 {
        if let Some((last, i)) = &self.last
            && last == flow
        {
            return *i;
        }
        let i = *self.index.entry(*flow).or_insert_with(|| {
            flows.push(*flow);
            (flows.len() - 1) as u32
        });
        self.last = Some((*flow, i));
        i
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
        let bytes = s.encode(Widths::Narrowest);
        let (back, end) = Sightings::decode(&bytes).unwrap();
        assert_eq!(back, s);
        assert_eq!(end, bytes.len());
        let full = s.encode(Widths::Full);
        assert!(full.len() > bytes.len());
        assert_eq!(Sightings::decode(&full).unwrap(), (sample(), full.len()));
        assert_eq!(back.hops(&back.rows[1]), &s.hops[0..2]);
        assert_eq!(back.flow(&back.rows[1]), &s.flows[1]);
    }

    #[test]
    fn columns_take_the_width_of_their_largest_value() {
        let s = sample();
        let mut one_row = Sightings {
            rows: vec![s.rows[0]],
            hops: vec![],
            ..s
        };
        one_row.rows[0].hop_count = 0;
        let small = one_row.encode(Widths::Narrowest).len();
        one_row.rows[0].psn = u32::MAX;
        assert_eq!(
            one_row.encode(Widths::Narrowest).len(),
            small + 3,
            "psn from 1 to 4 bytes"
        );
        // Differences either way are small.
        one_row.rows = (0..100u64)
            .map(|i| Row {
                ts: 1_000_000 + (i % 2) * 200,
                ..one_row.rows[0]
            })
            .collect();
        let bytes = one_row.encode(Widths::Narrowest);
        assert_eq!(Sightings::decode(&bytes).unwrap().0, one_row);
        // Nine plain columns, then hop_start's first value and column,
        // then ts's first value and its width.
        let mut at = 20 + FLOW_BYTES * 2;
        for k in 0..10 {
            at += if k == 9 { 8 } else { 0 };
            at += 1 + 100 * usize::from(bytes[at]);
        }
        assert_eq!(bytes[at + 8], 2, "steps of 200 either way take 2 bytes");
    }

    #[test]
    fn decode_stops_at_its_end() {
        let mut bytes = sample().encode(Widths::Narrowest);
        let len = bytes.len();
        bytes.extend_from_slice(b"kept bucket");
        assert_eq!(Sightings::decode(&bytes).unwrap().1, len);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = sample().encode(Widths::Narrowest);
        for n in 0..bytes.len() {
            let err = Sightings::decode(&bytes[..n]).expect_err("truncated blob decoded");
            assert!(!err.is_empty(), "{n}");
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let good = sample().encode(Widths::Narrowest);
        let mut tag = good.clone();
        tag[0] ^= 1;
        assert!(
            Sightings::decode(&tag)
                .unwrap_err()
                .contains("not a sightings blob")
        );
        // Where the row column `k` starts (its width byte), and its
        // width.
        let rows_at = 20 + 2 * FLOW_BYTES;
        let column = |k: usize| (0..k).fold(rows_at, |at, _| at + 1 + 3 * usize::from(good[at]));
        let flow_at = column(6);
        assert_eq!(good[flow_at], 1, "the sample's flow indexes take a byte");
        let mut flow_ix = good.clone();
        flow_ix[flow_at + 1] = 9;
        let err = Sightings::decode(&flow_ix).unwrap_err();
        assert!(err.contains("row 0 names flow 9 of 2"), "{err}");
        // Row 2's hop count runs past the hops.
        let count_at = column(5);
        let mut hops = good.clone();
        hops[count_at + 1 + 2 * usize::from(good[count_at])] = 5;
        let err = Sightings::decode(&hops).unwrap_err();
        assert!(err.contains("row 2's hops"), "{err}");
        // A width that is not 1, 2, 4 or 8, and one wider than its field.
        let mut width = good.clone();
        width[rows_at] = 3;
        let err = Sightings::decode(&width).unwrap_err();
        assert!(err.contains("the capture column: width 3"), "{err}");
        let mut wide = good.clone();
        wide[column(1)] = 2;
        let err = Sightings::decode(&wide).unwrap_err();
        assert!(err.contains("the ptype column: width 2"), "{err}");
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
            for widths in [Widths::Narrowest, Widths::Full] {
                let bytes = s.encode(widths);
                let (back, end) = Sightings::decode(&bytes).unwrap();
                prop_assert_eq!(&back, &s);
                prop_assert_eq!(end, bytes.len());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = Sightings::decode(&bytes);
        }

        #[test]
        fn corrupted_blobs_never_panic(at in 0usize..200, byte in any::<u8>()) {
            let mut bytes = sample().encode(Widths::Narrowest);
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
