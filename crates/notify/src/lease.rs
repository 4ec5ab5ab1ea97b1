//! Ownership of an object (a queue shard, a bucket index event log) by one gateway at a
//! time: an exclusive `lock`-class lock with a lease, renewed by taking it again.

use shoal_client::{IoCtx, OpBuilder, WriteOp};
use shoal_objclass::lock::{self, AssertRequest, LockRequest, LockType, UnlockRequest};
use shoal_types::{Result, Versioned};
use std::time::Duration;

/// Takes or renews `lock` on `object` for `lease`. Fails with EBUSY when another holder
/// has it, ENOENT when the object is gone (locking must not create it).
pub async fn own(io: &IoCtx, object: &str, lock: &str, cookie: &str, lease: Duration) -> Result<()> {
    let req = LockRequest {
        name: lock.into(),
        lock_type: LockType::Exclusive,
        cookie: cookie.into(),
        tag: String::new(),
        description: format!("{lock} lease"),
        duration_ns: lease.as_nanos() as u64,
        may_renew: true,
        must_renew: false,
    };
    let op = WriteOp::new().assert_exists().exec(lock::CLASS, "lock", req.encode());
    io.operate(object, op).await.map(|_| ())
}

/// Gives `lock` on `object` up so another gateway can take it at once.
pub async fn disown(io: &IoCtx, object: &str, lock: &str, cookie: &str) -> Result<()> {
    let req = UnlockRequest { name: lock.into(), cookie: cookie.into() };
    io.exec(object, lock::CLASS, "unlock", req.encode()).await.map(|_| ())
}

/// A write that fails (EBUSY) unless `cookie` holds `lock`; changes follow it in one transaction.
pub fn assert_owner(lock: &str, cookie: &str) -> WriteOp {
    let req =
        AssertRequest { name: lock.into(), lock_type: LockType::Exclusive, cookie: cookie.into(), tag: String::new() };
    WriteOp::new().exec(lock::CLASS, "assert_locked", req.encode())
}

/// The omap keys of a registry object (none when it does not exist).
pub async fn registry_keys(io: &IoCtx, object: &str) -> Result<Vec<String>> {
    match io.omap_vals_all(object, b"").await {
        Ok(rows) => Ok(rows.into_iter().map(|(k, _)| String::from_utf8_lossy(&k).into_owned()).collect()),
        Err(e) if e.errno == shoal_types::Errno::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}
