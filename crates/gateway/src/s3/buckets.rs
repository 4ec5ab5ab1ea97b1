//! Operations on buckets themselves: listing, creating, removing, and listing their objects.

use super::access::requested_acl;
use super::common::*;
use crate::access::acl::Acl;
use crate::access::{Action, Ownership};
use crate::clock::{new_tag, now_ns};
use crate::error::rados_error;
use crate::meta::{BucketInfo, Versioning};
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};
use shoal_objclass::bucket_index::ListItem;

/// What one listing page asks for.
pub(super) struct ListPage<'a> {
    pub(super) prefix: &'a str,
    pub(super) delimiter: &'a str,
    pub(super) after: &'a str,
    pub(super) max_keys: i32,
    pub(super) url: bool,
    pub(super) with_owner: bool,
}

impl ShoalS3 {
    /// One listing page in S3 terms: objects, common prefixes, truncation and the last name.
    pub(super) async fn list_page(
        &self,
        bucket: &BucketInfo,
        page: ListPage<'_>,
    ) -> S3Result<(Vec<Object>, Vec<CommonPrefix>, bool, Option<String>)> {
        let ListPage { prefix, delimiter, after, max_keys, url, with_owner } = page;
        if max_keys < 0 {
            return Err(s3_error!(InvalidArgument, "max-keys must not be negative"));
        }
        let max = (max_keys as usize).min(1000);
        if max == 0 {
            return Ok((Vec::new(), Vec::new(), false, None));
        }
        let (items, truncated) = self.objects.list(bucket, prefix, delimiter, after, max).await.map_err(rados_error)?;
        let last = items.last().map(|i| i.name().to_owned());
        let encode = |s: &str| if url { url_encode(s) } else { s.to_owned() };
        let (mut contents, mut prefixes) = (Vec::new(), Vec::new());
        let mut owners = self.owners();
        for item in items {
            match item {
                ListItem::Entry(key, entry) => {
                    let owner = match with_owner {
                        true => Some(owners.get(&entry.owner).await),
                        false => None,
                    };
                    contents.push(Object {
                        key: Some(encode(&key)),
                        size: Some(entry.size as i64),
                        e_tag: Some(etag(&entry.etag)),
                        last_modified: Some(timestamp(entry.mtime_ns)),
                        storage_class: Some(ObjectStorageClass::from(entry.storage_class)),
                        owner,
                        ..Default::default()
                    })
                }
                ListItem::Prefix(p) => prefixes.push(CommonPrefix { prefix: Some(encode(&p)) }),
            }
        }
        Ok((contents, prefixes, truncated, last))
    }
}

impl ShoalS3 {
    pub(crate) async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> Answer<ListBucketsOutput> {
        let caller = self.caller(&req).await?;
        let who = caller.user.clone().ok_or_else(|| s3_error!(AccessDenied))?;
        let mut buckets = Vec::new();
        for name in self.meta.user_buckets(&who.uid).await.map_err(rados_error)? {
            if let Some(b) = self.meta.bucket(&name).await.map_err(rados_error)? {
                buckets.push(Bucket {
                    name: Some(name),
                    creation_date: Some(timestamp(b.created_ns)),
                    bucket_region: None,
                });
            }
        }
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            owner: Some(owner_of(&who.uid, Some(&who.display_name))),
            ..Default::default()
        }))
    }

    pub(crate) async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> Answer<CreateBucketOutput> {
        let caller = self.caller(&req).await?;
        let who = caller.user.clone().ok_or_else(|| s3_error!(AccessDenied))?;
        let input = req.input;
        let requested = requested_acl!(input, input.grant_write.as_deref());
        let acl =
            self.requested_acl(requested, None, &who.uid, &who.uid).await?.unwrap_or_else(|| Acl::private(&who.uid));
        let ownership = match &input.object_ownership {
            Some(name) => Some(
                Ownership::named(name.as_str())
                    .ok_or_else(|| s3_error!(InvalidArgument, "unknown x-amz-object-ownership '{}'", name.as_str()))?,
            ),
            None => None,
        };
        if ownership == Some(Ownership::BucketOwnerEnforced) && !super::access::only_owner(&acl, &who.uid) {
            return Err(s3_error!(
                InvalidBucketAclWithObjectOwnership,
                "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting"
            ));
        }
        // Object lock turns versioning on, for good.
        let lock_enabled = input.object_lock_enabled_for_bucket == Some(true);
        if let Some(existing) = self.meta.bucket(&input.bucket).await.map_err(rados_error)? {
            // As AWS in us-east-1 and RGW by default: creating a bucket you own again
            // succeeds and changes nothing.
            return match existing.owner == who.uid {
                true => Ok(S3Response::new(CreateBucketOutput { location: Some(format!("/{}", input.bucket)) })),
                false => Err(s3_error!(BucketAlreadyExists)),
            };
        }
        let info = BucketInfo {
            name: input.bucket.clone(),
            id: new_tag(),
            owner: who.uid.clone(),
            created_ns: now_ns(),
            num_shards: self.config.bucket_index_shards.max(1),
            acl,
            notifications: Vec::new(),
            versioning: if lock_enabled { Versioning::Enabled } else { Versioning::Off },
            tags: Vec::new(),
            object_lock: lock_enabled.then(crate::meta::LockConfig::default),
            lifecycle: Vec::new(),
            policy: None,
            public_access_block: None,
            ownership,
            cors: Vec::new(),
            encryption: None,
            // A Swift PUT brings the container's metadata and ACLs.
            swift: req.extensions.get::<crate::meta::SwiftContainer>().cloned().unwrap_or_default(),
        };
        self.create_bucket_record(&info).await?;
        Ok(S3Response::new(CreateBucketOutput { location: Some(format!("/{}", input.bucket)) }))
    }

    pub(crate) async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> Answer<HeadBucketOutput> {
        self.open(&req, Action::ListBucket).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    pub(crate) async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> Answer<DeleteBucketOutput> {
        let bucket = self.open(&req, Action::DeleteBucket).await?;
        self.remove_empty_bucket(&bucket).await?;
        Ok(S3Response::new(DeleteBucketOutput::default()))
    }

    pub(crate) async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> Answer<GetBucketLocationOutput> {
        self.open(&req, Action::GetBucketLocation).await?;
        let zonegroup = self.config.notify.zonegroup.clone();
        Ok(S3Response::new(GetBucketLocationOutput {
            location_constraint: Some(BucketLocationConstraint::from(zonegroup)),
        }))
    }

    pub(crate) async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> Answer<ListObjectsOutput> {
        let bucket = self.open(&req, Action::ListBucket).await?;
        let input = req.input;
        let url = url_encoding(input.encoding_type.as_ref())?;
        let (prefix, delimiter) =
            (input.prefix.clone().unwrap_or_default(), input.delimiter.clone().unwrap_or_default());
        let max_keys = input.max_keys.unwrap_or(1000);
        let marker = input.marker.clone().unwrap_or_default();
        let (contents, prefixes, truncated, last) = self
            .list_page(
                &bucket,
                ListPage { prefix: &prefix, delimiter: &delimiter, after: &marker, max_keys, url, with_owner: true },
            )
            .await?;
        let encode = |s: Option<String>| s.map(|s| if url { url_encode(&s) } else { s });
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(input.bucket),
            prefix: encode(input.prefix),
            delimiter: encode(input.delimiter),
            marker: encode(input.marker).or(Some(String::new())),
            max_keys: Some(max_keys),
            is_truncated: Some(truncated),
            next_marker: encode(last.filter(|_| truncated)),
            contents: Some(contents),
            common_prefixes: Some(prefixes),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    pub(crate) async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> Answer<ListObjectsV2Output> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let bucket = self.open(&req, Action::ListBucket).await?;
        let input = req.input;
        let url = url_encoding(input.encoding_type.as_ref())?;
        let after = match &input.continuation_token {
            Some(token) => b64
                .decode(token)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .ok_or_else(|| s3_error!(InvalidArgument, "the continuation token is not valid"))?,
            None => input.start_after.clone().unwrap_or_default(),
        };
        let (prefix, delimiter) =
            (input.prefix.clone().unwrap_or_default(), input.delimiter.clone().unwrap_or_default());
        let max_keys = input.max_keys.unwrap_or(1000);
        let (contents, prefixes, truncated, last) = self
            .list_page(
                &bucket,
                ListPage {
                    prefix: &prefix,
                    delimiter: &delimiter,
                    after: &after,
                    max_keys,
                    url,
                    with_owner: input.fetch_owner == Some(true),
                },
            )
            .await?;
        let encode = |s: Option<String>| s.map(|s| if url { url_encode(&s) } else { s });
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(input.bucket),
            prefix: encode(input.prefix),
            delimiter: encode(input.delimiter),
            max_keys: Some(max_keys),
            key_count: Some((contents.len() + prefixes.len()) as i32),
            continuation_token: input.continuation_token,
            next_continuation_token: last.filter(|_| truncated).map(|l| b64.encode(l)),
            start_after: encode(input.start_after),
            is_truncated: Some(truncated),
            contents: Some(contents),
            common_prefixes: Some(prefixes),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    pub(crate) async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> Answer<ListObjectVersionsOutput> {
        let bucket = self.open(&req, Action::ListBucketVersions).await?;
        Ok(S3Response::new(self.list_versions_page(&bucket, &req.input).await?))
    }
}
