//! The write path: reserve before the object operation, commit after it (or abort), for
//! persistent topics; push before the reply for synchronous ones.

use crate::endpoint::Pusher;
use crate::event::QueuedEvent;
use crate::metrics::Metrics;
use crate::queue::{Queues, shard_name, shard_of};
use crate::topic::Topic;
use bytes::Bytes;
use shoal_types::{Errno, Result};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Room left in a reservation for what is known only after the operation (size, ETag, time).
const RESERVATION_SLACK: u64 = 512;

/// An event reserved in a persistent topic's queue, waiting for its operation.
pub struct Reserved {
    shard: String,
    id: u64,
    bytes: u64,
    topic: Arc<Topic>,
}

/// Publishes events of S3 operations.
pub struct Publisher {
    /// The queue shards.
    pub queues: Queues,
    /// Endpoint connections.
    pub pusher: Arc<Pusher>,
    /// Per-topic counters.
    pub metrics: Arc<Metrics>,
    /// How long a request waits for room in a full queue before failing with 503 SlowDown.
    pub reserve_wait: Duration,
}

impl Publisher {
    /// The shard of `event` in `topic`'s current generation.
    fn shard(topic: &Topic, event: &QueuedEvent) -> String {
        let q = topic.dest.queue;
        let index = shard_of(&event.record.s3.bucket.name, &event.record.s3.object.key, q.shards);
        shard_name(&topic.own_key(), q.generation, index)
    }

    /// Reserves room for `event` (carried in the reservation, so the queue's owner can
    /// commit it if this gateway dies after the operation). Waits up to `reserve_wait`
    /// while the shard is full, then fails with ENOSPC.
    pub async fn reserve(&self, topic: Arc<Topic>, event: &QueuedEvent) -> Result<Reserved> {
        let shard = Self::shard(&topic, event);
        let info = Bytes::from(event.encode());
        let bytes = info.len() as u64 + RESERVATION_SLACK;
        let id = self.reserve_bytes(&topic, &shard, info, bytes).await?;
        Ok(Reserved { shard, id, bytes, topic })
    }

    async fn reserve_bytes(&self, topic: &Topic, shard: &str, info: Bytes, bytes: u64) -> Result<u64> {
        let deadline = Instant::now() + self.reserve_wait;
        let mut pause = Duration::from_millis(5);
        loop {
            match self.queues.reserve(shard, bytes, info.clone()).await {
                Err(e) if e.errno == Errno::NoSpace && Instant::now() + pause < deadline => {
                    self.metrics.topic(&topic.name).waits.inc();
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(e) if e.errno == Errno::NoSpace => {
                    self.metrics.topic(&topic.name).full.inc();
                    return Err(e);
                }
                other => return other,
            }
        }
    }

    /// Commits the final `event` into its reservation. A reservation that vanished (the
    /// owner judged it stale) or that is too small is replaced by a fresh one.
    pub async fn commit(&self, reserved: Reserved, event: &QueuedEvent) -> Result<()> {
        let entry = Bytes::from(event.encode());
        let Reserved { shard, id, bytes, topic } = reserved;
        if entry.len() as u64 <= bytes {
            match self.queues.commit(&shard, id, entry.clone()).await {
                Ok(()) => {
                    self.metrics.topic(&topic.name).queued.inc();
                    return Ok(());
                }
                Err(e) if e.errno != Errno::NotFound => return Err(e),
                Err(_) => tracing::warn!(%shard, id, "reservation vanished; reserving again"),
            }
        } else {
            self.queues.abort(&shard, id).await?;
        }
        let id = self.reserve_bytes(&topic, &shard, entry.clone(), entry.len() as u64).await?;
        self.queues.commit(&shard, id, entry).await?;
        self.metrics.topic(&topic.name).queued.inc();
        Ok(())
    }

    /// Drops a reservation whose operation failed.
    pub async fn abort(&self, reserved: Reserved) {
        if let Err(e) = self.queues.abort(&reserved.shard, reserved.id).await {
            // The owner expires it as stale, finding the operation did not happen.
            tracing::warn!(error = %e, shard = %reserved.shard, "aborting a reservation failed");
        }
    }

    /// Pushes `event` to a synchronous topic; a failure is counted and logged, not returned.
    pub async fn push_now(&self, topic: &Topic, event: &QueuedEvent) {
        let counters = self.metrics.topic(&topic.name);
        let started = Instant::now();
        match self.pusher.push(topic, event).await {
            Ok(()) => {
                counters.delivered.inc();
                counters.latency.record(started.elapsed());
            }
            Err(e) => {
                counters.failures.inc();
                counters.lost.inc();
                tracing::warn!(topic = %topic.name, error = %e, "synchronous notification failed");
            }
        }
    }
}
