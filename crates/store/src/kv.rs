//! The narrow boundary to a storage engine: column families of ordered keys, atomic
//! batches, and an explicit sync that makes every earlier batch durable.

use serde::{Deserialize, Serialize};
use shoal_types::Result;

/// The column families the object store uses, one per kind of key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Cf {
    /// Object metadata (onodes), keyed by object key.
    Onode,
    /// Object data chunks, keyed by object key + chunk index.
    Data,
    /// Omap entries, keyed by object key + omap key.
    Omap,
    /// Store and PG metadata.
    Meta,
    /// Where the data chunks of large writes live on the data device, keyed like data
    /// chunks. Appended last: the encodings of the others are unchanged.
    Extent,
}

impl Cf {
    /// Every column family, in a fixed order.
    pub const ALL: [Cf; 5] = [Cf::Onode, Cf::Data, Cf::Omap, Cf::Meta, Cf::Extent];

    /// The engine-level name of the column family.
    pub fn name(self) -> &'static str {
        match self {
            Cf::Onode => "onode",
            Cf::Data => "data",
            Cf::Omap => "omap",
            Cf::Meta => "meta",
            Cf::Extent => "extent",
        }
    }
}

/// One change inside an atomic [`Batch`]. Keys and values are encoded as byte strings
/// (the same bytes as a sequence of `u8` in postcard, decoded in one copy instead of
/// one call per byte).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BatchOp {
    /// Set a key.
    Put(Cf, #[serde(with = "serde_bytes")] Vec<u8>, #[serde(with = "serde_bytes")] Vec<u8>),
    /// Delete a key.
    Delete(Cf, #[serde(with = "serde_bytes")] Vec<u8>),
    /// Delete every key in `[start, end)`.
    DeleteRange(Cf, #[serde(with = "serde_bytes")] Vec<u8>, #[serde(with = "serde_bytes")] Vec<u8>),
}

/// Changes applied all together or not at all, in order (a later op wins).
pub type Batch = Vec<BatchOp>;

/// Counters of what the engine wrote since it was opened, for write-amplification
/// figures, and the space it uses now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvStats {
    /// Bytes of keys and values handed to the engine.
    pub user_bytes_written: u64,
    /// Bytes written to the write-ahead log.
    pub wal_bytes: u64,
    /// Number of WAL syncs.
    pub wal_syncs: u64,
    /// Bytes written by memtable flushes.
    pub flush_bytes: u64,
    /// Bytes written by compactions.
    pub compaction_bytes: u64,
    /// Bytes the engine's files take now (SST and blob files), all column families.
    pub live_bytes: u64,
}

impl KvStats {
    /// Bytes the device took per byte the user wrote: (WAL + flush + compaction) / user.
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            return 0.0;
        }
        (self.wal_bytes + self.flush_bytes + self.compaction_bytes) as f64 / self.user_bytes_written as f64
    }
}

/// An ordered key-value engine with column families.
///
/// `write` makes a batch visible at once and atomically; it is durable only after a later
/// `sync` returns. Implementations: RocksDB (`shoal-store-rocks`) and [`crate::MemKv`].
pub trait KvEngine: Send + Sync + 'static {
    /// The value of a key.
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Up to `limit` entries with `start <= key < end`, in key order.
    fn scan(&self, cf: Cf, start: &[u8], end: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// Applies a batch atomically.
    fn write(&self, batch: Batch) -> Result<()>;
    /// Makes every batch written before this call durable.
    fn sync(&self) -> Result<()>;
    /// Write statistics since open.
    fn stats(&self) -> KvStats;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of [`BatchOp`] before keys and values were byte strings.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum SequenceOp {
        Put(Cf, Vec<u8>, Vec<u8>),
        Delete(Cf, Vec<u8>),
        DeleteRange(Cf, Vec<u8>, Vec<u8>),
    }

    #[test]
    fn byte_strings_encode_like_byte_sequences() {
        let value: Vec<u8> = (0..=255).collect();
        let ops = vec![
            BatchOp::Put(Cf::Omap, b"key".to_vec(), value.clone()),
            BatchOp::Delete(Cf::Data, vec![0xff; 200]),
            BatchOp::DeleteRange(Cf::Meta, Vec::new(), b"end".to_vec()),
        ];
        let old = vec![
            SequenceOp::Put(Cf::Omap, b"key".to_vec(), value),
            SequenceOp::Delete(Cf::Data, vec![0xff; 200]),
            SequenceOp::DeleteRange(Cf::Meta, Vec::new(), b"end".to_vec()),
        ];
        let encoded = postcard::to_allocvec(&ops).unwrap();
        assert_eq!(encoded, postcard::to_allocvec(&old).unwrap());
        assert_eq!(postcard::from_bytes::<Vec<BatchOp>>(&encoded).unwrap(), ops);
    }
}
