//! The PG autoscaler's arithmetic (Ceph's `pg_autoscaler`): from what each pool stores and
//! what the OSDs its rule uses can hold, the `pg_num` each pool should have so that every
//! OSD carries about `mon_target_pg_per_osd` PG copies.
//!
//! A pool's share of its OSDs is `max(actual, target)`, where *actual* is its raw usage
//! (logical bytes × copies) over their raw capacity and *target* is its
//! `target_size_ratio` (the ratios of pools sharing OSDs scaled down to sum to at most 1).
//! Its proposal is that share of the OSDs' PG budget, divided by its copies, rounded to
//! the nearest power of two and never below `pg_num_min`. A pool's `pg_num` only counts
//! as wrong when the proposal is more than `threshold` times above or below it, so that
//! pools do not flap between neighbouring powers of two.

use crate::Topology;
use shoal_types::autoscale::AutoscaleMode;
use shoal_types::map::MAX_PG_NUM;
use shoal_types::space::{StoreUsage, WHOLE};
use shoal_types::{OsdId, OsdMap, PgStat, Pool, PoolId};
use std::collections::BTreeMap;

/// The knobs of the proposal (central options of the same names).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoscalePolicy {
    /// PG copies each OSD should carry (`mon_target_pg_per_osd`, 100).
    pub target_pg_per_osd: u32,
    /// How far `pg_num` may be from the proposal, as a factor, before it counts as wrong
    /// (`mon_pg_autoscale_threshold`, 3).
    pub threshold: f64,
    /// The fewest PGs proposed for any pool (`mon_pg_autoscale_pg_num_min`, 8).
    pub pg_num_min: u32,
}

impl Default for AutoscalePolicy {
    fn default() -> Self {
        AutoscalePolicy { target_pg_per_osd: 100, threshold: 3.0, pg_num_min: 8 }
    }
}

/// What the OSDs report: the logical bytes each pool stores and each OSD's capacity.
#[derive(Clone, Debug, Default)]
pub struct Usage {
    /// Logical bytes per pool (before replication or coding).
    pub pool_bytes: BTreeMap<PoolId, u64>,
    /// Raw bytes each OSD's store can hold (used and available together).
    pub osd_capacity: BTreeMap<OsdId, u64>,
}

impl Usage {
    /// From the primaries' PG reports and the OSDs' store reports.
    pub fn from_reports<'a>(stats: &[PgStat], stores: impl IntoIterator<Item = (&'a OsdId, &'a StoreUsage)>) -> Usage {
        let mut pool_bytes: BTreeMap<PoolId, u64> = BTreeMap::new();
        for stat in stats {
            *pool_bytes.entry(stat.pg.pool).or_default() += stat.bytes;
        }
        let osd_capacity = stores.into_iter().map(|(osd, u)| (*osd, u.used.saturating_add(u.available))).collect();
        Usage { pool_bytes, osd_capacity }
    }
}

/// One pool's row of `osd pool autoscale-status`.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    /// The pool.
    pub pool: PoolId,
    /// Its name.
    pub name: String,
    /// Logical bytes it stores.
    pub bytes: u64,
    /// Raw bytes per logical byte (replicated: size; erasure-coded: `(k + m) / k`).
    pub rate: f64,
    /// Raw capacity of the OSDs its rule places on (in ones that reported).
    pub raw_capacity: u64,
    /// Its raw usage over that capacity.
    pub ratio: f64,
    /// Its target ratio after scaling with the other pools on the same OSDs.
    pub target_ratio: f64,
    /// The share it is sized for: the larger of the two.
    pub effective_ratio: f64,
    /// Its `pg_num` now.
    pub pg_num: u32,
    /// The `pg_num` proposed, when `pg_num` is more than the threshold away from it.
    pub new_pg_num: Option<u32>,
    /// Its mode.
    pub mode: AutoscaleMode,
}

/// The nearest power of two to `x` (ties and everything below 1 go to 1).
fn nearest_power_of_two(x: f64) -> u32 {
    if x <= 1.0 {
        return 1;
    }
    let below = 2f64.powi(x.log2().floor() as i32);
    let above = below * 2.0;
    let nearest = if x - below < above - x { below } else { above };
    nearest.min(f64::from(MAX_PG_NUM)) as u32
}

/// Raw bytes per logical byte of `pool` (replicated: size; erasure-coded: `(k + m) / k`).
pub fn rate(pool: &Pool) -> f64 {
    match &pool.erasure {
        Some(erasure) => f64::from(erasure.code.k + erasure.code.m) / f64::from(erasure.code.k),
        None => f64::from(pool.size),
    }
}

/// Every pool's row, in pool id order; pools whose rule places on no OSD are left out.
pub fn proposals(map: &OsdMap, usage: &Usage, policy: &AutoscalePolicy) -> Vec<Proposal> {
    let topology = Topology::from_map(map);
    // The OSDs (in) each pool's rule places on; pools on the same OSDs share them.
    let pool_osds: BTreeMap<PoolId, Vec<OsdId>> = map
        .pools
        .values()
        .filter_map(|pool| {
            let osds = topology.placer(pool)?.domains().into_keys();
            let osds: Vec<OsdId> = osds.filter(|o| map.osds.get(o).is_some_and(|e| e.is_in)).collect();
            (!osds.is_empty()).then_some((pool.id, osds))
        })
        .collect();
    let mut target_sums: BTreeMap<&[OsdId], f64> = BTreeMap::new();
    for (id, osds) in &pool_osds {
        *target_sums.entry(osds).or_default() += f64::from(map.autoscale(*id).target_size_ratio) / f64::from(WHOLE);
    }
    pool_osds
        .iter()
        .map(|(id, osds)| {
            let pool = &map.pools[id];
            let settings = map.autoscale(*id);
            let bytes = usage.pool_bytes.get(id).copied().unwrap_or_default();
            let raw_capacity: u64 = osds.iter().filter_map(|o| usage.osd_capacity.get(o)).sum();
            let rate = rate(pool);
            let ratio = match raw_capacity {
                0 => 0.0,
                capacity => bytes as f64 * rate / capacity as f64,
            };
            let target = f64::from(settings.target_size_ratio) / f64::from(WHOLE);
            let target_ratio = target / target_sums[osds.as_slice()].max(1.0);
            let effective_ratio = ratio.max(target_ratio).min(1.0);
            let budget = f64::from(policy.target_pg_per_osd) * osds.len() as f64;
            let proposed = nearest_power_of_two(effective_ratio * budget / f64::from(pool.size))
                .max(policy.pg_num_min.clamp(1, MAX_PG_NUM));
            let far = f64::from(proposed) > f64::from(pool.pg_num) * policy.threshold
                || f64::from(proposed) < f64::from(pool.pg_num) / policy.threshold;
            Proposal {
                pool: *id,
                name: pool.name.clone(),
                bytes,
                rate,
                raw_capacity,
                ratio,
                target_ratio,
                effective_ratio,
                pg_num: pool.pg_num,
                new_pg_num: far.then_some(proposed),
                mode: settings.mode,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::autoscale::AutoscaleChange;
    use shoal_types::{OsdEntry, PoolSpec};

    fn cluster(osds: u32) -> OsdMap {
        let mut map = OsdMap::default();
        for id in 0..osds {
            let entry =
                OsdEntry { addr: String::new(), host: format!("h{id}"), weight: 0x10000, up: true, is_in: true };
            map.osds.insert(OsdId(id), entry);
        }
        map.crush = map.crush_view();
        map
    }

    #[test]
    fn powers_of_two_round_to_the_nearest() {
        let cases = [(0.0, 1), (1.0, 1), (1.4, 1), (1.6, 2), (95.0, 64), (97.0, 128), (1e9, MAX_PG_NUM)];
        for (x, expected) in cases {
            assert_eq!(nearest_power_of_two(x), expected, "{x}");
        }
    }

    #[test]
    fn usage_and_target_ratios_size_pools_for_their_share_of_the_osds() {
        let mut map = cluster(10);
        let spec = |name: &str, pg_num| PoolSpec { pg_num, ..PoolSpec::named(name, 2) };
        let busy = map.create(&spec("busy", 8)).unwrap().id;
        let empty = map.create(&spec("empty", 8)).unwrap().id;
        let big = map.create(&spec("big", 512)).unwrap().id;
        let mut usage = Usage { osd_capacity: (0..10).map(|o| (OsdId(o), 100 << 30)).collect(), ..Usage::default() };
        // busy: 250 GiB × 2 copies of 1,000 GiB raw = 0.5 of 10 × 100 PG copies, over 2
        // copies: 250, nearest power of two 256.
        usage.pool_bytes.insert(busy, 250 << 30);
        let rows = proposals(&map, &usage, &AutoscalePolicy::default());
        let row = |id: PoolId| rows.iter().find(|r| r.pool == id).unwrap().clone();
        assert_eq!((row(busy).ratio, row(busy).new_pg_num), (0.5, Some(256)));
        assert_eq!(row(empty).new_pg_num, None, "an empty pool at pg_num_min is right");
        assert_eq!(row(big).new_pg_num, Some(8), "512 PGs for nothing are 64 times too many");
        assert_eq!(row(big).mode, AutoscaleMode::On);

        // A target ratio sizes a pool before its data arrives; targets summing past 1 are
        // scaled down together.
        for (pool, ratio) in [("empty", 7_500), ("big", 7_500)] {
            let change = AutoscaleChange { pool: pool.into(), mode: None, target_size_ratio: Some(ratio) };
            change.apply(&mut map).unwrap();
        }
        let rows = proposals(&map, &usage, &AutoscalePolicy::default());
        let row = |id: PoolId| rows.iter().find(|r| r.pool == id).unwrap().clone();
        assert_eq!(row(empty).target_ratio, 0.5);
        assert_eq!((row(empty).effective_ratio, row(empty).new_pg_num), (0.5, Some(256)));
        assert_eq!(row(big).new_pg_num, None, "256 is within 3 times of 512");
        // Fewer OSDs, fewer PGs: with the capacity unknown, only targets count.
        let rows = proposals(&map, &Usage::default(), &AutoscalePolicy { threshold: 1.0, ..Default::default() });
        assert_eq!(rows.iter().find(|r| r.pool == busy).unwrap().new_pg_num, None, "8 is the floor");
        map.osds.values_mut().skip(5).for_each(|o| o.is_in = false);
        let rows = proposals(&map, &usage, &AutoscalePolicy::default());
        assert_eq!(rows.iter().find(|r| r.pool == empty).unwrap().new_pg_num, Some(128));
    }
}
