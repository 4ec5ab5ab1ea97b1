//! Hints of the Swift object expirer (RGW's `objexp`): a write whose object carries
//! `X-Delete-At` first leaves an omap key `<at, 20 digits>/<bucket>/<key>` in one of
//! [`HINT_SHARDS`] objects of the log pool (namespace `objexp`), for
//! [`Expirer`](crate::expirer::Expirer) to find when it is due.

use crate::layout;
use bytes::Bytes;
use shoal_client::{IoCtx, WriteOp};
use shoal_placement::hash::str_hash;
use shoal_types::Result;
use std::collections::BTreeMap;

/// The stored header with the time an object expires (seconds since the epoch).
pub const DELETE_AT: &str = "x-delete-at";
/// Hint objects (`obj_delete_at_hint.<n>`), as RGW's `rgw_objexp_hints_num_shards` but fewer.
pub const HINT_SHARDS: u32 = 16;
/// Hints read from a shard at once.
const BATCH: u32 = 256;

/// When the object of stored `headers` expires, if it does.
pub fn delete_at(headers: &BTreeMap<String, String>) -> Option<u64> {
    headers.get(DELETE_AT)?.parse().ok()
}

/// The hint objects.
pub struct Hints {
    pub(crate) io: IoCtx,
}

impl Hints {
    /// Hints kept in `log_pool`.
    pub fn new(mut log_pool: IoCtx) -> Hints {
        log_pool.set_namespace(layout::NS_OBJEXP);
        Hints { io: log_pool }
    }

    fn shard(bucket: &str, key: &str) -> String {
        layout::objexp_hint_object(str_hash(format!("{bucket}/{key}").as_bytes()) % HINT_SHARDS)
    }

    /// Records that `key` of `bucket` is due at `at` (seconds since the epoch).
    pub async fn add(&self, at: u64, bucket: &str, key: &str) -> Result<()> {
        let hint = Bytes::from(format!("{at:020}/{bucket}/{key}"));
        let op = WriteOp::new().create(false).omap_set([(hint, Bytes::new())]);
        self.io.operate(&Self::shard(bucket, key), op).await.map(|_| ())
    }

    /// Hints of shard `object` due at `now`, in time order: (hint, bucket, key).
    pub(crate) async fn due(&self, object: &str, now: u64) -> Result<Vec<(Bytes, String, String)>> {
        let cutoff = format!("{:020}", now.saturating_add(1));
        let (rows, _) = self.io.omap_vals(object, b"", b"", BATCH).await?;
        Ok(rows
            .into_iter()
            .take_while(|(hint, _)| hint.as_ref() < cutoff.as_bytes())
            .filter_map(|(hint, _)| {
                let text = String::from_utf8_lossy(&hint).into_owned();
                let mut parts = text.splitn(3, '/');
                let (_, bucket, key) = (parts.next()?, parts.next()?, parts.next()?);
                Some((hint.clone(), bucket.to_owned(), key.to_owned()))
            })
            .collect())
    }

    pub(crate) async fn remove(&self, object: &str, hint: Bytes) -> Result<()> {
        self.io.operate(object, WriteOp::new().omap_rm_keys([hint])).await.map(|_| ())
    }
}
