//! The simulated cluster: an event queue ordered by simulated time, the OSDs, the monitor,
//! the network and the clients.

use crate::disk::SimKv;
use crate::invariants::acknowledged_writes::{Expected, Oracle, Work};
use crate::invariants::one_primary::OnePrimary;
use crate::invariants::{Violation, consistent_shards, healing, identical_replicas};
use crate::scenario::Scenario;
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shoal_mon::change::{MapChange, apply};
use shoal_mon::failure::{FailurePolicy, FailureTracker, Report, Verdict};
use shoal_objclass::ClassRegistry;
use shoal_pg_core::{Action, Awaiting, Durable, Flaws, Input, Limits, Registration, Shard, Timer};
use shoal_store::{MemDevice, ObjectStore, StoreFormat, StoreOptions};
use shoal_types::crush::{BucketType, CrushChange, DEFAULT_ROOT};
use shoal_types::erasure::{ErasurePoolSpec, ErasureProfile};
use shoal_types::msg::{OsdOp, PeerRequest, Reply};
use shoal_types::op::{Step, StepOutput};
use shoal_types::pg::PgStat;
use shoal_types::space::{SpaceChange, SpaceState};
use shoal_types::{ClientId, Errno, ObjectName, OsdEntry, OsdId, OsdMap, PgId, PoolId, PoolSpec, ReqId, Result, err};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

/// Simulated time, µs.
type Us = u64;

const SECOND: Us = 1_000_000;
/// How often OSDs check their peers and the monitor looks for OSDs to mark out.
const HEARTBEAT: Us = SECOND;
/// Missed heartbeats before an OSD reports a peer.
const GRACE_BEATS: u32 = 3;
/// How long a client waits for an answer before resending.
const OP_TIMEOUT: Us = 10 * SECOND;
/// How often a drained OSD is checked for being safe to purge before it is marked in again.
const PURGE_TRIES: u32 = 6;
/// How long a lost message takes to surface as a reset connection.
const RESET_AFTER: (Us, Us) = (100_000, 2 * SECOND);

/// How a run goes.
#[derive(Clone, Debug)]
pub struct Options {
    /// Deliberate protocol bugs to switch on.
    pub flaws: Flaws,
    /// Simulated time of the chaos phase.
    pub chaos: Duration,
    /// Simulated time the healing phase may take.
    pub heal_limit: Duration,
    /// Run an erasure-coded pool instead of a replicated one.
    pub erasure: bool,
    /// Reshape only by changing `pg_num` and stepping `pgp_num` (splits and merges at
    /// every reshape: the merge flaw's tests).
    pub pg_num_only: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            flaws: Flaws::default(),
            chaos: Duration::from_secs(60),
            heal_limit: Duration::from_secs(600),
            erasure: false,
            pg_num_only: false,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// What the seed drew.
    pub scenario: Scenario,
    /// A hash of every event handled, in order: the same seed gives the same hash.
    pub trace: u64,
    /// Events handled.
    pub events: u64,
    /// Simulated time at the end.
    pub elapsed: Duration,
    /// Client operations answered.
    pub ops: u64,
    /// Faults injected.
    pub faults: u64,
    /// The first invariant broken, if any.
    pub violation: Option<Violation>,
}

/// Where a reply goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handle {
    Client { client: u32, rid: u64 },
    Peer { from: OsdId, rid: u64 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Node {
    Osd(OsdId),
    Client(u32),
    Mon,
}

enum Msg {
    Op { client: u32, rid: u64, op: OsdOp },
    OpReply { rid: u64, reply: Result<Reply> },
    Peer { from: OsdId, rid: u64, request: PeerRequest },
    PeerReply { rid: u64, reply: Result<Reply> },
    Map(Arc<OsdMap>),
    Boot(OsdId),
    Failure { reporter: OsdId, target: OsdId },
    Register { osd: OsdId, registration: Registration },
    Registered { registration: Registration, recorded: bool },
    PrimaryTemp { osd: OsdId, pg: PgId, lead: Option<OsdId> },
}

enum Event {
    /// Boxed: a message carrying a whole map is large.
    Deliver {
        from: Node,
        to: Node,
        msg: Box<Msg>,
    },
    Sync {
        osd: OsdId,
        life: u64,
    },
    Timer {
        osd: OsdId,
        life: u64,
        timer: Timer,
    },
    Heartbeat,
    Fault,
    Restart(OsdId),
    Reconnect(u32),
    MarkIn(OsdId),
    /// Purge a drained OSD once no PG needs it; after this many more tries, mark it in.
    Purge(OsdId, u32),
    /// An OSD marked full has room again.
    NotFull(OsdId),
    /// The monitor leader's next step of a merge.
    MergeStep,
    ClientTick(u32),
    EndChaos,
    Reset {
        osd: OsdId,
        rid: u64,
    },
}

/// Work waiting for the OSD's next sync.
enum AfterSync {
    Reply(Handle, Box<Result<Reply>>),
    Durable(Durable),
}

struct SimOsd {
    id: OsdId,
    host: u32,
    kv: Arc<SimKv>,
    store: Arc<ObjectStore>,
    /// `None` while crashed.
    shard: Option<Shard<Handle>>,
    /// Increases at every crash: events of an earlier life are dropped.
    life: u64,
    durable: u64,
    after_sync: Vec<(u64, AfterSync)>,
    sync_scheduled: bool,
    sync_us: u64,
    clock_offset_ns: i64,
    missed: BTreeMap<OsdId, u32>,
    /// Client operations from a newer map than the OSD's, held until it has that map (as
    /// the OSD daemon does before choosing the shard).
    held: Vec<(u32, u64, OsdOp)>,
}

struct Outstanding {
    object: ObjectName,
    work: Work,
    reqid: ReqId,
    /// The request id of the attempt in flight; 0 = resend at the next tick.
    rid: u64,
    /// The OSD the attempt went to.
    to: OsdId,
    sent: Us,
}

struct Client {
    objects: Vec<ObjectName>,
    next_tid: u64,
    remaining: u32,
    final_reads: Vec<ObjectName>,
    outstanding: Option<Outstanding>,
}

struct World {
    scenario: Scenario,
    options: Options,
    rng: StdRng,
    now: Us,
    queue: BTreeMap<(Us, u64), Event>,
    next_event: u64,
    next_rid: u64,
    osds: BTreeMap<OsdId, SimOsd>,
    map: OsdMap,
    tracker: FailureTracker,
    policy: FailurePolicy,
    pool: PoolId,
    /// Peer requests waiting for an answer: the asking OSD and its life, and the OSD asked.
    awaiting: BTreeMap<u64, (OsdId, u64, OsdId, Awaiting<Handle>)>,
    clients: Vec<Client>,
    isolated: BTreeSet<u32>,
    /// Per connection, when its last message arrives.
    links: BTreeMap<(Node, Node), Us>,
    healing: bool,
    oracle: Oracle,
    one_primary: OnePrimary,
    violation: Option<Violation>,
    trace: std::hash::DefaultHasher,
    events: u64,
    ops: u64,
    faults: u64,
}

/// Runs seed `seed`.
pub fn run(seed: u64, options: &Options) -> Outcome {
    let mut rng = StdRng::seed_from_u64(seed);
    let scenario = Scenario::draw(&mut rng, options.erasure, Scenario::is_large(seed));
    let mut world = World::new(scenario, options.clone(), rng);
    world.run();
    Outcome {
        seed,
        scenario: world.scenario.clone(),
        trace: world.trace.finish(),
        events: world.events,
        elapsed: Duration::from_micros(world.now),
        ops: world.ops,
        faults: world.faults,
        violation: world.violation,
    }
}

/// The store chunk size of an erasure-coded run: small, so objects span several stripes.
const ERASURE_STORE_CHUNK: u32 = 1024;

fn open_store(kv: Arc<SimKv>, format: StoreFormat) -> Result<Arc<ObjectStore>> {
    let options = StoreOptions { prefer_deferred_size: u64::MAX };
    Ok(Arc::new(ObjectStore::open(kv, Arc::new(MemDevice::new()), format, options)?))
}

impl World {
    fn new(scenario: Scenario, options: Options, rng: StdRng) -> World {
        let mut map = OsdMap::default();
        let create = match scenario.erasure {
            Some((k, m)) => {
                let profile =
                    ErasureProfile { k, m, stripe_unit: 512, failure_domain: BucketType::Osd, ..Default::default() };
                let set = MapChange::SetErasureProfile { name: "sim".into(), profile, force: false };
                let _ = apply(&mut map, &set);
                MapChange::CreateErasurePool(ErasurePoolSpec {
                    name: "sim".into(),
                    pg_num: scenario.pg_num,
                    profile: "sim".into(),
                    min_size: Some(scenario.min_size),
                    allow_overwrites: true,
                })
            }
            None => MapChange::CreatePool(PoolSpec {
                name: "sim".into(),
                pg_num: scenario.pg_num,
                size: scenario.size,
                min_size: scenario.min_size,
            }),
        };
        let pool = apply(&mut map, &create).ok().and_then(|r| match r {
            Reply::Pool(pool) => Some(pool.id),
            _ => None,
        });
        let clients = (0..scenario.clients)
            .map(|c| Client {
                objects: (0..scenario.objects_per_client)
                    .map(|o| ObjectName { namespace: String::new(), name: format!("c{c}-o{o}") })
                    .collect(),
                next_tid: 1,
                remaining: scenario.ops_per_client,
                final_reads: Vec::new(),
                outstanding: None,
            })
            .collect();
        let mut world = World {
            options,
            rng,
            now: 0,
            queue: BTreeMap::new(),
            next_event: 0,
            next_rid: 1,
            osds: BTreeMap::new(),
            map,
            tracker: FailureTracker::default(),
            policy: FailurePolicy {
                min_down_reporters: 2,
                down_out_interval: Duration::from_secs(10),
                report_lifetime: Duration::from_micros(u64::from(GRACE_BEATS) * HEARTBEAT),
            },
            pool: pool.unwrap_or(PoolId(0)),
            awaiting: BTreeMap::new(),
            clients,
            isolated: BTreeSet::new(),
            links: BTreeMap::new(),
            healing: false,
            oracle: Oracle::default(),
            one_primary: OnePrimary::default(),
            violation: None,
            trace: Default::default(),
            events: 0,
            ops: 0,
            faults: 0,
            scenario,
        };
        for i in 0..world.scenario.osds {
            let sync_us = world.scenario.sync_us[i as usize];
            if !world.add_osd(OsdId(i), i % world.scenario.hosts, sync_us) {
                break;
            }
        }
        world.at(0, Event::Heartbeat);
        world.at(SECOND, Event::Fault);
        for c in 0..world.scenario.clients {
            world.at(2 * SECOND, Event::ClientTick(c));
        }
        world.at(world.options.chaos.as_micros() as Us, Event::EndChaos);
        world
    }

    /// Creates OSD `id` on host `host` with an empty store and starts it; false if its
    /// store could not be made (recorded as the run's failure).
    fn add_osd(&mut self, id: OsdId, host: u32, sync_us: u64) -> bool {
        let kv = Arc::new(SimKv::new());
        let store = match open_store(kv.clone(), self.store_format()) {
            Ok(store) => store,
            Err(e) => {
                self.store_failed(id, "creating the store", &e);
                return false;
            }
        };
        let osd = SimOsd {
            id,
            host,
            kv,
            store,
            shard: None,
            life: 0,
            durable: 0,
            after_sync: Vec::new(),
            sync_scheduled: false,
            sync_us,
            clock_offset_ns: 0,
            missed: BTreeMap::new(),
            held: Vec::new(),
        };
        self.osds.insert(id, osd);
        self.start_osd(id);
        true
    }

    /// The stores' format: small chunks for an erasure-coded run.
    fn store_format(&self) -> StoreFormat {
        match self.scenario.erasure {
            Some(_) => StoreFormat { chunk_size: ERASURE_STORE_CHUNK },
            None => StoreFormat::default(),
        }
    }

    fn at(&mut self, when: Us, event: Event) {
        self.next_event += 1;
        self.queue.insert((when.max(self.now), self.next_event), event);
    }

    fn after(&mut self, delay: Us, event: Event) {
        self.at(self.now + delay, event);
    }

    fn fail(&mut self, violation: Violation) {
        if self.violation.is_none() {
            self.violation = Some(violation);
        }
    }

    /// The simulated disk never fails: a store error is a bug of the store.
    fn store_failed(&mut self, osd: OsdId, what: &str, e: &shoal_types::RadosError) {
        let detail = format!("{}: {osd}: {what} failed: {e}", self.stamp());
        self.fail(Violation { invariant: "store", detail });
    }

    fn stamp(&self) -> String {
        format!("t={:.3}s", self.now as f64 / SECOND as f64)
    }

    fn run(&mut self) {
        let deadline = (self.options.chaos + self.options.heal_limit).as_micros() as Us;
        while self.violation.is_none() {
            let Some(((when, _), event)) = self.queue.pop_first() else { break };
            if when > deadline {
                let (unclean, stats) = self.unclean();
                let pending =
                    self.clients.iter().filter(|c| c.outstanding.is_some() || !c.final_reads.is_empty()).count();
                let violation = healing::timed_out(&unclean, &stats, pending, &self.stamp());
                self.fail(violation);
                break;
            }
            self.now = when;
            self.events += 1;
            self.handle(event);
            if self.healing && self.healed() {
                self.check_replicas();
                break;
            }
        }
    }

    fn handle(&mut self, event: Event) {
        let now = self.now;
        match event {
            Event::Deliver { from, to, msg } => {
                (now, 1u8, from, to).hash(&mut self.trace);
                if self.alive(to) && self.reachable(from, to) {
                    self.deliver(to, *msg);
                } else {
                    self.lose(*msg);
                }
            }
            Event::Reset { osd, rid } => {
                (now, 12u8, osd, rid).hash(&mut self.trace);
                self.answer(osd, rid, Err(err::not_connected("connection reset")));
            }
            Event::Sync { osd, life } => {
                (now, 2u8, osd).hash(&mut self.trace);
                self.sync(osd, life);
            }
            Event::Timer { osd, life, timer } => {
                (now, 3u8, osd).hash(&mut self.trace);
                if self.osds.get(&osd).is_some_and(|o| o.life == life) {
                    self.step(osd, Input::Timer(timer));
                }
            }
            Event::Heartbeat => {
                (now, 4u8).hash(&mut self.trace);
                self.heartbeat();
                self.after(HEARTBEAT, Event::Heartbeat);
            }
            Event::Fault => {
                (now, 5u8).hash(&mut self.trace);
                if !self.healing {
                    self.inject_fault();
                    let mean = self.scenario.fault_every.as_micros() as Us;
                    let next = self.rng.random_range(mean / 2..=mean * 3 / 2);
                    self.after(next, Event::Fault);
                }
            }
            Event::Restart(osd) => {
                (now, 6u8, osd).hash(&mut self.trace);
                if self.osds.get(&osd).is_some_and(|o| o.shard.is_none()) {
                    self.start_osd(osd);
                }
            }
            Event::Reconnect(host) => {
                (now, 7u8, host).hash(&mut self.trace);
                self.isolated.remove(&host);
            }
            Event::MarkIn(osd) => {
                (now, 8u8, osd).hash(&mut self.trace);
                self.change(MapChange::SetOsdIn { id: osd, is_in: true });
            }
            Event::Purge(osd, tries) => {
                (now, 13u8, osd).hash(&mut self.trace);
                self.purge(osd, tries);
            }
            Event::NotFull(osd) => {
                (now, 14u8, osd).hash(&mut self.trace);
                self.change(MapChange::Space(SpaceChange::OsdState { osd, state: None }));
            }
            Event::MergeStep => {
                (now, 15u8).hash(&mut self.trace);
                self.merge_step();
            }
            Event::ClientTick(c) => {
                (now, 9u8, c).hash(&mut self.trace);
                self.client_tick(c);
            }
            Event::EndChaos => {
                (now, 10u8).hash(&mut self.trace);
                self.start_healing();
            }
        }
    }

    // ---- OSDs ----

    fn start_osd(&mut self, id: OsdId) {
        let Some(osd) = self.osds.get_mut(&id) else { return };
        let config = shoal_pg_core::Config {
            me: id,
            index: 0,
            shards: 1,
            store: osd.store.clone(),
            classes: Arc::new(ClassRegistry::builtin()),
            class_cache_entries: 64,
            pg_log_entries: self.scenario.pg_log_entries,
            damage: Arc::default(),
            scrubs: Arc::default(),
        };
        let limits = Limits {
            recovery_max_active: self.scenario.recovery_max_active,
            // Not drawn: a seed keeps its schedule from before the option.
            recovery_max_active_with_clients: self.scenario.recovery_max_active,
            recovery_sleep: self.scenario.recovery_sleep,
            ..Limits::default()
        };
        let mut shard = Shard::new(config, Arc::new(limits));
        shard.set_flaws(self.options.flaws);
        osd.shard = Some(shard);
        osd.durable = osd.store.committed_seq();
        osd.missed.clear();
        self.send(Node::Osd(id), Node::Mon, Msg::Boot(id));
    }

    fn crash(&mut self, id: OsdId) {
        let format = self.store_format();
        let Some(osd) = self.osds.get_mut(&id) else { return };
        if osd.shard.is_none() {
            return;
        }
        osd.shard = None;
        osd.life += 1;
        osd.after_sync.clear();
        osd.held.clear();
        osd.sync_scheduled = false;
        let reopened = osd.kv.after_crash().map(Arc::new).and_then(|kv| Ok((open_store(kv.clone(), format)?, kv)));
        match reopened {
            Ok((store, kv)) => (osd.store, osd.kv) = (store, kv),
            Err(e) => self.store_failed(id, "reopening the store after a crash", &e),
        }
        // Its connections break: whoever waits for its answer learns so.
        let asked: Vec<u64> = self.awaiting.iter().filter(|(_, (.., to, _))| *to == id).map(|(rid, _)| *rid).collect();
        for rid in asked {
            self.lose_request(rid);
        }
    }

    /// Feeds `input` to a running OSD and carries out what it asks.
    fn step(&mut self, id: OsdId, input: Input<Handle>) {
        let now_ns = self.now as i64 * 1000;
        let Some(osd) = self.osds.get_mut(&id) else { return };
        let clock = now_ns.saturating_add(osd.clock_offset_ns).max(0) as u64;
        let Some(shard) = osd.shard.as_mut() else { return };
        let span = tracing::debug_span!("osd", id = id.0, t = self.now / 1000).entered();
        let actions = shard.step(input, clock);
        drop(span);
        for action in actions {
            self.carry_out(id, action);
        }
    }

    fn carry_out(&mut self, id: OsdId, action: Action<Handle>) {
        match action {
            Action::Send { to, request, awaiting } => {
                let rid = self.next_rid;
                self.next_rid += 1;
                let life = self.osds.get(&id).map_or(0, |o| o.life);
                self.awaiting.insert(rid, (id, life, to, awaiting));
                self.send(Node::Osd(id), Node::Osd(to), Msg::Peer { from: id, rid, request });
            }
            Action::Reply { to, after, value } => {
                self.note_acknowledgement(id, to, &value);
                self.when_synced(id, after, AfterSync::Reply(to, Box::new(value)));
            }
            Action::WhenDurable { seq, awaiting } => self.when_synced(id, seq, AfterSync::Durable(awaiting)),
            Action::Timer { after, timer } => {
                let life = self.osds.get(&id).map_or(0, |o| o.life);
                self.after(after.as_micros() as Us, Event::Timer { osd: id, life, timer });
            }
            Action::Register(registration) => {
                self.send(Node::Osd(id), Node::Mon, Msg::Register { osd: id, registration })
            }
            Action::PrimaryTemp { pg, lead } => {
                self.send(Node::Osd(id), Node::Mon, Msg::PrimaryTemp { osd: id, pg, lead })
            }
            Action::Count(_) => {}
        }
    }

    fn when_synced(&mut self, id: OsdId, seq: u64, then: AfterSync) {
        let Some(osd) = self.osds.get_mut(&id) else { return };
        osd.after_sync.push((seq, then));
        if !osd.sync_scheduled {
            osd.sync_scheduled = true;
            let (life, delay) = (osd.life, if seq <= osd.durable { 0 } else { osd.sync_us });
            self.after(delay, Event::Sync { osd: id, life });
        }
    }

    fn sync(&mut self, id: OsdId, life: u64) {
        let Some(osd) = self.osds.get_mut(&id) else { return };
        if osd.life != life {
            return;
        }
        osd.sync_scheduled = false;
        match osd.store.sync() {
            Ok(durable) => osd.durable = durable,
            Err(e) => return self.store_failed(id, "syncing", &e),
        }
        let durable = osd.durable;
        let (ready, waiting): (Vec<_>, Vec<_>) =
            std::mem::take(&mut osd.after_sync).into_iter().partition(|(s, _)| *s <= durable);
        osd.after_sync = waiting;
        if !osd.after_sync.is_empty() {
            osd.sync_scheduled = true;
            let delay = osd.sync_us;
            self.after(delay, Event::Sync { osd: id, life });
        }
        for (_, then) in ready {
            match then {
                AfterSync::Reply(Handle::Client { client, rid }, reply) => {
                    self.send(Node::Osd(id), Node::Client(client), Msg::OpReply { rid, reply: *reply })
                }
                AfterSync::Reply(Handle::Peer { from, rid }, reply) => {
                    self.send(Node::Osd(id), Node::Osd(from), Msg::PeerReply { rid, reply: *reply })
                }
                AfterSync::Durable(awaiting) => self.step(id, Input::Durable { awaiting, result: Ok(()) }),
            }
        }
    }

    /// Records which OSD acknowledged a client's write, and in which interval.
    fn note_acknowledgement(&mut self, id: OsdId, to: Handle, value: &Result<Reply>) {
        let Handle::Client { client, rid } = to else { return };
        let Ok(Reply::Op(_)) = value else { return };
        let Some(out) = self.clients.get(client as usize).and_then(|c| c.outstanding.as_ref()) else { return };
        if out.rid != rid || out.work == Work::Read {
            return;
        }
        // The PG under the OSD's own map: one that has not split yet serves the parent.
        let Some(shard) = self.osds.get(&id).and_then(|o| o.shard.as_ref()) else { return };
        let Ok(pool) = shard.map().pool(self.pool) else { return };
        let pg = shoal_placement::pg_of(pool, &out.object);
        let interval = shard.serving_interval(pg);
        let Some(interval) = interval else {
            let stamp = self.stamp();
            return self.fail(Violation {
                invariant: "one_primary",
                detail: format!("{stamp}: {id} acknowledged a write of pg {pg} without serving it"),
            });
        };
        let stamp = self.stamp();
        if let Err(v) = self.one_primary.acknowledged(pg, interval, id, &stamp) {
            self.fail(v);
        }
    }

    // ---- network ----

    fn host_of(&self, node: Node) -> Option<u32> {
        match node {
            Node::Osd(id) => self.osds.get(&id).map(|o| o.host),
            Node::Client(_) | Node::Mon => None,
        }
    }

    fn reachable(&self, a: Node, b: Node) -> bool {
        let (ha, hb) = (self.host_of(a), self.host_of(b));
        let isolated = |h: Option<u32>| h.is_some_and(|h| self.isolated.contains(&h));
        ha == hb || (!isolated(ha) && !isolated(hb))
    }

    fn alive(&self, node: Node) -> bool {
        match node {
            Node::Osd(id) => self.osds.get(&id).is_some_and(|o| o.shard.is_some()),
            Node::Client(_) | Node::Mon => true,
        }
    }

    fn send(&mut self, from: Node, to: Node, msg: Msg) {
        let lost = !self.alive(to)
            || !self.reachable(from, to)
            || (!self.healing && self.rng.random_range(0..1000) < self.scenario.drop_per_mille);
        if lost {
            return self.lose(msg);
        }
        // One connection delivers in order, as TCP does; messages on different connections
        // overtake each other freely.
        let (lo, hi) = self.scenario.latency_us;
        let link = self.links.entry((from, to)).or_default();
        let arrives = (self.now + self.rng.random_range(lo..=hi)).max(*link + 1);
        *link = arrives;
        let duplicate = !self.healing && self.rng.random_range(0..1000) < self.scenario.dup_per_mille;
        if duplicate && let Some(copy) = duplicate_of(&msg) {
            *link = arrives + 1;
            self.at(arrives + 1, Event::Deliver { from, to, msg: Box::new(copy) });
        }
        self.at(arrives, Event::Deliver { from, to, msg: Box::new(msg) });
    }

    /// A lost message breaks its connection: the OSD waiting for its answer learns so
    /// after a while. (A client notices by its own timeout.)
    fn lose(&mut self, msg: Msg) {
        if let Msg::Peer { rid, .. } | Msg::PeerReply { rid, .. } = msg {
            self.lose_request(rid);
        }
    }

    /// The connection request `rid` went over broke: its asker learns so after a while.
    fn lose_request(&mut self, rid: u64) {
        let Some((osd, ..)) = self.awaiting.get(&rid) else { return };
        let osd = *osd;
        let delay = self.rng.random_range(RESET_AFTER.0..=RESET_AFTER.1);
        self.after(delay, Event::Reset { osd, rid });
    }

    /// Hands `osd` the answer to its request `rid`, unless it was answered already or the
    /// OSD restarted since it asked.
    fn answer(&mut self, osd: OsdId, rid: u64, reply: Result<Reply>) {
        let life = self.osds.get(&osd).map_or(0, |o| o.life);
        if self.awaiting.get(&rid).is_some_and(|(asker, l, ..)| *asker == osd && *l == life)
            && let Some((.., awaiting)) = self.awaiting.remove(&rid)
        {
            self.step(osd, Input::Answered { awaiting, reply });
        }
    }

    fn deliver(&mut self, to: Node, msg: Msg) {
        match (to, msg) {
            (Node::Osd(id), Msg::Op { client, rid, op }) => self.client_op(id, client, rid, op),
            (Node::Osd(id), Msg::Peer { from, rid, request }) => {
                self.step(id, Input::Peer { request, reply: Handle::Peer { from, rid } })
            }
            (Node::Osd(id), Msg::PeerReply { rid, reply }) => self.answer(id, rid, reply),
            (Node::Osd(id), Msg::Map(map)) => self.osd_got_map(id, map),
            (Node::Client(c), Msg::OpReply { rid, reply }) => self.client_reply(c, rid, reply),
            (Node::Mon, Msg::Boot(id)) => self.booted(id),
            (Node::Mon, Msg::Register { osd, registration }) => {
                let Registration { pg, active } = registration.clone();
                self.change(MapChange::PgsActivated { osd, pgs: vec![(pg, active.clone())] });
                let recorded = self.map.pg_active.get(&pg) == Some(&active);
                tracing::debug!(%pg, %osd, interval = active.interval, recorded, epoch = self.map.epoch, "activation");
                self.send(Node::Mon, Node::Osd(osd), Msg::Registered { registration, recorded });
            }
            (Node::Mon, Msg::PrimaryTemp { osd, pg, lead }) => {
                self.change(MapChange::PrimaryTemp { osd, pgs: vec![(pg, lead)] });
                tracing::debug!(%pg, %osd, ?lead, epoch = self.map.epoch, "primary_temp");
            }
            (Node::Osd(id), Msg::Registered { registration, recorded }) => {
                self.step(id, Input::Registered { registration, recorded })
            }
            (Node::Mon, Msg::Failure { reporter, target }) => {
                let now = Duration::from_micros(self.now);
                if let Verdict::Down(change) =
                    self.tracker.reported(&self.policy, &self.map, target, reporter, Report::Silent, now)
                {
                    self.change(change);
                }
            }
            _ => {}
        }
    }

    // ---- monitor ----

    fn change(&mut self, change: MapChange) {
        let before = self.map.epoch;
        if apply(&mut self.map, &change).is_err() || self.map.epoch == before {
            return;
        }
        tracing::debug!(?change, epoch = self.map.epoch, primary_temp = ?self.map.primary_temp, "map change");
        let map = Arc::new(self.map.clone());
        let ids: Vec<OsdId> = self.osds.keys().copied().collect();
        for id in ids {
            self.send(Node::Mon, Node::Osd(id), Msg::Map(map.clone()));
        }
    }

    fn booted(&mut self, id: OsdId) {
        let Some(osd) = self.osds.get(&id) else { return };
        let entry = OsdEntry {
            addr: format!("sim:{id}"),
            host: format!("host{}", osd.host),
            weight: 0x10000,
            up: true,
            is_in: true,
        };
        let back_in = self.tracker.booted(id);
        self.change(MapChange::OsdBoot { id, entry, back_in });
        // The map reaches a booting OSD even if this boot changed nothing.
        let map = Arc::new(self.map.clone());
        self.send(Node::Mon, Node::Osd(id), Msg::Map(map));
    }

    /// Hands a client operation to the OSD's shard once the OSD has the client's map.
    fn client_op(&mut self, id: OsdId, client: u32, rid: u64, op: OsdOp) {
        let Some(osd) = self.osds.get_mut(&id) else { return };
        if osd.shard.as_ref().is_some_and(|s| s.epoch() < op.map_epoch) {
            return osd.held.push((client, rid, op));
        }
        self.step(id, Input::Op { op, caller: ClientId(u64::from(client)), reply: Handle::Client { client, rid } });
    }

    fn osd_got_map(&mut self, id: OsdId, map: Arc<OsdMap>) {
        let Some(epoch) = self.osds.get(&id).and_then(|o| o.shard.as_ref()).map(Shard::epoch) else { return };
        if map.epoch <= epoch {
            return;
        }
        let marked_down = map.osds.get(&id).is_none_or(|e| !e.up);
        let epoch = map.epoch;
        // As the OSD daemon does: its copies split before any shard works under the map.
        if let Some(store) = self.osds.get(&id).map(|o| o.store.clone()) {
            let split =
                shoal_pg_core::split::follow_flawed(&store, &map, self.options.flaws).and_then(|s| store.commit(s.txn));
            if let Err(e) = split {
                return self.store_failed(id, "splitting PG copies", &e);
            }
        }
        self.step(id, Input::Map(map));
        if let Some(osd) = self.osds.get_mut(&id) {
            let (ready, held): (Vec<_>, Vec<_>) =
                std::mem::take(&mut osd.held).into_iter().partition(|(_, _, op)| op.map_epoch <= epoch);
            osd.held = held;
            for (client, rid, op) in ready {
                self.client_op(id, client, rid, op);
            }
        }
        if marked_down {
            // Wrongly marked down (it was only unreachable): announce itself again.
            self.send(Node::Osd(id), Node::Mon, Msg::Boot(id));
        }
    }

    /// OSDs check their peers; the monitor marks out OSDs down too long and sends the
    /// map to OSDs that missed it.
    fn heartbeat(&mut self) {
        let ids: Vec<OsdId> = self.osds.keys().copied().collect();
        let up: Vec<OsdId> = self.map.osds.iter().filter(|(_, e)| e.up).map(|(id, _)| *id).collect();
        for &a in &ids {
            if !self.alive(Node::Osd(a)) {
                continue;
            }
            for &b in up.iter().filter(|b| **b != a) {
                let silent = !self.alive(Node::Osd(b)) || !self.reachable(Node::Osd(a), Node::Osd(b));
                let Some(osd) = self.osds.get_mut(&a) else { continue };
                let missed = osd.missed.entry(b).or_default();
                *missed = if silent { *missed + 1 } else { 0 };
                if *missed >= GRACE_BEATS {
                    self.send(Node::Osd(a), Node::Mon, Msg::Failure { reporter: a, target: b });
                }
            }
        }
        let now = Duration::from_micros(self.now);
        for id in self.tracker.due_out(&self.policy, &self.map, now) {
            self.tracker.marked_out(id);
            self.change(MapChange::SetOsdIn { id, is_in: false });
        }
        let map = Arc::new(self.map.clone());
        for id in ids {
            let behind = self.osds.get(&id).and_then(|o| o.shard.as_ref()).is_some_and(|s| s.epoch() < map.epoch);
            if behind {
                self.send(Node::Mon, Node::Osd(id), Msg::Map(map.clone()));
            }
        }
    }

    // ---- faults ----

    fn inject_fault(&mut self) {
        self.faults += 1;
        let ids: Vec<OsdId> = self.osds.keys().copied().collect();
        let pick = ids[self.rng.random_range(0..ids.len())];
        match self.rng.random_range(0..100) {
            0..30 => {
                self.crash(pick);
                let down_for = self.rng.random_range(SECOND..15 * SECOND);
                self.after(down_for, Event::Restart(pick));
            }
            30..40 => {
                let host = self.osds[&pick].host;
                let on_host: Vec<OsdId> = self.osds.values().filter(|o| o.host == host).map(|o| o.id).collect();
                for id in on_host {
                    self.crash(id);
                    let down_for = self.rng.random_range(SECOND..15 * SECOND);
                    self.after(down_for, Event::Restart(id));
                }
            }
            40..58 => {
                let host = self.osds[&pick].host;
                if self.isolated.is_empty() {
                    self.isolated.insert(host);
                    let lasts = self.rng.random_range(2 * SECOND..20 * SECOND);
                    self.after(lasts, Event::Reconnect(host));
                }
            }
            58..70 => {
                self.change(MapChange::SetOsdIn { id: pick, is_in: false });
                let lasts = self.rng.random_range(3 * SECOND..15 * SECOND);
                self.after(lasts, Event::MarkIn(pick));
            }
            70..78 => {
                let jump = self.rng.random_range(-600_000_000_000i64..600_000_000_000);
                if let Some(osd) = self.osds.get_mut(&pick) {
                    osd.clock_offset_ns = osd.clock_offset_ns.saturating_add(jump);
                }
            }
            // Erasure-coded PGs can stall when placement moves shards while other faults
            // strike (no pg_temp yet: ARCHITECTURE, known gaps), so only replicated runs
            // reshape.
            78..86 if self.scenario.erasure.is_none() => self.reshape(pick),
            _ => {
                let slow = self.rng.random_range(20_000..300_000);
                if let Some(osd) = self.osds.get_mut(&pick) {
                    osd.sync_us = if osd.sync_us >= 20_000 { 500 } else { slow };
                }
            }
        }
    }

    /// A change of the cluster's shape that moves data: `pick`'s CRUSH weight or override
    /// weight, its host moved into a rack (or back to the root), a few moves of the
    /// balancer, a PG's upmap exceptions removed, the pool's `pg_num` doubled (up to 32)
    /// or halved (a merge, which [`World::merge_step`] drives),
    /// a step of its `pgp_num` after it, a new OSD on a new host (at most two more than
    /// the scenario's), `pick` drained to be purged, `pick` full for a while, or the
    /// `norebalance` flag set or cleared.
    fn reshape(&mut self, pick: OsdId) {
        let kind = if self.options.pg_num_only { self.rng.random_range(5..=6) } else { self.rng.random_range(0..11) };
        let change = match kind {
            10 => {
                let on = !self.map.flags.contains("norebalance");
                MapChange::SetFlag { flag: "norebalance".into(), on }
            }
            7 => {
                if self.osds.len() >= self.scenario.osds as usize + 2 {
                    return;
                }
                let id = OsdId(self.osds.keys().map(|o| o.0 + 1).max().unwrap_or_default());
                let host = self.osds.values().map(|o| o.host + 1).max().unwrap_or_default();
                let sync_us = self.scenario.sync_us[0];
                self.add_osd(id, host, sync_us);
                return;
            }
            8 => {
                self.after(5 * SECOND, Event::Purge(pick, PURGE_TRIES));
                MapChange::SetOsdIn { id: pick, is_in: false }
            }
            9 => {
                let lasts = self.rng.random_range(2 * SECOND..10 * SECOND);
                self.after(lasts, Event::NotFull(pick));
                MapChange::Space(SpaceChange::OsdState { osd: pick, state: Some(SpaceState::Full) })
            }
            5 => {
                let Ok(pool) = self.map.pool(self.pool).cloned() else { return };
                if self.map.pg_merge.contains_key(&self.pool) {
                    return;
                }
                let grow = pool.pg_num == 1 || pool.pg_num < 32 && self.rng.random_bool(0.6);
                if !grow {
                    self.after(SECOND, Event::MergeStep);
                }
                let pg_num = if grow { pool.pg_num * 2 } else { pool.pg_num / 2 };
                MapChange::SetPgNum { pool: pool.name.clone(), pg_num }
            }
            6 => {
                let (Ok(pool), Some(resize)) = (self.map.pool(self.pool), self.map.pg_resize.get(&self.pool)) else {
                    return;
                };
                let ratio = [0.05, 0.25, 1.0][self.rng.random_range(0..3)];
                let pgp_num =
                    shoal_types::resize::next_pgp_num(pool.pg_num, resize.pgp_num, resize.pgp_num_target, ratio);
                MapChange::StepPgpNum { pool: self.pool, pgp_num }
            }
            3 => {
                let moves = self.rng.random_range(1..8);
                let items = shoal_placement::balancer::optimize(&self.map, moves, 0.0);
                MapChange::PgUpmapItems(items.into_iter().collect())
            }
            4 => match self.map.pg_upmap_items.keys().nth(pick.0 as usize) {
                Some(pg) => MapChange::PgUpmapItems(vec![(*pg, Vec::new())]),
                None => return,
            },
            0 => {
                let weight = [0x4000, 0x8000, 0x10000, 0x20000][self.rng.random_range(0..4)];
                MapChange::SetOsdWeight { id: pick, weight }
            }
            1 => {
                let reweight = self.rng.random_range(0x4000..=0x10000);
                MapChange::Crush(CrushChange::Reweight { osd: pick, reweight })
            }
            _ => {
                for rack in ["rack-a", "rack-b"] {
                    let parent = Some(DEFAULT_ROOT.to_owned());
                    self.change(MapChange::Crush(CrushChange::AddBucket {
                        name: rack.into(),
                        kind: BucketType::Rack,
                        parent,
                    }));
                }
                let parent = ["rack-a", "rack-b", DEFAULT_ROOT][self.rng.random_range(0..3)].to_owned();
                let name = format!("host{}", self.osds[&pick].host);
                MapChange::Crush(CrushChange::Move { name, parent })
            }
        };
        self.change(change);
    }

    /// The monitor leader's next step of the pool's merge, once a second until it is done
    /// (healing too): `pgp_num` down to the new count while every PG is clean, then the
    /// pause and the merge as the monitor takes them ([`shoal_mon::change::merge_step`]).
    fn merge_step(&mut self) {
        let Some(merge) = self.map.pg_merge.get(&self.pool).cloned() else { return };
        self.after(SECOND, Event::MergeStep);
        let Ok(pg_num) = self.map.pool(self.pool).map(|p| p.pg_num) else { return };
        let (unclean, stats) = self.unclean();
        let change = match self.map.pg_resize.get(&self.pool).filter(|r| r.pgp_num > merge.pg_num) {
            Some(resize) if unclean.is_empty() => {
                let pgp_num = shoal_types::resize::next_pgp_num(pg_num, resize.pgp_num, merge.pg_num, 0.25);
                MapChange::StepPgpNum { pool: self.pool, pgp_num }
            }
            Some(_) => return,
            None => {
                let stats: Vec<PgStat> = stats.into_values().collect();
                match shoal_mon::change::merge_step(&self.map, self.pool, &stats, unclean.is_empty()) {
                    Some(change) => change,
                    None => return,
                }
            }
        };
        self.change(change);
    }

    /// Purges drained OSD `id` (stopped, then removed from the map and the world) once the
    /// monitor's rule says no PG needs it (`lifecycle::safe_to_destroy`) and the pool keeps
    /// enough hosts; tries again every 5 s, `tries` more times, then marks it in again.
    /// Not while healing.
    fn purge(&mut self, id: OsdId, tries: u32) {
        if self.healing || self.map.osds.get(&id).is_none_or(|o| o.is_in) {
            return;
        }
        let stats: Vec<PgStat> = self.unclean().1.into_values().collect();
        let hosts_left: BTreeSet<u32> = self.osds.values().filter(|o| o.id != id).map(|o| o.host).collect();
        let enough = hosts_left.len() >= self.scenario.size as usize;
        if !enough || shoal_mon::lifecycle::safe_to_destroy(&self.map, &stats, id).is_err() {
            match tries {
                0 => self.change(MapChange::SetOsdIn { id, is_in: true }),
                _ => self.after(5 * SECOND, Event::Purge(id, tries - 1)),
            }
            return;
        }
        self.crash(id);
        self.change(MapChange::MarkDown(id));
        self.change(MapChange::OsdPurge(id));
        self.osds.remove(&id);
    }

    /// Faults stop: partitions heal, crashed OSDs restart, everything is marked in, and
    /// each client reads back every object it wrote.
    fn start_healing(&mut self) {
        self.healing = true;
        self.isolated.clear();
        let full: Vec<OsdId> = self.map.osd_space.keys().copied().collect();
        for osd in full {
            self.change(MapChange::Space(SpaceChange::OsdState { osd, state: None }));
        }
        let ids: Vec<OsdId> = self.osds.keys().copied().collect();
        for id in ids {
            if !self.alive(Node::Osd(id)) {
                self.start_osd(id);
            }
            self.change(MapChange::SetOsdIn { id, is_in: true });
        }
        for client in &mut self.clients {
            client.remaining = 0;
            client.final_reads = client.objects.clone();
        }
    }

    // ---- clients ----

    fn client_tick(&mut self, c: u32) {
        let delay = self.rng.random_range(20_000..300_000);
        self.after(delay, Event::ClientTick(c));
        let now = self.now;
        let Some(client) = self.clients.get_mut(c as usize) else { return };
        match &mut client.outstanding {
            Some(out) if out.rid != 0 && now - out.sent < OP_TIMEOUT => return,
            Some(_) => {}
            None => {
                let work = if client.remaining > 0 {
                    client.remaining -= 1;
                    let object = client.objects[self.rng.random_range(0..client.objects.len())].clone();
                    let tag = client.next_tid;
                    let work = match self.rng.random_range(0..4) {
                        0 => Work::WriteFull(Bytes::from(
                            format!("full {c}/{tag} ").repeat(self.rng.random_range(1..40)),
                        )),
                        1 => Work::Append(Bytes::from(format!("append {c}/{tag};"))),
                        // Erasure-coded pools keep no omap: partial overwrites instead,
                        // spanning stripes and sometimes past the end.
                        2 if self.scenario.erasure.is_some() => Work::Write(
                            self.rng.random_range(0..1_500),
                            Bytes::from(format!("write {c}/{tag} ").repeat(self.rng.random_range(1..120))),
                        ),
                        2 => Work::OmapSet(Bytes::from(format!("k{}", tag % 7)), Bytes::from(format!("v{c}/{tag}"))),
                        _ => Work::Read,
                    };
                    Some((object, work))
                } else {
                    client.final_reads.pop().map(|object| (object, Work::Read))
                };
                let Some((object, work)) = work else { return };
                let reqid = ReqId { client: ClientId(u64::from(c)), tid: client.next_tid };
                client.next_tid += 1;
                client.outstanding = Some(Outstanding { object, work, reqid, rid: 0, to: OsdId(0), sent: now });
            }
        }
        self.send_op(c);
    }

    fn send_op(&mut self, c: u32) {
        let rid = self.next_rid;
        self.next_rid += 1;
        let (pool, epoch) = (self.pool, self.map.epoch);
        let Some(out) = self.clients.get_mut(c as usize).and_then(|c| c.outstanding.as_mut()) else { return };
        let Ok(pool_entry) = self.map.pool(pool) else { return };
        let pg = shoal_placement::pg_of(pool_entry, &out.object);
        let Some(primary) = shoal_placement::pg_primary(&self.map, pool_entry, pg) else {
            out.rid = 0;
            return;
        };
        out.rid = rid;
        out.to = primary;
        out.sent = self.now;
        let steps = match &out.work {
            Work::WriteFull(data) => vec![Step::WriteFull { data: data.clone() }],
            Work::Append(data) => vec![Step::Append { data: data.clone() }],
            Work::Write(offset, data) => vec![Step::Write { offset: *offset, data: data.clone() }],
            Work::OmapSet(k, v) => vec![Step::OmapSet { entries: BTreeMap::from([(k.clone(), v.clone())]) }],
            Work::Read if self.scenario.erasure.is_some() => vec![Step::Read { offset: 0, length: 0 }],
            Work::Read => vec![
                Step::Read { offset: 0, length: 0 },
                Step::OmapGetVals { start_after: Bytes::new(), filter_prefix: Bytes::new(), max_return: 1024 },
            ],
        };
        let op = OsdOp { reqid: out.reqid, pool, object: out.object.clone(), map_epoch: epoch, steps };
        self.send(Node::Client(c), Node::Osd(primary), Msg::Op { client: c, rid, op });
    }

    fn client_reply(&mut self, c: u32, rid: u64, reply: Result<Reply>) {
        let stamp = self.stamp();
        let Some(client) = self.clients.get_mut(c as usize) else { return };
        let Some(out) = client.outstanding.as_mut().filter(|o| o.rid == rid) else { return };
        (self.now, 11u8, c, rid, reply.is_ok()).hash(&mut self.trace);
        let seen = match (&out.work, reply) {
            (Work::Read, Ok(Reply::Op(r))) => match r.outputs.as_slice() {
                [StepOutput::Data(data), StepOutput::OmapVals { entries, .. }] => {
                    Some(Expected { data: Some(data.to_vec()), omap: entries.iter().cloned().collect() })
                }
                [StepOutput::Data(data)] => Some(Expected { data: Some(data.to_vec()), omap: BTreeMap::new() }),
                other => {
                    let detail = format!("{stamp}: a read of {} returned {other:?}", out.object);
                    self.violation.get_or_insert(Violation { invariant: "acknowledged_writes", detail });
                    return;
                }
            },
            (Work::Read, Err(e)) if e.errno == Errno::NotFound => Some(Expected::default()),
            (_, Ok(Reply::Op(_))) => None,
            (_, _) => {
                // Not served (EAGAIN, a reset, a peer gone): resend at the next tick.
                out.rid = 0;
                return;
            }
        };
        let Some(out) = client.outstanding.take() else { return };
        self.ops += 1;
        match seen {
            Some(seen) => {
                let at = format!("{stamp}, served by {}", out.to);
                if let Err(v) = self.oracle.check_read(&out.object, &seen, &at) {
                    self.fail(v);
                }
            }
            None => self.oracle.acknowledged(&out.object, &out.work),
        }
    }

    // ---- healing ----

    /// The PGs of the pool that are not active+clean under the monitor's map, and the
    /// states their primaries report.
    fn unclean(&self) -> (Vec<PgId>, BTreeMap<PgId, PgStat>) {
        let mut stats = BTreeMap::new();
        for osd in self.osds.values() {
            if let Some(shard) = osd.shard.as_ref().filter(|s| s.epoch() == self.map.epoch) {
                stats.extend(shard.stats().into_iter().map(|s| (s.pg, s)));
            }
        }
        let pg_num = self.map.pool(self.pool).map_or(0, |p| p.pg_num);
        let pgs: Vec<PgId> = (0..pg_num).map(|seed| PgId { pool: self.pool, seed }).collect();
        (healing::unclean(&pgs, &stats), stats)
    }

    fn healed(&self) -> bool {
        let clients_done = self.clients.iter().all(|c| c.outstanding.is_none() && c.final_reads.is_empty());
        let all_up = self.osds.values().all(|o| o.shard.as_ref().is_some_and(|s| s.epoch() == self.map.epoch))
            && self.map.osds.values().all(|e| e.up && e.is_in);
        clients_done && all_up && self.unclean().0.is_empty() && self.osds.values().all(|o| o.after_sync.is_empty())
    }

    fn check_replicas(&mut self) {
        let Ok(pool) = self.map.pool(self.pool).cloned() else { return };
        let topology = shoal_placement::Topology::from_map(&self.map);
        for seed in 0..pool.pg_num {
            let pg = PgId { pool: pool.id, seed };
            if let Some(erasure) = &pool.erasure {
                let shards: Vec<Option<&ObjectStore>> = topology
                    .acting(&self.map, &pool, pg)
                    .into_iter()
                    .map(|osd| self.osds.get(&osd).map(|sim| sim.store.as_ref()))
                    .collect();
                let layout = shoal_pg_core::ec::EcLayout::new(&erasure.code, ERASURE_STORE_CHUNK);
                if let Err(v) = consistent_shards::check(pg, pool.pg_num, &layout, &shards) {
                    return self.fail(v);
                }
                continue;
            }
            let acting: Vec<(OsdId, &ObjectStore)> = topology
                .up_osds(&self.map, &pool, pg)
                .into_iter()
                .filter_map(|osd| self.osds.get(&osd).map(|sim| (osd, sim.store.as_ref())))
                .collect();
            if let Err(v) = identical_replicas::check(pg, pool.pg_num, &acting) {
                return self.fail(v);
            }
        }
    }
}

/// A second copy of a message, for duplication (maps and boots are not worth it).
fn duplicate_of(msg: &Msg) -> Option<Msg> {
    match msg {
        Msg::Op { client, rid, op } => Some(Msg::Op { client: *client, rid: *rid, op: op.clone() }),
        Msg::Peer { from, rid, request } => Some(Msg::Peer { from: *from, rid: *rid, request: request.clone() }),
        Msg::PeerReply { rid, reply } => Some(Msg::PeerReply { rid: *rid, reply: reply.clone() }),
        Msg::OpReply { rid, reply } => Some(Msg::OpReply { rid: *rid, reply: reply.clone() }),
        _ => None,
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.scenario;
        write!(
            f,
            "seed {}: {} OSDs on {} hosts, {}size {}/{} pg_num {}, {} clients, {} recovery slots, {} ms recovery sleep; {} events, {} ops, {} faults, {:.1}s simulated, trace {:016x}",
            self.seed,
            s.osds,
            s.hosts,
            s.erasure.map_or(String::new(), |(k, m)| format!("erasure-coded {k}+{m} ")),
            s.size,
            s.min_size,
            s.pg_num,
            s.clients,
            s.recovery_max_active,
            s.recovery_sleep.as_millis(),
            self.events,
            self.ops,
            self.faults,
            self.elapsed.as_secs_f64(),
            self.trace
        )
    }
}
