//! Object lock as S3 shows it: the bucket's configuration, a version's retention and
//! legal hold, and the lock a new version asks for. The bucket index enforces locks.

use super::access::Caller;
use super::common::{ShoalS3, timestamp};
use crate::access::Action;
use crate::error::rados_error;
use crate::meta::{BucketInfo, DefaultRetention as DefaultLock, LockConfig, Versioning};
use s3s::dto::*;
use s3s::{S3Error, S3Result, s3_error};
use shoal_objclass::bucket_index::{LockMode, ObjectLock, Retention, SetLockInput};

fn mode_of(mode: &str) -> S3Result<LockMode> {
    match mode {
        ObjectLockRetentionMode::GOVERNANCE => Ok(LockMode::Governance),
        ObjectLockRetentionMode::COMPLIANCE => Ok(LockMode::Compliance),
        other => Err(s3_error!(InvalidArgument, "unknown object lock mode '{other}'")),
    }
}

fn mode_name(mode: LockMode) -> &'static str {
    match mode {
        LockMode::Governance => ObjectLockRetentionMode::GOVERNANCE,
        LockMode::Compliance => ObjectLockRetentionMode::COMPLIANCE,
    }
}

fn ns_of(ts: &Timestamp) -> u64 {
    let t = time::OffsetDateTime::from(ts.clone());
    u64::try_from(t.unix_timestamp_nanos()).unwrap_or(0)
}

fn no_lock_configuration() -> S3Error {
    s3_error!(InvalidRequest, "Bucket is missing Object Lock Configuration")
}

/// The object lock of a new version: the request's mode, date and legal hold, else the
/// bucket's default retention; refused where the bucket has no object lock.
pub fn requested_lock(
    bucket: &BucketInfo,
    mode: Option<&ObjectLockMode>,
    until: Option<&Timestamp>,
    hold: Option<&ObjectLockLegalHoldStatus>,
    now_ns: u64,
) -> S3Result<ObjectLock> {
    let Some(config) = &bucket.object_lock else {
        return match (mode, until, hold) {
            (None, None, None) => Ok(ObjectLock::default()),
            _ => Err(no_lock_configuration()),
        };
    };
    let retention = match (mode, until) {
        (Some(mode), Some(until)) => {
            let until_ns = ns_of(until);
            if until_ns <= now_ns {
                return Err(s3_error!(InvalidArgument, "the retain-until date must be in the future"));
            }
            Some(Retention { mode: mode_of(mode.as_str())?, until_ns })
        }
        (None, None) => config.default_retention.map(|d| d.from(now_ns)),
        _ => {
            return Err(s3_error!(InvalidArgument, "object lock mode and retain-until date go together"));
        }
    };
    let legal_hold = hold.is_some_and(|h| h.as_str() == ObjectLockLegalHoldStatus::ON);
    Ok(ObjectLock { retention, legal_hold })
}

/// The S3 form of a version's lock: mode, retain-until date, legal hold.
pub fn shown_lock(lock: &ObjectLock) -> (Option<ObjectLockMode>, Option<Timestamp>, Option<ObjectLockLegalHoldStatus>) {
    let retention = lock.retention;
    (
        retention.map(|r| ObjectLockMode::from_static(mode_name(r.mode))),
        retention.map(|r| timestamp(r.until_ns)),
        lock.legal_hold.then(|| ObjectLockLegalHoldStatus::from_static(ObjectLockLegalHoldStatus::ON)),
    )
}

impl ShoalS3 {
    /// Whether the requester may bypass governance retention on `key`: it asked to, and
    /// may (the bucket owner, or a policy allowing s3:BypassGovernanceRetention).
    pub(super) fn bypass(bucket: &BucketInfo, caller: &Caller, key: &str, asked: Option<bool>) -> bool {
        asked == Some(true) && Self::permits(bucket, caller, Action::BypassGovernanceRetention, Some(key), None)
    }

    pub(super) async fn put_lock_configuration(
        &self,
        bucket: &BucketInfo,
        config: Option<ObjectLockConfiguration>,
    ) -> S3Result<()> {
        let config = config.ok_or_else(|| s3_error!(MalformedXML, "no ObjectLockConfiguration"))?;
        if config.object_lock_enabled.as_ref().map(|e| e.as_str()) != Some(ObjectLockEnabled::ENABLED) {
            return Err(s3_error!(MalformedXML, "ObjectLockEnabled must be Enabled"));
        }
        if bucket.object_lock.is_none() && bucket.versioning != Versioning::Enabled {
            return Err(s3_error!(InvalidBucketState, "object lock needs versioning enabled on the bucket"));
        }
        let default_retention = match config.rule.and_then(|r| r.default_retention) {
            None => None,
            Some(d) => {
                let mode = d.mode.as_ref().ok_or_else(|| s3_error!(MalformedXML, "DefaultRetention needs a Mode"))?;
                let (days, years) = match (d.days, d.years) {
                    (Some(days), None) if days > 0 => (days as u32, 0),
                    (None, Some(years)) if years > 0 => (0, years as u32),
                    (Some(_), Some(_)) | (None, None) => {
                        return Err(s3_error!(MalformedXML, "DefaultRetention takes Days or Years"));
                    }
                    _ => return Err(s3_error!(InvalidArgument, "the retention period must be positive")),
                };
                Some(DefaultLock { mode: mode_of(mode.as_str())?, days, years })
            }
        };
        self.change_bucket(bucket, |b| b.object_lock = Some(LockConfig { default_retention })).await
    }

    pub(super) fn lock_configuration(bucket: &BucketInfo) -> S3Result<ObjectLockConfiguration> {
        let config = bucket.object_lock.as_ref().ok_or_else(|| s3_error!(ObjectLockConfigurationNotFoundError))?;
        let rule = config.default_retention.map(|d| ObjectLockRule {
            default_retention: Some(DefaultRetention {
                mode: Some(ObjectLockRetentionMode::from_static(mode_name(d.mode))),
                days: (d.days > 0).then_some(d.days as i32),
                years: (d.years > 0).then_some(d.years as i32),
            }),
        });
        Ok(ObjectLockConfiguration {
            object_lock_enabled: Some(ObjectLockEnabled::from_static(ObjectLockEnabled::ENABLED)),
            rule,
        })
    }

    /// The lock of the version a request names, in a bucket with object lock.
    pub(super) async fn version_lock(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        caller: &Caller,
        action: Action,
    ) -> S3Result<ObjectLock> {
        let found = self.readable_object(bucket, key, version_id, caller, action).await?;
        if found.bucket.object_lock.is_none() {
            return Err(no_lock_configuration());
        }
        Ok(found.lock)
    }

    /// Changes the lock of the version a request names if `caller` may do `action` on it;
    /// the index refuses what the current retention forbids.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn change_lock(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        caller: &Caller,
        action: Action,
        retention: Option<Option<Retention>>,
        legal_hold: Option<bool>,
        bypass_asked: Option<bool>,
    ) -> S3Result<()> {
        let found = self.readable_object(bucket, key, version_id, caller, action).await?;
        if found.bucket.object_lock.is_none() {
            return Err(no_lock_configuration());
        }
        let version = found.version_id.filter(|v| v != "null");
        let input = SetLockInput {
            key: key.to_owned(),
            version,
            retention,
            legal_hold,
            bypass_governance: Self::bypass(&found.bucket, caller, key, bypass_asked),
        };
        self.objects.set_lock(&found.bucket, input).await.map_err(rados_error)?;
        Ok(())
    }

    /// The retention a PutObjectRetention request asks for (`None`: remove it).
    pub(super) fn requested_retention(retention: Option<ObjectLockRetention>) -> S3Result<Option<Retention>> {
        let Some(r) = retention else { return Ok(None) };
        match (r.mode, r.retain_until_date) {
            (Some(mode), Some(until)) => Ok(Some(Retention { mode: mode_of(mode.as_str())?, until_ns: ns_of(&until) })),
            (None, None) => Ok(None),
            _ => Err(s3_error!(MalformedXML, "Retention takes a Mode and a RetainUntilDate")),
        }
    }
}
