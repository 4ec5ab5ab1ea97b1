//! A bucket's sub-resources: versioning, lifecycle, object lock, ACL, policy, ownership
//! controls, CORS, default encryption, public access block and tags.

use super::common::*;
use crate::access::Action;
use crate::cors::CorsRule;
use crate::meta::Versioning;
use s3s::dto::*;
use s3s::{S3Request, S3Response, s3_error};

impl ShoalS3 {
    pub(crate) async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> Answer<GetBucketVersioningOutput> {
        let bucket = self.open(&req, Action::GetBucketVersioning).await?;
        let status = match bucket.versioning {
            Versioning::Off => None,
            Versioning::Enabled => Some(BucketVersioningStatus::ENABLED),
            Versioning::Suspended => Some(BucketVersioningStatus::SUSPENDED),
        };
        Ok(S3Response::new(GetBucketVersioningOutput {
            status: status.map(BucketVersioningStatus::from_static),
            mfa_delete: None,
        }))
    }

    pub(crate) async fn put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> Answer<PutBucketVersioningOutput> {
        let bucket = self.open(&req, Action::PutBucketVersioning).await?;
        let input = req.input;
        let config = input.versioning_configuration;
        if config.mfa_delete.as_ref().is_some_and(|m| m.as_str() == MFADelete::ENABLED) {
            return Err(s3_error!(NotImplemented, "MFA delete is not supported"));
        }
        let versioning = match config.status.as_ref().map(|s| s.as_str()) {
            Some(BucketVersioningStatus::ENABLED) => Versioning::Enabled,
            Some(BucketVersioningStatus::SUSPENDED) => Versioning::Suspended,
            _ => return Err(s3_error!(MalformedXML, "Status must be Enabled or Suspended")),
        };
        if versioning == Versioning::Suspended && bucket.object_lock.is_some() {
            return Err(s3_error!(InvalidBucketState, "versioning cannot be suspended on a bucket with object lock"));
        }
        self.change_bucket(&bucket, |b| b.versioning = versioning).await?;
        Ok(S3Response::new(PutBucketVersioningOutput::default()))
    }

    pub(crate) async fn put_bucket_lifecycle_configuration(
        &self,
        req: S3Request<PutBucketLifecycleConfigurationInput>,
    ) -> Answer<PutBucketLifecycleConfigurationOutput> {
        let bucket = self.open(&req, Action::PutLifecycleConfiguration).await?;
        self.put_lifecycle(&bucket, req.input.lifecycle_configuration).await?;
        Ok(S3Response::new(PutBucketLifecycleConfigurationOutput::default()))
    }

    pub(crate) async fn get_bucket_lifecycle_configuration(
        &self,
        req: S3Request<GetBucketLifecycleConfigurationInput>,
    ) -> Answer<GetBucketLifecycleConfigurationOutput> {
        let bucket = self.open(&req, Action::GetLifecycleConfiguration).await?;
        let rules = Self::lifecycle_rules(&bucket)?;
        Ok(S3Response::new(GetBucketLifecycleConfigurationOutput { rules: Some(rules), ..Default::default() }))
    }

    pub(crate) async fn delete_bucket_lifecycle(
        &self,
        req: S3Request<DeleteBucketLifecycleInput>,
    ) -> Answer<DeleteBucketLifecycleOutput> {
        let bucket = self.open(&req, Action::PutLifecycleConfiguration).await?;
        self.delete_lifecycle(&bucket).await?;
        Ok(S3Response::new(DeleteBucketLifecycleOutput::default()))
    }

    pub(crate) async fn put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> Answer<PutObjectLockConfigurationOutput> {
        let bucket = self.open(&req, Action::PutBucketObjectLockConfiguration).await?;
        self.put_lock_configuration(&bucket, req.input.object_lock_configuration).await?;
        Ok(S3Response::new(PutObjectLockConfigurationOutput::default()))
    }

    pub(crate) async fn get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> Answer<GetObjectLockConfigurationOutput> {
        let bucket = self.open(&req, Action::GetBucketObjectLockConfiguration).await?;
        let config = Self::lock_configuration(&bucket)?;
        Ok(S3Response::new(GetObjectLockConfigurationOutput { object_lock_configuration: Some(config) }))
    }

    pub(crate) async fn get_bucket_acl(&self, req: S3Request<GetBucketAclInput>) -> Answer<GetBucketAclOutput> {
        let bucket = self.open(&req, Action::GetBucketAcl).await?;
        Ok(S3Response::new(GetBucketAclOutput {
            grants: Some(self.shown_grants(&bucket.acl).await),
            owner: Some(self.owners().get(&bucket.owner).await),
        }))
    }

    pub(crate) async fn put_bucket_acl(&self, req: S3Request<PutBucketAclInput>) -> Answer<PutBucketAclOutput> {
        let bucket = self.open(&req, Action::PutBucketAcl).await?;
        self.set_bucket_acl(&bucket, req.input).await?;
        Ok(S3Response::new(PutBucketAclOutput::default()))
    }

    pub(crate) async fn put_bucket_policy(
        &self,
        req: S3Request<PutBucketPolicyInput>,
    ) -> Answer<PutBucketPolicyOutput> {
        let bucket = self.open(&req, Action::PutBucketPolicy).await?;
        self.set_policy(&bucket, &req.input.policy).await?;
        Ok(S3Response::new(PutBucketPolicyOutput::default()))
    }

    pub(crate) async fn get_bucket_policy(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> Answer<GetBucketPolicyOutput> {
        let bucket = self.open(&req, Action::GetBucketPolicy).await?;
        let policy =
            bucket.policy.as_ref().ok_or_else(|| s3_error!(NoSuchBucketPolicy, "The bucket policy does not exist"))?;
        Ok(S3Response::new(GetBucketPolicyOutput { policy: Some(policy.text().to_owned()) }))
    }

    pub(crate) async fn delete_bucket_policy(
        &self,
        req: S3Request<DeleteBucketPolicyInput>,
    ) -> Answer<DeleteBucketPolicyOutput> {
        let bucket = self.open(&req, Action::DeleteBucketPolicy).await?;
        self.change_bucket(&bucket, |b| b.policy = None).await?;
        Ok(S3Response::new(DeleteBucketPolicyOutput::default()))
    }

    pub(crate) async fn get_bucket_policy_status(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> Answer<GetBucketPolicyStatusOutput> {
        let bucket = self.open(&req, Action::GetBucketPolicyStatus).await?;
        let policy =
            bucket.policy.as_ref().ok_or_else(|| s3_error!(NoSuchBucketPolicy, "The bucket policy does not exist"))?;
        Ok(S3Response::new(GetBucketPolicyStatusOutput {
            policy_status: Some(PolicyStatus { is_public: Some(policy.is_public()) }),
        }))
    }

    pub(crate) async fn put_bucket_ownership_controls(
        &self,
        req: S3Request<PutBucketOwnershipControlsInput>,
    ) -> Answer<PutBucketOwnershipControlsOutput> {
        let bucket = self.open(&req, Action::PutBucketOwnershipControls).await?;
        self.set_ownership(&bucket, req.input.ownership_controls).await?;
        Ok(S3Response::new(PutBucketOwnershipControlsOutput::default()))
    }

    pub(crate) async fn get_bucket_ownership_controls(
        &self,
        req: S3Request<GetBucketOwnershipControlsInput>,
    ) -> Answer<GetBucketOwnershipControlsOutput> {
        let bucket = self.open(&req, Action::GetBucketOwnershipControls).await?;
        Ok(S3Response::new(GetBucketOwnershipControlsOutput {
            ownership_controls: Some(super::access::shown_ownership(&bucket)?),
        }))
    }

    pub(crate) async fn delete_bucket_ownership_controls(
        &self,
        req: S3Request<DeleteBucketOwnershipControlsInput>,
    ) -> Answer<DeleteBucketOwnershipControlsOutput> {
        let bucket = self.open(&req, Action::PutBucketOwnershipControls).await?;
        self.change_bucket(&bucket, |b| b.ownership = None).await?;
        Ok(S3Response::new(DeleteBucketOwnershipControlsOutput::default()))
    }

    pub(crate) async fn put_bucket_cors(&self, req: S3Request<PutBucketCorsInput>) -> Answer<PutBucketCorsOutput> {
        let bucket = self.open(&req, Action::PutBucketCORS).await?;
        let rules: Vec<CorsRule> = req.input.cors_configuration.cors_rules.into_iter().map(cors_rule).collect();
        crate::cors::validate(&rules).map_err(|e| s3_error!(InvalidRequest, "{e}"))?;
        self.change_bucket(&bucket, |b| b.cors = rules.clone()).await?;
        Ok(S3Response::new(PutBucketCorsOutput::default()))
    }

    pub(crate) async fn get_bucket_cors(&self, req: S3Request<GetBucketCorsInput>) -> Answer<GetBucketCorsOutput> {
        let bucket = self.open(&req, Action::GetBucketCORS).await?;
        if bucket.cors.is_empty() {
            return Err(s3_error!(NoSuchCORSConfiguration, "The CORS configuration does not exist"));
        }
        let rules = bucket.cors.iter().cloned().map(shown_cors_rule).collect();
        Ok(S3Response::new(GetBucketCorsOutput { cors_rules: Some(rules) }))
    }

    pub(crate) async fn delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> Answer<DeleteBucketCorsOutput> {
        let bucket = self.open(&req, Action::PutBucketCORS).await?;
        self.change_bucket(&bucket, |b| b.cors = Vec::new()).await?;
        Ok(S3Response::new(DeleteBucketCorsOutput::default()))
    }

    pub(crate) async fn put_bucket_encryption(
        &self,
        req: S3Request<PutBucketEncryptionInput>,
    ) -> Answer<PutBucketEncryptionOutput> {
        self.put_encryption(req).await
    }

    pub(crate) async fn get_bucket_encryption(
        &self,
        req: S3Request<GetBucketEncryptionInput>,
    ) -> Answer<GetBucketEncryptionOutput> {
        self.get_encryption(req).await
    }

    pub(crate) async fn delete_bucket_encryption(
        &self,
        req: S3Request<DeleteBucketEncryptionInput>,
    ) -> Answer<DeleteBucketEncryptionOutput> {
        self.delete_encryption(req).await
    }

    pub(crate) async fn put_public_access_block(
        &self,
        req: S3Request<PutPublicAccessBlockInput>,
    ) -> Answer<PutPublicAccessBlockOutput> {
        let bucket = self.open(&req, Action::PutBucketPublicAccessBlock).await?;
        self.set_public_access_block(&bucket, req.input.public_access_block_configuration).await?;
        Ok(S3Response::new(PutPublicAccessBlockOutput::default()))
    }

    pub(crate) async fn get_public_access_block(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> Answer<GetPublicAccessBlockOutput> {
        let bucket = self.open(&req, Action::GetBucketPublicAccessBlock).await?;
        let config = super::access::shown_public_access_block(&bucket)?;
        Ok(S3Response::new(GetPublicAccessBlockOutput { public_access_block_configuration: Some(config) }))
    }

    pub(crate) async fn delete_public_access_block(
        &self,
        req: S3Request<DeletePublicAccessBlockInput>,
    ) -> Answer<DeletePublicAccessBlockOutput> {
        let bucket = self.open(&req, Action::PutBucketPublicAccessBlock).await?;
        self.change_bucket(&bucket, |b| b.public_access_block = None).await?;
        Ok(S3Response::new(DeletePublicAccessBlockOutput::default()))
    }

    pub(crate) async fn put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> Answer<PutBucketTaggingOutput> {
        let bucket = self.open(&req, Action::PutBucketTagging).await?;
        let input = req.input;
        let tags = tag_pairs(input.tagging.tag_set);
        check_tags(&tags, 50)?;
        self.change_bucket(&bucket, |b| b.tags = tags.clone()).await?;
        Ok(S3Response::new(PutBucketTaggingOutput::default()))
    }

    pub(crate) async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> Answer<GetBucketTaggingOutput> {
        let bucket = self.open(&req, Action::GetBucketTagging).await?;
        if bucket.tags.is_empty() {
            return Err(s3_error!(NoSuchTagSet));
        }
        Ok(S3Response::new(GetBucketTaggingOutput { tag_set: tag_set(&bucket.tags) }))
    }

    pub(crate) async fn delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> Answer<DeleteBucketTaggingOutput> {
        let bucket = self.open(&req, Action::PutBucketTagging).await?;
        self.change_bucket(&bucket, |b| b.tags.clear()).await?;
        Ok(S3Response::new(DeleteBucketTaggingOutput::default()))
    }
}

/// A CORS rule of a PutBucketCors body.
pub(super) fn cors_rule(rule: CORSRule) -> CorsRule {
    CorsRule {
        id: rule.id,
        allowed_origins: rule.allowed_origins,
        allowed_methods: rule.allowed_methods,
        allowed_headers: rule.allowed_headers.unwrap_or_default(),
        expose_headers: rule.expose_headers.unwrap_or_default(),
        max_age_seconds: rule.max_age_seconds,
    }
}

/// A CORS rule as GetBucketCors shows it.
pub(super) fn shown_cors_rule(rule: CorsRule) -> CORSRule {
    CORSRule {
        id: rule.id,
        allowed_origins: rule.allowed_origins,
        allowed_methods: rule.allowed_methods,
        allowed_headers: (!rule.allowed_headers.is_empty()).then_some(rule.allowed_headers),
        expose_headers: (!rule.expose_headers.is_empty()).then_some(rule.expose_headers),
        max_age_seconds: rule.max_age_seconds,
    }
}
