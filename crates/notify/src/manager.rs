//! Delivery of persistent topics. Every gateway runs a manager; each queue shard is owned
//! by one gateway at a time through a `lock`-class lease, renewed on every ownership pass,
//! so the shards of a topic are delivered in parallel by several gateways and a dead
//! gateway's shards are taken over once its lease runs out.
//!
//! A shard is delivered in commit order per object key: entries of different keys are
//! pushed concurrently, entries of one key one after another, and a failed entry holds
//! back the later entries of its key only. Entries are trimmed from the queue as a
//! prefix once delivered (or expired); entries delivered beyond a held-back one are
//! remembered so they are not pushed again while this gateway owns the shard.
//!
//! Expiry (`time_to_live`, `max_retries`) sends the event to the topic's dead-letter
//! topic when it has one, else drops it; both are counted and logged, never silent.
//! The same ownership passes take the mover leases of bucket index event logs, whose
//! events the [`mover`] takes to the topic queues. After a reshard, a generation's shards are delivered only once every older
//! generation has drained, which keeps per-key order across the change.

use crate::endpoint::Pusher;
use crate::event::QueuedEvent;
use crate::metrics::Metrics;
use crate::publish::Publisher;
use crate::queue::{Queues, shard_name, shard_names, topic_of_shard};
use crate::topic::Topic;
use futures::StreamExt;
use shoal_types::{Errno, Result};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where the manager reads topics.
#[async_trait::async_trait]
pub trait TopicSource: Send + Sync {
    /// The topic with `key`, read fresh enough that endpoint changes apply to queued events.
    async fn topic(&self, key: &str) -> Result<Option<Arc<Topic>>>;
    /// Every shard of `generation` (an old one, after a reshard) is empty: forget it.
    async fn generation_drained(&self, key: &str, generation: u32) -> Result<()>;
}

/// Manager timing and defaults.
#[derive(Clone, Debug)]
pub struct ManagerConfig {
    /// Length of a shard ownership lease.
    pub lease: Duration,
    /// Time between ownership passes (lease renewals, new shards, takeovers).
    pub poll: Duration,
    /// Default `time_to_live` in seconds (0 = forever).
    pub time_to_live: u64,
    /// Default `max_retries` (0 = unlimited).
    pub max_retries: u64,
    /// Default `retry_sleep_duration` in seconds.
    pub retry_sleep: u64,
    /// Entries read per pass.
    pub batch: u32,
    /// Keys pushed at once per shard.
    pub parallel: usize,
    /// Time between passes that move logged events to the queues (longer: fewer writes
    /// shared by more events; shorter: lower delivery latency).
    pub move_interval: Duration,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            lease: Duration::from_secs(90),
            poll: Duration::from_secs(30),
            time_to_live: 0,
            max_retries: 0,
            retry_sleep: 0,
            batch: 256,
            parallel: 16,
            move_interval: Duration::from_millis(250),
        }
    }
}

/// Delivers the persistent topics' queues this gateway owns.
pub struct Manager {
    queues: Queues,
    pusher: Arc<Pusher>,
    publisher: Arc<Publisher>,
    topics: Arc<dyn TopicSource>,
    metrics: Arc<Metrics>,
    config: ManagerConfig,
    cookie: String,
    owned: Mutex<HashMap<String, Delivery>>,
    /// Event logs this gateway moves, with when each is read next.
    logs: Mutex<HashMap<String, schedule::LogSchedule>>,
    /// Wakes the ownership loop early (a bucket got notifications, a topic was created).
    wake: tokio::sync::Notify,
}

mod mover;
mod schedule;

/// A shard this gateway delivers: its task, and the signal that the mover appended to it.
struct Delivery {
    task: tokio::task::JoinHandle<()>,
    appended: Arc<tokio::sync::Notify>,
}

/// What one gateway remembers about a shard while it owns it.
#[derive(Default)]
struct ShardState {
    /// Failed pushes and the time of the last one, by marker.
    attempts: HashMap<u64, (u64, Instant)>,
    /// Entries handled but not yet trimmed (a held-back entry precedes them).
    done: BTreeSet<u64>,
    /// The last pass's pushes failed and none succeeded.
    endpoint_down: bool,
    /// The last pass read a whole batch (more may be waiting).
    full_batch: bool,
    /// Every entry up to this marker is handled (delivered or expired).
    cursor: Option<u64>,
    /// The queue is trimmed up to this marker.
    trimmed: Option<u64>,
    /// When the queue was last trimmed.
    last_trim: Option<Instant>,
    /// The topic whose lag this shard last reported.
    reported_for: Option<String>,
}

/// Handled entries waiting to be trimmed.
struct Untrimmed {
    /// The last of them (the cursor).
    up_to: u64,
    /// How many there are.
    count: u64,
    /// How long until their trim is due by [`TRIM_PERIOD`] (zero: due now).
    due_in: Duration,
}

impl ShardState {
    /// The handled entries not trimmed yet, if any.
    fn untrimmed(&self) -> Option<Untrimmed> {
        let up_to = self.cursor?;
        if self.trimmed.is_some_and(|t| t >= up_to) {
            return None;
        }
        Some(Untrimmed {
            up_to,
            count: up_to + 1 - self.trimmed.map_or(0, |t| t + 1),
            due_in: self.last_trim.map_or(Duration::ZERO, |at| TRIM_PERIOD.saturating_sub(at.elapsed())),
        })
    }
}

/// Handled entries are trimmed in batches of this many, or after [`TRIM_PERIOD`].
const TRIM_BATCH: u64 = 256;
/// Longest a handled entry waits to be trimmed.
const TRIM_PERIOD: Duration = Duration::from_secs(1);

/// A queue entry as read: the event, or why it could not be decoded.
type Decoded = std::result::Result<QueuedEvent, String>;

/// Longest pause between probes of an unreachable endpoint.
const DOWN_CEILING: Duration = Duration::from_secs(2);

enum Outcome {
    Done,
    Failed,
    Later,
}

/// Longest a stopping gateway spends handing its leases back.
const HAND_BACK_TIMEOUT: Duration = Duration::from_secs(3);

/// Aborts a task when dropped (the mover stops with the ownership loop).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Manager {
    /// A manager over `publisher`'s queues and pusher.
    pub fn new(publisher: Arc<Publisher>, topics: Arc<dyn TopicSource>, config: ManagerConfig) -> Arc<Manager> {
        Arc::new(Manager {
            queues: publisher.queues.clone(),
            pusher: publisher.pusher.clone(),
            metrics: publisher.metrics.clone(),
            publisher,
            topics,
            config,
            cookie: format!("{:016x}", rand::random::<u64>()),
            owned: Mutex::new(HashMap::new()),
            logs: Mutex::new(HashMap::new()),
            wake: tokio::sync::Notify::new(),
        })
    }

    /// Shards this gateway owns now.
    pub fn owned_shards(&self) -> Vec<String> {
        let owned = self.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut names: Vec<String> =
            owned.iter().filter(|(_, d)| !d.task.is_finished()).map(|(n, _)| n.clone()).collect();
        names.sort();
        names
    }

    /// Asks for an ownership pass now (new queue shards or event logs were registered).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Runs ownership passes until the process ends; each also publishes this gateway's
    /// counters for `topic stats`. Moves events from the owned logs meanwhile.
    pub async fn run(self: Arc<Self>) {
        let mover = tokio::spawn(self.clone().move_events());
        let _stop_mover = AbortOnDrop(mover);
        loop {
            if let Err(e) = self.ownership_pass().await {
                tracing::warn!(error = %e, "notification ownership pass failed");
            }
            if let Err(e) = self.queues.publish_counters(&self.cookie, &self.metrics.snapshot()).await {
                tracing::debug!(error = %e, "publishing notification counters failed");
            }
            let jitter = Duration::from_millis(rand::random::<u64>() % 100);
            tokio::select! {
                _ = tokio::time::sleep(self.config.poll + jitter) => {}
                _ = self.wake.notified() => {}
            }
        }
    }

    /// Takes, renews or gives up shards and event logs once.
    pub async fn ownership_pass(self: &Arc<Self>) -> Result<()> {
        self.own_logs().await?;
        let shards = self.queues.registry().await?;
        for shard in &shards {
            let result = self.queues.own(shard, &self.cookie, self.config.lease).await;
            let mut owned = self.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match result {
                Ok(()) => {
                    if owned.get(shard).is_none_or(|d| d.task.is_finished()) {
                        let appended = Arc::new(tokio::sync::Notify::new());
                        let task = tokio::spawn(self.clone().deliver(shard.clone(), appended.clone()));
                        owned.insert(shard.clone(), Delivery { task, appended });
                    }
                }
                Err(e) => {
                    if let Some(delivery) = owned.remove(shard) {
                        tracing::info!(%shard, error = %e, "lost ownership of a notification queue");
                        delivery.task.abort();
                    }
                }
            }
        }
        let mut owned = self.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        owned.retain(|name, delivery| {
            let keep = shards.contains(name);
            if !keep {
                delivery.task.abort();
            }
            keep
        });
        Ok(())
    }

    /// Gives every owned shard and log up, so other gateways take over at once.
    /// The leases are handed back concurrently and for at most [`HAND_BACK_TIMEOUT`]: with
    /// the cluster unreachable they are left to expire, and the gateway still stops.
    pub async fn shutdown(&self) {
        let owned: Vec<(String, Delivery)> =
            self.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner).drain().collect();
        for (_, delivery) in &owned {
            delivery.task.abort();
        }
        let shards = futures::future::join_all(owned.iter().map(|(shard, _)| self.queues.disown(shard, &self.cookie)));
        let hand_back = futures::future::join(self.disown_logs(), shards);
        if tokio::time::timeout(HAND_BACK_TIMEOUT, hand_back).await.is_err() {
            tracing::warn!("could not hand notification leases back in time; they will expire");
        }
    }

    /// Wakes the delivery of `shard` if this gateway owns it: the mover appended to it.
    fn appended(&self, shard: &str) {
        if let Some(delivery) = self.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(shard) {
            delivery.appended.notify_one();
        }
    }

    /// Delivers `shard` until its lease is lost. Entries arrive in bursts, one per mover pass
    /// (every `move_interval` per gateway): this gateway's mover wakes the task, and a poll at
    /// that interval (stretching to four while nothing comes) finds other gateways' appends.
    /// An unreachable endpoint is probed less and less often, appends or not.
    async fn deliver(self: Arc<Self>, shard: String, appended: Arc<tokio::sync::Notify>) {
        let interval = self.config.move_interval;
        let mut state = ShardState::default();
        let mut idle = interval;
        loop {
            match self.pass(&shard, &mut state).await {
                Ok(true) if state.full_batch => idle = interval,
                Ok(progress) => {
                    if progress {
                        idle = interval;
                    }
                    // Handled entries are trimmed once due, whatever else comes (a pass that
                    // cannot trim, its topic gone, is not repeated at once).
                    let wait = state.untrimmed().map_or(idle, |u| u.due_in.max(TRIM_PERIOD / 10).min(idle));
                    if state.endpoint_down {
                        tokio::time::sleep(wait).await;
                        idle = (idle * 2).min(DOWN_CEILING);
                    } else {
                        tokio::select! {
                            () = tokio::time::sleep(wait) => {}
                            () = appended.notified() => {}
                        }
                        idle = (idle * 2).min(interval * 4);
                    }
                }
                Err(e) if e.errno == Errno::Busy => {
                    tracing::info!(%shard, "another gateway owns this queue now");
                    if let Some(topic) = &state.reported_for {
                        self.metrics.topic(topic).clear_lag(&shard);
                    }
                    return;
                }
                Err(e) => {
                    tracing::warn!(%shard, error = %e, "notification delivery pass failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// One pass over a shard; true when it made progress.
    async fn pass(&self, shard: &str, state: &mut ShardState) -> Result<bool> {
        let (key, generation) = topic_of_shard(shard);
        let Some(topic) = self.topics.topic(&key).await? else { return Ok(false) };
        let current = topic.dest.queue;
        let known = current.generation == generation || topic.dest.draining.iter().any(|g| g.generation == generation);
        let older_pending = topic.dest.draining.iter().any(|g| g.generation < generation);
        if !topic.dest.persistent || !known || older_pending {
            return Ok(false);
        }
        let mut progress = false;
        // Entries up to the cursor are handled: read only what follows. An endpoint that
        // was down is probed with one entry rather than a whole batch.
        let batch = if state.endpoint_down { 1 } else { self.config.batch };
        let listing = self.queues.list(shard, state.cursor, batch).await?;
        state.full_batch = listing.truncated;
        let counters = self.metrics.topic(&topic.name);
        state.reported_for = Some(topic.name.clone());
        if listing.entries.is_empty() {
            counters.set_lag(shard, 0, 0);
            // A drained old generation is trimmed at once, so it can be retired.
            self.trim(shard, state, generation != current.generation).await?;
            if generation != current.generation && shard == shard_name(&key, generation, 0) {
                progress |= self.finish_generation(&key, &topic, generation).await?;
            }
            return Ok(progress);
        }
        // Decoded once here; an unreadable entry gets a group of its own and is dropped (counted).
        let mut groups: BTreeMap<(String, String), Vec<(u64, Decoded)>> = BTreeMap::new();
        let mut order = Vec::new();
        let (mut not_done, mut oldest_ns) = (0u64, None);
        for entry in &listing.entries {
            order.push(entry.marker);
            if state.done.contains(&entry.marker) {
                continue;
            }
            let event = QueuedEvent::decode(&entry.data);
            not_done += 1;
            if let (None, Ok(e)) = (oldest_ns, &event) {
                oldest_ns = Some(e.created_ns);
            }
            let group = match &event {
                Ok(e) => (e.record.s3.bucket.name.clone(), e.record.s3.object.key.clone()),
                Err(_) => (String::new(), entry.marker.to_string()),
            };
            groups.entry(group).or_default().push((entry.marker, event));
        }
        // The lag as this pass found it; past a full batch the queue's header counts the rest.
        let pending = match listing.truncated {
            false => not_done,
            true => self.queues.header(shard).await.map_or(not_done, |h| {
                let handled = state.done.len() as u64 + state.untrimmed().map_or(0, |u| u.count);
                h.committed_entries.saturating_sub(handled).max(not_done)
            }),
        };
        counters.set_lag(shard, pending, oldest_ns.unwrap_or(0));
        let topic_ref = &topic;
        let attempts = &state.attempts;
        // Once a push fails, the rest of this pass does not hammer the endpoint: the
        // entries not yet tried wait for the next pass (their retry count unchanged).
        let failed = &std::sync::atomic::AtomicBool::new(false);
        let results: Vec<Vec<(u64, Outcome)>> = futures::stream::iter(groups.into_values())
            .map(|entries| async move {
                let mut outcomes = Vec::new();
                for (marker, event) in entries {
                    let previous = attempts.get(&marker).copied();
                    let outcome = self.handle(topic_ref, marker, event, previous, failed).await;
                    let stop = !matches!(outcome, Outcome::Done);
                    outcomes.push((marker, outcome));
                    if stop {
                        break;
                    }
                }
                outcomes
            })
            .buffer_unordered(self.config.parallel)
            .collect()
            .await;
        let mut pushed = false;
        for (marker, outcome) in results.into_iter().flatten() {
            match outcome {
                Outcome::Done => {
                    pushed = true;
                    state.done.insert(marker);
                    state.attempts.remove(&marker);
                    progress = true;
                }
                Outcome::Failed => {
                    let a = state.attempts.entry(marker).or_insert((0, Instant::now()));
                    *a = (a.0 + 1, Instant::now());
                }
                Outcome::Later => {}
            }
        }
        state.endpoint_down = failed.load(std::sync::atomic::Ordering::Relaxed) && !pushed;
        if let Some(up_to) = order.iter().take_while(|m| state.done.contains(m)).last().copied() {
            state.cursor = Some(up_to);
            state.done.retain(|m| *m > up_to);
        }
        self.trim(shard, state, false).await?;
        Ok(progress)
    }

    /// Removes handled entries from the queue: in batches, since every trim is a
    /// replicated write (`now` trims whatever is handled). Entries handled but not yet
    /// trimmed are delivered again only if another gateway takes the shard over.
    async fn trim(&self, shard: &str, state: &mut ShardState, now: bool) -> Result<()> {
        let Some(untrimmed) = state.untrimmed() else { return Ok(()) };
        if now || untrimmed.count >= TRIM_BATCH || untrimmed.due_in.is_zero() {
            self.queues.trim(shard, &self.cookie, untrimmed.up_to).await?;
            state.trimmed = Some(untrimmed.up_to);
            state.last_trim = Some(Instant::now());
        }
        Ok(())
    }

    async fn handle(
        &self,
        topic: &Topic,
        marker: u64,
        event: Decoded,
        attempts: Option<(u64, Instant)>,
        failed: &std::sync::atomic::AtomicBool,
    ) -> Outcome {
        let counters = self.metrics.topic(&topic.name);
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::error!(topic = %topic.name, marker, error = %e, "dropping an unreadable queue entry");
                counters.expired.inc();
                return Outcome::Done;
            }
        };
        let ttl = topic.dest.time_to_live.unwrap_or(self.config.time_to_live);
        let max_retries = topic.dest.max_retries.unwrap_or(self.config.max_retries);
        let sleep = Duration::from_secs(topic.dest.retry_sleep_duration.unwrap_or(self.config.retry_sleep));
        let (tried, last) = attempts.map_or((0, None), |(n, at)| (n, Some(at)));
        let age = Duration::from_nanos(crate::now_ns().saturating_sub(event.created_ns));
        if ttl > 0 && age > Duration::from_secs(ttl) {
            self.expire(topic, &event, &format!("older than time_to_live {ttl}s")).await;
            return Outcome::Done;
        }
        if max_retries > 0 && tried >= max_retries {
            self.expire(topic, &event, &format!("{tried} failed pushes (max_retries {max_retries})")).await;
            return Outcome::Done;
        }
        if last.is_some_and(|at| at.elapsed() < sleep) || failed.load(std::sync::atomic::Ordering::Relaxed) {
            return Outcome::Later;
        }
        match self.pusher.push(topic, &event).await {
            Ok(()) => {
                counters.delivered.inc();
                counters.latency.record(age);
                Outcome::Done
            }
            Err(e) => {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
                counters.failures.inc();
                tracing::debug!(topic = %topic.name, event = %event.record.event_id, error = %e, "push failed; will retry");
                Outcome::Failed
            }
        }
    }

    /// Sends an expired event to the dead-letter topic, or drops it; counted and logged either way.
    async fn expire(&self, topic: &Topic, event: &QueuedEvent, why: &str) {
        let counters = self.metrics.topic(&topic.name);
        let dlq_name = &topic.dest.dead_letter_topic;
        if !dlq_name.is_empty() {
            match self.dead_letter(topic, event).await {
                Ok(()) => {
                    counters.dead_lettered.inc();
                    tracing::info!(topic = %topic.name, event = %event.record.event_id, dead_letter_topic = %dlq_name, "{why}: dead-lettered");
                    return;
                }
                Err(e) => tracing::error!(topic = %topic.name, error = %e, "dead-lettering failed"),
            }
        }
        counters.expired.inc();
        tracing::warn!(topic = %topic.name, event = %event.record.event_id, key = %event.record.s3.object.key, "{why}: event dropped");
    }

    async fn dead_letter(&self, topic: &Topic, event: &QueuedEvent) -> std::result::Result<(), String> {
        let key = Topic::key(&topic.tenant, &topic.dest.dead_letter_topic);
        let dlq = self.topics.topic(&key).await.map_err(|e| e.to_string())?;
        let dlq = dlq.ok_or_else(|| format!("dead-letter topic {key} does not exist"))?;
        let moved = QueuedEvent { topic: key, created_ns: crate::now_ns(), ..event.clone() };
        if dlq.dest.persistent {
            self.publisher.enqueue_now(&dlq, &moved).await.map_err(|e| e.to_string())
        } else {
            self.pusher.push(&dlq, &moved).await
        }
    }

    /// Once every shard of an old generation is empty, removes them and tells the topic.
    async fn finish_generation(&self, key: &str, topic: &Topic, generation: u32) -> Result<bool> {
        let Some(old) = topic.dest.draining.iter().find(|g| g.generation == generation).copied() else {
            return Ok(false);
        };
        for name in shard_names(key, old) {
            let h = self.queues.header(&name).await?;
            if h.committed_entries > 0 || h.reservations > 0 {
                return Ok(false);
            }
        }
        self.topics.generation_drained(key, generation).await?;
        self.queues.remove(key, old).await?;
        tracing::info!(topic = %key, generation, "old queue generation drained and removed");
        Ok(true)
    }
}
