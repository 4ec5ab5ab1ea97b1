//! Erasure-coded objects at a PG's primary: the logical object an operation sees, put
//! together from the stripes gathered from the shards ([`EcObject`]), and the store
//! transaction for each shard that the operation's staged changes become
//! ([`shard_transactions`]).
//!
//! The logical object is cut into chunks of `k × block` bytes, where a *block* is
//! `lcm(store chunk, stripe_unit)` bytes: logical chunk `i` is a whole number of stripes,
//! and on every shard it is block `i`, a run of whole store chunks. A change to a logical
//! chunk is therefore encoded on its own and replaces the same store chunks on every shard.
//! Every shard's copy also keeps the object's metadata: its xattrs, version and mtime, and
//! its logical size in a reserved xattr ([`SIZE_XATTR`]) that clients never see.

pub mod rollback;

use crate::exec::ExecEnv;
use crate::view::{Committed, ObjectView, Staged};
use bytes::Bytes;
use shoal_erasure::{ErasureCoder, StripeLayout};
use shoal_objclass::ClassState;
use shoal_store::{ObjectKey, ObjectStore, Onode, Transaction};
use shoal_types::erasure::{ErasureProfile, Touched};
use shoal_types::msg::OpReply;
use shoal_types::{Result, Step, Versioned, err};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

/// The reserved xattr that holds an erasure-coded object's logical size on every shard.
pub const SIZE_XATTR: &str = "\u{0}ec.size";

/// How an erasure-coded pool's objects map onto shards and store chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcLayout {
    /// The stripes.
    pub stripes: StripeLayout,
    /// Bytes per store chunk (the same on every OSD, as for replicated writes).
    pub store_chunk: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl EcLayout {
    /// The layout of a pool with `code` on stores of `store_chunk`-byte chunks.
    pub fn new(code: &ErasureProfile, store_chunk: u32) -> EcLayout {
        EcLayout {
            stripes: StripeLayout { k: code.k, m: code.m, unit: code.stripe_unit },
            store_chunk: u64::from(store_chunk),
        }
    }

    /// Shards, `k + m`.
    pub fn shards(&self) -> usize {
        (self.stripes.k + self.stripes.m) as usize
    }

    /// Bytes of one shard that hold one logical chunk.
    pub fn block(&self) -> u64 {
        let unit = u64::from(self.stripes.unit);
        unit / gcd(unit, self.store_chunk) * self.store_chunk
    }

    /// Logical bytes per logical chunk.
    pub fn logical_chunk(&self) -> u64 {
        u64::from(self.stripes.k) * self.block()
    }

    /// Store chunks per block.
    fn store_chunks_per_block(&self) -> u32 {
        (self.block() / self.store_chunk) as u32
    }

    /// Bytes each shard holds for an object of `size` logical bytes.
    pub fn shard_size(&self, size: u64) -> u64 {
        self.stripes.shard_len(size)
    }

    /// Store chunks each shard holds for an object of `size` logical bytes.
    fn shard_chunks(&self, size: u64) -> u32 {
        self.shard_size(size).div_ceil(self.store_chunk) as u32
    }

    /// The shard blocks of one logical chunk's bytes (`data`, at most a logical chunk):
    /// padded to whole stripes and encoded; `k + m` buffers of equal length.
    pub fn encode_chunk(&self, coder: &dyn ErasureCoder, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        if data.len() as u64 > self.logical_chunk() {
            return Err(err::invalid(format!("{} bytes do not fit a logical chunk", data.len())));
        }
        self.stripes.encode(coder, data)
    }
}

/// The logical metadata of a shard's copy: the reserved size moved out of the xattrs.
pub fn logical_onode(mut shard: Onode) -> Result<Onode> {
    let size = shard.xattrs.remove(SIZE_XATTR).ok_or_else(|| err::io("a shard's copy has no logical size"))?;
    let bytes: [u8; 8] = size.as_ref().try_into().map_err(|_| err::io("a shard's logical size is malformed"))?;
    shard.size = u64::from_le_bytes(bytes);
    Ok(shard)
}

/// The metadata of every shard's copy of an object with `logical` metadata.
pub fn shard_onode(logical: &Onode, layout: &EcLayout) -> Onode {
    let mut shard = logical.clone();
    shard.size = layout.shard_size(logical.size);
    shard.xattrs.insert(SIZE_XATTR.to_owned(), Bytes::copy_from_slice(&logical.size.to_le_bytes()));
    shard
}

/// A shard's answer to an `EcRead`: its copy's encoded metadata (`None`: no copy) and the
/// store chunks asked for that hold data (none lies past the copy's size).
pub type ShardRead = (Option<Bytes>, Vec<(u32, Bytes)>);

/// An erasure-coded object's committed state as the primary has assembled it: the
/// metadata of its own shard's copy and the logical chunks gathered so far. Asked for a
/// chunk it does not have, it fails and remembers which ([`EcObject::needed`]): the
/// primary gathers those from the shards and runs the operation again.
pub struct EcObject {
    layout: EcLayout,
    onode: Option<Onode>,
    gathered: BTreeMap<u32, Bytes>,
    needed: RefCell<BTreeSet<u32>>,
}

impl EcObject {
    /// An object with logical metadata `onode` (`None`: absent) and the logical chunks
    /// gathered so far.
    pub fn new(layout: EcLayout, onode: Option<Onode>, gathered: BTreeMap<u32, Bytes>) -> EcObject {
        EcObject { layout, onode, gathered, needed: RefCell::new(BTreeSet::new()) }
    }

    /// The logical chunks an operation asked for and that were not gathered.
    pub fn needed(&self) -> BTreeSet<u32> {
        self.needed.borrow().clone()
    }
}

fn no_omap() -> shoal_types::RadosError {
    err::not_supported("erasure-coded pools keep no omap")
}

impl Committed for EcObject {
    fn chunk_size(&self) -> u64 {
        self.layout.logical_chunk()
    }

    fn onode(&self) -> Result<Option<Onode>> {
        Ok(self.onode.clone())
    }

    fn chunks(&self, first: u32, end: u32) -> Result<Vec<(u32, Bytes)>> {
        let size = self.onode.as_ref().map_or(0, |o| o.size);
        let stored_end = size.div_ceil(self.layout.logical_chunk()).min(u64::from(end)) as u32;
        let mut out = Vec::new();
        let mut needed = self.needed.borrow_mut();
        for index in first..stored_end {
            match self.gathered.get(&index) {
                Some(data) => out.push((index, data.clone())),
                None => {
                    needed.insert(index);
                }
            }
        }
        if needed.is_empty() { Ok(out) } else { Err(err::again("the operation needs stripes not gathered yet")) }
    }

    fn omap_get(&self, _key: &[u8]) -> Result<Option<Vec<u8>>> {
        Err(no_omap())
    }

    fn omap_scan(&self, _from: &[u8], _exclusive: bool, _max: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        Err(no_omap())
    }
}

/// What running an operation on an erasure-coded object at its primary came to.
pub enum EcOutcome {
    /// It needs these logical chunks: gather them from the shards and run it again.
    Gather(BTreeSet<u32>),
    /// It changed nothing: its reply.
    Read(OpReply),
    /// It wrote: its reply, each shard's store transaction (in shard order), what of each
    /// shard's copy it replaces, and the class states to publish once it commits.
    Write {
        /// The reply.
        reply: OpReply,
        /// One transaction per shard.
        txns: Vec<Transaction>,
        /// What the write replaces.
        touched: Touched,
        /// Class states staged by the operation.
        states: BTreeMap<String, ClassState>,
        /// What it does to the PG's object and byte counts.
        usage: crate::usage::UsageDelta,
    },
}

/// Runs `steps` on `object` (of the pool's `layout` and `coder`) as version `version`,
/// without committing: the reply, the chunks still to gather, or each shard's write.
/// Without `allow_overwrites`, a write may only add bytes (appends, whole rewrites,
/// removes), as in Ceph; rewriting existing bytes is EOPNOTSUPP.
pub fn execute(
    object: &EcObject,
    key: &ObjectKey,
    steps: &[Step],
    env: &ExecEnv<'_>,
    version: u64,
    coder: &dyn ErasureCoder,
    allow_overwrites: bool,
) -> Result<EcOutcome> {
    let mut view = ObjectView::load(object, env.limits, key.clone(), |_| BTreeMap::new())?;
    let outputs = match crate::exec::execute(&mut view, steps, env) {
        // A run that asked for chunks not gathered is retried once they are.
        Err(_) if !object.needed().is_empty() => return Ok(EcOutcome::Gather(object.needed())),
        other => other?,
    };
    if view.changes() == 0 {
        return Ok(EcOutcome::Read(OpReply { version: view.base_version(), outputs }));
    }
    let usage = view.usage_delta();
    let staged = view.into_staged(version, env.now_ns);
    if !allow_overwrites && rewrites_existing_bytes(&staged, object) {
        return Err(err::not_supported(
            "this erasure-coded pool only takes appends and whole rewrites (create it with --allow-ec-overwrites)",
        ));
    }
    let txns = shard_transactions(&staged, &object.layout, coder, key)?;
    let touched = touched(&staged, &object.layout);
    Ok(EcOutcome::Write { reply: OpReply { version, outputs }, txns, touched, states: staged.states, usage })
}

/// Whether `staged` changes bytes the object already had (rather than only adding bytes
/// past its end, rewriting it whole or removing it).
fn rewrites_existing_bytes(staged: &Staged, object: &EcObject) -> bool {
    let old_size = staged.base.as_ref().map_or(0, |b| b.size);
    if staged.wiped || staged.chunk_cut == Some(0) || old_size == 0 {
        return false;
    }
    if staged.current.as_ref().is_some_and(|c| c.size < old_size) {
        return true;
    }
    let chunk = object.layout.logical_chunk();
    staged.chunks.iter().any(|(&index, data)| {
        let start = u64::from(index) * chunk;
        let kept = old_size.saturating_sub(start).min(chunk) as usize;
        let old = object.gathered.get(&index).map_or(&[][..], |d| &d[..kept.min(d.len())]);
        kept > 0 && data.as_deref().is_none_or(|new| new.get(..kept) != Some(old))
    })
}

/// The store transaction of each shard (in shard order) that applies `staged` to the
/// shards' copies of `key`.
pub fn shard_transactions(
    staged: &Staged,
    layout: &EcLayout,
    coder: &dyn ErasureCoder,
    key: &ObjectKey,
) -> Result<Vec<Transaction>> {
    if staged.omap_changed {
        return Err(no_omap());
    }
    let mut txns: Vec<Transaction> = (0..layout.shards()).map(|_| Transaction::new()).collect();
    let per_block = layout.store_chunks_per_block();
    let base_chunks = staged.base.as_ref().map_or(0, |b| layout.shard_chunks(b.size));
    if staged.wiped && staged.base.is_some() {
        for txn in &mut txns {
            txn.remove_object_sized(key, base_chunks, false);
        }
    }
    let Some(current) = &staged.current else { return Ok(txns) };
    let onode = shard_onode(current, layout);
    for txn in &mut txns {
        txn.put_onode(key, &onode);
        if let (Some(cut), false) = (staged.chunk_cut, staged.wiped) {
            txn.delete_chunks_between(key, cut * per_block, base_chunks);
        }
    }
    for (&index, chunk) in &staged.chunks {
        let first = index * per_block;
        let blocks = match chunk {
            Some(data) => layout.encode_chunk(coder, data)?,
            // A hole: zeros, whose parity is zeros too.
            None => vec![Vec::new(); layout.shards()],
        };
        for (txn, block) in txns.iter_mut().zip(blocks) {
            let mut pieces = block.chunks(layout.store_chunk as usize);
            for store_chunk in first..first + per_block {
                match pieces.next() {
                    Some(piece) => txn.put_chunk(key, store_chunk, piece.to_vec()),
                    None if !staged.wiped && store_chunk < base_chunks => txn.delete_chunk(key, store_chunk),
                    None => {}
                }
            }
        }
    }
    Ok(txns)
}

/// The part of every shard's copy that `staged` replaces: all of it when it removes the
/// object or rewrites it from its first byte (the metadata is always written whole).
pub fn touched(staged: &Staged, layout: &EcLayout) -> Touched {
    if staged.wiped || staged.current.is_none() || staged.chunk_cut == Some(0) {
        return Touched::Whole;
    }
    let per_block = layout.store_chunks_per_block();
    let base_chunks = staged.base.as_ref().map_or(0, |b| layout.shard_chunks(b.size));
    let mut ranges: Vec<(u32, u32)> = staged.chunks.keys().map(|i| (i * per_block, (i + 1) * per_block)).collect();
    if let Some(cut) = staged.chunk_cut.map(|c| c * per_block).filter(|c| *c < base_chunks) {
        ranges.push((cut, base_chunks));
    }
    ranges.sort_unstable();
    Touched::Chunks(ranges)
}

/// A shard's copy of `key` as a gather reads it: its metadata (encoded; `None`: absent)
/// and the store chunks of `range` within its size.
pub fn read_shard(store: &ObjectStore, key: &ObjectKey, range: std::ops::Range<u32>) -> Result<ShardRead> {
    let Some(onode) = store.onode(key)? else { return Ok((None, Vec::new())) };
    let end = range.end.min(rollback::chunk_count(store, onode.size));
    Ok((Some(Bytes::from(onode.encode())), store.chunks(key, range.start, end)?))
}

/// The shards to read logical chunks from: `k` of those `available`, data shards first (no
/// decoding when they are all there), parity in their place; `None` with fewer than `k`.
pub fn shards_to_read(layout: &EcLayout, available: &[bool]) -> Option<Vec<usize>> {
    let k = layout.stripes.k as usize;
    let chosen: Vec<usize> = (0..layout.shards()).filter(|s| available.get(*s) == Some(&true)).take(k).collect();
    (chosen.len() == k).then_some(chosen)
}

/// The store chunks of every shard that hold logical chunks `first..end`.
pub fn store_chunks(layout: &EcLayout, first: u32, end: u32) -> std::ops::Range<u32> {
    let per_block = layout.store_chunks_per_block();
    first.saturating_mul(per_block)..end.saturating_mul(per_block)
}

/// One shard's bytes for logical chunks `first..end` from the store chunks it returned
/// (holes, and a short last chunk, read as zeros). A chunk outside the range, or longer
/// than a store chunk, is refused: the bytes came from another OSD.
pub fn shard_block(layout: &EcLayout, first: u32, end: u32, chunks: &[(u32, Bytes)]) -> Result<Vec<u8>> {
    let range = store_chunks(layout, first, end);
    let chunk = layout.store_chunk as usize;
    let mut block = Vec::new();
    for (index, data) in chunks {
        if !range.contains(index) || data.len() > chunk {
            let len = data.len();
            return Err(err::io(format!("a shard returned store chunk {index} of {len} bytes for chunks {range:?}")));
        }
        let at = (index - range.start) as usize * chunk;
        if block.len() < at + data.len() {
            block.resize(at + data.len(), 0);
        }
        block[at..at + data.len()].copy_from_slice(data);
    }
    Ok(block)
}

/// The store transaction that gives `shard`'s copy of `key` the logical `chunks` of an
/// object with logical metadata `onode` (`None`: the object does not exist): a recovery
/// push. Chunks from the first on replace the copy whole; later ones continue it.
pub fn rebuild_shard(
    layout: &EcLayout,
    coder: &dyn ErasureCoder,
    key: &ObjectKey,
    shard: usize,
    onode: Option<&Onode>,
    chunks: &BTreeMap<u32, Bytes>,
) -> Result<Transaction> {
    let mut txn = Transaction::new();
    if chunks.first_key_value().is_none_or(|(index, _)| *index == 0) {
        txn.remove_object(key);
    }
    let Some(onode) = onode else { return Ok(txn) };
    txn.put_onode(key, &shard_onode(onode, layout));
    let per_block = layout.store_chunks_per_block();
    for (&index, data) in chunks {
        let mut blocks = layout.encode_chunk(coder, data)?;
        if shard >= blocks.len() {
            return Err(err::invalid(format!("shard {shard} of a {}-shard code", blocks.len())));
        }
        let block = blocks.swap_remove(shard);
        for (n, piece) in block.chunks(layout.store_chunk as usize).enumerate() {
            txn.put_chunk(key, index * per_block + n as u32, piece.to_vec());
        }
    }
    Ok(txn)
}

/// The blocks read, padded to one length of whole stripe units (shards keep short final
/// chunks).
fn padded(layout: &EcLayout, blocks: Vec<Option<Vec<u8>>>) -> Vec<Option<Vec<u8>>> {
    let unit = layout.stripes.unit as usize;
    let shard_len = blocks.iter().flatten().map(Vec::len).max().unwrap_or(0).div_ceil(unit) * unit;
    blocks
        .into_iter()
        .map(|b| {
            b.map(|mut b| {
                b.resize(shard_len, 0);
                b
            })
        })
        .collect()
}

/// Checks every shard's block of the same logical chunks against the parity
/// ([`shoal_erasure::check_parity`]); every shard's block must have been read.
pub fn check_parity(
    layout: &EcLayout,
    coder: &dyn ErasureCoder,
    blocks: Vec<Option<Vec<u8>>>,
) -> Result<shoal_erasure::Parity> {
    let blocks: Option<Vec<Vec<u8>>> = padded(layout, blocks).into_iter().collect();
    let blocks = blocks.ok_or_else(|| err::again("a parity check needs every shard"))?;
    shoal_erasure::check_parity(coder, &blocks)
}

/// The logical chunks `first..end` of an object of logical `size` from its shards' blocks
/// (`blocks[shard]`: that shard's bytes for those chunks, `None` if not read), rebuilding
/// missing data shards from any `k`.
pub fn assemble(
    layout: &EcLayout,
    coder: &dyn ErasureCoder,
    size: u64,
    first: u32,
    blocks: Vec<Option<Vec<u8>>>,
) -> Result<BTreeMap<u32, Bytes>> {
    let mut slots = padded(layout, blocks);
    let data = layout.stripes.decode(coder, &mut slots)?;
    let chunk = layout.logical_chunk() as usize;
    let start = u64::from(first) * layout.logical_chunk();
    let end = size.min(start + data.len() as u64);
    let mut out = BTreeMap::new();
    for (n, piece) in data[..end.saturating_sub(start) as usize].chunks(chunk).enumerate() {
        out.insert(first + n as u32, Bytes::copy_from_slice(piece));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::Limits;
    use crate::view::ObjectView;
    use shoal_objclass::ObjectAccess;
    use shoal_store::{ObjectStore, StoreFormat, StoreOptions};
    use shoal_types::{ObjectName, PoolId};

    const CHUNK: u32 = 1024;

    fn layout(k: u32, m: u32, unit: u32) -> EcLayout {
        let code = ErasureProfile { k, m, stripe_unit: unit, ..ErasureProfile::default() };
        EcLayout::new(&code, CHUNK)
    }

    #[test]
    fn operations_gather_what_they_need_and_pools_without_overwrites_take_appends_only() {
        let shards = Shards::new(layout(4, 2, 512));
        shards.apply(1, |v| v.write_full(&[1u8; 9000]).unwrap());
        let limits = Limits::default();
        let classes = shoal_objclass::ClassRegistry::builtin();
        let env = ExecEnv { classes: &classes, limits: &limits, caller: shoal_types::ClientId(1), now_ns: 5 };
        let onode = shards.stores[0].onode(&shards.key).unwrap().map(|o| logical_onode(o).unwrap());
        let all = shards.read(&[]).unwrap();
        let chunk = shards.layout.logical_chunk() as usize;
        let gathered: BTreeMap<u32, Bytes> =
            all.chunks(chunk).enumerate().map(|(i, c)| (i as u32, Bytes::copy_from_slice(c))).collect();
        let run = |steps: &[Step], gathered: &BTreeMap<u32, Bytes>, overwrites: bool| {
            let object = EcObject::new(shards.layout, onode.clone(), gathered.clone());
            execute(&object, &shards.key, steps, &env, 2, shards.coder.as_ref(), overwrites)
        };
        let read = [Step::Read { offset: 5000, length: 10 }];
        assert!(
            matches!(run(&read, &BTreeMap::new(), true).unwrap(), EcOutcome::Gather(c) if c == BTreeSet::from([1]))
        );
        match run(&read, &gathered, true).unwrap() {
            EcOutcome::Read(reply) => {
                assert_eq!(reply.outputs, vec![shoal_types::StepOutput::Data(Bytes::from(vec![1u8; 10]))])
            }
            _ => panic!("a read writes nothing"),
        }
        let overwrite = [Step::Write { offset: 100, data: Bytes::from_static(b"x") }];
        let refused = run(&overwrite, &gathered, false).err().unwrap();
        assert_eq!(refused.errno, shoal_types::Errno::NotSupported);
        let append = [Step::Append { data: Bytes::from(vec![2u8; 3000]) }];
        let EcOutcome::Write { txns, touched: what, reply, .. } = run(&append, &gathered, false).unwrap() else {
            panic!("an append writes")
        };
        assert_eq!((reply.version, txns.len()), (2, 6));
        // Bytes 9000..12000 all fall in logical chunk 2 (8192..12288): store chunk 2 of each shard.
        assert_eq!(what, Touched::Chunks(vec![(2, 3)]));
        for (store, txn) in shards.stores.iter().zip(txns) {
            store.commit(txn).unwrap();
        }
        let mut expected = vec![1u8; 9000];
        expected.extend(vec![2u8; 3000]);
        assert_eq!(shards.read(&[0, 3]).unwrap(), expected);
        let whole = [Step::WriteFull { data: Bytes::from_static(b"new") }];
        assert!(matches!(run(&whole, &BTreeMap::new(), false).unwrap(), EcOutcome::Write { .. }));
        let omap = [Step::OmapSet { entries: BTreeMap::from([(Bytes::from_static(b"k"), Bytes::from_static(b"v"))]) }];
        assert_eq!(run(&omap, &gathered, true).err().unwrap().errno, shoal_types::Errno::NotSupported);
    }

    #[test]
    fn reads_take_data_shards_first_and_any_k_otherwise() {
        let l = layout(4, 2, 512);
        assert_eq!(shards_to_read(&l, &[true; 6]), Some(vec![0, 1, 2, 3]));
        assert_eq!(shards_to_read(&l, &[false, true, true, false, true, true]), Some(vec![1, 2, 4, 5]));
        assert_eq!(shards_to_read(&l, &[false, true, true, false, true, false]), None);
        assert_eq!(store_chunks(&l, 2, 3), 2..3, "a 512-byte unit: one 1024-byte store chunk per block");
        assert_eq!(store_chunks(&layout(4, 2, 4096), 2, 3), 8..12);
        let block = shard_block(&l, 2, 5, &[(2, Bytes::from_static(b"ab")), (4, Bytes::from_static(b"c"))]);
        let mut expected = vec![0u8; 2049];
        expected[..2].copy_from_slice(b"ab");
        expected[2048] = b'c';
        assert_eq!(block.unwrap(), expected, "a hole at chunk 3 reads as zeros");
        assert!(shard_block(&l, 2, 5, &[(1, Bytes::from_static(b"x"))]).is_err(), "a chunk before the range");
        assert!(shard_block(&l, 2, 5, &[(2, Bytes::from(vec![0u8; 1025]))]).is_err(), "a chunk too long");
    }

    #[test]
    fn logical_chunks_are_whole_stripes_and_whole_store_chunks() {
        assert_eq!((layout(4, 2, 512).block(), layout(4, 2, 512).logical_chunk()), (1024, 4096));
        assert_eq!((layout(4, 2, 4096).block(), layout(4, 2, 4096).logical_chunk()), (4096, 16384));
        assert_eq!(layout(2, 1, 1536).block(), 3072, "lcm of 1024 and 1536");
    }

    /// `k + m` shard stores, each OSD's copy of the PG's shard.
    struct Shards {
        layout: EcLayout,
        coder: Box<dyn ErasureCoder>,
        stores: Vec<ObjectStore>,
        key: ObjectKey,
    }

    impl Shards {
        fn new(layout: EcLayout) -> Shards {
            let format = StoreFormat { chunk_size: CHUNK };
            let stores = (0..layout.shards())
                .map(|_| ObjectStore::in_memory(format, StoreOptions::default()).unwrap())
                .collect();
            let coder = shoal_erasure::coder(layout.stripes.k, layout.stripes.m).unwrap();
            Shards { layout, coder, stores, key: ObjectKey::new(PoolId(1), &ObjectName::new("", "o")).unwrap() }
        }

        /// The logical object as every shard but `lost` tells it (`None`: absent).
        fn read(&self, lost: &[usize]) -> Option<Vec<u8>> {
            let onode = self.stores[0].onode(&self.key).unwrap().map(|o| logical_onode(o).unwrap())?;
            let blocks = (0..self.layout.shards())
                .map(|s| {
                    (!lost.contains(&s)).then(|| {
                        let (_, chunks) = read_shard(&self.stores[s], &self.key, 0..u32::MAX).unwrap();
                        shard_block(&self.layout, 0, u32::MAX, &chunks).unwrap()
                    })
                })
                .collect();
            let chunks = assemble(&self.layout, self.coder.as_ref(), onode.size, 0, blocks).unwrap();
            let mut data: Vec<u8> = chunks.into_values().flat_map(|c| c.to_vec()).collect();
            data.resize(onode.size as usize, 0);
            Some(data)
        }

        /// Runs `change` over the object gathered from all shards and applies it.
        fn apply(&self, version: u64, change: impl FnOnce(&mut ObjectView<'_>)) {
            self.apply_on(&(0..self.layout.shards()).collect::<Vec<_>>(), version, change);
        }

        /// Runs `change` over the object gathered from all shards and applies it on the
        /// shards in `on` only; returns what each shard kept to undo it (by shard).
        fn apply_on(
            &self,
            on: &[usize],
            version: u64,
            change: impl FnOnce(&mut ObjectView<'_>),
        ) -> BTreeMap<usize, rollback::Rollback> {
            let onode = self.stores[0].onode(&self.key).unwrap().map(|o| logical_onode(o).unwrap());
            let data = self.read(&[]).unwrap_or_default();
            let chunk = self.layout.logical_chunk() as usize;
            let gathered = data.chunks(chunk).enumerate().map(|(i, c)| (i as u32, Bytes::copy_from_slice(c))).collect();
            let object = EcObject::new(self.layout, onode, gathered);
            let limits = Limits::default();
            let mut view = ObjectView::load(&object, &limits, self.key.clone(), |_| BTreeMap::new()).unwrap();
            change(&mut view);
            let staged = view.into_staged(version, 0);
            let touched = touched(&staged, &self.layout);
            let txns = shard_transactions(&staged, &self.layout, self.coder.as_ref(), &self.key).unwrap();
            let object = ObjectName::new("", "o");
            let mut kept = BTreeMap::new();
            for (s, txn) in txns.into_iter().enumerate().filter(|(s, _)| on.contains(s)) {
                let mut kept_txn = Transaction::new();
                kept.insert(
                    s,
                    rollback::keep(&self.stores[s], &self.key, &object, &touched, version, &mut kept_txn).unwrap(),
                );
                kept_txn.extend(txn);
                self.stores[s].commit(kept_txn).unwrap();
            }
            kept
        }

        /// Undoes a write on the shards that kept what it replaced.
        fn undo(&self, kept: &BTreeMap<usize, rollback::Rollback>) {
            for (&s, rollback) in kept {
                let mut txn = Transaction::new();
                rollback::undo(&self.stores[s], &self.key, rollback, &mut txn).unwrap();
                self.stores[s].commit(txn).unwrap();
            }
        }
    }

    #[test]
    fn writes_that_reached_some_shards_are_undone_from_what_they_kept() {
        let shards = Shards::new(layout(4, 2, 512));
        let all: Vec<usize> = (0..6).collect();
        let created = shards.apply_on(&all, 1, |v| v.write_full(&[1u8; 9000]).unwrap());
        let before = shards.read(&[]).unwrap();
        // Each kind of write reaches 3 of the 6 shards, fewer than k: peering undoes it.
        type Change<'c> = &'c dyn Fn(&mut ObjectView<'_>);
        let writes: [(u64, Change<'_>); 5] = [
            (2, &|v| v.write(5000, &[2u8; 3000]).unwrap()),
            (3, &|v| v.append(&[3u8; 5000]).unwrap()),
            (4, &|v| v.truncate(100).unwrap()),
            (5, &|v| v.write_full(b"short").unwrap()),
            (6, &|v| v.remove().unwrap()),
        ];
        for (n, (version, write)) in writes.iter().enumerate() {
            let on: Vec<usize> = all.iter().copied().filter(|s| (s + n) % 2 == 0).collect();
            let kept = shards.apply_on(&on, *version, write);
            shards.undo(&kept);
            for lost in [vec![], vec![0, 5], vec![1, 2]] {
                assert_eq!(shards.read(&lost).unwrap(), before, "write {version}, without shards {lost:?}");
            }
        }
        // Writes every shard holds are undone newest first.
        let patch = shards.apply_on(&all, 7, |v| v.write(100, &[7u8; 100]).unwrap());
        let grown = shards.apply_on(&all, 8, |v| v.append(&[8u8; 20_000]).unwrap());
        shards.undo(&grown);
        shards.undo(&patch);
        assert_eq!(shards.read(&[2, 3]).unwrap(), before);
        shards.undo(&created);
        assert!(shards.read(&[]).is_none(), "undoing the create leaves no object");
        assert!(shards.stores.iter().all(|s| s.chunks(&shards.key, 0, u32::MAX).unwrap().is_empty()));
    }

    #[test]
    fn staged_changes_become_shard_writes_that_any_k_shards_read_back() {
        let shards = Shards::new(layout(4, 2, 512));
        let mut model: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let first = model.clone();
        shards.apply(1, |v| v.write_full(&first).unwrap());
        let patch = vec![7u8; 3000];
        shards.apply(2, |v| v.write(5000, &patch).unwrap());
        model[5000..8000].copy_from_slice(&patch);
        shards.apply(3, |v| v.append(b"tail").unwrap());
        model.extend_from_slice(b"tail");
        shards.apply(4, |v| v.truncate(6100).unwrap());
        model.truncate(6100);
        shards.apply(5, |v| v.write(9000, b"far").unwrap());
        model.resize(9000, 0);
        model.extend_from_slice(b"far");
        shards.apply(6, |v| v.zero(0, 4096).unwrap());
        model[..4096].fill(0);
        shards.apply(7, |v| v.set_xattr("user", Bytes::from_static(b"x")).unwrap());
        for lost in [vec![], vec![0, 1], vec![2, 5], vec![4, 5], vec![3]] {
            assert_eq!(shards.read(&lost).unwrap(), model, "read without shards {lost:?}");
        }
        let meta = logical_onode(shards.stores[3].onode(&shards.key).unwrap().unwrap()).unwrap();
        assert_eq!((meta.size, meta.version, meta.xattrs.len()), (9003, 7, 1));
        assert!(!meta.xattrs.contains_key(SIZE_XATTR), "the reserved size is not a client's xattr");
        shards.apply(8, |v| v.remove().unwrap());
        assert!(shards.stores.iter().all(|s| s.onode(&shards.key).unwrap().is_none()));
        assert!(shards.stores.iter().all(|s| s.chunks(&shards.key, 0, u32::MAX).unwrap().is_empty()));
    }

    #[test]
    fn a_partial_write_asks_for_the_chunks_it_changes_and_omap_is_refused() {
        let l = layout(4, 2, 512);
        let onode = Onode { size: 20_000, ..Onode::default() };
        let object = EcObject::new(l, Some(onode), BTreeMap::new());
        let limits = Limits::default();
        let key = ObjectKey::new(PoolId(1), &ObjectName::new("", "o")).unwrap();
        let mut view = ObjectView::load(&object, &limits, key.clone(), |_| BTreeMap::new()).unwrap();
        assert!(view.write(5000, b"abc").is_err());
        assert_eq!(object.needed(), BTreeSet::from([1]), "bytes 4096..8192 are logical chunk 1");
        let mut view = ObjectView::load(&object, &limits, key.clone(), |_| BTreeMap::new()).unwrap();
        view.write_full(b"new").unwrap();
        assert!(view.omap_get(b"k").unwrap_err().errno == shoal_types::Errno::NotSupported);
        let mut view = ObjectView::load(&object, &limits, key.clone(), |_| BTreeMap::new()).unwrap();
        view.omap_set(vec![(Bytes::from_static(b"k"), Bytes::from_static(b"v"))]).unwrap();
        let staged = view.into_staged(2, 0);
        let coder = shoal_erasure::coder(4, 2).unwrap();
        let refused = shard_transactions(&staged, &l, coder.as_ref(), &key).unwrap_err();
        assert_eq!(refused.errno, shoal_types::Errno::NotSupported);
    }
}
