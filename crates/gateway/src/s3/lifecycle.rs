//! Bucket lifecycle configurations as S3 shows them: parsed and checked into
//! [`rules::Rule`]s (the errors RGW and AWS give), kept in the bucket record, and the
//! bucket registered for the lifecycle worker.

use super::common::{ShoalS3, tag_pairs, tag_set, timestamp};
use crate::error::rados_error;
use crate::lifecycle::rules::{self, Expiration, NoncurrentExpiration, Rule};
use crate::meta::BucketInfo;
use s3s::dto::*;
use s3s::{S3Result, s3_error};

fn filter_of(rule: &LifecycleRule) -> S3Result<rules::Filter> {
    let mut filter = rules::Filter { prefix: rule.prefix.clone().unwrap_or_default(), ..Default::default() };
    let Some(f) = &rule.filter else { return Ok(filter) };
    let size = |v: Option<i64>| {
        v.map(|n| u64::try_from(n).map_err(|_| s3_error!(InvalidArgument, "object sizes are not negative")))
    };
    match &f.and {
        Some(and) => {
            filter.prefix = and.prefix.clone().unwrap_or_default();
            filter.tags = and.tags.clone().map(tag_pairs).unwrap_or_default();
            filter.size_greater_than = size(and.object_size_greater_than).transpose()?;
            filter.size_less_than = size(and.object_size_less_than).transpose()?;
        }
        None => {
            if let Some(prefix) = &f.prefix {
                filter.prefix = prefix.clone();
            }
            filter.tags = f.tag.clone().map(|t| tag_pairs(vec![t])).unwrap_or_default();
            filter.size_greater_than = size(f.object_size_greater_than).transpose()?;
            filter.size_less_than = size(f.object_size_less_than).transpose()?;
        }
    }
    Ok(filter)
}

fn positive_days(days: Option<i32>, what: &str) -> S3Result<Option<u32>> {
    match days {
        None => Ok(None),
        Some(d) if d > 0 => Ok(Some(d as u32)),
        Some(_) => Err(s3_error!(InvalidArgument, "{what} must be a positive number of days")),
    }
}

/// The rules of a PutBucketLifecycleConfiguration, checked.
fn parse(config: BucketLifecycleConfiguration) -> S3Result<Vec<Rule>> {
    if config.rules.len() > 1000 {
        return Err(s3_error!(InvalidArgument, "at most 1000 rules"));
    }
    let mut out: Vec<Rule> = Vec::with_capacity(config.rules.len());
    for (n, rule) in config.rules.iter().enumerate() {
        if rule.transitions.as_ref().is_some_and(|t| !t.is_empty())
            || rule.noncurrent_version_transitions.as_ref().is_some_and(|t| !t.is_empty())
        {
            return Err(s3_error!(NotImplemented, "transitions are not supported: there is one storage class"));
        }
        let id = rule.id.clone().unwrap_or_else(|| format!("rule-{n}"));
        if id.len() > 255 || out.iter().any(|r| r.id == id) {
            return Err(s3_error!(InvalidArgument, "rule IDs are unique and at most 255 characters"));
        }
        let expiration = match &rule.expiration {
            None => None,
            Some(e) => match (e.days, &e.date, e.expired_object_delete_marker) {
                (Some(_), None, None) => Some(Expiration::Days(positive_days(e.days, "Expiration Days")?.unwrap_or(1))),
                (None, Some(date), None) => {
                    let at = time::OffsetDateTime::from(date.clone()).unix_timestamp_nanos();
                    Some(Expiration::Date(u64::try_from(at).unwrap_or(0)))
                }
                (None, None, Some(true)) => Some(Expiration::ExpiredObjectDeleteMarker),
                (None, None, Some(false)) => None,
                _ => {
                    return Err(s3_error!(
                        MalformedXML,
                        "Expiration takes one of Days, Date, ExpiredObjectDeleteMarker"
                    ));
                }
            },
        };
        let noncurrent = match &rule.noncurrent_version_expiration {
            None => None,
            Some(nc) => {
                let days = positive_days(nc.noncurrent_days, "NoncurrentDays")?
                    .ok_or_else(|| s3_error!(MalformedXML, "NoncurrentVersionExpiration needs NoncurrentDays"))?;
                let newer = match nc.newer_noncurrent_versions {
                    None => None,
                    Some(n) if (1..=100).contains(&n) => Some(n as u32),
                    Some(_) => return Err(s3_error!(InvalidArgument, "NewerNoncurrentVersions is 1..=100")),
                };
                Some(NoncurrentExpiration { days, newer_noncurrent_versions: newer })
            }
        };
        let abort = rule.abort_incomplete_multipart_upload.as_ref().and_then(|a| a.days_after_initiation);
        let abort_incomplete_days = positive_days(abort, "DaysAfterInitiation")?;
        if expiration.is_none() && noncurrent.is_none() && abort_incomplete_days.is_none() {
            return Err(s3_error!(MalformedXML, "rule '{id}' has no action"));
        }
        let enabled = match rule.status.as_str() {
            ExpirationStatus::ENABLED => true,
            ExpirationStatus::DISABLED => false,
            other => return Err(s3_error!(MalformedXML, "unknown rule status '{other}'")),
        };
        out.push(Rule { id, enabled, filter: filter_of(rule)?, expiration, noncurrent, abort_incomplete_days });
    }
    Ok(out)
}

/// The S3 form of stored rules.
fn shown(rules: &[Rule]) -> Vec<LifecycleRule> {
    rules
        .iter()
        .map(|r| {
            let f = &r.filter;
            let simple = f.tags.len() <= 1 && f.size_greater_than.is_none() && f.size_less_than.is_none();
            let filter = if simple && f.tags.is_empty() {
                LifecycleRuleFilter { prefix: Some(f.prefix.clone()), ..Default::default() }
            } else if simple {
                LifecycleRuleFilter { tag: tag_set(&f.tags).into_iter().next(), ..Default::default() }
            } else {
                LifecycleRuleFilter {
                    and: Some(LifecycleRuleAndOperator {
                        prefix: (!f.prefix.is_empty()).then(|| f.prefix.clone()),
                        tags: (!f.tags.is_empty()).then(|| tag_set(&f.tags)),
                        object_size_greater_than: f.size_greater_than.map(|n| n as i64),
                        object_size_less_than: f.size_less_than.map(|n| n as i64),
                    }),
                    ..Default::default()
                }
            };
            let expiration = r.expiration.map(|e| match e {
                Expiration::Days(d) => LifecycleExpiration { days: Some(d as i32), ..Default::default() },
                Expiration::Date(ns) => LifecycleExpiration { date: Some(timestamp(ns)), ..Default::default() },
                Expiration::ExpiredObjectDeleteMarker => {
                    LifecycleExpiration { expired_object_delete_marker: Some(true), ..Default::default() }
                }
            });
            LifecycleRule {
                id: Some(r.id.clone()),
                status: ExpirationStatus::from_static(if r.enabled {
                    ExpirationStatus::ENABLED
                } else {
                    ExpirationStatus::DISABLED
                }),
                filter: Some(filter),
                expiration,
                noncurrent_version_expiration: r.noncurrent.map(|n| NoncurrentVersionExpiration {
                    noncurrent_days: Some(n.days as i32),
                    newer_noncurrent_versions: n.newer_noncurrent_versions.map(|v| v as i32),
                }),
                abort_incomplete_multipart_upload: r
                    .abort_incomplete_days
                    .map(|d| AbortIncompleteMultipartUpload { days_after_initiation: Some(d as i32) }),
                noncurrent_version_transitions: None,
                prefix: None,
                transitions: None,
            }
        })
        .collect()
}

impl ShoalS3 {
    pub(super) async fn put_lifecycle(
        &self,
        bucket: &BucketInfo,
        config: Option<BucketLifecycleConfiguration>,
    ) -> S3Result<()> {
        let rules = parse(config.ok_or_else(|| s3_error!(MalformedXML, "no LifecycleConfiguration"))?)?;
        self.lifecycle.register(&bucket.name).await.map_err(rados_error)?;
        self.change_bucket(bucket, |b| b.lifecycle = rules.clone()).await
    }

    pub(super) fn lifecycle_rules(bucket: &BucketInfo) -> S3Result<Vec<LifecycleRule>> {
        if bucket.lifecycle.is_empty() {
            return Err(s3_error!(NoSuchLifecycleConfiguration));
        }
        Ok(shown(&bucket.lifecycle))
    }

    pub(super) async fn delete_lifecycle(&self, bucket: &BucketInfo) -> S3Result<()> {
        self.change_bucket(bucket, |b| b.lifecycle.clear()).await?;
        self.lifecycle.unregister(&bucket.name).await.map_err(rados_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(expiration: Option<LifecycleExpiration>) -> LifecycleRule {
        LifecycleRule {
            id: Some("r".into()),
            status: ExpirationStatus::from_static(ExpirationStatus::ENABLED),
            expiration,
            abort_incomplete_multipart_upload: None,
            filter: None,
            noncurrent_version_expiration: None,
            noncurrent_version_transitions: None,
            prefix: None,
            transitions: None,
        }
    }

    #[test]
    fn configurations_are_checked_and_read_back() {
        let parsed = |rules| parse(BucketLifecycleConfiguration { rules });
        let code = |rules| parsed(rules).unwrap_err().code().as_str().to_owned();
        let days = |d| Some(LifecycleExpiration { days: Some(d), ..Default::default() });
        assert_eq!(code(vec![rule(days(0))]), "InvalidArgument");
        let both =
            Some(LifecycleExpiration { days: Some(1), expired_object_delete_marker: Some(true), ..Default::default() });
        assert_eq!(code(vec![rule(both)]), "MalformedXML");
        assert_eq!(code(vec![rule(None)]), "MalformedXML", "a rule without action");
        assert_eq!(code(vec![rule(days(1)), rule(days(2))]), "InvalidArgument", "duplicate IDs");
        let mut with_and = rule(days(3));
        with_and.filter = Some(LifecycleRuleFilter {
            and: Some(LifecycleRuleAndOperator {
                prefix: Some("logs/".into()),
                tags: Some(vec![Tag { key: Some("a".into()), value: Some("1".into()) }]),
                object_size_greater_than: Some(10),
                object_size_less_than: None,
            }),
            ..Default::default()
        });
        let rules = parsed(vec![with_and]).unwrap();
        assert_eq!(rules[0].filter.prefix, "logs/");
        assert_eq!((rules[0].filter.size_greater_than, rules[0].expiration), (Some(10), Some(Expiration::Days(3))));
        assert_eq!(parse(BucketLifecycleConfiguration { rules: shown(&rules) }).unwrap(), rules, "round trip");
    }
}
