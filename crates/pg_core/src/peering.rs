//! Peering decisions as a pure function: given what each reachable replica of a PG says
//! about its history, choose the authoritative copy and what every replica must do to
//! match it. No IO, no clock: the shard drives it, and tests run it over random failure
//! schedules.
//!
//! The rules, after Ceph's:
//! - Only a *complete* replica (not in the middle of recovery or backfill) may be the
//!   authority; among those, the newest `last_update` wins (positions order by interval
//!   epoch first, so a newer primary's history beats an older primary's unacknowledged
//!   tail).
//! - The PG must hear from a complete member of the newest interval any replica knows to
//!   have gone active: otherwise acknowledged writes of that interval could be missing.
//! - A replica whose history shares a point with the authority's log is recovered by log:
//!   the objects written after that point, on either side, are copied whole. Any other
//!   replica (incomplete, or whose history ends before the authority's log tail) is
//!   backfilled: emptied and refilled object by object.
//! - Only an operator lifts the second rule: once too few members of that interval remain
//!   besides OSDs declared lost (`osd lost`) or purged, the PG goes on from any complete
//!   copy, or empty, and says what it lost ([`required_activation`]).

pub mod erasure;

use shoal_types::pg::{EVersion, PgSummary};
use shoal_types::{ActiveInterval, ObjectName, OsdId, OsdMap, PgId};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// How one replica catches up with the authority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// Nothing to copy.
    None,
    /// Copy these objects whole.
    Log(BTreeSet<ObjectName>),
    /// Empty the replica's copy of the PG and copy every object.
    Backfill,
}

/// What one replica must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerPlan {
    /// Keep the replica's log up to this point, dropping later (divergent) entries;
    /// `None` for a backfill.
    pub keep_until: Option<EVersion>,
    /// The objects it must receive.
    pub recovery: Recovery,
}

/// The outcome of peering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The replica whose history is authoritative.
    pub auth: OsdId,
    /// Per replica (the authority included), how it catches up.
    pub peers: BTreeMap<OsdId, PeerPlan>,
    /// Erasure-coded PGs only: shards (by position) whose acting OSD is backfilled, read
    /// from a stray OSD that holds them, because the acting set alone cannot decode every
    /// object. Empty otherwise.
    pub stray_sources: BTreeMap<usize, StraySource>,
    /// Erasure-coded PGs only: the acting set alone cannot decode every object, so the
    /// interval is recorded, and serves, only once recovery is done.
    pub serve_after_recovery: bool,
}

/// A copy outside the acting set read in place of a shard being backfilled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StraySource {
    /// Its OSD.
    pub osd: OsdId,
    /// The objects it lacks (it was being recovered by log).
    pub lacks: BTreeSet<ObjectName>,
    /// Where its divergent writes, undone before it is read, end.
    pub roll_back_to: Option<EVersion>,
}

/// Why a PG cannot go active with the replicas that answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// No complete replica answered.
    Incomplete,
    /// No complete member of the newest active interval (epoch, acting set) answered.
    Down {
        /// That interval's epoch.
        epoch: u64,
        /// Its acting set.
        acting: Vec<OsdId>,
    },
    /// Fewer shards than it takes to decode an object hold it as the authoritative history
    /// says (Ceph's unfound objects): more must return.
    Unfound {
        /// One such object.
        object: ObjectName,
        /// How many shards of the acting set hold it.
        holders: usize,
    },
}

impl Blocked {
    /// Too few copies answered: down on the recorded interval, or incomplete without one.
    pub fn waiting_for(recorded: Option<&ActiveInterval>) -> Blocked {
        match recorded {
            Some(r) => Blocked::Down { epoch: r.interval, acting: r.acting.clone() },
            None => Blocked::Incomplete,
        }
    }
}

/// The activation peering must hear from: the one `map` records for `pg`, unless fewer
/// than `needed` of its members (1 for a replicated PG, `k` for an erasure-coded one) are
/// neither declared lost nor purged. Then no member can bring back what that interval
/// acknowledged, and the PG goes on from what remains: the record becomes interval 0 with
/// no members (any complete copy counts), and the lost members are returned, to report.
pub fn required_activation(map: &OsdMap, pg: PgId, needed: usize) -> (Option<ActiveInterval>, Vec<OsdId>) {
    let Some(recorded) = map.pg_active.get(&pg) else { return (None, Vec::new()) };
    let gone = |osd: &OsdId| map.osd_lost.contains_key(osd) || !map.osds.contains_key(osd);
    let members: Vec<OsdId> = recorded.acting.iter().copied().filter(|o| *o != OsdId::NONE).collect();
    let (lost, remaining): (Vec<OsdId>, Vec<OsdId>) = members.into_iter().partition(gone);
    if lost.is_empty() || remaining.len() >= needed {
        return (Some(recorded.clone()), Vec::new());
    }
    (Some(ActiveInterval { interval: 0, acting: Vec::new() }), lost)
}

/// Decides the authority and each replica's recovery from the replicas' summaries and the
/// newest interval the map records as activated (`recorded`): writes are acknowledged only
/// in recorded intervals, so a complete copy activated in it or later holds every one.
/// Without a record (maps from before records were kept), a complete member of the newest
/// interval any replica knows to have gone active must answer instead.
pub fn plan(
    primary: OsdId,
    summaries: &BTreeMap<OsdId, PgSummary>,
    recorded: Option<&ActiveInterval>,
) -> Result<Plan, Blocked> {
    if let Some(recorded) = recorded {
        let heard = summaries.values().any(|s| s.info.complete && s.info.last_epoch_started >= recorded.interval);
        if !heard {
            return Err(Blocked::Down { epoch: recorded.interval, acting: recorded.acting.clone() });
        }
    } else if let Some(newest) =
        summaries.values().max_by_key(|s| s.info.last_epoch_started).filter(|s| s.info.last_epoch_started > 0)
    {
        let les = newest.info.last_epoch_started;
        let heard = newest
            .info
            .last_acting
            .iter()
            .any(|osd| summaries.get(osd).is_some_and(|s| s.info.complete && s.info.last_epoch_started == les));
        if !heard {
            return Err(Blocked::Down { epoch: les, acting: newest.info.last_acting.clone() });
        }
    }
    // With a record, only a copy activated in the recorded interval or later may be the
    // authority: an older one's newer entries are an unacknowledged tail.
    let current = |s: &PgSummary| recorded.is_none_or(|r| s.info.last_epoch_started >= r.interval);
    let (&auth, auth_summary) = summaries
        .iter()
        .filter(|(_, s)| s.info.complete && current(s))
        .max_by_key(|(osd, s)| (s.info.last_update, **osd == primary, std::cmp::Reverse(**osd)))
        .ok_or(Blocked::Incomplete)?;
    let auth_positions: HashSet<EVersion> = auth_summary.log.iter().map(|p| p.at).collect();
    let peers = summaries
        .iter()
        .map(|(&osd, summary)| {
            let peer_plan = if osd == auth {
                PeerPlan { keep_until: Some(summary.info.last_update), recovery: Recovery::None }
            } else {
                catch_up(summary, auth_summary, &auth_positions)
            };
            (osd, peer_plan)
        })
        .collect();
    Ok(Plan { auth, peers, stray_sources: BTreeMap::new(), serve_after_recovery: false })
}

/// How `peer` catches up with `auth`.
fn catch_up(peer: &PgSummary, auth: &PgSummary, auth_positions: &HashSet<EVersion>) -> PeerPlan {
    let backfill = PeerPlan { keep_until: None, recovery: Recovery::Backfill };
    if !peer.info.complete {
        return backfill;
    }
    let shared = |at: &EVersion| *at == auth.info.log_tail || auth_positions.contains(at);
    let common = peer.log.iter().rev().map(|p| p.at).chain([peer.info.log_tail]).find(shared);
    let Some(common) = common else { return backfill };
    let missing: BTreeSet<ObjectName> =
        auth.log.iter().chain(peer.log.iter()).filter(|p| p.at > common).map(|p| p.object.clone()).collect();
    let recovery = if missing.is_empty() { Recovery::None } else { Recovery::Log(missing) };
    PeerPlan { keep_until: Some(common), recovery }
}

/// Summaries for the peering tests.
#[cfg(test)]
pub(crate) mod test_support {
    use shoal_types::pg::{EVersion, LogPoint, PgInfo, PgSummary};
    use shoal_types::{ObjectName, OsdId};

    /// A log position.
    pub fn at(epoch: u64, version: u64) -> EVersion {
        EVersion { epoch, version }
    }

    /// A copy's summary: its log entries `(epoch, version, object)`, whether it is
    /// complete, its last epoch started and that interval's acting set.
    pub fn summary(entries: &[(u64, u64, &str)], complete: bool, les: u64, acting: &[u32]) -> PgSummary {
        let log: Vec<LogPoint> =
            entries.iter().map(|&(e, v, o)| LogPoint { at: at(e, v), object: ObjectName::new("", o) }).collect();
        PgSummary {
            info: PgInfo {
                last_update: log.last().map_or_else(EVersion::default, |p| p.at),
                log_tail: EVersion::default(),
                complete,
                last_epoch_started: les,
                last_acting: acting.iter().map(|&o| OsdId(o)).collect(),
            },
            log,
            missing: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{at, summary};
    use super::*;

    #[test]
    fn divergent_tail_of_an_old_primary_is_rolled_back() {
        let mut s = BTreeMap::new();
        s.insert(OsdId(0), summary(&[(1, 1, "a"), (1, 2, "b"), (1, 3, "x")], true, 1, &[0, 1, 2]));
        s.insert(OsdId(1), summary(&[(1, 1, "a"), (1, 2, "b"), (5, 3, "c")], true, 5, &[1, 2]));
        let p = plan(OsdId(0), &s, None).unwrap();
        assert_eq!(p.auth, OsdId(1));
        let objs: BTreeSet<_> = ["c", "x"].iter().map(|o| ObjectName::new("", *o)).collect();
        assert_eq!(p.peers[&OsdId(0)], PeerPlan { keep_until: Some(at(1, 2)), recovery: Recovery::Log(objs) });
    }

    #[test]
    fn incomplete_copies_are_backfilled_and_never_the_authority() {
        let mut s = BTreeMap::new();
        s.insert(OsdId(0), summary(&[(1, 1, "a"), (1, 2, "b")], false, 1, &[0, 1]));
        s.insert(OsdId(1), summary(&[(1, 1, "a")], true, 1, &[0, 1]));
        let p = plan(OsdId(0), &s, None).unwrap();
        assert_eq!(p.auth, OsdId(1));
        assert_eq!(p.peers[&OsdId(0)].recovery, Recovery::Backfill);
        s.remove(&OsdId(1));
        assert_eq!(plan(OsdId(0), &s, None), Err(Blocked::Down { epoch: 1, acting: vec![OsdId(0), OsdId(1)] }));
        let never_active = BTreeMap::from([(OsdId(0), summary(&[(1, 1, "a")], false, 0, &[]))]);
        assert_eq!(plan(OsdId(0), &never_active, None), Err(Blocked::Incomplete));
    }

    #[test]
    fn waits_for_a_member_of_the_newest_active_interval() {
        let mut s = BTreeMap::new();
        s.insert(OsdId(0), summary(&[(1, 1, "a")], true, 1, &[0, 1, 2]));
        s.insert(OsdId(3), summary(&[], true, 0, &[]));
        // osd.1 and osd.2 went active at epoch 4 without osd.0; neither answered.
        s.insert(OsdId(4), summary(&[], false, 4, &[1, 2, 4]));
        assert_eq!(
            plan(OsdId(0), &s, None),
            Err(Blocked::Down { epoch: 4, acting: vec![OsdId(1), OsdId(2), OsdId(4)] })
        );
    }

    #[test]
    fn a_record_whose_members_were_declared_lost_no_longer_holds_peering_back() {
        use shoal_types::{OsdEntry, PoolId};
        let pg = PgId { pool: PoolId(1), seed: 0 };
        let mut map = OsdMap::default();
        for o in 0..4 {
            let entry = OsdEntry { addr: String::new(), host: "h".into(), weight: 0x10000, up: o != 1, is_in: true };
            map.osds.insert(OsdId(o), entry);
        }
        map.pg_active.insert(pg, ActiveInterval { interval: 6, acting: vec![OsdId(1), OsdId(2)] });
        let recorded = Some(map.pg_active[&pg].clone());
        assert_eq!(required_activation(&map, pg, 1), (recorded.clone(), vec![]));
        // osd.1 declared lost, osd.2 still a member: the PG waits for osd.2.
        map.osd_lost.insert(OsdId(1), 9);
        assert_eq!(required_activation(&map, pg, 1), (recorded.clone(), vec![]));
        // ... but an erasure-coded PG needing two members cannot be decoded from one.
        let waived = Some(ActiveInterval { interval: 0, acting: vec![] });
        assert_eq!(required_activation(&map, pg, 2), (waived.clone(), vec![OsdId(1)]));
        // osd.2 purged: nobody of interval 6 remains.
        map.osds.remove(&OsdId(2));
        assert_eq!(required_activation(&map, pg, 1), (waived.clone(), vec![OsdId(1), OsdId(2)]));
        // Under the waived record, a copy from an older interval may lead; with none, an
        // empty new member does.
        let (waived, _) = required_activation(&map, pg, 1);
        let empty = || summary(&[], true, 0, &[]);
        let s = BTreeMap::from([(OsdId(0), summary(&[(3, 1, "a")], true, 3, &[0])), (OsdId(3), empty())]);
        assert_eq!(plan(OsdId(3), &s, waived.as_ref()).unwrap().auth, OsdId(0));
        let s = BTreeMap::from([(OsdId(3), empty())]);
        assert_eq!(plan(OsdId(3), &s, waived.as_ref()).unwrap().auth, OsdId(3));
        assert!(matches!(plan(OsdId(3), &s, recorded.as_ref()), Err(Blocked::Down { epoch: 6, .. })));
    }

    #[test]
    fn with_a_recorded_interval_a_complete_copy_activated_in_it_or_later_must_answer() {
        let mut s = BTreeMap::new();
        // osd.1 went active alone in interval 6 (recorded) while osd.0 was away.
        s.insert(OsdId(0), summary(&[(1, 1, "a")], true, 1, &[0, 1]));
        let recorded = ActiveInterval { interval: 6, acting: vec![OsdId(1)] };
        assert_eq!(plan(OsdId(0), &s, Some(&recorded)), Err(Blocked::Down { epoch: 6, acting: vec![OsdId(1)] }));
        // An interval activated later but never recorded (so it wrote nothing) does not
        // block: osd.2's copy from interval 8, complete, is enough.
        s.insert(OsdId(2), summary(&[(1, 1, "a"), (6, 2, "b")], true, 8, &[2, 3]));
        assert_eq!(plan(OsdId(0), &s, Some(&recorded)).unwrap().auth, OsdId(2));
        // A copy older than the record is not the authority, however long its log: its
        // newer entries were never acknowledged.
        let mut stale = s.clone();
        stale.insert(OsdId(0), summary(&[(1, 1, "a"), (1, 2, "x"), (1, 3, "y")], true, 1, &[0, 1]));
        stale.insert(OsdId(1), summary(&[(1, 1, "a")], true, 6, &[1]));
        stale.remove(&OsdId(2));
        assert_eq!(plan(OsdId(0), &stale, Some(&recorded)).unwrap().auth, OsdId(1));
        // Without the record, the newest activation known (8, osd.3 silent) would block.
        s.insert(OsdId(2), summary(&[(1, 1, "a"), (6, 2, "b")], false, 8, &[2, 3]));
        assert_eq!(plan(OsdId(0), &s, Some(&recorded)), Err(Blocked::Down { epoch: 6, acting: vec![OsdId(1)] }));
    }
}
