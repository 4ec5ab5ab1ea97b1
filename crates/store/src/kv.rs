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
    /// Give every key that starts with `from` the prefix `to` instead, replacing every key
    /// that starts with `to`. Only an [`crate::ObjectStore`] transaction holds it (the store
    /// lowers it to the other three, moving data-device extents without copying them); an
    /// engine refuses it.
    Move(Cf, #[serde(with = "serde_bytes")] Vec<u8>, #[serde(with = "serde_bytes")] Vec<u8>),
}

impl BatchOp {
    /// The error an engine answers a batch holding a [`BatchOp::Move`] with.
    pub fn unlowered() -> shoal_types::RadosError {
        shoal_types::err::invalid("a move reached the engine: the object store lowers it first")
    }
}

/// Changes applied all together or not at all, in order (a later op wins).
pub type Batch = Vec<BatchOp>;

/// Counters of what the engine did since it was opened (writes for write-amplification
/// figures, stalls, background work, cache hits), and the space and memory it uses now.
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
    /// Memtable flushes.
    pub flushes: u64,
    /// Time spent in memtable flushes, µs.
    pub flush_micros: u64,
    /// Bytes written by compactions.
    pub compaction_bytes: u64,
    /// Compactions run.
    pub compactions: u64,
    /// Time spent in compactions, µs.
    pub compaction_micros: u64,
    /// Time writers were stalled or slowed down by the engine, µs.
    pub stall_micros: u64,
    /// Reads answered by the block cache.
    pub block_cache_hits: u64,
    /// Reads that missed the block cache.
    pub block_cache_misses: u64,
    /// Point reads answered by a memtable.
    pub memtable_hits: u64,
    /// Point reads not answered by a memtable.
    pub memtable_misses: u64,
    /// Bytes the engine's files take now (SST and blob files), all column families.
    pub live_bytes: u64,
    /// Bytes of memory the memtables hold now (active, immutable and pinned).
    pub memtable_bytes: u64,
    /// Bytes of memory the open files' indexes and filters hold now, outside the cache.
    pub table_reader_bytes: u64,
}

impl KvStats {
    /// Bytes the device took per byte the user wrote: (WAL + flush + compaction) / user.
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            return 0.0;
        }
        (self.wal_bytes + self.flush_bytes + self.compaction_bytes) as f64 / self.user_bytes_written as f64
    }

    /// What the counters grew by since `before` (the space in use is today's).
    pub fn since(&self, before: &KvStats) -> KvStats {
        let d = |now: u64, then: u64| now.saturating_sub(then);
        KvStats {
            user_bytes_written: d(self.user_bytes_written, before.user_bytes_written),
            wal_bytes: d(self.wal_bytes, before.wal_bytes),
            wal_syncs: d(self.wal_syncs, before.wal_syncs),
            flush_bytes: d(self.flush_bytes, before.flush_bytes),
            flushes: d(self.flushes, before.flushes),
            flush_micros: d(self.flush_micros, before.flush_micros),
            compaction_bytes: d(self.compaction_bytes, before.compaction_bytes),
            compactions: d(self.compactions, before.compactions),
            compaction_micros: d(self.compaction_micros, before.compaction_micros),
            stall_micros: d(self.stall_micros, before.stall_micros),
            block_cache_hits: d(self.block_cache_hits, before.block_cache_hits),
            block_cache_misses: d(self.block_cache_misses, before.block_cache_misses),
            memtable_hits: d(self.memtable_hits, before.memtable_hits),
            memtable_misses: d(self.memtable_misses, before.memtable_misses),
            live_bytes: self.live_bytes,
            memtable_bytes: self.memtable_bytes,
            table_reader_bytes: self.table_reader_bytes,
        }
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
