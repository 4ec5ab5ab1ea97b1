//! Time and order of writes: every write carries an *order* (nanoseconds and a random
//! tag) that the head object and the index entry compare to decide which write wins.

use std::sync::atomic::{AtomicU64, Ordering};

/// Nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// A hybrid logical clock for write orders: the wall clock, but never behind an order
/// the gateway has seen and never the same value twice.
#[derive(Debug, Default)]
pub struct OrderClock {
    last: AtomicU64,
}

impl OrderClock {
    /// Nanoseconds for a write made now.
    pub fn now_ns(&self) -> u64 {
        let wall = now_ns();
        let previous = self.last.fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| Some(wall.max(last + 1)));
        previous.map_or(wall, |last| wall.max(last + 1))
    }

    /// Moves the clock past the time of `order`.
    pub fn observe(&self, order: &str) {
        if let Some(ns) = order.split_once('.').and_then(|(ns, _)| ns.parse::<u64>().ok()) {
            self.last.fetch_max(ns, Ordering::AcqRel);
        }
    }
}

/// A fresh random tag (16 hex digits).
pub fn new_tag() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// The order of a write made now with `tag`: sorts by time, then tag.
pub fn order_of(mtime_ns: u64, tag: &str) -> String {
    format!("{mtime_ns:020}.{tag}")
}

/// The tag of the write of `order`.
pub fn tag_of(order: &str) -> &str {
    order.split_once('.').map_or(order, |(_, tag)| tag)
}
