//! Completed operations counted per second of a run, so that phases of a long run (and
//! what a failure does to throughput) can be told apart afterwards.

use shoal_node::bench::RunStats;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// An S3 operation of a workload.
pub(super) enum Op {
    Get,
    Put,
    Stat,
    Delete,
    List,
}

impl Op {
    /// Its HTTP method as the tables show it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Op::Get => "GET",
            Op::Put => "PUT",
            Op::Stat => "HEAD",
            Op::Delete => "DELETE",
            Op::List => "LIST",
        }
    }
}

/// The operations a timeline tells apart, in column order.
pub const OPS: [Op; 4] = [Op::Get, Op::Put, Op::Stat, Op::Delete];

/// One second of a run.
#[derive(Clone, Debug, Default)]
pub struct Second {
    /// Per operation of [`OPS`]: latencies (µs) of the operations completed in this second.
    pub latencies_us: [Vec<u64>; 4],
    /// Per operation of [`OPS`]: payload bytes moved.
    pub bytes: [u64; 4],
    /// Operations that failed.
    pub errors: u64,
}

/// Per-second counts since `start`.
pub struct Timeline {
    start: Instant,
    seconds: Mutex<Vec<Second>>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline { start: Instant::now(), seconds: Mutex::new(Vec::new()) }
    }
}

impl Timeline {
    /// Seconds since the timeline started.
    pub fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn with_second(&self, change: impl FnOnce(&mut Second)) {
        let at = self.start.elapsed().as_secs() as usize;
        let mut seconds = self.seconds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if seconds.len() <= at {
            seconds.resize(at + 1, Second::default());
        }
        change(&mut seconds[at]);
    }

    /// Counts a completed operation.
    pub fn record(&self, op: Op, latency_us: u64, bytes: u64) {
        let Some(column) = OPS.iter().position(|o| *o == op) else { return };
        self.with_second(|s| {
            s.latencies_us[column].push(latency_us);
            s.bytes[column] += bytes;
        });
    }

    /// Counts a failed operation.
    pub fn error(&self) {
        self.with_second(|s| s.errors += 1);
    }

    /// The seconds recorded so far (up to the current one, counted or not).
    pub fn seconds(&self) -> Vec<Second> {
        let mut seconds = self.seconds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        seconds.resize(self.start.elapsed().as_secs() as usize + 1, Second::default());
        seconds
    }

    /// Statistics of the operations of `columns` pooled over seconds `from..to` of
    /// `seconds`, and the errors there.
    pub fn stats(seconds: &[Second], columns: &[usize], from: f64, to: f64) -> (RunStats, u64) {
        let range = &seconds[(from as usize).min(seconds.len())..(to.ceil() as usize).min(seconds.len())];
        let mut latencies_us: Vec<u64> =
            range.iter().flat_map(|s| columns.iter().flat_map(|&c| s.latencies_us[c].iter().copied())).collect();
        latencies_us.sort_unstable();
        let stats = RunStats {
            ops: latencies_us.len() as u64,
            bytes: range.iter().flat_map(|s| columns.iter().map(|&c| s.bytes[c])).sum(),
            elapsed: Duration::from_secs_f64((to - from).max(1e-3)),
            latencies_us,
            cpu_secs: 0.0,
        };
        (stats, range.iter().map(|s| s.errors).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_counted_in_the_second_they_complete() {
        let timeline = Timeline::default();
        timeline.record(Op::Put, 2_000, 4096);
        timeline.record(Op::Put, 4_000, 4096);
        timeline.record(Op::Get, 1_000, 4096);
        timeline.record(Op::List, 1_000, 0);
        timeline.error();
        let seconds = timeline.seconds();
        let (puts, errors) = Timeline::stats(&seconds, &[1], 0.0, 1.0);
        assert_eq!((puts.ops, puts.bytes, errors), (2, 8192, 1));
        assert_eq!(puts.latencies_us, vec![2_000, 4_000]);
        assert_eq!(Timeline::stats(&seconds, &[0], 0.0, 1.0).0.ops, 1);
        assert_eq!(Timeline::stats(&seconds, &[3], 0.0, 1.0).0.ops, 0);
        let (all, _) = Timeline::stats(&seconds, &[0, 1, 2, 3], 0.0, 1.0);
        assert_eq!((all.ops, all.bytes, all.latencies_us), (3, 12288, vec![1_000, 2_000, 4_000]));
        assert_eq!(Timeline::stats(&seconds, &[1], 5.0, 9.0).0.ops, 0, "past the end: nothing");
    }
}
