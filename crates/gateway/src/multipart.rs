//! Multipart uploads: an upload record and one record per part, as omap entries of the
//! bucket's upload object in the metadata pool; part data in chunk objects like tails.

use crate::clock::{new_tag, now_ns, order_of};
use crate::events::Pending;
use crate::head::ObjectMeta;
use crate::layout;
use crate::meta::{BucketInfo, absent_as_empty};
use crate::objects::{Objects, StreamError, Written};
use crate::sigv4::{hex, unhex};
use bytes::Bytes;
use futures::Stream;
use serde::{Deserialize, Serialize};
use shoal_client::{IoCtx, OpBuilder, WriteOp};
use shoal_objclass::bucket_index::{ObjectLock, Segment};
use shoal_types::{CmpMode, CmpOp, Errno, Result, Versioned, err};
use std::collections::BTreeMap;

/// Completed uploads whose records one completion removes at most.
const FORGET_BATCH: u32 = 100;

/// An upload in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadInfo {
    /// The object key.
    pub key: String,
    /// The upload id.
    pub upload_id: String,
    /// When it was created, ns since the epoch.
    pub initiated_ns: u64,
    /// Metadata the completed object gets (size, etag, order and tail are filled in then).
    pub meta: ObjectMeta,
    /// The completed object's object lock.
    pub lock: ObjectLock,
    /// Set by the first completion attempt; kept once completed, to answer retries.
    pub completion: Option<Completion>,
}

/// A completion of an upload: what every attempt writes, and how it ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completion {
    /// The time of the write, chosen by the first attempt: every retry writes the same
    /// version (same order), so a completion interrupted by a crash finishes as one.
    pub mtime_ns: u64,
    /// The write's tag, chosen likewise.
    pub tag: String,
    /// The version id it writes (fixed then too, whatever the bucket's versioning later).
    pub version: Option<String>,
    /// The parts listed, (number, ETag).
    pub parts: Vec<(u32, String)>,
    /// The object is linked: the upload is completed.
    pub done: bool,
}

/// One uploaded part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartInfo {
    /// Part number, 1..=10000.
    pub number: u32,
    /// Bytes.
    pub size: u64,
    /// MD5 of the part, hex.
    pub etag: String,
    /// Upload time, ns since the epoch.
    pub mtime_ns: u64,
    /// Where its chunks are.
    pub prefix: String,
    /// The checksum it was uploaded with.
    pub checksum: Option<crate::checksum::Stored>,
    /// How it is sealed, when the upload is encrypted.
    pub sealed: Option<SealedPart>,
}

/// The encryption of one uploaded part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedPart {
    /// The part's nonce salt.
    pub salt: u64,
    /// Its stored (ciphertext) size.
    pub stored: u64,
}

impl PartInfo {
    /// The part's data as a tail segment.
    fn segment(&self) -> Segment {
        Segment { prefix: self.prefix.clone(), size: self.sealed.map_or(self.size, |s| s.stored) }
    }
}

impl Versioned for UploadInfo {
    const NAME: &'static str = "upload record";
    /// Version 4: metadata of version 4 (encryption). Version 3: metadata of version 3
    /// (grants, checksum). Version 2: metadata of version 2 (with a version id), and `lock`.
    const VERSION: u8 = 4;

    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        use crate::head::{ObjectMetaV2, ObjectMetaV3};
        use shoal_types::encoding::decode_body;
        let older = match version {
            // Version 1 ends with version 1 metadata: the fields added since (the
            // metadata's version id, the lock's retention and hold, the completion) read
            // as none when given as zero bytes.
            1 => decode_body::<OlderUpload<ObjectMetaV2>>("upload record v1", &[body, &[0, 0, 0, 0]].concat())
                .map(UploadInfo::from),
            2 => decode_body::<OlderUpload<ObjectMetaV2>>("upload record v2", body).map(UploadInfo::from),
            3 => decode_body::<OlderUpload<ObjectMetaV3>>("upload record v3", body).map(UploadInfo::from),
            _ => return None,
        };
        Some(older)
    }
}

/// [`UploadInfo`] of an earlier version, with metadata `M` of that version.
#[derive(Deserialize)]
struct OlderUpload<M> {
    key: String,
    upload_id: String,
    initiated_ns: u64,
    meta: M,
    lock: ObjectLock,
    completion: Option<Completion>,
}

impl<M: Into<ObjectMeta>> From<OlderUpload<M>> for UploadInfo {
    fn from(older: OlderUpload<M>) -> UploadInfo {
        UploadInfo {
            key: older.key,
            upload_id: older.upload_id,
            initiated_ns: older.initiated_ns,
            meta: older.meta.into(),
            lock: older.lock,
            completion: older.completion,
        }
    }
}

impl Versioned for PartInfo {
    const NAME: &'static str = "part record";
    /// Version 2 added `checksum` and `sealed`.
    const VERSION: u8 = 2;

    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        // Version 1 is version 2 without its last two fields: two `None`s appended read as them.
        (version == 1).then(|| shoal_types::encoding::decode_body("part record v1", &[body, &[0, 0]].concat()))
    }
}

/// Smallest part but the last, as S3 requires.
pub const MIN_PART_SIZE: u64 = 5 << 20;

/// Why a completion was refused.
#[derive(Debug)]
pub enum CompleteError {
    /// No such upload.
    NoSuchUpload,
    /// A listed part is missing or its ETag differs.
    InvalidPart(u32),
    /// The upload was (or is being) completed with other parts.
    OtherParts,
    /// Parts are not in ascending order.
    InvalidPartOrder,
    /// A part other than the last is under 5 MiB.
    EntityTooSmall(u32),
    /// The object layer failed.
    Rados(shoal_types::RadosError),
}

impl From<shoal_types::RadosError> for CompleteError {
    fn from(e: shoal_types::RadosError) -> Self {
        CompleteError::Rados(e)
    }
}

impl Objects {
    fn uploads_object(bucket: &BucketInfo) -> String {
        bucket.id.clone()
    }

    /// Starts an upload; returns its id.
    pub async fn create_upload(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        key: &str,
        meta: ObjectMeta,
        lock: ObjectLock,
    ) -> Result<String> {
        let upload_id = format!("2~{}", new_tag());
        let info = UploadInfo {
            key: key.to_owned(),
            upload_id: upload_id.clone(),
            initiated_ns: now_ns(),
            meta,
            lock,
            completion: None,
        };
        let entry = (Bytes::from(layout::upload_key(key, &upload_id)), Bytes::from(info.encode()));
        uploads.operate(&Self::uploads_object(bucket), WriteOp::new().create(false).omap_set([entry])).await?;
        Ok(upload_id)
    }

    /// The record of an upload that is neither completed nor being completed.
    pub async fn upload(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        key: &str,
        upload_id: &str,
    ) -> Result<Option<UploadInfo>> {
        let stored = self.upload_record(uploads, bucket, key, upload_id).await?;
        Ok(stored.map(|(info, _)| info).filter(|info| info.completion.is_none()))
    }

    /// The upload record, whatever its state, and its stored bytes.
    async fn upload_record(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        key: &str,
        upload_id: &str,
    ) -> Result<Option<(UploadInfo, Bytes)>> {
        let k = Bytes::from(layout::upload_key(key, upload_id));
        let entries = absent_as_empty(uploads.omap_vals_by_keys(&Self::uploads_object(bucket), [k]).await)?;
        entries.into_iter().next().map(|(_, v)| Ok((UploadInfo::decode(&v)?, v))).transpose()
    }

    /// Stores one part's data (sealed by `sealer` if given) and, if `check` accepts the
    /// data written (returning its checksum), its record, replacing an earlier upload of
    /// the same number; data `check` refuses is deleted. Returns the part's record.
    #[allow(clippy::too_many_arguments)]
    pub async fn upload_part<S, E, X>(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        key: &str,
        upload_id: &str,
        number: u32,
        body: S,
        sealer: Option<crate::crypt::Sealer>,
        check: impl FnOnce(&Written) -> std::result::Result<Option<crate::checksum::Stored>, X>,
    ) -> std::result::Result<PartInfo, X>
    where
        S: Stream<Item = std::result::Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
        X: From<StreamError>,
    {
        let prefix = layout::part_prefix(&bucket.id, key, upload_id, number, &new_tag());
        let head = layout::head_object(&bucket.id, key);
        let written = self.write_data(body, &head, None, &prefix, false, sealer).await?;
        let stored_size = written.segment.as_ref().map_or(0, |s| s.size);
        let segment = Segment { prefix: prefix.clone(), size: stored_size };
        let checksum = match check(&written) {
            Ok(checksum) => checksum,
            Err(refused) => {
                self.gc.retire_now(&head, &[segment]).await.map_err(StreamError::Rados)?;
                return Err(refused);
            }
        };
        let part_key = Bytes::from(layout::part_key(key, upload_id, number));
        let earlier = uploads.omap_vals_by_keys(&Self::uploads_object(bucket), [part_key.clone()]).await;
        let earlier = absent_as_empty(earlier).map_err(StreamError::Rados)?;
        let previous = earlier.first().map(|(_, v)| PartInfo::decode(v)).transpose().map_err(StreamError::Rados)?;
        let part = PartInfo {
            number,
            size: written.size,
            etag: hex(&written.md5),
            mtime_ns: now_ns(),
            prefix,
            checksum,
            sealed: written.salt.map(|salt| SealedPart { salt, stored: stored_size }),
        };
        // The upload must still exist (not completed or aborted meanwhile).
        let upload = Bytes::from(layout::upload_key(key, upload_id));
        let op = WriteOp::new()
            .omap_cmp(BTreeMap::from([(upload, (CmpOp::Ge, CmpMode::Bytes, Bytes::new()))]))
            .omap_set([(part_key, Bytes::from(part.encode()))]);
        let stored = uploads.operate(&Self::uploads_object(bucket), op).await;
        if let Some(intent) = &written.intent {
            self.gc.forget(intent).await.map_err(StreamError::Rados)?;
        }
        let garbage: Vec<Segment> = match &stored {
            Ok(_) => previous.map(|p| p.segment()).into_iter().collect(),
            Err(_) => vec![segment],
        };
        self.gc.retire(&head, &garbage).await.map_err(StreamError::Rados)?;
        match stored {
            Err(e) if e.errno == Errno::Canceled => Err(StreamError::Rados(err::not_found("no such upload")).into()),
            other => other.map(|_| part).map_err(|e| StreamError::Rados(e).into()),
        }
    }

    /// The upload's parts by number.
    pub async fn parts(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        key: &str,
        upload_id: &str,
    ) -> Result<BTreeMap<u32, PartInfo>> {
        let prefix = layout::parts_prefix(key, upload_id);
        let entries = absent_as_empty(uploads.omap_vals_all(&Self::uploads_object(bucket), prefix.as_bytes()).await)?;
        entries.iter().map(|(_, v)| PartInfo::decode(v).map(|p| (p.number, p))).collect()
    }

    /// Up to `max` of the upload's parts numbered above `after`, in order, and whether
    /// more follow: one omap read from that part on, whatever the upload's size.
    pub async fn parts_page(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        key: &str,
        upload_id: &str,
        after: u32,
        max: u32,
    ) -> Result<(Vec<PartInfo>, bool)> {
        let prefix = layout::parts_prefix(key, upload_id);
        let start = match after {
            0 => prefix.clone(),
            n => layout::part_key(key, upload_id, n),
        };
        let page = uploads.omap_vals(&Self::uploads_object(bucket), start.as_bytes(), prefix.as_bytes(), max).await;
        let (entries, more) = absent_as_empty(page)?;
        let parts = entries.iter().map(|(_, v)| PartInfo::decode(v)).collect::<Result<_>>()?;
        Ok((parts, more))
    }

    /// Where a listing of uploads resumes after ListMultipartUploads' `key-marker` and
    /// `upload-id-marker`, as [`Objects::list_uploads`] takes it: after that upload, or
    /// with only a key after every upload of that key.
    pub fn uploads_after(key_marker: Option<&str>, upload_id_marker: Option<&str>) -> String {
        match (key_marker, upload_id_marker) {
            (Some(k), Some(u)) => layout::upload_key(k, u) + "\u{1}",
            (Some(k), None) => format!("{k}\u{1}"),
            _ => String::new(),
        }
    }

    /// Uploads of the bucket whose keys start with `prefix`, in key then upload-id order,
    /// after `after` (an omap key); at most `max`, and whether more follow.
    pub async fn list_uploads(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        after: &str,
        prefix: &str,
        max: usize,
    ) -> Result<(Vec<UploadInfo>, bool)> {
        let mut out = Vec::new();
        let mut cursor = Bytes::from(after.to_owned());
        loop {
            let page = uploads.omap_vals(&Self::uploads_object(bucket), &cursor, prefix.as_bytes(), 1000).await;
            let (entries, more) = absent_as_empty(page)?;
            for (k, v) in entries {
                // Upload records have one NUL; part records two. Completed uploads are gone.
                if k.iter().filter(|&&b| b == 0).count() == 1 {
                    let info = UploadInfo::decode(&v)?;
                    if info.completion.as_ref().is_some_and(|c| c.done) {
                        cursor = k;
                        continue;
                    }
                    if out.len() == max {
                        return Ok((out, true));
                    }
                    out.push(info);
                }
                cursor = k;
            }
            if !more {
                return Ok((out, false));
            }
        }
    }

    /// Deletes the upload's records (leaving `completed` as its record, listed for removal
    /// after `completion_keep`, if given) and queues its parts (but `keep`) for GC.
    async fn drop_upload(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        info: &UploadInfo,
        keep: &[String],
        completed: Option<&UploadInfo>,
    ) -> Result<()> {
        let parts = self.parts(uploads, bucket, &info.key, &info.upload_id).await?;
        let start = layout::upload_key(&info.key, &info.upload_id);
        let mut end = start.clone().into_bytes();
        end.push(1);
        let mut op = WriteOp::new().omap_rm_range(Bytes::from(start.clone()), Bytes::from(end));
        if let Some(completed) = completed {
            let listed = layout::completed_upload_key(now_ns(), &info.key, &info.upload_id);
            op = op
                .omap_set([(Bytes::from(start), Bytes::from(completed.encode())), (Bytes::from(listed), Bytes::new())]);
        }
        uploads.operate(&Self::uploads_object(bucket), op).await?;
        let garbage: Vec<Segment> =
            parts.into_values().filter(|p| !keep.contains(&p.prefix)).map(|p| p.segment()).collect();
        self.gc.retire_now(&layout::head_object(&bucket.id, &info.key), &garbage).await
    }

    /// Aborts an upload: its records go, its parts are deleted. A completed upload is
    /// not there to abort; one whose completion was interrupted is finished instead if
    /// its object was written (its parts are in use).
    pub async fn abort_upload(&self, uploads: &IoCtx, bucket: &BucketInfo, key: &str, upload_id: &str) -> Result<bool> {
        let Some((info, _)) = self.upload_record(uploads, bucket, key, upload_id).await? else { return Ok(false) };
        match &info.completion {
            Some(c) if c.done => return Ok(false),
            Some(c) => {
                let meta =
                    ObjectMeta { order: order_of(c.mtime_ns, &c.tag), version: c.version.clone(), ..info.meta.clone() };
                if self.written(bucket, key, &meta).await? {
                    let parts = self.parts(uploads, bucket, key, upload_id).await?;
                    let kept =
                        c.parts.iter().filter_map(|(n, _)| parts.get(n).map(|p| p.prefix.clone())).collect::<Vec<_>>();
                    let done = Completion { done: true, ..c.clone() };
                    let completed = UploadInfo { completion: Some(done), ..info.clone() };
                    self.drop_upload(uploads, bucket, &info, &kept, Some(&completed)).await?;
                    return Ok(false);
                }
            }
            None => {}
        }
        self.drop_upload(uploads, bucket, &info, &[], None).await?;
        Ok(true)
    }

    /// The version id a write at `mtime_ns` with `tag` gets in `bucket`.
    fn version_of(&self, bucket: &BucketInfo, mtime_ns: u64, tag: &str) -> Result<Option<String>> {
        let versioned = bucket.versioning == crate::meta::Versioning::Enabled;
        let order = order_of(mtime_ns, tag);
        versioned.then(|| shoal_objclass::bucket_index::version_id_of(&order)).transpose()
    }

    /// Completes an upload from the listed (number, etag) parts, logging the events
    /// `events` gives for the completed object; returns the object's metadata and whether
    /// this attempt wrote it (false: it answers as an earlier, completed one did, and its
    /// events are not sent again). The first attempt fixes the write's time and tag in the
    /// upload record, so a retry (after a lost answer or a crash) writes the same version
    /// or answers as the first did; a different part list is refused.
    #[allow(clippy::too_many_arguments)]
    pub async fn complete_upload(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        key: &str,
        upload_id: &str,
        listed: &[(u32, String)],
        tag: &str,
        events: &Pending,
        condition: Option<shoal_objclass::bucket_index::Condition>,
    ) -> std::result::Result<(ObjectMeta, bool), CompleteError> {
        if listed.is_empty() {
            return Err(CompleteError::InvalidPart(0));
        }
        if listed.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(CompleteError::InvalidPartOrder);
        }
        // Two tries: a concurrent attempt that claims the upload first is followed.
        for _ in 0..2 {
            let Some((info, stored)) = self.upload_record(uploads, bucket, key, upload_id).await? else {
                return Err(CompleteError::NoSuchUpload);
            };
            let completion = match &info.completion {
                Some(c) if c.parts != listed => return Err(CompleteError::OtherParts),
                Some(c) => c.clone(),
                None => {
                    self.observe_newest(bucket, key).await?;
                    let mtime_ns = self.clock.now_ns();
                    let version = self.version_of(bucket, mtime_ns, tag)?;
                    Completion { mtime_ns, tag: tag.to_owned(), version, parts: listed.to_vec(), done: false }
                }
            };
            let parts = self.parts(uploads, bucket, key, upload_id).await?;
            let meta = self.completed_meta(&info, &parts, &completion)?;
            if completion.done {
                // Completed before: answer as then.
                return Ok((meta, false));
            }
            let claimed = UploadInfo { completion: Some(completion.clone()), ..info.clone() };
            if info.completion.is_none() {
                let key_bytes = Bytes::from(layout::upload_key(key, upload_id));
                let op = WriteOp::new()
                    .omap_cmp(BTreeMap::from([(key_bytes.clone(), (CmpOp::Eq, CmpMode::Bytes, stored))]))
                    .omap_set([(key_bytes, Bytes::from(claimed.encode()))]);
                match uploads.operate(&Self::uploads_object(bucket), op).await {
                    Err(e) if e.errno == Errno::Canceled => continue,
                    other => other?,
                };
            }
            let kept: Vec<String> = meta.tail.iter().map(|s| s.prefix.clone()).collect();
            // A refused condition leaves the upload as it was, for another try.
            let terms = crate::objects::WriteTerms { condition, lock: info.lock, fresh: false };
            let mut meta = meta;
            match self.install(bucket, key, &mut meta, Bytes::new(), events, terms).await {
                Err(e) if e.errno == Errno::Canceled => {
                    self.write_upload(uploads, bucket, &UploadInfo { completion: None, ..info }).await?;
                    return Err(CompleteError::Rados(e));
                }
                Ok(true) => {
                    let done = Completion { done: true, ..completion };
                    let completed = UploadInfo { completion: Some(done), ..info.clone() };
                    self.drop_upload(uploads, bucket, &info, &kept, Some(&completed)).await?;
                    if let Err(e) = self.forget_completed(uploads, bucket).await {
                        tracing::warn!(bucket = %bucket.name, error = %e, "removing old completed uploads failed");
                    }
                }
                Ok(false) => {
                    // A newer write of the key won: this upload's data is garbage.
                    self.discard(bucket, key, &ObjectMeta { tail: Vec::new(), ..meta.clone() }).await?;
                    self.drop_upload(uploads, bucket, &info, &[], None).await?;
                }
                Err(e) => return Err(e.into()),
            }
            return Ok((meta, true));
        }
        Err(CompleteError::Rados(err::again("the upload is being completed by another request; retry")))
    }

    /// Removes the records of uploads of `bucket` completed longer than `completion_keep`
    /// ago (at most [`FORGET_BATCH`] per call; every completion calls it).
    async fn forget_completed(&self, uploads: &IoCtx, bucket: &BucketInfo) -> Result<()> {
        let object = Self::uploads_object(bucket);
        let (listed, _) = uploads.omap_vals(&object, b"", layout::COMPLETED_UPLOADS, FORGET_BATCH).await?;
        let before = now_ns().saturating_sub(self.completion_keep.as_nanos() as u64);
        let mut forgotten = Vec::new();
        for (listed, _) in listed {
            let rest = &listed[layout::COMPLETED_UPLOADS.len()..];
            let Some((done_ns, record)) = std::str::from_utf8(rest).ok().and_then(|r| r.split_once('\0')) else {
                continue;
            };
            if done_ns.parse::<u64>().is_ok_and(|t| t >= before) {
                break;
            }
            forgotten.push(Bytes::copy_from_slice(record.as_bytes()));
            forgotten.push(listed);
        }
        if forgotten.is_empty() {
            return Ok(());
        }
        uploads.operate(&object, WriteOp::new().omap_rm_keys(forgotten)).await.map(|_| ())
    }

    /// Replaces an upload record.
    async fn write_upload(&self, uploads: &IoCtx, bucket: &BucketInfo, info: &UploadInfo) -> Result<()> {
        let entry = (Bytes::from(layout::upload_key(&info.key, &info.upload_id)), Bytes::from(info.encode()));
        uploads.operate(&Self::uploads_object(bucket), WriteOp::new().omap_set([entry])).await.map(|_| ())
    }

    /// The metadata of the object `completion` of `info` makes from its parts.
    fn completed_meta(
        &self,
        info: &UploadInfo,
        parts: &BTreeMap<u32, PartInfo>,
        completion: &Completion,
    ) -> std::result::Result<ObjectMeta, CompleteError> {
        let Completion { mtime_ns, tag, version, parts: listed, done } = completion;
        let done = *done;
        let mut md5s = Vec::with_capacity(listed.len() * 16);
        let mut tail = Vec::with_capacity(listed.len());
        let (mut size, mut salts, mut checksums) = (0, Vec::new(), Vec::new());
        for (i, (number, etag)) in listed.iter().enumerate() {
            // A completed upload's part records are gone: its list was checked when it completed.
            let part = match parts.get(number) {
                Some(p) if p.etag == *etag => Some(p),
                _ if done => None,
                _ => return Err(CompleteError::InvalidPart(*number)),
            };
            if let Some(part) = part {
                if i + 1 < listed.len() && part.size < MIN_PART_SIZE {
                    return Err(CompleteError::EntityTooSmall(*number));
                }
                size += part.size;
                tail.push(part.segment());
                salts.extend(part.sealed.map(|s| s.salt));
                checksums.push(part.checksum.as_ref());
            }
            // Part ETags are the MD5s this gateway wrote, in hex.
            md5s.extend(unhex(etag).unwrap_or_default());
        }
        let sealed = info.meta.sealed.clone().map(|sealed| crate::crypt::Sealed { salts, ..sealed });
        // Parts all checked with one algorithm give the object their composite checksum.
        let algorithm = checksums.first().copied().flatten().map(|c| c.algorithm);
        let same = checksums.iter().all(|c| c.is_some_and(|c| Some(c.algorithm) == algorithm));
        let checksum = match (algorithm, same && checksums.len() == listed.len()) {
            (Some(algorithm), true) => {
                let values: Vec<String> = checksums.iter().flatten().map(|c| c.value.clone()).collect();
                crate::checksum::composite(algorithm, &values)
            }
            _ => None,
        };
        use md5::Digest;
        Ok(ObjectMeta {
            size,
            sealed,
            checksum,
            etag: format!("{}-{}", hex(&md5::Md5::digest(&md5s)), listed.len()),
            mtime_ns: *mtime_ns,
            version: version.clone(),
            order: order_of(*mtime_ns, tag),
            parts: Some(listed.len() as u32),
            tail,
            ..info.meta.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_1_upload_records_still_decode() {
        // An upload record as version 1 wrote it: its metadata had no version id.
        let v1 = [
            &[1, 1, b'k', 1, b'u', 5][..],
            &[0, 0, 0, 1, b'o', 0, 0, 0, 0, 0, 0, 0, 0], // metadata v1: size, etag, mtime, owner, then empty
        ]
        .concat();
        let info = UploadInfo::decode(&v1).unwrap();
        assert_eq!((info.key.as_str(), info.upload_id.as_str(), info.initiated_ns), ("k", "u", 5));
        assert_eq!(info.meta.acl, crate::access::acl::Acl::private("o"), "the canned ACL became its grants");
        assert_eq!(
            (info.meta.owner.as_str(), info.meta.version.clone(), info.lock),
            ("o", None, ObjectLock::default())
        );
        // Version 2: version 1 with the version id, lock and completion (none here).
        let v2 = [&[2][..], &v1[1..], &[0, 0, 0, 0]].concat();
        assert_eq!(UploadInfo::decode(&v2).unwrap(), info);
        // Version 3 holds version 3 metadata: the owner's grant where a canned ACL was.
        let v3 = [&[3, 1, b'k', 1, b'u', 5, 0, 0, 0, 1, b'o'][..], &[1, 0, 1, b'o', 4], &[0; 12]].concat();
        assert_eq!(UploadInfo::decode(&v3).unwrap(), info);
        // Version 4 holds version 4 metadata: one more field, `sealed`, after the checksum.
        let v4 = [&[4][..], &v3[1..v3.len() - 3], &[0], &v3[v3.len() - 3..]].concat();
        assert_eq!(info.encode(), v4);
        assert_eq!(UploadInfo::decode(&v4).unwrap(), info);
    }
}
