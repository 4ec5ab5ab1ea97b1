//! One suite every [`KvEngine`] must pass, run by each engine's own tests.

use crate::device::{BlockDevice, MemDevice};
use crate::kv::{BatchOp, Cf, KvEngine};
use crate::object::{CopyResume, ObjectKey, ObjectStore, Onode, StoreFormat, StoreOptions, Transaction};
use shoal_types::{ObjectName, PoolId, Versioned};
use std::sync::Arc;

/// Runs every check against fresh engines made by `make`; panics on the first failure.
pub fn run_all(make: &dyn Fn() -> Arc<dyn KvEngine>) {
    batch_order_and_ranges(make());
    scan_limits_and_bounds(make());
    objects_do_not_bleed_into_neighbours(make());
    listing_follows_pg_ranges(make());
    delete_pool_removes_only_that_pool(make());
    format_is_fixed_at_creation(make());
    large_writes_live_on_the_device(make());
    stashes_move_chunks_without_copying_them(make());
    paged_copies_make_the_whole_copy(make(), make());
}

/// A store on `kv` with a fresh in-memory data device.
fn open(kv: Arc<dyn KvEngine>, format: StoreFormat) -> ObjectStore {
    ObjectStore::open(kv, Arc::new(MemDevice::new()), format, StoreOptions::default()).unwrap()
}

fn batch_order_and_ranges(kv: Arc<dyn KvEngine>) {
    kv.write(vec![
        BatchOp::Put(Cf::Meta, b"a".to_vec(), b"1".to_vec()),
        BatchOp::Put(Cf::Meta, b"b".to_vec(), b"2".to_vec()),
        BatchOp::Put(Cf::Meta, b"c".to_vec(), b"3".to_vec()),
        BatchOp::Put(Cf::Data, b"b".to_vec(), b"other cf".to_vec()),
        BatchOp::Put(Cf::Meta, b"a".to_vec(), b"1'".to_vec()),
        BatchOp::DeleteRange(Cf::Meta, b"b".to_vec(), b"c".to_vec()),
    ])
    .unwrap();
    assert_eq!(kv.get(Cf::Meta, b"a").unwrap(), Some(b"1'".to_vec()), "a later put wins");
    assert_eq!(kv.get(Cf::Meta, b"b").unwrap(), None, "range delete is half-open");
    assert_eq!(kv.get(Cf::Meta, b"c").unwrap(), Some(b"3".to_vec()), "range end is kept");
    assert_eq!(kv.get(Cf::Data, b"b").unwrap(), Some(b"other cf".to_vec()), "column families are separate");
    kv.write(vec![BatchOp::Delete(Cf::Meta, b"c".to_vec()), BatchOp::Put(Cf::Meta, b"c".to_vec(), b"4".to_vec())])
        .unwrap();
    assert_eq!(kv.get(Cf::Meta, b"c").unwrap(), Some(b"4".to_vec()));
    kv.sync().unwrap();
}

fn scan_limits_and_bounds(kv: Arc<dyn KvEngine>) {
    let batch = (0u8..10).map(|i| BatchOp::Put(Cf::Omap, vec![b'k', i], vec![i])).collect();
    kv.write(batch).unwrap();
    let rows = kv.scan(Cf::Omap, &[b'k', 2], &[b'k', 7], 100).unwrap();
    assert_eq!(rows.iter().map(|(_, v)| v[0]).collect::<Vec<_>>(), vec![2, 3, 4, 5, 6]);
    assert_eq!(kv.scan(Cf::Omap, b"k", b"l", 3).unwrap().len(), 3);
    assert!(kv.scan(Cf::Omap, &[b'k', 5], &[b'k', 5], 10).unwrap().is_empty());
}

fn objects_do_not_bleed_into_neighbours(kv: Arc<dyn KvEngine>) {
    let store = open(kv, StoreFormat { chunk_size: 8 });
    let pool = PoolId(1);
    let a = ObjectKey::new(pool, &ObjectName::new("", "a")).unwrap();
    let ab = ObjectKey::new(pool, &ObjectName::new("", "ab")).unwrap();
    let mut t = Transaction::new();
    for key in [&a, &ab] {
        t.put_onode(key, &Onode { size: 16, ..Onode::default() });
        t.put_chunk(key, 0, vec![1; 8]);
        t.put_chunk(key, 1, vec![2; 8]);
        t.omap_put(key, b"k1", b"v1");
        t.omap_put(key, b"k2", b"v2");
    }
    store.commit(t).unwrap();
    let mut t = Transaction::new();
    t.remove_object(&a);
    store.commit(t).unwrap();
    assert_eq!(store.onode(&a).unwrap(), None);
    assert!(store.chunks(&a, 0, 10).unwrap().is_empty());
    assert!(store.omap_scan(&a, b"", false, 10).unwrap().is_empty());
    assert_eq!(store.chunks(&ab, 0, 10).unwrap().len(), 2);
    let omap = store.omap_scan(&ab, b"k1", true, 10).unwrap();
    assert_eq!(omap, vec![(b"k2".to_vec(), b"v2".to_vec())], "exclusive start skips k1");
    assert_eq!(store.onode(&ab).unwrap().map(|o| o.size), Some(16));
    let mut t = Transaction::new();
    t.delete_chunks_from(&ab, 1);
    t.omap_delete_range(&ab, b"k2", b"k3");
    store.commit(t).unwrap();
    assert_eq!(store.chunks(&ab, 0, 10).unwrap(), vec![(0, vec![1; 8].into())]);
    assert_eq!(store.omap_get(&ab, b"k1").unwrap(), Some(b"v1".to_vec()));
    assert_eq!(store.omap_get(&ab, b"k2").unwrap(), None);
    let seq = store.committed_seq();
    assert!(store.sync().unwrap() >= seq, "sync covers every earlier commit");
}

fn listing_follows_pg_ranges(kv: Arc<dyn KvEngine>) {
    let store = open(kv, StoreFormat::default());
    let pool = shoal_types::Pool {
        id: PoolId(3),
        name: "p".into(),
        pg_num: 6,
        size: 1,
        min_size: 1,
        erasure: None,
        crush_rule: shoal_types::crush::DEFAULT_RULE.into(),
    };
    let mut t = Transaction::new();
    let names: Vec<ObjectName> =
        (0..200).map(|i| ObjectName::new(if i % 3 == 0 { "ns" } else { "" }, format!("obj{i}"))).collect();
    for name in &names {
        t.put_onode(&ObjectKey::new(pool.id, name).unwrap(), &Onode::default());
    }
    store.commit(t).unwrap();
    let mut seen = Vec::new();
    for seed in 0..pool.pg_num {
        for range in shoal_placement::pg_reversed_hash_ranges(seed, pool.pg_num) {
            let mut after = None;
            loop {
                let page = store.list(pool.id, range.clone(), after.as_ref(), 7).unwrap();
                for key in &page {
                    let (p, name) = key.decode().unwrap();
                    assert_eq!(p, pool.id);
                    assert_eq!(shoal_placement::pg_of(&pool, &name).seed, seed, "{name} listed in the wrong PG");
                    seen.push(name);
                }
                match page.last() {
                    Some(last) if page.len() == 7 => after = Some(last.clone()),
                    _ => break,
                }
            }
        }
    }
    seen.sort();
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(seen, expected, "every object listed exactly once");
}

fn delete_pool_removes_only_that_pool(kv: Arc<dyn KvEngine>) {
    let store = open(kv, StoreFormat::default());
    let keys: Vec<ObjectKey> =
        [1u64, 2, 3].iter().map(|&p| ObjectKey::new(PoolId(p), &ObjectName::new("", "x")).unwrap()).collect();
    let mut t = Transaction::new();
    for key in &keys {
        t.put_onode(key, &Onode::default());
        t.omap_put(key, b"k", b"v");
    }
    store.commit(t).unwrap();
    let pg_key = |pool| crate::pg_meta_key(shoal_types::PgId { pool: PoolId(pool), seed: 0 });
    for pool in [1, 2, 3] {
        let mut t = Transaction::new();
        t.put_meta(&pg_key(pool), vec![1]);
        store.commit(t).unwrap();
    }
    let mut t = Transaction::new();
    t.delete_pool(PoolId(2));
    store.commit(t).unwrap();
    assert!(store.meta(&pg_key(1)).unwrap().is_some());
    assert!(store.meta(&pg_key(2)).unwrap().is_none(), "PG state goes with the pool");
    assert!(store.meta(&pg_key(3)).unwrap().is_some());
    assert!(store.onode(&keys[0]).unwrap().is_some());
    assert!(store.onode(&keys[1]).unwrap().is_none());
    assert!(store.omap_get(&keys[1], b"k").unwrap().is_none());
    assert!(store.onode(&keys[2]).unwrap().is_some());
}

fn format_is_fixed_at_creation(kv: Arc<dyn KvEngine>) {
    let first = open(kv.clone(), StoreFormat { chunk_size: 4096 });
    assert_eq!(first.chunk_size(), 4096);
    let again = open(kv, StoreFormat { chunk_size: 65536 });
    assert_eq!(again.chunk_size(), 4096, "an existing store keeps its chunk size");
}

/// Runs of chunks at or above the threshold go to the device with checksums; an overwrite
/// frees the old extents once durable; a reopened store rebuilds its free space from the
/// extent records; corruption is caught.
fn large_writes_live_on_the_device(kv: Arc<dyn KvEngine>) {
    let device = Arc::new(MemDevice::new());
    let format = StoreFormat { chunk_size: 4096 };
    let options = StoreOptions { prefer_deferred_size: 8192 };
    let store = ObjectStore::open(kv.clone(), device.clone(), format, options).unwrap();
    let key = ObjectKey::new(PoolId(1), &ObjectName::new("", "big")).unwrap();
    let small = ObjectKey::new(PoolId(1), &ObjectName::new("", "small")).unwrap();
    let write = |key: &ObjectKey, fill: u8, chunks: u32, tail: usize| {
        let mut t = Transaction::new();
        t.put_onode(key, &Onode { size: u64::from(chunks) * 4096 + tail as u64, ..Onode::default() });
        t.delete_chunks_from(key, 0);
        for i in 0..chunks {
            t.put_chunk(key, i, vec![fill.wrapping_add(i as u8); 4096]);
        }
        if tail > 0 {
            t.put_chunk(key, chunks, vec![fill; tail]);
        }
        store.commit(t).unwrap()
    };
    write(&key, 1, 3, 100);
    write(&small, 9, 0, 10);
    let read = |key: &ObjectKey| store.chunks(key, 0, 100).unwrap();
    assert_eq!(read(&key).len(), 4);
    assert_eq!(read(&key)[1], (1, vec![2; 4096].into()));
    assert_eq!(read(&key)[3], (3, vec![1; 100].into()));
    assert_eq!(store.runs(&key, 0, 100).unwrap().len(), 1, "one extent run is one buffer");
    // Short ranges look each chunk up, longer ones scan: both read what the whole read has.
    for k in [&key, &small] {
        for (first, end) in (0..6).flat_map(|first| (first..first + 7).map(move |end| (first, end))) {
            let whole: Vec<_> = read(k).into_iter().filter(|(i, _)| (first..end).contains(i)).collect();
            assert_eq!(store.chunks(k, first, end).unwrap(), whole, "chunks {first}..{end} of {}", k.describe());
        }
    }
    assert!(kv.get(Cf::Extent, &[key.as_bytes(), &0u32.to_be_bytes()].concat()).unwrap().is_some());
    assert!(kv.scan(Cf::Extent, small.as_bytes(), &[small.as_bytes(), &[0xff]].concat(), 10).unwrap().is_empty());
    let space = store.space();
    assert_eq!(space.referenced, 4 * 4096, "{space:?}");
    // Overwrite: the old extents stay taken until the overwrite is durable.
    write(&key, 50, 2, 0);
    assert_eq!(read(&key)[0], (0, vec![50; 4096].into()));
    let space = store.space();
    assert_eq!((space.referenced, space.unreferenced), (2 * 4096, 4 * 4096), "{space:?}");
    store.sync().unwrap();
    let space = store.space();
    assert_eq!((space.referenced, space.unreferenced), (2 * 4096, 0), "{space:?}");
    // A small write over a large object's chunk replaces its extent.
    let mut t = Transaction::new();
    t.put_onode(&key, &Onode { size: 4106, ..Onode::default() });
    t.put_chunk(&key, 1, vec![7; 10]);
    store.commit(t).unwrap();
    store.sync().unwrap();
    assert_eq!(read(&key), vec![(0, vec![50; 4096].into()), (1, vec![7; 10].into())]);
    assert_eq!(store.space().referenced, 4096);
    // Written but never referenced (a crash before the batch): free again after reopening.
    device.write_at(0, &[0xee; 10]).ok();
    let reopened = ObjectStore::open(kv.clone(), device.clone(), format, options).unwrap();
    let space = reopened.space();
    assert_eq!((space.referenced, space.unreferenced), (4096, 0), "{space:?}");
    let report = reopened.fsck(true).unwrap();
    assert_eq!((report.objects, report.extents, report.referenced, report.allocated), (1, 1, 4096, 4096));
    assert!(report.errors.is_empty(), "{report:?}");
    // An extent record whose object is gone is reported (a leak).
    kv.write(vec![BatchOp::Delete(Cf::Onode, key.as_bytes().to_vec())]).unwrap();
    let report = reopened.fsck(false).unwrap();
    assert!(report.errors.iter().any(|e| e.contains("does not exist")), "{report:?}");
    kv.write(vec![BatchOp::Put(Cf::Onode, key.as_bytes().to_vec(), Onode { size: 4106, ..Onode::default() }.encode())])
        .unwrap();
    assert_eq!(reopened.chunks(&key, 0, 1).unwrap(), vec![(0, vec![50; 4096].into())]);
    reopened.corrupt_chunk(&key, 0).unwrap();
    let e = reopened.chunks(&key, 0, 1).unwrap_err();
    assert_eq!(e.errno, shoal_types::Errno::Io);
    assert!(e.message.contains("checksum mismatch") && e.message.contains("big"), "{e}");
    let report = reopened.fsck(true).unwrap();
    assert!(report.errors.iter().any(|e| e.contains("checksum mismatch")), "deep fsck reads: {report:?}");
    // Removing the object frees everything.
    let mut t = Transaction::new();
    t.remove_object(&key);
    reopened.commit(t).unwrap();
    reopened.sync().unwrap();
    assert_eq!(reopened.space().referenced, 0);
    assert!(kv.scan(Cf::Extent, &[], &[0xff; 8], 10).unwrap().is_empty(), "no extent record is left");
    assert_eq!(reopened.space().free, reopened.space().device);
}

/// An object's chunks moved to a stash and back keep their device space and bytes (nothing
/// is written to the device); a dropped stash frees its space; engines refuse raw moves.
fn stashes_move_chunks_without_copying_them(kv: Arc<dyn KvEngine>) {
    let format = StoreFormat { chunk_size: 4096 };
    let options = StoreOptions { prefer_deferred_size: 8192 };
    let store = ObjectStore::open(kv.clone(), Arc::new(MemDevice::new()), format, options).unwrap();
    let key = ObjectKey::new(PoolId(1), &ObjectName::new("", "stashed")).unwrap();
    let neighbour = ObjectKey::new(PoolId(1), &ObjectName::new("", "neighbour")).unwrap();
    let old = Onode { size: 5 * 4096 + 3, ..Onode::default() };
    let mut t = Transaction::new();
    t.put_onode(&key, &old);
    for i in 0..3 {
        t.put_chunk(&key, i, vec![i as u8 + 1; 4096]);
    }
    t.put_onode(&neighbour, &Onode { size: 3 * 4096, ..Onode::default() });
    for i in 0..3 {
        t.put_chunk(&neighbour, i, vec![0x77; 4096]);
    }
    store.commit(t).unwrap();
    let mut t = Transaction::new();
    t.put_chunk(&key, 5, b"abc".to_vec());
    store.commit(t).unwrap();
    let before = store.chunks(&key, 0, 10).unwrap();
    assert_eq!(before.len(), 4, "three chunks on the device and one in the engine");
    let written = store.space().written;
    let everything_but = |key: &ObjectKey| {
        let rows = kv.scan(Cf::Data, &[], &[0xff; 8], usize::MAX).unwrap().into_iter();
        let extents = kv.scan(Cf::Extent, &[], &[0xff; 8], usize::MAX).unwrap().into_iter();
        rows.chain(extents).filter(|(k, _)| !k.starts_with(key.as_bytes())).count()
    };
    let neighbours = everything_but(&key);

    // A rewrite that stashes the old chunks first.
    let mut t = Transaction::new();
    t.stash_chunks(&key, 7);
    t.remove_object_sized(&key, 6, false);
    t.put_onode(&key, &Onode { size: 2, ..Onode::default() });
    t.put_chunk(&key, 0, b"new".to_vec());
    store.commit(t).unwrap();
    store.sync().unwrap();
    assert_eq!(store.chunks(&key, 0, 10).unwrap(), vec![(0, b"new".to_vec().into())]);
    let space = store.space();
    assert_eq!((space.written, space.referenced), (written, 6 * 4096), "nothing moved on the device: {space:?}");
    let report = store.fsck(true).unwrap();
    assert_eq!((report.objects, report.extents, report.stashed), (1, 6, 3), "{report:?}");
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(everything_but(&key), neighbours + 4, "the stash holds three extents and one row");

    // Undone: the stash goes back in place of the rewrite.
    let mut t = Transaction::new();
    t.remove_object_sized(&key, 1, false);
    t.put_onode(&key, &old);
    t.unstash_chunks(&key, 7);
    store.commit(t).unwrap();
    store.sync().unwrap();
    assert_eq!(store.chunks(&key, 0, 10).unwrap(), before);
    assert_eq!(everything_but(&key), neighbours, "the stash is empty again");
    assert_eq!(store.space().written, written);

    // Kept until the write needs no undoing, then dropped: its space is free.
    let mut t = Transaction::new();
    t.stash_chunks(&key, 8);
    t.remove_object(&key);
    store.commit(t).unwrap();
    let mut t = Transaction::new();
    t.drop_stash(&key, 8);
    store.commit(t).unwrap();
    store.sync().unwrap();
    assert_eq!(everything_but(&key), neighbours);
    assert_eq!(store.chunks(&neighbour, 0, 10).unwrap().len(), 3);
    let space = store.space();
    assert_eq!((space.referenced, space.unreferenced), (3 * 4096, 0), "{space:?}");

    let refused = kv.write(vec![
        BatchOp::Put(Cf::Meta, b"m".to_vec(), b"1".to_vec()),
        BatchOp::Move(Cf::Data, b"a".to_vec(), b"b".to_vec()),
    ]);
    assert_eq!(refused.unwrap_err().errno, shoal_types::Errno::InvalidArgument);
    assert_eq!(kv.get(Cf::Meta, b"m").unwrap(), None, "a refused batch changes nothing");
}

/// An object copied in parts of a few bytes (data chunks, then omap rows) onto another
/// store's older, larger copy ends identical to the source, and every part but the last
/// stays within its budget and one chunk or row.
fn paged_copies_make_the_whole_copy(source_kv: Arc<dyn KvEngine>, target_kv: Arc<dyn KvEngine>) {
    let format = StoreFormat { chunk_size: 8 };
    let (source, target) = (open(source_kv, format), open(target_kv, format));
    let key = ObjectKey::new(PoolId(1), &ObjectName::new("", "paged")).unwrap();
    let fill = |store: &ObjectStore, chunks: u32, rows: u32, tag: u8| {
        let mut t = Transaction::new();
        t.put_onode(&key, &Onode { size: u64::from(chunks) * 8, version: u64::from(tag), ..Onode::default() });
        for i in 0..chunks {
            t.put_chunk(&key, i, vec![tag.wrapping_add(i as u8); 8]);
        }
        for i in 0..rows {
            t.omap_put(&key, format!("row{i:05}").as_bytes(), &[tag; 3]);
        }
        store.commit(t).unwrap();
    };
    fill(&source, 20, 2500, 1);
    fill(&target, 40, 3000, 9);
    let (mut resume, mut parts) = (None, 0);
    loop {
        let (part, next) = source.copy_object_part(&key, resume.as_ref(), 64).unwrap();
        parts += 1;
        if next.is_some() {
            // The budget, plus at most one chunk or omap row beyond it.
            assert!(part.bytes() < 64 + 64, "part {parts} holds {} bytes", part.bytes());
        }
        target.commit(part).unwrap();
        match next {
            Some(next) => resume = Some(next),
            None => break,
        }
    }
    assert!(parts > 3, "a 64-byte budget splits the object ({parts} parts)");
    // Version 1, then postcard: variant index, then the chunk index or the key's bytes.
    assert_eq!(CopyResume::Chunk(3).encode(), [1, 0, 3]);
    assert_eq!(CopyResume::Omap(vec![7, 8]).encode(), [1, 1, 2, 7, 8]);
    assert_eq!(CopyResume::decode(&[1, 0, 3]).unwrap(), CopyResume::Chunk(3));
    assert_eq!(target.copy_object(&key).unwrap(), source.copy_object(&key).unwrap());
    // A missing object copies as its removal, in one part.
    let gone = ObjectKey::new(PoolId(1), &ObjectName::new("", "gone")).unwrap();
    let (part, next) = source.copy_object_part(&gone, None, 64).unwrap();
    assert!(next.is_none());
    assert_eq!(part, source.copy_object(&gone).unwrap());
}

#[cfg(test)]
mod tests {
    #[test]
    fn mem_kv_passes() {
        super::run_all(&|| std::sync::Arc::new(crate::MemKv::new()));
    }
}
