//! The embedded object layer: a map authority and one OSD on a RocksDB store in this
//! process, reached through the in-process messenger exactly as a remote cluster would be.

use crate::config::Config;
use shoal_client::Rados;
use shoal_mon::Monitor;
use shoal_mon::local::LocalAuthority;
use shoal_osd::Osd;
use shoal_store::{FileDevice, ObjectStore, StoreFormat};
use shoal_store_rocks::RocksKv;
use shoal_transport::{LocalNetwork, Network};
use shoal_types::{OsdEntry, OsdId, Result, err};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

const MON_ADDR: &str = "mon.local";
const OSD_ADDR: &str = "osd.0";

/// A running embedded cluster and a client connected to it.
pub struct Embedded {
    /// A client of the embedded cluster.
    pub rados: Rados,
    /// Where the monitor listens.
    mon_addr: String,
    /// The store, for statistics.
    pub store: Arc<ObjectStore>,
    kv: Arc<RocksKv>,
    osd: Osd,
    mon: Arc<Monitor>,
    closed: std::sync::atomic::AtomicBool,
}

impl Embedded {
    /// Opens (creating if needed) the data directory and starts the daemons on an
    /// in-process network.
    pub async fn open(dir: &Path, config: &Config) -> Result<Embedded> {
        Self::open_on(dir, config, Arc::new(LocalNetwork::new()), MON_ADDR, OSD_ADDR).await
    }

    /// Like [`Embedded::open`], with the monitor and the OSD listening on `network` at the
    /// given addresses (for TCP, `127.0.0.1:0` picks a free port).
    pub async fn open_on(
        dir: &Path,
        config: &Config,
        network: Arc<dyn Network>,
        mon_bind: &str,
        osd_bind: &str,
    ) -> Result<Embedded> {
        let (kv, store) = open_store(dir, config)?;
        let (mon_listener, osd_listener) = (network.bind(mon_bind)?, network.bind(osd_bind)?);
        let mon_addr = mon_listener.local_addr().to_owned();
        let osd_entry = OsdEntry {
            addr: osd_listener.local_addr().to_owned(),
            host: "localhost".into(),
            weight: 0x10000,
            up: true,
            is_in: true,
        };
        let authority = LocalAuthority::open(store.clone(), BTreeMap::from([(OsdId(0), osd_entry)]))?;
        let mon = Monitor::new(authority, network.clone());
        let maps = mon.subscribe();
        let registry = Arc::new(crate::registry::LocalMonitor(Arc::downgrade(&mon)));
        let osd = Osd::start(config.osd(OsdId(0))?, store.clone(), maps.clone(), network.clone(), registry);
        tokio::spawn(mon.clone().serve(mon_listener));
        tokio::spawn(osd.clone().serve(osd_listener));
        apply_config(&osd, &maps.borrow().clone(), config.settings());
        tokio::spawn(follow_config(osd.clone(), maps.clone(), config.settings().to_vec()));
        tokio::spawn(follow_pool_removals(osd.clone(), maps));
        let osd_handle = osd.clone();
        tokio::spawn(report_pg_stats(osd, Arc::downgrade(&mon)));
        let rados = Rados::connect(network, &mon_addr).await?;
        Ok(Embedded { rados, mon_addr, store, kv, osd: osd_handle, mon, closed: Default::default() })
    }

    /// Where the monitor listens; other clients connect there.
    pub fn mon_addr(&self) -> &str {
        &self.mon_addr
    }

    /// Waits until the embedded OSD fails for good; returns why.
    pub async fn failed(&self) -> String {
        self.osd.failed().await
    }

    /// Syncs and closes the store. Call before the process exits: RocksDB's background
    /// threads must not outlive it.
    pub fn close(&self) {
        if self.closed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        self.osd.stop();
        if let Err(e) = self.store.sync() {
            tracing::error!(error = %e, "final WAL sync failed");
        }
        self.kv.close();
    }

    /// Registers the monitor's and the OSD's metrics, as `shoal mon` and `shoal osd` do.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.mon.register_metrics(registry.sub_registry_with_prefix("mon"));
        let osd = registry.sub_registry_with_label(("daemon".into(), "osd.0".into()));
        self.osd.register_metrics(osd.sub_registry_with_prefix("osd"));
    }

    /// RocksDB's own statistics report.
    pub fn rocksdb_report(&self) -> String {
        self.kv.report()
    }
}

impl Drop for Embedded {
    /// Closes the store in the dropping thread: otherwise the last of the OSD's threads
    /// would close it, possibly while the process is already exiting (RocksDB aborts then).
    fn drop(&mut self) {
        self.close();
    }
}

/// Hands the OSD's PG states to the in-process monitor every second.
async fn report_pg_stats(osd: Osd, mon: std::sync::Weak<Monitor>) {
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let stats = osd.pg_stats().await;
        let Some(mon) = mon.upgrade() else { return };
        let _ = mon.handle(shoal_types::msg::MapCommand::PgStats { osd: osd.id(), stats }).await;
    }
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
    let device = Arc::new(FileDevice::open(&dir.join("block"))?);
    let format = StoreFormat { chunk_size: config.chunk_size()? };
    let store = Arc::new(ObjectStore::open(kv.clone(), device, format, config.store_options()?)?);
    Ok((kv, store))
}
