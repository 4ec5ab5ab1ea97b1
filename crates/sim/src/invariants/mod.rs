//! The properties a run must keep, one per file. The chaos phase checks the safety ones
//! as the events they concern happen; the healing phase then requires progress. Besides
//! these, a run ends with a `store` violation if the object store fails on the simulated
//! disk, which itself never fails.

pub mod acknowledged_writes;
pub mod consistent_shards;
pub mod healing;
pub mod identical_replicas;
pub mod one_primary;

/// A broken invariant: which one, and what was seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The invariant's name (its file).
    pub invariant: &'static str,
    /// What was seen, at what simulated time.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}
