//! `shoal bench thrash`: random faults against a `shoal vstart` cluster (3 monitors, OSDs
//! on 3 or more hosts, S3 gateways) under RADOS and S3 load, one fault at a time: SIGKILL
//! and restart of an OSD, of all OSDs of one host, of the monitor leader, of a gateway;
//! SIGSTOP of an OSD past the heartbeat grace, then SIGCONT; on a `vstart --netns`
//! cluster, a host cut off from the others (its namespace's link down) and joined again;
//! and growth, which stays: copies moved by upmap exceptions, an OSD's override weight
//! set, the thrasher's pool split (pg_num doubled, up to 128), a new OSD started on a host,
//! an added OSD drained, stopped and purged. Writers keep a log of what
//! was acknowledged; the bucket's events go through a persistent topic to a receiver the
//! thrasher runs ([`events`]). At the end every PG must be active+clean, a deep scrub of
//! every PG clean, every acknowledged write present (or a newer one of the same writer),
//! every acknowledged PUT's event delivered in its key's order, and every daemon
//! answering. It prints a timeline (faults, client ops/s, events delivered, PG states per
//! second) and a summary.

mod events;
mod workload;

/// The pool the object part of the thrasher writes.
const POOL: &str = "thrash";

use crate::recovery_bench::{wait_clean, wait_settled};
use crate::s3client::S3Client;
use clap::Args;
use http::Method;
use rand::{Rng, SeedableRng};
use shoal_client::{IoCtx, Rados};
use shoal_node::admin_cmd::last_scrub;
use shoal_node::bench::print_rows;
use shoal_node::session::ClusterArgs;
use shoal_node::vstart;
use shoal_types::{OsdId, PgId, PoolSpec, Result, err};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use workload::{BUCKET, payload};

/// Arguments of `shoal bench thrash`.
#[derive(Args, Debug)]
pub struct ThrashArgs {
    /// The directory of a running `shoal vstart` cluster, started with `--mons 3` and
    /// `--gateways 1` or more.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Faults to inject.
    #[arg(long, default_value_t = 100)]
    faults: u32,
    /// Seed of the fault schedule (random if not given; printed).
    #[arg(long)]
    seed: Option<u64>,
    /// RADOS writers.
    #[arg(long, default_value_t = 6)]
    rados_writers: usize,
    /// S3 writers (spread over the gateways).
    #[arg(long, default_value_t = 4)]
    s3_writers: usize,
    /// Print the timeline and summary as JSON rows.
    #[arg(long)]
    json: bool,
}

const OBJECTS_PER_WRITER: u64 = 8;
/// Heartbeat settings the run uses, so that a fault is noticed within seconds.
const HEARTBEAT_INTERVAL: &str = "0.5";
const HEARTBEAT_GRACE_SECS: u64 = 3;
/// Notification queue leases the run uses (seconds), so that the shards of a killed
/// gateway are delivered again within seconds, and how often they are renewed.
const NOTIFY_LEASE: &str = "10";
const NOTIFY_POLL: &str = "1";
/// How long the events of acknowledged PUTs may take to arrive once the cluster is clean.
const DELIVERY_LIMIT: Duration = Duration::from_secs(180);

/// One printed row: named columns.
type Row = Vec<(&'static str, serde_json::Value)>;

/// One fault of the schedule.
#[derive(Clone, Debug)]
enum Fault {
    KillOsd(u32),
    KillHost(String),
    StopOsd(u32),
    KillMonLeader,
    KillGateway(String),
    /// Cut a host's namespace off by its link (host, link).
    Partition(String, String),
    /// Move a few copies by upmap exceptions, as the balancer does, or remove them all.
    Upmap,
    /// Set an OSD's override weight (16.16, half to whole): copies move off it or back.
    Reweight(u32, u32),
    /// Double the pg_num of the thrasher's pool (every PG splits; pgp_num follows in steps).
    Split,
    /// Halve the pg_num of the thrasher's pool (pgp_num comes down, then the PGs merge).
    Merge,
    /// Start a new OSD on a host (a new disk).
    AddOsd(String),
    /// Drain an OSD the run added (out, until every PG is clean), stop and purge it.
    RemoveOsd(u32),
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::KillOsd(id) => write!(f, "kill osd.{id}"),
            Fault::KillHost(host) => write!(f, "kill {host}"),
            Fault::StopOsd(id) => write!(f, "stop osd.{id}"),
            Fault::KillMonLeader => write!(f, "kill mon leader"),
            Fault::KillGateway(name) => write!(f, "kill {name}"),
            Fault::Partition(host, _) => write!(f, "partition {host}"),
            Fault::Upmap => write!(f, "upmap moves"),
            Fault::Reweight(id, w) => write!(f, "reweight osd.{id} to {:.2}", f64::from(*w) / 65536.0),
            Fault::Split => write!(f, "double pg_num of {POOL}"),
            Fault::Merge => write!(f, "halve pg_num of {POOL}"),
            Fault::AddOsd(host) => write!(f, "add an OSD on {host}"),
            Fault::RemoveOsd(id) => write!(f, "drain and purge osd.{id}"),
        }
    }
}

/// The largest pg_num the thrasher splits its pool to.
const MAX_SPLIT_PG_NUM: u32 = 128;
/// The smallest pg_num the thrasher merges its pool to.
const MIN_MERGE_PG_NUM: u32 = 8;
/// The most OSDs the thrasher has added at once.
const MAX_ADDED_OSDS: usize = 2;

/// What the writers logged: per object or key, the newest sequence number acknowledged
/// and the newest attempted.
#[derive(Default)]
struct Ledger {
    acked: Mutex<BTreeMap<String, u64>>,
    attempted: Mutex<BTreeMap<String, u64>>,
    ops: AtomicU64,
    errors: AtomicU64,
}

impl Ledger {
    fn attempt(&self, key: &str, seq: u64) {
        self.attempted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key.to_owned(), seq);
    }

    fn ack(&self, key: &str, seq: u64) {
        self.acked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key.to_owned(), seq);
        self.ops.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether `found` (the sequence number read back, `None`: absent) is one the log
    /// allows for `key`: at least the acknowledged one, at most the attempted one.
    fn check(&self, key: &str, found: Option<u64>) -> std::result::Result<(), String> {
        let acked = self.acked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key).copied();
        let attempted = self.attempted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key).copied();
        match (acked, found) {
            (Some(a), None) => Err(format!("{key}: write {a} was acknowledged, the object is gone")),
            (Some(a), Some(f)) if f < a => Err(format!("{key}: write {a} was acknowledged, {f} is there")),
            (_, Some(f)) if attempted.is_none_or(|t| f > t) => Err(format!("{key}: {f} was never written")),
            _ => Ok(()),
        }
    }
}

/// What the clients logged: RADOS writes, S3 PUTs and the events delivered.
#[derive(Default)]
struct Logs {
    rados: Ledger,
    s3: Ledger,
    events: Arc<events::Events>,
}

/// Runs the faults and the checks; prints the timeline and the summary.
pub async fn run(args: ThrashArgs) -> Result<()> {
    let dir = args.dir.clone();
    let seed = args.seed.unwrap_or_else(rand::random);
    eprintln!("thrash: seed {seed}, {} faults", args.faults);
    let conf = dir.join("shoal.conf");
    shoal(&conf, &["config", "set", "global", "osd_heartbeat_interval", HEARTBEAT_INTERVAL])?;
    shoal(&conf, &["config", "set", "global", "osd_heartbeat_grace", &HEARTBEAT_GRACE_SECS.to_string()])?;
    shoal(&conf, &["config", "set", "global", "rgw_notify_lock_duration", NOTIFY_LEASE])?;
    shoal(&conf, &["config", "set", "global", "rgw_notify_poll_interval", NOTIFY_POLL])?;
    let cluster = ClusterArgs::from_conf(conf.clone());
    let session = cluster.open().await?;
    let rados = session.rados.clone();
    rados.set_op_timeout(Duration::from_secs(120));
    if rados.map().by_name(POOL).is_some() {
        rados.pool_delete(POOL).await?;
    }
    rados.pool_create(PoolSpec { name: POOL.into(), pg_num: 32, size: 3, min_size: 2 }).await?;
    let io = rados.ioctx(POOL).await?;
    let gateways = vstart::gateways(&dir)?;
    if gateways.is_empty() {
        return Err(err::invalid(format!("no gateway runs in {}: start vstart with --gateways 2", dir.display())));
    }
    let clients = s3_clients(&conf, &gateways)?;
    // The gateways take the notification options at start.
    for (name, _) in &gateways {
        kill_for(&dir, std::slice::from_ref(name), Duration::ZERO).await?;
    }
    for client in &clients {
        wait_answering(client).await?;
    }
    create_bucket(&clients[0], BUCKET).await?;
    let logs = Arc::new(Logs::default());
    events::subscribe(&clients[0], &logs.events.serve().await?).await?;
    wait_clean(&rados, Duration::from_secs(120)).await?;

    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for writer in 0..args.rados_writers {
        load.push(tokio::spawn(rados_writer(io.clone(), writer, logs.clone(), stop.clone())));
    }
    for writer in 0..args.s3_writers {
        let client = clients[writer % clients.len()].clone();
        load.push(tokio::spawn(s3_writer(client, writer, logs.clone(), stop.clone())));
    }
    let timeline = Arc::new(Mutex::new(Vec::new()));
    let current_fault = Arc::new(Mutex::new(String::new()));
    let sampler =
        tokio::spawn(sample(rados.clone(), logs.clone(), current_fault.clone(), timeline.clone(), stop.clone()));

    let links = vstart::Namespaces::links(&dir);
    if links.is_empty() {
        eprintln!("thrash: no network partitions: the cluster was not started with `shoal vstart --netns`");
    }
    let started = Instant::now();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut counts: BTreeMap<&'static str, u32> = BTreeMap::new();
    let mut added = Vec::new();
    for n in 1..=args.faults {
        let fault = pick(&mut rng, &rados, &gateways, &links, &added).await?;
        *counts.entry(kind(&fault)).or_default() += 1;
        eprintln!("[{:>6.1}s] fault {n}/{}: {fault}", started.elapsed().as_secs_f64(), args.faults);
        *current_fault.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = fault.to_string();
        inject(&dir, &rados, &fault, &mut rng, &mut added).await?;
        heal(&rados).await?;
    }
    let faults_done = started.elapsed();
    current_fault.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.map_err(|e| err::io(e.to_string()))?;
    }
    let cleaned_at = Instant::now();
    wait_settled(&rados, Duration::from_secs(300)).await?;
    let to_clean = cleaned_at.elapsed();
    sampler.await.map_err(|e| err::io(e.to_string()))?;
    let to_deliver = logs.events.wait_delivered(DELIVERY_LIMIT).await;

    let scrub_errors = deep_scrub_all(&rados).await?;
    let mut problems = verify(&io, &clients, &logs).await;
    problems.extend(scrub_errors);
    problems.extend(logs.events.problems());
    problems.extend(unanswered_daemons(&rados, &clients).await);

    let rows: Vec<_> = timeline.lock().unwrap_or_else(std::sync::PoisonError::into_inner).drain(..).collect();
    print_rows(&rows, args.json);
    if !args.json {
        println!();
    }
    let count = |log: &Ledger| log.acked.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len();
    let (rados_log, s3_log) = (&logs.rados, &logs.s3);
    let (deliveries, repeats) = logs.events.deliveries();
    let lags = logs.events.lags();
    let lag = |q: f64| {
        let at = ((lags.len() as f64 * q) as usize).min(lags.len().saturating_sub(1));
        shoal_node::bench::round(lags.get(at).map_or(0.0, Duration::as_secs_f64), 2)
    };
    let summary = vec![
        ("seed", serde_json::Value::from(seed)),
        ("faults", serde_json::Value::from(args.faults)),
        ("by_kind", serde_json::Value::from(format!("{counts:?}"))),
        ("fault_seconds", shoal_node::bench::round(faults_done.as_secs_f64(), 1)),
        ("seconds_to_clean_after", shoal_node::bench::round(to_clean.as_secs_f64(), 1)),
        ("rados_acked", serde_json::Value::from(rados_log.ops.load(Ordering::Relaxed))),
        ("rados_objects", serde_json::Value::from(count(rados_log))),
        ("rados_errors", serde_json::Value::from(rados_log.errors.load(Ordering::Relaxed))),
        ("s3_acked", serde_json::Value::from(s3_log.ops.load(Ordering::Relaxed))),
        ("s3_keys", serde_json::Value::from(count(s3_log))),
        ("s3_errors", serde_json::Value::from(s3_log.errors.load(Ordering::Relaxed))),
        ("events_delivered", serde_json::Value::from(deliveries)),
        ("events_repeated", serde_json::Value::from(repeats)),
        ("pushes_refused", serde_json::Value::from(logs.events.refused.load(Ordering::Relaxed))),
        ("event_lag_p50_s", lag(0.5)),
        ("event_lag_p99_s", lag(0.99)),
        ("event_lag_max_s", lag(1.0)),
        ("seconds_to_deliver_after", shoal_node::bench::round(to_deliver.as_secs_f64(), 1)),
        ("problems", serde_json::Value::from(problems.len())),
    ];
    print_rows(&[summary], args.json);
    session.close();
    if problems.is_empty() {
        println!(
            "verified: every acknowledged write is there, every acknowledged PUT's event came in order, \
             deep scrubs are clean, every daemon answers"
        );
        Ok(())
    } else {
        Err(err::io(format!("{} problems:\n{}", problems.len(), problems.join("\n"))))
    }
}

/// Runs `shoal ARGS -c CONF` and fails with its stderr if it fails.
pub(crate) fn shoal(conf: &Path, args: &[&str]) -> Result<String> {
    let exe = std::env::current_exe().map_err(|e| err::io(format!("locating the shoal binary: {e}")))?;
    let out = std::process::Command::new(exe)
        .args(args)
        .arg("-c")
        .arg(conf)
        .output()
        .map_err(|e| err::io(format!("shoal {}: {e}", args.join(" "))))?;
    if !out.status.success() {
        return Err(err::io(format!("shoal {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr))));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A user for the run and one S3 client per gateway signed with its keys.
pub(crate) fn s3_clients(conf: &Path, gateways: &[(String, String)]) -> Result<Vec<S3Client>> {
    let uid = format!("bench-{:08x}", rand::random::<u32>());
    let created = shoal(conf, &["admin", "user", "create", "--uid", &uid, "--display-name", "thrash"])?;
    let user: serde_json::Value = serde_json::from_str(&created).map_err(|e| err::io(e.to_string()))?;
    let keys = &user["keys"][0];
    let (access, secret) =
        (keys["access_key"].as_str().unwrap_or_default(), keys["secret_key"].as_str().unwrap_or_default());
    gateways.iter().map(|(_, endpoint)| S3Client::new(endpoint, access, secret)).collect()
}

/// Waits until the gateway of `client` answers (at most the startup timeout of a daemon).
async fn wait_answering(client: &S3Client) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.send(Method::GET, "/", &[], bytes::Bytes::new()).await.is_err() {
        if Instant::now() > deadline {
            return Err(err::timed_out("a restarted gateway did not answer within 60 s"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Creates `bucket` (or finds it made).
pub(crate) async fn create_bucket(client: &S3Client, bucket: &str) -> Result<()> {
    let response = client.send(Method::PUT, &format!("/{bucket}"), &[], bytes::Bytes::new()).await?;
    if response.status.is_success() || response.status.as_u16() == 409 {
        return Ok(());
    }
    Err(err::io(format!("creating bucket {bucket}: {}", response.status)))
}

/// The sequence number a payload was written with, if it is one of this key's.
fn seq_of(key: &str, body: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(body).ok()?;
    let mut words = text.split(' ');
    (words.next()? == key).then_some(())?;
    let seq: u64 = words.next()?.parse().ok()?;
    (payload(key, seq) == body).then_some(seq)
}

async fn rados_writer(io: IoCtx, writer: usize, logs: Arc<Logs>, stop: Arc<AtomicBool>) {
    let log = &logs.rados;
    let mut seq = 0;
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        let key = format!("w{writer}-{}", seq % OBJECTS_PER_WRITER);
        log.attempt(&key, seq);
        match io.write_full(&key, payload(&key, seq)).await {
            Ok(()) => log.ack(&key, seq),
            Err(_) => {
                log.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

async fn s3_writer(client: S3Client, writer: usize, logs: Arc<Logs>, stop: Arc<AtomicBool>) {
    let log = &logs.s3;
    let mut seq = 0;
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        let key = format!("s{writer}-{}", seq % OBJECTS_PER_WRITER);
        let body = payload(&key, seq);
        log.attempt(&key, seq);
        logs.events.attempt(&key, seq, &body);
        let put = client.send(Method::PUT, &format!("/{BUCKET}/{key}"), &[], body).await;
        match put {
            Ok(response) if response.status.is_success() => {
                log.ack(&key, seq);
                logs.events.ack(&key, seq);
            }
            _ => {
                log.errors.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Every second: the fault in progress, client operations acknowledged, events
/// delivered, PG states.
async fn sample(
    rados: Rados,
    logs: Arc<Logs>,
    fault: Arc<Mutex<String>>,
    timeline: Arc<Mutex<Vec<Row>>>,
    stop: Arc<AtomicBool>,
) {
    let started = Instant::now();
    let (mut rados_before, mut s3_before, mut events_before) = (0, 0, 0);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let (rados_ops, s3_ops) = (logs.rados.ops.load(Ordering::Relaxed), logs.s3.ops.load(Ordering::Relaxed));
        let events = logs.events.records.load(Ordering::Relaxed);
        let states = match tokio::time::timeout(Duration::from_secs(2), rados.pg_stats()).await {
            Ok(Ok((stats, _))) => {
                let mut counted: BTreeMap<String, usize> = BTreeMap::new();
                for s in stats.iter().filter(|s| s.pg.pool == rados.map().by_name(POOL).map_or(s.pg.pool, |p| p.id)) {
                    *counted.entry(s.state_name()).or_default() += 1;
                }
                counted.iter().map(|(s, n)| format!("{n} {s}")).collect::<Vec<_>>().join(", ")
            }
            _ => "(no answer)".to_owned(),
        };
        let row = vec![
            ("second", serde_json::Value::from(started.elapsed().as_secs())),
            ("fault", serde_json::Value::from(fault.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone())),
            ("rados_ops", serde_json::Value::from(rados_ops - rados_before)),
            ("s3_ops", serde_json::Value::from(s3_ops - s3_before)),
            ("events", serde_json::Value::from(events - events_before)),
            ("pg_states", serde_json::Value::from(states)),
        ];
        (rados_before, s3_before, events_before) = (rados_ops, s3_ops, events);
        timeline.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(row);
    }
}

fn kind(fault: &Fault) -> &'static str {
    match fault {
        Fault::KillOsd(_) => "kill osd",
        Fault::KillHost(_) => "kill host",
        Fault::StopOsd(_) => "stop osd",
        Fault::KillMonLeader => "kill mon leader",
        Fault::KillGateway(_) => "kill gateway",
        Fault::Partition(..) => "partition host",
        Fault::Upmap => "upmap moves",
        Fault::Reweight(..) => "reweight",
        Fault::Split => "split",
        Fault::Merge => "merge",
        Fault::AddOsd(_) => "add osd",
        Fault::RemoveOsd(_) => "remove osd",
    }
}

async fn pick(
    rng: &mut rand::rngs::StdRng,
    rados: &Rados,
    gateways: &[(String, String)],
    links: &[(String, String)],
    added: &[u32],
) -> Result<Fault> {
    let map = rados.refresh_map().await?;
    let osds: Vec<u32> = map.osds.keys().map(|o| o.0).collect();
    let hosts: Vec<String> =
        map.osds.values().map(|o| o.host.clone()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    if osds.is_empty() || gateways.is_empty() {
        return Err(err::invalid("the cluster has no OSDs or no gateways to inject faults into"));
    }
    let osd = osds[rng.random_range(0..osds.len())];
    if !links.is_empty() && rng.random_range(0..6) == 0 {
        let (host, link) = links[rng.random_range(0..links.len())].clone();
        return Ok(Fault::Partition(host, link));
    }
    let host = hosts[rng.random_range(0..hosts.len())].clone();
    Ok(match rng.random_range(0..14) {
        0..=3 => Fault::KillOsd(osd),
        4 => Fault::KillHost(host),
        5..=6 => Fault::StopOsd(osd),
        7 => Fault::KillMonLeader,
        8 => Fault::Upmap,
        9..=10 => Fault::KillGateway(gateways[rng.random_range(0..gateways.len())].0.clone()),
        11 => Fault::Reweight(osd, rng.random_range(0x8000..=0x10000)),
        12 if rng.random_range(0..3) == 0 => Fault::Merge,
        12 => Fault::Split,
        _ if added.len() == MAX_ADDED_OSDS || (!added.is_empty() && rng.random_range(0..2) == 0) => {
            Fault::RemoveOsd(added[rng.random_range(0..added.len())])
        }
        _ => Fault::AddOsd(host),
    })
}

/// Injects `fault`, holds it a few seconds, and undoes it (restarts, SIGCONT); growth
/// stays (weights, splits, OSDs added or removed, as `added` records).
async fn inject(
    dir: &Path,
    rados: &Rados,
    fault: &Fault,
    rng: &mut rand::rngs::StdRng,
    added: &mut Vec<u32>,
) -> Result<()> {
    let hold = Duration::from_millis(rng.random_range(1500..4500));
    match fault {
        Fault::Reweight(id, reweight) => {
            let change = shoal_types::crush::CrushChange::Reweight { osd: OsdId(*id), reweight: *reweight };
            if let Err(e) = rados.crush(change).await {
                eprintln!("thrash: the reweight was refused: {e}");
            }
            tokio::time::sleep(hold).await;
            Ok(())
        }
        Fault::Split => {
            let pg_num = rados.refresh_map().await?.pool_named(POOL)?.pg_num;
            if pg_num * 2 <= MAX_SPLIT_PG_NUM {
                rados.pool_set_pg_num(POOL, pg_num * 2).await?;
            }
            tokio::time::sleep(hold).await;
            Ok(())
        }
        Fault::Merge => {
            let map = rados.refresh_map().await?;
            let pool = map.pool_named(POOL)?;
            if pool.pg_num / 2 >= MIN_MERGE_PG_NUM && !map.pg_merge.contains_key(&pool.id) {
                rados.pool_set_pg_num(POOL, pool.pg_num / 2).await?;
            }
            tokio::time::sleep(hold).await;
            Ok(())
        }
        Fault::AddOsd(host) => {
            // A new id, never one of a purged OSD whose directory is still there.
            let started = vstart::read_pids(dir)?.into_iter().filter_map(|(n, _)| n.strip_prefix("osd.")?.parse().ok());
            let id = rados.refresh_map().await?.osds.keys().map(|o| o.0).chain(started).max().map_or(0, |m| m + 1);
            vstart::add_osd(dir, id, host)?;
            added.push(id);
            tokio::time::sleep(hold).await;
            Ok(())
        }
        Fault::RemoveOsd(id) => {
            let osd = OsdId(*id);
            rados.osd_set_in(osd, false).await?;
            wait_clean(rados, Duration::from_secs(300)).await?;
            vstart::kill(dir, &format!("osd.{id}"))?;
            let deadline = Instant::now() + Duration::from_secs(120);
            // Purging is refused until the map has it down and no PG may need its copies.
            while let Err(e) = rados.osd_purge(osd, false).await {
                if Instant::now() > deadline {
                    return Err(err::timed_out(format!("osd.{id} could not be purged: {e}")));
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            added.retain(|a| a != id);
            Ok(())
        }
        Fault::KillOsd(id) => kill_for(dir, &[format!("osd.{id}")], hold).await,
        Fault::KillHost(host) => {
            let map = rados.refresh_map().await?;
            let names: Vec<String> =
                map.osds.iter().filter(|(_, o)| o.host == *host).map(|(id, _)| format!("osd.{}", id.0)).collect();
            kill_for(dir, &names, hold).await
        }
        Fault::StopOsd(id) => {
            let pid = vstart::daemon_pid(dir, &format!("osd.{id}"))?;
            vstart::signal(pid, "-STOP")?;
            tokio::time::sleep(Duration::from_secs(HEARTBEAT_GRACE_SECS + 2)).await;
            vstart::signal(pid, "-CONT")
        }
        Fault::KillMonLeader => {
            let (_, leader) = rados.mon_status().await?;
            let leader = leader.ok_or_else(|| err::again("the monitors have no leader"))?;
            kill_for(dir, &[format!("mon.{leader}")], hold).await
        }
        Fault::KillGateway(name) => kill_for(dir, std::slice::from_ref(name), hold).await,
        Fault::Upmap => {
            let map = rados.refresh_map().await?;
            let changes: Vec<_> = match !map.pg_upmap_items.is_empty() && rng.random_range(0..3) == 0 {
                true => map.pg_upmap_items.keys().map(|pg| (*pg, Vec::new())).collect(),
                false => shoal_placement::balancer::optimize(&map, rng.random_range(1..8), 0.0).into_iter().collect(),
            };
            if !changes.is_empty() {
                rados.pg_upmap_items(changes).await?;
            }
            tokio::time::sleep(hold).await;
            Ok(())
        }
        Fault::Partition(_, link) => {
            vstart::Namespaces::set_link(link, false)?;
            // Long enough for the peers to report the host's OSDs down.
            tokio::time::sleep(Duration::from_secs(HEARTBEAT_GRACE_SECS + 2) + hold).await;
            vstart::Namespaces::set_link(link, true)
        }
    }
}

async fn kill_for(dir: &Path, names: &[String], hold: Duration) -> Result<()> {
    let mut commands = Vec::new();
    for name in names {
        commands.push((name, vstart::kill(dir, name)?));
    }
    tokio::time::sleep(hold).await;
    for (name, command) in commands {
        vstart::restart(dir, name, &command)?;
    }
    Ok(())
}

/// Waits until the monitors have a leader and every OSD is up again.
async fn heal(rados: &Rados) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let healthy = async {
            let (_, leader) = rados.mon_status().await?;
            let map = rados.refresh_map().await?;
            Ok::<_, shoal_types::RadosError>(leader.is_some() && map.osds.values().all(|o| o.up))
        };
        if let Ok(Ok(true)) = tokio::time::timeout(Duration::from_secs(5), healthy).await {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(err::timed_out("the cluster did not heal within 120 s of a fault"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Deep-scrubs every PG of every pool; returns the inconsistencies found.
async fn deep_scrub_all(rados: &Rados) -> Result<Vec<String>> {
    let map = rados.refresh_map().await?;
    let mut waiting: BTreeMap<PgId, (OsdId, u64)> = BTreeMap::new();
    for pool in map.pools.values() {
        for seed in 0..pool.pg_num {
            let pg = PgId { pool: pool.id, seed };
            let Some(primary) = shoal_placement::pg_primary(&map, pool, pg) else { continue };
            let before = last_scrub(rados, primary, pg).await?.map_or(0, |r| r["deep_scrubs"].as_u64().unwrap_or(0));
            rados.tell_osd(primary, &format!("deep-scrub {pg}")).await?;
            waiting.insert(pg, (primary, before));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut problems = Vec::new();
    while !waiting.is_empty() {
        let mut done = Vec::new();
        for (pg, (primary, before)) in &waiting {
            if let Some(r) =
                last_scrub(rados, *primary, *pg).await?.filter(|r| r["deep_scrubs"].as_u64() > Some(*before))
            {
                if r["errors"].as_u64() != Some(0) {
                    problems.push(format!(
                        "pg {pg}: the deep scrub on {primary} found {} inconsistent objects",
                        r["errors"]
                    ));
                }
                done.push(*pg);
            }
        }
        for pg in done {
            waiting.remove(&pg);
        }
        if Instant::now() > deadline {
            problems.push(format!("{} PGs did not finish a deep scrub within 300 s", waiting.len()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(problems)
}

/// Reads back every object and key the writers touched and checks it against their logs
/// (S3 keys through every gateway).
async fn verify(io: &IoCtx, clients: &[S3Client], logs: &Logs) -> Vec<String> {
    let (rados_log, s3_log) = (&logs.rados, &logs.s3);
    let mut problems = Vec::new();
    let keys = |log: &Ledger| -> Vec<String> {
        log.attempted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).keys().cloned().collect()
    };
    for key in keys(rados_log) {
        let found = match io.read_full(&key).await {
            Ok(body) => seq_of(&key, &body).ok_or_else(|| format!("{key}: the object holds bytes no writer wrote")),
            Err(e) if e.errno == shoal_types::Errno::NotFound => Err(String::new()),
            Err(e) => Err(format!("{key}: {e}")),
        };
        let outcome = match found {
            Ok(seq) => rados_log.check(&key, Some(seq)),
            Err(absent) if absent.is_empty() => rados_log.check(&key, None),
            Err(problem) => Err(problem),
        };
        problems.extend(outcome.err());
    }
    for key in keys(s3_log) {
        for client in clients {
            let got = client.send(Method::GET, &format!("/{BUCKET}/{key}"), &[], bytes::Bytes::new()).await;
            let outcome = match got {
                Ok(r) if r.status.is_success() => match seq_of(&key, &r.body) {
                    Some(seq) => s3_log.check(&key, Some(seq)),
                    None => Err(format!("{key}: the object holds bytes no writer wrote")),
                },
                Ok(r) if r.status.as_u16() == 404 => s3_log.check(&key, None),
                Ok(r) => Err(format!("{key}: GET answered {}", r.status)),
                Err(e) => Err(format!("{key}: GET failed: {e}")),
            };
            problems.extend(outcome.err());
        }
    }
    problems
}

/// Daemons that do not answer: OSDs (a `perf dump`), monitors (out of quorum), gateways.
async fn unanswered_daemons(rados: &Rados, clients: &[S3Client]) -> Vec<String> {
    let mut problems = Vec::new();
    let map = match rados.refresh_map().await {
        Ok(map) => map,
        Err(e) => return vec![format!("the monitors do not answer: {e}")],
    };
    for id in map.osds.keys() {
        if let Err(e) = rados.tell_osd(*id, "perf dump").await {
            problems.push(format!("{id} does not answer: {e}"));
        }
    }
    match rados.mon_status().await {
        Ok((_, Some(_))) => {}
        Ok((members, None)) => problems.push(format!("the {} monitors have no leader", members.len())),
        Err(e) => problems.push(format!("monitor status: {e}")),
    }
    for client in clients {
        if let Err(e) = client.send(Method::GET, &format!("/{BUCKET}"), &[], bytes::Bytes::new()).await {
            problems.push(format!("a gateway does not answer: {e}"));
        }
    }
    problems
}
