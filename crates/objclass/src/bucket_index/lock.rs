//! S3 object lock on a version: retention (governance or compliance, until a time) and a
//! legal hold, kept in the version's index entry so that the class enforces them in the
//! same transaction as a removal, against the OSD's clock.

use serde::{Deserialize, Serialize};
use shoal_types::{Result, err};

/// How a retention protects a version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockMode {
    /// Removable before its date only by a requester allowed to bypass governance.
    Governance,
    /// Removable by nobody before its date; the date may only move later.
    Compliance,
}

/// A version's retention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// The mode.
    pub mode: LockMode,
    /// Retained until this time, ns since the Unix epoch.
    pub until_ns: u64,
}

/// The object lock state of a version.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectLock {
    /// Retention, if any (one in the past no longer protects).
    pub retention: Option<Retention>,
    /// A legal hold: no removal while on, whatever the retention.
    pub legal_hold: bool,
}

impl ObjectLock {
    /// The retention that still protects at `now_ns`.
    pub fn active(&self, now_ns: u64) -> Option<Retention> {
        self.retention.filter(|r| r.until_ns > now_ns)
    }

    /// Why the version may not be removed at `now_ns` (with `bypass_governance`), if so.
    pub fn forbids_removal(&self, now_ns: u64, bypass_governance: bool) -> Option<&'static str> {
        if self.legal_hold {
            return Some("the version is under a legal hold");
        }
        match self.active(now_ns).map(|r| r.mode) {
            Some(LockMode::Compliance) => Some("the version is retained in compliance mode"),
            Some(LockMode::Governance) if !bypass_governance => Some("the version is retained in governance mode"),
            _ => None,
        }
    }

    /// Whether `new` may replace this retention at `now_ns`: a stricter one always (later
    /// date, governance to compliance); a weaker one only for governance, with bypass.
    pub fn may_become(&self, new: Option<Retention>, now_ns: u64, bypass_governance: bool) -> Result<()> {
        if let Some(r) = new
            && r.until_ns <= now_ns
        {
            return Err(err::invalid("the retain-until date must be in the future"));
        }
        let Some(old) = self.active(now_ns) else { return Ok(()) };
        let stricter = new.is_some_and(|n| {
            n.until_ns >= old.until_ns && (n.mode == LockMode::Compliance || old.mode == LockMode::Governance)
        });
        match (stricter, old.mode) {
            (true, _) => Ok(()),
            (false, LockMode::Governance) if bypass_governance => Ok(()),
            (false, LockMode::Governance) => {
                Err(err::access("shortening or removing a governance retention needs bypass"))
            }
            (false, LockMode::Compliance) => Err(err::access("a compliance retention can only be extended")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_000;

    fn lock(mode: LockMode, until_ns: u64, legal_hold: bool) -> ObjectLock {
        ObjectLock { retention: Some(Retention { mode, until_ns }), legal_hold }
    }

    #[test]
    fn removal_rules() {
        use LockMode::*;
        // (lock, bypass, allowed)
        let table = [
            (ObjectLock::default(), false, true),
            (lock(Governance, NOW + 1, false), false, false),
            (lock(Governance, NOW + 1, false), true, true),
            (lock(Compliance, NOW + 1, false), true, false),
            (lock(Compliance, NOW, false), false, true),
            (lock(Governance, NOW - 1, true), true, false),
            (ObjectLock { retention: None, legal_hold: true }, true, false),
        ];
        for (i, (lock, bypass, allowed)) in table.into_iter().enumerate() {
            assert_eq!(lock.forbids_removal(NOW, bypass).is_none(), allowed, "row {i}: {lock:?} bypass={bypass}");
        }
    }

    #[test]
    fn retention_changes() {
        use LockMode::*;
        let r = |mode, until_ns| Some(Retention { mode, until_ns });
        // (current, new, bypass, allowed)
        let table = [
            (lock(Compliance, NOW + 10, false), r(Compliance, NOW + 20), false, true),
            (lock(Compliance, NOW + 10, false), r(Compliance, NOW + 5), true, false),
            (lock(Compliance, NOW + 10, false), r(Governance, NOW + 20), true, false),
            (lock(Compliance, NOW + 10, false), None, true, false),
            (lock(Governance, NOW + 10, false), r(Compliance, NOW + 10), false, true),
            (lock(Governance, NOW + 10, false), r(Governance, NOW + 5), false, false),
            (lock(Governance, NOW + 10, false), r(Governance, NOW + 5), true, true),
            (lock(Governance, NOW + 10, false), None, true, true),
            (lock(Compliance, NOW - 1, false), None, false, true),
            (ObjectLock::default(), r(Compliance, NOW + 1), false, true),
        ];
        for (i, (lock, new, bypass, allowed)) in table.into_iter().enumerate() {
            let result = lock.may_become(new, NOW, bypass);
            assert_eq!(result.is_ok(), allowed, "row {i}: {lock:?} -> {new:?} bypass={bypass}: {result:?}");
        }
        let past = ObjectLock::default().may_become(r(Governance, NOW), NOW, false).unwrap_err();
        assert_eq!(past.errno, shoal_types::Errno::InvalidArgument);
    }
}
