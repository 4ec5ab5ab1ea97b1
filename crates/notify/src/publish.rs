//! The write path. A persistent event is first admitted against its queue shard's fill
//! level, then written by the gateway into the bucket index transaction of its operation
//! (see [`crate::eventlog`]), from where the log's mover takes it to the queue. A
//! synchronous event is pushed before the S3 reply.
//!
//! Admission reads a shard's header at most every [`FILL_REFRESH`] ([`ROOMY_REFRESH`] while
//! more than half of it is free) and counts what this gateway admitted since, so it costs
//! no write; the limit is therefore soft by what the bucket index logs hold that has not
//! reached the queue yet, and by what other gateways admitted since the last read. Events
//! that do not fit wait in their log until the queue has room.

use crate::endpoint::Pusher;
use crate::event::QueuedEvent;
use crate::eventlog::EventLogs;
use crate::metrics::Metrics;
use crate::queue::{Queues, shard_name, shard_of};
use crate::topic::Topic;
use bytes::Bytes;
use shoal_types::{Result, err};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Room counted for what is known only after the operation (size, ETag, time, event id).
pub const EVENT_SLACK: u64 = 256;
/// Longest a shard's fill level is used without reading it again.
pub const FILL_REFRESH: Duration = Duration::from_millis(200);
/// The same while more than half of the shard is free: far from full, a later read costs
/// nothing but a looser limit.
pub const ROOMY_REFRESH: Duration = Duration::from_secs(2);

/// A shard's free bytes as last read, less what was admitted since.
struct Fill {
    room: u64,
    capacity: u64,
    read_at: Instant,
}

impl Fill {
    /// The level can still be used without reading the header again.
    fn fresh(&self) -> bool {
        let refresh = if self.room > self.capacity / 2 { ROOMY_REFRESH } else { FILL_REFRESH };
        self.read_at.elapsed() < refresh
    }
}

/// Publishes events of S3 operations.
pub struct Publisher {
    /// The queue shards.
    pub queues: Queues,
    /// The bucket index event logs.
    pub logs: EventLogs,
    /// Endpoint connections.
    pub pusher: std::sync::Arc<Pusher>,
    /// Per-topic counters.
    pub metrics: std::sync::Arc<Metrics>,
    /// How long a request waits for room in a full queue before failing with 503 SlowDown.
    pub reserve_wait: Duration,
    fill: Mutex<HashMap<String, Fill>>,
}

impl Publisher {
    /// A publisher over `queues` and `logs`.
    pub fn new(
        queues: Queues,
        logs: EventLogs,
        pusher: std::sync::Arc<Pusher>,
        metrics: std::sync::Arc<Metrics>,
        reserve_wait: Duration,
    ) -> Publisher {
        Publisher { queues, logs, pusher, metrics, reserve_wait, fill: Mutex::new(HashMap::new()) }
    }

    /// The shard of events about `key` in `bucket` in `topic`'s current generation.
    pub fn shard(topic: &Topic, bucket: &str, key: &str) -> String {
        let q = topic.dest.queue;
        shard_name(&topic.own_key(), q.generation, shard_of(bucket, key, q.shards))
    }

    fn shard_of_event(topic: &Topic, event: &QueuedEvent) -> String {
        Self::shard(topic, &event.record.s3.bucket.name, &event.record.s3.object.key)
    }

    /// Admits `event` into `topic`'s queue. While its shard is full, waits up to
    /// `reserve_wait` (reading the fill level again each time), then fails with ENOSPC.
    pub async fn admit(&self, topic: &Topic, event: &QueuedEvent) -> Result<()> {
        let shard = Self::shard_of_event(topic, event);
        let bytes = event.encoded_len() as u64 + EVENT_SLACK;
        let deadline = Instant::now() + self.reserve_wait;
        let mut pause = Duration::from_millis(5);
        let mut fresh = false;
        loop {
            if self.take_room(&shard, bytes, fresh).await? {
                return Ok(());
            }
            let counters = self.metrics.topic(&topic.name);
            if Instant::now() + pause >= deadline {
                counters.full.inc();
                return Err(err::no_space(format!("notification queue {shard} is full")));
            }
            counters.waits.inc();
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
            fresh = true;
        }
    }

    /// Takes `bytes` of a shard's room if it has them, reading its header when the cached
    /// level is stale (see [`Fill::fresh`]) or `fresh` asks for it.
    async fn take_room(&self, shard: &str, bytes: u64, fresh: bool) -> Result<bool> {
        let lock = || self.fill.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !fresh && let Some(fill) = lock().get_mut(shard).filter(|f| f.fresh()) {
            let fits = fill.room >= bytes;
            if fits {
                fill.room -= bytes;
            }
            return Ok(fits);
        }
        let h = self.queues.header(shard).await?;
        let room = h.capacity_bytes.saturating_sub(h.committed_bytes + h.reserved_bytes);
        let fits = room >= bytes;
        let room = if fits { room - bytes } else { room };
        lock().insert(shard.to_owned(), Fill { room, capacity: h.capacity_bytes, read_at: Instant::now() });
        Ok(fits)
    }

    /// Appends `event` to `topic`'s queue at once (dead-lettering); ENOSPC when it is full.
    pub async fn enqueue_now(&self, topic: &Topic, event: &QueuedEvent) -> Result<()> {
        let shard = Self::shard_of_event(topic, event);
        match self.queues.enqueue(&shard, vec![Bytes::from(event.encode())]).await? {
            0 => Err(err::no_space(format!("notification queue {shard} is full"))),
            _ => {
                self.metrics.topic(&topic.name).queued.inc();
                Ok(())
            }
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
