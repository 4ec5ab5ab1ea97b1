//! How many objects and bytes each PG holds, as its primary counts them: once by reading
//! the PG's object metadata when it starts to lead the PG, then by the difference each
//! write makes. The monitor sums them per pool for `df` and quotas.

use shoal_store::Onode;
use shoal_types::PgId;
use std::collections::BTreeMap;

/// Objects and bytes of object data in one PG (erasure-coded: logical bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PgUsage {
    /// Objects.
    pub objects: u64,
    /// Bytes.
    pub bytes: u64,
}

/// What one write changes in its PG's [`PgUsage`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageDelta {
    objects: i64,
    bytes: i64,
}

impl UsageDelta {
    /// The change from an object's metadata `before` a write to `after` it (`None`: absent).
    pub fn between(before: Option<&Onode>, after: Option<&Onode>) -> Self {
        let count = |o: Option<&Onode>| (i64::from(o.is_some()), o.map_or(0, |o| o.size as i64));
        let ((objects_before, bytes_before), (objects_after, bytes_after)) = (count(before), count(after));
        UsageDelta { objects: objects_after - objects_before, bytes: bytes_after - bytes_before }
    }
}

impl PgUsage {
    /// Counts one more object of `bytes`.
    pub fn add(&mut self, bytes: u64) {
        self.objects += 1;
        self.bytes += bytes;
    }

    fn apply(&mut self, delta: UsageDelta) {
        self.objects = self.objects.saturating_add_signed(delta.objects);
        self.bytes = self.bytes.saturating_add_signed(delta.bytes);
    }
}

/// The usage of the PGs one shard leads, each for the interval it was counted in.
#[derive(Default)]
pub struct UsageBook {
    counted: BTreeMap<PgId, (u64, PgUsage)>,
}

/// Most objects whose metadata one call of `Shard::count_usage` reads: a PG
/// larger than that is counted on its own, so that a shard is held up briefly.
pub const COUNT_BUDGET: usize = 20_000;

impl UsageBook {
    /// The usage of `pg` if it was counted in `interval`.
    pub fn get(&self, pg: PgId, interval: u64) -> Option<PgUsage> {
        self.counted.get(&pg).filter(|(i, _)| *i == interval).map(|(_, usage)| *usage)
    }

    /// Adds a committed write's change to `pg`'s count, if it has one for `interval`.
    pub fn record(&mut self, pg: PgId, interval: u64, delta: UsageDelta) {
        if let Some((i, usage)) = self.counted.get_mut(&pg)
            && *i == interval
        {
            usage.apply(delta);
        }
    }

    /// Forgets every PG not in `led` (PGs this shard no longer leads).
    pub fn retain(&mut self, led: impl Fn(PgId, u64) -> bool) {
        self.counted.retain(|pg, (interval, _)| led(*pg, *interval));
    }

    /// Records `usage`, counted from the store, as `pg`'s for `interval`.
    pub fn insert(&mut self, pg: PgId, interval: u64, usage: PgUsage) {
        self.counted.insert(pg, (interval, usage));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_change_the_count_of_their_interval_only() {
        let pg = PgId { pool: shoal_types::PoolId(1), seed: 0 };
        let mut book = UsageBook::default();
        book.counted.insert(pg, (3, PgUsage { objects: 2, bytes: 10 }));
        let onode = |size| Onode { size, ..Onode::default() };
        book.record(pg, 3, UsageDelta::between(None, Some(&onode(5))));
        assert_eq!(book.get(pg, 3), Some(PgUsage { objects: 3, bytes: 15 }));
        book.record(pg, 3, UsageDelta::between(Some(&onode(5)), Some(&onode(2))));
        book.record(pg, 3, UsageDelta::between(Some(&onode(10)), None));
        assert_eq!(book.get(pg, 3), Some(PgUsage { objects: 2, bytes: 2 }));
        book.record(pg, 4, UsageDelta::between(None, Some(&onode(7))));
        assert_eq!((book.get(pg, 3), book.get(pg, 4)), (Some(PgUsage { objects: 2, bytes: 2 }), None));
        // A count never goes below zero, whatever the deltas say.
        book.record(pg, 3, UsageDelta::between(Some(&onode(100)), None));
        book.record(pg, 3, UsageDelta::between(Some(&onode(100)), None));
        book.record(pg, 3, UsageDelta::between(Some(&onode(100)), None));
        assert_eq!(book.get(pg, 3), Some(PgUsage { objects: 0, bytes: 0 }));
        book.retain(|_, interval| interval != 3);
        assert_eq!(book.get(pg, 3), None);
    }
}
