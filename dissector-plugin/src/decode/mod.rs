//! The Wireshark-free half of the dissector: turns the captured bytes of one
//! UDP payload into a tree of items, an Info line and expert notes, using
//! `proto_parse::metaroce` for every byte read. `ffi` only replays the
//! result into Wireshark's tree, so this module is tested without Wireshark.
//!
//! Every item range lies within the captured bytes (the views of
//! `proto_parse` exist only when the bytes are there); `ffi` checks it again
//! before handing a range to Wireshark, whose tvb accessors throw otherwise.

//! - [`model`]: what a decode produces (items, texts, notes);
//! - [`items`]: the tree's items, layer by layer;
//! - [`info`]: the Info line;
//! - [`text`]: the labels and texts both share.

mod info;
mod items;
mod model;
#[cfg(test)]
mod test;
mod text;

use proto_parse::metaroce::{self, field};

use crate::fields::Ei;
use info::info_line;
use items::{base_items, layout_items, padding_item, tlvs_items, type_items, unknown_value_notes};
pub use model::{Checksum, Dissection, Item, Label, LintNote, MAX_DEPTH, Note, TextRef, Value};
use text::{clamp, note_for};
pub use text::{custom_label, flag_names};

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
