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

use crate::clock::{OrderClock, now_ns, tag_of};
use crate::config::CrashPoint;
use crate::crypt::{Key, Opener, Sealer};
use crate::events::{Done, Pending};
use crate::gc::{Gc, GcEntry, HeadOf, IndexRef};
use crate::head::{META_XATTR, ORDER_XATTR, ObjectMeta, read_meta};
use crate::layout;
use crate::meta::{BucketInfo, Versioning, remove_ignoring_missing};
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};

use shoal_client::{IoCtx, OpBuilder, ReadOp, WriteOp};
use shoal_objclass::bucket_index::{
    self, ChangeOutput, Condition, GetVersionInput, GetVersionOutput, IndexEntry, LinkInput, ListInput, ListItem,
    ListOutput, ListVersionsInput, ListVersionsOutput, ObjectLock, Segment, UnlinkInput, UnlinkVersionInput,
    VersionItem, Which,
};
use shoal_types::{CmpMode, CmpOp, Errno, RadosError, Result, Step, StepOutput, Versioned, err};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What a write asks of the index besides its entry.
#[derive(Clone, Debug, Default)]
pub struct WriteTerms {
    /// What the key's current object must be (S3 conditional writes).
    pub condition: Option<Condition>,
    /// The new version's object lock.
    pub lock: ObjectLock,
    /// A write a client is waiting for (not the completion of an earlier one): if a write
    /// with a newer order got to the key's head first, this one reached it later and is
    /// the newer write, so it takes an order past that one's (a gateway whose clock is
    /// behind another's must not have its acknowledged writes discarded).
    pub fresh: bool,
}

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
    pub intent: Option<crate::gc::Queued>,
    /// The salt of the sealed segment, when the data was encrypted.
    pub salt: Option<u64>,
}

/// A version of a key that a read named: where its head is, what it holds, and the
/// version id to show (`None` in a bucket that was never versioned).
pub struct Found {
    /// The bucket.
    pub bucket: Arc<BucketInfo>,
    /// The version's head object.
    pub head: String,
    /// Its metadata.
    pub meta: ObjectMeta,
    /// Its inline data (empty for tailed objects).
    pub inline: Bytes,
    /// The version id for `x-amz-version-id`.
    pub version_id: Option<String>,
    /// Its object lock.
    pub lock: ObjectLock,
}

/// What a read naming a version of a key finds.
pub enum Lookup {
    /// The version, its head read.
    Found(Box<Found>),
    /// A delete marker.
    DeleteMarker(Box<IndexEntry>),
    /// No such key, or no such version.
    Missing,
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
    /// Where write orders come from.
    pub clock: OrderClock,
    /// How long a completed upload's record answers retries (`rgw_multipart_completion_keep`).
    pub completion_keep: std::time::Duration,
    /// Test only: where to abort the process.
    pub abort_at: Option<CrashPoint>,
}

impl Objects {
    /// Streams `body` into chunk objects under `prefix` (recording a GC intent for `head`,
    /// of the key `key` says, first), or keeps it for the head when it fits (and
    /// `allow_inline`; a version's own head gets its intent then too); sealed by `sealer`
    /// if given.
    pub async fn write_data<S, E>(
        &self,
        mut body: S,
        head: &str,
        key: Option<HeadOf>,
        prefix: &str,
        allow_inline: bool,
        mut sealer: Option<Sealer>,
    ) -> std::result::Result<Written, StreamError>
    where
        S: Stream<Item = std::result::Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let stripe = self.stripe as usize;
        let mut md5 = Md5::new();
        let mut buffer = BytesMut::new();
        // Bytes received, bytes stored (more when sealed), chunks written.
        let (mut size, mut stored, mut chunks) = (0u64, 0u64, 0u64);
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
                match &mut sealer {
                    Some(sealer) => sealer.push(&piece, &mut buffer),
                    None => buffer.extend_from_slice(&piece),
                }
            }
            if finished && let Some(sealer) = &mut sealer {
                sealer.finish(&mut buffer);
            }
            if finished && chunks == 0 && allow_inline && buffer.len() <= stripe {
                // A version's head has a name of its own, which only the index link makes
                // reachable: its intent covers a crash before that link.
                let intent = match &key {
                    Some(HeadOf { own: true, .. }) => {
                        Some(self.gc.record_intent(&GcEntry::intent(head, prefix, key.clone())).await?)
                    }
                    _ => None,
                };
                return Ok(Written {
                    size,
                    md5: md5.finalize().into(),
                    inline: Some(buffer.freeze()),
                    segment: None,
                    intent,
                    salt: sealer.as_ref().map(Sealer::salt),
                });
            }
            // A block being sealed stays in the buffer until it is full.
            let unsealed = sealer.as_ref().map_or(0, Sealer::open_len);
            while buffer.len() - unsealed >= stripe || (finished && !buffer.is_empty()) {
                if chunks == 0 {
                    intent = Some(self.gc.record_intent(&GcEntry::intent(head, prefix, key.clone())).await?);
                }
                let take = buffer.len().min(stripe);
                stored += take as u64;
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
                let segment =
                    (chunks > 0 || !allow_inline).then(|| Segment { prefix: prefix.to_owned(), size: stored });
                let inline = segment.is_none().then(Bytes::new);
                let salt = sealer.as_ref().map(Sealer::salt);
                return Ok(Written { size, md5: md5.finalize().into(), inline, segment, intent, salt });
            }
        }
    }

    /// Replaces the plain head object unless it holds a newer write: `None` if it does,
    /// else the metadata of the write replaced, if any (read in the same operation). With
    /// a `condition` on the object it holds, the check is part of the write: ECANCELED if
    /// it fails. A `fresh` write that finds a newer order there takes an order past it
    /// (in `meta`) and writes again.
    async fn write_head(
        &self,
        head: &str,
        meta: &mut ObjectMeta,
        data: Bytes,
        condition: Option<&Condition>,
        fresh: bool,
    ) -> Result<Option<Option<ObjectMeta>>> {
        let failed = || err::canceled(format!("the object fails the write's condition {condition:?}"));
        loop {
            let op = match condition {
                // The same order again is a retry of the same write.
                None => {
                    WriteOp::new().create(false).cmp_xattr(ORDER_XATTR, CmpOp::Le, CmpMode::Bytes, meta.order.clone())
                }
                Some(Condition::Absent) => WriteOp::new().create(true),
                Some(Condition::ETag(etag)) => {
                    // Replace exactly the write that has this ETag: its order must still be there.
                    let stored = read_meta(self.pools.data(), head).await?.filter(|m| m.etag == *etag);
                    let stored = stored.ok_or_else(failed)?;
                    if stored.order >= meta.order {
                        if !fresh {
                            return Err(failed());
                        }
                        meta.reorder_past(&self.clock, &stored.order);
                    }
                    WriteOp::new().cmp_xattr(ORDER_XATTR, CmpOp::Eq, CmpMode::Bytes, stored.order)
                }
                // Replace exactly the write at that order.
                Some(Condition::Order(order)) => {
                    WriteOp::new().cmp_xattr(ORDER_XATTR, CmpOp::Eq, CmpMode::Bytes, order.clone())
                }
            };
            let op = op
                .push(Step::GetXattrs)
                .write_full(data.clone())
                .set_xattr(META_XATTR, meta.encode())
                .set_xattr(ORDER_XATTR, meta.order.clone());
            match self.pools.data().operate(head, op).await {
                Ok(reply) => {
                    let replaced = reply.outputs.into_iter().find_map(|o| match o {
                        StepOutput::Xattrs(mut xattrs) => xattrs.remove(META_XATTR),
                        _ => None,
                    });
                    return Ok(Some(replaced.map(|m| ObjectMeta::decode(&m)).transpose()?));
                }
                Err(e) if e.errno == Errno::Canceled && condition.is_none() => {
                    let newer = read_meta(self.pools.data(), head).await?.map(|m| m.order);
                    match newer.filter(|_| fresh) {
                        Some(newer) => meta.reorder_past(&self.clock, &newer),
                        None => return Ok(None),
                    }
                }
                Err(e) if matches!(e.errno, Errno::Canceled | Errno::Exists) => return Err(failed()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes the head of a new version (never replaced: each version has its own head,
    /// named by its write's tag, so one that exists is this write's, from an earlier try).
    async fn write_version_head(&self, head: &str, meta: &ObjectMeta, data: Bytes) -> Result<()> {
        let op = WriteOp::new()
            .create(true)
            .write_full(data)
            .set_xattr(META_XATTR, meta.encode())
            .set_xattr(ORDER_XATTR, meta.order.clone());
        match self.pools.data().operate(head, op).await {
            Err(e) if e.errno != Errno::Exists => Err(e),
            _ => Ok(()),
        }
    }

    /// Whether the write of `meta` is the one `key`'s head (never versioned) or index
    /// (versioned: its version, or the null version) holds.
    pub async fn written(&self, bucket: &BucketInfo, key: &str, meta: &ObjectMeta) -> Result<bool> {
        if !Self::own_heads(bucket) {
            let head = read_meta(self.pools.data(), &layout::head_object(&bucket.id, key)).await?;
            return Ok(head.is_some_and(|h| h.order == meta.order));
        }
        let which = meta.version.clone().map_or(Which::Null, Which::Id);
        Ok(self.version(bucket, key, which).await?.entry.is_some_and(|e| e.order == meta.order))
    }

    /// Rewrites only the metadata of the head written by `meta.order` (ECANCELED if it was replaced).
    pub async fn update_meta(&self, head: &str, meta: &ObjectMeta) -> Result<()> {
        let op = WriteOp::new()
            .cmp_xattr(ORDER_XATTR, CmpOp::Eq, CmpMode::Bytes, meta.order.clone())
            .set_xattr(META_XATTR, meta.encode());
        self.pools.data().operate(head, op).await.map(|_| ())
    }

    /// Whether writes to `bucket` get heads of their own: those of every bucket that was
    /// ever versioned (the index alone then decides, atomically, which version is current).
    pub fn own_heads(bucket: &BucketInfo) -> bool {
        bucket.versioning != Versioning::Off
    }

    /// The head object of the version of `key` written at `order`: one of its own (named
    /// by the write's tag), or the key's plain head.
    pub fn head_of(bucket: &BucketInfo, key: &str, order: &str, own_head: bool) -> String {
        match own_head {
            true => layout::version_head(&bucket.id, key, tag_of(order)),
            false => layout::head_object(&bucket.id, key),
        }
    }

    /// Where `key` is indexed, for GC entries of its versions' heads.
    pub fn index_ref(bucket: &BucketInfo, key: &str) -> IndexRef {
        IndexRef { shard: Self::index_shard_of(bucket, key), key: key.to_owned() }
    }

    /// Finds the version of `key` that `version_id` names (`None`: the current one; in a
    /// bucket never versioned only "null" names one, the plain object) and reads its head.
    pub async fn locate(&self, bucket: Arc<BucketInfo>, key: &str, version_id: Option<&str>) -> Result<Lookup> {
        let (head, shown, lock) = match (bucket.versioning, version_id) {
            (Versioning::Off, None | Some("null")) => {
                (layout::head_object(&bucket.id, key), version_id.map(str::to_owned), ObjectLock::default())
            }
            (Versioning::Off, Some(_)) => return Ok(Lookup::Missing),
            _ => match self.version(&bucket, key, Which::from_version_id(version_id)).await?.entry {
                None => return Ok(Lookup::Missing),
                Some(entry) if entry.delete_marker => return Ok(Lookup::DeleteMarker(Box::new(entry))),
                Some(entry) => {
                    let head = Self::head_of(&bucket, key, &entry.order, entry.own_head);
                    (head, Some(entry.version_id().to_owned()), entry.lock)
                }
            },
        };
        Ok(match self.read_head(&head).await? {
            Some((meta, inline)) => {
                Lookup::Found(Box::new(Found { bucket, head, meta, inline, version_id: shown, lock }))
            }
            None => Lookup::Missing,
        })
    }

    /// Reads a head: metadata and the inline data (empty for tailed objects).
    pub async fn read_head(&self, head: &str) -> Result<Option<(ObjectMeta, Bytes)>> {
        let op = ReadOp::new().get_xattr(META_XATTR).read(0, 0);
        let reply = match self.pools.data().read(head, op).await {
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

    /// The plaintext bytes `range` of an object whose head was read as `meta` and
    /// `inline`, as a stream of chunk reads (two in flight); `key` is its data key when
    /// it is sealed.
    pub fn read_range(
        &self,
        meta: &ObjectMeta,
        inline: Bytes,
        range: std::ops::Range<u64>,
        key: Option<Key>,
    ) -> futures::stream::BoxStream<'static, Result<Bytes>> {
        let (sealed, key) = match (&meta.sealed, key) {
            (None, _) => return self.read_stored(meta, inline, range).boxed(),
            (Some(sealed), Some(key)) => (sealed, key),
            (Some(_), None) => {
                return futures::stream::once(async { Err(err::io("reading a sealed object without its key")) })
                    .boxed();
            }
        };
        // Each stored segment is sealed on its own: open the blocks of each that `range` covers.
        let stored_sizes: Vec<u64> = match meta.tail.is_empty() {
            true => vec![inline.len() as u64],
            false => meta.tail.iter().map(|s| s.size).collect(),
        };
        let (mut plain_base, mut stored_base) = (0u64, 0u64);
        let mut reads = Vec::new();
        for (stored, salt) in stored_sizes.into_iter().zip(sealed.salts.iter().copied()) {
            let plain = crate::crypt::plain_size(stored);
            let (start, end) = (range.start.max(plain_base), range.end.min(plain_base + plain));
            if start < end {
                let local = start - plain_base..end - plain_base;
                let span = Opener::stored_range(&local, stored);
                let stored_span = stored_base + span.start..stored_base + span.end;
                let opener = Opener::new(key.clone(), salt, local);
                reads.push(open_stream(self.read_stored(meta, inline.clone(), stored_span).boxed(), opener));
            }
            plain_base += plain;
            stored_base += stored;
        }
        futures::stream::iter(reads).flatten().boxed()
    }

    /// The stored bytes `range` of an object (ciphertext if it is sealed).
    fn read_stored(
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

    /// Links the entry for `key` if `condition` holds, logging `events` with it; returns
    /// whether it applied. Queues a replaced object for GC (but the segments `retired`
    /// already; a replaced null version with a head of its own was queued before); a plain
    /// head's write that lost to a newer one queues itself.
    async fn link(
        &self,
        bucket: &BucketInfo,
        key: &str,
        meta: &ObjectMeta,
        events: Vec<Bytes>,
        terms: WriteTerms,
        retired: &[Segment],
    ) -> Result<bool> {
        let own_head = Self::own_heads(bucket);
        let entry = meta.index_entry(own_head, terms.lock);
        let head = layout::head_object(&bucket.id, key);
        let fresh = terms.fresh && own_head;
        let input = LinkInput { key: key.to_owned(), entry, events, condition: terms.condition, fresh };
        let out = self.index_call(bucket, key, "link", input.encode()).await?;
        match (out.applied, out.previous) {
            (true, Some(previous)) if !own_head => {
                let unretired: Vec<Segment> = previous.tail.into_iter().filter(|s| !retired.contains(s)).collect();
                self.gc.retire(&head, &unretired).await?
            }
            (true, Some(previous)) if !previous.own_head => self.remove_null_head(bucket, key, &previous).await?,
            (false, _) if !own_head => self.gc.retire(&head, &meta.tail).await?,
            _ => {}
        }
        Ok(out.applied)
    }

    /// Queues the head (if its own) and tail of a write that lost to a newer one.
    pub async fn discard(&self, bucket: &BucketInfo, key: &str, meta: &ObjectMeta) -> Result<()> {
        match Self::own_heads(bucket) {
            true => {
                let head = Self::head_of(bucket, key, &meta.order, true);
                self.gc.retire_version(&head, &meta.tail, Self::index_ref(bucket, key)).await
            }
            false => self.gc.retire(&layout::head_object(&bucket.id, key), &meta.tail).await,
        }
    }

    /// Queues the head and tail of `key`'s null version, for a change about to replace it
    /// (GC deletes them only once the index no longer holds it).
    async fn retire_null(&self, bucket: &BucketInfo, key: &str) -> Result<()> {
        match self.version(bucket, key, Which::Null).await?.entry {
            Some(entry) => self.retire_version_data(bucket, key, &entry).await,
            None => Ok(()),
        }
    }

    /// Queues the head and tail of version `entry` of `key` (a delete marker has none),
    /// for a change about to unlink it: GC deletes them once the index no longer holds it.
    /// A null version kept in the key's plain head is queued too (its head is removed
    /// right after the unlink, but a crash in between would leave it) where no write
    /// reuses that head, in a bucket that was versioned; in one never versioned the next
    /// write of the key does, so only the tail is queued, kept while a head refers to it.
    async fn retire_version_data(&self, bucket: &BucketInfo, key: &str, entry: &IndexEntry) -> Result<()> {
        let head = Self::head_of(bucket, key, &entry.order, entry.own_head);
        match (entry.delete_marker, entry.own_head || Self::own_heads(bucket)) {
            (true, _) => Ok(()),
            (false, true) => self.gc.retire_version(&head, &entry.tail, Self::index_ref(bucket, key)).await,
            (false, false) => self.gc.retire(&head, &entry.tail).await,
        }
    }

    /// Writes the head of a new version of `key` and, if no newer write got there first,
    /// links its index entry with the persistent `events`; otherwise logs the events alone
    /// (this write happened and is acknowledged all the same). Installing the same write
    /// (same order) again is harmless, so a retry after a crash completes it. Returns
    /// whether this version won (if not, the caller [`Objects::discard`]s it). A version
    /// with an id (`meta.version`) always wins: it is added beside the others. A failed
    /// condition of `terms` on the key's current object is ECANCELED, with nothing changed
    /// (the caller keeps or discards the tail). A `fresh` write to a never-versioned
    /// bucket may leave with a later order in `meta` (see [`WriteTerms::fresh`]).
    pub async fn install(
        &self,
        bucket: &BucketInfo,
        key: &str,
        meta: &mut ObjectMeta,
        data: Bytes,
        events: &Pending,
        terms: WriteTerms,
    ) -> Result<bool> {
        if !Self::own_heads(bucket) {
            let head = layout::head_object(&bucket.id, key);
            let won = self.write_head(&head, meta, data, terms.condition.as_ref(), terms.fresh).await?;
            // The tail of the write replaced goes to GC before the link: a crash between
            // the two leaves it queued, and GC links the head (see `GcEntry::plain`).
            let (won, replaced) = (won.is_some(), won.flatten());
            let replaced = replaced.filter(|old| old.order != meta.order).map(|old| old.tail).unwrap_or_default();
            self.gc.retire(&head, &replaced).await?;
            self.abort_if_asked(CrashPoint::BeforeLink, &head);
            let logged = events.logged(&Done::of(meta));
            if won {
                self.link(bucket, key, meta, logged, WriteTerms { condition: None, ..terms }, &replaced).await?;
            } else {
                self.log_events(bucket, key, logged).await?;
            }
            return Ok(won);
        }
        if meta.version.is_none() {
            self.retire_null(bucket, key).await?;
        }
        let head = Self::head_of(bucket, key, &meta.order, true);
        self.write_version_head(&head, meta, data).await?;
        self.abort_if_asked(CrashPoint::BeforeLink, &head);
        loop {
            let logged = events.logged(&Done::of(meta));
            match self.link(bucket, key, meta, logged, terms.clone(), &[]).await {
                Err(e) if e.errno == Errno::StaleEpoch => self.reorder_version(bucket, key, &head, meta).await?,
                Err(e) if e.errno == Errno::Canceled => {
                    // Never linked: no reader can be on it.
                    remove_ignoring_missing(self.pools.data(), &head).await?;
                    return Err(e);
                }
                other => return other,
            }
        }
    }

    /// Test only (`rgw_debug_abort_at`): ends the process at `point`, about `head`.
    fn abort_if_asked(&self, point: CrashPoint, head: &str) {
        if self.abort_at == Some(point) {
            tracing::error!(%head, ?point, "rgw_debug_abort_at: aborting");
            std::process::abort();
        }
    }

    /// Moves the order clock past `key`'s newest version, so that a write ordered next
    /// comes after every write acknowledged before it, whatever this gateway's clock says.
    pub async fn observe_newest(&self, bucket: &BucketInfo, key: &str) -> Result<()> {
        if let Some(newest) = self.version(bucket, key, Which::Current).await?.entry {
            self.clock.observe(&newest.order);
        }
        Ok(())
    }

    /// Gives the unlinked version `meta` of `key` (its head `head`) an order past the
    /// key's newest version, which the index found newer than it (see
    /// [`WriteTerms::fresh`]): a new version id, and its head rewritten to match.
    async fn reorder_version(&self, bucket: &BucketInfo, key: &str, head: &str, meta: &mut ObjectMeta) -> Result<()> {
        self.observe_newest(bucket, key).await?;
        meta.retime(&self.clock);
        if meta.version.is_some() {
            meta.version = Some(bucket_index::version_id_of(&meta.order)?);
        }
        let op = WriteOp::new().set_xattr(META_XATTR, meta.encode()).set_xattr(ORDER_XATTR, meta.order.clone());
        self.pools.data().operate(head, op).await.map(|_| ())
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
            total.versions += stats.versions;
            total.version_bytes += stats.version_bytes;
        }
        Ok(total)
    }

    /// Adds a delete marker for `key` written at `mtime_ns` with `order` by `owner`:
    /// version `version`, or (`None`) the null version, replacing the stored null
    /// version, whose head and tail go to GC. With `over`, only while the key's current
    /// object is the one written at that order (a lifecycle rule's marker must not hide a
    /// newer write): returns whether the marker was added.
    #[allow(clippy::too_many_arguments)]
    pub async fn add_delete_marker(
        &self,
        bucket: &BucketInfo,
        key: &str,
        mtime_ns: u64,
        order: &str,
        version: Option<String>,
        owner: &str,
        events: Vec<Bytes>,
        over: Option<&str>,
    ) -> Result<bool> {
        let null = version.is_none();
        if null {
            self.retire_null(bucket, key).await?;
        }
        let entry = IndexEntry {
            mtime_ns,
            owner: owner.to_owned(),
            storage_class: "STANDARD".into(),
            order: order.to_owned(),
            version,
            delete_marker: true,
            ..IndexEntry::default()
        };
        let condition = over.map(|order| Condition::Order(order.to_owned()));
        let input = LinkInput { key: key.to_owned(), entry, events, condition, fresh: false };
        let out = match self.index_call(bucket, key, "link", input.encode()).await {
            Err(e) if e.errno == Errno::Canceled && over.is_some() => return Ok(false),
            other => other?,
        };
        if null
            && out.applied
            && let Some(replaced) = out.previous.filter(|p| !p.own_head)
        {
            self.remove_null_head(bucket, key, &replaced).await?;
        }
        Ok(true)
    }

    /// Removes the key's plain head if it still holds the null version `replaced` (written
    /// before the bucket was versioned), and queues that version's tail.
    async fn remove_null_head(&self, bucket: &BucketInfo, key: &str, replaced: &IndexEntry) -> Result<()> {
        let head = layout::head_object(&bucket.id, key);
        self.abort_if_asked(CrashPoint::BeforeNullHeadRemoval, &head);
        let op = WriteOp::new().cmp_xattr(ORDER_XATTR, CmpOp::Le, CmpMode::Bytes, replaced.order.clone()).remove();
        match self.pools.data().operate(&head, op).await {
            Ok(_) => {}
            Err(e) if matches!(e.errno, Errno::NotFound | Errno::Canceled) => {}
            Err(e) => return Err(e),
        }
        self.gc.retire(&head, &replaced.tail).await
    }

    /// Removes the version `entry` of `key` (as [`Objects::version`] found it), logging
    /// `events`; its head and tail are deleted by GC once unlinked. Returns whether it was
    /// still there.
    /// A version under object lock stays (EACCES) unless `bypass_governance` lifts a
    /// governance retention.
    pub async fn remove_version(
        &self,
        bucket: &BucketInfo,
        key: &str,
        entry: &IndexEntry,
        events: Vec<Bytes>,
        bypass_governance: bool,
    ) -> Result<bool> {
        // The index decides; checking first only spares a GC entry for a refused removal.
        if let Some(why) = entry.lock.forbids_removal(now_ns(), bypass_governance) {
            return Err(err::access(why));
        }
        self.retire_version_data(bucket, key, entry).await?;
        let input =
            UnlinkVersionInput { key: key.to_owned(), version: entry.version.clone(), events, bypass_governance };
        let out = self.index_call(bucket, key, "unlink_version", input.encode()).await?;
        if out.applied
            && let Some(removed) = out.previous.filter(|p| !p.own_head && !p.delete_marker)
        {
            self.remove_null_head(bucket, key, &removed).await?;
        }
        Ok(out.applied)
    }

    /// Changes the object lock of a version of `key` (`None`: the null version).
    pub async fn set_lock(&self, bucket: &BucketInfo, input: bucket_index::SetLockInput) -> Result<GetVersionOutput> {
        let shard = Self::index_shard_of(bucket, &input.key);
        GetVersionOutput::decode(
            &self.pools.index().exec(&shard, bucket_index::CLASS, "set_lock", input.encode()).await?,
        )
    }

    /// One version of `key`, from the index, and whether it is the newest.
    pub async fn version(&self, bucket: &BucketInfo, key: &str, which: Which) -> Result<GetVersionOutput> {
        let input = GetVersionInput { key: key.to_owned(), which };
        let shard = Self::index_shard_of(bucket, key);
        GetVersionOutput::decode(
            &self.pools.index().exec(&shard, bucket_index::CLASS, "get_version", input.encode()).await?,
        )
    }

    /// Removes every version of every object of the bucket.
    pub async fn purge(&self, bucket: &BucketInfo) -> Result<()> {
        loop {
            let (items, _) = self.list_versions(bucket, "", "", (String::new(), None), 1000).await?;
            if items.is_empty() {
                return Ok(());
            }
            for item in items {
                if let VersionItem::Version { key, entry, .. } = item {
                    self.remove_version(bucket, &key, &entry, Vec::new(), false).await?;
                }
            }
        }
    }

    /// Lists the bucket's current objects in name order across all its index shards: up
    /// to `max` items after `start_after`, and whether more follow.
    pub async fn list(
        &self,
        bucket: &BucketInfo,
        prefix: &str,
        delimiter: &str,
        start_after: &str,
        max: usize,
    ) -> Result<(Vec<ListItem>, bool)> {
        let fetch = |index: IoCtx, shard: String, (after, _): Resume, page: u32| {
            let input =
                ListInput { start_after: after, prefix: prefix.to_owned(), delimiter: delimiter.to_owned(), max: page };
            async move {
                let out = ListOutput::decode(&index.exec(&shard, bucket_index::CLASS, "list", input.encode()).await?)?;
                Ok((out.items, out.more))
            }
        };
        self.merge_shards(bucket, (start_after.to_owned(), None), max, fetch).await
    }

    /// Lists the bucket's versions in key order (each key's newest first) across all its
    /// index shards: up to `max` items after `key_marker` (and inside it, after
    /// `version_marker`), and whether more follow.
    pub async fn list_versions(
        &self,
        bucket: &BucketInfo,
        prefix: &str,
        delimiter: &str,
        resume: Resume,
        max: usize,
    ) -> Result<(Vec<VersionItem>, bool)> {
        let fetch = |index: IoCtx, shard: String, (key_marker, version_marker): Resume, page: u32| {
            let input = ListVersionsInput {
                prefix: prefix.to_owned(),
                delimiter: delimiter.to_owned(),
                key_marker,
                version_marker,
                max: page,
            };
            async move {
                let out = index.exec(&shard, bucket_index::CLASS, "list_versions", input.encode()).await?;
                let out = ListVersionsOutput::decode(&out)?;
                Ok((out.items, out.more))
            }
        };
        self.merge_shards(bucket, resume, max, fetch).await
    }

    /// Merges the sorted pages `fetch` reads from each index shard: up to `max` items
    /// after `start`, and whether more follow. Items of one name come from one shard,
    /// except common prefixes, which are kept once. Keys hash evenly over the shards, so
    /// each is first asked for a little more than its share of `max` (not `max` itself,
    /// which read every shard's rows `max` deep for one page), and for twice as many each
    /// time it runs dry, up to 1,000.
    async fn merge_shards<T, F, Fut>(
        &self,
        bucket: &BucketInfo,
        start: Resume,
        max: usize,
        fetch: F,
    ) -> Result<(Vec<T>, bool)>
    where
        T: Listed,
        F: Fn(IoCtx, String, Resume, u32) -> Fut,
        Fut: std::future::Future<Output = Result<(Vec<T>, bool)>>,
    {
        let share = max.div_ceil(bucket.num_shards.max(1) as usize);
        let first_page = (share + share / 2 + 8).min(max).clamp(1, MAX_SHARD_PAGE as usize) as u32;
        let mut cursors: Vec<ShardCursor<T>> = (0..bucket.num_shards)
            .map(|shard| ShardCursor {
                shard: layout::index_shard(&bucket.id, shard),
                buffer: std::collections::VecDeque::new(),
                after: start.clone(),
                more: true,
                page: first_page,
            })
            .collect();
        let mut items: Vec<T> = Vec::new();
        loop {
            // Refill every shard whose buffer ran dry but has more.
            let refills = cursors.iter_mut().filter(|c| c.buffer.is_empty() && c.more).map(|c| {
                let page = fetch(self.pools.index().clone(), c.shard.clone(), c.after.clone(), c.page);
                async move {
                    let (page, more) = page.await?;
                    c.page = (c.page * 2).min(MAX_SHARD_PAGE);
                    c.more = more;
                    if let Some(last) = page.last() {
                        c.after = last.resume();
                    }
                    c.buffer.extend(page);
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
            if item.is_prefix() {
                // A common prefix may come from several shards: keep one.
                for cursor in &mut cursors {
                    while cursor.buffer.front().is_some_and(|i| i.is_prefix() && i.name() == item.name()) {
                        cursor.buffer.pop_front();
                    }
                }
            }
            items.push(item);
        }
    }
}

/// Where a listing resumes: after a key (or common prefix), and inside a key after a version.
pub type Resume = (String, Option<String>);

/// An item of a sorted shard listing.
pub trait Listed {
    /// The key or common prefix, which orders the listing.
    fn name(&self) -> &str;
    /// Whether it is a common prefix.
    fn is_prefix(&self) -> bool;
    /// Where a listing resumes after it.
    fn resume(&self) -> Resume;
}

impl Listed for ListItem {
    fn name(&self) -> &str {
        ListItem::name(self)
    }
    fn is_prefix(&self) -> bool {
        matches!(self, ListItem::Prefix(_))
    }
    fn resume(&self) -> Resume {
        (self.name().to_owned(), None)
    }
}

impl Listed for VersionItem {
    fn name(&self) -> &str {
        VersionItem::name(self)
    }
    fn is_prefix(&self) -> bool {
        matches!(self, VersionItem::Prefix(_))
    }
    fn resume(&self) -> Resume {
        match self {
            VersionItem::Version { key, entry, .. } => (key.clone(), Some(entry.version_id().to_owned())),
            VersionItem::Prefix(p) => (p.clone(), None),
        }
    }
}

struct ShardCursor<T> {
    shard: String,
    buffer: std::collections::VecDeque<T>,
    after: Resume,
    more: bool,
    /// How many items the next read asks for.
    page: u32,
}

/// The most items one read of an index shard's listing asks for.
const MAX_SHARD_PAGE: u32 = 1000;

/// The plaintext `opener` opens from the sealed `stored` bytes.
fn open_stream(
    stored: futures::stream::BoxStream<'static, Result<Bytes>>,
    opener: Opener,
) -> impl Stream<Item = Result<Bytes>> + Send + 'static {
    let corrupt = |e: crate::crypt::CryptError| err::io(e.to_string());
    futures::stream::try_unfold((stored, opener, false), move |(mut stored, mut opener, mut end)| async move {
        loop {
            if let Some(plain) = opener.next_plain(end).map_err(corrupt)? {
                return Ok(Some((plain, (stored, opener, end))));
            }
            if end {
                return Ok(None);
            }
            match stored.next().await {
                Some(bytes) => opener.push(bytes?),
                None => end = true,
            }
        }
    })
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
