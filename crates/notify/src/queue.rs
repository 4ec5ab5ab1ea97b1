//! Persistent topic queues: each topic generation is spread over shard objects in the log
//! pool's `notif` namespace, each a `2pc_queue` with its own owner (`lock` class lease).
//!
//! Names: generation 0 uses `<topic>` for shard 0 and `<topic>.<i>` for the others (as
//! Ceph); a later generation `g` (after a reshard) uses `<topic>@<g>` and `<topic>@<g>.<i>`.
//! Every shard is listed as an omap key of the registry object `queues_list_object`. The
//! shard of an event is `rjenkins("<bucket>:<key>") % shards` ([`shard_of`]): Ceph's
//! portable string hash (lookup2, seed 0), so every gateway on every platform picks the
//! same shard and events of one key stay in one FIFO.

use crate::lease;
use crate::topic::QueueGeneration;
use bytes::Bytes;
use shoal_client::{IoCtx, OpBuilder, WriteOp};
use shoal_objclass::queue2pc::{
    self, EnqueueReply, EnqueueRequest, InitRequest, ListReply, ListRequest, QueueHeader, RemoveRequest,
};
use shoal_types::{Errno, Result, Versioned};

/// The namespace of queue shards and the registry.
pub const NAMESPACE: &str = "notif";
/// The registry object: one omap key per queue shard.
pub const REGISTRY: &str = "queues_list_object";
/// The object where each gateway publishes its per-topic counters (omap `<topic>\0<gateway>`).
pub const COUNTERS: &str = "notif_counters";
/// The lock that makes a gateway a shard's owner.
pub const OWNER_LOCK: &str = "notif_owner";

/// Shard `index` of generation `generation` of the topic with key `topic`.
pub fn shard_name(topic: &str, generation: u32, index: u32) -> String {
    let base = if generation == 0 { topic.to_owned() } else { format!("{topic}@{generation}") };
    if index == 0 { base } else { format!("{base}.{index}") }
}

/// All shard names of one generation.
pub fn shard_names(topic: &str, generation: QueueGeneration) -> Vec<String> {
    (0..generation.shards).map(|i| shard_name(topic, generation.generation, i)).collect()
}

/// The topic key and generation a shard name belongs to.
pub fn topic_of_shard(shard: &str) -> (String, u32) {
    let base = shard.rsplit_once('.').filter(|(_, i)| i.parse::<u32>().is_ok()).map_or(shard, |(b, _)| b);
    match base.rsplit_once('@') {
        Some((topic, g)) if g.parse::<u32>().is_ok() => (topic.to_owned(), g.parse().unwrap_or(0)),
        _ => (base.to_owned(), 0),
    }
}

/// The shard of the event about `key` in `bucket`.
pub fn shard_of(bucket: &str, key: &str, shards: u32) -> u32 {
    shoal_placement::hash::str_hash(format!("{bucket}:{key}").as_bytes()) % shards.max(1)
}

/// The queue shards of all persistent topics.
#[derive(Clone)]
pub struct Queues {
    io: IoCtx,
}

impl Queues {
    /// Queues in `log_pool` (the namespace is set here).
    pub fn new(mut log_pool: IoCtx) -> Queues {
        log_pool.set_namespace(NAMESPACE);
        Queues { io: log_pool }
    }

    /// Creates (or keeps) the shards of one generation, `capacity` bytes over all of them,
    /// and lists them in the registry.
    pub async fn create(&self, topic: &str, generation: QueueGeneration, capacity: u64) -> Result<()> {
        let names = shard_names(topic, generation);
        let per_shard = (capacity / u64::from(generation.shards.max(1))).max(4096);
        for name in &names {
            let init = InitRequest { capacity_bytes: per_shard }.encode();
            let op = WriteOp::new().create(false).exec(queue2pc::CLASS, "init", init);
            match self.io.operate(name, op).await {
                Err(e) if e.errno != Errno::Exists => return Err(e),
                _ => {}
            }
        }
        let keys = names.into_iter().map(|n| (Bytes::from(n), Bytes::new()));
        self.io.operate(REGISTRY, WriteOp::new().create(false).omap_set(keys)).await.map(|_| ())
    }

    /// Removes the shards of one generation and their registry keys.
    pub async fn remove(&self, topic: &str, generation: QueueGeneration) -> Result<()> {
        let names = shard_names(topic, generation);
        for name in &names {
            match self.io.remove(name).await {
                Err(e) if e.errno != Errno::NotFound => return Err(e),
                _ => {}
            }
        }
        let keys = names.into_iter().map(Bytes::from);
        match self.io.operate(REGISTRY, WriteOp::new().omap_rm_keys(keys)).await {
            Err(e) if e.errno != Errno::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Every registered shard.
    pub async fn registry(&self) -> Result<Vec<String>> {
        lease::registry_keys(&self.io, REGISTRY).await
    }

    /// Appends as many of `entries` (in order) as fit; returns how many did.
    pub async fn enqueue(&self, shard: &str, entries: Vec<Bytes>) -> Result<u64> {
        let out = self.io.exec(shard, queue2pc::CLASS, "enqueue", EnqueueRequest { entries }.encode()).await?;
        Ok(EnqueueReply::decode(&out)?.appended)
    }

    /// A shard's accounting.
    pub async fn header(&self, shard: &str) -> Result<QueueHeader> {
        QueueHeader::decode(&self.io.exec(shard, queue2pc::CLASS, "get_capacity", Vec::new()).await?)
    }

    /// Up to `max` committed entries after `after`.
    pub async fn list(&self, shard: &str, after: Option<u64>, max: u32) -> Result<ListReply> {
        let out = self.io.exec(shard, queue2pc::CLASS, "list_entries", ListRequest { after, max }.encode()).await?;
        ListReply::decode(&out)
    }

    /// Removes entries up to `up_to`, only while `cookie` still owns the shard.
    pub async fn trim(&self, shard: &str, cookie: &str, up_to: u64) -> Result<()> {
        let op = lease::assert_owner(OWNER_LOCK, cookie).exec(
            queue2pc::CLASS,
            "remove_entries",
            RemoveRequest { up_to }.encode(),
        );
        self.io.operate(shard, op).await.map(|_| ())
    }

    /// Takes or renews ownership of a shard for `lease`. Fails with EBUSY when another
    /// gateway owns it, ENOENT when the shard is gone.
    pub async fn own(&self, shard: &str, cookie: &str, lease: std::time::Duration) -> Result<()> {
        lease::own(&self.io, shard, OWNER_LOCK, cookie, lease).await
    }

    /// Publishes one gateway's per-topic counters.
    pub async fn publish_counters(
        &self,
        gateway: &str,
        counters: &std::collections::BTreeMap<String, crate::metrics::CounterSnapshot>,
    ) -> Result<()> {
        if counters.is_empty() {
            return Ok(());
        }
        let rows = counters.iter().map(|(topic, c)| {
            (Bytes::from(format!("{topic}\0{gateway}")), Bytes::from(serde_json::to_vec(c).unwrap_or_default()))
        });
        self.io.operate(COUNTERS, WriteOp::new().create(false).omap_set(rows)).await.map(|_| ())
    }

    /// Every gateway's published counters of `topic`.
    pub async fn counters(&self, topic: &str) -> Result<Vec<crate::metrics::CounterSnapshot>> {
        let rows = match self.io.omap_vals_all(COUNTERS, format!("{topic}\0").as_bytes()).await {
            Ok(rows) => rows,
            Err(e) if e.errno == Errno::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(rows.into_iter().filter_map(|(_, v)| serde_json::from_slice(&v).ok()).collect())
    }

    /// Gives up ownership so another gateway can take over at once.
    pub async fn disown(&self, shard: &str, cookie: &str) -> Result<()> {
        lease::disown(&self.io, shard, OWNER_LOCK, cookie).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_shards_spread() {
        let g0 = QueueGeneration { generation: 0, shards: 3 };
        assert_eq!(shard_names("t", g0), ["t", "t.1", "t.2"]);
        let g2 = QueueGeneration { generation: 2, shards: 2 };
        assert_eq!(shard_names("acme:t-x", g2), ["acme:t-x@2", "acme:t-x@2.1"]);
        for name in ["t", "t.1", "acme:t-x@2", "acme:t-x@2.1"] {
            let (topic, g) = topic_of_shard(name);
            assert!(shard_names(&topic, QueueGeneration { generation: g, shards: 3 }).contains(&name.to_string()));
        }
        let mut counts = [0u32; 11];
        for i in 0..11_000 {
            counts[shard_of("b", &format!("k{i}"), 11) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
        // Fixed values: the mapping must not change between builds or platforms.
        let fixed: Vec<u32> =
            ["a", "photos/2026/a.jpg", "k0", "k1"].iter().map(|k| shard_of("bucket", k, 11)).collect();
        assert_eq!(fixed, [1, 10, 1, 1]);
    }
}
