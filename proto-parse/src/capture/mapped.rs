//! A capture file read through a memory map: records are lent straight
//! from the page cache, with no copy into a buffer.
//!
//! Why: the kernel's copy into a read buffer was a large share of the
//! analyzer's CPU time. A mapping of a file whose page cache holds large folios (as
//! readahead leaves a file read from disk) costs next to nothing in the
//! kernel (docs/performance.md). The reader still sees a window of the
//! mapping that it "refills" by moving its end, so its parsing code is the
//! same for both sources; pages behind the window are given back as the
//! window moves, so the resident set stays flat however large the file.
//!
//! The caveat of every mapping: if another process truncates the file
//! while it is read, touching the lost pages raises SIGBUS. Such files are
//! read as streams (`Reader::open_or_stdin`, `metaroce-analyze --no-mmap`);
//! a file that only grows is safe (the mapping covers it as it was when
//! opened).
#![allow(unsafe_code)]

use std::fs::File;
use std::ops::Deref;

use memmap2::{Advice, Mmap, UncheckedAdvice};

/// How far the window's end moves at a time.
pub(super) const WINDOW: usize = 1 << 20;
/// Pages behind the window's start are given back in steps of at least
/// this much (a step is one madvise call).
const RELEASE_STEP: usize = 1 << 20;
/// Released ranges start and end on multiples of this: every page size of
/// Linux and macOS divides it (madvise wants page-aligned ranges).
const RELEASE_ALIGN: usize = 64 << 10;

pub(super) struct Mapped {
    map: Mmap,
    /// Bytes below this offset were given back.
    released: usize,
}

impl Mapped {
    /// Maps `file`, or `None` when it cannot be mapped (an empty file, a
    /// pipe, a file system without mappings): the caller reads it instead.
    pub(super) fn new(file: &File) -> Option<Mapped> {
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() == 0 {
            return None;
        }
        // SAFETY: the mapping is read-only and every access is bounds-checked
        // against its length; the bytes are parsed as untrusted input. The
        // file must not be truncated or rewritten while mapped (module
        // documentation): such files are read as streams instead.
        let map = unsafe { Mmap::map(file) }.ok()?;
        // Readahead for a file not yet in the page cache.
        let _ = map.advise(Advice::Sequential);
        Some(Mapped { map, released: 0 })
    }

    /// Gives back the pages below `consumed` to keep the resident set flat;
    /// they stay in the page cache, and a page touched again is mapped
    /// again. A failure only leaves them mapped.
    pub(super) fn release_below(&mut self, consumed: usize) {
        let until = consumed / RELEASE_ALIGN * RELEASE_ALIGN;
        if until < self.released + RELEASE_STEP {
            return;
        }
        // SAFETY: a read-only, file-backed mapping: after MADV_DONTNEED the
        // range reads the file's bytes again (faulted back in on access),
        // so no data is lost and no reference into the range is invalidated.
        let released = unsafe {
            self.map.unchecked_advise_range(
                UncheckedAdvice::DontNeed,
                self.released,
                until - self.released,
            )
        };
        if released.is_ok() {
            self.released = until;
        }
    }
}

impl Deref for Mapped {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.map
    }
}
