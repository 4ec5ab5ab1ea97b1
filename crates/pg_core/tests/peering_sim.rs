//! Peering and recovery decisions over many seeded random failure schedules.
//!
//! A model PG of size 3 (min_size 2) lives on 5 OSDs. Each schedule mixes writes (some of
//! which reach only part of the acting set and so are never acknowledged), OSD deaths and
//! returns, log trimming, and recoveries interrupted half-way. After every peering that
//! lets the PG go active, the test checks: no acknowledged write was lost, every replica
//! that claims to be complete holds exactly the primary's objects, and logs stay ordered.
//!
//! The schedules keep at least one complete member of the newest active interval alive:
//! that is the condition under which `plan` can see every acknowledged write (it does not
//! reconstruct past intervals from map history; see docs/ARCHITECTURE.md).

use shoal_pg_core::peering::{Plan, Recovery, plan};
use shoal_types::pg::{EVersion, LogPoint, PgInfo, PgSummary};
use shoal_types::{ObjectName, OsdId};
use std::collections::BTreeMap;

const OSDS: usize = 5;
const SIZE: usize = 3;
const MIN_SIZE: usize = 2;
const LOG_KEEP: usize = 6;

/// xorshift64*: small, seedable, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
}

#[derive(Clone)]
struct Replica {
    objects: BTreeMap<ObjectName, u64>,
    log: Vec<LogPoint>,
    info: PgInfo,
}

impl Replica {
    fn apply(&mut self, at: EVersion, object: &ObjectName, value: u64) {
        self.objects.insert(object.clone(), value);
        self.log.push(LogPoint { at, object: object.clone() });
        self.info.last_update = at;
        while self.log.len() > LOG_KEEP {
            self.info.log_tail = self.log.remove(0).at;
        }
    }
}

#[derive(Default)]
struct Counts {
    activations: usize,
    /// Intervals that could not go active (too few replicas, or no authority reachable).
    inactive: usize,
    log_recoveries: usize,
    backfills: usize,
    unacked_writes: usize,
    acked_writes: usize,
}

struct Sim {
    rng: Rng,
    epoch: u64,
    replicas: Vec<Replica>,
    up: Vec<bool>,
    /// Placement preference: the acting set is the first SIZE up OSDs in this order.
    order: Vec<usize>,
    acting: Vec<usize>,
    active: bool,
    acked: BTreeMap<ObjectName, u64>,
    counter: u64,
    counts: Counts,
}

impl Sim {
    fn new(seed: u64) -> Sim {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut order: Vec<usize> = (0..OSDS).collect();
        for i in (1..OSDS).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let empty = Replica { objects: BTreeMap::new(), log: Vec::new(), info: PgInfo::empty() };
        let mut sim = Sim {
            rng,
            epoch: 0,
            replicas: vec![empty; OSDS],
            up: vec![true; OSDS],
            order,
            acting: Vec::new(),
            active: false,
            acked: BTreeMap::new(),
            counter: 0,
            counts: Counts::default(),
        };
        sim.new_interval();
        sim
    }

    fn new_interval(&mut self) {
        self.epoch += 1;
        self.active = false;
        self.acting = self.order.iter().copied().filter(|o| self.up[*o]).take(SIZE).collect();
        if self.acting.len() < MIN_SIZE {
            self.counts.inactive += 1;
            return;
        }
        let summaries: BTreeMap<OsdId, PgSummary> = (0..OSDS)
            .filter(|o| self.up[*o])
            .filter(|o| {
                let info = &self.replicas[*o].info;
                self.acting.contains(o) || info.last_update != EVersion::default() || !info.complete
            })
            .map(|o| {
                let r = &self.replicas[o];
                (OsdId(o as u32), PgSummary { info: r.info.clone(), log: r.log.clone(), missing: None })
            })
            .collect();
        match plan(OsdId(self.acting[0] as u32), &summaries, None) {
            Err(_) => self.counts.inactive += 1,
            Ok(p) => self.activate(&p),
        }
    }

    fn activate(&mut self, p: &Plan) {
        assert!(self.replicas[p.auth.0 as usize].info.complete, "the authority must be complete");
        let auth = self.replicas[p.auth.0 as usize].clone();
        let primary = self.acting[0];
        for m in self.acting.clone() {
            let peer = &p.peers[&OsdId(m as u32)];
            let interrupted = m != primary && self.rng.percent(20);
            let r = &mut self.replicas[m];
            match peer.keep_until {
                None => {
                    r.log = auth.log.clone();
                    r.info.log_tail = auth.info.log_tail;
                    r.objects.clear();
                }
                Some(keep) => {
                    r.log.retain(|e| e.at <= keep);
                    r.log.extend(auth.log.iter().filter(|e| e.at > keep).cloned());
                }
            }
            r.info.last_update = auth.info.last_update;
            let objects: Vec<ObjectName> = match &peer.recovery {
                Recovery::None => Vec::new(),
                Recovery::Log(objects) => {
                    self.counts.log_recoveries += 1;
                    objects.iter().cloned().collect()
                }
                Recovery::Backfill => {
                    self.counts.backfills += 1;
                    auth.objects.keys().cloned().collect()
                }
            };
            let copied = if interrupted { self.rng.below(objects.len() + 1) } else { objects.len() };
            for o in &objects[..copied] {
                match auth.objects.get(o) {
                    Some(v) => r.objects.insert(o.clone(), *v),
                    None => r.objects.remove(o),
                };
            }
            r.info.complete = peer.recovery == Recovery::None || !interrupted;
            r.info.last_epoch_started = self.epoch;
            r.info.last_acting = self.acting.iter().map(|o| OsdId(*o as u32)).collect();
        }
        self.active = true;
        self.counts.activations += 1;
        self.check();
    }

    fn check(&self) {
        let primary = &self.replicas[self.acting[0]];
        for (object, value) in &self.acked {
            let held = primary.objects.get(object).copied().unwrap_or(0);
            assert!(held >= *value, "acknowledged write {object}={value} lost: primary holds {held}");
        }
        for m in &self.acting {
            let r = &self.replicas[*m];
            assert!(r.log.windows(2).all(|w| w[0].at < w[1].at), "log out of order on osd.{m}");
            if r.info.complete {
                assert_eq!(r.objects, primary.objects, "complete replica osd.{m} differs from the primary");
            }
        }
    }

    fn write(&mut self) {
        if !self.active {
            return;
        }
        let object = ObjectName::new("", format!("o{}", self.rng.below(5)));
        self.counter += 1;
        let primary = self.acting[0];
        let at = EVersion { epoch: self.epoch, version: self.replicas[primary].info.last_update.version + 1 };
        self.replicas[primary].apply(at, &object, self.counter);
        let mut everywhere = true;
        for m in self.acting[1..].iter().copied() {
            if self.rng.percent(92) {
                self.replicas[m].apply(at, &object, self.counter);
            } else {
                everywhere = false;
            }
        }
        if everywhere {
            self.counts.acked_writes += 1;
            self.acked.insert(object, self.counter);
        } else {
            // A replica missed it: the write is never acknowledged and the PG peers again,
            // often because the primary died in the middle of it.
            self.counts.unacked_writes += 1;
            if self.rng.percent(50) && self.may_kill(primary) {
                self.up[primary] = false;
            }
            self.new_interval();
        }
    }

    /// Whether `victim` may die without taking the last complete member of the newest
    /// active interval with it.
    fn may_kill(&self, victim: usize) -> bool {
        let Some(newest) = self.replicas.iter().max_by_key(|r| r.info.last_epoch_started) else { return true };
        if newest.info.last_epoch_started == 0 {
            return true;
        }
        let les = newest.info.last_epoch_started;
        newest.info.last_acting.iter().map(|o| o.0 as usize).any(|o| {
            o != victim
                && self.up[o]
                && self.replicas[o].info.complete
                && self.replicas[o].info.last_epoch_started == les
        })
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..60 => self.write(),
            60..78 => {
                let victim = self.rng.below(OSDS);
                if self.up[victim] && self.may_kill(victim) {
                    self.up[victim] = false;
                    self.new_interval();
                }
            }
            78..96 => {
                let back = self.rng.below(OSDS);
                if !self.up[back] {
                    self.up[back] = true;
                    self.new_interval();
                }
            }
            _ => self.new_interval(),
        }
    }
}

#[test]
fn no_acknowledged_write_is_lost_over_random_failure_schedules() {
    let mut total = Counts::default();
    for seed in 0..400 {
        let mut sim = Sim::new(seed);
        for _ in 0..300 {
            sim.step();
        }
        // Everyone back: the PG must go active and every replica must be complete.
        sim.up = vec![true; OSDS];
        sim.new_interval();
        assert!(sim.active, "seed {seed}: the PG did not go active with every OSD up");
        let c = &sim.counts;
        total.activations += c.activations;
        total.inactive += c.inactive;
        total.log_recoveries += c.log_recoveries;
        total.backfills += c.backfills;
        total.acked_writes += c.acked_writes;
        total.unacked_writes += c.unacked_writes;
    }
    eprintln!(
        "{} activations, {} inactive intervals, {} log recoveries, {} backfills, {} acked / {} unacked writes",
        total.activations,
        total.inactive,
        total.log_recoveries,
        total.backfills,
        total.acked_writes,
        total.unacked_writes
    );
    // The schedules must have exercised every path.
    assert!(total.activations > 10_000, "{} activations", total.activations);
    assert!(total.log_recoveries > 1_000, "{} log recoveries", total.log_recoveries);
    assert!(total.backfills > 100, "{} backfills", total.backfills);
    assert!(total.inactive > 100, "{} inactive intervals", total.inactive);
    assert!(total.unacked_writes > 1_000 && total.acked_writes > 10_000);
}
