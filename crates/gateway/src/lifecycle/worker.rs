//! The lifecycle worker: walks each registered bucket it holds the lease of and removes
//! what the rules say, through [`Service::delete_key`](crate::service::Service::delete_key).

use super::registry::{LOCK, LcStatus, Outcome, Registry};
use super::rules::{Action, Clock, Rule, Version};
use crate::clock::{new_tag, now_ns};
use crate::config::LcConfig;
use crate::head::read_meta;
use crate::meta::BucketInfo;
use crate::objects::{Listed, Objects};
use crate::request::Origin;
use crate::service::{Remover, Service};
use futures::StreamExt;

use shoal_notify::lease;
use shoal_objclass::bucket_index::{IndexEntry, VersionItem};
use shoal_types::{Errno, Result};
use std::sync::Arc;
use std::time::Duration;

/// How long a lease lasts unless renewed (every [`RENEW_EVERY`] keys).
const LEASE: Duration = Duration::from_secs(20);

/// Keys acted on between lease renewals.
const RENEW_EVERY: usize = 100;

/// Versions read per index listing.
const PAGE: usize = 1000;

/// The lifecycle worker of one gateway.
pub struct Lifecycle {
    service: Arc<Service>,
    config: LcConfig,
    cookie: String,
}

impl Lifecycle {
    /// A worker acting through `service`.
    pub fn new(service: Arc<Service>, config: LcConfig) -> Arc<Lifecycle> {
        Arc::new(Lifecycle { service, config, cookie: new_tag() })
    }

    fn registry(&self) -> &Registry {
        &self.service.lifecycle
    }

    fn day(&self) -> Duration {
        self.config.debug_interval.unwrap_or(Duration::from_secs(86_400))
    }

    /// Passes over due buckets until the process ends: every debug day, else hourly.
    pub async fn run(self: Arc<Self>) {
        let period = self.config.debug_interval.unwrap_or(Duration::from_secs(3600)).max(Duration::from_millis(100));
        loop {
            tokio::time::sleep(period).await;
            // Lifecycle rules only expire objects: that must work when the cluster is full.
            if let Err(e) = shoal_client::freeing_space(self.process(None, false)).await {
                tracing::warn!(error = %e, "lifecycle pass failed");
            }
        }
    }

    /// Processes the registered buckets (or only `only`) whose last pass is a day old
    /// (all of them with `force`), at most `rgw_lc_max_worker` at once; returns what each
    /// pass this gateway made did. Buckets another gateway is processing are skipped.
    pub async fn process(&self, only: Option<&str>, force: bool) -> Result<Vec<(String, LcStatus)>> {
        let mut buckets = self.registry().buckets().await?;
        if let Some(only) = only {
            buckets.retain(|b| b == only);
        }
        let passes = futures::stream::iter(buckets)
            .map(|bucket| async move {
                let status = self.process_bucket(&bucket, force).await;
                (bucket, status)
            })
            .buffer_unordered(self.config.max_workers.max(1))
            .collect::<Vec<_>>()
            .await;
        let mut done = Vec::new();
        for (bucket, status) in passes {
            match status {
                Ok(Some(status)) => done.push((bucket, status)),
                Ok(None) => {}
                Err(e) => tracing::warn!(%bucket, error = %e, "lifecycle pass of a bucket failed"),
            }
        }
        done.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(done)
    }

    /// One bucket's pass, if due and not owned by another gateway.
    async fn process_bucket(&self, name: &str, force: bool) -> Result<Option<LcStatus>> {
        let registry = self.registry();
        let last = registry.status(name).await?;
        let now = now_ns();
        if !force && last.finished_ns > 0 && now.saturating_sub(last.finished_ns) < self.day().as_nanos() as u64 {
            return Ok(None);
        }
        let status_object = Registry::status_object(name);
        match lease::own(&registry.io, &status_object, LOCK, &self.cookie, LEASE).await {
            Err(e) if matches!(e.errno, Errno::Busy | Errno::NotFound) => return Ok(None),
            other => other?,
        }
        let Some(bucket) = self.service.meta.bucket(name).await? else {
            registry.unregister(name).await?;
            return Ok(None);
        };
        let mut status = LcStatus { state: "PROCESSING".into(), started_ns: now, ..Default::default() };
        registry.save(name, &self.cookie, &status).await?;
        let result = self.walk(&bucket, &mut status).await;
        status.finished_ns = now_ns();
        match result {
            Ok(()) => status.state = "COMPLETE".into(),
            Err(e) => {
                status.state = "FAILED".into();
                status.error = Some(e.to_string());
            }
        }
        registry.save(name, &self.cookie, &status).await?;
        if let Err(e) = lease::disown(&registry.io, &status_object, LOCK, &self.cookie).await {
            tracing::warn!(bucket = %name, error = %e, "handing back a lifecycle lease failed");
        }
        Ok(Some(status))
    }

    /// Walks the bucket's versions and uploads, acting on what the rules say.
    async fn walk(&self, bucket: &BucketInfo, status: &mut LcStatus) -> Result<()> {
        let rules = &bucket.lifecycle;
        let clock = Clock {
            now_ns: now_ns(),
            day_ns: self.day().as_nanos() as u64,
            round: self.config.debug_interval.is_none(),
        };
        let mut resume = (String::new(), None);
        // A key's versions may span pages: act on a key once the next one shows up.
        let mut pending: (String, Vec<IndexEntry>) = Default::default();
        loop {
            let (items, more) = self.service.objects.list_versions(bucket, "", "", resume.clone(), PAGE).await?;
            let mut complete = Vec::new();
            for item in &items {
                let VersionItem::Version { key, entry, .. } = item else { continue };
                if *key != pending.0 {
                    complete.push(std::mem::replace(&mut pending, (key.clone(), Vec::new())));
                }
                pending.1.push(entry.clone());
            }
            self.act_on_keys(bucket, &complete, &clock, status).await?;
            match items.last() {
                Some(last) if more => resume = last.resume(),
                _ => break,
            }
        }
        self.act_on_keys(bucket, &[pending], &clock, status).await?;
        self.abort_uploads(bucket, rules, &clock, status).await
    }

    /// Applies the rules to each key's versions, `rgw_lc_max_wp_worker` keys at once,
    /// renewing the lease every [`RENEW_EVERY`] keys.
    async fn act_on_keys(
        &self,
        bucket: &BucketInfo,
        keys: &[(String, Vec<IndexEntry>)],
        clock: &Clock,
        status: &mut LcStatus,
    ) -> Result<()> {
        for chunk in keys.chunks(RENEW_EVERY) {
            lease::own(&self.registry().io, &Registry::status_object(&bucket.name), LOCK, &self.cookie, LEASE).await?;
            let acts: Vec<_> = chunk
                .iter()
                .filter(|(_, versions)| !versions.is_empty())
                .map(|(key, versions)| self.act(bucket, key, versions, clock))
                .collect();
            let outcomes: Vec<Result<Vec<Outcome>>> =
                futures::stream::iter(acts).buffer_unordered(self.config.key_workers.max(1)).collect().await;
            let mut failure = None;
            for outcome in outcomes {
                match outcome {
                    Ok(done) => done.into_iter().for_each(|o| status.count(o)),
                    Err(e) => failure = failure.or(Some(e)),
                }
            }
            if let Some(e) = failure {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Applies the rules to the versions of one key: what became of each planned action.
    async fn act(
        &self,
        bucket: &BucketInfo,
        key: &str,
        versions: &[IndexEntry],
        clock: &Clock,
    ) -> Result<Vec<Outcome>> {
        let rules = &bucket.lifecycle;
        let views: Vec<Version> = versions
            .iter()
            .map(|e| Version { size: e.size, mtime_ns: e.mtime_ns, delete_marker: e.delete_marker })
            .collect();
        let origin = Origin { request_id: format!("lc-{}", self.cookie), ..Default::default() };
        let mut outcomes = Vec::new();
        for (index, action, rule) in super::rules::plan(rules, key, &views, clock) {
            let entry = &versions[index];
            if !rules[rule].filter.tags.is_empty() && !entry.delete_marker {
                let head = Objects::head_of(bucket, key, &entry.order, entry.own_head);
                let meta = read_meta(self.service.objects.pools.data(), &head).await?;
                if !meta.is_some_and(|m| rules[rule].filter.matches_tags(&m.tags)) {
                    continue;
                }
            }
            let version = match action {
                Action::ExpireCurrent => None,
                Action::RemoveExpiredMarker | Action::ExpireNoncurrent => Some(entry.version_id()),
            };
            let remover = Remover::Lifecycle { planned_order: &entry.order };
            match self.service.delete_key(bucket, key, version, remover, &origin, &None).await {
                Ok(_) => outcomes.push(Outcome::Done(action)),
                Err(e) if *e.code() == s3s::S3ErrorCode::AccessDenied => outcomes.push(Outcome::Locked),
                Err(e) => {
                    return Err(shoal_types::err::io(format!(
                        "lifecycle removal of '{key}': {}",
                        e.message().unwrap_or("")
                    )));
                }
            }
        }
        Ok(outcomes)
    }

    /// Aborts the incomplete uploads the rules say are too old.
    async fn abort_uploads(
        &self,
        bucket: &BucketInfo,
        rules: &[Rule],
        clock: &Clock,
        status: &mut LcStatus,
    ) -> Result<()> {
        if rules.iter().all(|r| r.abort_incomplete_days.is_none()) {
            return Ok(());
        }
        let objects = &self.service.objects;
        let (uploads, _) = objects.list_uploads(&self.service.uploads, bucket, "", "", usize::MAX).await?;
        for upload in uploads {
            if super::rules::aborts_upload(rules, &upload.key, upload.initiated_ns, clock)
                && objects.abort_upload(&self.service.uploads, bucket, &upload.key, &upload.upload_id).await?
            {
                status.uploads_aborted += 1;
            }
        }
        Ok(())
    }
}
