//! Kill -9 at random moments: every acknowledged write survives, and no half-applied
//! transaction is ever visible.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");
const WRITERS: u64 = 8;
const KILLS: usize = 24;

#[test]
fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap().to_owned();
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    let mut rng_state = 0x2545_f491_4f6c_dd1du64;
    let mut next_delay = || {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        Duration::from_millis(150 + rng_state % 500)
    };
    for round in 0..KILLS {
        let mut child = Command::new(SHOAL)
            .args(["debug", "crash-writer", "--data", &data, "--writers", &WRITERS.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting the writer");
        let stdout = child.stdout.take().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let seen = seen.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    let mut parts = line.split_whitespace().skip(1).map(|p| p.parse::<u64>().unwrap());
                    if let (Some(w), Some(seq)) = (parts.next(), parts.next()) {
                        seen.lock().unwrap().push((w, seq));
                    }
                }
            })
        };
        // Let it start and write for a random while, then kill it without warning.
        let deadline = Instant::now() + Duration::from_secs(20);
        while seen.lock().unwrap().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(next_delay());
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        let seen = seen.lock().unwrap();
        assert!(!seen.is_empty(), "round {round}: the writer acknowledged nothing");
        for &(w, seq) in seen.iter() {
            let e = acked.entry(w).or_default();
            *e = (*e).max(seq);
        }
    }
    let out = Command::new(SHOAL)
        .args(["debug", "crash-verify", "--data", &data, "--writers", &WRITERS.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "verify failed: {}", String::from_utf8_lossy(&out.stderr));
    let report = String::from_utf8(out.stdout).unwrap();
    let mut checked = 0;
    for line in report.lines() {
        let f: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
        let (w, last) = (f[0], f[1]);
        let want = acked.get(&w).copied().unwrap_or(0);
        assert!(last >= want, "writer {w}: {want} acknowledged but only {last} survived");
        checked += want;
    }
    assert!(checked > 0, "no acknowledged write was checked");
    eprintln!("{KILLS} kills, {checked} acknowledged writes verified: {report}");
}
