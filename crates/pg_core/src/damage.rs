//! Objects whose local copy failed its checksum and has not been repaired: what `shoal
//! status` reports as damage (HEALTH_ERR) until a repair or a rewrite clears it.

use shoal_types::{ObjectName, PgId};
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

    /// Records that `object`'s local copy is damaged.
    pub fn add(&self, pg: PgId, object: &ObjectName) {
        if self.objects().entry(pg).or_default().insert(object.clone()) {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets `object` (repaired, rewritten or removed).
    pub fn remove(&self, pg: PgId, object: &ObjectName) {
        let mut objects = self.objects();
        if let Some(set) = objects.get_mut(&pg)
            && set.remove(object)
        {
            self.count.fetch_sub(1, Ordering::Relaxed);
            if set.is_empty() {
                objects.remove(&pg);
            }
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
    use shoal_types::PoolId;

    #[test]
    fn objects_are_counted_once_and_forgotten_by_pg() {
        let damage = Damage::default();
        let (pg, other) = (PgId { pool: PoolId(1), seed: 3 }, PgId { pool: PoolId(1), seed: 4 });
        let a = ObjectName::new("", "a");
        assert!(!damage.contains(pg, &a) && !damage.in_pg(pg));
        damage.add(pg, &a);
        damage.add(pg, &a);
        assert!(damage.contains(pg, &a) && damage.in_pg(pg) && !damage.in_pg(other));
        assert_eq!(damage.list(), vec![(pg, a.clone())]);
        damage.remove(other, &a);
        assert!(damage.contains(pg, &a));
        damage.remove(pg, &a);
        assert!(!damage.contains(pg, &a) && !damage.in_pg(pg) && damage.list().is_empty());
        assert_eq!(damage.count.load(Ordering::Relaxed), 0);
    }
}
