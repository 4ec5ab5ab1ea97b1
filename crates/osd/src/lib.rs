//! The OSD: serves compound operations, object classes, PG listings and watch/notify on
//! one local [`ObjectStore`].
//!
//! An operation flows: messenger → admission → the PG's shard thread (in arrival order),
//! which feeds it to its [`shoal_pg_core::Shard`] and carries out the actions: requests to
//! peers over [`peers::PeerNet`], replies once the committer's group sync covers them,
//! timers on the runtime. The protocol itself lives in `shoal-pg-core`; this crate is its
//! IO: sockets, threads, the clock, syncs, heartbeats, watch/notify and admin commands.
//! Must not depend on RocksDB: it sees the store only through `shoal-store`.

pub mod committer;
pub mod counters;
pub mod fault;
pub mod heartbeat;
pub mod notify;
pub mod peers;
pub mod shard;
mod split;

pub use shoal_pg_core::{Limits, ScrubLimits};

use committer::Durability;
use shard::{Job, MonRequest, ShardContext, shard_of};
use shoal_objclass::ClassRegistry;
use shoal_pg_core::damage::Kind;
use shoal_store::{ObjectKey, ObjectStore, Transaction};
use shoal_transport::{Connection, Listener, Network, Peer};
use shoal_types::auth::{Perms, op_perms};
use shoal_types::msg::{Message, PeerRequest, Reply, Request};
use shoal_types::pg::PgStat;
use shoal_types::{ActiveInterval, ClientId, OsdId, OsdMap, PgId, Result, err};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// How an OSD runs.
#[derive(Clone, Debug)]
pub struct OsdConfig {
    /// This OSD's id.
    pub id: OsdId,
    /// Operation limits.
    pub limits: Limits,
    /// Acknowledge writes only once the WAL is synced (`store_sync`; off only for benchmarks).
    pub sync: bool,
    /// Shard threads (`osd_op_num_shards`).
    pub op_shards: usize,
    /// Objects whose class state each shard caches (`osd_class_cache_entries`).
    pub class_cache_entries: usize,
    /// PG log entries kept per PG to recognise resent requests (`osd_pg_log_entries`).
    pub pg_log_entries: usize,
    /// Longest notify timeout a client may ask for.
    pub max_notify_timeout: Duration,
    /// Client operations admitted and not yet answered (`osd_client_message_cap`); a
    /// client beyond waits, its connection unread, so no queue grows without bound.
    pub client_message_cap: usize,
    /// Bytes of client data admitted and not yet answered (`osd_client_message_size_cap`).
    pub client_message_size_cap: usize,
    /// A request answered later than this is logged and counted as slow
    /// (`osd_op_complaint_time`, 30 s as in Ceph).
    pub op_complaint_time: Duration,
    /// Every option's value in effect, as `config show` reports them.
    pub options: BTreeMap<String, String>,
}

impl OsdConfig {
    /// Defaults for OSD `id`: sync on, one shard per core (at least 2).
    pub fn new(id: OsdId) -> Self {
        OsdConfig {
            id,
            limits: Limits::default(),
            sync: true,
            op_shards: std::thread::available_parallelism().map_or(2, |n| n.get().max(2)),
            class_cache_entries: 65536,
            pg_log_entries: 3000,
            max_notify_timeout: Duration::from_secs(300),
            client_message_cap: 256,
            client_message_size_cap: 500 << 20,
            op_complaint_time: Duration::from_secs(30),
            options: BTreeMap::new(),
        }
    }
}

struct Inner {
    config: OsdConfig,
    store: Arc<ObjectStore>,
    map: watch::Receiver<Arc<OsdMap>>,
    shards: Vec<mpsc::UnboundedSender<Job>>,
    stopping: Arc<std::sync::atomic::AtomicBool>,
    watches: notify::Watches,
    next_conn: AtomicU64,
    limits: watch::Sender<Arc<Limits>>,
    /// The options in effect (start values, then live changes).
    options: std::sync::Mutex<BTreeMap<String, String>>,
    counters: Arc<counters::OsdCounters>,
    damage: Arc<shoal_pg_core::damage::Damage>,
    scrubs: Arc<shoal_pg_core::ScrubBoard>,
    durability: Arc<Durability>,
    admission: Admission,
}

/// Client operations and bytes admitted and not yet answered (see
/// [`OsdConfig::client_message_cap`]).
struct Admission {
    ops: Arc<tokio::sync::Semaphore>,
    /// In KiB.
    kib: Arc<tokio::sync::Semaphore>,
    /// All of `kib`'s permits: a larger request takes them all.
    kib_total: u32,
}

/// What an admitted client request holds until it is answered.
type Admitted = (tokio::sync::OwnedSemaphorePermit, tokio::sync::OwnedSemaphorePermit);

impl Admission {
    fn new(config: &OsdConfig) -> Admission {
        let kib_total = u32::try_from(config.client_message_size_cap >> 10).unwrap_or(u32::MAX).max(1);
        Admission {
            ops: Arc::new(tokio::sync::Semaphore::new(config.client_message_cap.max(1))),
            kib: Arc::new(tokio::sync::Semaphore::new(kib_total as usize)),
            kib_total,
        }
    }

    /// Waits until a client operation or listing fits; other requests pass at once.
    async fn admit(&self, request: &Request) -> Option<Admitted> {
        let bytes = match request {
            Request::Op(op) => counters::write_bytes(op),
            Request::PgList(_) => 0,
            _ => return None,
        };
        let kib = u32::try_from((bytes >> 10).max(1)).unwrap_or(u32::MAX).min(self.kib_total);
        let op = self.ops.clone().acquire_owned().await.ok()?;
        let bytes = self.kib.clone().acquire_many_owned(kib).await.ok()?;
        Some((op, bytes))
    }
}

/// Where an OSD records the PGs it activated before serving writes in them: the monitor.
pub trait PgRegistry: Send + Sync + 'static {
    /// Asks to record the activations of `osd`'s PGs; returns the map afterwards, which
    /// shows each one recorded or not.
    fn record(
        &self,
        osd: OsdId,
        pgs: Vec<(PgId, ActiveInterval)>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Arc<OsdMap>>> + Send + '_>>;

    /// Asks that PGs `osd` leads be led by another OSD of their acting set, or by
    /// placement's primary again (`None`); returns the map afterwards.
    fn primary_temp(
        &self,
        osd: OsdId,
        pgs: Vec<(PgId, Option<OsdId>)>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Arc<OsdMap>>> + Send + '_>>;
}

/// Carries the shards' requests to `registry`, all those waiting in one request of each
/// kind, and each registration's answer back to the shard of its PG.
async fn ask_monitors(
    me: OsdId,
    registry: Arc<dyn PgRegistry>,
    mut requests: mpsc::UnboundedReceiver<MonRequest>,
    shards: Vec<mpsc::WeakUnboundedSender<Job>>,
) {
    while let Some(first) = requests.recv().await {
        let (mut batch, mut temps) = (Vec::new(), Vec::new());
        let mut next = Some(first);
        while let Some(request) = next {
            match request {
                MonRequest::Register(registration) => batch.push(registration),
                MonRequest::PrimaryTemp(pg, lead) => temps.push((pg, lead)),
            }
            next = requests.try_recv().ok();
        }
        if !temps.is_empty()
            && let Err(e) = registry.primary_temp(me, temps).await
        {
            tracing::info!(error = %e, "asking for primary_temp changes failed");
        }
        if batch.is_empty() {
            continue;
        }
        let pgs = batch.iter().map(|r| (r.pg, r.active.clone())).collect();
        let map = registry.record(me, pgs).await;
        if let Err(e) = &map {
            tracing::info!(error = %e, "recording PG activations failed");
        }
        for registration in batch {
            let recorded = map.as_ref().is_ok_and(|m| m.pg_active.get(&registration.pg) == Some(&registration.active));
            let shard = shards.get(shard_of(registration.pg, shards.len())).and_then(|s| s.upgrade());
            if let Some(shard) = shard {
                let _ = shard.send(Job::Registered(registration, recorded));
            }
        }
    }
}

/// A running OSD. Cloning gives another handle to the same OSD.
#[derive(Clone)]
pub struct Osd {
    inner: Arc<Inner>,
}

impl Osd {
    /// Starts the shard and committer threads on `store`, following the maps in `map`,
    /// reaching peer OSDs through `network` and recording PG activations in `registry`.
    /// Must be called within a tokio runtime.
    pub fn start(
        config: OsdConfig,
        store: Arc<ObjectStore>,
        map: watch::Receiver<Arc<OsdMap>>,
        network: Arc<dyn Network>,
        registry: Arc<dyn PgRegistry>,
    ) -> Osd {
        let runtime = tokio::runtime::Handle::current();
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let durability = Arc::new(Durability {
            durable_seq: AtomicU64::new(0),
            failed: Default::default(),
            sync_enabled: config.sync,
            fault: fault::Fault::new(),
            inject_sync_failure: Default::default(),
        });
        // The shard and committer threads end when the last handle to this OSD is dropped
        // (their queues close); the process exits without waiting for them.
        let committer = committer::start(store.clone(), durability.clone());
        let damage = Arc::new(shoal_pg_core::damage::Damage::load(&store).unwrap_or_else(|e| {
            tracing::error!(error = %e, "reading the damaged objects recorded before failed; a scrub finds them again");
            Default::default()
        }));
        let gate = split::Gate::default();
        let follower = split::Follower {
            store: store.clone(),
            gate: gate.clone(),
            damage: damage.clone(),
            fault: durability.fault.clone(),
        };
        let map = follower.start(map);
        let (limits, limits_rx) = watch::channel(Arc::new(config.limits.clone()));
        let (mon_requests, mon_request_rx) = mpsc::unbounded_channel();
        let ctx = ShardContext {
            mon_requests,
            me: config.id,
            stopping: stopping.clone(),
            peers: peers::PeerNet::new(config.id, network, map.clone(), runtime.clone()),
            runtime,
            store: store.clone(),
            map: map.clone(),
            classes: Arc::new(ClassRegistry::builtin()),
            limits: limits_rx,
            durability,
            committer,
            class_cache_entries: config.class_cache_entries,
            pg_log_entries: config.pg_log_entries,
            counters: Arc::default(),
            damage,
            scrubs: Arc::default(),
            gate,
        };
        let count = config.op_shards.max(1);
        let shards: Vec<_> = (0..count).map(|i| shard::start(i, count, ctx.clone())).collect();
        let weak = shards.iter().map(|s| s.downgrade()).collect();
        tokio::spawn(ask_monitors(config.id, registry, mon_request_rx, weak));
        tokio::spawn(scrub_ticks(shards.iter().map(|s| s.downgrade()).collect()));
        // Every map change reaches every shard, which re-examines its PGs.
        let (mut changes, nudges) = (map.clone(), shards.iter().map(|s| s.downgrade()).collect::<Vec<_>>());
        tokio::spawn(async move {
            loop {
                for shard in &nudges {
                    match shard.upgrade() {
                        Some(s) => {
                            let _ = s.send(Job::MapChanged);
                        }
                        None => return,
                    }
                }
                if changes.changed().await.is_err() {
                    return;
                }
            }
        });
        let admission = Admission::new(&config);
        Osd {
            inner: Arc::new(Inner {
                options: std::sync::Mutex::new(config.options.clone()),
                config,
                store,
                map,
                shards,
                stopping,
                watches: notify::Watches::default(),
                next_conn: AtomicU64::new(1),
                limits,
                counters: ctx.counters.clone(),
                damage: ctx.damage.clone(),
                scrubs: ctx.scrubs.clone(),
                durability: ctx.durability.clone(),
                admission,
            }),
        }
    }

    /// This OSD's id.
    pub fn id(&self) -> OsdId {
        self.inner.config.id
    }

    /// Waits until the OSD fails for good (its WAL sync failed, a shard thread panicked);
    /// returns why. Its daemon should exit then.
    pub async fn failed(&self) -> String {
        self.inner.durability.fault.raised().await
    }

    /// Records options that changed while running (those that apply live), for
    /// `config show`.
    pub fn update_options(&self, changed: BTreeMap<String, String>) {
        self.inner.options.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(changed);
    }

    /// Answers an administrative command with a JSON document: `config show` (the options
    /// in effect), `perf dump` (counters since start), `df` (space), `damaged` (objects
    /// with a bad checksum not yet repaired, and those the last scrubs found inconsistent),
    /// `scrub|deep-scrub|repair <pg>` (start one on the PG's primary), `scrub-status` (the
    /// last scrub of each PG), `injectdataerr <pool> <object> [chunk]` (flip a stored byte of
    /// an object's chunk on the data device, for tests, as Ceph's), `injectremove <pool>
    /// <object>` (delete the local copy behind the PG log's back, for tests),
    /// `inject wal-sync-failure` (the next WAL sync fails, for tests).
    pub fn tell(&self, command: &str) -> Result<String> {
        let store = &self.inner.store;
        let words: Vec<&str> = command.split_whitespace().collect();
        let value = match words.as_slice() {
            ["config", "show"] => {
                serde_json::to_value(&*self.inner.options.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
                    .map_err(|e| err::io(e.to_string()))?
            }
            ["perf", "dump"] => {
                let kv = store.stats();
                let space = store.space();
                serde_json::json!({
                    "osd": self.inner.counters.json(),
                    "store": {
                        "user_bytes_written": kv.user_bytes_written,
                        "wal_bytes": kv.wal_bytes,
                        "wal_syncs": kv.wal_syncs,
                        "flush_bytes": kv.flush_bytes,
                        "flushes": kv.flushes,
                        "flush_seconds": kv.flush_micros as f64 / 1e6,
                        "compaction_bytes": kv.compaction_bytes,
                        "compactions": kv.compactions,
                        "compaction_seconds": kv.compaction_micros as f64 / 1e6,
                        "stall_seconds": kv.stall_micros as f64 / 1e6,
                        "block_cache_hits": kv.block_cache_hits,
                        "block_cache_misses": kv.block_cache_misses,
                        "memtable_hits": kv.memtable_hits,
                        "memtable_misses": kv.memtable_misses,
                        "live_bytes": kv.live_bytes,
                        "write_amplification": kv.write_amplification(),
                    },
                    "data_device": {
                        "bytes_written": space.written,
                        "syncs": space.syncs,
                    },
                })
            }
            ["damaged"] => {
                let unreadable = self.inner.damage.list().into_iter().map(|(pg, object, kind)| {
                    let why = match kind {
                        Kind::Unreadable => CHECKSUM,
                        Kind::Unfound => UNFOUND,
                    };
                    (pg, object, why.to_owned())
                });
                let scrubbed = self
                    .inner
                    .scrubs
                    .reports()
                    .into_iter()
                    .flat_map(|(pg, report)| report.errors.into_iter().map(move |(object, why)| (pg, object, why)));
                let objects = unreadable.chain(scrubbed).map(|(pg, object, why)| {
                    serde_json::json!({ "pg": pg.to_string(), "object": object.to_string(), "why": why })
                });
                serde_json::Value::from(objects.collect::<Vec<_>>())
            }
            [verb @ ("scrub" | "deep-scrub" | "repair"), pg] => {
                let pg: PgId = pg.parse()?;
                let (deep, repair) = (*verb != "scrub", *verb == "repair");
                self.shard_of_pg(pg)
                    .send(Job::Scrub { pg, deep, repair })
                    .map_err(|_| err::io("the OSD is stopping"))?;
                serde_json::json!({ "instructing": format!("pg {pg} on {} to {verb}", self.id()) })
            }
            ["scrub-status"] => serde_json::Value::from(
                self.inner
                    .scrubs
                    .reports()
                    .into_iter()
                    .map(|(pg, r)| {
                        serde_json::json!({
                            "pg": pg.to_string(),
                            "deep": r.deep,
                            "repair": r.repair,
                            "finished_ns": r.finished_ns,
                            "objects": r.objects,
                            "errors": r.errors.len(),
                            "inconsistent": r.errors.iter().map(|(o, why)| format!("{o}: {why}")).collect::<Vec<_>>(),
                            "repaired": r.repaired,
                            "deep_scrubs": r.deep_scrubs,
                        })
                    })
                    .collect::<Vec<_>>(),
            ),
            [verb @ ("injectdataerr" | "injectrewrite"), pool, object, rest @ ..] => {
                let chunk = match rest {
                    [] => 0,
                    [chunk] => chunk.parse().map_err(|_| err::invalid(format!("bad chunk index '{chunk}'")))?,
                    _ => return Err(err::invalid(format!("usage: {verb} <pool> <object> [chunk]"))),
                };
                let map = self.inner.map.borrow().clone();
                let pool = map.pool_named(pool)?;
                let key = ObjectKey::new(pool.id, &shoal_types::ObjectName::new("", *object))?;
                if *verb == "injectdataerr" {
                    store.corrupt_chunk(&key, chunk)?;
                } else {
                    // Wrong bytes under a matching checksum: only a comparison finds them.
                    let stored = store.chunks(&key, chunk, chunk + 1)?.into_iter().next().map(|(_, d)| d.to_vec());
                    let mut bytes = stored
                        .filter(|b| !b.is_empty())
                        .ok_or_else(|| err::not_found(format!("{}/{object} has no chunk {chunk} here", pool.name)))?;
                    bytes[0] ^= 0xff;
                    let mut txn = Transaction::new();
                    txn.put_chunk(&key, chunk, bytes);
                    store.commit(txn)?;
                    store.sync()?;
                }
                tracing::warn!(pool = %pool.name, %object, chunk, "changed a stored byte on request ({verb})");
                serde_json::json!({ "corrupted": { "pool": pool.name, "object": object, "chunk": chunk } })
            }
            ["injectremove", pool, object] => {
                let map = self.inner.map.borrow().clone();
                let pool = map.pool_named(pool)?;
                let mut txn = Transaction::new();
                txn.remove_object(&ObjectKey::new(pool.id, &shoal_types::ObjectName::new("", *object))?);
                store.commit(txn)?;
                store.sync()?;
                tracing::warn!(pool = %pool.name, %object, "removed the local copy on request (injectremove)");
                serde_json::json!({ "removed": { "pool": pool.name, "object": object } })
            }
            ["inject", "wal-sync-failure"] => {
                self.inner.durability.inject_sync_failure.store(true, Ordering::Release);
                tracing::warn!("the next WAL sync will fail on request (inject wal-sync-failure)");
                serde_json::json!({ "injected": "wal-sync-failure" })
            }
            ["df"] => {
                let space = store.space();
                serde_json::json!({
                    "device_bytes": space.device,
                    "used_bytes": space.referenced,
                    "free_bytes": space.free,
                    "unreferenced_bytes": space.unreferenced,
                    "kv_bytes": store.stats().live_bytes,
                })
            }
            _ => {
                return Err(err::invalid(format!(
                    "unknown command '{command}': try 'perf dump', 'config show', 'df', 'damaged', \
                     'scrub|deep-scrub|repair <pg>', 'scrub-status', 'injectdataerr <pool> <object> [chunk]' \
                     or 'injectremove <pool> <object>'"
                )));
            }
        };
        Ok(value.to_string())
    }

    /// Registers this OSD's counters and its store's statistics for Prometheus.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.inner.counters.register(registry, self.inner.store.clone());
    }

    /// Replaces the operation limits; operations that start afterwards use them.
    pub fn set_limits(&self, limits: Limits) {
        self.inner.limits.send_if_modified(|current| {
            let changed = **current != limits;
            if changed {
                tracing::info!(?limits, "operation limits changed");
                *current = Arc::new(limits);
            }
            changed
        });
    }

    /// Stops serving: every queued and later job is dropped (call before closing the store).
    pub fn stop(&self) {
        self.inner.stopping.store(true, Ordering::Release);
    }

    /// The state of every PG this OSD is primary of.
    pub async fn pg_stats(&self) -> Vec<PgStat> {
        let mut stats = Vec::new();
        for shard in &self.inner.shards {
            let (tx, rx) = oneshot::channel();
            if shard.send(Job::Stats(tx)).is_ok()
                && let Ok(mut s) = rx.await
            {
                stats.append(&mut s);
            }
        }
        stats
    }

    /// Accepts connections on `listener` until it closes.
    pub async fn serve(self, mut listener: Listener) {
        while let Some(conn) = listener.accept().await {
            tokio::spawn(self.clone().serve_connection(conn));
        }
    }

    /// Deletes the data of pools that are no longer in the map.
    pub fn drop_removed_pools(&self, old: &OsdMap, new: &OsdMap) -> Result<()> {
        let mut txn = Transaction::new();
        for id in old.pools.keys().filter(|id| !new.pools.contains_key(id)) {
            tracing::info!(pool = %id, "deleting the data of a removed pool");
            txn.delete_pool(*id);
        }
        if !txn.is_empty() {
            self.inner.store.commit(txn)?;
            self.inner.store.sync()?;
        }
        Ok(())
    }

    async fn serve_connection(self, conn: Connection) {
        let Connection { sender, mut receiver, peer } = conn;
        let conn_id = self.inner.next_conn.fetch_add(1, Ordering::Relaxed);
        let mut client = ClientId(0);
        while let Some(message) = receiver.recv().await {
            match message {
                Message::Request { tid, request } => {
                    if let Request::Hello(id) = request {
                        client = id;
                        let _ = sender.send(Message::Reply { tid, reply: Ok(Reply::Done) }).await;
                        continue;
                    }
                    if let Err(e) = self.authorize(&peer, &request) {
                        let _ = sender.send(Message::Reply { tid, reply: Err(e) }).await;
                        continue;
                    }
                    // Queue in arrival order; answer asynchronously.
                    let (reply_tx, reply_rx) = oneshot::channel();
                    let (kind, arrived) = (self.inner.counters.received(&request), std::time::Instant::now());
                    let admitted = self.inner.admission.admit(&request).await;
                    // Names the operation in a slow-request warning without copying its object name.
                    let reqid = match &request {
                        Request::Op(op) => Some((op.pool, op.reqid)),
                        _ => None,
                    };
                    self.dispatch(request, client, conn_id, &sender, reply_tx).await;
                    let (sender, counters) = (sender.clone(), self.inner.counters.clone());
                    let complaint = self.inner.config.op_complaint_time;
                    tokio::spawn(async move {
                        let reply = reply_rx.await.unwrap_or_else(|_| Err(err::io("the OSD dropped the request")));
                        drop(admitted);
                        let took = arrived.elapsed();
                        if counters.answered(kind, took, complaint) {
                            let (pool, reqid) = reqid.unzip();
                            let error = reply.as_ref().err().map(ToString::to_string);
                            tracing::warn!(?kind, ?took, ?pool, ?reqid, ?error, "slow request");
                        }
                        let _ = sender.send(Message::Reply { tid, reply }).await;
                    });
                }
                Message::NotifyAck(ack) => self.inner.watches.ack(conn_id, ack),
                other => tracing::warn!(?other, "unexpected message from a client"),
            }
        }
        self.inner.watches.connection_closed(conn_id);
    }

    /// Whether `peer` may send `request`: the cluster's daemons and its administrator may
    /// do everything; a client entity what its OSD cap allows on the pool and namespace,
    /// as the current map says (so changed caps and removed keys apply at once).
    fn authorize(&self, peer: &Peer, request: &Request) -> Result<()> {
        if peer.cluster {
            return Ok(());
        }
        let map = self.inner.map.borrow();
        let entity = &*peer.entity;
        let Some(known) = map.auth.get(entity) else {
            return Err(err::access(format!("{entity} has no key any more: it was removed")));
        };
        let (pool, namespace, need) = match request {
            Request::Op(op) => (Some(op.pool), Some(op.object.namespace.as_str()), op_perms(&op.steps)),
            Request::PgList(list) => (Some(list.pool), list.namespace.as_deref(), Perms::R),
            Request::Watch(w) | Request::Unwatch(w) => (Some(w.pool), Some(w.object.namespace.as_str()), Perms::R),
            Request::Notify(n) => (Some(n.pool), Some(n.object.namespace.as_str()), Perms::R),
            _ => (None, None, Perms::ALL),
        };
        let pool_name = pool.and_then(|p| map.pools.get(&p)).map(|p| p.name.as_str());
        if known.caps.osd.allows(pool_name, namespace, need) {
            return Ok(());
        }
        let what = pool_name.map_or(String::new(), |p| format!(" on pool {p}"));
        Err(err::access(format!("{entity}'s caps (osd '{}') do not allow this ({need} needed{what})", known.caps.osd)))
    }

    async fn dispatch(
        &self,
        request: Request,
        client: ClientId,
        conn: u64,
        sender: &mpsc::Sender<Message>,
        reply: shard::ReplyTx,
    ) {
        let inner = &self.inner;
        match request {
            Request::Op(op) => {
                if let Err(e) = self.wait_for_map(op.map_epoch).await {
                    let _ = reply.send(Err(e));
                    return;
                }
                match self.shard_for(op.pool, &op.object) {
                    Ok(shard) => {
                        let _ = shard.send(Job::Op { op, caller: client, reply });
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Request::PgList(req) => {
                let pg = PgId { pool: req.pool, seed: req.seed };
                let _ = self.shard_of_pg(pg).send(Job::List { req, reply });
            }
            Request::Watch(w) => {
                let result = self.object_exists(w.pool, &w.object).map(|()| {
                    inner.watches.watch(w.pool, w.object, client, w.cookie, conn, sender.clone());
                    Reply::Done
                });
                let _ = reply.send(result);
            }
            Request::Unwatch(w) => {
                let result = if inner.watches.unwatch(w.pool, &w.object, w.cookie, conn) {
                    Ok(Reply::Done)
                } else {
                    Err(err::not_found(format!("no watch with cookie {} on {}", w.cookie, w.object)))
                };
                let _ = reply.send(result);
            }
            Request::Notify(n) => {
                let this = self.clone();
                tokio::spawn(async move {
                    let result = match this.object_exists(n.pool, &n.object) {
                        Ok(()) => {
                            let timeout = Duration::from_millis(n.timeout_ms).min(this.inner.config.max_notify_timeout);
                            Ok(Reply::Notify(
                                this.inner.watches.notify(n.pool, n.object, client, n.payload, timeout).await,
                            ))
                        }
                        Err(e) => Err(e),
                    };
                    let _ = reply.send(result);
                });
            }
            Request::Peer(PeerRequest::Ping { .. }) => {
                let _ = reply.send(match inner.durability.fault.reason() {
                    None => Ok(Reply::Done),
                    Some(reason) => Err(err::io(reason)),
                });
            }
            Request::Peer(request) => match peer_request_pg(&request) {
                Some(pg) => {
                    let _ = self.shard_of_pg(pg).send(Job::Peer { request, reply });
                }
                None => {
                    let _ = reply.send(Err(err::invalid("a peer request without a PG")));
                }
            },
            Request::Tell(command) => {
                let _ = reply.send(self.tell(&command).map(Reply::Tell));
            }
            Request::Map(_) | Request::Hello(_) | Request::Raft { .. } => {
                let _ = reply.send(Err(err::not_supported("OSDs do not serve map commands; ask the monitor")));
            }
        }
    }

    fn shard_for(
        &self,
        pool: shoal_types::PoolId,
        object: &shoal_types::ObjectName,
    ) -> Result<&mpsc::UnboundedSender<Job>> {
        let map = self.inner.map.borrow().clone();
        Ok(self.shard_of_pg(shoal_placement::pg_of(map.pool(pool)?, object)))
    }

    fn shard_of_pg(&self, pg: PgId) -> &mpsc::UnboundedSender<Job> {
        &self.inner.shards[shard_of(pg, self.inner.shards.len())]
    }

    fn object_exists(&self, pool: shoal_types::PoolId, object: &shoal_types::ObjectName) -> Result<()> {
        self.inner.map.borrow().pool(pool)?;
        match self.inner.store.onode(&ObjectKey::new(pool, object)?)? {
            Some(_) => Ok(()),
            None => Err(err::not_found(format!("no such object {object}"))),
        }
    }

    /// Waits until this OSD has a map at least as new as the client's (briefly).
    async fn wait_for_map(&self, epoch: u64) -> Result<()> {
        let mut rx = self.inner.map.clone();
        let newer = rx.wait_for(|m| m.epoch >= epoch);
        match tokio::time::timeout(Duration::from_secs(30), newer).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(err::timed_out(format!("this OSD never saw map epoch {epoch}"))),
        }
    }
}

/// What `damaged` says of an object whose local copy failed its checksum.
const CHECKSUM: &str = "a stored checksum does not match (read error)";
const UNFOUND: &str = "unfound: its only up-to-date copy did not read back when this primary recovered (reads get EIO until it is removed)";

/// Every second, tells each shard to start the scrubs that are due, with the host's load
/// average per CPU; ends when the shards do.
async fn scrub_ticks(shards: Vec<mpsc::WeakUnboundedSender<Job>>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let load = host_load();
        for shard in &shards {
            match shard.upgrade() {
                Some(s) => {
                    let _ = s.send(Job::ScrubTick(load));
                }
                None => return,
            }
        }
    }
}

/// The one-minute load average per CPU (0 where the system does not say).
fn host_load() -> f64 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    loadavg.split_whitespace().next().and_then(|l| l.parse::<f64>().ok()).unwrap_or(0.0) / cpus
}

/// The PG a peer request is about.
fn peer_request_pg(request: &PeerRequest) -> Option<PgId> {
    match request {
        PeerRequest::Ping { .. } => None,
        PeerRequest::Query { pg, .. }
        | PeerRequest::Log { pg, .. }
        | PeerRequest::Pull { pg, .. }
        | PeerRequest::PullRange { pg, .. }
        | PeerRequest::PullPart { pg, .. }
        | PeerRequest::ListRange { pg, .. }
        | PeerRequest::Push { pg, .. }
        | PeerRequest::PushAt { pg, .. }
        | PeerRequest::ScrubMap { pg, .. }
        | PeerRequest::RecoveryDone { pg, .. }
        | PeerRequest::RemovePg { pg, .. }
        | PeerRequest::EcRead { pg, .. }
        | PeerRequest::RollBack { pg, .. }
        | PeerRequest::PushRebuilt { pg, .. } => Some(*pg),
        PeerRequest::Activate(a) => Some(a.pg),
        PeerRequest::RepOp(r) => Some(r.pg),
        PeerRequest::EcWrite(w) => Some(w.write.pg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::msg::OsdOp;
    use shoal_types::{ObjectName, PoolId, ReqId, Step};

    fn write(bytes: usize) -> Request {
        Request::Op(OsdOp {
            reqid: ReqId { client: ClientId(1), tid: 1 },
            pool: PoolId(1),
            object: ObjectName::new("", "o"),
            map_epoch: 1,
            steps: vec![Step::WriteFull { data: vec![0; bytes].into() }],
        })
    }

    #[test]
    fn admission_holds_clients_beyond_the_caps_until_earlier_ones_are_answered() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let mut config = OsdConfig::new(OsdId(0));
            (config.client_message_cap, config.client_message_size_cap) = (2, 4 << 20);
            let admission = Admission::new(&config);
            let waits = |request: Request| async {
                let request = request;
                tokio::time::timeout(Duration::from_millis(50), admission.admit(&request)).await.is_err()
            };
            let first = admission.admit(&write(10)).await.expect("admitted");
            let second = admission.admit(&write(10)).await.expect("admitted");
            assert!(waits(write(10)).await, "a third operation waits for one of two");
            assert!(admission.admit(&Request::Tell("df".into())).await.is_none(), "other requests pass");
            drop(first);
            let third = admission.admit(&write(3 << 20)).await.expect("admitted once the first is answered");
            assert!(waits(write(2 << 20)).await, "3 of 4 MiB are taken: 2 more MiB wait");
            drop((second, third));
            let whole = admission.admit(&write(64 << 20)).await;
            assert!(whole.is_some(), "a request over the size cap takes all of it instead of waiting forever");
        });
    }
}
