//! The data path: objects as a head object (metadata, and the data when small) plus tail
//! chunk objects, linked into the bucket index after the head is written.
//!
//! A write streams its data into tail chunks named by a fresh tag (so readers of the old
//! object never see them), then replaces the head in one atomic operation, then links the
//! index entry. Head and index entry carry an *order* (time + tag); both refuse a change
//! older than what they hold, so concurrent writers of a key converge on one winner. The
//! replaced object's tail goes to the garbage collector ([`crate::gc`]), which deletes it
//! after `gc_min_wait`; a tail whose writer died before linking it is found the same way,
//! through the *intent* recorded before its first chunk.

use crate::gc::{Gc, GcEntry};
use crate::layout;
use crate::meta::{BucketInfo, CannedAcl};
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use shoal_client::{IoCtx, OpBuilder, ReadOp, WriteOp};
use shoal_objclass::bucket_index::{
    self, ChangeOutput, IndexEntry, LinkInput, ListInput, ListItem, ListOutput, Segment, UnlinkInput,
};
use shoal_types::{CmpMode, CmpOp, Errno, RadosError, Result, StepOutput, Versioned, err};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The head object's xattr holding [`ObjectMeta`].
const META_XATTR: &str = "rgw.meta";
/// The head object's xattr holding the order of the write that produced it.
const ORDER_XATTR: &str = "rgw.order";

/// Everything about an object but its data, kept in its head object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    /// Size in bytes.
    pub size: u64,
    /// ETag without quotes: the MD5 of the data, or `md5-of-md5s-N` for multipart.
    pub etag: String,
    /// Last modification, nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
    /// Owner's uid.
    pub owner: String,
    /// The object's canned ACL.
    pub acl: CannedAcl,
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// Other standard headers stored with the object (cache-control, content-disposition,
    /// content-encoding, content-language, expires).
    pub headers: BTreeMap<String, String>,
    /// User metadata (`x-amz-meta-*`, without the prefix).
    pub user_meta: BTreeMap<String, String>,
    /// Object tags.
    pub tags: Vec<(String, String)>,
    /// The write's order (see the module docs).
    pub order: String,
    /// Data outside the head, in order; empty when the data is in the head.
    pub tail: Vec<Segment>,
    /// Parts of a multipart object.
    pub parts: Option<u32>,
}

shoal_objclass::versioned_v1! { ObjectMeta => "object metadata" }

/// The cluster handles the data path uses, taken in turn.
pub struct Pools {
    handles: Vec<(IoCtx, IoCtx)>,
    next: AtomicUsize,
}

impl Pools {
    /// One (index pool, data pool) pair per cluster connection.
    pub fn new(handles: Vec<(IoCtx, IoCtx)>) -> Pools {
        Pools { handles, next: AtomicUsize::new(0) }
    }

    fn pick(&self) -> &(IoCtx, IoCtx) {
        &self.handles[self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len()]
    }

    /// An index pool handle.
    pub fn index(&self) -> &IoCtx {
        &self.pick().0
    }

    /// A data pool handle.
    pub fn data(&self) -> &IoCtx {
        &self.pick().1
    }
}

/// Nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// A fresh random tag (16 hex digits).
pub fn new_tag() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// The order of a write made now with `tag`: sorts by time, then tag.
pub fn order_of(mtime_ns: u64, tag: &str) -> String {
    format!("{mtime_ns:020}.{tag}")
}

/// Only the metadata of a head object (`None` when there is no such object).
pub async fn read_meta(data: &IoCtx, head: &str) -> Result<Option<ObjectMeta>> {
    match data.read(head, ReadOp::new().get_xattr(META_XATTR)).await {
        Ok(reply) => match reply.outputs.into_iter().next() {
            Some(StepOutput::Data(meta)) => Ok(Some(ObjectMeta::decode(&meta)?)),
            _ => Err(err::io("xattr read returned no data")),
        },
        Err(e) if matches!(e.errno, Errno::NotFound | Errno::NoData) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What a data stream failed with.
#[derive(Debug)]
pub enum StreamError {
    /// Reading the request body failed.
    Body(String),
    /// The body exceeded the size limit.
    TooLarge,
    /// The object layer failed.
    Rados(RadosError),
}

impl From<RadosError> for StreamError {
    fn from(e: RadosError) -> Self {
        StreamError::Rados(e)
    }
}

/// Data written to tail chunks (or kept for the head when small).
pub struct Written {
    /// Bytes received.
    pub size: u64,
    /// MD5 of the data.
    pub md5: [u8; 16],
    /// The data when it fits the head (no chunks written).
    pub inline: Option<Bytes>,
    /// The chunk segment written, if any.
    pub segment: Option<Segment>,
    /// The GC intent covering the chunks; forget it once they are linked.
    pub intent: Option<String>,
}

/// The data path of one gateway.
pub struct Objects {
    /// Cluster handles.
    pub pools: Arc<Pools>,
    /// The garbage collector's queue.
    pub gc: Arc<Gc>,
    /// Chunk size and largest inline object.
    pub stripe: u64,
    /// Largest object.
    pub max_size: u64,
}

impl Objects {
    /// Streams `body` into chunk objects under `prefix` (recording a GC intent first), or
    /// keeps it for the head when it fits (and `allow_inline`).
    pub async fn write_data<S, E>(
        &self,
        mut body: S,
        head: &str,
        prefix: &str,
        allow_inline: bool,
    ) -> std::result::Result<Written, StreamError>
    where
        S: Stream<Item = std::result::Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let stripe = self.stripe as usize;
        let mut md5 = Md5::new();
        let mut buffer = BytesMut::new();
        let (mut size, mut chunks) = (0u64, 0u64);
        let mut pending: Option<tokio::task::JoinHandle<Result<()>>> = None;
        let mut intent = None;
        loop {
            let next = body.next().await;
            let finished = next.is_none();
            if let Some(piece) = next {
                let piece = piece.map_err(|e| StreamError::Body(e.to_string()))?;
                size += piece.len() as u64;
                if size > self.max_size {
                    return Err(StreamError::TooLarge);
                }
                md5.update(&piece);
                buffer.extend_from_slice(&piece);
            }
            if finished && chunks == 0 && allow_inline && buffer.len() <= stripe {
                return Ok(Written {
                    size,
                    md5: md5.finalize().into(),
                    inline: Some(buffer.freeze()),
                    segment: None,
                    intent: None,
                });
            }
            while buffer.len() >= stripe || (finished && !buffer.is_empty()) {
                if chunks == 0 {
                    intent = Some(self.gc.record_intent(&GcEntry::intent(head, prefix)).await?);
                }
                let take = buffer.len().min(stripe);
                let chunk = buffer.split_to(take).freeze();
                // One chunk in flight while the next one arrives.
                if let Some(previous) = pending.take() {
                    previous.await.map_err(|e| err::io(e.to_string()))??;
                }
                let data = self.pools.data().clone();
                let name = layout::chunk_object(prefix, chunks);
                pending = Some(tokio::spawn(async move { data.write_full(&name, chunk).await }));
                chunks += 1;
            }
            if finished {
                if let Some(previous) = pending.take() {
                    previous.await.map_err(|e| err::io(e.to_string()))??;
                }
                let segment = (chunks > 0 || !allow_inline).then(|| Segment { prefix: prefix.to_owned(), size });
                let inline = segment.is_none().then(Bytes::new);
                return Ok(Written { size, md5: md5.finalize().into(), inline, segment, intent });
            }
        }
    }

    /// Replaces the head object unless it holds a newer write; returns whether it did.
    pub async fn write_head(&self, head: &str, meta: &ObjectMeta, data: Bytes) -> Result<bool> {
        let op = WriteOp::new()
            .create(false)
            .cmp_xattr(ORDER_XATTR, CmpOp::Lt, CmpMode::Bytes, meta.order.clone())
            .write_full(data)
            .set_xattr(META_XATTR, meta.encode())
            .set_xattr(ORDER_XATTR, meta.order.clone());
        match self.pools.data().operate(head, op).await {
            Ok(_) => Ok(true),
            Err(e) if e.errno == Errno::Canceled => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Rewrites only the metadata of the head written by `meta.order` (ECANCELED if it was replaced).
    pub async fn update_meta(&self, head: &str, meta: &ObjectMeta) -> Result<()> {
        let op = WriteOp::new()
            .cmp_xattr(ORDER_XATTR, CmpOp::Eq, CmpMode::Bytes, meta.order.clone())
            .set_xattr(META_XATTR, meta.encode());
        self.pools.data().operate(head, op).await.map(|_| ())
    }

    /// Reads the head: metadata and the inline data (empty for tailed objects).
    pub async fn read_head(&self, bucket: &BucketInfo, key: &str) -> Result<Option<(ObjectMeta, Bytes)>> {
        let op = ReadOp::new().get_xattr(META_XATTR).read(0, 0);
        let reply = match self.pools.data().read(&layout::head_object(&bucket.id, key), op).await {
            Ok(r) => r,
            Err(e) if matches!(e.errno, Errno::NotFound | Errno::NoData) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut outputs = reply.outputs.into_iter();
        match (outputs.next(), outputs.next()) {
            (Some(StepOutput::Data(meta)), Some(StepOutput::Data(data))) => {
                Ok(Some((ObjectMeta::decode(&meta)?, data)))
            }
            _ => Err(err::io("head read returned unexpected outputs")),
        }
    }

    /// The bytes `range` of an object whose head was read as `meta` and `inline`, as a
    /// stream of chunk reads (two in flight).
    pub fn read_range(
        &self,
        meta: &ObjectMeta,
        inline: Bytes,
        range: std::ops::Range<u64>,
    ) -> impl Stream<Item = Result<Bytes>> + Send + 'static {
        let mut plan: Vec<(String, u64, u64)> = Vec::new();
        let mut inline_part = None;
        if meta.tail.is_empty() {
            inline_part = Some(inline.slice(range.start as usize..range.end as usize));
        } else {
            let mut base = 0u64;
            for segment in &meta.tail {
                let (start, end) = (range.start.max(base), range.end.min(base + segment.size));
                let mut at = start;
                while at < end {
                    let in_segment = at - base;
                    let index = in_segment / self.stripe;
                    let offset = in_segment % self.stripe;
                    let length = (self.stripe - offset).min(end - at);
                    plan.push((layout::chunk_object(&segment.prefix, index), offset, length));
                    at += length;
                }
                base += segment.size;
            }
        }
        let data = self.pools.data().clone();
        let chunks = futures::stream::iter(plan)
            .map(move |(name, offset, length)| {
                let data = data.clone();
                async move {
                    let reply = data.read(&name, ReadOp::new().read(offset, length)).await?;
                    match reply.outputs.into_iter().next() {
                        Some(StepOutput::Data(bytes)) if bytes.len() as u64 == length => Ok(bytes),
                        _ => Err(err::io(format!("tail chunk {name} is shorter than its manifest says"))),
                    }
                }
            })
            .buffered(2);
        futures::stream::iter(inline_part.map(Ok)).chain(chunks)
    }

    /// Removes the head unless it holds a newer write than `order`; unlinks the index
    /// entry, logging `events` with it; queues the removed tail for GC. Returns the
    /// removed entry.
    pub async fn delete(
        &self,
        bucket: &BucketInfo,
        key: &str,
        order: &str,
        events: Vec<Bytes>,
    ) -> Result<Option<IndexEntry>> {
        let head = layout::head_object(&bucket.id, key);
        let op = WriteOp::new().cmp_xattr(ORDER_XATTR, CmpOp::Le, CmpMode::Bytes, order.to_owned()).remove();
        match self.pools.data().operate(&head, op).await {
            Ok(_) => {}
            Err(e) if matches!(e.errno, Errno::NotFound | Errno::Canceled) => {}
            Err(e) => return Err(e),
        }
        let input = UnlinkInput { key: key.to_owned(), order: order.to_owned(), events };
        let out = self.index_call(bucket, key, "unlink", input.encode()).await?;
        if out.applied
            && let Some(previous) = &out.previous
        {
            self.gc.retire(&head, &previous.tail).await?;
        }
        Ok(out.previous.filter(|_| out.applied))
    }

    /// Links the entry for `key`, logging `events` with it; queues whichever object lost
    /// (the replaced one, or this one if a newer write got there first) for GC.
    async fn link(&self, bucket: &BucketInfo, key: &str, meta: &ObjectMeta, events: Vec<Bytes>) -> Result<()> {
        let entry = IndexEntry {
            size: meta.size,
            etag: meta.etag.clone(),
            mtime_ns: meta.mtime_ns,
            owner: meta.owner.clone(),
            storage_class: "STANDARD".into(),
            order: meta.order.clone(),
            tail: meta.tail.clone(),
        };
        let head = layout::head_object(&bucket.id, key);
        let input = LinkInput { key: key.to_owned(), entry, events };
        let out = self.index_call(bucket, key, "link", input.encode()).await?;
        match (out.applied, out.previous) {
            (true, Some(previous)) => self.gc.retire(&head, &previous.tail).await,
            (false, _) => self.gc.retire(&head, &meta.tail).await,
            (true, None) => Ok(()),
        }
    }

    /// Writes the head of a new version of `key` and, if no newer write got there first,
    /// links its index entry with `events`; otherwise logs `events` alone (this write
    /// happened and is acknowledged all the same). Returns whether this version won.
    pub async fn install(
        &self,
        bucket: &BucketInfo,
        key: &str,
        meta: &ObjectMeta,
        data: Bytes,
        events: Vec<Bytes>,
    ) -> Result<bool> {
        let won = self.write_head(&layout::head_object(&bucket.id, key), meta, data).await?;
        if won {
            self.link(bucket, key, meta, events).await?;
        } else {
            self.log_events(bucket, key, events).await?;
        }
        Ok(won)
    }

    /// Logs `events` in `key`'s index shard without linking anything.
    async fn log_events(&self, bucket: &BucketInfo, key: &str, events: Vec<Bytes>) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let input = bucket_index::LogInput { events }.encode();
        let shard = Self::index_shard_of(bucket, key);
        self.pools.index().exec(&shard, bucket_index::CLASS, "log", input).await.map(|_| ())
    }

    /// The index shard holding `key`'s entry (and its events).
    fn index_shard_of(bucket: &BucketInfo, key: &str) -> String {
        layout::index_shard(&bucket.id, layout::shard_of(key, bucket.num_shards))
    }

    async fn index_call(&self, bucket: &BucketInfo, key: &str, method: &str, input: Vec<u8>) -> Result<ChangeOutput> {
        let shard = Self::index_shard_of(bucket, key);
        let out = self.pools.index().exec(&shard, bucket_index::CLASS, method, input).await?;
        ChangeOutput::decode(&out)
    }

    /// The names of the bucket's index shards (its event logs).
    pub fn index_shards(bucket: &BucketInfo) -> Vec<String> {
        (0..bucket.num_shards).map(|shard| layout::index_shard(&bucket.id, shard)).collect()
    }

    /// Creates the bucket's index shards.
    pub async fn init_index(&self, bucket: &BucketInfo) -> Result<()> {
        let shards = (0..bucket.num_shards).map(|shard| {
            let index = self.pools.index().clone();
            let name = layout::index_shard(&bucket.id, shard);
            async move { index.exec(&name, bucket_index::CLASS, "init", Bytes::new()).await }
        });
        for result in futures::future::join_all(shards).await {
            match result {
                Err(e) if e.errno != Errno::Exists => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// Deletes the bucket's index shards.
    pub async fn remove_index(&self, bucket: &BucketInfo) -> Result<()> {
        for shard in 0..bucket.num_shards {
            crate::meta::remove_ignoring_missing(self.pools.index(), &layout::index_shard(&bucket.id, shard)).await?;
        }
        Ok(())
    }

    /// Entries and bytes summed over the bucket's shards.
    pub async fn bucket_stats(&self, bucket: &BucketInfo) -> Result<bucket_index::IndexStats> {
        let mut total = bucket_index::IndexStats::default();
        for shard in 0..bucket.num_shards {
            let name = layout::index_shard(&bucket.id, shard);
            let out = self.pools.index().exec(&name, bucket_index::CLASS, "stats", Bytes::new()).await?;
            let stats = bucket_index::IndexStats::decode(&out)?;
            total.entries += stats.entries;
            total.bytes += stats.bytes;
        }
        Ok(total)
    }

    /// Lists the bucket in name order across all its index shards: up to `max` items
    /// after `start_after`, and whether more follow.
    pub async fn list(
        &self,
        bucket: &BucketInfo,
        prefix: &str,
        delimiter: &str,
        start_after: &str,
        max: usize,
    ) -> Result<(Vec<ListItem>, bool)> {
        let mut cursors: Vec<ShardCursor> = (0..bucket.num_shards)
            .map(|shard| ShardCursor {
                shard: layout::index_shard(&bucket.id, shard),
                buffer: std::collections::VecDeque::new(),
                after: start_after.to_owned(),
                more: true,
            })
            .collect();
        let mut items: Vec<ListItem> = Vec::new();
        let page = (max as u32).clamp(1, 1000);
        loop {
            // Refill every shard whose buffer ran dry but has more.
            let refills = cursors.iter_mut().filter(|c| c.buffer.is_empty() && c.more).map(|c| {
                let input = ListInput {
                    start_after: c.after.clone(),
                    prefix: prefix.to_owned(),
                    delimiter: delimiter.to_owned(),
                    max: page,
                };
                let index = self.pools.index().clone();
                async move {
                    let out = index.exec(&c.shard, bucket_index::CLASS, "list", input.encode()).await?;
                    let out = ListOutput::decode(&out)?;
                    c.more = out.more;
                    if let Some(last) = out.items.last() {
                        c.after = last.name().to_owned();
                    }
                    c.buffer.extend(out.items);
                    Ok::<_, RadosError>(())
                }
            });
            for result in futures::future::join_all(refills).await {
                result?;
            }
            let Some(at) = (0..cursors.len())
                .filter(|&i| !cursors[i].buffer.is_empty())
                .min_by(|&a, &b| cursors[a].buffer[0].name().cmp(cursors[b].buffer[0].name()))
            else {
                return Ok((items, false));
            };
            if items.len() == max {
                return Ok((items, true));
            }
            let Some(item) = cursors[at].buffer.pop_front() else { continue };
            // A common prefix may come from several shards: keep one.
            for cursor in &mut cursors {
                while cursor.buffer.front().is_some_and(|i| i.name() == item.name()) {
                    cursor.buffer.pop_front();
                }
            }
            items.push(item);
        }
    }
}

struct ShardCursor {
    shard: String,
    buffer: std::collections::VecDeque<ListItem>,
    after: String,
    more: bool,
}

/// Runs `stream` in its own task and returns a stream of its items that is `Sync` (as
/// HTTP bodies must be); two items are read ahead.
pub fn detach<T: Send + 'static>(
    stream: impl Stream<Item = T> + Send + 'static,
) -> impl Stream<Item = T> + Send + Sync + 'static {
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if tx.send(item).await.is_err() {
                return;
            }
        }
    });
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
}
