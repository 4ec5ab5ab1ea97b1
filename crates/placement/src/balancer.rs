//! The balancer: upmap exceptions (`pg_upmap_items`) that even out how many copies of each
//! pool every OSD holds against what its weights entitle it to, as Ceph's upmap balancer
//! does. Pure: a map in, the PGs whose exceptions change out.
//!
//! Per pool, while some OSD holds more than `max_deviation` copies over its fair share (or
//! more than twice that under it, and another OSD holds more), one copy of one of the
//! fullest OSD's PGs moves to the most underfull OSD that keeps the rule's failure
//! domains apart and ends no fuller than the source was. A copy moved before is moved on
//! by rewriting its item, so a PG keeps at most one item per copy.

use crate::Topology;
use shoal_types::{OsdId, OsdMap, PgId, Pool};
use std::collections::{BTreeMap, BTreeSet};

/// How evenly a pool's copies lie over the OSDs its rule can use: each OSD's copies over
/// its fair share (the pool's copies times its share of the weight, CRUSH weight times
/// override weight, out OSDs weighing nothing).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spread {
    /// The fullest OSD's copies over its fair share.
    pub max_over_fair: f64,
    /// The emptiest OSD's.
    pub min_over_fair: f64,
    /// The standard deviation of copies per OSD from fair shares, in copies.
    pub stddev: f64,
}

/// A pool's copies per OSD and what each OSD's weight entitles it to.
struct Tally {
    /// Per PG seed, its copies' OSDs (`None`: no OSD found).
    placed: Vec<Vec<Option<OsdId>>>,
    /// Per OSD the rule can use: copies held, fair share, failure-domain bucket.
    osds: BTreeMap<OsdId, Held>,
    /// Per OSD, the PGs (seeds) with a copy on it.
    pgs_on: BTreeMap<OsdId, BTreeSet<u32>>,
}

#[derive(Clone, Copy, Debug)]
struct Held {
    copies: usize,
    fair: f64,
    domain: usize,
}

impl Held {
    fn excess(&self) -> f64 {
        self.copies as f64 - self.fair
    }
}

impl Tally {
    fn new(map: &OsdMap, topology: &Topology, pool: &Pool) -> Option<Tally> {
        let placer = topology.placer(pool)?;
        let placed: Vec<Vec<Option<OsdId>>> =
            (0..pool.pg_num).map(|seed| topology.raw_shards(map, pool, PgId { pool: pool.id, seed })).collect();
        let weight = |osd: &OsdId, crush: u32| {
            let is_in = map.osds.get(osd).is_some_and(|o| o.is_in);
            let reweight = map.osd_reweight.get(osd).map_or(1.0, |r| f64::from(*r) / 65536.0);
            if is_in { f64::from(crush) * reweight } else { 0.0 }
        };
        let domains = placer.domains();
        let total_weight: f64 = domains.iter().map(|(osd, (w, _))| weight(osd, *w)).sum();
        let copies = placed.iter().flatten().flatten().count() as f64;
        let mut osds: BTreeMap<OsdId, Held> = domains
            .iter()
            .filter(|(osd, (w, _))| weight(osd, *w) > 0.0)
            .map(|(osd, (w, domain))| {
                let fair = copies * weight(osd, *w) / total_weight;
                (*osd, Held { copies: 0, fair, domain: *domain })
            })
            .collect();
        let mut pgs_on: BTreeMap<OsdId, BTreeSet<u32>> = BTreeMap::new();
        for (seed, shards) in placed.iter().enumerate() {
            for osd in shards.iter().flatten() {
                pgs_on.entry(*osd).or_default().insert(seed as u32);
                if let Some(held) = osds.get_mut(osd) {
                    held.copies += 1;
                }
            }
        }
        Some(Tally { placed, osds, pgs_on })
    }

    fn spread(&self) -> Spread {
        let ratios: Vec<f64> = self.osds.values().map(|h| h.copies as f64 / h.fair).collect();
        let n = self.osds.len().max(1) as f64;
        let variance = self.osds.values().map(|h| h.excess().powi(2)).sum::<f64>() / n;
        Spread {
            max_over_fair: ratios.iter().copied().fold(0.0, f64::max),
            min_over_fair: ratios.iter().copied().reduce(f64::min).unwrap_or(0.0),
            stddev: variance.sqrt(),
        }
    }

    /// Moves one copy off `from` onto the most underfull OSD that takes it; the PG moved
    /// and the OSD, if any.
    fn move_one(&mut self, from: OsdId) -> Option<(u32, OsdId)> {
        let source = self.osds[&from];
        let mut takers: Vec<(OsdId, Held)> =
            self.osds.iter().map(|(o, h)| (*o, *h)).filter(|(_, h)| h.excess() + 1.0 < source.excess()).collect();
        takers.sort_by(|a, b| a.1.excess().total_cmp(&b.1.excess()).then(a.0.cmp(&b.0)));
        for &seed in self.pgs_on.get(&from)? {
            let shards = &self.placed[seed as usize];
            let others: BTreeSet<usize> = shards
                .iter()
                .flatten()
                .filter(|o| **o != from)
                .filter_map(|o| self.osds.get(o).map(|h| h.domain))
                .collect();
            let fits = |(to, held): &&(OsdId, Held)| !shards.contains(&Some(*to)) && !others.contains(&held.domain);
            if let Some((to, _)) = takers.iter().find(fits) {
                return Some((seed, *to));
            }
        }
        None
    }

    /// Puts PG `seed`'s copy on `from` on `to`.
    fn apply_move(&mut self, seed: u32, from: OsdId, to: OsdId) {
        for slot in self.placed[seed as usize].iter_mut().filter(|s| **s == Some(from)) {
            *slot = Some(to);
        }
        self.pgs_on.entry(from).or_default().remove(&seed);
        self.pgs_on.entry(to).or_default().insert(seed);
        self.osds.entry(from).and_modify(|h| h.copies -= 1);
        self.osds.entry(to).and_modify(|h| h.copies += 1);
    }
}

/// How evenly `pool`'s copies lie under `map` (`None`: its rule places nothing).
pub fn spread(map: &OsdMap, pool: &Pool) -> Option<Spread> {
    Some(Tally::new(map, &Topology::from_map(map), pool)?.spread())
}

/// Up to `max_changes` moves of one copy each, over every pool, that bring each OSD
/// within `max_deviation` copies of its fair share where the rules allow: the PGs whose
/// exceptions change, each with its new list (empty: the PG loses its exceptions).
pub fn optimize(map: &OsdMap, max_changes: usize, max_deviation: f64) -> BTreeMap<PgId, Vec<(OsdId, OsdId)>> {
    let topology = Topology::from_map(map);
    let mut changed: BTreeMap<PgId, Vec<(OsdId, OsdId)>> = BTreeMap::new();
    let mut moves = 0;
    for pool in map.pools.values() {
        let Some(mut tally) = Tally::new(map, &topology, pool) else { continue };
        let mut stuck: BTreeSet<OsdId> = BTreeSet::new();
        while moves < max_changes {
            // Copies move off OSDs over their share, and onto OSDs under it (a new host)
            // from whichever OSD holds the most. Under takes twice the deviation over
            // does, so that fair shares shifting by a fraction of a copy (a weight changed
            // elsewhere) move nothing on a balanced cluster.
            let emptiest = tally.osds.values().map(Held::excess).fold(f64::MAX, f64::min);
            let short = emptiest < -2.0 * max_deviation;
            let gives = |h: &Held| h.excess() > max_deviation || short && h.excess() > emptiest + 1.0;
            let fullest = tally
                .osds
                .iter()
                .filter(|(o, h)| !stuck.contains(o) && gives(h))
                .max_by(|a, b| a.1.excess().total_cmp(&b.1.excess()).then(b.0.cmp(a.0)))
                .map(|(o, _)| *o);
            let Some(from) = fullest else { break };
            let Some((seed, to)) = tally.move_one(from) else {
                stuck.insert(from);
                continue;
            };
            let pg = PgId { pool: pool.id, seed };
            let items = changed.entry(pg).or_insert_with(|| map.pg_upmap_items.get(&pg).cloned().unwrap_or_default());
            remap(items, from, to);
            tally.apply_move(seed, from, to);
            moves += 1;
        }
    }
    changed.retain(|pg, items| map.pg_upmap_items.get(pg).map_or(!items.is_empty(), |old| old != items));
    changed
}

/// Upmap exceptions that keep each replicated PG's copies on the OSDs `before` placed them
/// on where `after` would move them between OSDs that are both in (as pgremapper's
/// `cancel-backfill` does for Ceph): a change of weights or of the CRUSH tree then moves no
/// data, and the balancer moves it later, in its steps. A copy whose OSD went out, or whose
/// staying would break the rule, moves as placement says. Pools that are merging or
/// erasure-coded are left alone. Returns the PGs whose exceptions change.
pub fn keep_placement(before: &OsdMap, after: &OsdMap) -> BTreeMap<PgId, Vec<(OsdId, OsdId)>> {
    let (was, is) = (Topology::from_map(before), Topology::from_map(after));
    let mut changed = BTreeMap::new();
    for pool in after.pools.values().filter(|p| p.erasure.is_none() && !after.pg_merge.contains_key(&p.id)) {
        let Some(old_pool) = before.pools.get(&pool.id).filter(|p| p.pg_num == pool.pg_num) else { continue };
        let Some(domains) = is.placer(pool).map(|p| p.domains()) else { continue };
        let domain = |o: &OsdId| domains.get(o).map(|d| d.1);
        for seed in 0..pool.pg_num {
            let pg = PgId { pool: pool.id, seed };
            let old: Vec<OsdId> = was.raw_shards(before, old_pool, pg).into_iter().flatten().collect();
            let placed = is.raw_shards(after, pool, pg);
            if placed.iter().all(|o| o.is_some_and(|o| old.contains(&o))) {
                continue;
            }
            let crush = is.crush_shards(after, pool, pg);
            let usable = |o: &OsdId| after.osds.get(o).is_some_and(|e| e.is_in && e.weight > 0);
            let mut leave: Vec<OsdId> = crush.iter().flatten().filter(|o| !old.contains(o)).copied().collect();
            let mut items = Vec::new();
            for stay in old.iter().filter(|o| !crush.contains(&Some(**o)) && usable(o)) {
                // The copy placement puts in the staying copy's failure domain gives way
                // first, so the domains stay apart.
                let Some(at) =
                    leave.iter().position(|l| domain(l) == domain(stay)).or((!leave.is_empty()).then_some(0))
                else {
                    break;
                };
                items.push((leave.remove(at), *stay));
            }
            let mut kept = crush.clone();
            crate::apply_items(after, &items, &mut kept);
            let staying = |shards: &[Option<OsdId>]| shards.iter().flatten().filter(|o| old.contains(o)).count();
            if staying(&kept) > staying(&placed) && !is.breaks_rule(pool, &kept, &crush) {
                changed.insert(pg, items);
            }
        }
    }
    changed
}

/// Records in a PG's `items` that its copy on `from` goes to `to`: an item that brought the
/// copy to `from` is redirected (or dropped, if it now leads back to its origin).
fn remap(items: &mut Vec<(OsdId, OsdId)>, from: OsdId, to: OsdId) {
    if from == to {
        return;
    }
    if let Some(i) = items.iter().position(|(source, _)| *source == to) {
        // Placement put a copy on `to` that an item sent elsewhere: that copy comes back
        // and the one on `from` goes where it went, so no OSD is named twice.
        let (_, elsewhere) = items.remove(i);
        return remap(items, from, elsewhere);
    }
    match items.iter().position(|(_, target)| *target == from) {
        Some(i) if items[i].0 == to => {
            items.remove(i);
        }
        Some(i) => items[i].1 = to,
        None => items.push((from, to)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::crush::{BucketType, CrushChange, CrushRule};
    use shoal_types::{OsdEntry, PoolId};

    /// `hosts` hosts of `per_host` OSDs and a size-3 pool of `pg_num` PGs, one copy per host.
    fn cluster(hosts: u32, per_host: u32, pg_num: u32) -> (OsdMap, Pool) {
        let mut map = OsdMap::default();
        for id in 0..hosts * per_host {
            let host = format!("h{}", id / per_host);
            map.osds.insert(OsdId(id), OsdEntry { addr: String::new(), host, weight: 0x10000, up: true, is_in: true });
        }
        let rule = CrushRule { root: "default".into(), failure_domain: BucketType::Host, device_class: None };
        CrushChange::CreateRule { name: "by-host".into(), rule }.apply(&mut map).unwrap();
        let pool = Pool {
            id: PoolId(1),
            name: "p".into(),
            pg_num,
            size: 3,
            min_size: 2,
            erasure: None,
            crush_rule: "by-host".into(),
        };
        map.pools.insert(pool.id, pool.clone());
        (map, pool)
    }

    #[test]
    fn the_balancer_evens_copies_out_and_keeps_copies_on_distinct_hosts() {
        let (mut map, pool) = cluster(6, 4, 512);
        // An override weight makes fair shares uneven: osd.0 is entitled to half.
        map.osd_reweight.insert(OsdId(0), 0x8000);
        let before = spread(&map, &pool).unwrap();
        assert!(before.max_over_fair > 1.1, "{before:?}");
        let changes = optimize(&map, 10_000, 1.0);
        assert!(!changes.is_empty());
        map.pg_upmap_items.extend(changes);
        let after = spread(&map, &pool).unwrap();
        assert!(after.max_over_fair < before.max_over_fair && after.stddev < before.stddev, "{before:?} {after:?}");
        let topology = Topology::from_map(&map);
        for seed in 0..pool.pg_num {
            let osds = topology.up_osds(&map, &pool, PgId { pool: pool.id, seed });
            let hosts: BTreeSet<String> = osds.iter().map(|o| map.osds[o].host.clone()).collect();
            assert_eq!((osds.len(), hosts.len()), (3, 3), "pg {seed}: {osds:?}");
            assert!(!topology.upmap_breaks_rule(&map, &pool, PgId { pool: pool.id, seed }));
        }
        // Every OSD within one copy and a bit of its fair share: nothing left to do.
        let copies = f64::from(pool.pg_num * 3);
        let fair_of = |osd: u32| copies * if osd == 0 { 0.5 } else { 1.0 } / 23.5;
        for osd in map.osds.keys() {
            let held = (0..pool.pg_num)
                .filter(|s| topology.up_osds(&map, &pool, PgId { pool: pool.id, seed: *s }).contains(osd))
                .count() as f64;
            assert!(held <= fair_of(osd.0) + 1.0, "{osd}: {held} copies, fair {}", fair_of(osd.0));
        }
        assert!(optimize(&map, 10_000, 1.0).is_empty(), "a balanced map needs no change");
    }

    #[test]
    fn kept_placement_moves_nothing_between_osds_that_stay_in_and_the_balancer_then_fills_a_new_host() {
        let (mut before, pool) = cluster(5, 3, 256);
        before.pg_upmap_items.extend(optimize(&before, usize::MAX, 1.0));
        let mut after = before.clone();
        for id in 15..18 {
            let entry = OsdEntry { addr: String::new(), host: "h5".into(), weight: 0x10000, up: true, is_in: true };
            after.osds.insert(OsdId(id), entry);
        }
        after.osds.get_mut(&OsdId(0)).unwrap().weight = 0x8000;
        after.osds.get_mut(&OsdId(1)).unwrap().is_in = false;
        let up = |map: &OsdMap, seed| {
            let mut osds = Topology::from_map(map).up_osds(map, &pool, PgId { pool: pool.id, seed });
            osds.sort();
            osds
        };
        let moved_by_crush = (0..pool.pg_num).filter(|s| up(&before, *s) != up(&after, *s)).count();
        assert!(moved_by_crush > 100, "{moved_by_crush} PGs move without exceptions");
        after.pg_upmap_items.extend(keep_placement(&before, &after));
        for seed in 0..pool.pg_num {
            let (was, is) = (up(&before, seed), up(&after, seed));
            let gone: Vec<&OsdId> = was.iter().filter(|o| !is.contains(o)).collect();
            assert!(gone.iter().all(|o| **o == OsdId(1)), "pg {seed}: {was:?} -> {is:?}");
            assert!(!Topology::from_map(&after).upmap_breaks_rule(&after, &pool, PgId { pool: pool.id, seed }));
        }
        assert!(keep_placement(&before, &after).is_empty(), "nothing left to keep");
        let on_new_host = |map: &OsdMap| (0..pool.pg_num).filter(|s| up(map, *s).iter().any(|o| o.0 >= 15)).count();
        let had_osd1 = (0..pool.pg_num).filter(|s| up(&before, *s).contains(&OsdId(1))).count();
        assert!(on_new_host(&after) < had_osd1, "only copies of the out OSD went to the new host");
        after.pg_upmap_items.extend(optimize(&after, usize::MAX, 1.0));
        assert!(on_new_host(&after) > 100, "the balancer fills the new host: {}", on_new_host(&after));
        assert!(spread(&after, &pool).unwrap().max_over_fair < 1.1);
    }

    #[test]
    fn a_copy_moved_again_rewrites_its_item() {
        let mut items = vec![(OsdId(1), OsdId(2))];
        remap(&mut items, OsdId(2), OsdId(3));
        assert_eq!(items, vec![(OsdId(1), OsdId(3))]);
        remap(&mut items, OsdId(3), OsdId(1));
        assert!(items.is_empty(), "back where placement put it");
        remap(&mut items, OsdId(4), OsdId(5));
        assert_eq!(items, vec![(OsdId(4), OsdId(5))]);
        remap(&mut items, OsdId(6), OsdId(4));
        assert_eq!(items, vec![(OsdId(6), OsdId(5))], "osd.4 takes its own copy back; osd.6's goes to osd.5");
        remap(&mut items, OsdId(5), OsdId(6));
        assert!(items.is_empty(), "osd.6 takes its copy back from osd.5");
    }

    #[test]
    fn upmap_items_are_skipped_when_their_target_cannot_take_the_copy() {
        let (mut map, pool) = cluster(3, 2, 8);
        let pg = PgId { pool: pool.id, seed: 0 };
        let topology = Topology::from_map(&map);
        let placed = topology.up_osds(&map, &pool, pg);
        let from = placed[1];
        // The other OSD of `from`'s host holds no copy of the PG.
        let sibling = OsdId(from.0 ^ 1);
        map.pg_upmap_items.insert(pg, vec![(from, sibling)]);
        let moved = topology.up_osds(&map, &pool, pg);
        assert_eq!(moved, placed.iter().map(|o| if *o == from { sibling } else { *o }).collect::<Vec<_>>());
        map.osds.get_mut(&sibling).unwrap().is_in = false;
        assert_eq!(topology.up_osds(&map, &pool, pg), placed, "an out target is skipped");
        map.pg_upmap_items.insert(pg, vec![(from, placed[0])]);
        assert_eq!(topology.up_osds(&map, &pool, pg), placed, "a target holding a copy is skipped");
        // The monitor refuses items that put two copies on one host.
        map.osds.get_mut(&sibling).unwrap().is_in = true;
        map.pg_upmap_items.insert(pg, vec![(from, sibling)]);
        assert!(!topology.upmap_breaks_rule(&map, &pool, pg));
        map.pg_upmap_items.insert(pg, vec![(from, OsdId(placed[0].0 ^ 1))]);
        assert!(topology.upmap_breaks_rule(&map, &pool, pg));
    }
}
