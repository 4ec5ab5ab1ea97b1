//! `shoal bench s3`: a load generator speaking S3 (SigV4) to any endpoint, with the
//! workloads of MinIO's warp: put, get, delete and mixed (GET/PUT/HEAD/DELETE by
//! percentages), reporting ops/s, MiB/s and p50/p90/p99 latency per operation.

use crate::bench::{RunStats, print_rows, process_cpu_seconds, round};
use crate::s3client::S3Client;
use bytes::Bytes;
use clap::{Args, ValueEnum};
use http::Method;
use rand::Rng;
use serde_json::Value;
use shoal_types::{Errno, Result, err};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the benchmark does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Upload new objects.
    Put,
    /// Download prepared objects at random.
    Get,
    /// Delete prepared objects until none is left or time is up.
    Delete,
    /// GET/PUT/HEAD/DELETE by the `--*-distrib` percentages.
    Mixed,
}

/// `shoal bench s3`.
#[derive(Args, Debug)]
pub struct S3BenchArgs {
    /// The S3 endpoint.
    #[arg(long, default_value = "http://127.0.0.1:7480")]
    pub endpoint: String,
    /// Access key (default: $AWS_ACCESS_KEY_ID, or --keys-file).
    #[arg(long)]
    pub access_key: Option<String>,
    /// Secret key (default: $AWS_SECRET_ACCESS_KEY, or --keys-file).
    #[arg(long)]
    pub secret_key: Option<String>,
    /// A JSON file with `access_key` and `secret_key` (`shoal server` writes DATA/admin.json).
    #[arg(long, value_name = "FILE")]
    pub keys_file: Option<std::path::PathBuf>,
    /// The workload.
    #[arg(long, value_enum, default_value = "mixed")]
    pub workload: Workload,
    /// Object size, e.g. 4KiB, 4MiB.
    #[arg(long, default_value = "4KiB", value_parser = parse_size)]
    pub obj_size: u64,
    /// Concurrent clients.
    #[arg(long, default_value_t = 32)]
    pub concurrent: usize,
    /// How long to run, e.g. 30s, 2m.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Objects prepared for get, delete and mixed.
    #[arg(long, default_value_t = 1000)]
    pub objects: usize,
    /// Bucket to use (created if missing).
    #[arg(long, default_value = "shoal-bench")]
    pub bucket: String,
    /// Mixed: percentage of GETs.
    #[arg(long, default_value_t = 45.0)]
    pub get_distrib: f64,
    /// Mixed: percentage of PUTs.
    #[arg(long, default_value_t = 35.0)]
    pub put_distrib: f64,
    /// Mixed: percentage of HEADs.
    #[arg(long, default_value_t = 15.0)]
    pub stat_distrib: f64,
    /// Mixed: percentage of DELETEs.
    #[arg(long, default_value_t = 5.0)]
    pub delete_distrib: f64,
    /// Also report the CPU seconds this process (e.g. `shoal server`) used during the run.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Keep the objects afterwards.
    #[arg(long)]
    pub noclear: bool,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// One JSON object per row instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Parses `4096`, `4KiB`, `4k`, `1MiB`, `1M`, `1GiB`.
pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("'{s}' is not a size like 4KiB"))?;
    let factor = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("unknown size unit in '{s}' (use KiB, MiB, GiB)")),
    };
    n.checked_mul(factor).ok_or_else(|| format!("'{s}' is too large"))
}

/// Parses `30s`, `2m`, `1h` or plain seconds.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let t = s.trim();
    let (number, factor) = match t.chars().last() {
        Some('s') => (&t[..t.len() - 1], 1.0),
        Some('m') => (&t[..t.len() - 1], 60.0),
        Some('h') => (&t[..t.len() - 1], 3600.0),
        _ => (t, 1.0),
    };
    let n: f64 = number.parse().map_err(|_| format!("'{s}' is not a duration like 30s"))?;
    Duration::try_from_secs_f64(n * factor).map_err(|_| format!("'{s}' is not a valid duration"))
}

/// CPU seconds a process has used (user + system).
fn cpu_of(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, r)| r).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Get,
    Put,
    Stat,
    Delete,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Get => "GET",
            Op::Put => "PUT",
            Op::Stat => "HEAD",
            Op::Delete => "DELETE",
        }
    }
}

struct Shared {
    client: S3Client,
    bucket: String,
    payload: Bytes,
    /// Keys that exist (for GET/HEAD/DELETE), and every key written (for cleanup).
    existing: Mutex<Vec<String>>,
    written: Mutex<Vec<String>>,
    next_key: AtomicU64,
    prefix: String,
}

impl Shared {
    fn new_key(&self) -> String {
        format!("{}/obj{:08}", self.prefix, self.next_key.fetch_add(1, Ordering::Relaxed))
    }

    fn random_existing(&self) -> Option<String> {
        let existing = self.existing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if existing.is_empty() {
            return None;
        }
        Some(existing[rand::rng().random_range(0..existing.len())].clone())
    }

    fn take_existing(&self, random: bool) -> Option<String> {
        let mut existing = self.existing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if existing.is_empty() {
            return None;
        }
        let at = if random { rand::rng().random_range(0..existing.len()) } else { existing.len() - 1 };
        Some(existing.swap_remove(at))
    }

    async fn put(&self) -> Result<u64> {
        let key = self.new_key();
        self.client.expect_ok(Method::PUT, &format!("/{}/{key}", self.bucket), &[], self.payload.clone()).await?;
        self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(key.clone());
        self.existing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(key);
        Ok(self.payload.len() as u64)
    }

    /// Runs one operation; `None` when there was nothing to do it on.
    async fn run(&self, op: Op, random_delete: bool) -> Result<Option<u64>> {
        let path = |key: &str| format!("/{}/{key}", self.bucket);
        match op {
            Op::Put => self.put().await.map(Some),
            Op::Get => {
                let Some(key) = self.random_existing() else { return Ok(None) };
                let response = self.client.send(Method::GET, &path(&key), &[], Bytes::new()).await?;
                match response.status.as_u16() {
                    200 if response.body.len() == self.payload.len() => Ok(Some(response.body.len() as u64)),
                    404 => Ok(Some(0)), // deleted meanwhile by another client
                    503 => Err(err::again(format!("GET {key}: HTTP 503"))),
                    status => Err(err::io(format!("GET {key}: HTTP {status}, {} bytes", response.body.len()))),
                }
            }
            Op::Stat => {
                let Some(key) = self.random_existing() else { return Ok(None) };
                let response = self.client.send(Method::HEAD, &path(&key), &[], Bytes::new()).await?;
                match response.status.as_u16() {
                    200 | 404 => Ok(Some(0)),
                    503 => Err(err::again(format!("HEAD {key}: HTTP 503"))),
                    status => Err(err::io(format!("HEAD {key}: HTTP {status}"))),
                }
            }
            Op::Delete => {
                let Some(key) = self.take_existing(random_delete) else { return Ok(None) };
                self.client.expect_ok(Method::DELETE, &path(&key), &[], Bytes::new()).await?;
                Ok(Some(0))
            }
        }
    }
}

/// One completed operation: what it was, its latency in µs and the payload bytes it moved.
type Sample = (Op, u64, u64);

fn choose(args: &S3BenchArgs) -> Result<impl Fn() -> Op + Send + Sync + 'static> {
    let weights = [
        (Op::Get, args.get_distrib),
        (Op::Put, args.put_distrib),
        (Op::Stat, args.stat_distrib),
        (Op::Delete, args.delete_distrib),
    ];
    let total: f64 = weights.iter().map(|(_, w)| w).sum();
    if weights.iter().any(|(_, w)| *w < 0.0) || total <= 0.0 {
        return Err(err::invalid("the --*-distrib percentages must be ≥ 0 and not all 0"));
    }
    let workload = args.workload;
    Ok(move || match workload {
        Workload::Put => Op::Put,
        Workload::Get => Op::Get,
        Workload::Delete => Op::Delete,
        Workload::Mixed => {
            let mut x = rand::rng().random_range(0.0..total);
            for (op, w) in weights {
                if x < w {
                    return op;
                }
                x -= w;
            }
            Op::Get
        }
    })
}

fn keys(args: &S3BenchArgs) -> Result<(String, String)> {
    if let Some(path) = &args.keys_file {
        let text = std::fs::read_to_string(path).map_err(|e| err::invalid(format!("{}: {e}", path.display())))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| err::invalid(format!("{}: {e}", path.display())))?;
        let field = |k: &str| {
            v[k].as_str().map(str::to_owned).ok_or_else(|| err::invalid(format!("{} has no {k}", path.display())))
        };
        return Ok((field("access_key")?, field("secret_key")?));
    }
    let access = args.access_key.clone().or_else(|| std::env::var("AWS_ACCESS_KEY_ID").ok());
    let secret = args.secret_key.clone().or_else(|| std::env::var("AWS_SECRET_ACCESS_KEY").ok());
    match (access, secret) {
        (Some(a), Some(s)) => Ok((a, s)),
        _ => Err(err::invalid(
            "give --access-key and --secret-key, --keys-file, or set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
        )),
    }
}

fn progress(enabled: bool, len: u64, message: &str) -> indicatif::ProgressBar {
    if !enabled {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} {per_sec}") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message.to_owned());
    bar
}

/// Runs `shoal bench s3`.
pub async fn run(args: S3BenchArgs) -> Result<()> {
    let (access, secret) = keys(&args)?;
    let client = S3Client::new(&args.endpoint, &access, &secret)?;
    let created = client.send(Method::PUT, &format!("/{}", args.bucket), &[], Bytes::new()).await?;
    if !created.status.is_success() && created.status.as_u16() != 409 {
        return Err(err::io(format!("creating bucket {}: HTTP {}", args.bucket, created.status)));
    }
    let mut payload = vec![0u8; args.obj_size as usize];
    rand::rng().fill(&mut payload[..]);
    let shared = Arc::new(Shared {
        client,
        bucket: args.bucket.clone(),
        payload: Bytes::from(payload),
        existing: Mutex::new(Vec::new()),
        written: Mutex::new(Vec::new()),
        next_key: AtomicU64::new(0),
        prefix: format!("{:08x}", rand::random::<u32>()),
    });
    let show = !args.no_progress && !args.json;
    if args.workload != Workload::Put {
        let bar = progress(show, args.objects as u64, "preparing");
        let next = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..args.concurrent.max(1))
            .map(|_| {
                let (shared, next, bar, total) = (shared.clone(), next.clone(), bar.clone(), args.objects as u64);
                tokio::spawn(async move {
                    while next.fetch_add(1, Ordering::Relaxed) < total {
                        retrying(|| shared.put()).await?;
                        bar.inc(1);
                    }
                    Ok::<_, shoal_types::RadosError>(())
                })
            })
            .collect();
        for t in tasks {
            t.await.map_err(|e| err::io(e.to_string()))??;
        }
        bar.finish_and_clear();
    }
    let choose = Arc::new(choose(&args)?);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let bar = progress(show, args.duration.as_secs().max(1), &format!("{:?}", args.workload).to_lowercase());
    let (cpu_start, server_start) = (process_cpu_seconds(), args.server_pid.map(cpu_of));
    let start = Instant::now();
    let ticker = {
        let (bar, done, stop) = (bar.clone(), done.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(250)).await;
                bar.set_position(start.elapsed().as_secs());
                bar.set_message(format!("{} ops", done.load(Ordering::Relaxed)));
            }
        })
    };
    let random_delete = args.workload == Workload::Mixed;
    let slowdowns = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..args.concurrent.max(1))
        .map(|_| {
            let (shared, choose, stop, done, duration, slowdowns) =
                (shared.clone(), choose.clone(), stop.clone(), done.clone(), args.duration, slowdowns.clone());
            tokio::spawn(async move {
                let mut recorded: Vec<Sample> = Vec::new();
                while !stop.load(Ordering::Relaxed) && start.elapsed() < duration {
                    let op = choose();
                    let t = Instant::now();
                    match shared.run(op, random_delete).await {
                        Ok(Some(bytes)) => {
                            recorded.push((op, t.elapsed().as_micros() as u64, bytes));
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        // Nothing left to read or delete: a delete run is over; mixed puts instead.
                        Ok(None) if op == Op::Delete && !random_delete => break,
                        Ok(None) => {
                            shared.put().await?;
                        }
                        // Throttled (503): counted, and tried again a little later, as warp does.
                        Err(e) if e.errno == Errno::Again => {
                            slowdowns.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                }
                Ok::<_, shoal_types::RadosError>(recorded)
            })
        })
        .collect();
    let mut all: Vec<Sample> = Vec::new();
    let mut failure = None;
    for t in tasks {
        match t.await.map_err(|e| err::io(e.to_string()))? {
            Ok(r) => {
                all.extend(r);
            }
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = ticker.await;
    bar.finish_and_clear();
    let client_cpu = process_cpu_seconds() - cpu_start;
    let server_cpu = args.server_pid.zip(server_start).map(|(pid, s)| cpu_of(pid) - s);
    if !args.noclear {
        cleanup(&shared, show).await?;
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let slowdowns = slowdowns.load(Ordering::Relaxed);
    print_rows(&rows(&args, &all, elapsed, client_cpu, server_cpu, slowdowns), args.json);
    Ok(())
}

fn stats_of(all: &[Sample], op: Option<Op>, elapsed: Duration) -> RunStats {
    let wanted = |o: &Op| op.is_none_or(|w| w == *o);
    let mut latencies_us: Vec<u64> = all.iter().filter(|(o, ..)| wanted(o)).map(|(_, l, _)| *l).collect();
    latencies_us.sort_unstable();
    RunStats {
        ops: latencies_us.len() as u64,
        bytes: all.iter().filter(|(o, ..)| wanted(o)).map(|(.., b)| *b).sum(),
        elapsed,
        latencies_us,
        cpu_secs: 0.0,
    }
}

fn rows(
    args: &S3BenchArgs,
    all: &[Sample],
    elapsed: Duration,
    client_cpu: f64,
    server_cpu: Option<f64>,
    slowdowns: u64,
) -> Vec<Vec<(&'static str, Value)>> {
    // CPU is measured for the whole run, so every row carries the same figures.
    let row = |name: &str, stats: &RunStats| {
        vec![
            ("op", Value::from(name)),
            ("obj_size", Value::from(args.obj_size)),
            ("concurrent", Value::from(args.concurrent)),
            ("ops", Value::from(stats.ops)),
            ("ops_per_sec", round(stats.ops_per_sec(), 1)),
            ("mib_per_sec", round(stats.bytes as f64 / (1 << 20) as f64 / elapsed.as_secs_f64().max(1e-9), 2)),
            ("p50_ms", round(stats.percentile_ms(0.50), 3)),
            ("p90_ms", round(stats.percentile_ms(0.90), 3)),
            ("p99_ms", round(stats.percentile_ms(0.99), 3)),
            ("slowdowns", Value::from(slowdowns)),
            ("client_cpu_s", round(client_cpu, 2)),
            ("server_cpu_s", server_cpu.map_or(Value::Null, |c| round(c, 2))),
        ]
    };
    let mut rows: Vec<_> = [Op::Get, Op::Put, Op::Stat, Op::Delete]
        .into_iter()
        .map(|op| (op, stats_of(all, Some(op), elapsed)))
        .filter(|(_, s)| s.ops > 0)
        .map(|(op, s)| row(op.name(), &s))
        .collect();
    if rows.len() > 1 {
        rows.push(row("TOTAL", &stats_of(all, None, elapsed)));
    }
    rows
}

/// Runs `op` until it does not answer EAGAIN (503 SlowDown), pausing 10 ms between tries.
async fn retrying<T, F, Fut>(op: F) -> Result<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    loop {
        match op().await {
            Err(e) if e.errno == Errno::Again => tokio::time::sleep(Duration::from_millis(10)).await,
            other => return other,
        }
    }
}

/// Deletes every object the run wrote, 1000 per DeleteObjects request.
async fn cleanup(shared: &Arc<Shared>, show: bool) -> Result<()> {
    use base64::Engine;
    use md5::Digest;
    let keys: Vec<String> =
        std::mem::take(&mut *shared.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    let bar = progress(show, keys.len() as u64, "cleanup");
    let batches: Vec<Vec<String>> = keys.chunks(1000).map(<[String]>::to_vec).collect();
    let results = futures::future::join_all(batches.into_iter().map(|batch| {
        let (shared, bar) = (shared.clone(), bar.clone());
        async move {
            let objects: String = batch.iter().map(|k| format!("<Object><Key>{k}</Key></Object>")).collect();
            let body = Bytes::from(format!("<Delete><Quiet>true</Quiet>{objects}</Delete>"));
            let md5 = base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(&body));
            let path = format!("/{}", shared.bucket);
            let headers = [("content-md5", md5)];
            retrying(|| shared.client.expect_ok_with(Method::POST, &path, &[("delete", "")], &headers, body.clone()))
                .await?;
            bar.inc(batch.len() as u64);
            Ok::<_, shoal_types::RadosError>(())
        }
    }))
    .await;
    bar.finish_and_clear();
    results.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_parse() {
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("10"), Ok(10));
        assert!(parse_size("4XB").is_err());
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("soon").is_err());
    }
}
