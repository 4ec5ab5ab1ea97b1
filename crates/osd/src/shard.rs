//! Op shards: each PG belongs to one shard thread, which runs everything about that PG —
//! client operations, replication, peering and recovery steps, replica requests — one
//! after another in arrival order. Operations on one object never interleave, while PGs on
//! different shards run in parallel. Network replies come back as [`Job::Event`]s.

use crate::committer::{Durability, Pending};
use crate::exec::{ExecEnv, execute};
use crate::limits::Limits;
use crate::peers::PeerNet;
use crate::pglog::PgState;
use crate::primary::{Event, Primary};
use crate::view::ObjectView;
use bytes::Bytes;
use shoal_objclass::{ClassRegistry, ClassState};
use shoal_store::{CopyResume, ObjectKey, ObjectStore, Transaction};
use shoal_types::msg::{OpReply, OsdOp, PeerRequest, PgListReply, PgListRequest, Reply};
use shoal_types::pg::PgStat;
use shoal_types::{ClientId, OsdId, OsdMap, PgId, Result, Versioned, err};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::mpsc::SyncSender;
use tokio::sync::{mpsc, oneshot, watch};

/// Where a job's answer goes.
pub type ReplyTx = oneshot::Sender<Result<Reply>>;

/// Work for a shard.
pub enum Job {
    /// A compound operation from a client.
    Op {
        /// The operation.
        op: OsdOp,
        /// The client it came from.
        caller: ClientId,
        /// Where the reply goes.
        reply: ReplyTx,
    },
    /// A page of a PG listing.
    List {
        /// The request.
        req: PgListRequest,
        /// Where the reply goes.
        reply: ReplyTx,
    },
    /// A request from another OSD about one of this shard's PGs.
    Peer {
        /// The request.
        request: PeerRequest,
        /// Where the reply goes.
        reply: ReplyTx,
    },
    /// The map changed: re-examine every PG.
    MapChanged,
    /// The outcome of something a primary started (a reply, a sync, a timer).
    Event {
        /// The PG.
        pg: PgId,
        /// The interval that started it; stale events are dropped.
        interval: u64,
        /// What happened.
        event: Event,
    },
    /// Report the state of every PG this shard is primary of.
    Stats(oneshot::Sender<Vec<PgStat>>),
}

/// What every shard shares.
#[derive(Clone)]
pub struct ShardContext {
    /// This OSD.
    pub me: OsdId,
    /// The local store.
    pub store: Arc<ObjectStore>,
    /// The current cluster map.
    pub map: watch::Receiver<Arc<OsdMap>>,
    /// Object classes.
    pub classes: Arc<ClassRegistry>,
    /// Operation limits.
    pub limits: watch::Receiver<Arc<Limits>>,
    /// Group-commit state.
    pub durability: Arc<Durability>,
    /// Replies waiting for a sync.
    pub committer: SyncSender<Pending>,
    /// Most objects whose class state is cached, per shard.
    pub class_cache_entries: usize,
    /// PG log entries kept per PG for recognising resent requests.
    pub pg_log_entries: usize,
    /// Links to the other OSDs.
    pub peers: Arc<PeerNet>,
    /// Where timers and network tasks run.
    pub runtime: tokio::runtime::Handle,
    /// Set when the OSD stops: shards drop every job from then on.
    pub stopping: Arc<std::sync::atomic::AtomicBool>,
    /// Counters since start.
    pub counters: Arc<crate::counters::OsdCounters>,
    /// Objects whose local copy failed its checksum and is not repaired yet.
    pub damage: Arc<crate::damage::Damage>,
}

/// The shard a PG's operations run on.
pub fn shard_of(pg: PgId, shards: usize) -> usize {
    shoal_placement::hash::hash2(pg.seed, pg.pool.0 as u32) as usize % shards.max(1)
}

/// One shard's state: the PGs it owns and the work in flight for them.
pub struct ShardState {
    pub(crate) ctx: ShardContext,
    pub(crate) index: usize,
    pub(crate) shards: usize,
    /// This shard's own queue, for events of work it started.
    pub(crate) tx: mpsc::WeakUnboundedSender<Job>,
    /// The map the PGs were last examined under.
    pub(crate) map: Arc<OsdMap>,
    pub(crate) pgs: HashMap<PgId, PgState>,
    /// Per PG this OSD serves: the up set and the epoch it became so.
    pub(crate) intervals: HashMap<PgId, (u64, Vec<OsdId>)>,
    /// PGs this OSD is primary of.
    pub(crate) primaries: HashMap<PgId, Primary>,
    /// Per PG, the newest interval whose primary has queried this OSD.
    fences: HashMap<PgId, u64>,
    /// Class state per object, valid while the object is at the recorded version.
    class_cache: HashMap<ObjectKey, (u64, BTreeMap<String, ClassState>)>,
    /// The store sequence number of this shard's latest commit: anything a later read
    /// observes is durable once this is.
    pub(crate) last_seq: u64,
}

/// Starts shard `index` of `shards`; it runs jobs until every sender is dropped.
pub fn start(index: usize, shards: usize, ctx: ShardContext) -> mpsc::UnboundedSender<Job> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let own = tx.downgrade();
    std::thread::Builder::new()
        .name(format!("osd-shard-{index}"))
        .spawn(move || {
            let _guard =
                crate::fault::PanicGuard { fault: ctx.durability.fault.clone(), thread: format!("osd-shard-{index}") };
            let mut state = ShardState {
                ctx,
                index,
                shards,
                tx: own,
                map: Arc::new(OsdMap::default()),
                pgs: HashMap::new(),
                intervals: HashMap::new(),
                primaries: HashMap::new(),
                fences: HashMap::new(),
                class_cache: HashMap::new(),
                last_seq: 0,
            };
            while let Some(job) = rx.blocking_recv() {
                state.run(job);
            }
        })
        .expect("spawning a shard thread");
    tx
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The outcome of executing one operation on the primary.
pub(crate) struct Executed {
    pub(crate) reply: OpReply,
    /// The store transaction and log entry of a write; `None` for reads and no-ops.
    pub(crate) write: Option<(Transaction, shoal_types::PgLogEntry)>,
    pub(crate) key: ObjectKey,
    pub(crate) states: BTreeMap<String, ClassState>,
}

impl ShardState {
    fn run(&mut self, job: Job) {
        if self.ctx.stopping.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        self.sync_map();
        match job {
            Job::Op { op, caller, reply } => self.client_op(op, caller, reply),
            Job::List { req, reply } => {
                let outcome = self.check_serving(PgId { pool: req.pool, seed: req.seed });
                let outcome = outcome.and_then(|()| self.list(&req)).map(|r| (self.last_seq, Reply::PgList(r)));
                self.respond(outcome, reply);
            }
            Job::Peer { request, reply } => {
                let outcome = self.peer_request(request);
                self.respond(outcome, reply);
            }
            Job::MapChanged => {}
            Job::Event { pg, interval, event } => self.primary_event(pg, interval, event),
            Job::Stats(reply) => {
                let stats = self
                    .primaries
                    .iter()
                    .map(|(pg, p)| {
                        let last_update = self.pgs.get(pg).map(|s| s.info.last_update).unwrap_or_default();
                        let mut stat = p.stat(*pg, &self.map, last_update);
                        if self.ctx.damage.in_pg(*pg) {
                            stat.state.push(shoal_types::PgStateFlag::Inconsistent);
                        }
                        stat
                    })
                    .collect();
                let _ = reply.send(stats);
            }
        }
    }

    /// Examines the PGs again if the OSD's map moved since the last job.
    fn sync_map(&mut self) {
        let current = self.ctx.map.borrow().clone();
        if current.epoch > self.map.epoch {
            self.map = current;
            self.on_new_map();
        }
    }

    /// Sends the reply once everything it depends on is durable.
    pub(crate) fn respond(&self, outcome: Result<(u64, Reply)>, reply: ReplyTx) {
        let (seq, value) = match outcome {
            Ok((seq, v)) => (seq, Ok(v)),
            Err(e) => (self.last_seq, Err(e)),
        };
        self.after_durable(
            seq,
            Box::new(move |synced: Result<()>| {
                let _ = reply.send(synced.and(value));
            }),
        );
    }

    /// Runs `then` once the store is durable up to `seq` (at once if it already is).
    pub(crate) fn after_durable(&self, seq: u64, then: Box<dyn FnOnce(Result<()>) + Send>) {
        if self.ctx.durability.is_durable(seq) {
            then(Ok(()));
            if !self.ctx.durability.sync_enabled && self.ctx.store.space().unreferenced > 0 {
                // Freed data space is reused only once durable: without syncs for replies,
                // the committer still syncs now and then to release it.
                let _ = self.ctx.committer.try_send(Pending { seq, deliver: Box::new(|_| {}) });
            }
            return;
        }
        if let Err(std::sync::mpsc::SendError(p)) = self.ctx.committer.send(Pending { seq, deliver: then }) {
            (p.deliver)(Err(err::io("the OSD is shutting down")));
        }
    }

    /// The PG's in-memory state, loaded on first use.
    pub(crate) fn pg(&mut self, pg: PgId) -> Result<&mut PgState> {
        if !self.pgs.contains_key(&pg) {
            let state = PgState::load(&self.ctx.store, pg, self.ctx.pg_log_entries)?;
            self.pgs.insert(pg, state);
        }
        self.pgs.get_mut(&pg).ok_or_else(|| err::io("pg state vanished"))
    }

    /// Commits `txn`; on failure forgets the PG's in-memory state (it is reloaded).
    pub(crate) fn commit(&mut self, pg: PgId, txn: Transaction) -> Result<u64> {
        match self.ctx.store.commit(txn) {
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
    pub(crate) fn execute(&mut self, op: &OsdOp, caller: ClientId, at: shoal_types::EVersion) -> Result<Executed> {
        let key = ObjectKey::new(self.map.pool(op.pool)?.id, &op.object)?;
        let store = self.ctx.store.clone();
        let limits = self.ctx.limits.borrow().clone();
        let cache = &self.class_cache;
        let mut view = ObjectView::load(&store, &limits, key.clone(), |version| match cache.get(&key) {
            Some((v, states)) if *v == version => states.clone(),
            _ => BTreeMap::new(),
        })?;
        let now = now_ns();
        let env = ExecEnv { classes: &self.ctx.classes, limits: &limits, caller, now_ns: now };
        let outputs = execute(&mut view, &op.steps, &env)?;
        if view.changes() == 0 {
            let reply = OpReply { version: view.base_version(), outputs };
            return Ok(Executed { reply, write: None, key, states: BTreeMap::new() });
        }
        let (txn, states) = view.into_transaction(at.version, now);
        let reply = OpReply { version: at.version, outputs };
        let entry = PgState::entry(at, op.reqid, op.object.clone(), &reply);
        Ok(Executed { reply, write: Some((txn, entry)), key, states })
    }

    /// Commit callback: publishes the class state staged by a committed write.
    pub(crate) fn publish_class_state(&mut self, key: ObjectKey, version: u64, states: BTreeMap<String, ClassState>) {
        if states.is_empty() {
            self.class_cache.remove(&key);
        } else {
            if self.class_cache.len() >= self.ctx.class_cache_entries {
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
        let max = req.max.clamp(1, self.ctx.limits.borrow().max_omap_entries_per_request) as usize;
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
            let page = self.ctx.store.list(pg.pool, range, from, max - keys.len())?;
            keys.extend(page);
            if keys.len() == max {
                return Ok((keys, true));
            }
        }
        Ok((keys, false))
    }

    /// The keys a peer's `PullRange` or `ListRange` asks for: up to `max` (1..=1024) after
    /// the encoded key `after`, and whether more follow.
    fn list_requested(&mut self, pg: PgId, after: Option<Bytes>, max: u32) -> Result<(Vec<ObjectKey>, bool)> {
        let pg_num = self.map.pool(pg.pool)?.pg_num;
        let after = after.map(|b| ObjectKey::from_bytes(b.to_vec())).transpose()?;
        self.list_keys(pg, pg_num, after.as_ref(), (max as usize).clamp(1, 1024))
    }

    /// Serves a request from another OSD about one of this shard's PGs.
    fn peer_request(&mut self, request: PeerRequest) -> Result<(u64, Reply)> {
        match request {
            PeerRequest::Ping { .. } => Ok((0, Reply::Done)),
            PeerRequest::Query { pg, interval } => {
                let fence = self.fences.entry(pg).or_default();
                *fence = (*fence).max(interval);
                Ok((self.last_seq, Reply::Summary(self.pg(pg)?.summary())))
            }
            PeerRequest::Log { pg, after } => {
                let store = self.ctx.store.clone();
                let entries = self.pg(pg)?.entries_after(&store, after)?;
                Ok((self.last_seq, Reply::Log(entries)))
            }
            PeerRequest::Pull { pg, objects } => {
                let mut txn = Transaction::new();
                for object in &objects {
                    txn.extend(self.ctx.store.copy_object(&ObjectKey::new(pg.pool, object)?)?);
                }
                Ok((self.last_seq, Reply::Copies { txn: txn.encode().into(), next: None }))
            }
            PeerRequest::PullRange { pg, after, max } => {
                let (keys, more) = self.list_requested(pg, after, max)?;
                let mut txn = Transaction::new();
                for key in &keys {
                    txn.extend(self.ctx.store.copy_object(key)?);
                }
                let next = keys.last().filter(|_| more).map(|k| Bytes::copy_from_slice(k.as_bytes()));
                Ok((self.last_seq, Reply::Copies { txn: txn.encode().into(), next }))
            }
            PeerRequest::PullPart { pg, object, resume } => {
                let resume = resume.map(|b| CopyResume::decode(&b)).transpose()?;
                let key = ObjectKey::new(pg.pool, &object)?;
                let (txn, next) =
                    self.ctx.store.copy_object_part(&key, resume.as_ref(), crate::primary::COPY_PART_BYTES)?;
                let next = next.map(|n| Bytes::from(n.encode()));
                Ok((self.last_seq, Reply::Copies { txn: txn.encode().into(), next }))
            }
            PeerRequest::ListRange { pg, after, max } => {
                let (keys, more) = self.list_requested(pg, after, max)?;
                let keys = keys.iter().map(|k| Bytes::copy_from_slice(k.as_bytes())).collect();
                Ok((self.last_seq, Reply::Keys { keys, more }))
            }
            PeerRequest::Activate(activate) => {
                let pg = activate.pg;
                self.check_interval(pg, activate.interval, true)?;
                let pg_num = self.map.pool(pg.pool)?.pg_num;
                let mut txn = Transaction::new();
                self.pg(pg)?.adopt(&mut txn, &activate, pg_num);
                let seq = self.commit(pg, txn)?;
                self.pgs.remove(&pg);
                self.clear_class_cache();
                Ok((seq, Reply::Done))
            }
            PeerRequest::Push { pg, interval, txn } => {
                self.check_interval(pg, interval, false)?;
                let txn = Transaction::decode(&txn)?;
                Ok((self.commit(pg, txn)?, Reply::Done))
            }
            PeerRequest::RecoveryDone { pg, interval } => {
                self.check_interval(pg, interval, false)?;
                let state = self.pg(pg)?;
                state.info.complete = true;
                let mut txn = Transaction::new();
                state.put_info(&mut txn);
                Ok((self.commit(pg, txn)?, Reply::Done))
            }
            PeerRequest::RemovePg { pg, interval } => {
                if self.intervals.contains_key(&pg) {
                    return Err(err::again(format!("pg {pg} maps to {} under its map", self.ctx.me)));
                }
                let pg_num = self.map.pool(pg.pool)?.pg_num;
                tracing::info!(%pg, interval, "removing a stray copy");
                let mut txn = Transaction::new();
                crate::pglog::delete_pg(&mut txn, pg, pg_num);
                self.pgs.remove(&pg);
                Ok((self.commit(pg, txn)?, Reply::Done))
            }
            PeerRequest::RepOp(rep) => {
                self.check_interval(rep.pg, rep.interval, false)?;
                let state = self.pg(rep.pg)?;
                if state.info.last_update != rep.prev {
                    return Err(err::again(format!(
                        "pg {} is at {}, the write follows {}",
                        rep.pg, state.info.last_update, rep.prev
                    )));
                }
                let mut txn = Transaction::decode(&rep.txn)?;
                state.append(&mut txn, &rep.entry);
                Ok((self.commit(rep.pg, txn)?, Reply::Done))
            }
        }
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
