//! When the mover reads each log it owns.

use std::time::{Duration, Instant};

/// When the mover reads an owned log next, and from where.
pub(crate) struct LogSchedule {
    pub(crate) next: Instant,
    pub(crate) idle: Duration,
    /// Every event up to this sequence number is moved and trimmed: reads start after it,
    /// so they seek past the trimmed keys' tombstones instead of walking them.
    pub(crate) cursor: Option<u64>,
}
