//! Registered memory regions (rkey, base virtual address, bytes) and the
//! bounds checks every remote access goes through.

/// One registered region.
#[derive(Debug, Clone)]
pub struct MemoryRegion {
    pub rkey: u32,
    pub va: u64,
    pub data: Vec<u8>,
}

/// The regions of an endpoint. Remote WRITEs land here and READs are served
/// from here; every access is checked against `[va, va + len)`.
#[derive(Debug, Default, Clone)]
pub struct Memory {
    regions: Vec<MemoryRegion>,
    next_rkey: u32,
}

impl Memory {
    /// Registers `len` zeroed bytes at `va` and returns the rkey.
    pub fn register(&mut self, va: u64, len: usize) -> u32 {
        self.next_rkey = self.next_rkey.wrapping_add(0x101).max(1);
        let rkey = self.next_rkey;
        self.regions.push(MemoryRegion {
            rkey,
            va,
            data: vec![0; len],
        });
        rkey
    }

    pub fn region(&self, rkey: u32) -> Option<&MemoryRegion> {
        self.regions.iter().find(|r| r.rkey == rkey)
    }

    pub fn region_mut(&mut self, rkey: u32) -> Option<&mut MemoryRegion> {
        self.regions.iter_mut().find(|r| r.rkey == rkey)
    }

    /// The byte range of `len` bytes at `va` inside region `rkey`, if the
    /// region exists and holds all of them.
    pub fn check(&self, rkey: u32, va: u64, len: u64) -> Option<std::ops::Range<usize>> {
        let r = self.region(rkey)?;
        let start = va.checked_sub(r.va)?;
        let end = start.checked_add(len)?;
        if end > r.data.len() as u64 {
            return None;
        }
        Some(start as usize..end as usize)
    }

    /// Copies `bytes` to `va`; false (nothing written) when out of bounds.
    pub fn write(&mut self, rkey: u32, va: u64, bytes: &[u8]) -> bool {
        let Some(range) = self.check(rkey, va, bytes.len() as u64) else {
            return false;
        };
        match self.region_mut(rkey) {
            Some(r) => {
                r.data[range].copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }

    pub fn read(&self, rkey: u32, va: u64, len: u64) -> Option<&[u8]> {
        let range = self.check(rkey, va, len)?;
        self.region(rkey).map(|r| &r.data[range])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked() {
        let mut m = Memory::default();
        let k = m.register(0x1000, 16);
        assert!(m.write(k, 0x1008, &[1; 8]));
        assert!(!m.write(k, 0x1009, &[1; 8]));
        assert!(!m.write(k, 0xFFF, &[1]));
        assert!(!m.write(k ^ 1, 0x1000, &[1]));
        assert!(m.read(k, u64::MAX, 2).is_none());
        assert_eq!(m.read(k, 0x1008, 8), Some(&[1u8; 8][..]));
    }
}
