//! `shoal bench recovery`: the kill-and-recover scenario on a `shoal vstart` cluster.
//! Writers overwrite objects of a size-3 pool throughout; one OSD is SIGKILLed, the
//! cluster runs degraded until the OSD is restarted, then recovers. The table gives
//! client throughput before, while degraded and while recovering, the time from the
//! restart to every PG active+clean, and the objects recovered per second.

use clap::Args;
use rand::Rng;
use shoal_client::{IoCtx, Rados};
use shoal_node::bench::{RunStats, print_rows, round, run_until};
use shoal_node::session::{ClusterArgs, Session};
use shoal_node::vstart;
use shoal_types::{OsdId, PgId, PoolSpec, Result, err};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Arguments of `shoal bench recovery`.
#[derive(Args, Debug)]
pub struct RecoveryBenchArgs {
    /// The directory of a running `shoal vstart` cluster (the bench kills and restarts
    /// one of its OSDs).
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The OSD to kill.
    #[arg(long, default_value_t = 0)]
    victim: u32,
    /// Objects written before the failure.
    #[arg(long, default_value_t = 2000)]
    objects: u64,
    /// Object size in bytes.
    #[arg(long, default_value_t = 4096)]
    size: usize,
    /// Concurrent writers.
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// Seconds of each measured phase (before, degraded).
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Print one JSON object per row.
    #[arg(long)]
    json: bool,
}

const POOL: &str = "recovery-bench";

/// Runs the scenario and prints its table.
pub async fn run(args: RecoveryBenchArgs) -> Result<()> {
    let (session, io) = fresh_pool(&args.dir, POOL, 32).await?;
    let rados = session.rados.clone();
    let payload = bytes::Bytes::from(vec![0x5a; args.size]);
    eprintln!("writing {} objects of {} bytes", args.objects, args.size);
    let fillers: Vec<_> = (0..args.threads as u64)
        .map(|worker| {
            let (io, data, step, objects) = (io.clone(), payload.clone(), args.threads as u64, args.objects);
            tokio::spawn(async move {
                for index in (worker..objects).step_by(step as usize) {
                    io.write_full(&format!("obj{index}"), data.clone()).await?;
                }
                Ok::<_, shoal_types::RadosError>(())
            })
        })
        .collect();
    for filler in fillers {
        filler.await.map_err(|e| err::io(e.to_string()))??;
    }
    wait_clean(&rados, Duration::from_secs(120)).await?;

    let phase = |label: &'static str, seconds: u64, touched: Option<Arc<Mutex<BTreeSet<u64>>>>| {
        let stop = Arc::new(AtomicBool::new(false));
        let timer = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            timer.store(true, Ordering::Relaxed);
        });
        writers(io.clone(), payload.clone(), args.objects, args.threads, label, stop, touched)
    };
    let before = phase("before", args.seconds, None).await?;

    let victim = OsdId(args.victim);
    let name = format!("osd.{}", args.victim);
    eprintln!("killing {name}");
    let command = vstart::kill(&args.dir, &name)?;
    let down_at = Instant::now();
    while rados.refresh_map().await?.osds.get(&victim).is_some_and(|o| o.up) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("{name} marked down after {:.1} s", down_at.elapsed().as_secs_f64());
    let touched = Arc::new(Mutex::new(BTreeSet::new()));
    let degraded = phase("degraded", args.seconds, Some(touched.clone())).await?;

    vstart::restart(&args.dir, &name, &command)?;
    let restarted = Instant::now();
    // Writers keep going while the cluster recovers; the phase ends when every PG is clean.
    let stop = Arc::new(AtomicBool::new(false));
    let recovering = {
        let (io, payload, stop) = (io.clone(), payload.clone(), stop.clone());
        let (objects, threads) = (args.objects, args.threads);
        tokio::spawn(async move { writers(io, payload, objects, threads, "recovering", stop, None).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cleaned = wait_clean(&rados, Duration::from_secs(600)).await;
    let to_clean = restarted.elapsed();
    stop.store(true, Ordering::Relaxed);
    let recovering = recovering.await.map_err(|e| err::io(e.to_string()))??;
    cleaned?;
    let map = rados.map();
    let pool = map.pool_named(POOL)?.clone();
    let missed = touched
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter(|i| {
            let pg = shoal_placement::pg_of(&pool, &shoal_types::ObjectName::new("", format!("obj{i}")));
            shoal_placement::pg_up_osds(&map, &pool, pg).contains(&victim)
        })
        .count();
    let row = |label: &str, stats: &RunStats| {
        let mut row = vec![("phase", serde_json::Value::from(label))];
        row.extend(stats.columns());
        row.push(("share_of_before", round(stats.ops_per_sec() / before.ops_per_sec().max(1e-9), 3)));
        row
    };
    let mut summary = vec![("phase", serde_json::Value::from("recovery"))];
    summary.push(("seconds_to_active_clean", round(to_clean.as_secs_f64(), 2)));
    summary.push(("objects_recovered", serde_json::Value::from(missed)));
    summary.push(("objects_recovered_per_sec", round(missed as f64 / to_clean.as_secs_f64().max(1e-9), 1)));
    print_rows(&[row("before", &before), row("degraded", &degraded), row("recovering", &recovering)], args.json);
    if !args.json {
        println!();
    }
    print_rows(&[summary], args.json);
    session.close();
    Ok(())
}

/// Overwrites random objects from `threads` writers until `stop`; records the objects
/// written in `touched`.
async fn writers(
    io: IoCtx,
    payload: bytes::Bytes,
    objects: u64,
    threads: usize,
    label: &str,
    stop: Arc<AtomicBool>,
    touched: Option<Arc<Mutex<BTreeSet<u64>>>>,
) -> Result<RunStats> {
    run_until(label, threads, stop, move |_, _| {
        let (io, data, touched) = (io.clone(), payload.clone(), touched.clone());
        async move {
            let index = rand::rng().random_range(0..objects.max(1));
            io.write_full(&format!("obj{index}"), data.clone()).await?;
            if let Some(t) = touched {
                t.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(index);
            }
            Ok(data.len() as u64)
        }
    })
    .await
}

/// Opens a session on the `shoal vstart` cluster in `dir` and (re)creates `pool` there,
/// size 3, min_size 2, with `pg_num` PGs.
pub(crate) async fn fresh_pool(dir: &std::path::Path, pool: &str, pg_num: u32) -> Result<(Session, IoCtx)> {
    let conf = dir.join("shoal.conf");
    let cluster = ClusterArgs::from_conf(conf);
    let session = cluster.open().await?;
    let rados = session.rados.clone();
    if rados.map().by_name(pool).is_some() {
        rados.pool_delete(pool).await?;
    }
    rados.pool_create(PoolSpec { name: pool.into(), pg_num, size: 3, min_size: 2 }).await?;
    let io = rados.ioctx(pool).await?;
    Ok((session, io))
}

/// Waits until every pool's `pgp_num` has reached its target and every PG is active+clean
/// (the leader steps `pgp_num` only while all are clean, so "clean" alone can be a pause
/// between two steps).
pub(crate) async fn wait_settled(rados: &Rados, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        wait_clean(rados, deadline.saturating_duration_since(Instant::now())).await?;
        let map = rados.refresh_map().await?;
        if map.pg_resize.values().all(|r| r.pgp_num == r.pgp_num_target) && map.pg_merge.is_empty() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until every PG of the map is reported active+clean.
pub(crate) async fn wait_clean(rados: &Rados, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let map = rados.refresh_map().await?;
        let (stats, _) = rados.pg_stats().await?;
        let total: u32 = map.pools.values().map(|p| p.pg_num).sum();
        let clean = stats
            .iter()
            .filter(|s| s.state_name() == "active+clean")
            .filter(|s| {
                map.pools.get(&s.pg.pool).is_some_and(|pool| {
                    s.acting == shoal_placement::pg_up_osds(&map, pool, PgId { pool: pool.id, seed: s.pg.seed })
                })
            })
            .count();
        if clean as u32 == total {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(err::timed_out(format!("{clean} of {total} PGs active+clean after {timeout:?}")));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
