//! Changing a pool's PG count while it serves (Ceph's `pg_num` and `pgp_num`).
//!
//! Raising `pg_num` splits every PG at once: each child inherits its parent's history
//! (its activation record and upmap exceptions here; its log and record on every OSD) and
//! stays where its parent is, because placement hashes the *placement seed*
//! `stable_mod(seed, pgp_num)`, and `pgp_num` has not moved yet. The leader monitor then
//! raises `pgp_num` towards `pg_num` in steps, each moving few enough PGs
//! ([`next_pgp_num`]), so that children spread over the cluster a little at a time.
//!
//! Lowering `pg_num` merges each *source* PG (seed ≥ the new count) into its *target*
//! ([`ancestor`] under the new count), in three steps the leader monitor takes: `pgp_num`
//! comes down to the new count in steps, which brings every source onto its target's OSDs
//! (sources are placed with their targets' upmap exceptions); once every PG is
//! active+clean the pool's PGs are paused ([`OsdMap::pause_merge`]: primaries serve no
//! client operation and report when their copies have settled); once every primary has
//! reported so, `pg_num` drops ([`OsdMap::finish_merge`]) and each OSD merges its copies
//! before it works under that map.

use crate::error::{Result, err};
use crate::ids::{PgId, PoolId};
pub use crate::map::{MAX_PG_NUM, PgMerge, PgResize};
use crate::map::{OsdMap, PgMerged};

/// The mask `next_pow2(n) - 1` used by [`stable_mod`].
pub fn pg_mask(pg_num: u32) -> u32 {
    pg_num.max(1).next_power_of_two() - 1
}

/// Ceph's stable modulo: maps `x` into `0..b` so that growing `b` only moves values from
/// a bucket to its new child, never between old buckets.
pub fn stable_mod(x: u32, b: u32, mask: u32) -> u32 {
    if x & mask < b { x & mask } else { x & (mask >> 1) }
}

/// The PG that `seed` belonged to when the pool had `pg_num` PGs (itself if it existed).
pub fn ancestor(seed: u32, pg_num: u32) -> u32 {
    stable_mod(seed, pg_num, pg_mask(pg_num))
}

impl OsdMap {
    /// The pool's `pgp_num`: its `pg_num` unless placement is catching up with a change.
    pub fn pgp_num(&self, pool: PoolId) -> u32 {
        match (self.pg_resize.get(&pool), self.pools.get(&pool)) {
            (Some(resize), _) => resize.pgp_num,
            (None, Some(pool)) => pool.pg_num,
            (None, None) => 0,
        }
    }

    /// The seed placement hashes for `pg` (its ancestor under `pgp_num`).
    pub fn placement_seed(&self, pg: PgId) -> u32 {
        match self.pg_resize.get(&pg.pool) {
            Some(resize) => ancestor(pg.seed, resize.pgp_num),
            None => pg.seed,
        }
    }

    /// Sets the pool's `pg_num` (`osd pool set POOL pg_num N`). Raising it splits every PG:
    /// each new PG inherits its parent's activation record and upmap exceptions, and
    /// `pgp_num` stays, to be raised by the leader in steps. Lowering it starts a merge
    /// (see the module): `pgp_num` goes down to `N` first, and every source takes its
    /// target's upmap exceptions. Erasure-coded pools do not merge yet; a pool that is
    /// merging takes no other count until the merge is done.
    pub fn set_pg_num(&mut self, name: &str, pg_num: u32) -> Result<()> {
        let pool = self.pool_named(name)?.clone();
        if pg_num == 0 || pg_num > MAX_PG_NUM {
            return Err(err::invalid(format!("pg_num must be in 1..={MAX_PG_NUM}, got {pg_num}")));
        }
        if let Some(merge) = self.pg_merge.get(&pool.id) {
            return Err(err::busy(format!(
                "pool '{name}' is merging its {} PGs to {}: wait until it is done",
                pool.pg_num, merge.pg_num
            )));
        }
        if pg_num == pool.pg_num {
            return Ok(());
        }
        let pgp_num = self.pgp_num(pool.id);
        if pg_num < pool.pg_num {
            if pool.erasure.is_some() {
                return Err(err::not_supported(format!(
                    "pool '{name}' is erasure-coded: merging its PGs (lowering pg_num) is not supported yet"
                )));
            }
            self.pg_merge.insert(pool.id, PgMerge { pg_num, paused: 0 });
            self.pg_resize.insert(pool.id, PgResize { pgp_num, pgp_num_target: pgp_num.min(pg_num) });
            self.epoch += 1;
            return Ok(());
        }
        for seed in pool.pg_num..pg_num {
            let child = PgId { pool: pool.id, seed };
            let parent = PgId { pool: pool.id, seed: ancestor(seed, pool.pg_num) };
            if let Some(record) = self.pg_active.get(&parent).cloned() {
                self.pg_active.insert(child, record);
            }
            if let Some(items) = self.pg_upmap_items.get(&parent).cloned() {
                self.pg_upmap_items.insert(child, items);
            }
        }
        if let Some(p) = self.pools.get_mut(&pool.id) {
            p.pg_num = pg_num;
        }
        self.pg_resize.insert(pool.id, PgResize { pgp_num, pgp_num_target: pg_num });
        self.epoch += 1;
        Ok(())
    }

    /// Each source PG of `pool` going from `from` PGs to `to`, with its target.
    pub fn merge_pairs(&self, pool: PoolId, from: u32, to: u32) -> Vec<(PgId, PgId)> {
        (to..from).map(|seed| (PgId { pool, seed }, PgId { pool, seed: ancestor(seed, to) })).collect()
    }

    /// The PG whose upmap exceptions place `pg`: its target while it is a source of a
    /// merge, else itself.
    pub fn upmap_pg(&self, pg: PgId) -> PgId {
        match self.pg_merge.get(&pg.pool) {
            Some(merge) if pg.seed >= merge.pg_num => PgId { pool: pg.pool, seed: ancestor(pg.seed, merge.pg_num) },
            _ => pg,
        }
    }

    /// Whether `pool`'s PGs are paused for a merge: they serve no client operation.
    pub fn merge_paused(&self, pool: PoolId) -> bool {
        self.pg_merge.get(&pool).is_some_and(|m| m.paused > 0)
    }

    /// Pauses `pool`'s PGs for their merge (its `pgp_num` is down to the new count, so
    /// every source is on its target's OSDs).
    pub fn pause_merge(&mut self, pool: PoolId) -> Result<()> {
        let pgp_num = self.pgp_num(pool);
        let epoch = self.epoch + 1;
        let merge =
            self.pg_merge.get_mut(&pool).ok_or_else(|| err::not_found(format!("pool {pool} is not merging")))?;
        if pgp_num > merge.pg_num {
            return Err(err::busy(format!("pool {pool}: pgp_num {pgp_num} is not down to {} yet", merge.pg_num)));
        }
        merge.paused = epoch;
        self.epoch = epoch;
        Ok(())
    }

    /// Drops `pool`'s `pg_num` to its merge's target (every copy settled while paused):
    /// each target keeps the newer activation record of itself and its sources, whose
    /// records and exceptions go; [`OsdMap::pg_merged`] keeps every PG's interval under
    /// the pause, for OSDs that merge their copies later.
    pub fn finish_merge(&mut self, pool: PoolId) -> Result<()> {
        let merge =
            self.pg_merge.get(&pool).cloned().ok_or_else(|| err::not_found(format!("pool {pool} is not merging")))?;
        if merge.paused == 0 {
            return Err(err::busy(format!("pool {pool}: its PGs are not paused for the merge yet")));
        }
        let from = self.pool(pool)?.pg_num;
        let active = self.pg_active.range(PgId { pool, seed: 0 }..=PgId { pool, seed: u32::MAX });
        let active = active.map(|(pg, record)| (pg.seed, record.interval)).collect();
        self.pg_merged.insert(pool, PgMerged { from, to: merge.pg_num, active });
        for (source, target) in self.merge_pairs(pool, from, merge.pg_num) {
            if let Some(record) = self.pg_active.remove(&source) {
                let newer = self.pg_active.get(&target).is_none_or(|t| t.interval < record.interval);
                if newer {
                    self.pg_active.insert(target, record);
                }
            }
            self.pg_upmap_items.remove(&source);
            self.primary_temp.remove(&source);
        }
        if let Some(p) = self.pools.get_mut(&pool) {
            p.pg_num = merge.pg_num;
        }
        self.pg_merge.remove(&pool);
        if self.pg_resize.get(&pool).is_some_and(|r| r.pgp_num == merge.pg_num && r.pgp_num_target == merge.pg_num) {
            self.pg_resize.remove(&pool);
        }
        self.epoch += 1;
        Ok(())
    }

    /// Sets where the pool's `pgp_num` goes (`osd pool set POOL pgp_num N`, `1..=pg_num`);
    /// the leader moves it there in steps.
    pub fn set_pgp_num_target(&mut self, name: &str, target: u32) -> Result<()> {
        let pool = self.pool_named(name)?.clone();
        let most = self.pg_merge.get(&pool.id).map_or(pool.pg_num, |m| m.pg_num);
        if target == 0 || target > most {
            return Err(err::invalid(format!("pgp_num of pool '{name}' must be in 1..={most}, got {target}")));
        }
        let pgp_num = self.pgp_num(pool.id);
        if pgp_num == target && target == pool.pg_num {
            self.pg_resize.remove(&pool.id);
        } else {
            self.pg_resize.insert(pool.id, PgResize { pgp_num, pgp_num_target: target });
        }
        self.epoch += 1;
        Ok(())
    }

    /// Moves the pool's `pgp_num` to `pgp_num` (one of the leader's steps towards its
    /// target); the record of the change goes once `pgp_num` reaches `pg_num`.
    pub fn step_pgp_num(&mut self, pool: PoolId, pgp_num: u32) -> Result<()> {
        let pg_num = self.pool(pool)?.pg_num;
        let resize =
            self.pg_resize.get_mut(&pool).ok_or_else(|| err::not_found(format!("pool {pool} is not resizing")))?;
        if pgp_num == 0 || pgp_num > pg_num {
            return Err(err::invalid(format!("pgp_num must be in 1..={pg_num}, got {pgp_num}")));
        }
        resize.pgp_num = pgp_num;
        if pgp_num == pg_num && resize.pgp_num_target == pg_num {
            self.pg_resize.remove(&pool);
        }
        self.epoch += 1;
        Ok(())
    }
}

/// The next `pgp_num` on the way from `pgp_num` to `target` for a pool of `pg_num` PGs:
/// the furthest step that changes the placement seed of at most `max_misplaced` of the
/// PGs (Ceph's `target_max_misplaced_ratio`), and always at least one.
pub fn next_pgp_num(pg_num: u32, pgp_num: u32, target: u32, max_misplaced: f64) -> u32 {
    let moved = |to: u32| (0..pg_num).filter(|&s| ancestor(s, pgp_num) != ancestor(s, to)).count();
    let allowed = (max_misplaced * f64::from(pg_num)).floor() as usize;
    let mut best = if target > pgp_num { pgp_num + 1 } else { pgp_num.saturating_sub(1).max(target) };
    let candidates: Vec<u32> = if target > pgp_num {
        (pgp_num + 2..=target).collect()
    } else {
        (target..pgp_num.saturating_sub(1)).rev().collect()
    };
    for to in candidates {
        if moved(to) > allowed {
            break;
        }
        best = to;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::PoolSpec;
    use crate::{ActiveInterval, OsdId};

    #[test]
    fn a_child_seed_descends_from_its_parent() {
        for from in 1..64u32 {
            for to in from..130 {
                for hash in [0u32, 1, 7, 0xdead_beef, 0x1234_5678, u32::MAX] {
                    let (old, new) = (ancestor(hash, from), ancestor(hash, to));
                    assert_eq!(ancestor(new, from), old, "hash {hash:x}: {from} -> {to}");
                }
            }
        }
    }

    #[test]
    fn raising_pg_num_gives_children_their_parents_history_and_place() {
        let mut map = OsdMap::default();
        let pool = map.create(&PoolSpec { name: "p".into(), pg_num: 4, size: 2, min_size: 1 }).unwrap();
        let record = ActiveInterval { interval: 7, acting: vec![OsdId(1), OsdId(2)] };
        map.pg_active.insert(PgId { pool: pool.id, seed: 1 }, record.clone());
        map.pg_upmap_items.insert(PgId { pool: pool.id, seed: 1 }, vec![(OsdId(2), OsdId(3))]);
        map.set_pg_num("p", 10).unwrap();
        assert_eq!(map.pools[&pool.id].pg_num, 10);
        assert_eq!(map.pgp_num(pool.id), 4);
        // Children of seed 1 under 4: 5 and 9.
        for seed in [5, 9] {
            let child = PgId { pool: pool.id, seed };
            assert_eq!(map.pg_active.get(&child), Some(&record), "seed {seed}");
            assert_eq!(map.placement_seed(child), 1);
        }
        assert!(!map.pg_active.contains_key(&PgId { pool: pool.id, seed: 6 }));
        assert!(map.set_pg_num("p", 0).is_err() && map.set_pg_num("p", MAX_PG_NUM + 1).is_err());
        assert!(map.set_pgp_num_target("p", 11).is_err());
        // Stepping to pg_num ends the resize.
        map.step_pgp_num(pool.id, 10).unwrap();
        assert!(map.pg_resize.is_empty());
        assert_eq!(map.placement_seed(PgId { pool: pool.id, seed: 9 }), 9);
    }

    #[test]
    fn lowering_pg_num_brings_sources_to_their_targets_pauses_then_merges() {
        let mut map = OsdMap::default();
        let pool = map.create(&PoolSpec { name: "p".into(), pg_num: 8, size: 2, min_size: 1 }).unwrap();
        let pg = |seed| PgId { pool: pool.id, seed };
        let (old, new) = (
            ActiveInterval { interval: 7, acting: vec![OsdId(1), OsdId(2)] },
            ActiveInterval { interval: 9, acting: vec![OsdId(1), OsdId(2)] },
        );
        map.pg_active.insert(pg(1), old.clone());
        map.pg_active.insert(pg(5), new.clone());
        map.pg_active.insert(pg(2), new.clone());
        map.pg_active.insert(pg(6), old.clone());
        map.pg_upmap_items.insert(pg(1), vec![(OsdId(2), OsdId(3))]);
        map.pg_upmap_items.insert(pg(6), vec![(OsdId(1), OsdId(4))]);
        map.set_pg_num("p", 4).unwrap();
        assert_eq!((map.pools[&pool.id].pg_num, map.pgp_num(pool.id)), (8, 8), "nothing merges yet");
        assert_eq!(map.pg_resize[&pool.id].pgp_num_target, 4, "placement comes down first");
        assert_eq!((map.upmap_pg(pg(5)), map.upmap_pg(pg(6)), map.upmap_pg(pg(1))), (pg(1), pg(2), pg(1)));
        assert!(map.set_pg_num("p", 16).unwrap_err().message.contains("merging"));
        assert!(map.set_pgp_num_target("p", 8).is_err(), "placement may not leave the targets");
        assert!(map.pause_merge(pool.id).unwrap_err().message.contains("not down to 4"));
        assert!(map.finish_merge(pool.id).unwrap_err().message.contains("not paused"));
        map.step_pgp_num(pool.id, 4).unwrap();
        assert!(!map.merge_paused(pool.id));
        map.pause_merge(pool.id).unwrap();
        assert!(map.merge_paused(pool.id) && map.pg_merge[&pool.id].paused == map.epoch);
        map.finish_merge(pool.id).unwrap();
        assert_eq!((map.pools[&pool.id].pg_num, map.pgp_num(pool.id)), (4, 4));
        assert!(map.pg_merge.is_empty() && map.pg_resize.is_empty());
        let under_pause = std::collections::BTreeMap::from([(1, 7), (2, 9), (5, 9), (6, 7)]);
        assert_eq!(map.pg_merged[&pool.id], PgMerged { from: 8, to: 4, active: under_pause });
        assert_eq!(map.pg_active.get(&pg(1)), Some(&new), "target 1 takes its source's newer record");
        assert_eq!(map.pg_active.get(&pg(2)), Some(&new), "target 2 keeps its own newer record");
        assert!((4..8).all(|s| !map.pg_active.contains_key(&pg(s)) && !map.pg_upmap_items.contains_key(&pg(s))));
        let spec = crate::erasure::ErasurePoolSpec {
            name: "ec".into(),
            pg_num: 8,
            profile: "default".into(),
            min_size: None,
            allow_overwrites: false,
        };
        map.create_erasure(&spec).unwrap();
        assert!(map.set_pg_num("ec", 4).unwrap_err().message.contains("erasure-coded"));
    }

    #[test]
    fn pgp_steps_stay_under_the_misplaced_ratio() {
        for (pg_num, from) in [(64u32, 16u32), (100, 32), (512, 128), (64, 1)] {
            let mut pgp = from;
            let mut steps = 0;
            while pgp != pg_num {
                let next = next_pgp_num(pg_num, pgp, pg_num, 0.05);
                assert!(next > pgp && next <= pg_num);
                let moved = (0..pg_num).filter(|&s| ancestor(s, pgp) != ancestor(s, next)).count();
                assert!(next == pgp + 1 || moved as f64 <= 0.05 * f64::from(pg_num), "{pgp} -> {next}: {moved}");
                pgp = next;
                steps += 1;
            }
            assert!(steps <= pg_num - from, "{steps} steps");
        }
        // Down as well.
        assert!(next_pgp_num(64, 64, 16, 0.05) < 64);
        assert_eq!(next_pgp_num(64, 17, 16, 0.05), 16);
    }
}
