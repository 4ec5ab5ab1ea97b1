//! Reed–Solomon over GF(2⁸) from `reed-solomon-erasure` (with its SIMD kernels).

use crate::ErasureCoder;
use shoal_types::{Result, err};

/// A Reed–Solomon `k + m` code.
pub struct ReedSolomon {
    code: reed_solomon_erasure::galois_8::ReedSolomon,
}

fn failed(what: &str, e: reed_solomon_erasure::Error) -> shoal_types::RadosError {
    err::invalid(format!("erasure {what}: {e:?}"))
}

impl ReedSolomon {
    /// A code with `k` data and `m` parity shards (`k ≥ 1`, `m ≥ 1`, `k + m ≤ 256`).
    pub fn new(k: usize, m: usize) -> Result<ReedSolomon> {
        let code = reed_solomon_erasure::galois_8::ReedSolomon::new(k, m).map_err(|e| failed("code", e))?;
        Ok(ReedSolomon { code })
    }
}

impl ErasureCoder for ReedSolomon {
    fn data_shards(&self) -> usize {
        self.code.data_shard_count()
    }

    fn parity_shards(&self) -> usize {
        self.code.parity_shard_count()
    }

    fn encode(&self, shards: &mut [Vec<u8>]) -> Result<()> {
        self.code.encode(shards).map_err(|e| failed("encode", e))
    }

    fn reconstruct(&self, shards: &mut [Option<Vec<u8>>]) -> Result<()> {
        self.code.reconstruct(shards).map_err(|e| failed("reconstruct", e))
    }

    fn verify(&self, shards: &[Vec<u8>]) -> Result<bool> {
        self.code.verify(shards).map_err(|e| failed("verify", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
