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

/// A text of a packet's items: a range of [`Dissection::texts`], where
/// every text of the packet is written (one reused buffer: items own no
/// string, so building and clearing the list allocates and drops nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextRef {
    start: u32,
    end: u32,
}

/// An item's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    Uint(u64),
    /// The whole octet(s) of a field with a bit mask (flag bits, version,
    /// type, tx_attempt): Wireshark applies the mask and shift.
    Bits(u32),
    /// The bytes of the item's range.
    Bytes,
    Text(TextRef),
    /// `FT_NONE` marker.
    Marker,
    /// A duration in ns (`FT_RELATIVE_TIME`).
    Time(i64),
}

/// What a tree item shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// A registered field.
    Field(Hf, Value),
    /// A text-only item that heads a subtree ("TLV: HOP_TELEMETRY").
    Text(TextRef),
}

/// Deepest subtree level below the protocol item ([`Item::depth`]).
pub const MAX_DEPTH: u8 = 7;

/// One item of the tree. A packet's items are one flat list in tree order
/// (depth first): an item's children are the items right after it with a
/// greater depth, up to the next item at its depth or less. The list is
/// reused from packet to packet: a packet allocates no tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub label: Label,
    /// Byte range within the UDP payload (always within the captured bytes).
    pub range: Range<usize>,
    /// Computed, not on the wire (`proto_item_set_generated`).
    pub generated: bool,
    /// The subtree kind of the item's children (always set on a text item).
    pub subtree: Option<Ett>,
    /// 0: a child of the protocol item; 1: a child of the item of depth 0
    /// before it; ... Never more than one deeper than the item before it,
    /// nor more than [`MAX_DEPTH`].
    pub depth: u8,
}

impl Item {
    pub(crate) fn field(hf: Hf, range: Range<usize>, value: Value) -> Self {
        Item {
            label: Label::Field(hf, value),
            range,
            generated: false,
            subtree: None,
            depth: 0,
        }
    }

    fn uint(hf: Hf, range: Range<usize>, value: impl Into<u64>) -> Self {
        Item::field(hf, range, Value::Uint(value.into()))
    }

    fn at(hf: Hf, offset: usize, value: impl Into<u64>) -> Self {
        Item::uint(hf, offset..offset + 1, value)
    }

    fn bits(hf: Hf, range: Range<usize>, bits: impl Into<u32>) -> Self {
        Item::field(hf, range, Value::Bits(bits.into()))
    }

    pub(crate) fn text(text: TextRef, range: Range<usize>) -> Self {
        Item {
            label: Label::Text(text),
            range,
            generated: false,
            subtree: None,
            depth: 0,
        }
    }

    pub(crate) fn generated(mut self) -> Self {
        self.generated = true;
        self
    }

    /// The field of this item, if it is one.
    pub fn hf(&self) -> Option<Hf> {
        match self.label {
            Label::Field(hf, _) => Some(hf),
            Label::Text(_) => None,
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

/// A lint finding, shown as its rule's expert info (on the whole packet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LintNote {
    /// The rule's place in the registry (`analyzer::lint::RuleId::index`).
    pub rule: usize,
    pub text: String,
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
    /// The items under the protocol item, in tree order (see [`Item`]).
    pub items: Vec<Item>,
    /// The texts of the items ([`TextRef`]; [`Dissection::text`]).
    pub texts: String,
    pub notes: Vec<Note>,
    /// The conformance lint's findings on this packet, each shown as the
    /// expert info of its rule (`fields::lint_abbrev`).
    pub lint: Vec<LintNote>,
    pub checksum: Checksum,
    /// The captured payload bytes, handed to the `data` dissector.
    pub payload: Option<Range<usize>>,
    /// The packet type, when the base header was there.
    pub packet_type: Option<PacketType>,
    /// The depth of the next item added (while building).
    depth: u8,
}

impl Default for Dissection {
    fn default() -> Self {
        Dissection {
            header: 0..0,
            info: String::new(),
            items: Vec::new(),
            texts: String::new(),
            notes: Vec::new(),
            lint: Vec::new(),
            checksum: Checksum::Absent,
            payload: None,
            packet_type: None,
            depth: 0,
        }
    }
}

impl Dissection {
    /// Empties it for a packet of `captured` bytes, keeping the buffers.
    pub(crate) fn clear(&mut self, captured: usize) {
        self.header = 0..captured;
        self.info.clear();
        self.items.clear();
        self.texts.clear();
        self.notes.clear();
        self.lint.clear();
        self.checksum = Checksum::Absent;
        self.payload = None;
        self.packet_type = None;
        self.depth = 0;
    }

    /// Keeps `text` for an item.
    pub(crate) fn push_text(&mut self, text: &str) -> TextRef {
        self.write_text(|s| s.push_str(text))
    }

    /// Keeps the text `write` appends for an item.
    pub(crate) fn write_text(&mut self, write: impl FnOnce(&mut String)) -> TextRef {
        let start = self.texts.len();
        write(&mut self.texts);
        let end = self.texts.len();
        // Texts of one packet stay far below 4 GiB; a wrap could only show
        // a wrong (never an out-of-bounds) text.
        TextRef {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The text `t` refers to ("" if it is not one of this packet's).
    pub fn text(&self, t: TextRef) -> &str {
        self.texts
            .get(t.start as usize..t.end as usize)
            .unwrap_or_default()
    }

    /// The text of a text item or of a string field's value.
    pub fn item_text(&self, item: &Item) -> Option<&str> {
        match item.label {
            Label::Text(t) | Label::Field(_, Value::Text(t)) => Some(self.text(t)),
            Label::Field(..) => None,
        }
    }

    /// Adds `item` at the current depth.
    pub(crate) fn add(&mut self, mut item: Item) {
        item.depth = self.depth;
        self.items.push(item);
    }

    /// Adds `item` as the head of a subtree of kind `ett`: the items added
    /// until the matching [`Dissection::close`] are its children.
    pub(crate) fn open(&mut self, mut item: Item, ett: Ett) {
        item.subtree = Some(ett);
        self.add(item);
        debug_assert!(self.depth < MAX_DEPTH, "subtrees nested too deep");
        self.depth = (self.depth + 1).min(MAX_DEPTH);
    }

    /// [`Dissection::open`] of a text item.
    pub(crate) fn open_text(&mut self, text: &str, range: Range<usize>, ett: Ett) {
        let text = self.push_text(text);
        self.open(Item::text(text, range), ett);
    }

    /// Ends the subtree opened last.
    pub(crate) fn close(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// The first value of field `hf` (tests and the Info line).
    pub fn value(&self, hf: Hf) -> Option<&Value> {
        self.items.iter().find_map(|n| match &n.label {
            Label::Field(h, v) if *h == hf => Some(v),
            _ => None,
        })
    }

    /// The indices of the children of the item at `i` (not their
    /// descendants).
    pub fn children(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let depth = self.items.get(i).map_or(0, |n| n.depth);
        self.items
            .iter()
            .enumerate()
            .skip(i + 1)
            .take_while(move |(_, n)| n.depth > depth)
            .filter(move |(_, n)| n.depth == depth + 1)
            .map(|(j, _)| j)
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

/// Appends the PSNs a SACK bitmap reports received (bit `i`, counted from
/// the most significant bit of the first byte, is PSN `base + i`) as
/// inclusive ranges, "a-b,c" (what `Ack::sack_ranges` gives, joined). Reads
/// the bitmap a 64-bit word at a time, a run of bits at a time.
fn push_sack_ranges(s: &mut String, base: u32, bitmap: &[u8]) {
    // The run being built, as bit indices [start, end).
    let mut run: Option<(usize, usize)> = None;
    let mut first = true;
    let mut flush = |s: &mut String, (start, end): (usize, usize)| {
        if !first {
            s.push(',');
        }
        first = false;
        let lo = base.wrapping_add(start as u32);
        let hi = base.wrapping_add((end - 1) as u32);
        push_dec(s, lo);
        if hi != lo {
            s.push('-');
            push_dec(s, hi);
        }
    };
    for (wi, chunk) in bitmap.chunks(8).enumerate() {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        let mut w = u64::from_be_bytes(word);
        let mut at = wi * 64;
        while w != 0 {
            let zeros = w.leading_zeros() as usize;
            w <<= zeros;
            at += zeros;
            let ones = (!w).leading_zeros() as usize;
            w = w.checked_shl(ones as u32).unwrap_or(0);
            run = match run {
                Some((start, end)) if end == at => Some((start, at + ones)),
                Some(done) => {
                    flush(s, done);
                    Some((at, at + ones))
                }
                None => Some((at, at + ones)),
            };
            at += ones;
        }
    }
    if let Some(done) = run {
        flush(s, done);
    }
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
    tlvs_items(packet, lax.stop.as_ref(), opts, d);
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
    let flags = p.flags().bits();
    let ty = p.packet_type();
    let hlen = p.hlen();
    let ver_type = (p.version() << 4) | (u8::from(ty) & 0x0F);
    // Fields under a bit mask get the whole octet; Wireshark masks and
    // shifts.
    d.add(Item::bits(Hf::Version, 0..1, ver_type));
    d.add(Item::bits(Hf::Type, 0..1, ver_type));
    d.open(Item::at(Hf::Flags, field::FLAGS, flags), Ett::Flags);
    for hf in [
        Hf::FlagAr,
        Hf::FlagSom,
        Hf::FlagEom,
        Hf::FlagSe,
        Hf::FlagExt,
        Hf::FlagCrc,
    ] {
        d.add(Item::bits(hf, 1..2, flags));
    }
    if flags & Flags::RESERVED != 0 {
        d.add(Item::at(
            Hf::FlagsReserved,
            field::FLAGS,
            flags & Flags::RESERVED,
        ));
    }
    d.close();
    d.add(Item::at(Hf::Hlen, field::HLEN, hlen));
    d.add(Item::bits(
        Hf::TxAttempt,
        field::TX_ATTEMPT..field::TX_ATTEMPT + 1,
        u32::from(p.tx_attempt()) << 4,
    ));
    d.add(Item::uint(Hf::Ev, field::EV, p.ev()));
    d.add(Item::uint(Hf::PathSeq, field::PATH_SEQ, p.path_seq()));
    d.add(Item::uint(Hf::DstConn, field::DST_CONN, p.dst_conn()));
    d.add(Item::uint(Hf::SrcConn, field::SRC_CONN, p.src_conn()));
    // Hidden: either connection id, for "Apply as filter" on a
    // conversation (`metaroce.conn == 0x11` matches both directions).
    d.add(Item::uint(Hf::Conn, field::DST_CONN, p.dst_conn()));
    d.add(Item::uint(Hf::Conn, field::SRC_CONN, p.src_conn()));
    d.add(Item::uint(Hf::Psn, field::PSN, p.psn()));
    d.add(Item::uint(Hf::TxTs, field::TX_TS, p.tx_ts()));
}

fn type_items(p: &Packet<&[u8]>, layout: Option<&Layout>, d: &mut Dissection) {
    let ty = p.packet_type();
    let cap = p.as_bytes().len();
    if let Some(data) = p.data() {
        let op = data.op();
        d.open(
            Item::field(
                Hf::DataHeader,
                clamp(field::DATA_OP..op.header_len(), cap),
                Value::Marker,
            ),
            Ett::TypeHeader,
        );
        d.add(Item::at(Hf::DataOp, field::DATA_OP, u8::from(op)));
        d.add(Item::uint(
            Hf::PayloadLen,
            field::PAYLOAD_LEN,
            data.payload_len(),
        ));
        d.add(Item::uint(Hf::MsgId, field::MSG_ID, data.msg_id()));
        d.add(Item::uint(
            Hf::MsgOffset,
            field::MSG_OFFSET,
            data.msg_offset(),
        ));
        d.add(Item::uint(Hf::MsgLen, field::MSG_LEN, data.msg_len()));
        if let Some(va) = data.remote_va() {
            d.add(Item::uint(Hf::RemoteVa, field::REMOTE_VA, va));
        }
        if let Some(rkey) = data.rkey() {
            d.add(Item::uint(Hf::Rkey, field::RKEY, rkey));
        }
        if let (Some(imm), Some(range)) = (data.imm_data(), op.imm_data_field()) {
            d.add(Item::uint(Hf::ImmData, range, imm));
        }
        // The payload carried, only when it is not what payload_len says
        // (trimmed): a copy of payload_len on every packet would cost a
        // tree item and tell nothing.
        if let Some(layout) = layout
            && layout.payload.len() != usize::from(data.payload_len())
        {
            d.add(Item::uint(Hf::PayloadActual, 0..0, layout.payload.len() as u64).generated());
        }
        d.close();
        return;
    }
    if let Some(fb) = p.feedback() {
        let header = match ty {
            PacketType::Ack => Hf::AckHeader,
            PacketType::Nack => Hf::NackHeader,
            PacketType::Cnp => Hf::CnpHeader,
            _ => Hf::FbHeader,
        };
        // The type header ends with the fixed header; a capture cut inside
        // it shows the feedback block that it holds.
        let end = p.fixed_len().unwrap_or(field::FEEDBACK_LEN);
        d.open(
            Item::field(header, clamp(field::FB_FLAGS..end, cap), Value::Marker),
            Ett::TypeHeader,
        );
        let fb_bits = fb.flags().bits();
        let fb_flags = field::FB_FLAGS..field::FB_FLAGS + 1;
        d.open(
            Item::at(Hf::FbFlags, field::FB_FLAGS, fb_bits),
            Ett::FbFlags,
        );
        for hf in [Hf::FbEce, Hf::FbTrim, Hf::FbDup, Hf::FbCoal] {
            d.add(Item::bits(hf, fb_flags.clone(), fb_bits));
        }
        if fb_bits & FbFlags::RESERVED != 0 {
            d.add(Item::at(
                Hf::FbReserved,
                field::FB_FLAGS,
                fb_bits & FbFlags::RESERVED,
            ));
        }
        d.close();
        d.add(Item::at(Hf::SackWords, field::SACK_WORDS, fb.sack_words()));
        d.add(Item::uint(Hf::EchoEv, field::ECHO_EV, fb.echo_ev()));
        d.add(Item::uint(Hf::EchoPsn, field::ECHO_PSN, fb.echo_psn()));
        d.add(Item::uint(Hf::EchoTxTs, field::ECHO_TX_TS, fb.echo_tx_ts()));
        d.add(Item::uint(Hf::RxTs, field::RX_TS, fb.rx_ts()));
        d.add(Item::uint(Hf::CeCount, field::CE_COUNT, fb.ce_count()));
        d.add(Item::at(
            Hf::RxBufLevel,
            field::RX_BUF_LEVEL,
            fb.rx_buf_level(),
        ));
        d.add(Item::at(Hf::FwdHops, field::FWD_HOPS, fb.fwd_hops()));
        d.add(Item::uint(Hf::Credit, field::CREDIT, fb.credit()));
        if let Some(ack) = p.ack() {
            let words = ack.sack_words();
            d.add(Item::uint(Hf::SackBase, field::SACK_BASE, ack.sack_base()));
            if words > 0 {
                d.add(Item::field(
                    Hf::SackBitmap,
                    field::SACK_BITMAP(words),
                    Value::Bytes,
                ));
                let ranges =
                    d.write_text(|s| push_sack_ranges(s, ack.sack_base(), ack.sack_bitmap()));
                d.add(
                    Item::field(
                        Hf::SackRanges,
                        field::SACK_BITMAP(words),
                        Value::Text(ranges),
                    )
                    .generated(),
                );
            }
        } else if let Some(nack) = p.nack() {
            d.add(Item::at(
                Hf::NackCode,
                field::NACK_CODE,
                u8::from(nack.code()),
            ));
            d.add(Item::at(Hf::RnrTimer, field::RNR_TIMER, nack.rnr_timer()));
            d.add(Item::uint(Hf::NackPsn, field::NACK_PSN, nack.nack_psn()));
        } else if let Some(reason) = p.cnp_reason() {
            d.add(Item::at(Hf::CnpReason, field::CNP_REASON, u8::from(reason)));
        }
        d.close();
        return;
    }
    if let Some(ctrl) = p.ctrl() {
        let fbits = ctrl.features().bits();
        d.open(
            Item::field(
                Hf::CtrlHeader,
                clamp(field::CTRL_OP..field::CTRL_LEN, cap),
                Value::Marker,
            ),
            Ett::TypeHeader,
        );
        d.add(Item::at(Hf::CtrlOp, field::CTRL_OP, u8::from(ctrl.op())));
        d.add(Item::at(
            Hf::CcAlgo,
            field::CC_ALGO,
            u8::from(ctrl.cc_algo()),
        ));
        d.add(Item::uint(Hf::Mtu, field::MTU, ctrl.mtu()));
        d.add(Item::uint(Hf::InitPsn, field::INIT_PSN, ctrl.init_psn()));
        d.open(
            Item::uint(Hf::Features, field::FEATURES, fbits),
            Ett::Features,
        );
        for hf in [
            Hf::FeatCrc,
            Hf::FeatPathSeq,
            Hf::FeatTelemetry,
            Hf::FeatTrimAware,
            Hf::FeatClockSync,
        ] {
            d.add(Item::bits(hf, field::FEATURES, fbits));
        }
        d.close();
        d.add(Item::uint(
            Hf::TsUnitPs,
            field::TS_UNIT_PS,
            ctrl.ts_unit_ps(),
        ));
        d.close();
    }
}

/// Adds the subtree of one TLV.
fn tlv_items(tlv: &Tlv<'_>, labels: bool, d: &mut Dissection) {
    let start = tlv.offset;
    let range = start..start + tlv.bytes.len();
    let ty = tlv.tlv_type;
    if ty == TlvType::Pad {
        d.open_text(
            &title(labels, || format!("PAD ({} bytes)", tlv.covers)),
            range.clone(),
            Ett::Tlv,
        );
        d.add(Item::at(Hf::TlvType, start + field::TLV_TYPE, u8::from(ty)));
        // PAD runs to the end of the header (spec 6): its len byte is
        // padding; the length it covers is computed.
        d.add(Item::uint(Hf::TlvLen, range.clone(), tlv.len_words()).generated());
        if tlv.bytes.len() > 1 {
            d.add(Item::field(
                Hf::TlvPadding,
                start + 1..range.end,
                Value::Bytes,
            ));
        }
        d.close();
        return;
    }
    d.open_text(
        &title(labels, || format!("TLV: {ty} ({} bytes)", tlv.bytes.len())),
        range.clone(),
        Ett::Tlv,
    );
    d.add(Item::at(Hf::TlvType, start + field::TLV_TYPE, u8::from(ty)));
    d.add(Item::at(
        Hf::TlvLen,
        start + field::TLV_LEN,
        tlv.len_words(),
    ));
    let value_start = start + field::TLV_VALUE_START;
    if let Some(hops) = tlv.hop_telemetry() {
        for (i, hop) in hops.enumerate() {
            let at = value_start + i * field::HOP_TELEMETRY_ENTRY_LEN;
            d.open_text(
                &title(labels, || {
                    format!(
                        "Hop {i}: switch 0x{:08x}, queue {} cells, latency {} ns",
                        hop.switch_id, hop.queue_depth, hop.hop_latency
                    )
                }),
                at..at + field::HOP_TELEMETRY_ENTRY_LEN,
                Ett::TlvEntry,
            );
            d.add(Item::uint(Hf::HopSwitchId, at..at + 4, hop.switch_id));
            d.add(Item::uint(
                Hf::HopQueueDepth,
                at + 4..at + 6,
                hop.queue_depth,
            ));
            d.add(Item::uint(Hf::HopLatency, at + 6..at + 8, hop.hop_latency));
            d.close();
        }
    } else if let Some(paths) = tlv.path_status() {
        for (i, path) in paths.enumerate() {
            let at = value_start + i * field::PATH_STATUS_ENTRY_LEN;
            d.open_text(
                &title(labels, || format!("Path ev {}: {}", path.ev, path.state)),
                at..at + field::PATH_STATUS_ENTRY_LEN,
                Ett::TlvEntry,
            );
            d.add(Item::uint(Hf::PathEv, at..at + 2, path.ev));
            d.add(Item::at(Hf::PathStateF, at + 2, u8::from(path.state)));
            d.close();
        }
    } else if let Some(ts) = tlv.ts64() {
        d.add(Item::uint(
            Hf::Ts64,
            value_start..start + field::TS64_LEN,
            ts,
        ));
    } else if tlv.bytes.len() > 2 {
        d.add(Item::field(
            Hf::TlvValue,
            start + 2..range.end,
            Value::Bytes,
        ));
    }
    d.close();
}

fn tlvs_items(p: &Packet<&[u8]>, stop: Option<&Error>, opts: &Options, d: &mut Dissection) {
    // TLVs follow the fixed header: nothing to show unless it is captured.
    if !p.flags().contains(Flags::EXT) || p.fixed_len().is_none() {
        return;
    }
    let cap = p.as_bytes().len();
    // The "TLVs (n)" head is added now and completed (title, range) once
    // the TLVs are read, or taken out again when there is none.
    let head = d.items.len();
    let none = d.push_text("");
    d.open(Item::text(none, 0..0), Ett::Tlvs);
    let mut n = 0usize;
    let mut first = usize::MAX;
    let mut last = 0;
    for tlv in p.tlvs() {
        match tlv {
            Ok(tlv) => {
                n += 1;
                first = first.min(tlv.offset);
                last = last.max(tlv.offset + tlv.bytes.len());
                tlv_items(&tlv, opts.labels, d);
            }
            Err(err) => {
                // The lax parse reports the same error when it stopped there.
                if stop != Some(&err) {
                    d.notes.push(note_for(&err, cap, opts.frame_offset));
                }
            }
        }
    }
    d.close();
    if n == 0 {
        d.items.truncate(head);
    } else {
        let text = d.push_text(&title(opts.labels, || format!("TLVs ({n})")));
        let item = &mut d.items[head];
        item.label = Label::Text(text);
        item.range = clamp(first..last, cap);
    }
}

fn padding_item(p: &Packet<&[u8]>, cap: usize, d: &mut Dissection) {
    if p.flags().contains(Flags::EXT) {
        return;
    }
    let Some(fixed) = p.fixed_len() else { return };
    let end = p.header_len().min(cap);
    if end > fixed {
        d.add(Item::field(Hf::HeaderPadding, fixed..end, Value::Bytes));
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
        d.add(Item::field(Hf::Trimmed, 0..0, Value::Marker).generated());
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
    s.push_str(itoa::Buffer::new().format(v.into()));
}

/// `label` and `v` in decimal (" PSN=100").
fn push_field(s: &mut String, label: &str, v: impl Into<u64>) {
    s.push_str(label);
    push_dec(s, v);
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
            push_field(s, " PSN=", p.psn());
            push_field(s, " ev=", p.ev());
            if let Some(data) = p.data() {
                push_field(s, " msg=", data.msg_id());
                push_field(s, ":", data.msg_offset());
                push_field(s, "/", data.msg_len());
                push_field(s, " len=", data.payload_len());
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
            push_field(s, " cack=", p.psn());
            if let Some(nack) = p.nack() {
                push_field(s, " nack_psn=", nack.nack_psn());
            }
            if let Some(ack) = p.ack()
                && ack.sack_bitmap().iter().any(|&b| b != 0)
            {
                s.push_str(" SACK=");
                push_sack_ranges(s, ack.sack_base(), ack.sack_bitmap());
            }
            if let Some(fb) = p.feedback() {
                push_field(s, " echo=", fb.echo_psn());
                push_field(s, "@ev", fb.echo_ev());
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
                push_field(s, " init_psn=", ctrl.init_psn());
                push_field(s, " mtu=", ctrl.mtu());
                s.push_str(" cc=");
                push_enum!(s, ctrl.cc_algo());
            } else {
                push_conn(s, p);
            }
        }
        PacketType::Probe => {
            s.push_str("PROBE ");
            push_conn(s, p);
            push_field(s, " seq=", p.psn());
            push_field(s, " ev=", p.ev());
        }
        _ => {
            push_enum!(s, ty);
            s.push(' ');
            push_conn(s, p);
            push_field(s, " PSN=", p.psn());
            push_field(s, " ev=", p.ev());
        }
    }
    if p.tx_attempt() > 0 {
        push_field(s, " try=", p.tx_attempt());
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
        for n in &d.items {
            assert!(
                n.range.end <= captured && n.range.start <= n.range.end,
                "{n:?}"
            );
        }
        assert_tree_shape(d);
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

    /// The flat list is a well-formed tree: it starts at depth 0, goes at
    /// most one level deeper from an item to the next, and every text
    /// item has a subtree kind.
    fn assert_tree_shape(d: &Dissection) {
        let mut prev = None::<u8>;
        for n in &d.items {
            assert!(n.depth <= prev.map_or(0, |p| p + 1), "{:?}", d.items);
            assert!(n.depth <= MAX_DEPTH);
            if let Label::Text(_) = n.label {
                assert!(n.subtree.is_some(), "{n:?}");
            }
            prev = Some(n.depth);
        }
    }

    #[test]
    fn numbers_in_the_info_line() {
        let mut s = String::new();
        for v in [
            0u64,
            7,
            9,
            10,
            42,
            99,
            100,
            101,
            1000,
            12_345,
            4_294_967_295,
            u64::MAX,
        ] {
            s.clear();
            push_dec(&mut s, v);
            assert_eq!(s, v.to_string());
        }
        for v in [0u32, 0xa, 0x11, u32::MAX] {
            s.clear();
            push_hex(&mut s, v);
            assert_eq!(s, format!("{v:#x}"));
        }
    }

    /// The tree of a DATA WRITE, level by level, as Wireshark shows it.
    #[test]
    fn items_are_in_tree_order_with_depths() {
        static PAYLOAD: [u8; 8] = [1; 8];
        let mut r = repr(write(8), &PAYLOAD, false);
        r.flags |= Flags::EXT;
        r.tlvs = vec![TlvRepr::Ts64(1)];
        let bytes = r.to_vec();
        let d = dissect(&bytes, bytes.len(), &Options::default());
        let top: Vec<_> = d
            .items
            .iter()
            .filter(|n| n.depth == 0)
            .map(|n| n.hf())
            .collect();
        assert_eq!(
            top,
            [
                Some(Hf::Version),
                Some(Hf::Type),
                Some(Hf::Flags),
                Some(Hf::Hlen),
                Some(Hf::TxAttempt),
                Some(Hf::Ev),
                Some(Hf::PathSeq),
                Some(Hf::DstConn),
                Some(Hf::SrcConn),
                Some(Hf::Conn),
                Some(Hf::Conn),
                Some(Hf::Psn),
                Some(Hf::TxTs),
                Some(Hf::DataHeader),
                None, // TLVs (1)
            ]
        );
        let at = |hf| d.items.iter().position(|n| n.hf() == Some(hf)).unwrap();
        let flags: Vec<_> = d.children(at(Hf::Flags)).map(|i| d.items[i].hf()).collect();
        assert_eq!(flags.len(), 6);
        assert!(flags.iter().all(|hf| hf.is_some_and(|hf| {
            hf.def()
                .abbrev
                .to_str()
                .unwrap()
                .starts_with("metaroce.flags.")
        })));
        assert_eq!(d.items[at(Hf::Flags)].subtree, Some(Ett::Flags));
        let data: Vec<_> = d
            .children(at(Hf::DataHeader))
            .map(|i| d.items[i].hf().unwrap())
            .collect();
        assert_eq!(
            data,
            [
                Hf::DataOp,
                Hf::PayloadLen,
                Hf::MsgId,
                Hf::MsgOffset,
                Hf::MsgLen,
                Hf::RemoteVa,
                Hf::Rkey
            ]
        );
        let tlvs = d.items.len() - 1 - d.items.iter().rev().position(|n| n.depth == 0).unwrap();
        assert_eq!(d.item_text(&d.items[tlvs]), Some("TLVs (1)"));
        let tlv: Vec<_> = d.children(tlvs).collect();
        assert_eq!(tlv.len(), 1);
        let tlv_fields: Vec<_> = d
            .children(tlv[0])
            .map(|i| d.items[i].hf().unwrap())
            .collect();
        assert_eq!(tlv_fields, [Hf::TlvType, Hf::TlvLen, Hf::Ts64]);
        assert_eq!(d.depth, 0, "every subtree closed");
        assert_tree_shape(&d);
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
            d.items
                .iter()
                .filter_map(|n| match &n.label {
                    Label::Field(hf, value) => Some((
                        *hf,
                        *value,
                        d.item_text(n).map(str::to_owned),
                        n.range.clone(),
                        n.depth,
                    )),
                    Label::Text(_) => None,
                })
                .collect::<Vec<_>>()
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
            d.value(Hf::SackRanges).map(|_| d.item_text(
                &d.items[d
                    .items
                    .iter()
                    .position(|n| n.hf() == Some(Hf::SackRanges))
                    .unwrap()]
            )),
            Some(Some("101-102,104,200"))
        );
        assert_ranges_within(&d, bytes.len());
    }

    /// The SACK ranges text is what `Ack::sack_ranges` gives, on bitmaps
    /// of every size with runs across word boundaries and a base that
    /// wraps.
    #[test]
    fn sack_ranges_text_matches_proto_parse_ranges() {
        let reference = |ranges: &[Range<u32>]| {
            ranges
                .iter()
                .map(|r| {
                    let last = r.end.wrapping_sub(1);
                    if last == r.start {
                        format!("{}", r.start)
                    } else {
                        format!("{}-{last}", r.start)
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..3000 {
            let words = case % 5;
            let base = match case % 3 {
                0 => next() as u32,
                1 => u32::MAX - (case as u32 % 70),
                _ => 100,
            };
            let mut bitmap = vec![0u8; words * 8];
            for b in &mut bitmap {
                // Dense, sparse and empty bytes.
                *b = match next() % 4 {
                    0 => 0,
                    1 => 0xFF,
                    _ => next() as u8,
                };
            }
            let psns = bitmap
                .iter()
                .enumerate()
                .flat_map(|(i, &byte)| {
                    (0..8)
                        .filter(move |bit| byte & (0x80 >> bit) != 0)
                        .map(move |bit| base.wrapping_add((i * 8 + bit) as u32))
                })
                .collect::<Vec<_>>();
            let sack = SackBitmap::from_psns(base, psns.iter().copied());
            let mut r = repr(
                Body::Ack(AckRepr {
                    feedback: FeedbackRepr::default(),
                    sack_base: base,
                    sack,
                }),
                &[],
                false,
            );
            r.flags = Flags::empty();
            let bytes = r.to_vec();
            let p = Packet::new_checked(&bytes[..]).unwrap();
            let ack = p.ack().unwrap();
            let mut got = String::new();
            push_sack_ranges(&mut got, ack.sack_base(), ack.sack_bitmap());
            assert_eq!(got, reference(&ack.sack_ranges()), "case {case}");
        }
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
