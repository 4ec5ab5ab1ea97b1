//! Objects whose local copy failed its checksum and has not been repaired, and objects a
//! primary could not recover because their only up-to-date copy failed it (unfound): what
//! `shoal status` reports as damage (HEALTH_ERR) until a repair, a rewrite or a removal
//! clears it. Each is also a row of the store (`pg_damage_key`), so the report survives a
//! restart.

use shoal_store::{ObjectKey, ObjectStore, Transaction, pg_damage_key, pg_damage_rows, split_damage_key};
use shoal_types::{ObjectName, PgId, Result, err};
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What is wrong with a damaged object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The local copy fails its checksum (it reads back once a repair or a rewrite mends it).
    Unreadable,
    /// The local copy is older than the object's newest version, whose only copy was
    /// unreadable when this primary recovered: every operation but a removal gets EIO.
    Unfound,
}

impl Kind {
    /// The store row's value: empty for `Unreadable` (the rows before kinds existed), `U`
    /// for `Unfound`.
    fn row_value(self) -> &'static [u8] {
        match self {
            Kind::Unreadable => b"",
            Kind::Unfound => b"U",
        }
    }

    fn from_row_value(value: &[u8]) -> Option<Kind> {
        match value {
            b"" => Some(Kind::Unreadable),
            b"U" => Some(Kind::Unfound),
            _ => None,
        }
    }
}

/// The damaged objects of one OSD, by PG.
#[derive(Debug, Default)]
pub struct Damage {
    objects: Mutex<BTreeMap<PgId, BTreeMap<ObjectName, Kind>>>,
    /// How many there are, read without the lock on every operation.
    count: AtomicUsize,
}

impl Damage {
    fn objects(&self) -> std::sync::MutexGuard<'_, BTreeMap<PgId, BTreeMap<ObjectName, Kind>>> {
        self.objects.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The damage an earlier run of this OSD recorded in `store`.
    pub fn load(store: &ObjectStore) -> Result<Damage> {
        let damage = Damage::default();
        damage.reload(store)?;
        Ok(damage)
    }

    /// Replaces what is known with what `store` records (after PGs split).
    pub fn reload(&self, store: &ObjectStore) -> Result<()> {
        let (from, to) = pg_damage_rows(None);
        let mut rows = Vec::new();
        for (row, value) in store.meta_scan(&from, &to, usize::MAX)? {
            let corrupt = || err::io(format!("corrupt damaged-object row {row:02x?}"));
            let (pg, key) = split_damage_key(&row).ok_or_else(corrupt)?;
            let (_, object) = ObjectKey::from_bytes(key.to_vec())?.decode()?;
            rows.push((pg, object, Kind::from_row_value(&value).ok_or_else(corrupt)?));
        }
        self.objects().clear();
        self.count.store(0, Ordering::Relaxed);
        for (pg, object, kind) in rows {
            self.insert(pg, object, kind);
        }
        Ok(())
    }

    /// Records that `object`'s local copy is damaged (in `store` too). An unfound object
    /// stays unfound.
    pub fn add(&self, store: &ObjectStore, pg: PgId, object: &ObjectName, kind: Kind) {
        if self.insert(pg, object.clone(), kind) {
            Self::record(store, pg, object, Some(kind));
        }
    }

    /// Adds `object` as `kind` (an unfound object stays unfound); whether that changed anything.
    fn insert(&self, pg: PgId, object: ObjectName, kind: Kind) -> bool {
        match self.objects().entry(pg).or_default().entry(object) {
            Entry::Vacant(vacant) => {
                vacant.insert(kind);
                self.count.fetch_add(1, Ordering::Relaxed);
                true
            }
            Entry::Occupied(mut known) if *known.get() != Kind::Unfound && *known.get() != kind => {
                known.insert(kind);
                true
            }
            Entry::Occupied(_) => false,
        }
    }

    /// Forgets `object` (repaired, rewritten or removed).
    pub fn remove(&self, store: &ObjectStore, pg: PgId, object: &ObjectName) {
        let mut objects = self.objects();
        if let Some(set) = objects.get_mut(&pg)
            && set.remove(object).is_some()
        {
            self.count.fetch_sub(1, Ordering::Relaxed);
            if set.is_empty() {
                objects.remove(&pg);
            }
            Self::record(store, pg, object, None);
        }
    }

    /// Forgets the damage of `pg`, whose copy this OSD no longer holds (its rows go with
    /// the PG's, see `pglog::delete_pg`).
    pub fn remove_pg(&self, pg: PgId) {
        if let Some(set) = self.objects().remove(&pg) {
            self.count.fetch_sub(set.len(), Ordering::Relaxed);
        }
    }

    /// Writes or (`None`) deletes `object`'s row. Failing only costs the report after a
    /// restart (a read or a scrub finds the damage again), so it is logged, not returned.
    fn record(store: &ObjectStore, pg: PgId, object: &ObjectName, kind: Option<Kind>) {
        let written = ObjectKey::new(pg.pool, object).and_then(|key| {
            let mut txn = Transaction::new();
            match kind {
                Some(kind) => txn.put_meta(&pg_damage_key(pg, &key), kind.row_value().to_vec()),
                None => txn.delete_meta(&pg_damage_key(pg, &key)),
            }
            store.commit(txn)
        });
        if let Err(e) = written {
            tracing::warn!(%pg, %object, error = %e, "recording a damaged object in the store failed");
        }
    }

    /// What is wrong with `object`, if it is recorded as damaged (no lock taken while
    /// nothing is).
    pub fn get(&self, pg: PgId, object: &ObjectName) -> Option<Kind> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.objects().get(&pg).and_then(|s| s.get(object).copied())
    }

    /// Whether `object` is recorded as damaged.
    pub fn contains(&self, pg: PgId, object: &ObjectName) -> bool {
        self.get(pg, object).is_some()
    }

    /// Whether `pg` has damaged objects.
    pub fn in_pg(&self, pg: PgId) -> bool {
        self.count.load(Ordering::Relaxed) > 0 && self.objects().contains_key(&pg)
    }

    /// Every damaged object.
    pub fn list(&self) -> Vec<(PgId, ObjectName, Kind)> {
        self.objects().iter().flat_map(|(pg, set)| set.iter().map(|(o, kind)| (*pg, o.clone(), *kind))).collect()
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
        damage.add(&store, pg, &a, Kind::Unreadable);
        damage.add(&store, pg, &a, Kind::Unreadable);
        damage.add(&store, other, &b, Kind::Unfound);
        damage.add(&store, other, &b, Kind::Unreadable);
        assert!(damage.contains(pg, &a) && damage.in_pg(pg) && damage.in_pg(other));
        assert_eq!(damage.get(other, &b), Some(Kind::Unfound), "an unfound object stays unfound");
        assert_eq!(damage.list(), vec![(pg, a.clone(), Kind::Unreadable), (other, b.clone(), Kind::Unfound)]);
        let reloaded = Damage::load(&store).unwrap();
        assert_eq!(reloaded.list(), damage.list(), "a restarted OSD reports the same damage");
        assert_eq!(reloaded.count.load(Ordering::Relaxed), 2);
        damage.remove(&store, other, &a);
        assert!(damage.contains(pg, &a));
        damage.remove(&store, pg, &a);
        assert!(!damage.contains(pg, &a) && !damage.in_pg(pg));
        let reloaded = Damage::load(&store).unwrap().list();
        assert_eq!(reloaded, vec![(other, b.clone(), Kind::Unfound)], "the repair is recorded too");
        damage.remove_pg(other);
        assert!(damage.list().is_empty());
        assert_eq!(damage.count.load(Ordering::Relaxed), 0);
    }
}
