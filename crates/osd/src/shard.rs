//! Op shard threads: each drives one [`shoal_pg_core::Shard`] — the PGs it owns — feeding
//! it jobs in arrival order and carrying out its actions: requests go to peers over
//! [`PeerNet`] and their answers come back as jobs, replies wait for the committer's
//! syncs, timers run on the tokio runtime. Operations on one object never interleave,
//! while PGs on different shards run in parallel.

use crate::committer::{Durability, Pending};
use crate::peers::PeerNet;
use shoal_objclass::ClassRegistry;
use shoal_pg_core::{Action, Awaiting, Counted, Durable, Input, Limits, Registration, Shard, Timer};
use shoal_store::ObjectStore;
use shoal_types::msg::{self, OsdOp, PeerRequest, PgListRequest, Reply};
use shoal_types::pg::PgStat;
use shoal_types::{ClientId, OsdId, OsdMap, PgId, Result, StepOutput, err};
use std::sync::Arc;
use std::sync::mpsc::SyncSender;
use tokio::sync::{mpsc, oneshot, watch};

/// What the shards ask of the monitors.
pub(crate) enum MonRequest {
    /// Record an activation; the answer goes back to the PG's shard.
    Register(Registration),
    /// Change who leads a PG; the answer is the next map.
    PrimaryTemp(PgId, Option<OsdId>),
}

pub use shoal_pg_core::shard_of;

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
    /// A peer's answer to a request the shard sent.
    Answered(Awaiting<ReplyTx>, Result<Reply>),
    /// The store is durable up to a write the shard waits for (or cannot be).
    Durable(Durable, Result<()>),
    /// A timer the shard set fired.
    Timer(Timer),
    /// The monitor recorded a PG's activation (or did not).
    Registered(Registration, bool),
    /// An operator asks for a scrub of a PG.
    Scrub {
        /// The PG.
        pg: PgId,
        /// Read every byte.
        deep: bool,
        /// Rewrite bad copies.
        repair: bool,
    },
    /// Start the scrubs that are due, given the host's load average per CPU.
    ScrubTick(f64),
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
    pub damage: Arc<shoal_pg_core::damage::Damage>,
    /// The OSD's scrubs.
    pub scrubs: Arc<shoal_pg_core::ScrubBoard>,
    /// Requests for the monitors: activations to record, `primary_temp` changes.
    pub(crate) mon_requests: mpsc::UnboundedSender<MonRequest>,
    /// Held shared while a job runs: a split of PG copies waits for it alone.
    pub(crate) gate: crate::split::Gate,
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
            let config = shoal_pg_core::Config {
                me: ctx.me,
                index,
                shards,
                store: ctx.store.clone(),
                classes: ctx.classes.clone(),
                class_cache_entries: ctx.class_cache_entries,
                pg_log_entries: ctx.pg_log_entries,
                damage: ctx.damage.clone(),
                scrubs: ctx.scrubs.clone(),
            };
            let limits = ctx.limits.borrow().clone();
            let mut driver = Driver { core: Shard::new(config, limits), ctx, tx: own };
            while let Some(job) = rx.blocking_recv() {
                driver.run(job);
            }
        })
        .expect("spawning a shard thread");
    tx
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// A shard thread's state: the core and what carries out its actions.
struct Driver {
    ctx: ShardContext,
    core: Shard<ReplyTx>,
    /// This shard's own queue, for answers, syncs and timers of work it started.
    tx: mpsc::WeakUnboundedSender<Job>,
}

impl Driver {
    fn run(&mut self, job: Job) {
        if self.ctx.stopping.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let gate = self.ctx.gate.clone();
        let _running = gate.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.sync_map_and_limits();
        let input = match job {
            Job::Op { op, caller, reply } => Input::Op { op, caller, reply },
            Job::List { req, reply } => Input::List { req, reply },
            Job::Peer { request, reply } => Input::Peer { request, reply },
            Job::MapChanged => return,
            Job::Answered(awaiting, reply) => Input::Answered { awaiting, reply },
            Job::Durable(awaiting, result) => Input::Durable { awaiting, result },
            Job::Timer(timer) => Input::Timer(timer),
            Job::Registered(registration, recorded) => Input::Registered { registration, recorded },
            Job::Scrub { pg, deep, repair } => Input::Scrub { pg, deep, repair },
            Job::ScrubTick(host_load) => Input::ScrubTick { host_load },
            Job::Stats(reply) => {
                if let Err(e) = self.core.count_usage() {
                    tracing::warn!(error = %e, "counting the objects of PGs failed");
                }
                let _ = reply.send(self.core.stats());
                return;
            }
        };
        let actions = self.core.step(input, now_ns());
        self.carry_out(actions);
    }

    /// Gives the core the OSD's map if it moved since the last job, and new limits.
    fn sync_map_and_limits(&mut self) {
        let current = self.ctx.map.borrow().clone();
        if current.epoch > self.core.epoch() {
            let actions = self.core.step(Input::Map(current), now_ns());
            self.carry_out(actions);
        }
        let limits = self.ctx.limits.borrow().clone();
        if !Arc::ptr_eq(&limits, self.core.limits()) {
            self.core.set_limits(limits);
        }
    }

    fn carry_out(&self, actions: Vec<Action<ReplyTx>>) {
        for action in actions {
            match action {
                Action::Send { to, request, awaiting } => {
                    let tx = self.tx.clone();
                    let deliver = Box::new(move |reply| {
                        if let Some(tx) = tx.upgrade() {
                            let _ = tx.send(Job::Answered(awaiting, reply));
                        }
                    });
                    self.ctx.peers.send(to, request, deliver);
                }
                Action::Reply { to, after, value } => {
                    let value = value.and_then(fits_one_message);
                    self.after_durable(after, Box::new(move |synced: Result<()>| drop(to.send(synced.and(value)))));
                }
                Action::WhenDurable { seq, awaiting } => {
                    let tx = self.tx.clone();
                    self.after_durable(
                        seq,
                        Box::new(move |synced| {
                            if let Some(tx) = tx.upgrade() {
                                let _ = tx.send(Job::Durable(awaiting, synced));
                            }
                        }),
                    );
                }
                Action::Timer { after, timer } => {
                    let tx = self.tx.clone();
                    self.ctx.runtime.spawn(async move {
                        tokio::time::sleep(after).await;
                        if let Some(tx) = tx.upgrade() {
                            let _ = tx.send(Job::Timer(timer));
                        }
                    });
                }
                Action::Register(registration) => {
                    let _ = self.ctx.mon_requests.send(MonRequest::Register(registration));
                }
                Action::PrimaryTemp { pg, lead } => {
                    let _ = self.ctx.mon_requests.send(MonRequest::PrimaryTemp(pg, lead));
                }
                Action::Count(Counted::ChecksumError) => self.ctx.counters.checksum_error(),
                Action::Count(Counted::ReadRepaired) => self.ctx.counters.read_repaired(),
                Action::Count(Counted::Recovered { objects, bytes }) => self.ctx.counters.recovered(objects, bytes),
            }
        }
    }

    /// Runs `then` once the store is durable up to `seq` (at once if it already is).
    fn after_durable(&self, seq: u64, then: Box<dyn FnOnce(Result<()>) + Send>) {
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
}

/// A client's reply, or E2BIG if its outputs cannot fit one message (the client would
/// refuse the frame and resend the operation until it timed out).
fn fits_one_message(reply: Reply) -> Result<Reply> {
    if let Reply::Op(op) = &reply {
        msg::check_carried("the reply", op.outputs.iter().map(StepOutput::carried_bytes).sum())?;
    }
    Ok(reply)
}
