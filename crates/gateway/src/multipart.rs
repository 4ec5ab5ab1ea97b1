//! Multipart uploads: an upload record and one record per part, as omap entries of the
//! bucket's upload object in the metadata pool; part data in chunk objects like tails.

use crate::layout;
use crate::meta::{BucketInfo, absent_as_empty};
use crate::objects::{ObjectMeta, Objects, StreamError, Written, new_tag, now_ns};
use bytes::Bytes;
use futures::Stream;
use serde::{Deserialize, Serialize};
use shoal_client::{IoCtx, OpBuilder, WriteOp};
use shoal_objclass::bucket_index::{ObjectLock, Segment};
use shoal_types::{CmpMode, CmpOp, Errno, Result, Versioned, err};
use std::collections::BTreeMap;

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
}

impl Versioned for UploadInfo {
    const NAME: &'static str = "upload record";
    /// Version 2: metadata of version 2 (with a version id), and `lock`.
    const VERSION: u8 = 2;

    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        // Version 1 ends with version 1 metadata: the fields both added since (the
        // metadata's version id, the lock's retention and hold) read as none when given
        // as zero bytes.
        (version == 1).then(|| shoal_types::encoding::decode_body("upload record v1", &[body, &[0, 0, 0]].concat()))
    }
}

shoal_objclass::versioned_v1! { PartInfo => "part record" }

/// Smallest part but the last, as S3 requires.
pub const MIN_PART_SIZE: u64 = 5 << 20;

/// Why a completion was refused.
#[derive(Debug)]
pub enum CompleteError {
    /// No such upload.
    NoSuchUpload,
    /// A listed part is missing or its ETag differs.
    InvalidPart(u32),
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
        let info = UploadInfo { key: key.to_owned(), upload_id: upload_id.clone(), initiated_ns: now_ns(), meta, lock };
        let entry = (Bytes::from(layout::upload_key(key, &upload_id)), Bytes::from(info.encode()));
        uploads.operate(&Self::uploads_object(bucket), WriteOp::new().create(false).omap_set([entry])).await?;
        Ok(upload_id)
    }

    /// The upload record, if the upload exists.
    pub async fn upload(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        key: &str,
        upload_id: &str,
    ) -> Result<Option<UploadInfo>> {
        let k = Bytes::from(layout::upload_key(key, upload_id));
        let entries = absent_as_empty(uploads.omap_vals_by_keys(&Self::uploads_object(bucket), [k]).await)?;
        entries.first().map(|(_, v)| UploadInfo::decode(v)).transpose()
    }

    /// Stores one part's data and record, replacing an earlier upload of the same number.
    pub async fn upload_part<S, E>(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        key: &str,
        upload_id: &str,
        number: u32,
        body: S,
    ) -> std::result::Result<Written, StreamError>
    where
        S: Stream<Item = std::result::Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let prefix = layout::part_prefix(&bucket.id, key, upload_id, number, &new_tag());
        let head = layout::head_object(&bucket.id, key);
        let written = self.write_data(body, &head, None, &prefix, false).await?;
        let part_key = Bytes::from(layout::part_key(key, upload_id, number));
        let earlier =
            absent_as_empty(uploads.omap_vals_by_keys(&Self::uploads_object(bucket), [part_key.clone()]).await)?;
        let previous = earlier.first().map(|(_, v)| PartInfo::decode(v)).transpose()?;
        let part = PartInfo {
            number,
            size: written.size,
            etag: hex(&written.md5),
            mtime_ns: now_ns(),
            prefix: prefix.clone(),
        };
        // The upload must still exist (not completed or aborted meanwhile).
        let upload = Bytes::from(layout::upload_key(key, upload_id));
        let op = WriteOp::new()
            .omap_cmp(BTreeMap::from([(upload, (CmpOp::Ge, CmpMode::Bytes, Bytes::new()))]))
            .omap_set([(part_key, Bytes::from(part.encode()))]);
        let stored = uploads.operate(&Self::uploads_object(bucket), op).await;
        if let Some(intent) = &written.intent {
            self.gc.forget(intent).await?;
        }
        let garbage: Vec<Segment> = match &stored {
            Ok(_) => previous.map(|p| Segment { prefix: p.prefix, size: p.size }).into_iter().collect(),
            Err(_) => vec![Segment { prefix, size: written.size }],
        };
        self.gc.retire(&head, &garbage).await?;
        match stored {
            Err(e) if e.errno == Errno::Canceled => Err(StreamError::Rados(err::not_found("no such upload"))),
            other => other.map(|_| written).map_err(StreamError::Rados),
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
        let prefix = format!("{}\0", layout::upload_key(key, upload_id));
        let entries = absent_as_empty(uploads.omap_vals_all(&Self::uploads_object(bucket), prefix.as_bytes()).await)?;
        entries.iter().map(|(_, v)| PartInfo::decode(v).map(|p| (p.number, p))).collect()
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
                // Upload records have one NUL; part records two.
                if k.iter().filter(|&&b| b == 0).count() == 1 {
                    if out.len() == max {
                        return Ok((out, true));
                    }
                    out.push(UploadInfo::decode(&v)?);
                }
                cursor = k;
            }
            if !more {
                return Ok((out, false));
            }
        }
    }

    /// Deletes the upload's records and queues its parts (but `keep`) for GC.
    async fn drop_upload(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        info: &UploadInfo,
        keep: &[String],
    ) -> Result<()> {
        let parts = self.parts(uploads, bucket, &info.key, &info.upload_id).await?;
        let start = layout::upload_key(&info.key, &info.upload_id);
        let mut end = start.clone().into_bytes();
        end.push(1);
        uploads
            .operate(&Self::uploads_object(bucket), WriteOp::new().omap_rm_range(Bytes::from(start), Bytes::from(end)))
            .await?;
        let garbage: Vec<Segment> = parts
            .into_values()
            .filter(|p| !keep.contains(&p.prefix))
            .map(|p| Segment { prefix: p.prefix, size: p.size })
            .collect();
        self.gc.retire_now(&layout::head_object(&bucket.id, &info.key), &garbage).await
    }

    /// Aborts an upload: its records go, its parts are deleted.
    pub async fn abort_upload(&self, uploads: &IoCtx, bucket: &BucketInfo, key: &str, upload_id: &str) -> Result<bool> {
        let Some(info) = self.upload(uploads, bucket, key, upload_id).await? else { return Ok(false) };
        self.drop_upload(uploads, bucket, &info, &[]).await?;
        Ok(true)
    }

    /// Completes an upload from the listed (number, etag) parts, logging the events
    /// `events` gives for the completed object; returns the object's metadata.
    #[allow(clippy::too_many_arguments)]
    pub async fn complete_upload(
        &self,
        uploads: &IoCtx,
        bucket: &BucketInfo,
        key: &str,
        upload_id: &str,
        listed: &[(u32, String)],
        tag: &str,
        events: &crate::notifications::Pending,
        condition: Option<shoal_objclass::bucket_index::Condition>,
    ) -> std::result::Result<ObjectMeta, CompleteError> {
        let Some(info) = self.upload(uploads, bucket, key, upload_id).await? else {
            return Err(CompleteError::NoSuchUpload);
        };
        let parts = self.parts(uploads, bucket, key, upload_id).await?;
        if listed.is_empty() {
            return Err(CompleteError::InvalidPart(0));
        }
        if listed.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(CompleteError::InvalidPartOrder);
        }
        let mut md5s = Vec::with_capacity(listed.len() * 16);
        let mut tail = Vec::with_capacity(listed.len());
        for (i, (number, etag)) in listed.iter().enumerate() {
            let part = parts.get(number).filter(|p| p.etag == *etag).ok_or(CompleteError::InvalidPart(*number))?;
            if i + 1 < listed.len() && part.size < MIN_PART_SIZE {
                return Err(CompleteError::EntityTooSmall(*number));
            }
            md5s.extend(unhex(&part.etag));
            tail.push(Segment { prefix: part.prefix.clone(), size: part.size });
        }
        use md5::Digest;
        let mtime_ns = now_ns();
        let order = crate::objects::order_of(mtime_ns, tag);
        let versioned = bucket.versioning == crate::meta::Versioning::Enabled;
        let meta = ObjectMeta {
            size: tail.iter().map(|s| s.size).sum(),
            etag: format!("{}-{}", hex(&md5::Md5::digest(&md5s).into()), listed.len()),
            mtime_ns,
            version: versioned.then(|| shoal_objclass::bucket_index::version_id_of(&order)).transpose()?,
            order,
            parts: Some(listed.len() as u32),
            tail: tail.clone(),
            ..info.meta.clone()
        };
        let kept: Vec<String> = tail.iter().map(|s| s.prefix.clone()).collect();
        let logged = events.logged(&crate::notifications::Done::of(&meta));
        // A refused condition leaves the upload as it was, for another try.
        let terms = crate::objects::WriteTerms { condition, lock: info.lock };
        if self.install(bucket, key, &meta, Bytes::new(), logged, terms).await? {
            self.drop_upload(uploads, bucket, &info, &kept).await?;
        } else {
            // A newer write of the key won: this upload's data is garbage.
            self.discard(bucket, key, &ObjectMeta { tail: Vec::new(), ..meta.clone() }).await?;
            self.drop_upload(uploads, bucket, &info, &[]).await?;
        }
        Ok(meta)
    }
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8; 16]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2).filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()).collect()
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
        assert_eq!(
            (info.meta.owner.as_str(), info.meta.version.clone(), info.lock),
            ("o", None, ObjectLock::default())
        );
        assert_eq!(UploadInfo::decode(&info.encode()).unwrap(), info);
    }
}
