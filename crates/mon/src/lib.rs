//! The monitors: the authority over the cluster map. Map changes are agreed on by an
//! [`Authority`] — [`local::LocalAuthority`] for the single-node embedded mode,
//! [`raft::RaftAuthority`] for a quorum of `shoal mon` daemons replicating through Raft —
//! and applied by the pure [`change::apply`]. A [`Monitor`] wraps either: it answers
//! clients and OSDs, turns failure reports into map changes, marks long-down OSDs out and
//! collects PG states. A monitor that is not the leader forwards what needs the leader.
//!
//! Must not depend on the OSD or the client.

pub mod change;
pub mod failure;
pub mod lifecycle;
pub mod local;
pub mod raft;

use bytes::Bytes;
use change::MapChange;
pub use failure::FailurePolicy;
use failure::{FailureTracker, Report, Verdict};
use shoal_placement::autoscale::{AutoscalePolicy, Usage};
use shoal_transport::{Connection, Listener, Network, Rpc};
use shoal_types::auth::{AuthChange, Perms};
use shoal_types::autoscale::AutoscaleMode;
use shoal_types::msg::{MapCommand, Message, RaftRpc, Reply, Request};
use shoal_types::pg::{PgStat, PgStateFlag};
use shoal_types::space::{SpaceChange, StoreUsage};
use shoal_types::{ClientId, OsdId, OsdMap, Result, err};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// A boxed future, for the object-safe [`Authority`] trait.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Who decides map changes.
pub trait Authority: Send + Sync + 'static {
    /// The newest map this monitor knows.
    fn subscribe(&self) -> watch::Receiver<Arc<OsdMap>>;
    /// Where changes go: `None` when this monitor is the leader (it applies them itself),
    /// else the leader's address, if known.
    fn leader(&self) -> Option<Option<String>>;
    /// Agrees on `change` and applies it; the reply once it is durable on a quorum.
    fn commit(&self, change: MapChange) -> BoxFuture<'_, Result<Reply>>;
    /// Serves a consensus RPC from another monitor.
    fn raft_rpc(&self, kind: RaftRpc, body: Bytes) -> BoxFuture<'_, Result<Bytes>>;
    /// The monitors (id, address) and the leader, as this monitor sees them.
    fn quorum(&self) -> (Vec<(u64, String)>, Option<u64>);
    /// On the leader: adds or removes a monitor of the quorum; returns once the new
    /// membership is committed.
    fn change_members(&self, change: MemberChange) -> BoxFuture<'_, Result<()>>;
}

/// A change of the monitor quorum's membership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberChange {
    /// Monitor `id`, listening at `addr`, joins as a voter once it has caught up.
    Add {
        /// Its id.
        id: u64,
        /// Its address.
        addr: String,
    },
    /// Monitor `id` leaves.
    Remove(u64),
}

/// What the leader tracks outside the map: failure reports, down times, PG states.
#[derive(Default)]
struct Health {
    failures: FailureTracker,
    pg_stats: HashMap<OsdId, Vec<PgStat>>,
    /// Per OSD: when it last reported, its client operation count then, and its rate.
    io_rates: HashMap<OsdId, (Instant, u64, u64)>,
    /// Per OSD: how full its store was at its last report.
    usage: HashMap<OsdId, StoreUsage>,
}

/// When the leader runs the balancer on its own (`balancer on`), and how far.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BalancerPolicy {
    /// Whether it runs (`mon_balancer_active`).
    pub active: bool,
    /// How often (`mon_balancer_sleep_interval`).
    pub interval: Duration,
    /// Copies moved at most per run (`mon_balancer_max_optimizations`).
    pub max_changes: usize,
    /// Copies an OSD may hold above its fair share (`mon_balancer_max_deviation`).
    pub max_deviation: f64,
    /// The share of a pool's PGs one step of a `pgp_num` change moves at most
    /// (`target_max_misplaced_ratio`).
    pub max_misplaced: f64,
}

impl Default for BalancerPolicy {
    fn default() -> Self {
        BalancerPolicy {
            active: false,
            interval: Duration::from_secs(60),
            max_changes: 10,
            max_deviation: 1.0,
            max_misplaced: 0.05,
        }
    }
}

/// When the leader runs the PG autoscaler, and what it proposes by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutoscalerPolicy {
    /// How often (`mon_pg_autoscale_sleep_interval`).
    pub interval: Duration,
    /// The proposal's knobs.
    pub proposal: AutoscalePolicy,
}

impl Default for AutoscalerPolicy {
    fn default() -> Self {
        AutoscalerPolicy { interval: Duration::from_secs(60), proposal: AutoscalePolicy::default() }
    }
}

/// A monitor: answers map requests over an [`Authority`].
pub struct Monitor {
    authority: Arc<dyn Authority>,
    network: Arc<dyn Network>,
    health: Mutex<Health>,
    policy: Mutex<FailurePolicy>,
    /// The balancer's settings, and when it last ran.
    balancer: Mutex<(BalancerPolicy, Option<Instant>)>,
    /// The PG autoscaler's settings, and when it last ran.
    autoscaler: Mutex<(AutoscalerPolicy, Option<Instant>)>,
    /// The origin of the `now` given to the failure policy.
    started: Instant,
    /// The connection to the leader, for forwarding.
    leader_link: tokio::sync::Mutex<Option<Arc<Rpc>>>,
}

impl Monitor {
    /// A monitor over `authority`, forwarding to the leader through `network`.
    pub fn new(authority: Arc<dyn Authority>, network: Arc<dyn Network>) -> Arc<Monitor> {
        Arc::new(Monitor {
            authority,
            network,
            health: Mutex::default(),
            policy: Mutex::new(FailurePolicy::default()),
            balancer: Mutex::new((BalancerPolicy::default(), None)),
            autoscaler: Mutex::new((AutoscalerPolicy::default(), None)),
            started: Instant::now(),
            leader_link: tokio::sync::Mutex::new(None),
        })
    }

    /// The newest map.
    pub fn current(&self) -> OsdMap {
        self.authority.subscribe().borrow().as_ref().clone()
    }

    /// A receiver that always holds the newest map.
    pub fn subscribe(&self) -> watch::Receiver<Arc<OsdMap>> {
        self.authority.subscribe()
    }

    /// Replaces the failure policy.
    pub fn set_failure_policy(&self, policy: FailurePolicy) {
        *self.policy.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = policy;
    }

    /// Replaces the balancer's settings.
    pub fn set_balancer_policy(&self, policy: BalancerPolicy) {
        self.balancer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0 = policy;
    }

    /// Replaces the PG autoscaler's settings.
    pub fn set_autoscaler_policy(&self, policy: AutoscalerPolicy) {
        self.autoscaler.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0 = policy;
    }

    fn policy(&self) -> FailurePolicy {
        *self.policy.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Answers one map command: reads locally, everything else on the leader.
    pub async fn handle(&self, command: MapCommand) -> Result<Reply> {
        match command {
            MapCommand::Get => return Ok(Reply::Map(Box::new(self.current()))),
            MapCommand::MonStatus => {
                let (members, leader) = self.authority.quorum();
                return Ok(Reply::MonStatus { members, leader });
            }
            MapCommand::WaitNewer { newer_than, timeout_ms } => {
                let timeout = Duration::from_millis(timeout_ms.min(300_000));
                let mut rx = self.subscribe();
                let _ = tokio::time::timeout(timeout, rx.wait_for(|m| m.epoch > newer_than)).await;
                return Ok(Reply::Map(Box::new(self.current())));
            }
            _ => {}
        }
        match self.authority.leader() {
            None => self.lead(command).await,
            Some(leader) => self.forward(leader, command).await,
        }
    }

    async fn forward(&self, leader: Option<String>, command: MapCommand) -> Result<Reply> {
        let addr = leader.ok_or_else(|| err::again("the monitors have no leader yet"))?;
        let mut link = self.leader_link.lock().await;
        if link.as_ref().is_none_or(|l| l.is_closed() || l.addr() != addr) {
            let rpc = Rpc::open(self.network.as_ref(), &addr, ClientId(0), Box::new(|_, _| {}), Box::new(|| {}));
            *link = Some(rpc.await.map_err(|e| err::again(format!("cannot reach the leader at {addr}: {e}")))?);
        }
        let rpc = link.clone().ok_or_else(|| err::again("no leader connection"))?;
        drop(link);
        rpc.call(Request::Map(command)).await
    }

    /// Handles a command on the leader.
    async fn lead(&self, command: MapCommand) -> Result<Reply> {
        let map = self.current();
        let change = match command {
            MapCommand::Get | MapCommand::WaitNewer { .. } | MapCommand::MonStatus => {
                return Ok(Reply::Map(Box::new(map)));
            }
            MapCommand::MonAdd { id, addr } => {
                self.authority.change_members(MemberChange::Add { id, addr }).await?;
                return Ok(Reply::Done);
            }
            MapCommand::MonRemove(id) => {
                self.authority.change_members(MemberChange::Remove(id)).await?;
                return Ok(Reply::Done);
            }
            MapCommand::GetPgStats => {
                // A down OSD's last rate is history, not current IO.
                let up = |osd: &OsdId| map.osds.get(osd).is_some_and(|o| o.up);
                let client_ops_per_sec =
                    self.health().io_rates.iter().filter(|(osd, _)| up(osd)).map(|(_, (_, _, rate))| rate).sum();
                let mut usage: Vec<_> =
                    self.health().usage.iter().filter(|(osd, _)| up(osd)).map(|(o, u)| (*o, *u)).collect();
                usage.sort_by_key(|(osd, _)| *osd);
                return Ok(Reply::PgStats { stats: self.pg_stats(&map), client_ops_per_sec, usage });
            }
            MapCommand::PgStats { osd, stats, usage } => {
                self.health().usage.insert(osd, usage);
                self.record_stats(osd, stats);
                for change in self.space_changes(&map, osd, usage) {
                    tracing::info!(?change, "space state changed");
                    self.authority.commit(MapChange::Space(change)).await?;
                }
                return Ok(Reply::Done);
            }
            MapCommand::Space(change) => MapChange::Space(change),
            MapCommand::OsdFailure { target, reporter } => {
                match self.failure_reported(&map, target, reporter, Report::Silent) {
                    Some(change) => change,
                    None => return Ok(Reply::Map(Box::new(map))),
                }
            }
            MapCommand::OsdRefused { target, reporter, addr } => {
                match self.failure_reported(&map, target, reporter, Report::Refused { addr: &addr }) {
                    Some(change) => change,
                    None => return Ok(Reply::Map(Box::new(map))),
                }
            }
            MapCommand::CreatePool(spec) => MapChange::CreatePool(spec),
            MapCommand::DeletePool(name) => MapChange::DeletePool(name),
            MapCommand::OsdBoot { id, entry } => {
                let mut health = self.health();
                // What it reported before it went down describes PGs it no longer runs.
                health.pg_stats.remove(&id);
                let back_in = health.failures.booted(id);
                drop(health);
                MapChange::OsdBoot { id, entry, back_in }
            }
            MapCommand::ConfigSet { who, key, value } => MapChange::ConfigSet { who, key, value },
            MapCommand::ConfigRm { who, key } => MapChange::ConfigRm { who, key },
            MapCommand::SetOsdIn { id, is_in } => MapChange::SetOsdIn { id, is_in },
            MapCommand::SetOsdWeight { id, weight } => MapChange::SetOsdWeight { id, weight },
            MapCommand::PgsActivated { osd, pgs } => MapChange::PgsActivated { osd, pgs },
            MapCommand::PrimaryTemp { osd, pgs } => MapChange::PrimaryTemp { osd, pgs },
            MapCommand::CreateErasurePool(spec) => MapChange::CreateErasurePool(spec),
            MapCommand::SetErasureProfile { name, profile, force } => {
                MapChange::SetErasureProfile { name, profile, force }
            }
            MapCommand::RemoveErasureProfile(name) => MapChange::RemoveErasureProfile(name),
            MapCommand::Crush(change) => MapChange::Crush(change),
            MapCommand::SetFlag { flag, on } => MapChange::SetFlag { flag, on },
            MapCommand::OsdPurge { id, force } => {
                if !force {
                    lifecycle::safe_to_destroy(&map, &self.pg_stats(&map), id)?;
                }
                MapChange::OsdPurge(id)
            }
            MapCommand::OsdLost(id) => MapChange::OsdLost(id),
            MapCommand::PgUpmapItems(pgs) => MapChange::PgUpmapItems(pgs),
            MapCommand::SetPgNum { pool, pg_num } => MapChange::SetPgNum { pool, pg_num },
            MapCommand::SetPgpNum { pool, pgp_num } => MapChange::SetPgpNum { pool, pgp_num },
            MapCommand::PoolAutoscale(change) => MapChange::PoolAutoscale(change),
            MapCommand::Auth(AuthChange::GetOrCreate { entity, caps }) => {
                let key = rand::random::<[u8; shoal_types::auth::KEY_LEN]>().to_vec();
                MapChange::AuthCreate { entity, key, caps }
            }
            MapCommand::Auth(AuthChange::SetCaps { entity, caps }) => MapChange::AuthCaps { entity, caps },
            MapCommand::Auth(AuthChange::Remove(entity)) => MapChange::AuthRemove(entity),
        };
        let reply = self.authority.commit(change).await?;
        Ok(match reply {
            Reply::Done => Reply::Map(Box::new(self.current())),
            other => other,
        })
    }

    /// Keeps an OSD's PG reports and its client operation rate.
    fn record_stats(&self, osd: OsdId, stats: Vec<PgStat>) {
        let mut health = self.health();
        let total: u64 = stats.iter().map(|s| s.client_ops).sum();
        let now = Instant::now();
        let rate = match health.io_rates.get(&osd) {
            Some((at, before, _)) if total >= *before && now > *at => {
                ((total - before) as f64 / now.duration_since(*at).as_secs_f64()).round() as u64
            }
            _ => 0,
        };
        health.io_rates.insert(osd, (now, total, rate));
        health.pg_stats.insert(osd, stats);
    }

    /// The space changes an OSD's report calls for: its own state when its store crossed a
    /// ratio, and pools reaching their quota (as soon as the PGs reported so far hold
    /// enough) or falling below it (once every PG of the pool reported).
    fn space_changes(&self, map: &OsdMap, osd: OsdId, usage: StoreUsage) -> Vec<SpaceChange> {
        let mut changes = Vec::new();
        let state = map.full_ratios.state(usage);
        if map.osds.contains_key(&osd) && map.osd_space.get(&osd).copied() != state {
            changes.push(SpaceChange::OsdState { osd, state });
        }
        if map.pool_quotas.is_empty() {
            return changes;
        }
        let stats = self.pg_stats(map);
        for (pool, quota) in &map.pool_quotas {
            let Some(pg_num) = map.pools.get(pool).map(|p| p.pg_num) else { continue };
            let of_pool: Vec<&PgStat> = stats.iter().filter(|s| s.pg.pool == *pool).collect();
            let (objects, bytes) = of_pool.iter().fold((0, 0), |(o, b), s| (o + s.objects, b + s.bytes));
            let reached = quota.reached_by(objects, bytes);
            let full = map.full_pools.contains(pool);
            if reached != full && (reached || of_pool.len() == pg_num as usize) {
                changes.push(SpaceChange::PoolFull { pool: *pool, full: reached });
            }
        }
        changes
    }

    /// Records a failure report; returns the change marking the target down once enough
    /// distinct OSDs reported it silent, or one reported its address refusing.
    fn failure_reported(&self, map: &OsdMap, target: OsdId, reporter: OsdId, how: Report) -> Option<MapChange> {
        let policy = self.policy();
        let now = self.started.elapsed();
        match self.health().failures.reported(&policy, map, target, reporter, how, now) {
            Verdict::Ignored => None,
            Verdict::Counted { count, needed } => {
                tracing::info!(osd = %target, %reporter, count, needed, "failure reported");
                None
            }
            Verdict::Down(change) => {
                tracing::warn!(osd = %target, %reporter, ?how, "marking OSD down");
                Some(change)
            }
        }
    }

    /// The PG states reported by the OSDs that are primaries under `map`.
    fn pg_stats(&self, map: &OsdMap) -> Vec<PgStat> {
        current_stats(map, &self.health().pg_stats)
    }

    /// On the leader: marks out the OSDs down for longer than the down-out interval.
    pub async fn tick(&self) -> Result<()> {
        if self.authority.leader().is_some() {
            return Ok(());
        }
        let policy = self.policy();
        let map = self.current();
        let expired = self.health().failures.due_out(&policy, &map, self.started.elapsed());
        let interval = policy.down_out_interval;
        for id in expired {
            tracing::warn!(osd = %id, ?interval, "down for longer than mon_osd_down_out_interval; marking it out");
            self.authority.commit(MapChange::SetOsdIn { id, is_in: false }).await?;
            self.health().failures.marked_out(id);
        }
        self.step_pgp_nums(&map).await?;
        self.step_merges(&map).await;
        self.autoscale(&map).await;
        self.balance(&map).await
    }

    /// Whether every PG of `map` reported active+clean: no data is moving.
    fn all_clean(&self, map: &OsdMap) -> bool {
        let pgs: usize = map.pools.values().map(|p| p.pg_num as usize).sum();
        let clean = |s: &PgStat| [PgStateFlag::Active, PgStateFlag::Clean].iter().all(|f| s.state.contains(f));
        self.pg_stats(map).iter().filter(|s| clean(s)).count() >= pgs
    }

    /// On the leader, while every PG is active+clean: moves each resizing pool's
    /// `pgp_num` one step towards its target, a step moving at most
    /// `target_max_misplaced_ratio` of its PGs.
    async fn step_pgp_nums(&self, map: &OsdMap) -> Result<()> {
        if map.pg_resize.values().all(|r| r.pgp_num == r.pgp_num_target) || !self.all_clean(map) {
            return Ok(());
        }
        let max_misplaced = self.balancer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).0.max_misplaced;
        for (&pool, resize) in map.pg_resize.iter().filter(|(_, r)| r.pgp_num != r.pgp_num_target) {
            let Some(pg_num) = map.pools.get(&pool).map(|p| p.pg_num) else { continue };
            let pgp_num =
                shoal_types::resize::next_pgp_num(pg_num, resize.pgp_num, resize.pgp_num_target, max_misplaced);
            tracing::info!(%pool, from = resize.pgp_num, to = pgp_num, target = resize.pgp_num_target, "stepping pgp_num");
            if let Err(e) = self.authority.commit(MapChange::StepPgpNum { pool, pgp_num }).await {
                tracing::warn!(%pool, error = %e, "cannot step pgp_num");
            }
        }
        Ok(())
    }

    /// On the leader: each merging pool's next step ([`change::merge_step`]).
    async fn step_merges(&self, map: &OsdMap) {
        if map.pg_merge.is_empty() {
            return;
        }
        let (stats, all_clean) = (self.pg_stats(map), self.all_clean(map));
        for &pool in map.pg_merge.keys() {
            let Some(change) = change::merge_step(map, pool, &stats, all_clean) else { continue };
            tracing::info!(%pool, ?change, "stepping a merge");
            if let Err(e) = self.authority.commit(change).await {
                tracing::warn!(%pool, error = %e, "cannot step the merge");
            }
        }
    }

    /// On the leader, once per interval, while every PG is active+clean and no pool's
    /// placement is moving: raises `pg_num` of the replicated pools in mode `on` that the
    /// autoscaler finds with too few PGs. Pools with too many are only reported (a merge
    /// pauses a pool's IO, so an operator starts it), and erasure-coded pools cannot yet
    /// move their children by `pgp_num`.
    async fn autoscale(&self, map: &OsdMap) {
        let policy = {
            let mut autoscaler = self.autoscaler.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (policy, last) = &mut *autoscaler;
            if last.is_some_and(|at| at.elapsed() < policy.interval) {
                return;
            }
            *last = Some(Instant::now());
            *policy
        };
        if !map.pg_resize.is_empty() || !self.all_clean(map) {
            return;
        }
        let usage = Usage::from_reports(&self.pg_stats(map), self.health().usage.iter());
        for row in shoal_placement::autoscale::proposals(map, &usage, &policy.proposal) {
            let Some(pg_num) = row.new_pg_num.filter(|n| *n > row.pg_num) else { continue };
            if row.mode != AutoscaleMode::On || map.pools[&row.pool].erasure.is_some() {
                continue;
            }
            tracing::info!(pool = %row.name, from = row.pg_num, to = pg_num, "autoscaler: raising pg_num");
            if let Err(e) = self.authority.commit(MapChange::SetPgNum { pool: row.name.clone(), pg_num }).await {
                tracing::warn!(pool = %row.name, error = %e, "autoscaler: cannot raise pg_num");
            }
        }
    }

    /// On the leader, with the balancer on, once per interval: while every PG is
    /// active+clean (no data moving), sets the upmap exceptions of a few moves.
    async fn balance(&self, map: &OsdMap) -> Result<()> {
        let policy = {
            let mut balancer = self.balancer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let (policy, last) = &mut *balancer;
            if !policy.active || last.is_some_and(|at| at.elapsed() < policy.interval) {
                return Ok(());
            }
            *last = Some(Instant::now());
            *policy
        };
        // A merge needs sources where their targets are: no moves meanwhile.
        if !self.all_clean(map) || !map.pg_merge.is_empty() {
            return Ok(());
        }
        let changes = shoal_placement::balancer::optimize(map, policy.max_changes, policy.max_deviation);
        if changes.is_empty() {
            return Ok(());
        }
        tracing::info!(pgs = changes.len(), "balancer: moving copies by upmap exceptions");
        self.authority.commit(MapChange::PgUpmapItems(changes.into_iter().collect())).await?;
        Ok(())
    }

    /// Answers requests on `listener` until it closes; meanwhile, on the leader, marks
    /// long-down OSDs out.
    pub async fn serve(self: Arc<Self>, mut listener: Listener) {
        let ticker = Arc::downgrade(&self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Some(mon) = ticker.upgrade() else { return };
                if let Err(e) = mon.tick().await {
                    tracing::warn!(error = %e, "monitor tick failed");
                }
            }
        });
        while let Some(conn) = listener.accept().await {
            tokio::spawn(self.clone().serve_connection(conn));
        }
    }

    async fn serve_connection(self: Arc<Self>, conn: Connection) {
        let Connection { sender, mut receiver, peer } = conn;
        let peer = Arc::new(peer);
        while let Some(message) = receiver.recv().await {
            let Message::Request { tid, request } = message else { continue };
            // Each request is answered from its own task: long polls and forwarded
            // commands must not hold up the connection.
            let (mon, sender, peer) = (self.clone(), sender.clone(), peer.clone());
            tokio::spawn(async move {
                let reply = match (request, peer.cluster) {
                    (Request::Map(command), true) => mon.handle(command).await,
                    (Request::Map(command), false) => mon.handle_entity(&peer.entity, command).await,
                    (Request::Raft { kind, body }, true) => mon.authority.raft_rpc(kind, body).await.map(Reply::Raft),
                    (Request::Hello(_), _) => Ok(Reply::Done),
                    (Request::Raft { .. }, false) => Err(err::access("only monitors take part in the quorum")),
                    _ => Err(err::not_supported("monitors serve map commands only")),
                };
                let _ = sender.send(Message::Reply { tid, reply }).await;
            });
        }
    }

    /// Answers a client entity's command if its caps allow it; the map it gets back
    /// carries the auth table only if it may manage keys (`mon 'allow *'`).
    async fn handle_entity(&self, entity: &str, command: MapCommand) -> Result<Reply> {
        let need = monitor_perms(&command);
        // Only the entity's cap, not a copy of the whole map, on every request.
        let mon_cap = self.subscribe().borrow().auth.get(entity).map(|e| e.caps.mon.clone());
        let Some(mon_cap) = mon_cap else {
            return Err(err::access(format!("{entity} has no key any more: it was removed")));
        };
        if !mon_cap.allows(None, None, need) {
            return Err(err::access(format!("{entity}'s caps (mon '{mon_cap}') do not allow this ({need} needed)")));
        }
        let reply = self.handle(command).await?;
        Ok(match reply {
            Reply::Map(map) if !mon_cap.allows(None, None, Perms::ALL) => Reply::Map(Box::new(map.without_keys())),
            other => other,
        })
    }
}

/// What a command needs of a client entity's monitor cap: `r` to read the map and
/// status, `w` to change the map, `*` to manage keys and the quorum or to send what only
/// daemons report.
fn monitor_perms(command: &MapCommand) -> Perms {
    match command {
        MapCommand::Get | MapCommand::WaitNewer { .. } | MapCommand::GetPgStats | MapCommand::MonStatus => Perms::R,
        MapCommand::Auth(_)
        | MapCommand::MonAdd { .. }
        | MapCommand::MonRemove(_)
        | MapCommand::OsdBoot { .. }
        | MapCommand::OsdFailure { .. }
        | MapCommand::OsdRefused { .. }
        | MapCommand::PgStats { .. }
        | MapCommand::PgsActivated { .. }
        | MapCommand::PrimaryTemp { .. } => Perms::ALL,
        _ => Perms::W,
    }
}

/// The monitor's view, read when Prometheus scrapes: the map, the quorum, and (on the
/// leader) the PG states the OSDs reported.
struct MonCollector(Arc<Monitor>);

impl std::fmt::Debug for MonCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonCollector").finish_non_exhaustive()
    }
}

impl prometheus_client::collector::Collector for MonCollector {
    fn encode(&self, mut encoder: prometheus_client::encoding::DescriptorEncoder) -> std::fmt::Result {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::gauge::ConstGauge;
        let map = self.0.authority.subscribe().borrow().clone();
        let (members, leader) = self.0.authority.quorum();
        let is_leader = self.0.authority.leader().is_none();
        let count = |pred: &dyn Fn(&shoal_types::OsdEntry) -> bool| map.osds.values().filter(|o| pred(o)).count();
        let pgs: u64 = map.pools.values().map(|p| u64::from(p.pg_num)).sum();
        for (name, help, value) in [
            ("map_epoch", "Epoch of the newest cluster map", map.epoch as i64),
            ("osds", "OSDs in the map", count(&|_| true) as i64),
            ("osds_up", "OSDs up", count(&|o| o.up) as i64),
            ("osds_in", "OSDs in (eligible for data)", count(&|o| o.is_in) as i64),
            ("pools", "Pools", map.pools.len() as i64),
            ("pgs", "Placement groups over all pools", pgs as i64),
            ("quorum_members", "Monitors in the quorum", members.len() as i64),
            ("has_leader", "1 when the quorum has a leader", i64::from(leader.is_some())),
            ("is_leader", "1 on the leader", i64::from(is_leader)),
        ] {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        // Only the leader collects PG states; the others would report none.
        if is_leader {
            let mut states: std::collections::BTreeMap<String, i64> = std::collections::BTreeMap::new();
            for stat in self.0.pg_stats(&map) {
                *states.entry(stat.state_name()).or_default() += 1;
            }
            let mut family = encoder.encode_descriptor(
                "pgs_by_state",
                "PGs by the state their primaries last reported",
                None,
                prometheus_client::metrics::MetricType::Gauge,
            )?;
            for (state, n) in &states {
                ConstGauge::new(*n).encode(family.encode_family(&[("state", state.as_str())])?)?;
            }
        }
        Ok(())
    }
}

impl Monitor {
    /// Registers the monitor's metrics (map, quorum, PG states) for Prometheus.
    pub fn register_metrics(self: &Arc<Self>, registry: &mut prometheus_client::registry::Registry) {
        registry.register_collector(Box::new(MonCollector(self.clone())));
    }
}

/// The reports of OSDs up under `map` about the PGs they are primary of, each for the
/// acting set `map` gives its PG, one per PG: a report from before the set changed (an
/// OSD went down or came back) is stale, and its PG stays unreported until its primary
/// reports again.
fn current_stats(map: &OsdMap, reports: &HashMap<OsdId, Vec<PgStat>>) -> Vec<PgStat> {
    let topology = shoal_placement::Topology::from_map(map);
    let current = |osd: &OsdId, s: &PgStat| {
        let pool = map.pools.get(&s.pg.pool).filter(|pool| s.pg.seed < pool.pg_num);
        pool.is_some_and(|pool| {
            let acting = topology.up_osds(map, pool, s.pg);
            shoal_placement::acting_primary(map, s.pg, &acting) == Some(*osd) && s.acting == acting
        })
    };
    let mut stats: Vec<PgStat> = reports
        .iter()
        .filter(|(osd, _)| map.osds.get(osd).is_some_and(|o| o.up))
        .flat_map(|(osd, stats)| stats.iter().filter(move |s| current(osd, s)))
        .cloned()
        .collect();
    stats.sort_by_key(|s| s.pg);
    stats.dedup_by_key(|s| s.pg);
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::pg::PgStateFlag;
    use shoal_types::{OsdEntry, PgId, PoolSpec};

    #[test]
    fn only_reports_for_the_current_acting_set_count() {
        let mut map = OsdMap::default();
        for id in 0..3 {
            let entry =
                OsdEntry { addr: String::new(), host: format!("h{id}"), weight: 0x10000, up: true, is_in: true };
            map.osds.insert(OsdId(id), entry);
        }
        let pool = map.create(&PoolSpec { name: "p".into(), pg_num: 1, size: 3, min_size: 2 }).unwrap();
        let pg = PgId { pool: pool.id, seed: 0 };
        let acting = shoal_placement::pg_up_osds(&map, &pool, pg);
        let stat = |acting: Vec<OsdId>, flags: Vec<PgStateFlag>| PgStat {
            pg,
            state: flags,
            epoch: map.epoch,
            acting,
            last_update: Default::default(),
            objects_to_recover: 0,
            note: String::new(),
            client_ops: 0,
            objects: 0,
            bytes: 0,
        };
        let clean = vec![PgStateFlag::Active, PgStateFlag::Clean];
        let (primary, second) = (acting[0], acting[1]);
        // The primary's clean report, and a stale one from when `second` led another set.
        let reports = HashMap::from([
            (primary, vec![stat(acting.clone(), clean.clone())]),
            (second, vec![stat(vec![second, primary], vec![PgStateFlag::Active, PgStateFlag::Degraded])]),
        ]);
        let stats = current_stats(&map, &reports);
        assert_eq!(stats.iter().map(|s| (s.pg, s.state_name())).collect::<Vec<_>>(), vec![(pg, "active+clean".into())]);
        // With the primary down, neither report describes the acting set [second, third].
        map.osds.get_mut(&primary).unwrap().up = false;
        assert!(current_stats(&map, &reports).is_empty());
    }
}
