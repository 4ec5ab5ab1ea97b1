//! The registry of buckets with a lifecycle configuration (omap keys of
//! `.rgw.log/lc/lc.buckets`) and the status object of each (`lc.<bucket>`): the outcome
//! of its last pass, written under the lease of the gateway running it.

use super::rules::Action;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_client::{IoCtx, WriteOp};
use shoal_notify::lease;
use shoal_types::{Errno, Result};

/// Namespace of lifecycle state in the log pool.
pub const NS_LC: &str = "lc";

/// The registry: omap keys are the names of buckets with a lifecycle configuration.
pub(crate) const REGISTRY: &str = "lc.buckets";

/// The lease a gateway holds on a bucket's status object while processing it.
pub(crate) const LOCK: &str = "lc_process";

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
pub(crate) enum Outcome {
    Done(Action),
    /// Object lock refused the removal.
    Locked,
}

impl LcStatus {
    pub(crate) fn count(&mut self, outcome: Outcome) {
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
    pub(crate) io: IoCtx,
}

impl Registry {
    /// Lifecycle state in `log_pool`.
    pub fn new(log_pool: IoCtx) -> Registry {
        let mut io = log_pool;
        io.set_namespace(NS_LC);
        Registry { io }
    }

    pub(crate) fn status_object(bucket: &str) -> String {
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
    pub(crate) async fn save(&self, bucket: &str, cookie: &str, status: &LcStatus) -> Result<()> {
        let json = serde_json::to_vec(status).map_err(|e| shoal_types::err::invalid(e.to_string()))?;
        let op = lease::assert_owner(LOCK, cookie).write_full(json);
        self.io.operate(&Self::status_object(bucket), op).await.map(|_| ())
    }
}
