//! Objects on a [`KvEngine`]: key layout, onodes, transactions and reads.
//!
//! Layout (see docs/format/store.md):
//! - object key = pool (u64 BE) ‖ bit-reversed placement hash (u32 BE) ‖ namespace (u16 BE
//!   length + bytes) ‖ name (u16 BE length + bytes). Prefix-free, and each PG is one or two
//!   contiguous ranges of it.
//! - `onode` CF: object key → [`Onode`] (size, mtime, version, xattrs, omap header).
//! - `data` CF: object key ‖ chunk index (u32 BE) → up to `chunk_size` bytes; a missing
//!   chunk is a hole and reads as zeros.
//! - `extent` CF: object key ‖ chunk index (u32 BE) → [`crate::Extent`]: a chunk of a large write
//!   on the data device; it shadows a `data` row at the same index (see [`crate::extents`]).
//! - `omap` CF: object key ‖ omap key → value.
//! - stash key = the object key's pool and hash ‖ `ff ff` (a name length no key has) ‖ slot
//!   (u64 BE): where [`Transaction::stash_chunks`] moves an object's chunks (`data` and
//!   `extent` rows keyed stash key ‖ chunk index) so that they can be moved back. It sorts
//!   with its object's PG, so PG splits and deletions carry it along.

use crate::device::BlockDevice;
use crate::extents::{DataSpace, SpaceStats, decode_record, for_each_extent, split_chunk_key};
use crate::kv::{Batch, BatchOp, Cf, KvEngine, KvStats};
use crate::prefix::prefix_end;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_types::{ObjectName, PgId, PoolId, Result, Versioned, err};
use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// An encoded object key: see the module docs for its layout.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey(Vec<u8>);

/// Longest namespace or object name, in bytes.
pub const MAX_NAME_LEN: usize = 4096;

impl ObjectKey {
    /// The key of an object; fails if the namespace or name is too long.
    pub fn new(pool: PoolId, name: &ObjectName) -> Result<Self> {
        for (what, s) in [("namespace", &name.namespace), ("object name", &name.name)] {
            if s.len() > MAX_NAME_LEN {
                return Err(err::name_too_long(format!("{what} is {} bytes, the limit is {MAX_NAME_LEN}", s.len())));
            }
        }
        let hash = shoal_placement::object_hash(name);
        let mut key = Vec::with_capacity(16 + name.namespace.len() + name.name.len());
        key.extend_from_slice(&pool.0.to_be_bytes());
        key.extend_from_slice(&hash.reverse_bits().to_be_bytes());
        for s in [&name.namespace, &name.name] {
            key.extend_from_slice(&(s.len() as u16).to_be_bytes());
            key.extend_from_slice(s.as_bytes());
        }
        Ok(ObjectKey(key))
    }

    /// Rebuilds a key from bytes read back from the store, checking its shape.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        let key = ObjectKey(bytes);
        key.decode()?;
        Ok(key)
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The object as people read it, `pool 2 object 'name'` (the key's bytes if it does not
    /// decode).
    pub fn describe(&self) -> String {
        self.decode().map_or_else(
            |_| format!("object key {:02x?}", self.0),
            |(pool, name)| format!("pool {pool} object '{name}'"),
        )
    }

    /// The pool and object name encoded in the key.
    pub fn decode(&self) -> Result<(PoolId, ObjectName)> {
        let corrupt = || err::io(format!("corrupt object key {:02x?}", self.0));
        let b = &self.0;
        if b.len() < 16 {
            return Err(corrupt());
        }
        let pool = PoolId(u64::from_be_bytes(b[0..8].try_into().map_err(|_| corrupt())?));
        let mut pos = 12;
        let mut parts = Vec::with_capacity(2);
        for _ in 0..2 {
            let len_bytes: [u8; 2] = b.get(pos..pos + 2).ok_or_else(corrupt)?.try_into().map_err(|_| corrupt())?;
            let len = u16::from_be_bytes(len_bytes) as usize;
            let s = b.get(pos + 2..pos + 2 + len).ok_or_else(corrupt)?;
            parts.push(String::from_utf8(s.to_vec()).map_err(|_| corrupt())?);
            pos += 2 + len;
        }
        if pos != b.len() {
            return Err(corrupt());
        }
        let name = parts.pop().ok_or_else(corrupt)?;
        let namespace = parts.pop().ok_or_else(corrupt)?;
        Ok((pool, ObjectName { namespace, name }))
    }

    fn with_suffix(&self, suffix: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.0.len() + suffix.len());
        k.extend_from_slice(&self.0);
        k.extend_from_slice(suffix);
        k
    }

    fn chunk_key(&self, index: u32) -> Vec<u8> {
        self.with_suffix(&index.to_be_bytes())
    }

    /// The first key after every key that starts with this object key.
    fn end(&self) -> Vec<u8> {
        prefix_end(&self.0)
    }

    /// The key of this object's stash `slot`.
    fn stash(&self, slot: u64) -> Vec<u8> {
        [&self.0[..HASHED_PREFIX], &STASH_MARK, &slot.to_be_bytes()].concat()
    }
}

/// Bytes of an object key before its names: the pool and the hash.
const HASHED_PREFIX: usize = 12;
/// Where a stash key has a name length: longer than any name may be.
const STASH_MARK: [u8; 2] = [0xff, 0xff];

/// Whether `key` (an object key or a stash key) is a stash's.
pub(crate) fn is_stash(key: &[u8]) -> bool {
    key.get(HASHED_PREFIX..HASHED_PREFIX + 2) == Some(&STASH_MARK[..])
}

/// An object's metadata record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Onode {
    /// Data size in bytes.
    pub size: u64,
    /// Last modification, nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
    /// User version, increased by every modifying operation.
    pub version: u64,
    /// Extended attributes.
    pub xattrs: BTreeMap<String, Bytes>,
    /// The omap header.
    pub omap_header: Bytes,
}

impl Versioned for Onode {
    const NAME: &'static str = "onode";
    const VERSION: u8 = 1;
}

/// Chunk deletions up to this many are point deletes; more become one range delete.
const POINT_DELETE_CHUNKS: u32 = 64;
/// Chunk reads up to this many look each chunk up; more scan the range (an iterator over
/// every memtable and level costs several point reads to open).
const POINT_READ_CHUNKS: u32 = 4;

/// Parameters fixed when a store is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreFormat {
    /// Bytes per data chunk key.
    pub chunk_size: u32,
}

impl Versioned for StoreFormat {
    const NAME: &'static str = "store format";
    const VERSION: u8 = 1;
}

impl Default for StoreFormat {
    /// 16 KiB chunks: a small append rewrites at most 16 KiB (measured: 4 KiB appends ran
    /// twice as fast as with 64 KiB chunks), and a 4 MiB object is still only 256 keys.
    fn default() -> Self {
        StoreFormat { chunk_size: 16 * 1024 }
    }
}

/// What [`ObjectStore::fsck`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    /// Objects with data on the data device.
    pub objects: u64,
    /// Extent records.
    pub extents: u64,
    /// Extent records of stashes (chunks an erasure-coded write moved aside to undo it).
    pub stashed: u64,
    /// Device bytes the extent records reference.
    pub referenced: u64,
    /// Device bytes the allocator counts as used.
    pub allocated: u64,
    /// Everything that is wrong; empty for a healthy store.
    pub errors: Vec<String>,
}

/// Settings of a store that may change from one start to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// Writes of at least this many bytes go to the data device, once; smaller ones
    /// through the engine's WAL (`store_prefer_deferred_size`).
    pub prefer_deferred_size: u64,
}

impl Default for StoreOptions {
    /// 64 KiB: below it a write's WAL bytes cost less than a device write plus its sync.
    fn default() -> Self {
        StoreOptions { prefer_deferred_size: 64 * 1024 }
    }
}

const FORMAT_KEY: &[u8] = b"store_format";
const PG_META_PREFIX: u8 = b'P';
const PG_LOG_PREFIX: u8 = b'L';
const PG_ROLLBACK_PREFIX: u8 = b'R';
const PG_MISSING_PREFIX: u8 = b'M';
const PG_DAMAGE_PREFIX: u8 = b'D';
const PG_SCRUB_PREFIX: u8 = b'S';
const POOL_PG_NUM_PREFIX: u8 = b'N';
const PG_DUP_PREFIX: u8 = b'U';

/// The `meta` key of a PG log entry: `L` ‖ pool (u64 BE) ‖ seed (u32 BE) ‖ version (u64 BE).
pub fn pg_log_key(pg: PgId, version: u64) -> Vec<u8> {
    pg_version_key(PG_LOG_PREFIX, pg, version)
}

/// The `meta` key of what an erasure-coded PG's shard keeps to undo the write at `version`:
/// `R` ‖ pool (u64 BE) ‖ seed (u32 BE) ‖ version (u64 BE).
pub fn pg_rollback_key(pg: PgId, version: u64) -> Vec<u8> {
    pg_version_key(PG_ROLLBACK_PREFIX, pg, version)
}

fn pg_version_key(prefix: u8, pg: PgId, version: u64) -> Vec<u8> {
    let mut k = pg_key(prefix, pg);
    k.extend_from_slice(&version.to_be_bytes());
    k
}

/// The `meta` key of a request a merged copy of a PG remembers from the logs its merge
/// dropped, so that the request resent is answered rather than applied again:
/// `U` ‖ pool (u64 BE) ‖ seed (u32 BE) ‖ client (u64 BE) ‖ tid (u64 BE).
pub fn pg_dup_key(pg: PgId, reqid: shoal_types::ReqId) -> Vec<u8> {
    let mut k = pg_key(PG_DUP_PREFIX, pg);
    k.extend_from_slice(&reqid.client.0.to_be_bytes());
    k.extend_from_slice(&reqid.tid.to_be_bytes());
    k
}

/// The `meta` keys `[from, to)` of a PG's remembered requests ([`pg_dup_key`]).
pub fn pg_dup_rows(pg: PgId) -> (Vec<u8>, Vec<u8>) {
    let prefix = pg_key(PG_DUP_PREFIX, pg);
    let end = prefix_end(&prefix);
    (prefix, end)
}

/// The `meta` key of a PG's persistent state: `P` ‖ pool (u64 BE) ‖ seed (u32 BE).
pub fn pg_meta_key(pg: PgId) -> Vec<u8> {
    pg_key(PG_META_PREFIX, pg)
}

/// The `meta` key of the objects an incomplete copy of a PG knows it lacks:
/// `M` ‖ pool (u64 BE) ‖ seed (u32 BE).
pub fn pg_missing_key(pg: PgId) -> Vec<u8> {
    pg_key(PG_MISSING_PREFIX, pg)
}

/// The `meta` key of one object an incomplete copy of a PG lacks: the PG's missing key ‖
/// the object key. A row per object, so that recovering one rewrites no other.
pub fn pg_missing_object_key(pg: PgId, object: &ObjectKey) -> Vec<u8> {
    [pg_missing_key(pg).as_slice(), object.as_bytes()].concat()
}

/// The `meta` keys `[from, to)` of the objects an incomplete copy of a PG lacks, and the
/// length of the prefix before each row's object key.
pub fn pg_missing_objects(pg: PgId) -> (Vec<u8>, Vec<u8>, usize) {
    let record = pg_missing_key(pg);
    ([record.as_slice(), &[0]].concat(), prefix_end(&record), record.len())
}

/// The `meta` key of one object whose local copy failed its checksum and is not repaired
/// yet: `D` ‖ pool (u64 BE) ‖ seed (u32 BE) ‖ the object key.
pub fn pg_damage_key(pg: PgId, object: &ObjectKey) -> Vec<u8> {
    [pg_key(PG_DAMAGE_PREFIX, pg).as_slice(), object.as_bytes()].concat()
}

/// The `meta` keys `[from, to)` of the damaged-object rows of `pg` (of every PG if `None`).
pub fn pg_damage_rows(pg: Option<PgId>) -> (Vec<u8>, Vec<u8>) {
    let prefix = pg.map_or_else(|| vec![PG_DAMAGE_PREFIX], |pg| pg_key(PG_DAMAGE_PREFIX, pg));
    let end = prefix_end(&prefix);
    (prefix, end)
}

/// The PG and the object key of a [`pg_damage_key`].
pub fn split_damage_key(key: &[u8]) -> Option<(PgId, &[u8])> {
    let (&prefix, rest) = key.split_first()?;
    let (pool, rest) = rest.split_first_chunk::<8>()?;
    let (seed, object) = rest.split_first_chunk::<4>()?;
    let pg = PgId { pool: PoolId(u64::from_be_bytes(*pool)), seed: u32::from_be_bytes(*seed) };
    (prefix == PG_DAMAGE_PREFIX).then_some((pg, object))
}

/// The `meta` key of when a PG's copy here was last scrubbed: `S` ‖ pool (u64 BE) ‖ seed (u32 BE).
pub fn pg_scrub_key(pg: PgId) -> Vec<u8> {
    pg_key(PG_SCRUB_PREFIX, pg)
}

/// The `meta` key of the `pg_num` this store's copies of a pool's PGs are split to:
/// `N` ‖ pool (u64 BE).
pub fn pg_pool_pg_num_key(pool: PoolId) -> Vec<u8> {
    [&[POOL_PG_NUM_PREFIX][..], &pool.0.to_be_bytes()].concat()
}

/// The `meta` keys `[from, to)` of every pool's [`pg_pool_pg_num_key`].
pub fn pg_pool_pg_num_rows() -> (Vec<u8>, Vec<u8>) {
    (vec![POOL_PG_NUM_PREFIX], prefix_end(&[POOL_PG_NUM_PREFIX]))
}

fn pg_key(prefix: u8, pg: PgId) -> Vec<u8> {
    let mut k = vec![prefix];
    k.extend_from_slice(&pg.pool.0.to_be_bytes());
    k.extend_from_slice(&pg.seed.to_be_bytes());
    k
}

/// Keys read per scan when copying an object.
const COPY_PAGE: usize = 1024;

/// The `[start, end)` object-key bounds of the objects of `pool` whose bit-reversed hash is
/// in `range`.
fn hash_range_bounds(pool: PoolId, range: &RangeInclusive<u32>) -> (Vec<u8>, Vec<u8>) {
    let bound = |rev: u64| {
        let mut k = pool.0.to_be_bytes().to_vec();
        if rev > u64::from(u32::MAX) {
            return prefix_end(&k);
        }
        k.extend_from_slice(&(rev as u32).to_be_bytes());
        k
    };
    (bound(u64::from(*range.start())), bound(u64::from(*range.end()) + 1))
}

/// Where the next part of a paged object copy ([`ObjectStore::copy_object_part`]) starts;
/// it travels between OSDs in recovery replies and requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CopyResume {
    /// At this data chunk.
    Chunk(u32),
    /// At this omap row (its store key).
    Omap(Vec<u8>),
}

impl Versioned for CopyResume {
    const NAME: &'static str = "copy resume";
    const VERSION: u8 = 1;
}

/// A set of changes applied atomically by [`ObjectStore::commit`]. Its encoding is what a
/// primary ships to its replicas: they apply exactly the keys the primary wrote.
#[derive(Default, Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transaction {
    ops: Batch,
}

impl Versioned for Transaction {
    const NAME: &'static str = "store transaction";
    const VERSION: u8 = 1;
}

impl Transaction {
    /// An empty transaction.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing would change.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The metadata this transaction last stores for `key`, if it stores any: how a copy
    /// pulled from a replica shows which version of the object it holds.
    pub fn onode(&self, key: &ObjectKey) -> Result<Option<Onode>> {
        let stored = self.ops.iter().rev().find_map(|op| match op {
            BatchOp::Put(Cf::Onode, k, v) if *k == key.0 => Some(v),
            _ => None,
        });
        stored.map(|bytes| Onode::decode(bytes)).transpose()
    }

    /// Stores an object's metadata (creating the object).
    pub fn put_onode(&mut self, key: &ObjectKey, onode: &Onode) {
        self.ops.push(BatchOp::Put(Cf::Onode, key.0.clone(), onode.encode()));
    }

    /// Removes an object's metadata, data and omap.
    pub fn remove_object(&mut self, key: &ObjectKey) {
        self.ops.push(BatchOp::Delete(Cf::Onode, key.0.clone()));
        self.delete_chunks_from(key, 0);
        self.omap_clear(key);
    }

    /// Removes an object whose data ends before chunk `chunks`, with its omap only when it
    /// has one: point deletes where they are few, since every range tombstone slows reads
    /// until compaction drops it.
    pub fn remove_object_sized(&mut self, key: &ObjectKey, chunks: u32, has_omap: bool) {
        self.ops.push(BatchOp::Delete(Cf::Onode, key.0.clone()));
        self.delete_chunks_between(key, 0, chunks);
        if has_omap {
            self.omap_clear(key);
        }
    }

    /// Deletes chunks `first..end` of an object whose chunks all lie before `end`.
    pub fn delete_chunks_between(&mut self, key: &ObjectKey, first: u32, end: u32) {
        if end.saturating_sub(first) > POINT_DELETE_CHUNKS {
            self.delete_chunks_from(key, first);
        } else {
            for index in first..end {
                self.delete_chunk(key, index);
            }
        }
    }

    /// Stores one data chunk.
    pub fn put_chunk(&mut self, key: &ObjectKey, index: u32, data: Vec<u8>) {
        self.ops.push(BatchOp::Put(Cf::Data, key.chunk_key(index), data));
    }

    /// Deletes one data chunk (it becomes a hole).
    pub fn delete_chunk(&mut self, key: &ObjectKey, index: u32) {
        self.ops.push(BatchOp::Delete(Cf::Data, key.chunk_key(index)));
    }

    /// Deletes every chunk with index `>= first`.
    pub fn delete_chunks_from(&mut self, key: &ObjectKey, first: u32) {
        self.ops.push(BatchOp::DeleteRange(Cf::Data, key.chunk_key(first), key.end()));
    }

    /// Moves every chunk of the object to its stash `slot`, leaving it none: chunks on the
    /// data device keep their space (nothing is copied), small ones are rewritten.
    pub fn stash_chunks(&mut self, key: &ObjectKey, slot: u64) {
        self.ops.push(BatchOp::Move(Cf::Data, key.0.clone(), key.stash(slot)));
    }

    /// Moves the chunks of stash `slot` back to the object, in place of any it has.
    pub fn unstash_chunks(&mut self, key: &ObjectKey, slot: u64) {
        self.ops.push(BatchOp::Move(Cf::Data, key.stash(slot), key.0.clone()));
    }

    /// Deletes stash `slot` of the object, freeing its space.
    pub fn drop_stash(&mut self, key: &ObjectKey, slot: u64) {
        let stash = key.stash(slot);
        let end = prefix_end(&stash);
        self.ops.push(BatchOp::DeleteRange(Cf::Data, stash, end));
    }

    /// Sets an omap entry.
    pub fn omap_put(&mut self, key: &ObjectKey, omap_key: &[u8], value: &[u8]) {
        self.ops.push(BatchOp::Put(Cf::Omap, key.with_suffix(omap_key), value.to_vec()));
    }

    /// Deletes an omap entry.
    pub fn omap_delete(&mut self, key: &ObjectKey, omap_key: &[u8]) {
        self.ops.push(BatchOp::Delete(Cf::Omap, key.with_suffix(omap_key)));
    }

    /// Deletes omap entries in `[start, end)`.
    pub fn omap_delete_range(&mut self, key: &ObjectKey, start: &[u8], end: &[u8]) {
        self.ops.push(BatchOp::DeleteRange(Cf::Omap, key.with_suffix(start), key.with_suffix(end)));
    }

    /// Deletes every omap entry of the object.
    pub fn omap_clear(&mut self, key: &ObjectKey) {
        self.ops.push(BatchOp::DeleteRange(Cf::Omap, key.0.clone(), key.end()));
    }

    /// Deletes store metadata keys in `[start, end)`.
    pub fn delete_meta_range(&mut self, start: &[u8], end: &[u8]) {
        self.ops.push(BatchOp::DeleteRange(Cf::Meta, start.to_vec(), end.to_vec()));
    }

    /// Sets a store metadata key.
    pub fn put_meta(&mut self, key: &[u8], value: Vec<u8>) {
        self.ops.push(BatchOp::Put(Cf::Meta, key.to_vec(), value));
    }

    /// Deletes a store metadata key.
    pub fn delete_meta(&mut self, key: &[u8]) {
        self.ops.push(BatchOp::Delete(Cf::Meta, key.to_vec()));
    }

    /// Bytes of the keys and values this transaction stores.
    pub fn bytes(&self) -> usize {
        self.ops.iter().map(|op| if let BatchOp::Put(_, k, v) = op { k.len() + v.len() } else { 0 }).sum()
    }

    /// Appends every change of `other`, after this transaction's own.
    pub fn extend(&mut self, other: Transaction) {
        self.ops.extend(other.ops);
    }

    /// Deletes every object of `pool` whose bit-reversed hash is in one of `ranges` (a PG).
    pub fn delete_hash_ranges(&mut self, pool: PoolId, ranges: &[RangeInclusive<u32>]) {
        for range in ranges {
            let (start, end) = hash_range_bounds(pool, range);
            for cf in [Cf::Onode, Cf::Data, Cf::Omap] {
                self.ops.push(BatchOp::DeleteRange(cf, start.clone(), end.clone()));
            }
        }
    }

    /// Deletes every object of a pool.
    pub fn delete_pool(&mut self, pool: PoolId) {
        let start = pool.0.to_be_bytes().to_vec();
        let end = prefix_end(&start);
        for cf in [Cf::Onode, Cf::Data, Cf::Omap] {
            self.ops.push(BatchOp::DeleteRange(cf, start.clone(), end.clone()));
        }
        for prefix in [PG_META_PREFIX, PG_LOG_PREFIX] {
            let (from, to) = ([&[prefix][..], &start].concat(), [&[prefix][..], &end].concat());
            self.ops.push(BatchOp::DeleteRange(Cf::Meta, from, to));
        }
    }
}

/// Objects with data, xattrs and omap on a [`KvEngine`].
///
/// [`ObjectStore::commit`] applies a transaction atomically and makes it visible at once;
/// it is durable once [`ObjectStore::sync`] has returned a sequence number at least as
/// large as the one `commit` returned. One `sync` covers every commit before it: that is
/// the group commit.
pub struct ObjectStore {
    kv: Arc<dyn KvEngine>,
    format: StoreFormat,
    committed_seq: AtomicU64,
    space: DataSpace,
}

impl ObjectStore {
    /// Opens a store on an engine and a data device, recording `format` if the store is
    /// new; an existing store keeps the format it was created with.
    pub fn open(
        kv: Arc<dyn KvEngine>,
        device: Arc<dyn BlockDevice>,
        format: StoreFormat,
        options: StoreOptions,
    ) -> Result<Self> {
        if format.chunk_size == 0 || format.chunk_size > 16 << 20 {
            return Err(err::invalid(format!("chunk size {} must be in 1..=16 MiB", format.chunk_size)));
        }
        let format = match kv.get(Cf::Meta, FORMAT_KEY)? {
            Some(bytes) => StoreFormat::decode(&bytes).map_err(|e| err::io(format!("store format record: {e}")))?,
            None => {
                kv.write(vec![BatchOp::Put(Cf::Meta, FORMAT_KEY.to_vec(), format.encode())])?;
                kv.sync()?;
                format
            }
        };
        let space = DataSpace::open(kv.as_ref(), device, format.chunk_size, options.prefer_deferred_size)?;
        Ok(ObjectStore { kv, format, committed_seq: AtomicU64::new(0), space })
    }

    /// A store in memory (engine and device), for tests and models.
    pub fn in_memory(format: StoreFormat, options: StoreOptions) -> Result<Self> {
        Self::open(Arc::new(crate::MemKv::new()), Arc::new(crate::MemDevice::new()), format, options)
    }

    /// Bytes per data chunk.
    pub fn chunk_size(&self) -> u32 {
        self.format.chunk_size
    }

    /// An object's metadata, if it exists.
    pub fn onode(&self, key: &ObjectKey) -> Result<Option<Onode>> {
        self.kv
            .get(Cf::Onode, &key.0)?
            .map(|bytes| Onode::decode(&bytes).map_err(|e| err::io(format!("onode of {:?}: {e}", key.decode()))))
            .transpose()
    }

    /// The chunks with indexes in `first..end` that exist (holes are absent), extents read
    /// from the device and checked against their crc32c (EIO naming the object if not).
    pub fn chunks(&self, key: &ObjectKey, first: u32, end: u32) -> Result<Vec<(u32, Bytes)>> {
        let chunk = self.format.chunk_size as usize;
        let mut chunks = Vec::new();
        for (index, bytes) in self.runs(key, first, end)? {
            for (offset, at) in (0..bytes.len()).step_by(chunk).enumerate() {
                chunks.push((index + offset as u32, bytes.slice(at..(at + chunk).min(bytes.len()))));
            }
        }
        Ok(chunks)
    }

    /// Like [`ObjectStore::chunks`], but consecutive chunks of one extent come as one
    /// buffer `(first index, bytes)`: a large read is a slice of what the device returned.
    pub fn runs(&self, key: &ObjectKey, first: u32, end: u32) -> Result<Vec<(u32, Bytes)>> {
        if first >= end {
            return Ok(Vec::new());
        }
        let index_of = |k: &[u8]| split_chunk_key(k).map(|(_, index)| index);
        let mut extents = Vec::new();
        for (k, v) in self.rows(Cf::Extent, key, first, end)? {
            extents.push((index_of(&k)?, decode_record(&k, &v)?));
        }
        let name = || key.describe();
        let mut runs: BTreeMap<u32, Bytes> = self.space.read(&extents, &name)?.into_iter().collect();
        let chunk = u64::from(self.format.chunk_size);
        let shadowed = |runs: &BTreeMap<u32, Bytes>, index: u32| {
            runs.range(..=index)
                .next_back()
                .is_some_and(|(&at, bytes)| u64::from(index - at) < (bytes.len() as u64).div_ceil(chunk))
        };
        for (k, v) in self.rows(Cf::Data, key, first, end)? {
            let index = index_of(&k)?;
            // An extent shadows a data row at the same index.
            if !shadowed(&runs, index) {
                runs.insert(index, Bytes::from(v));
            }
        }
        Ok(runs.into_iter().collect())
    }

    /// The rows of `key`'s chunks `first..end` in `cf` that exist, in index order: a point
    /// read per chunk for a short range (no iterator to open, the common small-object
    /// read), a scan otherwise.
    fn rows(&self, cf: Cf, key: &ObjectKey, first: u32, end: u32) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if end - first <= POINT_READ_CHUNKS {
            let mut rows = Vec::new();
            for index in first..end {
                let k = key.chunk_key(index);
                if let Some(v) = self.kv.get(cf, &k)? {
                    rows.push((k, v));
                }
            }
            return Ok(rows);
        }
        self.kv.scan(cf, &key.chunk_key(first), &key.chunk_key(end), (end - first) as usize)
    }

    /// One omap value.
    pub fn omap_get(&self, key: &ObjectKey, omap_key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.kv.get(Cf::Omap, &key.with_suffix(omap_key))
    }

    /// Up to `limit` omap entries with keys `>= start` (or after `start` when `exclusive`).
    pub fn omap_scan(
        &self,
        key: &ObjectKey,
        start: &[u8],
        exclusive: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut from = key.with_suffix(start);
        if exclusive {
            from.push(0);
        }
        let prefix_len = key.0.len();
        Ok(self
            .kv
            .scan(Cf::Omap, &from, &key.end(), limit)?
            .into_iter()
            .map(|(mut k, v)| (k.split_off(prefix_len), v))
            .collect())
    }

    /// Up to `limit` objects of `pool` whose bit-reversed hash is in `range`, after `after`.
    pub fn list(
        &self,
        pool: PoolId,
        range: RangeInclusive<u32>,
        after: Option<&ObjectKey>,
        limit: usize,
    ) -> Result<Vec<ObjectKey>> {
        self.scan_onodes(pool, range, after, limit)?.into_iter().map(|(k, _)| ObjectKey::from_bytes(k)).collect()
    }

    /// As [`ObjectStore::list`], with each object's metadata, read in the same scan.
    pub fn list_onodes(
        &self,
        pool: PoolId,
        range: RangeInclusive<u32>,
        after: Option<&ObjectKey>,
        limit: usize,
    ) -> Result<Vec<(ObjectKey, Onode)>> {
        let decode = |(k, v): (Vec<u8>, Vec<u8>)| {
            let key = ObjectKey::from_bytes(k)?;
            let onode = Onode::decode(&v).map_err(|e| err::io(format!("onode of {}: {e}", key.describe())))?;
            Ok((key, onode))
        };
        self.scan_onodes(pool, range, after, limit)?.into_iter().map(decode).collect()
    }

    fn scan_onodes(
        &self,
        pool: PoolId,
        range: RangeInclusive<u32>,
        after: Option<&ObjectKey>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let (mut start, end) = hash_range_bounds(pool, &range);
        if let Some(after) = after {
            let mut past = after.0.clone();
            past.push(0);
            start = start.max(past);
        }
        self.kv.scan(Cf::Onode, &start, &end, limit)
    }

    /// A transaction that makes another store's copy of the object identical to this
    /// one: it removes the object there, then writes every key it has here (nothing when
    /// the object does not exist here).
    pub fn copy_object(&self, key: &ObjectKey) -> Result<Transaction> {
        let mut txn = Transaction::new();
        let mut resume = None;
        loop {
            let (part, next) = self.copy_object_part(key, resume.as_ref(), usize::MAX)?;
            txn.extend(part);
            match next {
                Some(next) => resume = Some(next),
                None => return Ok(txn),
            }
        }
    }

    /// The part of [`ObjectStore::copy_object`] that starts at `resume` (`None`: the
    /// start) and stores about `budget` bytes of keys and values (beyond it by one chunk
    /// or omap row at most), and where the next part resumes (`None`: this was the last).
    /// Applied in order, the parts make the same copy as the whole; the first removes the
    /// object and stores its metadata, so the copy is complete only after the last.
    pub fn copy_object_part(
        &self,
        key: &ObjectKey,
        resume: Option<&CopyResume>,
        budget: usize,
    ) -> Result<(Transaction, Option<CopyResume>)> {
        let mut txn = Transaction::new();
        let Some(onode) = self.kv.get(Cf::Onode, &key.0)? else {
            txn.remove_object(key);
            return Ok((txn, None));
        };
        let mut used = 0usize;
        let (mut first_chunk, mut omap_from) = (0, key.0.clone());
        match resume {
            None => {
                txn.remove_object(key);
                used += key.0.len() + onode.len();
                txn.ops.push(BatchOp::Put(Cf::Onode, key.0.clone(), onode.clone()));
            }
            Some(CopyResume::Chunk(index)) => first_chunk = *index,
            Some(CopyResume::Omap(from)) => (first_chunk, omap_from) = (u32::MAX, from.clone()),
        }
        let size = Onode::decode(&onode).map_err(|e| err::io(format!("onode of {}: {e}", key.describe())))?.size;
        let chunk_size = u64::from(self.format.chunk_size.max(1));
        let end_chunk = u32::try_from(size.div_ceil(chunk_size)).unwrap_or(u32::MAX);
        let per_read = u32::try_from(budget as u64 / chunk_size).unwrap_or(u32::MAX).max(1);
        while first_chunk < end_chunk {
            let end = first_chunk.saturating_add(per_read).min(end_chunk);
            for (index, data) in self.chunks(key, first_chunk, end)? {
                if used >= budget {
                    return Ok((txn, Some(CopyResume::Chunk(index))));
                }
                let chunk_key = key.chunk_key(index);
                used += chunk_key.len() + data.len();
                txn.ops.push(BatchOp::Put(Cf::Data, chunk_key, data.to_vec()));
            }
            first_chunk = end;
        }
        loop {
            let rows = self.kv.scan(Cf::Omap, &omap_from, &key.end(), COPY_PAGE)?;
            let done = rows.len() < COPY_PAGE;
            for (k, v) in rows {
                if used >= budget {
                    return Ok((txn, Some(CopyResume::Omap(k))));
                }
                used += k.len() + v.len();
                omap_from = [k.as_slice(), &[0]].concat();
                txn.ops.push(BatchOp::Put(Cf::Omap, k, v));
            }
            if done {
                return Ok((txn, None));
            }
        }
    }

    /// Up to `limit` store metadata entries with `start <= key < end`.
    pub fn meta_scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.kv.scan(Cf::Meta, start, end, limit)
    }

    /// A store metadata value.
    pub fn meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.kv.get(Cf::Meta, key)
    }

    /// Applies a transaction atomically; returns its sequence number for [`ObjectStore::sync`].
    /// Large data runs are written to the data device and synced before the engine batch
    /// that references them.
    pub fn commit(&self, txn: Transaction) -> Result<u64> {
        if txn.ops.is_empty() {
            return Ok(self.committed_seq.fetch_add(1, Ordering::SeqCst) + 1);
        }
        let mut lowered = self.space.lower(self.kv.as_ref(), txn.ops)?;
        if let Err(e) = self.kv.write(std::mem::take(&mut lowered.batch)) {
            self.space.abandoned(&lowered);
            return Err(e);
        }
        let seq = self.committed_seq.fetch_add(1, Ordering::SeqCst) + 1;
        self.space.committed(seq, &lowered);
        Ok(seq)
    }

    /// The sequence number of the latest commit.
    pub fn committed_seq(&self) -> u64 {
        self.committed_seq.load(Ordering::SeqCst)
    }

    /// Makes every earlier commit durable; returns the sequence number now durable.
    pub fn sync(&self) -> Result<u64> {
        let upto = self.committed_seq();
        self.kv.sync()?;
        self.space.release_durable(upto);
        Ok(upto)
    }

    /// The engine's write statistics.
    pub fn stats(&self) -> KvStats {
        self.kv.stats()
    }

    /// The data device's space figures.
    pub fn space(&self) -> SpaceStats {
        self.space.stats()
    }

    /// Checks the data device's books against the objects: every extent record belongs to
    /// an object and lies inside its size, the allocator's used space is what the records
    /// reference, and with `deep` every extent's bytes match their crc32c. Meant for a
    /// store nothing else writes to (a stopped OSD's).
    pub fn fsck(&self, deep: bool) -> Result<FsckReport> {
        let mut report = FsckReport::default();
        let chunk = u64::from(self.format.chunk_size);
        let mut current: Option<(Vec<u8>, Option<Onode>)> = None;
        for_each_extent(self.kv.as_ref(), |object, index, extent| {
            report.extents += 1;
            report.referenced += self.space.allocated_len(&extent);
            let name = || ObjectKey(object.to_vec()).describe();
            if deep && let Err(e) = self.space.read(&[(index, extent)], &name) {
                report.errors.push(e.message);
            }
            if is_stash(object) {
                // A stash has no metadata of its own to check it against.
                report.stashed += 1;
                return Ok(());
            }
            if current.as_ref().is_none_or(|(o, _)| o.as_slice() != object) {
                let key = ObjectKey::from_bytes(object.to_vec())?;
                current = Some((object.to_vec(), self.onode(&key)?));
                report.objects += 1;
            }
            match current.as_ref().and_then(|(_, onode)| onode.as_ref()) {
                None => report.errors.push(format!("extent of chunk {index} of {} which does not exist", name())),
                Some(onode) if u64::from(index) * chunk >= onode.size.max(1) => {
                    report.errors.push(format!("extent of chunk {index} lies past the end of {}", name()))
                }
                Some(_) => {}
            }
            Ok(())
        })?;
        let space = self.space.stats();
        report.allocated = space.device - space.free;
        if report.allocated != report.referenced {
            report.errors.push(format!(
                "the data device has {} bytes allocated but extent records reference {}",
                report.allocated, report.referenced
            ));
        }
        Ok(report)
    }

    /// Flips the first byte of chunk `index` of an object where it is stored on the data
    /// device, so tests can prove a bad checksum is caught; ENOENT if it is not there.
    pub fn corrupt_chunk(&self, key: &ObjectKey, index: u32) -> Result<()> {
        let record = self.kv.get(Cf::Extent, &key.chunk_key(index))?;
        let record = record.ok_or_else(|| err::not_found(format!("chunk {index} is not on the data device")))?;
        self.space.corrupt(&decode_record(&key.chunk_key(index), &record)?)
    }
}
