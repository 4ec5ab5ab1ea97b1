//! `shoal bench reef --quick`: the Reef article's cycle on an erasure-coded 4+2 data pool
//! over eight one-OSD hosts, through S3 — fill, hybrid load new and aged, one then two hosts
//! killed, marked out and rebuilt elsewhere, their return and recovery, three hosts killed
//! and their return — checked for what must hold whatever the figures: every phase
//! measured, no failed request while the cluster is whole, no wrong data ever, PGs
//! inactive with more than m hosts down, and every PG active+clean after each host is
//! marked out, after two hosts return and after three do.

use serde_json::Value;
use shoal_bench::harness::shoal;

#[test]
fn the_quick_reef_cycle_runs_every_phase_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let cycle = dir.path().join("reef");
    let timeline = dir.path().join("timeline.json");
    let out = shoal()
        .args(["bench", "reef", "--quick", "--json", "--dir"])
        .arg(&cycle)
        .arg("--timeline")
        .arg(&timeline)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the cycle failed:\n{stderr}");
    let rows: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let total = |phase: &str| {
        rows.iter()
            .find(|r| r["phase"] == phase && r["op"] == "TOTAL")
            .unwrap_or_else(|| panic!("no {phase} row in {rows:#?}"))
    };
    let fill = rows.iter().find(|r| r["phase"] == "fill").unwrap();
    assert!(fill["objects"].as_u64().unwrap() > 0, "{fill}");
    for phase in ["new", "aged", "recovered"] {
        let row = total(phase);
        assert!(row["ops_per_sec"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["errors"], 0, "requests failed with every OSD up: {row}\n{stderr}");
    }
    for phase in ["aging", "one host down", "two hosts down", "three hosts down"] {
        total(phase);
    }
    let recoveries = ["recovering (one host out)", "recovering (two hosts out)", "recovering (both back)"];
    for phase in recoveries.iter().chain(&["recovering (three back)"]) {
        total(phase);
        let recovery =
            rows.iter().find(|r| r["recovery"] == *phase).unwrap_or_else(|| panic!("no {phase} in {rows:#?}"));
        assert_eq!(recovery["clean"], true, "{recovery}");
    }
    // A host marked out had shards of most objects (six of eight hosts hold each), all rebuilt.
    let first = rows.iter().find(|r| r["recovery"] == recoveries[0]).unwrap();
    assert!(
        first["objects_recovered"].as_u64().unwrap() > 0 && first["mib_recovered"].as_f64().unwrap() > 0.0,
        "{first}"
    );
    let checks = rows.iter().find(|r| r.get("wrong_data").is_some()).unwrap();
    assert_eq!(checks["wrong_data"], 0, "{checks}");
    assert!(checks["inactive_pgs_with_three_hosts_down"].as_u64().unwrap() > 0, "{checks}");
    let timeline: Value = serde_json::from_slice(&std::fs::read(&timeline).unwrap()).unwrap();
    assert!(timeline["phases"].as_array().unwrap().len() >= 11, "{}", timeline["phases"]);
    assert!(timeline["seconds"].as_array().unwrap().len() > 40);
}

/// `--steady`: the load alone on the erasure-coded pool, and a row saying how steady each
/// second of it was against the median second.
#[test]
fn the_quick_steady_run_reports_each_second_against_the_median() {
    let dir = tempfile::tempdir().unwrap();
    let out = shoal()
        .args(["bench", "reef", "--quick", "--steady", "--hosts", "6", "--json", "--dir"])
        .arg(dir.path().join("steady"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the run failed:\n{stderr}");
    let rows: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let total = rows.iter().find(|r| r["phase"] == "steady" && r["op"] == "TOTAL").expect("a steady row");
    assert_eq!(total["errors"], 0, "{total}\n{stderr}");
    assert!(!rows.iter().any(|r| r["phase"] == "aged" || r.get("recovery").is_some()), "{rows:#?}");
    let steady = rows.iter().find(|r| r.get("median_ops").is_some()).expect("a steadiness row");
    let (least, median, most) = (
        steady["least_ops"].as_f64().unwrap(),
        steady["median_ops"].as_f64().unwrap(),
        steady["most_ops"].as_f64().unwrap(),
    );
    assert!(median > 0.0 && least <= median && median <= most, "{steady}");
    // The quick load runs 8 s; the first and last seconds are cut.
    let seconds = steady["seconds"].as_u64().unwrap();
    assert!((6..=8).contains(&seconds), "{steady}");
    assert!(steady["seconds_below_0_7_median"].as_u64().unwrap() <= seconds, "{steady}");
    let checks = rows.iter().find(|r| r.get("wrong_data").is_some()).unwrap();
    assert_eq!(checks["wrong_data"], 0, "{checks}");
}
