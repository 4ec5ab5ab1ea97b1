//! The Swift object expirer: every `rgw_objexp_gc_interval` each gateway passes over the
//! [hint](crate::objexp) shards whose lease it can take, removes each object whose hint is
//! due and whose current version still expires then (one rewritten or given another time
//! since is kept), and drops the hint. A GET, HEAD or DELETE of an expired object answers
//! 404 and removes it at once ([`Service::expire`]).

use crate::clock::{new_tag, now_ns};
use crate::layout;
use crate::service::Service;
use shoal_notify::lease;
use shoal_types::{Errno, Result};
use std::sync::Arc;
use std::time::Duration;

const LOCK: &str = "objexp_process";
/// How long a pass holds a shard's lease; it stops taking batches after half of it.
const LEASE: Duration = Duration::from_secs(60);

/// The expirer of one gateway.
pub struct Expirer {
    service: Arc<Service>,
    period: Duration,
    cookie: String,
}

impl Expirer {
    /// An expirer acting through `service` every `period`.
    pub fn new(service: Arc<Service>, period: Duration) -> Arc<Expirer> {
        Arc::new(Expirer { service, period, cookie: new_tag() })
    }

    /// Passes over the hint shards until the process ends.
    pub async fn run(self: Arc<Self>) {
        loop {
            tokio::time::sleep(self.period).await;
            // Removing expired objects must work when the cluster is full.
            match shoal_client::freeing_space(self.pass(now_ns() / 1_000_000_000)).await {
                Ok(0) => {}
                Ok(removed) => tracing::info!(removed, "object expirer pass"),
                Err(e) => tracing::warn!(error = %e, "object expirer pass failed"),
            }
        }
    }

    /// Handles the hints due at `now` of every shard whose lease this gateway can take;
    /// returns how many hints it handled.
    pub async fn pass(&self, now: u64) -> Result<u64> {
        let mut handled = 0;
        for shard in 0..crate::objexp::HINT_SHARDS {
            let object = layout::objexp_hint_object(shard);
            let hints = &self.service.expiry_hints;
            match lease::own(&hints.io, &object, LOCK, &self.cookie, LEASE).await {
                Err(e) if matches!(e.errno, Errno::NotFound | Errno::Busy) => continue,
                other => other?,
            }
            let result = self.pass_shard(&object, now).await;
            if let Err(e) = lease::disown(&hints.io, &object, LOCK, &self.cookie).await {
                tracing::warn!(error = %e, %object, "releasing an expirer lease failed");
            }
            handled += result?;
        }
        Ok(handled)
    }

    async fn pass_shard(&self, object: &str, now: u64) -> Result<u64> {
        let started = tokio::time::Instant::now();
        let hints = &self.service.expiry_hints;
        let mut handled = 0;
        while started.elapsed() < LEASE / 2 {
            let due = hints.due(object, now).await?;
            if due.is_empty() {
                break;
            }
            for (hint, bucket, key) in due {
                self.service.expire(&bucket, &key, now).await?;
                hints.remove(object, hint).await?;
                handled += 1;
            }
        }
        Ok(handled)
    }
}
