//! The embedded object layer: a map authority and one or more OSDs on RocksDB stores in
//! this process, reached through the in-process messenger exactly as a remote cluster
//! would be. OSD 0 keeps its store in the data directory itself (shared with the map);
//! OSD N > 0 in `DIR/osd.N`.

use crate::config::Config;
use shoal_client::Rados;
use shoal_mon::Monitor;
use shoal_mon::local::LocalAuthority;
use shoal_osd::Osd;
use shoal_store::{FileDevice, ObjectStore, StoreFormat};
use shoal_store_rocks::RocksKv;
use shoal_transport::{LocalNetwork, Network};
use shoal_types::space::StoreUsage;
use shoal_types::{OsdEntry, OsdId, Result, err};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MON_ADDR: &str = "mon.local";
/// Embedded OSD N listens at `osd.N` on the in-process network.
const OSD_ADDR_PREFIX: &str = "osd";

/// One embedded OSD and its store.
struct LocalOsd {
    kv: Arc<RocksKv>,
    store: Arc<ObjectStore>,
    osd: Osd,
}

/// A running embedded cluster and a client connected to it.
pub struct Embedded {
    /// A client of the embedded cluster.
    pub rados: Rados,
    /// Where the monitor listens.
    mon_addr: String,
    /// OSD 0's store, for statistics.
    pub store: Arc<ObjectStore>,
    osds: Vec<LocalOsd>,
    mon: Arc<Monitor>,
    closed: std::sync::atomic::AtomicBool,
}

impl Embedded {
    /// Opens (creating if needed) the data directory and starts the daemons, one OSD, on
    /// an in-process network.
    pub async fn open(dir: &Path, config: &Config) -> Result<Embedded> {
        Self::open_on(dir, config, Arc::new(LocalNetwork::new()), MON_ADDR, OSD_ADDR_PREFIX, 1).await
    }

    /// Like [`Embedded::open`], with the monitor and at least `osds` OSDs (as many as the
    /// directory held before, if more) listening on `network`: the monitor at `mon_bind`,
    /// the OSDs at `osd_bind` (for TCP, `127.0.0.1:0` picks a free port for each; another
    /// address is a prefix, OSD N listening at `PREFIX.N`).
    pub async fn open_on(
        dir: &Path,
        config: &Config,
        network: Arc<dyn Network>,
        mon_bind: &str,
        osd_bind: &str,
        osds: u32,
    ) -> Result<Embedded> {
        let count = osds.max(1).max(previous_osds(dir));
        let mon_listener = network.bind(mon_bind)?;
        let mon_addr = mon_listener.local_addr().to_owned();
        let mut stores = Vec::new();
        let mut entries = BTreeMap::new();
        let mut listeners = Vec::new();
        for id in 0..count {
            stores.push(open_store(&osd_dir(dir, id), config)?);
            let bind = if osd_bind.ends_with(":0") { osd_bind.to_owned() } else { format!("{osd_bind}.{id}") };
            let listener = network.bind(&bind)?;
            let entry = OsdEntry {
                addr: listener.local_addr().to_owned(),
                host: "localhost".into(),
                weight: 0x10000,
                up: true,
                is_in: true,
            };
            entries.insert(OsdId(id), entry);
            listeners.push(listener);
        }
        let authority = LocalAuthority::open(stores[0].1.clone(), entries, &mon_addr)?;
        let mon = Monitor::new(authority, network.clone());
        tokio::spawn(mon.clone().serve(mon_listener));
        let registry = Arc::new(crate::registry::LocalMonitor(Arc::downgrade(&mon)));
        let mut local = Vec::new();
        for ((id, (kv, store)), listener) in (0..count).zip(stores).zip(listeners) {
            let maps = mon.subscribe();
            let osd =
                Osd::start(config.osd(OsdId(id))?, store.clone(), maps.clone(), network.clone(), registry.clone());
            tokio::spawn(osd.clone().serve(listener));
            apply_config(&osd, &maps.borrow().clone(), config.settings());
            tokio::spawn(follow_config(osd.clone(), maps.clone(), config.settings().to_vec()));
            tokio::spawn(follow_pool_removals(osd.clone(), maps));
            tokio::spawn(report_pg_stats(osd.clone(), osd_dir(dir, id), store.clone(), Arc::downgrade(&mon)));
            local.push(LocalOsd { kv, store, osd });
        }
        let rados = Rados::connect(network, &mon_addr).await?;
        let store = local[0].store.clone();
        Ok(Embedded { rados, mon_addr, store, osds: local, mon, closed: Default::default() })
    }

    /// The maps the embedded monitor publishes.
    pub fn maps(&self) -> tokio::sync::watch::Receiver<Arc<shoal_types::OsdMap>> {
        self.mon.subscribe()
    }

    /// Where the monitor listens; other clients connect there.
    pub fn mon_addr(&self) -> &str {
        &self.mon_addr
    }

    /// Waits until an embedded OSD fails for good; returns which and why.
    pub async fn failed(&self) -> String {
        let failures =
            self.osds.iter().map(|l| Box::pin(async { format!("{}: {}", l.osd.id(), l.osd.failed().await) }));
        futures::future::select_all(failures).await.0
    }

    /// Syncs and closes the stores. Call before the process exits: RocksDB's background
    /// threads must not outlive it.
    pub fn close(&self) {
        if self.closed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        for local in &self.osds {
            local.osd.stop();
            if let Err(e) = local.store.sync() {
                tracing::error!(error = %e, osd = %local.osd.id(), "final WAL sync failed");
            }
            local.kv.close();
        }
    }

    /// Registers the monitor's and the OSDs' metrics, as `shoal mon` and `shoal osd` do.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.mon.register_metrics(registry.sub_registry_with_prefix("mon"));
        for local in &self.osds {
            let osd = registry.sub_registry_with_label(("daemon".into(), local.osd.id().to_string().into()));
            local.osd.register_metrics(osd.sub_registry_with_prefix("osd"));
        }
    }

    /// RocksDB's own statistics report (OSD 0's).
    pub fn rocksdb_report(&self) -> String {
        self.osds[0].kv.report()
    }
}

impl Drop for Embedded {
    /// Closes the stores in the dropping thread: otherwise the last of the OSDs' threads
    /// would close them, possibly while the process is already exiting (RocksDB aborts then).
    fn drop(&mut self) {
        self.close();
    }
}

/// Where embedded OSD `id` keeps its store.
fn osd_dir(dir: &Path, id: u32) -> PathBuf {
    if id == 0 { dir.to_owned() } else { dir.join(format!("osd.{id}")) }
}

/// How many OSDs the data directory held: their stores must not be left out of the map.
fn previous_osds(dir: &Path) -> u32 {
    (1..).find(|&id| !osd_dir(dir, id).join("store").exists()).unwrap_or(1)
}

/// Hands the OSD's PG states and store usage to the in-process monitor every second.
async fn report_pg_stats(osd: Osd, dir: PathBuf, store: Arc<ObjectStore>, mon: std::sync::Weak<Monitor>) {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let stats = osd.pg_stats().await;
        let usage = osd_usage(&dir, &store);
        let Some(mon) = mon.upgrade() else { return };
        let _ = mon.handle(shoal_types::msg::MapCommand::PgStats { osd: osd.id(), stats, usage }).await;
    }
}

/// How full the store in `dir` is (empty, and logged, if that cannot be read).
pub fn osd_usage(dir: &Path, store: &ObjectStore) -> StoreUsage {
    shoal_store::device::store_usage(dir, store.space().free).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "reading the store's space");
        StoreUsage::default()
    })
}

/// Deletes the data of pools as they disappear from the map.
pub async fn follow_pool_removals(osd: Osd, mut maps: tokio::sync::watch::Receiver<Arc<shoal_types::OsdMap>>) {
    let mut old = maps.borrow_and_update().clone();
    while maps.changed().await.is_ok() {
        let new = maps.borrow_and_update().clone();
        if let Err(e) = osd.drop_removed_pools(&old, &new) {
            tracing::error!(error = %e, "deleting removed pools failed");
        }
        old = new;
    }
}

/// Applies the central configuration in `map` (with `cli_options` on top) to the OSD's
/// runtime options and returns it; a bad central value is logged and skipped.
pub fn apply_config(osd: &Osd, map: &shoal_types::OsdMap, cli_options: &[String]) -> Option<Config> {
    let settings: Vec<String> =
        map.config_for(&osd.id().to_string()).into_iter().chain(cli_options.iter().cloned()).collect();
    match Config::from_settings(&settings).and_then(|c| Ok((c.osd(osd.id())?, c))) {
        Ok((osd_config, config)) => {
            osd.set_limits(osd_config.limits);
            osd.update_options(config.values(Some(crate::config::LIVE_OPTIONS)));
            Some(config)
        }
        Err(e) => {
            tracing::warn!(error = %e, "ignoring the central configuration");
            None
        }
    }
}

/// Applies the central configuration whenever the map changes.
async fn follow_config(osd: Osd, mut maps: tokio::sync::watch::Receiver<Arc<shoal_types::OsdMap>>, cli: Vec<String>) {
    loop {
        let map = maps.borrow_and_update().clone();
        apply_config(&osd, &map, &cli);
        if maps.changed().await.is_err() {
            return;
        }
    }
}

/// Opens (creating if needed) the object store in `dir`: RocksDB in `dir/store`, the data
/// device in `dir/block`.
pub fn open_store(dir: &Path, config: &Config) -> Result<(Arc<RocksKv>, Arc<ObjectStore>)> {
    std::fs::create_dir_all(dir)
        .map_err(|e| err::io(format!("cannot create data directory {}: {e}", dir.display())))?;
    let kv = Arc::new(RocksKv::open(&dir.join("store"), config.get("store_rocksdb_options"))?);
    let device =
        Arc::new(FileDevice::open(&dir.join("block"))?.with_failsafe_full_ratio(config.failsafe_full_ratio()?));
    let format = StoreFormat { chunk_size: config.chunk_size()? };
    let store = Arc::new(ObjectStore::open(kv.clone(), device, format, config.store_options()?)?);
    Ok((kv, store))
}
