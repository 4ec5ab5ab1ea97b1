//! Placement as pure functions of the map: object → PG, PG → ordered OSDs.
//!
//! Every client and OSD must compute the same answer from the same map, so nothing here
//! reads the clock, randomness or any IO, and the hashes are fixed forever.

pub mod hash;
pub mod straw2;

use shoal_types::erasure::FailureDomain;
use shoal_types::{ObjectName, OsdId, OsdMap, PgId, Pool};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;

/// The 32-bit placement hash of an object name. A non-empty namespace is hashed with the
/// name, joined by 0x1f, as Ceph does.
pub fn object_hash(name: &ObjectName) -> u32 {
    if name.namespace.is_empty() {
        hash::str_hash(name.name.as_bytes())
    } else {
        let mut key = Vec::with_capacity(name.namespace.len() + 1 + name.name.len());
        key.extend_from_slice(name.namespace.as_bytes());
        key.push(0x1f);
        key.extend_from_slice(name.name.as_bytes());
        hash::str_hash(&key)
    }
}

/// The mask `next_pow2(n) - 1` used by [`stable_mod`].
pub fn pg_mask(pg_num: u32) -> u32 {
    pg_num.max(1).next_power_of_two() - 1
}

/// Ceph's stable modulo: maps `x` into `0..b` so that growing `b` only moves values from
/// a bucket to its new child, never between old buckets.
pub fn stable_mod(x: u32, b: u32, mask: u32) -> u32 {
    if x & mask < b { x & mask } else { x & (mask >> 1) }
}

/// The PG an object hash falls into.
pub fn pg_of_hash(pool: &Pool, hash: u32) -> PgId {
    PgId { pool: pool.id, seed: stable_mod(hash, pool.pg_num, pg_mask(pool.pg_num)) }
}

/// The PG an object belongs to.
pub fn pg_of(pool: &Pool, name: &ObjectName) -> PgId {
    pg_of_hash(pool, object_hash(name))
}

/// The ranges of *bit-reversed* object hashes that belong to PG `seed` when the pool has
/// `pg_num` PGs: one range, or two when `pg_num` is not a power of two. Stores order
/// objects by reversed hash so that each PG is one or two contiguous key ranges.
pub fn pg_reversed_hash_ranges(seed: u32, pg_num: u32) -> Vec<RangeInclusive<u32>> {
    let mask = pg_mask(pg_num);
    let bits = mask.count_ones();
    let half = mask.div_ceil(2);
    let mut low_patterns = vec![seed];
    if seed < half && seed + half >= pg_num {
        low_patterns.push(seed + half);
    }
    low_patterns
        .into_iter()
        .map(|low| {
            if bits == 0 {
                return 0..=u32::MAX;
            }
            let top = low.reverse_bits() >> (32 - bits);
            let span = 32 - bits;
            let start = top << span;
            start..=start | ((1u64 << span) - 1) as u32
        })
        .collect()
}

/// The failure-domain hierarchy placement draws from: hosts holding weighted OSDs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Hosts in a fixed order; each holds OSDs with 16.16 fixed-point weights.
    pub hosts: Vec<Host>,
    /// OSDs that are out: they hold no data.
    pub out: std::collections::BTreeSet<OsdId>,
}

/// A failure domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    /// Unique host name.
    pub name: String,
    /// OSDs on the host and their weights (16.16 fixed point, 0x10000 = 1.0).
    pub osds: Vec<(OsdId, u32)>,
}

/// Attempts per replica before giving up, as CRUSH's `choose_total_tries`.
const MAX_TRIES: u32 = 50;
/// Rounds of draws for an erasure-coded PG's shards (Ceph's erasure rules set
/// `choose_tries 100`): with as many hosts as shards, the last shard may find the one free
/// host late.
const SHARD_ROUNDS: u32 = 100;

impl Topology {
    /// The hosts, weights and out OSDs of a map.
    pub fn from_map(map: &OsdMap) -> Self {
        let mut hosts: BTreeMap<&str, Vec<(OsdId, u32)>> = BTreeMap::new();
        for (&id, osd) in &map.osds {
            hosts.entry(osd.host.as_str()).or_default().push((id, osd.weight));
        }
        Topology {
            hosts: hosts.into_iter().map(|(name, osds)| Host { name: name.to_owned(), osds }).collect(),
            out: map.osds.iter().filter(|(_, o)| !o.is_in).map(|(id, _)| *id).collect(),
        }
    }

    /// One host holding one OSD of weight 1.0: the embedded, single-OSD layout.
    pub fn single(osd: OsdId) -> Self {
        Topology { hosts: vec![Host { name: "localhost".into(), osds: vec![(osd, 0x10000)] }], out: Default::default() }
    }

    /// An OSD's weight for replicated placement: none once it is out.
    fn weight(&self, osd: OsdId, weight: u32) -> u32 {
        if self.out.contains(&osd) { 0 } else { weight }
    }

    /// The ordered OSDs (primary first) of a PG: up to `pool.size` distinct OSDs on
    /// distinct hosts, then, if there are too few hosts, distinct OSDs on any host.
    pub fn pg_to_osds(&self, pool: &Pool, pg: PgId) -> Vec<OsdId> {
        let x = hash::hash2(pg.seed, pg.pool.0 as u32);
        let size = pool.size as usize;
        let host_weight = |h: &Host| h.osds.iter().map(|&(o, w)| self.weight(o, w)).fold(0u32, u32::saturating_add);
        let mut chosen: Vec<OsdId> = Vec::with_capacity(size);
        let mut used_hosts: Vec<usize> = Vec::new();
        let mut r = 0u32;
        while chosen.len() < size && r < MAX_TRIES * pool.size {
            let host =
                straw2::choose(x, r, self.hosts.iter().enumerate().map(|(i, h)| (-(i as i32) - 1, host_weight(h))));
            r += 1;
            let Some(host) = host.map(|id| (-id - 1) as usize) else { break };
            if used_hosts.contains(&host) {
                continue;
            }
            let osds = &self.hosts[host].osds;
            if let Some(osd) = straw2::choose(x, r, osds.iter().map(|&(o, w)| (o.0 as i32, self.weight(o, w)))) {
                used_hosts.push(host);
                chosen.push(OsdId(osd as u32));
            }
        }
        // Fewer hosts than replicas: fill from any host, still distinct OSDs.
        let mut r = 0u32;
        while chosen.len() < size && r < MAX_TRIES * pool.size {
            let all = self.hosts.iter().flat_map(|h| h.osds.iter()).filter(|(o, _)| !chosen.contains(o));
            match straw2::choose(x, r + 1000, all.map(|&(o, w)| (o.0 as i32, self.weight(o, w)))) {
                Some(osd) => chosen.push(OsdId(osd as u32)),
                None => break,
            }
            r += 1;
        }
        chosen
    }

    /// The OSD of each shard of an erasure-coded PG, by position (CRUSH's `indep` mode).
    /// Draws go in rounds: in round `t`, every shard still without an OSD draws with
    /// `r = shard + t·size` and keeps the OSD unless another shard holds it (or its host,
    /// for a host failure domain). The draw is made as if no OSD were out; then only the
    /// shards of out OSDs are drawn again (first within their host), every other shard
    /// keeping its OSD, so an OSD going out moves only the shards it held and no copy
    /// changes position. `None`: no OSD was found for the shard (too few hosts for a host
    /// failure domain).
    pub fn pg_to_shards(&self, pool: &Pool, pg: PgId, domain: FailureDomain) -> Vec<Option<OsdId>> {
        let none_out = self.draw_shards(pool, pg, domain, vec![None; pool.size as usize], &BTreeSet::new());
        let kept: Vec<Option<(OsdId, usize)>> =
            none_out.into_iter().map(|s| s.filter(|(osd, _)| !self.out.contains(osd))).collect();
        let shards = self.draw_shards(pool, pg, domain, kept, &self.out);
        shards.into_iter().map(|s| s.map(|(osd, _)| osd)).collect()
    }

    /// Fills the shards without an OSD (`shards`: OSD and host index) by rounds of draws,
    /// rejecting the OSDs in `out`.
    fn draw_shards(
        &self,
        pool: &Pool,
        pg: PgId,
        domain: FailureDomain,
        mut shards: Vec<Option<(OsdId, usize)>>,
        out: &BTreeSet<OsdId>,
    ) -> Vec<Option<(OsdId, usize)>> {
        let x = hash::hash2(pg.seed, pg.pool.0 as u32);
        let size = pool.size;
        let crush_weight = |h: &Host| h.osds.iter().map(|&(_, w)| w).fold(0u32, u32::saturating_add);
        let every_osd: Vec<(usize, OsdId, u32)> = self
            .hosts
            .iter()
            .enumerate()
            .flat_map(|(h, host)| host.osds.iter().map(move |&(o, w)| (h, o, w)))
            .collect();
        for round in 0..SHARD_ROUNDS {
            if shards.iter().all(Option::is_some) {
                break;
            }
            for shard in 0..size {
                if shards[shard as usize].is_some() {
                    continue;
                }
                let r = shard + round * size;
                let drawn = match domain {
                    FailureDomain::Host => {
                        let hosts = self.hosts.iter().enumerate().map(|(i, h)| (-(i as i32) - 1, crush_weight(h)));
                        // Within the host, an out OSD is redrawn (as CRUSH's `chooseleaf`
                        // does), so the shard stays on its host while the host has OSDs in.
                        straw2::choose(x, r, hosts).map(|id| (-id - 1) as usize).and_then(|host| {
                            (0..MAX_TRIES).find_map(|t| {
                                let osds = self.hosts[host].osds.iter().map(|&(o, w)| (o.0 as i32, w));
                                let osd = OsdId(straw2::choose(x, r + t * size * MAX_TRIES, osds)? as u32);
                                (!out.contains(&osd)).then_some((osd, host))
                            })
                        })
                    }
                    FailureDomain::Osd => {
                        let weights = every_osd.iter().map(|&(_, o, w)| (o.0 as i32, w));
                        straw2::choose(x, r, weights)
                            .and_then(|o| every_osd.iter().find(|(_, id, _)| id.0 == o as u32).map(|&(h, o, _)| (o, h)))
                    }
                };
                let Some((osd, host)) = drawn else { continue };
                let taken =
                    shards.iter().flatten().any(|&(o, h)| o == osd || (domain == FailureDomain::Host && h == host));
                if !taken && !out.contains(&osd) {
                    shards[shard as usize] = Some((osd, host));
                }
            }
        }
        shards
    }
}

/// The OSDs that serve a PG under `map`: placement's choice minus OSDs that are down. For a
/// replicated pool primary first ([`pg_primary`]); for an erasure-coded pool the OSDs of the
/// shards that are up, in shard order.
pub fn pg_up_osds(map: &OsdMap, pool: &Pool, pg: PgId) -> Vec<OsdId> {
    if pool.erasure.is_some() {
        return pg_up_shards(map, pool, pg).into_iter().flatten().collect();
    }
    let mut osds = Topology::from_map(map).pg_to_osds(pool, pg);
    osds.retain(|o| map.osds.get(o).is_some_and(|e| e.up));
    if let Some(at) = map.primary_temp.get(&pg).and_then(|temp| osds.iter().position(|o| o == temp)) {
        osds[..=at].rotate_right(1);
    }
    osds
}

/// The primary of a PG under `map`: the OSD the map's `primary_temp` names while it is in
/// the acting set, else placement's first OSD up (for an erasure-coded pool the lowest
/// shard up, as in Ceph).
pub fn pg_primary(map: &OsdMap, pool: &Pool, pg: PgId) -> Option<OsdId> {
    acting_primary(map, pg, &pg_acting(map, pool, pg))
}

/// [`pg_primary`] for a PG whose acting set (from [`pg_acting`] or [`pg_up_osds`]) is known.
pub fn acting_primary(map: &OsdMap, pg: PgId, acting: &[OsdId]) -> Option<OsdId> {
    temp_primary(map, pg, acting).or_else(|| acting.iter().copied().find(|o| *o != OsdId::NONE))
}

/// The OSD the map's `primary_temp` makes lead `pg` in place of placement's primary, if it
/// is in `acting` (otherwise the entry does not apply).
pub fn temp_primary(map: &OsdMap, pg: PgId, acting: &[OsdId]) -> Option<OsdId> {
    map.primary_temp.get(&pg).copied().filter(|temp| acting.contains(temp))
}

/// A PG's acting set under `map` as its primary runs it: for a replicated pool the OSDs up,
/// primary first ([`pg_up_osds`]); for an erasure-coded pool one entry per shard, in shard
/// order, with [`OsdId::NONE`] where no OSD serves the shard.
pub fn pg_acting(map: &OsdMap, pool: &Pool, pg: PgId) -> Vec<OsdId> {
    match pool.erasure {
        Some(_) => pg_up_shards(map, pool, pg).into_iter().map(|o| o.unwrap_or(OsdId::NONE)).collect(),
        None => pg_up_osds(map, pool, pg),
    }
}

/// The OSD serving each shard of an erasure-coded PG under `map` (a replicated pool's
/// replicas, in order): `None` where placement found none or its OSD is down. A shard keeps
/// its position, so shard `i` is always chunk `i` of each stripe.
pub fn pg_up_shards(map: &OsdMap, pool: &Pool, pg: PgId) -> Vec<Option<OsdId>> {
    let topology = Topology::from_map(map);
    let shards = match &pool.erasure {
        Some(erasure) => topology.pg_to_shards(pool, pg, erasure.code.failure_domain),
        None => topology.pg_to_osds(pool, pg).into_iter().map(Some).collect(),
    };
    shards.into_iter().map(|o| o.filter(|o| map.osds.get(o).is_some_and(|e| e.up))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::PoolId;

    fn pool(pg_num: u32, size: u32) -> Pool {
        Pool { id: PoolId(1), name: "p".into(), pg_num, size, min_size: 1, erasure: None }
    }

    #[test]
    fn shards_keep_their_positions_when_osds_go_out() {
        // One OSD per host too: there a shard leaves its host, and must still not push
        // another shard out of its position.
        for (domain, per_host) in [(FailureDomain::Host, 2), (FailureDomain::Host, 1), (FailureDomain::Osd, 2)] {
            let before = topology(8, per_host);
            let p = pool(512, 6);
            let mut after = before.clone();
            after.out.extend([OsdId(6), OsdId(3)]);
            let (mut moved, mut held) = (0, 0);
            for seed in 0..p.pg_num {
                let pg = PgId { pool: p.id, seed };
                let (old, new) = (before.pg_to_shards(&p, pg, domain), after.pg_to_shards(&p, pg, domain));
                assert!(old.iter().all(Option::is_some) && new.iter().all(Option::is_some), "{old:?} {new:?}");
                let mut distinct: Vec<OsdId> = new.iter().flatten().copied().collect();
                distinct.sort();
                distinct.dedup();
                assert_eq!(distinct.len(), 6, "shards on distinct OSDs: {new:?}");
                assert!(new.iter().flatten().all(|o| !after.out.contains(o)), "{new:?}");
                if domain == FailureDomain::Host {
                    let mut hosts: Vec<u32> = new.iter().flatten().map(|o| o.0 / per_host as u32).collect();
                    hosts.sort();
                    hosts.dedup();
                    assert_eq!(hosts.len(), 6, "shards on distinct hosts: {new:?}");
                }
                for (a, b) in old.iter().zip(&new) {
                    if a.is_some_and(|o| after.out.contains(&o)) {
                        held += 1;
                    } else if a != b {
                        moved += 1;
                    }
                }
            }
            // Only the shards on the OSDs that went out move.
            assert!(held > 0);
            assert_eq!(moved, 0, "{domain:?}, {per_host} per host: other shards moved ({held} were on out OSDs)");
        }
    }

    #[test]
    fn too_few_hosts_leave_shards_unplaced() {
        let t = topology(3, 2);
        let p = pool(16, 6);
        for seed in 0..16 {
            let pg = PgId { pool: p.id, seed };
            assert_eq!(t.pg_to_shards(&p, pg, FailureDomain::Host).iter().filter(|s| s.is_some()).count(), 3);
            assert_eq!(t.pg_to_shards(&p, pg, FailureDomain::Osd).iter().filter(|s| s.is_some()).count(), 6);
        }
    }

    #[test]
    fn stable_mod_only_splits() {
        for x in 0..5000u32 {
            let h = hash::str_hash(&x.to_le_bytes());
            for n in 1..64u32 {
                let before = stable_mod(h, n, pg_mask(n));
                let after = stable_mod(h, n + 1, pg_mask(n + 1));
                assert!(after == before || after == n, "growing {n}->{} moved {before}->{after}", n + 1);
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn reversed_ranges_cover_exactly_the_pg(hash in proptest::num::u32::ANY, pg_num in 1u32..300) {
            let p = pool(pg_num, 1);
            let pg = pg_of_hash(&p, hash).seed;
            for seed in 0..pg_num {
                let inside = pg_reversed_hash_ranges(seed, pg_num).iter().any(|r| r.contains(&hash.reverse_bits()));
                proptest::prop_assert_eq!(inside, seed == pg, "seed {} hash {:x}", seed, hash);
            }
        }
    }

    fn topology(hosts: usize, per_host: usize) -> Topology {
        Topology {
            hosts: (0..hosts)
                .map(|h| Host {
                    name: format!("h{h}"),
                    osds: (0..per_host).map(|o| (OsdId((h * per_host + o) as u32), 0x10000)).collect(),
                })
                .collect(),
            out: Default::default(),
        }
    }

    #[test]
    fn replicas_land_on_distinct_hosts() {
        let t = topology(3, 2);
        let p = pool(128, 3);
        for seed in 0..128 {
            let osds = t.pg_to_osds(&p, PgId { pool: p.id, seed });
            assert_eq!(osds.len(), 3);
            let mut hosts: Vec<u32> = osds.iter().map(|o| o.0 / 2).collect();
            hosts.sort();
            hosts.dedup();
            assert_eq!(hosts.len(), 3, "pg {seed} -> {osds:?}");
        }
    }

    #[test]
    fn too_few_hosts_still_gives_distinct_osds() {
        let t = topology(1, 3);
        let p = pool(16, 3);
        for seed in 0..16 {
            let mut osds = t.pg_to_osds(&p, PgId { pool: p.id, seed });
            osds.sort();
            osds.dedup();
            assert_eq!(osds.len(), 3);
        }
        assert_eq!(
            Topology::single(OsdId(0)).pg_to_osds(&pool(8, 1), PgId { pool: PoolId(1), seed: 3 }),
            vec![OsdId(0)]
        );
    }

    /// Adding one OSD to ten should move about 1/11 of the data (all of it onto the new
    /// OSD); straw2 must stay within 1.5 times that.
    #[test]
    fn adding_an_osd_moves_close_to_the_ideal_share() {
        for (hosts, per_host, size) in [(10, 1, 3), (10, 1, 1), (5, 2, 3)] {
            let before = topology(hosts, per_host);
            let mut after = before.clone();
            after.hosts.push(Host { name: "new".into(), osds: vec![(OsdId(1000), 0x10000)] });
            let p = pool(2048, size);
            let (mut moved, mut total) = (0usize, 0usize);
            for seed in 0..p.pg_num {
                let pg = PgId { pool: p.id, seed };
                let (old, new) = (before.pg_to_osds(&p, pg), after.pg_to_osds(&p, pg));
                total += old.len();
                moved += old.iter().filter(|o| !new.contains(o)).count();
            }
            let fraction = moved as f64 / total as f64;
            let ideal = 1.0 / (hosts * per_host + 1) as f64;
            eprintln!("{hosts}x{per_host} size {size}: moved {fraction:.4}, ideal {ideal:.4}");
            assert!(
                fraction <= 1.5 * ideal,
                "{hosts}x{per_host} size {size}: moved {fraction:.4} of replicas, ideal {ideal:.4}"
            );
            assert!(fraction >= 0.5 * ideal, "the new OSD took too little: {fraction:.4}");
        }
    }

    #[test]
    fn placement_is_deterministic() {
        let t = topology(4, 3);
        let p = pool(64, 3);
        let a: Vec<_> = (0..64).map(|s| t.pg_to_osds(&p, PgId { pool: p.id, seed: s })).collect();
        let b: Vec<_> = (0..64).map(|s| t.clone().pg_to_osds(&p, PgId { pool: p.id, seed: s })).collect();
        assert_eq!(a, b);
    }
}
