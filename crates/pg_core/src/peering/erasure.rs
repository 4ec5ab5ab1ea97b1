//! Peering decisions for an erasure-coded PG, as a pure function of what each shard's copy
//! says about its history.
//!
//! A write is acknowledged once every acting shard holds it, and a shard can be rebuilt
//! from any `k` others, so the rules differ from replication's:
//! - The authoritative history ends at the newest entry that at least `k` distinct shards
//!   hold (only complete copies, activated in the recorded interval or later, count):
//!   every object written up to there can be decoded.
//! - Entries after that point, or off that history, are divergent. Shards holding them roll
//!   them back (each shard kept what the entry overwrote), newest first, which leaves
//!   those objects as they were at the kept point.
//! - A shard behind the authoritative head gets the objects written since its last entry
//!   on that history, decoded from `k` others, plus those it already lacked; one whose
//!   history ends before the authority's log tail, or that is being backfilled, is
//!   backfilled again.
//! - A shard being recovered by log counts like a complete one: it holds every entry of
//!   its interval (writes reach every acting shard) and knows which objects it lacks.
//! - With a recorded interval, at least `k` such shards activated in it or later must
//!   answer: fewer could hide a write acknowledged there. An older complete shard whose
//!   log ends at the same entry as a complete one of the recorded interval counts too:
//!   that one took every acknowledged write, so the older one missed none.

use super::{Blocked, PeerPlan, Recovery};
use shoal_types::pg::{EVersion, PgSummary};
use shoal_types::{ActiveInterval, ObjectName};
use std::collections::{BTreeMap, BTreeSet};

/// The outcome of peering an erasure-coded PG.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErasurePlan {
    /// The newest entry of the authoritative history.
    pub head: EVersion,
    /// The shard whose log is the authoritative history.
    pub auth: u8,
    /// Per shard that answered: the log it keeps (later entries are rolled back) and what
    /// it must receive.
    pub shards: BTreeMap<u8, PeerPlan>,
}

/// Whether peering can count a shard's copy: activated in the recorded interval or later,
/// and complete or knowing what it lacks (one being backfilled knows nothing).
pub(crate) fn usable(s: &PgSummary, recorded: Option<&ActiveInterval>) -> bool {
    let current = recorded.is_none_or(|r| s.info.last_epoch_started >= r.interval);
    current && (s.info.complete || s.missing.is_some())
}

/// Whether a copy's log holds no entry, trimmed or not.
fn holds_nothing(s: &PgSummary) -> bool {
    s.info.last_update == EVersion::default() && s.info.log_tail == EVersion::default()
}

/// Whether a copy, complete or not, was activated after the recorded interval and took an
/// empty history then. That activation's peering saw every write acknowledged up to the
/// recorded interval, and none was acknowledged since (a write is acknowledged only in a
/// recorded interval): no write was ever acknowledged.
pub(crate) fn took_empty_history_since(s: &PgSummary, recorded: &ActiveInterval) -> bool {
    s.info.last_epoch_started > recorded.interval && holds_nothing(s)
}

/// The authoritative history: the entries of the authority's log up to `head`, which
/// copies of every shard catch up with.
pub struct History<'a> {
    head: EVersion,
    log_tail: EVersion,
    entries: Vec<(EVersion, &'a ObjectName)>,
    positions: BTreeSet<EVersion>,
}

impl<'a> History<'a> {
    /// The history ending at `head` in the log of `auth`.
    pub fn new(auth: &'a PgSummary, head: EVersion) -> History<'a> {
        let entries: Vec<(EVersion, &ObjectName)> =
            auth.log.iter().filter(|p| p.at <= head).map(|p| (p.at, &p.object)).collect();
        let positions = entries.iter().map(|(at, _)| *at).collect();
        History { head, log_tail: auth.info.log_tail, entries, positions }
    }

    /// How a copy of a shard (`summary`) catches up: by log, keeping the newest entry it
    /// shares with the history (its later entries are rolled back) and receiving the
    /// objects written after it and those it already lacked; by backfill if it does not
    /// know what it lacks (it was being backfilled) or shares no entry within the
    /// authority's log.
    pub fn catch_up(&self, summary: &PgSummary) -> PeerPlan {
        let backfill = PeerPlan { keep_until: None, recovery: Recovery::Backfill };
        if !summary.info.complete && summary.missing.is_none() {
            return backfill;
        }
        let shared = |at: &EVersion| *at <= self.head && (self.positions.contains(at) || *at <= self.log_tail);
        let kept = summary.log.iter().rev().map(|p| p.at).chain([summary.info.log_tail]).find(shared);
        let Some(kept) = kept.filter(|at| *at >= self.log_tail) else { return backfill };
        let lacked = summary.missing.iter().flat_map(|m| m.objects.iter().cloned());
        let written = self.entries.iter().filter(|(at, _)| *at > kept).map(|(_, o)| (*o).clone());
        let missing: BTreeSet<ObjectName> = written.chain(lacked).collect();
        let recovery = if missing.is_empty() { Recovery::None } else { Recovery::Log(missing) };
        PeerPlan { keep_until: Some(kept), recovery }
    }
}

/// Decides the authoritative history and each shard's catch-up from the summaries of the
/// shards that answered (by shard index), for a code with `k` data shards. The copies of
/// `moving` shards are about to be backfilled over (their OSD serves another shard now):
/// they count for the head, but cannot be the authority whose log and objects the others
/// take. `emptied_since_record` says that some copy, of any shard, was activated after the
/// recorded interval with an empty history ([`took_empty_history_since`]).
pub fn plan(
    k: usize,
    summaries: &BTreeMap<u8, PgSummary>,
    moving: &BTreeSet<u8>,
    recorded: Option<&ActiveInterval>,
    emptied_since_record: bool,
) -> Result<ErasurePlan, Blocked> {
    // A complete copy of the recorded interval or later took every write acknowledged
    // since: an older complete copy whose log ends at the same entry missed none of them
    // and counts as well (the same entry means the same history up to it).
    let witnessed: BTreeSet<EVersion> =
        summaries.values().filter(|s| s.info.complete && usable(s, recorded)).map(|s| s.info.last_update).collect();
    let caught_up = |s: &PgSummary| s.info.complete && witnessed.contains(&s.info.last_update);
    let usable: BTreeMap<u8, &PgSummary> =
        summaries.iter().filter(|(_, s)| usable(s, recorded) || caught_up(s)).map(|(i, s)| (*i, s)).collect();
    // The PG is empty, whoever else answers, if no copy holds an entry and it never went
    // active (erasure-coded pools came after activation records, so every activation is
    // recorded), or if a complete copy activated in the recorded interval or later, which
    // was brought to the head then and took every write since, never held an entry, or if
    // a later activation found nothing to keep.
    let empty = match recorded {
        None => summaries.values().all(holds_nothing),
        Some(_) => emptied_since_record || usable.values().any(|s| s.info.complete && holds_nothing(s)),
    };
    if usable.len() < k && !empty {
        return Err(Blocked::waiting_for(recorded));
    }
    // A shard holds an entry it logs, or any entry at or before its log tail (trimmed
    // entries were held by every shard).
    let holds = |s: &PgSummary, at: EVersion| at <= s.info.log_tail || s.log.iter().any(|p| p.at == at);
    let candidates: BTreeSet<EVersion> =
        usable.values().flat_map(|s| s.log.iter().map(|p| p.at).chain([s.info.log_tail])).collect();
    let head = match empty {
        true => EVersion::default(),
        false => candidates
            .into_iter()
            .rev()
            .find(|at| usable.values().filter(|s| holds(s, *at)).count() >= k)
            .ok_or(Blocked::Incomplete)?,
    };
    // The authority's log and objects are what others take: a complete shard that stays,
    // or one that holds nothing.
    let (&auth, auth_summary) = usable
        .iter()
        .filter(|(i, s)| s.info.complete && holds(s, head) && (!moving.contains(i) || holds_nothing(s)))
        .max_by_key(|(i, s)| (s.log.len(), std::cmp::Reverse(**i)))
        .ok_or(Blocked::Incomplete)?;
    let history = History::new(auth_summary, head);
    let shards = summaries.iter().map(|(&index, summary)| (index, history.catch_up(summary))).collect();
    Ok(ErasurePlan { head, auth, shards })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peering::test_support::{at, summary};
    use shoal_types::OsdId;
    use shoal_types::pg::PgMissing;

    fn shard(entries: &[(u64, u64, &str)], complete: bool, les: u64) -> PgSummary {
        summary(entries, complete, les, &[])
    }

    fn objects(names: &[&str]) -> Recovery {
        Recovery::Log(names.iter().map(|o| ObjectName::new("", *o)).collect())
    }

    #[test]
    fn an_entry_on_fewer_than_k_shards_is_rolled_back_and_one_on_k_is_rolled_forward() {
        // 2+1: a write at (1, 3) reached shard 0 only; (1, 2) reached shards 0 and 1.
        let mut s = BTreeMap::new();
        s.insert(0, shard(&[(1, 1, "a"), (1, 2, "b"), (1, 3, "c")], true, 1));
        s.insert(1, shard(&[(1, 1, "a"), (1, 2, "b")], true, 1));
        s.insert(2, shard(&[(1, 1, "a")], true, 1));
        let p = plan(2, &s, &BTreeSet::new(), None, false).unwrap();
        assert_eq!(p.head, at(1, 2));
        // Rolling (1, 3) back leaves "c" as it was at (1, 2): nothing to rebuild.
        assert_eq!(p.shards[&0], PeerPlan { keep_until: Some(at(1, 2)), recovery: Recovery::None });
        assert_eq!(p.shards[&1], PeerPlan { keep_until: Some(at(1, 2)), recovery: Recovery::None });
        assert_eq!(p.shards[&2], PeerPlan { keep_until: Some(at(1, 1)), recovery: objects(&["b"]) });
    }

    #[test]
    fn divergent_histories_keep_the_one_k_shards_hold() {
        // A primary of interval 5 wrote (5, 3) to shards 1 and 2; shard 0 still has the
        // old primary's unacknowledged (1, 3).
        let mut s = BTreeMap::new();
        s.insert(0, shard(&[(1, 1, "a"), (1, 2, "b"), (1, 3, "x")], true, 1));
        s.insert(1, shard(&[(1, 1, "a"), (1, 2, "b"), (5, 3, "c")], true, 5));
        s.insert(2, shard(&[(1, 1, "a"), (1, 2, "b"), (5, 3, "c")], true, 5));
        let p = plan(2, &s, &BTreeSet::new(), None, false).unwrap();
        assert_eq!((p.head, p.auth), (at(5, 3), 1));
        assert_eq!(p.shards[&0], PeerPlan { keep_until: Some(at(1, 2)), recovery: objects(&["c"]) });
    }

    #[test]
    fn shards_recovered_by_log_count_for_the_head_and_keep_what_they_lack() {
        // 4+2: interval 7 (recorded) went active on five shards, two of them (3 and 4)
        // still lacking "a"; shard 5 was away. Then shard 0 answers no more.
        let recorded = ActiveInterval { interval: 7, acting: (0..6).map(OsdId).collect() };
        let log = [(1, 1, "a"), (7, 2, "b")];
        let lacking = |objects: &[&str]| {
            let mut s = shard(&log, false, 7);
            s.missing = Some(PgMissing { objects: objects.iter().map(|o| ObjectName::new("", *o)).collect() });
            s
        };
        let mut s = BTreeMap::new();
        s.insert(1, shard(&log, true, 7));
        s.insert(2, shard(&log, true, 7));
        s.insert(3, lacking(&["a"]));
        s.insert(4, lacking(&["a"]));
        s.insert(5, shard(&log[..1], true, 1));
        let p = plan(4, &s, &BTreeSet::new(), Some(&recorded), false).unwrap();
        assert_eq!((p.head, p.auth), (at(7, 2), 1));
        assert_eq!(p.shards[&3], PeerPlan { keep_until: Some(at(7, 2)), recovery: objects(&["a"]) });
        assert_eq!(p.shards[&5], PeerPlan { keep_until: Some(at(1, 1)), recovery: objects(&["b"]) });
        assert_eq!(p.shards[&1].recovery, Recovery::None);
        // Without a missing set an incomplete shard is being backfilled: it does not count.
        s.get_mut(&4).unwrap().missing = None;
        assert_eq!(
            plan(4, &s, &BTreeSet::new(), Some(&recorded), false),
            Err(Blocked::Down { epoch: 7, acting: recorded.acting.clone() })
        );
    }

    #[test]
    fn fewer_than_k_usable_shards_block_and_incomplete_ones_are_backfilled() {
        let recorded = ActiveInterval { interval: 4, acting: vec![OsdId(1), OsdId(2), OsdId(3)] };
        let mut s = BTreeMap::new();
        s.insert(0, shard(&[(4, 1, "a")], true, 4));
        s.insert(1, shard(&[(1, 1, "z")], true, 1));
        assert_eq!(
            plan(2, &s, &BTreeSet::new(), Some(&recorded), false),
            Err(Blocked::Down { epoch: 4, acting: recorded.acting.clone() })
        );
        s.insert(2, shard(&[(4, 1, "a")], true, 4));
        s.insert(3, shard(&[(4, 1, "a")], false, 4));
        let p = plan(2, &s, &BTreeSet::new(), Some(&recorded), false).unwrap();
        assert_eq!(p.head, at(4, 1));
        assert_eq!(p.shards[&3].recovery, Recovery::Backfill);
        // Shard 1 is older than the record: its (1, 1) is rolled back (leaving no "z"),
        // (4, 1) recovered.
        assert_eq!(p.shards[&1], PeerPlan { keep_until: Some(EVersion::default()), recovery: objects(&["a"]) });
        // A PG never recorded active holds nothing: one complete copy is enough.
        let never_active = BTreeMap::from([(0, shard(&[], true, 0)), (1, shard(&[], false, 5))]);
        assert_eq!(
            plan(3, &never_active, &BTreeSet::new(), None, false).map(|p| (p.head, p.auth)),
            Ok((EVersion::default(), 0))
        );
        assert_eq!(
            plan(3, &BTreeMap::from([(1, shard(&[], false, 5))]), &BTreeSet::new(), None, false),
            Err(Blocked::Incomplete)
        );
    }

    #[test]
    fn older_complete_copies_at_the_head_of_a_current_one_count_towards_k() {
        // 2+1: interval 8 (recorded) went active on shard 1 and a shard being backfilled,
        // and took no write after (6, 2). Shard 0, older, ends at the same entry: it
        // missed nothing. Shard 2, older and behind, proves nothing.
        let recorded = ActiveInterval { interval: 8, acting: vec![OsdId(3), OsdId(1)] };
        let log = [(6, 1, "a"), (6, 2, "b")];
        let mut s = BTreeMap::new();
        s.insert(0, shard(&log, true, 6));
        s.insert(1, shard(&log, true, 8));
        s.insert(2, shard(&log[..1], true, 7));
        let p = plan(2, &s, &BTreeSet::new(), Some(&recorded), false).unwrap();
        assert_eq!(p.head, at(6, 2));
        assert_eq!(p.shards[&2], PeerPlan { keep_until: Some(at(6, 1)), recovery: objects(&["b"]) });
        s.insert(0, shard(&log[..1], true, 6));
        assert_eq!(
            plan(2, &s, &BTreeSet::new(), Some(&recorded), false),
            Err(Blocked::Down { epoch: 8, acting: recorded.acting.clone() })
        );
    }

    #[test]
    fn one_empty_complete_copy_of_the_recorded_interval_shows_the_pg_is_empty() {
        // 3+1: interval 9 (recorded) left one complete copy, empty; the others are older
        // or being backfilled. Nothing was ever acknowledged, so nothing is to decode.
        let recorded = ActiveInterval { interval: 9, acting: (0..4).map(OsdId).collect() };
        let mut s = BTreeMap::new();
        s.insert(0, shard(&[], true, 9));
        s.insert(1, shard(&[], false, 9));
        s.insert(2, shard(&[(3, 1, "x")], true, 3));
        let p = plan(3, &s, &BTreeSet::new(), Some(&recorded), false).unwrap();
        assert_eq!((p.head, p.auth), (EVersion::default(), 0));
        assert_eq!(p.shards[&2], PeerPlan { keep_until: Some(EVersion::default()), recovery: Recovery::None });
        assert_eq!(p.shards[&1].recovery, Recovery::Backfill);
        // A copy that ever held an entry proves nothing: the PG waits.
        s.insert(0, shard(&[(9, 1, "a")], true, 9));
        assert_eq!(
            plan(3, &s, &BTreeSet::new(), Some(&recorded), false),
            Err(Blocked::Down { epoch: 9, acting: recorded.acting })
        );
    }

    #[test]
    fn a_copy_about_to_be_backfilled_counts_for_the_head_but_is_never_the_authority() {
        // 2+2: shard 1's copy has the longest log, but its OSD now serves shard 0.
        let mut s = BTreeMap::new();
        s.insert(1, shard(&[(1, 1, "a"), (1, 2, "b"), (1, 3, "c")], true, 1));
        s.insert(2, shard(&[(1, 1, "a"), (1, 2, "b"), (1, 3, "c")], true, 1));
        s.insert(3, shard(&[(1, 1, "a"), (1, 2, "b")], true, 1));
        let p = plan(2, &s, &BTreeSet::from([1]), None, false).unwrap();
        assert_eq!((p.head, p.auth), (at(1, 3), 2));
        // When only the moving copy is complete at the head, the PG waits rather than take
        // its log and objects from a copy that is being emptied.
        s.get_mut(&2).unwrap().info.complete = false;
        s.get_mut(&2).unwrap().missing = Some(PgMissing { objects: BTreeSet::from([ObjectName::new("", "a")]) });
        assert_eq!(plan(2, &s, &BTreeSet::from([1]), None, false), Err(Blocked::Incomplete));
        assert_eq!(plan(2, &s, &BTreeSet::new(), None, false).map(|p| p.auth), Ok(1));
    }
}
