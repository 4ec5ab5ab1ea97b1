//! Erasure coding for pools that store `k` data shards and `m` parity shards per object.
//!
//! An object's bytes are cut into stripes of `k × stripe_unit` bytes; chunk `i` of every
//! stripe goes to shard `i`, and shards `k..k+m` hold the parity of each stripe. A shard is
//! thus the concatenation of its chunks, and since the code works bytewise, the parity of
//! whole shards is the parity of their stripes laid end to end: a write encodes once for
//! all its stripes. The last stripe is padded with zeros; the object's logical size is kept
//! beside the shards.
//!
//! The code sits behind [`ErasureCoder`], so that another library (ISA-L) can replace
//! Reed–Solomon from `reed-solomon-erasure` without touching the layout or its callers.

mod layout;
mod rs;

pub use layout::StripeLayout;
pub use rs::ReedSolomon;

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

/// The code for `k + m` shards: Reed–Solomon over GF(2⁸).
pub fn coder(k: u32, m: u32) -> Result<Box<dyn ErasureCoder>> {
    Ok(Box::new(ReedSolomon::new(k as usize, m as usize)?))
}
