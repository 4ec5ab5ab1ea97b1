//! Changes to the cluster map, as the monitors agree on them: each is applied by a pure
//! function, so every monitor that applies the same sequence holds the same map.

use serde::{Deserialize, Serialize};
use shoal_types::auth::{AuthEntity, Caps};
use shoal_types::autoscale::AutoscaleChange;
use shoal_types::crush::CrushChange;
use shoal_types::erasure::{ErasurePoolSpec, ErasureProfile};
use shoal_types::msg::Reply;
use shoal_types::pg::{PgStat, PgStateFlag};
use shoal_types::space::SpaceChange;
use shoal_types::{ActiveInterval, OsdEntry, OsdId, OsdMap, PgId, PoolId, PoolSpec, Result, err};
use std::collections::BTreeMap;

/// One change to the cluster map.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MapChange {
    /// Create a pool.
    CreatePool(PoolSpec),
    /// Delete a pool.
    DeletePool(String),
    /// An OSD announced itself: it is up; it is in if it is new, was in, or `back_in`.
    OsdBoot {
        /// The OSD.
        id: OsdId,
        /// Where it listens and its host and weight.
        entry: OsdEntry,
        /// It was marked out by the monitor (not by an operator): mark it in again.
        back_in: bool,
    },
    /// Set a central configuration option.
    ConfigSet {
        /// Whom it applies to.
        who: String,
        /// The option.
        key: String,
        /// Its value.
        value: String,
    },
    /// Remove a central configuration option.
    ConfigRm {
        /// Whom it applied to.
        who: String,
        /// The option.
        key: String,
    },
    /// Set an OSD's CRUSH weight.
    SetOsdWeight {
        /// The OSD.
        id: OsdId,
        /// 16.16 fixed point.
        weight: u32,
    },
    /// Mark an OSD in or out.
    SetOsdIn {
        /// The OSD.
        id: OsdId,
        /// In or out.
        is_in: bool,
    },
    /// Mark an OSD down (its peers reported it silent).
    MarkDown(OsdId),
    /// A primary activated PGs: record each interval that is still the PG's current one
    /// (the PG maps to this acting set, primary first) and not older than the recorded one.
    PgsActivated {
        /// The primary.
        osd: OsdId,
        /// The PGs and their intervals.
        pgs: Vec<(PgId, ActiveInterval)>,
    },
    /// Create an erasure-coded pool.
    CreateErasurePool(ErasurePoolSpec),
    /// Set an erasure-code profile.
    SetErasureProfile {
        /// Its name.
        name: String,
        /// The code and layout.
        profile: ErasureProfile,
        /// Replace an existing profile with other settings.
        force: bool,
    },
    /// Remove an erasure-code profile.
    RemoveErasureProfile(String),
    /// Change the CRUSH hierarchy, classes, rules, a pool's rule or an override weight.
    Crush(CrushChange),
    /// Remove a down OSD from the map (its weights, class and leads with it).
    OsdPurge(OsdId),
    /// Declare a down OSD's data gone (`osd lost`).
    OsdLost(OsdId),
    /// Set PGs' upmap exceptions (empty: remove them).
    PgUpmapItems(Vec<(PgId, Vec<(OsdId, OsdId)>)>),
    /// Change the full ratios, an OSD's space state or a pool's quota.
    Space(SpaceChange),
    /// Set or clear a cluster flag.
    SetFlag {
        /// One of [`shoal_types::CLUSTER_FLAGS`].
        flag: String,
        /// Set or clear.
        on: bool,
    },
    /// A primary asks that PGs be led by another OSD of their acting set (`Some`) or by
    /// placement's primary again (`None`): applied to each PG `osd` still leads.
    PrimaryTemp {
        /// The asking primary.
        osd: OsdId,
        /// The PGs and who should lead each.
        pgs: Vec<(PgId, Option<OsdId>)>,
    },
    /// Set a pool's PG count (raising it splits every PG in place).
    SetPgNum {
        /// The pool.
        pool: String,
        /// The new count.
        pg_num: u32,
    },
    /// Set where a pool's `pgp_num` goes.
    SetPgpNum {
        /// The pool.
        pool: String,
        /// The target.
        pgp_num: u32,
    },
    /// One of the leader's steps of a pool's `pgp_num` towards its target.
    StepPgpNum {
        /// The pool.
        pool: PoolId,
        /// The new `pgp_num`.
        pgp_num: u32,
    },
    /// Change a pool's autoscaler settings.
    PoolAutoscale(AutoscaleChange),
    /// Add a client entity with the key the leader picked, unless it exists.
    AuthCreate {
        /// The entity.
        entity: String,
        /// Its key.
        key: Vec<u8>,
        /// Its caps.
        caps: Caps,
    },
    /// Replace an entity's caps.
    AuthCaps {
        /// The entity.
        entity: String,
        /// The new caps.
        caps: Caps,
    },
    /// Remove an entity.
    AuthRemove(String),
    /// Pause a merging pool's PGs: its sources are on their targets' OSDs.
    PauseMerge(PoolId),
    /// Drop a merging pool's `pg_num`: every PG reported it is ready.
    FinishMerge(PoolId),
}

/// Applies `change` to `map`; the epoch goes up by one when the map changes. Returns the reply
/// for the client that asked (`Done` when the map changed or already was so).
pub fn apply(map: &mut OsdMap, change: &MapChange) -> Result<Reply> {
    let before = map.clone();
    let reply = match change {
        MapChange::CreatePool(spec) => return map.create(spec).map(Reply::Pool),
        MapChange::DeletePool(name) => return map.remove(name).map(Reply::Pool),
        MapChange::CreateErasurePool(spec) => return map.create_erasure(spec).map(Reply::Pool),
        MapChange::SetErasureProfile { name, profile, force } => {
            return map.set_erasure_profile(name, profile.clone(), *force).map(|()| Reply::Done);
        }
        MapChange::RemoveErasureProfile(name) => return map.remove_erasure_profile(name).map(|()| Reply::Done),
        MapChange::Crush(change) => {
            change.apply(map)?;
            erasure_shards_keep_places(&before, map).inspect_err(|_| *map = before.clone())?;
            Reply::Done
        }
        MapChange::Space(change) => {
            change.apply(map)?;
            Reply::Done
        }
        MapChange::PoolAutoscale(change) => {
            change.apply(map)?;
            Reply::Done
        }
        MapChange::AuthCreate { entity, key, caps } => {
            shoal_types::auth::check_entity_name(entity)?;
            map.auth.entry(entity.clone()).or_insert_with(|| AuthEntity { key: key.clone(), caps: caps.clone() });
            Reply::Done
        }
        MapChange::AuthCaps { entity, caps } => {
            let known = map.auth.get_mut(entity).ok_or_else(|| err::not_found(format!("no entity {entity}")))?;
            known.caps = caps.clone();
            Reply::Done
        }
        MapChange::PauseMerge(pool) => {
            map.pause_merge(*pool)?;
            Reply::Done
        }
        MapChange::FinishMerge(pool) => {
            map.finish_merge(*pool)?;
            Reply::Done
        }
        MapChange::AuthRemove(entity) => {
            map.auth.remove(entity).ok_or_else(|| err::not_found(format!("no entity {entity}")))?;
            Reply::Done
        }
        MapChange::SetFlag { flag, on } => {
            if !shoal_types::CLUSTER_FLAGS.contains(&flag.as_str()) {
                let known = shoal_types::CLUSTER_FLAGS.join(", ");
                return Err(err::invalid(format!("'{flag}' is not a cluster flag: one of {known}")));
            }
            match on {
                true => map.flags.insert(flag.clone()),
                false => map.flags.remove(flag),
            };
            Reply::Done
        }
        MapChange::OsdPurge(id) => {
            let osd = map.osds.get(id).ok_or_else(|| err::not_found(format!("{id} does not exist")))?;
            if osd.up {
                return Err(err::busy(format!("{id} is up: stop it before purging it")));
            }
            map.osds.remove(id);
            map.osd_reweight.remove(id);
            map.crush.device_classes.remove(id);
            map.osd_space.remove(id);
            map.osd_lost.remove(id);
            map.primary_temp.retain(|_, lead| lead != id);
            map.pg_upmap_items.retain(|_, items| items.iter().all(|(from, to)| from != id && to != id));
            Reply::Done
        }
        MapChange::PgUpmapItems(pgs) => {
            let topology = shoal_placement::Topology::from_map(map);
            for (pg, items) in pgs {
                map.set_upmap_items(*pg, items.clone()).inspect_err(|_| *map = before.clone())?;
                let pool = &map.pools[&pg.pool];
                if topology.upmap_breaks_rule(map, pool, *pg) {
                    let rule = pool.crush_rule.clone();
                    *map = before.clone();
                    return Err(err::invalid(format!(
                        "pg {pg}: the upmap items would put a copy outside rule '{rule}' or two copies in one of its failure domains"
                    )));
                }
            }
            erasure_shards_keep_places(&before, map).inspect_err(|_| *map = before.clone())?;
            Reply::Done
        }
        MapChange::SetPgNum { pool, pg_num } => {
            map.set_pg_num(pool, *pg_num)?;
            Reply::Done
        }
        MapChange::SetPgpNum { pool, pgp_num } => {
            map.set_pgp_num_target(pool, *pgp_num)?;
            Reply::Done
        }
        MapChange::StepPgpNum { pool, pgp_num } => {
            map.step_pgp_num(*pool, *pgp_num)?;
            erasure_shards_keep_places(&before, map).inspect_err(|_| *map = before.clone())?;
            Reply::Done
        }
        MapChange::OsdLost(id) => {
            let osd = map.osds.get(id).ok_or_else(|| err::not_found(format!("{id} does not exist")))?;
            if osd.up {
                return Err(err::busy(format!("{id} is up: only a down OSD can be declared lost")));
            }
            let epoch = map.epoch + 1;
            map.osd_lost.entry(*id).or_insert(epoch);
            Reply::Done
        }
        MapChange::OsdBoot { id, entry, back_in } => {
            // A known OSD keeps the weight it was given; a new one takes the one it boots with.
            // An OSD that is in stays in; one that is out (or new) comes in unless `noin`.
            let old = map.osds.get(id);
            let is_in =
                old.is_some_and(|old| old.is_in) || (!map.flags.contains("noin") && old.is_none_or(|_| *back_in));
            let weight = old.map_or(entry.weight, |old| old.weight);
            // Hosts known so far keep their bucket ids; a new host gets the next one.
            map.crush = map.crush_view();
            map.osds.insert(*id, OsdEntry { up: true, is_in, weight, ..entry.clone() });
            // Back with its store: peering may count its copies again.
            map.osd_lost.remove(id);
            map.crush = map.crush_view();
            Reply::Done
        }
        MapChange::SetOsdWeight { id, weight } => {
            map.osds.get_mut(id).ok_or_else(|| err::not_found(format!("{id} does not exist")))?.weight = *weight;
            erasure_shards_keep_places(&before, map).inspect_err(|_| *map = before.clone())?;
            Reply::Done
        }
        MapChange::ConfigSet { who, key, value } => {
            map.config.entry(who.clone()).or_default().insert(key.clone(), value.clone());
            Reply::Done
        }
        MapChange::ConfigRm { who, key } => {
            let options = map.config.get_mut(who).ok_or_else(|| err::not_found(format!("no options for '{who}'")))?;
            options.remove(key).ok_or_else(|| err::not_found(format!("'{key}' is not set for '{who}'")))?;
            if options.is_empty() {
                map.config.remove(who);
            }
            Reply::Done
        }
        MapChange::SetOsdIn { id, is_in } => {
            map.osds.get_mut(id).ok_or_else(|| err::not_found(format!("{id} does not exist")))?.is_in = *is_in;
            Reply::Done
        }
        MapChange::MarkDown(id) => {
            if let Some(osd) = map.osds.get_mut(id) {
                osd.up = false;
            }
            Reply::Done
        }
        MapChange::PgsActivated { osd, pgs } => {
            let topology = shoal_placement::Topology::from_map(map);
            for (pg, active) in pgs {
                let current = map.pools.get(&pg.pool).filter(|pool| pg.seed < pool.pg_num).is_some_and(|pool| {
                    let acting = topology.acting(map, pool, *pg);
                    shoal_placement::acting_primary(map, *pg, &acting) == Some(*osd) && acting == active.acting
                });
                let newest = map.pg_active.get(pg).is_none_or(|old| old.interval <= active.interval);
                if current && newest {
                    map.pg_active.insert(*pg, active.clone());
                }
            }
            Reply::Done
        }
        MapChange::PrimaryTemp { osd, pgs } => {
            let topology = shoal_placement::Topology::from_map(map);
            for (pg, lead) in pgs {
                let Some(pool) = map.pools.get(&pg.pool).filter(|pool| pg.seed < pool.pg_num) else { continue };
                let acting = topology.acting(map, pool, *pg);
                if shoal_placement::acting_primary(map, *pg, &acting) != Some(*osd) {
                    continue;
                }
                match lead {
                    Some(lead) if *lead != OsdId::NONE && acting.contains(lead) => {
                        map.primary_temp.insert(*pg, *lead);
                    }
                    Some(_) => {}
                    None => {
                        map.primary_temp.remove(pg);
                    }
                }
            }
            Reply::Done
        }
    };
    let placement_changed = map.osds != before.osds
        || map.crush != before.crush
        || map.osd_reweight != before.osd_reweight
        || map.pg_upmap_items != before.pg_upmap_items
        || map.pools.values().any(|p| before.pools.get(&p.id).is_some_and(|b| b.crush_rule != p.crush_rule));
    let rebalance = !map.flags.contains("norebalance") || matches!(change, MapChange::PgUpmapItems(_));
    if !rebalance && placement_inputs_changed(&before, map) {
        let kept = shoal_placement::balancer::keep_placement(&before, map);
        map.pg_upmap_items.extend(kept);
    }
    if placement_changed {
        prime_primary_temp(&before, map);
    }
    // Changes made by the map's own methods already counted their epoch.
    if *map != before && map.epoch == before.epoch {
        map.epoch += 1;
    }
    Ok(reply)
}

/// The leader's next step of `pool`'s merge, if one is due. Once `pgp_num` came down to
/// the new count, every PG is active+clean (`all_clean`) and each source PG reported its
/// target's acting set: the pause. Then, once every PG of the pool reported `premerge`
/// under the pause (and still with its target): the merge. `stats` holds each PG's
/// latest report.
pub fn merge_step(map: &OsdMap, pool: PoolId, stats: &[PgStat], all_clean: bool) -> Option<MapChange> {
    let merge = map.pg_merge.get(&pool)?;
    let pg_num = map.pools.get(&pool)?.pg_num;
    let stats: BTreeMap<PgId, &PgStat> = stats.iter().filter(|s| s.pg.pool == pool).map(|s| (s.pg, s)).collect();
    let acting = |pg: &PgId| stats.get(pg).map(|s| &s.acting);
    let pairs = map.merge_pairs(pool, pg_num, merge.pg_num);
    let together = pairs.iter().all(|(s, t)| acting(s).is_some() && acting(s) == acting(t));
    if merge.paused == 0 {
        let placed = map.pg_resize.get(&pool).is_none_or(|r| r.pgp_num <= merge.pg_num);
        return (placed && all_clean && together).then_some(MapChange::PauseMerge(pool));
    }
    let ready = |s: &&&PgStat| s.epoch >= merge.paused && s.state.contains(&PgStateFlag::Premerge);
    let ready = stats.values().filter(ready).count();
    (ready >= pg_num as usize && together).then_some(MapChange::FinishMerge(pool))
}

/// Whether CRUSH may place copies differently under `after` than under `before`: a
/// change of hosts, weights, in or out, the tree, a pool's rule or its `pgp_num` (not of
/// OSDs going up or down, which placement does not read).
fn placement_inputs_changed(before: &OsdMap, after: &OsdMap) -> bool {
    let inputs = |m: &OsdMap| -> Vec<(OsdId, String, u32, bool)> {
        m.osds.iter().map(|(id, o)| (*id, o.host.clone(), o.weight, o.is_in)).collect()
    };
    let rules = |m: &OsdMap| -> Vec<(PoolId, String, u32)> {
        m.pools.values().map(|p| (p.id, p.crush_rule.clone(), m.pgp_num(p.id))).collect()
    };
    before.crush != after.crush
        || before.osd_reweight != after.osd_reweight
        || inputs(before) != inputs(after)
        || rules(before) != rules(after)
}

/// Refuses an operator's placement change that would put a shard of an erasure-coded PG
/// that was ever active on an OSD holding another shard of it. An OSD keeps one shard's
/// copy per PG, so the two positions would overwrite each other's data while backfilled;
/// Ceph keeps the old positions serving through `pg_temp`, which Shoal does not have yet.
/// Marking OSDs out never moves a shard between positions.
fn erasure_shards_keep_places(before: &OsdMap, after: &OsdMap) -> Result<()> {
    if !after.pools.values().any(|p| p.erasure.is_some()) {
        return Ok(());
    }
    let (old_t, new_t) = (shoal_placement::Topology::from_map(before), shoal_placement::Topology::from_map(after));
    for pool in after.pools.values().filter(|p| p.erasure.is_some()) {
        for pg in
            (0..pool.pg_num).map(|seed| PgId { pool: pool.id, seed }).filter(|pg| after.pg_active.contains_key(pg))
        {
            let (old, new) = (old_t.raw_shards(before, pool, pg), new_t.raw_shards(after, pool, pg));
            for (shard, osd) in new.iter().enumerate() {
                let Some(osd) = osd else { continue };
                if let Some(held) = old.iter().position(|o| o == &Some(*osd)).filter(|held| *held != shard) {
                    return Err(err::busy(format!(
                        "refused: pg {pg} of erasure-coded pool '{}' would move shard {shard} onto {osd}, which holds \
                         its shard {held}; shards cannot trade places yet (no pg_temp): mark OSDs out instead",
                        pool.name
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Where a change of OSDs would make an OSD that was not in a PG's acting set lead it
/// (one booting, or one placement newly chose), keeps a member of the previous acting set
/// leading through `primary_temp`, as Ceph primes `pg_temp` in the same map
/// (`mon_osd_prime_pg_temp`): the newcomer holds an old copy or none, and would otherwise
/// peer, find itself behind and hand the PG over, a second round without service. The
/// leader hands the PG back once every member is recovered.
fn prime_primary_temp(before: &OsdMap, map: &mut OsdMap) {
    let mut primed = Vec::new();
    let (old_t, new_t) = (shoal_placement::Topology::from_map(before), shoal_placement::Topology::from_map(map));
    for pool in map.pools.values() {
        for seed in 0..pool.pg_num {
            let pg = PgId { pool: pool.id, seed };
            if !map.pg_active.contains_key(&pg) {
                continue; // never active: no copy to keep
            }
            let (old, new) = (old_t.acting(before, pool, pg), new_t.acting(map, pool, pg));
            if shoal_placement::acting_primary(map, pg, &new).is_none_or(|lead| old.contains(&lead)) {
                continue;
            }
            // A member keeps its copy if it serves the same shard (any position when replicated).
            let keeps = |osd: &OsdId| match pool.erasure {
                Some(_) => old.iter().zip(&new).any(|(o, n)| o == osd && n == osd),
                None => new.contains(osd),
            };
            let old_primary = shoal_placement::acting_primary(before, pg, &old);
            let lead = old_primary.into_iter().chain(old.iter().copied()).find(|o| *o != OsdId::NONE && keeps(o));
            if let Some(lead) = lead {
                primed.push((pg, lead));
            }
        }
    }
    map.primary_temp.extend(primed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(addr: &str) -> OsdEntry {
        OsdEntry { addr: addr.into(), host: "h".into(), weight: 0x10000, up: false, is_in: false }
    }

    #[test]
    fn boots_and_marks_bump_the_epoch_only_when_something_changes() {
        let mut map = OsdMap::default();
        let boot = MapChange::OsdBoot { id: OsdId(0), entry: entry("a"), back_in: false };
        apply(&mut map, &boot).unwrap();
        assert_eq!((map.epoch, map.osds[&OsdId(0)].up, map.osds[&OsdId(0)].is_in), (1, true, true));
        apply(&mut map, &boot).unwrap();
        assert_eq!(map.epoch, 1, "booting again at the same address changes nothing");
        apply(&mut map, &MapChange::SetOsdIn { id: OsdId(0), is_in: false }).unwrap();
        apply(&mut map, &MapChange::MarkDown(OsdId(0))).unwrap();
        apply(&mut map, &MapChange::OsdBoot { id: OsdId(0), entry: entry("b"), back_in: false }).unwrap();
        assert!(!map.osds[&OsdId(0)].is_in, "an OSD an operator marked out stays out");
        apply(&mut map, &MapChange::OsdBoot { id: OsdId(0), entry: entry("c"), back_in: true }).unwrap();
        assert!(map.osds[&OsdId(0)].is_in, "an OSD the monitor marked out comes back in");
        let e = apply(&mut map, &MapChange::ConfigRm { who: "osd".into(), key: "x".into() }).unwrap_err();
        assert_eq!(e.errno, shoal_types::Errno::NotFound);
    }

    #[test]
    fn a_reweighted_osd_keeps_its_weight_across_boots() {
        let mut map = OsdMap::default();
        apply(&mut map, &MapChange::OsdBoot { id: OsdId(0), entry: entry("a"), back_in: false }).unwrap();
        apply(&mut map, &MapChange::SetOsdWeight { id: OsdId(0), weight: 0x8000 }).unwrap();
        apply(&mut map, &MapChange::MarkDown(OsdId(0))).unwrap();
        apply(&mut map, &MapChange::OsdBoot { id: OsdId(0), entry: entry("b"), back_in: false }).unwrap();
        assert_eq!((map.osds[&OsdId(0)].weight, map.osds[&OsdId(0)].addr.as_str()), (0x8000, "b"));
        let missing = apply(&mut map, &MapChange::SetOsdWeight { id: OsdId(7), weight: 0 }).unwrap_err();
        assert_eq!(missing.errno, shoal_types::Errno::NotFound);
    }

    #[test]
    fn only_the_primary_hands_its_pg_to_a_member_of_the_acting_set_and_back() {
        let mut map = OsdMap::default();
        for id in 0..4 {
            let entry = OsdEntry { host: format!("h{id}"), ..entry(&format!("a{id}")) };
            apply(&mut map, &MapChange::OsdBoot { id: OsdId(id), entry, back_in: false }).unwrap();
        }
        let spec = PoolSpec { name: "p".into(), pg_num: 1, size: 3, min_size: 2 };
        apply(&mut map, &MapChange::CreatePool(spec)).unwrap();
        let pool = map.pools[&PoolId(1)].clone();
        let pg = PgId { pool: pool.id, seed: 0 };
        let up = shoal_placement::pg_up_osds(&map, &pool, pg);
        let (primary, second) = (up[0], up[1]);
        let outsider = (0..4).map(OsdId).find(|o| !up.contains(o)).unwrap();
        let lead = |osd, lead| MapChange::PrimaryTemp { osd, pgs: vec![(pg, lead)] };
        let epoch = map.epoch;
        apply(&mut map, &lead(second, Some(second))).unwrap();
        apply(&mut map, &lead(primary, Some(outsider))).unwrap();
        assert_eq!((map.primary_temp.len(), map.epoch), (0, epoch), "not the primary; not in the acting set");
        apply(&mut map, &lead(primary, Some(second))).unwrap();
        assert_eq!(shoal_placement::pg_primary(&map, &pool, pg), Some(second));
        let acting = shoal_placement::pg_up_osds(&map, &pool, pg);
        assert_eq!(
            acting,
            [vec![second, primary], up[2..].to_vec()].concat(),
            "the leader first, then placement's order"
        );
        apply(&mut map, &lead(primary, None)).unwrap();
        assert_eq!(map.primary_temp[&pg], second, "only the leader hands the PG back");
        // The leader down: placement's primary leads again, and the entry stays until cleared.
        map.osds.get_mut(&second).unwrap().up = false;
        assert_eq!(shoal_placement::pg_primary(&map, &pool, pg), Some(primary));
        apply(&mut map, &lead(primary, None)).unwrap();
        assert!(map.primary_temp.is_empty());
    }

    #[test]
    fn a_merge_pauses_once_sources_sit_with_their_targets_and_merges_once_every_pg_is_ready() {
        let mut map = OsdMap::default();
        let spec = PoolSpec { name: "p".into(), pg_num: 4, size: 2, min_size: 1 };
        apply(&mut map, &MapChange::CreatePool(spec)).unwrap();
        let pool = PoolId(1);
        apply(&mut map, &MapChange::SetPgNum { pool: "p".into(), pg_num: 2 }).unwrap();
        let stat = |seed, acting: [u32; 2], state: &[PgStateFlag], epoch| PgStat {
            pg: PgId { pool, seed },
            state: state.to_vec(),
            epoch,
            acting: acting.map(OsdId).to_vec(),
            last_update: shoal_types::EVersion::default(),
            objects_to_recover: 0,
            note: String::new(),
            client_ops: 0,
            objects: 0,
            bytes: 0,
        };
        let clean = [PgStateFlag::Active, PgStateFlag::Clean];
        let mut stats: Vec<PgStat> = (0..4).map(|seed| stat(seed, [seed % 2, 2], &clean, map.epoch)).collect();
        assert_eq!(merge_step(&map, pool, &stats, true), None, "pgp_num is not down to 2 yet");
        apply(&mut map, &MapChange::StepPgpNum { pool, pgp_num: 2 }).unwrap();
        stats[3].acting = vec![OsdId(3), OsdId(2)];
        assert_eq!(merge_step(&map, pool, &stats, true), None, "source 3 is not with its target 1");
        stats[3].acting = vec![OsdId(1), OsdId(2)];
        assert_eq!(merge_step(&map, pool, &stats, false), None, "a PG is not clean");
        assert_eq!(merge_step(&map, pool, &stats, true), Some(MapChange::PauseMerge(pool)));
        apply(&mut map, &MapChange::PauseMerge(pool)).unwrap();
        let premerge = [PgStateFlag::Active, PgStateFlag::Clean, PgStateFlag::Premerge];
        for s in &mut stats[..3] {
            *s = stat(s.pg.seed, [s.pg.seed % 2, 2], &premerge, map.epoch);
        }
        assert_eq!(merge_step(&map, pool, &stats, true), None, "source 3 has not reported premerge");
        stats[3] = stat(3, [1, 2], &premerge, map.epoch - 1);
        assert_eq!(merge_step(&map, pool, &stats, true), None, "its premerge came before the pause");
        stats[3].epoch = map.epoch;
        assert_eq!(merge_step(&map, pool, &stats, false), Some(MapChange::FinishMerge(pool)));
        assert_eq!(merge_step(&map, PoolId(9), &stats, true), None, "no such merge");
    }

    #[test]
    fn with_norebalance_a_new_host_and_a_reweight_move_no_copy_until_the_balancer_does() {
        let mut map = OsdMap::default();
        let boot = |map: &mut OsdMap, id: u32| {
            let entry = OsdEntry { host: format!("h{}", id / 2), ..entry(&format!("a{id}")) };
            apply(map, &MapChange::OsdBoot { id: OsdId(id), entry, back_in: false }).unwrap();
        };
        (0..8).for_each(|id| boot(&mut map, id));
        let spec = PoolSpec { name: "p".into(), pg_num: 64, size: 3, min_size: 2 };
        apply(&mut map, &MapChange::CreatePool(spec)).unwrap();
        let pool = map.pools[&PoolId(1)].clone();
        let placed = |map: &OsdMap| -> Vec<Vec<OsdId>> {
            (0..64)
                .map(|seed| {
                    let mut osds = shoal_placement::pg_up_osds(map, &pool, PgId { pool: pool.id, seed });
                    osds.sort();
                    osds
                })
                .collect()
        };
        let grow = |map: &mut OsdMap| {
            (8..10).for_each(|id| boot(map, id));
            apply(map, &MapChange::SetOsdWeight { id: OsdId(0), weight: 0x8000 }).unwrap();
        };
        let (before, mut moving) = (placed(&map), map.clone());
        grow(&mut moving);
        assert_ne!(placed(&moving), before, "without the flag, copies move");
        apply(&mut map, &MapChange::SetFlag { flag: "norebalance".into(), on: true }).unwrap();
        grow(&mut map);
        assert_eq!(placed(&map), before, "with it, every copy stays");
        assert!(!map.pg_upmap_items.is_empty());
        apply(&mut map, &MapChange::SetPgNum { pool: "p".into(), pg_num: 128 }).unwrap();
        apply(&mut map, &MapChange::StepPgpNum { pool: pool.id, pgp_num: 128 }).unwrap();
        let grown = map.pools[&pool.id].clone();
        for seed in 64..128 {
            let up = |seed| {
                let mut osds = shoal_placement::pg_up_osds(&map, &grown, PgId { pool: pool.id, seed });
                osds.sort();
                osds
            };
            assert_eq!(up(seed), up(seed - 64), "child {seed} stays with its parent");
        }
        apply(&mut map, &MapChange::MarkDown(OsdId(3))).unwrap();
        assert_eq!(placed(&map).iter().flatten().filter(|o| **o == OsdId(3)).count(), 0, "down is not kept up");
        apply(&mut map, &MapChange::OsdBoot { id: OsdId(3), entry: entry("b3"), back_in: true }).unwrap();
        let moves = shoal_placement::balancer::optimize(&map, usize::MAX, 1.0);
        assert!(!moves.is_empty());
        apply(&mut map, &MapChange::PgUpmapItems(moves.into_iter().collect())).unwrap();
        let on_new_host = placed(&map).iter().flatten().filter(|o| o.0 >= 8).count();
        assert!(on_new_host > 10, "the balancer's moves are not kept back: {on_new_host} copies on the new host");
    }

    #[test]
    fn an_osd_that_joins_an_acting_set_does_not_lead_it_before_it_is_recovered() {
        let mut map = OsdMap::default();
        let boot = |map: &mut OsdMap, id: u32| {
            let entry = OsdEntry { host: format!("h{id}"), ..entry(&format!("a{id}")) };
            apply(map, &MapChange::OsdBoot { id: OsdId(id), entry, back_in: false }).unwrap();
        };
        (0..3).for_each(|id| boot(&mut map, id));
        let spec = PoolSpec { name: "p".into(), pg_num: 32, size: 3, min_size: 2 };
        apply(&mut map, &MapChange::CreatePool(spec)).unwrap();
        let pool = map.pools[&PoolId(1)].clone();
        let pgs: Vec<_> = (0..pool.pg_num).map(|seed| PgId { pool: pool.id, seed }).collect();
        let leaders =
            |map: &OsdMap| pgs.iter().map(|pg| shoal_placement::pg_primary(map, &pool, *pg)).collect::<Vec<_>>();
        // The first half of the PGs were active; the others never were.
        for pg in &pgs[..16] {
            let acting = shoal_placement::pg_acting(&map, &pool, *pg);
            let interval = ActiveInterval { interval: map.epoch, acting: acting.clone() };
            apply(&mut map, &MapChange::PgsActivated { osd: acting[0], pgs: vec![(*pg, interval)] }).unwrap();
        }
        let before = leaders(&map);
        let old_acting: Vec<_> = pgs.iter().map(|pg| shoal_placement::pg_acting(&map, &pool, *pg)).collect();
        boot(&mut map, 3);
        let after = leaders(&map);
        let unprimed = OsdMap { primary_temp: Default::default(), ..map.clone() };
        let (active, idle): (Vec<PgId>, Vec<PgId>) = pgs
            .iter()
            .filter(|pg| shoal_placement::pg_acting(&unprimed, &pool, **pg)[0] == OsdId(3))
            .partition(|pg| pg.seed < 16);
        assert!(!active.is_empty() && !idle.is_empty(), "osd.3 is placement's primary of both kinds of PG");
        for pg in active {
            let (i, acting) = (pg.seed as usize, shoal_placement::pg_acting(&map, &pool, pg));
            let kept = before[i].filter(|old| acting.contains(old));
            let lead = after[i].unwrap();
            assert!(kept.is_none_or(|old| old == lead), "{pg}: its old primary keeps leading while in the acting set");
            assert!(
                old_acting[i].contains(&lead) && acting.contains(&OsdId(3)),
                "{pg}: an old member leads; osd.3 joins"
            );
        }
        for pg in idle {
            assert_eq!(after[pg.seed as usize], Some(OsdId(3)), "{pg}: never active, nothing to keep");
        }
        assert!(map.primary_temp.keys().all(|pg| pg.seed < 16), "only PGs that were active are primed");
        // The leader hands a PG back once osd.3 is recovered.
        let (pg, lead) = map.primary_temp.iter().map(|(pg, lead)| (*pg, *lead)).next().unwrap();
        apply(&mut map, &MapChange::PrimaryTemp { osd: lead, pgs: vec![(pg, None)] }).unwrap();
        assert_eq!(shoal_placement::pg_primary(&map, &pool, pg), Some(OsdId(3)));
    }

    #[test]
    fn only_a_current_primary_records_an_activation_and_never_an_older_one() {
        let mut map = OsdMap::default();
        apply(&mut map, &MapChange::CreatePool(PoolSpec { name: "p".into(), pg_num: 1, size: 1, min_size: 1 }))
            .unwrap();
        apply(&mut map, &MapChange::OsdBoot { id: OsdId(0), entry: entry("a"), back_in: false }).unwrap();
        let pg = PgId { pool: PoolId(1), seed: 0 };
        let activated = |interval, osd: u32| MapChange::PgsActivated {
            osd: OsdId(osd),
            pgs: vec![(pg, ActiveInterval { interval, acting: vec![OsdId(osd)] })],
        };
        apply(&mut map, &activated(2, 1)).unwrap();
        assert!(map.pg_active.is_empty(), "osd.1 is not the PG's primary");
        apply(&mut map, &activated(2, 0)).unwrap();
        assert_eq!(map.pg_active[&pg].interval, 2);
        let epoch = map.epoch;
        apply(&mut map, &activated(1, 0)).unwrap();
        assert_eq!((map.pg_active[&pg].interval, map.epoch), (2, epoch), "an older interval is refused");
        apply(&mut map, &MapChange::DeletePool("p".into())).unwrap();
        assert!(map.pg_active.is_empty(), "a deleted pool's PGs are forgotten");
    }

    #[test]
    fn erasure_coded_shards_never_trade_places() {
        let mut map = OsdMap::default();
        for id in 0..3 {
            let entry = OsdEntry { host: format!("h{id}"), ..entry(&format!("a{id}")) };
            apply(&mut map, &MapChange::OsdBoot { id: OsdId(id), entry, back_in: false }).unwrap();
        }
        let spec = shoal_types::erasure::ErasurePoolSpec {
            name: "ec".into(),
            pg_num: 32,
            profile: "p".into(),
            min_size: None,
            allow_overwrites: false,
        };
        let profile = ErasureProfile { k: 2, m: 1, ..ErasureProfile::default() };
        apply(&mut map, &MapChange::SetErasureProfile { name: "p".into(), profile, force: false }).unwrap();
        apply(&mut map, &MapChange::CreateErasurePool(spec)).unwrap();
        let pool = map.pools.values().next().unwrap().clone();
        for seed in 0..32 {
            map.pg_active.insert(PgId { pool: pool.id, seed }, ActiveInterval { interval: 1, acting: vec![] });
        }
        let shards = |map: &OsdMap| -> Vec<Vec<Option<OsdId>>> {
            let t = shoal_placement::Topology::from_map(map);
            (0..32).map(|seed| t.pg_to_shards(&pool, PgId { pool: pool.id, seed })).collect()
        };
        let mut refused = 0;
        for weight in [0x8000, 0x4000, 0x20000, 0x1000] {
            let before = map.clone();
            let mut trial = map.clone();
            trial.osds.get_mut(&OsdId(1)).unwrap().weight = weight;
            let swaps = shards(&before) != shards(&trial);
            match apply(&mut map, &MapChange::SetOsdWeight { id: OsdId(1), weight }) {
                Err(e) => {
                    assert!(swaps && e.message.contains("cannot trade places"), "{}", e.message);
                    assert_eq!(map, before, "a refused change leaves the map as it was");
                    refused += 1;
                }
                Ok(_) => assert!(!swaps, "three shards on three OSDs: any move is a trade"),
            }
        }
        assert!(refused > 0, "some weight change trades places");
        let mut replicated = OsdMap { pools: Default::default(), ..map.clone() };
        apply(&mut replicated, &MapChange::SetOsdWeight { id: OsdId(1), weight: 0x1000 }).unwrap();
    }

    #[test]
    fn noin_keeps_booting_osds_that_are_out_out() {
        let mut map = OsdMap::default();
        let flag = |on| MapChange::SetFlag { flag: "noin".into(), on };
        apply(&mut map, &flag(true)).unwrap();
        let bad = apply(&mut map, &MapChange::SetFlag { flag: "nodown".into(), on: true }).unwrap_err();
        assert!(bad.message.contains("one of noout, noin"), "{}", bad.message);
        apply(&mut map, &MapChange::OsdBoot { id: OsdId(0), entry: entry("a"), back_in: false }).unwrap();
        assert!(!map.osds[&OsdId(0)].is_in, "a new OSD stays out under noin");
        apply(&mut map, &MapChange::OsdBoot { id: OsdId(0), entry: entry("b"), back_in: true }).unwrap();
        assert!(!map.osds[&OsdId(0)].is_in, "so does one the monitor marked out");
        apply(&mut map, &flag(false)).unwrap();
        apply(&mut map, &MapChange::OsdBoot { id: OsdId(0), entry: entry("c"), back_in: true }).unwrap();
        assert!(map.osds[&OsdId(0)].is_in);
        apply(&mut map, &flag(true)).unwrap();
        apply(&mut map, &MapChange::OsdBoot { id: OsdId(0), entry: entry("d"), back_in: false }).unwrap();
        assert!(map.osds[&OsdId(0)].is_in, "an OSD that is in stays in");
    }
}
