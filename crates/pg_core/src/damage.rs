//! Objects whose local copy failed its checksum and has not been repaired: what `shoal
//! status` reports as damage (HEALTH_ERR) until a repair or a rewrite clears it. Each is
//! also a row of the store (`pg_damage_key`), so the report survives a restart.

use shoal_store::{ObjectKey, ObjectStore, Transaction, pg_damage_key, pg_damage_rows, split_damage_key};
use shoal_types::{ObjectName, PgId, Result, err};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The damaged objects of one OSD, by PG.
#[derive(Debug, Default)]
pub struct Damage {
    objects: Mutex<BTreeMap<PgId, BTreeSet<ObjectName>>>,
    /// How many there are, read without the lock on every operation.
    count: AtomicUsize,
}

impl Damage {
    fn objects(&self) -> std::sync::MutexGuard<'_, BTreeMap<PgId, BTreeSet<ObjectName>>> {
        self.objects.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The damage an earlier run of this OSD recorded in `store`.
    pub fn load(store: &ObjectStore) -> Result<Damage> {
        let damage = Damage::default();
        let (from, to) = pg_damage_rows(None);
        for (row, _) in store.meta_scan(&from, &to, usize::MAX)? {
            let corrupt = || err::io(format!("corrupt damaged-object row {row:02x?}"));
            let (pg, key) = split_damage_key(&row).ok_or_else(corrupt)?;
            let (_, object) = ObjectKey::from_bytes(key.to_vec())?.decode()?;
            damage.insert(pg, object);
        }
        Ok(damage)
    }

    /// Records that `object`'s local copy is damaged (in `store` too).
    pub fn add(&self, store: &ObjectStore, pg: PgId, object: &ObjectName) {
        if self.insert(pg, object.clone()) {
            Self::record(store, pg, object, true);
        }
    }

    /// Adds `object` to the set; whether it was not there.
    fn insert(&self, pg: PgId, object: ObjectName) -> bool {
        let inserted = self.objects().entry(pg).or_default().insert(object);
        if inserted {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        inserted
    }

    /// Forgets `object` (repaired, rewritten or removed).
    pub fn remove(&self, store: &ObjectStore, pg: PgId, object: &ObjectName) {
        let mut objects = self.objects();
        if let Some(set) = objects.get_mut(&pg)
            && set.remove(object)
        {
            self.count.fetch_sub(1, Ordering::Relaxed);
            if set.is_empty() {
                objects.remove(&pg);
            }
            Self::record(store, pg, object, false);
        }
    }

    /// Forgets the damage of `pg`, whose copy this OSD no longer holds (its rows go with
    /// the PG's, see `pglog::delete_pg`).
    pub fn remove_pg(&self, pg: PgId) {
        if let Some(set) = self.objects().remove(&pg) {
            self.count.fetch_sub(set.len(), Ordering::Relaxed);
        }
    }

    /// Writes or deletes `object`'s row. Failing only costs the report after a restart
    /// (a read or a scrub finds the damage again), so it is logged, not returned.
    fn record(store: &ObjectStore, pg: PgId, object: &ObjectName, damaged: bool) {
        let written = ObjectKey::new(pg.pool, object).and_then(|key| {
            let mut txn = Transaction::new();
            match damaged {
                true => txn.put_meta(&pg_damage_key(pg, &key), Vec::new()),
                false => txn.delete_meta(&pg_damage_key(pg, &key)),
            }
            store.commit(txn)
        });
        if let Err(e) = written {
            tracing::warn!(%pg, %object, error = %e, "recording a damaged object in the store failed");
        }
    }

    /// Whether `object` is recorded as damaged (no lock taken while nothing is).
    pub fn contains(&self, pg: PgId, object: &ObjectName) -> bool {
        self.count.load(Ordering::Relaxed) > 0 && self.objects().get(&pg).is_some_and(|s| s.contains(object))
    }

    /// Whether `pg` has damaged objects.
    pub fn in_pg(&self, pg: PgId) -> bool {
        self.count.load(Ordering::Relaxed) > 0 && self.objects().contains_key(&pg)
    }

    /// Every damaged object.
    pub fn list(&self) -> Vec<(PgId, ObjectName)> {
        self.objects().iter().flat_map(|(pg, set)| set.iter().map(|o| (*pg, o.clone()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_store::{StoreFormat, StoreOptions};
    use shoal_types::PoolId;

    #[test]
    fn objects_are_counted_once_forgotten_by_pg_and_reloaded_from_the_store() {
        let store = ObjectStore::in_memory(StoreFormat::default(), StoreOptions::default()).unwrap();
        let damage = Damage::default();
        let (pg, other) = (PgId { pool: PoolId(1), seed: 3 }, PgId { pool: PoolId(1), seed: 4 });
        let (a, b) = (ObjectName::new("", "a"), ObjectName::new("ns", "b"));
        assert!(!damage.contains(pg, &a) && !damage.in_pg(pg));
        damage.add(&store, pg, &a);
        damage.add(&store, pg, &a);
        damage.add(&store, other, &b);
        assert!(damage.contains(pg, &a) && damage.in_pg(pg) && damage.in_pg(other));
        assert_eq!(damage.list(), vec![(pg, a.clone()), (other, b.clone())]);
        let reloaded = Damage::load(&store).unwrap();
        assert_eq!(reloaded.list(), damage.list(), "a restarted OSD reports the same damage");
        assert_eq!(reloaded.count.load(Ordering::Relaxed), 2);
        damage.remove(&store, other, &a);
        assert!(damage.contains(pg, &a));
        damage.remove(&store, pg, &a);
        assert!(!damage.contains(pg, &a) && !damage.in_pg(pg));
        assert_eq!(Damage::load(&store).unwrap().list(), vec![(other, b.clone())], "the repair is recorded too");
        damage.remove_pg(other);
        assert!(damage.list().is_empty());
        assert_eq!(damage.count.load(Ordering::Relaxed), 0);
    }
}
