//! The thrasher's short version (`shoal bench thrash --faults 100` is the long one, run by
//! hand): 20 random faults — OSDs, a whole host's OSDs, the monitor leader and gateways
//! SIGKILLed and restarted, OSDs SIGSTOPped past the heartbeat grace, a host cut off by
//! its network namespace's link, copies moved by the balancer's upmap exceptions, override
//! weights, splits of the pool, OSDs added and drained — against 3 monitors, 6 OSDs on 3 hosts (one namespace
//! each) and 2 gateways under RADOS and S3 writers, the bucket's events pushed through a
//! persistent topic to the thrasher's receiver. Afterwards every acknowledged write is
//! there, every acknowledged PUT's event came in its key's order, every PG is active+clean
//! and deep-scrubbed clean, and every daemon answers. Where namespaces cannot be made
//! (not root), it says so and thrashes without partitions.

use shoal_bench::harness::{Vstart, shoal};

#[test]
fn twenty_faults_lose_no_acknowledged_write() {
    let args = ["--mons", "3", "--osds", "6", "--hosts", "3", "--gateways", "2", "--netns"];
    let (cluster, partitions) = match Vstart::try_start_with(&args) {
        Ok(cluster) => (cluster, true),
        Err(e) => {
            eprintln!("network namespaces cannot be made here, so no partitions: {e}");
            (Vstart::start_with(&args[..args.len() - 1]), false)
        }
    };
    let out = shoal()
        .args(["bench", "thrash", "--faults", "20", "--seed", "18", "--json", "--dir"])
        .arg(cluster.path())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the thrasher failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("every acknowledged PUT's event came in order"), "{stdout}");
    assert_eq!(stderr.matches("] fault ").count(), 20, "{stderr}");
    let summary: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|row| row.get("seed").is_some())
        .expect("a summary row");
    for acked in ["rados_acked", "s3_acked"] {
        assert!(summary[acked].as_u64() > Some(0), "no {acked} writes: {summary}");
    }
    assert_eq!(summary["problems"].as_u64(), Some(0), "{summary}");
    // Every acknowledged PUT's event came (the problems would name a missing one), and
    // the receiver's refusals made the gateways retry.
    assert!(summary["events_delivered"].as_u64() >= summary["s3_acked"].as_u64(), "{summary}");
    assert!(summary["pushes_refused"].as_u64() > Some(0), "{summary}");
    if partitions {
        // Seed 18's schedule partitions a host once.
        assert!(summary["by_kind"].as_str().is_some_and(|k| k.contains("partition host")), "{summary}");
    }
    // It also grows the cluster: two OSDs added, the pool split twice, a reweight.
    for growth in ["add osd", "split", "reweight"] {
        assert!(summary["by_kind"].as_str().is_some_and(|k| k.contains(growth)), "no {growth}: {summary}");
    }
    let seconds = stdout.lines().filter(|l| l.contains("\"pg_states\"")).count();
    assert!(seconds > 20, "the timeline has {seconds} rows");
    println!("{summary}");
}
