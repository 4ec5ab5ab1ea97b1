//! What replicas of a placement group know about its history: log positions, log
//! entries and the persistent PG record that peering compares.

use crate::ids::{ObjectName, OsdId, ReqId};
use crate::op::StepOutput;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// A position in a PG's history: the map epoch of the interval whose primary wrote the
/// entry, then the PG's version counter. Ordered by epoch first, so a newer interval's
/// writes sort after anything an older primary wrote, even with equal counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EVersion {
    /// The interval (map epoch) of the primary that wrote it.
    pub epoch: u64,
    /// The PG's version counter; also the written object's user version.
    pub version: u64,
}

impl fmt::Display for EVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}'{}", self.epoch, self.version)
    }
}

/// One applied write, as every replica's PG log records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PgLogEntry {
    /// Where in the PG's history the write sits.
    pub at: EVersion,
    /// The request that made it.
    pub reqid: ReqId,
    /// The object it changed.
    pub object: ObjectName,
    /// The reply's outputs, unless they were too large to keep.
    pub outputs: Option<Vec<StepOutput>>,
}

impl crate::Versioned for PgLogEntry {
    const NAME: &'static str = "pg log entry";
    const VERSION: u8 = 2;

    fn decode_older(version: u8, body: &[u8]) -> Option<crate::Result<Self>> {
        (version == 1).then(|| crate::encoding::decode_body::<v1::PgLogEntry>("pg log entry v1", body).map(Into::into))
    }
}

/// Version 1 of the log entry, before replication: a bare version counter.
pub mod v1 {
    use crate::ids::{ObjectName, ReqId};
    use crate::op::StepOutput;
    use serde::{Deserialize, Serialize};

    /// The entry as version 1 stored it.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    pub struct PgLogEntry {
        /// Version counter.
        pub version: u64,
        /// Request id.
        pub reqid: ReqId,
        /// Object.
        pub object: ObjectName,
        /// Outputs.
        pub outputs: Option<Vec<StepOutput>>,
    }

    impl From<PgLogEntry> for super::PgLogEntry {
        fn from(old: PgLogEntry) -> Self {
            super::PgLogEntry {
                at: super::EVersion { epoch: 0, version: old.version },
                reqid: old.reqid,
                object: old.object,
                outputs: old.outputs,
            }
        }
    }
}

/// The persistent record of one PG on one OSD.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgInfo {
    /// The newest entry of the log.
    pub last_update: EVersion,
    /// The log holds every entry after this position (default: since the PG was created).
    pub log_tail: EVersion,
    /// Whether every object is as the log says. False while this OSD is being recovered
    /// or backfilled: such a copy must never become the authority.
    pub complete: bool,
    /// The newest interval this OSD took part in activating (last epoch started).
    pub last_epoch_started: u64,
    /// The acting set of that interval, primary first.
    pub last_acting: Vec<OsdId>,
}

impl PgInfo {
    /// The record of a PG this OSD has never held: complete, with nothing in it.
    pub fn empty() -> Self {
        PgInfo { complete: true, ..PgInfo::default() }
    }
}

impl crate::Versioned for PgInfo {
    const NAME: &'static str = "pg info";
    const VERSION: u8 = 1;
}

/// A log entry without its outputs: what peering compares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogPoint {
    /// Position.
    pub at: EVersion,
    /// The object written there.
    pub object: ObjectName,
}

/// What a replica tells the primary during peering.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgSummary {
    /// The replica's record.
    pub info: PgInfo,
    /// Its log, oldest first.
    pub log: Vec<LogPoint>,
    /// For an incomplete copy being recovered by log: the objects it lacks (Ceph's
    /// `pg_missing`); every other object is as its log says. `None` for a complete copy
    /// and for one being backfilled (which may lack anything).
    pub missing: Option<PgMissing>,
}

/// The objects an incomplete copy of a PG lacks, kept from its activation until it is
/// complete again; an object leaves the set once rebuilt whole. A superset: it may list an
/// object the copy holds (rebuilt before a reload of a set stored by an older version).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgMissing {
    /// The objects.
    pub objects: BTreeSet<ObjectName>,
}

impl crate::Versioned for PgMissing {
    const NAME: &'static str = "pg missing";
    const VERSION: u8 = 1;
}

/// The states of a PG, named as Ceph names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PgStateFlag {
    /// Serving reads and writes.
    Active,
    /// Every replica holds every object.
    Clean,
    /// Replicas are comparing logs.
    Peering,
    /// Some replica lacks some objects.
    Degraded,
    /// Fewer replicas than the pool's size.
    Undersized,
    /// Missing objects are being copied by log.
    Recovering,
    /// A replica is being filled object by object.
    Backfilling,
    /// Not serving: too few replicas, or no authoritative copy reachable.
    Inactive,
    /// No authoritative copy among the reachable replicas.
    Incomplete,
    /// The primary holds objects whose copy failed its checksum and could not be repaired.
    /// Appended last, so the encodings of the others are unchanged.
    Inconsistent,
    /// Its replicas are being compared (appended).
    Scrubbing,
    /// The scrub reads every byte (`scrubbing+deep`; appended).
    Deep,
    /// Led through the map's `primary_temp` rather than by placement's primary, which is
    /// being recovered or about to lead again: not clean yet (appended).
    Remapped,
    /// Paused for a merge, clean, with every write on every copy: ready to merge
    /// (appended).
    Premerge,
}

impl PgStateFlag {
    /// The lowercase name Ceph prints.
    pub fn name(self) -> &'static str {
        match self {
            PgStateFlag::Active => "active",
            PgStateFlag::Clean => "clean",
            PgStateFlag::Peering => "peering",
            PgStateFlag::Degraded => "degraded",
            PgStateFlag::Undersized => "undersized",
            PgStateFlag::Recovering => "recovering",
            PgStateFlag::Backfilling => "backfilling",
            PgStateFlag::Inactive => "inactive",
            PgStateFlag::Incomplete => "incomplete",
            PgStateFlag::Inconsistent => "inconsistent",
            PgStateFlag::Scrubbing => "scrubbing",
            PgStateFlag::Deep => "deep",
            PgStateFlag::Remapped => "remapped",
            PgStateFlag::Premerge => "premerge",
        }
    }
}

/// A PG's state as its primary reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgStat {
    /// The PG.
    pub pg: crate::PgId,
    /// Its state flags.
    pub state: Vec<PgStateFlag>,
    /// The map epoch the state was computed under.
    pub epoch: u64,
    /// The acting set, primary first.
    pub acting: Vec<OsdId>,
    /// Newest log position.
    pub last_update: EVersion,
    /// Objects still to copy to replicas (log recovery; a backfill's remainder is unknown).
    pub objects_to_recover: u64,
    /// Why the PG is not active, when it is not.
    pub note: String,
    /// Client operations this primary has served for the PG (since it became primary).
    pub client_ops: u64,
    /// Objects in the PG (counted once the PG is active on this primary).
    pub objects: u64,
    /// Bytes of object data in the PG (erasure-coded: logical bytes, before coding).
    pub bytes: u64,
}

impl PgStat {
    /// The state as Ceph prints it, e.g. `active+clean`.
    pub fn state_name(&self) -> String {
        let names: Vec<&str> = self.state.iter().map(|f| f.name()).collect();
        names.join("+")
    }
}
