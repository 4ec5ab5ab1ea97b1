//! Kill -9 at random moments: every acknowledged write survives, no half-applied
//! transaction is ever visible, and the data device's books stay exact.

use shoal_bench::harness::shoal;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WRITERS: u64 = 8;
const KILLS: usize = 24;
/// Kills of the large-object writer; `SHOAL_LARGE_CRASH_KILLS` overrides.
const LARGE_KILLS: usize = 50;

/// Runs `shoal debug crash-writer --data DATA ARGS` and kills it with SIGKILL `kills` times
/// at random moments after its first acknowledgement; returns every `(writer, seq)` it
/// acknowledged.
fn write_and_kill(data: &str, args: &[&str], kills: usize) -> Vec<(u64, u64)> {
    let mut rng_state = 0x2545_f491_4f6c_dd1du64;
    let mut next_delay = || {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        Duration::from_millis(150 + rng_state % 500)
    };
    let mut acked = Vec::new();
    for round in 0..kills {
        let mut child = shoal()
            .args(["debug", "crash-writer", "--data", data, "--writers", &WRITERS.to_string()])
            .args(args)
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
        acked.extend(seen.iter().copied());
    }
    acked
}

/// Runs `shoal debug crash-verify` and returns its report lines as numbers.
fn verify(data: &str, args: &[&str]) -> Vec<Vec<u64>> {
    let out = shoal()
        .args(["debug", "crash-verify", "--data", data, "--writers", &WRITERS.to_string()])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "verify failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| line.split_whitespace().map(|x| x.parse().unwrap()).collect())
        .collect()
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap().to_owned();
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    for (w, seq) in write_and_kill(&data, &[], KILLS) {
        let e = acked.entry(w).or_default();
        *e = (*e).max(seq);
    }
    let mut checked = 0;
    for f in verify(&data, &[]) {
        let (w, last) = (f[0], f[1]);
        let want = acked.get(&w).copied().unwrap_or(0);
        assert!(last >= want, "writer {w}: {want} acknowledged but only {last} survived");
        checked += want;
    }
    assert!(checked > 0, "no acknowledged write was checked");
    eprintln!("{KILLS} kills, {checked} acknowledged writes verified");
}

/// 4 MiB objects written whole and overwritten, on the data device: after every kill
/// each object holds exactly the bytes of one write that was acknowledged or in flight
/// (the verifier compares every byte), and the device's allocated space is exactly what
/// the surviving objects reference (`shoal debug fsck --deep`: nothing leaked by a write
/// that never committed, no extent of a removed version left, every checksum good).
#[test]
fn large_overwrites_survive_sigkill_without_leaking_space() {
    const KEYS: u64 = 3;
    let kills = std::env::var("SHOAL_LARGE_CRASH_KILLS").map_or(LARGE_KILLS, |v| v.parse().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap().to_owned();
    let keys = KEYS.to_string();
    let large = ["--object-size", "4194304", "--keys", &keys];
    let acked = write_and_kill(&data, &large, kills);
    let mut newest: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut newest_of_writer: BTreeMap<u64, u64> = BTreeMap::new();
    for &(w, seq) in &acked {
        let e = newest.entry((w, seq % KEYS)).or_default();
        *e = (*e).max(seq);
        let e = newest_of_writer.entry(w).or_default();
        *e = (*e).max(seq);
    }
    let mut overwritten = 0;
    for f in verify(&data, &large) {
        let (w, k, seq) = (f[0], f[1], f[2]);
        let want = newest.get(&(w, k)).copied().unwrap_or(0);
        let in_flight = newest_of_writer.get(&w).copied().unwrap_or(0) + 1;
        assert!(seq >= want, "large.{w}.{k}: write {want} was acknowledged but it holds {seq}");
        assert!(
            seq == want || seq == in_flight,
            "large.{w}.{k}: holds write {seq}, neither acknowledged nor in flight"
        );
        assert_eq!(seq % KEYS, k, "large.{w}.{k} holds another key's write {seq}");
        overwritten += u64::from(seq > KEYS);
    }
    assert!(overwritten > 0, "no object was overwritten: the test checked nothing of overwrites");
    let out = shoal().args(["debug", "fsck", "--deep", "--data", &data]).output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "fsck: {report}{}", String::from_utf8_lossy(&out.stderr));
    let words: Vec<&str> = report.split_whitespace().collect();
    let figure = |name: &str| -> u64 {
        let at = words.iter().position(|w| *w == name).unwrap_or_else(|| panic!("no {name} in {report}"));
        words[at + 1].parse().unwrap()
    };
    let (objects, referenced) = (figure("objects"), figure("referenced"));
    assert!(objects > 0 && objects <= WRITERS * KEYS, "{report}");
    assert_eq!(referenced, objects * 4194304, "the surviving objects' bytes and no more: {report}");
    eprintln!("{kills} kills, {} acknowledged large writes, {objects} objects verified; {report}", acked.len());
}
