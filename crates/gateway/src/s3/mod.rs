//! The S3 front end: s3s parses, authenticates and routes each request; each operation
//! is answered by the method of the same name in its resource's module, which opens the
//! request (caller, bucket, permission), translates it and acts through the gateway's
//! [`Service`](crate::service::Service).
//!
//! Modules, each using only those listed before it: [`common`] (the [`ShoalS3`] front,
//! conversions), [`access`] (callers, permissions, ACLs), [`encryption`], [`lock`],
//! [`lifecycle`] and [`versions`] (their configurations and records in S3 terms), then the
//! resources: [`buckets`], [`bucket_config`], [`large`] (Swift's static large objects),
//! [`objects`], [`multipart`].

mod access;
mod bucket_config;
mod buckets;
mod common;
mod encryption;
mod large;
mod lifecycle;
mod lock;
mod multipart;
mod objects;
mod versions;

pub use common::ShoalS3;
pub(crate) use large::{
    SLO_ETAG, SLO_SIZE, STATIC_LARGE_OBJECT, Segment, StoredSegment, pieces, segment_path, stored_segments,
};
use s3s::dto::*;
use s3s::{S3, S3Request, S3Response, S3Result};

/// Implements s3s's [`S3`] by handing each listed operation to the method of the same name.
macro_rules! operations {
    ($($op:ident($input:ident) -> $output:ident;)*) => {
        #[async_trait::async_trait]
        impl S3 for ShoalS3 {
            $(
                async fn $op(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    ShoalS3::$op(self, req).await
                }
            )*
        }
    };
}

operations! {
    list_buckets(ListBucketsInput) -> ListBucketsOutput;
    create_bucket(CreateBucketInput) -> CreateBucketOutput;
    head_bucket(HeadBucketInput) -> HeadBucketOutput;
    delete_bucket(DeleteBucketInput) -> DeleteBucketOutput;
    get_bucket_location(GetBucketLocationInput) -> GetBucketLocationOutput;
    list_objects(ListObjectsInput) -> ListObjectsOutput;
    list_objects_v2(ListObjectsV2Input) -> ListObjectsV2Output;
    list_object_versions(ListObjectVersionsInput) -> ListObjectVersionsOutput;
    get_bucket_versioning(GetBucketVersioningInput) -> GetBucketVersioningOutput;
    put_bucket_versioning(PutBucketVersioningInput) -> PutBucketVersioningOutput;
    put_bucket_lifecycle_configuration(PutBucketLifecycleConfigurationInput) -> PutBucketLifecycleConfigurationOutput;
    get_bucket_lifecycle_configuration(GetBucketLifecycleConfigurationInput) -> GetBucketLifecycleConfigurationOutput;
    delete_bucket_lifecycle(DeleteBucketLifecycleInput) -> DeleteBucketLifecycleOutput;
    put_object_lock_configuration(PutObjectLockConfigurationInput) -> PutObjectLockConfigurationOutput;
    get_object_lock_configuration(GetObjectLockConfigurationInput) -> GetObjectLockConfigurationOutput;
    get_bucket_acl(GetBucketAclInput) -> GetBucketAclOutput;
    put_bucket_acl(PutBucketAclInput) -> PutBucketAclOutput;
    put_bucket_policy(PutBucketPolicyInput) -> PutBucketPolicyOutput;
    get_bucket_policy(GetBucketPolicyInput) -> GetBucketPolicyOutput;
    delete_bucket_policy(DeleteBucketPolicyInput) -> DeleteBucketPolicyOutput;
    get_bucket_policy_status(GetBucketPolicyStatusInput) -> GetBucketPolicyStatusOutput;
    put_bucket_ownership_controls(PutBucketOwnershipControlsInput) -> PutBucketOwnershipControlsOutput;
    get_bucket_ownership_controls(GetBucketOwnershipControlsInput) -> GetBucketOwnershipControlsOutput;
    delete_bucket_ownership_controls(DeleteBucketOwnershipControlsInput) -> DeleteBucketOwnershipControlsOutput;
    put_bucket_cors(PutBucketCorsInput) -> PutBucketCorsOutput;
    get_bucket_cors(GetBucketCorsInput) -> GetBucketCorsOutput;
    delete_bucket_cors(DeleteBucketCorsInput) -> DeleteBucketCorsOutput;
    put_bucket_encryption(PutBucketEncryptionInput) -> PutBucketEncryptionOutput;
    get_bucket_encryption(GetBucketEncryptionInput) -> GetBucketEncryptionOutput;
    delete_bucket_encryption(DeleteBucketEncryptionInput) -> DeleteBucketEncryptionOutput;
    put_public_access_block(PutPublicAccessBlockInput) -> PutPublicAccessBlockOutput;
    get_public_access_block(GetPublicAccessBlockInput) -> GetPublicAccessBlockOutput;
    delete_public_access_block(DeletePublicAccessBlockInput) -> DeletePublicAccessBlockOutput;
    put_bucket_tagging(PutBucketTaggingInput) -> PutBucketTaggingOutput;
    get_bucket_tagging(GetBucketTaggingInput) -> GetBucketTaggingOutput;
    delete_bucket_tagging(DeleteBucketTaggingInput) -> DeleteBucketTaggingOutput;
    put_object(PutObjectInput) -> PutObjectOutput;
    get_object(GetObjectInput) -> GetObjectOutput;
    head_object(HeadObjectInput) -> HeadObjectOutput;
    delete_object(DeleteObjectInput) -> DeleteObjectOutput;
    delete_objects(DeleteObjectsInput) -> DeleteObjectsOutput;
    copy_object(CopyObjectInput) -> CopyObjectOutput;
    get_object_attributes(GetObjectAttributesInput) -> GetObjectAttributesOutput;
    get_object_acl(GetObjectAclInput) -> GetObjectAclOutput;
    put_object_acl(PutObjectAclInput) -> PutObjectAclOutput;
    get_object_tagging(GetObjectTaggingInput) -> GetObjectTaggingOutput;
    put_object_tagging(PutObjectTaggingInput) -> PutObjectTaggingOutput;
    delete_object_tagging(DeleteObjectTaggingInput) -> DeleteObjectTaggingOutput;
    get_object_retention(GetObjectRetentionInput) -> GetObjectRetentionOutput;
    put_object_retention(PutObjectRetentionInput) -> PutObjectRetentionOutput;
    get_object_legal_hold(GetObjectLegalHoldInput) -> GetObjectLegalHoldOutput;
    put_object_legal_hold(PutObjectLegalHoldInput) -> PutObjectLegalHoldOutput;
    create_multipart_upload(CreateMultipartUploadInput) -> CreateMultipartUploadOutput;
    upload_part(UploadPartInput) -> UploadPartOutput;
    upload_part_copy(UploadPartCopyInput) -> UploadPartCopyOutput;
    list_parts(ListPartsInput) -> ListPartsOutput;
    list_multipart_uploads(ListMultipartUploadsInput) -> ListMultipartUploadsOutput;
    complete_multipart_upload(CompleteMultipartUploadInput) -> CompleteMultipartUploadOutput;
    abort_multipart_upload(AbortMultipartUploadInput) -> AbortMultipartUploadOutput;
}
