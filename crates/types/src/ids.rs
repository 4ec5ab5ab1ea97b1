//! Identifiers: pools, placement groups, OSDs, clients, requests and object names.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A pool's numeric id, assigned by the map authority and never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PoolId(pub u64);

/// An OSD's numeric id (`osd.N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OsdId(pub u32);

impl OsdId {
    /// No OSD: the placeholder at a position of an erasure-coded PG's acting set that no
    /// OSD serves (Ceph's `CRUSH_ITEM_NONE`), so the other shards keep their positions.
    pub const NONE: OsdId = OsdId(u32::MAX);
}

/// A placement group: a pool and the PG's seed in `0..pg_num`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PgId {
    /// The pool the PG belongs to.
    pub pool: PoolId,
    /// The PG's index within the pool, `0..pg_num`.
    pub seed: u32,
}

/// A client instance, as in Ceph's `client.4123`: names lock owners and watchers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClientId(pub u64);

/// A request id, unique per client: lets an OSD recognise a resent operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ReqId {
    /// The client that sent the request.
    pub client: ClientId,
    /// The client's transaction id, increasing per request.
    pub tid: u64,
}

/// An object's name within its pool: namespace plus name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectName {
    /// The namespace; empty is the default namespace.
    pub namespace: String,
    /// The object's name within the namespace.
    pub name: String,
}

impl ObjectName {
    /// An object name in a namespace.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectName { namespace: namespace.into(), name: name.into() }
    }
}

/// A fully qualified object: pool, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectId {
    /// The pool holding the object.
    pub pool: PoolId,
    /// Namespace and name.
    pub name: ObjectName,
}

impl fmt::Display for PoolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for OsdId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == OsdId::NONE { write!(f, "NONE") } else { write!(f, "osd.{}", self.0) }
    }
}

impl fmt::Display for PgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:x}", self.pool.0, self.seed)
    }
}

impl std::str::FromStr for PgId {
    type Err = crate::RadosError;

    /// Parses `POOL.SEED` as Ceph prints it (the seed in hex), e.g. `1.1f`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad =
            || crate::err::invalid(format!("'{s}' is not a PG id: give POOL.SEED with the seed in hex, e.g. 1.1f"));
        let (pool, seed) = s.split_once('.').ok_or_else(bad)?;
        let pool = pool.parse().map_err(|_| bad())?;
        let seed = u32::from_str_radix(seed, 16).map_err(|_| bad())?;
        Ok(PgId { pool: PoolId(pool), seed })
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client.{}", self.0)
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}", self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.pool, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_ids_parse_as_they_print() {
        let pg = PgId { pool: PoolId(3), seed: 0x1f };
        assert_eq!(pg.to_string().parse::<PgId>().unwrap(), pg);
        for bad in ["3", "x.1", "3.zz", "3.", ".1", "3.1.2"] {
            let e = bad.parse::<PgId>().unwrap_err();
            assert!(e.message.contains("not a PG id"), "{bad}: {e}");
        }
    }
}
