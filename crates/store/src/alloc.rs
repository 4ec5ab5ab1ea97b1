//! Free space of a [`crate::device::BlockDevice`]: a map of free ranges, kept coalesced.
//!
//! Nothing of it is stored. At start the store rebuilds it from the extents its engine
//! references, so space that a crash left written but never referenced is free again.
//! Allocation is next-fit (writes that follow each other land one after the other) and
//! contiguous when a free range is long enough, else gathered from several ranges.

use shoal_types::{Result, err};
use std::collections::BTreeMap;

/// Free ranges of a device, in multiples of `unit` bytes.
#[derive(Debug)]
pub struct Allocator {
    unit: u64,
    size: u64,
    /// start → length of each free range; no two are adjacent.
    free: BTreeMap<u64, u64>,
    free_bytes: u64,
    /// Where the next search starts.
    cursor: u64,
}

impl Allocator {
    /// The allocator of a device of `size` bytes where exactly `used` (address, length)
    /// ranges are taken; lengths are rounded up to `unit`. Overlapping ranges mean two
    /// records claim the same bytes: EIO naming them.
    pub fn rebuild(unit: u64, size: u64, mut used: Vec<(u64, u64)>) -> Result<Self> {
        assert!(unit.is_power_of_two(), "allocation unit {unit} must be a power of two");
        let size = size - size % unit;
        used.sort_unstable();
        let mut allocator = Allocator { unit, size, free: BTreeMap::new(), free_bytes: 0, cursor: 0 };
        let mut at = 0u64;
        for (addr, len) in used {
            let len = allocator.round(len);
            if addr < at || addr % unit != 0 {
                return Err(err::io(format!("extent {addr}+{len} overlaps another or is misaligned")));
            }
            let end = addr.checked_add(len).filter(|&end| end <= size);
            let end = end.ok_or_else(|| err::io(format!("extent {addr}+{len} ends past the device ({size} bytes)")))?;
            allocator.insert_free(at, addr - at);
            at = end;
        }
        allocator.insert_free(at, size - at);
        Ok(allocator)
    }

    /// `len` rounded up to the allocation unit.
    pub fn round(&self, len: u64) -> u64 {
        len.div_ceil(self.unit) * self.unit
    }

    /// Bytes the allocator manages.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes free.
    pub fn free_bytes(&self) -> u64 {
        self.free_bytes
    }

    fn insert_free(&mut self, start: u64, len: u64) {
        if len > 0 {
            self.free.insert(start, len);
            self.free_bytes += len;
        }
    }

    /// Adds the device space between the old size and `size` (the device grew).
    pub fn grow(&mut self, size: u64) -> Result<()> {
        let size = size - size % self.unit;
        if size > self.size {
            let old = self.size;
            self.size = size;
            self.release(old, size - old)?;
        }
        Ok(())
    }

    /// Takes `len` bytes (rounded up to the unit) as ranges whose lengths are multiples of
    /// `granule` (a power-of-two multiple of the unit) except the last; one range when a
    /// long enough free range exists. `None` when the free space does not suffice.
    pub fn allocate(&mut self, len: u64, granule: u64) -> Option<Vec<(u64, u64)>> {
        let len = self.round(len);
        if len == 0 {
            return Some(Vec::new());
        }
        if len > self.free_bytes {
            return None;
        }
        let after_cursor = self.free.range(self.cursor..).chain(self.free.range(..self.cursor));
        let fit = after_cursor.map(|(&s, &l)| (s, l)).find(|&(_, l)| l >= len);
        let pieces = match fit {
            Some((start, _)) => vec![(start, len)],
            None => self.gather(len, granule)?,
        };
        for &(start, piece) in &pieces {
            self.take(start, piece);
        }
        self.cursor = pieces.last().map_or(self.cursor, |&(s, l)| s + l);
        Some(pieces)
    }

    /// Ranges from several free ranges, each a multiple of `granule` but the last.
    fn gather(&self, len: u64, granule: u64) -> Option<Vec<(u64, u64)>> {
        let mut pieces = Vec::new();
        let mut left = len;
        for (&start, &free) in &self.free {
            let usable = if free >= left { left } else { free - free % granule };
            if usable == 0 {
                continue;
            }
            pieces.push((start, usable));
            left -= usable;
            if left == 0 {
                return Some(pieces);
            }
        }
        None
    }

    /// Removes `[start, start + len)`, which lies inside one free range.
    fn take(&mut self, start: u64, len: u64) {
        let (&range_start, &range_len) =
            self.free.range(..=start).next_back().expect("allocated space comes from a free range");
        debug_assert!(start + len <= range_start + range_len);
        self.free.remove(&range_start);
        self.free_bytes -= range_len;
        self.insert_free(range_start, start - range_start);
        self.insert_free(start + len, range_start + range_len - (start + len));
    }

    /// Returns `[addr, addr + len)` (len rounded up to the unit) to the free space. Freeing
    /// space that is already free is refused with EIO: the caller's records disagree.
    pub fn release(&mut self, addr: u64, len: u64) -> Result<()> {
        let len = self.round(len);
        let end = addr.checked_add(len).filter(|&end| end <= self.size && addr.is_multiple_of(self.unit));
        let end = end.ok_or_else(|| err::io(format!("freeing {addr}+{len}: outside the device or misaligned")))?;
        if len == 0 {
            return Ok(());
        }
        let before = self.free.range(..end).next_back().map(|(&s, &l)| (s, l));
        if let Some((s, l)) = before
            && s + l > addr
        {
            return Err(err::io(format!("freeing {addr}+{len}: {s}+{l} is free already")));
        }
        let (mut start, mut stop) = (addr, end);
        if let Some((s, l)) = before
            && s + l == addr
        {
            self.free.remove(&s);
            self.free_bytes -= l;
            start = s;
        }
        if let Some(l) = self.free.remove(&end) {
            self.free_bytes -= l;
            stop = end + l;
        }
        self.insert_free(start, stop - start);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const UNIT: u64 = 4096;

    #[test]
    fn allocates_contiguously_reuses_and_coalesces() {
        let mut a = Allocator::rebuild(UNIT, 64 * UNIT, Vec::new()).unwrap();
        let first = a.allocate(10 * UNIT, 4 * UNIT).unwrap();
        let second = a.allocate(1, 4 * UNIT).unwrap();
        assert_eq!(first, vec![(0, 10 * UNIT)]);
        assert_eq!(second, vec![(10 * UNIT, UNIT)], "next-fit, rounded to the unit");
        assert_eq!(a.free_bytes(), 53 * UNIT);
        a.release(0, 10 * UNIT).unwrap();
        a.release(10 * UNIT, 1).unwrap();
        assert_eq!(a.free.len(), 1, "freed neighbours coalesce: {:?}", a.free);
        assert_eq!(a.free_bytes(), 64 * UNIT);
        assert!(a.release(0, UNIT).unwrap_err().message.contains("free already"));
        assert!(a.allocate(65 * UNIT, UNIT).is_none());
    }

    #[test]
    fn a_fragmented_device_gathers_granules() {
        // Used: every other 4-unit block, so the largest free range is 4 units.
        let used: Vec<(u64, u64)> = (0..8).map(|i| (i * 8 * UNIT, 4 * UNIT)).collect();
        let mut a = Allocator::rebuild(UNIT, 64 * UNIT, used).unwrap();
        let pieces = a.allocate(10 * UNIT, 4 * UNIT).unwrap();
        assert_eq!(pieces.iter().map(|p| p.1).sum::<u64>(), 10 * UNIT);
        assert!(pieces[..pieces.len() - 1].iter().all(|p| p.1 % (4 * UNIT) == 0), "{pieces:?}");
        assert_eq!(a.free_bytes(), 22 * UNIT);
    }

    #[test]
    fn rebuild_refuses_overlaps_and_extents_past_the_end() {
        let e = Allocator::rebuild(UNIT, 8 * UNIT, vec![(0, 2 * UNIT), (UNIT, UNIT)]).unwrap_err();
        assert!(e.message.contains("overlaps"), "{e}");
        let e = Allocator::rebuild(UNIT, 8 * UNIT, vec![(7 * UNIT, 2 * UNIT)]).unwrap_err();
        assert!(e.message.contains("past the device"), "{e}");
        let mut a = Allocator::rebuild(UNIT, 8 * UNIT, vec![(2 * UNIT, 100)]).unwrap();
        assert_eq!(a.free_bytes(), 7 * UNIT);
        a.grow(16 * UNIT).unwrap();
        assert_eq!((a.size(), a.free_bytes()), (16 * UNIT, 15 * UNIT));
        assert_eq!(a.free.len(), 2, "the grown space joins the free tail: {:?}", a.free);
    }

    proptest! {
        /// Any sequence of allocations and frees keeps the books: allocated ranges never
        /// overlap, free + allocated = size, and free ranges stay coalesced.
        #[test]
        fn books_balance(steps in proptest::collection::vec((any::<bool>(), 1u64..20 * UNIT, any::<u16>()), 1..200)) {
            let mut a = Allocator::rebuild(UNIT, 256 * UNIT, Vec::new()).unwrap();
            let mut taken: Vec<(u64, u64)> = Vec::new();
            for (alloc, len, pick) in steps {
                if alloc || taken.is_empty() {
                    if let Some(pieces) = a.allocate(len, 4 * UNIT) {
                        prop_assert_eq!(pieces.iter().map(|p| p.1).sum::<u64>(), a.round(len));
                        taken.extend(pieces);
                    }
                } else {
                    let (addr, l) = taken.swap_remove(pick as usize % taken.len());
                    a.release(addr, l).unwrap();
                }
                let mut all = taken.clone();
                all.sort_unstable();
                for w in all.windows(2) {
                    prop_assert!(w[0].0 + w[0].1 <= w[1].0, "overlap {:?}", w);
                }
                let used: u64 = taken.iter().map(|t| t.1).sum();
                prop_assert_eq!(used + a.free_bytes(), a.size());
                let free: Vec<(u64, u64)> = a.free.iter().map(|(&s, &l)| (s, l)).collect();
                for w in free.windows(2) {
                    prop_assert!(w[0].0 + w[0].1 < w[1].0, "uncoalesced {:?}", w);
                }
                let rebuilt = Allocator::rebuild(UNIT, a.size(), taken.clone()).unwrap();
                prop_assert_eq!(&rebuilt.free, &a.free);
            }
        }
    }
}
