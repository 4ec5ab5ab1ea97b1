//! Multipart uploads: creating, uploading and copying parts, listing, completing, aborting.

use super::access::requested_acl;
use super::common::*;
use super::encryption::{customer_headers, requested_encryption, show_encryption};
use super::lock::requested_lock;
use super::versions::shown_version;
use crate::access::Action;
use crate::checksum;
use crate::clock::{new_tag, now_ns};
use crate::crypt::Sealer;
use crate::error::rados_error;
use crate::events::{Done, Operation, Pending};
use crate::head::ObjectMeta;
use crate::integrity::Integrity;
use crate::multipart::CompleteError;
use crate::objects::{Found, Objects};
use futures::StreamExt;
use s3s::dto::*;
use s3s::{S3Error, S3Request, S3Response, S3Result, s3_error};
use shoal_types::Errno;

impl ShoalS3 {
    pub(crate) async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> Answer<CreateMultipartUploadOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
        let (owner, acl) = self.new_object_acl(&bucket, &caller, requested_acl!(input, None)).await?;
        let lock = requested_lock(
            &bucket,
            input.object_lock_mode.as_ref(),
            input.object_lock_retain_until_date.as_ref(),
            input.object_lock_legal_hold_status.as_ref(),
            now_ns(),
        )?;
        let customer = self.customer_key(customer_headers!(input), origin_of(&req.extensions).secure)?;
        let protection = self.protection(&bucket, requested_encryption!(input, customer.as_ref()))?;
        let meta = ObjectMeta {
            sealed: protection.map(|p| p.sealed),
            ..new_object!(input).into_meta(&owner, acl, &req.extensions)?
        };
        let sealed = meta.sealed.clone();
        let upload_id =
            self.objects.create_upload(&self.uploads, &bucket, &input.key, meta, lock).await.map_err(rados_error)?;
        let mut out = CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(upload_id),
            ..Default::default()
        };
        show_encryption!(out, sealed.as_ref(), customer.as_ref());
        Ok(S3Response::new(out))
    }

    pub(crate) async fn upload_part(&self, mut req: S3Request<UploadPartInput>) -> Answer<UploadPartOutput> {
        let caller = self.caller(&req).await?;
        let content_md5 = req.input.content_md5.take();
        let integrity = Integrity::of(&mut req, content_md5)?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
        let number = Self::validate_part_number(input.part_number)?;
        let upload = self.require_upload(&bucket, &input.key, &input.upload_id).await?;
        let customer = self.customer_key(customer_headers!(input), origin_of(&req.extensions).secure)?;
        let sealer = self.data_key(upload.meta.sealed.as_ref(), customer.as_ref())?.map(Sealer::new);
        let body = input.body.map(|b| b.boxed()).unwrap_or_else(|| futures::stream::empty().boxed());
        let (body, running) = integrity.watch(body);
        let check = |written: &crate::objects::Written| integrity.verify(&written.md5, running.as_ref());
        let part = self
            .objects
            .upload_part(&self.uploads, &bucket, &input.key, &input.upload_id, number, body, sealer, check)
            .await?;
        let mut out = UploadPartOutput { e_tag: Some(etag(&part.etag)), ..Default::default() };
        show_checksum!(out, part.checksum.as_ref(), Some(ChecksumMode::from_static(ChecksumMode::ENABLED)), part);
        show_encryption!(out, upload.meta.sealed.as_ref(), customer.as_ref());
        Ok(S3Response::new(out))
    }

    pub(crate) async fn upload_part_copy(&self, req: S3Request<UploadPartCopyInput>) -> Answer<UploadPartCopyOutput> {
        let caller = self.caller(&req).await?;
        let secure = origin_of(&req.extensions).secure;
        let input = req.input;
        let (_, Found { meta: src_meta, inline, .. }) =
            self.copy_source(&input.copy_source, &caller, copy_conditions!(input)).await?;
        let src_customer = self.customer_key(customer_headers!(input, copy_source), secure)?;
        let src_key_data = self.data_key(src_meta.sealed.as_ref(), src_customer.as_ref())?;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
        let number = Self::validate_part_number(input.part_number)?;
        let upload = self.require_upload(&bucket, &input.key, &input.upload_id).await?;
        let customer = self.customer_key(customer_headers!(input), secure)?;
        let sealer = self.data_key(upload.meta.sealed.as_ref(), customer.as_ref())?.map(Sealer::new);
        let span = match &input.copy_source_range {
            None => 0..src_meta.size,
            Some(r) => copy_range(r, src_meta.size)
                .ok_or_else(|| s3_error!(InvalidRange, "bad x-amz-copy-source-range '{r}'"))?,
        };
        let data = self.objects.read_range(&src_meta, inline, span, src_key_data);
        let unchecked = |_: &crate::objects::Written| Ok::<_, S3Error>(None);
        let part = self
            .objects
            .upload_part(&self.uploads, &bucket, &input.key, &input.upload_id, number, data, sealer, unchecked)
            .await?;
        let mut out = UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(etag(&part.etag)),
                last_modified: Some(timestamp(part.mtime_ns)),
                ..Default::default()
            }),
            ..Default::default()
        };
        show_encryption!(out, upload.meta.sealed.as_ref(), customer.as_ref());
        Ok(S3Response::new(out))
    }

    pub(crate) async fn list_parts(&self, req: S3Request<ListPartsInput>) -> Answer<ListPartsOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket =
            self.bucket_for(&input.bucket, &caller, Action::ListMultipartUploadParts, Some(&input.key)).await?;
        let Some(upload) =
            self.objects.upload(&self.uploads, &bucket, &input.key, &input.upload_id).await.map_err(rados_error)?
        else {
            return Err(s3_error!(NoSuchUpload));
        };
        let marker = input.part_number_marker.unwrap_or(0).clamp(0, 10_000) as u32;
        let max = input.max_parts.unwrap_or(1000).clamp(0, 1000) as u32;
        let (parts, truncated) = self
            .objects
            .parts_page(&self.uploads, &bucket, &input.key, &input.upload_id, marker, max)
            .await
            .map_err(rados_error)?;
        let page: Vec<Part> = parts
            .iter()
            .map(|p| {
                let mut part = Part {
                    part_number: Some(p.number as i32),
                    size: Some(p.size as i64),
                    e_tag: Some(etag(&p.etag)),
                    last_modified: Some(timestamp(p.mtime_ns)),
                    ..Default::default()
                };
                show_checksum!(part, p.checksum.as_ref(), Some(ChecksumMode::from_static(ChecksumMode::ENABLED)), part);
                part
            })
            .collect();
        let next = page.last().and_then(|p| p.part_number).filter(|_| truncated);
        let owner = self.owners().get(&upload.meta.owner).await;
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            initiator: Some(initiator(&owner)),
            owner: Some(owner),
            max_parts: Some(max as i32),
            part_number_marker: input.part_number_marker,
            next_part_number_marker: next,
            is_truncated: Some(truncated),
            parts: Some(page),
            ..Default::default()
        }))
    }

    pub(crate) async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> Answer<ListMultipartUploadsOutput> {
        let bucket = self.open(&req, Action::ListBucketMultipartUploads).await?;
        let input = req.input;
        let max = input.max_uploads.unwrap_or(1000).clamp(0, 1000) as usize;
        let after = Objects::uploads_after(input.key_marker.as_deref(), input.upload_id_marker.as_deref());
        let prefix = input.prefix.clone().unwrap_or_default();
        let (page, truncated) =
            self.objects.list_uploads(&self.uploads, &bucket, &after, &prefix, max).await.map_err(rados_error)?;
        let mut owners = self.owners();
        let mut uploads: Vec<MultipartUpload> = Vec::with_capacity(page.len());
        for u in &page {
            let owner = owners.get(&u.meta.owner).await;
            uploads.push(MultipartUpload {
                key: Some(u.key.clone()),
                upload_id: Some(u.upload_id.clone()),
                initiated: Some(timestamp(u.initiated_ns)),
                initiator: Some(initiator(&owner)),
                owner: Some(owner),
                storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
                ..Default::default()
            });
        }
        let last = uploads.last().filter(|_| truncated);
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: input.prefix,
            key_marker: input.key_marker,
            upload_id_marker: input.upload_id_marker,
            next_key_marker: last.and_then(|u| u.key.clone()),
            next_upload_id_marker: last.and_then(|u| u.upload_id.clone()),
            max_uploads: Some(max as i32),
            is_truncated: Some(truncated),
            uploads: Some(uploads),
            ..Default::default()
        }))
    }

    pub(crate) async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> Answer<CompleteMultipartUploadOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
        let listed: Vec<(u32, String)> = input
            .multipart_upload
            .and_then(|m| m.parts)
            .ok_or_else(|| s3_error!(MalformedXML, "the request lists no parts"))?
            .into_iter()
            .map(|p| {
                let number = p.part_number.ok_or_else(|| s3_error!(MalformedXML, "a part has no PartNumber"))?;
                let tag = p.e_tag.ok_or_else(|| s3_error!(MalformedXML, "a part has no ETag"))?;
                Ok((Self::validate_part_number(number)?, tag.into_value()))
            })
            .collect::<S3Result<_>>()?;
        // The completed object's metadata comes from the upload record: read it only if someone listens.
        let initial = match bucket.notifications.is_empty() {
            true => None,
            false => {
                self.objects.upload(&self.uploads, &bucket, &input.key, &input.upload_id).await.map_err(rados_error)?
            }
        };
        let (metadata, tags) = initial.map(|u| (u.meta.user_meta, u.meta.tags)).unwrap_or_default();
        let tag = new_tag();
        let op = Operation {
            bucket: &bucket,
            key: &input.key,
            event: "ObjectCreated:CompleteMultipartUpload",
            tag: &tag,
            metadata: &metadata,
            tags: &tags,
        };
        let condition = write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?;
        let work = async |events: &Pending| {
            let completed = self.objects.complete_upload(
                &self.uploads,
                &bucket,
                &input.key,
                &input.upload_id,
                &listed,
                &tag,
                events,
                condition.clone(),
            );
            completed.await.map_err(|e| match e {
                CompleteError::NoSuchUpload => s3_error!(NoSuchUpload),
                CompleteError::InvalidPart(n) => s3_error!(InvalidPart, "part {n} is missing or its ETag differs"),
                CompleteError::InvalidPartOrder => s3_error!(InvalidPartOrder),
                CompleteError::OtherParts => s3_error!(NoSuchUpload, "the upload was completed with other parts"),
                CompleteError::EntityTooSmall(n) => s3_error!(EntityTooSmall, "part {n} is smaller than 5 MiB"),
                CompleteError::Rados(e) if e.errno == Errno::Canceled => {
                    s3_error!(PreconditionFailed, "the object does not meet the completion's If-Match / If-None-Match")
                }
                CompleteError::Rados(e) => rados_error(e),
            })
        };
        let done = |(meta, wrote): &(ObjectMeta, bool)| wrote.then(|| Done::of(meta));
        let (meta, _) = self.with_events(&op, &origin_of(&req.extensions), &caller.user, work, done).await?;
        let mut out = CompleteMultipartUploadOutput {
            bucket: Some(input.bucket.clone()),
            key: Some(input.key.clone()),
            e_tag: Some(etag(&meta.etag)),
            location: Some(format!("/{}/{}", input.bucket, input.key)),
            version_id: shown_version(&bucket, meta.version.as_deref()),
            ..Default::default()
        };
        show_encryption!(out, meta.sealed.as_ref());
        Ok(S3Response::new(out))
    }

    pub(crate) async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> Answer<AbortMultipartUploadOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::AbortMultipartUpload, Some(&input.key)).await?;
        let found = self
            .objects
            .abort_upload(&self.uploads, &bucket, &input.key, &input.upload_id)
            .await
            .map_err(rados_error)?;
        if !found {
            return Err(s3_error!(NoSuchUpload));
        }
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }
}
