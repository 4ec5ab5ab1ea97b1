//! The primary of an erasure-coded PG: peering by shard, client operations that gather
//! stripes from `k` shards before they run, writes sent to every shard as its own
//! transaction with what undoes it, and recovery that rebuilds each shard from `k` others.
//!
//! An object being gathered is locked: later operations on it wait in its queue, in
//! order, and a gather starts only once no write to the object is in flight, so the
//! shards it reads agree. A recovery holds its object's lock until its last part is sent:
//! a client write to the object reaches the recovering shard after the rebuilt copy, on
//! the same in-order link.

use crate::action::Action;
use crate::ec::EcLayout;
use crate::peering::{self, Blocked, PeerPlan, Plan, Recovery, StraySource};
use bytes::Bytes;
use shoal_erasure::ErasureCoder;
use shoal_store::Onode;
use shoal_types::erasure::PoolErasure;
use shoal_types::msg::OsdOp;
use shoal_types::pg::{EVersion, PgSummary};
use shoal_types::{ActiveInterval, ClientId, ObjectName, OsdId, Result, err};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// Logical bytes rebuilt per recovery push (a larger object goes in parts).
pub(crate) const REBUILD_PART_BYTES: u64 = crate::limits::COPY_PART_BYTES as u64;

/// A client operation and where its reply goes.
pub(crate) struct Op<R> {
    pub(crate) op: OsdOp,
    pub(crate) caller: ClientId,
    pub(crate) reply: R,
}

/// What an erasure-coded PG's primary keeps besides what every primary keeps.
pub(crate) struct EcPrimary<R> {
    pub(crate) layout: EcLayout,
    pub(crate) coder: Arc<dyn ErasureCoder>,
    pub(crate) allow_overwrites: bool,
    /// Operations waiting for their object, oldest first.
    pub(crate) queued: BTreeMap<ObjectName, VecDeque<Op<R>>>,
    /// Objects whose chunks are being gathered, and what for.
    pub(crate) gathers: BTreeMap<ObjectName, Gather<R>>,
    pub(crate) next_gather: u64,
    /// The strays read in place of backfilled positions until recovery is done.
    pub(crate) stray_sources: BTreeMap<usize, StraySource>,
    /// When the interval is recorded and client operations are served.
    pub(crate) serving: Serving,
}

/// When an erasure-coded PG's interval is recorded and its client operations served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Serving {
    /// Recorded at activation: the acting set can decode every object.
    Now,
    /// Once recovery is done, the acting set alone could not decode every object. Until
    /// then the interval acknowledges no write, so no stray's copy goes stale, and a
    /// primary that crashes leaves peering where it was.
    AfterRecovery,
    /// Recovery is done; waiting for the store to make the primary's own copy's
    /// completion durable, which peering after a crash needs.
    Syncing,
    /// The record asked for.
    Recording,
}

impl<R> EcPrimary<R> {
    pub(crate) fn new(erasure: &PoolErasure, store_chunk: u32) -> Result<EcPrimary<R>> {
        Ok(EcPrimary {
            layout: EcLayout::new(&erasure.code, store_chunk),
            coder: Arc::from(shoal_erasure::coder(erasure.code.k, erasure.code.m)?),
            allow_overwrites: erasure.allow_overwrites,
            queued: BTreeMap::new(),
            gathers: BTreeMap::new(),
            next_gather: 0,
            stray_sources: BTreeMap::new(),
            serving: Serving::Now,
        })
    }

    pub(crate) fn k(&self) -> usize {
        self.layout.stripes.k as usize
    }

    /// Takes the activated plan's stray sources and when it serves.
    pub(crate) fn activated(&mut self, plan: &Plan) {
        self.stray_sources = plan.stray_sources.clone();
        self.serving = if plan.serve_after_recovery { Serving::AfterRecovery } else { Serving::Now };
    }

    pub(crate) fn busy(&self, object: &ObjectName) -> bool {
        self.gathers.contains_key(object) || self.queued.get(object).is_some_and(|q| !q.is_empty())
    }

    pub(crate) fn queued_ops(&self) -> usize {
        self.queued.values().map(VecDeque::len).sum()
    }

    /// Answers every waiting operation with EAGAIN and drops the gathers (peering again).
    pub(crate) fn fail_all(&mut self, why: &str, out: &mut Vec<Action<R>>) {
        let gathered = std::mem::take(&mut self.gathers).into_values().filter_map(|g| match g.purpose {
            Purpose::Op(op, _) => Some(op),
            Purpose::Rebuild { .. } | Purpose::Verify => None,
        });
        let queued = std::mem::take(&mut self.queued).into_values().flatten();
        for op in gathered.chain(queued) {
            out.push(Action::Reply { to: op.reply, after: 0, value: Err(err::again(why.to_owned())) });
        }
    }
}

/// What chunks are gathered for.
pub(crate) enum Purpose<R> {
    /// A client operation, with the chunks gathered for it before.
    Op(Op<R>, BTreeMap<u32, Bytes>),
    /// Rebuilding `target`'s shard of the object.
    Rebuild { target: OsdId },
    /// A deep scrub's parity check: every shard is read.
    Verify,
}

impl<R> Purpose<R> {
    /// Shards to read: `k`, or all of them for a parity check.
    pub(crate) fn shards_needed(&self, layout: &EcLayout) -> usize {
        match self {
            Purpose::Verify => layout.shards(),
            _ => layout.stripes.k as usize,
        }
    }
}

/// Logical chunks `first..end` of an object, being read from `k` shards.
pub(crate) struct Gather<R> {
    pub(crate) id: u64,
    pub(crate) purpose: Purpose<R>,
    pub(crate) first: u32,
    pub(crate) end: u32,
    /// Per shard: its block once it answered.
    pub(crate) blocks: Vec<Option<Vec<u8>>>,
    /// The logical metadata of the shards that answered.
    pub(crate) onodes: BTreeMap<usize, Option<Onode>>,
    /// Shards asked (answered or not), and those not answered yet with the OSD asked.
    pub(crate) asked: BTreeSet<usize>,
    pub(crate) pending: BTreeMap<usize, OsdId>,
}

/// Peering by shard: each copy is the shard at its position in the acting set it was last
/// activated in (a copy never activated holds nothing, and stands for its position now);
/// [`peering::erasure::plan`] decides on those, and an OSD whose copy is of another shard
/// than its position now is backfilled. Returns the plan by OSD and the authoritative head.
pub(crate) fn plan(
    k: usize,
    acting: &[OsdId],
    summaries: &BTreeMap<OsdId, PgSummary>,
    recorded: Option<&ActiveInterval>,
) -> std::result::Result<(Plan, EVersion), Blocked> {
    let mut holders: BTreeMap<u8, (OsdId, &PgSummary)> = BTreeMap::new();
    for (osd, summary) in summaries {
        let Some(shard) = copy_shard(*osd, summary, acting) else { continue };
        // A copy peering can use (activated in the recorded interval or later, knowing
        // what it lacks) first: an older complete one would only block.
        let rank = |s: &PgSummary| {
            (peering::erasure::usable(s, recorded), s.info.complete, s.info.last_epoch_started, s.info.last_update)
        };
        if holders.get(&(shard as u8)).is_none_or(|(_, held)| rank(summary) > rank(held)) {
            holders.insert(shard as u8, (*osd, summary));
        }
    }
    let by_shard: BTreeMap<u8, PgSummary> = holders.iter().map(|(i, (_, s))| (*i, (*s).clone())).collect();
    // A copy whose OSD now serves another shard is backfilled over as that shard.
    let moving: BTreeSet<u8> = holders
        .iter()
        .filter(|(shard, (osd, _))| acting.contains(osd) && acting.get(**shard as usize) != Some(osd))
        .map(|(shard, _)| *shard)
        .collect();
    // Any copy may show it, the ones that lost their shard's place above too.
    let emptied =
        recorded.is_some_and(|r| summaries.values().any(|s| peering::erasure::took_empty_history_since(s, r)));
    let decided = peering::erasure::plan(k, &by_shard, &moving, recorded, emptied)?;
    let (auth, auth_summary) = holders.get(&decided.auth).copied().ok_or(Blocked::Incomplete)?;
    let backfill = PeerPlan { keep_until: None, recovery: Recovery::Backfill };
    let mut peers: BTreeMap<OsdId, PeerPlan> = summaries.keys().map(|osd| (*osd, backfill.clone())).collect();
    let history = peering::erasure::History::new(auth_summary, decided.head);
    let mut older = Vec::new();
    for (shard, osd) in acting.iter().enumerate().filter(|(_, o)| **o != OsdId::NONE) {
        let shard_plan = match holders.get(&(shard as u8)).filter(|(holder, _)| holder == osd) {
            Some(_) => decided.shards.get(&(shard as u8)).cloned(),
            // An older copy of the OSD's own shard than the one peering counted (it came
            // back after another OSD stood in for it) catches up by log where its history
            // meets the authority's, as any copy: it is not emptied and refilled.
            None => summaries.get(osd).filter(|s| copy_shard(*osd, s, acting) == Some(shard)).map(|summary| {
                older.push(*osd);
                history.catch_up(summary)
            }),
        };
        peers.insert(*osd, shard_plan.unwrap_or_else(|| backfill.clone()));
    }
    // Unless that leaves an object lacking on too many shards: backfilled, their positions
    // may be served by strays instead (below).
    if check_decodable(k, &acting_serving(acting, &peers), recorded).is_err() {
        for osd in older {
            peers.insert(osd, backfill.clone());
        }
    }
    // At an empty head (nothing written, or all of it rolled back) there is nothing to
    // decode: backfilling is emptying.
    let empty = decided.head == EVersion::default();
    let stray_sources = match check_decodable(k, &acting_serving(acting, &peers), recorded) {
        Ok(()) => None,
        Err(_) if empty => Some(BTreeMap::new()),
        Err(blocked) => {
            // Strays holding the shards of backfilled positions can serve as sources, as
            // Ceph's pg_temp keeps such copies acting until the backfill is done.
            let sources = stray_sources(acting, &peers, &holders, &decided.shards, recorded);
            if sources.is_empty() {
                return Err(blocked);
            }
            let as_recovery: Vec<Recovery> = sources
                .values()
                .map(|s| if s.lacks.is_empty() { Recovery::None } else { Recovery::Log(s.lacks.clone()) })
                .collect();
            let mut serving = acting_serving(acting, &peers);
            serving.extend(&as_recovery);
            check_decodable(k, &serving, recorded)?;
            Some(sources)
        }
    };
    let serve_after_recovery = stray_sources.is_some();
    let stray_sources = stray_sources.unwrap_or_default();
    Ok((Plan { auth, peers, stray_sources, serve_after_recovery }, decided.head))
}

/// The shard `osd`'s copy is of: its position in the acting set it was last activated in
/// (one never activated holds nothing and stands for its position in `acting`).
pub(crate) fn copy_shard(osd: OsdId, summary: &PgSummary, acting: &[OsdId]) -> Option<usize> {
    let positions = if summary.info.last_acting.is_empty() { acting } else { &summary.info.last_acting };
    positions.iter().position(|o| *o == osd)
}

/// The positions whose acting OSD is backfilled while an OSD outside the acting set holds
/// that position's shard as peering can use it (activated in the recorded interval or
/// later, knowing what it lacks), with what it lacks of the authoritative head.
pub(crate) fn stray_sources(
    acting: &[OsdId],
    peers: &BTreeMap<OsdId, PeerPlan>,
    holders: &BTreeMap<u8, (OsdId, &PgSummary)>,
    shard_plans: &BTreeMap<u8, PeerPlan>,
    recorded: Option<&ActiveInterval>,
) -> BTreeMap<usize, StraySource> {
    let usable = |shard: u8| {
        let (osd, summary) = holders.get(&shard)?;
        let plan = shard_plans.get(&shard)?;
        let lacks = match &plan.recovery {
            Recovery::None => BTreeSet::new(),
            Recovery::Log(objects) => objects.clone(),
            Recovery::Backfill => return None,
        };
        let kept = plan.keep_until?;
        let roll_back_to = (summary.info.last_update > kept).then_some(kept);
        let usable = peering::erasure::usable(summary, recorded);
        (usable && !acting.contains(osd)).then_some(StraySource { osd: *osd, lacks, roll_back_to })
    };
    acting
        .iter()
        .enumerate()
        .filter(|(_, osd)| peers.get(osd).is_some_and(|plan| plan.recovery == Recovery::Backfill))
        .filter_map(|(shard, _)| Some((shard, usable(shard as u8)?)))
        .collect()
}

/// What each acting shard not being backfilled must recover.
pub(crate) fn acting_serving<'a>(acting: &[OsdId], peers: &'a BTreeMap<OsdId, PeerPlan>) -> Vec<&'a Recovery> {
    acting
        .iter()
        .filter_map(|osd| peers.get(osd))
        .map(|plan| &plan.recovery)
        .filter(|r| **r != Recovery::Backfill)
        .collect()
}

/// Checks that every object can be rebuilt from the shards that serve (what each must
/// recover): at least `k` of them, and for each object some shard lacks, `k` that do
/// not. Activating otherwise would leave rebuilds that cannot finish.
pub(crate) fn check_decodable(
    k: usize,
    serving: &[&Recovery],
    recorded: Option<&ActiveInterval>,
) -> std::result::Result<(), Blocked> {
    if serving.len() < k {
        return Err(Blocked::waiting_for(recorded));
    }
    let lacks = |r: &Recovery, object: &ObjectName| matches!(r, Recovery::Log(objects) if objects.contains(object));
    let lacked: BTreeSet<&ObjectName> = serving
        .iter()
        .flat_map(|r| if let Recovery::Log(objects) = r { objects.iter().collect() } else { Vec::new() })
        .collect();
    for object in lacked {
        let holders = serving.iter().filter(|r| !lacks(r, object)).count();
        if holders < k {
            return Err(Blocked::Unfound { object: object.clone(), holders });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strays_stand_in_for_backfilled_positions_when_the_acting_set_cannot_decode() {
        use crate::peering::test_support::{at, summary};
        // 2+1: interval 5 (recorded) wrote "a" on OSDs 0, 1 and 2; "b" reached osd.2 only.
        // Now OSDs 3 and 4 hold positions 1 and 2: only osd.0's shard is in the acting set.
        let recorded = ActiveInterval { interval: 5, acting: vec![OsdId(0), OsdId(1), OsdId(2)] };
        let a = [(5, 1, "a")];
        let mut summaries = BTreeMap::from([
            (OsdId(0), summary(&a, true, 5, &[0, 1, 2])),
            (OsdId(1), summary(&a, true, 5, &[0, 1, 2])),
            (OsdId(2), summary(&[(5, 1, "a"), (5, 2, "b")], true, 5, &[0, 1, 2])),
            (OsdId(3), summary(&[], true, 0, &[])),
            (OsdId(4), summary(&[], true, 0, &[])),
        ]);
        let acting = [OsdId(0), OsdId(3), OsdId(4)];
        let (planned, head) = plan(2, &acting, &summaries, Some(&recorded)).unwrap();
        assert_eq!(head, at(5, 1));
        assert_eq!(planned.peers[&OsdId(3)].recovery, Recovery::Backfill);
        assert!(planned.serve_after_recovery);
        let stray = |osd, roll_back_to| StraySource { osd: OsdId(osd), lacks: BTreeSet::new(), roll_back_to };
        assert_eq!(planned.stray_sources, BTreeMap::from([(1, stray(1, None)), (2, stray(2, Some(at(5, 1))))]));
        // With osd.1 serving its own position, the acting set decodes: no strays are read.
        summaries.remove(&OsdId(3));
        let (decodable, _) = plan(2, &[OsdId(0), OsdId(1), OsdId(4)], &summaries, Some(&recorded)).unwrap();
        assert!(decodable.stray_sources.is_empty() && !decodable.serve_after_recovery);
    }

    #[test]
    fn a_returning_osd_catches_up_by_log_past_the_copy_that_stood_in_for_it() {
        use crate::peering::test_support::{at, summary};
        // 2+1: interval 5 wrote "a" on OSDs 0, 1 and 2. osd.2 went out; osd.3, backfilled
        // as position 2, went active in interval 9 (recorded), which wrote "b". osd.2 is
        // back at position 2 and osd.3 a stray holding the newer copy of that shard.
        let recorded = ActiveInterval { interval: 9, acting: vec![OsdId(0), OsdId(1), OsdId(3)] };
        let both = [(5, 1, "a"), (9, 1, "b")];
        let summaries = BTreeMap::from([
            (OsdId(0), summary(&both, true, 9, &[0, 1, 3])),
            (OsdId(1), summary(&both, true, 9, &[0, 1, 3])),
            (OsdId(2), summary(&both[..1], true, 5, &[0, 1, 2])),
            (OsdId(3), summary(&both, true, 9, &[0, 1, 3])),
        ]);
        let (planned, head) = plan(2, &[OsdId(0), OsdId(1), OsdId(2)], &summaries, Some(&recorded)).unwrap();
        assert_eq!(head, at(9, 1));
        let b = BTreeSet::from([ObjectName::new("", "b")]);
        assert_eq!(planned.peers[&OsdId(2)], PeerPlan { keep_until: Some(at(5, 1)), recovery: Recovery::Log(b) });
        assert!(planned.stray_sources.is_empty() && !planned.serve_after_recovery);
        // Without osd.1, "b" would have one holder in the acting set: osd.2 is backfilled
        // and the stray osd.3 serves its position meanwhile.
        let (planned, _) = plan(2, &[OsdId(0), OsdId::NONE, OsdId(2)], &summaries, Some(&recorded)).unwrap();
        assert_eq!(planned.peers[&OsdId(2)].recovery, Recovery::Backfill);
        assert_eq!(planned.stray_sources.get(&2).map(|s| s.osd), Some(OsdId(3)));
    }

    #[test]
    fn a_copy_activated_after_the_record_with_an_empty_history_shows_the_pg_is_empty() {
        use crate::peering::test_support::summary;
        // 2+1, the simulator's seed 8842: interval 22 (recorded) went active on osd.0 and
        // osd.3 at an empty head; its write (22, 1) reached osd.0 only. Interval 66 (never
        // recorded) took the empty head again, backfilling osd.3 as position 0 over its
        // copy of position 2: osd.0's copy, of position 0 too, takes that place.
        const NONE: u32 = u32::MAX;
        let recorded = ActiveInterval { interval: 22, acting: vec![OsdId(0), OsdId::NONE, OsdId(3)] };
        let mut summaries = BTreeMap::from([
            (OsdId(0), summary(&[(22, 1, "a")], true, 22, &[0, NONE, 3])),
            (OsdId(1), summary(&[], true, 9, &[0, 3, 1])),
            (OsdId(2), summary(&[], true, 0, &[])),
            (OsdId(3), summary(&[], false, 66, &[3, 2, NONE])),
        ]);
        let acting = [OsdId(0), OsdId(2), OsdId(1)];
        let (planned, head) = plan(2, &acting, &summaries, Some(&recorded)).unwrap();
        assert_eq!(head, EVersion::default());
        assert_eq!(planned.peers[&OsdId(0)].keep_until, Some(EVersion::default()), "(22, 1) is rolled back");
        // Had interval 66 taken (22, 1), it would show nothing: the PG waits for interval
        // 22's other copies.
        summaries.insert(OsdId(3), summary(&[(22, 1, "a")], false, 66, &[3, 2, NONE]));
        assert_eq!(
            plan(2, &acting, &summaries, Some(&recorded)).map(|(_, head)| head),
            Err(Blocked::Down { epoch: 22, acting: recorded.acting.clone() })
        );
    }

    #[test]
    fn activation_needs_k_acting_shards_holding_each_object() {
        let acting: Vec<OsdId> = (0..4).map(OsdId).collect();
        let lacking = |names: &[&str]| PeerPlan {
            keep_until: None,
            recovery: Recovery::Log(names.iter().map(|n| ObjectName::new("", *n)).collect()),
        };
        let whole = PeerPlan { keep_until: None, recovery: Recovery::None };
        let backfill = PeerPlan { keep_until: None, recovery: Recovery::Backfill };
        let recorded = ActiveInterval { interval: 4, acting: acting.clone() };
        // 2+2: "a" is lacked by two shards, held by two: enough.
        let mut peers: BTreeMap<OsdId, PeerPlan> =
            [(0, whole.clone()), (1, whole.clone()), (2, lacking(&["a"])), (3, lacking(&["a", "b"]))]
                .into_iter()
                .map(|(o, p)| (OsdId(o), p))
                .collect();
        assert_eq!(check_decodable(2, &acting_serving(&acting, &peers), Some(&recorded)), Ok(()));
        // A third shard lacking "a" leaves one holder.
        peers.insert(OsdId(1), lacking(&["a"]));
        let unfound = Blocked::Unfound { object: ObjectName::new("", "a"), holders: 1 };
        assert_eq!(check_decodable(2, &acting_serving(&acting, &peers), Some(&recorded)), Err(unfound));
        // Shards being backfilled, or out of the acting set, serve nothing.
        let peers: BTreeMap<OsdId, PeerPlan> = [(0, whole.clone()), (1, backfill.clone()), (2, backfill), (7, whole)]
            .into_iter()
            .map(|(o, p)| (OsdId(o), p))
            .collect();
        assert_eq!(
            check_decodable(2, &acting_serving(&acting, &peers), Some(&recorded)),
            Err(Blocked::Down { epoch: 4, acting: acting.clone() })
        );
        assert_eq!(check_decodable(2, &acting_serving(&acting, &peers), None), Err(Blocked::Incomplete));
    }
}
