//! Reed–Solomon over GF(2⁸), computed with ISA-L (the library of Ceph's `isa` plugin).
//!
//! The generator matrix is the one reed-solomon-erasure built (and Shoal stored shards
//! with until it moved to ISA-L): a `(k + m) × k` Vandermonde matrix, row `r` being the
//! powers `r⁰, r¹, …`, multiplied by the inverse of its top `k` rows so that those become the
//! identity. The golden parity test in `lib.rs` holds it to those bytes.

use crate::ErasureCoder;
use crate::isal::{self, Products};
use shoal_types::{Result, err};

/// A Reed–Solomon `k + m` code.
pub struct ReedSolomon {
    k: usize,
    m: usize,
    /// The last `m` rows of the generator matrix (`m × k`, row-major).
    parity_rows: Vec<u8>,
    encoder: Products,
}

fn refused(what: impl std::fmt::Display) -> shoal_types::RadosError {
    err::invalid(format!("erasure code: {what}"))
}

impl ReedSolomon {
    /// A code with `k` data and `m` parity shards (`k ≥ 1`, `m ≥ 1`, `k + m ≤ 256`).
    pub fn new(k: usize, m: usize) -> Result<ReedSolomon> {
        if k == 0 || m == 0 || k + m > 256 {
            return Err(refused(format_args!("{k} + {m} shards (k and m ≥ 1, k + m ≤ 256)")));
        }
        let power = |base: usize, exponent: usize| (0..exponent).fold(1, |p, _| isal::mul(p, base as u8));
        let top: Vec<u8> = (0..k).flat_map(|r| (0..k).map(move |c| power(r, c))).collect();
        let top_inverse = isal::invert(&top, k).ok_or_else(|| refused("singular Vandermonde matrix"))?;
        let below: Vec<u8> = (k..k + m).flat_map(|r| (0..k).map(move |c| power(r, c))).collect();
        let parity_rows = multiply(&below, &top_inverse, k);
        let encoder = Products::new(&parity_rows, m, k);
        Ok(ReedSolomon { k, m, parity_rows, encoder })
    }

    /// Row `index` of the generator matrix: what shard `index` is as a sum of data shards.
    fn generator_row(&self, index: usize) -> Vec<u8> {
        match index.checked_sub(self.k) {
            None => (0..self.k).map(|c| u8::from(c == index)).collect(),
            Some(parity) => self.parity_rows[parity * self.k..(parity + 1) * self.k].to_vec(),
        }
    }

    /// The common length of `shards` (all there must be), refusing unequal or empty ones.
    fn shard_len<'a>(&self, shards: impl Iterator<Item = &'a Vec<u8>>, count: usize) -> Result<usize> {
        if count != self.k + self.m {
            return Err(refused(format_args!("{count} shards given to a {} + {} code", self.k, self.m)));
        }
        let mut lengths = shards.map(Vec::len);
        let len = lengths.next().unwrap_or(0);
        if len == 0 || lengths.any(|l| l != len) {
            return Err(refused("shards must be non-empty and of one length"));
        }
        if i32::try_from(len).is_err() {
            return Err(refused(format_args!("shards of {len} bytes (ISA-L takes under 2 GiB)")));
        }
        Ok(len)
    }

    /// Writes the parity of the `k` shards `data` into the `m` shards `parity`.
    fn encode_into(&self, data: &[Vec<u8>], parity: &mut [Vec<u8>]) {
        let sources: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let mut outputs: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
        self.encoder.apply(&sources, &mut outputs);
    }
}

/// The product of `a` (`rows × k`) and the `k × k` matrix `b`, both row-major.
fn multiply(a: &[u8], b: &[u8], k: usize) -> Vec<u8> {
    a.chunks(k)
        .flat_map(|row| {
            (0..k).map(move |c| row.iter().enumerate().fold(0, |sum, (l, &x)| sum ^ isal::mul(x, b[l * k + c])))
        })
        .collect()
}

impl ErasureCoder for ReedSolomon {
    fn data_shards(&self) -> usize {
        self.k
    }

    fn parity_shards(&self) -> usize {
        self.m
    }

    fn encode(&self, shards: &mut [Vec<u8>]) -> Result<()> {
        self.shard_len(shards.iter(), shards.len())?;
        let (data, parity) = shards.split_at_mut(self.k);
        self.encode_into(data, parity);
        Ok(())
    }

    fn reconstruct(&self, shards: &mut [Option<Vec<u8>>]) -> Result<()> {
        let present: Vec<usize> = (0..shards.len()).filter(|&i| shards[i].is_some()).collect();
        let len = self.shard_len(shards.iter().flatten(), shards.len())?;
        if present.len() == shards.len() {
            return Ok(());
        }
        if present.len() < self.k {
            return Err(refused(format_args!("{} shards left, {} needed", present.len(), self.k)));
        }
        // The data is the inverse of the chosen shards' generator rows times those shards;
        // each missing shard is its own row times the data.
        let chosen = &present[..self.k];
        let rows: Vec<u8> = chosen.iter().flat_map(|&i| self.generator_row(i)).collect();
        let to_data = isal::invert(&rows, self.k).ok_or_else(|| refused("singular decoding matrix"))?;
        let missing: Vec<usize> = (0..shards.len()).filter(|&i| shards[i].is_none()).collect();
        let wanted: Vec<u8> = missing.iter().flat_map(|&i| self.generator_row(i)).collect();
        let decoder = Products::new(&multiply(&wanted, &to_data, self.k), missing.len(), self.k);
        let mut rebuilt = vec![vec![0; len]; missing.len()];
        let sources: Vec<&[u8]> = chosen.iter().filter_map(|&i| shards[i].as_deref()).collect();
        let mut outputs: Vec<&mut [u8]> = rebuilt.iter_mut().map(Vec::as_mut_slice).collect();
        decoder.apply(&sources, &mut outputs);
        for (index, shard) in missing.into_iter().zip(rebuilt) {
            shards[index] = Some(shard);
        }
        Ok(())
    }

    fn verify(&self, shards: &[Vec<u8>]) -> Result<bool> {
        let len = self.shard_len(shards.iter(), shards.len())?;
        let mut parity = vec![vec![0; len]; self.m];
        self.encode_into(&shards[..self.k], &mut parity);
        Ok(parity == shards[self.k..])
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// ISA-L takes vector paths for long shards and a scalar one for short ones; the code
        /// works bytewise, so the parity of long shards must be, at every byte, the parity of
        /// one-byte shards (which the golden test pins).
        #[test]
        fn long_shards_encode_bytewise(
            (k, m) in (1usize..9, 1usize..5),
            len in 1usize..300,
            seed in any::<u8>(),
        ) {
            let code = ReedSolomon::new(k, m).unwrap();
            let data = |i: usize, j: usize| seed.wrapping_add((i * 31 + j * 7) as u8);
            let mut shards: Vec<Vec<u8>> =
                (0..k + m).map(|i| (0..len).map(|j| if i < k { data(i, j) } else { 0 }).collect()).collect();
            code.encode(&mut shards).unwrap();
            for j in [0, len / 2, len - 1] {
                let mut column: Vec<Vec<u8>> = (0..k + m).map(|i| vec![if i < k { data(i, j) } else { 0 }]).collect();
                code.encode(&mut column).unwrap();
                prop_assert!((k..k + m).all(|i| shards[i][j] == column[i][0]), "byte {j}");
            }
            let mut partial: Vec<Option<Vec<u8>>> = shards.iter().cloned().map(Some).collect();
            for lost in 0..m {
                partial[(seed as usize + lost * 3) % (k + m)] = None;
            }
            code.reconstruct(&mut partial).unwrap();
            prop_assert_eq!(partial.into_iter().map(Option::unwrap).collect::<Vec<_>>(), shards);
        }
    }

    #[test]
    fn any_m_lost_shards_come_back() {
        let code = ReedSolomon::new(4, 2).unwrap();
        let mut shards: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i.wrapping_mul(37); 64]).collect();
        code.encode(&mut shards).unwrap();
        assert!(code.verify(&shards).unwrap());
        for lost in [(0, 1), (0, 5), (3, 4), (4, 5)] {
            let mut partial: Vec<Option<Vec<u8>>> = shards.iter().cloned().map(Some).collect();
            partial[lost.0] = None;
            partial[lost.1] = None;
            code.reconstruct(&mut partial).unwrap();
            assert_eq!(partial.into_iter().map(Option::unwrap).collect::<Vec<_>>(), shards, "lost {lost:?}");
        }
        let mut three_lost: Vec<Option<Vec<u8>>> = shards.iter().cloned().map(Some).collect();
        three_lost[0] = None;
        three_lost[2] = None;
        three_lost[5] = None;
        assert!(code.reconstruct(&mut three_lost).is_err(), "more than m lost shards cannot come back");
        shards[1][7] ^= 1;
        assert!(!code.verify(&shards).unwrap(), "a flipped byte breaks the parity");
    }
}
