//! Replays a [`Dissection`] (a flat list of items in tree order) into
//! Wireshark's tree, over ranges checked against the captured bytes.

use std::ffi::c_int;
use std::ptr::{null, null_mut};

use epan_sys as ws;
use ws::compat::Truth;

use super::*;
use crate::decode::{Checksum, Dissection, Item, Label, MAX_DEPTH, Value};
use crate::fields::{Ett, Kind};

/// Replays a [`Dissection`] into Wireshark's tree, over checked ranges.
pub(super) struct Emitter {
    pub(super) tvb: *mut ws::tvbuff_t,
    pub(super) pinfo: *mut ws::packet_info,
    pub(super) captured: usize,
    /// The tree is shown (GUI, `-V`, PDML/JSON): every item is added. When
    /// not, Wireshark fakes (drops) every item whose field is not
    /// referenced by a filter or `-e`, and every text item; the emitter
    /// skips those itself, before preparing them (their children still go
    /// to the parent tree, as with a faked item).
    pub(super) visible: bool,
}

/// Whether `tree` is shown (`PTREE_DATA(tree)->visible`).
///
/// # Safety
/// `tree` is NULL or a valid proto_tree.
pub(super) unsafe fn tree_visible(tree: *mut ws::proto_tree) -> bool {
    if tree.is_null() {
        return false;
    }
    // SAFETY: a valid proto_tree has valid tree_data while the packet is
    // dissected.
    unsafe {
        let data = (*tree).tree_data;
        !data.is_null() && (*data).visible.truth()
    }
}

impl Emitter {
    /// `(start, length)` of `range` if it lies within the captured bytes,
    /// else `(0, 0)` (an item with no bytes never makes a tvb throw).
    fn span(&self, range: &std::ops::Range<usize>) -> (c_int, c_int) {
        if range.start <= range.end && range.end <= self.captured {
            (range.start as c_int, range.len() as c_int)
        } else {
            (0, 0)
        }
    }

    /// # Safety
    /// Valid pointers; `bytes` are the captured bytes.
    pub(super) unsafe fn tree(&self, tree: *mut ws::proto_tree, d: &Dissection, bytes: &[u8]) {
        let (start, len) = self.span(&d.header);
        // SAFETY: checked range; the summary is copied by Wireshark.
        let root = unsafe {
            let item = ws::proto_tree_add_item(
                tree,
                PROTO.load(Ordering::Relaxed),
                self.tvb,
                start,
                len,
                ws::ENC_NA,
            );
            if self.visible && d.packet_type.is_some() {
                // The protocol item reads "MetaRoCE, <Info line>" once the
                // base header is there. Setting the whole text skips the
                // label Wireshark would first fill in to append to
                // (proto_item_append_text), and costs less than
                // proto_tree_add_protocol_format (`cargo xtask bench
                // plugin --instructions`).
                let (n, text) = text_arg(&d.info);
                ws::proto_item_set_text(item, c"MetaRoCE, %.*s".as_ptr(), n, text);
            }
            ws::proto_item_add_subtree(item, ett_id(Ett::Root))
        };
        if !root.is_null() {
            // SAFETY: as above.
            unsafe { self.items(root, d, bytes) };
        }
        // SAFETY: as above.
        unsafe { self.checksum(root, d.checksum) };
        // SAFETY: as above.
        unsafe { self.notes(root, d) };
    }

    /// A protocol item `proto` with no bytes (the analysis of the frame a
    /// post-dissector adds) holding `d`'s items and expert infos.
    ///
    /// # Safety
    /// Valid pointers; `bytes` are the captured bytes of the tvb.
    pub(super) unsafe fn analysis_tree(
        &self,
        tree: *mut ws::proto_tree,
        proto: c_int,
        ett: Ett,
        d: &Dissection,
        bytes: &[u8],
    ) {
        // SAFETY: an item with no bytes; valid tree (or NULL) and tvb.
        let root = unsafe {
            let item = ws::proto_tree_add_item(tree, proto, self.tvb, 0, 0, ws::ENC_NA);
            ws::proto_item_add_subtree(item, ett_id(ett))
        };
        if !root.is_null() {
            // SAFETY: as above.
            unsafe { self.items(root, d, bytes) };
        }
        // SAFETY: as above.
        unsafe { self.notes(root, d) };
    }

    /// `d`'s expert notes and lint findings, under `root`.
    ///
    /// # Safety
    /// Valid pointers.
    unsafe fn notes(&self, root: *mut ws::proto_tree, d: &Dissection) {
        for note in &d.notes {
            let (start, len) = self.span(&note.range);
            let (n, text) = text_arg(&note.text);
            // SAFETY: checked range; literal format; text copied.
            unsafe {
                ws::proto_tree_add_expert_format(
                    root,
                    self.pinfo,
                    ei_ptr(note.ei),
                    self.tvb,
                    start,
                    len,
                    c"%.*s".as_ptr(),
                    n,
                    text,
                );
            }
        }
        for note in &d.lint {
            let Some(ei) = lint_ei_ptr(note.rule) else {
                continue;
            };
            let (n, text) = text_arg(&note.text);
            // SAFETY: an item with no bytes; literal format; text copied;
            // `ei` is a registered (leaked) expert field.
            unsafe {
                ws::proto_tree_add_expert_format(
                    root,
                    self.pinfo,
                    ei,
                    self.tvb,
                    0,
                    0,
                    c"%.*s".as_ptr(),
                    n,
                    text,
                );
            }
        }
    }

    /// Adds `items` (a flat list in tree order, see [`Item`]) under `root`
    /// in one pass: `trees[d]` is the tree that takes the items of depth
    /// `d`, i.e. the subtree of the last item of depth `d - 1`.
    ///
    /// # Safety
    /// Valid pointers; `bytes` are the captured bytes.
    unsafe fn items(&self, root: *mut ws::proto_tree, d: &Dissection, bytes: &[u8]) {
        let items = &d.items[..];
        let mut trees = [null_mut::<ws::proto_tree>(); MAX_DEPTH as usize + 2];
        trees[0] = root;
        for (i, item) in items.iter().enumerate() {
            let depth = usize::from(item.depth.min(MAX_DEPTH));
            let parent = trees[depth];
            let has_children = items.get(i + 1).is_some_and(|n| n.depth > item.depth);
            // SAFETY: parent is root, a subtree added during this packet, or
            // NULL (accepted by every proto_tree_add_* call).
            trees[depth + 1] = unsafe { self.item(parent, d, item, has_children, bytes) };
        }
    }

    /// Adds one item to `tree`; returns the tree its children go to.
    ///
    /// # Safety
    /// Valid pointers; `bytes` are the captured bytes.
    unsafe fn item(
        &self,
        tree: *mut ws::proto_tree,
        d: &Dissection,
        item: &Item,
        has_children: bool,
        bytes: &[u8],
    ) -> *mut ws::proto_tree {
        if !self.visible {
            let wanted = match &item.label {
                Label::Text(_) => false,
                // SAFETY: tree is NULL or a valid proto_tree; the id is
                // registered.
                Label::Field(hf, _) => unsafe {
                    !tree.is_null() && ws::proto_field_is_referenced(tree, hf_id(*hf)).truth()
                },
            };
            if !wanted {
                // What Wireshark does with a faked item: no item, the
                // children go to the parent tree.
                return tree;
            }
        }
        let (start, len) = self.span(&item.range);
        let tvb = self.tvb;
        let ett = ett_id(item.subtree.unwrap_or(Ett::Root));
        // SAFETY: checked range; literal formats; strings are copied by
        // Wireshark; the bytes pointer covers `len` bytes at `start`.
        let added = unsafe {
            match &item.label {
                Label::Text(text) => {
                    let (n, text) = text_arg(d.text(*text));
                    let mut added: *mut ws::proto_item = null_mut();
                    let sub = ws::proto_tree_add_subtree_format(
                        tree,
                        tvb,
                        start,
                        len,
                        ett,
                        &mut added,
                        c"%.*s".as_ptr(),
                        n,
                        text,
                    );
                    if item.generated {
                        set_generated(added);
                    }
                    return sub;
                }
                Label::Field(hf, value) => {
                    let id = hf_id(*hf);
                    match (value, hf.def().kind) {
                        (Value::Uint(v), Kind::U64) => {
                            ws::proto_tree_add_uint64(tree, id, tvb, start, len, *v)
                        }
                        (Value::Uint(v), _) => {
                            ws::proto_tree_add_uint(tree, id, tvb, start, len, *v as u32)
                        }
                        (Value::Bits(v), Kind::Bool(_)) => {
                            // A guint32 in 4.0, a uint64_t from 4.4 on.
                            #[allow(clippy::useless_conversion)]
                            let value = (*v).into();
                            ws::proto_tree_add_boolean(tree, id, tvb, start, len, value)
                        }
                        (Value::Bits(v), _) => {
                            ws::proto_tree_add_uint(tree, id, tvb, start, len, *v)
                        }
                        (Value::Bytes, _) => {
                            let at = start as usize;
                            let ptr = bytes
                                .get(at..at + len as usize)
                                .map_or(null(), <[u8]>::as_ptr);
                            ws::proto_tree_add_bytes(tree, id, tvb, start, len, ptr)
                        }
                        (Value::Text(t), _) => with_cstr(d.text(*t), |t| {
                            ws::proto_tree_add_string(tree, id, tvb, start, len, t)
                        }),
                        (Value::Marker, _) => {
                            ws::proto_tree_add_item(tree, id, tvb, start, len, ws::ENC_NA)
                        }
                        (Value::Time(ns), _) => {
                            let t = ws::nstime_t {
                                secs: (*ns / 1_000_000_000) as ws::time_t,
                                nsecs: (*ns % 1_000_000_000) as c_int,
                            };
                            ws::proto_tree_add_time(tree, id, tvb, start, len, &t)
                        }
                    }
                }
            }
        };
        if item.generated {
            // SAFETY: added is NULL or a valid proto_item.
            unsafe { set_generated(added) };
        }
        if let Label::Field(hf, _) = &item.label
            && hf.hidden()
        {
            // SAFETY: as above.
            unsafe { set_flag(added, ws::FI_HIDDEN) };
        }
        if has_children {
            // SAFETY: added is NULL or valid (NULL gives a NULL subtree,
            // which the children's proto_tree_add_* calls accept).
            unsafe { ws::proto_item_add_subtree(added, ett) }
        } else {
            null_mut()
        }
    }

    /// # Safety
    /// Valid pointers.
    unsafe fn checksum(&self, tree: *mut ws::proto_tree, checksum: Checksum) {
        let status = |value: ws::proto_checksum_enum_e| {
            // SAFETY: an item with no bytes; valid tree/tvb.
            unsafe {
                let item =
                    ws::proto_tree_add_uint(tree, hf_id(Hf::CrcStatus), self.tvb, 0, 0, value);
                set_generated(item);
            }
        };
        match checksum {
            Checksum::Absent => {}
            Checksum::Missing { trimmed: true } => status(ws::PROTO_CHECKSUM_E_NOT_PRESENT),
            Checksum::Missing { trimmed: false } => status(ws::PROTO_CHECKSUM_E_UNVERIFIED),
            Checksum::Present {
                offset,
                stored,
                computed,
            } => {
                if offset + 4 > self.captured {
                    status(ws::PROTO_CHECKSUM_E_UNVERIFIED);
                    return;
                }
                if computed == Some(stored) {
                    // A good CRC: the value and "[CRC32C status: Good]".
                    // proto_tree_add_checksum would also format
                    // " [correct]" into the value's label on every packet;
                    // the status item says it already.
                    // SAFETY: the 4 trailer bytes are captured (checked
                    // above); valid tree/tvb.
                    unsafe {
                        ws::proto_tree_add_uint(
                            tree,
                            hf_id(Hf::Crc),
                            self.tvb,
                            offset as c_int,
                            4,
                            stored,
                        );
                    }
                    status(ws::PROTO_CHECKSUM_E_GOOD);
                    return;
                }
                let (value, flags) = match computed {
                    Some(c) => (c, ws::PROTO_CHECKSUM_VERIFY),
                    None => (0, ws::PROTO_CHECKSUM_NO_FLAGS),
                };
                // SAFETY: the 4 trailer bytes are captured (checked above), so
                // reading them cannot throw.
                unsafe {
                    ws::proto_tree_add_checksum(
                        tree,
                        self.tvb,
                        offset as u32,
                        hf_id(Hf::Crc),
                        hf_id(Hf::CrcStatus),
                        ei_ptr(Ei::CrcBad),
                        self.pinfo,
                        value,
                        ws::ENC_BIG_ENDIAN,
                        flags,
                    );
                }
            }
        }
    }
}

/// `proto_item_set_generated` (a static inline function in proto.h).
///
/// # Safety
/// `item` is NULL or a valid proto_item.
pub(super) unsafe fn set_generated(item: *mut ws::proto_item) {
    // SAFETY: per the contract.
    unsafe { set_flag(item, ws::FI_GENERATED) }
}

/// `FI_SET_FLAG(PITEM_FINFO(item), flag)` (`proto_item_set_generated`,
/// `proto_item_set_hidden`: static inline functions in proto.h).
///
/// # Safety
/// `item` is NULL or a valid proto_item.
unsafe fn set_flag(item: *mut ws::proto_item, flag: u32) {
    if item.is_null() {
        return;
    }
    // SAFETY: item is valid; finfo is NULL or valid (FI_SET_FLAG checks it).
    unsafe {
        let fi = (*item).finfo;
        if !fi.is_null() {
            (*fi).flags |= flag;
        }
    }
}
