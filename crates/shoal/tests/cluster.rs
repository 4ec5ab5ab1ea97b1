//! The cluster survives the loss of OSDs and of the monitor, as separate processes on
//! real TCP: writers never see an error nor lose an acknowledged write, and afterwards
//! every PG is active+clean by itself and every replica holds the same bytes. Large
//! overwrites survive an OSD killed again and again, without leaking device space. A copy
//! with a bad checksum is never served: it is repaired from a replica, or (one copy only)
//! the client gets EIO and `shoal status` names the object.

use bytes::Bytes;
use shoal_bench::harness::{
    Daemon, Restarted, Vstart, cmdline, first_osd, kill9, metrics_url, ok, osd_counters, sample, scrape_checked, shoal,
    shoal_c, signal, wait_all_clean, wait_clean, wait_for,
};
use shoal_client::{Rados, ReadOp, WriteOp};
use shoal_store::{ObjectKey, ObjectStore};
use shoal_types::{ObjectName, OsdMap, StepOutput, Versioned};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const POOL: &str = "data";
const WRITERS: usize = 8;
const OBJECTS_PER_WRITER: u64 = 12;

fn payload(writer: usize, generation: u64) -> Vec<u8> {
    format!("writer {writer} generation {generation} ").repeat(1 + (generation % 7) as usize).into_bytes()
}

/// What the writers share: when to stop, the newest acknowledged generation of each
/// object, the errors they saw, how many rounds they completed and the longest write
/// (microseconds).
#[derive(Clone, Default)]
struct Load {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<BTreeMap<String, u64>>>,
    errors: Arc<Mutex<Vec<String>>>,
    ops: Arc<AtomicU64>,
    longest_us: Arc<AtomicU64>,
}

impl Load {
    /// Starts `WRITERS` writers on `POOL`.
    fn start(runtime: &tokio::runtime::Runtime, rados: &Rados) -> (Load, Vec<tokio::task::JoinHandle<()>>) {
        let load = Load::default();
        let writers = (0..WRITERS).map(|id| runtime.spawn(writer(rados.clone(), id, load.clone()))).collect();
        (load, writers)
    }

    /// Stops `writers` and checks that none saw an error.
    fn stop(&self, runtime: &tokio::runtime::Runtime, writers: Vec<tokio::task::JoinHandle<()>>) {
        self.stop.store(true, Ordering::Relaxed);
        for w in writers {
            runtime.block_on(w).unwrap();
        }
        let errors = self.errors.lock().unwrap().clone();
        assert!(errors.is_empty(), "writers saw {} errors, first: {:?}", errors.len(), &errors[..errors.len().min(5)]);
    }

    /// Checks that every acknowledged write reads back and that every writer's append log
    /// holds each generation once, in order; returns the acknowledged generations.
    fn verify(&self, runtime: &tokio::runtime::Runtime, rados: &Rados) -> BTreeMap<String, u64> {
        let acked = self.acked.lock().unwrap().clone();
        let io = runtime.block_on(rados.ioctx(POOL)).unwrap();
        for (name, generation) in &acked {
            let writer: usize = name[1..name.find('-').unwrap()].parse().unwrap();
            let data = runtime.block_on(io.read_full(name)).unwrap();
            assert_eq!(data, payload(writer, *generation), "{name}: acknowledged generation {generation} lost");
        }
        for id in 0..WRITERS {
            let log = runtime.block_on(io.read_full(&format!("log{id}"))).unwrap();
            let generations: Vec<u64> = String::from_utf8_lossy(&log)
                .split(';')
                .filter(|g| !g.is_empty())
                .map(|g| g.parse().unwrap())
                .collect();
            let expected: Vec<u64> = (1..=generations.len() as u64).collect();
            assert_eq!(generations, expected, "log{id}: an append was lost or applied twice");
        }
        acked
    }
}

/// One writer: overwrites its objects in turn (data and an omap entry in one operation),
/// reads each back, and records what was acknowledged.
async fn writer(rados: Rados, id: usize, load: Load) {
    let Load { stop, acked, errors, ops, longest_us } = load;
    let io = rados.ioctx(POOL).await.unwrap();
    let mut generation = 0u64;
    while !stop.load(Ordering::Relaxed) {
        generation += 1;
        let name = format!("w{id}-{}", generation % OBJECTS_PER_WRITER);
        let gen_bytes = Bytes::from(generation.to_string());
        let op = WriteOp::new()
            .write_full(payload(id, generation))
            .omap_set([(Bytes::from_static(b"gen"), gen_bytes.clone())]);
        let started = std::time::Instant::now();
        if let Err(e) = io.operate(&name, op).await {
            errors.lock().unwrap().push(format!("write {name}: {e}"));
            continue;
        }
        longest_us.fetch_max(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        acked.lock().unwrap().insert(name.clone(), generation);
        match io.read(&name, ReadOp::new().read(0, 0).omap_get_vals_by_keys([Bytes::from_static(b"gen")])).await {
            Ok(reply) => {
                let data_fresh = matches!(&reply.outputs[0], StepOutput::Data(d) if *d == payload(id, generation));
                let omap_fresh = matches!(&reply.outputs[1], StepOutput::OmapVals { entries, .. }
                    if entries.iter().any(|(k, v)| k.as_ref() == b"gen" && *v == gen_bytes));
                let fresh = data_fresh && omap_fresh;
                if !fresh {
                    errors
                        .lock()
                        .unwrap()
                        .push(format!("read {name}: stale or wrong data after generation {generation}"));
                }
            }
            Err(e) => errors.lock().unwrap().push(format!("read {name}: {e}")),
        }
        // Appends are not idempotent: one applied twice after a resend would show in the log.
        if let Err(e) = io.append(&format!("log{id}"), format!("{generation};")).await {
            errors.lock().unwrap().push(format!("append log{id}: {e}"));
        }
        ops.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn writers_survive_osd_and_monitor_failures_and_replicas_agree() {
    let cluster = Vstart::start_with(&["--mons", "3", "--osds", "6", "--hosts", "3"]);
    let conf = cluster.conf();
    ok(&conf, &["config", "set", "global", "osd_heartbeat_interval", "0.3"]);
    ok(&conf, &["config", "set", "global", "osd_heartbeat_grace", "2"]);
    ok(&conf, &["pool", "create", POOL, "--size", "3", "--min-size", "2", "--pg-num", "32"]);
    let mut restarted = Restarted::default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rados = runtime.block_on(cluster.rados(Duration::from_secs(120)));
    let (load, writers) = Load::start(&runtime, &rados);
    let ops = &load.ops;
    let progress = |what: &str| {
        let before = ops.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs(3));
        let after = ops.load(Ordering::Relaxed);
        eprintln!("{what}: {} writes+reads in 3 s", after - before);
        after - before
    };
    // Whether writers move within two minutes (3 s is the usual; a loaded machine may need more).
    let moving = |what: &str| {
        let before = ops.load(Ordering::Relaxed);
        progress(what) > 0 || wait_for(|| (ops.load(Ordering::Relaxed) > before).then_some(())).is_some()
    };
    assert!(moving("healthy"));

    // osd.0 (host0) dies; later osd.1 (host1): some PGs fall to one replica and wait.
    let osd0 = cmdline(cluster.pid("osd.0"));
    kill9(cluster.pid("osd.0"));
    progress("osd.0 killed");
    let osd1 = cmdline(cluster.pid("osd.1"));
    kill9(cluster.pid("osd.1"));
    progress("osd.0 and osd.1 killed");
    restarted.restart(&cluster, "osd.0", &osd0);
    restarted.restart(&cluster, "osd.1", &osd1);
    assert!(moving("both restarted"), "writers resume once both OSDs are back");

    // The monitor leader dies: the others elect a new one and map changes go on.
    let (_, leader) = runtime.block_on(rados.mon_status()).unwrap();
    let leader = format!("mon.{}", leader.expect("the monitors have a leader"));
    let mon = cmdline(cluster.pid(&leader));
    kill9(cluster.pid(&leader));
    ok(&conf, &["config", "set", "global", "osd_recovery_max_active", "2"]);
    let (_, new_leader) = runtime.block_on(rados.mon_status()).unwrap();
    assert!(new_leader.is_some_and(|l| format!("mon.{l}") != leader), "a new leader took over from {leader}");
    let status = ok(&conf, &["status"]);
    assert!(status.contains("HEALTH_WARN") && status.contains(&format!("1/3 mons down: {leader}")), "{status}");
    assert!(moving("monitor leader killed"), "writes continue");
    restarted.restart(&cluster, &leader, &mon);
    progress("old leader restarted");

    load.stop(&runtime, writers);

    // Every PG returns to active+clean by itself.
    wait_clean(&conf, 32, "after the kills");

    // Every acknowledged write is readable, every append applied once.
    let acked = load.verify(&runtime, &rados);
    let map = rados.map();
    drop(rados);
    drop(runtime);

    // Stop everything and compare the replicas byte for byte, straight from the stores.
    cluster.stop();
    drop(restarted);
    let logs: Vec<String> = (0..WRITERS).map(|id| format!("log{id}")).collect();
    replicas_agree(&cluster, &map, POOL, acked.keys().chain(&logs));
}

/// Opens the store of a stopped OSD in `dir`, with the default options.
fn open_store(dir: &std::path::Path) -> Arc<ObjectStore> {
    shoal_node::embedded::open_store(dir, &shoal_node::config::Config::from_settings(&[]).unwrap()).unwrap().1
}

/// Opens every OSD's store (the cluster must be stopped) and checks that each object has
/// three replicas under `map`, all holding the same keys and bytes.
fn replicas_agree<'a>(cluster: &Vstart, map: &OsdMap, pool: &str, names: impl Iterator<Item = &'a String>) {
    let pool = map.pool_named(pool).unwrap().clone();
    let mut stores = BTreeMap::new();
    for id in map.osds.keys() {
        let dir = cluster.path().join(format!("osd.{}", id.0));
        stores.insert(*id, open_store(&dir));
    }
    for name in names {
        let object = ObjectName::new("", name.as_str());
        let key = ObjectKey::new(pool.id, &object).unwrap();
        let pg = shoal_placement::pg_of(&pool, &object);
        let replicas = shoal_placement::pg_up_osds(map, &pool, pg);
        assert_eq!(replicas.len(), 3, "{name}: pg {pg} has replicas {replicas:?}");
        let copies: Vec<Vec<u8>> = replicas.iter().map(|o| stores[o].copy_object(&key).unwrap().encode()).collect();
        assert!(copies[0].len() > 64, "{name}: the copy on {} is empty", replicas[0]);
        assert!(copies.windows(2).all(|w| w[0] == w[1]), "{name}: replicas {replicas:?} differ");
    }
}

#[test]
fn an_osd_marked_out_is_backfilled_onto_the_others() {
    let cluster = Vstart::start_with(&["--osds", "5", "--hosts", "5"]);
    let conf = cluster.conf();
    ok(&conf, &["config", "set", "global", "osd_heartbeat_interval", "0.3"]);
    ok(&conf, &["config", "set", "global", "osd_heartbeat_grace", "2"]);
    ok(&conf, &["config", "set", "mon", "mon_osd_down_out_interval", "3"]);
    ok(&conf, &["pool", "create", POOL, "--size", "3", "--min-size", "2", "--pg-num", "16"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rados = runtime.block_on(cluster.rados(Duration::from_secs(120)));
    let io = runtime.block_on(rados.ioctx(POOL)).unwrap();
    let names: Vec<String> = (0..150).map(|i| format!("obj{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let op =
            WriteOp::new().write_full(payload(i, 1)).omap_set([(Bytes::from_static(b"k"), Bytes::from(name.clone()))]);
        runtime.block_on(io.operate(name, op)).unwrap();
    }
    let victim = shoal_types::OsdId(2);
    let map = runtime.block_on(rados.refresh_map()).unwrap();
    let pool = map.pool_named(POOL).unwrap().clone();
    let held = (0..pool.pg_num)
        .filter(|seed| {
            let pg = shoal_types::PgId { pool: pool.id, seed: *seed };
            shoal_placement::pg_up_osds(&map, &pool, pg).contains(&victim)
        })
        .count();
    assert!(held > 0, "osd.2 holds no PG");
    // A watch on an object whose primary is about to die follows the PG to its new primary.
    let watched = names
        .iter()
        .find(|n| {
            let pg = shoal_placement::pg_of(&pool, &ObjectName::new("", n.as_str()));
            shoal_placement::pg_primary(&map, &pool, pg) == Some(victim)
        })
        .expect("an object whose primary is osd.2")
        .clone();
    let mut watch = runtime.block_on(io.watch(&watched)).unwrap();
    let watcher = runtime.spawn(async move {
        let mut received = Vec::new();
        while let Some(shoal_client::WatchEvent::Notify(n)) = watch.next().await {
            received.push(n.event.payload.clone());
            n.ack(Bytes::from_static(b"seen")).await.unwrap();
        }
        received
    });

    kill9(cluster.pid("osd.2"));
    let out = wait_for(|| {
        let map = runtime.block_on(rados.refresh_map()).ok()?;
        map.osds.get(&victim).is_some_and(|o| !o.up && !o.is_in).then_some(())
    });
    assert!(out.is_some(), "osd.2 was never marked down and out");
    wait_clean(&conf, 16, "backfill");
    let pgs = ok(&conf, &["pg", "dump"]);
    // Every object osd.2 held was copied to its replacement, and its primary counted it.
    let on_victim = names.iter().filter(|n| {
        let pg = shoal_placement::pg_of(&pool, &ObjectName::new("", n.as_str()));
        shoal_placement::pg_up_osds(&map, &pool, pg).contains(&victim)
    });
    let lost = on_victim.count() as u64;
    let recovered: u64 = (0..5)
        .filter(|o| *o != victim.0)
        .map(|o| osd_counters(&conf, &format!("osd.{o}"))["recovered_objects"].as_u64().unwrap())
        .sum();
    assert!(lost > 0 && recovered >= lost, "{recovered} objects counted recovered, osd.2 held {lost}");
    let up_column =
        |pgs: &str, osd: char| pgs.lines().skip(1).any(|l| l.split_whitespace().nth(1).unwrap_or("").contains(osd));
    assert!(!up_column(&pgs, '2'), "{pgs}");
    for (i, name) in names.iter().enumerate() {
        assert_eq!(runtime.block_on(io.read_full(name)).unwrap(), payload(i, 1), "{name}");
    }
    let acked = wait_for(|| {
        let reply = runtime.block_on(io.notify(&watched, "after the move", Duration::from_secs(3))).ok()?;
        (reply.acks.len() == 1).then_some(reply)
    });
    let reply = acked.expect("the watcher never heard a notify sent to the new primary");
    assert_eq!(reply.acks[0].1, Bytes::from_static(b"seen"));
    watcher.abort();

    // A live OSD marked out: its PGs move to the others, then its stray copies are deleted.
    ok(&conf, &["osd", "out", "4"]);
    let moved = wait_for(|| {
        let pgs = ok(&conf, &["pg", "dump"]);
        let clean = pgs.lines().filter(|l| l.contains(" active+clean")).count();
        (clean == 16 && !up_column(&pgs, '4')).then_some(())
    });
    assert!(moved.is_some(), "PGs did not leave osd.4:\n{}", ok(&conf, &["pg", "dump"]));
    std::thread::sleep(Duration::from_secs(2));
    let map = runtime.block_on(rados.refresh_map()).unwrap();
    drop(rados);
    drop(runtime);
    cluster.stop();
    replicas_agree(&cluster, &map, POOL, names.iter());
    let store = open_store(&cluster.path().join("osd.4"));
    let left = store.list(pool.id, 0..=u32::MAX, None, 10).unwrap();
    assert!(left.is_empty(), "osd.4 kept {} stray objects after its PGs moved away", left.len());
}

/// Kills of osd.1 during large overwrites; `SHOAL_OSD_CRASH_KILLS` overrides.
const OSD_KILLS: usize = 50;

/// 4 MiB objects written whole and overwritten through a size-3 pool while osd.1 is
/// SIGKILLed and restarted again and again: every object holds the bytes of one write that
/// was acknowledged or in flight (the newest acknowledged one or later), every PG ends
/// active+clean, the replicas agree, and on every OSD the device's allocated space is
/// exactly what its objects reference (`shoal debug fsck --deep`).
#[test]
fn large_overwrites_survive_repeated_osd_kills() {
    const KEYS: u64 = 3;
    const LARGE_WRITERS: u64 = 4;
    let kills = std::env::var("SHOAL_OSD_CRASH_KILLS").map_or(OSD_KILLS, |v| v.parse().unwrap());
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    ok(&conf, &["pool", "create", "crash", "--size", "3", "--min-size", "2", "--pg-num", "8"]);
    let large = ["--writers", "4", "--object-size", "4194304", "--keys", "3"];
    let mut writer = shoal()
        .args(["debug", "crash-writer", "-c", &conf])
        .args(large)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let acked = Arc::new(Mutex::new(Vec::<(u64, u64)>::new()));
    let reader = {
        let (acked, stdout) = (acked.clone(), writer.stdout.take().unwrap());
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                let f: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
                acked.lock().unwrap().push((f[0], f[1]));
            }
        })
    };
    let acks = || acked.lock().unwrap().len();
    assert!(wait_for(|| (acks() > 0).then_some(())).is_some(), "the writer acknowledged nothing");
    let osd1 = cmdline(cluster.pid("osd.1"));
    let mut restarted = Restarted::default();
    kill9(cluster.pid("osd.1"));
    let mut delay = 0x9e37_79b9u64;
    for _ in 0..kills {
        restarted.restart(&cluster, "osd.1", &osd1);
        delay = delay.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        std::thread::sleep(Duration::from_millis(300 + (delay >> 33) % 1000));
        restarted.kill9_last();
    }
    restarted.restart(&cluster, "osd.1", &osd1);
    let before = acks();
    let progressed = wait_for(|| (acks() > before + 8).then_some(()));
    assert!(progressed.is_some(), "writes did not resume after the last restart");
    kill9(writer.id());
    let _ = writer.wait();
    reader.join().unwrap();
    let clean = wait_for(|| {
        let pgs = ok(&conf, &["pg", "dump"]);
        (pgs.lines().filter(|l| l.contains(" active+clean")).count() >= 8).then_some(())
    });
    assert!(clean.is_some(), "PGs did not become clean:\n{}", ok(&conf, &["pg", "dump"]));
    let out = shoal().args(["debug", "crash-verify", "-c", &conf]).args(large).output().unwrap();
    assert!(out.status.success(), "verify: {}", String::from_utf8_lossy(&out.stderr));
    let acked = acked.lock().unwrap().clone();
    let newest = |w: u64, k: u64| acked.iter().filter(|&&(aw, s)| aw == w && s % KEYS == k).map(|a| a.1).max();
    let newest_of = |w: u64| acked.iter().filter(|a| a.0 == w).map(|a| a.1).max().unwrap_or(0);
    let mut names = Vec::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
        let (w, k, seq) = (f[0], f[1], f[2]);
        let want = newest(w, k).unwrap_or(0);
        assert!(seq >= want, "large.{w}.{k}: write {want} was acknowledged but it holds {seq}");
        assert!(seq == want || seq == newest_of(w) + 1, "large.{w}.{k} holds write {seq}, never acknowledged");
        if seq > 0 {
            names.push(format!("large.{w}.{k}"));
        }
    }
    assert_eq!(names.len() as u64, LARGE_WRITERS * KEYS, "every object was written");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let map = runtime.block_on(async { cluster.rados(Duration::from_secs(120)).await.refresh_map().await }).unwrap();
    drop(runtime);
    drop(restarted);
    cluster.stop();
    replicas_agree(&cluster, &map, "crash", names.iter());
    for osd in 0..3 {
        let dir = cluster.path().join(format!("osd.{osd}"));
        let out = shoal().args(["debug", "fsck", "--deep", "--data"]).arg(&dir).output().unwrap();
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "fsck of osd.{osd}: {report}{}", String::from_utf8_lossy(&out.stderr));
        assert!(report.contains(&format!("referenced {}", 12 * 4194304)), "osd.{osd}: {report}");
    }
    eprintln!("{kills} kills of osd.1, {} acknowledged 4 MiB writes verified", acked.len());
}

#[test]
fn a_bad_checksum_is_repaired_from_a_replica_or_reported_on_a_single_copy() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    ok(&conf, &["pool", "create", "rep", "--size", "3", "--pg-num", "8"]);
    ok(&conf, &["pool", "create", "one", "--size", "1", "--pg-num", "8"]);
    // 1 MiB of bytes that differ chunk to chunk, stored on the data device.
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    for pool in ["rep", "one"] {
        assert!(cluster.put(pool, "big", &data), "writing to pool {pool}");
    }

    // Three copies: the primary's copy is damaged; the read is answered from a replica and
    // the primary's copy rewritten, so the next read finds it good.
    let out = ok(&conf, &["debug", "corrupt", "--pool", "rep", "--object", "big", "--chunk", "3"]);
    assert!(out.contains("(primary)"), "{out}");
    let primary = first_osd(&out);
    assert_eq!(cluster.get("rep", "big"), Ok(data.clone()));
    let counters = osd_counters(&conf, &primary);
    assert_eq!((counters["checksum_errors"].as_u64(), counters["read_repairs"].as_u64()), (Some(1), Some(1)));
    assert_eq!(cluster.get("rep", "big"), Ok(data.clone()));
    assert_eq!(osd_counters(&conf, &primary)["checksum_errors"].as_u64(), Some(1), "the copy was repaired");
    let text = scrape_checked(&metrics_url(&cluster, &primary));
    assert_eq!(sample(&text, &format!("shoal_osd_read_repairs_total{{daemon=\"{primary}\"}}")), Some(1.0), "{text}");
    // The largest object (osd_max_object_size, 128 MiB; put and got in 4 MiB operations)
    // is repaired too: pulled whole, it would not fit one 128 MiB message, so the good
    // copy comes in parts.
    let largest: Vec<u8> = data.iter().copied().cycle().take(128 << 20).collect();
    assert!(cluster.put("rep", "largest", &largest));
    let out = ok(&conf, &["debug", "corrupt", "--pool", "rep", "--object", "largest", "--chunk", "1500"]);
    let primary = first_osd(&out);
    let before = osd_counters(&conf, &primary)["read_repairs"].as_u64().unwrap();
    assert!(cluster.get("rep", "largest") == Ok(largest), "the 128 MiB object reads back whole");
    assert_eq!(osd_counters(&conf, &primary)["read_repairs"].as_u64(), Some(before + 1));

    // One copy: the client gets EIO naming the object, never the damaged bytes, and the
    // cluster reports the object until it is rewritten.
    let out = ok(&conf, &["debug", "corrupt", "--pool", "one", "--object", "big"]);
    assert!(out.contains("(primary)"), "{out}");
    let err = cluster.get("one", "big").expect_err("a damaged single copy was served");
    assert!(err.contains("EIO") && err.contains("checksum mismatch") && err.contains("'big'"), "{err}");
    let reported =
        cluster.wait_status(|s| s.contains("HEALTH_ERR") && s.contains("1 damaged object") && s.contains("checksum"));
    let status = reported.expect("shoal status reports the damaged object");
    assert!(status.contains("object 'big'") && status.contains("inconsistent"), "{status}");
    // The OSD keeps the report across a restart.
    let holder = first_osd(&out);
    let args = cmdline(cluster.pid(&holder));
    kill9(cluster.pid(&holder));
    let mut restarted = Restarted::default();
    restarted.restart(&cluster, &holder, &args);
    let reported = cluster.wait_status(|s| s.contains("HEALTH_ERR") && s.contains("object 'big'"));
    assert!(reported.is_ok(), "the restarted {holder} still reports the damage: {reported:?}");
    assert!(cluster.put("one", "big", &data));
    assert_eq!(cluster.get("one", "big"), Ok(data));
    cluster.wait_status(|s| s.contains("HEALTH_OK")).expect("the cluster is healthy again");

    // The monitor's endpoint is scraped too.
    let text = scrape_checked(&metrics_url(&cluster, "mon.0"));
    assert_eq!(sample(&text, "shoal_mon_osds_up"), Some(3.0), "{text}");
}

/// Three OSDs on three hosts that report a silent peer after 2 s, with a size-3 pool of
/// `pg_num` PGs.
fn three_osds_with_fast_heartbeats(pg_num: &str) -> Vstart {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    ok(&conf, &["config", "set", "global", "osd_heartbeat_interval", "0.3"]);
    ok(&conf, &["config", "set", "global", "osd_heartbeat_grace", "2"]);
    ok(&conf, &["pool", "create", POOL, "--size", "3", "--min-size", "2", "--pg-num", pg_num]);
    cluster
}

#[test]
fn a_stopped_primary_does_not_hang_its_clients() {
    let cluster = three_osds_with_fast_heartbeats("8");
    let conf = cluster.conf();
    ok(&conf, &["pool", "create", "single", "--size", "1", "--min-size", "1", "--pg-num", "8"]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rados = runtime.block_on(cluster.rados(Duration::from_secs(120)));
    let (replicated, single) = runtime.block_on(async {
        let replicated = rados.ioctx(POOL).await.unwrap();
        replicated.write_full("obj", &b"before"[..]).await.unwrap();
        let single = rados.ioctx("single").await.unwrap();
        single.write_full("obj", &b"before"[..]).await.unwrap();
        (replicated, single)
    });
    let primary_of = |pool: &str| {
        let map = rados.map();
        let pool = map.pools.values().find(|p| p.name == pool).unwrap();
        let pg = shoal_placement::pg_of(pool, &ObjectName::new(String::new(), "obj"));
        shoal_placement::pg_primary(&map, pool, pg).unwrap()
    };
    let primary = primary_of(POOL);
    let stopped = cluster.pid(&primary.to_string());
    signal(stopped, "-STOP");
    // The replicated pool's write moves to the new primary once the stopped one is marked
    // down; before this change it waited on the stopped OSD's connection for good.
    let write = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(110), replicated.write_full("obj", &b"after"[..])).await
    });
    assert!(matches!(write, Ok(Ok(()))), "write with {primary} stopped: {write:?}");
    assert_eq!(runtime.block_on(replicated.read_full("obj")).unwrap(), &b"after"[..]);
    // (Polled: on a loaded machine the 2 s grace can mark the OSD down and, on a boot it
    // sent just before it stopped, up again, until its heartbeats fail once more.)
    let moved = wait_for(|| {
        runtime.block_on(rados.refresh_map()).ok()?;
        (primary_of(POOL) != primary).then_some(())
    });
    assert!(moved.is_some(), "the map moved the PG away from the stopped {primary}");

    // An OSD stopped for less than the heartbeat grace stays up in the map: the client
    // gets ETIMEDOUT at its op timeout instead of waiting forever.
    signal(stopped, "-CONT");
    ok(&conf, &["config", "set", "global", "osd_heartbeat_grace", "600"]);
    let all_up = wait_for(|| {
        let map = runtime.block_on(rados.refresh_map()).unwrap();
        map.osds.values().all(|o| o.up).then_some(())
    });
    assert!(all_up.is_some(), "{primary} did not boot again after SIGCONT");
    let only = primary_of("single");
    let stopped = cluster.pid(&only.to_string());
    rados.set_op_timeout(Duration::from_secs(5));
    signal(stopped, "-STOP");
    let write = runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), single.write_full("obj", &b"after"[..])).await
    });
    signal(stopped, "-CONT");
    match write {
        Ok(Err(e)) => assert_eq!(e.errno, shoal_types::Errno::TimedOut, "{e}"),
        other => panic!("write with the only OSD of its PG stopped: {other:?}"),
    }

    // Killed, its address refuses connections: a peer reports that at once, and the
    // monitor marks it down long before the 600 s grace.
    kill9(stopped);
    let down = wait_for(|| runtime.block_on(rados.refresh_map()).unwrap().osds[&only].up.eq(&false).then_some(()));
    assert!(down.is_some(), "{only} was not marked down after SIGKILL");
    let log = std::fs::read_to_string(cluster.path().join("mon.0.log")).unwrap();
    assert!(log.contains("marking OSD down") && log.contains("Refused"), "{log}");
}

#[test]
fn an_osd_whose_wal_sync_fails_exits_and_its_pgs_move_on() {
    let cluster = three_osds_with_fast_heartbeats("8");
    let conf = cluster.conf();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rados = runtime.block_on(cluster.rados(Duration::from_secs(120)));
    let io = runtime.block_on(rados.ioctx(POOL)).unwrap();
    runtime.block_on(io.write_full("obj", &b"before"[..])).unwrap();
    let map = rados.map();
    let pool = map.pool_named(POOL).unwrap();
    let pg = shoal_placement::pg_of(pool, &ObjectName::new(String::new(), "obj"));
    let primary = shoal_placement::pg_primary(&map, pool, pg).unwrap();
    let pid = cluster.pid(&primary.to_string());
    ok(&conf, &["tell", &primary.to_string(), "inject", "wal-sync-failure"]);
    // The write whose sync fails is not answered as failed: the client resends it to the
    // next primary once the failed OSD has left.
    runtime.block_on(io.write_full("obj", &b"after"[..])).unwrap();
    assert_eq!(runtime.block_on(io.read_full("obj")).unwrap(), &b"after"[..]);
    let exited = wait_for(|| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        (stat.is_empty() || stat.contains(") Z ")).then_some(())
    });
    assert!(exited.is_some(), "{primary} still runs after its WAL sync failed");
    let log = std::fs::read_to_string(cluster.path().join(format!("{primary}.log"))).unwrap();
    assert!(log.contains("stops: WAL sync failed"), "{primary} did not say why it stopped:\n{log}");
    let down = wait_for(|| {
        let map = runtime.block_on(rados.refresh_map()).unwrap();
        map.osds.get(&primary).is_some_and(|o| !o.up).then_some(())
    });
    assert!(down.is_some(), "{primary} is still up in the map");
}

#[test]
fn objects_larger_than_a_message_recover_in_parts() {
    let cluster = three_osds_with_fast_heartbeats("1");
    let conf = cluster.conf();
    let mut restarted = Restarted::default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rados = runtime.block_on(cluster.rados(Duration::from_secs(120)));
    let io = runtime.block_on(rados.ioctx(POOL)).unwrap();
    let map = rados.map();
    let pool = map.pool_named(POOL).unwrap().clone();
    let acting = shoal_placement::pg_up_osds(&map, &pool, shoal_types::PgId { pool: pool.id, seed: 0 });
    let replica = acting[1].to_string();
    let args = cmdline(cluster.pid(&replica));
    kill9(cluster.pid(&replica));
    // Written while the replica is away: six 30 MiB objects (more than one 128 MiB message
    // of the daemons' messenger, which recovery once sent as one push) and an index-like
    // object with 20 MiB of omap.
    let big = |i: usize| vec![b'a' + i as u8; 30 << 20];
    let mut names: Vec<String> = (0..6).map(|i| format!("big{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        runtime.block_on(io.write_full(name, big(i))).unwrap();
    }
    for batch in 0..20 {
        let rows = (0..1024).map(|i| (Bytes::from(format!("key{batch:02}{i:04}")), Bytes::from(vec![b'v'; 1000])));
        runtime.block_on(io.operate("index", WriteOp::new().omap_set(rows))).unwrap();
    }
    names.push("index".into());
    restarted.restart(&cluster, &replica, &args);
    wait_clean(&conf, 1, &format!("recovery of {replica}"));
    // The primary away while the objects are rewritten: back, the monitor keeps the PG led
    // by a replica that has them (a primed primary_temp), the returning OSD receives them
    // in parts, and it leads again once it has them.
    let primary = acting[0].to_string();
    let args = cmdline(cluster.pid(&primary));
    kill9(cluster.pid(&primary));
    let big = |i: usize| vec![b'A' + i as u8; 30 << 20];
    for (i, name) in names.iter().take(6).enumerate() {
        runtime.block_on(io.write_full(name, big(i))).unwrap();
    }
    restarted.restart(&cluster, &primary, &args);
    let pg = shoal_types::PgId { pool: pool.id, seed: 0 };
    let clean = wait_for(|| {
        let map = runtime.block_on(rados.refresh_map()).ok()?;
        let pgs = ok(&conf, &["pg", "dump"]);
        let leads = shoal_placement::pg_primary(&map, &pool, pg) == Some(acting[0]) && map.primary_temp.is_empty();
        (leads && pgs.lines().filter(|l| l.contains(" active+clean")).count() == 1).then_some(())
    });
    assert!(clean.is_some(), "recovery of {primary} did not finish:\n{}", ok(&conf, &["pg", "dump"]));
    let log = std::fs::read_to_string(cluster.path().join(format!("{primary}.restarted.log"))).unwrap();
    assert!(!log.contains("let an up-to-date copy lead"), "{primary} led and had to hand its PG over:\n{log}");
    // The replica that led while the primary was down kept leading (its log is the
    // restarted one, at info level for the PG protocol).
    let log = std::fs::read_to_string(cluster.path().join(format!("{replica}.restarted.log"))).unwrap();
    assert!(log.contains("handing the PG back"), "{replica} did not lead while {primary} was recovered:\n{log}");
    for (i, name) in names.iter().take(6).enumerate() {
        assert!(runtime.block_on(io.read_full(name)).unwrap() == big(i), "{name}");
    }
    let map = runtime.block_on(rados.refresh_map()).unwrap();
    drop(rados);
    drop(runtime);
    cluster.stop();
    drop(restarted);
    replicas_agree(&cluster, &map, POOL, names.iter());
}

/// The last scrub report of `pg` on `osd`, as `scrub-status` gives it.
fn scrub_report(conf: &str, osd: &str, pg: &str) -> Option<serde_json::Value> {
    let reports: Vec<serde_json::Value> = serde_json::from_str(&ok(conf, &["tell", osd, "scrub-status"])).unwrap();
    reports.into_iter().find(|r| r["pg"].as_str() == Some(pg))
}

#[test]
fn scrub_reports_a_corrupted_replica_and_a_missing_copy_and_repair_rewrites_them() {
    let cluster = Vstart::start("3", "3");
    let conf = cluster.conf();
    // Pages of three objects, so a scrub takes several steps.
    ok(&conf, &["config", "set", "global", "osd_scrub_chunk_max", "3"]);
    ok(&conf, &["pool", "create", "scrubbed", "--size", "3", "--pg-num", "1"]);
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    let names: Vec<String> = (0..10).map(|i| format!("o{i}")).collect();
    for name in &names {
        assert!(cluster.put("scrubbed", name, &data), "writing {name}");
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rados = runtime.block_on(cluster.rados(Duration::from_secs(120)));
    let map = runtime.block_on(rados.refresh_map()).unwrap();
    let pool = map.pool_named("scrubbed").unwrap().clone();
    let pg = shoal_types::PgId { pool: pool.id, seed: 0 };
    let up = shoal_placement::pg_up_osds(&map, &pool, pg);
    assert_eq!(up.len(), 3, "{up:?}");
    let (pgid, primary) = (pg.to_string(), up[0].to_string());
    let scrub = |verb: &str| ok(&conf, &["pg", verb, &pgid, "--wait", "120"]);

    let out = scrub("deep-scrub");
    assert!(out.contains(&format!("pg {pgid} deep-scrub on {primary}: 10 objects, 0 inconsistent")), "{out}");

    // One replica's copy of o3 gets a flipped byte; another replica loses o7 behind the
    // PG log's back.
    ok(
        &conf,
        &["debug", "corrupt", "--pool", "scrubbed", "--object", "o3", "--osd", &up[1].0.to_string(), "--chunk", "1"],
    );
    ok(&conf, &["tell", &up[2].to_string(), "injectremove", "scrubbed", "o7"]);

    // A light scrub compares metadata: it finds the missing copy, not the flipped byte.
    let out = scrub("scrub");
    assert!(out.contains("10 objects, 1 inconsistent, 0 repaired"), "{out}");
    assert!(out.contains(&format!("object 'o7' ({primary}): {}: missing", up[2])), "{out}");
    // A deep scrub reads every byte: both.
    let out = scrub("deep-scrub");
    assert!(out.contains("10 objects, 2 inconsistent, 0 repaired"), "{out}");
    assert!(out.contains(&format!("object 'o3' ({primary}): {}: read error", up[1])), "{out}");
    assert!(out.contains("checksum"), "{out}");
    // The monitor hears of it with the next PG stats.
    let status = cluster.wait_status(|s| s.contains("1 pgs inconsistent")).unwrap_or_else(|last| last);
    assert!(status.contains("HEALTH_ERR") && status.contains("1 pgs inconsistent"), "{status}");
    assert!(status.contains("2 damaged objects") && status.contains("object 'o7'"), "{status}");
    // Once the primary reports after the scrub (stats are sent every second).
    let settled = wait_for(|| ok(&conf, &["pg", "dump"]).contains("active+clean+inconsistent").then_some(()));
    assert!(settled.is_some(), "{}", ok(&conf, &["pg", "dump"]));

    // Repair rewrites both bad copies from the good ones; a deep scrub then finds none.
    let out = scrub("repair");
    assert!(out.contains("10 objects, 0 inconsistent, 2 repaired"), "{out}");
    let out = scrub("deep-scrub");
    assert!(out.contains("10 objects, 0 inconsistent, 0 repaired"), "{out}");
    cluster.wait_status(|s| s.contains("HEALTH_OK")).expect("the cluster is healthy again");
    for osd in &up {
        let counters = osd_counters(&conf, &osd.to_string());
        assert_eq!(counters["checksum_errors"].as_u64(), Some(0), "{osd}: a client read met a bad copy");
    }
    for name in &names {
        assert_eq!(cluster.get("scrubbed", name).as_ref(), Ok(&data), "{name}");
    }

    // Scheduled scrubs: once the minimum interval is short and the load threshold high,
    // the PG is scrubbed again without being asked.
    let last = scrub_report(&conf, &primary, &pgid).unwrap()["finished_ns"].as_u64().unwrap();
    ok(&conf, &["config", "set", "global", "osd_scrub_load_threshold", "1000"]);
    ok(&conf, &["config", "set", "global", "osd_scrub_min_interval", "1"]);
    let scheduled = wait_for(|| {
        let report = scrub_report(&conf, &primary, &pgid)?;
        (report["finished_ns"].as_u64()? > last).then_some(report)
    });
    let report = scheduled.expect("no scheduled scrub within two minutes");
    assert_eq!((report["objects"].as_u64(), report["errors"].as_u64()), (Some(10), Some(0)), "{report}");
}

/// Recovery from a primary whose copy is damaged: with a good replica left, the copy is
/// repaired from it first and then pushed; with none, the object is reported unfound and
/// the rest recovers. Before, the primary peered again and retried the push forever.
#[test]
fn recovery_repairs_a_damaged_source_copy_first_or_reports_it_unfound() {
    let cluster = Vstart::start("4", "4");
    let conf = cluster.conf();
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8).collect();
    let up = |pg: &str| cluster.up_set(pg);
    // Waits until `pg` is active+clean on a set without `out`.
    let clean = |pg: &str, out: &str| {
        let state = wait_for(|| {
            let dump = ok(&conf, &["pg", "dump"]);
            let row = dump.lines().find(|l| l.starts_with(&format!("{pg} ")))?.to_owned();
            let moved = !up(pg).contains(&out.to_owned());
            (moved && row.contains(" active+clean")).then_some(row)
        });
        state.unwrap_or_else(|| panic!("pg {pg} never became clean:\n{}", ok(&conf, &["pg", "dump"])))
    };
    for (pool, size) in [("three", "3"), ("two", "2")] {
        ok(&conf, &["pool", "create", pool, "--size", size, "--pg-num", "1"]);
        for name in ["big", "a", "b", "c"] {
            assert!(cluster.put(pool, name, &data), "writing {pool}/{name}");
        }
    }

    // Three copies: the primary's copy of 'big' is damaged and a replica is marked out.
    // The third copy repairs the primary's, which the new replica then receives whole.
    let before = up("1.0");
    let primary = before[0].clone();
    let out = ok(&conf, &["debug", "corrupt", "--pool", "three", "--object", "big", "--chunk", "3"]);
    assert!(out.contains(&format!("on {primary} (primary)")), "{out}");
    ok(&conf, &["osd", "out", before[1].trim_start_matches("osd.")]);
    clean("1.0", &before[1]);
    let after = up("1.0");
    assert_eq!(after[0], primary, "the primary stays: {before:?} → {after:?}");
    // (A scrub starts once the PG is clean as its primary knows it.)
    let out = ok(&conf, &["pg", "deep-scrub", "1.0", "--wait", "120"]);
    assert!(out.contains("4 objects, 0 inconsistent"), "every copy is good: {out}");
    assert_eq!(osd_counters(&conf, &primary)["read_repairs"].as_u64(), Some(1), "the source copy was repaired");
    assert_eq!(cluster.get("three", "big").as_ref(), Ok(&data));

    // Two copies: the only good copy of 'big' is marked out with its OSD. 'big' is reported
    // unfound (reads get EIO, never the damaged bytes); the other objects recover.
    let before = up("2.0");
    let out = ok(&conf, &["debug", "corrupt", "--pool", "two", "--object", "big", "--chunk", "3"]);
    assert!(out.contains(&format!("on {} (primary)", before[0])), "{out}");
    ok(&conf, &["osd", "out", before[1].trim_start_matches("osd.")]);
    let row = clean("2.0", &before[1]);
    assert!(row.contains("inconsistent"), "{row}");
    assert_eq!(up("2.0")[0], before[0], "the primary stays");
    let err = cluster.get("two", "big").expect_err("the damaged 'big' was served");
    assert!(err.contains("EIO"), "{err}");
    for name in ["a", "b", "c"] {
        assert_eq!(cluster.get("two", name).as_ref(), Ok(&data), "{name}");
    }
    let status = ok(&conf, &["status"]);
    assert!(status.contains("HEALTH_ERR") && status.contains("object 'big'"), "{status}");
}

/// A primary that is behind, with no up-to-date member of its acting set to hand the PG
/// to, pulls what it lacks from the authority (here an OSD marked out). When the
/// authority's copy of an object does not read back, that object is reported unfound
/// (every operation but a removal gets EIO, never the older local copy) and the rest
/// recovers. Before, the primary peered again and retried the pull forever.
#[test]
fn a_pull_from_a_damaged_authority_reports_the_object_unfound() {
    let cluster = Vstart::start("2", "2");
    let conf = cluster.conf();
    ok(&conf, &["pool", "create", "two", "--size", "2", "--min-size", "1", "--pg-num", "1"]);
    let bytes = |seed: u32| -> Vec<u8> { (0..1u32 << 20).map(|i| (i.wrapping_mul(seed) >> 11) as u8).collect() };
    let (old, new) = (bytes(2_654_435_761), bytes(2_246_822_519));
    for name in ["big", "kept"] {
        assert!(cluster.put("two", name, &old), "writing {name}");
    }
    let up = cluster.up_set("1.0");
    let (primary, other) = (up[0].clone(), up[1].clone());

    // Written while the primary is away, to the other OSD alone, whose new copy of 'big'
    // is then damaged; that OSD is marked out before the primary returns.
    let args = cmdline(cluster.pid(&primary));
    kill9(cluster.pid(&primary));
    for name in ["big", "fresh"] {
        assert!(cluster.put("two", name, &new), "writing {name} while {primary} is away");
    }
    let out = ok(&conf, &["debug", "corrupt", "--pool", "two", "--object", "big", "--chunk", "3"]);
    assert!(out.contains(&format!("on {other} (primary)")), "{out}");
    ok(&conf, &["osd", "out", other.trim_start_matches("osd.")]);
    let mut restarted = Restarted::default();
    restarted.restart(&cluster, &primary, &args);
    let active = wait_for(|| {
        let dump = ok(&conf, &["pg", "dump"]);
        let row = dump.lines().find(|l| l.starts_with("1.0 "))?.to_owned();
        (row.contains(" active") && cluster.up_set("1.0") == [primary.clone()]).then_some(row)
    });
    assert!(active.is_some(), "pg 1.0 never went active on {primary}:\n{}", ok(&conf, &["pg", "dump"]));
    let log = std::fs::read_to_string(cluster.path().join(format!("{primary}.restarted.log"))).unwrap();
    assert!(log.contains("unfound"), "{primary} pulled without finding the damage:\n{log}");

    let err = cluster.get("two", "big").expect_err("the older 'big' was served");
    assert!(err.contains("EIO") && err.contains("unfound"), "{err}");
    assert_eq!(cluster.get("two", "fresh"), Ok(new.clone()), "an object written while the primary was away recovers");
    assert_eq!(cluster.get("two", "kept"), Ok(old));
    let status = ok(&conf, &["status"]);
    assert!(status.contains("HEALTH_ERR") && status.contains("object 'big'") && status.contains("unfound"), "{status}");

    // The primary keeps the report across a restart; a removal clears it, and the object
    // can be written again.
    restarted.kill9_last();
    restarted.restart(&cluster, &primary, &args);
    let read =
        wait_for(|| Some(cluster.get("two", "big")).filter(|r| r.as_ref().is_err_and(|e| e.contains("unfound"))));
    assert!(read.is_some(), "the restarted {primary} forgot that 'big' is unfound: {:?}", cluster.get("two", "big"));
    ok(&conf, &["rados", "-p", "two", "rm", "big"]);
    assert!(cluster.put("two", "big", &new));
    assert_eq!(cluster.get("two", "big"), Ok(new));
    cluster.wait_status(|s| !s.contains("unfound")).expect("the removal ends the report");
}

/// One S3 client's part of `load`: PUTs objects `s{n}` into `bucket` until it stops,
/// recording each acknowledged one in `acked` and errors in the load's.
async fn s3_writer(
    s3: shoal_bench::s3client::S3Client,
    bucket: &'static str,
    load: Load,
    acked: Arc<Mutex<Vec<String>>>,
) {
    let Load { stop, errors, .. } = load;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let key = format!("s{n}");
        let body = Bytes::from(payload(usize::MAX, n));
        match s3.expect_ok(http::Method::PUT, &format!("/{bucket}/{key}"), &[], body).await {
            Ok(_) => acked.lock().unwrap().push(key),
            Err(e) => errors.lock().unwrap().push(format!("PUT {key}: {e}")),
        }
    }
}

/// The `pool ls` line of `pool`.
fn pool_line(conf: &str, pool: &str) -> String {
    ok(conf, &["pool", "ls"]).lines().find(|l| l.starts_with(&format!("{pool} "))).unwrap_or_default().to_owned()
}

/// Growing and reshaping a cluster while RADOS writers and an S3 client write: `pg_num`
/// 16 -> 64 -> 32 on the RADOS pool and on the gateway's data pool, then hosts moved into
/// racks, a new host with two OSDs, an override weight of 0.5 and an OSD drained and
/// purged. Children start on their parents' OSDs (placement does not move until
/// `pgp_num` does); the leader then raises `pgp_num` step by step to 64 and the children
/// spread. Merging brings `pgp_num` down to 32 first, then pauses each pool's IO while its
/// copies settle and merge (the longest write is printed). No client sees an error, no
/// append is applied twice, every acknowledged write reads back, every PG ends
/// active+clean and the replicas agree.
#[test]
fn splitting_merging_and_reshaping_under_load_loses_nothing() {
    const DATA: &str = ".rgw.buckets.data";
    let cluster = Vstart::start_with(&["--osds", "5", "--hosts", "5"]);
    let conf = cluster.conf();
    ok(&conf, &["pool", "create", POOL, "--size", "3", "--min-size", "2", "--pg-num", "16"]);
    ok(&conf, &["pool", "create", DATA, "--size", "3", "--min-size", "2", "--pg-num", "16"]);
    // A quarter of a pool per step keeps the test short; the default is 0.05.
    ok(&conf, &["config", "set", "mon", "target_max_misplaced_ratio", "0.25"]);
    let (_gateway, port) = cluster.start_gateway(0, &[], shoal());
    let s3 = cluster.user_clients("split", &[port]).remove(0);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(s3.expect_ok(http::Method::PUT, "/split", &[], Bytes::new())).unwrap();
    let rados = runtime.block_on(cluster.rados(Duration::from_secs(120)));
    let (load, mut writers) = Load::start(&runtime, &rados);
    let s3_acked = Arc::new(Mutex::new(Vec::new()));
    writers.push(runtime.spawn(s3_writer(s3.clone(), "split", load.clone(), s3_acked.clone())));
    let ops = &load.ops;
    let moving = || {
        let before = (ops.load(Ordering::Relaxed), s3_acked.lock().unwrap().len());
        wait_for(|| (ops.load(Ordering::Relaxed) > before.0 && s3_acked.lock().unwrap().len() > before.1).then_some(()))
            .is_some()
    };
    assert!(moving(), "the writers write");
    let up_before = up_sets(&conf);

    for pool in [POOL, DATA] {
        let set = ok(&conf, &["osd", "pool", "set", pool, "pg_num", "64"]);
        assert!(set.contains(&format!("set pool '{pool}' pg_num to 64")), "{set}");
    }
    // Right after the split, placement (pgp_num) has not caught up: children sit with their parents.
    let line = pool_line(&conf, POOL);
    assert!(line.contains("pg_num 64 pgp_num"), "{line}");
    assert!(moving(), "the writers go on during the split");
    let spread = wait_for(|| {
        let (data, rgw) = (pool_line(&conf, POOL), pool_line(&conf, DATA));
        (data.contains("pg_num 64 crush_rule") && rgw.contains("pg_num 64 crush_rule")).then_some(())
    });
    assert!(spread.is_some(), "pgp_num did not reach 64: {}", ok(&conf, &["pool", "ls"]));
    assert!(moving(), "the writers go on after pgp_num reached pg_num");
    wait_all_clean(&conf, "after the split");

    let up_after = up_sets(&conf);
    let pool_id = rados.map().pool_named(POOL).unwrap().id;
    let moved = (16..64u32)
        .filter(|seed| {
            let parent = format!("{pool_id}.{:x}", seed % 16);
            up_after.get(&format!("{pool_id}.{seed:x}")) != up_before.get(&parent)
        })
        .count();
    assert!(moved > 0, "no child left its parent's OSDs: {up_after:?}");
    eprintln!("{moved} of 48 children left their parent's OSDs");

    // Merging back to 32 under the same load: placement comes down first (each source
    // joins its target), then each pool's IO pauses while its copies settle and merge.
    load.longest_us.store(0, Ordering::Relaxed);
    for pool in [POOL, DATA] {
        let set = ok(&conf, &["osd", "pool", "set", pool, "pg_num", "32"]);
        assert!(set.contains(&format!("set pool '{pool}' pg_num to 32")), "{set}");
        assert!(pool_line(&conf, pool).contains("(merging to 32)"), "{}", pool_line(&conf, pool));
    }
    let (refused, _, why) = shoal_c(&conf, &["osd", "pool", "set", POOL, "pg_num", "128"]);
    assert!(!refused && why.contains("is merging"), "{why}");
    let merged = wait_for(|| {
        let (data, rgw) = (pool_line(&conf, POOL), pool_line(&conf, DATA));
        (data.contains("pg_num 32 crush_rule") && rgw.contains("pg_num 32 crush_rule")).then_some(())
    });
    assert!(merged.is_some(), "the pools did not merge to 32: {}", ok(&conf, &["pool", "ls"]));
    assert!(moving(), "the writers go on after the merge");
    let longest = Duration::from_micros(load.longest_us.load(Ordering::Relaxed));
    eprintln!("the longest RADOS write while the pools merged took {longest:?}");

    // Reshaping under the same load: hosts into racks, a new host with two OSDs, one OSD's
    // override weight halved, one OSD drained and purged.
    let crush = |args: &[&str]| ok(&conf, &[&["osd", "crush"][..], args].concat());
    for rack in ["rack0", "rack1"] {
        crush(&["add-bucket", rack, "rack", "root=default"]);
    }
    for (host, rack) in
        [("host0", "rack0"), ("host1", "rack0"), ("host2", "rack1"), ("host3", "rack1"), ("host4", "rack1")]
    {
        crush(&["move", host, &format!("rack={rack}")]);
    }
    let new_osds: Vec<Daemon> = ["5", "6"]
        .iter()
        .map(|id| {
            let mut command = shoal();
            command.args(["osd", "run", "--id", id, "--host", "host9", "-c", &conf]);
            Daemon::spawn(command, &cluster.path().join(format!("osd.{id}.log")))
        })
        .collect();
    let joined = wait_for(|| ok(&conf, &["status"]).contains("7 up, 7 in").then_some(()));
    assert!(joined.is_some(), "osd.5 and osd.6 join: {}", ok(&conf, &["osd", "tree"]));
    assert!(ok(&conf, &["osd", "reweight", "osd.1", "0.5"]).contains("override to 0.5000"));
    ok(&conf, &["osd", "out", "0"]);
    wait_all_clean(&conf, "after osd.0 went out");
    assert!(moving(), "the writers go on while the cluster is reshaped");
    kill9(cluster.pid("osd.0"));
    let purged = wait_for(|| shoal_c(&conf, &["osd", "purge", "0", "--yes-i-really-mean-it"]).0.then_some(()));
    assert!(purged.is_some(), "osd.0 is purged once down: {}", ok(&conf, &["osd", "tree"]));
    let tree = ok(&conf, &["osd", "tree"]);
    assert!(tree.contains("rack rack0") && tree.contains("host host9") && !tree.contains("osd.0 "), "{tree}");
    load.stop(&runtime, writers);
    wait_all_clean(&conf, "after the reshape");

    let acked = load.verify(&runtime, &rados);
    let s3_acked = s3_acked.lock().unwrap().clone();
    eprintln!("{} RADOS writes and {} S3 PUTs acknowledged", ops.load(Ordering::Relaxed), s3_acked.len());
    for (n, key) in s3_acked.iter().enumerate() {
        let got =
            runtime.block_on(s3.expect_ok(http::Method::GET, &format!("/split/{key}"), &[], Bytes::new())).unwrap();
        assert_eq!(got.body, payload(usize::MAX, n as u64 + 1), "{key}");
    }
    let map = rados.map();
    drop(rados);
    drop(runtime);
    drop(_gateway);
    drop(new_osds);
    cluster.stop();
    replicas_agree(&cluster, &map, POOL, acked.keys());
}

/// Every PG's up set as `pg dump` prints it, by PG id.
fn up_sets(conf: &str) -> BTreeMap<String, String> {
    let dump = ok(conf, &["pg", "dump"]);
    dump.lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            Some((fields.next()?.to_owned(), fields.next()?.to_owned()))
        })
        .collect()
}
