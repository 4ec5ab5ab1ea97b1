//! How an object's bytes map to shard bytes.

use crate::ErasureCoder;
use shoal_types::{Result, err};
use std::ops::Range;

/// Stripes of `k × unit` bytes over `k` data shards and `m` parity shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StripeLayout {
    /// Data shards.
    pub k: u32,
    /// Parity shards.
    pub m: u32,
    /// Bytes of one stripe on one shard (Ceph's `stripe_unit`).
    pub unit: u32,
}

impl StripeLayout {
    /// Logical bytes per stripe.
    pub fn width(&self) -> u64 {
        u64::from(self.k) * u64::from(self.unit)
    }

    /// Stripes an object of `size` bytes fills (the last one padded).
    pub fn stripes(&self, size: u64) -> u64 {
        size.div_ceil(self.width())
    }

    /// Bytes each shard holds for an object of `size` bytes.
    pub fn shard_len(&self, size: u64) -> u64 {
        self.stripes(size) * u64::from(self.unit)
    }

    /// The whole stripes that cover logical bytes `offset..offset + len`.
    pub fn stripes_covering(&self, offset: u64, len: u64) -> Range<u64> {
        let width = self.width();
        offset / width..(offset + len).div_ceil(width)
    }

    /// The bytes of each shard that hold `stripes`.
    pub fn shard_range(&self, stripes: &Range<u64>) -> Range<u64> {
        let unit = u64::from(self.unit);
        stripes.start * unit..stripes.end * unit
    }

    /// The `k + m` shard buffers of `data`, which starts at a stripe boundary and is padded
    /// with zeros to whole stripes: data chunks dealt out stripe by stripe, parity encoded
    /// once over all of them.
    pub fn encode(&self, coder: &dyn ErasureCoder, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.check(coder)?;
        let (k, unit) = (self.k as usize, self.unit as usize);
        let stripes = self.stripes(data.len() as u64) as usize;
        let mut shards = vec![vec![0u8; stripes * unit]; k + self.m as usize];
        for (n, chunk) in data.chunks(unit).enumerate() {
            let (stripe, shard) = (n / k, n % k);
            shards[shard][stripe * unit..stripe * unit + chunk.len()].copy_from_slice(chunk);
        }
        if stripes > 0 {
            coder.encode(&mut shards)?;
        }
        Ok(shards)
    }

    /// The logical bytes of whole stripes from their `k` data shard buffers (padding
    /// included).
    pub fn join(&self, data_shards: &[&[u8]]) -> Result<Vec<u8>> {
        let (k, unit) = (self.k as usize, self.unit as usize);
        let len = data_shards.first().map_or(0, |s| s.len());
        if data_shards.len() != k || !len.is_multiple_of(unit) || data_shards.iter().any(|s| s.len() != len) {
            return Err(err::invalid(format!(
                "joining stripes needs {k} data shards of one length in whole {unit}-byte units"
            )));
        }
        let mut data = Vec::with_capacity(len * k);
        for stripe in 0..len / unit {
            for shard in data_shards {
                data.extend_from_slice(&shard[stripe * unit..(stripe + 1) * unit]);
            }
        }
        Ok(data)
    }

    /// The logical bytes of whole stripes from any `k` of their `k + m` shard buffers
    /// (`None`: missing), rebuilding missing data shards only.
    pub fn decode(&self, coder: &dyn ErasureCoder, shards: &mut [Option<Vec<u8>>]) -> Result<Vec<u8>> {
        self.check(coder)?;
        let k = self.k as usize;
        if shards.len() != k + self.m as usize {
            return Err(err::invalid(format!(
                "decoding needs {} shard slots, got {}",
                k + self.m as usize,
                shards.len()
            )));
        }
        let empty = shards.iter().flatten().all(Vec::is_empty);
        if shards[..k].iter().any(Option::is_none) && !empty {
            coder.reconstruct(shards)?;
        }
        // Without stripes, missing shards are simply empty.
        let data: Vec<&[u8]> = shards[..k].iter().map(|s| s.as_deref().unwrap_or_default()).collect();
        self.join(&data)
    }

    fn check(&self, coder: &dyn ErasureCoder) -> Result<()> {
        if coder.data_shards() != self.k as usize || coder.parity_shards() != self.m as usize || self.unit == 0 {
            return Err(err::invalid(format!(
                "a {}+{} code cannot serve a {}+{} layout of {}-byte units",
                coder.data_shards(),
                coder.parity_shards(),
                self.k,
                self.m,
                self.unit
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ReedSolomon;
    use proptest::prelude::*;

    const LAYOUT: StripeLayout = StripeLayout { k: 4, m: 2, unit: 8 };

    #[test]
    fn chunks_are_dealt_stripe_by_stripe() {
        let code = ReedSolomon::new(4, 2).unwrap();
        let data: Vec<u8> = (0..40).collect();
        let shards = LAYOUT.encode(&code, &data).unwrap();
        // Two stripes of 32 bytes: shard 1 holds bytes 8..16 and 40..48 (padding).
        assert_eq!(shards.len(), 6);
        assert_eq!(shards[1], [8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(shards[0][8..], [32, 33, 34, 35, 36, 37, 38, 39]);
        assert_eq!((LAYOUT.stripes(40), LAYOUT.shard_len(40), LAYOUT.shard_len(0)), (2, 16, 0));
        assert_eq!(LAYOUT.stripes_covering(31, 2), 0..2);
        assert_eq!(LAYOUT.shard_range(&(1..3)), 8..24);
    }

    #[test]
    fn a_mismatched_code_is_refused() {
        let code = ReedSolomon::new(3, 2).unwrap();
        assert!(LAYOUT.encode(&code, b"x").unwrap_err().message.contains("3+2 code cannot serve a 4+2"));
    }

    proptest! {
        #[test]
        fn any_k_shards_give_the_data_back(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            lost in proptest::sample::subsequence((0..6usize).collect::<Vec<_>>(), 0..=2),
        ) {
            let code = ReedSolomon::new(4, 2).unwrap();
            let shards = LAYOUT.encode(&code, &data).unwrap();
            let mut partial: Vec<Option<Vec<u8>>> = shards.into_iter().map(Some).collect();
            for i in &lost {
                partial[*i] = None;
            }
            let mut back = LAYOUT.decode(&code, &mut partial).unwrap();
            prop_assert_eq!(back.len() as u64, LAYOUT.stripes(data.len() as u64) * LAYOUT.width());
            prop_assert!(back[data.len()..].iter().all(|b| *b == 0), "padding is zeros");
            back.truncate(data.len());
            prop_assert_eq!(back, data);
        }
    }
}
