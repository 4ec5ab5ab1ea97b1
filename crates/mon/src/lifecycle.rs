//! Whether an OSD may leave the cluster for good, decided from the map and the PG states
//! the primaries reported, as Ceph's `osd safe-to-destroy` decides it.

use shoal_placement::Topology;
use shoal_types::pg::{PgStat, PgStateFlag};
use shoal_types::{OsdId, OsdMap, PgId, Result, err};
use std::collections::BTreeMap;

/// Names at most a few PGs of a list.
fn some_of(pgs: &[PgId]) -> String {
    let shown: Vec<String> = pgs.iter().take(8).map(PgId::to_string).collect();
    let more = if pgs.len() > shown.len() { format!(" and {} more", pgs.len() - shown.len()) } else { String::new() };
    format!("{}{more}", shown.join(" "))
}

/// Ok (with a line saying so) when no PG can need `osd`'s copies: placement maps no PG to
/// it, no PG's recorded activation counts on it, and every PG is reported active+clean.
/// Else EBUSY naming the PGs that hold it back.
pub fn safe_to_destroy(map: &OsdMap, stats: &[PgStat], osd: OsdId) -> Result<String> {
    if !map.osds.contains_key(&osd) {
        return Err(err::not_found(format!("{osd} does not exist")));
    }
    let topology = Topology::from_map(map);
    let reported: BTreeMap<PgId, &PgStat> = stats.iter().map(|s| (s.pg, s)).collect();
    let (mut holding, mut unclean) = (Vec::new(), Vec::new());
    for pool in map.pools.values() {
        for seed in 0..pool.pg_num {
            let pg = PgId { pool: pool.id, seed };
            let placed = topology.raw_shards(map, pool, pg).contains(&Some(osd));
            if placed || map.pg_active.get(&pg).is_some_and(|a| a.acting.contains(&osd)) {
                holding.push(pg);
            }
            let clean = |s: &&PgStat| [PgStateFlag::Active, PgStateFlag::Clean].iter().all(|f| s.state.contains(f));
            if !reported.get(&pg).is_some_and(clean) {
                unclean.push(pg);
            }
        }
    }
    if !holding.is_empty() {
        return Err(err::busy(format!(
            "{osd} still holds {} PGs ({}): mark it out and wait until they are active+clean elsewhere",
            holding.len(),
            some_of(&holding)
        )));
    }
    if !unclean.is_empty() {
        return Err(err::busy(format!(
            "{} PGs are not active+clean ({}): their recovery may still need {osd}'s copies",
            unclean.len(),
            some_of(&unclean)
        )));
    }
    Ok(format!("{osd} is safe to destroy: no PG needs its data"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{MapChange, apply};
    use shoal_types::{ActiveInterval, OsdEntry, PoolSpec};

    #[test]
    fn an_osd_is_safe_to_destroy_only_once_no_pg_needs_it() {
        let mut map = OsdMap::default();
        for id in 0..3 {
            let entry =
                OsdEntry { addr: format!("a{id}"), host: format!("h{id}"), weight: 0x10000, up: true, is_in: true };
            apply(&mut map, &MapChange::OsdBoot { id: OsdId(id), entry, back_in: false }).unwrap();
        }
        apply(&mut map, &MapChange::CreatePool(PoolSpec { name: "p".into(), pg_num: 4, size: 2, min_size: 1 }))
            .unwrap();
        let pool = map.pools.values().next().unwrap().clone();
        let stats = |map: &OsdMap| -> Vec<PgStat> {
            (0..4)
                .map(|seed| {
                    let pg = PgId { pool: pool.id, seed };
                    PgStat {
                        pg,
                        state: vec![PgStateFlag::Active, PgStateFlag::Clean],
                        epoch: map.epoch,
                        acting: shoal_placement::pg_up_osds(map, &pool, pg),
                        last_update: Default::default(),
                        objects_to_recover: 0,
                        note: String::new(),
                        client_ops: 0,
                        objects: 0,
                        bytes: 0,
                    }
                })
                .collect()
        };
        let e = safe_to_destroy(&map, &stats(&map), OsdId(2)).unwrap_err();
        assert!(e.message.contains("osd.2 still holds"), "{}", e.message);
        apply(&mut map, &MapChange::SetOsdIn { id: OsdId(2), is_in: false }).unwrap();
        let mut reported = stats(&map);
        reported[1].state = vec![PgStateFlag::Active, PgStateFlag::Degraded];
        let e = safe_to_destroy(&map, &reported, OsdId(2)).unwrap_err();
        assert!(e.message.starts_with("1 PGs are not active+clean (1.1)"), "{}", e.message);
        // A recorded activation on osd.2 holds it until the PG activates without it.
        let pg = PgId { pool: pool.id, seed: 0 };
        map.pg_active.insert(pg, ActiveInterval { interval: 1, acting: vec![OsdId(2), OsdId(0)] });
        assert!(safe_to_destroy(&map, &stats(&map), OsdId(2)).unwrap_err().message.contains("holds 1 PGs (1.0)"));
        map.pg_active.insert(pg, ActiveInterval { interval: 2, acting: shoal_placement::pg_up_osds(&map, &pool, pg) });
        assert!(safe_to_destroy(&map, &stats(&map), OsdId(2)).is_ok());
        assert_eq!(safe_to_destroy(&map, &[], OsdId(7)).unwrap_err().errno, shoal_types::Errno::NotFound);
    }
}
