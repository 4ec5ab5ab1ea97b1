//! The lifecycle experiment (`--workload expire`): rounds of PUTs while a lifecycle rule
//! expires `--objects` objects of a second bucket, each followed by a round of PUTs as
//! long without one, so that the PUT rate with and without a pass compares in one run;
//! and the pass's own rate, from setting the rule to the bucket listing empty.

use super::{Load, Round, Row, S3BenchArgs, Shared, retrying};
use crate::bench::RunStats;
use bytes::Bytes;
use http::Method;
use shoal_types::{Result, err};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the expiring bucket is listed to see whether it is empty.
const POLL: Duration = Duration::from_millis(100);

/// Runs `--rounds` pairs of rounds: rows for PUT while expiring, PUT without, and EXPIRE.
pub(super) async fn run(args: &S3BenchArgs, load: &Load) -> Result<Vec<Row>> {
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
