//! The garbage collector: a queue of data chunks to delete, kept as omap entries of
//! [`GC_SHARDS`] objects in the metadata pool (key: due time and a tag; the object by the
//! hash of the entry's head), each processed by whichever gateway holds its lease (the
//! `lock` class).
//!
//! Two kinds of entry:
//! - *garbage*: the tail of a replaced or deleted object, deleted once due (`gc_min_wait`
//!   after it was replaced, for readers still on it);
//! - *intent*: recorded before a writer's first chunk and removed once the object is
//!   linked; if the writer died, the chunks are deleted once due (their count is unknown:
//!   chunks are written in order, so deletion stops at the first missing one).
//!
//! Either way a segment the key's head object refers to is never deleted. An entry for the
//! head of a version (versioning-enabled buckets give each version its own head) names the
//! index shard of its key instead: the head and its segments are in use while the index
//! holds the version the head records, and are deleted together once it does not.

use crate::clock::{new_tag, now_ns};
use crate::head::{ObjectMeta, read_meta};
use crate::layout::{self, GC_SHARDS, gc_object};
use crate::meta::absent_as_empty;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_client::{IoCtx, WriteOp};
use shoal_objclass::bucket_index::{self, ChangeOutput, GetVersionInput, GetVersionOutput, LinkInput, Segment, Which};
use shoal_objclass::lock::{LockRequest, LockType, UnlockRequest};
use shoal_placement::hash::str_hash;
use shoal_types::{Errno, Result, Versioned};
use std::time::Duration;

const LOCK_NAME: &str = "gc_process";
/// Entries read from the queue at once.
const BATCH: u32 = 256;
/// How long a pass holds the queue's lease. A pass stops taking new batches after half of
/// it, so the lease never lapses while it works; the next pass goes on from there.
const LEASE: Duration = Duration::from_secs(60);

/// One queued piece of work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcEntry {
    /// The head object the data belonged to.
    pub head: String,
    /// The segments to delete.
    pub segments: Vec<Segment>,
    /// A writer's intent: the segment sizes are unknown (delete chunks up to the first missing one).
    pub intent: bool,
    /// Where the key of a version's head is indexed: head and segments are deleted once
    /// the index no longer holds the head's version (`None`: a key's plain head, which
    /// outlives its data).
    pub version: Option<IndexRef>,
    /// For a writer's intent on a key's plain head: where the key is indexed. A head that
    /// holds this write but was never linked (its writer died in between) is linked
    /// when the entry is handled, as RGW's `dir_suggest` does, so listings agree with
    /// GETs again and the tail it replaced is collected.
    pub plain: Option<IndexRef>,
}

/// The key a write's head belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadOf {
    /// Where the key is indexed.
    pub at: IndexRef,
    /// The head is the version's own (else it is the key's plain head).
    pub own: bool,
}

/// A key in a bucket index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRef {
    /// The index shard object holding the key.
    pub shard: String,
    /// The object key.
    pub key: String,
}

impl Versioned for GcEntry {
    const NAME: &'static str = "gc entry";
    /// Version 3 adds `plain`, version 2 `version`.
    const VERSION: u8 = 3;

    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        use shoal_types::encoding::decode_body;
        match version {
            // Version 2 is version 3 without its last field: a `None` appended reads as it.
            2 => Some(decode_body::<GcEntry>("gc entry v2", &[body, &[0]].concat())),
            1 => Some(
                decode_body::<(String, Vec<Segment>, bool)>("gc entry v1", body)
                    .map(|(head, segments, intent)| GcEntry { head, segments, intent, version: None, plain: None }),
            ),
            _ => None,
        }
    }
}

impl GcEntry {
    /// The intent of a writer about to write chunks under `prefix` for `head` (of the key
    /// `key` says, if any).
    pub fn intent(head: &str, prefix: &str, key: Option<HeadOf>) -> GcEntry {
        let segments = vec![Segment { prefix: prefix.to_owned(), size: 0 }];
        let (version, plain) = match key {
            Some(HeadOf { at, own: true }) => (Some(at), None),
            Some(HeadOf { at, own: false }) => (None, Some(at)),
            None => (None, None),
        };
        GcEntry { head: head.to_owned(), segments, intent: true, version, plain }
    }
}

/// What one GC pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// Entries handled.
    pub entries: u64,
    /// Chunk objects deleted.
    pub chunks_deleted: u64,
    /// Segments still referred to by their head (dropped without deleting).
    pub in_use: u64,
    /// Heads of removed versions deleted.
    pub heads_deleted: u64,
}

impl std::ops::AddAssign for GcReport {
    fn add_assign(&mut self, other: GcReport) {
        self.entries += other.entries;
        self.chunks_deleted += other.chunks_deleted;
        self.in_use += other.in_use;
        self.heads_deleted += other.heads_deleted;
    }
}

/// Where a queued entry is: its queue object and omap key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queued {
    /// The queue object.
    pub object: String,
    /// The entry's key.
    pub key: String,
}

/// The GC queue and its processor.
pub struct Gc {
    queue: IoCtx,
    index: IoCtx,
    data: IoCtx,
    stripe: u64,
    min_wait: Duration,
    concurrency: usize,
}

impl Gc {
    /// A queue in `meta_pool` for chunks in `data_pool` of objects indexed in `index_pool`,
    /// with the stripe size, wait and concurrency of `config`.
    pub fn new(meta_pool: IoCtx, index_pool: IoCtx, data_pool: IoCtx, config: &crate::config::GatewayConfig) -> Gc {
        let mut queue = meta_pool;
        queue.set_namespace(layout::NS_GC);
        Gc {
            queue,
            index: index_pool,
            data: data_pool,
            stripe: config.stripe_size,
            min_wait: config.gc_min_wait,
            concurrency: config.gc_max_concurrent_io.max(1),
        }
    }

    /// Queues `entry` in the queue object of its head, due after `wait`.
    async fn enqueue(&self, entry: &GcEntry, wait: Duration) -> Result<Queued> {
        let object = gc_object(str_hash(entry.head.as_bytes()) % GC_SHARDS);
        let key = format!("{:020}.{}", now_ns() + wait.as_nanos() as u64, new_tag());
        let op = WriteOp::new().create(false).omap_set([(Bytes::from(key.clone()), Bytes::from(entry.encode()))]);
        self.queue.operate(&object, op).await?;
        Ok(Queued { object, key })
    }

    /// Records a writer's intent; returns where it is for [`Gc::forget`].
    pub async fn record_intent(&self, entry: &GcEntry) -> Result<Queued> {
        self.enqueue(entry, self.min_wait).await
    }

    /// Drops an intent once its data is linked (or handed to the upload's records).
    pub async fn forget(&self, intent: &Queued) -> Result<()> {
        let op = WriteOp::new().omap_rm_keys([Bytes::from(intent.key.clone())]);
        self.queue.operate(&intent.object, op).await.map(|_| ())
    }

    /// Queues the tail of a replaced object.
    pub async fn retire(&self, head: &str, tail: &[Segment]) -> Result<()> {
        self.retire_after(head, tail, self.min_wait).await
    }

    /// Queues data no reader can be on (an aborted upload's parts) for the next pass.
    pub async fn retire_now(&self, head: &str, tail: &[Segment]) -> Result<()> {
        self.retire_after(head, tail, Duration::ZERO).await
    }

    /// Queues a version's head and tail, deleted once the index no longer holds it (the
    /// caller unlinks it after this returns).
    pub async fn retire_version(&self, head: &str, tail: &[Segment], version: IndexRef) -> Result<()> {
        let entry = GcEntry {
            head: head.to_owned(),
            segments: tail.to_vec(),
            intent: false,
            version: Some(version),
            plain: None,
        };
        self.enqueue(&entry, self.min_wait).await.map(|_| ())
    }

    async fn retire_after(&self, head: &str, tail: &[Segment], wait: Duration) -> Result<()> {
        if tail.is_empty() {
            return Ok(());
        }
        let entry =
            GcEntry { head: head.to_owned(), segments: tail.to_vec(), intent: false, version: None, plain: None };
        self.enqueue(&entry, wait).await.map(|_| ())
    }

    /// Whether the index holds the version whose head has `meta` (a version of that id,
    /// or the null version, written by the same write).
    async fn linked(&self, at: &IndexRef, meta: Option<&ObjectMeta>) -> Result<bool> {
        let Some(meta) = meta else { return Ok(false) };
        let which = meta.version.clone().map_or(Which::Null, Which::Id);
        Ok(self.indexed(at, which).await?.is_some_and(|e| e.order == meta.order))
    }

    /// Version `which` of the key at `at`, as its index shard holds it.
    async fn indexed(&self, at: &IndexRef, which: Which) -> Result<Option<bucket_index::IndexEntry>> {
        let input = GetVersionInput { key: at.key.clone(), which };
        match self.index.exec(&at.shard, bucket_index::CLASS, "get_version", input.encode()).await {
            Ok(out) => Ok(GetVersionOutput::decode(&out)?.entry),
            Err(e) if e.errno == Errno::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Links the plain head `head` of the key at `at`, holding `meta`, unless the index
    /// holds that write or a newer one; queues the tail of the entry it replaces.
    async fn link_plain_head(&self, at: &IndexRef, head: &str, meta: &ObjectMeta) -> Result<()> {
        if self.indexed(at, Which::Current).await?.is_some_and(|e| e.order >= meta.order) {
            return Ok(());
        }
        tracing::warn!(%head, order = %meta.order, "linking a head its writer wrote but never linked");
        let entry = meta.index_entry(false, Default::default());
        let input = LinkInput { key: at.key.clone(), entry, ..Default::default() };
        let out = self.index.exec(&at.shard, bucket_index::CLASS, "link", input.encode()).await?;
        match ChangeOutput::decode(&out)? {
            ChangeOutput { applied: true, previous: Some(previous) } => self.retire(head, &previous.tail).await,
            _ => Ok(()),
        }
    }

    /// Processes due entries (all entries with `include_all`) of each queue object whose
    /// lease this gateway can take; another gateway's pass in progress on an object makes
    /// this one skip it.
    pub async fn process(&self, include_all: bool) -> Result<GcReport> {
        let mut report = GcReport::default();
        for shard in 0..GC_SHARDS {
            report += self.process_object(&gc_object(shard), include_all).await?;
        }
        Ok(report)
    }

    async fn process_object(&self, object: &str, include_all: bool) -> Result<GcReport> {
        let cookie = new_tag();
        let lock = LockRequest {
            name: LOCK_NAME.into(),
            lock_type: LockType::Exclusive,
            cookie: cookie.clone(),
            tag: String::new(),
            description: "gateway garbage collection".into(),
            duration_ns: LEASE.as_nanos() as u64,
            may_renew: false,
            must_renew: false,
        };
        self.queue.operate(object, WriteOp::new().create(false)).await?;
        match self.queue.exec(object, shoal_objclass::lock::CLASS, "lock", lock.encode()).await {
            Err(e) if matches!(e.errno, Errno::Busy | Errno::Exists) => return Ok(GcReport::default()),
            other => other?,
        };
        let result = self.process_locked(object, include_all).await;
        let unlock = UnlockRequest { name: LOCK_NAME.into(), cookie };
        if let Err(e) = self.queue.exec(object, shoal_objclass::lock::CLASS, "unlock", unlock.encode()).await {
            tracing::warn!(error = %e, %object, "releasing the GC lease failed");
        }
        result
    }

    /// Deletes due entries of `object`, `concurrency` at a time, until none is due or half
    /// the lease has passed.
    async fn process_locked(&self, object: &str, include_all: bool) -> Result<GcReport> {
        use futures::StreamExt as _;
        let started = tokio::time::Instant::now();
        let mut report = GcReport::default();
        let cutoff = if include_all { u64::MAX.to_string() } else { format!("{:020}", now_ns()) };
        while started.elapsed() < LEASE / 2 {
            let (entries, _) = self.queue.omap_vals(object, b"", b"", BATCH).await?;
            let due: Vec<_> = entries.into_iter().filter(|(k, _)| k.as_ref() < cutoff.as_bytes()).collect();
            if due.is_empty() {
                break;
            }
            let mut done = futures::stream::iter(due)
                .map(|(key, value)| self.handle_queued(object, key, value))
                .buffer_unordered(self.concurrency);
            while let Some(handled) = done.next().await {
                report += handled?;
            }
        }
        Ok(report)
    }

    /// Handles one queue entry and removes it from the queue.
    async fn handle_queued(&self, object: &str, key: Bytes, value: Bytes) -> Result<GcReport> {
        let mut report = GcReport { entries: 1, ..GcReport::default() };
        match GcEntry::decode(&value) {
            Ok(entry) => self.handle(&entry, &mut report).await?,
            Err(e) => tracing::error!(error = %e, "dropping an unreadable gc entry"),
        }
        self.queue.operate(object, WriteOp::new().omap_rm_keys([key])).await?;
        Ok(report)
    }

    async fn handle(&self, entry: &GcEntry, report: &mut GcReport) -> Result<()> {
        // Whatever queued it, data the key's head refers to is never deleted (a writer's
        // intent that succeeded, or an abort racing a completion that linked the parts);
        // a version's head refers to its data as long as the index holds the version.
        let meta = read_meta(&self.data, &entry.head).await?;
        if let (Some(at), Some(meta)) = (&entry.plain, &meta)
            && meta.tail.iter().any(|s| entry.segments.iter().any(|e| e.prefix == s.prefix))
        {
            self.link_plain_head(at, &entry.head, meta).await?;
        }
        let version_linked = match &entry.version {
            Some(at) => self.linked(at, meta.as_ref()).await?,
            None => false,
        };
        let meta = meta.filter(|_| entry.version.is_none());
        let in_use =
            |prefix: &str| version_linked || meta.as_ref().is_some_and(|m| m.tail.iter().any(|s| s.prefix == prefix));
        for segment in &entry.segments {
            if in_use(&segment.prefix) {
                report.in_use += 1;
                continue;
            }
            let known = (!entry.intent).then(|| segment.size.div_ceil(self.stripe));
            let mut index = 0u64;
            while known.is_none_or(|n| index < n) {
                match self.data.remove(&layout::chunk_object(&segment.prefix, index)).await {
                    Ok(()) => report.chunks_deleted += 1,
                    Err(e) if e.errno == Errno::NotFound => {
                        if known.is_none() {
                            break;
                        }
                    }
                    Err(e) => return Err(e),
                }
                index += 1;
            }
        }
        if entry.version.is_some() && !version_linked {
            match self.data.remove(&entry.head).await {
                Ok(()) => report.heads_deleted += 1,
                Err(e) if e.errno == Errno::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Entries waiting in the queue (due or not).
    pub async fn pending(&self) -> Result<u64> {
        let mut pending = 0;
        for shard in 0..GC_SHARDS {
            pending += absent_as_empty(self.queue.omap_vals_all(&gc_object(shard), b"").await)?.len() as u64;
        }
        Ok(pending)
    }

    /// Runs a pass every `period` until the process ends.
    pub async fn run(self: std::sync::Arc<Self>, period: Duration) {
        loop {
            tokio::time::sleep(period).await;
            // Removing data must work when the cluster is full, and then it cannot wait:
            // every entry is processed, whatever its age (reads of removed data may fail).
            let urgent = self.data.is_full().await;
            match shoal_client::freeing_space(self.process(urgent)).await {
                Ok(r) if r.entries > 0 => tracing::info!(?r, "gc pass"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "gc pass failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_their_golden_bytes_and_versions_1_and_2_still_decode() {
        let at = IndexRef { shard: "s".into(), key: "k".into() };
        let entry = GcEntry::intent("h", "p", Some(HeadOf { at: at.clone(), own: false }));
        assert_eq!((entry.version.as_ref(), entry.plain.as_ref()), (None, Some(&at)));
        // head, segments [(prefix, size)], intent, version, plain.
        let golden = [3, 1, b'h', 1, 1, b'p', 0, 1, 0, 1, 1, b's', 1, b'k'];
        assert_eq!(entry.encode(), golden);
        assert_eq!(GcEntry::decode(&golden).unwrap(), entry);
        let own = GcEntry::intent("h", "p", Some(HeadOf { at: at.clone(), own: true }));
        assert_eq!((own.version.as_ref(), own.plain.as_ref()), (Some(&at), None));
        let v2 = [2, 1, b'h', 1, 1, b'p', 0, 1, 1, 1, b's', 1, b'k'];
        assert_eq!(GcEntry::decode(&v2).unwrap(), own);
        let v1 = [1, 1, b'h', 1, 1, b'p', 0, 1];
        assert_eq!(GcEntry::decode(&v1).unwrap(), GcEntry::intent("h", "p", None));
    }
}
