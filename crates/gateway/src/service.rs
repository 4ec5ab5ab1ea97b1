//! The gateway's operations below any protocol: buckets looked up and changed, objects
//! written, committed and removed with their notifications. The S3 and Swift front ends
//! and the background workers (lifecycle, the Swift expirer) act through [`Service`].

use crate::clock::{new_tag, order_of};
use crate::config::GatewayConfig;
use crate::crypt::Keyring;
use crate::crypt::{Protection, Sealed, Sealer};
use crate::error::{rados_error, stream_error};
use crate::events::{Done, Operation, Pending};
use crate::gc::HeadOf;
use crate::head::ObjectMeta;
use crate::head::read_meta;
use crate::integrity::Integrity;
use crate::layout;
use crate::lifecycle::registry::Registry;
use crate::meta::{BucketInfo, Meta, UserInfo, Versioning};
use crate::notifications::Notifier;
use crate::objects::{Objects, WriteTerms};
use crate::objexp::{Hints, delete_at};
use crate::request::Origin;
use crate::sigv4::hex;
use bytes::Bytes;
use s3s::{S3Result, s3_error};
use shoal_client::IoCtx;
use shoal_objclass::bucket_index::{Which, version_id_of};
use shoal_types::Errno;
use std::sync::Arc;
use std::time::Duration;

/// Longest a bucket removal waits for the bucket's logged events to be moved to their queues.
const LOG_DRAIN_WAIT: Duration = Duration::from_secs(10);

/// What the gateway's front ends and background work act through.
pub struct Service {
    /// Users and buckets.
    pub meta: Arc<Meta>,
    /// The data path.
    pub objects: Arc<Objects>,
    /// The metadata pool in the uploads namespace.
    pub uploads: IoCtx,
    /// Bucket notifications.
    pub notifier: Arc<Notifier>,
    /// Buckets with lifecycle configurations.
    pub lifecycle: Registry,
    /// Where writes leave the times their objects expire (Swift's `X-Delete-At`).
    pub expiry_hints: Hints,
    /// Master keys of SSE-S3 and SSE-KMS (none without a key file).
    pub keyring: Option<Keyring>,
    /// Options.
    pub config: GatewayConfig,
}

/// What a DELETE did.
#[derive(Debug, Default)]
pub struct Deleted {
    /// The version removed, or the delete marker created (`x-amz-version-id`).
    pub version_id: Option<String>,
    /// A delete marker was created, or the version removed was one.
    pub delete_marker: bool,
}

/// Applies `change`, which may refuse, to the bucket's stored record
/// ([`Meta::modify_bucket`]); NoSuchBucket once the bucket is gone.
pub async fn change_bucket_record(
    meta: &Meta,
    bucket: &BucketInfo,
    change: impl Fn(&mut BucketInfo) -> S3Result<()>,
) -> S3Result<()> {
    match meta.modify_bucket(&bucket.name, &bucket.id, change).await {
        Ok(changed) => changed,
        Err(e) if e.errno == Errno::NotFound => Err(s3_error!(NoSuchBucket, "{}", e.message)),
        Err(e) => Err(rados_error(e)),
    }
}

/// Who removes an object: a request (which may bypass governance retention), or the
/// lifecycle worker acting on what it read (an object rewritten since is kept).
#[derive(Clone, Copy, Debug)]
pub enum Remover<'a> {
    /// An S3 DELETE.
    User {
        /// The requester may lift a governance retention.
        bypass: bool,
    },
    /// A lifecycle rule, about the version written at this order.
    Lifecycle {
        /// The order of the version the rule acts on.
        planned_order: &'a str,
    },
}

impl Service {
    /// The bucket `name`, or 404 NoSuchBucket.
    pub async fn named_bucket(&self, name: &str) -> S3Result<Arc<BucketInfo>> {
        self.meta.bucket(name).await.map_err(rados_error)?.ok_or_else(|| s3_error!(NoSuchBucket))
    }

    /// Applies `change` to the bucket's stored record and stores it if that changed it,
    /// without undoing concurrent changes ([`Meta::modify_bucket`]); NoSuchBucket once
    /// the bucket is gone.
    pub async fn change_bucket(&self, bucket: &BucketInfo, change: impl Fn(&mut BucketInfo)) -> S3Result<()> {
        change_bucket_record(&self.meta, bucket, |b| {
            change(b);
            Ok(())
        })
        .await
    }

    /// Writes the head and links the index entry with the persistent `events` if the
    /// condition of `terms` holds (else 412 PreconditionFailed, the data discarded), then
    /// forgets the writer's GC intent (in the background). An object that expires leaves
    /// its hint first.
    #[allow(clippy::too_many_arguments)]
    pub async fn commit(
        &self,
        bucket: &BucketInfo,
        key: &str,
        meta: &mut ObjectMeta,
        data: Bytes,
        intent: Option<crate::gc::Queued>,
        events: &Pending,
        terms: WriteTerms,
    ) -> S3Result<()> {
        let objects = &self.objects;
        if let Some(at) = delete_at(&meta.headers) {
            self.expiry_hints.add(at, &bucket.name, key).await.map_err(rados_error)?;
        }
        let installed = objects.install(bucket, key, meta, data, events, terms).await;
        let refused = matches!(&installed, Err(e) if e.errno == Errno::Canceled);
        match installed {
            Ok(true) => {}
            Ok(false) => objects.discard(bucket, key, meta).await.map_err(rados_error)?,
            Err(_) if refused => {
                let head = Objects::head_of(bucket, key, &meta.order, Objects::own_heads(bucket));
                objects.gc.retire_now(&head, &meta.tail).await.map_err(rados_error)?;
            }
            Err(e) => return Err(rados_error(e)),
        }
        if let Some(intent) = intent {
            // Off the request's path: an intent left behind costs GC a check, never data
            // (what the head or the index refers to is kept).
            let gc = objects.gc.clone();
            tokio::spawn(async move {
                if let Err(e) = gc.forget(&intent).await {
                    tracing::warn!(error = %e, "dropping a write's GC intent failed; GC will find its data in use");
                }
            });
        }
        match refused {
            true => Err(s3_error!(PreconditionFailed, "the object does not meet the write's If-Match / If-None-Match")),
            false => Ok(()),
        }
    }

    /// Streams `body` into a new object `key` with `meta` (size, etag and order filled in),
    /// sealed under `protection` if given, logging the persistent `events`.
    #[allow(clippy::too_many_arguments)]
    pub async fn store_object<S, E>(
        &self,
        bucket: &BucketInfo,
        key: &str,
        mut meta: ObjectMeta,
        body: S,
        protection: Option<Protection>,
        integrity: &Integrity,
        tag: &str,
        events: &Pending,
        terms: WriteTerms,
    ) -> S3Result<ObjectMeta>
    where
        S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        // A bucket that was ever versioned gives the write a head of its own, named by its tag.
        let own = Objects::own_heads(bucket);
        let head = match own {
            true => layout::version_head(&bucket.id, key, tag),
            false => layout::head_object(&bucket.id, key),
        };
        let head_of = HeadOf { at: Objects::index_ref(bucket, key), own };
        let prefix = layout::tail_prefix(&bucket.id, key, tag);
        let (body, running) = integrity.watch(body);
        let sealer = protection.as_ref().map(|p| Sealer::new(p.key.clone()));
        let written =
            self.objects.write_data(body, &head, Some(head_of), &prefix, true, sealer).await.map_err(stream_error)?;
        meta.sealed = protection.map(|p| Sealed { salts: written.salt.into_iter().collect(), ..p.sealed });
        match integrity.verify(&written.md5, running.as_ref()) {
            Ok(checksum) => meta.checksum = checksum.or(meta.checksum),
            Err(e) => {
                let garbage: Vec<_> = written.segment.into_iter().collect();
                self.objects.gc.retire_now(&head, &garbage).await.map_err(rados_error)?;
                return Err(e);
            }
        }
        meta.size = written.size;
        meta.etag = hex(&written.md5);
        meta.mtime_ns = self.objects.clock.now_ns();
        meta.order = order_of(meta.mtime_ns, tag);
        let versioned = bucket.versioning == Versioning::Enabled;
        meta.version = versioned.then(|| version_id_of(&meta.order)).transpose().map_err(rados_error)?;
        meta.tail = written.segment.into_iter().collect();
        meta.parts = None;
        let data = written.inline.unwrap_or_default();
        self.commit(bucket, key, &mut meta, data, written.intent, events, terms).await?;
        Ok(meta)
    }

    /// Admits the events of `op`, runs `work` (which logs the persistent ones in its
    /// bucket index change), then pushes the synchronous ones if it succeeded and `done`
    /// describes what it did (`None`: it changed nothing, as a repeated completion).
    pub async fn with_events<T>(
        &self,
        op: &Operation<'_>,
        origin: &Origin,
        who: &Option<Arc<UserInfo>>,
        work: impl AsyncFnOnce(&Pending) -> S3Result<T>,
        done: impl FnOnce(&T) -> Option<Done>,
    ) -> S3Result<T> {
        let pending = self.notifier.prepare(op, origin, who).await?;
        match work(&pending).await {
            Ok(value) => {
                self.notifier.finish(pending, done(&value)).await;
                Ok(value)
            }
            Err(e) => {
                self.notifier.finish(pending, None).await;
                Err(e)
            }
        }
    }

    /// Replaces the metadata of the version whose head is `head`, unless the version
    /// changed since it was read.
    pub async fn rewrite_meta(&self, head: &str, meta: &ObjectMeta) -> S3Result<()> {
        match self.objects.update_meta(head, meta).await {
            Ok(()) => Ok(()),
            Err(e) if e.errno == Errno::Canceled => {
                Err(s3_error!(OperationAborted, "the object changed meanwhile; try again"))
            }
            Err(e) => Err(rados_error(e)),
        }
    }

    /// Creates bucket `info`: its index shards, then its record (BucketAlreadyExists if
    /// another request created it first; the shards go again then).
    pub async fn create_bucket_record(&self, info: &BucketInfo) -> S3Result<()> {
        self.objects.init_index(info).await.map_err(rados_error)?;
        if let Err(e) = self.meta.create_bucket(info).await {
            let _ = self.objects.remove_index(info).await;
            return Err(match e.errno {
                Errno::Exists => s3_error!(BucketAlreadyExists),
                _ => rados_error(e),
            });
        }
        Ok(())
    }

    /// Removes `bucket` if it holds no object and no version (BucketNotEmpty otherwise).
    pub async fn remove_empty_bucket(&self, bucket: &BucketInfo) -> S3Result<()> {
        let stats = self.objects.bucket_stats(bucket).await.map_err(rados_error)?;
        if !stats.is_empty() {
            return Err(s3_error!(BucketNotEmpty));
        }
        self.remove_bucket(bucket).await.map_err(rados_error)
    }

    /// Removes an (empty) bucket: aborts its uploads, waits for its logged events to reach
    /// their queues (EAGAIN if they do not within [`LOG_DRAIN_WAIT`]), then removes its
    /// record, index shards and upload object.
    pub async fn remove_bucket(&self, bucket: &BucketInfo) -> shoal_types::Result<()> {
        let (uploads, _) = self.objects.list_uploads(&self.uploads, bucket, "", "", usize::MAX).await?;
        for upload in uploads {
            self.objects.abort_upload(&self.uploads, bucket, &upload.key, &upload.upload_id).await?;
        }
        let logs = Objects::index_shards(bucket);
        let publisher = &self.notifier.publisher;
        let deadline = std::time::Instant::now() + LOG_DRAIN_WAIT;
        for log in &logs {
            while !publisher.logs.is_empty(log).await? {
                if std::time::Instant::now() > deadline {
                    return Err(shoal_types::err::again(format!(
                        "bucket {} still has notification events on their way to their queues; retry",
                        bucket.name
                    )));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        self.meta.remove_bucket(bucket).await?;
        self.lifecycle.unregister(&bucket.name).await?;
        self.objects.remove_index(bucket).await?;
        publisher.logs.unregister(&logs).await?;
        crate::meta::remove_ignoring_missing(&self.uploads, &bucket.id).await
    }

    /// Deletes `key` as S3 does in the bucket's versioning state: without `version_id`,
    /// removes it (never versioned) or adds a delete marker; with it, removes that version
    /// for good unless its object lock forbids it. Events: ObjectRemoved:Delete or
    /// ObjectRemoved:DeleteMarkerCreated for a user; for lifecycle,
    /// ObjectLifecycle:Expiration:Current (removal), :DeleteMarkerCreated, :Noncurrent
    /// or :DeleteMarker (removal of a version that is one or the other).
    pub async fn delete_key(
        &self,
        bucket: &BucketInfo,
        key: &str,
        version_id: Option<&str>,
        remover: Remover<'_>,
        origin: &Origin,
        who: &Option<Arc<UserInfo>>,
    ) -> S3Result<Deleted> {
        let (bypass, lifecycle) = match remover {
            Remover::User { bypass } => (bypass, None),
            Remover::Lifecycle { planned_order } => (false, Some(planned_order)),
        };
        // A removal or a marker is ordered past the object it acts on, whatever this
        // gateway's clock says: the one lifecycle read, or the key's newest version.
        match (lifecycle, version_id) {
            (Some(planned), _) => self.objects.clock.observe(planned),
            (None, None) => self.objects.observe_newest(bucket, key).await.map_err(rados_error)?,
            (None, Some(_)) => {}
        }
        let tag = new_tag();
        let order_ns = self.objects.clock.now_ns();
        let order = order_of(order_ns, &tag);
        let owner = who.as_ref().map_or_else(|| bucket.owner.clone(), |u| u.uid.clone());
        // The version the request removes (for its events and answer), if it names one.
        let target = match (version_id, bucket.versioning) {
            (None, _) => None,
            (Some(id), Versioning::Off) if id != "null" => return Err(s3_error!(NoSuchVersion)),
            (Some(id), _) => {
                let found = self.objects.version(bucket, key, Which::from_version_id(Some(id)));
                match found.await.map_err(rados_error)?.entry {
                    Some(entry) => Some(entry),
                    // Deleting a version that is not there succeeds and changes nothing.
                    None => return Ok(Deleted { version_id: Some(id.to_owned()), delete_marker: false }),
                }
            }
        };
        let marker_removed = target.as_ref().is_some_and(|e| e.delete_marker);
        let event = match (&target, bucket.versioning, lifecycle.is_some()) {
            (None, Versioning::Off, false) | (Some(_), _, false) => "ObjectRemoved:Delete",
            (None, _, false) => "ObjectRemoved:DeleteMarkerCreated",
            (None, Versioning::Off, true) => "ObjectLifecycle:Expiration:Current",
            (None, _, true) => "ObjectLifecycle:Expiration:DeleteMarkerCreated",
            (Some(_), _, true) if marker_removed => "ObjectLifecycle:Expiration:DeleteMarker",
            (Some(_), _, true) => "ObjectLifecycle:Expiration:Noncurrent",
        };
        // Lifecycle removes a never-versioned object only if it is still the one it read.
        let delete_order = lifecycle.map_or_else(|| order.clone(), str::to_owned);
        let marker_version = match (version_id, bucket.versioning) {
            (None, Versioning::Enabled) => Some(version_id_of(&order).map_err(rados_error)?),
            _ => None,
        };
        // Filters and events need the removed object's metadata: read it only if someone
        // listens and something is removed (a new delete marker removes nothing).
        let removed_head = match (&target, bucket.versioning) {
            (Some(entry), _) => Some(Objects::head_of(bucket, key, &entry.order, entry.own_head)),
            (None, Versioning::Off) => Some(layout::head_object(&bucket.id, key)),
            (None, _) => None,
        };
        let stored = match removed_head.filter(|_| !bucket.notifications.is_empty()) {
            Some(head) => read_meta(self.objects.pools.data(), &head).await.map_err(rados_error)?,
            None => None,
        };
        let (metadata, tags) = stored.as_ref().map(|m| (m.user_meta.clone(), m.tags.clone())).unwrap_or_default();
        let op = Operation { bucket, key, event, tag: &tag, metadata: &metadata, tags: &tags };
        let deleted = match (&target, version_id, bucket.versioning) {
            (Some(entry), _, _) => {
                Deleted { version_id: Some(entry.version_id().to_owned()), delete_marker: entry.delete_marker }
            }
            (None, _, Versioning::Off) => Deleted::default(),
            (None, _, _) => Deleted {
                version_id: Some(marker_version.clone().unwrap_or_else(|| "null".into())),
                delete_marker: true,
            },
        };
        // The event reports the object as read before the removal (or the new marker).
        let done = || Done {
            size: stored.as_ref().map_or(0, |m| m.size),
            etag: stored.as_ref().map_or(String::new(), |m| m.etag.clone()),
            order_ns,
            version_id: deleted.version_id.clone().unwrap_or_default(),
        };
        let work = async |events: &Pending| {
            let logged = events.logged(&done());
            let objects = &self.objects;
            match (&target, bucket.versioning) {
                (Some(entry), _) => objects.remove_version(bucket, key, entry, logged, bypass).await.map(|_| true),
                (None, Versioning::Off) => objects.delete(bucket, key, &delete_order, logged).await.map(|_| true),
                (None, _) => {
                    let version = marker_version.clone();
                    let marker =
                        objects.add_delete_marker(bucket, key, order_ns, &order, version, &owner, logged, lifecycle);
                    marker.await
                }
            }
            .map_err(rados_error)
        };
        // A lifecycle marker refused (the key was written since the rule read it) did nothing.
        let added = self.with_events(&op, origin, who, work, |added| added.then(done)).await?;
        Ok(if added { deleted } else { Deleted::default() })
    }

    /// Removes `key` of bucket `bucket_name` if its current version expires (Swift's
    /// `X-Delete-At`) at or before `now` (seconds since the epoch): a lifecycle-style
    /// removal of the version read, which notifications see as any other.
    pub async fn expire(&self, bucket_name: &str, key: &str, now: u64) -> shoal_types::Result<()> {
        let Some(bucket) = self.meta.bucket(bucket_name).await? else { return Ok(()) };
        let Some(entry) = self.objects.version(&bucket, key, Which::Current).await?.entry else { return Ok(()) };
        if entry.delete_marker {
            return Ok(());
        }
        let head = Objects::head_of(&bucket, key, &entry.order, entry.own_head);
        let meta = read_meta(self.objects.pools.data(), &head).await?;
        if meta.and_then(|m| delete_at(&m.headers)).is_none_or(|at| at > now) {
            return Ok(());
        }
        let origin = Origin { request_id: "swift-expirer".into(), ..Default::default() };
        let remover = Remover::Lifecycle { planned_order: &entry.order };
        match self.delete_key(&bucket, key, None, remover, &origin, &None).await {
            Ok(_) => Ok(()),
            Err(e) => Err(shoal_types::err::io(format!("expiring '{key}': {}", e.message().unwrap_or("")))),
        }
    }
}
