//! Limits on what one operation may do, checked before anything is staged.

use bytes::Bytes;
use shoal_types::{Result, err};
use std::time::Duration;

/// Per-operation limits. Defaults follow Ceph's where it has one.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Largest object, in bytes (`osd_max_object_size`, default 128 MiB).
    pub max_object_size: u64,
    /// Largest single write, in bytes (`osd_max_write_size`, default 90 MiB).
    pub max_write_size: u64,
    /// Longest xattr name (`osd_max_attr_name_len`, default 100).
    pub max_attr_name_len: usize,
    /// Largest xattr value (`osd_max_attr_size`, default 64 KiB).
    pub max_attr_size: usize,
    /// Longest omap key (`osd_max_omap_key_len`, default 4 KiB).
    pub max_omap_key_len: usize,
    /// Largest omap value or header (`osd_max_omap_value_size`, default 16 MiB).
    pub max_omap_value_size: usize,
    /// Most omap entries one read returns (`osd_max_omap_entries_per_request`, default 1024).
    pub max_omap_entries_per_request: u32,
    /// Most steps in one operation (`osd_max_ops_per_request`, default 256).
    pub max_ops_per_request: usize,
    /// Recovery operations (pushes, shard rebuilds) one OSD runs at once over all its
    /// PGs, shared by its op shards (`osd_recovery_max_active`, default 10: Ceph's
    /// value for solid-state OSDs).
    pub recovery_max_active: usize,
    /// The same while the OSD serves clients (a client operation reached its op shard in
    /// the last second): recovery yields to them (`osd_recovery_max_active_with_clients`,
    /// default 3: Ceph's value for hard disks; at most `recovery_max_active`).
    pub recovery_max_active_with_clients: usize,
    /// Pause after each recovery operation before its slot takes the next
    /// (`osd_recovery_sleep`, default 0).
    pub recovery_sleep: Duration,
    /// How the OSD schedules and paces scrubs.
    pub scrub: ScrubLimits,
}

/// Scrub scheduling and pacing. Defaults follow Ceph's.
#[derive(Clone, Debug, PartialEq)]
pub struct ScrubLimits {
    /// A PG is scrubbed once this long after its last scrub (`osd_scrub_min_interval`,
    /// one day), when the host's load allows.
    pub min_interval: Duration,
    /// Past this, a PG is scrubbed whatever the load (`osd_scrub_max_interval`, a week).
    pub max_interval: Duration,
    /// Every this long a scheduled scrub is deep (`osd_deep_scrub_interval`, a week).
    pub deep_interval: Duration,
    /// Scrubs one OSD runs at once as primary, scheduled or asked for (`osd_max_scrubs`,
    /// 3 as in Reef).
    pub max_scrubs: usize,
    /// Objects compared per step; client operations run between steps
    /// (`osd_scrub_chunk_max`, 25).
    pub chunk_max: u32,
    /// Pause between steps (`osd_scrub_sleep`, 0).
    pub sleep: Duration,
    /// Scheduled scrubs wait while the host's load average per CPU is above this
    /// (`osd_scrub_load_threshold`, 0.5).
    pub load_threshold: f64,
}

impl Default for ScrubLimits {
    fn default() -> Self {
        const DAY: u64 = 24 * 3600;
        ScrubLimits {
            min_interval: Duration::from_secs(DAY),
            max_interval: Duration::from_secs(7 * DAY),
            deep_interval: Duration::from_secs(7 * DAY),
            max_scrubs: 3,
            chunk_max: 25,
            sleep: Duration::ZERO,
            load_threshold: 0.5,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_object_size: 128 << 20,
            max_write_size: 90 << 20,
            max_attr_name_len: 100,
            max_attr_size: 64 << 10,
            max_omap_key_len: 4 << 10,
            max_omap_value_size: 16 << 20,
            max_omap_entries_per_request: 1024,
            max_ops_per_request: 256,
            recovery_max_active: 10,
            recovery_max_active_with_clients: 3,
            recovery_sleep: Duration::ZERO,
            scrub: ScrubLimits::default(),
        }
    }
}

impl Limits {
    /// ENAMETOOLONG or E2BIG if an xattr is over the limits.
    pub fn check_xattr(&self, name: &str, value: &Bytes) -> Result<()> {
        if name.is_empty() {
            return Err(err::invalid("xattr name must not be empty"));
        }
        if name.len() > self.max_attr_name_len {
            return Err(err::name_too_long(format!(
                "xattr name is {} bytes; osd_max_attr_name_len is {}",
                name.len(),
                self.max_attr_name_len
            )));
        }
        if value.len() > self.max_attr_size {
            return Err(err::too_big(format!(
                "xattr '{name}' value is {} bytes; osd_max_attr_size is {}",
                value.len(),
                self.max_attr_size
            )));
        }
        Ok(())
    }

    /// ENAMETOOLONG or E2BIG if an omap entry is over the limits.
    pub fn check_omap_entry(&self, key: &[u8], value: &[u8]) -> Result<()> {
        if key.len() > self.max_omap_key_len {
            return Err(err::name_too_long(format!(
                "omap key is {} bytes; osd_max_omap_key_len is {}",
                key.len(),
                self.max_omap_key_len
            )));
        }
        if value.len() > self.max_omap_value_size {
            return Err(err::too_big(format!(
                "omap value is {} bytes; osd_max_omap_value_size is {}",
                value.len(),
                self.max_omap_value_size
            )));
        }
        Ok(())
    }
}

/// Deliberate protocol bugs, each off unless set: a simulator run switches one on to show
/// that its invariants catch it. Only a build with the `flaws` feature can set them
/// ([`Shard::set_flaws`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Flaws {
    /// Answer a write once the local store has it, without waiting for the replicas.
    pub reply_before_replica_commit: bool,
    /// Split an incomplete copy into complete children that lack nothing.
    pub split_completes_children: bool,
    /// Merge a PG's copies forgetting the requests of the source's log: a client that
    /// resends one after the merge has it applied twice.
    pub merge_forgets_source: bool,
}

/// Bytes of object data and omap per push or pulled part (Ceph's
/// `osd_recovery_max_chunk`): a larger object goes in parts, so no message nears the
/// messenger's frame limit.
pub(crate) const COPY_PART_BYTES: usize = 8 << 20;
