//! `shoal bench scrub`: what deep scrubs cost clients, on a `shoal vstart` cluster.
//! Clients read and overwrite objects of a size-3 pool throughout; phases without scrubs
//! alternate with phases in which every PG of the pool is kept deep-scrubbing (as many at
//! once as `osd_max_scrubs` lets each OSD). The table gives client throughput per phase
//! and the scrubbing phases' share of the idle ones', round by round and overall.

use crate::recovery_bench::{fresh_pool, wait_clean};
use clap::Args;
use rand::Rng;
use shoal_client::{IoCtx, Rados};
use shoal_node::admin_cmd::scrub_reports;
use shoal_node::bench::{RunStats, print_rows, round, run_until};
use shoal_types::{PgId, Result, err};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Arguments of `shoal bench scrub`.
#[derive(Args, Debug)]
pub struct ScrubBenchArgs {
    /// The directory of a running `shoal vstart` cluster.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// Objects in the pool.
    #[arg(long, default_value_t = 2000)]
    objects: u64,
    /// Object size in bytes.
    #[arg(long, default_value_t = 65536)]
    size: usize,
    /// Concurrent clients (each alternates a read and an overwrite of random objects).
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// Seconds of each phase.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Pairs of phases (without, then with deep scrubs).
    #[arg(long, default_value_t = 3)]
    rounds: u32,
    /// Print one JSON object per row.
    #[arg(long)]
    json: bool,
}

const POOL: &str = "scrub-bench";
const PG_NUM: u32 = 32;

/// Runs the phases and prints the table.
pub async fn run(args: ScrubBenchArgs) -> Result<()> {
    let (session, io) = fresh_pool(&args.dir, POOL, PG_NUM).await?;
    let rados = session.rados.clone();
    let payload = bytes::Bytes::from((0..args.size).map(|i| (i * 31 % 251) as u8).collect::<Vec<u8>>());
    eprintln!("writing {} objects of {} bytes", args.objects, args.size);
    let fill = {
        let (io, payload) = (io.clone(), payload.clone());
        let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (done, objects) = (Arc::new(AtomicBool::new(false)), args.objects);
        run_until("fill", args.threads, done.clone(), move |_, _| {
            let (io, data, next, done) = (io.clone(), payload.clone(), next.clone(), done.clone());
            async move {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= objects {
                    done.store(true, Ordering::Relaxed);
                    return Ok(0);
                }
                io.write_full(&format!("obj{index}"), data.clone()).await?;
                Ok(data.len() as u64)
            }
        })
    };
    fill.await?;
    wait_clean(&rados, Duration::from_secs(120)).await?;

    let mut rows = Vec::new();
    let (mut idle_runs, mut scrub_runs, mut scrubs_total) = (Vec::new(), Vec::new(), 0u64);
    for round_no in 1..=args.rounds {
        let idle = phase(&io, &payload, &args, "idle").await?;
        let before = finished_scrubs(&rados).await?;
        let keep_scrubbing = Arc::new(AtomicBool::new(true));
        let requester = tokio::spawn(request_deep_scrubs(rados.clone(), keep_scrubbing.clone()));
        let scrubbing = phase(&io, &payload, &args, "deep-scrub").await;
        keep_scrubbing.store(false, Ordering::Relaxed);
        requester.await.map_err(|e| err::io(e.to_string()))??;
        let scrubbing = scrubbing?;
        let scrubs = finished_scrubs(&rados).await?.saturating_sub(before);
        scrubs_total += scrubs;
        rows.push(row(round_no.to_string(), "idle", &idle, None, None));
        let share = scrubbing.ops_per_sec() / idle.ops_per_sec().max(1e-9);
        rows.push(row(round_no.to_string(), "deep-scrub", &scrubbing, Some(share), Some(scrubs)));
        idle_runs.push(idle);
        scrub_runs.push(scrubbing);
    }
    let (idle, scrubbing) = (RunStats::merge(idle_runs), RunStats::merge(scrub_runs));
    let share = scrubbing.ops_per_sec() / idle.ops_per_sec().max(1e-9);
    rows.push(row("all".into(), "idle", &idle, None, None));
    rows.push(row("all".into(), "deep-scrub", &scrubbing, Some(share), Some(scrubs_total)));
    print_rows(&rows, args.json);
    session.close();
    Ok(())
}

fn row(
    round_no: String,
    phase: &'static str,
    stats: &RunStats,
    share: Option<f64>,
    scrubs: Option<u64>,
) -> Vec<(&'static str, serde_json::Value)> {
    let mut row = vec![("round", serde_json::Value::from(round_no)), ("phase", serde_json::Value::from(phase))];
    row.extend(stats.columns());
    row.push(("share_of_idle", share.map_or(serde_json::Value::Null, |s| round(s, 3))));
    row.push(("pg_deep_scrubs", scrubs.map_or(serde_json::Value::Null, serde_json::Value::from)));
    row
}

/// One phase of clients: each alternates a read and an overwrite of random objects.
async fn phase(io: &IoCtx, payload: &bytes::Bytes, args: &ScrubBenchArgs, label: &str) -> Result<RunStats> {
    let stop = Arc::new(AtomicBool::new(false));
    let timer = stop.clone();
    let seconds = args.seconds;
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        timer.store(true, Ordering::Relaxed);
    });
    let (io, payload, objects) = (io.clone(), payload.clone(), args.objects);
    run_until(label, args.threads, stop, move |_, iteration| {
        let (io, data) = (io.clone(), payload.clone());
        async move {
            let name = format!("obj{}", rand::rng().random_range(0..objects.max(1)));
            if iteration % 2 == 0 {
                Ok(io.read_full(&name).await?.len() as u64)
            } else {
                io.write_full(&name, data.clone()).await?;
                Ok(data.len() as u64)
            }
        }
    })
    .await
}

/// Asks every PG's primary for a deep scrub, again every second until `keep` clears (a
/// request made while one runs starts right after it).
async fn request_deep_scrubs(rados: Rados, keep: Arc<AtomicBool>) -> Result<()> {
    while keep.load(Ordering::Relaxed) {
        let map = rados.refresh_map().await?;
        let pool = map.pool_named(POOL)?.clone();
        for seed in 0..pool.pg_num {
            let pg = PgId { pool: pool.id, seed };
            if let Some(primary) = shoal_placement::pg_primary(&map, &pool, pg) {
                rados.tell_osd(primary, &format!("deep-scrub {pg}")).await?;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}

/// Deep scrubs of the pool's PGs finished so far, by the stamps every OSD reports.
async fn finished_scrubs(rados: &Rados) -> Result<u64> {
    let map = rados.refresh_map().await?;
    let pool = map.pool_named(POOL)?.id;
    let mut total = 0;
    for osd in map.osds.keys() {
        total += scrub_reports(rados, *osd)
            .await?
            .iter()
            .filter(|r| r["pg"].as_str().is_some_and(|pg| pg.starts_with(&format!("{}.", pool.0))))
            .filter_map(|r| r["deep_scrubs"].as_u64())
            .sum::<u64>();
    }
    Ok(total)
}
