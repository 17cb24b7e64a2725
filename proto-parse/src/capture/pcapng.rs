//! pcapng blocks: framing checks, sections and interfaces, timestamps,
//! resynchronisation.

use std::io::Read;

use pcap_parser::pcapng::{
    BOM_MAGIC, CB_MAGIC, DCB_MAGIC, DSB_MAGIC, EPB_MAGIC, IDB_MAGIC, ISB_MAGIC, NRB_MAGIC,
    OptionCode, PIB_MAGIC, PcapNGOption, SHB_MAGIC, SJE_MAGIC, SPB_MAGIC,
    parse_interfacedescriptionblock_be, parse_interfacedescriptionblock_le,
    parse_sectionheaderblock,
};

use super::pcap::truncated_tail;
use super::reader::{Reader, RecordMeta, State, Step};
use super::{Interface, MAX_RECORD_LEN, TsConv};
use crate::{Error, ErrorKind, Layer, LenSource};

/// Offset of the packet data in an Enhanced Packet Block.
const EPB_DATA: usize = 28;
/// Offset of the packet data in a Simple Packet Block.
const SPB_DATA: usize = 12;

#[derive(Debug, Clone, Default)]
pub(super) struct NgState {
    big_endian: bool,
    pub(super) interfaces: Vec<Interface>,
    /// Timestamp conversion of each interface.
    conv: Vec<TsConv>,
}

impl NgState {
    pub(super) const fn new(big_endian: bool) -> Self {
        NgState {
            big_endian,
            interfaces: Vec::new(),
            conv: Vec::new(),
        }
    }

    fn push(&mut self, iface: Interface) {
        self.conv.push(TsConv::new(iface.tsresol, iface.tsoffset));
        self.interfaces.push(iface);
    }
}

fn u32_at(b: &[u8], off: usize, big_endian: bool) -> u32 {
    let v = [b[off], b[off + 1], b[off + 2], b[off + 3]];
    if big_endian {
        u32::from_be_bytes(v)
    } else {
        u32::from_le_bytes(v)
    }
}

/// The smallest legal total length of a block of this type.
const fn min_block_len(block_type: u32) -> u32 {
    match block_type {
        SHB_MAGIC => 28,
        IDB_MAGIC => 20,
        EPB_MAGIC => 32,
        SPB_MAGIC => 16,
        _ => 12,
    }
}

const fn known_block_type(block_type: u32) -> bool {
    matches!(
        block_type,
        SHB_MAGIC
            | IDB_MAGIC
            | SPB_MAGIC
            | NRB_MAGIC
            | ISB_MAGIC
            | EPB_MAGIC
            | SJE_MAGIC
            | DSB_MAGIC
            | CB_MAGIC
            | DCB_MAGIC
            | PIB_MAGIC
    )
}

/// `if_tsresol` and `if_tsoffset` of an IDB (pcap-parser reads `if_tsoffset`
/// as little-endian whatever the section's byte order, and its
/// `build_ts_resolution` rejects every power-of-2 resolution: decode here).
fn ts_options(options: &[PcapNGOption<'_>], big_endian: bool) -> (u8, i64) {
    let mut tsresol = None;
    let mut tsoffset = None;
    for opt in options {
        let value = opt.value();
        if opt.code == OptionCode::IfTsresol && tsresol.is_none() && opt.len >= 1 {
            tsresol = value.first().copied();
        } else if opt.code == OptionCode::IfTsoffset
            && tsoffset.is_none()
            && opt.len >= 8
            && let Some(b) = value.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok())
        {
            tsoffset = Some(if big_endian {
                i64::from_be_bytes(b)
            } else {
                i64::from_le_bytes(b)
            });
        }
    }
    (tsresol.unwrap_or(6), tsoffset.unwrap_or(0))
}

/// What the block at the reader's position turned out to be.
enum Block {
    Packet(RecordMeta),
    Section {
        big_endian: bool,
    },
    Interface(Interface),
    Skip,
    /// A block after which nothing can be read (an unsupported section).
    Fatal(Error),
    /// A block whose framing is sound but whose content is bad: skipped
    /// whole. `interface` keeps the numbering of interfaces when an IDB is bad.
    Bad {
        error: Error,
        interface: Option<Interface>,
    },
}

impl<R: Read> Reader<R> {
    fn ng_state(&self) -> Option<&NgState> {
        match &self.state {
            State::PcapNg(ng) => Some(ng),
            State::Pcap(_) => None,
        }
    }

    pub(super) fn step_pcapng(&mut self) -> Step {
        loop {
            let Some(section_be) = self.ng_state().map(|ng| ng.big_endian) else {
                return Step::End;
            };
            let offset = self.position();
            let avail = self.fill(12);
            if avail == 0 {
                return Step::End;
            }
            if avail < 12 {
                self.consume(avail);
                return Step::Error(truncated_tail(offset, 12, avail));
            }
            let w = self.window();
            let mut be = section_be;
            if u32_at(w, 0, false) == SHB_MAGIC {
                let bom = u32_at(w, 8, false);
                if bom == BOM_MAGIC {
                    be = false;
                } else if bom == BOM_MAGIC.swap_bytes() {
                    be = true;
                } else {
                    self.resync_from = Some(offset + 1);
                    return Step::Error(Error::bad_value(
                        Layer::Capture,
                        (offset + 8) as usize,
                        "pcapng byte-order magic",
                        u64::from(bom),
                        "0x1a2b3c4d in either byte order",
                    ));
                }
            }
            let block_type = u32_at(w, 0, be);
            let len1 = u32_at(w, 4, be);
            if len1 < min_block_len(block_type)
                || !len1.is_multiple_of(4)
                || len1 as usize > MAX_RECORD_LEN
            {
                self.resync_from = Some(offset + 1);
                return Step::Error(Error::bad_value(
                    Layer::Capture,
                    (offset + 4) as usize,
                    "pcapng block total length",
                    u64::from(len1),
                    "a multiple of 4 covering the block header, at most 16 MiB",
                ));
            }
            let len = len1 as usize;
            let avail = self.fill(len);
            if avail < len {
                self.consume(avail);
                return Step::Error(truncated_tail(offset, len, avail));
            }
            let len2 = u32_at(self.window(), len - 4, be);
            if len2 != len1 {
                self.resync_from = Some(offset + 1);
                return Step::Error(Error::bad_value(
                    Layer::Capture,
                    (offset as usize) + len - 4,
                    "pcapng trailing block total length",
                    u64::from(len2),
                    "equal to the leading block total length",
                ));
            }
            let block = self.classify(offset, block_type, len, be);
            self.consume(len);
            let State::PcapNg(ng) = &mut self.state else {
                return Step::End;
            };
            match block {
                Block::Packet(meta) => return Step::Record(meta),
                Block::Section { big_endian } => {
                    ng.big_endian = big_endian;
                    ng.interfaces.clear();
                    ng.conv.clear();
                    self.stats.sections += 1;
                }
                Block::Interface(iface) => ng.push(iface),
                Block::Skip => self.stats.blocks_skipped += 1,
                Block::Fatal(error) => {
                    let rest = self.avail();
                    self.stats.skipped_bytes += rest as u64;
                    self.consume(rest);
                    self.done = true;
                    return Step::Error(error);
                }
                Block::Bad { error, interface } => {
                    if let Some(iface) = interface {
                        ng.push(iface);
                    }
                    return Step::Error(error);
                }
            }
        }
    }

    /// Decodes the whole, framing-checked block of `len` bytes at the
    /// reader's position (file offset `offset`).
    fn classify(&self, offset: u64, block_type: u32, len: usize, be: bool) -> Block {
        let Some(ng) = self.ng_state() else {
            return Block::Skip;
        };
        let w = &self.window()[..len];
        let at = |rel: usize| (offset as usize).saturating_add(rel);
        match block_type {
            SHB_MAGIC => match parse_sectionheaderblock(w) {
                Ok((_, shb)) if shb.major_version == 1 => Block::Section { big_endian: be },
                Ok((_, shb)) => Block::Fatal(Error {
                    layer: Layer::Capture,
                    offset: at(12),
                    kind: ErrorKind::Unsupported {
                        what: "pcapng major version",
                        value: u64::from(shb.major_version),
                    },
                }),
                Err(_) => bad(at(0), "pcapng section header block", block_type),
            },
            IDB_MAGIC => {
                let parsed = if be {
                    parse_interfacedescriptionblock_be(w)
                } else {
                    parse_interfacedescriptionblock_le(w)
                };
                match parsed {
                    Ok((_, idb)) => {
                        let (tsresol, tsoffset) = ts_options(&idb.options, be);
                        Block::Interface(Interface {
                            linktype: idb.linktype.0 as u16,
                            snaplen: idb.snaplen,
                            tsresol,
                            tsoffset,
                        })
                    }
                    Err(_) => Block::Bad {
                        error: Error::bad_value(
                            Layer::Capture,
                            at(16),
                            "pcapng interface description options",
                            u64::from(block_type),
                            "well-formed options",
                        ),
                        interface: Some(Interface {
                            linktype: if be {
                                u16::from_be_bytes([w[8], w[9]])
                            } else {
                                u16::from_le_bytes([w[8], w[9]])
                            },
                            snaplen: u32_at(w, 12, be),
                            ..Interface::default()
                        }),
                    },
                }
            }
            EPB_MAGIC => {
                let if_id = u32_at(w, 8, be);
                let caplen = u32_at(w, 20, be) as usize;
                if caplen > len - 32 {
                    return Block::Bad {
                        error: Error::truncated(
                            Layer::Capture,
                            at(20),
                            caplen,
                            len - 32,
                            LenSource::Header,
                        ),
                        interface: None,
                    };
                }
                let (Some(iface), Some(conv)) = (
                    ng.interfaces.get(if_id as usize),
                    ng.conv.get(if_id as usize),
                ) else {
                    return bad(at(8), "pcapng packet interface id", if_id)
                        .with_expected("an interface described earlier in the section");
                };
                // The fixed fields by hand (the hot path); options are not
                // needed and not parsed.
                let units = (u64::from(u32_at(w, 12, be)) << 32) | u64::from(u32_at(w, 16, be));
                Block::Packet(RecordMeta {
                    data_start: self.start + EPB_DATA,
                    data_len: caplen,
                    ts_ns: conv.to_ns(units),
                    linktype: iface.linktype,
                    orig_len: u32_at(w, 24, be),
                    interface: Some(if_id),
                    offset,
                })
            }
            SPB_MAGIC => {
                let Some(iface) = ng.interfaces.first() else {
                    return bad(at(0), "pcapng simple packet block", block_type)
                        .with_expected("an interface described earlier in the section");
                };
                let orig_len = u32_at(w, 8, be);
                let mut caplen = (orig_len as usize).min(len - 16);
                if iface.snaplen != 0 {
                    caplen = caplen.min(iface.snaplen as usize);
                }
                Block::Packet(RecordMeta {
                    data_start: self.start + SPB_DATA,
                    data_len: caplen,
                    ts_ns: 0,
                    linktype: iface.linktype,
                    orig_len,
                    interface: Some(0),
                    offset,
                })
            }
            _ => Block::Skip,
        }
    }

    /// Scans forward from file offset `from` for a block of a known type
    /// whose leading and trailing lengths agree. Leaves the reader at it and
    /// returns true, or false at the end of the input.
    pub(super) fn resync_pcapng(&mut self, from: u64) -> bool {
        let skip = from.saturating_sub(self.position()) as usize;
        self.stats.skipped_bytes += skip.min(self.avail()) as u64;
        self.consume(skip);
        loop {
            let Some((section_be, n_ifaces)) = self
                .ng_state()
                .map(|ng| (ng.big_endian, ng.interfaces.len()))
            else {
                return false;
            };
            if self.fill(12) < 12 {
                return false;
            }
            let w = self.window();
            let mut be = Some(section_be);
            if u32_at(w, 0, false) == SHB_MAGIC {
                let bom = u32_at(w, 8, false);
                be = if bom == BOM_MAGIC {
                    Some(false)
                } else if bom == BOM_MAGIC.swap_bytes() {
                    Some(true)
                } else {
                    None
                };
            }
            if let Some(be) = be {
                let block_type = u32_at(w, 0, be);
                let len1 = u32_at(w, 4, be);
                let plausible = known_block_type(block_type)
                    && len1 >= min_block_len(block_type)
                    && len1.is_multiple_of(4)
                    && len1 as usize <= MAX_RECORD_LEN
                    && (block_type != EPB_MAGIC || (u32_at(w, 8, be) as usize) < n_ifaces);
                if plausible {
                    let len = len1 as usize;
                    if self.fill(len) >= len && u32_at(self.window(), len - 4, be) == len1 {
                        return true;
                    }
                }
            }
            self.stats.skipped_bytes += 1;
            self.consume(1);
        }
    }
}

fn bad(offset: usize, field: &'static str, value: u32) -> Block {
    Block::Bad {
        error: Error::bad_value(
            Layer::Capture,
            offset,
            field,
            u64::from(value),
            "a well-formed block",
        ),
        interface: None,
    }
}

impl Block {
    fn with_expected(mut self, expected: &'static str) -> Self {
        if let Block::Bad {
            error:
                Error {
                    kind: ErrorKind::BadValue { expected: e, .. },
                    ..
                },
            ..
        } = &mut self
        {
            *e = expected;
        }
        self
    }
}
