//! A deterministic whole-cluster simulator. In one thread, it runs several OSDs driven by
//! the real PG core ([`shoal_pg_core::Shard`]) over simulated disks that lose unsynced
//! writes on a crash, the monitor's map logic ([`shoal_mon::change`] and
//! [`shoal_mon::failure`]) and clients whose every acknowledged write goes into an oracle.
//!
//! One seed decides everything: the topology, the pool, the workload and the faults —
//! message loss (the connection resets), delay, duplication and reordering (between
//! connections: one connection delivers in order, as TCP does); partitions of a
//! host; OSD crashes and restarts; slow disks; clock jumps; OSDs marked out and in. A run
//! has two phases. In the chaos phase the safety invariants ([`invariants`]) are checked as
//! the events they concern happen; in the healing phase faults stop, and every PG must
//! become active+clean and every client operation be answered within a bounded simulated
//! time, after which the replicas of every PG must be identical. The same seed gives the
//! same trace, which [`Outcome::trace`] hashes.

pub mod disk;
pub mod invariants;
pub mod scenario;
mod world;

pub use invariants::Violation;
pub use scenario::Scenario;
pub use world::{Options, Outcome, run};
