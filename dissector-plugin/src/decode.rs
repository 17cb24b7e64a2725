//! The Wireshark-free half of the dissector: turns the captured bytes of one
//! UDP payload into a tree of items, an Info line and expert notes, using
//! `proto_parse::metaroce` for every byte read. `ffi` only replays the
//! result into Wireshark's tree, so this module is tested without Wireshark.
//!
//! Every item range lies within the captured bytes (the views of
//! `proto_parse` exist only when the bytes are there); `ffi` checks it again
//! before handing a range to Wireshark, whose tvb accessors throw otherwise.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::ops::Range;
use std::sync::OnceLock;

use proto_parse::Error;
use proto_parse::metaroce::{
    self, CrcStatus, FbFlags, Flags, Layout, Packet, PacketType, Tlv, TlvType, field,
};

use crate::fields::{Ei, Ett, Hf};

/// Preferences that change the decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Verify the CRC32C trailer (else its status is "unverified").
    pub check_crc: bool,
    /// Where the UDP payload starts in the frame: error and warning texts
    /// give frame offsets (spec 11.8); item ranges stay payload offsets.
    pub frame_offset: usize,
    /// Build the Info line ([`Dissection::info`]). Off when nobody shows
    /// the columns (`tshark -T fields`): it stays empty.
    pub info: bool,
    /// Build the texts only a visible tree shows: the protocol item's
    /// summary, subtree titles and `shown` values. Off when the tree is
    /// not shown (`tshark -T fields`, filters): they stay empty. Field
    /// values and expert texts are always built.
    pub labels: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            check_crc: true,
            frame_offset: 0,
            info: true,
            labels: true,
        }
    }
}

/// An item's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Uint(u64),
    /// The whole octet(s) of a field with a bit mask (flag bits, version,
    /// type, tx_attempt): Wireshark applies the mask and shift.
    Bits(u32),
    /// The bytes of the item's range.
    Bytes,
    Text(String),
    /// `FT_NONE` marker.
    Marker,
    /// A duration in ns (`FT_RELATIVE_TIME`).
    Time(i64),
}

/// What a tree node shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Label {
    /// A registered field.
    Field(Hf, Value),
    /// A text-only node that heads a subtree ("TLV: HOP_TELEMETRY").
    Text(Cow<'static, str>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub label: Label,
    /// Byte range within the UDP payload (always within the captured bytes).
    pub range: Range<usize>,
    /// Replaces Wireshark's rendering of the value (`*_format_value`).
    pub shown: Option<Cow<'static, str>>,
    /// Computed, not on the wire (`proto_item_set_generated`).
    pub generated: bool,
    pub subtree: Option<Ett>,
    pub children: Vec<Node>,
}

impl Node {
    fn field(hf: Hf, range: Range<usize>, value: Value) -> Self {
        Node {
            label: Label::Field(hf, value),
            range,
            shown: None,
            generated: false,
            subtree: None,
            children: Vec::new(),
        }
    }

    fn uint(hf: Hf, range: Range<usize>, value: impl Into<u64>) -> Self {
        Node::field(hf, range, Value::Uint(value.into()))
    }

    fn at(hf: Hf, offset: usize, value: impl Into<u64>) -> Self {
        Node::uint(hf, offset..offset + 1, value)
    }

    fn text(text: impl Into<Cow<'static, str>>, range: Range<usize>, ett: Ett) -> Self {
        Node {
            label: Label::Text(text.into()),
            range,
            shown: None,
            generated: false,
            subtree: Some(ett),
            children: Vec::new(),
        }
    }

    fn shown(mut self, text: impl Into<Cow<'static, str>>) -> Self {
        self.shown = Some(text.into());
        self
    }

    /// [`Node::shown`] when labels are built (`on`), else nothing.
    fn shown_if<S: Into<Cow<'static, str>>>(self, on: bool, text: impl FnOnce() -> S) -> Self {
        if on { self.shown(text()) } else { self }
    }

    fn generated(mut self) -> Self {
        self.generated = true;
        self
    }

    fn with(mut self, ett: Ett, children: Vec<Node>) -> Self {
        self.subtree = Some(ett);
        self.children = children;
        self
    }

    /// Visits this node and its descendants.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Node)) {
        f(self);
        for c in &self.children {
            c.walk(f);
        }
    }
}

/// An expert note, shown as its own item over `range`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub ei: Ei,
    pub text: String,
    /// Clamped to the captured bytes (may be empty).
    pub range: Range<usize>,
}

/// The CRC32C trailer, for `proto_tree_add_checksum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// flags.CRC is clear: nothing to show.
    Absent,
    /// flags.CRC is set but the trailer is not there (trimmed packet) or
    /// the capture does not hold it: status "not present" / "unverified".
    Missing { trimmed: bool },
    /// The captured trailer at `offset`; `computed` is `None` when the
    /// check is disabled (status "unverified").
    Present {
        offset: usize,
        stored: u32,
        computed: Option<u32>,
    },
}

/// Everything the dissector shows for one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dissection {
    /// Range of the protocol item (the header, clipped to the capture).
    pub header: Range<usize>,
    /// The Info line (empty unless [`Options::info`] or [`Options::labels`]).
    /// Once the base header is there (`packet_type` is `Some`), the
    /// protocol item also shows it: "MetaRoCE, <info>".
    pub info: String,
    pub items: Vec<Node>,
    pub notes: Vec<Note>,
    pub checksum: Checksum,
    /// The captured payload bytes, handed to the `data` dissector.
    pub payload: Option<Range<usize>>,
    /// The packet type, when the base header was there.
    pub packet_type: Option<PacketType>,
}

impl Dissection {
    /// Visits every item node.
    pub fn walk<'a>(&'a self, mut f: impl FnMut(&'a Node)) {
        for n in &self.items {
            n.walk(&mut f);
        }
    }

    /// The first value of field `hf` (tests and the Info line).
    pub fn value(&self, hf: Hf) -> Option<&Value> {
        let mut found = None;
        self.walk(|n| {
            if let Label::Field(h, v) = &n.label
                && *h == hf
                && found.is_none()
            {
                found = Some(v);
            }
        });
        found
    }

    /// Whether an expert note of this kind was raised.
    pub fn has_note(&self, ei: Ei) -> bool {
        self.notes.iter().any(|n| n.ei == ei)
    }
}

/// A subtree title, built only when labels are (`on`).
fn title<S: Into<Cow<'static, str>>>(on: bool, text: impl FnOnce() -> S) -> Cow<'static, str> {
    if on { text().into() } else { Cow::Borrowed("") }
}

fn clamp(range: Range<usize>, captured: usize) -> Range<usize> {
    let start = range.start.min(captured);
    start..range.end.clamp(start, captured)
}

/// An expert note for a `proto_parse` error (`err` has payload offsets;
/// the text gives the frame offset).
fn note_for(err: &Error, captured: usize, frame_offset: usize) -> Note {
    let ei = if err.is_capture_truncation() {
        Ei::CaptureTruncated
    } else {
        Ei::Malformed
    };
    Note {
        ei,
        text: err.clone().at_offset(frame_offset).to_string(),
        range: clamp(err.offset..err.offset + 1, captured),
    }
}

/// Appends the names of `names` joined by ',' to `out`.
fn push_names<'a>(out: &mut String, names: impl Iterator<Item = &'a str>) {
    for (i, name) in names.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(name);
    }
}

/// Texts that depend on one octet only (flags, lengths in words, op
/// names), built once per process for all 256 values: a packet's labels
/// then cost no formatting and no allocation. Each static is used with one
/// `make` function only.
struct ByteTexts(OnceLock<Box<[Box<str>]>>);

impl ByteTexts {
    const fn new() -> Self {
        ByteTexts(OnceLock::new())
    }

    fn get(&'static self, b: u8, make: fn(u8) -> String) -> &'static str {
        let texts = self
            .0
            .get_or_init(|| (0..=u8::MAX).map(|b| make(b).into_boxed_str()).collect());
        &texts[usize::from(b)]
    }
}

static FLAGS_TEXT: ByteTexts = ByteTexts::new();
static FB_FLAGS_TEXT: ByteTexts = ByteTexts::new();
static WORDS_TEXT: ByteTexts = ByteTexts::new();
static RNR_TEXT: ByteTexts = ByteTexts::new();
static DATA_TITLE: ByteTexts = ByteTexts::new();
static CTRL_TITLE: ByteTexts = ByteTexts::new();

/// "13 words (52 bytes)" (hlen, TLV length).
fn words_text(words: u8) -> &'static str {
    WORDS_TEXT.get(words, |w| {
        format!("{w} words ({} bytes)", usize::from(w) * field::TLV_WORD)
    })
}

/// "0x04 (CRC)": a flags octet and the names of its set flags.
fn flags_shown<'a>(bits: u8, names: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::with_capacity(32);
    let _ = write!(out, "0x{bits:02x}");
    let mut names = names.peekable();
    if names.peek().is_some() {
        out.push_str(" (");
        push_names(&mut out, names);
        out.push(')');
    }
    out
}

/// SACK ranges as inclusive "a-b,c" text.
fn ranges_text(ranges: &[Range<u32>]) -> String {
    let mut out = String::new();
    for r in ranges {
        if !out.is_empty() {
            out.push(',');
        }
        let last = r.end.wrapping_sub(1);
        if last == r.start {
            let _ = write!(out, "{}", r.start);
        } else {
            let _ = write!(out, "{}-{}", r.start, last);
        }
    }
    out
}

/// Decodes one UDP payload: `captured` are the bytes the capture holds,
/// `wire_len` the UDP payload length on the wire (from the UDP header).
pub fn dissect(captured: &[u8], wire_len: usize, opts: &Options) -> Dissection {
    dissect_parsed(captured, &metaroce::parse_lax(captured, wire_len), opts)
}

/// [`dissect`] of a packet already parsed: `lax` is
/// `metaroce::parse_lax(captured, wire_len)` (the plugin parses each packet
/// once for the decode and the analysis).
pub fn dissect_parsed(captured: &[u8], lax: &metaroce::Lax<'_>, opts: &Options) -> Dissection {
    let cap = captured.len();
    let labels = opts.labels;
    let mut d = Dissection {
        header: 0..cap,
        info: String::new(),
        items: Vec::with_capacity(16),
        notes: Vec::new(),
        checksum: Checksum::Absent,
        payload: None,
        packet_type: None,
    };
    let Some(packet) = &lax.packet else {
        // Not even a base header.
        if let Some(err) = &lax.stop {
            let note = note_for(err, cap, opts.frame_offset);
            d.info = format!("[Malformed: {}]", note.text);
            d.notes.push(note);
        }
        return d;
    };
    let ty = packet.packet_type();
    d.packet_type = Some(ty);
    let header_len = packet.header_len();
    d.header = 0..header_len.clamp(field::BASE_LEN, cap);

    base_items(packet, labels, &mut d);
    type_items(packet, lax.layout.as_ref(), labels, &mut d);
    tlv_items(packet, lax.stop.as_ref(), opts, &mut d);
    padding_item(packet, cap, &mut d);

    for w in packet.warnings() {
        let shifted = proto_parse::Warning {
            offset: w.offset + opts.frame_offset,
            ..w
        };
        d.notes.push(Note {
            ei: Ei::Warning,
            text: shifted.to_string(),
            range: clamp(w.offset..w.offset + 1, cap),
        });
    }
    unknown_value_notes(packet, &mut d);

    if let Some(layout) = &lax.layout {
        layout_items(packet, layout, opts, &mut d);
    }
    if let Some(err) = &lax.stop {
        d.notes.push(note_for(err, cap, opts.frame_offset));
    }

    if opts.info || labels {
        d.info = info_line(packet, lax.layout.as_ref(), lax.stop.as_ref());
    }
    d
}

fn base_items(p: &Packet<&[u8]>, labels: bool, d: &mut Dissection) {
    let flags = p.flags();
    let ty = p.packet_type();
    let mut flag_bits = vec![
        Node::field(Hf::FlagAr, 1..2, Value::Bits(flags.bits().into())),
        Node::field(Hf::FlagSom, 1..2, Value::Bits(flags.bits().into())),
        Node::field(Hf::FlagEom, 1..2, Value::Bits(flags.bits().into())),
        Node::field(Hf::FlagSe, 1..2, Value::Bits(flags.bits().into())),
        Node::field(Hf::FlagExt, 1..2, Value::Bits(flags.bits().into())),
        Node::field(Hf::FlagCrc, 1..2, Value::Bits(flags.bits().into())),
    ];
    if flags.bits() & Flags::RESERVED != 0 {
        flag_bits.push(Node::at(
            Hf::FlagsReserved,
            field::FLAGS,
            flags.bits() & Flags::RESERVED,
        ));
    }
    let hlen = p.hlen();
    let ver_type = (p.version() << 4) | (u8::from(ty) & 0x0F);
    d.items.extend([
        // Fields under a bit mask get the whole octet; Wireshark masks and
        // shifts.
        Node::field(Hf::Version, 0..1, Value::Bits(ver_type.into())),
        Node::field(Hf::Type, 0..1, Value::Bits(ver_type.into())),
        Node::at(Hf::Flags, field::FLAGS, flags.bits())
            .shown_if(labels, || {
                FLAGS_TEXT.get(flags.bits(), |b| {
                    flags_shown(b, Flags::from_bits_retain(b).iter_names().map(|(n, _)| n))
                })
            })
            .with(Ett::Flags, flag_bits),
        Node::at(Hf::Hlen, field::HLEN, hlen).shown_if(labels, || words_text(hlen)),
        Node::field(
            Hf::TxAttempt,
            field::TX_ATTEMPT..field::TX_ATTEMPT + 1,
            Value::Bits(u32::from(p.tx_attempt()) << 4),
        ),
        Node::uint(Hf::Ev, field::EV, p.ev()),
        Node::uint(Hf::PathSeq, field::PATH_SEQ, p.path_seq()),
        Node::uint(Hf::DstConn, field::DST_CONN, p.dst_conn()),
        Node::uint(Hf::SrcConn, field::SRC_CONN, p.src_conn()),
        Node::uint(Hf::Psn, field::PSN, p.psn()),
        Node::uint(Hf::TxTs, field::TX_TS, p.tx_ts()),
    ]);
}

fn type_items(p: &Packet<&[u8]>, layout: Option<&Layout>, labels: bool, d: &mut Dissection) {
    let ty = p.packet_type();
    let cap = p.as_bytes().len();
    if let Some(data) = p.data() {
        let op = data.op();
        let mut kids = Vec::with_capacity(9);
        kids.extend([
            Node::at(Hf::DataOp, field::DATA_OP, u8::from(op)),
            Node::uint(Hf::PayloadLen, field::PAYLOAD_LEN, data.payload_len()),
            Node::uint(Hf::MsgId, field::MSG_ID, data.msg_id()),
            Node::uint(Hf::MsgOffset, field::MSG_OFFSET, data.msg_offset()),
            Node::uint(Hf::MsgLen, field::MSG_LEN, data.msg_len()),
        ]);
        if let Some(va) = data.remote_va() {
            kids.push(Node::uint(Hf::RemoteVa, field::REMOTE_VA, va));
        }
        if let Some(rkey) = data.rkey() {
            kids.push(Node::uint(Hf::Rkey, field::RKEY, rkey));
        }
        if let (Some(imm), Some(range)) = (data.imm_data(), op.imm_data_field()) {
            kids.push(Node::uint(Hf::ImmData, range, imm));
        }
        if let Some(layout) = layout {
            kids.push(Node::uint(Hf::PayloadActual, 0..0, layout.payload.len() as u64).generated());
        }
        d.items.push(
            Node::text(
                title(labels, || {
                    DATA_TITLE.get(u8::from(op), |b| {
                        format!("DATA header: {}", metaroce::DataOp::from(b))
                    })
                }),
                clamp(field::DATA_OP..op.header_len(), cap),
                Ett::TypeHeader,
            )
            .with(Ett::TypeHeader, kids),
        );
        return;
    }
    if let Some(fb) = p.feedback() {
        let flags = fb.flags();
        let fb_bits = flags.bits();
        let mut bits = vec![
            Node::field(
                Hf::FbEce,
                field::FB_FLAGS..field::FB_FLAGS + 1,
                Value::Bits(fb_bits.into()),
            ),
            Node::field(
                Hf::FbTrim,
                field::FB_FLAGS..field::FB_FLAGS + 1,
                Value::Bits(fb_bits.into()),
            ),
            Node::field(
                Hf::FbDup,
                field::FB_FLAGS..field::FB_FLAGS + 1,
                Value::Bits(fb_bits.into()),
            ),
            Node::field(
                Hf::FbCoal,
                field::FB_FLAGS..field::FB_FLAGS + 1,
                Value::Bits(fb_bits.into()),
            ),
        ];
        if fb_bits & FbFlags::RESERVED != 0 {
            bits.push(Node::at(
                Hf::FbReserved,
                field::FB_FLAGS,
                fb_bits & FbFlags::RESERVED,
            ));
        }
        let credit = fb.credit();
        let mut kids = vec![
            Node::at(Hf::FbFlags, field::FB_FLAGS, fb_bits)
                .shown_if(labels, || {
                    FB_FLAGS_TEXT.get(fb_bits, |b| {
                        flags_shown(b, FbFlags::from_bits_retain(b).iter_names().map(|(n, _)| n))
                    })
                })
                .with(Ett::FbFlags, bits),
            Node::at(Hf::SackWords, field::SACK_WORDS, fb.sack_words()),
            Node::uint(Hf::EchoEv, field::ECHO_EV, fb.echo_ev()),
            Node::uint(Hf::EchoPsn, field::ECHO_PSN, fb.echo_psn()),
            Node::uint(Hf::EchoTxTs, field::ECHO_TX_TS, fb.echo_tx_ts()),
            Node::uint(Hf::RxTs, field::RX_TS, fb.rx_ts()),
            Node::uint(Hf::CeCount, field::CE_COUNT, fb.ce_count()),
            Node::at(Hf::RxBufLevel, field::RX_BUF_LEVEL, fb.rx_buf_level()),
            Node::at(Hf::FwdHops, field::FWD_HOPS, fb.fwd_hops()),
        ];
        let credit_node = Node::uint(Hf::Credit, field::CREDIT, credit);
        kids.push(if credit == u32::MAX {
            credit_node.shown_if(labels, || "not credit-limited (0xffffffff)")
        } else {
            credit_node
        });
        let mut end = field::FEEDBACK_LEN;
        if let Some(ack) = p.ack() {
            let words = ack.sack_words();
            kids.push(Node::uint(Hf::SackBase, field::SACK_BASE, ack.sack_base()));
            end = field::SACK_BITMAP(words).end;
            if words > 0 {
                kids.push(Node::field(
                    Hf::SackBitmap,
                    field::SACK_BITMAP(words),
                    Value::Bytes,
                ));
                kids.push(
                    Node::field(
                        Hf::SackRanges,
                        field::SACK_BITMAP(words),
                        Value::Text(ranges_text(&ack.sack_ranges())),
                    )
                    .generated(),
                );
            }
        } else if let Some(nack) = p.nack() {
            kids.push(Node::at(
                Hf::NackCode,
                field::NACK_CODE,
                u8::from(nack.code()),
            ));
            let rnr = nack.rnr_timer();
            kids.push(
                Node::at(Hf::RnrTimer, field::RNR_TIMER, rnr).shown_if(labels, || {
                    RNR_TEXT.get(rnr, |r| format!("{r} ({} us)", u32::from(r) * 10))
                }),
            );
            kids.push(Node::uint(Hf::NackPsn, field::NACK_PSN, nack.nack_psn()));
            end = field::NACK_LEN;
        } else if let Some(reason) = p.cnp_reason() {
            kids.push(Node::at(Hf::CnpReason, field::CNP_REASON, u8::from(reason)));
            end = field::CNP_LEN;
        }
        let name = match ty {
            PacketType::Ack => "ACK header",
            PacketType::Nack => "NACK header",
            PacketType::Cnp => "CNP header",
            _ => "Feedback header",
        };
        d.items.push(
            Node::text(
                title(labels, || name),
                clamp(field::FB_FLAGS..end, cap),
                Ett::TypeHeader,
            )
            .with(Ett::TypeHeader, kids),
        );
        return;
    }
    if let Some(ctrl) = p.ctrl() {
        let features = ctrl.features();
        let fbits = features.bits();
        let feature_bits = [
            Hf::FeatCrc,
            Hf::FeatPathSeq,
            Hf::FeatTelemetry,
            Hf::FeatTrimAware,
            Hf::FeatClockSync,
        ]
        .into_iter()
        .map(|hf| Node::field(hf, field::FEATURES, Value::Bits(fbits)))
        .collect();
        let unit = ctrl.ts_unit_ps();
        let kids = vec![
            Node::at(Hf::CtrlOp, field::CTRL_OP, u8::from(ctrl.op())),
            Node::at(Hf::CcAlgo, field::CC_ALGO, u8::from(ctrl.cc_algo())),
            Node::uint(Hf::Mtu, field::MTU, ctrl.mtu()),
            Node::uint(Hf::InitPsn, field::INIT_PSN, ctrl.init_psn()),
            Node::uint(Hf::Features, field::FEATURES, fbits).with(Ett::Features, feature_bits),
            Node::uint(Hf::TsUnitPs, field::TS_UNIT_PS, unit),
        ];
        d.items.push(
            Node::text(
                title(labels, || {
                    CTRL_TITLE.get(u8::from(ctrl.op()), |b| {
                        format!("CTRL header: {}", metaroce::CtrlOp::from(b))
                    })
                }),
                clamp(field::CTRL_OP..field::CTRL_LEN, cap),
                Ett::TypeHeader,
            )
            .with(Ett::TypeHeader, kids),
        );
    }
}

fn tlv_node(tlv: &Tlv<'_>, labels: bool) -> Node {
    let start = tlv.offset;
    let range = start..start + tlv.bytes.len();
    let ty = tlv.tlv_type;
    let mut kids = vec![Node::at(Hf::TlvType, start + field::TLV_TYPE, u8::from(ty))];
    if ty == TlvType::Pad {
        if tlv.bytes.len() > 1 {
            kids.push(Node::field(
                Hf::TlvPadding,
                start + 1..range.end,
                Value::Bytes,
            ));
        }
        return Node::text(
            title(labels, || format!("PAD ({} bytes)", tlv.bytes.len())),
            range,
            Ett::Tlv,
        )
        .with(Ett::Tlv, kids);
    }
    let words = tlv.len_words();
    kids.push(
        Node::at(Hf::TlvLen, start + field::TLV_LEN, words).shown_if(labels, || words_text(words)),
    );
    let value_start = start + field::TLV_VALUE_START;
    if let Some(hops) = tlv.hop_telemetry() {
        for (i, hop) in hops.enumerate() {
            let at = value_start + i * field::HOP_TELEMETRY_ENTRY_LEN;
            kids.push(
                Node::text(
                    title(labels, || {
                        format!(
                            "Hop {i}: switch 0x{:08x}, queue {} cells, latency {} ns",
                            hop.switch_id, hop.queue_depth, hop.hop_latency
                        )
                    }),
                    at..at + field::HOP_TELEMETRY_ENTRY_LEN,
                    Ett::TlvEntry,
                )
                .with(
                    Ett::TlvEntry,
                    vec![
                        Node::uint(Hf::HopSwitchId, at..at + 4, hop.switch_id),
                        Node::uint(Hf::HopQueueDepth, at + 4..at + 6, hop.queue_depth),
                        Node::uint(Hf::HopLatency, at + 6..at + 8, hop.hop_latency),
                    ],
                ),
            );
        }
    } else if let Some(paths) = tlv.path_status() {
        for (i, path) in paths.enumerate() {
            let at = value_start + i * field::PATH_STATUS_ENTRY_LEN;
            kids.push(
                Node::text(
                    title(labels, || format!("Path ev {}: {}", path.ev, path.state)),
                    at..at + field::PATH_STATUS_ENTRY_LEN,
                    Ett::TlvEntry,
                )
                .with(
                    Ett::TlvEntry,
                    vec![
                        Node::uint(Hf::PathEv, at..at + 2, path.ev),
                        Node::at(Hf::PathStateF, at + 2, u8::from(path.state)),
                    ],
                ),
            );
        }
    } else if let Some(ts) = tlv.ts64() {
        kids.push(Node::uint(
            Hf::Ts64,
            value_start..start + field::TS64_LEN,
            ts,
        ));
    } else if tlv.bytes.len() > 2 {
        kids.push(Node::field(
            Hf::TlvValue,
            start + 2..range.end,
            Value::Bytes,
        ));
    }
    Node::text(
        title(labels, || format!("TLV: {ty} ({} bytes)", tlv.bytes.len())),
        range,
        Ett::Tlv,
    )
    .with(Ett::Tlv, kids)
}

fn tlv_items(p: &Packet<&[u8]>, stop: Option<&Error>, opts: &Options, d: &mut Dissection) {
    // TLVs follow the fixed header: nothing to show unless it is captured.
    if !p.flags().contains(Flags::EXT) || fixed_len(p).is_none() {
        return;
    }
    let cap = p.as_bytes().len();
    let mut kids = Vec::new();
    let mut first = usize::MAX;
    let mut last = 0;
    for tlv in p.tlvs() {
        match tlv {
            Ok(tlv) => {
                first = first.min(tlv.offset);
                last = last.max(tlv.offset + tlv.bytes.len());
                kids.push(tlv_node(&tlv, opts.labels));
            }
            Err(err) => {
                // The lax parse reports the same error when it stopped there.
                if stop != Some(&err) {
                    d.notes.push(note_for(&err, cap, opts.frame_offset));
                }
            }
        }
    }
    if !kids.is_empty() {
        let n = kids.len();
        d.items.push(
            Node::text(
                title(opts.labels, || format!("TLVs ({n})")),
                clamp(first..last, cap),
                Ett::Tlvs,
            )
            .with(Ett::Tlvs, kids),
        );
    }
}

/// The fixed size of the header, from the typed views (`None` when the
/// capture does not hold it).
fn fixed_len(p: &Packet<&[u8]>) -> Option<usize> {
    Some(match p.packet_type() {
        PacketType::Data => p.data()?.op().header_len(),
        PacketType::Ack => field::SACK_BITMAP(p.ack()?.sack_words()).end,
        PacketType::Nack => field::NACK_LEN,
        PacketType::Cnp => field::CNP_LEN,
        PacketType::ProbeReply => field::FEEDBACK_LEN,
        PacketType::Ctrl => field::CTRL_LEN,
        _ => field::BASE_LEN,
    })
}

fn padding_item(p: &Packet<&[u8]>, cap: usize, d: &mut Dissection) {
    if p.flags().contains(Flags::EXT) {
        return;
    }
    let Some(fixed) = fixed_len(p) else { return };
    let end = p.header_len().min(cap);
    if end > fixed {
        d.items
            .push(Node::field(Hf::HeaderPadding, fixed..end, Value::Bytes));
    }
}

fn unknown_value_notes(p: &Packet<&[u8]>, d: &mut Dissection) {
    let cap = p.as_bytes().len();
    let mut note = |what: String, offset: usize| {
        d.notes.push(Note {
            ei: Ei::UnknownValue,
            text: what,
            range: clamp(offset..offset + 1, cap),
        });
    };
    let ty = p.packet_type();
    if !ty.is_known() {
        note(format!("type {ty}"), field::VER_TYPE);
    }
    if let Some(data) = p.data()
        && !data.op().is_known()
    {
        note(format!("DATA op {}", data.op()), field::DATA_OP);
    }
    if let Some(nack) = p.nack()
        && !nack.code().is_known()
    {
        note(format!("NACK code {}", nack.code()), field::NACK_CODE);
    }
    if let Some(reason) = p.cnp_reason()
        && !reason.is_known()
    {
        note(format!("CNP reason {reason}"), field::CNP_REASON);
    }
    if let Some(ctrl) = p.ctrl() {
        if !ctrl.op().is_known() {
            note(format!("CTRL op {}", ctrl.op()), field::CTRL_OP);
        }
        if !ctrl.cc_algo().is_known() {
            note(format!("cc_algo {}", ctrl.cc_algo()), field::CC_ALGO);
        }
    }
}

fn layout_items(p: &Packet<&[u8]>, layout: &Layout, opts: &Options, d: &mut Dissection) {
    let bytes = p.as_bytes();
    let cap = bytes.len();
    if layout.trimmed {
        let declared = p.data().map_or(0, |data| usize::from(data.payload_len()));
        d.items
            .push(Node::field(Hf::Trimmed, 0..0, Value::Marker).generated());
        d.notes.push(Note {
            ei: Ei::Trimmed,
            text: format!(
                "payload trimmed from {declared} to {} bytes",
                layout.payload.len()
            ),
            range: clamp(field::PAYLOAD_LEN, cap),
        });
    }
    let payload = clamp(layout.payload.clone(), cap);
    if !payload.is_empty() {
        d.payload = Some(payload);
    }
    if !p.flags().contains(Flags::CRC) {
        return;
    }
    d.checksum = match (p.crc_status(layout), layout.trailer.clone()) {
        (CrcStatus::NotPresent, _) | (_, None) => Checksum::Missing {
            trimmed: layout.trimmed,
        },
        (CrcStatus::NotChecked, Some(_)) => Checksum::Missing { trimmed: false },
        (CrcStatus::Good, Some(t)) => {
            let stored = p.stored_crc(layout).unwrap_or_default();
            Checksum::Present {
                offset: t.start,
                stored,
                computed: opts.check_crc.then_some(stored),
            }
        }
        (CrcStatus::Bad { stored, computed }, Some(t)) => Checksum::Present {
            offset: t.start,
            stored,
            computed: opts.check_crc.then_some(computed),
        },
    };
}

/// "0x11→0x22" (source → destination connection) for the Info line.
struct Conn(u32, u32);

impl std::fmt::Display for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{:x}\u{2192}0x{:x}", self.0, self.1)
    }
}

fn info_line(p: &Packet<&[u8]>, layout: Option<&Layout>, stop: Option<&Error>) -> String {
    let ty = p.packet_type();
    let mut s = String::with_capacity(128);
    let conn = Conn(p.src_conn(), p.dst_conn());
    match ty {
        PacketType::Data => {
            if let Some(data) = p.data() {
                let op = data.op();
                let _ = write!(
                    s,
                    "DATA {op} {conn} PSN={} ev={} msg={}:{}/{} len={}",
                    p.psn(),
                    p.ev(),
                    data.msg_id(),
                    data.msg_offset(),
                    data.msg_len(),
                    data.payload_len()
                );
            } else {
                let _ = write!(s, "DATA {conn} PSN={} ev={}", p.psn(), p.ev());
            }
        }
        PacketType::Ack | PacketType::Nack | PacketType::Cnp | PacketType::ProbeReply => {
            let _ = write!(s, "{ty}");
            if let Some(nack) = p.nack() {
                let _ = write!(s, " {}", nack.code());
            }
            if let Some(reason) = p.cnp_reason() {
                let _ = write!(s, " {reason}");
            }
            let _ = write!(s, " {conn} cack={}", p.psn());
            if let Some(nack) = p.nack() {
                let _ = write!(s, " nack_psn={}", nack.nack_psn());
            }
            if let Some(ack) = p.ack() {
                let ranges = ack.sack_ranges();
                if !ranges.is_empty() {
                    let _ = write!(s, " SACK={}", ranges_text(&ranges));
                }
            }
            if let Some(fb) = p.feedback() {
                let _ = write!(s, " echo={}@ev{}", fb.echo_psn(), fb.echo_ev());
                let mut names = fb.flags().iter_names().map(|(n, _)| n).peekable();
                if names.peek().is_some() {
                    s.push_str(" <");
                    push_names(&mut s, names);
                    s.push('>');
                }
            }
        }
        PacketType::Ctrl => {
            if let Some(ctrl) = p.ctrl() {
                let _ = write!(
                    s,
                    "CTRL {} {conn} init_psn={} mtu={} cc={}",
                    ctrl.op(),
                    ctrl.init_psn(),
                    ctrl.mtu(),
                    ctrl.cc_algo()
                );
            } else {
                let _ = write!(s, "CTRL {conn}");
            }
        }
        PacketType::Probe => {
            let _ = write!(s, "PROBE {conn} seq={} ev={}", p.psn(), p.ev());
        }
        _ => {
            let _ = write!(s, "{ty} {conn} PSN={} ev={}", p.psn(), p.ev());
        }
    }
    if p.tx_attempt() > 0 {
        let _ = write!(s, " try={}", p.tx_attempt());
    }
    let flags = p.flags() & !(Flags::EXT | Flags::CRC);
    if !flags.is_empty() {
        s.push_str(" [");
        push_names(&mut s, flags.iter_names().map(|(n, _)| n));
        s.push(']');
    }
    if layout.is_some_and(|l| l.trimmed) {
        s.push_str(" [TRIMMED]");
    }
    if let Some(err) = stop {
        if err.is_capture_truncation() {
            s.push_str(" [cut by snaplen]");
        } else {
            s.push_str(" [Malformed]");
        }
    }
    s
}

#[cfg(test)]
mod test {
    use super::*;
    use proto_parse::metaroce::{
        AckRepr, Body, DataRepr, FeedbackRepr, NackCode, NackRepr, Op, Repr, SackBitmap, TlvRepr,
    };

    fn repr(body: Body, payload: &'static [u8], crc: bool) -> Repr<'static> {
        Repr {
            flags: Flags::SOM,
            tx_attempt: 1,
            ev: 7,
            path_seq: 3,
            dst_conn: 0x22,
            src_conn: 0x11,
            psn: 100,
            tx_ts: 9,
            body,
            tlvs: Vec::new(),
            payload,
            crc,
        }
    }

    fn write(payload_len: u16) -> Body {
        Body::Data(DataRepr {
            op: Op::Write {
                remote_va: 0x1000,
                rkey: 5,
            },
            payload_len,
            msg_id: 4,
            msg_offset: 0,
            msg_len: 64,
        })
    }

    fn uint(d: &Dissection, hf: Hf) -> Option<u64> {
        match d.value(hf)? {
            Value::Uint(v) => Some(*v),
            Value::Bits(v) => Some(u64::from(*v)),
            _ => None,
        }
    }

    /// Every item and note range lies within the captured bytes, at every
    /// depth: `ffi` relies on it.
    fn assert_ranges_within(d: &Dissection, captured: usize) {
        d.walk(|n| {
            assert!(
                n.range.end <= captured && n.range.start <= n.range.end,
                "{n:?}"
            )
        });
        for note in &d.notes {
            assert!(note.range.end <= captured, "{note:?}");
        }
        if let Some(p) = &d.payload {
            assert!(p.end <= captured);
        }
        if let Checksum::Present { offset, .. } = d.checksum {
            assert!(offset + 4 <= captured);
        }
        assert!(d.header.end <= captured.max(d.header.start));
    }

    #[test]
    fn data_packet_fields_and_crc_are_decoded() {
        static PAYLOAD: [u8; 32] = [0xAB; 32];
        let bytes = repr(write(32), &PAYLOAD, true).to_vec();
        let d = dissect(&bytes, bytes.len(), &Options::default());
        assert_eq!(d.packet_type, Some(PacketType::Data));
        assert_eq!(uint(&d, Hf::Psn), Some(100));
        assert_eq!(uint(&d, Hf::Ev), Some(7));
        assert_eq!(uint(&d, Hf::DataOp), Some(2));
        assert_eq!(uint(&d, Hf::RemoteVa), Some(0x1000));
        assert_eq!(uint(&d, Hf::Rkey), Some(5));
        assert_eq!(uint(&d, Hf::TxAttempt), Some(1 << 4));
        assert_eq!(d.payload, Some(52..84));
        assert!(
            matches!(d.checksum, Checksum::Present { offset: 84, computed: Some(c), stored } if c == stored)
        );
        assert!(d.notes.is_empty(), "{:?}", d.notes);
        assert!(
            d.info
                .starts_with("DATA WRITE 0x11\u{2192}0x22 PSN=100 ev=7 msg=4:0/64"),
            "{}",
            d.info
        );
        assert_ranges_within(&d, bytes.len());

        let off = dissect(
            &bytes,
            bytes.len(),
            &Options {
                check_crc: false,
                ..Options::default()
            },
        );
        assert!(matches!(
            off.checksum,
            Checksum::Present { computed: None, .. }
        ));
    }

    /// Without info and labels (tshark -T fields) the same items, values,
    /// notes and checksum come out; only the texts nobody shows are empty.
    #[test]
    fn lean_options_keep_values_and_notes() {
        static PAYLOAD: [u8; 32] = [0xAB; 32];
        let bytes = repr(write(32), &PAYLOAD, true).to_vec();
        let full = dissect(&bytes, bytes.len(), &Options::default());
        let lean_opts = Options {
            info: false,
            labels: false,
            ..Options::default()
        };
        let lean = dissect(&bytes, bytes.len(), &lean_opts);
        assert!(lean.info.is_empty());
        assert_eq!(lean.notes, full.notes);
        assert_eq!(lean.checksum, full.checksum);
        assert_eq!(lean.payload, full.payload);
        let fields = |d: &Dissection| {
            let mut v = Vec::new();
            d.walk(|n| {
                if let Label::Field(hf, value) = &n.label {
                    v.push((*hf, value.clone(), n.range.clone()));
                }
            });
            v
        };
        assert_eq!(fields(&lean), fields(&full));
        let info_only = Options {
            labels: false,
            ..Options::default()
        };
        assert_eq!(dissect(&bytes, bytes.len(), &info_only).info, full.info);
    }

    #[test]
    fn trimmed_packet_has_marker_note_and_no_trailer() {
        static PAYLOAD: [u8; 10] = [1; 10];
        let bytes = repr(write(32), &PAYLOAD, true).to_vec();
        let d = dissect(&bytes, bytes.len(), &Options::default());
        assert!(d.has_note(Ei::Trimmed));
        assert_eq!(d.value(Hf::Trimmed), Some(&Value::Marker));
        assert_eq!(uint(&d, Hf::PayloadActual), Some(10));
        assert_eq!(d.checksum, Checksum::Missing { trimmed: true });
        assert!(d.info.ends_with("[TRIMMED]"), "{}", d.info);
    }

    #[test]
    fn ack_info_names_cumulative_ack_sack_ranges_and_echo() {
        let fb = FeedbackRepr {
            echo_psn: 104,
            echo_ev: 2,
            flags: FbFlags::DUP,
            ..FeedbackRepr::default()
        };
        let mut r = repr(
            Body::Ack(AckRepr {
                feedback: fb,
                sack_base: 100,
                sack: SackBitmap::from_psns(100, [101, 102, 104, 200]),
            }),
            &[],
            false,
        );
        r.flags = Flags::empty();
        let bytes = r.to_vec();
        let d = dissect(&bytes, bytes.len(), &Options::default());
        assert_eq!(
            d.info,
            "ACK 0x11\u{2192}0x22 cack=100 SACK=101-102,104,200 echo=104@ev2 <DUP> try=1"
        );
        assert_eq!(
            d.value(Hf::SackRanges),
            Some(&Value::Text("101-102,104,200".into()))
        );
        assert_ranges_within(&d, bytes.len());
    }

    #[test]
    fn malformed_packets_carry_the_proto_parse_error_text() {
        let r = repr(
            Body::Nack(NackRepr {
                feedback: FeedbackRepr::default(),
                code: NackCode::Gap,
                rnr_timer: 0,
                nack_psn: 5,
            }),
            &[],
            false,
        );
        let mut bytes = r.to_vec();
        bytes.push(0); // a NACK has no payload
        let d = dissect(&bytes, bytes.len(), &Options::default());
        let note = d
            .notes
            .iter()
            .find(|n| n.ei == Ei::Malformed)
            .expect("malformed");
        let err = metaroce::parse_lax(&bytes, bytes.len()).stop.unwrap();
        assert_eq!(note.text, err.to_string());
        // With the payload at frame offset 42, the text gives frame offsets.
        let opts = Options {
            frame_offset: 42,
            ..Options::default()
        };
        let d = dissect(&bytes, bytes.len(), &opts);
        let note = d.notes.iter().find(|n| n.ei == Ei::Malformed).unwrap();
        assert_eq!(note.text, err.clone().at_offset(42).to_string());
        assert!(d.info.ends_with("[Malformed]"));
    }

    #[test]
    fn tlv_running_past_hlen_is_malformed() {
        let mut r = repr(write(0), &[], false);
        r.tlvs = vec![TlvRepr::Ts64(1)];
        let mut bytes = r.to_vec();
        bytes[52 + 1] = 9; // TS64 len: 9 words, past hlen
        let d = dissect(&bytes, bytes.len(), &Options::default());
        assert!(d.has_note(Ei::Malformed), "{:?}", d.notes);
        assert_ranges_within(&d, bytes.len());
    }

    #[test]
    fn every_truncation_and_byte_flip_stays_within_the_capture() {
        static PAYLOAD: [u8; 40] = [7; 40];
        let mut r = repr(write(40), &PAYLOAD, true);
        r.tlvs = vec![
            TlvRepr::Ts64(1),
            TlvRepr::Unknown {
                tlv_type: 77,
                value: vec![1, 2],
            },
        ];
        let bytes = r.to_vec();
        for cut in 0..=bytes.len() {
            // A snaplen cut (wire length kept) and a short packet.
            for wire in [bytes.len(), cut] {
                let d = dissect(&bytes[..cut], wire, &Options::default());
                assert_ranges_within(&d, cut);
            }
        }
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                let d = dissect(&b, b.len(), &Options::default());
                assert_ranges_within(&d, b.len());
            }
        }
    }

    #[test]
    fn empty_and_short_payloads_are_malformed_not_panics() {
        for len in 0..24 {
            let bytes = vec![0x10; len];
            let d = dissect(&bytes, len, &Options::default());
            assert!(d.items.is_empty());
            assert!(d.has_note(Ei::Malformed), "len {len}: {:?}", d.notes);
        }
        // Captured short, wire long: a capture truncation.
        let d = dissect(&[0x10; 10], 100, &Options::default());
        assert!(d.has_note(Ei::CaptureTruncated));
    }
}
