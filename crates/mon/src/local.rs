//! The single-node authority of the embedded mode: it applies changes itself and keeps the
//! map in the same local store as the OSD.

use crate::change::{MapChange, apply};
use crate::{Authority, BoxFuture};
use bytes::Bytes;
use shoal_store::{ObjectStore, Transaction};
use shoal_types::msg::{RaftRpc, Reply};
use shoal_types::{OsdEntry, OsdId, OsdMap, Result, Versioned, err};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

const MAP_KEY: &[u8] = b"osdmap";

/// A map authority of one, persisting the map in a local store.
pub struct LocalAuthority {
    store: Arc<ObjectStore>,
    map: Mutex<OsdMap>,
    publish: watch::Sender<Arc<OsdMap>>,
    /// Where the monitor listens, as `mon_status` names it.
    addr: String,
}

impl LocalAuthority {
    /// Loads the map from `store` (or starts one) and records exactly `osds` in it; the
    /// monitor listens at `addr`.
    pub fn open(store: Arc<ObjectStore>, osds: BTreeMap<OsdId, OsdEntry>, addr: &str) -> Result<Arc<LocalAuthority>> {
        let mut map = match store.meta(MAP_KEY)? {
            Some(bytes) => OsdMap::decode(&bytes).map_err(|e| err::io(format!("stored cluster map: {}", e.message)))?,
            None => OsdMap::default(),
        };
        if map.osds != osds {
            map.osds = osds;
            map.epoch += 1;
        }
        persist(&store, &map)?;
        let (publish, _) = watch::channel(Arc::new(map.clone()));
        Ok(Arc::new(LocalAuthority { store, map: Mutex::new(map), publish, addr: addr.to_owned() }))
    }
}

fn persist(store: &ObjectStore, map: &OsdMap) -> Result<()> {
    let mut txn = Transaction::new();
    txn.put_meta(MAP_KEY, map.encode());
    store.commit(txn)?;
    store.sync()?;
    Ok(())
}

impl Authority for LocalAuthority {
    fn subscribe(&self) -> watch::Receiver<Arc<OsdMap>> {
        self.publish.subscribe()
    }

    fn leader(&self) -> Option<Option<String>> {
        None
    }

    fn commit(&self, change: MapChange) -> BoxFuture<'_, Result<Reply>> {
        let outcome = (|| {
            let mut map = self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut next = map.clone();
            let reply = apply(&mut next, &change)?;
            if next != *map {
                persist(&self.store, &next)?;
                *map = next.clone();
                self.publish.send_replace(Arc::new(next));
                tracing::info!(epoch = map.epoch, "cluster map changed");
            }
            Ok(reply)
        })();
        Box::pin(std::future::ready(outcome))
    }

    fn quorum(&self) -> (Vec<(u64, String)>, Option<u64>) {
        (vec![(0, self.addr.clone())], Some(0))
    }

    fn raft_rpc(&self, _kind: RaftRpc, _body: Bytes) -> BoxFuture<'_, Result<Bytes>> {
        Box::pin(async { Err(err::not_supported("this monitor runs alone, without consensus")) })
    }

    fn change_members(&self, _change: crate::MemberChange) -> BoxFuture<'_, Result<()>> {
        Box::pin(async { Err(err::not_supported("the embedded monitor is alone: its membership cannot change")) })
    }
}
