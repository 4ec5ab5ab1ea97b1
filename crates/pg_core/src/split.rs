//! Splitting this OSD's copies of PGs when their pool's `pg_num` grows.
//!
//! Objects are keyed by pool and hash, not by PG, so a split moves no data: each child's
//! objects already lie in its key ranges. What moves is each copy's history: the child
//! gets the parent's record (completeness, last activation) and, from the parent's log,
//! missing set, undo records and damage rows, those of its own objects. A copy's
//! `last_update` becomes its newest remaining entry (or its log tail), so that rolling
//! back and peering compare the child's own writes.
//!
//! The store records the `pg_num` its copies were split to (`N` ‖ pool), so an OSD that
//! was down while a pool grew splits on its first map, and a split is done once. The
//! driver commits the split before any shard sees the map that calls for it.

use crate::limits::Flaws;
use crate::pglog::PgState;
use shoal_store::{
    ObjectKey, ObjectStore, Transaction, pg_damage_key, pg_damage_rows, pg_log_key, pg_meta_key, pg_missing_key,
    pg_missing_object_key, pg_missing_objects, pg_pool_pg_num_key, pg_pool_pg_num_rows, pg_rollback_key,
    split_damage_key,
};
use shoal_types::pg::{EVersion, PgInfo};
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

/// The split every pool of `map` calls for on this store (nothing for a pool seen for
/// the first time, whose count is recorded as it is). A pool whose recorded count is
/// above the map's cannot be followed (merging is not supported yet): an error.
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
                return Err(err::not_supported(format!(
                    "pool {pool}: this OSD's copies are split to {recorded} PGs and the map has {}: merging is not supported",
                    p.pg_num
                )));
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

/// Whether `map` has a pool with more PGs than this store's copies are split to.
pub fn needed(store: &ObjectStore, map: &OsdMap) -> Result<bool> {
    let recorded = recorded_counts(store)?;
    Ok(map.pools.values().any(|p| recorded.get(&p.id).is_some_and(|(_, count)| *count < p.pg_num)))
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
    use shoal_types::{ClientId, ObjectName, PoolSpec, ReqId};

    /// A store holding one copy of the single PG of a one-PG pool, with `writes` logged
    /// writes to objects `o0…` and their data.
    fn one_pg(writes: u64) -> (ObjectStore, OsdMap, PgId) {
        let store = ObjectStore::in_memory(StoreFormat::default(), StoreOptions::default()).unwrap();
        let mut map = OsdMap::default();
        let pool = map.create(&PoolSpec { name: "p".into(), pg_num: 1, size: 1, min_size: 1 }).unwrap();
        let pg = PgId { pool: pool.id, seed: 0 };
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

    #[test]
    fn a_lower_pg_num_than_the_store_holds_is_refused() {
        let (store, mut map, parent) = one_pg(1);
        map.set_pg_num("p", 2).unwrap();
        store.commit(follow(&store, &map).unwrap().txn).unwrap();
        if let Some(pool) = map.pools.get_mut(&parent.pool) {
            pool.pg_num = 1;
        }
        assert!(follow(&store, &map).unwrap_err().message.contains("merging is not supported"));
    }
}
