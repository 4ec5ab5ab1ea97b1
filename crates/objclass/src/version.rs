//! `version`: a version number and tag on an object for optimistic concurrency, as Ceph's
//! `cls_version` (RGW's `RGWObjVersionTracker`). State: the xattr `version`.

use crate::registry::versioned_v1;
use crate::{ClassRegistry, MethodContext, MethodFlags, decode_input, decode_stored};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_types::{Result, Versioned, err};

/// The class name.
pub const CLASS: &str = "version";
const XATTR: &str = "version";

/// A version and the tag naming the lineage it belongs to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjVersion {
    /// Increases with every `inc`; 0 when never set.
    pub ver: u64,
    /// Changes when the object is recreated, so versions of different lives differ.
    pub tag: String,
}

/// How a condition compares the stored version with the given one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VersionCmp {
    /// stored.ver == ver
    Eq,
    /// stored.ver > ver
    Gt,
    /// stored.ver >= ver
    Ge,
    /// stored.ver < ver
    Lt,
    /// stored.ver <= ver
    Le,
    /// stored.tag == tag
    TagEq,
    /// stored.tag != tag
    TagNe,
}

/// One condition on the stored version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionCond {
    /// The comparison.
    pub cmp: VersionCmp,
    /// Version and tag to compare with.
    pub version: ObjVersion,
}

/// Input of `version.inc` and `version.check_conds`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conds {
    /// All must hold, else ECANCELED.
    pub conds: Vec<VersionCond>,
}

versioned_v1! {
    ObjVersion => "version",
    Conds => "version conditions",
}

/// Registers the class's methods.
pub fn register(r: &mut ClassRegistry) {
    r.register(CLASS, "set", MethodFlags::RDWR, set);
    r.register(CLASS, "inc", MethodFlags::RDWR, inc);
    r.register(CLASS, "read", MethodFlags::RD, read);
    r.register(CLASS, "check_conds", MethodFlags::RD, check_conds);
}

fn load(ctx: &mut MethodContext<'_>) -> Result<ObjVersion> {
    if !ctx.object.exists()? {
        return Ok(ObjVersion::default());
    }
    match ctx.object.get_xattr(XATTR)? {
        Some(bytes) => decode_stored("version state", &bytes),
        None => Ok(ObjVersion::default()),
    }
}

fn check(stored: &ObjVersion, conds: &[VersionCond]) -> Result<()> {
    for c in conds {
        let v = &c.version;
        let holds = match c.cmp {
            VersionCmp::Eq => stored.ver == v.ver,
            VersionCmp::Gt => stored.ver > v.ver,
            VersionCmp::Ge => stored.ver >= v.ver,
            VersionCmp::Lt => stored.ver < v.ver,
            VersionCmp::Le => stored.ver <= v.ver,
            VersionCmp::TagEq => stored.tag == v.tag,
            VersionCmp::TagNe => stored.tag != v.tag,
        };
        if !holds {
            return Err(err::canceled(format!(
                "version {}:{} fails {:?} {}:{}",
                stored.tag, stored.ver, c.cmp, v.tag, v.ver
            )));
        }
    }
    Ok(())
}

fn set(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let v: ObjVersion = decode_input("version.set", input)?;
    ctx.object.set_xattr(XATTR, Bytes::from(v.encode()))?;
    Ok(Vec::new())
}

fn inc(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let conds: Conds = if input.is_empty() { Conds::default() } else { decode_input("version.inc", input)? };
    let mut v = load(ctx)?;
    check(&v, &conds.conds)?;
    if v.tag.is_empty() {
        // A fresh lineage: derived from the caller and time so it differs between lives.
        v.tag = format!("{:016x}{:016x}", ctx.caller.0, ctx.now_ns);
    }
    v.ver += 1;
    ctx.object.set_xattr(XATTR, Bytes::from(v.encode()))?;
    Ok(v.encode())
}

fn read(ctx: &mut MethodContext<'_>, _input: &[u8]) -> Result<Vec<u8>> {
    Ok(load(ctx)?.encode())
}

fn check_conds(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let conds: Conds = decode_input("version.check_conds", input)?;
    check(&load(ctx)?, &conds.conds)?;
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemObject;
    use shoal_types::Errno;

    fn cond(cmp: VersionCmp, ver: u64, tag: &str) -> Conds {
        Conds { conds: vec![VersionCond { cmp, version: ObjVersion { ver, tag: tag.into() } }] }
    }

    #[test]
    fn inc_read_and_conditions() {
        let mut o = MemObject::default();
        let v1 = ObjVersion::decode(&o.call(CLASS, "inc", 1, 5, &[]).unwrap()).unwrap();
        assert_eq!(v1.ver, 1);
        assert!(!v1.tag.is_empty());
        let v2 =
            ObjVersion::decode(&o.call(CLASS, "inc", 1, 6, &cond(VersionCmp::Eq, 1, "").encode()).unwrap()).unwrap();
        assert_eq!(v2, ObjVersion { ver: 2, tag: v1.tag.clone() });
        let e = o.call(CLASS, "inc", 1, 7, &cond(VersionCmp::Eq, 1, "").encode()).unwrap_err();
        assert_eq!(e.errno, Errno::Canceled, "a stale writer is refused");
        assert_eq!(ObjVersion::decode(&o.call(CLASS, "read", 1, 0, &[]).unwrap()).unwrap().ver, 2);
        for (cmp, ver, ok) in [
            (VersionCmp::Gt, 1, true),
            (VersionCmp::Gt, 2, false),
            (VersionCmp::Ge, 2, true),
            (VersionCmp::Lt, 3, true),
            (VersionCmp::Le, 1, false),
        ] {
            assert_eq!(o.call(CLASS, "check_conds", 1, 0, &cond(cmp, ver, "").encode()).is_ok(), ok, "{cmp:?} {ver}");
        }
        assert!(o.call(CLASS, "check_conds", 1, 0, &cond(VersionCmp::TagEq, 0, &v1.tag).encode()).is_ok());
        assert_eq!(
            o.call(CLASS, "check_conds", 1, 0, &cond(VersionCmp::TagNe, 0, &v1.tag).encode()).unwrap_err().errno,
            Errno::Canceled
        );
        o.call(CLASS, "set", 1, 0, &ObjVersion { ver: 10, tag: "x".into() }.encode()).unwrap();
        assert_eq!(
            ObjVersion::decode(&o.call(CLASS, "read", 1, 0, &[]).unwrap()).unwrap(),
            ObjVersion { ver: 10, tag: "x".into() }
        );
    }

    #[test]
    fn read_of_missing_object_is_version_zero() {
        let mut o = MemObject::default();
        assert_eq!(ObjVersion::decode(&o.call(CLASS, "read", 1, 0, &[]).unwrap()).unwrap(), ObjVersion::default());
        assert!(!o.exists);
    }
}
