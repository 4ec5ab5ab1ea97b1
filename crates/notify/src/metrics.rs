//! Per-topic counters: queued, delivered, failed, expired, dead-lettered and lost events,
//! requests that waited for or were refused queue room, delivery latency, and the lag of
//! the queue shards this gateway delivers (pending events, age of the oldest).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;
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
    sum_us: AtomicU64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency { buckets: std::array::from_fn(|_| AtomicU64::new(0)), sum_us: AtomicU64::new(0) }
    }
}

impl Latency {
    /// Records one latency.
    pub fn record(&self, d: Duration) {
        let us = d.as_micros().max(1) as u64;
        let i = (63 - us.leading_zeros() as usize).min(39);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Writes the latencies as a Prometheus histogram in seconds (bucket upper bounds
    /// `2^(i+1)` µs, counts per bucket).
    fn encode(&self, encoder: prometheus_client::encoding::MetricEncoder) -> std::fmt::Result {
        let mut encoder = encoder;
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        let mut buckets: Vec<(f64, u64)> =
            counts.iter().enumerate().map(|(i, c)| ((1u64 << (i + 1)) as f64 / 1e6, *c)).collect();
        buckets.push((f64::INFINITY, 0));
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum, counts.iter().sum(), &buckets, None)
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
    /// Per queue shard this gateway delivers: events pending, and when the oldest was queued
    /// (ns since the epoch; 0 when none is pending).
    lag: Mutex<BTreeMap<String, (u64, u64)>>,
}

impl TopicCounters {
    /// Records what a delivery pass found in `shard`: `pending` events, the oldest queued
    /// at `oldest_ns`.
    pub fn set_lag(&self, shard: &str, pending: u64, oldest_ns: u64) {
        self.lag
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(shard.to_owned(), (pending, oldest_ns));
    }

    /// Forgets `shard` (this gateway no longer delivers it).
    pub fn clear_lag(&self, shard: &str) {
        self.lag.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(shard);
    }

    /// Events pending in the shards this gateway delivers, and the age in seconds of the
    /// oldest of them at `now_ns`.
    pub fn lag(&self, now_ns: u64) -> (u64, f64) {
        let lag = self.lag.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let pending = lag.values().map(|(n, _)| n).sum();
        let oldest = lag.values().filter(|(n, at)| *n > 0 && *at > 0).map(|(_, at)| *at).min();
        (pending, oldest.map_or(0.0, |at| now_ns.saturating_sub(at) as f64 / 1e9))
    }
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
    /// Events pending in the queue shards the gateway delivers.
    #[serde(default)]
    pub pending: u64,
    /// Age of the oldest of them, in seconds.
    #[serde(default)]
    pub oldest_pending_s: f64,
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
            t.pending += c.pending;
            t.oldest_pending_s = t.oldest_pending_s.max(c.oldest_pending_s);
        }
        t
    }
}

/// Reads one counter of a topic.
type Field = fn(&TopicCounters) -> u64;

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

    fn topics(&self) -> Vec<(String, Arc<TopicCounters>)> {
        let topics = self.topics.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        topics.iter().map(|(name, c)| (name.clone(), c.clone())).collect()
    }

    /// Snapshots of all topics' counters.
    pub fn snapshot(&self) -> BTreeMap<String, CounterSnapshot> {
        let now = crate::now_ns();
        self.topics()
            .into_iter()
            .map(|(name, c)| {
                let (pending, oldest_pending_s) = c.lag(now);
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
                    pending,
                    oldest_pending_s,
                };
                (name, snap)
            })
            .collect()
    }
}

/// Exports every topic's counters to Prometheus under `notify_`, labelled by topic.
impl Collector for Metrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let topics = self.topics();
        let counters: [(&str, &str, Field); 9] = [
            ("queued", "Events logged for a persistent queue", |c| c.queued.get()),
            ("moved", "Events moved from bucket index logs into a queue", |c| c.moved.get()),
            ("delivered", "Events an endpoint acknowledged", |c| c.delivered.get()),
            ("push_failures", "Failed pushes to an endpoint", |c| c.failures.get()),
            ("dead_lettered", "Expired events sent to the dead-letter topic", |c| c.dead_lettered.get()),
            ("expired", "Expired events dropped", |c| c.expired.get()),
            ("lost", "Synchronous events whose push failed", |c| c.lost.get()),
            ("reserve_waits", "Requests that waited for room in a full queue", |c| c.waits.get()),
            ("queue_full", "Requests refused because the queue stayed full", |c| c.full.get()),
        ];
        for (name, help, get) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (topic, c) in &topics {
                ConstCounter::new(get(c)).encode(family.encode_family(&[("topic", topic.as_str())])?)?;
            }
        }
        let now = crate::now_ns();
        let lags: Vec<(&str, (u64, f64))> = topics.iter().map(|(t, c)| (t.as_str(), c.lag(now))).collect();
        let mut family = encoder.encode_descriptor(
            "pending",
            "Events waiting in the queue shards this gateway delivers",
            None,
            MetricType::Gauge,
        )?;
        for (topic, (pending, _)) in &lags {
            ConstGauge::new(*pending as i64).encode(family.encode_family(&[("topic", *topic)])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "oldest_pending",
            "Age of the oldest event waiting in those shards",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?;
        for (topic, (_, age)) in &lags {
            ConstGauge::new(*age).encode(family.encode_family(&[("topic", *topic)])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "delivery_latency",
            "Time from the operation to the endpoint's acknowledgement",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (topic, c) in &topics {
            c.latency.encode(family.encode_family(&[("topic", topic.as_str())])?)?;
        }
        Ok(())
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
        m.topic("t").latency.record(Duration::from_micros(300));
        m.topic("t").set_lag("t.0.3", 5, 1_000_000_000);
        m.topic("t").set_lag("t.0.4", 0, 0);
        let mut registry = prometheus_client::registry::Registry::with_prefix("notify");
        registry.register_collector(Box::new(Arc::new(m)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("notify_queued_total{topic=\"t\"} 1"), "{text}");
        assert!(text.contains("notify_pending{topic=\"t\"} 5"), "{text}");
        assert!(text.contains("notify_delivery_latency_seconds_bucket{le=\"0.000512\",topic=\"t\"} 1"), "{text}");
        assert!(text.contains("notify_delivery_latency_seconds_count{topic=\"t\"} 1"), "{text}");
    }
}
