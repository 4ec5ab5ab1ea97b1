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
use super::schedule::LogSchedule;
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

impl LogSchedule {
    fn now(interval: Duration) -> LogSchedule {
        LogSchedule { next: Instant::now(), idle: interval, cursor: None }
    }
}

/// Where a logged event goes.
enum Destination<T> {
    /// To this queue shard, carrying `T` (the event and its topic).
    Queue(String, T),
    /// Nowhere: unreadable, or its topic is gone (counted and logged).
    Drop,
    /// Not known now (its topic could not be read): it and the rest of its log wait.
    Unknown,
}

/// An event on its way from log `log` (its index in the pass) to a queue shard.
struct Moving<T> {
    log: usize,
    seq: u64,
    payload: T,
}

/// Groups the events read from several logs by queue shard, each group in log order (so
/// the events of one key, which share a log and a shard, keep their order); dropped events
/// are done at once, and an unknown destination holds back the rest of its log.
fn group<T>(logs: Vec<Vec<(u64, Destination<T>)>>, passes: &mut [LogPass]) -> BTreeMap<String, Vec<Moving<T>>> {
    let mut groups: BTreeMap<String, Vec<Moving<T>>> = BTreeMap::new();
    for (log, events) in logs.into_iter().enumerate() {
        for (seq, destination) in events {
            match destination {
                Destination::Queue(shard, payload) => {
                    groups.entry(shard).or_default().push(Moving { log, seq, payload })
                }
                Destination::Drop => passes[log].done.push(seq),
                Destination::Unknown => {
                    passes[log].hold(seq);
                    break;
                }
            }
        }
    }
    groups
}

/// Records that the first `appended` events of `group` went into their queue (they are
/// trimmed) and the others stay in their logs.
fn settle<T>(passes: &mut [LogPass], group: &[Moving<T>], appended: usize) {
    for (k, moving) in group.iter().enumerate() {
        if k < appended {
            passes[moving.log].done.push(moving.seq);
        } else {
            passes[moving.log].hold(moving.seq);
        }
    }
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

impl LogPass {
    /// Event `seq` stays in the log.
    fn hold(&mut self, seq: u64) {
        self.held = Some(self.held.map_or(seq, |h| h.min(seq)));
    }
}

impl LogSchedule {
    /// Plans the next read of a log after a pass that started at `started`: soon while it
    /// moves events, less and less often while it is empty or blocked; reads resume after
    /// the last event gone, never past one that stays.
    fn after(&mut self, pass: &LogPass, started: Instant, interval: Duration) {
        let found = !pass.done.is_empty();
        let held = pass.held.is_some();
        self.idle = if found && !held { interval } else { (self.idle * 2).min(IDLE_CEILING) };
        self.next = if pass.more && !held { started } else { started + self.idle };
        self.cursor = match pass.held {
            Some(first) => first.checked_sub(1).max(self.cursor),
            None => pass.last.max(self.cursor),
        };
    }
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
        futures::future::join_all(logs.iter().map(|log| self.publisher.logs.disown(log, &self.cookie))).await;
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
                    if let Some(schedule) = logs.get_mut(log) {
                        schedule.after(&pass, started, interval);
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
        let mut read = Vec::with_capacity(reads.len());
        for (i, result) in reads.into_iter().enumerate() {
            let out = match result {
                Ok(out) => out,
                Err(e) => {
                    passes[i].lost = e.errno == Errno::NotFound;
                    tracing::warn!(log = %logs[i], error = %e, "reading an event log failed");
                    read.push(Vec::new());
                    continue;
                }
            };
            passes[i].more = out.more;
            passes[i].last = out.events.last().map(|(seq, _)| *seq);
            let mut events = Vec::with_capacity(out.events.len());
            for (seq, bytes) in out.events {
                let destination = match self.destination(&bytes).await {
                    Ok(Some((shard, topic))) => Destination::Queue(shard, (bytes, topic)),
                    Ok(None) => Destination::Drop,
                    Err(e) => {
                        tracing::warn!(log = %logs[i], error = %e, "reading a logged event's topic failed");
                        Destination::Unknown
                    }
                };
                let unknown = matches!(destination, Destination::Unknown);
                events.push((seq, destination));
                if unknown {
                    break;
                }
            }
            read.push(events);
        }
        let appends: Vec<_> = group(read, &mut passes)
            .into_iter()
            .map(|(shard, group)| async move {
                let n = self.append(&shard, &group).await;
                (group, n)
            })
            .collect();
        let appended: Vec<_> = futures::stream::iter(appends).buffer_unordered(PARALLEL).collect().await;
        for (group, n) in appended {
            for moving in &group[..n] {
                self.metrics.topic(&moving.payload.1.name).moved.inc();
            }
            settle(&mut passes, &group, n);
        }
        let mut trims = Vec::new();
        for (i, pass) in passes.iter().enumerate().filter(|(_, p)| !p.done.is_empty()) {
            let trim = self.publisher.logs.trim(logs[i], &self.cookie, pass.done.clone());
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
    async fn append(&self, shard: &str, group: &[Moving<(Bytes, Arc<Topic>)>]) -> usize {
        let entries = group.iter().map(|m| m.payload.0.clone()).collect();
        match self.queues.enqueue(shard, entries).await {
            Ok(0) => {}
            Ok(n) => {
                self.appended(shard);
                return n as usize;
            }
            Err(e) => {
                tracing::warn!(%shard, error = %e, "appending logged events to a queue failed");
                return 0;
            }
        }
        let Some(first) = group.first() else { return 0 };
        match self.queues.header(shard).await {
            Ok(h)
                if h.committed_entries == 0
                    && h.reservations == 0
                    && first.payload.0.len() as u64 > h.capacity_bytes =>
            {
                match QueuedEvent::decode(&first.payload.0) {
                    Ok(event) => self.expire(&first.payload.1, &event, "larger than a whole queue shard").await,
                    Err(e) => tracing::error!(%shard, error = %e, "dropping an unreadable logged event"),
                }
                1
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// A logged event for the model: its key (which picks its shard) or an unknown topic.
    #[derive(Clone, Debug)]
    enum Logged {
        Key(u8),
        Dropped,
        Unknown,
    }

    fn logged() -> impl Strategy<Value = Logged> {
        prop_oneof![8 => (0u8..12).prop_map(Logged::Key), 1 => Just(Logged::Dropped), 1 => Just(Logged::Unknown)]
    }

    proptest! {
        /// Whatever the logs hold and however much room each shard has: per key, what goes
        /// into a queue is a prefix of the key's events in log order; nothing is trimmed
        /// that did not go in (or was not dropped); nothing after an unknown destination
        /// moves; and the cursor never passes an event that stays.
        #[test]
        fn moves_keep_per_key_order_and_lose_nothing(
            logs in proptest::collection::vec(proptest::collection::vec(logged(), 0..12), 1..4),
            room in proptest::collection::vec(0usize..6, 3),
            cursor in proptest::option::of(0u64..3),
        ) {
            let first_seq = cursor.map_or(0, |c| c + 1);
            let read: Vec<Vec<(u64, Destination<u8>)>> = logs
                .iter()
                .map(|events| {
                    events
                        .iter()
                        .enumerate()
                        .map(|(i, e)| {
                            let seq = first_seq + i as u64;
                            let destination = match e {
                                Logged::Key(k) => Destination::Queue(format!("shard{}", k % 3), *k),
                                Logged::Dropped => Destination::Drop,
                                Logged::Unknown => Destination::Unknown,
                            };
                            (seq, destination)
                        })
                        .collect()
                })
                .collect();
            let mut passes: Vec<LogPass> = logs.iter().map(|_| LogPass::default()).collect();
            for (pass, events) in passes.iter_mut().zip(&logs) {
                pass.last = (!events.is_empty()).then(|| first_seq + events.len() as u64 - 1);
            }
            let groups = group(read, &mut passes);
            let mut queued: BTreeMap<String, Vec<(usize, u64, u8)>> = BTreeMap::new();
            for (shard, group) in &groups {
                let index: usize = shard[5..].parse().unwrap();
                let n = room[index].min(group.len());
                queued.insert(shard.clone(), group[..n].iter().map(|m| (m.log, m.seq, m.payload)).collect());
                settle(&mut passes, group, n);
            }
            for (log, events) in logs.iter().enumerate() {
                let done: BTreeSet<u64> = passes[log].done.iter().copied().collect();
                prop_assert_eq!(done.len(), passes[log].done.len(), "an event trimmed twice");
                let stop = events.iter().position(|e| matches!(e, Logged::Unknown)).unwrap_or(events.len());
                for key in 0u8..12 {
                    // This log's events of `key`, in log order, and those that went in.
                    let of_key: Vec<u64> = events[..stop]
                        .iter()
                        .enumerate()
                        .filter(|(_, e)| matches!(e, Logged::Key(k) if *k == key))
                        .map(|(i, _)| first_seq + i as u64)
                        .collect();
                    let shard = format!("shard{}", key % 3);
                    let went: Vec<u64> = queued
                        .get(&shard)
                        .map(|q| q.iter().filter(|(l, _, k)| *l == log && *k == key).map(|(_, s, _)| *s).collect())
                        .unwrap_or_default();
                    prop_assert_eq!(&went[..], &of_key[..went.len()], "key {} of log {} out of order", key, log);
                    prop_assert!(went.iter().all(|s| done.contains(s)));
                    prop_assert!(of_key[went.len()..].iter().all(|s| !done.contains(s)), "trimmed but not queued");
                }
                for (i, e) in events.iter().enumerate() {
                    let seq = first_seq + i as u64;
                    if i >= stop || matches!(e, Logged::Unknown) {
                        prop_assert!(!done.contains(&seq), "moved past an unknown destination");
                    } else if matches!(e, Logged::Dropped) {
                        prop_assert!(done.contains(&seq));
                    }
                }
                let mut schedule = LogSchedule { next: Instant::now(), idle: Duration::from_millis(250), cursor };
                schedule.after(&passes[log], Instant::now(), Duration::from_millis(250));
                let next_cursor = schedule.cursor.map_or(0, |c| c + 1);
                let first_staying = (first_seq..first_seq + events.len() as u64).find(|s| !done.contains(s));
                if let Some(staying) = first_staying {
                    prop_assert!(next_cursor <= staying, "the cursor passed event {}", staying);
                }
                prop_assert!(schedule.cursor >= cursor, "the cursor went back");
            }
        }
    }
}
