//! `shoal bench grow`: growing a running `shoal vstart` cluster under S3 load. Writers PUT
//! objects through every gateway throughout; after a measured phase the bench multiplies
//! the S3 data pool's pg_num and starts OSDs on a new host at once, and measures until
//! every PG is active+clean, then once more; last it halves pg_num again (a merge: pgp_num
//! comes down, then the pool's IO pauses while its PGs merge) and measures until the pool
//! is merged and clean. The table gives client throughput in each phase against before,
//! the time to active+clean and to merged, the bytes recovery and backfill wrote against
//! the least that had to move (the new OSDs' weighted share of the stored copies), and the
//! longest a client waited for one PUT.

use crate::recovery_bench::{wait_clean, wait_settled};
use crate::s3client::S3Client;
use crate::thrash::{create_bucket, s3_clients};
use clap::Args;
use http::Method;
use rand::Rng;
use shoal_client::Rados;
use shoal_node::bench::{RunStats, print_rows, round, run_until};
use shoal_node::session::ClusterArgs;
use shoal_node::vstart;
use shoal_placement::autoscale;
use shoal_types::{OsdId, Result, err};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Arguments of `shoal bench grow`.
#[derive(Args, Debug)]
pub struct GrowBenchArgs {
    /// The directory of a running `shoal vstart` cluster with `--gateways 1` or more.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The data pool's pg_num is multiplied by this.
    #[arg(long, default_value_t = 4)]
    pg_factor: u32,
    /// OSDs started on the new host.
    #[arg(long, default_value_t = 2)]
    new_osds: u32,
    /// The new host's name.
    #[arg(long, default_value = "grown")]
    host: String,
    /// Objects the writers overwrite (written once before the first phase).
    #[arg(long, default_value_t = 2000)]
    objects: u64,
    /// Object size in bytes.
    #[arg(long, default_value_t = 65536)]
    size: usize,
    /// Concurrent S3 writers, spread over the gateways.
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// Seconds of the phases before and after the growth.
    #[arg(long, default_value_t = 15)]
    seconds: u64,
    /// Print one JSON object per row.
    #[arg(long)]
    json: bool,
}

const BUCKET: &str = "grow-bench";
const DATA_POOL: &str = ".rgw.buckets.data";

/// Runs the scenario and prints its table.
pub async fn run(args: GrowBenchArgs) -> Result<()> {
    let conf = args.dir.join("shoal.conf");
    let gateways = vstart::gateways(&args.dir)?;
    if gateways.is_empty() {
        let dir = args.dir.display();
        return Err(err::invalid(format!("no gateway runs in {dir}: start vstart with --gateways 1 or more")));
    }
    let clients = Arc::new(s3_clients(&conf, &gateways)?);
    create_bucket(&clients[0], BUCKET).await?;
    let cluster = ClusterArgs::from_conf(conf);
    let session = cluster.open().await?;
    let rados = session.rados.clone();
    let payload = bytes::Bytes::from(vec![0x67; args.size]);
    eprintln!("writing {} objects of {} bytes", args.objects, args.size);
    fill(&clients, &payload, args.objects, args.threads).await?;
    wait_clean(&rados, Duration::from_secs(300)).await?;
    let phase = |label: &'static str, stop: Arc<AtomicBool>| {
        let (clients, payload) = (clients.clone(), payload.clone());
        let (objects, threads) = (args.objects, args.threads);
        tokio::spawn(async move { writers(clients, payload, objects, threads, label, stop).await })
    };
    let timed = |label: &'static str| {
        let stop = Arc::new(AtomicBool::new(false));
        let timer = stop.clone();
        let seconds = args.seconds;
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            timer.store(true, Ordering::Relaxed);
        });
        phase(label, stop)
    };
    let joined = |e: tokio::task::JoinError| err::io(e.to_string());
    let before = timed("before").await.map_err(joined)??;

    let map = rados.refresh_map().await?;
    let pool = map.pool_named(DATA_POOL)?.clone();
    let stored = stored_copies(&rados).await?;
    let old_weight: u64 = map.osds.values().filter(|o| o.is_in).map(|o| u64::from(o.weight)).sum();
    let recovered_before = recovered_bytes(&rados).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let growing = phase("growing", stop.clone());
    let started = Instant::now();
    let pg_num = pool.pg_num * args.pg_factor;
    eprintln!("pg_num of {DATA_POOL} {} -> {pg_num}; {} OSDs on host {}", pool.pg_num, args.new_osds, args.host);
    rados.pool_set_pg_num(DATA_POOL, pg_num).await?;
    let first_new = map.osds.keys().map(|o| o.0 + 1).max().unwrap_or_default();
    let new_osds: Vec<OsdId> = (first_new..first_new + args.new_osds).map(OsdId).collect();
    for osd in &new_osds {
        vstart::add_osd(&args.dir, osd.0, &args.host)?;
    }
    let new_weight = loop {
        let map = rados.refresh_map().await?;
        let weights: Option<Vec<u64>> =
            new_osds.iter().map(|o| map.osds.get(o).filter(|e| e.up).map(|e| u64::from(e.weight))).collect();
        if let Some(weights) = weights {
            break weights.iter().sum::<u64>();
        }
        if started.elapsed() > Duration::from_secs(60) {
            return Err(err::timed_out("the new OSDs did not join within 60 s"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let settled = wait_settled(&rados, Duration::from_secs(1800)).await;
    let to_clean = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let growing = growing.await.map_err(joined)??;
    settled?;
    let moved = recovered_bytes(&rados).await?.saturating_sub(recovered_before);
    let ideal = stored as f64 * new_weight as f64 / (old_weight + new_weight) as f64;
    let after = timed("after").await.map_err(joined)??;

    let stop = Arc::new(AtomicBool::new(false));
    let merging = phase("merging", stop.clone());
    let started = Instant::now();
    eprintln!("pg_num of {DATA_POOL} {pg_num} -> {} (a merge)", pg_num / 2);
    rados.pool_set_pg_num(DATA_POOL, pg_num / 2).await?;
    let merged = wait_settled(&rados, Duration::from_secs(1800)).await;
    let to_merged = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let merging = merging.await.map_err(joined)??;
    merged?;

    let row = |label: &str, stats: &RunStats| {
        let mut row = vec![("phase", serde_json::Value::from(label))];
        row.extend(stats.columns());
        row.push(("longest_wait_ms", round(stats.latencies_us.last().copied().unwrap_or_default() as f64 / 1e3, 1)));
        row.push(("share_of_before", round(stats.ops_per_sec() / before.ops_per_sec().max(1e-9), 3)));
        row
    };
    let rows = [row("before", &before), row("growing", &growing), row("after", &after), row("merging", &merging)];
    print_rows(&rows, args.json);
    if !args.json {
        println!();
    }
    let summary = vec![
        (
            "change",
            serde_json::Value::from(format!("pg_num x{} + {} OSDs on a new host", args.pg_factor, args.new_osds)),
        ),
        ("seconds_to_active_clean", round(to_clean.as_secs_f64(), 1)),
        ("bytes_stored", serde_json::Value::from(stored)),
        ("bytes_moved", serde_json::Value::from(moved)),
        ("ideal_bytes", round(ideal, 0)),
        ("moved_over_ideal", round(moved as f64 / ideal.max(1.0), 3)),
        ("seconds_to_merged", round(to_merged.as_secs_f64(), 1)),
    ];
    print_rows(&[summary], args.json);
    session.close();
    Ok(())
}

/// Writes every object once, from `threads` writers.
async fn fill(clients: &Arc<Vec<S3Client>>, payload: &bytes::Bytes, objects: u64, threads: usize) -> Result<()> {
    let tasks: Vec<_> = (0..threads as u64)
        .map(|worker| {
            let (clients, payload) = (clients.clone(), payload.clone());
            tokio::spawn(async move {
                for index in (worker..objects).step_by(threads) {
                    put(&clients[index as usize % clients.len()], index, payload.clone()).await?;
                }
                Ok::<_, shoal_types::RadosError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|e| err::io(e.to_string()))??;
    }
    Ok(())
}

/// PUTs object `index`; an answer other than 200 is an error.
async fn put(client: &S3Client, index: u64, payload: bytes::Bytes) -> Result<u64> {
    let len = payload.len() as u64;
    let response = client.send(Method::PUT, &format!("/{BUCKET}/obj{index}"), &[], payload).await?;
    match response.status.is_success() {
        true => Ok(len),
        false => Err(err::io(format!("PUT obj{index}: {}", response.status))),
    }
}

/// Overwrites random objects through the gateways from `threads` writers until `stop`.
async fn writers(
    clients: Arc<Vec<S3Client>>,
    payload: bytes::Bytes,
    objects: u64,
    threads: usize,
    label: &str,
    stop: Arc<AtomicBool>,
) -> Result<RunStats> {
    run_until(label, threads, stop, move |worker, _| {
        let (clients, payload) = (clients.clone(), payload.clone());
        async move {
            let index = rand::rng().random_range(0..objects.max(1));
            put(&clients[worker % clients.len()], index, payload).await
        }
    })
    .await
}

/// Raw bytes of every pool's objects (logical bytes times copies, or shards over k).
async fn stored_copies(rados: &Rados) -> Result<u64> {
    let map = rados.refresh_map().await?;
    let (stats, _) = rados.pg_stats().await?;
    let raw = |s: &shoal_types::PgStat| map.pools.get(&s.pg.pool).map_or(0.0, |p| s.bytes as f64 * autoscale::rate(p));
    Ok(stats.iter().map(raw).sum::<f64>() as u64)
}

/// Bytes recovery and backfill have written so far, summed over the OSDs that are up.
async fn recovered_bytes(rados: &Rados) -> Result<u64> {
    let map = rados.refresh_map().await?;
    let mut total = 0;
    for (id, _) in map.osds.iter().filter(|(_, o)| o.up) {
        let dump: serde_json::Value = serde_json::from_str(&rados.tell_osd(*id, "perf dump").await?)
            .map_err(|e| err::io(format!("{id}'s perf dump: {e}")))?;
        total += dump["osd"]["recovered_bytes"].as_u64().unwrap_or_default();
    }
    Ok(total)
}
