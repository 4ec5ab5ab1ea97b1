//! The primary's side of a PG: peering on every interval change, its own recovery when it
//! is behind, activation of the replicas, replicated writes, and recovery or backfill of
//! replicas that are behind. The decisions come from [`crate::peering::plan`]; this module
//! emits the messages as actions and keeps the state between their replies.

pub(crate) mod erasure;

use erasure::{Purpose, Serving};

pub(crate) use crate::limits::COPY_PART_BYTES;
use crate::peering::{Plan, Recovery};
use crate::scrub::{Requested, Scrub};
use bytes::Bytes;
use shoal_store::{CopyResume, ObjectKey};
use shoal_types::msg::{OsdOp, Reply};
use shoal_types::pg::{EVersion, PgStat, PgStateFlag, PgSummary};
use shoal_types::{ClientId, ObjectName, OsdId, OsdMap, PgId, Result};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// Objects copied per push or pull message.
pub(crate) const OBJECTS_PER_COPY: usize = 8;
/// How long a blocked or failed peering waits before trying again.
pub(crate) const RETRY_DELAY: Duration = Duration::from_secs(1);
/// Client operations queued per PG while it peers; later ones are answered EAGAIN (the
/// client resends after a pause).
pub(crate) const MAX_WAITING_OPS: usize = 1024;
/// A shard that received a client operation this recently serves clients: its recovery
/// takes fewer slots.
pub(crate) const CLIENTS_RECENT: Duration = Duration::from_secs(1);
/// How long a primary that handed its PG back waits for the map that ends its lead
/// before it asks again.
pub(crate) const HAND_BACK_RETRY: Duration = Duration::from_secs(5);
/// How long peering may take before it starts over (a peer that never answers).
pub(crate) const PEERING_TIMEOUT: Duration = Duration::from_secs(15);

/// Recovery operations op shard `index` of `shards` may run at `now_ns`: its part of
/// `recovery_max_active`, or of `recovery_max_active_with_clients` if a client operation
/// arrived within [`CLIENTS_RECENT`] (a clock that jumped counts as no recent operation).
/// The parts add up to the OSD's limit (the first shards take the remainder), except that
/// every shard may run at least one.
pub(crate) fn recovery_slots(
    limits: &crate::Limits,
    (index, shards): (usize, usize),
    last_client_op_ns: Option<u64>,
    now_ns: u64,
) -> usize {
    let recent = last_client_op_ns.is_some_and(|at| now_ns.abs_diff(at) < CLIENTS_RECENT.as_nanos() as u64);
    let active = match recent {
        true => limits.recovery_max_active_with_clients.min(limits.recovery_max_active),
        false => limits.recovery_max_active,
    };
    let shards = shards.max(1);
    (active / shards + usize::from(index % shards < active % shards)).max(1)
}

pub(crate) enum Phase {
    /// Waiting for summaries from the OSDs still outstanding.
    Peering { summaries: BTreeMap<OsdId, PgSummary>, outstanding: BTreeSet<OsdId> },
    /// Copying what this primary lacks from the authority; for an erasure-coded PG only
    /// its log (and for a backfill its object names), then it activates with the plan and
    /// the head kept here and rebuilds its shard first.
    SelfRecovery {
        auth: OsdId,
        pull: Pull,
        keep_until: Option<EVersion>,
        log_tail: EVersion,
        erasure: Option<(Box<Plan>, EVersion)>,
    },
    /// Activated: waiting for the replicas' activations and the local record to be durable,
    /// then for the monitor to record the activation (`registering`), before serving.
    Activating { replicas: BTreeSet<OsdId>, local: bool, registering: bool },
    /// Serving.
    Active,
    /// Cannot serve, for `stall`'s reason (described by `reason`).
    Blocked { reason: String, stall: Stall },
}

/// Why a PG cannot serve, as its state shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stall {
    /// Fewer replicas up than `min_size` (`inactive+undersized`).
    Undersized,
    /// No authoritative copy among the replicas that answered (`inactive+incomplete`).
    Incomplete,
    /// Peering starts again shortly: a peer failed to answer, or the PG is new here
    /// (`peering`).
    Retrying,
    /// This primary is behind and asked the monitors to hand the PG to an up-to-date
    /// member of its acting set meanwhile (`primary_temp`); the new map ends the interval
    /// (`peering`).
    HandingOver,
}

pub(crate) enum Pull {
    /// Waiting for the authority's log.
    Log { missing: Recovery },
    /// Pulling named objects in parts, the first from `resume` (the start: `None`); then,
    /// with `listing`, listing the authority's objects after that cursor for more.
    Objects { queue: VecDeque<ObjectName>, resume: Option<Bytes>, listing: Option<Option<Bytes>> },
}

pub(crate) struct InFlight<R> {
    /// Replicas yet to acknowledge, and whether the local sync is still pending.
    pub(crate) waiting: BTreeSet<OsdId>,
    pub(crate) local_pending: bool,
    pub(crate) replies: Vec<(R, Result<Reply>)>,
    /// The object written.
    pub(crate) object: ObjectName,
    /// Shards being recovered that lacked the object and take it whole with this write
    /// (erasure-coded): once one acknowledges it, it no longer lacks the object.
    pub(crate) taking_whole: BTreeSet<OsdId>,
}

pub(crate) struct PeerRecovery {
    pub(crate) objects: VecDeque<ObjectName>,
    /// Objects whose rebuilt shard was sent and not acknowledged yet: the shard still
    /// lacks them (reads go elsewhere, writes wait).
    pub(crate) pushing: BTreeSet<ObjectName>,
    /// An object pushed in parts, and where its next part starts.
    pub(crate) partial: Option<(ObjectKey, CopyResume)>,
    /// For a backfill: the last key pushed, and whether the PG is exhausted.
    pub(crate) backfill: Option<(Option<ObjectKey>, bool)>,
    pub(crate) in_flight: usize,
    pub(crate) done_sent: bool,
    /// Waiting for the primary's damaged copy of the next object to be repaired.
    pub(crate) repairing: bool,
}

impl PeerRecovery {
    /// Copying `objects` (a recovery by log).
    pub(crate) fn log(objects: VecDeque<ObjectName>) -> PeerRecovery {
        PeerRecovery {
            objects,
            pushing: BTreeSet::new(),
            partial: None,
            backfill: None,
            in_flight: 0,
            done_sent: false,
            repairing: false,
        }
    }

    /// Whether `object` is listed to rebuild on this OSD or its rebuilt copy is not
    /// acknowledged yet (a backfill's uncopied keys aside).
    pub(crate) fn lacks_listed(&self, object: &ObjectName) -> bool {
        self.objects.contains(object) || self.pushing.contains(object)
    }

    /// Whether a push can be sent now.
    pub(crate) fn has_work(&self) -> bool {
        !self.repairing && self.objects_left()
    }

    /// Whether the recovery is over: nothing left to push, no repair awaited.
    pub(crate) fn is_over(&self) -> bool {
        !self.repairing && !self.objects_left()
    }

    fn objects_left(&self) -> bool {
        !self.objects.is_empty()
            || self.partial.is_some()
            || self.backfill.as_ref().is_some_and(|(_, exhausted)| !exhausted)
    }
}

/// A PG this OSD is primary of.
pub struct Primary<R> {
    pub(crate) interval: u64,
    /// The acting set, primary first; for an erasure-coded PG one entry per shard, with
    /// [`OsdId::NONE`] where no OSD serves it.
    pub(crate) acting: Vec<OsdId>,
    pub(crate) phase: Phase,
    pub(crate) waiting: Vec<(OsdOp, ClientId, R)>,
    pub(crate) inflight: BTreeMap<EVersion, InFlight<R>>,
    pub(crate) recovery: BTreeMap<OsdId, PeerRecovery>,
    pub(crate) pushes_in_flight: usize,
    /// Increases each time peering starts; timers of earlier rounds are ignored.
    pub(crate) round: u64,
    /// Client operations served.
    pub(crate) client_ops: u64,
    /// OSDs outside the acting set that held a copy at peering: deleted once clean.
    pub(crate) strays: BTreeSet<OsdId>,
    /// The scrub running, if any.
    pub(crate) scrub: Option<Scrub>,
    /// A scrub an operator asked for, to start once the PG is active and clean.
    pub(crate) scrub_requested: Option<Requested>,
    /// The newest write every acting OSD has acknowledged.
    pub(crate) committed_to: EVersion,
    /// For an erasure-coded PG: its code and the operations gathering stripes.
    pub(crate) ec: Option<erasure::EcPrimary<R>>,
    /// What this interval's peering gave up, having gone on without OSDs declared lost.
    pub(crate) lost: Option<String>,
}

impl<R> Primary<R> {
    /// The OSDs of the acting set, primary first.
    pub(crate) fn members(&self) -> impl Iterator<Item = OsdId> + '_ {
        self.acting.iter().copied().filter(|o| *o != OsdId::NONE)
    }

    /// Whether the PG is erasure-coded.
    pub(crate) fn is_erasure(&self) -> bool {
        self.ec.is_some()
    }

    /// Whether an operation on `object` must wait for this primary's own copy: on an
    /// erasure-coded PG while its shard of that object is still to be rebuilt, on a
    /// replicated one while any of its own recovery runs.
    pub(crate) fn lacks_own_copy(&self, me: OsdId, pg: PgId, object: &ObjectName) -> bool {
        match (self.is_erasure(), ObjectKey::new(pg.pool, object)) {
            (true, Ok(key)) => awaits_own_shard(self, me, object, &key),
            (true, Err(_)) => false,
            (false, _) => self.recovery.contains_key(&me),
        }
    }

    /// The OSDs whose recovery work is all acknowledged and not yet told so: they are to
    /// be told they are complete (marked as told).
    pub(crate) fn take_finished(&mut self) -> Vec<OsdId> {
        let finished = self.recovery.iter_mut().filter(|(_, r)| r.is_over() && r.in_flight == 0 && !r.done_sent);
        finished
            .map(|(osd, r)| {
                r.done_sent = true;
                *osd
            })
            .collect()
    }

    /// How many OSDs act.
    pub(crate) fn up_count(&self) -> usize {
        self.members().count()
    }

    /// Whether the PG is active (it may still be recovering).
    pub fn is_active(&self) -> bool {
        matches!(self.phase, Phase::Active)
    }

    /// The interval this primary runs the PG in.
    pub fn interval(&self) -> u64 {
        self.interval
    }

    /// Whether the PG can be scrubbed: active and clean, no scrub running.
    pub(crate) fn scrubbable(&self, pg: PgId, map: &OsdMap) -> bool {
        let size = map.pools.get(&pg.pool).map_or(usize::MAX, |p| p.size as usize);
        matches!(self.phase, Phase::Active)
            && self.recovery.is_empty()
            && self.up_count() >= size
            && self.scrub.is_none()
    }

    /// The PG's state as `ceph pg dump` would show it.
    pub fn stat(&self, pg: PgId, map: &OsdMap, last_update: EVersion) -> PgStat {
        let size = map.pools.get(&pg.pool).map_or(0, |p| p.size as usize);
        let mut state = BTreeSet::new();
        match &self.phase {
            Phase::Peering { .. }
            | Phase::SelfRecovery { .. }
            | Phase::Activating { .. }
            | Phase::Blocked { stall: Stall::Retrying | Stall::HandingOver, .. } => {
                state.insert(PgStateFlag::Peering);
            }
            Phase::Blocked { stall, .. } => {
                state.insert(PgStateFlag::Inactive);
                state.insert(if *stall == Stall::Undersized {
                    PgStateFlag::Undersized
                } else {
                    PgStateFlag::Incomplete
                });
            }
            Phase::Active => {
                // Recovering before it serves: active for recovery only.
                state.insert(if serves_after_recovery(self) { PgStateFlag::Inactive } else { PgStateFlag::Active });
                if self.up_count() < size {
                    state.extend([PgStateFlag::Undersized, PgStateFlag::Degraded]);
                }
                for r in self.recovery.values() {
                    if r.backfill.is_some() {
                        state.insert(PgStateFlag::Backfilling);
                    } else {
                        state.extend([PgStateFlag::Recovering, PgStateFlag::Degraded]);
                    }
                }
                // Led through `primary_temp`: clean only once placement's primary leads again.
                if shoal_placement::temp_primary(map, pg, &self.acting).is_some() {
                    state.insert(PgStateFlag::Remapped);
                } else if self.recovery.is_empty() && self.up_count() >= size {
                    state.insert(PgStateFlag::Clean);
                    // Paused for a merge with every write on every copy: ready.
                    if map.merge_paused(pg.pool) && self.inflight.is_empty() && self.pushes_in_flight == 0 {
                        state.insert(PgStateFlag::Premerge);
                    }
                }
                if let Some(scrub) = &self.scrub {
                    state.insert(PgStateFlag::Scrubbing);
                    if scrub.deep() {
                        state.insert(PgStateFlag::Deep);
                    }
                }
            }
        }
        PgStat {
            pg,
            state: state.into_iter().collect(),
            epoch: map.epoch,
            acting: self.members().collect(),
            last_update,
            objects_to_recover: self.recovery.values().map(|r| r.objects.len() as u64).sum(),
            note: match &self.phase {
                Phase::Blocked { reason, .. } => reason.clone(),
                _ => self.lost.clone().unwrap_or_default(),
            },
            client_ops: self.client_ops,
            objects: 0,
            bytes: 0,
        }
    }
}

/// Whether `osd` lacks its shard of `key` while it is being recovered.
pub(crate) fn lacks(p: &Primary<impl Sized>, osd: OsdId, object: &ObjectName, key: &ObjectKey) -> bool {
    p.recovery.get(&osd).is_some_and(|r| {
        r.lacks_listed(object)
            || r.backfill.as_ref().is_some_and(|(cursor, exhausted)| {
                !exhausted && cursor.as_ref().is_none_or(|c| key.as_bytes() > c.as_bytes())
            })
    })
}

/// The OSD to read shard `shard` of `object` from, other than `exclude` (a shard being
/// rebuilt): its acting OSD unless that lacks the object, else the stray read in its place.
pub(crate) fn source<R>(
    p: &Primary<R>,
    shard: usize,
    object: &ObjectName,
    key: &ObjectKey,
    exclude: Option<OsdId>,
) -> Option<OsdId> {
    let osd = p.acting.get(shard).copied().filter(|o| *o != OsdId::NONE && Some(*o) != exclude);
    // A stray is never in the acting set, so never the shard being rebuilt.
    osd.filter(|o| !lacks(p, *o, object, key)).or_else(|| {
        let stray = p.ec.as_ref()?.stray_sources.get(&shard)?;
        (!stray.lacks.contains(object)).then_some(stray.osd)
    })
}

/// Whether client operations wait for recovery to finish (see [`Serving`]).
pub(crate) fn serves_after_recovery<R>(p: &Primary<R>) -> bool {
    p.ec.as_ref().is_some_and(|ec| ec.serving != Serving::Now)
}

/// Whether the PG recovered and waits to be recorded: peering starts again if that takes
/// too long (a lost request).
pub(crate) fn recording<R>(p: &Primary<R>) -> bool {
    p.ec.as_ref().is_some_and(|ec| matches!(ec.serving, Serving::Syncing | Serving::Recording))
}

/// Whether the primary `me` lacks its shard of `object` or is rebuilding it now: its
/// operations wait, in order, until the shard is whole.
pub(crate) fn awaits_own_shard<R>(p: &Primary<R>, me: OsdId, object: &ObjectName, key: &ObjectKey) -> bool {
    let rebuilding = p.ec.as_ref().and_then(|ec| ec.gathers.get(object));
    lacks(p, me, object, key)
        || rebuilding.is_some_and(|g| matches!(g.purpose, Purpose::Rebuild { target } if target == me))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_yields_slots_to_clients_for_a_second_after_their_last_operation() {
        let limits = crate::Limits::default();
        let second = 1_000_000_000u64;
        let now = 3600 * second;
        // Two op shards share the OSD's 10 slots, or its 3 while clients are served.
        let both = |last_client_op| [0, 1].map(|index| recovery_slots(&limits, (index, 2), last_client_op, now));
        assert_eq!(both(None), [5, 5]);
        assert_eq!(both(Some(now - second / 2)), [2, 1]);
        assert_eq!(both(Some(now - 2 * second)), [5, 5]);
        // A clock that jumped back ten minutes does not hold recovery back that long.
        assert_eq!(both(Some(now + 600 * second)), [5, 5]);
        // Never more slots with clients than without, never none.
        let few = crate::Limits { recovery_max_active: 2, recovery_max_active_with_clients: 8, ..limits };
        assert_eq!(recovery_slots(&few, (0, 1), Some(now), now), 2);
        assert_eq!([0, 1, 2, 3].map(|index| recovery_slots(&few, (index, 4), Some(now), now)), [1, 1, 1, 1]);
    }
}
