//! Once faults stop, the cluster heals: every PG is active+clean on the final map within a
//! bounded time, and every client operation is answered.

use super::Violation;
use shoal_types::PgId;
use shoal_types::pg::{PgStat, PgStateFlag};
use std::collections::BTreeMap;

/// The PGs of the map that are not active+clean, given every primary's reported states
/// (`stats` from OSDs that hold the map's epoch).
pub fn unclean(pgs: &[PgId], stats: &BTreeMap<PgId, PgStat>) -> Vec<PgId> {
    let clean = |s: &PgStat| s.state.contains(&PgStateFlag::Active) && s.state.contains(&PgStateFlag::Clean);
    pgs.iter().filter(|pg| !stats.get(pg).is_some_and(clean)).copied().collect()
}

/// The failure to report when the healing phase ran out of time.
pub fn timed_out(unclean: &[PgId], stats: &BTreeMap<PgId, PgStat>, pending_ops: usize, at: &str) -> Violation {
    let states: Vec<String> = unclean
        .iter()
        .map(|pg| match stats.get(pg) {
            Some(s) => format!("{pg} {:?} {}", s.state, s.note),
            None => format!("{pg} has no active primary"),
        })
        .collect();
    Violation {
        invariant: "healing",
        detail: format!(
            "{at}: not healed: {} PGs unclean ({}), {pending_ops} client ops unanswered",
            unclean.len(),
            states.join("; ")
        ),
    }
}
