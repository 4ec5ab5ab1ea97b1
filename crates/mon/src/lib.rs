//! The cluster-map authority: it owns the [`OsdMap`], applies map commands (pool create
//! and delete), persists each new epoch before answering, and publishes it to
//! subscribers (OSDs in the same process, clients over the messenger).
//!
//! [`LocalMon`] is the single-node authority of the embedded mode; it keeps the map in
//! the same local store as the OSD. Must not depend on the OSD or the client.

use shoal_store::{ObjectStore, Transaction};
use shoal_transport::{Connection, Listener};
use shoal_types::msg::{MapCommand, Message, Reply, Request};
use shoal_types::pg::PgStat;
use shoal_types::{OsdEntry, OsdId, OsdMap, Result, Versioned, err};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

const MAP_KEY: &[u8] = b"osdmap";

/// How failure reports become map changes (`mon_osd_min_down_reporters`,
/// `mon_osd_down_out_interval`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailurePolicy {
    /// Distinct reporters needed to mark an OSD down (fewer if fewer OSDs are up).
    pub min_down_reporters: usize,
    /// How long an OSD stays down before it is marked out.
    pub down_out_interval: Duration,
}

impl Default for FailurePolicy {
    fn default() -> Self {
        FailurePolicy { min_down_reporters: 2, down_out_interval: Duration::from_secs(600) }
    }
}

/// What the monitor tracks outside the map: failure reports, down times, PG states.
#[derive(Default)]
struct Health {
    reports: HashMap<OsdId, BTreeSet<OsdId>>,
    down_since: HashMap<OsdId, Instant>,
    pg_stats: HashMap<OsdId, Vec<PgStat>>,
    /// OSDs the monitor marked out itself: they come back in when they boot.
    auto_out: BTreeSet<OsdId>,
}

/// A single-node map authority persisting the map in a local store.
pub struct LocalMon {
    store: Arc<ObjectStore>,
    map: Mutex<OsdMap>,
    publish: watch::Sender<Arc<OsdMap>>,
    health: Mutex<Health>,
    policy: Mutex<FailurePolicy>,
}

impl LocalMon {
    /// Loads the map from `store` (or starts one); with `osds`, records exactly those OSDs
    /// (the embedded mode), otherwise keeps the ones that booted before.
    pub fn open(store: Arc<ObjectStore>, osds: Option<BTreeMap<OsdId, OsdEntry>>) -> Result<Arc<LocalMon>> {
        let mut map = match store.meta(MAP_KEY)? {
            Some(bytes) => OsdMap::decode(&bytes).map_err(|e| err::io(format!("stored cluster map: {}", e.message)))?,
            None => OsdMap::default(),
        };
        if let Some(osds) = osds
            && map.osds != osds
        {
            map.osds = osds;
            map.epoch += 1;
        }
        let (publish, _) = watch::channel(Arc::new(map.clone()));
        let mon = LocalMon {
            store,
            map: Mutex::new(map),
            publish,
            health: Mutex::default(),
            policy: Mutex::new(FailurePolicy::default()),
        };
        mon.persist(&mon.current())?;
        Ok(Arc::new(mon))
    }

    /// The current map.
    pub fn current(&self) -> OsdMap {
        self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// A receiver that always holds the newest map.
    pub fn subscribe(&self) -> watch::Receiver<Arc<OsdMap>> {
        self.publish.subscribe()
    }

    /// Replaces the failure policy.
    pub fn set_failure_policy(&self, policy: FailurePolicy) {
        *self.policy.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = policy;
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Marks out the OSDs that have been down for longer than the down-out interval.
    /// Call periodically.
    pub fn tick(&self) -> Result<()> {
        let interval = self.policy.lock().unwrap_or_else(std::sync::PoisonError::into_inner).down_out_interval;
        let map = self.current();
        let now = Instant::now();
        let expired: Vec<OsdId> = {
            let mut health = self.health();
            map.osds
                .iter()
                .filter(|(_, o)| !o.up && o.is_in)
                .filter(|(id, _)| now.duration_since(*health.down_since.entry(**id).or_insert(now)) >= interval)
                .map(|(id, _)| *id)
                .collect()
        };
        for id in expired {
            tracing::info!(osd = %id, ?interval, "down for longer than mon_osd_down_out_interval; marking it out");
            self.handle(MapCommand::SetOsdIn { id, is_in: false })?;
            self.health().auto_out.insert(id);
        }
        Ok(())
    }

    /// The PG states reported by the OSDs that are primaries under the current map.
    pub fn pg_stats(&self) -> Vec<PgStat> {
        let map = self.current();
        let health = self.health();
        let mut stats: Vec<PgStat> = health
            .pg_stats
            .iter()
            .filter(|(osd, _)| map.osds.get(osd).is_some_and(|o| o.up))
            .flat_map(|(osd, stats)| stats.iter().filter(move |s| s.acting.first() == Some(osd)).cloned())
            .collect();
        stats.sort_by_key(|s| s.pg);
        stats.dedup_by_key(|s| s.pg);
        stats
    }

    fn persist(&self, map: &OsdMap) -> Result<()> {
        let mut txn = Transaction::new();
        txn.put_meta(MAP_KEY, map.encode());
        self.store.commit(txn)?;
        self.store.sync()?;
        Ok(())
    }

    /// Applies a map command; a change is durable and published before this returns.
    pub fn handle(&self, command: MapCommand) -> Result<Reply> {
        let mut map = self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = map.clone();
        let reply = match command {
            MapCommand::Get | MapCommand::WaitNewer { .. } => return Ok(Reply::Map(map.clone())),
            MapCommand::GetPgStats => {
                drop(map);
                return Ok(Reply::PgStats(self.pg_stats()));
            }
            MapCommand::PgStats { osd, stats } => {
                self.health().pg_stats.insert(osd, stats);
                return Ok(Reply::Done);
            }
            MapCommand::OsdFailure { target, reporter } => {
                let up = |id: &OsdId| next.osds.get(id).is_some_and(|o| o.up);
                if !up(&target) || !up(&reporter) {
                    return Ok(Reply::Map(map.clone()));
                }
                let policy = *self.policy.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let others_up = next.osds.values().filter(|o| o.up).count().saturating_sub(1);
                let needed = policy.min_down_reporters.min(others_up).max(1);
                let reporters = {
                    let mut health = self.health();
                    let reporters = health.reports.entry(target).or_default();
                    reporters.insert(reporter);
                    reporters.len()
                };
                if reporters < needed {
                    tracing::info!(osd = %target, %reporter, reporters, needed, "failure reported");
                    return Ok(Reply::Map(map.clone()));
                }
                let mut health = self.health();
                health.reports.remove(&target);
                health.down_since.insert(target, Instant::now());
                drop(health);
                if let Some(osd) = next.osds.get_mut(&target) {
                    osd.up = false;
                }
                next.epoch += 1;
                tracing::warn!(osd = %target, reporters, "marking OSD down");
                Reply::Done
            }
            MapCommand::CreatePool(spec) => Reply::Pool(next.create(&spec)?),
            MapCommand::DeletePool(name) => Reply::Pool(next.remove(&name)?),
            MapCommand::OsdBoot { id, entry } => {
                // An OSD an operator marked out stays out; one the monitor marked out is back.
                let was_auto_out = self.health().auto_out.contains(&id);
                let is_in = next.osds.get(&id).is_none_or(|old| old.is_in || was_auto_out);
                let entry = OsdEntry { up: true, is_in, ..entry };
                if next.osds.get(&id) == Some(&entry) {
                    return Ok(Reply::Map(map.clone()));
                }
                tracing::info!(osd = %id, addr = %entry.addr, "osd booted");
                let mut health = self.health();
                health.reports.remove(&id);
                health.down_since.remove(&id);
                health.auto_out.remove(&id);
                drop(health);
                next.osds.insert(id, entry);
                next.epoch += 1;
                Reply::Done
            }
            MapCommand::ConfigSet { who, key, value } => {
                next.config.entry(who).or_default().insert(key, value);
                next.epoch += 1;
                Reply::Done
            }
            MapCommand::ConfigRm { who, key } => {
                let options =
                    next.config.get_mut(&who).ok_or_else(|| err::not_found(format!("no options for '{who}'")))?;
                options.remove(&key).ok_or_else(|| err::not_found(format!("'{key}' is not set for '{who}'")))?;
                if options.is_empty() {
                    next.config.remove(&who);
                }
                next.epoch += 1;
                Reply::Done
            }
            MapCommand::SetOsdIn { id, is_in } => {
                let osd = next.osds.get_mut(&id).ok_or_else(|| err::not_found(format!("{id} does not exist")))?;
                if osd.is_in == is_in {
                    return Ok(Reply::Map(map.clone()));
                }
                osd.is_in = is_in;
                next.epoch += 1;
                tracing::info!(osd = %id, is_in, "osd marked");
                Reply::Done
            }
        };
        self.persist(&next)?;
        *map = next.clone();
        self.publish.send_replace(Arc::new(next));
        tracing::info!(epoch = map.epoch, "cluster map changed");
        Ok(match reply {
            Reply::Done => Reply::Map(map.clone()),
            other => other,
        })
    }

    /// The map once its epoch is above `newer_than`, or the current one after `timeout`.
    pub async fn wait_newer(&self, newer_than: u64, timeout: std::time::Duration) -> OsdMap {
        let mut rx = self.subscribe();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|m| m.epoch > newer_than)).await;
        self.current()
    }

    /// Answers map requests on `listener` until it closes; meanwhile marks long-down OSDs
    /// out.
    pub async fn serve(self: Arc<Self>, mut listener: Listener) {
        let ticker = Arc::downgrade(&self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Some(mon) = ticker.upgrade() else { return };
                let outcome = tokio::task::spawn_blocking(move || mon.tick()).await;
                if let Ok(Err(e)) = outcome {
                    tracing::error!(error = %e, "monitor tick failed");
                }
            }
        });
        while let Some(conn) = listener.accept().await {
            tokio::spawn(self.clone().serve_connection(conn));
        }
    }

    async fn serve_connection(self: Arc<Self>, conn: Connection) {
        let Connection { sender, mut receiver } = conn;
        while let Some(message) = receiver.recv().await {
            let Message::Request { tid, request } = message else { continue };
            let reply = match request {
                Request::Map(MapCommand::WaitNewer { newer_than, timeout_ms }) => {
                    // A long poll: answer from its own task so the connection keeps serving.
                    let (mon, sender) = (self.clone(), sender.clone());
                    tokio::spawn(async move {
                        let timeout = std::time::Duration::from_millis(timeout_ms.min(300_000));
                        let map = mon.wait_newer(newer_than, timeout).await;
                        let _ = sender.send(Message::Reply { tid, reply: Ok(Reply::Map(map)) }).await;
                    });
                    continue;
                }
                Request::Map(command) => {
                    let mon = self.clone();
                    tokio::task::spawn_blocking(move || mon.handle(command))
                        .await
                        .unwrap_or_else(|e| Err(err::io(format!("map command failed: {e}"))))
                }
                Request::Hello(_) => Ok(Reply::Done),
                _ => Err(err::not_supported("the monitor only serves map commands")),
            };
            if sender.send(Message::Reply { tid, reply }).await.is_err() {
                break;
            }
        }
    }
}
