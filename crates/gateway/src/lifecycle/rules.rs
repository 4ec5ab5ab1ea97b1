//! Lifecycle rules as a bucket stores them, and what they do to a key: pure functions of
//! the key's versions (as the index lists them, newest first) and the time, so that every
//! decision is table-tested without a cluster.

use serde::{Deserialize, Serialize};

/// One nanosecond-based day of real time.
pub const DAY_NS: u64 = 86_400 * 1_000_000_000;

/// One rule of a bucket's lifecycle configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// The rule's ID.
    pub id: String,
    /// Disabled rules do nothing.
    pub enabled: bool,
    /// Which objects the rule applies to.
    pub filter: Filter,
    /// Expiration of current versions (or of expired delete markers).
    pub expiration: Option<Expiration>,
    /// Expiration of noncurrent versions.
    pub noncurrent: Option<NoncurrentExpiration>,
    /// Days after initiation when incomplete multipart uploads are aborted.
    pub abort_incomplete_days: Option<u32>,
}

/// Which objects a rule applies to: all of the conditions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    /// Key prefix.
    pub prefix: String,
    /// Tags the object must have.
    pub tags: Vec<(String, String)>,
    /// Size strictly above, in bytes.
    pub size_greater_than: Option<u64>,
    /// Size strictly below, in bytes.
    pub size_less_than: Option<u64>,
}

/// When current versions expire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expiration {
    /// This many days after their creation.
    Days(u32),
    /// From this time on (ns since the epoch).
    Date(u64),
    /// Only delete markers left with no other version.
    ExpiredObjectDeleteMarker,
}

/// When noncurrent versions expire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoncurrentExpiration {
    /// Days after they became noncurrent.
    pub days: u32,
    /// The newest this many noncurrent versions are kept whatever their age.
    pub newer_noncurrent_versions: Option<u32>,
}

/// A version as the rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    /// Size in bytes.
    pub size: u64,
    /// Creation time, ns since the epoch.
    pub mtime_ns: u64,
    /// It is a delete marker.
    pub delete_marker: bool,
}

/// What lifecycle does to one version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Expire the current version: delete it (never-versioned bucket) or add a delete marker.
    ExpireCurrent,
    /// Remove a delete marker that has no other version left.
    RemoveExpiredMarker,
    /// Remove a noncurrent version.
    ExpireNoncurrent,
}

/// How long a lifecycle "day" is, and whether ages count from midnight UTC as AWS's do
/// (`rgw_lc_debug_interval` makes a day that many seconds and counts plainly).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// Now, ns since the epoch.
    pub now_ns: u64,
    /// A day, ns.
    pub day_ns: u64,
    /// Round `now` down to a day boundary before comparing (real days only).
    pub round: bool,
}

impl Clock {
    /// Whether `days` lifecycle days have passed since `since_ns`.
    pub fn passed(&self, since_ns: u64, days: u32) -> bool {
        let now = if self.round { self.now_ns - self.now_ns % self.day_ns } else { self.now_ns };
        now.saturating_sub(since_ns) >= u64::from(days).saturating_mul(self.day_ns)
    }
}

impl Filter {
    /// Whether an object of `key` and `size` matches all but the tags (which need its head).
    pub fn matches_index(&self, key: &str, size: u64) -> bool {
        key.starts_with(&self.prefix)
            && self.size_greater_than.is_none_or(|gt| size > gt)
            && self.size_less_than.is_none_or(|lt| size < lt)
    }

    /// Whether `tags` include every tag of the filter.
    pub fn matches_tags(&self, tags: &[(String, String)]) -> bool {
        self.tags.iter().all(|t| tags.contains(t))
    }
}

/// What the enabled `rules` do to the versions of `key` (newest first): (version index,
/// action, rule index) for every version some rule acts on (the first rule that does),
/// before tag filters, which the caller checks against the version's head.
pub fn plan(rules: &[Rule], key: &str, versions: &[Version], clock: &Clock) -> Vec<(usize, Action, usize)> {
    let mut out = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let action = rules.iter().enumerate().filter(|(_, r)| r.enabled).find_map(|(n, rule)| {
            let size_ok = v.delete_marker || rule.filter.matches_index(key, v.size);
            if !key.starts_with(&rule.filter.prefix) || !size_ok {
                return None;
            }
            let action = if i == 0 {
                current_action(rule, v, versions.len() == 1, clock)
            } else {
                noncurrent_action(rule, i, versions[i - 1].mtime_ns, clock)
            };
            action.map(|a| (i, a, n))
        });
        out.extend(action);
    }
    out
}

fn current_action(rule: &Rule, v: &Version, alone: bool, clock: &Clock) -> Option<Action> {
    let expiration = rule.expiration?;
    if v.delete_marker {
        // A marker with nothing behind it is expired, under any expiration rule (as RGW does).
        return alone.then_some(Action::RemoveExpiredMarker);
    }
    let due = match expiration {
        Expiration::Days(days) => clock.passed(v.mtime_ns, days),
        Expiration::Date(at_ns) => clock.now_ns >= at_ns,
        Expiration::ExpiredObjectDeleteMarker => false,
    };
    due.then_some(Action::ExpireCurrent)
}

/// Version `index` (from 1) became noncurrent when its successor was written.
fn noncurrent_action(rule: &Rule, index: usize, successor_mtime_ns: u64, clock: &Clock) -> Option<Action> {
    let noncurrent = rule.noncurrent?;
    let kept = noncurrent.newer_noncurrent_versions.unwrap_or(0) as usize;
    (index > kept && clock.passed(successor_mtime_ns, noncurrent.days)).then_some(Action::ExpireNoncurrent)
}

/// Whether an upload of `key` initiated at `initiated_ns` is aborted by `rules`.
pub fn aborts_upload(rules: &[Rule], key: &str, initiated_ns: u64, clock: &Clock) -> bool {
    rules.iter().filter(|r| r.enabled).any(|r| {
        key.starts_with(&r.filter.prefix) && r.abort_incomplete_days.is_some_and(|d| clock.passed(initiated_ns, d))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 10; // a debug day of 10 ns

    fn clock(now_ns: u64) -> Clock {
        Clock { now_ns, day_ns: DAY, round: false }
    }

    fn v(mtime_ns: u64, size: u64, delete_marker: bool) -> Version {
        Version { size, mtime_ns, delete_marker }
    }

    fn rule(expiration: Option<Expiration>, noncurrent: Option<(u32, Option<u32>)>) -> Rule {
        Rule {
            id: "r".into(),
            enabled: true,
            expiration,
            noncurrent: noncurrent.map(|(days, newer)| NoncurrentExpiration { days, newer_noncurrent_versions: newer }),
            ..Rule::default()
        }
    }

    #[test]
    fn decisions() {
        use Action::*;
        let days = |d| Some(Expiration::Days(d));
        // (rules, versions newest first, now, expected (version index, action))
        type Row = (Vec<Rule>, Vec<Version>, u64, Vec<(usize, Action)>);
        let table: Vec<Row> = vec![
            (vec![rule(days(2), None)], vec![v(100, 1, false)], 119, vec![]),
            (vec![rule(days(2), None)], vec![v(100, 1, false)], 120, vec![(0, ExpireCurrent)]),
            (vec![rule(Some(Expiration::Date(500)), None)], vec![v(100, 1, false)], 499, vec![]),
            (vec![rule(Some(Expiration::Date(500)), None)], vec![v(100, 1, false)], 500, vec![(0, ExpireCurrent)]),
            // A lone delete marker expires; one with versions behind it does not.
            (
                vec![rule(Some(Expiration::ExpiredObjectDeleteMarker), None)],
                vec![v(100, 0, true)],
                100,
                vec![(0, RemoveExpiredMarker)],
            ),
            (vec![rule(days(1), None)], vec![v(100, 0, true), v(50, 1, false)], 1000, vec![]),
            (vec![rule(Some(Expiration::ExpiredObjectDeleteMarker), None)], vec![v(100, 1, false)], 1000, vec![]),
            // Noncurrent versions count from their successor's creation.
            (vec![rule(None, Some((1, None)))], vec![v(200, 1, false), v(100, 1, false)], 209, vec![]),
            (
                vec![rule(None, Some((1, None)))],
                vec![v(200, 1, false), v(100, 1, false)],
                210,
                vec![(1, ExpireNoncurrent)],
            ),
            // The newest N noncurrent versions stay.
            (
                vec![rule(None, Some((0, Some(2))))],
                vec![v(400, 1, false), v(300, 1, false), v(200, 1, false), v(100, 1, false)],
                400,
                vec![(3, ExpireNoncurrent)],
            ),
            // Current and noncurrent in one pass; disabled rules do nothing.
            (
                vec![rule(days(1), Some((1, None)))],
                vec![v(200, 1, false), v(100, 1, false)],
                300,
                vec![(0, ExpireCurrent), (1, ExpireNoncurrent)],
            ),
            (vec![Rule { enabled: false, ..rule(days(1), None) }], vec![v(100, 1, false)], 1000, vec![]),
        ];
        for (i, (rules, versions, now, expected)) in table.into_iter().enumerate() {
            let got: Vec<(usize, Action)> =
                plan(&rules, "k", &versions, &clock(now)).into_iter().map(|(i, a, _)| (i, a)).collect();
            assert_eq!(got, expected, "row {i}");
        }
    }

    #[test]
    fn filters_by_prefix_size_and_tags() {
        let mut r = rule(Some(Expiration::Days(0)), None);
        r.filter = Filter {
            prefix: "logs/".into(),
            size_greater_than: Some(10),
            size_less_than: Some(100),
            tags: vec![("t".into(), "1".into())],
        };
        let rules = [r.clone()];
        let plan_of = |key: &str, size| plan(&rules, key, &[v(0, size, false)], &clock(0)).len();
        assert_eq!(
            (plan_of("logs/a", 50), plan_of("data/a", 50), plan_of("logs/a", 10), plan_of("logs/a", 100)),
            (1, 0, 0, 0)
        );
        assert!(r.filter.matches_tags(&[("t".into(), "1".into()), ("u".into(), "2".into())]));
        assert!(!r.filter.matches_tags(&[("t".into(), "2".into())]));
    }

    #[test]
    fn real_days_count_from_midnight_utc() {
        let day = DAY_NS;
        let created = 3 * day + day / 2; // noon of day 3
        let at = |now_ns| Clock { now_ns, day_ns: day, round: true }.passed(created, 1);
        assert!(!at(4 * day + day / 2 + 1), "a day later, but day 4 has not ended");
        assert!(at(5 * day), "midnight after the first full day");
    }

    #[test]
    fn uploads_abort_after_their_days() {
        let rules = [Rule {
            abort_incomplete_days: Some(2),
            filter: Filter { prefix: "tmp/".into(), ..Filter::default() },
            ..rule(None, None)
        }];
        assert!(aborts_upload(&rules, "tmp/x", 0, &clock(20)));
        assert!(!aborts_upload(&rules, "tmp/x", 0, &clock(19)));
        assert!(!aborts_upload(&rules, "keep/x", 0, &clock(100)));
    }
}
