//! Per-topic counters: queued, delivered, failed, expired, dead-lettered and lost events,
//! requests that waited for or were refused queue room, and delivery latency.

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A monotonically increasing count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Latencies in power-of-two microsecond buckets (bucket `i` holds `[2^i, 2^(i+1))` µs).
#[derive(Debug)]
pub struct Latency {
    buckets: [AtomicU64; 40],
}

impl Default for Latency {
    fn default() -> Self {
        Latency { buckets: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl Latency {
    /// Records one latency.
    pub fn record(&self, d: Duration) {
        let us = d.as_micros().max(1) as u64;
        let i = (63 - us.leading_zeros() as usize).min(39);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
    }

    /// The `q` quantile (0..=1) in milliseconds, as the upper edge of its bucket; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let target = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= target {
                return (1u64 << (i + 1)) as f64 / 1000.0;
            }
        }
        0.0
    }
}

/// One topic's counters.
#[derive(Debug, Default)]
pub struct TopicCounters {
    /// Events this gateway's writes logged (or dead-lettered) for the queue.
    pub queued: Counter,
    /// Events this gateway moved from bucket index logs into the queue.
    pub moved: Counter,
    /// Events delivered.
    pub delivered: Counter,
    /// Failed pushes.
    pub failures: Counter,
    /// Events past `time_to_live` or `max_retries` sent to the dead-letter topic.
    pub dead_lettered: Counter,
    /// Events past `time_to_live` or `max_retries` dropped (no dead-letter topic, or it failed).
    pub expired: Counter,
    /// Synchronous events whose push failed.
    pub lost: Counter,
    /// Requests that waited for room in a full queue.
    pub waits: Counter,
    /// Requests refused with 503 because the queue stayed full.
    pub full: Counter,
    /// Time from the operation to the endpoint's acknowledgement.
    pub latency: Latency,
}

/// A snapshot of one topic's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct CounterSnapshot {
    /// See [`TopicCounters`].
    pub queued: u64,
    /// See [`TopicCounters`].
    #[serde(default)]
    pub moved: u64,
    /// See [`TopicCounters`].
    pub delivered: u64,
    /// See [`TopicCounters`].
    pub failures: u64,
    /// See [`TopicCounters`].
    pub dead_lettered: u64,
    /// See [`TopicCounters`].
    pub expired: u64,
    /// See [`TopicCounters`].
    pub lost: u64,
    /// See [`TopicCounters`].
    pub waits: u64,
    /// See [`TopicCounters`].
    pub full: u64,
    /// Median delivery latency in ms.
    pub latency_p50_ms: f64,
    /// 99th percentile delivery latency in ms.
    pub latency_p99_ms: f64,
}

impl CounterSnapshot {
    /// The sum of several gateways' counters (latencies: the worst gateway's).
    pub fn sum(all: &[CounterSnapshot]) -> CounterSnapshot {
        let mut t = CounterSnapshot::default();
        for c in all {
            t.queued += c.queued;
            t.moved += c.moved;
            t.delivered += c.delivered;
            t.failures += c.failures;
            t.dead_lettered += c.dead_lettered;
            t.expired += c.expired;
            t.lost += c.lost;
            t.waits += c.waits;
            t.full += c.full;
            t.latency_p50_ms = t.latency_p50_ms.max(c.latency_p50_ms);
            t.latency_p99_ms = t.latency_p99_ms.max(c.latency_p99_ms);
        }
        t
    }
}

/// Reads one figure of a snapshot.
type Field = fn(&CounterSnapshot) -> f64;

/// Counters of every topic this gateway touched.
#[derive(Debug, Default)]
pub struct Metrics {
    topics: Mutex<BTreeMap<String, Arc<TopicCounters>>>,
}

impl Metrics {
    /// The counters of topic `name`.
    pub fn topic(&self, name: &str) -> Arc<TopicCounters> {
        let mut topics = self.topics.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        topics.entry(name.to_owned()).or_default().clone()
    }

    /// Snapshots of all topics' counters.
    pub fn snapshot(&self) -> BTreeMap<String, CounterSnapshot> {
        let topics = self.topics.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        topics
            .iter()
            .map(|(name, c)| {
                let snap = CounterSnapshot {
                    queued: c.queued.get(),
                    moved: c.moved.get(),
                    delivered: c.delivered.get(),
                    failures: c.failures.get(),
                    dead_lettered: c.dead_lettered.get(),
                    expired: c.expired.get(),
                    lost: c.lost.get(),
                    waits: c.waits.get(),
                    full: c.full.get(),
                    latency_p50_ms: c.latency.quantile_ms(0.5),
                    latency_p99_ms: c.latency.quantile_ms(0.99),
                };
                (name.clone(), snap)
            })
            .collect()
    }

    /// The counters in the Prometheus text format, labelled by topic.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let snaps = self.snapshot();
        let series: [(&str, Field); 11] = [
            ("queued_total", |s| s.queued as f64),
            ("delivered_total", |s| s.delivered as f64),
            ("push_failures_total", |s| s.failures as f64),
            ("dead_lettered_total", |s| s.dead_lettered as f64),
            ("expired_total", |s| s.expired as f64),
            ("lost_total", |s| s.lost as f64),
            ("reserve_waits_total", |s| s.waits as f64),
            ("queue_full_total", |s| s.full as f64),
            ("moved_total", |s| s.moved as f64),
            ("delivery_latency_p50_ms", |s| s.latency_p50_ms),
            ("delivery_latency_p99_ms", |s| s.latency_p99_ms),
        ];
        for (name, get) in series {
            out.push_str(&format!(
                "# TYPE shoal_notify_{name} {}\n",
                if name.ends_with("_ms") { "gauge" } else { "counter" }
            ));
            for (topic, s) in &snaps {
                out.push_str(&format!("shoal_notify_{name}{{topic=\"{topic}\"}} {}\n", get(s)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_buckets() {
        let l = Latency::default();
        assert_eq!(l.quantile_ms(0.5), 0.0);
        for _ in 0..98 {
            l.record(Duration::from_micros(300));
        }
        l.record(Duration::from_millis(40));
        l.record(Duration::from_millis(40));
        assert_eq!(l.quantile_ms(0.5), 0.512);
        assert_eq!(l.quantile_ms(0.99), 65.536);
        let m = Metrics::default();
        m.topic("t").queued.inc();
        assert!(m.prometheus().contains("shoal_notify_queued_total{topic=\"t\"} 1"));
    }
}
