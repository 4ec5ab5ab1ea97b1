//! `shoal bench s3`: a load generator speaking S3 (SigV4) to any endpoint, with the
//! workloads of MinIO's warp: put, get, delete, list and mixed (GET/PUT/HEAD/DELETE by
//! percentages), in plain or versioned buckets, and the lifecycle experiment (`expire`),
//! reporting ops/s, keys/s, MiB/s and p50/p90/p99 latency per operation.

use crate::s3client::S3Client;
use bytes::Bytes;
use clap::{Args, ValueEnum};
use futures::StreamExt;
use http::Method;
use rand::Rng;
use serde_json::Value;
use shoal_node::bench::{RunStats, print_rows, process_cpu_seconds, round};
use shoal_types::{Errno, Result, err};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use timeline::Op;

pub mod reef;
mod timeline;

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
    /// List pages of 1000 prepared objects (ListObjectsV2, or ListObjectVersions with
    /// `--list-versions`), each from a random key on.
    List,
    /// PUT rounds alternating with rounds in which a lifecycle rule expires `--objects`
    /// objects of a second bucket (the server needs `rgw_lc_debug_interval`, e.g. 1).
    Expire,
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
    /// Objects prepared for get, delete, list, mixed and expire.
    #[arg(long, default_value_t = 1000)]
    pub objects: usize,
    /// Versions written of each prepared object (overwrites unless `--versioned`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub versions: u32,
    /// Turn versioning on in the bucket (cleanup then removes every version written).
    #[arg(long)]
    pub versioned: bool,
    /// Give the bucket a policy of this many statements, none of which applies to the
    /// benchmark's requests, so that each request evaluates them all (0: remove any
    /// policy; not given: leave the bucket's policy alone, as servers without bucket
    /// policies need).
    #[arg(long)]
    pub policy_statements: Option<usize>,
    /// Give the bucket this default encryption (`AES256`: SSE-S3; `aws:kms`), so that
    /// every object written is encrypted (`none`: remove any; not given: leave it alone,
    /// as servers without default encryption need: radosgw 16.2 takes `DELETE
    /// /bucket?encryption` for a DeleteBucket).
    #[arg(long, value_name = "ALGORITHM")]
    pub bucket_encryption: Option<String>,
    /// The certificate authority (PEM) of an https:// endpoint.
    #[arg(long, value_name = "FILE")]
    pub ca: Option<std::path::PathBuf>,
    /// List: ListObjectVersions instead of ListObjectsV2.
    #[arg(long)]
    pub list_versions: bool,
    /// Expire: how many pairs of rounds (one while objects expire, one without).
    #[arg(long, default_value_t = 3)]
    pub rounds: u32,
    /// Bucket to use (created if missing).
    #[arg(long, default_value = "shoal-bench")]
    pub bucket: String,
    /// Prefix of the keys written (default: a random one per run).
    #[arg(long)]
    pub prefix: Option<String>,
    /// The `--objects` objects exist already under `--prefix` (written by an earlier run
    /// with `--noclear`): use them instead of preparing new ones.
    #[arg(long, requires = "prefix")]
    pub no_prepare: bool,
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
    /// Also report the CPU seconds these processes (e.g. `shoal server`, or a gateway and
    /// its OSDs: repeat the option or separate PIDs with commas) used during the run.
    #[arg(long, value_name = "PID", value_delimiter = ',')]
    pub server_pid: Vec<u32>,
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

struct Shared {
    client: S3Client,
    bucket: String,
    payload: Bytes,
    /// Keys that exist (for GET/HEAD/DELETE/LIST), and every key and version written
    /// (for cleanup).
    existing: Mutex<Vec<String>>,
    written: Mutex<Vec<(String, Option<String>)>>,
    next_key: AtomicU64,
    prefix: String,
    list_versions: bool,
    /// Mixed PUTs overwrite a random existing key once this many exist (none: always new
    /// keys), so that a long run keeps the object count, as an aging workload does.
    keep_objects: Option<usize>,
    /// GETs answered with other bytes than were written.
    wrong_data: AtomicU64,
}

impl Shared {
    fn new(client: S3Client, bucket: &str, prefix: Option<&str>, payload: Bytes, list_versions: bool) -> Shared {
        Shared {
            client,
            bucket: bucket.to_owned(),
            payload,
            existing: Mutex::new(Vec::new()),
            written: Mutex::new(Vec::new()),
            next_key: AtomicU64::new(0),
            prefix: prefix.map_or_else(|| format!("{:08x}", rand::random::<u32>()), str::to_owned),
            list_versions,
            keep_objects: None,
            wrong_data: AtomicU64::new(0),
        }
    }

    fn key(&self, n: u64) -> String {
        format!("{}/obj{n:08}", self.prefix)
    }

    fn new_key(&self) -> String {
        self.key(self.next_key.fetch_add(1, Ordering::Relaxed))
    }

    /// Creates the bucket if missing (and turns versioning on if asked).
    async fn create_bucket(&self, versioned: bool) -> Result<()> {
        let path = format!("/{}", self.bucket);
        let created = self.client.send(Method::PUT, &path, &[], Bytes::new()).await?;
        if !created.status.is_success() && created.status.as_u16() != 409 {
            return Err(err::io(format!("creating bucket {}: HTTP {}", self.bucket, created.status)));
        }
        if versioned {
            let body = "<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>";
            self.client.expect_ok(Method::PUT, &path, &[("versioning", "")], Bytes::from(body)).await?;
        }
        Ok(())
    }

    /// Puts the bucket's subresource `name` (`policy`, `encryption`) with `body`, or
    /// removes it without one.
    async fn set_subresource(&self, name: &str, body: Option<String>) -> Result<()> {
        let path = format!("/{}", self.bucket);
        let Some(body) = body else {
            let removed = self.client.send(Method::DELETE, &path, &[(name, "")], Bytes::new()).await?;
            return match removed.status.is_success() {
                true => Ok(()),
                false => Err(err::io(format!("removing the {name} of {}: HTTP {}", self.bucket, removed.status))),
            };
        };
        self.client.expect_ok(Method::PUT, &path, &[(name, "")], Bytes::from(body)).await?;
        Ok(())
    }

    /// Sets the bucket's default encryption to `algorithm` (removes it without one).
    async fn set_encryption(&self, algorithm: Option<&str>) -> Result<()> {
        let body = algorithm.map(|a| {
            format!(
                "<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault>\
                 <SSEAlgorithm>{a}</SSEAlgorithm></ApplyServerSideEncryptionByDefault></Rule>\
                 </ServerSideEncryptionConfiguration>"
            )
        });
        self.set_subresource("encryption", body).await
    }

    /// Puts a bucket policy of `statements` statements (removes it for 0): denials of other
    /// keys and allowances from other networks, so that all are evaluated and none applies.
    async fn set_policy(&self, statements: usize) -> Result<()> {
        if statements == 0 {
            return self.set_subresource("policy", None).await;
        }
        let arn = format!("arn:aws:s3:::{}", self.bucket);
        let list: Vec<serde_json::Value> = (0..statements)
            .map(|i| match i % 2 {
                0 => serde_json::json!({
                    "Sid": format!("deny{i}"), "Effect": "Deny", "Principal": "*",
                    "Action": ["s3:GetObject", "s3:PutObject"], "Resource": format!("{arn}/never-{i}/*"),
                }),
                _ => serde_json::json!({
                    "Sid": format!("allow{i}"), "Effect": "Allow", "Principal": "*", "Action": "s3:*",
                    "Resource": [arn.clone(), format!("{arn}/*")],
                    "Condition": {"IpAddress": {"aws:SourceIp": format!("10.{}.0.0/16", i % 256)}},
                }),
            })
            .collect();
        let policy = serde_json::json!({"Version": "2012-10-17", "Statement": list}).to_string();
        self.set_subresource("policy", Some(policy)).await
    }

    /// Takes the keys of `objects` objects an earlier run left as existing (not to be
    /// cleaned up by this one).
    fn adopt(&self, objects: u64) {
        let first = self.next_key.fetch_add(objects, Ordering::Relaxed);
        let mut existing = self.existing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        existing.extend((first..first + objects).map(|n| self.key(n)));
    }

    /// Writes `objects` new keys `versions` times each from `concurrent` clients.
    async fn prepare(self: &Arc<Self>, objects: u64, versions: u32, concurrent: usize, show: bool) -> Result<()> {
        let first = self.next_key.fetch_add(objects, Ordering::Relaxed);
        let total = objects * u64::from(versions);
        let bar = progress(show, total, "preparing");
        let next = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..concurrent.max(1))
            .map(|_| {
                let (shared, next, bar) = (self.clone(), next.clone(), bar.clone());
                tokio::spawn(async move {
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        if n >= total {
                            return Ok::<_, shoal_types::RadosError>(());
                        }
                        let key = shared.key(first + n % objects);
                        retrying(|| shared.put(&key, n < objects)).await?;
                        bar.inc(1);
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.map_err(|e| err::io(e.to_string()))??;
        }
        bar.finish_and_clear();
        Ok(())
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

    /// PUTs `key`, remembering the version written (and the key, if `new`).
    async fn put(&self, key: &str, new: bool) -> Result<u64> {
        let response =
            self.client.expect_ok(Method::PUT, &format!("/{}/{key}", self.bucket), &[], self.payload.clone()).await?;
        let version = response.headers.get("x-amz-version-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        self.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((key.to_owned(), version));
        if new {
            self.existing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(key.to_owned());
        }
        Ok(self.payload.len() as u64)
    }

    /// Lists one page of up to 1000 entries from a random existing key on.
    async fn list_page(&self) -> Result<Option<Moved>> {
        let Some(from) = self.random_existing() else { return Ok(None) };
        let query: &[(&str, &str)] = if self.list_versions {
            &[("versions", ""), ("key-marker", &from), ("prefix", &self.prefix)]
        } else {
            &[("list-type", "2"), ("start-after", &from), ("prefix", &self.prefix)]
        };
        let response = self.client.send(Method::GET, &format!("/{}", self.bucket), query, Bytes::new()).await?;
        match response.status.as_u16() {
            200 => {
                let body = String::from_utf8_lossy(&response.body);
                Ok(Some(Moved { bytes: 0, keys: body.matches("<Key>").count() as u64 }))
            }
            503 => Err(err::again("LIST: HTTP 503")),
            status => Err(err::io(format!("LIST: HTTP {status}"))),
        }
    }

    /// Runs one operation; `None` when there was nothing to do it on.
    async fn run(&self, op: Op, random_delete: bool) -> Result<Option<Moved>> {
        let path = |key: &str| format!("/{}/{key}", self.bucket);
        match op {
            Op::Put => {
                let existing = self.existing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len();
                let overwrite = self.keep_objects.is_some_and(|keep| existing >= keep.max(1));
                let key = if overwrite { self.random_existing() } else { None };
                let written = match key {
                    Some(key) => self.put(&key, false).await?,
                    None => self.put(&self.new_key(), true).await?,
                };
                Ok(Some(Moved { bytes: written, keys: 1 }))
            }
            Op::Get => {
                let Some(key) = self.random_existing() else { return Ok(None) };
                let response = self.client.send(Method::GET, &path(&key), &[], Bytes::new()).await?;
                match response.status.as_u16() {
                    200 if response.body == self.payload => Ok(Some(Moved::key(response.body.len()))),
                    200 => {
                        self.wrong_data.fetch_add(1, Ordering::Relaxed);
                        Err(err::io(format!("GET {key}: {} bytes, not those written", response.body.len())))
                    }
                    404 => Ok(Some(Moved::key(0))), // deleted meanwhile by another client
                    503 => Err(err::again(format!("GET {key}: HTTP 503"))),
                    status => Err(err::io(format!("GET {key}: HTTP {status}, {} bytes", response.body.len()))),
                }
            }
            Op::Stat => {
                let Some(key) = self.random_existing() else { return Ok(None) };
                let response = self.client.send(Method::HEAD, &path(&key), &[], Bytes::new()).await?;
                match response.status.as_u16() {
                    200 | 404 => Ok(Some(Moved::key(0))),
                    503 => Err(err::again(format!("HEAD {key}: HTTP 503"))),
                    status => Err(err::io(format!("HEAD {key}: HTTP {status}"))),
                }
            }
            Op::Delete => {
                let Some(key) = self.take_existing(random_delete) else { return Ok(None) };
                self.client.expect_ok(Method::DELETE, &path(&key), &[], Bytes::new()).await?;
                Ok(Some(Moved::key(0)))
            }
            Op::List => self.list_page().await,
        }
    }
}

/// What one operation moved: payload bytes, and keys read, written or listed.
#[derive(Clone, Copy, Debug)]
struct Moved {
    bytes: u64,
    keys: u64,
}

impl Moved {
    /// An operation on one key moving `bytes` of payload.
    fn key(bytes: usize) -> Moved {
        Moved { bytes: bytes as u64, keys: 1 }
    }
}

/// One completed operation: what it was, its latency in µs and what it moved.
type Sample = (Op, u64, Moved);

/// Picks the next operation of a client.
type Chooser = Arc<dyn Fn() -> Op + Send + Sync>;

fn choose(args: &S3BenchArgs) -> Result<Chooser> {
    let only = |op: Op| -> Chooser { Arc::new(move || op) };
    Ok(match args.workload {
        Workload::Put | Workload::Expire => only(Op::Put),
        Workload::Get => only(Op::Get),
        Workload::List => only(Op::List),
        Workload::Delete => only(Op::Delete),
        Workload::Mixed => mixed([
            (Op::Get, args.get_distrib),
            (Op::Put, args.put_distrib),
            (Op::Stat, args.stat_distrib),
            (Op::Delete, args.delete_distrib),
        ])?,
    })
}

/// Operations drawn at random in proportion to their `weights`.
fn mixed(weights: [(Op, f64); 4]) -> Result<Chooser> {
    let total: f64 = weights.iter().map(|(_, w)| w).sum();
    if weights.iter().any(|(_, w)| *w < 0.0) || total <= 0.0 {
        return Err(err::invalid("the --*-distrib percentages must be ≥ 0 and not all 0"));
    }
    Ok(Arc::new(move || {
        let mut x = rand::rng().random_range(0.0..total);
        for (op, w) in weights {
            if x < w {
                return op;
            }
            x -= w;
        }
        Op::Get
    }))
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
    let client = S3Client::connect(&args.endpoint, &access, &secret, args.ca.as_deref())?;
    let mut payload = vec![0u8; args.obj_size as usize];
    rand::rng().fill(&mut payload[..]);
    let shared =
        Arc::new(Shared::new(client, &args.bucket, args.prefix.as_deref(), Bytes::from(payload), args.list_versions));
    shared.create_bucket(args.versioned).await?;
    if let Some(statements) = args.policy_statements {
        shared.set_policy(statements).await?;
    }
    match args.bucket_encryption.as_deref() {
        None => {}
        Some("none") => shared.set_encryption(None).await?,
        Some(algorithm) => shared.set_encryption(Some(algorithm)).await?,
    }
    let show = !args.no_progress && !args.json;
    if args.no_prepare {
        shared.adopt(args.objects as u64);
    } else if !matches!(args.workload, Workload::Put | Workload::Expire) {
        shared.prepare(args.objects as u64, args.versions, args.concurrent, show).await?;
    }
    let load = Load {
        shared: shared.clone(),
        choose: choose(&args)?,
        concurrent: args.concurrent.max(1),
        random_delete: args.workload == Workload::Mixed,
        server_pids: args.server_pid.clone(),
        show,
        timeline: None,
        tolerate_errors: false,
    };
    let rows = match args.workload {
        Workload::Expire => run_expire(&args, &load).await,
        _ => load.round(args.duration, &Arc::new(AtomicBool::new(false))).await.map(|r| r.rows(&args, "")),
    };
    if let Ok(rows) = &rows {
        print_rows(rows, args.json);
    }
    if !args.noclear {
        cleanup(&shared, args.concurrent.max(1), show).await?;
    }
    rows.map(drop)
}

/// A load: which operations, on what, from how many clients.
struct Load {
    shared: Arc<Shared>,
    choose: Chooser,
    concurrent: usize,
    random_delete: bool,
    /// Processes whose CPU seconds the round adds up (none: not reported).
    server_pids: Vec<u32>,
    show: bool,
    /// Where completed operations are also counted per second.
    timeline: Option<Arc<timeline::Timeline>>,
    /// Count failed operations and go on (a run under faults) rather than stop the run.
    tolerate_errors: bool,
}

/// What one round of load measured.
struct Round {
    samples: Vec<Sample>,
    elapsed: Duration,
    client_cpu: f64,
    server_cpu: Option<f64>,
    slowdowns: u64,
    lost_connections: u64,
}

impl Load {
    /// The CPU seconds the server processes used so far, summed.
    fn server_cpu(&self) -> Option<f64> {
        (!self.server_pids.is_empty()).then(|| self.server_pids.iter().map(|&pid| cpu_of(pid)).sum())
    }

    /// Runs the load until `duration` has passed or `stop` is set.
    async fn round(&self, duration: Duration, stop: &Arc<AtomicBool>) -> Result<Round> {
        let done = Arc::new(AtomicU64::new(0));
        let bar = progress(self.show, duration.as_secs().max(1), "running");
        let (cpu_start, server_start) = (process_cpu_seconds(), self.server_cpu());
        let start = Instant::now();
        let finished = Arc::new(AtomicBool::new(false));
        let ticker = {
            let (bar, done, finished) = (bar.clone(), done.clone(), finished.clone());
            tokio::spawn(async move {
                while !finished.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    bar.set_position(start.elapsed().as_secs());
                    bar.set_message(format!("{} ops", done.load(Ordering::Relaxed)));
                }
            })
        };
        let (slowdowns, lost) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let tasks: Vec<_> = (0..self.concurrent)
            .map(|_| {
                let (shared, choose, stop, done) =
                    (self.shared.clone(), self.choose.clone(), stop.clone(), done.clone());
                let (slowdowns, lost) = (slowdowns.clone(), lost.clone());
                let (random_delete, timeline, tolerate) =
                    (self.random_delete, self.timeline.clone(), self.tolerate_errors);
                tokio::spawn(async move {
                    let mut recorded: Vec<Sample> = Vec::new();
                    while !stop.load(Ordering::Relaxed) && start.elapsed() < duration {
                        let op = choose();
                        let t = Instant::now();
                        match shared.run(op, random_delete).await {
                            Ok(Some(moved)) => {
                                let latency_us = t.elapsed().as_micros() as u64;
                                if let Some(timeline) = &timeline {
                                    timeline.record(op, latency_us, moved.bytes);
                                }
                                recorded.push((op, latency_us, moved));
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                            // Nothing left to read or delete: a delete run is over; mixed puts instead.
                            Ok(None) if op == Op::Delete && !random_delete => break,
                            Ok(None) => {
                                shared.put(&shared.new_key(), true).await?;
                            }
                            // Throttled (503): counted, and tried again a little later, as warp does.
                            Err(e) if e.errno == Errno::Again => {
                                slowdowns.fetch_add(1, Ordering::Relaxed);
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            // A connection lost: counted and reported, and the client goes on.
                            Err(e) if e.errno == Errno::NotConnected => {
                                if lost.fetch_add(1, Ordering::Relaxed) == 0 {
                                    eprintln!("warning: {e}");
                                }
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                            Err(e) if tolerate => {
                                if let Some(timeline) = &timeline {
                                    timeline.error();
                                }
                                tracing::warn!(error = %e, "operation failed");
                                tokio::time::sleep(Duration::from_millis(100)).await;
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
        let mut samples: Vec<Sample> = Vec::new();
        let mut failure = None;
        for t in tasks {
            match t.await.map_err(|e| err::io(e.to_string()))? {
                Ok(r) => samples.extend(r),
                Err(e) => failure = failure.or(Some(e)),
            }
        }
        let elapsed = start.elapsed();
        finished.store(true, Ordering::Relaxed);
        let _ = ticker.await;
        bar.finish_and_clear();
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(Round {
            samples,
            elapsed,
            client_cpu: process_cpu_seconds() - cpu_start,
            server_cpu: self.server_cpu().zip(server_start).map(|(now, start)| now - start),
            slowdowns: slowdowns.load(Ordering::Relaxed),
            lost_connections: lost.load(Ordering::Relaxed),
        })
    }
}

/// One output row.
type Row = Vec<(&'static str, Value)>;

impl Round {
    /// `round` pooled into `earlier` (samples joined, times, CPU and slowdowns added).
    fn merged(earlier: Option<Round>, round: Round) -> Round {
        let Some(mut pooled) = earlier else { return round };
        pooled.samples.extend(round.samples);
        pooled.elapsed += round.elapsed;
        pooled.client_cpu += round.client_cpu;
        pooled.server_cpu = pooled.server_cpu.zip(round.server_cpu).map(|(a, b)| a + b);
        pooled.slowdowns += round.slowdowns;
        pooled.lost_connections += round.lost_connections;
        pooled
    }

    fn stats(&self, op: Option<Op>) -> (RunStats, u64) {
        let wanted = |o: &Op| op.is_none_or(|w| w == *o);
        let chosen = || self.samples.iter().filter(|(o, ..)| wanted(o));
        let mut latencies_us: Vec<u64> = chosen().map(|(_, l, _)| *l).collect();
        latencies_us.sort_unstable();
        let stats = RunStats {
            ops: latencies_us.len() as u64,
            bytes: chosen().map(|(.., m)| m.bytes).sum(),
            elapsed: self.elapsed,
            latencies_us,
            cpu_secs: 0.0,
        };
        (stats, chosen().map(|(.., m)| m.keys).sum())
    }

    /// A row per operation (and a total when there are several), the names followed by `tag`.
    fn rows(&self, args: &S3BenchArgs, tag: &str) -> Vec<Row> {
        let mut rows: Vec<_> = [Op::Get, Op::Put, Op::Stat, Op::Delete, Op::List]
            .into_iter()
            .map(|op| (op, self.stats(Some(op))))
            .filter(|(_, (s, _))| s.ops > 0)
            .map(|(op, (s, keys))| self.row(args, &format!("{}{tag}", op.name()), &s, keys))
            .collect();
        if rows.len() > 1 {
            let (s, keys) = self.stats(None);
            rows.push(self.row(args, &format!("TOTAL{tag}"), &s, keys));
        }
        rows
    }

    /// One row; CPU is measured for the whole round, so every row of a round carries the
    /// same figures.
    fn row(&self, args: &S3BenchArgs, name: &str, stats: &RunStats, keys: u64) -> Row {
        let seconds = stats.elapsed.as_secs_f64().max(1e-9);
        let percentile =
            |p: f64| if stats.latencies_us.is_empty() { Value::Null } else { round(stats.percentile_ms(p), 3) };
        vec![
            ("op", Value::from(name)),
            ("obj_size", Value::from(args.obj_size)),
            ("concurrent", Value::from(args.concurrent)),
            ("ops", Value::from(stats.ops)),
            ("ops_per_sec", round(stats.ops_per_sec(), 1)),
            ("keys_per_sec", round(keys as f64 / seconds, 1)),
            ("mib_per_sec", round(stats.bytes as f64 / (1 << 20) as f64 / seconds, 2)),
            ("p50_ms", percentile(0.50)),
            ("p90_ms", percentile(0.90)),
            ("p99_ms", percentile(0.99)),
            ("slowdowns", Value::from(self.slowdowns)),
            ("lost_connections", Value::from(self.lost_connections)),
            ("client_cpu_s", round(self.client_cpu, 2)),
            ("server_cpu_s", self.server_cpu.map_or(Value::Null, |c| round(c, 2))),
        ]
    }
}

/// Runs `op` until it neither answers EAGAIN (503 SlowDown) nor loses its connection,
/// pausing 10 ms between tries.
async fn retrying<T, F, Fut>(op: F) -> Result<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    loop {
        match op().await {
            Err(e) if matches!(e.errno, Errno::Again | Errno::NotConnected) => {
                tokio::time::sleep(Duration::from_millis(10)).await
            }
            other => return other,
        }
    }
}

/// Deletes every object (every version, in a versioned bucket) the run wrote, 1000 per
/// DeleteObjects request, `concurrent` requests at a time.
async fn cleanup(shared: &Arc<Shared>, concurrent: usize, show: bool) -> Result<()> {
    use base64::Engine;
    use md5::Digest;
    let keys: Vec<(String, Option<String>)> =
        std::mem::take(&mut *shared.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    let bar = progress(show, keys.len() as u64, "cleanup");
    let batches: Vec<_> = keys.chunks(1000).map(<[_]>::to_vec).collect();
    let requests = batches.into_iter().map(|batch| {
        let (shared, bar) = (shared.clone(), bar.clone());
        async move {
            let object = |(key, version): &(String, Option<String>)| match version {
                Some(v) => format!("<Object><Key>{key}</Key><VersionId>{v}</VersionId></Object>"),
                None => format!("<Object><Key>{key}</Key></Object>"),
            };
            let objects: String = batch.iter().map(object).collect();
            let body = Bytes::from(format!("<Delete><Quiet>true</Quiet>{objects}</Delete>"));
            let md5 = base64::engine::general_purpose::STANDARD.encode(md5::Md5::digest(&body));
            let path = format!("/{}", shared.bucket);
            let headers = [("content-md5", md5)];
            retrying(|| shared.client.expect_ok_with(Method::POST, &path, &[("delete", "")], &headers, body.clone()))
                .await?;
            bar.inc(batch.len() as u64);
            Ok::<_, shoal_types::RadosError>(())
        }
    });
    let results: Vec<Result<()>> = futures::stream::iter(requests).buffer_unordered(concurrent).collect().await;
    bar.finish_and_clear();
    results.into_iter().collect()
}

// The lifecycle experiment (`--workload expire`): rounds of PUTs while a lifecycle rule
// expires `--objects` objects of a second bucket, each followed by a round of PUTs as
// long without one, so that the PUT rate with and without a pass compares in one run;
// and the pass's own rate, from setting the rule to the bucket listing empty.

/// How often the expiring bucket is listed to see whether it is empty.
const POLL: Duration = Duration::from_millis(100);

/// Runs `--rounds` pairs of rounds: rows for PUT while expiring, PUT without, and EXPIRE.
async fn run_expire(args: &S3BenchArgs, load: &Load) -> Result<Vec<Row>> {
    let bucket = format!("{}-expire", args.bucket);
    let target = Arc::new(Shared::new(load.shared.client.clone(), &bucket, None, load.shared.payload.clone(), false));
    target.create_bucket(false).await?;
    let (mut expiring, mut baseline): (Option<Round>, Option<Round>) = (None, None);
    let (mut expired, mut expiry_time) = (0u64, Duration::ZERO);
    for _ in 0..args.rounds {
        target.prepare(args.objects as u64, 1, args.concurrent, load.show).await?;
        let rule = format!(
            "<LifecycleConfiguration><Rule><ID>bench</ID><Status>Enabled</Status><Filter><Prefix>{}/</Prefix></Filter>\
             <Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>",
            target.prefix
        );
        let path = format!("/{bucket}");
        let rule = Bytes::from(rule);
        retrying(|| target.client.expect_ok(Method::PUT, &path, &[("lifecycle", "")], rule.clone())).await?;
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = tokio::spawn(wait_until_empty(target.clone(), stop.clone()));
        let round = load.round(args.duration, &stop).await;
        stop.store(true, Ordering::Relaxed);
        let emptied = watcher.await.map_err(|e| err::io(e.to_string()))??;
        let round = round?;
        let Some(took) = emptied else {
            return Err(err::timed_out(format!(
                "the lifecycle rule did not expire {} objects within {:?} (does the server run with \
                 rgw_lc_debug_interval=1?)",
                args.objects, args.duration
            )));
        };
        retrying(|| target.client.expect_ok(Method::DELETE, &path, &[("lifecycle", "")], Bytes::new())).await?;
        target.written.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        target.existing.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        let without = load.round(round.elapsed, &Arc::new(AtomicBool::new(false))).await?;
        (expired, expiry_time) = (expired + args.objects as u64, expiry_time + took);
        expiring = Some(Round::merged(expiring, round));
        baseline = Some(Round::merged(baseline, without));
    }
    let (Some(expiring), Some(baseline)) = (expiring, baseline) else {
        return Err(err::invalid("--rounds must be at least 1"));
    };
    let pass = RunStats {
        ops: expired,
        bytes: expired * args.obj_size,
        elapsed: expiry_time,
        latencies_us: Vec::new(),
        cpu_secs: 0.0,
    };
    let mut rows = expiring.rows(args, " (expiring)");
    rows.extend(baseline.rows(args, ""));
    rows.push(expiring.row(args, "EXPIRE", &pass, expired));
    Ok(rows)
}

/// Lists `target` until it holds none of its objects (`Some(time taken)`) or `stop` is set
/// (`None`).
async fn wait_until_empty(target: Arc<Shared>, stop: Arc<AtomicBool>) -> Result<Option<Duration>> {
    let start = Instant::now();
    let path = format!("/{}", target.bucket);
    let prefix = format!("{}/", target.prefix);
    let query = [("list-type", "2"), ("max-keys", "1"), ("prefix", prefix.as_str())];
    while !stop.load(Ordering::Relaxed) {
        let listed = match retrying(|| target.client.expect_ok(Method::GET, &path, &query, Bytes::new())).await {
            Ok(listed) => listed,
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
        };
        if String::from_utf8_lossy(&listed.body).contains("<KeyCount>0</KeyCount>") {
            stop.store(true, Ordering::Relaxed);
            return Ok(Some(start.elapsed()));
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(None)
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
