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

use crate::fields::{Custom, Ei, Ett, FlagSet, Hf};

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
    /// summary and subtree titles. Off when the tree is
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
            generated: false,
            subtree: Some(ett),
            children: Vec::new(),
        }
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

impl Default for Dissection {
    fn default() -> Self {
        Dissection {
            header: 0..0,
            info: String::new(),
            items: Vec::new(),
            notes: Vec::new(),
            checksum: Checksum::Absent,
            payload: None,
            packet_type: None,
        }
    }
}

impl Dissection {
    /// Empties it for a packet of `captured` bytes, keeping the buffers.
    fn clear(&mut self, captured: usize) {
        self.header = 0..captured;
        self.info.clear();
        self.items.clear();
        self.notes.clear();
        self.checksum = Checksum::Absent;
        self.payload = None;
        self.packet_type = None;
    }

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

static WORDS_TEXT: ByteTexts = ByteTexts::new();
static RNR_TEXT: ByteTexts = ByteTexts::new();

/// "13 words (52 bytes)" (hlen, TLV length).
fn words_text(words: u8) -> &'static str {
    WORDS_TEXT.get(words, |w| {
        format!("{w} words ({} bytes)", usize::from(w) * field::TLV_WORD)
    })
}

/// The label of a flags octet's value (the value-string entry of
/// `metaroce.flags` / `metaroce.fb.flags`, shown as "Flags: SOM,CRC (0x44)"):
/// the names of its set flags joined by ',', "reserved" when a reserved bit
/// is set, "none" when no bit is.
pub fn flag_names(set: FlagSet, bits: u8) -> String {
    let mut out = String::with_capacity(24);
    let reserved = match set {
        FlagSet::Base => {
            push_names(
                &mut out,
                Flags::from_bits_retain(bits).iter_names().map(|(n, _)| n),
            );
            bits & Flags::RESERVED != 0
        }
        FlagSet::Feedback => {
            push_names(
                &mut out,
                FbFlags::from_bits_retain(bits).iter_names().map(|(n, _)| n),
            );
            bits & FbFlags::RESERVED != 0
        }
    };
    if reserved {
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str("reserved");
    }
    if out.is_empty() {
        out.push_str("none");
    }
    out
}

/// The label text of a [`Custom`] field's value, which Wireshark asks for
/// only when the item is shown (`BASE_CUSTOM`).
pub fn custom_label(custom: Custom, value: u32) -> Cow<'static, str> {
    match (custom, u8::try_from(value)) {
        (Custom::Words, Ok(w)) => words_text(w).into(),
        (Custom::RnrTimer, Ok(r)) => RNR_TEXT
            .get(r, |r| format!("{r} ({} us)", u32::from(r) * 10))
            .into(),
        (Custom::Credit, _) if value == u32::MAX => "not credit-limited (0xffffffff)".into(),
        _ => value.to_string().into(),
    }
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
    let mut d = Dissection::default();
    dissect_parsed_into(captured, lax, opts, &mut d);
    d
}

/// [`dissect_parsed`] into `d`, whose previous content is replaced (its
/// buffers are reused: the plugin keeps one `Dissection` per thread, so a
/// packet costs no allocation of the item list or the Info line).
pub fn dissect_parsed_into(
    captured: &[u8],
    lax: &metaroce::Lax<'_>,
    opts: &Options,
    d: &mut Dissection,
) {
    let cap = captured.len();
    let labels = opts.labels;
    d.clear(cap);
    let Some(packet) = &lax.packet else {
        // Not even a base header.
        if let Some(err) = &lax.stop {
            let note = note_for(err, cap, opts.frame_offset);
            d.info = format!("[Malformed: {}]", note.text);
            d.notes.push(note);
        }
        return;
    };
    let ty = packet.packet_type();
    d.packet_type = Some(ty);
    let header_len = packet.header_len();
    d.header = 0..header_len.clamp(field::BASE_LEN, cap);

    base_items(packet, d);
    type_items(packet, lax.layout.as_ref(), d);
    tlv_items(packet, lax.stop.as_ref(), opts, d);
    padding_item(packet, cap, d);

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
    unknown_value_notes(packet, d);

    if let Some(layout) = &lax.layout {
        layout_items(packet, layout, opts, d);
    }
    if let Some(err) = &lax.stop {
        d.notes.push(note_for(err, cap, opts.frame_offset));
    }

    if opts.info || labels {
        info_line(&mut d.info, packet, lax.layout.as_ref(), lax.stop.as_ref());
    }
}

fn base_items(p: &Packet<&[u8]>, d: &mut Dissection) {
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
        Node::at(Hf::Flags, field::FLAGS, flags.bits()).with(Ett::Flags, flag_bits),
        Node::at(Hf::Hlen, field::HLEN, hlen),
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

fn type_items(p: &Packet<&[u8]>, layout: Option<&Layout>, d: &mut Dissection) {
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
        // The payload carried, only when it is not what payload_len says
        // (trimmed): a copy of payload_len on every packet would cost a
        // tree item and tell nothing.
        if let Some(layout) = layout
            && layout.payload.len() != usize::from(data.payload_len())
        {
            kids.push(Node::uint(Hf::PayloadActual, 0..0, layout.payload.len() as u64).generated());
        }
        d.items.push(
            Node::field(
                Hf::DataHeader,
                clamp(field::DATA_OP..op.header_len(), cap),
                Value::Marker,
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
            Node::at(Hf::FbFlags, field::FB_FLAGS, fb_bits).with(Ett::FbFlags, bits),
            Node::at(Hf::SackWords, field::SACK_WORDS, fb.sack_words()),
            Node::uint(Hf::EchoEv, field::ECHO_EV, fb.echo_ev()),
            Node::uint(Hf::EchoPsn, field::ECHO_PSN, fb.echo_psn()),
            Node::uint(Hf::EchoTxTs, field::ECHO_TX_TS, fb.echo_tx_ts()),
            Node::uint(Hf::RxTs, field::RX_TS, fb.rx_ts()),
            Node::uint(Hf::CeCount, field::CE_COUNT, fb.ce_count()),
            Node::at(Hf::RxBufLevel, field::RX_BUF_LEVEL, fb.rx_buf_level()),
            Node::at(Hf::FwdHops, field::FWD_HOPS, fb.fwd_hops()),
        ];
        kids.push(Node::uint(Hf::Credit, field::CREDIT, credit));
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
            kids.push(Node::at(Hf::RnrTimer, field::RNR_TIMER, rnr));
            kids.push(Node::uint(Hf::NackPsn, field::NACK_PSN, nack.nack_psn()));
            end = field::NACK_LEN;
        } else if let Some(reason) = p.cnp_reason() {
            kids.push(Node::at(Hf::CnpReason, field::CNP_REASON, u8::from(reason)));
            end = field::CNP_LEN;
        }
        let header = match ty {
            PacketType::Ack => Hf::AckHeader,
            PacketType::Nack => Hf::NackHeader,
            PacketType::Cnp => Hf::CnpHeader,
            _ => Hf::FbHeader,
        };
        d.items.push(
            Node::field(header, clamp(field::FB_FLAGS..end, cap), Value::Marker)
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
            Node::field(
                Hf::CtrlHeader,
                clamp(field::CTRL_OP..field::CTRL_LEN, cap),
                Value::Marker,
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
    kids.push(Node::at(Hf::TlvLen, start + field::TLV_LEN, words));
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

/// The Info line is written with these instead of `write!`: it is built
/// for every packet whose tree is shown (the protocol item repeats it), and
/// `core::fmt` costs several times more per number.
fn push_dec(s: &mut String, v: impl Into<u64>) {
    let mut v: u64 = v.into();
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for &b in &buf[i..] {
        s.push(char::from(b));
    }
}

/// "0x" and `v` in lower-case hex, no padding.
fn push_hex(s: &mut String, v: u32) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 8];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = DIGITS[(v & 0xF) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    s.push_str("0x");
    for &b in &buf[i..] {
        s.push(char::from(b));
    }
}

/// The name of a value of one of `proto_parse`'s open enums ("WRITE",
/// "unknown (9)").
macro_rules! push_enum {
    ($s:expr, $v:expr) => {{
        let v = $v;
        if v.is_known() {
            $s.push_str(v.name());
        } else {
            let _ = write!($s, "{v}");
        }
    }};
}

/// "0x11→0x22" (source → destination connection) for the Info line.
fn push_conn(s: &mut String, p: &Packet<&[u8]>) {
    push_hex(s, p.src_conn());
    s.push('\u{2192}');
    push_hex(s, p.dst_conn());
}

/// Appends the Info line of `p` to `s`.
fn info_line(s: &mut String, p: &Packet<&[u8]>, layout: Option<&Layout>, stop: Option<&Error>) {
    let ty = p.packet_type();
    match ty {
        PacketType::Data => {
            s.push_str("DATA ");
            if let Some(data) = p.data() {
                push_enum!(s, data.op());
                s.push(' ');
            }
            push_conn(s, p);
            s.push_str(" PSN=");
            push_dec(s, p.psn());
            s.push_str(" ev=");
            push_dec(s, p.ev());
            if let Some(data) = p.data() {
                s.push_str(" msg=");
                push_dec(s, data.msg_id());
                s.push(':');
                push_dec(s, data.msg_offset());
                s.push('/');
                push_dec(s, data.msg_len());
                s.push_str(" len=");
                push_dec(s, data.payload_len());
            }
        }
        PacketType::Ack | PacketType::Nack | PacketType::Cnp | PacketType::ProbeReply => {
            push_enum!(s, ty);
            if let Some(nack) = p.nack() {
                s.push(' ');
                push_enum!(s, nack.code());
            }
            if let Some(reason) = p.cnp_reason() {
                s.push(' ');
                push_enum!(s, reason);
            }
            s.push(' ');
            push_conn(s, p);
            s.push_str(" cack=");
            push_dec(s, p.psn());
            if let Some(nack) = p.nack() {
                s.push_str(" nack_psn=");
                push_dec(s, nack.nack_psn());
            }
            if let Some(ack) = p.ack() {
                let ranges = ack.sack_ranges();
                if !ranges.is_empty() {
                    s.push_str(" SACK=");
                    s.push_str(&ranges_text(&ranges));
                }
            }
            if let Some(fb) = p.feedback() {
                s.push_str(" echo=");
                push_dec(s, fb.echo_psn());
                s.push_str("@ev");
                push_dec(s, fb.echo_ev());
                let mut names = fb.flags().iter_names().map(|(n, _)| n).peekable();
                if names.peek().is_some() {
                    s.push_str(" <");
                    push_names(s, names);
                    s.push('>');
                }
            }
        }
        PacketType::Ctrl => {
            s.push_str("CTRL ");
            if let Some(ctrl) = p.ctrl() {
                push_enum!(s, ctrl.op());
                s.push(' ');
                push_conn(s, p);
                s.push_str(" init_psn=");
                push_dec(s, ctrl.init_psn());
                s.push_str(" mtu=");
                push_dec(s, ctrl.mtu());
                s.push_str(" cc=");
                push_enum!(s, ctrl.cc_algo());
            } else {
                push_conn(s, p);
            }
        }
        PacketType::Probe => {
            s.push_str("PROBE ");
            push_conn(s, p);
            s.push_str(" seq=");
            push_dec(s, p.psn());
            s.push_str(" ev=");
            push_dec(s, p.ev());
        }
        _ => {
            push_enum!(s, ty);
            s.push(' ');
            push_conn(s, p);
            s.push_str(" PSN=");
            push_dec(s, p.psn());
            s.push_str(" ev=");
            push_dec(s, p.ev());
        }
    }
    if p.tx_attempt() > 0 {
        s.push_str(" try=");
        push_dec(s, p.tx_attempt());
    }
    let flags = p.flags() & !(Flags::EXT | Flags::CRC);
    if !flags.is_empty() {
        s.push_str(" [");
        push_names(s, flags.iter_names().map(|(n, _)| n));
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

    /// The labels Wireshark asks for lazily (value strings, BASE_CUSTOM),
    /// and no generated payload length when it repeats payload_len.
    #[test]
    fn lazy_labels_and_no_redundant_payload_length() {
        assert_eq!(flag_names(FlagSet::Base, 0x44), "SOM,CRC");
        assert_eq!(flag_names(FlagSet::Base, 0x00), "none");
        assert_eq!(flag_names(FlagSet::Base, 0x05), "CRC,reserved");
        assert_eq!(flag_names(FlagSet::Feedback, 0x80), "ECE");
        assert_eq!(custom_label(Custom::Words, 13), "13 words (52 bytes)");
        assert_eq!(custom_label(Custom::RnrTimer, 5), "5 (50 us)");
        assert_eq!(
            custom_label(Custom::Credit, u32::MAX),
            "not credit-limited (0xffffffff)"
        );
        assert_eq!(custom_label(Custom::Credit, 7), "7");
        static PAYLOAD: [u8; 32] = [0xAB; 32];
        let bytes = repr(write(32), &PAYLOAD, true).to_vec();
        let d = dissect(&bytes, bytes.len(), &Options::default());
        assert_eq!(d.value(Hf::PayloadActual), None);
        assert_eq!(d.value(Hf::DataHeader), Some(&Value::Marker));
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
