//! pcap and pcapng writers (pcap-parser has none). Small on purpose: what
//! the fixture generator and the reference stack's `--pcap` option need,
//! plus the knobs the reader's tests need (byte order, resolution, raw
//! blocks).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use pcap_parser::pcapng::{EPB_MAGIC, IDB_MAGIC, SHB_MAGIC, SPB_MAGIC};

use super::{LINKTYPE_ETHERNET, PCAP_MAX_SNAPLEN, ns_to_pcapng_ts};

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Byte-order aware field encoding.
#[derive(Debug, Clone, Copy)]
struct Order(bool);

impl Order {
    fn u16(self, v: u16) -> [u8; 2] {
        if self.0 {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn u32(self, v: u32) -> [u8; 4] {
        if self.0 {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn u64(self, v: u64) -> [u8; 8] {
        if self.0 {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
}

/// Options of a [`PcapWriter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapOptions {
    /// `LINKTYPE_*` of every record (default Ethernet).
    pub linktype: u16,
    /// Snapshot length; longer frames are cut to it (default 262144).
    pub snaplen: u32,
    /// Nanosecond magic (default) or microsecond magic.
    pub nanos: bool,
    /// Write big-endian (default: little-endian).
    pub big_endian: bool,
}

impl Default for PcapOptions {
    fn default() -> Self {
        PcapOptions {
            linktype: LINKTYPE_ETHERNET,
            snaplen: PCAP_MAX_SNAPLEN,
            nanos: true,
            big_endian: false,
        }
    }
}

/// Writes a classic pcap file. Wrap a file in a [`BufWriter`] (as
/// [`PcapWriter::create`] does): every frame is two `write_all` calls.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    opts: PcapOptions,
    records: u64,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (truncates) `path` and writes a nanosecond Ethernet header.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        PcapWriter::new(BufWriter::with_capacity(1 << 20, File::create(path)?))
    }
}

impl<W: Write> PcapWriter<W> {
    /// Nanosecond magic, little-endian, Ethernet, snaplen 262144.
    pub fn new(out: W) -> io::Result<Self> {
        PcapWriter::with_options(out, PcapOptions::default())
    }

    /// Writes the 24-byte file header described by `opts`.
    pub fn with_options(mut out: W, opts: PcapOptions) -> io::Result<Self> {
        let o = Order(opts.big_endian);
        let magic: u32 = if opts.nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&o.u32(magic));
        h[4..6].copy_from_slice(&o.u16(2));
        h[6..8].copy_from_slice(&o.u16(4));
        // thiszone and sigfigs stay 0
        h[16..20].copy_from_slice(&o.u32(opts.snaplen));
        h[20..24].copy_from_slice(&o.u32(u32::from(opts.linktype)));
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            opts,
            records: 0,
        })
    }

    /// Writes one frame seen whole on the wire.
    pub fn write_frame(&mut self, ts_ns: u64, data: &[u8]) -> io::Result<()> {
        let orig_len = u32::try_from(data.len()).map_err(|_| invalid("frame longer than 4 GiB"))?;
        self.write_frame_with_len(ts_ns, data, orig_len)
    }

    /// Writes one frame of `orig_len` bytes on the wire of which `data` was
    /// captured (cut to the snaplen). `orig_len` is raised to the captured
    /// length if smaller.
    pub fn write_frame_with_len(
        &mut self,
        ts_ns: u64,
        data: &[u8],
        orig_len: u32,
    ) -> io::Result<()> {
        let o = Order(self.opts.big_endian);
        let sec = u32::try_from(ts_ns / 1_000_000_000)
            .map_err(|_| invalid("pcap timestamp after 2106"))?;
        let ns = (ts_ns % 1_000_000_000) as u32;
        let frac = if self.opts.nanos { ns } else { ns / 1000 };
        let caplen = data.len().min(self.opts.snaplen as usize);
        let caplen32 = caplen as u32;
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&o.u32(sec));
        h[4..8].copy_from_slice(&o.u32(frac));
        h[8..12].copy_from_slice(&o.u32(caplen32));
        h[12..16].copy_from_slice(&o.u32(orig_len.max(caplen32)));
        self.out.write_all(&h)?;
        self.out.write_all(&data[..caplen])?;
        self.records += 1;
        Ok(())
    }

    /// Frames written so far.
    pub const fn records(&self) -> u64 {
        self.records
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and gives back the output.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Writes a pcapng file: one Section Header Block, then interfaces and
/// Enhanced (or Simple) Packet Blocks. Wrap a file in a [`BufWriter`].
#[derive(Debug)]
pub struct PcapNgWriter<W: Write> {
    out: W,
    order: Order,
    /// `(if_tsresol, if_tsoffset, snaplen)` per interface of the section.
    interfaces: Vec<(u8, i64, u32)>,
    records: u64,
}

impl PcapNgWriter<BufWriter<File>> {
    /// Creates (truncates) `path`, writes the section header and one
    /// nanosecond Ethernet interface (id 0).
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        let mut w = PcapNgWriter::new(BufWriter::with_capacity(1 << 20, File::create(path)?))?;
        w.add_interface(LINKTYPE_ETHERNET, 0)?;
        Ok(w)
    }
}

impl<W: Write> PcapNgWriter<W> {
    /// Little-endian; writes the Section Header Block. Add an interface
    /// before the first packet.
    pub fn new(out: W) -> io::Result<Self> {
        PcapNgWriter::with_byte_order(out, false)
    }

    /// Writes the Section Header Block in the given byte order.
    pub fn with_byte_order(out: W, big_endian: bool) -> io::Result<Self> {
        let mut w = PcapNgWriter {
            out,
            order: Order(big_endian),
            interfaces: Vec::new(),
            records: 0,
        };
        w.write_shb()?;
        Ok(w)
    }

    fn write_shb(&mut self) -> io::Result<()> {
        let o = self.order;
        let mut body = [0u8; 16];
        body[0..4].copy_from_slice(&o.u32(0x1A2B_3C4D));
        body[4..6].copy_from_slice(&o.u16(1));
        body[6..8].copy_from_slice(&o.u16(0));
        body[8..16].copy_from_slice(&o.u64(u64::MAX)); // section length unknown (-1)
        self.write_block(SHB_MAGIC, &body)
    }

    /// Starts a new section (new byte order allowed); interfaces restart at 0.
    pub fn new_section(&mut self, big_endian: bool) -> io::Result<()> {
        self.order = Order(big_endian);
        self.interfaces.clear();
        self.write_shb()
    }

    /// Adds a nanosecond interface (`if_tsresol` 9); returns its id.
    pub fn add_interface(&mut self, linktype: u16, snaplen: u32) -> io::Result<u32> {
        self.add_interface_with(linktype, snaplen, 9, 0)
    }

    /// Adds an interface with the given `if_tsresol` (bit 7: power of 2)
    /// and `if_tsoffset` (seconds); the options are written only when not
    /// the defaults (6 and 0). Returns its id.
    pub fn add_interface_with(
        &mut self,
        linktype: u16,
        snaplen: u32,
        tsresol: u8,
        tsoffset: i64,
    ) -> io::Result<u32> {
        let o = self.order;
        let mut body = Vec::with_capacity(40);
        body.extend_from_slice(&o.u16(linktype));
        body.extend_from_slice(&o.u16(0));
        body.extend_from_slice(&o.u32(snaplen));
        if tsresol != 6 {
            body.extend_from_slice(&o.u16(9)); // if_tsresol
            body.extend_from_slice(&o.u16(1));
            body.extend_from_slice(&[tsresol, 0, 0, 0]);
        }
        if tsoffset != 0 {
            body.extend_from_slice(&o.u16(14)); // if_tsoffset
            body.extend_from_slice(&o.u16(8));
            body.extend_from_slice(&o.u64(tsoffset as u64));
        }
        if tsresol != 6 || tsoffset != 0 {
            body.extend_from_slice(&[0; 4]); // opt_endofopt
        }
        self.write_block(IDB_MAGIC, &body)?;
        self.interfaces.push((tsresol, tsoffset, snaplen));
        Ok((self.interfaces.len() - 1) as u32)
    }

    /// Writes one frame, seen whole on the wire, as an Enhanced Packet Block.
    pub fn write_packet(&mut self, interface: u32, ts_ns: u64, data: &[u8]) -> io::Result<()> {
        let orig_len = u32::try_from(data.len()).map_err(|_| invalid("frame longer than 4 GiB"))?;
        self.write_packet_with_len(interface, ts_ns, data, orig_len)
    }

    /// Writes an Enhanced Packet Block; the timestamp is converted to the
    /// interface's resolution (rounding down).
    pub fn write_packet_with_len(
        &mut self,
        interface: u32,
        ts_ns: u64,
        data: &[u8],
        orig_len: u32,
    ) -> io::Result<()> {
        let &(tsresol, tsoffset, _) = self
            .interfaces
            .get(interface as usize)
            .ok_or_else(|| invalid("pcapng packet on an interface not added"))?;
        let units = ns_to_pcapng_ts(ts_ns, tsresol, tsoffset)
            .ok_or_else(|| invalid("timestamp not representable at the interface resolution"))?;
        self.write_epb_units(interface, units, data, orig_len)
    }

    /// Writes an Enhanced Packet Block with a raw timestamp in interface
    /// units (no check that the interface exists: tests write bad ids).
    pub fn write_epb_units(
        &mut self,
        interface: u32,
        ts_units: u64,
        data: &[u8],
        orig_len: u32,
    ) -> io::Result<()> {
        let o = self.order;
        let caplen = u32::try_from(data.len()).map_err(|_| invalid("frame longer than 4 GiB"))?;
        let mut hdr = [0u8; 20];
        hdr[0..4].copy_from_slice(&o.u32(interface));
        hdr[4..8].copy_from_slice(&o.u32((ts_units >> 32) as u32));
        hdr[8..12].copy_from_slice(&o.u32(ts_units as u32));
        hdr[12..16].copy_from_slice(&o.u32(caplen));
        hdr[16..20].copy_from_slice(&o.u32(orig_len.max(caplen)));
        self.write_block_parts(EPB_MAGIC, &hdr, data)?;
        self.records += 1;
        Ok(())
    }

    /// Writes a Simple Packet Block (interface 0, no timestamp); `data` is
    /// `orig_len` bytes cut to interface 0's snaplen.
    pub fn write_simple_packet(&mut self, data: &[u8]) -> io::Result<()> {
        let o = self.order;
        let orig_len = u32::try_from(data.len()).map_err(|_| invalid("frame longer than 4 GiB"))?;
        let snaplen = match self.interfaces.first() {
            Some(&(_, _, s)) if s != 0 => s as usize,
            Some(_) => data.len(),
            None => return Err(invalid("pcapng simple packet before any interface")),
        };
        let cut = &data[..data.len().min(snaplen)];
        self.write_block_parts(SPB_MAGIC, &o.u32(orig_len), cut)?;
        self.records += 1;
        Ok(())
    }

    /// Writes any block: type, lengths, `body` padded to 32 bits.
    pub fn write_block(&mut self, block_type: u32, body: &[u8]) -> io::Result<()> {
        self.write_block_parts(block_type, body, &[])
    }

    fn write_block_parts(&mut self, block_type: u32, head: &[u8], data: &[u8]) -> io::Result<()> {
        let o = self.order;
        let body_len = head.len() + data.len();
        let pad = (4 - body_len % 4) % 4;
        let total = u32::try_from(12 + body_len + pad)
            .map_err(|_| invalid("pcapng block longer than 4 GiB"))?;
        self.out.write_all(&o.u32(block_type))?;
        self.out.write_all(&o.u32(total))?;
        self.out.write_all(head)?;
        self.out.write_all(data)?;
        self.out.write_all(&[0u8; 3][..pad])?;
        self.out.write_all(&o.u32(total))
    }

    /// Packets written so far.
    pub const fn records(&self) -> u64 {
        self.records
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and gives back the output.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn pcap_header_bytes() {
        let out = PcapWriter::new(Vec::new()).unwrap().into_inner().unwrap();
        assert_eq!(
            out,
            [
                0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0
            ]
        );
        let opts = PcapOptions {
            nanos: false,
            big_endian: true,
            linktype: 197,
            snaplen: 65535,
        };
        let mut w = PcapWriter::with_options(Vec::new(), opts).unwrap();
        w.write_frame(1_000_000_001_500, &[0xaa, 0xbb]).unwrap();
        let out = w.into_inner().unwrap();
        assert_eq!(
            out,
            [
                0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0,
                0, 197, // header
                0, 0, 0x03, 0xe8, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 0xaa, 0xbb
            ]
        );
    }

    #[test]
    fn pcapng_block_layout() {
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        let id = w.add_interface(1, 0).unwrap();
        w.write_packet(id, 1_000, &[1, 2, 3, 4, 5]).unwrap();
        let out = w.into_inner().unwrap();
        // SHB 28 bytes, IDB 16 + 12 (tsresol option + end), EPB 32 + 8
        assert_eq!(out.len(), 28 + 32 + 40);
        assert_eq!(&out[0..8], &[0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0]);
        let epb = &out[60..];
        assert_eq!(&epb[0..4], &[6, 0, 0, 0]);
        assert_eq!(&epb[4..8], &[40, 0, 0, 0]);
        assert_eq!(&epb[16..20], &1000u32.to_le_bytes()); // ts_low in ns
        assert_eq!(&epb[28..36], &[1, 2, 3, 4, 5, 0, 0, 0]);
        assert_eq!(&epb[36..40], &[40, 0, 0, 0]);
        assert!(w_err_on_unknown_interface());
    }

    fn w_err_on_unknown_interface() -> bool {
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_packet(0, 0, &[]).is_err() && w.write_simple_packet(&[1]).is_err()
    }
}
