//! The client library, in the spirit of librados: it fetches the cluster map from the
//! monitor, computes each object's PG and primary OSD itself, and sends compound
//! operations there through the messenger.
//!
//! Must not depend on the OSD, the store or RocksDB: it talks to daemons only through
//! [`shoal_transport::Network`].

pub mod op;
pub mod peer;
pub mod watch;

pub use op::{OpBuilder, ReadOp, WriteOp};
pub use watch::{Notification, WatchEvent, WatchTable};

use bytes::Bytes;
use peer::Peer;
use shoal_transport::Network;
use shoal_types::msg::{
    self, MapCommand, NotifyReply, NotifyRequest, OpReply, OsdOp, PgListRequest, Reply, Request, WatchRequest,
};
use shoal_types::space::StoreUsage;
use shoal_types::{
    ActiveInterval, ClientId, Errno, ObjectName, ObjectStat, OsdEntry, OsdId, OsdMap, PgId, PgStat, Pool, PoolSpec,
    ReqId, Result, Step, StepOutput, err,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// How long an operation is resent (after lost connections, primary changes, PGs
/// peering) before it fails with ETIMEDOUT.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(300);

/// How long a call to a primary waits before the client checks whether the cluster map
/// still makes that OSD the primary (a stopped or partitioned OSD never answers).
const PRIMARY_CHECK: Duration = Duration::from_secs(2);

/// A map and the CRUSH topology built from it.
struct MapView {
    map: Arc<OsdMap>,
    topology: Arc<shoal_placement::Topology>,
}

impl MapView {
    fn new(map: OsdMap) -> Self {
        let topology = Arc::new(shoal_placement::Topology::from_map(&map));
        MapView { map: Arc::new(map), topology }
    }
}

struct Inner {
    id: ClientId,
    network: Arc<dyn Network>,
    mon_addrs: Vec<String>,
    /// The monitor in use (index into `mon_addrs`) and its connection.
    mon: tokio::sync::Mutex<(usize, Option<Arc<Peer>>)>,
    osds: tokio::sync::Mutex<HashMap<OsdId, Arc<Peer>>>,
    map: Mutex<MapView>,
    next_tid: AtomicU64,
    next_cookie: AtomicU64,
    op_timeout: Mutex<Duration>,
    /// Every watch of this client, whatever connection it came through.
    watches: Arc<WatchTable>,
    /// Where each watch is registered; kept on the PG's current primary by the linger task.
    lingers: Mutex<HashMap<u64, Linger>>,
    /// Wakes the linger task (a connection closed).
    linger_wake: Arc<tokio::sync::Notify>,
    linger_running: std::sync::atomic::AtomicBool,
}

/// A registered watch, as librados calls it: a linger operation.
struct Linger {
    pool: shoal_types::PoolId,
    object: ObjectName,
    osd: OsdId,
    peer: Arc<Peer>,
}

/// How often the linger task checks that watches sit on their PG's primary.
const LINGER_CHECK: Duration = Duration::from_secs(1);

/// A connection to a cluster. Cheap to clone.
#[derive(Clone)]
pub struct Rados {
    inner: Arc<Inner>,
}

fn unexpected(reply: Reply) -> shoal_types::RadosError {
    err::io(format!("unexpected reply {reply:?}"))
}

impl Rados {
    /// Connects to one of the monitors in `mon_addrs` (comma-separated) and fetches the
    /// cluster map.
    pub async fn connect(network: Arc<dyn Network>, mon_addrs: &str) -> Result<Rados> {
        let addrs: Vec<String> =
            mon_addrs.split(',').map(str::trim).filter(|a| !a.is_empty()).map(str::to_owned).collect();
        if addrs.is_empty() {
            return Err(err::invalid("no monitor address given"));
        }
        let rados = Rados {
            inner: Arc::new(Inner {
                id: ClientId(rand::random::<u64>() >> 1),
                network,
                mon_addrs: addrs,
                mon: Default::default(),
                osds: Default::default(),
                map: Mutex::new(MapView::new(OsdMap::default())),
                next_tid: AtomicU64::new(1),
                next_cookie: AtomicU64::new(1),
                op_timeout: Mutex::new(DEFAULT_OP_TIMEOUT),
                watches: Arc::default(),
                lingers: Mutex::default(),
                linger_wake: Arc::default(),
                linger_running: Default::default(),
            }),
        };
        rados.refresh_map().await?;
        Ok(rados)
    }

    /// Sets how long operations keep being resent before failing (`rados_osd_op_timeout`).
    pub fn set_op_timeout(&self, timeout: Duration) {
        *self.inner.op_timeout.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = timeout;
    }

    fn op_timeout(&self) -> Duration {
        *self.inner.op_timeout.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reports that `target` stopped answering `reporter`'s heartbeats (used by OSDs).
    pub async fn report_failure(&self, target: OsdId, reporter: OsdId) -> Result<()> {
        self.mon_call(MapCommand::OsdFailure { target, reporter }).await.map(|_| ())
    }

    /// Reports that `target`'s address `addr` refused `reporter`'s connection (used by
    /// OSDs).
    pub async fn report_refused(&self, target: OsdId, reporter: OsdId, addr: String) -> Result<()> {
        self.mon_call(MapCommand::OsdRefused { target, reporter, addr }).await.map(|_| ())
    }

    /// Reports the states of the PGs an OSD is primary of and how full its store is (used
    /// by OSDs).
    pub async fn report_pg_stats(&self, osd: OsdId, stats: Vec<PgStat>, usage: StoreUsage) -> Result<()> {
        self.mon_call(MapCommand::PgStats { osd, stats, usage }).await.map(|_| ())
    }

    /// The monitors (id, address) and the current leader.
    pub async fn mon_status(&self) -> Result<(Vec<(u64, String)>, Option<u64>)> {
        match self.mon_call(MapCommand::MonStatus).await? {
            Reply::MonStatus { members, leader } => Ok((members, leader)),
            other => Err(unexpected(other)),
        }
    }

    /// Whether the daemon at `addr` accepts a connection within a second.
    pub async fn probe(&self, addr: &str) -> bool {
        let attempt = self.open_peer(addr);
        matches!(tokio::time::timeout(Duration::from_secs(1), attempt).await, Ok(Ok(_)))
    }

    /// The PG states the monitor collected from the primaries, and the cluster's client
    /// operation rate (per second).
    pub async fn pg_stats(&self) -> Result<(Vec<PgStat>, u64)> {
        self.pg_report().await.map(|(stats, ops, _)| (stats, ops))
    }

    /// How full each up OSD's store was at its last report to the monitors.
    pub async fn osd_usage(&self) -> Result<std::collections::BTreeMap<OsdId, StoreUsage>> {
        self.pg_report().await.map(|(_, _, usage)| usage)
    }

    /// The monitor's whole report in one call: the PG states, the client operation rate and
    /// how full each up OSD's store was.
    pub async fn pg_report(&self) -> Result<(Vec<PgStat>, u64, std::collections::BTreeMap<OsdId, StoreUsage>)> {
        match self.mon_call(MapCommand::GetPgStats).await? {
            Reply::PgStats { stats, client_ops_per_sec, usage } => {
                Ok((stats, client_ops_per_sec, usage.into_iter().collect()))
            }
            other => Err(unexpected(other)),
        }
    }

    /// Sends an administrative command (`perf dump`, `config show`, `df`) to an OSD and
    /// returns its JSON answer.
    pub async fn tell_osd(&self, id: OsdId, command: &str) -> Result<String> {
        match self.osd(id).await?.call(Request::Tell(command.to_owned())).await? {
            Reply::Tell(json) => Ok(json),
            other => Err(unexpected(other)),
        }
    }

    /// This client's id, as lock holders and watchers are named.
    pub fn client_id(&self) -> ClientId {
        self.inner.id
    }

    /// The newest cluster map this client has.
    pub fn map(&self) -> Arc<OsdMap> {
        self.placement().0
    }

    /// The newest map this client has and the CRUSH topology built from it (once per map).
    fn placement(&self) -> (Arc<OsdMap>, Arc<shoal_placement::Topology>) {
        let view = self.inner.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (view.map.clone(), view.topology.clone())
    }

    /// Sends a command to a monitor. A monitor that cannot be reached is skipped for the
    /// next; while the monitors elect a leader (EAGAIN) the command is retried, for up to
    /// the op timeout.
    async fn mon_call(&self, command: MapCommand) -> Result<Reply> {
        let deadline = tokio::time::Instant::now() + self.op_timeout();
        let addrs = &self.inner.mon_addrs;
        let mut failures = 0usize;
        loop {
            let outcome = match self.mon_peer().await {
                Ok(peer) => peer.call(Request::Map(command.clone())).await,
                Err(e) => Err(e),
            };
            match outcome {
                Err(e) if e.errno.is_disconnect() || e.errno == Errno::Again => {
                    failures += 1;
                    // Every monitor failed to connect: give up (a client of a dead cluster
                    // should hear so quickly); otherwise wait out elections and failovers.
                    let none_reachable = e.errno.is_disconnect() && failures >= addrs.len() * 3;
                    if none_reachable || tokio::time::Instant::now() >= deadline {
                        return Err(e);
                    }
                    if e.errno.is_disconnect() {
                        let mut mon = self.inner.mon.lock().await;
                        mon.0 = (mon.0 + 1) % addrs.len();
                        mon.1 = None;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => return other,
            }
        }
    }

    async fn mon_peer(&self) -> Result<Arc<Peer>> {
        let mut mon = self.inner.mon.lock().await;
        if let Some(peer) = mon.1.as_ref().filter(|p| !p.is_closed()) {
            return Ok(peer.clone());
        }
        let addr = &self.inner.mon_addrs[mon.0 % self.inner.mon_addrs.len()];
        let peer = self.open_peer(addr).await?;
        mon.1 = Some(peer.clone());
        Ok(peer)
    }

    /// Fetches the current cluster map from the monitor.
    pub async fn refresh_map(&self) -> Result<Arc<OsdMap>> {
        match self.mon_call(MapCommand::Get).await? {
            Reply::Map(map) => Ok(self.adopt(*map)),
            other => Err(unexpected(other)),
        }
    }

    /// Sends a command the monitor answers with the new map; keeps that map.
    async fn map_command(&self, command: MapCommand) -> Result<Arc<OsdMap>> {
        match self.mon_call(command).await? {
            Reply::Map(map) => Ok(self.adopt(*map)),
            other => Err(unexpected(other)),
        }
    }

    /// Waits up to `timeout` for a map newer than the one this client has, and keeps it.
    pub async fn wait_for_newer_map(&self, timeout: Duration) -> Result<Arc<OsdMap>> {
        self.wait_for_map_newer_than(self.map().epoch, timeout).await
    }

    /// Waits up to `timeout` for a map newer than epoch `newer_than` (at once if the
    /// monitors have one, even if this client already has it), and keeps it. A daemon
    /// that hands maps on follows with this from the epoch it handed on last: maps this
    /// client adopted from other replies in between would otherwise be skipped.
    pub async fn wait_for_map_newer_than(&self, newer_than: u64, timeout: Duration) -> Result<Arc<OsdMap>> {
        let command = MapCommand::WaitNewer { newer_than, timeout_ms: timeout.as_millis() as u64 };
        self.map_command(command).await
    }

    /// Asks the monitor to record PG activations of an OSD (used by OSDs); the returned map
    /// shows each one recorded or not.
    pub async fn pgs_activated(&self, osd: OsdId, pgs: Vec<(PgId, ActiveInterval)>) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::PgsActivated { osd, pgs }).await
    }

    /// Asks the monitor that PGs `osd` leads be led by another OSD of their acting set, or
    /// by placement's primary again (used by OSDs); returns the map afterwards.
    pub async fn primary_temp(&self, osd: OsdId, pgs: Vec<(PgId, Option<OsdId>)>) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::PrimaryTemp { osd, pgs }).await
    }

    /// Announces an OSD to the monitor (used by the OSD daemon).
    pub async fn osd_boot(&self, id: OsdId, entry: OsdEntry) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::OsdBoot { id, entry }).await
    }

    /// Sets (`Some(value)`) or removes (`None`) a central configuration option.
    pub async fn config_set(&self, who: &str, key: &str, value: Option<&str>) -> Result<Arc<OsdMap>> {
        let (who, key) = (who.to_owned(), key.to_owned());
        let command = match value {
            Some(v) => MapCommand::ConfigSet { who, key, value: v.to_owned() },
            None => MapCommand::ConfigRm { who, key },
        };
        self.map_command(command).await
    }

    /// Marks an OSD in or out of data placement.
    pub async fn osd_set_in(&self, id: OsdId, is_in: bool) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::SetOsdIn { id, is_in }).await
    }

    /// Sets an OSD's CRUSH weight (16.16 fixed point); returns the new map.
    pub async fn osd_set_weight(&self, id: OsdId, weight: u32) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::SetOsdWeight { id, weight }).await
    }

    /// Changes the CRUSH hierarchy, classes, rules, a pool's rule or an override weight;
    /// returns the new map.
    pub async fn crush(&self, change: shoal_types::crush::CrushChange) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::Crush(change)).await
    }

    /// Changes the full ratios or a pool's quota; returns the new map.
    pub async fn space(&self, change: shoal_types::space::SpaceChange) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::Space(change)).await
    }

    /// Removes a down OSD from the map for good; unless `force`, only if no PG may need its
    /// copies. Returns the new map.
    pub async fn osd_purge(&self, id: OsdId, force: bool) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::OsdPurge { id, force }).await
    }

    /// Declares a down OSD's data gone (`osd lost`): PGs whose last active interval only
    /// lost OSDs served go on from what remains. Returns the new map.
    pub async fn osd_lost(&self, id: OsdId) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::OsdLost(id)).await
    }

    /// Sets PGs' upmap exceptions (an empty list removes a PG's); returns the new map.
    pub async fn pg_upmap_items(&self, pgs: Vec<(shoal_types::PgId, Vec<(OsdId, OsdId)>)>) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::PgUpmapItems(pgs)).await
    }

    /// Sets a pool's `pg_num`: raising it splits every PG in place, lowering it starts a
    /// merge (replicated pools) that the leader monitor carries out. Returns the new map.
    pub async fn pool_set_pg_num(&self, pool: &str, pg_num: u32) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::SetPgNum { pool: pool.to_owned(), pg_num }).await
    }

    /// Sets where a pool's `pgp_num` goes; the leader monitor moves it there in steps.
    /// Returns the new map.
    pub async fn pool_set_pgp_num(&self, pool: &str, pgp_num: u32) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::SetPgpNum { pool: pool.to_owned(), pgp_num }).await
    }

    /// Adds monitor `id`, listening at `addr` and started with `--join`, to the quorum;
    /// returns once it is a voter.
    pub async fn mon_add(&self, id: u64, addr: &str) -> Result<()> {
        self.mon_call(MapCommand::MonAdd { id, addr: addr.to_owned() }).await.map(|_| ())
    }

    /// Changes the monitors' auth table (needs `mon 'allow *'`); returns the new map,
    /// which carries the table.
    pub async fn auth(&self, change: shoal_types::auth::AuthChange) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::Auth(change)).await
    }

    /// Removes monitor `id` from the quorum.
    pub async fn mon_remove(&self, id: u64) -> Result<()> {
        self.mon_call(MapCommand::MonRemove(id)).await.map(|_| ())
    }

    /// Changes a pool's PG autoscaler settings; returns the new map.
    pub async fn pool_autoscale(&self, change: shoal_types::autoscale::AutoscaleChange) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::PoolAutoscale(change)).await
    }

    /// Sets (`on`) or clears a cluster flag; returns the new map.
    pub async fn osd_set_flag(&self, flag: &str, on: bool) -> Result<Arc<OsdMap>> {
        self.map_command(MapCommand::SetFlag { flag: flag.to_owned(), on }).await
    }

    /// Keeps `map` if it is newer than the one held; returns the newest.
    fn adopt(&self, map: OsdMap) -> Arc<OsdMap> {
        let mut current = self.inner.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.epoch > current.map.epoch {
            *current = MapView::new(map);
        }
        current.map.clone()
    }

    /// Creates a pool.
    pub async fn pool_create(&self, spec: PoolSpec) -> Result<Pool> {
        let reply = self.mon_call(MapCommand::CreatePool(spec)).await?;
        self.refresh_map().await?;
        match reply {
            Reply::Pool(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// Creates an erasure-coded pool.
    pub async fn pool_create_erasure(&self, spec: shoal_types::erasure::ErasurePoolSpec) -> Result<Pool> {
        let reply = self.mon_call(MapCommand::CreateErasurePool(spec)).await?;
        self.refresh_map().await?;
        match reply {
            Reply::Pool(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// Sets erasure-code profile `name` (`force`: replace one with other settings).
    pub async fn erasure_profile_set(
        &self,
        name: &str,
        profile: shoal_types::erasure::ErasureProfile,
        force: bool,
    ) -> Result<()> {
        self.mon_call(MapCommand::SetErasureProfile { name: name.to_owned(), profile, force }).await?;
        self.refresh_map().await?;
        Ok(())
    }

    /// Removes erasure-code profile `name` (refused while a pool uses it).
    pub async fn erasure_profile_rm(&self, name: &str) -> Result<()> {
        self.mon_call(MapCommand::RemoveErasureProfile(name.to_owned())).await?;
        self.refresh_map().await?;
        Ok(())
    }

    /// Deletes a pool and every object in it.
    pub async fn pool_delete(&self, name: &str) -> Result<()> {
        self.mon_call(MapCommand::DeletePool(name.to_owned())).await?;
        self.refresh_map().await?;
        Ok(())
    }

    /// Every pool, by id.
    pub async fn pool_list(&self) -> Result<Vec<Pool>> {
        Ok(self.refresh_map().await?.pools.values().cloned().collect())
    }

    /// An I/O context on the named pool, in the default namespace.
    pub async fn ioctx(&self, pool: &str) -> Result<IoCtx> {
        let pool = match self.map().by_name(pool) {
            Some(p) => p.clone(),
            None => self.refresh_map().await?.pool_named(pool)?.clone(),
        };
        Ok(IoCtx { rados: self.clone(), pool, namespace: String::new() })
    }

    async fn osd(&self, id: OsdId) -> Result<Arc<Peer>> {
        let mut osds = self.inner.osds.lock().await;
        if let Some(peer) = osds.get(&id).filter(|p| !p.is_closed()) {
            return Ok(peer.clone());
        }
        let addr = self
            .map()
            .osds
            .get(&id)
            .map(|o| o.addr.clone())
            .ok_or_else(|| err::not_found(format!("{id} is not in the map")))?;
        let peer = self.open_peer(&addr).await?;
        osds.insert(id, peer.clone());
        Ok(peer)
    }

    /// Drops the connection to `id` (its calls fail with ENOTCONN once nothing else holds
    /// it): a silent OSD's connection is not reused.
    async fn forget_osd(&self, id: OsdId) {
        self.inner.osds.lock().await.remove(&id);
    }

    async fn open_peer(&self, addr: &str) -> Result<Arc<Peer>> {
        let inner = &self.inner;
        Peer::open(inner.network.as_ref(), addr, inner.id, inner.watches.clone(), inner.linger_wake.clone()).await
    }

    fn lingers(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Linger>> {
        self.inner.lingers.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts the task that keeps watches on their PG's primary, unless it runs.
    fn start_linger_task(&self) {
        if self.inner.linger_running.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let rados = Rados { inner };
                if rados.lingers().is_empty() {
                    rados.inner.linger_running.store(false, Ordering::Release);
                    // A watch registered meanwhile restarts the task itself.
                    return;
                }
                let wake = rados.inner.linger_wake.clone();
                let _ = rados.refresh_map().await;
                rados.reregister_watches().await;
                drop(rados);
                let _ = tokio::time::timeout(LINGER_CHECK, wake.notified()).await;
            }
        });
    }

    /// Moves every watch whose PG changed primary, or whose connection closed, to the
    /// PG's current primary. A watch whose object is gone is reported lost.
    async fn reregister_watches(&self) {
        let (map, topology) = self.placement();
        let moved: Vec<(u64, shoal_types::PoolId, ObjectName, OsdId)> = self
            .lingers()
            .iter()
            .filter_map(|(cookie, l)| {
                let pool = map.pools.get(&l.pool)?;
                let pg = shoal_placement::pg_of(pool, &l.object);
                let primary = topology.primary(&map, pool, pg)?;
                (primary != l.osd || l.peer.is_closed()).then(|| (*cookie, l.pool, l.object.clone(), primary))
            })
            .collect();
        for (cookie, pool, object, primary) in moved {
            let request = Request::Watch(WatchRequest { pool, object: object.clone(), cookie });
            let outcome = match self.osd(primary).await {
                Ok(peer) => peer.call(request).await.map(|_| peer),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(peer) => {
                    tracing::debug!(cookie, %object, osd = %primary, "watch moved to the new primary");
                    let old = self.lingers().get_mut(&cookie).map(|l| {
                        l.osd = primary;
                        std::mem::replace(&mut l.peer, peer)
                    });
                    if let Some(old) = old.filter(|p| !p.is_closed()) {
                        let unwatch = Request::Unwatch(WatchRequest { pool, object, cookie });
                        tokio::spawn(async move { old.call(unwatch).await });
                    }
                }
                Err(e) if e.errno == Errno::NotFound => {
                    self.lingers().remove(&cookie);
                    self.inner.watches.lost(cookie);
                }
                Err(e) => tracing::debug!(cookie, error = %e, "moving a watch failed; retrying"),
            }
        }
    }

    fn next_tid(&self) -> u64 {
        self.inner.next_tid.fetch_add(1, Ordering::Relaxed)
    }
}

/// A position in a pool listing: the PG and the last object returned from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListCursor {
    seed: u32,
    after: Option<Bytes>,
}

/// Operations on one pool, within one namespace.
#[derive(Clone)]
pub struct IoCtx {
    rados: Rados,
    pool: Pool,
    namespace: String,
}

tokio::task_local! {
    /// Set while a task frees space: see [`freeing_space`].
    static FREEING_SPACE: ();
}

/// Runs `work` (a delete and its bookkeeping) with every write it sends marked
/// [`Step::FullTry`]: it goes through when its pool is at its quota or an OSD is full,
/// so that users can free space (Ceph's `FULL_TRY`).
pub async fn freeing_space<F: std::future::Future>(work: F) -> F::Output {
    FREEING_SPACE.scope((), work).await
}

/// What [`IoCtx::call_primary`] sends to: an object's PG, or one PG (listings).
#[derive(Clone, Copy)]
enum Target<'a> {
    Object(&'a ObjectName),
    Pg(shoal_types::PgId),
}

/// A registered watch: receive its events with [`Watch::next`].
pub struct Watch {
    /// The watch's cookie.
    pub cookie: u64,
    object: ObjectName,
    events: mpsc::Receiver<WatchEvent>,
    ioctx: IoCtx,
}

impl Watch {
    /// The next notification (or the loss of the watch); `None` after unwatch.
    pub async fn next(&mut self) -> Option<WatchEvent> {
        self.events.recv().await
    }

    /// Removes the watch.
    pub async fn unwatch(self) -> Result<()> {
        let rados = &self.ioctx.rados;
        rados.inner.watches.remove(self.cookie);
        let linger = rados.lingers().remove(&self.cookie);
        let Some(linger) = linger else { return Ok(()) };
        let req = WatchRequest { pool: self.ioctx.pool.id, object: self.object, cookie: self.cookie };
        linger.peer.call(Request::Unwatch(req)).await.map(|_| ())
    }
}

impl IoCtx {
    /// The pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Whether writes to this pool are refused now (an OSD of the cluster is full or the
    /// pool reached its quota), as the monitors' newest map says (the last one this client
    /// had if they cannot be asked).
    pub async fn is_full(&self) -> bool {
        let map = self.rados.refresh_map().await.unwrap_or_else(|_| self.rados.map());
        map.full_pools.contains(&self.pool.id)
            || map.osd_space.values().any(|s| *s == shoal_types::space::SpaceState::Full)
    }

    /// Switches to a namespace ("" is the default).
    pub fn set_namespace(&mut self, namespace: &str) {
        self.namespace = namespace.to_owned();
    }

    fn object(&self, name: &str) -> ObjectName {
        ObjectName::new(self.namespace.clone(), name)
    }

    /// The OSD the client's map makes primary of `pg`.
    fn primary_of(&self, pg: shoal_types::PgId) -> Result<OsdId> {
        let (map, topology) = self.rados.placement();
        let pool = map.pool(self.pool.id)?;
        topology.primary(&map, pool, pg).ok_or_else(|| err::not_connected(format!("pg {pg} has no OSD up")))
    }

    /// Returns once the cluster map no longer makes `osd` the primary of `pg`: a call
    /// that has not been answered for [`PRIMARY_CHECK`] asks the monitors for newer maps.
    async fn primary_moved(&self, pg: shoal_types::PgId, osd: OsdId) {
        loop {
            tokio::time::sleep(PRIMARY_CHECK).await;
            let _ = self.rados.wait_for_newer_map(PRIMARY_CHECK).await;
            if self.primary_of(pg).ok() != Some(osd) {
                return;
            }
        }
    }

    /// Calls the primary of the PG `target` names under the current map, resending after
    /// lost connections, EAGAIN and a map that moved the PG to another primary while the
    /// call waited (a newer map is fetched between tries), until the op timeout. `prepare`
    /// builds the request for the current map epoch.
    async fn call_primary(&self, target: Target<'_>, prepare: impl Fn(u64) -> Request) -> Result<Reply> {
        let timeout = self.rados.op_timeout();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut resends = 0u32;
        loop {
            // An object's PG comes from each try's map: a pg_num change between tries
            // moves it to a child, whose primary may differ.
            let pg = match target {
                Target::Object(object) => self.pg_of(object)?,
                Target::Pg(pg) => pg,
            };
            let attempt = async {
                let osd = self.primary_of(pg)?;
                let call = async { self.rados.osd(osd).await?.call(prepare(self.rados.map().epoch)).await };
                tokio::select! {
                    reply = call => reply,
                    () = self.primary_moved(pg, osd) => {
                        self.rados.forget_osd(osd).await;
                        Err(err::again(format!("{osd} is no longer the primary of pg {pg}")))
                    }
                }
            };
            let outcome = tokio::time::timeout_at(deadline, attempt).await.unwrap_or_else(|_| {
                Err(err::timed_out(format!("pg {pg}: no answer within the op timeout of {timeout:?}")))
            });
            match outcome {
                Err(e) if e.errno.is_disconnect() || e.errno == Errno::Again => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(err::timed_out(format!("pg {pg} after {resends} resends: {e}")));
                    }
                    resends += 1;
                    tracing::debug!(error = %e, resends, "resending a request");
                    let backoff = Duration::from_millis(20 * u64::from(resends.min(25)));
                    let _ = tokio::time::timeout(backoff, self.rados.wait_for_newer_map(backoff)).await;
                }
                other => return other,
            }
        }
    }

    fn pg_of(&self, object: &ObjectName) -> Result<shoal_types::PgId> {
        Ok(shoal_placement::pg_of(self.rados.map().pool(self.pool.id)?, object))
    }

    /// Sends an operation to its primary (E2BIG at once if it cannot fit one message).
    /// When the connection drops before the reply, or
    /// the OSD answers EAGAIN (not the primary, PG peering, acting set changed), the client
    /// fetches a newer map and resends with the same request id, so an OSD answers a
    /// write already applied from its PG log instead of applying it twice. Gives up with
    /// ETIMEDOUT after the op timeout.
    async fn submit(&self, name: &str, mut steps: Vec<Step>) -> Result<OpReply> {
        let may_write = |s: &Step| s.is_mutation() || matches!(s, Step::Exec { .. });
        if FREEING_SPACE.try_with(|_| ()).is_ok() && steps.iter().any(may_write) {
            steps.push(Step::FullTry);
        }
        msg::check_carried(format_args!("the operation on '{name}'"), steps.iter().map(Step::carried_bytes).sum())?;
        let object = self.object(name);
        let op = OsdOp {
            reqid: ReqId { client: self.rados.client_id(), tid: self.rados.next_tid() },
            pool: self.pool.id,
            object,
            map_epoch: 0,
            steps,
        };
        let target = Target::Object(&op.object);
        let reply = self.call_primary(target, |map_epoch| Request::Op(OsdOp { map_epoch, ..op.clone() })).await?;
        match reply {
            Reply::Op(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    /// Applies a write operation atomically; returns per-step outputs and the new version.
    pub async fn operate(&self, name: &str, op: WriteOp) -> Result<OpReply> {
        self.submit(name, op.steps).await
    }

    /// Runs a read operation.
    pub async fn read(&self, name: &str, op: ReadOp) -> Result<OpReply> {
        if op.steps.iter().any(Step::is_mutation) {
            return Err(err::invalid("a read operation must not contain writes"));
        }
        self.submit(name, op.steps).await
    }

    /// Calls `class.method` on the object and returns its output.
    pub async fn exec(&self, name: &str, class: &str, method: &str, input: impl Into<Bytes>) -> Result<Bytes> {
        let reply = self.operate(name, WriteOp::new().exec(class, method, input)).await?;
        match reply.outputs.into_iter().next() {
            Some(StepOutput::Data(d)) => Ok(d),
            other => Err(err::io(format!("unexpected exec output {other:?}"))),
        }
    }

    /// Replaces the object's data (creating it).
    pub async fn write_full(&self, name: &str, data: impl Into<Bytes>) -> Result<()> {
        self.operate(name, WriteOp::new().write_full(data)).await.map(|_| ())
    }

    /// Appends to the object (creating it).
    pub async fn append(&self, name: &str, data: impl Into<Bytes>) -> Result<()> {
        self.operate(name, WriteOp::new().append(data)).await.map(|_| ())
    }

    /// Removes the object.
    pub async fn remove(&self, name: &str) -> Result<()> {
        self.operate(name, WriteOp::new().remove()).await.map(|_| ())
    }

    /// The object's whole data.
    pub async fn read_full(&self, name: &str) -> Result<Bytes> {
        let reply = self.read(name, ReadOp::new().read(0, 0)).await?;
        match reply.outputs.into_iter().next() {
            Some(StepOutput::Data(d)) => Ok(d),
            other => Err(err::io(format!("unexpected read output {other:?}"))),
        }
    }

    /// Up to `max` omap entries after `start_after` whose keys start with `prefix`, and
    /// whether more follow.
    pub async fn omap_vals(
        &self,
        name: &str,
        start_after: &[u8],
        prefix: &[u8],
        max: u32,
    ) -> Result<(Vec<(Bytes, Bytes)>, bool)> {
        let op = ReadOp::new().omap_get_vals(Bytes::copy_from_slice(start_after), Bytes::copy_from_slice(prefix), max);
        match self.read(name, op).await?.outputs.into_iter().next() {
            Some(StepOutput::OmapVals { entries, more }) => Ok((entries, more)),
            other => Err(err::io(format!("unexpected omap_get_vals output {other:?}"))),
        }
    }

    /// The omap entries of `keys` that exist.
    pub async fn omap_vals_by_keys(
        &self,
        name: &str,
        keys: impl IntoIterator<Item = Bytes>,
    ) -> Result<Vec<(Bytes, Bytes)>> {
        match self.read(name, ReadOp::new().omap_get_vals_by_keys(keys)).await?.outputs.into_iter().next() {
            Some(StepOutput::OmapVals { entries, .. }) => Ok(entries),
            other => Err(err::io(format!("unexpected omap_get_vals_by_keys output {other:?}"))),
        }
    }

    /// Every omap entry whose key starts with `prefix`, read a page at a time.
    pub async fn omap_vals_all(&self, name: &str, prefix: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
        let mut all: Vec<(Bytes, Bytes)> = Vec::new();
        loop {
            let after = all.last().map(|(k, _)| k.clone()).unwrap_or_default();
            let (page, more) = self.omap_vals(name, &after, prefix, 1000).await?;
            all.extend(page);
            if !more {
                return Ok(all);
            }
        }
    }

    /// Size, mtime and version.
    pub async fn stat(&self, name: &str) -> Result<ObjectStat> {
        let reply = self.read(name, ReadOp::new().stat()).await?;
        match reply.outputs.into_iter().next() {
            Some(StepOutput::Stat(s)) => Ok(s),
            other => Err(err::io(format!("unexpected stat output {other:?}"))),
        }
    }

    /// One page of the pool's objects (this namespace, or all with `all_namespaces`),
    /// starting at `cursor`; returns the cursor of the next page, `None` at the end.
    pub async fn list(
        &self,
        cursor: ListCursor,
        max: u32,
        all_namespaces: bool,
    ) -> Result<(Vec<ObjectName>, Option<ListCursor>)> {
        let map = self.rados.map();
        let pool = map.pool(self.pool.id)?.clone();
        let mut cursor = cursor;
        let mut objects = Vec::new();
        while cursor.seed < pool.pg_num && (objects.len() as u32) < max {
            let pg = shoal_types::PgId { pool: pool.id, seed: cursor.seed };
            let req = PgListRequest {
                pool: pool.id,
                seed: cursor.seed,
                namespace: (!all_namespaces).then(|| self.namespace.clone()),
                after: cursor.after.clone(),
                max: max - objects.len() as u32,
            };
            match self.call_primary(Target::Pg(pg), |_| Request::PgList(req.clone())).await? {
                Reply::PgList(page) => {
                    objects.extend(page.objects);
                    cursor = match page.next {
                        Some(after) => ListCursor { seed: cursor.seed, after: Some(after) },
                        None => ListCursor { seed: cursor.seed + 1, after: None },
                    };
                }
                other => return Err(unexpected(other)),
            }
        }
        Ok((objects, (cursor.seed < pool.pg_num).then_some(cursor)))
    }

    /// Every object of the pool (this namespace, or all).
    pub async fn list_all(&self, all_namespaces: bool) -> Result<Vec<ObjectName>> {
        let mut out = Vec::new();
        let mut cursor = Some(ListCursor::default());
        while let Some(c) = cursor {
            let (page, next) = self.list(c, 1000, all_namespaces).await?;
            out.extend(page);
            cursor = next;
        }
        Ok(out)
    }

    /// Watches the object (which must exist). The watch follows the object's PG when its
    /// primary changes (notifications sent while it moves are missed).
    pub async fn watch(&self, name: &str) -> Result<Watch> {
        let object = self.object(name);
        let pg = self.pg_of(&object)?;
        let cookie = self.rados.inner.next_cookie.fetch_add(1, Ordering::Relaxed);
        let events = self.rados.inner.watches.add(cookie);
        let req = WatchRequest { pool: self.pool.id, object: object.clone(), cookie };
        let registered = async {
            let osd = self.primary_of(pg)?;
            let peer = self.rados.osd(osd).await?;
            peer.call(Request::Watch(req)).await?;
            Ok::<_, shoal_types::RadosError>((peer, osd))
        };
        match registered.await {
            Ok((peer, osd)) => {
                let linger = Linger { pool: self.pool.id, object: object.clone(), osd, peer };
                self.rados.lingers().insert(cookie, linger);
                self.rados.start_linger_task();
                Ok(Watch { cookie, object, events, ioctx: self.clone() })
            }
            Err(e) => {
                self.rados.inner.watches.remove(cookie);
                Err(e)
            }
        }
    }

    /// Sends `payload` to every watcher of the object; waits up to `timeout` for acks.
    pub async fn notify(&self, name: &str, payload: impl Into<Bytes>, timeout: Duration) -> Result<NotifyReply> {
        let object = self.object(name);
        let req = NotifyRequest {
            pool: self.pool.id,
            object,
            payload: payload.into(),
            timeout_ms: timeout.as_millis() as u64,
        };
        match self.call_primary(Target::Object(&req.object), |_| Request::Notify(req.clone())).await? {
            Reply::Notify(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }
}
