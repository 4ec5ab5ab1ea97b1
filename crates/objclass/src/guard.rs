//! `guard`: the epoch-guarded append of a CORFU-style shared log. Every log object stores
//! the current epoch; an append carrying an older epoch fails with ESTALE, so clients that
//! missed a reconfiguration ("seal") cannot write.
//!
//! The epoch lives in the xattr `guard.epoch` and is cached in memory per object, updated
//! only when a transaction commits, so a guarded append costs no more IO than a plain one.

use crate::registry::versioned_v1;
use crate::{ClassRegistry, MethodContext, MethodFlags, decode_input, decode_stored};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_types::{Result, Versioned, err};
use std::sync::Arc;

/// The class name.
pub const CLASS: &str = "guard";
const XATTR: &str = "guard.epoch";

/// Input of `guard.append`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendRequest {
    /// The writer's epoch; must not be older than the object's.
    pub epoch: u64,
    /// Bytes to append.
    pub payload: Bytes,
}

/// Input of `guard.set_epoch`, output of `guard.get_epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Epoch {
    /// The epoch.
    pub epoch: u64,
}

versioned_v1! {
    AppendRequest => "guard.append input",
    Epoch => "guard epoch",
}

/// Registers the class's methods.
pub fn register(r: &mut ClassRegistry) {
    r.register(CLASS, "append", MethodFlags::RDWR, append);
    r.register(CLASS, "set_epoch", MethodFlags::RDWR, set_epoch);
    r.register(CLASS, "get_epoch", MethodFlags::RD, get_epoch);
}

/// The object's epoch, from the cache when valid. It is staged again either way, so the
/// cache stays valid across this operation's own version bump.
fn current(ctx: &mut MethodContext<'_>) -> Result<u64> {
    if let Some(e) = ctx.cached::<Epoch>(CLASS) {
        ctx.object.stage_state(CLASS, e.clone());
        return Ok(e.epoch);
    }
    let epoch = if ctx.object.exists()? {
        match ctx.object.get_xattr(XATTR)? {
            Some(bytes) => decode_stored::<Epoch>("guard epoch", &bytes)?.epoch,
            None => 0,
        }
    } else {
        0
    };
    ctx.object.stage_state(CLASS, Arc::new(Epoch { epoch }));
    Ok(epoch)
}

fn check(ctx: &mut MethodContext<'_>, epoch: u64) -> Result<()> {
    let stored = current(ctx)?;
    if epoch < stored {
        return Err(err::stale_epoch(format!("epoch {epoch} is older than the object's epoch {stored}")));
    }
    Ok(())
}

fn append(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: AppendRequest = decode_input("guard.append", input)?;
    check(ctx, req.epoch)?;
    let size = if ctx.object.exists()? { ctx.object.stat()?.size } else { 0 };
    ctx.object.write(size, &req.payload)?;
    Ok(Vec::new())
}

fn set_epoch(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: Epoch = decode_input("guard.set_epoch", input)?;
    check(ctx, req.epoch)?;
    ctx.object.set_xattr(XATTR, Bytes::from(req.encode()))?;
    ctx.object.stage_state(CLASS, Arc::new(req));
    Ok(Vec::new())
}

fn get_epoch(ctx: &mut MethodContext<'_>, _input: &[u8]) -> Result<Vec<u8>> {
    Ok(Epoch { epoch: current(ctx)? }.encode())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemObject;
    use shoal_types::Errno;

    fn append_req(epoch: u64, payload: &'static [u8]) -> Vec<u8> {
        AppendRequest { epoch, payload: Bytes::from_static(payload) }.encode()
    }

    #[test]
    fn stale_epochs_are_refused_and_leave_no_trace() {
        let mut o = MemObject::default();
        o.call(CLASS, "append", 1, 0, &append_req(0, b"a")).unwrap();
        o.call(CLASS, "set_epoch", 1, 0, &Epoch { epoch: 3 }.encode()).unwrap();
        let e = o.call(CLASS, "append", 1, 0, &append_req(2, b"b")).unwrap_err();
        assert_eq!(e.errno, Errno::StaleEpoch);
        o.call(CLASS, "append", 1, 0, &append_req(3, b"c")).unwrap();
        o.call(CLASS, "append", 1, 0, &append_req(4, b"d")).unwrap();
        assert_eq!(o.data, b"acd");
        assert_eq!(
            o.call(CLASS, "set_epoch", 1, 0, &Epoch { epoch: 2 }.encode()).unwrap_err().errno,
            Errno::StaleEpoch
        );
        assert_eq!(Epoch::decode(&o.call(CLASS, "get_epoch", 1, 0, &[]).unwrap()).unwrap().epoch, 3);
    }
}
