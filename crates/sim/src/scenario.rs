//! What one seed decides before the run starts: the topology, the pool, the workload's
//! size and how hostile the run is.

use rand::Rng;
use rand::rngs::StdRng;
use std::time::Duration;

/// The cluster and fault rates of one run.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Hosts (failure domains); OSD `i` lives on host `i % hosts`.
    pub hosts: u32,
    /// OSDs.
    pub osds: u32,
    /// For an erasure-coded pool, its `k` and `m` (failure domain OSD, stripe unit 512
    /// bytes over store chunks of 1 KiB, partial overwrites allowed); `None`: replicated.
    pub erasure: Option<(u32, u32)>,
    /// Replicas (shards) of the pool.
    pub size: u32,
    /// Replicas needed to write.
    pub min_size: u32,
    /// PGs of the pool.
    pub pg_num: u32,
    /// PG log entries each OSD keeps (small ones force backfills).
    pub pg_log_entries: usize,
    /// Clients, each with its own objects and one operation outstanding.
    pub clients: u32,
    /// Objects per client.
    pub objects_per_client: u32,
    /// Operations each client issues in the chaos phase.
    pub ops_per_client: u32,
    /// Per mille of messages lost (the connection resets).
    pub drop_per_mille: u32,
    /// Per mille of messages delivered twice.
    pub dup_per_mille: u32,
    /// Message latency range, µs (its spread reorders messages of different connections).
    pub latency_us: (u64, u64),
    /// Mean time between injected faults (crash, partition, map churn, clock jump).
    pub fault_every: Duration,
    /// Per OSD, how long a sync takes (some disks are slow).
    pub sync_us: Vec<u64>,
    /// Recovery operations each OSD runs at once (`osd_recovery_max_active`); small
    /// values make PGs wait for each other's slots.
    pub recovery_max_active: usize,
    /// Pause after each recovery operation (`osd_recovery_sleep`).
    pub recovery_sleep: Duration,
}

/// One seed in this many is large ([`Scenario::is_large`]).
pub const LARGE_EVERY: u64 = 25;

impl Scenario {
    /// Whether `seed` draws a large scenario: 12–16 OSDs on 4–6 hosts, 64 PGs and 24–40
    /// clients issuing up to 300 operations each, faults at least a second apart. The seed
    /// alone decides (residue 12), so which seeds are large never depends on a draw.
    pub fn is_large(seed: u64) -> bool {
        seed % LARGE_EVERY == 12
    }

    /// Draws a scenario: with `erasure`, of an erasure-coded pool; with `large`, a large one.
    pub fn draw(rng: &mut StdRng, erasure: bool, large: bool) -> Scenario {
        let hosts = rng.random_range(2..=4u32);
        let osds = rng.random_range(hosts.max(3)..=hosts * 2);
        let mut size = rng.random_range(2..=3u32.min(hosts));
        let mut min_size = size - size / 2;
        let sync_us =
            (0..osds)
                .map(|_| {
                    if rng.random_ratio(1, 5) {
                        rng.random_range(20_000..200_000)
                    } else {
                        rng.random_range(100..3_000)
                    }
                })
                .collect();
        let max_latency = rng.random_range(200..20_000u64);
        // An erasure-coded pool: 2+1, 2+2 or 3+1 as the OSDs allow, writing with `k` or
        // `k + 1` shards up. (Drawn only then: replicated seeds replay as before.)
        let erasure = erasure.then(|| [(2, 1), (2, 2), (3, 1)][rng.random_range(0..3)]);
        let erasure = erasure.map(|(k, m)| if k + m <= osds { (k, m) } else { (2, 1) });
        if let Some((k, m)) = erasure {
            size = k + m;
            min_size = k + rng.random_range(0..=1);
        }
        // Drawn last, so the draws above stay what they were.
        let recovery_max_active = rng.random_range(1..=10);
        let recovery_sleep = Duration::from_millis(if rng.random_ratio(1, 3) { rng.random_range(1..=100) } else { 0 });
        let mut scenario = Scenario {
            hosts,
            osds,
            erasure,
            size,
            min_size,
            pg_num: [1, 2, 4, 8][rng.random_range(0..4)],
            pg_log_entries: if rng.random_ratio(1, 3) { 8 } else { 3000 },
            clients: rng.random_range(1..=3),
            objects_per_client: rng.random_range(1..=4),
            ops_per_client: rng.random_range(20..=60),
            drop_per_mille: rng.random_range(0..=20),
            dup_per_mille: rng.random_range(0..=20),
            latency_us: (50, max_latency),
            fault_every: Duration::from_millis(rng.random_range(300..3_000)),
            sync_us,
            recovery_max_active,
            recovery_sleep,
        };
        if large {
            scenario.enlarge(rng);
        }
        scenario
    }

    /// Makes the scenario large, keeping its pool's kind and size, latencies and message faults.
    fn enlarge(&mut self, rng: &mut StdRng) {
        self.hosts = rng.random_range(4..=6);
        self.osds = rng.random_range(12..=16);
        let extra = self.osds as usize - self.sync_us.len();
        let spare: Vec<u64> = (0..extra).map(|_| rng.random_range(100..3_000)).collect();
        self.sync_us.extend(spare);
        self.pg_num = 64;
        self.clients = rng.random_range(24..=40);
        self.objects_per_client = rng.random_range(2..=6);
        self.ops_per_client = rng.random_range(100..=300);
        self.fault_every = self.fault_every.max(Duration::from_millis(rng.random_range(1_000..3_000)));
    }
}
