//! An erasure-coded 4+2 pool on eight one-OSD hosts, as separate processes over real TCP:
//! writes (whole, appends and partial overwrites) go on while an OSD is SIGKILLed, reads
//! are served degraded, two lost OSDs marked out are rebuilt on the spare hosts, the PGs
//! come back active+clean when they return, a corrupted shard (a bad checksum, or wrong
//! bytes under a good one, found by the parity check) is found and rebuilt, and a
//! PG that loses more than `m` shards stops serving rather than answering wrongly.

use bytes::Bytes;
use shoal_bench::harness::{Restarted, Vstart, cmdline, kill9, ok, osd_counters, shoal_c, wait_clean, wait_for};
use shoal_client::{IoCtx, WriteOp};
use shoal_types::{ObjectName, OsdId};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const POOL: &str = "ecdata";

/// What each object may hold: its acknowledged bytes, and those of a write in flight (an
/// unacknowledged write may or may not have happened, never half).
#[derive(Default)]
struct Model {
    acked: BTreeMap<String, Vec<u8>>,
    pending: BTreeMap<String, Vec<u8>>,
}

/// Deterministic bytes for write `n` of an object.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| ((i.wrapping_add(seed).wrapping_mul(2_654_435_761)) >> 13) as u8).collect()
}

/// One writer: cycles its objects through whole rewrites of varied sizes (0 bytes to
/// 1.5 MiB), appends and partial overwrites, recording each in the model before sending
/// it and once acknowledged.
async fn writer(io: IoCtx, id: usize, model: Arc<Mutex<Model>>, stop: Arc<AtomicBool>) -> u64 {
    let sizes = [0usize, 1, 4095, 16_385, 100_000, 1_500_000];
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let name = format!("w{id}.{}", n % 4);
        let old = model.lock().unwrap().acked.get(&name).cloned();
        let seed = (id as u64) << 32 | n;
        let (op, new) = match (n / 4 % 3, old) {
            (1, Some(mut data)) => {
                let extra = bytes(seed, 10_000 + (n as usize % 3) * 7_000);
                data.extend_from_slice(&extra);
                (WriteOp::new().append(Bytes::from(extra)), data)
            }
            (2, Some(mut data)) if !data.is_empty() => {
                let at = (n as usize * 7_919) % data.len();
                let patch = bytes(seed, 3_000 + n as usize % 20_000);
                let end = at + patch.len();
                if data.len() < end {
                    data.resize(end, 0);
                }
                data[at..end].copy_from_slice(&patch);
                (WriteOp::new().write(at as u64, Bytes::from(patch)), data)
            }
            _ => {
                let data = bytes(seed, sizes[(n as usize + id) % sizes.len()]);
                (WriteOp::new().write_full(Bytes::from(data.clone())), data)
            }
        };
        model.lock().unwrap().pending.insert(name.clone(), new.clone());
        io.operate(&name, op).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut m = model.lock().unwrap();
        m.pending.remove(&name);
        m.acked.insert(name, new);
        n += 1;
    }
    n
}

/// Reads the writers' objects at random until `stop`; every read must be answered (one
/// of an object not written yet: ENOENT). Returns how many were, and the slowest.
async fn reader(io: IoCtx, stop: Arc<AtomicBool>) -> (u64, Slowest) {
    let mut reads = 0;
    let mut slowest = Slowest::default();
    while !stop.load(Ordering::Relaxed) {
        let n: u64 = rand::random();
        let name = format!("w{}.{}", n % 4, (n >> 8) % 4);
        let started = Instant::now();
        match io.read_full(&name).await {
            Ok(_) => reads += 1,
            Err(e) if e.errno == shoal_types::Errno::NotFound => reads += 1,
            Err(e) => panic!("reading {name}: {e}"),
        }
        slowest = slowest.max(Slowest { took: started.elapsed(), name, at: started });
    }
    (reads, slowest)
}

/// The slowest read of a reader: how long it took, of which object, when it started.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Slowest {
    took: Duration,
    name: String,
    at: Instant,
}

impl Default for Slowest {
    fn default() -> Self {
        Slowest { took: Duration::ZERO, name: String::new(), at: Instant::now() }
    }
}

/// Logs the test's client at debug level (its resends, with the errors that caused them)
/// to `client.log` in the cluster's directory, kept with the daemons' logs if the test fails.
fn log_client(cluster: &Vstart) {
    let log = std::fs::File::create(cluster.path().join("client.log")).unwrap();
    tracing_subscriber::fmt()
        .with_env_filter("shoal_client=debug")
        .with_ansi(false)
        .with_writer(Mutex::new(log))
        .init();
}

/// Reads every object of the model back: each must hold its acknowledged bytes (or those
/// of the write in flight when a writer stopped).
fn verify(runtime: &tokio::runtime::Runtime, io: &IoCtx, model: &Mutex<Model>, when: &str) {
    let m = model.lock().unwrap();
    for (name, acked) in &m.acked {
        let read = runtime.block_on(io.read_full(name)).unwrap_or_else(|e| panic!("{when}: reading {name}: {e}"));
        let fits = read == acked[..] || m.pending.get(name).is_some_and(|p| read == p[..]);
        assert!(fits, "{when}: {name} reads {} bytes, not the {} acknowledged", read.len(), acked.len());
    }
}

#[test]
fn an_erasure_coded_pool_serves_degraded_rebuilds_lost_shards_and_repairs_a_bad_one() {
    let cluster = Vstart::start("8", "8");
    log_client(&cluster);
    let conf = cluster.conf();
    ok(&conf, &["osd", "erasure-code-profile", "set", "ec42", "k=4", "m=2", "crush-failure-domain=host"]);
    ok(&conf, &["pool", "create", POOL, "--erasure", "ec42", "--allow-ec-overwrites", "--pg-num", "8"]);
    wait_clean(&conf, 8, "a new pool");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rados = runtime.block_on(cluster.rados(Duration::from_secs(120)));
    let io = runtime.block_on(rados.ioctx(POOL)).unwrap();
    let first_map = runtime.block_on(rados.refresh_map()).unwrap();
    let model = Arc::new(Mutex::new(Model::default()));
    let mut restarted = Restarted::default();

    // Writers run while osd.2 is SIGKILLed: their writes wait for peering, none fails;
    // readers of the same objects get answers throughout (a read that must gather waits
    // for the writes in flight to its object).
    let run_writers = |seconds: u64, during: &dyn Fn()| {
        let (stop, started) = (Arc::new(AtomicBool::new(false)), Instant::now());
        let tasks: Vec<_> =
            (0..4).map(|id| runtime.spawn(writer(io.clone(), id, model.clone(), stop.clone()))).collect();
        let readers: Vec<_> = (0..2).map(|_| runtime.spawn(reader(io.clone(), stop.clone()))).collect();
        std::thread::sleep(Duration::from_secs(seconds));
        during();
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
        let (mut reads, mut slowest) = (0, Slowest::default());
        for (n, slow) in readers.into_iter().map(|t| runtime.block_on(t).unwrap()) {
            reads += n;
            slowest = slowest.max(slow);
        }
        let writes = tasks.into_iter().map(|t| runtime.block_on(t).unwrap()).sum::<u64>();
        let since_start = slowest.at.duration_since(started);
        assert!(
            reads > 10,
            "only {reads} reads ({writes} writes); the slowest, of {}, took {:?} from {since_start:?} after the start",
            slowest.name,
            slowest.took
        );
        writes
    };
    let victims = [OsdId(2), OsdId(5)];
    let args: Vec<Vec<String>> = victims.iter().map(|o| cmdline(cluster.pid(&o.to_string()))).collect();
    let writes = run_writers(4, &|| kill9(cluster.pid(&victims[0].to_string())));
    assert!(writes > 40, "only {writes} writes");
    verify(&runtime, &io, &model, "one OSD down (degraded reads)");

    // A second OSD goes; both are marked out, and their shards are rebuilt on the two
    // spare hosts.
    kill9(cluster.pid(&victims[1].to_string()));
    for osd in victims {
        ok(&conf, &["osd", "out", &osd.0.to_string()]);
    }
    wait_clean(&conf, 8, "two OSDs out");
    // Every object with a shard on a lost OSD was rebuilt, and its primary counted it.
    let pool = first_map.pool_named(POOL).unwrap();
    let on_victims = |name: &String| {
        let pg = shoal_placement::pg_of(pool, &ObjectName::new("", name));
        shoal_placement::pg_up_osds(&first_map, pool, pg).iter().any(|o| victims.contains(o))
    };
    // Its shard holds at least a quarter of its bytes (k = 4).
    let (lost, lost_shard_bytes) = model
        .lock()
        .unwrap()
        .acked
        .iter()
        .filter(|(name, _)| on_victims(name))
        .fold((0, 0), |(n, bytes), (_, data)| (n + 1, bytes + data.len() as u64 / 4));
    let counters: Vec<_> =
        (0..8).map(OsdId).filter(|o| !victims.contains(o)).map(|o| osd_counters(&conf, &o.to_string())).collect();
    let sum = |name: &str| counters.iter().map(|c| c[name].as_u64().unwrap()).sum::<u64>();
    let (recovered, recovered_bytes) = (sum("recovered_objects"), sum("recovered_bytes"));
    assert!(lost > 0 && recovered >= lost, "{recovered} objects counted recovered, {lost} had a shard on {victims:?}");
    assert!(recovered_bytes >= lost_shard_bytes, "{recovered_bytes} bytes counted recovered, {lost_shard_bytes} lost");
    let writes = run_writers(2, &|| {});
    assert!(writes > 10, "only {writes} writes with two OSDs out");
    verify(&runtime, &io, &model, "two OSDs out, their shards rebuilt elsewhere");

    // They come back: the PGs return to their first placement, active+clean.
    for (osd, args) in victims.iter().zip(&args) {
        restarted.restart(&cluster, &osd.to_string(), args);
        ok(&conf, &["osd", "in", &osd.0.to_string()]);
    }
    wait_clean(&conf, 8, "both OSDs back");
    verify(&runtime, &io, &model, "both OSDs back");

    // A flipped byte in one shard: a client read still gets the object (decoded from the
    // other shards), a deep scrub finds the bad shard and repair rebuilds it.
    let map = runtime.block_on(rados.refresh_map()).unwrap();
    let pool = map.pool_named(POOL).unwrap().clone();
    // The largest object whose shard 1 has its chunk 1 on the data device (a small patch of a
    // large object goes to RocksDB, where the engine's own checksums guard it).
    let mut by_size: Vec<_> = model.lock().unwrap().acked.iter().map(|(n, d)| (d.len(), n.clone())).collect();
    by_size.sort_unstable_by(|a, b| b.cmp(a));
    let corrupt_args = |name: &str, osd: OsdId, chunk: &str| {
        let (osd, pool) = (osd.0.to_string(), POOL.to_owned());
        ["debug", "corrupt", "--pool", &pool, "--object", name, "--osd", &osd, "--chunk", chunk].map(str::to_owned)
    };
    let (name, pg, shards) = by_size
        .iter()
        .find_map(|(_, name)| {
            let pg = shoal_placement::pg_of(&pool, &ObjectName::new("", name));
            let shards = shoal_placement::pg_up_osds(&map, &pool, pg);
            assert_eq!(shards.len(), 6, "{shards:?}");
            let args = corrupt_args(name, shards[1], "1");
            shoal_c(&conf, &args.each_ref().map(String::as_str)).0.then(|| (name.clone(), pg, shards))
        })
        .expect("no object has chunk 1 of shard 1 on the data device");
    let corrupt = corrupt_args(&name, shards[1], "1");
    let corrupt = corrupt.each_ref().map(String::as_str);
    let scrub = |verb: &str| ok(&conf, &["pg", verb, &pg.to_string(), "--wait", "120"]);
    let out = scrub("deep-scrub");
    assert!(out.contains("1 inconsistent") && out.contains("read error"), "{out}");
    let out = scrub("repair");
    assert!(out.contains("1 repaired"), "{out}");
    let repaired = wait_for(|| scrub("deep-scrub").contains(" 0 inconsistent").then_some(()));
    assert!(repaired.is_some(), "the bad shard was not rebuilt");
    ok(&conf, &corrupt);
    verify(&runtime, &io, &model, "one shard corrupted");

    // Wrong bytes under a matching checksum in a data shard: reads do not notice, the deep
    // scrub's parity check does and names the shard, and repair rebuilds it.
    let silent = corrupt_args(&name, shards[2], "0");
    ok(&conf, &[&silent.each_ref().map(String::as_str)[..], &["--rewrite"]].concat());
    let out = scrub("deep-scrub");
    assert!(out.contains("1 inconsistent") && out.contains("parity"), "{out}");
    assert!(out.contains(&format!("{}: shard 2", shards[2])), "{out}");
    let out = scrub("repair");
    assert!(out.contains("1 repaired"), "{out}");
    let repaired = wait_for(|| scrub("deep-scrub").contains(" 0 inconsistent").then_some(()));
    assert!(repaired.is_some(), "the silently bad shard was not rebuilt");
    verify(&runtime, &io, &model, "a silently bad shard rebuilt");

    // Three shards of one PG lost (more than m): it stops serving, and a read there times
    // out rather than answering wrongly; once they return every object reads back whole.
    let lost: Vec<OsdId> = shards.iter().copied().filter(|o| !victims.contains(o)).take(3).collect();
    let lost_args: Vec<Vec<String>> = lost.iter().map(|o| cmdline(cluster.pid(&o.to_string()))).collect();
    for osd in &lost {
        kill9(cluster.pid(&osd.to_string()));
    }
    let inactive = wait_for(|| {
        let dump = ok(&conf, &["pg", "dump"]);
        dump.lines().any(|l| l.starts_with(&format!("{pg} ")) && l.contains("inactive")).then_some(())
    });
    assert!(inactive.is_some(), "{pg} stayed active with 3 of 6 shards:\n{}", ok(&conf, &["pg", "dump"]));
    let impatient = runtime.block_on(cluster.rados(Duration::from_secs(5)));
    let read = runtime.block_on(async { impatient.ioctx(POOL).await.unwrap().read_full(&name).await });
    let e = read.expect_err("a PG with 3 of 6 shards answered");
    assert_eq!(e.errno, shoal_types::Errno::TimedOut, "{e}");
    for (osd, args) in lost.iter().zip(&lost_args) {
        restarted.restart(&cluster, &osd.to_string(), args);
    }
    wait_clean(&conf, 8, "the lost shards back");
    verify(&runtime, &io, &model, "after losing more than m shards and getting them back");
}
