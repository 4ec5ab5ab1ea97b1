//! `lock`: exclusive and shared leases on an object, as Ceph's `cls_lock`.
//!
//! State: the xattr `lock.<name>` holds a [`LockInfo`]. A locker is a (client, cookie)
//! pair with an expiry; expired lockers are ignored and trimmed on the next change, so an
//! expired lock is free. Locking a missing object creates it.

use crate::registry::versioned_v1;
use crate::{ClassRegistry, MethodContext, MethodFlags, decode_input, decode_stored};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_types::{ClientId, Result, Versioned, err};
use std::collections::BTreeMap;

/// The class name.
pub const CLASS: &str = "lock";
const XATTR_PREFIX: &str = "lock.";

/// Exclusive (one holder) or shared (many holders with one tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockType {
    /// One holder at a time.
    Exclusive,
    /// Any number of holders that agree on the tag.
    Shared,
}

/// Who holds a lock.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LockerId {
    /// The holding client.
    pub client: ClientId,
    /// The holder's cookie, distinguishing several holds by one client.
    pub cookie: String,
}

/// One holder's lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Locker {
    /// When the lease ends, ns since the epoch; 0 = never.
    pub expires_ns: u64,
    /// Free text for operators.
    pub description: String,
}

/// A lock's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    /// Exclusive or shared.
    pub lock_type: LockType,
    /// Shared holders must present the same tag.
    pub tag: String,
    /// Current holders.
    pub lockers: BTreeMap<LockerId, Locker>,
}

/// Input of `lock.lock`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRequest {
    /// Lock name (several locks may live on one object).
    pub name: String,
    /// Exclusive or shared.
    pub lock_type: LockType,
    /// The caller's cookie.
    pub cookie: String,
    /// Tag shared holders must agree on.
    pub tag: String,
    /// Free text.
    pub description: String,
    /// Lease length in ns; 0 = until unlocked.
    pub duration_ns: u64,
    /// If already held by this locker, extend the lease instead of failing with EEXIST.
    pub may_renew: bool,
    /// Only renew: fail with ENOENT unless already held by this locker.
    pub must_renew: bool,
}

/// Input of `lock.unlock`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnlockRequest {
    /// Lock name.
    pub name: String,
    /// The caller's cookie.
    pub cookie: String,
}

/// Input of `lock.break_lock`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakRequest {
    /// Lock name.
    pub name: String,
    /// The holder to evict.
    pub locker: LockerId,
}

/// Input of `lock.assert_locked`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssertRequest {
    /// Lock name.
    pub name: String,
    /// Expected type.
    pub lock_type: LockType,
    /// The caller's cookie.
    pub cookie: String,
    /// Expected tag.
    pub tag: String,
}

/// Input of `lock.get_info`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InfoRequest {
    /// Lock name.
    pub name: String,
}

/// Output of `lock.list_locks`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockList {
    /// Names of locks with at least one live holder.
    pub names: Vec<String>,
}

versioned_v1! {
    LockInfo => "lock info",
    LockRequest => "lock.lock input",
    UnlockRequest => "lock.unlock input",
    BreakRequest => "lock.break_lock input",
    AssertRequest => "lock.assert_locked input",
    InfoRequest => "lock.get_info input",
    LockList => "lock.list_locks output",
}

/// Registers the class's methods.
pub fn register(r: &mut ClassRegistry) {
    r.register(CLASS, "lock", MethodFlags::RDWR, lock);
    r.register(CLASS, "unlock", MethodFlags::RDWR, unlock);
    r.register(CLASS, "break_lock", MethodFlags::RDWR, break_lock);
    r.register(CLASS, "assert_locked", MethodFlags::RD, assert_locked);
    r.register(CLASS, "get_info", MethodFlags::RD, get_info);
    r.register(CLASS, "list_locks", MethodFlags::RD, list_locks);
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(err::invalid("lock name must not be empty"));
    }
    Ok(())
}

/// The lock's live state (expired holders dropped), or `None` if nobody holds it.
fn load(ctx: &mut MethodContext<'_>, name: &str) -> Result<Option<LockInfo>> {
    if !ctx.object.exists()? {
        return Ok(None);
    }
    let Some(bytes) = ctx.object.get_xattr(&format!("{XATTR_PREFIX}{name}"))? else { return Ok(None) };
    let mut info: LockInfo = decode_stored("lock state", &bytes)?;
    let now = ctx.now_ns;
    info.lockers.retain(|_, l| l.expires_ns == 0 || l.expires_ns > now);
    Ok(if info.lockers.is_empty() { None } else { Some(info) })
}

fn store(ctx: &mut MethodContext<'_>, name: &str, info: Option<LockInfo>) -> Result<()> {
    let xattr = format!("{XATTR_PREFIX}{name}");
    match info {
        Some(info) => ctx.object.set_xattr(&xattr, Bytes::from(info.encode())),
        None => match ctx.object.rm_xattr(&xattr) {
            Err(e) if e.errno == shoal_types::Errno::NoData => Ok(()),
            other => other,
        },
    }
}

fn lock(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: LockRequest = decode_input("lock.lock", input)?;
    check_name(&req.name)?;
    let me = LockerId { client: ctx.caller, cookie: req.cookie.clone() };
    let expires_ns = if req.duration_ns == 0 { 0 } else { ctx.now_ns.saturating_add(req.duration_ns) };
    let locker = Locker { expires_ns, description: req.description.clone() };
    let info = match load(ctx, &req.name)? {
        None if req.must_renew => {
            return Err(err::not_found(format!("lock '{}' is not held by {}", req.name, ctx.caller)));
        }
        None => LockInfo { lock_type: req.lock_type, tag: req.tag.clone(), lockers: BTreeMap::from([(me, locker)]) },
        Some(mut info) => {
            if info.lockers.contains_key(&me) {
                if !(req.may_renew || req.must_renew) {
                    return Err(err::exists(format!("lock '{}' is already held by this locker", req.name)));
                }
                if info.lock_type != req.lock_type || info.tag != req.tag {
                    return Err(err::busy(format!("lock '{}' is held with another type or tag", req.name)));
                }
            } else if req.must_renew {
                return Err(err::not_found(format!("lock '{}' is not held by {}", req.name, ctx.caller)));
            } else if info.lock_type == LockType::Exclusive || req.lock_type == LockType::Exclusive {
                return Err(err::busy(format!("lock '{}' is held by someone else", req.name)));
            } else if info.tag != req.tag {
                return Err(err::busy(format!("shared lock '{}' has tag '{}', not '{}'", req.name, info.tag, req.tag)));
            }
            info.lockers.insert(me, locker);
            info
        }
    };
    store(ctx, &req.name, Some(info))?;
    Ok(Vec::new())
}

fn remove_locker(ctx: &mut MethodContext<'_>, name: &str, who: &LockerId) -> Result<Vec<u8>> {
    check_name(name)?;
    let mut info = load(ctx, name)?.ok_or_else(|| err::not_found(format!("lock '{name}' is not held")))?;
    if info.lockers.remove(who).is_none() {
        return Err(err::not_found(format!("lock '{name}' is not held by {} cookie '{}'", who.client, who.cookie)));
    }
    store(ctx, name, (!info.lockers.is_empty()).then_some(info))?;
    Ok(Vec::new())
}

fn unlock(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: UnlockRequest = decode_input("lock.unlock", input)?;
    let me = LockerId { client: ctx.caller, cookie: req.cookie };
    remove_locker(ctx, &req.name, &me)
}

fn break_lock(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: BreakRequest = decode_input("lock.break_lock", input)?;
    remove_locker(ctx, &req.name, &req.locker)
}

fn assert_locked(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: AssertRequest = decode_input("lock.assert_locked", input)?;
    check_name(&req.name)?;
    let me = LockerId { client: ctx.caller, cookie: req.cookie };
    match load(ctx, &req.name)? {
        Some(info) if info.lockers.contains_key(&me) && info.lock_type == req.lock_type && info.tag == req.tag => {
            Ok(Vec::new())
        }
        _ => {
            Err(err::busy(format!("lock '{}' is not held by {} with this cookie, type and tag", req.name, ctx.caller)))
        }
    }
}

fn get_info(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let req: InfoRequest = decode_input("lock.get_info", input)?;
    check_name(&req.name)?;
    let info = load(ctx, &req.name)?.ok_or_else(|| err::not_found(format!("lock '{}' is not held", req.name)))?;
    Ok(info.encode())
}

fn list_locks(ctx: &mut MethodContext<'_>, _input: &[u8]) -> Result<Vec<u8>> {
    if !ctx.object.exists()? {
        return Err(err::not_found("no such object"));
    }
    let xattrs = ctx.object.get_xattrs()?;
    let mut names = Vec::new();
    for name in xattrs.keys().filter_map(|k| k.strip_prefix(XATTR_PREFIX)) {
        if load(ctx, name)?.is_some() {
            names.push(name.to_owned());
        }
    }
    Ok(LockList { names }.encode())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemObject;

    fn req(cookie: &str, lock_type: LockType, duration_ns: u64) -> LockRequest {
        LockRequest {
            name: "l".into(),
            lock_type,
            cookie: cookie.into(),
            tag: "t".into(),
            description: "test".into(),
            duration_ns,
            may_renew: false,
            must_renew: false,
        }
    }

    fn call<T: Versioned>(o: &mut MemObject, method: &str, client: u64, now: u64, input: &T) -> Result<Vec<u8>> {
        o.call(CLASS, method, client, now, &input.encode())
    }

    #[test]
    fn exclusive_lock_excludes_and_expires() {
        let mut o = MemObject::default();
        call(&mut o, "lock", 1, 100, &req("c", LockType::Exclusive, 50)).unwrap();
        assert!(o.exists, "locking creates the object");
        let e = call(&mut o, "lock", 2, 120, &req("c", LockType::Exclusive, 50)).unwrap_err();
        assert_eq!(e.errno, shoal_types::Errno::Busy);
        let e = call(&mut o, "lock", 1, 120, &req("c", LockType::Exclusive, 50)).unwrap_err();
        assert_eq!(e.errno, shoal_types::Errno::Exists, "relock without renew");
        // After expiry the lock is free for others.
        call(&mut o, "lock", 2, 151, &req("c", LockType::Exclusive, 0)).unwrap();
        let info =
            LockInfo::decode(&call(&mut o, "get_info", 9, 152, &InfoRequest { name: "l".into() }).unwrap()).unwrap();
        assert_eq!(info.lockers.keys().map(|l| l.client).collect::<Vec<_>>(), vec![ClientId(2)]);
    }

    #[test]
    fn renew_extends_and_must_renew_requires_holding() {
        let mut o = MemObject::default();
        let mut r = req("c", LockType::Exclusive, 50);
        r.must_renew = true;
        assert_eq!(call(&mut o, "lock", 1, 0, &r).unwrap_err().errno, shoal_types::Errno::NotFound);
        r.must_renew = false;
        call(&mut o, "lock", 1, 0, &r).unwrap();
        r.may_renew = true;
        call(&mut o, "lock", 1, 40, &r).unwrap();
        // Without the renewal this would have expired at 50.
        let assert_req =
            AssertRequest { name: "l".into(), lock_type: LockType::Exclusive, cookie: "c".into(), tag: "t".into() };
        call(&mut o, "assert_locked", 1, 80, &assert_req).unwrap();
        assert_eq!(call(&mut o, "assert_locked", 1, 91, &assert_req).unwrap_err().errno, shoal_types::Errno::Busy);
        assert_eq!(call(&mut o, "assert_locked", 2, 80, &assert_req).unwrap_err().errno, shoal_types::Errno::Busy);
    }

    #[test]
    fn shared_lock_needs_matching_tag_and_unlock_frees() {
        let mut o = MemObject::default();
        call(&mut o, "lock", 1, 0, &req("a", LockType::Shared, 0)).unwrap();
        call(&mut o, "lock", 2, 0, &req("b", LockType::Shared, 0)).unwrap();
        let mut other_tag = req("c", LockType::Shared, 0);
        other_tag.tag = "x".into();
        assert_eq!(call(&mut o, "lock", 3, 0, &other_tag).unwrap_err().errno, shoal_types::Errno::Busy);
        assert_eq!(
            call(&mut o, "lock", 3, 0, &req("c", LockType::Exclusive, 0)).unwrap_err().errno,
            shoal_types::Errno::Busy
        );
        call(&mut o, "unlock", 1, 0, &UnlockRequest { name: "l".into(), cookie: "a".into() }).unwrap();
        let e = call(&mut o, "unlock", 1, 0, &UnlockRequest { name: "l".into(), cookie: "a".into() }).unwrap_err();
        assert_eq!(e.errno, shoal_types::Errno::NotFound);
        let list = LockList::decode(&o.call(CLASS, "list_locks", 1, 0, &[]).unwrap()).unwrap();
        assert_eq!(list.names, vec!["l".to_owned()]);
        call(
            &mut o,
            "break_lock",
            9,
            0,
            &BreakRequest { name: "l".into(), locker: LockerId { client: ClientId(2), cookie: "b".into() } },
        )
        .unwrap();
        let list = LockList::decode(&o.call(CLASS, "list_locks", 1, 0, &[]).unwrap()).unwrap();
        assert!(list.names.is_empty());
        call(&mut o, "lock", 3, 0, &req("c", LockType::Exclusive, 0)).unwrap();
    }

    #[test]
    fn malformed_input_is_einval() {
        let mut o = MemObject::default();
        let e = o.call(CLASS, "lock", 1, 0, b"\x01garbage").unwrap_err();
        assert_eq!(e.errno, shoal_types::Errno::InvalidArgument);
        assert!(e.message.contains("lock.lock"), "{e}");
    }
}
