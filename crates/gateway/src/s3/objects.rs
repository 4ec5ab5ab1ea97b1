//! Operations on objects: PUT, GET, HEAD, DELETE, copy, attributes, and an object's ACL,
//! tags, retention and legal hold.

use super::access::{Caller, requested_acl};
use super::common::*;
use super::encryption::{customer_headers, requested_encryption, show_encryption};
use super::large::{large_whole, manifest_segments};
use super::lock::{requested_lock, shown_lock};
use super::versions::shown_version;
use crate::access::Action;
use crate::access::acl::Acl;
use crate::checksum;
use crate::clock::{new_tag, now_ns};
use crate::events::{Done, Operation, Pending};
use crate::head::ObjectMeta;
use crate::integrity::Integrity;
use crate::objects::Found;
use crate::objects::WriteTerms;
use crate::request::SwiftCaller;
use crate::service::Deleted;
use crate::service::Remover;
use futures::StreamExt;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};
use std::sync::Arc;

/// The answer to a GET or HEAD: `out` completed with the version's lock, the stored
/// object's standard fields, its checksum (for whole objects), encryption and stored headers.
macro_rules! answer_object {
    ($out:expr, $meta:expr, $lock:expr, $checksum_mode:expr, $customer:expr) => {{
        let mut out = $out;
        let meta: &ObjectMeta = $meta;
        (out.object_lock_mode, out.object_lock_retain_until_date, out.object_lock_legal_hold_status) =
            shown_lock($lock);
        describe_object!(out, meta);
        if out.content_range.is_none() {
            show_checksum!(out, meta.checksum.as_ref(), $checksum_mode);
        }
        show_encryption!(out, meta.sealed.as_ref(), $customer);
        Ok(with_stored_headers(S3Response::new(out), meta))
    }};
}

impl ShoalS3 {
    pub(crate) async fn put_object(&self, mut req: S3Request<PutObjectInput>) -> Answer<PutObjectOutput> {
        let caller = self.caller(&req).await?;
        let content_md5 = req.input.content_md5.take();
        let integrity = Integrity::of(&mut req, content_md5)?;
        let input = req.input;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
        let (owner, acl) = self.new_object_acl(&bucket, &caller, requested_acl!(input, None)).await?;
        let meta = new_object!(input).into_meta(&owner, acl, &req.extensions)?;
        if input.content_length.is_some_and(|l| l as u64 > self.config.max_put_size) {
            return Err(s3_error!(EntityTooLarge));
        }
        let origin = origin_of(&req.extensions);
        let customer = self.customer_key(customer_headers!(input), origin.secure)?;
        let protection = self.protection(&bucket, requested_encryption!(input, customer.as_ref()))?;
        let body = input.body.map(|b| b.boxed()).unwrap_or_else(|| futures::stream::empty().boxed());
        let tag = new_tag();
        let op = Operation {
            bucket: &bucket,
            key: &input.key,
            event: "ObjectCreated:Put",
            tag: &tag,
            metadata: &meta.user_meta,
            tags: &meta.tags,
        };
        let terms = WriteTerms {
            condition: write_condition(input.if_match.as_ref(), input.if_none_match.as_ref())?,
            lock: requested_lock(
                &bucket,
                input.object_lock_mode.as_ref(),
                input.object_lock_retain_until_date.as_ref(),
                input.object_lock_legal_hold_status.as_ref(),
                now_ns(),
            )?,
            fresh: true,
        };
        let work = async |events: &Pending| {
            let (meta, terms) = (meta.clone(), terms.clone());
            self.store_object(&bucket, &input.key, meta, body, protection.clone(), &integrity, &tag, events, terms)
                .await
        };
        let meta = self.with_events(&op, &origin, &caller.user, work, |meta| Some(Done::of(meta))).await?;
        if input.content_length.is_some_and(|l| l as u64 != meta.size) {
            tracing::warn!(key = %input.key, "body length differs from Content-Length");
        }
        let mut out = PutObjectOutput {
            e_tag: Some(etag(&meta.etag)),
            version_id: shown_version(&bucket, meta.version.as_deref()),
            ..Default::default()
        };
        show_checksum!(out, meta.checksum.as_ref(), Some(ChecksumMode::from_static(ChecksumMode::ENABLED)));
        show_encryption!(out, meta.sealed.as_ref(), customer.as_ref());
        Ok(S3Response::new(out))
    }

    pub(crate) async fn get_object(&self, req: S3Request<GetObjectInput>) -> Answer<GetObjectOutput> {
        let caller = self.caller(&req).await?;
        let customer = self.customer_key(customer_headers!(req.input), origin_of(&req.extensions).secure)?;
        // Swift assembles large objects itself, from their manifests.
        let swift = req.extensions.get::<SwiftCaller>().is_some();
        let input = req.input;
        let Found { meta, inline, version_id, lock, .. } = self
            .readable_object(&input.bucket, &input.key, input.version_id.as_deref(), &caller, Action::GetObject)
            .await?;
        let data_key = self.data_key(meta.sealed.as_ref(), customer.as_ref())?;
        let (meta, segments) = match large_whole(&meta).filter(|_| !swift) {
            Some(whole) => {
                let manifest = self.objects.read_range(&meta, inline.clone(), 0..meta.size, data_key.clone());
                let segments = manifest_segments(manifest, whole.size).await?;
                (whole, Some(segments))
            }
            None => (meta, None),
        };
        check_conditions(
            &meta,
            input.if_match.as_ref(),
            input.if_none_match.as_ref(),
            input.if_modified_since.as_ref(),
            input.if_unmodified_since.as_ref(),
            false,
        )?;
        let range = match (&input.range, input.part_number) {
            (Some(_), Some(_)) => {
                return Err(s3_error!(InvalidRequest, "a GET takes a Range or a partNumber, not both"));
            }
            (Some(r), None) => Some(r.check(meta.size)?),
            (None, Some(n)) => part_range(&meta, n)?,
            (None, None) => None,
        };
        let span = range.clone().unwrap_or(0..meta.size);
        let stream = match segments {
            Some(segments) => self.segments_stream(Arc::new(caller), segments, span.clone()),
            None => self.objects.read_range(&meta, inline, span.clone(), data_key),
        };
        let out = GetObjectOutput {
            body: Some(StreamingBlob::wrap(crate::objects::detach(stream))),
            content_length: Some((span.end - span.start) as i64),
            content_range: range.map(|r| format!("bytes {}-{}/{}", r.start, r.end.saturating_sub(1), meta.size)),
            tag_count: (!meta.tags.is_empty()).then_some(meta.tags.len() as i32),
            version_id,
            ..Default::default()
        };
        answer_object!(out, &meta, &lock, input.checksum_mode, customer.as_ref())
    }

    pub(crate) async fn head_object(&self, req: S3Request<HeadObjectInput>) -> Answer<HeadObjectOutput> {
        let caller = self.caller(&req).await?;
        let customer = self.customer_key(customer_headers!(req.input), origin_of(&req.extensions).secure)?;
        let swift = req.extensions.get::<SwiftCaller>().is_some();
        let input = req.input;
        let Found { meta, version_id, lock, .. } = self
            .readable_object(&input.bucket, &input.key, input.version_id.as_deref(), &caller, Action::GetObject)
            .await?;
        // An SSE-C object is described only to the holder of its key.
        self.data_key(meta.sealed.as_ref(), customer.as_ref())?;
        // A static large object is shown whole, as GET reads it (Swift shows it itself).
        let meta = large_whole(&meta).filter(|_| !swift).unwrap_or(meta);
        check_conditions(
            &meta,
            input.if_match.as_ref(),
            input.if_none_match.as_ref(),
            input.if_modified_since.as_ref(),
            input.if_unmodified_since.as_ref(),
            false,
        )?;
        let part = match input.part_number {
            Some(n) => part_range(&meta, n)?,
            None => None,
        };
        let out = HeadObjectOutput {
            content_length: Some(part.as_ref().map_or(meta.size, |r| r.end - r.start) as i64),
            content_range: part.map(|r| format!("bytes {}-{}/{}", r.start, r.end - 1, meta.size)),
            version_id,
            ..Default::default()
        };
        answer_object!(out, &meta, &lock, input.checksum_mode, customer.as_ref())
    }

    pub(crate) async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> Answer<DeleteObjectOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self
            .bucket_for(
                &input.bucket,
                &caller,
                Action::DeleteObject.of_version(input.version_id.is_some()),
                Some(&input.key),
            )
            .await?;
        let origin = origin_of(&req.extensions);
        let bypass = Self::bypass(&bucket, &caller, &input.key, input.bypass_governance_retention);
        let remover = Remover::User { bypass };
        let version = input.version_id.as_deref();
        let deleted = self.delete_key(&bucket, &input.key, version, remover, &origin, &caller.user).await?;
        Ok(S3Response::new(DeleteObjectOutput {
            delete_marker: deleted.delete_marker.then_some(true),
            version_id: deleted.version_id,
            ..Default::default()
        }))
    }

    pub(crate) async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> Answer<DeleteObjectsOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let bucket = self.named_bucket(&input.bucket).await?;
        if input.delete.objects.len() > 1000 {
            return Err(s3_error!(MalformedXML, "at most 1000 keys per request"));
        }
        let quiet = input.delete.quiet == Some(true);
        let bypass_asked = input.bypass_governance_retention;
        let (mut deleted, mut errors) = (Vec::new(), Vec::new());
        let origin = origin_of(&req.extensions);
        let results = futures::stream::iter(input.delete.objects)
            .map(|object| {
                let (bucket, origin, caller) = (bucket.clone(), &origin, &caller);
                async move {
                    let version = object.version_id.as_deref();
                    let action = Action::DeleteObject.of_version(version.is_some());
                    if !Self::permits(&bucket, caller, action, Some(&object.key), None) {
                        return (object, Err(s3_error!(AccessDenied)));
                    }
                    let remover = Remover::User { bypass: Self::bypass(&bucket, caller, &object.key, bypass_asked) };
                    let result = self.delete_key(&bucket, &object.key, version, remover, origin, &caller.user).await;
                    (object, result)
                }
            })
            .buffered(16)
            .collect::<Vec<_>>()
            .await;
        for (object, result) in results {
            match result {
                Ok(_) if quiet => {}
                Ok(Deleted { version_id, delete_marker }) => {
                    // A marker this request created is named as such; a removed version by its id.
                    let created_marker = delete_marker && object.version_id.is_none();
                    deleted.push(DeletedObject {
                        key: Some(object.key),
                        delete_marker: delete_marker.then_some(true),
                        delete_marker_version_id: version_id.clone().filter(|_| created_marker),
                        version_id: object.version_id.or(version_id.filter(|_| !created_marker)),
                    })
                }
                Err(e) => errors.push(Error {
                    key: Some(object.key),
                    code: Some(e.code().as_str().to_owned()),
                    message: e.message().map(str::to_owned),
                    version_id: object.version_id,
                }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput { deleted: Some(deleted), errors: Some(errors), ..Default::default() }))
    }

    pub(crate) async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> Answer<CopyObjectOutput> {
        let caller = self.caller(&req).await?;
        let origin = origin_of(&req.extensions);
        let input = req.input;
        let (src_key, source) = self.copy_source(&input.copy_source, &caller, copy_conditions!(input)).await?;
        let Found { bucket: src_bucket, meta: src_meta, inline, version_id: src_version, .. } = source;
        let src_customer = self.customer_key(customer_headers!(input, copy_source), origin.secure)?;
        let src_key_data = self.data_key(src_meta.sealed.as_ref(), src_customer.as_ref())?;
        let bucket = self.bucket_for(&input.bucket, &caller, Action::PutObject, Some(&input.key)).await?;
        let (owner, acl) = self.new_object_acl(&bucket, &caller, requested_acl!(input, None)).await?;
        let customer = self.customer_key(customer_headers!(input), origin.secure)?;
        let requested = requested_encryption!(input, customer.as_ref());
        let changes_encryption = requested.algorithm.is_some() || requested.customer.is_some();
        let protection = self.protection(&bucket, requested)?;
        let replace = match input.metadata_directive.as_ref().map(|d| d.as_str()) {
            None | Some(MetadataDirective::COPY) => false,
            Some(MetadataDirective::REPLACE) => true,
            Some(other) => return Err(s3_error!(InvalidArgument, "unknown metadata directive '{other}'")),
        };
        if !replace && !changes_encryption && src_bucket.id == bucket.id && src_key == input.key {
            return Err(s3_error!(
                InvalidRequest,
                "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata."
            ));
        }
        // The bytes are the source's, so its checksum still holds and is kept, with either
        // directive, as S3 does; `x-amz-checksum-algorithm` asks for a new one.
        let meta = if replace {
            ObjectMeta {
                checksum: src_meta.checksum.clone(),
                ..new_object!(input).into_meta(&owner, acl, &req.extensions)?
            }
        } else {
            ObjectMeta { owner: owner.clone(), acl, ..src_meta.clone() }
        };
        let data = self.objects.read_range(&src_meta, inline, 0..src_meta.size, src_key_data);
        let lock = requested_lock(
            &bucket,
            input.object_lock_mode.as_ref(),
            input.object_lock_retain_until_date.as_ref(),
            input.object_lock_legal_hold_status.as_ref(),
            now_ns(),
        )?;
        let terms = WriteTerms { condition: None, lock, fresh: true };
        let tag = new_tag();
        let op = Operation {
            bucket: &bucket,
            key: &input.key,
            event: "ObjectCreated:Copy",
            tag: &tag,
            metadata: &meta.user_meta,
            tags: &meta.tags,
        };
        let recomputed = input.checksum_algorithm.as_ref().map(|a| checksum::Requested::computed(a.as_str()));
        let recomputed = recomputed.transpose().map_err(|e| s3_error!(InvalidRequest, "{e}"))?;
        let work = async |events: &Pending| {
            let integrity = Integrity::computing(recomputed.clone());
            self.store_object(
                &bucket,
                &input.key,
                meta.clone(),
                Box::pin(data),
                protection.clone(),
                &integrity,
                &tag,
                events,
                terms.clone(),
            )
            .await
        };
        let meta = self.with_events(&op, &origin, &caller.user, work, |meta| Some(Done::of(meta))).await?;
        let mut result = CopyObjectResult {
            e_tag: Some(etag(&meta.etag)),
            last_modified: Some(timestamp(meta.mtime_ns)),
            ..Default::default()
        };
        show_checksum!(result, meta.checksum.as_ref(), Some(ChecksumMode::from_static(ChecksumMode::ENABLED)));
        let mut out = CopyObjectOutput {
            copy_object_result: Some(result),
            copy_source_version_id: src_version,
            version_id: shown_version(&bucket, meta.version.as_deref()),
            ..Default::default()
        };
        show_encryption!(out, meta.sealed.as_ref(), customer.as_ref());
        Ok(S3Response::new(out))
    }

    pub(crate) async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> Answer<GetObjectAttributesOutput> {
        let caller = self.caller(&req).await?;
        let customer = self.customer_key(customer_headers!(req.input), origin_of(&req.extensions).secure)?;
        let input = req.input;
        let Found { meta, version_id, .. } = self
            .readable_object(
                &input.bucket,
                &input.key,
                input.version_id.as_deref(),
                &caller,
                Action::GetObjectAttributes,
            )
            .await?;
        self.data_key(meta.sealed.as_ref(), customer.as_ref())?;
        // One header, its values separated by commas (s3s keeps them as one).
        let wanted =
            |name: &str| input.object_attributes.iter().flat_map(|a| a.as_str().split(',')).any(|a| a.trim() == name);
        let object_parts = match meta.parts {
            Some(count) if wanted(ObjectAttributes::OBJECT_PARTS) => {
                let marker = input.part_number_marker.unwrap_or(0).max(0) as usize;
                let max = input.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
                let numbered = meta.segment_sizes().enumerate().map(|(i, size)| (i + 1, size)).skip(marker);
                let page: Vec<ObjectPart> = numbered
                    .clone()
                    .take(max)
                    .map(|(n, size)| ObjectPart {
                        part_number: Some(n as i32),
                        size: Some(size as i64),
                        ..Default::default()
                    })
                    .collect();
                let truncated = numbered.count() > page.len();
                Some(GetObjectAttributesParts {
                    total_parts_count: Some(count as i32),
                    part_number_marker: input.part_number_marker,
                    next_part_number_marker: page.last().and_then(|p| p.part_number).filter(|_| truncated),
                    max_parts: Some(max as i32),
                    is_truncated: Some(truncated),
                    parts: Some(page),
                })
            }
            _ => None,
        };
        let checksum = meta.checksum.as_ref().filter(|_| wanted(ObjectAttributes::CHECKSUM)).map(|stored| {
            let mut shown = Checksum::default();
            show_checksum!(shown, Some(stored), Some(ChecksumMode::from_static(ChecksumMode::ENABLED)));
            shown
        });
        Ok(S3Response::new(GetObjectAttributesOutput {
            checksum,
            e_tag: wanted(ObjectAttributes::ETAG).then(|| etag(&meta.etag)),
            object_size: wanted(ObjectAttributes::OBJECT_SIZE).then_some(meta.size as i64),
            storage_class: wanted(ObjectAttributes::STORAGE_CLASS)
                .then(|| StorageClass::from_static(StorageClass::STANDARD)),
            object_parts,
            last_modified: Some(timestamp(meta.mtime_ns)),
            version_id,
            ..Default::default()
        }))
    }

    pub(crate) async fn get_object_acl(&self, req: S3Request<GetObjectAclInput>) -> Answer<GetObjectAclOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let action = Action::GetObjectAcl;
        let Found { bucket, meta, .. } =
            self.readable_object(&input.bucket, &input.key, input.version_id.as_deref(), &caller, action).await?;
        // While ACLs are off the bucket owner owns every object, with full control.
        let rules = bucket.rules();
        let owner = rules.object_owner(&meta.owner);
        let acl = if rules.acls_disabled() { Acl::private(owner) } else { meta.acl.clone() };
        Ok(S3Response::new(GetObjectAclOutput {
            grants: Some(self.shown_grants(&acl).await),
            owner: Some(self.owners().get(owner).await),
            ..Default::default()
        }))
    }

    pub(crate) async fn put_object_acl(&self, req: S3Request<PutObjectAclInput>) -> Answer<PutObjectAclOutput> {
        let caller = self.caller(&req).await?;
        let mut input = req.input;
        let action = Action::PutObjectAcl;
        let version = input.version_id.clone();
        let Found { bucket, head, mut meta, .. } =
            self.readable_object(&input.bucket, &input.key, version.as_deref(), &caller, action).await?;
        meta.acl = self.object_acl_to_set(&bucket, &meta.owner, &mut input).await?;
        self.rewrite_meta(&head, &meta).await?;
        Ok(S3Response::new(PutObjectAclOutput::default()))
    }

    pub(crate) async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> Answer<GetObjectTaggingOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let Found { meta, version_id, .. } = self
            .readable_object(&input.bucket, &input.key, input.version_id.as_deref(), &caller, Action::GetObjectTagging)
            .await?;
        Ok(S3Response::new(GetObjectTaggingOutput { tag_set: tag_set(&meta.tags), version_id }))
    }

    pub(crate) async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> Answer<PutObjectTaggingOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let tags = tag_pairs(input.tagging.tag_set);
        check_tags(&tags, 10)?;
        let version = input.version_id.as_deref();
        let version_id = self
            .change_object_meta(&input.bucket, &input.key, version, &caller, Action::PutObjectTagging, |m| {
                m.tags = tags
            })
            .await?;
        Ok(S3Response::new(PutObjectTaggingOutput { version_id }))
    }

    pub(crate) async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> Answer<DeleteObjectTaggingOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let version = input.version_id.as_deref();
        let version_id = self
            .change_object_meta(&input.bucket, &input.key, version, &caller, Action::DeleteObjectTagging, |m| {
                m.tags.clear()
            })
            .await?;
        Ok(S3Response::new(DeleteObjectTaggingOutput { version_id }))
    }

    pub(crate) async fn get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> Answer<GetObjectRetentionOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let lock = self
            .version_lock(&input.bucket, &input.key, input.version_id.as_deref(), &caller, Action::GetObjectRetention)
            .await?;
        let (mode, retain_until_date, _) = shown_lock(&lock);
        if mode.is_none() {
            return Err(s3_error!(NoSuchObjectLockConfiguration, "the version has no retention"));
        }
        Ok(S3Response::new(GetObjectRetentionOutput {
            retention: Some(ObjectLockRetention {
                mode: mode.map(|m| ObjectLockRetentionMode::from(m.as_str().to_owned())),
                retain_until_date,
            }),
        }))
    }

    pub(crate) async fn put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> Answer<PutObjectRetentionOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let retention = Self::requested_retention(input.retention)?;
        let (bucket, key, version) = (&input.bucket, &input.key, input.version_id.as_deref());
        let bypass = input.bypass_governance_retention;
        self.change_lock(bucket, key, version, &caller, Action::PutObjectRetention, Some(retention), None, bypass)
            .await?;
        Ok(S3Response::new(PutObjectRetentionOutput::default()))
    }

    pub(crate) async fn get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> Answer<GetObjectLegalHoldOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let lock = self
            .version_lock(&input.bucket, &input.key, input.version_id.as_deref(), &caller, Action::GetObjectLegalHold)
            .await?;
        let status = if lock.legal_hold { ObjectLockLegalHoldStatus::ON } else { ObjectLockLegalHoldStatus::OFF };
        Ok(S3Response::new(GetObjectLegalHoldOutput {
            legal_hold: Some(ObjectLockLegalHold { status: Some(ObjectLockLegalHoldStatus::from_static(status)) }),
        }))
    }

    pub(crate) async fn put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> Answer<PutObjectLegalHoldOutput> {
        let caller = self.caller(&req).await?;
        let input = req.input;
        let hold = match input.legal_hold.and_then(|h| h.status).as_ref().map(|s| s.as_str()) {
            Some(ObjectLockLegalHoldStatus::ON) => true,
            Some(ObjectLockLegalHoldStatus::OFF) => false,
            _ => return Err(s3_error!(MalformedXML, "LegalHold Status must be ON or OFF")),
        };
        let (bucket, key, version) = (&input.bucket, &input.key, input.version_id.as_deref());
        self.change_lock(bucket, key, version, &caller, Action::PutObjectLegalHold, None, Some(hold), None).await?;
        Ok(S3Response::new(PutObjectLegalHoldOutput::default()))
    }
}

impl ShoalS3 {
    /// Changes the metadata of an object's version in place (ACL, tags) if `caller` may
    /// do `action` on it. Returns the version id to show.
    pub(super) async fn change_object_meta(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        caller: &Caller,
        action: Action,
        change: impl FnOnce(&mut ObjectMeta),
    ) -> S3Result<Option<String>> {
        let Found { head, mut meta, version_id, .. } =
            self.readable_object(bucket, key, version_id, caller, action).await?;
        change(&mut meta);
        self.rewrite_meta(&head, &meta).await?;
        Ok(version_id)
    }
}
