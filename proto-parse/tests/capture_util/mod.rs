//! Helpers shared by the `capture_*` tests.
#![allow(dead_code)]

use std::io::{self, Read};
use std::path::PathBuf;

use proto_parse::Error;
use proto_parse::capture::{Reader, Record, Stats};

/// A record detached from the reader's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub index: u64,
    pub ts_ns: u64,
    pub linktype: u16,
    pub data: Vec<u8>,
    pub orig_len: u32,
    pub interface: Option<u32>,
    pub offset: u64,
}

impl From<Record<'_>> for Owned {
    fn from(r: Record<'_>) -> Self {
        Owned {
            index: r.index,
            ts_ns: r.ts_ns,
            linktype: r.linktype,
            data: r.data.to_vec(),
            orig_len: r.orig_len,
            interface: r.interface,
            offset: r.offset,
        }
    }
}

/// Either a record or an error, in stream order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Rec(Owned),
    Err(Error),
}

impl Item {
    pub fn rec(&self) -> Option<&Owned> {
        match self {
            Item::Rec(r) => Some(r),
            Item::Err(_) => None,
        }
    }
    pub fn err(&self) -> Option<&Error> {
        match self {
            Item::Rec(_) => None,
            Item::Err(e) => Some(e),
        }
    }
}

/// Reads everything from an open reader; panics if the reader does not
/// end within a bound proportional to the input (no endless loop).
pub fn drain<R: Read>(reader: &mut Reader<R>, max_items: usize) -> Vec<Item> {
    let mut items = Vec::new();
    while let Some(item) = reader.next_record() {
        items.push(match item {
            Ok(r) => Item::Rec(r.into()),
            Err(e) => Item::Err(e),
        });
        assert!(items.len() <= max_items, "reader does not end");
    }
    assert!(reader.next_record().is_none(), "None is sticky");
    items
}

/// Opens `bytes` with the given buffer capacity and reads everything.
pub fn read_bytes(bytes: &[u8], capacity: usize) -> (Vec<Item>, Stats) {
    let mut reader = Reader::with_capacity(bytes, capacity).expect("open");
    let items = drain(&mut reader, bytes.len() + 10);
    (items, *reader.stats())
}

pub fn records(items: &[Item]) -> Vec<Owned> {
    items.iter().filter_map(Item::rec).cloned().collect()
}

pub fn errors(items: &[Item]) -> Vec<Error> {
    items.iter().filter_map(Item::err).cloned().collect()
}

/// A deterministic frame of `len` bytes for record `i`.
pub fn frame(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| (i * 31 + k * 7) as u8).collect()
}

/// A fresh path in cargo's per-target temporary directory.
pub fn tmp_path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("capture-tests");
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir.join(format!("{}-{name}", std::process::id()))
}

/// A `Read` that hands out at most `chunk` bytes per call, and optionally
/// fails after `fail_after` bytes.
pub struct Trickle<'a> {
    pub data: &'a [u8],
    pub pos: usize,
    pub chunk: usize,
    pub fail_after: Option<usize>,
}

impl<'a> Trickle<'a> {
    pub fn new(data: &'a [u8], chunk: usize) -> Self {
        Trickle {
            data,
            pos: 0,
            chunk,
            fail_after: None,
        }
    }
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(limit) = self.fail_after
            && self.pos >= limit
        {
            return Err(io::Error::other("disk on fire"));
        }
        let mut n = buf.len().min(self.chunk).min(self.data.len() - self.pos);
        if let Some(limit) = self.fail_after {
            n = n.min(limit - self.pos);
        }
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
