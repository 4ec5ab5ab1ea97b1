//! One op shard's PGs as a state machine. Each PG belongs to one shard, which runs
//! everything about it — client operations, replication, peering and recovery steps,
//! replica requests — one input after another. [`Shard::step`] takes an [`Input`] and
//! returns the [`Action`]s the driver must carry out: messages to send, replies to deliver
//! once the store is durable, timers to set. `R` is the driver's handle for a pending
//! reply (a channel in the OSD, an id in the simulator).

use crate::action::{Action, Awaiting, Counted, Event, Input, Registration, TimerKind};
use crate::damage::Damage;
use crate::exec::{ExecEnv, execute};
use crate::limits::Limits;
use crate::pglog::{PgState, RolledBack};
use crate::primary::Primary;
use crate::scrub::ScrubBoard;
use crate::usage::{COUNT_BUDGET, PgUsage, UsageBook, UsageDelta};
use crate::view::{ObjectView, StoreObject};
use bytes::Bytes;
use shoal_objclass::{ClassRegistry, ClassState};
use shoal_store::{CopyResume, ObjectKey, ObjectStore, Transaction};
use shoal_types::erasure::Touched;
use shoal_types::msg::{EcWrite, OpReply, OsdOp, PeerRequest, PgListReply, PgListRequest, Reply};
use shoal_types::pg::{EVersion, PgStat};
use shoal_types::{ClientId, ObjectName, OsdId, OsdMap, PgId, PoolId, Result, Versioned, err};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

mod erasure;
mod primary;
mod scrub;

/// What a shard is given once.
#[derive(Clone)]
pub struct Config {
    /// This OSD.
    pub me: OsdId,
    /// This shard's index: it owns the PGs [`shard_of`] maps to it.
    pub index: usize,
    /// How many shards the OSD runs.
    pub shards: usize,
    /// The local store (its commits are synchronous; durability is the driver's).
    pub store: Arc<ObjectStore>,
    /// Object classes.
    pub classes: Arc<ClassRegistry>,
    /// Most objects whose class state the shard caches.
    pub class_cache_entries: usize,
    /// PG log entries kept per PG for recognising resent requests.
    pub pg_log_entries: usize,
    /// Objects whose local copy failed its checksum and is not repaired yet (shared by
    /// the OSD's shards and its admin commands).
    pub damage: Arc<Damage>,
    /// The OSD's scrubs: slots, stamps and findings (shared likewise).
    pub scrubs: Arc<ScrubBoard>,
}

/// The interval a request that opens or activates one comes from: a replica answers it
/// only under a map at least that new.
fn opening_interval(request: &PeerRequest) -> Option<u64> {
    match request {
        PeerRequest::Query { interval, .. } => Some(*interval),
        PeerRequest::Activate(activate) => Some(activate.interval),
        _ => None,
    }
}

/// The shard a PG's operations run on.
pub fn shard_of(pg: PgId, shards: usize) -> usize {
    shoal_placement::hash::hash2(pg.seed, pg.pool.0 as u32) as usize % shards.max(1)
}

/// One shard's state: the PGs it owns and the work in flight for them.
pub struct Shard<R> {
    pub(crate) config: Config,
    pub(crate) limits: Arc<Limits>,
    /// The map the PGs were last examined under.
    pub(crate) map: Arc<OsdMap>,
    pub(crate) pgs: BTreeMap<PgId, PgState>,
    /// Per PG this OSD serves: the epoch its interval started at, its acting set and
    /// primary.
    pub(crate) intervals: BTreeMap<PgId, (u64, Vec<OsdId>, Option<OsdId>)>,
    /// PGs this OSD is primary of.
    pub(crate) primaries: BTreeMap<PgId, Primary<R>>,
    /// Per PG, the newest interval whose primary has queried this OSD.
    fences: BTreeMap<PgId, u64>,
    /// Class state per object, valid while the object is at the recorded version.
    class_cache: BTreeMap<ObjectKey, (u64, BTreeMap<String, ClassState>)>,
    /// The store sequence number of this shard's latest commit: anything a later read
    /// observes is durable once this is.
    pub(crate) last_seq: u64,
    /// The time of the input being handled, ns since the epoch.
    pub(crate) now_ns: u64,
    /// When the last client operation arrived (recovery yields while clients are served).
    pub(crate) last_client_op_ns: Option<u64>,
    /// Actions of the input being handled.
    pub(crate) out: Vec<Action<R>>,
    /// Deliberate bugs; only a simulator build can switch them on.
    pub(crate) flaws: crate::limits::Flaws,
    /// Objects and bytes of the PGs this shard leads.
    usage: UsageBook,
    /// Peering requests from an interval newer than this shard's map, answered once the
    /// map catches up (a PG's copies may split under that map).
    parked: Vec<(PeerRequest, R)>,
}

/// The outcome of executing one operation on the primary.
pub(crate) struct Executed {
    pub(crate) reply: OpReply,
    /// The store transaction and log entry of a write; `None` for reads and no-ops.
    pub(crate) write: Option<(Transaction, shoal_types::PgLogEntry)>,
    pub(crate) key: ObjectKey,
    pub(crate) states: BTreeMap<String, ClassState>,
    /// What the write does to the PG's object and byte counts.
    pub(crate) usage: crate::usage::UsageDelta,
}

impl<R> Shard<R> {
    /// A shard that serves nothing until its first map.
    pub fn new(config: Config, limits: Arc<Limits>) -> Self {
        Shard {
            config,
            limits,
            map: Arc::new(OsdMap::default()),
            pgs: BTreeMap::new(),
            intervals: BTreeMap::new(),
            primaries: BTreeMap::new(),
            fences: BTreeMap::new(),
            class_cache: BTreeMap::new(),
            last_seq: 0,
            now_ns: 0,
            last_client_op_ns: None,
            out: Vec::new(),
            flaws: crate::limits::Flaws::default(),
            usage: UsageBook::default(),
            parked: Vec::new(),
        }
    }

    /// Switches deliberate protocol bugs on (simulator runs only).
    #[cfg(feature = "flaws")]
    pub fn set_flaws(&mut self, flaws: crate::limits::Flaws) {
        self.flaws = flaws;
    }

    /// The map the shard last examined its PGs under.
    pub fn map(&self) -> &Arc<OsdMap> {
        &self.map
    }

    /// The epoch of the map the shard last examined its PGs under.
    pub fn epoch(&self) -> u64 {
        self.map.epoch
    }

    /// The operation limits in effect.
    pub fn limits(&self) -> &Arc<Limits> {
        &self.limits
    }

    /// Replaces the operation limits.
    pub fn set_limits(&mut self, limits: Arc<Limits>) {
        self.limits = limits;
    }

    /// Handles one input at time `now_ns` (ns since the epoch: object mtimes) and returns
    /// what the driver must do.
    pub fn step(&mut self, input: Input<R>, now_ns: u64) -> Vec<Action<R>> {
        self.now_ns = now_ns;
        match input {
            Input::Op { op, caller, reply } => self.client_op(op, caller, reply),
            Input::List { req, reply } => {
                let outcome = self.check_serving(PgId { pool: req.pool, seed: req.seed });
                let outcome = outcome.and_then(|()| self.list(&req)).map(|r| (self.last_seq, Reply::PgList(r)));
                self.respond(outcome, reply);
            }
            Input::Peer { request, reply } => {
                if opening_interval(&request).is_some_and(|interval| interval > self.map.epoch) {
                    self.parked.push((request, reply));
                } else {
                    let outcome = self.peer_request(request);
                    self.respond(outcome, reply);
                }
            }
            Input::Map(map) => {
                if map.epoch > self.map.epoch {
                    let holds_changed = map.flags != self.map.flags || map.osd_space != self.map.osd_space;
                    let resized: BTreeSet<PoolId> = map
                        .pools
                        .values()
                        .filter(|p| self.map.pools.get(&p.id).is_some_and(|old| old.pg_num != p.pg_num))
                        .map(|p| p.id)
                        .collect();
                    self.map = map;
                    for pool in resized {
                        self.resized(pool);
                    }
                    self.on_new_map();
                    let epoch = self.map.epoch;
                    let (ready, parked): (Vec<_>, Vec<_>) = std::mem::take(&mut self.parked)
                        .into_iter()
                        .partition(|(request, _)| opening_interval(request).is_none_or(|i| i <= epoch));
                    self.parked = parked;
                    for (request, reply) in ready {
                        let outcome = self.peer_request(request);
                        self.respond(outcome, reply);
                    }
                    if holds_changed {
                        // Recovery that the flags or a backfill-full OSD held may go on.
                        let pgs: Vec<PgId> = self.primaries.keys().copied().collect();
                        for pg in pgs {
                            self.pump_recovery(pg);
                        }
                    }
                }
            }
            Input::Answered { awaiting, reply } => {
                let Awaiting { pg, interval, expect } = awaiting;
                self.primary_event(pg, interval, expect.into_event(reply));
            }
            Input::Durable { awaiting, result } => {
                let event = match awaiting.at {
                    Some(at) => Event::LocalDurable(at, result),
                    None => Event::ActivationDurable(result),
                };
                self.primary_event(awaiting.pg, awaiting.interval, event);
            }
            Input::Registered { registration, recorded } => {
                self.primary_event(registration.pg, registration.active.interval, Event::Registered(recorded));
            }
            Input::Timer(timer) => {
                let event = match timer.kind {
                    TimerKind::Retry => Event::Retry(timer.round),
                    TimerKind::ScrubStep => Event::ScrubStep(timer.round),
                    TimerKind::HandBack => Event::HandBack(timer.round),
                    TimerKind::RecoverySleep => Event::RecoverySlept(timer.round),
                };
                self.primary_event(timer.pg, timer.interval, event);
            }
            Input::Scrub { pg, deep, repair } => self.request_scrub(pg, deep, repair),
            Input::ScrubTick { host_load } => self.scrub_tick(host_load),
        }
        std::mem::take(&mut self.out)
    }

    /// The PG count of `pool` changed (its copies here were split before this map came):
    /// every PG of it starts a new interval, and requests from earlier ones are refused.
    fn resized(&mut self, pool: PoolId) {
        let of_pool: Vec<PgId> = self.intervals.keys().filter(|pg| pg.pool == pool).copied().collect();
        for pg in of_pool {
            self.intervals.remove(&pg);
            self.drop_primary(pg, "the pool's PG count changed");
        }
        self.pgs.retain(|pg, _| pg.pool != pool);
        self.clear_class_cache();
        let pg_num = self.map.pools.get(&pool).map_or(0, |p| p.pg_num);
        for seed in 0..pg_num {
            let pg = PgId { pool, seed };
            if shard_of(pg, self.config.shards) == self.config.index {
                self.fence(pg, self.map.epoch);
            }
        }
    }

    /// The interval `pg` is served in, if this shard is its active primary.
    pub fn serving_interval(&self, pg: PgId) -> Option<u64> {
        self.check_serving(pg).ok().and_then(|()| self.primaries.get(&pg)).map(Primary::interval)
    }

    /// The state of every PG this shard is primary of, with the objects and bytes of each
    /// one counted (see [`Shard::count_usage`]).
    pub fn stats(&self) -> Vec<PgStat> {
        self.primaries
            .iter()
            .map(|(pg, p)| {
                let last_update = self.pgs.get(pg).map(|s| s.info.last_update).unwrap_or_default();
                let mut stat = p.stat(*pg, &self.map, last_update);
                if self.config.damage.in_pg(*pg) || self.config.scrubs.errors_in(*pg) > 0 {
                    stat.state.push(shoal_types::PgStateFlag::Inconsistent);
                }
                let usage = self.usage.get(*pg, p.interval()).unwrap_or_default();
                (stat.objects, stat.bytes) = (usage.objects, usage.bytes);
                stat
            })
            .collect()
    }

    /// Counts the objects and bytes of active PGs this shard leads that have no count for
    /// their interval yet: whole PGs, until [`COUNT_BUDGET`] objects were read. Later
    /// writes keep the counts.
    pub fn count_usage(&mut self) -> Result<()> {
        let primaries = &self.primaries;
        self.usage.retain(|pg, interval| primaries.get(&pg).is_some_and(|p| p.interval() == interval));
        let uncounted: Vec<(PgId, u64, bool)> = self
            .primaries
            .iter()
            .filter(|(pg, p)| p.is_active() && self.usage.get(**pg, p.interval()).is_none())
            .map(|(pg, p)| (*pg, p.interval(), p.ec.is_some()))
            .collect();
        let mut read = 0;
        for (pg, interval, erasure) in uncounted {
            if read >= COUNT_BUDGET {
                break;
            }
            let pg_num = self.map.pool(pg.pool)?.pg_num;
            let mut usage = PgUsage::default();
            for range in shoal_placement::pg_reversed_hash_ranges(pg.seed, pg_num) {
                let mut after = None;
                loop {
                    const PAGE: usize = 1024;
                    let page = self.config.store.list_onodes(pg.pool, range.clone(), after.as_ref(), PAGE)?;
                    let more = page.len() == PAGE;
                    after = page.last().map(|(key, _)| key.clone());
                    for (_, onode) in page {
                        usage.add(if erasure { crate::ec::logical_onode(onode)?.size } else { onode.size });
                    }
                    if !more {
                        break;
                    }
                }
            }
            read += usage.objects as usize;
            self.usage.insert(pg, interval, usage);
        }
        Ok(())
    }

    /// Adds a committed write's change to its PG's count.
    pub(crate) fn record_usage(&mut self, pg: PgId, delta: UsageDelta) {
        if let Some(interval) = self.primaries.get(&pg).map(Primary::interval) {
            self.usage.record(pg, interval, delta);
        }
    }

    /// EDQUOT or ENOSPC when `pg`'s pool reached its quota or an OSD of its acting set is
    /// full, unless `steps` only free space or carry [`shoal_types::Step::FullTry`].
    pub(crate) fn refuse_when_full(&self, pg: PgId, steps: &[shoal_types::Step]) -> Result<()> {
        let Some(p) = self.primaries.get(&pg) else { return Ok(()) };
        match self.map.write_refusal(pg.pool, &p.acting) {
            Some(e) if !shoal_types::Step::may_run_when_full(steps) => Err(e),
            _ => Ok(()),
        }
    }

    pub(crate) fn emit(&mut self, action: Action<R>) {
        self.out.push(action);
    }

    /// Replies once everything the reply depends on is durable.
    pub(crate) fn respond(&mut self, outcome: Result<(u64, Reply)>, reply: R) {
        let (after, value) = match outcome {
            Ok((seq, v)) => (seq, Ok(v)),
            Err(e) => (self.last_seq, Err(e)),
        };
        self.emit(Action::Reply { to: reply, after, value });
    }

    /// The PG's in-memory state, loaded on first use.
    pub(crate) fn pg(&mut self, pg: PgId) -> Result<&mut PgState> {
        if !self.pgs.contains_key(&pg) {
            let state = PgState::load(&self.config.store, pg, self.config.pg_log_entries)?;
            self.pgs.insert(pg, state);
        }
        self.pgs.get_mut(&pg).ok_or_else(|| err::io("pg state vanished"))
    }

    /// Commits `txn`; on failure forgets the PG's in-memory state (it is reloaded).
    pub(crate) fn commit(&mut self, pg: PgId, txn: Transaction) -> Result<u64> {
        match self.config.store.commit(txn) {
            Ok(seq) => {
                self.last_seq = seq;
                Ok(seq)
            }
            Err(e) => {
                self.pgs.remove(&pg);
                Err(e)
            }
        }
    }

    /// Forgets cached class state (on interval changes: another primary may have written).
    pub(crate) fn clear_class_cache(&mut self) {
        self.class_cache.clear();
    }

    /// Executes an operation against the local store without committing it.
    pub(crate) fn execute(&mut self, op: &OsdOp, caller: ClientId, at: EVersion) -> Result<Executed> {
        let key = ObjectKey::new(self.map.pool(op.pool)?.id, &op.object)?;
        let store = self.config.store.clone();
        let limits = self.limits.clone();
        let cache = &self.class_cache;
        let committed = StoreObject::new(&store, key.clone());
        let mut view = ObjectView::load(&committed, &limits, key.clone(), |version| match cache.get(&key) {
            Some((v, states)) if *v == version => states.clone(),
            _ => BTreeMap::new(),
        })?;
        let env = ExecEnv { classes: &self.config.classes, limits: &limits, caller, now_ns: self.now_ns };
        let outputs = execute(&mut view, &op.steps, &env)?;
        if view.changes() == 0 {
            let reply = OpReply { version: view.base_version(), outputs };
            return Ok(Executed { reply, write: None, key, states: BTreeMap::new(), usage: Default::default() });
        }
        let usage = view.usage_delta();
        let (txn, states) = view.into_transaction(at.version, self.now_ns);
        let reply = OpReply { version: at.version, outputs };
        let entry = PgState::entry(at, op.reqid, op.object.clone(), &reply);
        Ok(Executed { reply, write: Some((txn, entry)), key, states, usage })
    }

    /// Commit callback: publishes the class state staged by a committed write.
    pub(crate) fn publish_class_state(&mut self, key: ObjectKey, version: u64, states: BTreeMap<String, ClassState>) {
        if states.is_empty() {
            self.class_cache.remove(&key);
        } else {
            if self.class_cache.len() >= self.config.class_cache_entries {
                self.class_cache.clear();
            }
            self.class_cache.insert(key, (version, states));
        }
    }

    fn list(&self, req: &PgListRequest) -> Result<PgListReply> {
        let pool = self.map.pool(req.pool)?;
        if req.seed >= pool.pg_num {
            return Err(err::invalid(format!(
                "pg {}.{:x} does not exist (pg_num {})",
                req.pool, req.seed, pool.pg_num
            )));
        }
        let max = req.max.clamp(1, self.limits.max_omap_entries_per_request) as usize;
        let after = req.after.as_ref().map(|b| ObjectKey::from_bytes(b.to_vec())).transpose()?;
        let pg = PgId { pool: pool.id, seed: req.seed };
        let mut objects = Vec::new();
        let mut cursor = after;
        loop {
            let (keys, more) = self.list_keys(pg, pool.pg_num, cursor.as_ref(), max + 1 - objects.len())?;
            for key in keys {
                if objects.len() == max {
                    let next = cursor.map(|k| Bytes::copy_from_slice(k.as_bytes()));
                    return Ok(PgListReply { objects, next });
                }
                let (_, name) = key.decode()?;
                if req.namespace.as_ref().is_none_or(|ns| *ns == name.namespace) {
                    objects.push(name);
                }
                cursor = Some(key);
            }
            if !more {
                return Ok(PgListReply { objects, next: None });
            }
        }
    }

    /// Up to `max` object keys of a PG after `after`, in key order, and whether more may follow.
    pub(crate) fn list_keys(
        &self,
        pg: PgId,
        pg_num: u32,
        after: Option<&ObjectKey>,
        max: usize,
    ) -> Result<(Vec<ObjectKey>, bool)> {
        let mut keys: Vec<ObjectKey> = Vec::new();
        for range in shoal_placement::pg_reversed_hash_ranges(pg.seed, pg_num) {
            let from = keys.last().or(after);
            let page = self.config.store.list(pg.pool, range, from, max - keys.len())?;
            keys.extend(page);
            if keys.len() == max {
                return Ok((keys, true));
            }
        }
        Ok((keys, false))
    }

    /// Applies pushed copies read when the primary's log reached `at`. A log behind `at`
    /// means a replicated write never arrived (its connection broke): the copies would hold
    /// that write while the log does not, so the push is refused and the primary peers again.
    /// A push that makes `whole` whole drops it from what the copy lacks.
    fn apply_push(
        &mut self,
        pg: PgId,
        interval: u64,
        at: Option<EVersion>,
        txn: &[u8],
        whole: Option<&ObjectName>,
    ) -> Result<(u64, Reply)> {
        self.check_interval(pg, interval, false)?;
        if let Some(at) = at {
            let last_update = self.pg(pg)?.info.last_update;
            if last_update < at {
                let missed = format!("pg {pg}: a push read at {at} reached a replica whose log ends at {last_update}");
                return Err(err::again(missed));
            }
        }
        let mut txn = Transaction::decode(txn)?;
        tracing::debug!(%pg, interval, bytes = txn.bytes(), rebuilt = ?whole, "applying a push");
        if let Some(object) = whole {
            self.pg(pg)?.recovered(&mut txn, object)?;
        }
        Ok((self.commit(pg, txn)?, Reply::Done))
    }

    /// The keys a peer's `PullRange` or `ListRange` asks for: up to `max` (1..=1024) after
    /// the encoded key `after`, and whether more follow.
    pub(crate) fn list_requested(
        &mut self,
        pg: PgId,
        after: Option<Bytes>,
        max: u32,
    ) -> Result<(Vec<ObjectKey>, bool)> {
        let pg_num = self.map.pool(pg.pool)?.pg_num;
        let after = after.map(|b| ObjectKey::from_bytes(b.to_vec())).transpose()?;
        self.list_keys(pg, pg_num, after.as_ref(), (max as usize).clamp(1, 1024))
    }

    /// Serves a request from another OSD about one of this shard's PGs.
    fn peer_request(&mut self, request: PeerRequest) -> Result<(u64, Reply)> {
        let store = self.config.store.clone();
        match request {
            PeerRequest::Ping { .. } => Ok((0, Reply::Done)),
            PeerRequest::Query { pg, interval } => {
                self.fence(pg, interval);
                // A newer interval's primary is peering: this one, whose map has not caught
                // up, stops acknowledging writes (alone, no replica's fence would stop it).
                if self.primaries.get(&pg).is_some_and(|p| p.interval() < interval) {
                    tracing::info!(%pg, interval, "a newer interval's primary queried this one; stepping back");
                    self.restart_later(pg);
                }
                Ok((self.last_seq, Reply::Summary(self.pg(pg)?.summary())))
            }
            PeerRequest::Log { pg, after } => {
                let state = self.pg(pg)?;
                let entries = state.entries_after(&store, after)?;
                let remembered = state.remembered().to_vec();
                Ok((self.last_seq, Reply::LogRemembering { entries, remembered }))
            }
            PeerRequest::Pull { pg, objects } => {
                let mut txn = Transaction::new();
                for object in &objects {
                    txn.extend(store.copy_object(&ObjectKey::new(pg.pool, object)?)?);
                }
                Ok((self.last_seq, Reply::Copies { txn: txn.encode().into(), next: None }))
            }
            PeerRequest::PullRange { pg, after, max } => {
                let (keys, more) = self.list_requested(pg, after, max)?;
                let mut txn = Transaction::new();
                for key in &keys {
                    txn.extend(store.copy_object(key)?);
                }
                let next = keys.last().filter(|_| more).map(|k| Bytes::copy_from_slice(k.as_bytes()));
                Ok((self.last_seq, Reply::Copies { txn: txn.encode().into(), next }))
            }
            PeerRequest::PullPart { pg, object, resume } => {
                let resume = resume.map(|b| CopyResume::decode(&b)).transpose()?;
                let key = ObjectKey::new(pg.pool, &object)?;
                let (txn, next) = store.copy_object_part(&key, resume.as_ref(), crate::limits::COPY_PART_BYTES)?;
                let next = next.map(|n| Bytes::from(n.encode()));
                Ok((self.last_seq, Reply::Copies { txn: txn.encode().into(), next }))
            }
            PeerRequest::ScrubMap { pg, interval, after, max, deep } => {
                self.check_interval(pg, interval, false)?;
                let (keys, more) = self.list_requested(pg, after, max)?;
                let objects = crate::scrub::scrub_entries(&store, &keys, deep)?;
                Ok((self.last_seq, Reply::ScrubMap { objects, more }))
            }
            PeerRequest::ListRange { pg, after, max } => {
                let (keys, more) = self.list_requested(pg, after, max)?;
                let keys = keys.iter().map(|k| Bytes::copy_from_slice(k.as_bytes())).collect();
                Ok((self.last_seq, Reply::Keys { keys, more }))
            }
            PeerRequest::Activate(activate) => {
                let pg = activate.pg;
                self.check_interval(pg, activate.interval, true)?;
                tracing::debug!(%pg, interval = activate.interval, complete = activate.complete, keep_until = ?activate.keep_until, entries = activate.entries.len(), "activated as a replica");
                let pool = self.map.pool(pg.pool)?;
                let (pg_num, erasure) = (pool.pg_num, pool.erasure.is_some());
                // A shard of an erasure-coded PG undoes its divergent writes, newest first,
                // each with its log entry (a crash leaves the log matching the objects).
                if let (true, Some(keep)) = (erasure, activate.keep_until) {
                    self.roll_back_to(pg, keep)?;
                }
                let mut txn = Transaction::new();
                self.pg(pg)?.adopt(&mut txn, &activate, pg_num)?;
                let seq = self.commit(pg, txn)?;
                self.pgs.remove(&pg);
                self.clear_class_cache();
                Ok((seq, Reply::Done))
            }
            PeerRequest::Push { pg, interval, txn } => self.apply_push(pg, interval, None, &txn, None),
            PeerRequest::PushAt { pg, interval, at, txn } => self.apply_push(pg, interval, Some(at), &txn, None),
            PeerRequest::PushRebuilt { pg, interval, at, object, txn } => {
                self.apply_push(pg, interval, Some(at), &txn, Some(&object))
            }
            PeerRequest::RecoveryDone { pg, interval } => {
                self.check_interval(pg, interval, false)?;
                tracing::debug!(%pg, interval, "recovered");
                let mut txn = Transaction::new();
                self.pg(pg)?.mark_complete(&mut txn)?;
                Ok((self.commit(pg, txn)?, Reply::Done))
            }
            PeerRequest::RemovePg { pg, interval } => {
                if self.intervals.contains_key(&pg) {
                    return Err(err::again(format!("pg {pg} maps to {} under its map", self.config.me)));
                }
                let pg_num = self.map.pool(pg.pool)?.pg_num;
                tracing::info!(%pg, interval, "removing a stray copy");
                let mut txn = Transaction::new();
                crate::pglog::delete_pg(&mut txn, pg, pg_num);
                self.pgs.remove(&pg);
                self.config.damage.remove_pg(pg);
                self.config.scrubs.remove_pg(pg);
                Ok((self.commit(pg, txn)?, Reply::Done))
            }
            PeerRequest::RepOp(rep) => {
                let mut txn = Transaction::decode(&rep.txn)?;
                self.follow(rep.pg, rep.interval, rep.prev, &rep.entry)?;
                tracing::debug!(pg = %rep.pg, at = %rep.entry.at, object = %rep.entry.object, "applying a replicated write");
                self.pg(rep.pg)?.append(&mut txn, &rep.entry);
                Ok((self.commit(rep.pg, txn)?, Reply::Done))
            }
            PeerRequest::EcWrite(EcWrite { write, touched, committed_to }) => {
                let shipped = Transaction::decode(&write.txn)?;
                self.follow(write.pg, write.interval, write.prev, &write.entry)?;
                let (pg, object) = (write.pg, &write.entry.object);
                let key = ObjectKey::new(pg.pool, object)?;
                tracing::debug!(%pg, at = %write.entry.at, %object, "applying a shard write");
                let state = self.pg(pg)?;
                let mut txn = Transaction::new();
                // A write that replaces the whole object makes a copy that lacked it whole:
                // whatever partial copy it had goes first. Nothing undoes that write here;
                // rolled back, it leaves the copy lacking the object again.
                let kept = if touched == Touched::Whole && state.lacks(object) {
                    txn.remove_object(&key);
                    state.recovered(&mut txn, object)?;
                    None
                } else {
                    Some(crate::ec::rollback::keep(&store, &key, object, &touched, write.entry.at.version, &mut txn)?)
                };
                txn.extend(shipped);
                state.keep_rollback(&mut txn, write.entry.at, &key, kept.as_ref(), committed_to);
                state.append(&mut txn, &write.entry);
                Ok((self.commit(pg, txn)?, Reply::Done))
            }
            PeerRequest::RollBack { pg, interval, to } => {
                if !self.queried_stray(pg, interval)? {
                    return Err(err::again(format!("pg {pg}: not a stray the primary of interval {interval} queried")));
                }
                self.roll_back_to(pg, to)?;
                Ok((self.last_seq, Reply::Done))
            }
            PeerRequest::EcRead { pg, interval, object, first, end } => {
                if !self.queried_stray(pg, interval)? {
                    self.check_interval(pg, interval, false)?;
                }
                let key = ObjectKey::new(pg.pool, &object)?;
                let (onode, chunks) = crate::ec::read_shard(&store, &key, first..end)?;
                Ok((self.last_seq, Reply::Chunks { onode, chunks }))
            }
        }
    }

    /// From now on, requests from the primaries of intervals before `interval` are refused.
    pub(crate) fn fence(&mut self, pg: PgId, interval: u64) {
        let fence = self.fences.entry(pg).or_default();
        *fence = (*fence).max(interval);
    }

    /// Whether this copy is a stray (not of a PG mapped here, nor activated in `interval`)
    /// that the primary of `interval` queried last: that primary may read it in place of a
    /// shard being backfilled, and roll back its divergent writes.
    fn queried_stray(&mut self, pg: PgId, interval: u64) -> Result<bool> {
        let les = self.pg(pg)?.info.last_epoch_started;
        let fence = self.fences.get(&pg).copied();
        Ok(!self.intervals.contains_key(&pg) && interval > les && fence == Some(interval))
    }

    /// Undoes this shard's writes after `keep`, newest first, each in one transaction
    /// with its log entry (a crash leaves the log matching the objects). Fails, to peer
    /// again, if a write could not be undone: the copy lacks its object now, which the
    /// plan that asked for the rollback did not know.
    pub(crate) fn roll_back_to(&mut self, pg: PgId, keep: EVersion) -> Result<()> {
        let store = self.config.store.clone();
        let mut lacking = Vec::new();
        while self.pg(pg)?.info.last_update > keep {
            let mut txn = Transaction::new();
            match self.pg(pg)?.roll_back_newest(&store, &mut txn)? {
                RolledBack::Undone(at) => tracing::info!(%pg, %at, "rolled back a write too few shards hold"),
                RolledBack::Lacking(at, object) => {
                    tracing::warn!(%pg, %at, %object, "a write to roll back kept nothing to undo it with; the copy lacks its object now");
                    lacking.push(object);
                }
            }
            self.commit(pg, txn)?;
        }
        match lacking.is_empty() {
            true => Ok(()),
            false => {
                let objects: Vec<String> = lacking.iter().map(ToString::to_string).collect();
                Err(err::again(format!("pg {pg}: rolled back to {keep}, the copy lacks {}", objects.join(", "))))
            }
        }
    }

    /// Checks that a write from the primary of `interval` follows this copy's log (at
    /// `prev`): refused (to be sent again) from another interval or out of order.
    fn follow(&mut self, pg: PgId, interval: u64, prev: EVersion, entry: &shoal_types::PgLogEntry) -> Result<()> {
        self.check_interval(pg, interval, false)?;
        let last_update = self.pg(pg)?.info.last_update;
        if last_update != prev {
            return Err(err::again(format!("pg {pg} is at {last_update}, the write at {} follows {prev}", entry.at)));
        }
        Ok(())
    }

    /// Refuses a replica request from an interval other than the one this replica was
    /// activated in (an activation may move it forward).
    fn check_interval(&mut self, pg: PgId, interval: u64, activating: bool) -> Result<()> {
        let les = self.pg(pg)?.info.last_epoch_started;
        // A newer primary has started peering: its view of the log must not move.
        let fence = self.fences.get(&pg).copied().unwrap_or(0);
        if interval < les || interval < fence || (!activating && interval != les) {
            return Err(err::again(format!("pg {pg} is in interval {les}, the request is from {interval}")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ec::rollback::Rollback;
    use shoal_objclass::ClassRegistry;
    use shoal_store::{Onode, StoreFormat, StoreOptions, pg_rollback_key};
    use shoal_types::erasure::Touched;
    use shoal_types::msg::EcWrite;
    use shoal_types::{ObjectName, PgLogEntry, PoolId, ReqId};

    /// A shard whose map holds one erasure-coded pool (overwrites allowed), and its PG.
    fn erasure_shard() -> (Shard<u32>, PgId) {
        let mut s = shard();
        let mut map = OsdMap { epoch: 1, ..OsdMap::default() };
        let spec = shoal_types::erasure::ErasurePoolSpec {
            name: "ec".into(),
            pg_num: 1,
            profile: "default".into(),
            min_size: None,
            allow_overwrites: true,
        };
        let pool = map.create_erasure(&spec).unwrap();
        s.step(Input::Map(Arc::new(map)), 0);
        (s, PgId { pool: pool.id, seed: 0 })
    }

    fn shard() -> Shard<u32> {
        shard_on(StoreOptions::default())
    }

    /// A shard whose store has 4-byte chunks and `options`.
    fn shard_on(options: StoreOptions) -> Shard<u32> {
        let store = Arc::new(ObjectStore::in_memory(StoreFormat { chunk_size: 4 }, options).unwrap());
        let config = Config {
            me: OsdId(0),
            index: 0,
            shards: 1,
            store,
            classes: Arc::new(ClassRegistry::builtin()),
            class_cache_entries: 8,
            pg_log_entries: 100,
            damage: Arc::default(),
            scrubs: Arc::default(),
        };
        Shard::new(config, Arc::default())
    }

    /// The shard write of `txn` to `object` at `version` (after `version - 1`), saying every
    /// shard has the writes up to `committed`.
    fn shard_write(
        pg: PgId,
        object: &ObjectName,
        version: u64,
        txn: &Transaction,
        touched: Touched,
        committed: u64,
    ) -> PeerRequest {
        let at = |v: u64| EVersion { epoch: 0, version: v };
        let entry = PgLogEntry {
            at: at(version),
            reqid: ReqId { client: ClientId(1), tid: version },
            object: object.clone(),
            outputs: None,
        };
        let write = shoal_types::msg::RepOp { pg, interval: 0, prev: at(version - 1), entry, txn: txn.encode().into() };
        PeerRequest::EcWrite(EcWrite { write, touched, committed_to: at(committed) })
    }

    /// Sends `request` and returns the reply.
    fn ask(shard: &mut Shard<u32>, request: PeerRequest) -> Result<Reply> {
        let actions = shard.step(Input::Peer { request, reply: 1 }, 0);
        actions
            .into_iter()
            .find_map(|a| match a {
                Action::Reply { value, .. } => Some(value),
                _ => None,
            })
            .expect("a reply")
    }

    #[test]
    fn shard_writes_keep_undo_records_until_committed_and_reads_return_the_copy() {
        let mut s = shard();
        let pg = PgId { pool: PoolId(1), seed: 0 };
        let object = ObjectName::new("", "o");
        let key = ObjectKey::new(pg.pool, &object).unwrap();
        let write = |version: u64, data: &[u8], touched: Touched, committed: u64| {
            let mut txn = Transaction::new();
            txn.put_onode(&key, &Onode { size: data.len() as u64, version, ..Onode::default() });
            for (i, piece) in data.chunks(4).enumerate() {
                txn.put_chunk(&key, i as u32, piece.to_vec());
            }
            // No chunk past the object's size (the store's format).
            txn.delete_chunks_from(&key, data.len().div_ceil(4) as u32);
            shard_write(pg, &object, version, &txn, touched, committed)
        };
        ask(&mut s, write(1, b"abcdefgh", Touched::Whole, 0)).unwrap();
        let out_of_order = ask(&mut s, write(3, b"x", Touched::Whole, 0)).unwrap_err();
        assert_eq!(out_of_order.errno, shoal_types::Errno::Again);
        ask(&mut s, write(2, b"ABCD", Touched::Chunks(vec![(0, 2)]), 0)).unwrap();
        let kept = |s: &Shard<u32>, v: u64| {
            s.config.store.meta(&pg_rollback_key(pg, v)).unwrap().map(|b| Rollback::decode(&b).unwrap())
        };
        // Write 1 created the object; write 2 kept its chunks 0 and 1.
        assert_eq!(kept(&s, 1).unwrap().onode, None);
        let second = kept(&s, 2).unwrap();
        assert_eq!(second.onode.map(|o| o.size), Some(8));
        assert_eq!(second.chunks, vec![(0, Some(Bytes::from_static(b"abcd"))), (1, Some(Bytes::from_static(b"efgh")))]);
        // Write 3 says every shard has write 2: the records of 1 and 2 go.
        ask(&mut s, write(3, b"xyz", Touched::Chunks(vec![(0, 2)]), 2)).unwrap();
        assert!(kept(&s, 1).is_none() && kept(&s, 2).is_none() && kept(&s, 3).is_some());
        assert_eq!(s.pg(pg).unwrap().rollbacks().collect::<Vec<_>>(), vec![3]);
        let read = PeerRequest::EcRead { pg, interval: 0, object: object.clone(), first: 0, end: 5 };
        match ask(&mut s, read).unwrap() {
            Reply::Chunks { onode, chunks } => {
                assert_eq!(Onode::decode(&onode.unwrap()).unwrap().size, 3);
                assert_eq!(chunks, vec![(0, Bytes::from_static(b"xyz"))]);
            }
            other => panic!("{other:?}"),
        }
        let stale = PeerRequest::EcRead { pg, interval: 7, object, first: 0, end: 1 };
        assert_eq!(ask(&mut s, stale).unwrap_err().errno, shoal_types::Errno::Again);
    }

    #[test]
    fn whole_writes_stash_the_old_copy_until_every_shard_has_them() {
        // Every chunk on the data device, so that the stash is seen in the device's books.
        let mut s = shard_on(StoreOptions { prefer_deferred_size: 4 });
        let pg = PgId { pool: PoolId(1), seed: 0 };
        let object = ObjectName::new("", "o");
        let key = ObjectKey::new(pg.pool, &object).unwrap();
        let at = |v: u64| EVersion { epoch: 0, version: v };
        let write = |version: u64, data: &[u8], committed: u64| {
            let mut txn = Transaction::new();
            txn.remove_object_sized(&key, 2, false);
            txn.put_onode(&key, &Onode { size: data.len() as u64, version, ..Onode::default() });
            for (i, piece) in data.chunks(4).enumerate() {
                txn.put_chunk(&key, i as u32, piece.to_vec());
            }
            shard_write(pg, &object, version, &txn, Touched::Whole, committed)
        };
        let store = s.config.store.clone();
        let books = || {
            store.sync().unwrap();
            let report = store.fsck(true).unwrap();
            assert!(report.errors.is_empty(), "{report:?}");
            (report.extents, report.stashed)
        };
        let read = || store.chunks(&key, 0, 4).unwrap().into_iter().flat_map(|(_, c)| c.to_vec()).collect::<Vec<u8>>();
        ask(&mut s, write(1, b"abcdefgh", 0)).unwrap();
        let written = store.space().written;
        ask(&mut s, write(2, b"12345678", 1)).unwrap();
        let record = Rollback::decode(&store.meta(&pg_rollback_key(pg, 2)).unwrap().unwrap()).unwrap();
        assert_eq!((record.stash, record.chunks.len()), (Some(2), 0), "moved, not copied");
        assert_eq!(books(), (4, 2), "the new copy's two chunks and the old copy's, stashed");
        assert_eq!(store.space().written - written, 8, "only the new copy was written");

        let mut txn = Transaction::new();
        let rolled_back = s.pg(pg).unwrap().roll_back_newest(&store, &mut txn).unwrap();
        assert_eq!(rolled_back, RolledBack::Undone(at(2)));
        store.commit(txn).unwrap();
        assert_eq!(read(), b"abcdefgh", "the stash went back");
        assert_eq!(books(), (2, 0));

        ask(&mut s, write(2, b"12345678", 1)).unwrap();
        ask(&mut s, write(3, b"xy", 2)).unwrap();
        assert!(store.meta(&pg_rollback_key(pg, 2)).unwrap().is_none());
        assert_eq!(books(), (2, 2), "write 2's stash is dropped; write 3's holds the old copy, the new one is inline");
        assert_eq!(read(), b"xy");
        assert_eq!(s.pg(pg).unwrap().rollbacks().collect::<Vec<_>>(), vec![3]);
        let reloaded = PgState::load(&store, pg, 100).unwrap();
        assert_eq!(reloaded.rollbacks().collect::<Vec<_>>(), vec![3], "a restart knows the stash");
    }

    #[test]
    fn activation_rolls_a_shard_back_to_where_its_primary_says() {
        let (mut s, pg) = erasure_shard();
        let (a, b) = (ObjectName::new("", "a"), ObjectName::new("", "b"));
        let at = |v: u64| EVersion { epoch: 0, version: v };
        let write = |version: u64, object: &ObjectName, data: &[u8]| {
            let key = ObjectKey::new(pg.pool, object).unwrap();
            let mut txn = Transaction::new();
            txn.put_onode(&key, &Onode { size: data.len() as u64, version, ..Onode::default() });
            txn.put_chunk(&key, 0, data.to_vec());
            shard_write(pg, object, version, &txn, Touched::Chunks(vec![(0, 1)]), 0)
        };
        ask(&mut s, write(1, &a, b"a1")).unwrap();
        ask(&mut s, write(2, &b, b"b2")).unwrap();
        ask(&mut s, write(3, &a, b"a3")).unwrap();
        let activate = shoal_types::msg::Activate {
            pg,
            interval: 2,
            acting: vec![OsdId(0)],
            keep_until: Some(at(1)),
            entries: Vec::new(),
            log_tail: EVersion::default(),
            complete: true,
            remembered: Vec::new(),
        };
        ask(&mut s, PeerRequest::Activate(activate)).unwrap();
        let store = s.config.store.clone();
        let data = |o: &ObjectName| store.chunks(&ObjectKey::new(pg.pool, o).unwrap(), 0, 1).unwrap();
        assert_eq!(data(&a), vec![(0, Bytes::from_static(b"a1"))], "write 3 undone");
        assert!(store.onode(&ObjectKey::new(pg.pool, &b).unwrap()).unwrap().is_none(), "write 2 created b: undone");
        let state = s.pg(pg).unwrap();
        assert_eq!((state.info.last_update, state.info.last_epoch_started), (at(1), 2));
        assert_eq!(state.rollbacks().collect::<Vec<_>>(), vec![1]);
        assert!(store.meta(&shoal_store::pg_log_key(pg, 2)).unwrap().is_none());
    }

    #[test]
    fn a_whole_write_makes_a_copy_that_lacked_its_object_whole_and_undoing_it_lacks_it_again() {
        let (mut s, pg) = erasure_shard();
        let object = ObjectName::new("", "o");
        let key = ObjectKey::new(pg.pool, &object).unwrap();
        let at = |v: u64| EVersion { epoch: 0, version: v };
        let entry = |version: u64| PgLogEntry {
            at: at(version),
            reqid: ReqId { client: ClientId(1), tid: version },
            object: object.clone(),
            outputs: None,
        };
        let write = |version: u64, txn: Transaction| shard_write(pg, &object, version, &txn, Touched::Whole, 0);
        // Write 1 left two chunks; the copy then took write 2's entry, not its data.
        let mut first = Transaction::new();
        first.put_onode(&key, &Onode { size: 8, version: 1, ..Onode::default() });
        first.put_chunk(&key, 0, b"abcd".to_vec());
        first.put_chunk(&key, 1, b"efgh".to_vec());
        ask(&mut s, write(1, first)).unwrap();
        let activate = |keep_until, entries| shoal_types::msg::Activate {
            pg,
            interval: 0,
            acting: vec![OsdId(0)],
            keep_until: Some(keep_until),
            entries,
            log_tail: EVersion::default(),
            complete: false,
            remembered: Vec::new(),
        };
        ask(&mut s, PeerRequest::Activate(activate(at(1), vec![entry(2)]))).unwrap();
        assert!(s.pg(pg).unwrap().lacks(&object));
        // Write 3 rewrites the object whole, one chunk long as the primary knows it.
        let mut rewrite = Transaction::new();
        rewrite.remove_object_sized(&key, 1, false);
        rewrite.put_onode(&key, &Onode { size: 3, version: 3, ..Onode::default() });
        rewrite.put_chunk(&key, 0, b"xyz".to_vec());
        ask(&mut s, write(3, rewrite)).unwrap();
        let store = s.config.store.clone();
        assert_eq!(store.chunks(&key, 0, 4).unwrap(), vec![(0, Bytes::from_static(b"xyz"))], "no stale chunk");
        assert!(!s.pg(pg).unwrap().lacks(&object));
        assert!(store.meta(&pg_rollback_key(pg, 3)).unwrap().is_none(), "nothing undoes it here");
        // Rolled back, the copy lacks the object again, and says so to peer again.
        let again = ask(&mut s, PeerRequest::Activate(activate(at(2), Vec::new()))).unwrap_err();
        assert_eq!(again.errno, shoal_types::Errno::Again);
        let state = s.pg(pg).unwrap();
        assert_eq!(state.info.last_update, at(2));
        assert!(state.lacks(&object));
    }
}
