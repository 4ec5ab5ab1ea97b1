//! What an erasure code does, whatever its kind.

use shoal_types::Result;

/// A systematic `k + m` erasure code: the first `k` shards are the data itself.
pub trait ErasureCoder: Send + Sync {
    /// `k`: shards holding data.
    fn data_shards(&self) -> usize;
    /// `m`: shards holding parity; any `m` shards may be lost.
    fn parity_shards(&self) -> usize;
    /// Fills the last `m` of `shards` (all of one length) with the parity of the first `k`.
    fn encode(&self, shards: &mut [Vec<u8>]) -> Result<()>;
    /// Rebuilds the missing shards (`None`) from any `k` present ones, of one length.
    fn reconstruct(&self, shards: &mut [Option<Vec<u8>>]) -> Result<()>;
    /// Whether the parity shards agree with the data shards.
    fn verify(&self, shards: &[Vec<u8>]) -> Result<bool>;
}
