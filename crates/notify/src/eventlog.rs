//! Bucket index event logs: the first stop of a persistent event. The gateway writes the
//! event in the same `bucket_index` transaction as the index change it reports (so the
//! event exists exactly when the change happened, at the cost of no extra write), and the
//! log's owner moves logged events into their topic queues in batches.
//!
//! Logs are the index shard objects of buckets with notification configurations, listed as
//! omap keys of the registry object `event_logs` (log pool, namespace `notif`). Each log is
//! moved by one gateway at a time, the holder of the `notif_mover` lease on the shard.

use crate::lease;
use bytes::Bytes;
use shoal_client::{IoCtx, OpBuilder, WriteOp};
use shoal_objclass::bucket_index::{self, LogListInput, LogListOutput, LogTrimInput};
use shoal_types::{Errno, Result, Versioned};
use std::time::Duration;

/// The registry object: one omap key per bucket index shard that may hold events.
pub const REGISTRY: &str = "event_logs";
/// The lock that makes a gateway a log's mover.
pub const MOVER_LOCK: &str = "notif_mover";

/// The event logs of every bucket with notifications.
#[derive(Clone)]
pub struct EventLogs {
    index: IoCtx,
    registry: IoCtx,
}

impl EventLogs {
    /// Logs in the bucket index shards of `index_pool`, registered in `log_pool`.
    pub fn new(index_pool: IoCtx, mut log_pool: IoCtx) -> EventLogs {
        log_pool.set_namespace(crate::queue::NAMESPACE);
        EventLogs { index: index_pool, registry: log_pool }
    }

    /// Lists index shards as event logs (again is harmless).
    pub async fn register(&self, shards: &[String]) -> Result<()> {
        let keys = shards.iter().map(|s| (Bytes::from(s.clone()), Bytes::new()));
        self.registry.operate(REGISTRY, WriteOp::new().create(false).omap_set(keys)).await.map(|_| ())
    }

    /// Forgets index shards (their bucket is gone).
    pub async fn unregister(&self, shards: &[String]) -> Result<()> {
        let keys = shards.iter().map(|s| Bytes::from(s.clone()));
        match self.registry.operate(REGISTRY, WriteOp::new().omap_rm_keys(keys)).await {
            Err(e) if e.errno != Errno::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Every registered log.
    pub async fn registry(&self) -> Result<Vec<String>> {
        lease::registry_keys(&self.registry, REGISTRY).await
    }

    /// The oldest events of a log: up to `max` after sequence number `after`.
    pub async fn list(&self, shard: &str, after: Option<u64>, max: u32) -> Result<LogListOutput> {
        let input = LogListInput { after, max }.encode();
        LogListOutput::decode(&self.index.exec(shard, bucket_index::CLASS, "log_list", input).await?)
    }

    /// Whether a log holds no event (a missing shard holds none).
    pub async fn is_empty(&self, shard: &str) -> Result<bool> {
        match self.list(shard, None, 1).await {
            Ok(out) => Ok(out.events.is_empty()),
            Err(e) if e.errno == Errno::NotFound => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Removes moved events, only while `cookie` is the log's mover.
    pub async fn trim(&self, shard: &str, cookie: &str, seqs: Vec<u64>) -> Result<()> {
        let op = lease::assert_owner(MOVER_LOCK, cookie).exec(
            bucket_index::CLASS,
            "log_trim",
            LogTrimInput { seqs }.encode(),
        );
        self.index.operate(shard, op).await.map(|_| ())
    }

    /// Takes or renews the mover lease of a log.
    pub async fn own(&self, shard: &str, cookie: &str, lease: Duration) -> Result<()> {
        lease::own(&self.index, shard, MOVER_LOCK, cookie, lease).await
    }

    /// Gives the mover lease of a log up.
    pub async fn disown(&self, shard: &str, cookie: &str) -> Result<()> {
        lease::disown(&self.index, shard, MOVER_LOCK, cookie).await
    }
}
