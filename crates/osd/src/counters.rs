//! The OSD's counters since start: operation latencies by type, client bytes, checksum
//! errors and repairs, and the store's own statistics. `perf dump` shows them as JSON the
//! way Ceph's admin socket does; [`OsdCounters::register`] exports them to Prometheus.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use shoal_store::ObjectStore;
use shoal_types::msg::{OsdOp, PeerRequest, Request};
use shoal_types::op::Step;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What kind of request an operation latency belongs to.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum OpKind {
    /// A client operation that changes nothing (Ceph's `op_r`).
    Read,
    /// A client operation that changes the object (`op_w`).
    Write,
    /// A client operation calling an object class method (`op_rw` when it writes).
    Call,
    /// A replicated write applied for a primary (`subop_w`).
    ReplicaWrite,
    /// Peering and recovery requests from other OSDs.
    Peer,
    /// PG listings, watches, notifies and administrative commands.
    Other,
}

impl OpKind {
    fn of(request: &Request) -> OpKind {
        match request {
            Request::Op(op) => OpKind::of_op(op),
            Request::Peer(PeerRequest::RepOp(_) | PeerRequest::EcWrite(_)) => OpKind::ReplicaWrite,
            Request::Peer(_) => OpKind::Peer,
            _ => OpKind::Other,
        }
    }

    fn of_op(op: &OsdOp) -> OpKind {
        if op.steps.iter().any(|s| matches!(s, Step::Exec { .. })) {
            OpKind::Call
        } else if op.steps.iter().any(Step::is_mutation) {
            OpKind::Write
        } else {
            OpKind::Read
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Call => "call",
            OpKind::ReplicaWrite => "replica_write",
            OpKind::Peer => "peer",
            OpKind::Other => "other",
        }
    }

    const ALL: [OpKind; 6] =
        [OpKind::Read, OpKind::Write, OpKind::Call, OpKind::ReplicaWrite, OpKind::Peer, OpKind::Other];
}

impl EncodeLabelValue for OpKind {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        encoder.write_str(self.name())
    }
}

/// The label of an operation latency series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabels {
    /// The operation's kind.
    pub op: OpKind,
}

/// Counters one OSD keeps since it started; shared by its shards and its connections.
#[derive(Debug)]
pub struct OsdCounters {
    latency: Family<OpLabels, Histogram>,
    /// The family's histogram of each [`OpKind`], looked up once: a request records
    /// without the family's lock and map.
    by_kind: [Histogram; OpKind::ALL.len()],
    /// Per [`OpKind`]: requests answered and their total time in ns, for `perf dump`.
    totals: [(AtomicU64, AtomicU64); OpKind::ALL.len()],
    client_bytes_written: Counter,
    checksum_errors: Counter,
    read_repairs: Counter,
    slow_requests: Counter,
    recovered_objects: Counter,
    recovered_bytes: Counter,
}

impl Default for OsdCounters {
    fn default() -> Self {
        // 50 µs to ~26 s.
        let latency: Family<OpLabels, Histogram> =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.000_05, 2.0, 20)));
        let by_kind = OpKind::ALL.map(|op| latency.get_or_create(&OpLabels { op }).clone());
        OsdCounters {
            latency,
            by_kind,
            totals: Default::default(),
            client_bytes_written: Counter::default(),
            checksum_errors: Counter::default(),
            read_repairs: Counter::default(),
            slow_requests: Counter::default(),
            recovered_objects: Counter::default(),
            recovered_bytes: Counter::default(),
        }
    }
}

/// The bytes of data an operation asks to write.
pub fn write_bytes(op: &OsdOp) -> usize {
    op.steps
        .iter()
        .map(|s| match s {
            Step::Write { data, .. } | Step::WriteFull { data } | Step::Append { data } => data.len(),
            _ => 0,
        })
        .sum()
}

impl OsdCounters {
    /// Counts the bytes a client request asks to write; returns its kind for [`Self::answered`].
    pub fn received(&self, request: &Request) -> OpKind {
        if let Request::Op(op) = request {
            self.client_bytes_written.inc_by(write_bytes(op) as u64);
        }
        OpKind::of(request)
    }

    /// Records a request of `kind` answered `took` after it arrived; whether it was slow
    /// (over `complaint`, counted as such).
    pub fn answered(&self, kind: OpKind, took: Duration, complaint: Duration) -> bool {
        self.by_kind[kind.index()].observe(took.as_secs_f64());
        let (count, sum_ns) = &self.totals[kind.index()];
        count.fetch_add(1, Ordering::Relaxed);
        sum_ns.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
        let slow = took > complaint;
        if slow {
            self.slow_requests.inc();
        }
        slow
    }

    /// Counts a local copy that failed its checksum (or could not be read).
    pub fn checksum_error(&self) {
        self.checksum_errors.inc();
    }

    /// Counts a local copy rewritten from a replica.
    pub fn read_repaired(&self) {
        self.read_repairs.inc();
    }

    /// Counts objects this OSD, as primary, saw recovered on copies that lacked them, and
    /// the bytes recovery wrote for them.
    pub fn recovered(&self, objects: u32, bytes: u64) {
        self.recovered_objects.inc_by(u64::from(objects));
        self.recovered_bytes.inc_by(bytes);
    }

    /// The counters as `perf dump` shows them: per operation kind `avgcount`, `sum` and
    /// `avgtime` (seconds), as Ceph prints latencies.
    pub fn json(&self) -> serde_json::Value {
        let mut ops = serde_json::Map::new();
        for kind in OpKind::ALL {
            let (count, sum_ns) = &self.totals[kind.index()];
            let (count, sum) = (count.load(Ordering::Relaxed), sum_ns.load(Ordering::Relaxed) as f64 / 1e9);
            let avg = if count == 0 { 0.0 } else { sum / count as f64 };
            ops.insert(
                format!("op_{}_latency", kind.name()),
                serde_json::json!({ "avgcount": count, "sum": sum, "avgtime": avg }),
            );
        }
        serde_json::json!({
            "client_bytes_written": self.client_bytes_written.get(),
            "checksum_errors": self.checksum_errors.get(),
            "read_repairs": self.read_repairs.get(),
            "slow_requests": self.slow_requests.get(),
            "recovered_objects": self.recovered_objects.get(),
            "recovered_bytes": self.recovered_bytes.get(),
            "latency": ops,
        })
    }

    /// Registers these counters, and the store's statistics read at each scrape, under
    /// `shoal_osd_`.
    pub fn register(&self, registry: &mut Registry, store: Arc<ObjectStore>) {
        registry.register_with_unit(
            "op_latency",
            "Time from receiving a request to answering it, by kind",
            Unit::Seconds,
            self.latency.clone(),
        );
        registry.register_with_unit(
            "client_written",
            "Bytes clients asked to write",
            Unit::Bytes,
            self.client_bytes_written.clone(),
        );
        registry.register(
            "checksum_errors",
            "Local copies that failed their checksum on read",
            self.checksum_errors.clone(),
        );
        registry.register(
            "slow_requests",
            "Requests answered after more than osd_op_complaint_time",
            self.slow_requests.clone(),
        );
        registry.register(
            "read_repairs",
            "Local copies rewritten from a replica after a bad checksum",
            self.read_repairs.clone(),
        );
        registry.register(
            "recovered_objects",
            "Objects recovered on copies that lacked them, by this OSD as primary",
            self.recovered_objects.clone(),
        );
        registry.register_with_unit(
            "recovered",
            "Bytes recovery wrote to copies that lacked objects, by this OSD as primary",
            Unit::Bytes,
            self.recovered_bytes.clone(),
        );
        registry.register_collector(Box::new(StoreCollector(store)));
    }
}

/// The store's statistics, read when Prometheus scrapes.
struct StoreCollector(Arc<ObjectStore>);

impl std::fmt::Debug for StoreCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreCollector").finish_non_exhaustive()
    }
}

impl StoreCollector {
    fn counter<N: EncodeCounterValue>(
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        value: N,
    ) -> std::fmt::Result {
        let counter = ConstCounter::new(value);
        counter.encode(encoder.encode_descriptor(name, help, unit, counter.metric_type())?)
    }

    fn gauge(
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        value: f64,
    ) -> std::fmt::Result {
        let gauge = ConstGauge::new(value);
        gauge.encode(encoder.encode_descriptor(name, help, unit, gauge.metric_type())?)
    }
}

impl Collector for StoreCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let kv = self.0.stats();
        let space = self.0.space();
        let (bytes, seconds) = (Some(&Unit::Bytes), Some(&Unit::Seconds));
        let e = &mut encoder;
        let micros = |us: u64| us as f64 / 1e6;
        Self::counter(e, "kv_user_written", "Bytes of keys and values given to RocksDB", bytes, kv.user_bytes_written)?;
        Self::counter(e, "kv_wal_written", "Bytes RocksDB wrote to its WAL", bytes, kv.wal_bytes)?;
        Self::counter(e, "kv_wal_syncs", "WAL syncs", None, kv.wal_syncs)?;
        Self::counter(e, "kv_flush_written", "Bytes written by memtable flushes", bytes, kv.flush_bytes)?;
        Self::counter(e, "kv_flushes", "Memtable flushes", None, kv.flushes)?;
        Self::counter(e, "kv_compaction_written", "Bytes written by compactions", bytes, kv.compaction_bytes)?;
        Self::counter(e, "kv_compactions", "Compactions", None, kv.compactions)?;
        Self::counter(e, "kv_compaction", "Time spent compacting", seconds, micros(kv.compaction_micros))?;
        Self::counter(e, "kv_flush", "Time spent flushing memtables", seconds, micros(kv.flush_micros))?;
        Self::counter(
            e,
            "kv_stall",
            "Time writers were stalled or slowed by RocksDB",
            seconds,
            micros(kv.stall_micros),
        )?;
        Self::counter(e, "kv_block_cache_hits", "Block reads served by the block cache", None, kv.block_cache_hits)?;
        Self::counter(
            e,
            "kv_block_cache_misses",
            "Block reads that missed the block cache",
            None,
            kv.block_cache_misses,
        )?;
        Self::counter(e, "kv_memtable_hits", "Point reads served by a memtable", None, kv.memtable_hits)?;
        Self::counter(e, "kv_memtable_misses", "Point reads not served by a memtable", None, kv.memtable_misses)?;
        Self::gauge(
            e,
            "kv_write_amplification",
            "(WAL + flush + compaction) / user bytes",
            None,
            kv.write_amplification(),
        )?;
        Self::gauge(e, "kv_live", "Bytes RocksDB's files take", bytes, kv.live_bytes as f64)?;
        Self::gauge(e, "kv_memtables", "Bytes of memory RocksDB's memtables hold", bytes, kv.memtable_bytes as f64)?;
        let readers = "Bytes of memory RocksDB's file indexes and filters hold outside the cache";
        Self::gauge(e, "kv_table_readers", readers, bytes, kv.table_reader_bytes as f64)?;
        Self::counter(e, "data_written", "Bytes written to the data device", bytes, space.written)?;
        Self::counter(e, "data_syncs", "Data device syncs", None, space.syncs)?;
        Self::gauge(e, "data_device", "Size of the data device", bytes, space.device as f64)?;
        Self::gauge(e, "data_used", "Data device bytes referenced by objects", bytes, space.referenced as f64)?;
        Self::gauge(e, "data_free", "Data device bytes free", bytes, space.free as f64)?;
        Self::gauge(
            e,
            "data_unreferenced",
            "Data device bytes freed but not yet reusable (awaiting a sync)",
            bytes,
            space.unreferenced as f64,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_over_the_complaint_time_count_as_slow() {
        let counters = OsdCounters::default();
        let complaint = Duration::from_secs(30);
        assert!(!counters.answered(OpKind::Read, Duration::from_millis(5), complaint));
        assert!(!counters.answered(OpKind::Read, complaint, complaint), "only beyond it");
        assert!(counters.answered(OpKind::Write, Duration::from_secs(31), complaint));
        let dump = counters.json();
        assert_eq!(dump["slow_requests"], 1);
        assert_eq!(dump["latency"]["op_read_latency"]["avgcount"], 2);
    }
}
