//! How full the cluster is: the ratios at which an OSD's store counts as near full, too
//! full for backfill, or full; each OSD's state; pool quotas (Ceph's `osd set-full-ratio`,
//! `OSD_NEARFULL`, `osd pool set-quota`).

use crate::error::{Result, err};
use crate::ids::{OsdId, PoolId};
use serde::{Deserialize, Serialize};

/// Basis points in a whole (1/10,000ths: 9,500 is 95 %).
pub const WHOLE: u16 = 10_000;

/// A size as operators type it: `4096`, `4K`, `1M`, `10G`, `2T` (binary multiples).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let (digits, shift) = match text.as_bytes().last()? {
        b'K' | b'k' => (&text[..text.len() - 1], 10),
        b'M' | b'm' => (&text[..text.len() - 1], 20),
        b'G' | b'g' => (&text[..text.len() - 1], 30),
        b'T' | b't' => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// How full an OSD is, from least to most.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SpaceState {
    /// Past the near-full ratio: a warning.
    NearFull,
    /// Past the backfill-full ratio: backfill does not move data to it.
    BackfillFull,
    /// Past the full ratio: writes to its PGs are refused (ENOSPC); deletes still work.
    Full,
}

impl SpaceState {
    /// The name Ceph's health checks and `osd dump` use.
    pub fn name(self) -> &'static str {
        match self {
            SpaceState::NearFull => "nearfull",
            SpaceState::BackfillFull => "backfillfull",
            SpaceState::Full => "full",
        }
    }

    /// The state named `name` (`nearfull`, `backfillfull`, `full`).
    pub fn parse(name: &str) -> Result<SpaceState> {
        [SpaceState::NearFull, SpaceState::BackfillFull, SpaceState::Full]
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| err::invalid(format!("'{name}' is not nearfull, backfillfull or full")))
    }
}

/// The ratios of an OSD's store (data device and key-value store together) at which it
/// enters each [`SpaceState`], in basis points; Ceph's defaults are 0.85, 0.90 and 0.95.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FullRatios {
    /// Near full: 8,500.
    pub nearfull: u16,
    /// Backfill full: 9,000.
    pub backfillfull: u16,
    /// Full: 9,500.
    pub full: u16,
}

impl Default for FullRatios {
    fn default() -> Self {
        FullRatios { nearfull: 8_500, backfillfull: 9_000, full: 9_500 }
    }
}

impl FullRatios {
    /// The state of a store with `usage`, `None` below the near-full ratio.
    pub fn state(&self, usage: StoreUsage) -> Option<SpaceState> {
        let ratio = usage.basis_points();
        [
            (self.full, SpaceState::Full),
            (self.backfillfull, SpaceState::BackfillFull),
            (self.nearfull, SpaceState::NearFull),
        ]
        .into_iter()
        .find(|(at, _)| ratio >= *at)
        .map(|(_, state)| state)
    }

    /// These ratios with the one for `state` set to `basis_points`; EINVAL unless they
    /// stay ordered (near full ≤ backfill full ≤ full ≤ 100 %).
    pub fn with(&self, state: SpaceState, basis_points: u16) -> Result<FullRatios> {
        let mut ratios = *self;
        match state {
            SpaceState::NearFull => ratios.nearfull = basis_points,
            SpaceState::BackfillFull => ratios.backfillfull = basis_points,
            SpaceState::Full => ratios.full = basis_points,
        }
        if !(ratios.nearfull <= ratios.backfillfull && ratios.backfillfull <= ratios.full && ratios.full <= WHOLE) {
            return Err(err::invalid(format!(
                "the ratios must keep nearfull <= backfillfull <= full <= 1: that would make them {}",
                ratios.describe()
            )));
        }
        Ok(ratios)
    }

    /// `nearfull 0.85, backfillfull 0.9, full 0.95`.
    pub fn describe(&self) -> String {
        let f = |bp: u16| f64::from(bp) / f64::from(WHOLE);
        format!("nearfull {}, backfillfull {}, full {}", f(self.nearfull), f(self.backfillfull), f(self.full))
    }
}

/// How much space an OSD's store takes and how much more it could take (its free data
/// device space plus the file system's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreUsage {
    /// Bytes the store holds: data device extents and key-value files.
    pub used: u64,
    /// Bytes it could still write.
    pub available: u64,
}

impl StoreUsage {
    /// `used / (used + available)` in basis points (an empty store is 0).
    pub fn basis_points(&self) -> u16 {
        let total = u128::from(self.used) + u128::from(self.available);
        if total == 0 {
            return 0;
        }
        (u128::from(self.used) * u128::from(WHOLE) / total) as u16
    }
}

/// A pool's limits; 0 means none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolQuota {
    /// Most objects.
    pub max_objects: u64,
    /// Most bytes of object data.
    pub max_bytes: u64,
}

impl PoolQuota {
    /// Whether a pool holding `objects` objects of `bytes` bytes may take no more.
    pub fn reached_by(&self, objects: u64, bytes: u64) -> bool {
        (self.max_objects > 0 && objects >= self.max_objects) || (self.max_bytes > 0 && bytes >= self.max_bytes)
    }

    /// Whether any limit is set.
    pub fn is_set(&self) -> bool {
        self.max_objects > 0 || self.max_bytes > 0
    }
}

/// A change to the ratios, an OSD's state or a pool's quota.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpaceChange {
    /// Set the ratio at which OSDs enter `state` (`osd set-full-ratio` …).
    SetRatio {
        /// Which ratio.
        state: SpaceState,
        /// Its new value.
        basis_points: u16,
    },
    /// An OSD's store crossed a ratio (set by the monitor from the OSD's reports).
    OsdState {
        /// The OSD.
        osd: OsdId,
        /// Its state; `None` below the near-full ratio.
        state: Option<SpaceState>,
    },
    /// Set a pool's quota (`osd pool set-quota`): each limit given replaces the old one.
    PoolQuota {
        /// The pool's name.
        pool: String,
        /// Most objects, if given (0 removes the limit).
        max_objects: Option<u64>,
        /// Most bytes, if given (0 removes the limit).
        max_bytes: Option<u64>,
    },
    /// A pool reached its quota or fell below it again (set by the monitor).
    PoolFull {
        /// The pool.
        pool: PoolId,
        /// Whether writes to it are refused (EDQUOT).
        full: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_follow_the_ratios() {
        let ratios = FullRatios::default();
        let at = |used, available| ratios.state(StoreUsage { used, available });
        assert_eq!(at(0, 0), None);
        assert_eq!(at(84, 16), None);
        assert_eq!(at(85, 15), Some(SpaceState::NearFull));
        assert_eq!(at(90, 10), Some(SpaceState::BackfillFull));
        assert_eq!(at(95, 5), Some(SpaceState::Full));
        assert_eq!(at(1, 0), Some(SpaceState::Full));
        assert_eq!(StoreUsage { used: u64::MAX, available: u64::MAX }.basis_points(), 5_000);
    }

    #[test]
    fn ratios_stay_ordered() {
        let ratios = FullRatios::default();
        assert_eq!(ratios.with(SpaceState::Full, 9_700).unwrap().full, 9_700);
        let e = ratios.with(SpaceState::NearFull, 9_600).unwrap_err();
        assert!(e.message.contains("nearfull 0.96, backfillfull 0.9, full 0.95"), "{e}");
        assert!(ratios.with(SpaceState::Full, 10_001).is_err());
        assert_eq!(SpaceState::parse("backfillfull").unwrap(), SpaceState::BackfillFull);
        assert!(SpaceState::parse("fullish").unwrap_err().message.contains("fullish"));
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("4K"), Some(4096));
        assert_eq!(parse_bytes("1m"), Some(1 << 20));
        assert_eq!(parse_bytes("10G"), Some(10 << 30));
        assert_eq!(parse_bytes("2T"), Some(2 << 40));
        for bad in ["", "K", "1.5G", "-1", "99999999999T", "1X"] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_quota_is_reached_at_either_limit() {
        let quota = PoolQuota { max_objects: 10, max_bytes: 0 };
        assert!(!quota.reached_by(9, u64::MAX) && quota.reached_by(10, 0));
        let quota = PoolQuota { max_objects: 0, max_bytes: 100 };
        assert!(!quota.reached_by(u64::MAX, 99) && quota.reached_by(0, 100));
        assert!(!PoolQuota::default().reached_by(u64::MAX, u64::MAX) && !PoolQuota::default().is_set());
    }
}
