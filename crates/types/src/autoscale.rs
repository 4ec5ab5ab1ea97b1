//! Per-pool settings of the PG autoscaler (Ceph's `pg_autoscale_mode` and
//! `target_size_ratio`): whether the leader monitor sets a pool's `pg_num` from its usage,
//! only warns, or leaves it alone, and how much of the cluster the pool expects to fill.

use crate::error::{Result, err};
use serde::{Deserialize, Serialize};

/// The central option naming the mode new pools get.
pub const DEFAULT_MODE_OPTION: &str = "osd_pool_default_pg_autoscale_mode";

/// What the autoscaler does with a pool whose `pg_num` is far from its proposal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AutoscaleMode {
    /// Nothing: the operator chooses `pg_num`.
    Off,
    /// A health warning (`POOL_TOO_FEW_PGS`, `POOL_TOO_MANY_PGS`).
    Warn,
    /// The leader monitor sets `pg_num` itself.
    #[default]
    On,
}

impl AutoscaleMode {
    /// The name `osd pool set POOL pg_autoscale_mode` takes.
    pub fn name(self) -> &'static str {
        match self {
            AutoscaleMode::Off => "off",
            AutoscaleMode::Warn => "warn",
            AutoscaleMode::On => "on",
        }
    }

    /// The mode named `name`.
    pub fn parse(name: &str) -> Result<AutoscaleMode> {
        [AutoscaleMode::Off, AutoscaleMode::Warn, AutoscaleMode::On]
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| err::invalid(format!("'{name}' is not an autoscale mode: off, warn or on")))
    }
}

/// A pool's autoscaler settings; the map records only pools whose settings differ from
/// the default (mode `on`, no target ratio).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolAutoscale {
    /// What the autoscaler does.
    pub mode: AutoscaleMode,
    /// The share of its CRUSH root's capacity the pool expects to use, in basis points
    /// (Ceph's `target_size_ratio`, here at most 1): its PGs are sized for that before the
    /// data arrives. 0: none.
    pub target_size_ratio: u16,
}

/// A change of one pool's settings (`osd pool set POOL pg_autoscale_mode|target_size_ratio`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoscaleChange {
    /// The pool's name.
    pub pool: String,
    /// The new mode, if given.
    pub mode: Option<AutoscaleMode>,
    /// The new target ratio in basis points, if given.
    pub target_size_ratio: Option<u16>,
}
