//! Following maps that change a pool's PG count: this store's copies are split
//! ([`shoal_pg_core::split`]) while every shard is paused between two jobs, and only then
//! is the map published to the shards and to the routing of operations. No shard works
//! under a map whose split is not done, and no write of the old layout lands mid-split.

use crate::fault::Fault;
use shoal_pg_core::damage::Damage;
use shoal_store::ObjectStore;
use shoal_types::{OsdMap, Result};
use std::sync::{Arc, RwLock};
use tokio::sync::watch;

/// Shards hold it shared while they run a job; a split holds it alone.
pub(crate) type Gate = Arc<RwLock<()>>;

/// What following the maps needs.
pub(crate) struct Follower {
    pub(crate) store: Arc<ObjectStore>,
    pub(crate) gate: Gate,
    pub(crate) damage: Arc<Damage>,
    pub(crate) fault: Arc<Fault>,
}

impl Follower {
    /// Splits for the current map of `outside` at once, then publishes it and every later
    /// map of `outside` into the returned receiver, each once its split is done. A split
    /// that fails raises the OSD's fault and stops the following.
    pub(crate) fn start(self, mut outside: watch::Receiver<Arc<OsdMap>>) -> watch::Receiver<Arc<OsdMap>> {
        let first = outside.borrow_and_update().clone();
        if let Err(e) = self.split_for(&first) {
            self.fault.raise(format!("splitting PG copies for map {}: {e}", first.epoch));
        }
        let (publish, maps) = watch::channel(first);
        let follower = Arc::new(self);
        tokio::spawn(async move {
            while outside.changed().await.is_ok() {
                let next = outside.borrow_and_update().clone();
                let (f, publish) = (follower.clone(), publish.clone());
                let adopted = tokio::task::spawn_blocking(move || {
                    let split = shoal_pg_core::split::needed(&f.store, &next).and_then(|needed| {
                        let _paused = needed.then(|| f.gate.write().unwrap_or_else(std::sync::PoisonError::into_inner));
                        f.split_for(&next)?;
                        publish.send_replace(next.clone());
                        Ok(())
                    });
                    split.map_err(|e| format!("splitting PG copies for map {}: {e}", next.epoch))
                })
                .await;
                match adopted {
                    Ok(Ok(())) => {}
                    Ok(Err(reason)) => return follower.fault.raise(reason),
                    Err(e) => return follower.fault.raise(format!("following maps: {e}")),
                }
            }
        });
        maps
    }

    /// Commits the split or merge `map` calls for on this store, if any.
    fn split_for(&self, map: &OsdMap) -> Result<()> {
        let split = shoal_pg_core::split::follow(&self.store, map)?;
        if split.txn.is_empty() {
            return Ok(());
        }
        self.store.commit(split.txn)?;
        if !split.pools.is_empty() {
            self.damage.reload(&self.store)?;
            tracing::info!(epoch = map.epoch, pools = ?split.pools, "split this OSD's PG copies");
        }
        Ok(())
    }
}
