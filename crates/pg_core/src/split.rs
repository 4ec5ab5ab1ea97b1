//! Splitting this OSD's copies of PGs when their pool's `pg_num` grows.
//!
//! Objects are keyed by pool and hash, not by PG, so a split moves no data: each child's
//! objects already lie in its key ranges. What moves is each copy's history: the child
//! gets the parent's record (completeness, last activation) and, from the parent's log,
//! missing set, undo records and damage rows, those of its own objects. A copy's
//! `last_update` becomes its newest remaining entry (or its log tail), so that rolling
//! back and peering compare the child's own writes.
//!
//! Merging (a pool's `pg_num` lowered) is the reverse: each source PG's copy goes into
//! its target's. The monitors merge only once every source sits on its target's OSDs and
//! every copy of both settled while the pool was paused (clean, no write in flight), so
//! the copies of a source and its target on every OSD of their acting set agree. Their two
//! logs cannot interleave under one version counter, so the merged copy starts a new
//! history, as Ceph's merges do: an empty log whose tail and head are the newer of the two
//! last updates. A copy of only one side lacks the other's objects: it merges as
//! incomplete, never an authority, and is backfilled or removed by peering. So does a copy
//! that was not in its PG's activation under the pause, which the map records for the
//! pool's last merge ([`OsdMap::pg_merged`]): it was behind, and the new history could no
//! longer tell it by its last update. An OSD that missed more than that one merge merges
//! every copy incomplete.
//!
//! The store records the `pg_num` its copies were split or merged to (`N` ‖ pool), so an
//! OSD that was down while a pool changed follows on its first map, once. The driver
//! commits the split or merge before any shard sees the map that calls for it.

use crate::limits::Flaws;
use crate::pglog::PgState;
use shoal_store::{
    ObjectKey, ObjectStore, Transaction, pg_damage_key, pg_damage_rows, pg_dup_key, pg_dup_rows, pg_log_key,
    pg_meta_key, pg_missing_key, pg_missing_object_key, pg_missing_objects, pg_pool_pg_num_key, pg_pool_pg_num_rows,
    pg_rollback_key, split_damage_key,
};
use shoal_types::pg::{EVersion, PgInfo, PgLogEntry};
use shoal_types::{OsdMap, PgId, PoolId, Result, Versioned, err};
use std::collections::BTreeMap;

/// What splitting this OSD's copies for `map` does.
#[derive(Debug, Default)]
pub struct Split {
    /// The store changes, to commit before any shard works under `map`.
    pub txn: Transaction,
    /// The pools whose copies split, each from and to its `pg_num`.
    pub pools: BTreeMap<PoolId, (u32, u32)>,
}

/// The split or merge every pool of `map` calls for on this store (nothing for a pool
/// seen for the first time, whose count is recorded as it is).
pub fn follow(store: &ObjectStore, map: &OsdMap) -> Result<Split> {
    follow_with(store, map, Flaws::default())
}

/// [`follow`] with deliberate bugs (simulator runs only).
#[cfg(feature = "flaws")]
pub fn follow_flawed(store: &ObjectStore, map: &OsdMap, flaws: Flaws) -> Result<Split> {
    follow_with(store, map, flaws)
}

fn follow_with(store: &ObjectStore, map: &OsdMap, flaws: Flaws) -> Result<Split> {
    let mut split = Split::default();
    for (pool, (row, recorded)) in recorded_counts(store)? {
        match map.pools.get(&pool) {
            None => split.txn.delete_meta(&row),
            Some(p) if p.pg_num > recorded => {
                split_pool(store, &mut split.txn, pool, (recorded, p.pg_num), flaws)?;
                split.txn.put_meta(&row, p.pg_num.to_be_bytes().to_vec());
                split.pools.insert(pool, (recorded, p.pg_num));
            }
            Some(p) if p.pg_num < recorded => {
                let merged = map.pg_merged.get(&pool).filter(|m| (m.from, m.to) == (recorded, p.pg_num));
                let under_pause = merged.map(|m| &m.active);
                merge_pool(store, &mut split.txn, pool, (recorded, p.pg_num), under_pause, flaws)?;
                split.txn.put_meta(&row, p.pg_num.to_be_bytes().to_vec());
                split.pools.insert(pool, (recorded, p.pg_num));
            }
            Some(_) => {}
        }
    }
    for pool in map.pools.values() {
        let row = pg_pool_pg_num_key(pool.id);
        if store.meta(&row)?.is_none() {
            split.txn.put_meta(&row, pool.pg_num.to_be_bytes().to_vec());
        }
    }
    Ok(split)
}

/// Whether `map` has a pool with another PG count than this store's copies have.
pub fn needed(store: &ObjectStore, map: &OsdMap) -> Result<bool> {
    let recorded = recorded_counts(store)?;
    Ok(map.pools.values().any(|p| recorded.get(&p.id).is_some_and(|(_, count)| *count != p.pg_num)))
}

/// Per pool, the row recording the count its copies are split to, and that count.
fn recorded_counts(store: &ObjectStore) -> Result<BTreeMap<PoolId, (Vec<u8>, u32)>> {
    let (from, to) = pg_pool_pg_num_rows();
    let mut counts = BTreeMap::new();
    for (row, value) in store.meta_scan(&from, &to, usize::MAX)? {
        let pool = row.get(1..9).and_then(|b| b.try_into().ok()).map(|b| PoolId(u64::from_be_bytes(b)));
        let recorded = value.as_slice().try_into().ok().map(u32::from_be_bytes);
        let (Some(pool), Some(recorded)) = (pool, recorded) else {
            return Err(err::io(format!("corrupt PG count row {row:02x?}")));
        };
        counts.insert(pool, (row, recorded));
    }
    Ok(counts)
}

/// Merges this store's copies of `pool`'s PGs from `from` PGs to `to`, in `txn` (see the
/// module).
/// `under_pause`: each PG's activation interval under the merge's pause, by seed, if
/// this is the pool's last merge. No client writes while paused, so a copy activated in it
/// has every write; any other copy may lack some, which a merged history could no longer
/// tell by its last update, so it merges incomplete (to be backfilled).
fn merge_pool(
    store: &ObjectStore,
    txn: &mut Transaction,
    pool: PoolId,
    counts: (u32, u32),
    under_pause: Option<&BTreeMap<u32, u64>>,
    flaws: Flaws,
) -> Result<()> {
    let (from, to) = counts;
    let info =
        |pg: PgId| -> Result<Option<PgInfo>> { store.meta(&pg_meta_key(pg))?.map(|b| PgInfo::decode(&b)).transpose() };
    let current = |pg: PgId, info: &PgInfo| {
        under_pause.is_some_and(|active| active.get(&pg.seed) == Some(&info.last_epoch_started))
    };
    let mut merged: BTreeMap<u32, Option<PgInfo>> = BTreeMap::new();
    for seed in to..from {
        let (source, target) = (PgId { pool, seed }, PgId { pool, seed: shoal_placement::ancestor(seed, to) });
        let so_far = match merged.remove(&target.seed) {
            Some(so_far) => so_far,
            None => {
                let own = info(target)?;
                // A copy being recovered by its log cannot be once the log is gone.
                let recovering = store.meta(&pg_missing_key(target))?.is_some();
                remember_requests(store, txn, target, target)?;
                forget_history(store, txn, target)?;
                own.map(|i| PgInfo { complete: i.complete && !recovering && current(target, &i), ..i })
            }
        };
        let theirs = info(source)?;
        if !flaws.merge_forgets_source {
            remember_requests(store, txn, source, target)?;
        }
        let (from_row, to_row) = pg_damage_rows(Some(source));
        for (row, kind) in store.meta_scan(&from_row, &to_row, usize::MAX)? {
            if let Some((_, key)) = split_damage_key(&row) {
                txn.put_meta(&pg_damage_key(target, &ObjectKey::from_bytes(key.to_vec())?), kind);
            }
        }
        crate::pglog::forget_rollbacks(store, txn, source)?;
        crate::pglog::delete_pg_records(txn, source);
        let together = match (so_far, theirs) {
            (Some(a), Some(b)) => {
                let newer = if a.last_epoch_started >= b.last_epoch_started { &a } else { &b };
                let complete =
                    a.complete && b.complete && current(source, &b) && store.meta(&pg_missing_key(source))?.is_none();
                Some(PgInfo { last_update: a.last_update.max(b.last_update), complete, ..newer.clone() })
            }
            (Some(one), None) | (None, Some(one)) => Some(PgInfo { complete: false, ..one }),
            (None, None) => None,
        };
        merged.insert(target.seed, together);
    }
    for (seed, together) in merged {
        if let Some(record) = together {
            let record = PgInfo { log_tail: record.last_update, ..record };
            txn.put_meta(&pg_meta_key(PgId { pool, seed }), record.encode());
        }
    }
    Ok(())
}

/// Keeps the requests of `pg`'s log, and those it remembers, as requests `into`
/// remembers ([`pg_dup_key`]): a client that resends one after the merge gets its reply.
fn remember_requests(store: &ObjectStore, txn: &mut Transaction, pg: PgId, into: PgId) -> Result<()> {
    for (_, bytes) in store.meta_scan(&pg_log_key(pg, 0), &pg_log_key(pg, u64::MAX), usize::MAX)? {
        let entry = PgLogEntry::decode(&bytes)?;
        txn.put_meta(&pg_dup_key(into, entry.reqid), bytes);
    }
    if pg != into {
        let (from, to) = pg_dup_rows(pg);
        for (_, bytes) in store.meta_scan(&from, &to, usize::MAX)? {
            let entry = PgLogEntry::decode(&bytes)?;
            txn.put_meta(&pg_dup_key(into, entry.reqid), bytes);
        }
    }
    Ok(())
}

/// Deletes a copy's log, undo records and missing set in `txn`: its history restarts.
fn forget_history(store: &ObjectStore, txn: &mut Transaction, pg: PgId) -> Result<()> {
    txn.delete_meta_range(&pg_log_key(pg, 0), &pg_log_key(pg, u64::MAX));
    crate::pglog::forget_rollbacks(store, txn, pg)?;
    txn.delete_meta(&pg_missing_key(pg));
    let (from, to, _) = pg_missing_objects(pg);
    txn.delete_meta_range(&from, &to);
    Ok(())
}

/// Splits this store's copies of `pool`'s PGs from `from` PGs to `to`, in `txn`.
fn split_pool(
    store: &ObjectStore,
    txn: &mut Transaction,
    pool: PoolId,
    counts: (u32, u32),
    flaws: Flaws,
) -> Result<()> {
    let (from, to) = counts;
    let child_of =
        |object: &shoal_types::ObjectName| shoal_placement::ancestor(shoal_placement::object_hash(object), to);
    for seed in 0..from {
        let parent = PgId { pool, seed };
        if store.meta(&pg_meta_key(parent))?.is_none() {
            continue;
        }
        let state = PgState::load(store, parent, usize::MAX)?;
        let children: Vec<PgId> = (from..to)
            .filter(|&c| shoal_placement::ancestor(c, from) == seed)
            .map(|c| PgId { pool, seed: c })
            .collect();
        let mut newest: BTreeMap<u32, EVersion> = BTreeMap::new();
        for entry in state.entries_after(store, EVersion::default())? {
            let owner = child_of(&entry.object);
            let latest = newest.entry(owner).or_default();
            *latest = (*latest).max(entry.at);
            if owner == seed {
                continue;
            }
            let version = entry.at.version;
            txn.delete_meta(&pg_log_key(parent, version));
            txn.put_meta(&pg_log_key(PgId { pool, seed: owner }, version), entry.encode());
            if let Some(undo) = store.meta(&pg_rollback_key(parent, version))? {
                txn.delete_meta(&pg_rollback_key(parent, version));
                txn.put_meta(&pg_rollback_key(PgId { pool, seed: owner }, version), undo);
            }
        }
        let flawed = flaws.split_completes_children;
        if let Some(missing) = store.meta(&pg_missing_key(parent))?.filter(|_| !flawed) {
            let (from_row, to_row, prefix) = pg_missing_objects(parent);
            for child in &children {
                txn.put_meta(&pg_missing_key(*child), missing.clone());
            }
            for (row, _) in store.meta_scan(&from_row, &to_row, usize::MAX)? {
                let key = ObjectKey::from_bytes(row.get(prefix..).unwrap_or_default().to_vec())?;
                let owner = child_of(&key.decode()?.1);
                if owner != seed {
                    txn.delete_meta(&row);
                    txn.put_meta(&pg_missing_object_key(PgId { pool, seed: owner }, &key), Vec::new());
                }
            }
        }
        let (from_row, to_row) = pg_damage_rows(Some(parent));
        for (row, kind) in store.meta_scan(&from_row, &to_row, usize::MAX)? {
            let Some((_, key)) = split_damage_key(&row) else { continue };
            let key = ObjectKey::from_bytes(key.to_vec())?;
            let owner = child_of(&key.decode()?.1);
            if owner != seed {
                txn.delete_meta(&row);
                txn.put_meta(&pg_damage_key(PgId { pool, seed: owner }, &key), kind);
            }
        }
        let record = |seed: u32| {
            let log_tail = state.info.log_tail;
            let last_update = newest.get(&seed).copied().unwrap_or(log_tail).max(log_tail);
            let complete = state.info.complete || flawed && seed != parent.seed;
            PgInfo { last_update, complete, ..state.info.clone() }
        };
        txn.put_meta(&pg_meta_key(parent), record(seed).encode());
        for child in &children {
            if store.meta(&pg_meta_key(*child))?.is_some() {
                tracing::warn!(%parent, %child, "a copy of the child exists already; keeping it");
                continue;
            }
            txn.put_meta(&pg_meta_key(*child), record(child.seed).encode());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use shoal_store::{StoreFormat, StoreOptions};
    use shoal_types::msg::OpReply;
    use shoal_types::{ActiveInterval, ClientId, ObjectName, OsdId, PoolSpec, ReqId};

    /// A store holding one copy of the single PG of a one-PG pool, with `writes` logged
    /// writes to objects `o0…` and their data.
    fn one_pg(writes: u64) -> (ObjectStore, OsdMap, PgId) {
        let store = ObjectStore::in_memory(StoreFormat::default(), StoreOptions::default()).unwrap();
        let mut map = OsdMap::default();
        let pool = map.create(&PoolSpec { name: "p".into(), pg_num: 1, size: 1, min_size: 1 }).unwrap();
        let pg = PgId { pool: pool.id, seed: 0 };
        map.pg_active.insert(pg, ActiveInterval { interval: 3, acting: vec![OsdId(0)] });
        let mut state = PgState::load(&store, pg, 1000).unwrap();
        state.info.last_epoch_started = 3;
        for v in 1..=writes {
            let object = ObjectName::new("", format!("o{v}"));
            let mut txn = Transaction::new();
            txn.put_chunk(&ObjectKey::new(pool.id, &object).unwrap(), 0, b"data".to_vec());
            let reply = OpReply { version: v, outputs: Vec::new() };
            let at = EVersion { epoch: 3, version: v };
            state.append(&mut txn, &PgState::entry(at, ReqId { client: ClientId(1), tid: v }, object, &reply));
            store.commit(txn).unwrap();
        }
        let first = follow(&store, &map).unwrap();
        assert!(first.pools.is_empty(), "a pool seen the first time is recorded, not split");
        store.commit(first.txn).unwrap();
        (store, map, pg)
    }

    #[test]
    fn children_take_their_own_entries_and_the_parents_record() {
        let (store, mut map, parent) = one_pg(40);
        assert!(!needed(&store, &map).unwrap());
        map.set_pg_num("p", 4).unwrap();
        assert!(needed(&store, &map).unwrap());
        let split = follow(&store, &map).unwrap();
        assert_eq!(split.pools.get(&parent.pool), Some(&(1, 4)));
        store.commit(split.txn).unwrap();
        let pool = map.pools[&parent.pool].clone();
        let mut seen = 0;
        for seed in 0..4 {
            let pg = PgId { pool: pool.id, seed };
            let state = PgState::load(&store, pg, 1000).unwrap();
            let entries = state.entries_after(&store, EVersion::default()).unwrap();
            assert!(entries.iter().all(|e| shoal_placement::pg_of(&pool, &e.object) == pg), "pg {pg}");
            assert_eq!(state.info.last_epoch_started, 3, "pg {pg} keeps the parent's activation");
            assert!(state.info.complete);
            assert_eq!(state.info.last_update, entries.last().map_or(EVersion::default(), |e| e.at));
            for entry in &entries {
                assert_eq!(state.applied(&entry.reqid).map(|r| r.version), Some(entry.at.version));
            }
            seen += entries.len();
        }
        assert_eq!(seen, 40, "every entry went to exactly one PG");
        // Done once: the next map with the same count changes nothing.
        let again = follow(&store, &map).unwrap();
        assert!(again.pools.is_empty() && again.txn.is_empty());
        // The objects did not move.
        let data = store.chunks(&ObjectKey::new(pool.id, &ObjectName::new("", "o7")).unwrap(), 0, 1).unwrap();
        assert_eq!(data, vec![(0, Bytes::from_static(b"data"))]);
    }

    #[test]
    fn an_incomplete_parent_gives_incomplete_children_their_missing_objects() {
        let (store, mut map, parent) = one_pg(12);
        let mut state = PgState::load(&store, parent, 1000).unwrap();
        let activate = shoal_types::msg::Activate {
            pg: parent,
            interval: 5,
            acting: Vec::new(),
            keep_until: Some(EVersion { epoch: 3, version: 6 }),
            entries: Vec::new(),
            log_tail: EVersion::default(),
            complete: false,
            remembered: Vec::new(),
        };
        let mut txn = Transaction::new();
        state.adopt(&mut txn, &activate, 1).unwrap();
        store.commit(txn).unwrap();
        map.set_pg_num("p", 2).unwrap();
        store.commit(follow(&store, &map).unwrap().txn).unwrap();
        let pool = map.pools[&parent.pool].clone();
        let mut lacked = 0;
        for seed in 0..2 {
            let pg = PgId { pool: pool.id, seed };
            let state = PgState::load(&store, pg, 1000).unwrap();
            assert!(!state.info.complete, "pg {pg}");
            let missing = state.summary().missing.unwrap_or_default();
            assert!(missing.objects.iter().all(|o| shoal_placement::pg_of(&pool, o) == pg));
            lacked += missing.objects.len();
        }
        assert_eq!(lacked, 6, "o7…o12 are lacked, each by its own PG");
    }

    /// Merges `map`'s pool back to one PG as the monitors do (placement and pause done),
    /// `under_pause` changing the map while paused.
    fn merge_to_one(map: &mut OsdMap, pool: PoolId, under_pause: impl FnOnce(&mut OsdMap)) {
        map.set_pg_num("p", 1).unwrap();
        map.pause_merge(pool).unwrap();
        under_pause(map);
        map.finish_merge(pool).unwrap();
    }

    #[test]
    fn merged_copies_start_a_new_history_that_remembers_their_requests() {
        let (store, mut map, parent) = one_pg(40);
        map.set_pg_num("p", 4).unwrap();
        store.commit(follow(&store, &map).unwrap().txn).unwrap();
        let pool = parent.pool;
        let newest = (0..4)
            .map(|seed| PgState::load(&store, PgId { pool, seed }, 1000).unwrap().info.last_update)
            .max()
            .unwrap();
        merge_to_one(&mut map, pool, |_| {});
        assert!(needed(&store, &map).unwrap());
        let merge = follow(&store, &map).unwrap();
        assert_eq!(merge.pools[&pool], (4, 1));
        store.commit(merge.txn).unwrap();
        let merged = PgState::load(&store, parent, 1000).unwrap();
        assert_eq!((merged.info.last_update, merged.info.log_tail), (newest, newest), "an empty log at the newest");
        assert!(merged.info.complete && merged.info.last_epoch_started == 3);
        assert!(merged.entries_after(&store, EVersion::default()).unwrap().is_empty());
        for tid in 1..=40 {
            let reqid = ReqId { client: ClientId(1), tid };
            assert_eq!(merged.applied(&reqid).map(|r| r.version), Some(tid), "request {tid} is remembered");
        }
        for seed in 1..4 {
            assert!(store.meta(&pg_meta_key(PgId { pool, seed })).unwrap().is_none(), "source {seed} is gone");
        }
        let data = store.chunks(&ObjectKey::new(pool, &ObjectName::new("", "o7")).unwrap(), 0, 1).unwrap();
        assert_eq!(data, vec![(0, Bytes::from_static(b"data"))], "the objects stay");
        let again = follow(&store, &map).unwrap();
        assert!(again.pools.is_empty() && again.txn.is_empty(), "merged once");
    }

    #[test]
    fn a_copy_not_shown_current_under_the_pause_merges_incomplete() {
        let merged_complete = |under_pause: &dyn Fn(&mut OsdMap), after: &dyn Fn(&mut OsdMap)| {
            let (store, mut map, parent) = one_pg(10);
            map.set_pg_num("p", 2).unwrap();
            store.commit(follow(&store, &map).unwrap().txn).unwrap();
            merge_to_one(&mut map, parent.pool, under_pause);
            after(&mut map);
            store.commit(follow(&store, &map).unwrap().txn).unwrap();
            PgState::load(&store, parent, 1000).unwrap().info.complete
        };
        assert!(merged_complete(&|_| {}, &|_| {}), "both copies were in their PG's activation under the pause");
        let reactivated = |m: &mut OsdMap| {
            let source = PgId { pool: PoolId(1), seed: 1 };
            m.pg_active.insert(source, ActiveInterval { interval: 5, acting: vec![OsdId(1)] });
        };
        assert!(!merged_complete(&reactivated, &|_| {}), "the source went active without this copy");
        let another_merge = |m: &mut OsdMap| {
            m.pg_merged.get_mut(&PoolId(1)).unwrap().from = 4;
        };
        assert!(!merged_complete(&|_| {}, &another_merge), "the map records another merge than this OSD's");
    }

    #[test]
    fn a_copy_of_only_one_side_merges_incomplete() {
        let (store, mut map, parent) = one_pg(10);
        map.set_pg_num("p", 2).unwrap();
        store.commit(follow(&store, &map).unwrap().txn).unwrap();
        let mut txn = Transaction::new();
        crate::pglog::delete_pg_records(&mut txn, PgId { pool: parent.pool, seed: 1 });
        store.commit(txn).unwrap();
        merge_to_one(&mut map, parent.pool, |_| {});
        store.commit(follow(&store, &map).unwrap().txn).unwrap();
        let merged = PgState::load(&store, parent, 1000).unwrap();
        assert!(!merged.info.complete, "it lacks the other side's objects: never an authority");
    }
}
