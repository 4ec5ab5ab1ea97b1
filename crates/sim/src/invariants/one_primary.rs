//! At most one OSD acknowledges writes for a PG in one interval: two would mean two
//! histories of the PG, one of which peering must throw away.

use super::Violation;
use shoal_types::{OsdId, PgId};
use std::collections::BTreeMap;

/// Which OSD acknowledged writes of each PG in each interval.
#[derive(Default)]
pub struct OnePrimary {
    writers: BTreeMap<(PgId, u64), OsdId>,
}

impl OnePrimary {
    /// `osd`, serving `pg` in `interval`, acknowledged a write.
    pub fn acknowledged(&mut self, pg: PgId, interval: u64, osd: OsdId, at: &str) -> Result<(), Violation> {
        match self.writers.insert((pg, interval), osd) {
            Some(other) if other != osd => Err(Violation {
                invariant: "one_primary",
                detail: format!("{at}: {osd} and {other} both acknowledged writes of pg {pg} in interval {interval}"),
            }),
            _ => Ok(()),
        }
    }
}
