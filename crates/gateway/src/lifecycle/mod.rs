//! The lifecycle worker: every gateway runs one; buckets with a lifecycle configuration
//! are registered in `.rgw.log/lc/lc.buckets`, and each bucket's pass is owned by one
//! gateway at a time through a `lock`-class lease on the bucket's status object
//! `lc.<bucket>` (a killed gateway's share is taken over when its lease runs out). A pass
//! walks the bucket's versions in index order, a page at a time, decides with
//! [`rules::plan`], and removes through [`ShoalS3::delete_key`], the path of a user DELETE
//! (so GC, object lock and notifications see lifecycle removals as they see any other).

pub mod rules;

use crate::meta::BucketInfo;
use crate::notifications::Origin;
use crate::objects::{Listed, Objects, new_tag, now_ns, read_meta};
use crate::s3::{Remover, ShoalS3};
use bytes::Bytes;
use futures::StreamExt;
use rules::{Action, Clock, Rule, Version};
use serde::{Deserialize, Serialize};
use shoal_client::{IoCtx, WriteOp};
use shoal_notify::lease;
use shoal_objclass::bucket_index::{IndexEntry, VersionItem};
use shoal_types::{Errno, Result};
use std::sync::Arc;
use std::time::Duration;

/// Namespace of lifecycle state in the log pool.
pub const NS_LC: &str = "lc";
/// The registry: omap keys are the names of buckets with a lifecycle configuration.
const REGISTRY: &str = "lc.buckets";
/// The lease a gateway holds on a bucket's status object while processing it.
const LOCK: &str = "lc_process";
/// How long a lease lasts unless renewed (every [`RENEW_EVERY`] keys).
const LEASE: Duration = Duration::from_secs(20);
/// Keys acted on between lease renewals.
const RENEW_EVERY: usize = 100;
/// Versions read per index listing.
const PAGE: usize = 1000;

/// How the lifecycle worker runs.
#[derive(Clone, Debug)]
pub struct LcConfig {
    /// Seconds that count as one day (`rgw_lc_debug_interval`; `None`: real days, counted
    /// from midnight UTC, buckets passed once a day).
    pub debug_interval: Option<Duration>,
    /// Buckets processed at once by one gateway (`rgw_lc_max_worker`).
    pub max_workers: usize,
    /// Keys of one bucket acted on at once (`rgw_lc_max_wp_worker`).
    pub key_workers: usize,
}

impl Default for LcConfig {
    fn default() -> Self {
        LcConfig { debug_interval: None, max_workers: 3, key_workers: 8 }
    }
}

/// The outcome of a bucket's last lifecycle pass.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LcStatus {
    /// `UNINITIAL`, `PROCESSING`, `COMPLETE` or `FAILED`.
    pub state: String,
    /// When the last pass started and finished, ns since the epoch (0: never).
    pub started_ns: u64,
    /// When the last pass finished.
    pub finished_ns: u64,
    /// Current versions expired (deleted, or hidden by a delete marker).
    pub expired_current: u64,
    /// Noncurrent versions removed.
    pub expired_noncurrent: u64,
    /// Expired delete markers removed.
    pub markers_removed: u64,
    /// Incomplete multipart uploads aborted.
    pub uploads_aborted: u64,
    /// Removals refused by object lock.
    pub skipped_locked: u64,
    /// The failure of a failed pass.
    pub error: Option<String>,
}

/// What became of one planned action.
enum Outcome {
    Done(Action),
    /// Object lock refused the removal.
    Locked,
}

impl LcStatus {
    fn count(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Done(Action::ExpireCurrent) => self.expired_current += 1,
            Outcome::Done(Action::ExpireNoncurrent) => self.expired_noncurrent += 1,
            Outcome::Done(Action::RemoveExpiredMarker) => self.markers_removed += 1,
            Outcome::Locked => self.skipped_locked += 1,
        }
    }
}

/// Registration of buckets and their pass status.
#[derive(Clone)]
pub struct Registry {
    io: IoCtx,
}

impl Registry {
    /// Lifecycle state in `log_pool`.
    pub fn new(log_pool: IoCtx) -> Registry {
        let mut io = log_pool;
        io.set_namespace(NS_LC);
        Registry { io }
    }

    fn status_object(bucket: &str) -> String {
        format!("lc.{bucket}")
    }

    /// Registers `bucket` (and creates its status object, which leases need).
    pub async fn register(&self, bucket: &str) -> Result<()> {
        let op = WriteOp::new().create(false).omap_set([(Bytes::from(bucket.to_owned()), Bytes::new())]);
        self.io.operate(REGISTRY, op).await?;
        self.io.operate(&Self::status_object(bucket), WriteOp::new().create(false)).await.map(|_| ())
    }

    /// Forgets `bucket` (its lifecycle configuration or itself is gone).
    pub async fn unregister(&self, bucket: &str) -> Result<()> {
        match self.io.operate(REGISTRY, WriteOp::new().omap_rm_keys([Bytes::from(bucket.to_owned())])).await {
            Err(e) if e.errno != Errno::NotFound => return Err(e),
            _ => {}
        }
        crate::meta::remove_ignoring_missing(&self.io, &Self::status_object(bucket)).await
    }

    /// The registered buckets, in name order.
    pub async fn buckets(&self) -> Result<Vec<String>> {
        lease::registry_keys(&self.io, REGISTRY).await
    }

    /// A bucket's last pass.
    pub async fn status(&self, bucket: &str) -> Result<LcStatus> {
        match self.io.read_full(&Self::status_object(bucket)).await {
            Ok(bytes) if bytes.is_empty() => Ok(LcStatus { state: "UNINITIAL".into(), ..Default::default() }),
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| shoal_types::err::io(format!("lc status: {e}"))),
            Err(e) if e.errno == Errno::NotFound => Ok(LcStatus { state: "UNINITIAL".into(), ..Default::default() }),
            Err(e) => Err(e),
        }
    }

    /// Records a pass's status, if this gateway still holds the bucket's lease.
    async fn save(&self, bucket: &str, cookie: &str, status: &LcStatus) -> Result<()> {
        let json = serde_json::to_vec(status).map_err(|e| shoal_types::err::invalid(e.to_string()))?;
        let op = lease::assert_owner(LOCK, cookie).write_full(json);
        self.io.operate(&Self::status_object(bucket), op).await.map(|_| ())
    }
}

/// The lifecycle worker of one gateway.
pub struct Lifecycle {
    s3: Arc<ShoalS3>,
    config: LcConfig,
    cookie: String,
}

impl Lifecycle {
    /// A worker acting through `s3`.
    pub fn new(s3: Arc<ShoalS3>, config: LcConfig) -> Arc<Lifecycle> {
        Arc::new(Lifecycle { s3, config, cookie: new_tag() })
    }

    fn registry(&self) -> &Registry {
        &self.s3.lifecycle
    }

    fn day(&self) -> Duration {
        self.config.debug_interval.unwrap_or(Duration::from_secs(86_400))
    }

    /// Passes over due buckets until the process ends: every debug day, else hourly.
    pub async fn run(self: Arc<Self>) {
        let period = self.config.debug_interval.unwrap_or(Duration::from_secs(3600)).max(Duration::from_millis(100));
        loop {
            tokio::time::sleep(period).await;
            if let Err(e) = self.process(None, false).await {
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
        let Some(bucket) = self.s3.meta.bucket(name).await? else {
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
            let (items, more) = self.s3.objects.list_versions(bucket, "", "", resume.clone(), PAGE).await?;
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
        for (index, action, rule) in rules::plan(rules, key, &views, clock) {
            let entry = &versions[index];
            if !rules[rule].filter.tags.is_empty() && !entry.delete_marker {
                let head = Objects::head_of(bucket, key, &entry.order, entry.own_head);
                let meta = read_meta(self.s3.objects.pools.data(), &head).await?;
                if !meta.is_some_and(|m| rules[rule].filter.matches_tags(&m.tags)) {
                    continue;
                }
            }
            let version = match action {
                Action::ExpireCurrent => None,
                Action::RemoveExpiredMarker | Action::ExpireNoncurrent => Some(entry.version_id()),
            };
            let remover = Remover::Lifecycle { planned_order: &entry.order };
            match self.s3.delete_key(bucket, key, version, remover, &origin, &None).await {
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
        let objects = &self.s3.objects;
        let (uploads, _) = objects.list_uploads(&self.s3.uploads, bucket, "", "", usize::MAX).await?;
        for upload in uploads {
            if rules::aborts_upload(rules, &upload.key, upload.initiated_ns, clock)
                && objects.abort_upload(&self.s3.uploads, bucket, &upload.key, &upload.upload_id).await?
            {
                status.uploads_aborted += 1;
            }
        }
        Ok(())
    }
}
