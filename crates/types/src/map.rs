//! The cluster map: pools and OSDs at one epoch.

use crate::ids::{OsdId, PgId, PoolId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A replicated pool: its name and how it is spread over OSDs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    /// Never reused, even after the pool is deleted.
    pub id: PoolId,
    /// Unique among live pools.
    pub name: String,
    /// Number of placement groups; objects map to them by stable-mod of their hash.
    pub pg_num: u32,
    /// Number of replicas.
    pub size: u32,
    /// Replicas needed to accept writes.
    pub min_size: u32,
}

/// Parameters of a pool to be created; the authority assigns the id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSpec {
    /// Pool name: 1..=255 bytes, no control characters.
    pub name: String,
    /// Placement groups, at least 1.
    pub pg_num: u32,
    /// Replicas, at least 1.
    pub size: u32,
    /// Replicas needed for writes, 1..=size.
    pub min_size: u32,
}

impl PoolSpec {
    /// The usual defaults of a fresh pool: 32 PGs, `size` replicas, `min_size = size - size/2`.
    pub fn named(name: impl Into<String>, size: u32) -> Self {
        PoolSpec { name: name.into(), pg_num: 32, size, min_size: size - size / 2 }
    }

    /// Checks the parameters, naming the first one that is wrong.
    pub fn validate(&self) -> crate::Result<()> {
        use crate::error::err;
        if self.name.is_empty() || self.name.len() > 255 {
            return Err(err::invalid(format!("pool name must be 1..=255 bytes, got {}", self.name.len())));
        }
        if self.name.chars().any(char::is_control) {
            return Err(err::invalid("pool name must not contain control characters"));
        }
        if self.pg_num == 0 || self.pg_num > 65536 {
            return Err(err::invalid(format!("pg_num must be in 1..=65536, got {}", self.pg_num)));
        }
        if self.size == 0 || self.size > 10 {
            return Err(err::invalid(format!("size must be in 1..=10, got {}", self.size)));
        }
        if self.min_size == 0 || self.min_size > self.size {
            return Err(err::invalid(format!("min_size must be in 1..=size ({}), got {}", self.size, self.min_size)));
        }
        Ok(())
    }
}

/// One OSD as the map knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsdEntry {
    /// Where clients and peers reach it.
    pub addr: String,
    /// Its failure domain.
    pub host: String,
    /// Placement weight, 16.16 fixed point (0x10000 = 1.0).
    pub weight: u32,
    /// Running and reachable.
    pub up: bool,
    /// Eligible to hold data.
    pub is_in: bool,
}

/// The newest interval a PG's primary recorded as activated, before serving writes in it:
/// peering must hear from a complete copy activated in it or later, so that a PG never goes
/// active on copies older than writes acknowledged in an interval none of them took part in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActiveInterval {
    /// The interval (the epoch its primary started it at).
    pub interval: u64,
    /// Its acting set, primary first.
    pub acting: Vec<OsdId>,
}

/// The cluster map at one epoch: every client and OSD computes placement from it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsdMap {
    /// Increases on every change.
    pub epoch: u64,
    /// The id the next created pool gets.
    pub next_pool_id: u64,
    /// Live pools by id.
    pub pools: BTreeMap<PoolId, Pool>,
    /// OSDs by id.
    pub osds: BTreeMap<OsdId, OsdEntry>,
    /// The central configuration: who (`global`, `osd`, `osd.3`, `client`…) → option → value.
    pub config: BTreeMap<String, BTreeMap<String, String>>,
    /// Per PG, the newest interval its primary recorded as activated.
    #[serde(with = "crate::encoding::map_as_pairs")]
    pub pg_active: BTreeMap<PgId, ActiveInterval>,
}

impl crate::Versioned for OsdMap {
    const NAME: &'static str = "osd map";
    const VERSION: u8 = 3;

    fn decode_older(version: u8, body: &[u8]) -> Option<crate::Result<Self>> {
        match version {
            1 => {
                Some(crate::encoding::decode_body::<v1::OsdMap>("osd map v1", body).map(|m| v2::OsdMap::from(m).into()))
            }
            2 => Some(crate::encoding::decode_body::<v2::OsdMap>("osd map v2", body).map(OsdMap::from)),
            _ => None,
        }
    }
}

/// Version 2 of the map, before activated intervals were recorded.
pub mod v2 {
    use super::{OsdEntry, Pool};
    use crate::ids::{OsdId, PoolId};
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    /// The map as version 2 stored it.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct OsdMap {
        /// Epoch.
        pub epoch: u64,
        /// Next pool id.
        pub next_pool_id: u64,
        /// Pools.
        pub pools: BTreeMap<PoolId, Pool>,
        /// OSDs.
        pub osds: BTreeMap<OsdId, OsdEntry>,
        /// Central configuration.
        pub config: BTreeMap<String, BTreeMap<String, String>>,
    }

    impl From<super::v1::OsdMap> for OsdMap {
        fn from(old: super::v1::OsdMap) -> Self {
            OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools: old.pools,
                osds: old.osds,
                config: BTreeMap::new(),
            }
        }
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(old: OsdMap) -> Self {
            super::OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools: old.pools,
                osds: old.osds,
                config: old.config,
                pg_active: BTreeMap::new(),
            }
        }
    }
}

/// Version 1 of the map, before the central configuration was added.
pub mod v1 {
    use super::{OsdEntry, Pool};
    use crate::ids::{OsdId, PoolId};
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    /// The map as version 1 stored it.
    #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct OsdMap {
        /// Epoch.
        pub epoch: u64,
        /// Next pool id.
        pub next_pool_id: u64,
        /// Pools.
        pub pools: BTreeMap<PoolId, Pool>,
        /// OSDs.
        pub osds: BTreeMap<OsdId, OsdEntry>,
    }
}

impl OsdMap {
    /// The pool with this id, or ENOENT naming it.
    pub fn pool(&self, id: PoolId) -> crate::Result<&Pool> {
        self.pools.get(&id).ok_or_else(|| crate::error::err::not_found(format!("pool {id} does not exist")))
    }

    /// The pool with this name, or ENOENT naming it.
    pub fn pool_named(&self, name: &str) -> crate::Result<&Pool> {
        self.by_name(name).ok_or_else(|| crate::error::err::not_found(format!("pool '{name}' does not exist")))
    }

    /// The pool with this name, if any.
    pub fn by_name(&self, name: &str) -> Option<&Pool> {
        self.pools.values().find(|p| p.name == name)
    }

    /// Adds a pool built from `spec`; fails if the spec is invalid or the name is taken.
    pub fn create(&mut self, spec: &PoolSpec) -> crate::Result<Pool> {
        spec.validate()?;
        if self.by_name(&spec.name).is_some() {
            return Err(crate::error::err::exists(format!("pool '{}' already exists", spec.name)));
        }
        self.next_pool_id = self.next_pool_id.max(1);
        let pool = Pool {
            id: PoolId(self.next_pool_id),
            name: spec.name.clone(),
            pg_num: spec.pg_num,
            size: spec.size,
            min_size: spec.min_size,
        };
        self.next_pool_id += 1;
        self.epoch += 1;
        self.pools.insert(pool.id, pool.clone());
        Ok(pool)
    }

    /// The central options that apply to `who` (`osd.3`): `global`, then its type
    /// (`osd`), then itself, later ones winning, as `key=value` settings.
    pub fn config_for(&self, who: &str) -> Vec<String> {
        let kind = who.split('.').next().unwrap_or(who);
        let mut layers = vec!["global", kind];
        if who != kind {
            layers.push(who);
        }
        layers
            .into_iter()
            .filter_map(|layer| self.config.get(layer))
            .flat_map(|options| options.iter().map(|(k, v)| format!("{k}={v}")))
            .collect()
    }

    /// Removes the pool with this name and returns it.
    pub fn remove(&mut self, name: &str) -> crate::Result<Pool> {
        let id = self.pool_named(name)?.id;
        self.epoch += 1;
        self.pg_active.retain(|pg, _| pg.pool != id);
        self.pools.remove(&id).ok_or_else(|| crate::error::err::not_found(format!("pool '{name}' does not exist")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_assigns_fresh_ids_and_rejects_duplicates() {
        let mut map = OsdMap::default();
        let a = map.create(&PoolSpec::named("a", 3)).unwrap();
        assert_eq!(a.min_size, 2);
        let e = map.create(&PoolSpec::named("a", 1)).unwrap_err();
        assert_eq!(e.errno, crate::Errno::Exists);
        map.remove("a").unwrap();
        let b = map.create(&PoolSpec::named("a", 1)).unwrap();
        assert_ne!(a.id, b.id, "pool ids are never reused");
        assert_eq!(map.epoch, 3);
    }

    #[test]
    fn version_1_maps_still_decode() {
        use crate::Versioned;
        let old = v1::OsdMap { epoch: 4, next_pool_id: 2, ..v1::OsdMap::default() };
        let mut bytes = vec![1u8];
        bytes.extend(postcard::to_allocvec(&old).unwrap());
        let map = OsdMap::decode(&bytes).unwrap();
        assert_eq!((map.epoch, map.next_pool_id, map.config.len()), (4, 2, 0));
        assert_eq!(OsdMap::decode(&map.encode()).unwrap(), map);
    }

    #[test]
    fn version_2_maps_still_decode_and_version_3_has_golden_bytes() {
        use crate::Versioned;
        let old = v2::OsdMap { epoch: 9, next_pool_id: 3, ..v2::OsdMap::default() };
        let mut bytes = vec![2u8];
        bytes.extend(postcard::to_allocvec(&old).unwrap());
        let map = OsdMap::decode(&bytes).unwrap();
        assert_eq!((map.epoch, map.next_pool_id, map.pg_active.len()), (9, 3, 0));
        let mut map = OsdMap { epoch: 1, ..OsdMap::default() };
        let active = ActiveInterval { interval: 7, acting: vec![OsdId(5)] };
        map.pg_active.insert(PgId { pool: PoolId(1), seed: 2 }, active);
        // Version 3, epoch 1, next pool 0, no pools, OSDs or options, one PG (1, 2) active
        // in interval 7 on [5].
        assert_eq!(map.encode(), [3, 1, 0, 0, 0, 0, 1, 1, 2, 7, 1, 5]);
        assert_eq!(OsdMap::decode(&map.encode()).unwrap(), map);
        // The monitors' Raft log keeps maps as JSON, which takes no structured keys.
        let json = serde_json::to_vec(&map).unwrap();
        assert_eq!(serde_json::from_slice::<OsdMap>(&json).unwrap(), map);
    }

    #[test]
    fn config_layers_from_global_to_the_daemon() {
        let mut map = OsdMap::default();
        map.config.entry("global".into()).or_default().insert("a".into(), "1".into());
        map.config.entry("osd".into()).or_default().insert("a".into(), "2".into());
        map.config.entry("osd.3".into()).or_default().insert("b".into(), "3".into());
        assert_eq!(map.config_for("osd.3"), vec!["a=1", "a=2", "b=3"]);
        assert_eq!(map.config_for("osd.4"), vec!["a=1", "a=2"]);
        assert_eq!(map.config_for("client.x"), vec!["a=1"]);
    }

    #[test]
    fn validate_names_the_bad_field() {
        let mut spec = PoolSpec::named("p", 3);
        spec.min_size = 4;
        assert!(spec.validate().unwrap_err().message.contains("min_size"));
        spec = PoolSpec::named("", 1);
        assert!(spec.validate().unwrap_err().message.contains("name"));
    }
}
