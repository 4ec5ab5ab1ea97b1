//! `shoal bench reef`: the test cycle of the Ceph Reef RGW article on a `shoal vstart`
//! cluster driven through S3. One bucket per object size (the article's small set and a
//! scaled-down generic set) is filled; then one hybrid load (45% GET, 35% PUT, 15% HEAD,
//! 5% DELETE; PUTs overwrite once a bucket holds its fill, so the data set stays the same
//! size while it ages) runs throughout: measured new, aged, with one host's OSDs killed
//! until the monitor marks them out, while their shards are rebuilt on the other hosts,
//! the same for a second host, while both recover after a restart, and, separately, with
//! three hosts down (more than `m`). As in the article, whose hosts stayed down for hours,
//! the down-out interval passes while a host is down. Throughput is counted every second;
//! each phase gets a row per operation, each recovery its duration, objects and MiB recovered per
//! second and the client throughput it kept.

use super::timeline::{OPS, Second, Timeline};
use super::{Load, Op, Shared, mixed, parse_duration, parse_size};
use crate::s3client::S3Client;
use clap::Args;
use rand::Rng;
use serde_json::{Value, json};
use shoal_client::Rados;
use shoal_node::bench::{RunStats, print_rows, round};
use shoal_node::gateway_cmd::EcShape;
use shoal_node::session::ClusterArgs;
use shoal_node::vstart;
use shoal_types::{OsdId, Result, err};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Arguments of `shoal bench reef`.
#[derive(Args, Debug)]
pub struct ReefArgs {
    /// Directory of the cluster it starts (must not exist; kept afterwards, logs included).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The data pool's erasure code, K+M.
    #[arg(long, default_value = "4+2")]
    ec: EcShape,
    /// Replicate the data pool 3 times instead (the comparison).
    #[arg(long)]
    replicated: bool,
    /// Hosts (failure domains). 8, as in the article: a 4+2 PG spans 6 of them, so two
    /// hosts lost leave every PG k shards and two spare hosts to rebuild on.
    #[arg(long, default_value_t = 8)]
    hosts: u32,
    /// OSDs on each host.
    #[arg(long, default_value_t = 1)]
    osds_per_host: u32,
    /// Bytes written by the fill, shared evenly by the buckets.
    #[arg(long, default_value = "2GiB", value_parser = parse_size)]
    fill: u64,
    /// Most objects one bucket is filled with.
    #[arg(long, default_value_t = 20_000)]
    max_objects: u64,
    /// Object sizes of the small set, one bucket each.
    #[arg(long, default_value = "1KiB,4KiB,8KiB,64KiB,256KiB", value_delimiter = ',', value_parser = parse_size)]
    small: Vec<u64>,
    /// Object sizes of the generic set (the article's also has 256 MiB: too much for one
    /// machine's disk and memory at this concurrency).
    #[arg(long, default_value = "1MiB,4MiB,8MiB,64MiB", value_delimiter = ',', value_parser = parse_size)]
    generic: Vec<u64>,
    /// Clients per bucket.
    #[arg(long, default_value_t = 2)]
    clients: usize,
    /// Length of each measured phase (new, aged, each failure step).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    measure: Duration,
    /// How long the hybrid load ages the cluster between the two measurements.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    age: Duration,
    /// Longest wait for every PG to be active+clean after OSDs are marked out or return.
    #[arg(long, default_value = "15m", value_parser = parse_duration)]
    recovery_timeout: Duration,
    /// How long a stopped host stays down before the monitor marks its OSDs out and
    /// their shards are rebuilt on the other hosts (`mon_osd_down_out_interval`; the
    /// article's hosts were down for 2 h, past Ceph's 600 s).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    down_out: Duration,
    /// No failures: the load runs for `--age` after the fill, and the table says how
    /// steady its throughput stayed (each second against the median second).
    #[arg(long)]
    steady: bool,
    /// A few minutes in all: 24 MiB of 4 KiB to 1 MiB objects, 8 s phases, fast failure
    /// detection (for the test suite).
    #[arg(long)]
    quick: bool,
    /// Write the per-second throughput and the phases as JSON to this file (for
    /// bench/reef_plot.py).
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
    /// One JSON object per row instead of tables.
    #[arg(long)]
    json: bool,
    /// A central option set for the whole cluster before the fill, `NAME=VALUE`
    /// (repeatable), e.g. `osd_recovery_sleep=0.05`.
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_option)]
    options: Vec<(String, String)>,
}

/// `NAME=VALUE`, split.
fn parse_option(text: &str) -> std::result::Result<(String, String), String> {
    let (name, value) = text.split_once('=').ok_or_else(|| format!("'{text}' is not NAME=VALUE"))?;
    Ok((name.to_owned(), value.to_owned()))
}

impl ReefArgs {
    /// The arguments with `--quick` applied.
    fn effective(mut self) -> ReefArgs {
        if self.quick {
            self.fill = 24 << 20;
            self.small = vec![4 << 10, 64 << 10];
            self.generic = vec![1 << 20];
            self.clients = 2;
            self.measure = Duration::from_secs(8);
            self.age = Duration::from_secs(8);
            self.recovery_timeout = Duration::from_secs(60);
            self.down_out = Duration::from_secs(4);
        }
        self
    }

    fn setup(&self) -> String {
        match self.replicated {
            true => "replicated size 3".into(),
            false => format!("erasure-coded {}+{}", self.ec.k, self.ec.m),
        }
    }
}

const PORT_WAIT: Duration = Duration::from_secs(30);

/// The cluster under test: the vstart directory, a client, the gateway process.
struct Cluster {
    dir: PathBuf,
    rados: Rados,
    gateway: Child,
    client: S3Client,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.gateway.kill();
        let _ = self.gateway.wait();
        let _ = Command::new(crate::shoal_exe()).args(["vstart", "--stop", "--dir"]).arg(&self.dir).output();
    }
}

/// Runs `shoal ARGS`; its standard output, or an error naming the command.
fn shoal(args: &[&str]) -> Result<String> {
    let out =
        Command::new(crate::shoal_exe()).args(args).output().map_err(|e| err::io(format!("running shoal: {e}")))?;
    match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        false => Err(err::io(format!("shoal {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))),
    }
}

impl Cluster {
    /// Starts the OSDs and a monitor, sets the central options, starts a gateway and
    /// creates the bench's user.
    async fn start(args: &ReefArgs) -> Result<Cluster> {
        let dir = args.dir.join("cluster");
        let dir_text = dir.to_string_lossy().into_owned();
        let (osds, hosts) = ((args.hosts * args.osds_per_host).to_string(), args.hosts.to_string());
        let ec = format!("{}+{}", args.ec.k, args.ec.m);
        let mut vstart = vec!["vstart", "--dir", &dir_text, "--osds", &osds, "--hosts", &hosts];
        if !args.replicated {
            vstart.extend(["--ec", &ec]);
        }
        shoal(&vstart)?;
        let conf = dir.join("shoal.conf");
        let session = ClusterArgs::from_conf(conf.clone());
        let rados = session.open().await?.rados;
        // Replaced data is collected within a minute, so that a long run's overwrites do
        // not fill the disk.
        let down_out = args.down_out.as_secs().max(1).to_string();
        let mut options = vec![
            ("rgw_gc_obj_min_wait", "30"),
            ("rgw_gc_processor_period", "10"),
            ("mon_osd_down_out_interval", &down_out),
        ];
        if args.quick {
            options.extend([("osd_heartbeat_interval", "0.5"), ("osd_heartbeat_grace", "3")]);
        }
        let asked = args.options.iter().map(|(key, value)| (key.as_str(), value.as_str()));
        for (key, value) in options.into_iter().chain(asked) {
            rados.config_set("global", key, Some(value)).await?;
        }
        let addr = vstart::free_port()?;
        let port = addr.rsplit(':').next().unwrap_or_default().to_owned();
        let log = std::fs::File::create(args.dir.join("gateway.log")).map_err(|e| err::io(e.to_string()))?;
        let log_err = log.try_clone().map_err(|e| err::io(e.to_string()))?;
        let gateway = Command::new(crate::shoal_exe())
            .args(["gateway", "-c", &conf.to_string_lossy(), "--port", &port, "--bind", "127.0.0.1"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| err::io(format!("starting the gateway: {e}")))?;
        let started = Instant::now();
        while std::net::TcpStream::connect(&addr).is_err() {
            if started.elapsed() > PORT_WAIT {
                return Err(err::io(format!(
                    "the gateway did not start; see {}",
                    args.dir.join("gateway.log").display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let conf_text = conf.to_string_lossy().into_owned();
        let user = shoal(&["admin", "-c", &conf_text, "user", "create", "--uid", "reef", "--display-name", "reef"])?;
        let user: Value = serde_json::from_str(&user).map_err(|e| err::io(format!("user create: {e}")))?;
        let key = |name: &str| user["keys"][0][name].as_str().unwrap_or_default().to_owned();
        let client = S3Client::new(&format!("http://{addr}"), &key("access_key"), &key("secret_key"))?;
        Ok(Cluster { dir, rados, gateway, client })
    }

    /// The OSDs vstart put on host `host` (round robin).
    fn osds_of(&self, args: &ReefArgs, host: u32) -> Vec<OsdId> {
        (0..args.hosts * args.osds_per_host).filter(|id| id % args.hosts == host).map(OsdId).collect()
    }

    /// CPU seconds used so far by the gateway and by every OSD running now (by pid).
    fn cpu(&self) -> (f64, BTreeMap<u32, f64>) {
        let osds = vstart::read_pids(&self.dir)
            .unwrap_or_default()
            .into_iter()
            .filter(|(name, _)| name.starts_with("osd."))
            .map(|(_, pid)| (pid, super::cpu_of(pid)))
            .filter(|(_, cpu)| *cpu > 0.0) // killed, not restarted yet
            .collect();
        (super::cpu_of(self.gateway.id()), osds)
    }
}

/// A cycle phase: a name and the span of the timeline it covers.
struct Phase {
    name: String,
    from: f64,
    to: f64,
    gateway_cpu: f64,
    osd_cpu: f64,
}

/// What happened while every PG was waited for after OSDs were marked out or returned.
struct Recovery {
    /// Its phase.
    phase: String,
    seconds: f64,
    clean: bool,
    /// Objects recovered during the phase, and the bytes recovery wrote, by the OSDs'
    /// counters.
    objects: u64,
    bytes: u64,
    /// The most PGs reported inactive.
    inactive: usize,
}

/// The running cycle: the cluster, the load's timeline, phases and events so far.
struct Cycle<'a> {
    args: &'a ReefArgs,
    cluster: Cluster,
    timeline: Arc<Timeline>,
    phases: Vec<Phase>,
    events: Vec<(f64, String)>,
    /// The OSDs killed and not restarted yet, with their command lines.
    killed: Vec<(OsdId, Vec<String>)>,
}

impl Cycle<'_> {
    /// Runs phase `name` until `until` returns, recording its span and CPU.
    async fn phase<T>(&mut self, name: &str, until: impl std::future::Future<Output = T>) -> T {
        let ((gateway_start, osds_start), from) = (self.cluster.cpu(), self.timeline.now());
        eprintln!("[{from:7.1} s] {name}");
        let result = until.await;
        let (gateway_end, osds_end) = self.cluster.cpu();
        let osd_cpu = osds_end.iter().map(|(pid, end)| end - osds_start.get(pid).copied().unwrap_or(0.0)).sum();
        let to = self.timeline.now();
        self.phases.push(Phase { name: name.into(), from, to, gateway_cpu: gateway_end - gateway_start, osd_cpu });
        result
    }

    fn event(&mut self, what: String) {
        eprintln!("[{:7.1} s] {what}", self.timeline.now());
        self.events.push((self.timeline.now(), what));
    }

    /// SIGKILLs every OSD of `host`.
    fn kill_host(&mut self, host: u32) -> Result<()> {
        for id in self.cluster.osds_of(self.args, host) {
            let command = tokio::task::block_in_place(|| vstart::kill(&self.cluster.dir, &id.to_string()))?;
            self.killed.push((id, command));
        }
        self.event(format!("host{host} stopped"));
        Ok(())
    }

    /// The OSDs killed and not restarted yet.
    fn killed_ids(&self) -> Vec<OsdId> {
        self.killed.iter().map(|(id, _)| *id).collect()
    }

    /// Starts every killed OSD again; returns them.
    fn restart_all(&mut self) -> Result<Vec<OsdId>> {
        let ids = self.killed_ids();
        for (id, command) in std::mem::take(&mut self.killed) {
            vstart::restart(&self.cluster.dir, &id.to_string(), &command)?;
        }
        self.event("OSDs restarted".into());
        Ok(ids)
    }

    /// Waits, as phase `name`, until the monitor has marked every killed OSD out.
    async fn until_out(&mut self, name: &str) -> Result<()> {
        let killed = self.killed_ids();
        let rados = self.cluster.rados.clone();
        // Failure detection, then the interval.
        let longest = self.args.down_out + Duration::from_secs(120);
        let all_out = self
            .phase(name, async {
                let started = Instant::now();
                while started.elapsed() < longest {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    let Ok(map) = rados.refresh_map().await else { continue };
                    if killed.iter().all(|id| map.osds.get(id).is_some_and(|o| !o.is_in)) {
                        return true;
                    }
                }
                false
            })
            .await;
        if !all_out {
            return Err(err::timed_out(format!("{killed:?} were not marked out within {longest:?}")));
        }
        self.event(format!("{} marked out", killed.iter().map(OsdId::to_string).collect::<Vec<_>>().join(", ")));
        Ok(())
    }

    /// Waits, as phase `name`, until the OSDs `back` are up and in and every PG is
    /// active+clean (or the recovery timeout passes).
    async fn recover(&mut self, name: &str, back: &[OsdId]) -> Result<Recovery> {
        let started = Instant::now();
        let mut recovery =
            Recovery { phase: name.into(), seconds: 0.0, clean: false, objects: 0, bytes: 0, inactive: 0 };
        let rados = self.cluster.rados.clone();
        let timeout = self.args.recovery_timeout;
        let osds: Vec<OsdId> = (0..self.args.hosts * self.args.osds_per_host).map(OsdId).collect();
        let counted_before = recovered_counts(&rados, &osds).await;
        self.phase(name, async {
            while started.elapsed() < timeout {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let (Ok(map), Ok((stats, _))) = (rados.refresh_map().await, rados.pg_stats().await) else { continue };
                let total: u32 = map.pools.values().map(|p| p.pg_num).sum();
                recovery.inactive = recovery.inactive.max(inactive(&stats));
                let returned = back.iter().all(|id| map.osds.get(id).is_some_and(|o| o.up && o.is_in));
                if returned && stats.len() as u32 == total && stats.iter().all(|s| s.state_name() == "active+clean") {
                    recovery.clean = true;
                    break;
                }
            }
        })
        .await;
        recovery.seconds = started.elapsed().as_secs_f64();
        for (osd, after) in recovered_counts(&rados, &osds).await {
            // An OSD restarted since counts from zero again.
            let before = counted_before.get(&osd).copied().unwrap_or_default();
            let since = |after: u64, before: u64| after.checked_sub(before).unwrap_or(after);
            recovery.objects += since(after.0, before.0);
            recovery.bytes += since(after.1, before.1);
        }
        self.event(match recovery.clean {
            true => "every PG active+clean".into(),
            false => format!("not every PG active+clean after {:?}", self.args.recovery_timeout),
        });
        Ok(recovery)
    }
}

/// Each reachable OSD's counts of objects it recovered as primary and of the bytes
/// recovery wrote (`perf dump`); an OSD down or slow to answer is left out.
async fn recovered_counts(rados: &Rados, osds: &[OsdId]) -> BTreeMap<OsdId, (u64, u64)> {
    let mut counts = BTreeMap::new();
    for &osd in osds {
        let dump = tokio::time::timeout(Duration::from_secs(5), rados.tell_osd(osd, "perf dump")).await;
        let Ok(Ok(dump)) = dump else { continue };
        let Ok(dump) = serde_json::from_str::<Value>(&dump) else { continue };
        let counter = |name: &str| dump["osd"][name].as_u64();
        if let (Some(objects), Some(bytes)) = (counter("recovered_objects"), counter("recovered_bytes")) {
            counts.insert(osd, (objects, bytes));
        }
    }
    counts
}

/// How many of the PGs `stats` reports are not active.
fn inactive(stats: &[shoal_types::PgStat]) -> usize {
    stats.iter().filter(|s| !s.state_name().starts_with("active")).count()
}

/// The most PGs seen inactive at once over `span`, sampled every second.
async fn inactive_during(rados: Rados, span: Duration) -> usize {
    let started = Instant::now();
    let mut most = 0;
    while started.elapsed() < span {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Ok((stats, _)) = rados.pg_stats().await {
            most = most.max(inactive(&stats));
        }
    }
    most
}

/// Runs the cycle and prints its tables.
pub async fn run(args: ReefArgs) -> Result<()> {
    let args = args.effective();
    if args.dir.exists() {
        return Err(err::exists(format!("{} exists: give a new directory", args.dir.display())));
    }
    let hosts_needed = if args.replicated { 3 } else { args.ec.k + args.ec.m };
    // Two hosts out must leave a host for every shard or copy, so that the PGs heal.
    if !args.steady && args.hosts < hosts_needed + 2 {
        return Err(err::invalid(format!("the cycle needs at least {} hosts for this pool", hosts_needed + 2)));
    }
    std::fs::create_dir_all(&args.dir).map_err(|e| err::io(format!("creating {}: {e}", args.dir.display())))?;
    let cluster = Cluster::start(&args).await?;
    eprintln!("{} data pool, {} hosts × {} OSDs", args.setup(), args.hosts, args.osds_per_host);

    // 1. Fill: one bucket per size.
    let sizes: Vec<u64> = args.small.iter().chain(&args.generic).copied().collect();
    let per_bucket = args.fill / sizes.len().max(1) as u64;
    let mut buckets = Vec::new();
    for &size in &sizes {
        let mut payload = vec![0u8; size as usize];
        rand::rng().fill(&mut payload[..]);
        let mut shared = Shared::new(cluster.client.clone(), &format!("reef-{size}"), Some("o"), payload.into(), false);
        let objects = (per_bucket / size.max(1)).clamp(4, args.max_objects);
        shared.keep_objects = Some(objects as usize);
        let shared = Arc::new(shared);
        shared.create_bucket(false).await?;
        buckets.push((shared, objects));
    }
    let fill_started = Instant::now();
    let fills = buckets.iter().map(|(shared, objects)| shared.prepare(*objects, 1, args.clients * 2, false));
    futures::future::try_join_all(fills).await?;
    let fill_seconds = fill_started.elapsed().as_secs_f64();
    let filled: u64 = buckets.iter().map(|(s, n)| s.payload.len() as u64 * n).sum();
    let objects: u64 = buckets.iter().map(|(_, n)| n).sum();

    // 2-4. One hybrid load from here to the end.
    let timeline = Arc::new(Timeline::default());
    let stop = Arc::new(AtomicBool::new(false));
    let hybrid = mixed([(Op::Get, 45.0), (Op::Put, 35.0), (Op::Stat, 15.0), (Op::Delete, 5.0)])?;
    let loads: Vec<_> = buckets
        .iter()
        .map(|(shared, _)| {
            let load = Load {
                shared: shared.clone(),
                choose: hybrid.clone(),
                concurrent: args.clients,
                random_delete: true,
                server_pids: Vec::new(),
                show: false,
                timeline: Some(timeline.clone()),
                tolerate_errors: true,
            };
            let stop = stop.clone();
            tokio::spawn(async move { load.round(Duration::MAX, &stop).await.map(drop) })
        })
        .collect();
    let mut cycle =
        Cycle { args: &args, cluster, timeline, phases: Vec::new(), events: Vec::new(), killed: Vec::new() };
    let outcome = match args.steady {
        true => steady_cycle(&mut cycle).await,
        false => failure_cycle(&mut cycle).await,
    };
    stop.store(true, Ordering::Relaxed);
    for load in loads {
        load.await.map_err(|e| err::io(e.to_string()))??;
    }
    let (recoveries, inactive_with_three) = outcome?;
    let wrong_data: u64 = buckets.iter().map(|(s, _)| s.wrong_data.load(Ordering::Relaxed)).sum();

    let seconds = cycle.timeline.seconds();
    let fill_row = vec![
        ("phase", Value::from("fill")),
        ("objects", Value::from(objects)),
        ("mib", round(filled as f64 / (1 << 20) as f64, 1)),
        ("seconds", round(fill_seconds, 1)),
        ("mib_per_sec", round(filled as f64 / (1 << 20) as f64 / fill_seconds.max(1e-9), 1)),
    ];
    let rows: Vec<_> = cycle.phases.iter().flat_map(|p| phase_rows(&args, p, &seconds)).collect();
    let total_rate = |name: &str| {
        let phase = cycle.phases.iter().find(|p| p.name == name)?;
        Some(total(&seconds, phase.from, phase.to).0.ops_per_sec())
    };
    let summary: Vec<_> = recoveries
        .iter()
        .map(|r| {
            let kept_of = |baseline| total_rate(&r.phase).zip(total_rate(baseline)).map(|(r, b)| r / b.max(1e-9));
            let rounded = |kept: Option<f64>| kept.map_or(Value::Null, |k| round(k, 3));
            vec![
                ("recovery", Value::from(r.phase.clone())),
                ("seconds_to_active_clean", round(r.seconds, 1)),
                ("clean", Value::from(r.clean)),
                ("objects_recovered", Value::from(r.objects)),
                ("objects_per_sec", round(r.objects as f64 / r.seconds.max(1e-9), 1)),
                ("mib_recovered", round(r.bytes as f64 / (1 << 20) as f64, 1)),
                ("mib_per_sec", round(r.bytes as f64 / (1 << 20) as f64 / r.seconds.max(1e-9), 1)),
                ("inactive_pgs_max", Value::from(r.inactive)),
                ("client_ops_kept", rounded(kept_of("aged"))),
                ("kept_of_new", rounded(kept_of("new"))),
            ]
        })
        .collect();
    let checks = vec![
        ("setup", Value::from(args.setup())),
        ("wrong_data", Value::from(wrong_data)),
        ("inactive_pgs_with_three_hosts_down", Value::from(inactive_with_three)),
    ];
    let steadiness = match args.steady {
        true => vec![steadiness_row(&seconds, cycle.phases.iter().find(|p| p.name == "steady"))],
        false => Vec::new(),
    };
    for table in [vec![fill_row], rows, summary, steadiness, vec![checks]] {
        print_rows(&table, args.json);
        if !args.json {
            println!();
        }
    }
    if let Some(path) = &args.timeline {
        let text = timeline_json(&args, &cycle, &seconds).to_string();
        std::fs::write(path, text).map_err(|e| err::io(format!("writing {}: {e}", path.display())))?;
    }
    Ok(())
}

/// The load alone for `--age`, as phase "steady".
async fn steady_cycle(cycle: &mut Cycle<'_>) -> Result<(Vec<Recovery>, usize)> {
    cycle.phase("steady", tokio::time::sleep(cycle.args.age)).await;
    Ok((Vec::new(), 0))
}

/// The least, median and greatest whole second of `phase` in operations completed, and
/// how many seconds fell below 0.7 of the median.
fn steadiness_row(seconds: &[Second], phase: Option<&Phase>) -> Vec<(&'static str, Value)> {
    let whole = phase.map_or(0..0, |p| (p.from.ceil() as usize).min(seconds.len())..(p.to as usize).min(seconds.len()));
    let mut ops: Vec<usize> = seconds[whole].iter().map(|s| s.latencies_us.iter().map(Vec::len).sum()).collect();
    ops.sort_unstable();
    let median = ops.get(ops.len() / 2).copied().unwrap_or(0) as f64;
    let below = ops.iter().filter(|&&o| (o as f64) < 0.7 * median).count();
    let least = ops.first().copied().unwrap_or(0);
    vec![
        ("seconds", Value::from(ops.len())),
        ("median_ops", Value::from(median)),
        ("least_ops", Value::from(least)),
        ("most_ops", Value::from(ops.last().copied().unwrap_or(0))),
        ("least_of_median", round(least as f64 / median.max(1e-9), 3)),
        ("seconds_below_0_7_median", Value::from(below)),
    ]
}

/// Phases under load: new, aging, aged; one host down until marked out, and the rebuild
/// of its shards elsewhere; the same for a second host; recovery after both restart;
/// three hosts down (kept in) and their recovery. Returns the recoveries and the most PGs
/// inactive while three hosts were down.
async fn failure_cycle(cycle: &mut Cycle<'_>) -> Result<(Vec<Recovery>, usize)> {
    let (measure, age, hosts) = (cycle.args.measure, cycle.args.age, cycle.args.hosts);
    cycle.phase("new", tokio::time::sleep(measure)).await;
    cycle.phase("aging", tokio::time::sleep(age)).await;
    cycle.phase("aged", tokio::time::sleep(measure)).await;
    let mut recoveries = Vec::new();
    cycle.kill_host(hosts - 1)?;
    cycle.until_out("one host down").await?;
    recoveries.push(cycle.recover("recovering (one host out)", &[]).await?);
    cycle.kill_host(hosts - 2)?;
    cycle.until_out("two hosts down").await?;
    recoveries.push(cycle.recover("recovering (two hosts out)", &[]).await?);
    let back = cycle.restart_all()?;
    recoveries.push(cycle.recover("recovering (both back)", &back).await?);
    cycle.phase("recovered", tokio::time::sleep(measure)).await;
    // More than m hosts down: the PGs they shared stop, with or without a rebuild (five
    // hosts cannot hold six shards); they stay in, so that the phase measures only that.
    cycle.cluster.rados.config_set("global", "mon_osd_down_out_interval", Some("86400")).await?;
    for host in 1..=3 {
        cycle.kill_host(hosts - host)?;
    }
    let inactive = cycle.phase("three hosts down", inactive_during(cycle.cluster.rados.clone(), measure)).await;
    let back = cycle.restart_all()?;
    recoveries.push(cycle.recover("recovering (three back)", &back).await?);
    Ok((recoveries, inactive))
}

/// Every operation's statistics over `from..to`, pooled.
fn total(seconds: &[Second], from: f64, to: f64) -> (RunStats, u64) {
    Timeline::stats(seconds, &[0, 1, 2, 3], from, to)
}

/// A row per operation of `phase`, and their total.
fn phase_rows(args: &ReefArgs, phase: &Phase, seconds: &[Second]) -> Vec<Vec<(&'static str, Value)>> {
    let mut parts: Vec<(&str, RunStats, u64)> = OPS
        .iter()
        .enumerate()
        .map(|(c, op)| {
            let (stats, errors) = Timeline::stats(seconds, &[c], phase.from, phase.to);
            (op.name(), stats, errors)
        })
        .collect();
    let (all, errors) = total(seconds, phase.from, phase.to);
    parts.push(("TOTAL", all, errors));
    parts
        .into_iter()
        .map(|(op, stats, errors)| {
            let percentile =
                |p: f64| if stats.latencies_us.is_empty() { Value::Null } else { round(stats.percentile_ms(p), 1) };
            let total_row = op == "TOTAL";
            vec![
                ("phase", Value::from(phase.name.clone())),
                ("op", Value::from(op)),
                ("seconds", round(phase.to - phase.from, 1)),
                ("ops_per_sec", round(stats.ops_per_sec(), 1)),
                ("mb_per_sec", round(stats.mb_per_sec(), 2)),
                ("p50_ms", percentile(0.50)),
                ("p99_ms", percentile(0.99)),
                ("errors", if total_row { Value::from(errors) } else { Value::Null }),
                ("gateway_cpu_s", if total_row { round(phase.gateway_cpu, 1) } else { Value::Null }),
                ("osd_cpu_s", if total_row { round(phase.osd_cpu, 1) } else { Value::Null }),
                ("setup", Value::from(args.setup())),
            ]
        })
        .collect()
}

/// The per-second rates (ops/s and MB/s per operation, errors), phases and events.
fn timeline_json(args: &ReefArgs, cycle: &Cycle<'_>, seconds: &[Second]) -> Value {
    let per_second: Vec<Value> = seconds
        .iter()
        .enumerate()
        .map(|(t, s)| {
            let ops: serde_json::Map<String, Value> = OPS
                .iter()
                .enumerate()
                .map(|(c, op)| (op.name().to_owned(), Value::from(s.latencies_us[c].len())))
                .collect();
            let mb: serde_json::Map<String, Value> = OPS
                .iter()
                .enumerate()
                .map(|(c, op)| (op.name().to_owned(), round(s.bytes[c] as f64 / 1e6, 3)))
                .collect();
            json!({"t": t, "ops": ops, "mb": mb, "errors": s.errors})
        })
        .collect();
    json!({
        "setup": args.setup(),
        "phases": cycle.phases.iter().map(|p| json!({"name": p.name, "from": p.from, "to": p.to})).collect::<Vec<_>>(),
        "events": cycle.events.iter().map(|(t, what)| json!({"t": t, "what": what})).collect::<Vec<_>>(),
        "seconds": per_second,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second in which `gets` GETs and `puts` PUTs completed.
    fn second(gets: usize, puts: usize) -> Second {
        let mut s = Second::default();
        s.latencies_us[0] = vec![1_000; gets];
        s.latencies_us[1] = vec![2_000; puts];
        s
    }

    #[test]
    fn steadiness_counts_whole_seconds_of_the_phase_against_their_median() {
        // Second 0 is cut by the phase's start and second 6 by its end: both left out.
        let seconds: Vec<Second> =
            [(1, 0), (60, 40), (50, 50), (30, 20), (90, 10), (69, 0), (100, 100)].map(|(g, p)| second(g, p)).into();
        let phase = Phase { name: "steady".into(), from: 0.5, to: 6.5, gateway_cpu: 0.0, osd_cpu: 0.0 };
        let row: serde_json::Map<String, Value> =
            steadiness_row(&seconds, Some(&phase)).into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        // Whole seconds 1..6 hold 100, 100, 50, 100, 69 operations.
        assert_eq!(row["seconds"], 5);
        assert_eq!(row["median_ops"], 100.0);
        assert_eq!(row["least_ops"], 50);
        assert_eq!(row["most_ops"], 100);
        assert_eq!(row["least_of_median"], 0.5);
        assert_eq!(row["seconds_below_0_7_median"], 2);
    }

    #[test]
    fn steadiness_of_no_phase_is_empty() {
        let row = steadiness_row(&[second(5, 5)], None);
        assert_eq!(row[0], ("seconds", Value::from(0)));
    }
}
