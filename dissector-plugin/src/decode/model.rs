//! What a decode produces: the items of the tree, their texts in one
//! reused buffer, the expert notes, the Info line.

use std::ops::Range;

use proto_parse::metaroce::PacketType;

use crate::fields::{Ei, Ett, Hf};

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

    pub(super) fn uint(hf: Hf, range: Range<usize>, value: impl Into<u64>) -> Self {
        Item::field(hf, range, Value::Uint(value.into()))
    }

    pub(super) fn at(hf: Hf, offset: usize, value: impl Into<u64>) -> Self {
        Item::uint(hf, offset..offset + 1, value)
    }

    pub(super) fn bits(hf: Hf, range: Range<usize>, bits: impl Into<u32>) -> Self {
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
    pub(super) depth: u8,
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
