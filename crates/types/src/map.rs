//! The cluster map: pools and OSDs at one epoch.

use crate::auth::AuthEntity;
use crate::autoscale::{AutoscaleChange, AutoscaleMode, DEFAULT_MODE_OPTION, PoolAutoscale};
use crate::crush::{BucketType, CrushBucket, CrushChange, CrushMap, DEFAULT_RULE};
use crate::erasure::{DEFAULT_PROFILE, ErasurePoolSpec, ErasureProfile, PoolErasure};
use crate::error::{Result, err};
use crate::ids::{OsdId, PgId, PoolId};
use crate::space::{FullRatios, PoolQuota, SpaceChange, SpaceState};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A pool: its name and how it is spread over OSDs, replicated or erasure-coded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    /// Never reused, even after the pool is deleted.
    pub id: PoolId,
    /// Unique among live pools.
    pub name: String,
    /// Number of placement groups; objects map to them by stable-mod of their hash.
    pub pg_num: u32,
    /// Number of replicas (erasure-coded: shards, `k + m`).
    pub size: u32,
    /// Replicas (shards) needed to accept writes.
    pub min_size: u32,
    /// The erasure coding of an erasure-coded pool; `None`: replicated.
    #[serde(default)]
    pub erasure: Option<PoolErasure>,
    /// The CRUSH rule that places its PGs (empty only in a map read from JSON written
    /// before rules: [`OsdMap::fill_placement`] names one).
    #[serde(default)]
    pub crush_rule: String,
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
        if self.pg_num == 0 || self.pg_num > MAX_PG_NUM {
            let max = MAX_PG_NUM;
            return Err(err::invalid(format!("pg_num must be in 1..={max}, got {}", self.pg_num)));
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

/// Most PGs a pool may have.
pub const MAX_PG_NUM: u32 = 65536;

/// Where a pool's placement stands while its `pgp_num` moves towards a target
/// ([`crate::resize`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgResize {
    /// PGs are placed as if the pool had this many (`1..=pg_num`).
    pub pgp_num: u32,
    /// Where the leader monitor moves `pgp_num`, step by step.
    pub pgp_num_target: u32,
}

/// A pool whose PGs merge down to fewer ([`crate::resize`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgMerge {
    /// The `pg_num` it goes to.
    pub pg_num: u32,
    /// The epoch from which its PGs serve no client operation so their copies settle
    /// before the merge (0 while placement still brings sources to their targets).
    pub paused: u64,
}

/// A pool's last merge, for OSDs that follow it without having seen its pause
/// ([`crate::resize`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgMerged {
    /// The `pg_num` it went from.
    pub from: u32,
    /// The `pg_num` it went to.
    pub to: u32,
    /// Each PG's activation interval under the pause, by seed: no write came after it,
    /// so a copy activated in it held every write of its PG.
    pub active: BTreeMap<u32, u64>,
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
    /// Erasure-code profiles by name (`default` is there unless set otherwise).
    #[serde(default)]
    pub erasure_profiles: BTreeMap<String, ErasureProfile>,
    /// Per PG, the OSD that leads it in place of placement's primary while that one is
    /// brought up to date (Ceph's `primary_temp`): used only while it is in the acting set.
    #[serde(default, with = "crate::encoding::map_as_pairs")]
    pub primary_temp: BTreeMap<PgId, OsdId>,
    /// The CRUSH hierarchy, device classes and rules.
    #[serde(default)]
    pub crush: CrushMap,
    /// OSDs whose override weight (`osd reweight`, 16.16) is below 1.0.
    #[serde(default)]
    pub osd_reweight: BTreeMap<OsdId, u32>,
    /// Cluster flags an operator set (`osd set noout`), from [`CLUSTER_FLAGS`].
    #[serde(default)]
    pub flags: BTreeSet<String>,
    /// The ratios at which OSDs count as near full, backfill full and full.
    #[serde(default)]
    pub full_ratios: FullRatios,
    /// OSDs past the near-full ratio, with how full they are.
    #[serde(default)]
    pub osd_space: BTreeMap<OsdId, SpaceState>,
    /// Pools with a quota.
    #[serde(default)]
    pub pool_quotas: BTreeMap<PoolId, PoolQuota>,
    /// Pools that reached their quota: writes to them get EDQUOT.
    #[serde(default)]
    pub full_pools: BTreeSet<PoolId>,
    /// OSDs an operator declared lost (`osd lost`), with the epoch of the declaration:
    /// peering no longer waits for their copies.
    #[serde(default)]
    pub osd_lost: BTreeMap<OsdId, u64>,
    /// Per PG, exceptions to placement (Ceph's `pg_upmap_items`): each `(from, to)` puts
    /// the copy placement gives `from` on `to` instead, as the balancer evens PGs out.
    #[serde(default, with = "crate::encoding::map_as_pairs")]
    pub pg_upmap_items: BTreeMap<PgId, Vec<(OsdId, OsdId)>>,
    /// Pools whose `pgp_num` differs from their `pg_num` or moves towards a target (see
    /// [`crate::resize`]).
    #[serde(default)]
    pub pg_resize: BTreeMap<PoolId, PgResize>,
    /// Pools whose autoscaler settings are not the default ([`crate::autoscale`]).
    #[serde(default)]
    pub pool_autoscale: BTreeMap<PoolId, PoolAutoscale>,
    /// Client entities with keys of their own and their caps ([`crate::auth`]); only
    /// holders of the cluster secret see it (see [`OsdMap::without_keys`]).
    #[serde(default)]
    pub auth: BTreeMap<String, AuthEntity>,
    /// Pools whose PGs merge to a lower `pg_num`.
    #[serde(default)]
    pub pg_merge: BTreeMap<PoolId, PgMerge>,
    /// Each pool's last finished merge.
    #[serde(default)]
    pub pg_merged: BTreeMap<PoolId, PgMerged>,
}

/// The cluster flags `osd set` knows: `noout` (the monitor marks no down OSD out),
/// `noin` (a booting OSD that is out, or new, stays out), `nobackfill` (primaries copy no
/// PG to a new member), `norecover` (primaries bring no member's copy up to date from the
/// log; a primary's own recovery still runs, so its PGs serve), `norebalance` (a change of
/// weights or of the CRUSH tree, or a new OSD, moves no copy between OSDs that stay in:
/// the monitor keeps each where it was with upmap exceptions, for the balancer to move in
/// its steps), `pause` (OSDs serve no client operation: clients wait and resend until it
/// is unset or they time out).
pub const CLUSTER_FLAGS: [&str; 6] = ["noout", "noin", "nobackfill", "norecover", "norebalance", "pause"];

impl OsdMap {
    /// Whether cluster flag `flag` is set.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.contains(flag)
    }

    /// This map as a client entity may see it: the auth table removed.
    pub fn without_keys(mut self) -> OsdMap {
        self.auth.clear();
        self
    }
}

impl crate::Versioned for OsdMap {
    const NAME: &'static str = "osd map";
    const VERSION: u8 = 13;

    fn decode_older(version: u8, body: &[u8]) -> Option<crate::Result<Self>> {
        match version {
            12 => return Some(crate::encoding::decode_body::<v12::OsdMap>("osd map v12", body).map(OsdMap::from)),
            11 => return Some(crate::encoding::decode_body::<v11::OsdMap>("osd map v11", body).map(OsdMap::from)),
            10 => return Some(crate::encoding::decode_body::<v10::OsdMap>("osd map v10", body).map(OsdMap::from)),
            9 => return Some(crate::encoding::decode_body::<v9::OsdMap>("osd map v9", body).map(OsdMap::from)),
            8 => return Some(crate::encoding::decode_body::<v8::OsdMap>("osd map v8", body).map(OsdMap::from)),
            7 => return Some(crate::encoding::decode_body::<v7::OsdMap>("osd map v7", body).map(OsdMap::from)),
            6 => {
                return Some(
                    crate::encoding::decode_body::<v6::OsdMap>("osd map v6", body)
                        .map(|m| OsdMap::from(v7::OsdMap::from(m))),
                );
            }
            5 => return Some(crate::encoding::decode_body::<v5::OsdMap>("osd map v5", body).map(OsdMap::from)),
            _ => {}
        }
        let v4 = match version {
            1 => crate::encoding::decode_body::<v1::OsdMap>("osd map v1", body)
                .map(|m| v4::OsdMap::from(v3::OsdMap::from(v2::OsdMap::from(m)))),
            2 => crate::encoding::decode_body::<v2::OsdMap>("osd map v2", body)
                .map(|m| v4::OsdMap::from(v3::OsdMap::from(m))),
            3 => crate::encoding::decode_body::<v3::OsdMap>("osd map v3", body).map(v4::OsdMap::from),
            4 => crate::encoding::decode_body::<v4::OsdMap>("osd map v4", body),
            _ => return None,
        };
        Some(v4.map(|m| OsdMap::from(v5::OsdMap::from(m))))
    }
}

/// Version 12 of the map, before the record of each pool's last merge.
pub mod v12 {
    use super::{ActiveInterval, OsdEntry, PgMerge, PgResize, Pool};
    use crate::auth::AuthEntity;
    use crate::autoscale::PoolAutoscale;
    use crate::crush::CrushMap;
    use crate::erasure::ErasureProfile;
    use crate::ids::{OsdId, PgId, PoolId};
    use crate::space::{FullRatios, PoolQuota, SpaceState};
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// The map as version 12 stored it.
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
        /// Activated intervals.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_active: BTreeMap<PgId, ActiveInterval>,
        /// Erasure-code profiles.
        pub erasure_profiles: BTreeMap<String, ErasureProfile>,
        /// Primaries in place of placement's.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub primary_temp: BTreeMap<PgId, OsdId>,
        /// The CRUSH map.
        pub crush: CrushMap,
        /// Override weights.
        pub osd_reweight: BTreeMap<OsdId, u32>,
        /// Cluster flags.
        pub flags: BTreeSet<String>,
        /// Full ratios.
        pub full_ratios: FullRatios,
        /// OSD space states.
        pub osd_space: BTreeMap<OsdId, SpaceState>,
        /// Pool quotas.
        pub pool_quotas: BTreeMap<PoolId, PoolQuota>,
        /// Pools at their quota.
        pub full_pools: BTreeSet<PoolId>,
        /// Lost OSDs.
        pub osd_lost: BTreeMap<OsdId, u64>,
        /// Upmap exceptions.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_upmap_items: BTreeMap<PgId, Vec<(OsdId, OsdId)>>,
        /// PG count changes.
        pub pg_resize: BTreeMap<PoolId, PgResize>,
        /// Autoscaler settings.
        pub pool_autoscale: BTreeMap<PoolId, PoolAutoscale>,
        /// Client entities.
        pub auth: BTreeMap<String, AuthEntity>,
        /// Merging pools.
        pub pg_merge: BTreeMap<PoolId, PgMerge>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(old: OsdMap) -> Self {
            super::OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools: old.pools,
                osds: old.osds,
                config: old.config,
                pg_active: old.pg_active,
                erasure_profiles: old.erasure_profiles,
                primary_temp: old.primary_temp,
                crush: old.crush,
                osd_reweight: old.osd_reweight,
                flags: old.flags,
                full_ratios: old.full_ratios,
                osd_space: old.osd_space,
                pool_quotas: old.pool_quotas,
                full_pools: old.full_pools,
                osd_lost: old.osd_lost,
                pg_upmap_items: old.pg_upmap_items,
                pg_resize: old.pg_resize,
                pool_autoscale: old.pool_autoscale,
                auth: old.auth,
                pg_merge: old.pg_merge,
                pg_merged: BTreeMap::new(),
            }
        }
    }
}

/// Version 11 of the map, before the auth table.
pub mod v11 {
    use super::{ActiveInterval, OsdEntry, PgResize, Pool};
    use crate::autoscale::PoolAutoscale;
    use crate::crush::CrushMap;
    use crate::erasure::ErasureProfile;
    use crate::ids::{OsdId, PgId, PoolId};
    use crate::space::{FullRatios, PoolQuota, SpaceState};
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// The map as version 11 stored it.
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
        /// Activated intervals.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_active: BTreeMap<PgId, ActiveInterval>,
        /// Erasure-code profiles.
        pub erasure_profiles: BTreeMap<String, ErasureProfile>,
        /// Primaries in place of placement's.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub primary_temp: BTreeMap<PgId, OsdId>,
        /// The CRUSH map.
        pub crush: CrushMap,
        /// Override weights.
        pub osd_reweight: BTreeMap<OsdId, u32>,
        /// Cluster flags.
        pub flags: BTreeSet<String>,
        /// Full ratios.
        pub full_ratios: FullRatios,
        /// OSD space states.
        pub osd_space: BTreeMap<OsdId, SpaceState>,
        /// Pool quotas.
        pub pool_quotas: BTreeMap<PoolId, PoolQuota>,
        /// Pools at their quota.
        pub full_pools: BTreeSet<PoolId>,
        /// Lost OSDs.
        pub osd_lost: BTreeMap<OsdId, u64>,
        /// Upmap exceptions.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_upmap_items: BTreeMap<PgId, Vec<(OsdId, OsdId)>>,
        /// PG count changes.
        pub pg_resize: BTreeMap<PoolId, PgResize>,
        /// Autoscaler settings.
        pub pool_autoscale: BTreeMap<PoolId, PoolAutoscale>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(old: OsdMap) -> Self {
            super::OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools: old.pools,
                osds: old.osds,
                config: old.config,
                pg_active: old.pg_active,
                erasure_profiles: old.erasure_profiles,
                primary_temp: old.primary_temp,
                crush: old.crush,
                osd_reweight: old.osd_reweight,
                flags: old.flags,
                full_ratios: old.full_ratios,
                osd_space: old.osd_space,
                pool_quotas: old.pool_quotas,
                full_pools: old.full_pools,
                osd_lost: old.osd_lost,
                pg_upmap_items: old.pg_upmap_items,
                pg_resize: old.pg_resize,
                pool_autoscale: old.pool_autoscale,
                auth: BTreeMap::new(),
                pg_merge: BTreeMap::new(),
                pg_merged: BTreeMap::new(),
            }
        }
    }
}

/// Version 10 of the map, before autoscaler settings.
pub mod v10 {
    use super::{ActiveInterval, OsdEntry, PgResize, Pool};
    use crate::crush::CrushMap;
    use crate::erasure::ErasureProfile;
    use crate::ids::{OsdId, PgId, PoolId};
    use crate::space::{FullRatios, PoolQuota, SpaceState};
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// The map as version 10 stored it.
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
        /// Activated intervals.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_active: BTreeMap<PgId, ActiveInterval>,
        /// Erasure-code profiles.
        pub erasure_profiles: BTreeMap<String, ErasureProfile>,
        /// Primaries in place of placement's.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub primary_temp: BTreeMap<PgId, OsdId>,
        /// The CRUSH map.
        pub crush: CrushMap,
        /// Override weights.
        pub osd_reweight: BTreeMap<OsdId, u32>,
        /// Cluster flags.
        pub flags: BTreeSet<String>,
        /// Full ratios.
        pub full_ratios: FullRatios,
        /// OSD space states.
        pub osd_space: BTreeMap<OsdId, SpaceState>,
        /// Pool quotas.
        pub pool_quotas: BTreeMap<PoolId, PoolQuota>,
        /// Pools at their quota.
        pub full_pools: BTreeSet<PoolId>,
        /// Lost OSDs.
        pub osd_lost: BTreeMap<OsdId, u64>,
        /// Upmap exceptions.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_upmap_items: BTreeMap<PgId, Vec<(OsdId, OsdId)>>,
        /// PG count changes.
        pub pg_resize: BTreeMap<PoolId, PgResize>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(old: OsdMap) -> Self {
            super::OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools: old.pools,
                osds: old.osds,
                config: old.config,
                pg_active: old.pg_active,
                erasure_profiles: old.erasure_profiles,
                primary_temp: old.primary_temp,
                crush: old.crush,
                osd_reweight: old.osd_reweight,
                flags: old.flags,
                full_ratios: old.full_ratios,
                osd_space: old.osd_space,
                pool_quotas: old.pool_quotas,
                full_pools: old.full_pools,
                osd_lost: old.osd_lost,
                pg_upmap_items: old.pg_upmap_items,
                pg_resize: old.pg_resize,
                pool_autoscale: BTreeMap::new(),
                auth: BTreeMap::new(),
                pg_merge: BTreeMap::new(),
                pg_merged: BTreeMap::new(),
            }
        }
    }
}

/// Version 9 of the map, before PG count changes.
pub mod v9 {
    use super::{ActiveInterval, OsdEntry, Pool};
    use crate::crush::CrushMap;
    use crate::erasure::ErasureProfile;
    use crate::ids::{OsdId, PgId, PoolId};
    use crate::space::{FullRatios, PoolQuota, SpaceState};
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// The map as version 9 stored it.
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
        /// Activated intervals.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_active: BTreeMap<PgId, ActiveInterval>,
        /// Erasure-code profiles.
        pub erasure_profiles: BTreeMap<String, ErasureProfile>,
        /// Primaries in place of placement's.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub primary_temp: BTreeMap<PgId, OsdId>,
        /// The CRUSH map.
        pub crush: CrushMap,
        /// Override weights.
        pub osd_reweight: BTreeMap<OsdId, u32>,
        /// Cluster flags.
        pub flags: BTreeSet<String>,
        /// Full ratios.
        pub full_ratios: FullRatios,
        /// OSD space states.
        pub osd_space: BTreeMap<OsdId, SpaceState>,
        /// Pool quotas.
        pub pool_quotas: BTreeMap<PoolId, PoolQuota>,
        /// Pools at their quota.
        pub full_pools: BTreeSet<PoolId>,
        /// Lost OSDs.
        pub osd_lost: BTreeMap<OsdId, u64>,
        /// Upmap exceptions.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_upmap_items: BTreeMap<PgId, Vec<(OsdId, OsdId)>>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(old: OsdMap) -> Self {
            super::OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools: old.pools,
                osds: old.osds,
                config: old.config,
                pg_active: old.pg_active,
                erasure_profiles: old.erasure_profiles,
                primary_temp: old.primary_temp,
                crush: old.crush,
                osd_reweight: old.osd_reweight,
                flags: old.flags,
                full_ratios: old.full_ratios,
                osd_space: old.osd_space,
                pool_quotas: old.pool_quotas,
                full_pools: old.full_pools,
                osd_lost: old.osd_lost,
                pg_upmap_items: old.pg_upmap_items,
                ..Default::default()
            }
        }
    }
}

/// Version 8 of the map, before lost OSDs and upmap exceptions.
pub mod v8 {
    use super::{ActiveInterval, OsdEntry, Pool};
    use crate::crush::CrushMap;
    use crate::erasure::ErasureProfile;
    use crate::ids::{OsdId, PgId, PoolId};
    use crate::space::{FullRatios, PoolQuota, SpaceState};
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// The map as version 8 stored it.
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
        /// Activated intervals.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_active: BTreeMap<PgId, ActiveInterval>,
        /// Erasure-code profiles.
        pub erasure_profiles: BTreeMap<String, ErasureProfile>,
        /// Primaries in place of placement's.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub primary_temp: BTreeMap<PgId, OsdId>,
        /// The CRUSH map.
        pub crush: CrushMap,
        /// Override weights.
        pub osd_reweight: BTreeMap<OsdId, u32>,
        /// Cluster flags.
        pub flags: BTreeSet<String>,
        /// Full ratios.
        pub full_ratios: FullRatios,
        /// OSD space states.
        pub osd_space: BTreeMap<OsdId, SpaceState>,
        /// Pool quotas.
        pub pool_quotas: BTreeMap<PoolId, PoolQuota>,
        /// Pools at their quota.
        pub full_pools: BTreeSet<PoolId>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(old: OsdMap) -> Self {
            super::OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools: old.pools,
                osds: old.osds,
                config: old.config,
                pg_active: old.pg_active,
                erasure_profiles: old.erasure_profiles,
                primary_temp: old.primary_temp,
                crush: old.crush,
                osd_reweight: old.osd_reweight,
                flags: old.flags,
                full_ratios: old.full_ratios,
                osd_space: old.osd_space,
                pool_quotas: old.pool_quotas,
                full_pools: old.full_pools,
                ..Default::default()
            }
        }
    }
}

/// Version 7 of the map, before full ratios, OSD space states and pool quotas.
pub mod v7 {
    use super::{ActiveInterval, OsdEntry, Pool};
    use crate::crush::CrushMap;
    use crate::erasure::ErasureProfile;
    use crate::ids::{OsdId, PgId, PoolId};
    use serde::{Deserialize, Serialize};
    use std::collections::{BTreeMap, BTreeSet};

    /// The map as version 7 stored it.
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
        /// Activated intervals.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_active: BTreeMap<PgId, ActiveInterval>,
        /// Erasure-code profiles.
        pub erasure_profiles: BTreeMap<String, ErasureProfile>,
        /// Primaries in place of placement's.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub primary_temp: BTreeMap<PgId, OsdId>,
        /// The CRUSH map.
        pub crush: CrushMap,
        /// Override weights.
        pub osd_reweight: BTreeMap<OsdId, u32>,
        /// Cluster flags.
        pub flags: BTreeSet<String>,
    }

    impl From<OsdMap> for super::OsdMap {
        fn from(old: OsdMap) -> Self {
            super::OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools: old.pools,
                osds: old.osds,
                config: old.config,
                pg_active: old.pg_active,
                erasure_profiles: old.erasure_profiles,
                primary_temp: old.primary_temp,
                crush: old.crush,
                osd_reweight: old.osd_reweight,
                flags: old.flags,
                ..Default::default()
            }
        }
    }
}

/// Version 6 of the map, before cluster flags.
pub mod v6 {
    use super::{ActiveInterval, OsdEntry, Pool};
    use crate::crush::CrushMap;
    use crate::erasure::ErasureProfile;
    use crate::ids::{OsdId, PgId, PoolId};
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    /// The map as version 6 stored it.
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
        /// Activated intervals.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_active: BTreeMap<PgId, ActiveInterval>,
        /// Erasure-code profiles.
        pub erasure_profiles: BTreeMap<String, ErasureProfile>,
        /// Primaries in place of placement's.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub primary_temp: BTreeMap<PgId, OsdId>,
        /// The CRUSH map.
        pub crush: CrushMap,
        /// Override weights.
        pub osd_reweight: BTreeMap<OsdId, u32>,
    }

    impl From<OsdMap> for super::v7::OsdMap {
        fn from(old: OsdMap) -> Self {
            super::v7::OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools: old.pools,
                osds: old.osds,
                config: old.config,
                pg_active: old.pg_active,
                erasure_profiles: old.erasure_profiles,
                primary_temp: old.primary_temp,
                crush: old.crush,
                osd_reweight: old.osd_reweight,
                flags: Default::default(),
            }
        }
    }
}

/// Version 5 of the map, before the CRUSH hierarchy, rules and override weights.
pub mod v5 {
    use super::ActiveInterval;
    use super::OsdEntry;
    use crate::crush::BucketType;
    use crate::ids::{OsdId, PgId, PoolId};
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    /// An erasure-code profile as versions 4 and 5 stored it (no CRUSH root or class).
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct ErasureProfile {
        /// Data shards.
        pub k: u32,
        /// Parity shards.
        pub m: u32,
        /// Bytes of a stripe on one shard.
        pub stripe_unit: u32,
        /// Host or OSD.
        pub failure_domain: BucketType,
    }

    impl From<ErasureProfile> for crate::erasure::ErasureProfile {
        fn from(old: ErasureProfile) -> Self {
            crate::erasure::ErasureProfile {
                k: old.k,
                m: old.m,
                stripe_unit: old.stripe_unit,
                failure_domain: old.failure_domain,
                ..Default::default()
            }
        }
    }

    /// A pool's erasure coding as versions 4 and 5 stored it.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct PoolErasure {
        /// Profile name.
        pub profile: String,
        /// The code.
        pub code: ErasureProfile,
        /// Partial overwrites allowed.
        pub allow_overwrites: bool,
    }

    /// A pool as versions 4 and 5 stored it (no CRUSH rule).
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Pool {
        /// Id.
        pub id: PoolId,
        /// Name.
        pub name: String,
        /// PGs.
        pub pg_num: u32,
        /// Replicas or shards.
        pub size: u32,
        /// Replicas for writes.
        pub min_size: u32,
        /// Erasure coding.
        pub erasure: Option<PoolErasure>,
    }

    /// The map as version 5 stored it.
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
        /// Activated intervals.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_active: BTreeMap<PgId, ActiveInterval>,
        /// Erasure-code profiles.
        pub erasure_profiles: BTreeMap<String, ErasureProfile>,
        /// Primaries in place of placement's.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub primary_temp: BTreeMap<PgId, OsdId>,
    }

    impl From<OsdMap> for super::OsdMap {
        /// Every pool gets the rule its placement followed (replicated: `replicated_rule`;
        /// erasure-coded: a rule of its own with the profile's failure domain) and every
        /// host the bucket id placement hashed, so nothing moves.
        fn from(old: OsdMap) -> Self {
            let pools = old
                .pools
                .into_iter()
                .map(|(id, p)| {
                    let erasure = p.erasure.map(|e| crate::erasure::PoolErasure {
                        profile: e.profile,
                        code: e.code.into(),
                        allow_overwrites: e.allow_overwrites,
                    });
                    let pool = super::Pool {
                        id: p.id,
                        name: p.name,
                        pg_num: p.pg_num,
                        size: p.size,
                        min_size: p.min_size,
                        erasure,
                        crush_rule: String::new(),
                    };
                    (id, pool)
                })
                .collect();
            let mut map = super::OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools,
                osds: old.osds,
                config: old.config,
                pg_active: old.pg_active,
                erasure_profiles: old.erasure_profiles.into_iter().map(|(n, p)| (n, p.into())).collect(),
                primary_temp: old.primary_temp,
                crush: Default::default(),
                osd_reweight: BTreeMap::new(),
                ..Default::default()
            };
            map.fill_placement();
            map
        }
    }
}

/// Version 4 of the map, before `primary_temp`.
pub mod v4 {
    use super::v5::{ErasureProfile, Pool};
    use super::{ActiveInterval, OsdEntry};
    use crate::ids::{OsdId, PgId, PoolId};
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    /// The map as version 4 stored it.
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
        /// Activated intervals.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_active: BTreeMap<PgId, ActiveInterval>,
        /// Erasure-code profiles.
        pub erasure_profiles: BTreeMap<String, ErasureProfile>,
    }

    impl From<OsdMap> for super::v5::OsdMap {
        fn from(old: OsdMap) -> Self {
            super::v5::OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools: old.pools,
                osds: old.osds,
                config: old.config,
                pg_active: old.pg_active,
                erasure_profiles: old.erasure_profiles,
                primary_temp: BTreeMap::new(),
            }
        }
    }
}

/// Version 3 of the map, before erasure-coded pools.
pub mod v3 {
    use super::{ActiveInterval, OsdEntry};
    use crate::ids::{OsdId, PgId, PoolId};
    use serde::{Deserialize, Serialize};
    use std::collections::BTreeMap;

    /// A pool as versions 1 to 3 stored it (always replicated).
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Pool {
        /// Id.
        pub id: PoolId,
        /// Name.
        pub name: String,
        /// PGs.
        pub pg_num: u32,
        /// Replicas.
        pub size: u32,
        /// Replicas for writes.
        pub min_size: u32,
    }

    /// The map as version 3 stored it.
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
        /// Activated intervals.
        #[serde(with = "crate::encoding::map_as_pairs")]
        pub pg_active: BTreeMap<PgId, ActiveInterval>,
    }

    impl From<OsdMap> for super::v4::OsdMap {
        fn from(old: OsdMap) -> Self {
            let pools = old
                .pools
                .into_iter()
                .map(|(id, p)| {
                    let pool = super::v5::Pool {
                        id: p.id,
                        name: p.name,
                        pg_num: p.pg_num,
                        size: p.size,
                        min_size: p.min_size,
                        erasure: None,
                    };
                    (id, pool)
                })
                .collect();
            super::v4::OsdMap {
                epoch: old.epoch,
                next_pool_id: old.next_pool_id,
                pools,
                osds: old.osds,
                config: old.config,
                pg_active: old.pg_active,
                erasure_profiles: BTreeMap::new(),
            }
        }
    }
}

/// Version 2 of the map, before activated intervals were recorded.
pub mod v2 {
    use super::OsdEntry;
    use super::v3::Pool;
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

    impl From<OsdMap> for super::v3::OsdMap {
        fn from(old: OsdMap) -> Self {
            super::v3::OsdMap {
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
    use super::OsdEntry;
    use super::v3::Pool;
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
        Ok(self.add_pool(spec, None, DEFAULT_RULE.to_owned()))
    }

    /// Adds an erasure-coded pool built from `spec` and the profile it names.
    pub fn create_erasure(&mut self, spec: &ErasurePoolSpec) -> crate::Result<Pool> {
        let code = self.erasure_profile(&spec.profile)?;
        let size = code.k + code.m;
        let min_size = spec.min_size.unwrap_or_else(|| code.default_min_size());
        if !(code.k..=size).contains(&min_size) {
            return Err(crate::error::err::invalid(format!(
                "min_size of a {}+{} pool must be in {}..={size}, got {min_size}",
                code.k, code.m, code.k
            )));
        }
        let replicated = PoolSpec { name: spec.name.clone(), pg_num: spec.pg_num, size, min_size };
        PoolSpec { size: 1, min_size: 1, ..replicated.clone() }.validate()?;
        if self.by_name(&spec.name).is_some() {
            return Err(crate::error::err::exists(format!("pool '{}' already exists", spec.name)));
        }
        let mut crush = self.crush_view();
        crush.bucket(&code.crush_root)?;
        let rule = crush.add_erasure_rule(&spec.name, &code);
        self.crush = crush;
        let erasure = PoolErasure { profile: spec.profile.clone(), code, allow_overwrites: spec.allow_overwrites };
        Ok(self.add_pool(&replicated, Some(erasure), rule))
    }

    /// The CRUSH map with a bucket for every host an OSD names (see
    /// [`CrushMap::add_hosts_of`]): what placement reads.
    pub fn crush_view(&self) -> CrushMap {
        let mut crush = self.crush.clone();
        crush.add_hosts_of(self.osds.values().map(|o| o.host.as_str()));
        crush
    }

    /// Completes a map from before CRUSH rules: hosts get buckets, and each pool without a
    /// rule gets the one its placement followed.
    pub fn fill_placement(&mut self) {
        let mut crush = self.crush_view();
        for pool in self.pools.values_mut().filter(|p| p.crush_rule.is_empty()) {
            pool.crush_rule = match &pool.erasure {
                Some(erasure) => crush.add_erasure_rule(&pool.name, &erasure.code),
                None => DEFAULT_RULE.to_owned(),
            };
        }
        self.crush = crush;
    }

    fn add_pool(&mut self, spec: &PoolSpec, erasure: Option<PoolErasure>, crush_rule: String) -> Pool {
        self.next_pool_id = self.next_pool_id.max(1);
        let pool = Pool {
            id: PoolId(self.next_pool_id),
            name: spec.name.clone(),
            pg_num: spec.pg_num,
            size: spec.size,
            min_size: spec.min_size,
            erasure,
            crush_rule,
        };
        self.next_pool_id += 1;
        self.epoch += 1;
        self.pools.insert(pool.id, pool.clone());
        let mode = self.default_autoscale_mode();
        if mode != AutoscaleMode::default() {
            self.pool_autoscale.insert(pool.id, PoolAutoscale { mode, target_size_ratio: 0 });
        }
        pool
    }

    /// The erasure-code profile `name` (`default` unless set otherwise), or ENOENT.
    pub fn erasure_profile(&self, name: &str) -> crate::Result<ErasureProfile> {
        match self.erasure_profiles.get(name) {
            Some(profile) => Ok(profile.clone()),
            None if name == DEFAULT_PROFILE => Ok(ErasureProfile::default()),
            None => Err(crate::error::err::not_found(format!("erasure-code profile '{name}' does not exist"))),
        }
    }

    /// Every profile by name, `default` included.
    pub fn erasure_profile_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.erasure_profiles.keys().cloned().collect();
        if !names.iter().any(|n| n == DEFAULT_PROFILE) {
            names.push(DEFAULT_PROFILE.to_owned());
            names.sort();
        }
        names
    }

    /// Sets profile `name`. Changing an existing profile needs `force` (pools made with it
    /// keep their own copy, so their layout never changes).
    pub fn set_erasure_profile(&mut self, name: &str, profile: ErasureProfile, force: bool) -> crate::Result<()> {
        profile.validate()?;
        if name.is_empty() || name.len() > 255 || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(crate::error::err::invalid(format!("invalid erasure-code profile name '{name}'")));
        }
        match self.erasure_profile(name) {
            Ok(existing) if existing == profile => return Ok(()),
            Ok(_) if !force => {
                return Err(crate::error::err::exists(format!(
                    "erasure-code profile '{name}' exists with other settings; add --force to override it"
                )));
            }
            _ => {}
        }
        self.erasure_profiles.insert(name.to_owned(), profile);
        self.epoch += 1;
        Ok(())
    }

    /// Removes profile `name`, unless a pool uses it.
    pub fn remove_erasure_profile(&mut self, name: &str) -> crate::Result<()> {
        if let Some(pool) = self.pools.values().find(|p| p.erasure.as_ref().is_some_and(|e| e.profile == name)) {
            return Err(crate::error::err::busy(format!(
                "erasure-code profile '{name}' is in use by pool '{}'",
                pool.name
            )));
        }
        self.erasure_profile(name)?;
        self.erasure_profiles.remove(name);
        self.epoch += 1;
        Ok(())
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
        self.primary_temp.retain(|pg, _| pg.pool != id);
        self.pg_upmap_items.retain(|pg, _| pg.pool != id);
        self.pg_resize.remove(&id);
        self.pg_merge.remove(&id);
        self.pg_merged.remove(&id);
        self.pool_autoscale.remove(&id);
        self.pool_quotas.remove(&id);
        self.full_pools.remove(&id);
        self.pools.remove(&id).ok_or_else(|| crate::error::err::not_found(format!("pool '{name}' does not exist")))
    }

    /// Sets `pg`'s upmap exceptions (`osd pg-upmap-items`; none: removes them): each
    /// `(from, to)` moves a copy between two distinct OSDs, `to` existing, each OSD named
    /// once.
    pub fn set_upmap_items(&mut self, pg: PgId, items: Vec<(OsdId, OsdId)>) -> crate::Result<()> {
        let pool = self.pools.get(&pg.pool).ok_or_else(|| err::not_found(format!("pg {pg}: no pool {}", pg.pool.0)))?;
        if pg.seed >= pool.pg_num {
            return Err(err::not_found(format!(
                "pg {pg} does not exist: pool '{}' has {} PGs",
                pool.name, pool.pg_num
            )));
        }
        let mut named = BTreeSet::new();
        for (from, to) in &items {
            if from == to || !named.insert(*from) || !named.insert(*to) {
                return Err(err::invalid(format!("pg {pg}: upmap items must name each OSD once ({from} → {to})")));
            }
            if !self.osds.contains_key(to) {
                return Err(err::not_found(format!("pg {pg}: {to} does not exist")));
            }
        }
        match items.is_empty() {
            true => self.pg_upmap_items.remove(&pg),
            false => self.pg_upmap_items.insert(pg, items),
        };
        Ok(())
    }

    /// Why a write to `pool` on OSDs `acting` is refused, if it is: the pool reached its
    /// quota (EDQUOT) or one of the OSDs is full (ENOSPC). Deletes are the caller's to let
    /// through.
    pub fn write_refusal(&self, pool: PoolId, acting: &[OsdId]) -> Option<crate::RadosError> {
        if self.full_pools.contains(&pool) {
            let name = self.pools.get(&pool).map_or("?", |p| p.name.as_str());
            let quota = self.pool_quotas.get(&pool).copied().unwrap_or_default();
            return Some(err::quota_exceeded(format!(
                "pool '{name}' reached its quota (max_objects {}, max_bytes {}): delete objects or raise it",
                quota.max_objects, quota.max_bytes
            )));
        }
        let full = acting.iter().find(|osd| self.osd_space.get(osd) == Some(&SpaceState::Full))?;
        Some(err::no_space(format!(
            "{full} is full (past the full ratio {}): delete data, add OSDs or raise the ratio",
            f64::from(self.full_ratios.full) / f64::from(crate::space::WHOLE)
        )))
    }
}

impl AutoscaleChange {
    /// Applies the change to `map` (bumping its epoch); fails naming what is wrong.
    pub fn apply(&self, map: &mut OsdMap) -> Result<()> {
        let id = map.pool_named(&self.pool)?.id;
        if self.target_size_ratio.is_some_and(|r| r > crate::space::WHOLE) {
            return Err(err::invalid("target_size_ratio is between 0 and 1"));
        }
        let mut settings = map.autoscale(id);
        settings.mode = self.mode.unwrap_or(settings.mode);
        settings.target_size_ratio = self.target_size_ratio.unwrap_or(settings.target_size_ratio);
        match settings == PoolAutoscale::default() {
            true => map.pool_autoscale.remove(&id),
            false => map.pool_autoscale.insert(id, settings),
        };
        map.epoch += 1;
        Ok(())
    }
}

impl OsdMap {
    /// Pool `pool`'s autoscaler settings.
    pub fn autoscale(&self, pool: PoolId) -> PoolAutoscale {
        self.pool_autoscale.get(&pool).copied().unwrap_or_default()
    }

    /// The mode new pools get: [`DEFAULT_MODE_OPTION`] as the central configuration sets
    /// it for monitors (`on` when unset or not a mode).
    pub fn default_autoscale_mode(&self) -> AutoscaleMode {
        let setting = ["mon", "global"].iter().find_map(|who| self.config.get(*who)?.get(DEFAULT_MODE_OPTION));
        setting.and_then(|name| AutoscaleMode::parse(name).ok()).unwrap_or_default()
    }
}

impl SpaceChange {
    /// Applies the change to `map` (its epoch is the caller's to bump); fails naming what
    /// is wrong, leaving the map as it was.
    pub fn apply(&self, map: &mut OsdMap) -> Result<()> {
        match self {
            SpaceChange::SetRatio { state, basis_points } => {
                map.full_ratios = map.full_ratios.with(*state, *basis_points)?
            }
            SpaceChange::OsdState { osd, state } => {
                match state {
                    Some(state) if map.osds.contains_key(osd) => map.osd_space.insert(*osd, *state),
                    _ => map.osd_space.remove(osd),
                };
            }
            SpaceChange::PoolQuota { pool, max_objects, max_bytes } => {
                let id = map.pool_named(pool)?.id;
                let mut quota = map.pool_quotas.get(&id).copied().unwrap_or_default();
                quota.max_objects = max_objects.unwrap_or(quota.max_objects);
                quota.max_bytes = max_bytes.unwrap_or(quota.max_bytes);
                if quota.is_set() {
                    map.pool_quotas.insert(id, quota);
                } else {
                    map.pool_quotas.remove(&id);
                    map.full_pools.remove(&id);
                }
            }
            SpaceChange::PoolFull { pool, full } => {
                match *full && map.pools.contains_key(pool) && map.pool_quotas.contains_key(pool) {
                    true => map.full_pools.insert(*pool),
                    false => map.full_pools.remove(pool),
                };
            }
        }
        Ok(())
    }
}

/// Names buckets, classes and rules may take: 1..=255 bytes, no whitespace or control
/// characters, not `osd.N`.
fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 255 || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(err::invalid(format!("{what} name '{name}' must be 1..=255 bytes without spaces")));
    }
    if name.starts_with("osd.") {
        return Err(err::invalid(format!("{what} name '{name}' is reserved for OSDs")));
    }
    Ok(())
}

impl CrushChange {
    /// Applies the change to `map` (its epoch is the caller's to bump); fails naming what
    /// is wrong, leaving the map as it was.
    pub fn apply(&self, map: &mut OsdMap) -> Result<()> {
        let mut crush = map.crush.clone();
        crush.add_hosts_of(map.osds.values().map(|o| o.host.as_str()));
        match self {
            CrushChange::AddBucket { name, kind, parent } => {
                check_name("bucket", name)?;
                if *kind == BucketType::Osd {
                    return Err(err::invalid("OSDs are not buckets: an OSD joins the host it runs on"));
                }
                if crush.buckets.contains_key(name) {
                    return Err(err::exists(format!("CRUSH bucket '{name}' already exists")));
                }
                if let Some(parent) = parent {
                    crush.check_parent(name, *kind, parent)?;
                }
                let bucket =
                    CrushBucket { id: crush.next_id(), kind: *kind, parents: parent.iter().cloned().collect() };
                crush.buckets.insert(name.clone(), bucket);
            }
            CrushChange::Move { name, parent } | CrushChange::Link { name, parent } => {
                let kind = crush.bucket(name)?.kind;
                crush.check_parent(name, kind, parent)?;
                let parents = &mut crush.bucket_mut(name)?.parents;
                if matches!(self, CrushChange::Move { .. }) {
                    parents.clear();
                }
                if !parents.contains(parent) {
                    parents.push(parent.clone());
                }
            }
            CrushChange::Unlink { name, parent } => {
                let parents = &mut crush.bucket_mut(name)?.parents;
                let at = parents
                    .iter()
                    .position(|p| p == parent)
                    .ok_or_else(|| err::not_found(format!("CRUSH bucket '{name}' is not in '{parent}'")))?;
                parents.remove(at);
            }
            CrushChange::Remove(name) => {
                crush.bucket(name)?;
                if let Some(child) = crush.buckets.iter().find(|(_, b)| b.parents.contains(name)) {
                    return Err(err::busy(format!("CRUSH bucket '{name}' is not empty: it holds '{}'", child.0)));
                }
                if let Some((id, _)) = map.osds.iter().find(|(_, o)| o.host == *name) {
                    return Err(err::busy(format!("CRUSH bucket '{name}' is not empty: it holds {id}")));
                }
                let rules = crush.rule_names();
                if let Some(rule) = rules.iter().find(|r| crush.rule(r).is_ok_and(|r| r.root == *name)) {
                    return Err(err::busy(format!("CRUSH bucket '{name}' is the root of rule '{rule}'")));
                }
                crush.buckets.remove(name);
            }
            CrushChange::SetDeviceClass { osds, class } => {
                check_name("device class", class)?;
                for osd in osds {
                    known_osd(map, *osd)?;
                    crush.device_classes.insert(*osd, class.clone());
                }
            }
            CrushChange::RemoveDeviceClass(osds) => {
                for osd in osds {
                    known_osd(map, *osd)?;
                    crush.device_classes.remove(osd);
                }
            }
            CrushChange::CreateRule { name, rule } => {
                check_name("rule", name)?;
                crush.bucket(&rule.root)?;
                if let Some(class) = &rule.device_class {
                    check_name("device class", class)?;
                }
                match crush.rule(name) {
                    Ok(existing) if existing == *rule => {}
                    Ok(_) => return Err(err::exists(format!("CRUSH rule '{name}' exists with other settings"))),
                    Err(_) => {
                        crush.rules.insert(name.clone(), rule.clone());
                    }
                }
            }
            CrushChange::RemoveRule(name) => {
                crush.rule(name)?;
                if let Some(pool) = map.pools.values().find(|p| p.crush_rule == *name) {
                    return Err(err::busy(format!("CRUSH rule '{name}' is in use by pool '{}'", pool.name)));
                }
                if name == DEFAULT_RULE {
                    return Err(err::busy(format!("CRUSH rule '{name}' is the one new pools get")));
                }
                crush.rules.remove(name);
            }
            CrushChange::SetPoolRule { pool, rule } => {
                crush.rule(rule)?;
                let id = map.pool_named(pool)?.id;
                if let Some(pool) = map.pools.get_mut(&id) {
                    pool.crush_rule = rule.clone();
                }
            }
            CrushChange::Reweight { osd, reweight } => {
                known_osd(map, *osd)?;
                if *reweight > 0x10000 {
                    return Err(err::invalid(format!("reweight {} is above 1.0", f64::from(*reweight) / 65536.0)));
                }
                if *reweight == 0x10000 {
                    map.osd_reweight.remove(osd);
                } else {
                    map.osd_reweight.insert(*osd, *reweight);
                }
            }
        }
        map.crush = crush;
        Ok(())
    }
}

fn known_osd(map: &OsdMap, osd: OsdId) -> Result<()> {
    map.osds.get(&osd).map(|_| ()).ok_or_else(|| err::not_found(format!("{osd} does not exist")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Cap, Caps};

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
    fn version_2_and_3_maps_still_decode() {
        use crate::Versioned;
        let old = v2::OsdMap { epoch: 9, next_pool_id: 3, ..v2::OsdMap::default() };
        let mut bytes = vec![2u8];
        bytes.extend(postcard::to_allocvec(&old).unwrap());
        let map = OsdMap::decode(&bytes).unwrap();
        assert_eq!((map.epoch, map.next_pool_id, map.pg_active.len()), (9, 3, 0));
        // Version 3's golden bytes: epoch 1, next pool 0, no pools, OSDs or options, one PG
        // (1, 2) active in interval 7 on [5].
        let map = OsdMap::decode(&[3, 1, 0, 0, 0, 0, 1, 1, 2, 7, 1, 5]).unwrap();
        let active = ActiveInterval { interval: 7, acting: vec![OsdId(5)] };
        assert_eq!(map.pg_active, BTreeMap::from([(PgId { pool: PoolId(1), seed: 2 }, active)]));
        assert!(map.erasure_profiles.is_empty());
        let mut old = v3::OsdMap::default();
        let pool = v3::Pool { id: PoolId(1), name: "p".into(), pg_num: 8, size: 3, min_size: 2 };
        old.pools.insert(PoolId(1), pool);
        let mut bytes = vec![3u8];
        bytes.extend(postcard::to_allocvec(&old).unwrap());
        let map = OsdMap::decode(&bytes).unwrap();
        assert_eq!((map.pools[&PoolId(1)].size, map.pools[&PoolId(1)].erasure.is_none()), (3, true));
    }

    #[test]
    fn version_13_has_golden_bytes() {
        use crate::Versioned;
        let mut map = OsdMap { epoch: 1, ..OsdMap::default() };
        let profile = ErasureProfile { k: 4, m: 2, stripe_unit: 4096, ..ErasureProfile::default() };
        map.set_erasure_profile("p42", profile, false).unwrap();
        let spec = ErasurePoolSpec {
            name: "ec".into(),
            pg_num: 1,
            profile: "p42".into(),
            min_size: None,
            allow_overwrites: true,
        };
        map.create_erasure(&spec).unwrap();
        map.primary_temp.insert(PgId { pool: PoolId(1), seed: 0 }, OsdId(3));
        // Version 6, epoch 3, next pool 2, one pool: 1 → id 1, "ec", 1 PG, size 6, min_size
        // 5, erasure: Some("p42", 4+2, stripe unit 4096 (varint 0x80 0x20), host, root
        // "default", no class; overwrites), rule "ec"; no OSDs, options or activations; one
        // profile "p42"; PG 1.0 led by osd.3; CRUSH: bucket "default" (id -1 zigzagged to 1,
        // Root (6), no parents), rule "ec" (root "default", host, no class), no classes; no
        // override weights.
        let code = |root: &[u8]| [&[4, 2, 0x80, 0x20, 0][..], root].concat();
        let root: &[u8] = &[7, b'd', b'e', b'f', b'a', b'u', b'l', b't', 0];
        let pool = |code: &[u8], rule: &[u8]| {
            [&[1, 1, 1, 2, b'e', b'c', 1, 6, 5, 1, 3, b'p', b'4', b'2'][..], code, &[1], rule].concat()
        };
        let profiles = |code: &[u8]| [&[1, 3, b'p', b'4', b'2'][..], code].concat();
        let crush = [&[1, 7, b'd', b'e', b'f', b'a', b'u', b'l', b't', 1, 6, 0, 1, 2, b'e', b'c'][..], root, &[0, 0]];
        let v6: Vec<u8> = [
            &[6, 3, 2][..],
            &pool(&code(root), &[2, b'e', b'c']),
            &[0, 0, 0],
            &profiles(&code(root)),
            &[1, 1, 0, 3],
            &crush.concat(),
            &[0],
        ]
        .concat();
        // Version 7 ended with the cluster flags: here `noout`.
        let mut flagged = map.clone();
        flagged.flags.insert("noout".into());
        let v7: Vec<u8> = [&[7][..], &v6[1..], &[1, 5, b'n', b'o', b'o', b'u', b't']].concat();
        assert_eq!(OsdMap::decode(&v7).unwrap(), flagged);
        // Version 8 ends with the full ratios (8,500, 9,000, 9,500 as varints), the OSDs'
        // space states (osd.3 full: 2), the pool quotas (pool 1: 10 objects, no byte limit)
        // and the pools at their quota (pool 1).
        let ratios = [0xb4, 0x42, 0xa8, 0x46, 0x9c, 0x4a];
        let space = [&ratios[..], &[1, 3, 2], &[1, 1, 10, 0], &[1, 1]].concat();
        let mut full = flagged.clone();
        full.osd_space.insert(OsdId(3), SpaceState::Full);
        full.pool_quotas.insert(PoolId(1), PoolQuota { max_objects: 10, max_bytes: 0 });
        full.full_pools.insert(PoolId(1));
        let v8: Vec<u8> = [&[8][..], &v7[1..], &space].concat();
        assert_eq!(OsdMap::decode(&v8).unwrap(), full);
        // Version 9 ends with the lost OSDs (osd.5, declared lost at epoch 300: varint 0xac
        // 0x02) and the upmap exceptions (PG 1.0: osd.3 → osd.4).
        let mut lost = full.clone();
        lost.osd_lost.insert(OsdId(5), 300);
        lost.pg_upmap_items.insert(PgId { pool: PoolId(1), seed: 0 }, vec![(OsdId(3), OsdId(4))]);
        let v9: Vec<u8> = [&[9][..], &v8[1..], &[1, 5, 0xac, 0x02], &[1, 1, 0, 1, 3, 4]].concat();
        assert_eq!(OsdMap::decode(&v9).unwrap(), lost);
        // Version 10 ends with the pools whose pgp_num moves (pool 1: placed as 1 PG, going
        // to 2).
        let mut resizing = lost.clone();
        resizing.pg_resize.insert(PoolId(1), PgResize { pgp_num: 1, pgp_num_target: 2 });
        let v10: Vec<u8> = [&[10][..], &v9[1..], &[1, 1, 1, 2]].concat();
        assert_eq!(OsdMap::decode(&v10).unwrap(), resizing);
        // Version 11 ends with the pools whose autoscaler settings are not the default
        // (pool 1: mode warn (1), target ratio 0.25: 2,500 as varint 0xc4 0x13).
        let mut scaled = resizing.clone();
        scaled.pool_autoscale.insert(PoolId(1), PoolAutoscale { mode: AutoscaleMode::Warn, target_size_ratio: 2_500 });
        let v11: Vec<u8> = [&[11][..], &v10[1..], &[1, 1, 1, 0xc4, 0x13]].concat();
        assert_eq!(OsdMap::decode(&v11).unwrap(), scaled);
        // Version 12 ends with the auth table: "client.a" with a 2-byte key and caps mon
        // 'allow r' (one grant: r, no pool, no namespace), osd 'allow * pool=p'.
        let mut keyed = scaled.clone();
        let caps =
            Caps { mon: Cap::parse("allow r", false).unwrap(), osd: Cap::parse("allow * pool=p", true).unwrap() };
        keyed.auth.insert("client.a".into(), AuthEntity { key: vec![7, 8], caps });
        let entity = [&[1, 8][..], b"client.a", &[2, 7, 8], &[1, 1, 0, 0, 0, 0, 0], &[1, 1, 1, 1, 1, 1, 1, b'p', 0]];
        // Then the merging pools: pool 1 going to 1 PG, paused from epoch 9.
        keyed.pg_merge.insert(PoolId(1), PgMerge { pg_num: 1, paused: 9 });
        let v12: Vec<u8> = [&[12][..], &v11[1..], &entity.concat(), &[1, 1, 1, 9]].concat();
        assert_eq!(OsdMap::decode(&v12).unwrap(), keyed);
        // Version 13 ends with each pool's last merge: pool 1 from 2 PGs to 1, PG 1.0
        // activated in interval 7 and PG 1.1 in interval 300 (varint 0xac 0x02) under the pause.
        let mut merged = keyed.clone();
        merged.pg_merged.insert(PoolId(1), PgMerged { from: 2, to: 1, active: BTreeMap::from([(0, 7), (1, 300)]) });
        let expected: Vec<u8> = [&[13][..], &v12[1..], &[1, 1, 2, 1, 2, 0, 7, 1, 0xac, 0x02]].concat();
        assert_eq!(merged.encode(), expected);
        assert_eq!(OsdMap::decode(&expected).unwrap(), merged);
        assert!(keyed.clone().without_keys().auth.is_empty(), "clients get the map without the table");
        assert_eq!(
            OsdMap::decode(&flagged.encode()).unwrap().full_ratios,
            FullRatios::default(),
            "a map without settings has Ceph's ratios"
        );
        // Version 6 ended at the override weights.
        assert_eq!(OsdMap::decode(&v6).unwrap(), map);
        // Version 5 had no CRUSH map, rules or override weights, and profiles without root
        // and class: it decodes with the rule its placement followed.
        let v5: Vec<u8> =
            [&[5, 3, 2][..], &pool(&code(&[]), &[]), &[0, 0, 0], &profiles(&code(&[])), &[1, 1, 0, 3]].concat();
        assert_eq!(OsdMap::decode(&v5).unwrap(), map);
        // Version 4 ended at the profiles.
        let v4: Vec<u8> = [&[4, 3, 2][..], &pool(&code(&[]), &[]), &[0, 0, 0], &profiles(&code(&[]))].concat();
        let old = OsdMap::decode(&v4).unwrap();
        assert_eq!(old, OsdMap { primary_temp: BTreeMap::new(), ..map.clone() });
        map.osd_reweight.insert(OsdId(3), 0x8000);
        map.crush.device_classes.insert(OsdId(3), "ssd".into());
        // The monitors' Raft log keeps maps as JSON, which takes no structured keys; older
        // JSON maps have no profiles, pool erasure or CRUSH rules.
        let json = serde_json::to_vec(&map).unwrap();
        assert_eq!(serde_json::from_slice::<OsdMap>(&json).unwrap(), map);
        let mut old: OsdMap = serde_json::from_str(
            r#"{"epoch":1,"next_pool_id":2,"pools":{"1":{"id":1,"name":"p","pg_num":1,"size":1,"min_size":1}},
               "osds":{},"config":{},"pg_active":[]}"#,
        )
        .unwrap();
        assert!(old.pools[&PoolId(1)].erasure.is_none() && old.erasure_profiles.is_empty());
        old.fill_placement();
        assert_eq!(old.pools[&PoolId(1)].crush_rule, DEFAULT_RULE);
    }

    #[test]
    fn erasure_pools_take_their_profile_and_keep_it() {
        let mut map = OsdMap::default();
        let spec = |profile: &str, min_size| ErasurePoolSpec {
            name: "ec".into(),
            pg_num: 8,
            profile: profile.into(),
            min_size,
            allow_overwrites: false,
        };
        let pool = map.create_erasure(&spec("default", None)).unwrap();
        assert_eq!((pool.size, pool.min_size), (4, 3));
        assert_eq!(map.create_erasure(&spec("nope", None)).unwrap_err().errno, crate::Errno::NotFound);
        map.remove("ec").unwrap();
        assert!(map.create_erasure(&spec("default", Some(1))).unwrap_err().message.contains("min_size"));
        let wide = ErasureProfile { k: 8, m: 3, ..ErasureProfile::default() };
        map.set_erasure_profile("default", wide.clone(), false).unwrap_err();
        map.set_erasure_profile("default", wide, true).unwrap();
        let pool = map.create_erasure(&spec("default", None)).unwrap();
        assert_eq!((pool.size, pool.min_size), (11, 9));
        assert_eq!(map.remove_erasure_profile("default").unwrap_err().errno, crate::Errno::Busy);
        assert_eq!(map.erasure_profile_names(), vec!["default"]);
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

    #[test]
    fn pools_take_the_default_mode_and_keep_their_own() {
        let mut map = OsdMap::default();
        let on = map.create(&PoolSpec::named("on", 1)).unwrap().id;
        assert_eq!(map.autoscale(on).mode, AutoscaleMode::On);
        assert!(map.pool_autoscale.is_empty(), "the default is not recorded");
        map.config.entry("global".into()).or_default().insert(DEFAULT_MODE_OPTION.into(), "warn".into());
        let warn = map.create(&PoolSpec::named("warn", 1)).unwrap().id;
        assert_eq!(map.autoscale(warn).mode, AutoscaleMode::Warn);

        let change = |mode: Option<&str>, ratio| AutoscaleChange {
            pool: "on".into(),
            mode: mode.map(|m| AutoscaleMode::parse(m).unwrap()),
            target_size_ratio: ratio,
        };
        let epoch = map.epoch;
        change(None, Some(2_500)).apply(&mut map).unwrap();
        assert_eq!(map.autoscale(on), PoolAutoscale { mode: AutoscaleMode::On, target_size_ratio: 2_500 });
        assert_eq!(map.epoch, epoch + 1);
        change(Some("off"), None).apply(&mut map).unwrap();
        assert_eq!(map.autoscale(on), PoolAutoscale { mode: AutoscaleMode::Off, target_size_ratio: 2_500 });
        change(Some("on"), Some(0)).apply(&mut map).unwrap();
        assert!(!map.pool_autoscale.contains_key(&on), "back to the default: not recorded");
        assert!(change(None, Some(10_001)).apply(&mut map).unwrap_err().message.contains("between 0 and 1"));
        assert!(AutoscaleMode::parse("auto").unwrap_err().message.contains("off, warn or on"));
        map.remove("warn").unwrap();
        assert!(map.pool_autoscale.is_empty(), "a deleted pool's settings go with it");
    }
}
