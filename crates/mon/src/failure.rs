//! The monitor's failure policy as a pure function of failure reports, boots and `now`:
//! an OSD reported silent by enough distinct peers (each report counting for
//! `osd_heartbeat_grace`) is marked down, and so is one whose
//! address refused a peer's connection (one report: its process is gone); one down for
//! `mon_osd_down_out_interval` is marked out; one the monitor marked out comes back in
//! when it boots.
//!
//! Rule: no clock, no IO, no tokio. `now` is passed in as the time since any fixed origin,
//! so the monitor daemon and the deterministic simulator drive the same code.

use crate::change::MapChange;
use shoal_types::{OsdId, OsdMap};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How failure reports become map changes (`mon_osd_min_down_reporters`,
/// `mon_osd_down_out_interval`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailurePolicy {
    /// Distinct reporters needed to mark an OSD down (fewer if fewer OSDs are up).
    pub min_down_reporters: usize,
    /// How long an OSD stays down before it is marked out.
    pub down_out_interval: Duration,
    /// How long a report counts (`osd_heartbeat_grace`): reporters repeat theirs every
    /// heartbeat interval while the target stays silent.
    pub report_lifetime: Duration,
}

impl Default for FailurePolicy {
    fn default() -> Self {
        FailurePolicy {
            min_down_reporters: 2,
            down_out_interval: Duration::from_secs(600),
            report_lifetime: Duration::from_secs(20),
        }
    }
}

/// What the leader remembers between map changes to apply a [`FailurePolicy`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailureTracker {
    /// Per silent OSD, the up OSDs that reported it and when they last did.
    reports: BTreeMap<OsdId, BTreeMap<OsdId, Duration>>,
    /// When each down OSD was first seen down.
    down_since: BTreeMap<OsdId, Duration>,
    /// OSDs the monitor marked out itself: they come back in when they boot.
    auto_out: BTreeSet<OsdId>,
}

/// What a peer saw of the OSD it reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report<'a> {
    /// No heartbeat reply within the grace period.
    Silent,
    /// This address of the OSD refused the connection.
    Refused {
        /// The address.
        addr: &'a str,
    },
}

/// What a failure report led to.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The report is about or from an OSD that is not up: ignored.
    Ignored,
    /// Recorded; `count` of `needed` distinct reporters so far.
    Counted {
        /// Distinct reporters of the target.
        count: usize,
        /// Reporters needed to mark it down.
        needed: usize,
    },
    /// Enough reporters: the change marking the target down.
    Down(MapChange),
}

impl FailureTracker {
    /// `reporter` reports `target` failed at `now`. A refused connection counts only at
    /// the address `map` gives the target (not one it left when it restarted).
    pub fn reported(
        &mut self,
        policy: &FailurePolicy,
        map: &OsdMap,
        target: OsdId,
        reporter: OsdId,
        how: Report,
        now: Duration,
    ) -> Verdict {
        let up = |id: &OsdId| map.osds.get(id).is_some_and(|o| o.up);
        if !up(&target) || !up(&reporter) {
            return Verdict::Ignored;
        }
        if let Report::Refused { addr } = how {
            if map.osds.get(&target).is_none_or(|o| o.addr != addr) {
                return Verdict::Ignored;
            }
            return self.mark_down(target, now);
        }
        let others_up = map.osds.values().filter(|o| o.up).count().saturating_sub(1);
        let needed = policy.min_down_reporters.min(others_up).max(1);
        let reporters = self.reports.entry(target).or_default();
        reporters.insert(reporter, now);
        reporters.retain(|_, at| now.saturating_sub(*at) < policy.report_lifetime);
        let count = reporters.len();
        if count < needed {
            return Verdict::Counted { count, needed };
        }
        self.mark_down(target, now)
    }

    fn mark_down(&mut self, target: OsdId, now: Duration) -> Verdict {
        self.reports.remove(&target);
        self.down_since.insert(target, now);
        Verdict::Down(MapChange::MarkDown(target))
    }

    /// An OSD booted: its reports and down time are forgotten. Returns whether the monitor
    /// had marked it out (it comes back in).
    pub fn booted(&mut self, id: OsdId) -> bool {
        self.reports.remove(&id);
        self.down_since.remove(&id);
        self.auto_out.remove(&id)
    }

    /// The OSDs of `map` that are down and in and have been down for the policy's
    /// interval at `now` (none while the `noout` flag is set). An OSD first seen down here
    /// counts as down from `now`.
    pub fn due_out(&mut self, policy: &FailurePolicy, map: &OsdMap, now: Duration) -> Vec<OsdId> {
        let noout = map.flags.contains("noout");
        map.osds
            .iter()
            .filter(|(_, o)| !o.up && o.is_in)
            .filter(|(id, _)| {
                let since = *self.down_since.entry(**id).or_insert(now);
                !noout && now.saturating_sub(since) >= policy.down_out_interval
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// The monitor marked `id` out (after [`FailureTracker::due_out`] named it).
    pub fn marked_out(&mut self, id: OsdId) {
        self.auto_out.insert(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::OsdEntry;

    fn map(osds: &[(u32, bool, bool)]) -> OsdMap {
        let mut map = OsdMap::default();
        for &(id, up, is_in) in osds {
            let entry = OsdEntry {
                addr: format!("127.0.0.1:{}", 6800 + id),
                host: format!("h{id}"),
                weight: 0x10000,
                up,
                is_in,
            };
            map.osds.insert(OsdId(id), entry);
        }
        map
    }

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn reports_mark_down_once_enough_distinct_up_reporters_agree() {
        let policy = FailurePolicy { min_down_reporters: 2, ..FailurePolicy::default() };
        // (osds (id, up, in), reports (target, reporter) in order, verdict of the last one)
        type Case = (&'static [(u32, bool, bool)], &'static [(u32, u32)], Verdict);
        let cases: &[Case] = &[
            (&[(0, true, true), (1, true, true), (2, true, true)], &[(0, 1)], Verdict::Counted { count: 1, needed: 2 }),
            (
                &[(0, true, true), (1, true, true), (2, true, true)],
                &[(0, 1), (0, 1)],
                Verdict::Counted { count: 1, needed: 2 },
            ),
            (
                &[(0, true, true), (1, true, true), (2, true, true)],
                &[(0, 1), (0, 2)],
                Verdict::Down(MapChange::MarkDown(OsdId(0))),
            ),
            // Two OSDs: the one other OSD up is enough.
            (&[(0, true, true), (1, true, true)], &[(0, 1)], Verdict::Down(MapChange::MarkDown(OsdId(0)))),
            // A down reporter, or a target already down, is ignored.
            (&[(0, true, true), (1, false, true), (2, true, true)], &[(0, 1)], Verdict::Ignored),
            (&[(0, false, true), (1, true, true), (2, true, true)], &[(0, 1)], Verdict::Ignored),
            // Reports of different targets do not add up.
            (
                &[(0, true, true), (1, true, true), (2, true, true)],
                &[(1, 0), (0, 1)],
                Verdict::Counted { count: 1, needed: 2 },
            ),
        ];
        for (osds, reports, expected) in cases {
            let map = map(osds);
            let mut tracker = FailureTracker::default();
            let mut last = Verdict::Ignored;
            for &(target, reporter) in *reports {
                last = tracker.reported(&policy, &map, OsdId(target), OsdId(reporter), Report::Silent, secs(1));
            }
            assert_eq!(&last, expected, "osds {osds:?}, reports {reports:?}");
        }
    }

    #[test]
    fn a_down_osd_goes_out_after_the_interval_and_back_in_when_it_boots() {
        let policy = FailurePolicy { min_down_reporters: 1, ..FailurePolicy::default() };
        let up = map(&[(0, true, true), (1, true, true)]);
        let mut tracker = FailureTracker::default();
        assert_eq!(
            tracker.reported(&policy, &up, OsdId(0), OsdId(1), Report::Silent, secs(100)),
            Verdict::Down(MapChange::MarkDown(OsdId(0)))
        );
        let down = map(&[(0, false, true), (1, true, true)]);
        // (now, OSDs due out)
        for (now, due) in
            [(secs(100), vec![]), (secs(699), vec![]), (secs(700), vec![OsdId(0)]), (secs(5000), vec![OsdId(0)])]
        {
            assert_eq!(tracker.due_out(&policy, &down, now), due, "at {now:?}");
        }
        tracker.marked_out(OsdId(0));
        let out = map(&[(0, false, false), (1, true, true)]);
        assert!(tracker.due_out(&policy, &out, secs(6000)).is_empty(), "an out OSD is not marked out again");
        assert!(tracker.booted(OsdId(0)), "marked out by the monitor: back in at boot");
        assert!(!tracker.booted(OsdId(0)), "only once");
    }

    #[test]
    fn an_osd_found_down_counts_from_when_it_was_first_seen() {
        let policy = FailurePolicy { down_out_interval: secs(10), ..FailurePolicy::default() };
        let down = map(&[(0, false, true), (1, true, true)]);
        let mut tracker = FailureTracker::default();
        assert!(tracker.due_out(&policy, &down, secs(50)).is_empty());
        assert!(tracker.due_out(&policy, &down, secs(59)).is_empty());
        let mut noout = down.clone();
        noout.flags.insert("noout".into());
        assert!(tracker.due_out(&policy, &noout, secs(60)).is_empty(), "noout: nothing is marked out");
        assert_eq!(tracker.due_out(&policy, &down, secs(60)), vec![OsdId(0)]);
        // A boot forgets the down time: down again later counts from then.
        assert!(!tracker.booted(OsdId(0)), "marked out by an operator or not at all: stays as it is");
        assert!(tracker.due_out(&policy, &down, secs(65)).is_empty());
    }

    #[test]
    fn one_refused_connection_marks_down_at_the_address_the_map_gives_only() {
        let policy = FailurePolicy::default();
        let up = map(&[(0, true, true), (1, true, true), (2, true, true)]);
        let refused = |addr| Report::Refused { addr };
        let mut tracker = FailureTracker::default();
        // An address the OSD left (it restarted elsewhere) says nothing of it now.
        assert_eq!(
            tracker.reported(&policy, &up, OsdId(0), OsdId(1), refused("127.0.0.1:1"), secs(1)),
            Verdict::Ignored
        );
        // Nor does a reporter the map has down.
        let reporter_down = map(&[(0, true, true), (1, false, true), (2, true, true)]);
        let at = "127.0.0.1:6800";
        assert_eq!(
            tracker.reported(&policy, &reporter_down, OsdId(0), OsdId(1), refused(at), secs(1)),
            Verdict::Ignored
        );
        assert_eq!(
            tracker.reported(&policy, &up, OsdId(0), OsdId(1), refused(at), secs(2)),
            Verdict::Down(MapChange::MarkDown(OsdId(0)))
        );
        // Its down time counts from the report.
        let down = map(&[(0, false, true), (1, true, true), (2, true, true)]);
        assert!(tracker.due_out(&policy, &down, secs(601)).is_empty());
        assert_eq!(tracker.due_out(&policy, &down, secs(602)), vec![OsdId(0)]);
    }

    #[test]
    fn a_report_older_than_its_lifetime_no_longer_counts() {
        let policy = FailurePolicy { report_lifetime: secs(20), ..FailurePolicy::default() };
        let up = map(&[(0, true, true), (1, true, true), (2, true, true)]);
        let mut tracker = FailureTracker::default();
        // osd.1 lost touch with osd.0 for a moment long ago; osd.2 does now.
        tracker.reported(&policy, &up, OsdId(0), OsdId(1), Report::Silent, secs(100));
        assert_eq!(
            tracker.reported(&policy, &up, OsdId(0), OsdId(2), Report::Silent, secs(121)),
            Verdict::Counted { count: 1, needed: 2 }
        );
        // osd.1 reports again while osd.2's report is fresh: two reporters agree.
        assert_eq!(
            tracker.reported(&policy, &up, OsdId(0), OsdId(1), Report::Silent, secs(140)),
            Verdict::Down(MapChange::MarkDown(OsdId(0)))
        );
    }

    #[test]
    fn a_boot_forgets_earlier_reports() {
        let policy = FailurePolicy::default();
        let up = map(&[(0, true, true), (1, true, true), (2, true, true)]);
        let mut tracker = FailureTracker::default();
        tracker.reported(&policy, &up, OsdId(0), OsdId(1), Report::Silent, secs(1));
        tracker.booted(OsdId(0));
        assert_eq!(
            tracker.reported(&policy, &up, OsdId(0), OsdId(2), Report::Silent, secs(2)),
            Verdict::Counted { count: 1, needed: 2 }
        );
    }
}
