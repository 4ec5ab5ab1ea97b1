//! Op shards: each PG belongs to one shard thread, which runs that PG's operations one
//! after another in arrival order, so operations on one object never interleave, while
//! PGs on different shards run in parallel.

use crate::committer::{Durability, Pending};
use crate::exec::{ExecEnv, execute};
use crate::limits::Limits;
use crate::pglog::PgState;
use crate::view::ObjectView;
use shoal_objclass::{ClassRegistry, ClassState};
use shoal_store::{ObjectKey, ObjectStore};
use shoal_types::msg::{OpReply, OsdOp, PgListReply, PgListRequest, Reply};
use shoal_types::{ClientId, OsdMap, PgId, Result, err};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::mpsc::SyncSender;
use tokio::sync::{mpsc, oneshot, watch};

/// Where a job's answer goes.
pub type ReplyTx = oneshot::Sender<Result<Reply>>;

/// Work for a shard.
pub enum Job {
    /// A compound operation.
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
}

/// Jobs queued per shard before the messenger waits.
pub const SHARD_QUEUE: usize = 1024;

/// What every shard shares.
#[derive(Clone)]
pub struct ShardContext {
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
}

/// The shard a PG's operations run on.
pub fn shard_of(pg: PgId, shards: usize) -> usize {
    shoal_placement::hash::hash2(pg.seed, pg.pool.0 as u32) as usize % shards.max(1)
}

struct ShardState {
    ctx: ShardContext,
    pgs: HashMap<PgId, PgState>,
    /// Class state per object, valid while the object is at the recorded version.
    class_cache: HashMap<ObjectKey, (u64, BTreeMap<String, ClassState>)>,
    /// The store sequence number of this shard's latest commit: anything a later read
    /// observes is durable once this is.
    last_seq: u64,
}

/// Starts a shard thread that runs jobs until every sender is dropped.
pub fn start(index: usize, ctx: ShardContext) -> mpsc::Sender<Job> {
    let (tx, mut rx) = mpsc::channel(SHARD_QUEUE);
    std::thread::Builder::new()
        .name(format!("osd-shard-{index}"))
        .spawn(move || {
            let mut state = ShardState { ctx, pgs: HashMap::new(), class_cache: HashMap::new(), last_seq: 0 };
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

impl ShardState {
    fn run(&mut self, job: Job) {
        match job {
            Job::Op { op, caller, reply } => {
                let outcome = self.operate(&op, caller);
                self.respond(outcome.map(|(seq, r)| (seq, Reply::Op(r))), reply);
            }
            Job::List { req, reply } => {
                let outcome = self.list(&req).map(|r| (self.last_seq, Reply::PgList(r)));
                self.respond(outcome, reply);
            }
        }
    }

    /// Sends the reply once everything it depends on is durable.
    fn respond(&self, outcome: Result<(u64, Reply)>, reply: ReplyTx) {
        let (seq, value) = match outcome {
            Ok((seq, v)) => (seq, Ok(v)),
            Err(e) => (self.last_seq, Err(e)),
        };
        if self.ctx.durability.is_durable(seq) {
            let _ = reply.send(value);
            return;
        }
        let deliver = Box::new(move |synced: Result<()>| {
            let _ = reply.send(synced.and(value));
        });
        if let Err(std::sync::mpsc::SendError(p)) = self.ctx.committer.send(Pending { seq, deliver }) {
            (p.deliver)(Err(err::io("the OSD is shutting down")));
        }
    }

    fn pg(&mut self, pg: PgId) -> Result<&mut PgState> {
        if !self.pgs.contains_key(&pg) {
            let state = PgState::load(&self.ctx.store, pg, self.ctx.pg_log_entries)?;
            self.pgs.insert(pg, state);
        }
        self.pgs.get_mut(&pg).ok_or_else(|| err::io("pg state vanished"))
    }

    /// Runs one operation; returns the store sequence its reply depends on.
    fn operate(&mut self, op: &OsdOp, caller: ClientId) -> Result<(u64, OpReply)> {
        let map = self.ctx.map.borrow().clone();
        let pool = map.pool(op.pool)?;
        let key = ObjectKey::new(pool.id, &op.object)?;
        let pg = shoal_placement::pg_of(pool, &op.object);
        if let Some(reply) = self.pg(pg)?.applied(&op.reqid) {
            // A resend of a write already applied: answer as the first time.
            return Ok((self.last_seq, reply));
        }
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
            return Ok((self.last_seq, OpReply { version: view.base_version(), outputs }));
        }
        let version = self.pg(pg)?.last_version + 1;
        let (mut txn, states) = view.into_transaction(version, now);
        let reply = OpReply { version, outputs };
        self.pg(pg)?.record(&mut txn, op.reqid, &op.object, &reply);
        let seq = match self.ctx.store.commit(txn) {
            Ok(seq) => seq,
            Err(e) => {
                // The in-memory log already holds the entry: reload it from the store.
                self.pgs.remove(&pg);
                return Err(e);
            }
        };
        self.last_seq = seq;
        // Commit callback: publish the class state staged by this operation.
        if states.is_empty() {
            self.class_cache.remove(&key);
        } else {
            if self.class_cache.len() >= self.ctx.class_cache_entries {
                self.class_cache.clear();
            }
            self.class_cache.insert(key, (version, states));
        }
        Ok((seq, reply))
    }

    fn list(&self, req: &PgListRequest) -> Result<PgListReply> {
        let map = self.ctx.map.borrow().clone();
        let pool = map.pool(req.pool)?;
        if req.seed >= pool.pg_num {
            return Err(err::invalid(format!(
                "pg {}.{:x} does not exist (pg_num {})",
                req.pool, req.seed, pool.pg_num
            )));
        }
        let max = req.max.clamp(1, self.ctx.limits.borrow().max_omap_entries_per_request) as usize;
        let page_size = max + 1;
        let mut after = req.after.as_ref().map(|b| ObjectKey::from_bytes(b.to_vec())).transpose()?;
        let mut objects = Vec::new();
        for range in shoal_placement::pg_reversed_hash_ranges(req.seed, pool.pg_num) {
            loop {
                let page = self.ctx.store.list(pool.id, range.clone(), after.as_ref(), page_size)?;
                let exhausted = page.len() < page_size;
                for key in page {
                    if objects.len() == max {
                        let next = after.map(|k| bytes::Bytes::copy_from_slice(k.as_bytes()));
                        return Ok(PgListReply { objects, next });
                    }
                    let (_, name) = key.decode()?;
                    if req.namespace.as_ref().is_none_or(|ns| *ns == name.namespace) {
                        objects.push(name);
                    }
                    after = Some(key);
                }
                if exhausted {
                    break;
                }
            }
        }
        Ok(PgListReply { objects, next: None })
    }
}
