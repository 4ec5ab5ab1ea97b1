//! Benchmark plumbing: run workers for a while, record per-op latency, and print rows as
//! a table for people or, with `--json`, one JSON object per row for machines.

use serde_json::{Map, Value};
use shoal_types::{Result, err};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What a timed run measured.
pub struct RunStats {
    /// Operations completed.
    pub ops: u64,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Per-operation latencies in microseconds, sorted.
    pub latencies_us: Vec<u64>,
    /// Process CPU seconds (all threads: client, OSD, RocksDB) spent during the run.
    pub cpu_secs: f64,
}

impl RunStats {
    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Payload MB (10^6 bytes) per second.
    pub fn mb_per_sec(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// A latency percentile in milliseconds.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return 0.0;
        }
        let index = ((self.latencies_us.len() as f64 * p).ceil() as usize).clamp(1, self.latencies_us.len()) - 1;
        self.latencies_us[index] as f64 / 1000.0
    }

    /// Several runs of the same workload as one: counts and times add up.
    pub fn merge(runs: Vec<RunStats>) -> RunStats {
        let mut latencies_us: Vec<u64> = runs.iter().flat_map(|r| r.latencies_us.iter().copied()).collect();
        latencies_us.sort_unstable();
        RunStats {
            ops: runs.iter().map(|r| r.ops).sum(),
            bytes: runs.iter().map(|r| r.bytes).sum(),
            elapsed: runs.iter().map(|r| r.elapsed).sum(),
            latencies_us,
            cpu_secs: runs.iter().map(|r| r.cpu_secs).sum(),
        }
    }

    /// The standard measurement columns.
    pub fn columns(&self) -> Vec<(&'static str, Value)> {
        vec![
            ("ops", Value::from(self.ops)),
            ("seconds", round(self.elapsed.as_secs_f64(), 2)),
            ("ops_per_sec", round(self.ops_per_sec(), 1)),
            ("mb_per_sec", round(self.mb_per_sec(), 2)),
            ("p50_ms", round(self.percentile_ms(0.50), 3)),
            ("p99_ms", round(self.percentile_ms(0.99), 3)),
            ("cpu_secs", round(self.cpu_secs, 2)),
        ]
    }
}

/// A number rounded to `digits` decimals, as JSON.
pub fn round(x: f64, digits: i32) -> Value {
    let f = 10f64.powi(digits);
    Value::from((x * f).round() / f)
}

/// CPU seconds this process has used so far (user + system, all threads).
pub fn process_cpu_seconds() -> f64 {
    // /proc/self/stat: fields 14 and 15 (utime, stime) in clock ticks of 1/100 s.
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Runs `workers` concurrent loops of `op(worker, iteration)` for `duration`; each call
/// returns the payload bytes it moved. The first error stops the run and is returned.
pub async fn run_for<F, Fut>(label: &str, workers: usize, duration: Duration, op: F) -> Result<RunStats>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<u64>> + Send,
{
    run_loops(label, workers, Arc::new(AtomicBool::new(false)), Some(duration), op).await
}

/// Like [`run_for`], until `stop` is set.
pub async fn run_until<F, Fut>(label: &str, workers: usize, stop: Arc<AtomicBool>, op: F) -> Result<RunStats>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<u64>> + Send,
{
    run_loops(label, workers, stop, None, op).await
}

/// The worker loops of [`run_for`] and [`run_until`]: they end at `stop`, after
/// `duration`, or at the first error.
async fn run_loops<F, Fut>(
    label: &str,
    workers: usize,
    stop: Arc<AtomicBool>,
    duration: Option<Duration>,
    op: F,
) -> Result<RunStats>
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<u64>> + Send,
{
    let op = Arc::new(op);
    let done = Arc::new(AtomicU64::new(0));
    let cpu_start = process_cpu_seconds();
    let start = Instant::now();
    let progress = {
        let (done, stop, label) = (done.clone(), stop.clone(), label.to_owned());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                eprintln!("  {label}: {:>4.0}s {:>9} ops", start.elapsed().as_secs_f64(), done.load(Ordering::Relaxed));
            }
        })
    };
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (op, stop, done) = (op.clone(), stop.clone(), done.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut bytes = 0u64;
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) && duration.is_none_or(|d| start.elapsed() < d) {
                    let t = Instant::now();
                    match op(w, i).await {
                        Ok(n) => bytes += n,
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                    latencies.push(t.elapsed().as_micros() as u64);
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
                Ok((latencies, bytes))
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut bytes = 0;
    let mut first_error = None;
    for t in tasks {
        match t.await.map_err(|e| err::io(format!("benchmark worker failed: {e}")))? {
            Ok((l, b)) => {
                all.extend(l);
                bytes += b;
            }
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    progress.abort();
    if let Some(e) = first_error {
        return Err(e);
    }
    all.sort_unstable();
    Ok(RunStats {
        ops: all.len() as u64,
        bytes,
        elapsed,
        latencies_us: all,
        cpu_secs: process_cpu_seconds() - cpu_start,
    })
}

/// Prints rows: an aligned table, or one JSON object per row.
pub fn print_rows(rows: &[Vec<(&'static str, Value)>], json: bool) {
    if json {
        for row in rows {
            let object: Map<String, Value> = row.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
            println!("{}", Value::Object(object));
        }
        return;
    }
    let Some(first) = rows.first() else { return };
    let cell = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let widths: Vec<usize> = first
        .iter()
        .enumerate()
        .map(|(i, (k, _))| {
            rows.iter().filter_map(|r| r.get(i)).map(|c| cell(&c.1).len()).max().unwrap_or(0).max(k.len())
        })
        .collect();
    let line =
        |cells: Vec<String>| cells.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect::<Vec<_>>().join("  ");
    println!("{}", line(first.iter().map(|(k, _)| (*k).to_owned()).collect()));
    for row in rows {
        println!("{}", line(row.iter().map(|(_, v)| cell(v)).collect()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_from_sorted_latencies() {
        let stats = RunStats {
            ops: 100,
            bytes: 0,
            elapsed: Duration::from_secs(2),
            latencies_us: (1..=100).map(|x| x * 1000).collect(),
            cpu_secs: 0.0,
        };
        assert_eq!(stats.percentile_ms(0.5), 50.0);
        assert_eq!(stats.percentile_ms(0.99), 99.0);
        assert_eq!(stats.ops_per_sec(), 50.0);
    }

    #[tokio::test]
    async fn run_for_counts_and_stops_on_error() {
        let stats = run_for("t", 2, Duration::from_millis(50), |_, _| async { Ok(10) }).await.unwrap();
        assert!(stats.ops > 0);
        assert_eq!(stats.bytes, stats.ops * 10);
        let e =
            run_for(
                "t",
                2,
                Duration::from_secs(5),
                |_, i| async move { if i == 3 { Err(err::io("boom")) } else { Ok(0) } },
            )
            .await;
        assert_eq!(e.err().unwrap().message, "boom");
    }
}
