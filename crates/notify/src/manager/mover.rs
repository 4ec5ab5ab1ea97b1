//! Moving logged events from bucket index logs into their topic queues.
//!
//! One task per gateway reads, every `move_interval`, each owned log that is due, groups the events by queue
//! shard (the topic's current generation), appends each group with one `enqueue` and then
//! removes what was appended from each log with one `log_trim`, so a pass costs a few
//! writes whatever the number of events. Events of one key come from one log in log order
//! and go to one shard in that order; when a shard is full, the events that did not fit
//! stay first in their log for a later pass. A gateway that dies between the append and
//! the trim leaves events that the next mover appends again: a duplicate with the same
//! `eventId`, never a loss.

use super::Manager;
use crate::event::QueuedEvent;
use crate::publish::Publisher;
use crate::topic::Topic;
use bytes::Bytes;
use futures::StreamExt;
use shoal_types::{Errno, Result};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest pause before an empty (or blocked) log is read again.
const IDLE_CEILING: Duration = Duration::from_secs(1);
/// Events read from one log per pass.
const MOVE_BATCH: u32 = 1000;
/// Logs read, queues appended and logs trimmed at once.
const PARALLEL: usize = 16;

/// When the mover reads an owned log next, and from where.
pub(super) struct LogSchedule {
    next: Instant,
    idle: Duration,
    /// Every event up to this sequence number is moved and trimmed: reads start after it,
    /// so they seek past the trimmed keys' tombstones instead of walking them.
    cursor: Option<u64>,
}

impl LogSchedule {
    fn now(interval: Duration) -> LogSchedule {
        LogSchedule { next: Instant::now(), idle: interval, cursor: None }
    }
}

/// An event on its way from log `log` (its index in the pass) to a queue shard.
struct Moving {
    log: usize,
    seq: u64,
    bytes: Bytes,
    topic: Arc<Topic>,
}

/// What a pass found in one log.
#[derive(Default)]
struct LogPass {
    /// Sequence numbers appended to their queues (or dropped, counted): trimmed.
    done: Vec<u64>,
    /// The first event that stays (a full queue, a failed read of its topic).
    held: Option<u64>,
    /// The last event read.
    last: Option<u64>,
    /// The read returned a whole batch: more are waiting.
    more: bool,
    /// The log or its lease is gone.
    lost: bool,
}

impl Manager {
    /// Takes or renews the mover lease of every registered log; forgets the others.
    pub(super) async fn own_logs(&self) -> Result<()> {
        let registered = self.publisher.logs.registry().await?;
        for log in &registered {
            let result = self.publisher.logs.own(log, &self.cookie, self.config.lease).await;
            let mut logs = self.logs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match result {
                Ok(()) => {
                    logs.entry(log.clone()).or_insert_with(|| LogSchedule::now(self.config.move_interval));
                }
                Err(e) => {
                    if logs.remove(log).is_some() {
                        tracing::info!(%log, error = %e, "lost the mover lease of an event log");
                    }
                }
            }
        }
        let mut logs = self.logs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        logs.retain(|log, _| registered.contains(log));
        Ok(())
    }

    /// Gives every log up.
    pub(super) async fn disown_logs(&self) {
        let logs: Vec<String> =
            self.logs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).drain().map(|(l, _)| l).collect();
        for log in logs {
            let _ = self.publisher.logs.disown(&log, &self.cookie).await;
        }
    }

    /// Event logs this gateway moves now.
    pub fn owned_logs(&self) -> Vec<String> {
        let mut names: Vec<String> =
            self.logs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).keys().cloned().collect();
        names.sort();
        names
    }

    /// Moves events until the process ends.
    pub(super) async fn move_events(self: Arc<Self>) {
        let interval = self.config.move_interval;
        loop {
            let started = Instant::now();
            let due: Vec<(String, Option<u64>)> = {
                let logs = self.logs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                logs.iter().filter(|(_, s)| s.next <= started).map(|(l, s)| (l.clone(), s.cursor)).collect()
            };
            if !due.is_empty() {
                let passes = self.move_pass(&due).await;
                let mut logs = self.logs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                for ((log, _), pass) in due.iter().zip(passes) {
                    if pass.lost {
                        logs.remove(log);
                        continue;
                    }
                    let Some(schedule) = logs.get_mut(log) else { continue };
                    let found = !pass.done.is_empty();
                    let held = pass.held.is_some();
                    schedule.idle = match (found, held) {
                        (true, false) => interval,
                        _ => (schedule.idle * 2).min(IDLE_CEILING),
                    };
                    schedule.next = if pass.more && !held { started } else { started + schedule.idle };
                    // Held events are read again; everything before the first of them is gone.
                    match pass.held {
                        Some(first) => schedule.cursor = first.checked_sub(1).max(schedule.cursor),
                        None => schedule.cursor = pass.last.max(schedule.cursor),
                    }
                }
            }
            tokio::time::sleep(interval.saturating_sub(started.elapsed())).await;
        }
    }

    /// One pass over `logs`: read, append to the queues, trim.
    async fn move_pass(&self, due: &[(String, Option<u64>)]) -> Vec<LogPass> {
        // Futures are built first: closures inside the stream would not be `Send` for `spawn`.
        let reads: Vec<_> =
            due.iter().map(|(log, cursor)| self.publisher.logs.list(log, *cursor, MOVE_BATCH)).collect();
        let reads: Vec<_> = futures::stream::iter(reads).buffered(PARALLEL).collect().await;
        let logs: Vec<&String> = due.iter().map(|(log, _)| log).collect();
        let mut passes: Vec<LogPass> = logs.iter().map(|_| LogPass::default()).collect();
        let mut groups: BTreeMap<String, Vec<Moving>> = BTreeMap::new();
        for (i, read) in reads.into_iter().enumerate() {
            let out = match read {
                Ok(out) => out,
                Err(e) => {
                    passes[i].lost = e.errno == Errno::NotFound;
                    tracing::warn!(log = %logs[i], error = %e, "reading an event log failed");
                    continue;
                }
            };
            passes[i].more = out.more;
            passes[i].last = out.events.last().map(|(seq, _)| *seq);
            for (seq, bytes) in out.events {
                match self.destination(&bytes).await {
                    Ok(Some((shard, topic))) => {
                        groups.entry(shard).or_default().push(Moving { log: i, seq, bytes, topic })
                    }
                    Ok(None) => passes[i].done.push(seq),
                    Err(e) => {
                        // The rest of this log waits, keeping its order.
                        tracing::warn!(log = %logs[i], error = %e, "reading a logged event's topic failed");
                        passes[i].held = Some(seq);
                        break;
                    }
                }
            }
        }
        let appends: Vec<_> = groups
            .into_iter()
            .map(|(shard, group)| async move {
                let n = self.append(&shard, &group).await;
                (group, n)
            })
            .collect();
        let appended: Vec<(Vec<Moving>, usize)> =
            futures::stream::iter(appends).buffer_unordered(PARALLEL).collect().await;
        for (group, n) in appended {
            for (k, moving) in group.into_iter().enumerate() {
                if k < n {
                    self.metrics.topic(&moving.topic.name).moved.inc();
                    passes[moving.log].done.push(moving.seq);
                } else {
                    let held = &mut passes[moving.log].held;
                    *held = Some(held.map_or(moving.seq, |h| h.min(moving.seq)));
                }
            }
        }
        let mut trims = Vec::new();
        for (i, pass) in passes.iter().enumerate().filter(|(_, p)| !p.done.is_empty()) {
            let trim = self.publisher.logs.trim(&logs[i], &self.cookie, pass.done.clone());
            trims.push(async move { (i, trim.await) });
        }
        let trimmed: Vec<_> = futures::stream::iter(trims).buffer_unordered(PARALLEL).collect().await;
        for (i, result) in trimmed {
            if let Err(e) = result {
                // Another gateway moves this log now; it appends these events again.
                tracing::info!(log = %logs[i], error = %e, "trimming an event log failed");
                passes[i].lost = true;
            }
        }
        passes
    }

    /// The queue shard a logged event goes to, or `None` when it is dropped (unreadable,
    /// or its topic is gone or no longer persistent; counted and logged).
    async fn destination(&self, bytes: &[u8]) -> Result<Option<(String, Arc<Topic>)>> {
        let route = match QueuedEvent::route(bytes) {
            Ok(route) => route,
            Err(e) => {
                tracing::error!(error = %e, "dropping an unreadable logged event");
                return Ok(None);
            }
        };
        let topic = self.topics.topic(&route.topic).await?;
        match topic {
            Some(topic) if topic.dest.persistent => {
                Ok(Some((Publisher::shard(&topic, &route.bucket, &route.key), topic)))
            }
            other => {
                let name = route.topic.rsplit(':').next().unwrap_or_default();
                self.metrics.topic(name).expired.inc();
                let why = if other.is_some() { "is no longer persistent" } else { "was deleted" };
                tracing::warn!(topic = %route.topic, key = %route.key, "dropping a logged event: its topic {why}");
                Ok(None)
            }
        }
    }

    /// Appends a group to its shard; returns how many (a prefix) went in. An event larger
    /// than the whole (empty) shard could never go in: it is expired instead.
    async fn append(&self, shard: &str, group: &[Moving]) -> usize {
        let entries = group.iter().map(|m| m.bytes.clone()).collect();
        match self.queues.enqueue(shard, entries).await {
            Ok(0) => {}
            Ok(n) => return n as usize,
            Err(e) => {
                tracing::warn!(%shard, error = %e, "appending logged events to a queue failed");
                return 0;
            }
        }
        let Some(first) = group.first() else { return 0 };
        match self.queues.header(shard).await {
            Ok(h) if h.committed_entries == 0 && h.reservations == 0 && first.bytes.len() as u64 > h.capacity_bytes => {
                match QueuedEvent::decode(&first.bytes) {
                    Ok(event) => self.expire(&first.topic, &event, "larger than a whole queue shard").await,
                    Err(e) => tracing::error!(%shard, error = %e, "dropping an unreadable logged event"),
                }
                1
            }
            _ => 0,
        }
    }
}
