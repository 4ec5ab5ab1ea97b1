//! Placement as pure functions of the map: object → PG, PG → ordered OSDs.
//!
//! Every client and OSD must compute the same answer from the same map, so nothing here
//! reads the clock, randomness or any IO, and the hashes are fixed forever.

pub mod autoscale;
pub mod balancer;
pub mod hash;
pub mod straw2;

use shoal_types::crush::{BucketType, CrushRule};
use shoal_types::{ObjectName, OsdId, OsdMap, PgId, Pool};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;

/// The 32-bit placement hash of an object name. A non-empty namespace is hashed with the
/// name, joined by 0x1f, as Ceph does.
pub fn object_hash(name: &ObjectName) -> u32 {
    if name.namespace.is_empty() {
        hash::str_hash(name.name.as_bytes())
    } else {
        let mut key = Vec::with_capacity(name.namespace.len() + 1 + name.name.len());
        key.extend_from_slice(name.namespace.as_bytes());
        key.push(0x1f);
        key.extend_from_slice(name.name.as_bytes());
        hash::str_hash(&key)
    }
}

pub use shoal_types::resize::{ancestor, pg_mask, stable_mod};

/// The PG an object hash falls into.
pub fn pg_of_hash(pool: &Pool, hash: u32) -> PgId {
    PgId { pool: pool.id, seed: ancestor(hash, pool.pg_num) }
}

/// The PG an object belongs to.
pub fn pg_of(pool: &Pool, name: &ObjectName) -> PgId {
    pg_of_hash(pool, object_hash(name))
}

/// The ranges of *bit-reversed* object hashes that belong to PG `seed` when the pool has
/// `pg_num` PGs: one range, or two when `pg_num` is not a power of two. Stores order
/// objects by reversed hash so that each PG is one or two contiguous key ranges.
pub fn pg_reversed_hash_ranges(seed: u32, pg_num: u32) -> Vec<RangeInclusive<u32>> {
    let mask = pg_mask(pg_num);
    let bits = mask.count_ones();
    let half = mask.div_ceil(2);
    let mut low_patterns = vec![seed];
    if seed < half && seed + half >= pg_num {
        low_patterns.push(seed + half);
    }
    low_patterns
        .into_iter()
        .map(|low| {
            if bits == 0 {
                return 0..=u32::MAX;
            }
            let top = low.reverse_bits() >> (32 - bits);
            let span = 32 - bits;
            let start = top << span;
            start..=start | ((1u64 << span) - 1) as u32
        })
        .collect()
}

/// The CRUSH hierarchy placement draws from: buckets holding buckets and, at the bottom,
/// weighted OSDs; which OSDs are out, their override weights and classes; the rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Buckets in name order, each with its children; `by_name` finds them.
    buckets: Vec<Bucket>,
    by_name: BTreeMap<String, usize>,
    /// Each rule with the weights it places by, computed once per map.
    rules: BTreeMap<String, RulePlacement>,
    out: BTreeSet<OsdId>,
    reweight: BTreeMap<OsdId, u32>,
    classes: BTreeMap<OsdId, String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Bucket {
    id: i32,
    kind: BucketType,
    children: Vec<Item>,
}

/// A bucket's child: another bucket (by index) or an OSD with its CRUSH weight (16.16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Item {
    Bucket(usize),
    Osd(OsdId, u32),
}

/// Attempts per replica before giving up, as CRUSH's `choose_total_tries`.
const MAX_TRIES: u32 = 50;
/// Rounds of draws for an erasure-coded PG's shards (Ceph's erasure rules set
/// `choose_tries 100`): with as many hosts as shards, the last shard may find the one free
/// host late.
const SHARD_ROUNDS: u32 = 100;

impl Topology {
    /// The hierarchy, weights, out OSDs and rules of a map.
    pub fn from_map(map: &OsdMap) -> Self {
        let crush = map.crush_view();
        let by_name: BTreeMap<String, usize> = crush.buckets.keys().enumerate().map(|(i, n)| (n.clone(), i)).collect();
        let mut buckets: Vec<Bucket> =
            crush.buckets.values().map(|b| Bucket { id: b.id, kind: b.kind, children: Vec::new() }).collect();
        for (i, bucket) in crush.buckets.values().enumerate() {
            for parent in bucket.parents.iter().filter_map(|p| by_name.get(p)) {
                buckets[*parent].children.push(Item::Bucket(i));
            }
        }
        for (&id, osd) in &map.osds {
            if let Some(&host) = by_name.get(&osd.host) {
                buckets[host].children.push(Item::Osd(id, osd.weight));
            }
        }
        let mut topology = Topology {
            buckets,
            by_name,
            rules: BTreeMap::new(),
            out: map.osds.iter().filter(|(_, o)| !o.is_in).map(|(id, _)| *id).collect(),
            reweight: map.osd_reweight.clone(),
            classes: crush.device_classes.clone(),
        };
        let rules: BTreeMap<String, RulePlacement> = crush
            .rule_names()
            .into_iter()
            .filter_map(|name| Some((name.clone(), topology.rule_placement(&crush.rule(&name).ok()?)?)))
            .collect();
        topology.rules = rules;
        topology
    }

    /// A rule's root, failure domain and class with the weights of every bucket under
    /// them; `None` if its root is missing.
    fn rule_placement(&self, rule: &CrushRule) -> Option<RulePlacement> {
        let mut placement = RulePlacement {
            class: rule.device_class.clone(),
            root: *self.by_name.get(&rule.root)?,
            domain: rule.failure_domain,
            weights: Vec::new(),
            osds: Vec::new(),
        };
        let placer = Placer { topology: self, rule: &placement };
        let mut sums = vec![None; self.buckets.len()];
        placer.sum_weights(placement.root, &mut sums);
        let mut osds = Vec::new();
        self.collect_osds(placement.root, &mut osds);
        osds.sort_unstable_by_key(|(o, _, _)| *o);
        osds.dedup_by_key(|(o, _, _)| *o);
        osds.retain(|&(o, w, _)| placer.item_weight(Item::Osd(o, w)) > 0);
        placement.weights = sums.into_iter().map(Option::unwrap_or_default).collect();
        placement.osds = osds;
        Some(placement)
    }

    /// How a pool's PGs are placed: its rule's root, failure domain and class, with the
    /// weights of every bucket under them; `None` if the rule or its root is missing.
    pub fn placer(&self, pool: &Pool) -> Option<Placer<'_>> {
        Some(Placer { topology: self, rule: self.rules.get(&pool.crush_rule)? })
    }

    /// Every OSD under `bucket`, each with its weight and host bucket.
    fn collect_osds(&self, bucket: usize, osds: &mut Vec<(OsdId, u32, usize)>) {
        for child in &self.buckets[bucket].children {
            match *child {
                Item::Bucket(b) => self.collect_osds(b, osds),
                Item::Osd(osd, w) => osds.push((osd, w, bucket)),
            }
        }
    }

    /// The ordered OSDs (primary first) of a PG: see [`Placer::pg_to_osds`].
    pub fn pg_to_osds(&self, pool: &Pool, pg: PgId) -> Vec<OsdId> {
        self.placer(pool).map(|p| p.pg_to_osds(pool, pg)).unwrap_or_default()
    }

    /// The OSD of each shard of an erasure-coded PG: see [`Placer::pg_to_shards`].
    pub fn pg_to_shards(&self, pool: &Pool, pg: PgId) -> Vec<Option<OsdId>> {
        match self.placer(pool) {
            Some(placer) => placer.pg_to_shards(pool, pg),
            None => vec![None; pool.size as usize],
        }
    }
}

/// Placement by one rule: its root, failure domain, and the CRUSH weight of every bucket
/// under the root, OSDs of other classes counting zero. Out OSDs keep their weight and are
/// turned away when drawn, as CRUSH treats them, so only their copies move.
pub struct Placer<'a> {
    topology: &'a Topology,
    rule: &'a RulePlacement,
}

/// What a [`Placer`] places by: its rule, and the weights under the rule's root.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RulePlacement {
    class: Option<String>,
    root: usize,
    domain: BucketType,
    /// Each bucket's weight (0 outside the root).
    weights: Vec<u32>,
    /// Every OSD of the rule's class under the root with its CRUSH weight and host bucket.
    osds: Vec<(OsdId, u32, usize)>,
}

impl Placer<'_> {
    /// Each OSD the rule places copies on (of its class, under its root, with weight), with
    /// its CRUSH weight and its failure-domain bucket (for an `osd` domain, or an OSD
    /// under no bucket of the domain's type, a number of its own past the buckets).
    pub fn domains(&self) -> BTreeMap<OsdId, (u32, usize)> {
        let mut out = BTreeMap::new();
        self.walk_domains(self.rule.root, None, &mut out);
        out
    }

    fn walk_domains(&self, bucket: usize, domain: Option<usize>, out: &mut BTreeMap<OsdId, (u32, usize)>) {
        let buckets = &self.topology.buckets;
        let domain = if buckets[bucket].kind == self.rule.domain { Some(bucket) } else { domain };
        for &child in &buckets[bucket].children {
            match child {
                Item::Bucket(b) => self.walk_domains(b, domain, out),
                Item::Osd(osd, weight) if self.item_weight(child) > 0 => {
                    let own = buckets.len() + osd.0 as usize;
                    out.entry(osd).or_insert((weight, domain.unwrap_or(own)));
                }
                Item::Osd(..) => {}
            }
        }
    }

    /// Fills `sums[bucket]` for `bucket` and everything under it: the weights of its OSDs.
    fn sum_weights(&self, bucket: usize, sums: &mut [Option<u32>]) -> u32 {
        if let Some(sum) = sums[bucket] {
            return sum;
        }
        let mut sum = 0u32;
        for &child in &self.topology.buckets[bucket].children {
            let w = match child {
                Item::Bucket(b) => self.sum_weights(b, sums),
                Item::Osd(..) => self.item_weight(child),
            };
            sum = sum.saturating_add(w);
        }
        sums[bucket] = Some(sum);
        sum
    }

    fn item_weight(&self, item: Item) -> u32 {
        let t = self.topology;
        match item {
            Item::Bucket(b) => self.rule.weights.get(b).copied().unwrap_or_default(),
            Item::Osd(osd, _) if self.rule.class.as_ref().is_some_and(|c| t.classes.get(&osd) != Some(c)) => 0,
            Item::Osd(_, w) => w,
        }
    }

    /// Straw2 among a bucket's children for input `x` and attempt `r`.
    fn choose(&self, bucket: usize, x: u32, r: u32) -> Option<Item> {
        let mut best: Option<(i64, Item)> = None;
        for &child in &self.topology.buckets[bucket].children {
            let weight = self.item_weight(child);
            if weight == 0 {
                continue;
            }
            let id = match child {
                Item::Bucket(b) => self.topology.buckets[b].id,
                Item::Osd(osd, _) => osd.0 as i32,
            };
            let draw = straw2::draw(x, id, r, weight);
            if best.is_none_or(|(best_draw, _)| draw > best_draw) {
                best = Some((draw, child));
            }
        }
        best.map(|(_, item)| item)
    }

    /// Descends from `bucket` to a bucket of type `kind` (or an OSD for `Osd`), drawing with
    /// `r` at every level; `None` if a branch has no weight or skips the level.
    fn descend(&self, mut bucket: usize, kind: BucketType, x: u32, r: u32) -> Option<Item> {
        loop {
            match self.choose(bucket, x, r)? {
                Item::Osd(osd, w) => return (kind == BucketType::Osd).then_some(Item::Osd(osd, w)),
                Item::Bucket(b) if self.topology.buckets[b].kind == kind => return Some(Item::Bucket(b)),
                Item::Bucket(b) if self.topology.buckets[b].kind.level() < kind.level() => return None,
                Item::Bucket(b) => bucket = b,
            }
        }
    }

    /// An OSD under `bucket` for attempt `r`.
    fn leaf(&self, bucket: usize, x: u32, r: u32) -> Option<OsdId> {
        match self.descend(bucket, BucketType::Osd, x, r)? {
            Item::Osd(osd, _) => Some(osd),
            Item::Bucket(_) => None,
        }
    }

    /// Among every OSD of the rule that is `eligible`: straw2 over them all (an `osd`
    /// failure domain, or too few domain buckets).
    fn any_osd(&self, x: u32, r: u32, eligible: impl Fn(OsdId) -> bool) -> Option<(OsdId, usize)> {
        let mut best: Option<(i64, OsdId, usize)> = None;
        for &(osd, weight, host) in self.rule.osds.iter().filter(|(o, _, _)| eligible(*o)) {
            let draw = straw2::draw(x, osd.0 as i32, r, weight);
            if best.is_none_or(|(best_draw, _, _)| draw > best_draw) {
                best = Some((draw, osd, host));
            }
        }
        best.map(|(_, osd, host)| (osd, host))
    }

    /// Whether `osd`'s override weight turns it away for input `x` (as CRUSH's `is_out`):
    /// an OSD reweighted to `w` keeps that share of the inputs that draw it.
    fn turned_away(&self, x: u32, osd: OsdId) -> bool {
        match self.topology.reweight.get(&osd) {
            None => false,
            Some(&w) if w >= 0x10000 => false,
            Some(&w) => hash::hash2(x, osd.0) & 0xffff >= w,
        }
    }

    /// The ordered OSDs (primary first) of a replicated PG: up to `pool.size` distinct OSDs
    /// in distinct failure-domain buckets, then, if there are too few of those, distinct
    /// OSDs anywhere under the root.
    pub fn pg_to_osds(&self, pool: &Pool, pg: PgId) -> Vec<OsdId> {
        let x = hash::hash2(pg.seed, pg.pool.0 as u32);
        let size = pool.size as usize;
        let out = &self.topology.out;
        let mut chosen: Vec<OsdId> = Vec::with_capacity(size);
        if self.rule.domain != BucketType::Osd {
            let mut used: Vec<usize> = Vec::new();
            let mut r = 0u32;
            while chosen.len() < size && r < MAX_TRIES * pool.size {
                let drawn = self.descend(self.rule.root, self.rule.domain, x, r);
                r += 1;
                let Some(Item::Bucket(domain)) = drawn else { continue };
                if used.contains(&domain) {
                    continue;
                }
                if let Some(osd) = self.leaf(domain, x, r)
                    && !chosen.contains(&osd)
                    && !out.contains(&osd)
                    && !self.turned_away(x, osd)
                {
                    used.push(domain);
                    chosen.push(osd);
                }
            }
        }
        // An `osd` failure domain, or too few buckets of the domain's type: any OSD that is
        // in, still distinct; as a last resort one its override weight turned away, rather
        // than fewer copies.
        for (first_r, honor_reweight) in [(1000, true), (2000, false)] {
            let mut r = 0u32;
            while chosen.len() < size {
                let eligible =
                    |o: OsdId| !(chosen.contains(&o) || out.contains(&o) || honor_reweight && self.turned_away(x, o));
                let Some((osd, _)) = self.any_osd(x, first_r + r, eligible) else { break };
                chosen.push(osd);
                r += 1;
            }
        }
        chosen
    }

    /// The OSD of each shard of an erasure-coded PG, by position (CRUSH's `indep` mode).
    /// Draws go in rounds: in round `t`, every shard still without an OSD draws with
    /// `r = shard + t·size` and keeps the OSD unless another shard holds it (or its
    /// failure-domain bucket). The draw is made as if no OSD were out; then only the
    /// shards of out OSDs are drawn again (first within their bucket), every other shard
    /// keeping its OSD, so an OSD going out moves only the shards it held and no copy
    /// changes position. `None`: no OSD was found for the shard (too few buckets of the
    /// failure domain's type).
    pub fn pg_to_shards(&self, pool: &Pool, pg: PgId) -> Vec<Option<OsdId>> {
        let none_out = self.draw_shards(pool, pg, vec![None; pool.size as usize], &BTreeSet::new(), true);
        let out = &self.topology.out;
        let kept: Vec<Option<(OsdId, usize)>> =
            none_out.into_iter().map(|s| s.filter(|(osd, _)| !out.contains(osd))).collect();
        let mut shards = self.draw_shards(pool, pg, kept, out, true);
        if shards.iter().any(Option::is_none) {
            // Rather a shard on an OSD its override weight turned away than none.
            shards = self.draw_shards(pool, pg, shards, out, false);
        }
        shards.into_iter().map(|s| s.map(|(osd, _)| osd)).collect()
    }

    /// Fills the shards without an OSD (`shards`: OSD and failure-domain bucket) by rounds
    /// of draws, rejecting the OSDs in `out` (and those override weights turn away, if
    /// `honor_reweight`).
    fn draw_shards(
        &self,
        pool: &Pool,
        pg: PgId,
        mut shards: Vec<Option<(OsdId, usize)>>,
        out: &BTreeSet<OsdId>,
        honor_reweight: bool,
    ) -> Vec<Option<(OsdId, usize)>> {
        let x = hash::hash2(pg.seed, pg.pool.0 as u32);
        let size = pool.size;
        let usable = |osd: OsdId| !(out.contains(&osd) || honor_reweight && self.turned_away(x, osd));
        for round in 0..SHARD_ROUNDS {
            if shards.iter().all(Option::is_some) {
                break;
            }
            for shard in 0..size {
                if shards[shard as usize].is_some() {
                    continue;
                }
                let r = shard + round * size;
                let drawn = if self.rule.domain == BucketType::Osd {
                    self.any_osd(x, r, |_| true)
                } else {
                    // Within the bucket, an out OSD is redrawn (as CRUSH's `chooseleaf`
                    // does), so the shard stays in its bucket while it has OSDs in.
                    match self.descend(self.rule.root, self.rule.domain, x, r) {
                        Some(Item::Bucket(domain)) => (0..MAX_TRIES).find_map(|t| {
                            let osd = self.leaf(domain, x, r + t * size * MAX_TRIES)?;
                            usable(osd).then_some((osd, domain))
                        }),
                        _ => None,
                    }
                };
                let Some((osd, domain)) = drawn else { continue };
                let taken = shards
                    .iter()
                    .flatten()
                    .any(|&(o, d)| o == osd || (self.rule.domain != BucketType::Osd && d == domain));
                if !taken && usable(osd) {
                    shards[shard as usize] = Some((osd, domain));
                }
            }
        }
        shards
    }
}

/// The OSDs that serve a PG under `map`: placement's choice minus OSDs that are down. For a
/// replicated pool primary first ([`pg_primary`]); for an erasure-coded pool the OSDs of the
/// shards that are up, in shard order.
pub fn pg_up_osds(map: &OsdMap, pool: &Pool, pg: PgId) -> Vec<OsdId> {
    Topology::from_map(map).up_osds(map, pool, pg)
}

/// The primary of a PG under `map`: the OSD the map's `primary_temp` names while it is in
/// the acting set, else placement's first OSD up (for an erasure-coded pool the lowest
/// shard up, as in Ceph).
pub fn pg_primary(map: &OsdMap, pool: &Pool, pg: PgId) -> Option<OsdId> {
    Topology::from_map(map).primary(map, pool, pg)
}

/// [`pg_primary`] for a PG whose acting set (from [`pg_acting`] or [`pg_up_osds`]) is known.
pub fn acting_primary(map: &OsdMap, pg: PgId, acting: &[OsdId]) -> Option<OsdId> {
    temp_primary(map, pg, acting).or_else(|| acting.iter().copied().find(|o| *o != OsdId::NONE))
}

/// The OSD the map's `primary_temp` makes lead `pg` in place of placement's primary, if it
/// is in `acting` (otherwise the entry does not apply).
pub fn temp_primary(map: &OsdMap, pg: PgId, acting: &[OsdId]) -> Option<OsdId> {
    map.primary_temp.get(&pg).copied().filter(|temp| acting.contains(temp))
}

/// A PG's acting set under `map` as its primary runs it: for a replicated pool the OSDs up,
/// primary first ([`pg_up_osds`]); for an erasure-coded pool one entry per shard, in shard
/// order, with [`OsdId::NONE`] where no OSD serves the shard.
pub fn pg_acting(map: &OsdMap, pool: &Pool, pg: PgId) -> Vec<OsdId> {
    Topology::from_map(map).acting(map, pool, pg)
}

/// The OSD serving each shard of an erasure-coded PG under `map` (a replicated pool's
/// replicas, in order): `None` where placement found none or its OSD is down. A shard keeps
/// its position, so shard `i` is always chunk `i` of each stripe.
pub fn pg_up_shards(map: &OsdMap, pool: &Pool, pg: PgId) -> Vec<Option<OsdId>> {
    Topology::from_map(map).up_shards(map, pool, pg)
}

/// The functions above for a topology built once from `map` (building it is most of their
/// cost: callers that place many PGs, or place per operation, keep one per map epoch).
impl Topology {
    /// [`pg_up_osds`] under `map`, this topology's map.
    pub fn up_osds(&self, map: &OsdMap, pool: &Pool, pg: PgId) -> Vec<OsdId> {
        if pool.erasure.is_some() {
            return self.up_shards(map, pool, pg).into_iter().flatten().collect();
        }
        let mut osds: Vec<OsdId> = self.raw_shards(map, pool, pg).into_iter().flatten().collect();
        osds.retain(|o| map.osds.get(o).is_some_and(|e| e.up));
        if let Some(at) = map.primary_temp.get(&pg).and_then(|temp| osds.iter().position(|o| o == temp)) {
            osds[..=at].rotate_right(1);
        }
        osds
    }

    /// [`pg_primary`] under `map`, this topology's map.
    pub fn primary(&self, map: &OsdMap, pool: &Pool, pg: PgId) -> Option<OsdId> {
        acting_primary(map, pg, &self.acting(map, pool, pg))
    }

    /// [`pg_acting`] under `map`, this topology's map.
    pub fn acting(&self, map: &OsdMap, pool: &Pool, pg: PgId) -> Vec<OsdId> {
        match pool.erasure {
            Some(_) => self.up_shards(map, pool, pg).into_iter().map(|o| o.unwrap_or(OsdId::NONE)).collect(),
            None => self.up_osds(map, pool, pg),
        }
    }

    /// [`pg_up_shards`] under `map`, this topology's map.
    pub fn up_shards(&self, map: &OsdMap, pool: &Pool, pg: PgId) -> Vec<Option<OsdId>> {
        let shards = self.raw_shards(map, pool, pg);
        shards.into_iter().map(|o| o.filter(|o| map.osds.get(o).is_some_and(|e| e.up))).collect()
    }

    /// Placement's OSD for each copy of `pg` whether up or not (an erasure-coded PG's by
    /// shard, `None` where none was found), with `map`'s upmap exceptions applied.
    pub fn raw_shards(&self, map: &OsdMap, pool: &Pool, pg: PgId) -> Vec<Option<OsdId>> {
        let mut shards = self.crush_shards(map, pool, pg);
        apply_upmap(map, pg, &mut shards);
        shards
    }

    /// [`Topology::raw_shards`] without upmap exceptions: placement of the PG's placement
    /// seed (its ancestor under the pool's `pgp_num`).
    fn crush_shards(&self, map: &OsdMap, pool: &Pool, pg: PgId) -> Vec<Option<OsdId>> {
        let pg = PgId { pool: pg.pool, seed: map.placement_seed(pg) };
        match &pool.erasure {
            Some(_) => self.pg_to_shards(pool, pg),
            None => self.pg_to_osds(pool, pg).into_iter().map(Some).collect(),
        }
    }

    /// Whether `map`'s upmap exceptions for `pg` break its rule: copies on OSDs the rule
    /// does not place on, or fewer distinct failure domains than placement alone gives.
    pub fn upmap_breaks_rule(&self, map: &OsdMap, pool: &Pool, pg: PgId) -> bool {
        self.breaks_rule(pool, &self.raw_shards(map, pool, pg), &self.crush_shards(map, pool, pg))
    }

    /// Whether placement `with` exceptions breaks `pool`'s rule, placement `without` them
    /// being what CRUSH gives.
    fn breaks_rule(&self, pool: &Pool, with: &[Option<OsdId>], without: &[Option<OsdId>]) -> bool {
        let Some(placer) = self.placer(pool) else { return false };
        let domains = placer.domains();
        let distinct = |shards: &[Option<OsdId>]| -> Option<usize> {
            let of: Option<BTreeSet<usize>> = shards.iter().flatten().map(|o| domains.get(o).map(|d| d.1)).collect();
            of.map(|d| d.len())
        };
        distinct(with).is_none_or(|with| Some(with) < distinct(without))
    }
}

/// Applies `pg`'s upmap exceptions to its placement: an item `(from, to)` puts `from`'s
/// copy on `to`, unless `to` is gone, out or without weight, or already holds a copy (as
/// Ceph skips such items rather than break the PG). A source PG of a merge takes its
/// target's exceptions, so that both sit on the same OSDs whatever exceptions change.
pub fn apply_upmap(map: &OsdMap, pg: PgId, shards: &mut [Option<OsdId>]) {
    if let Some(items) = map.pg_upmap_items.get(&map.upmap_pg(pg)) {
        apply_items(map, items, shards);
    }
}

/// Applies upmap `items` to a placement, as [`apply_upmap`] applies a PG's.
fn apply_items(map: &OsdMap, items: &[(OsdId, OsdId)], shards: &mut [Option<OsdId>]) {
    for &(from, to) in items {
        let usable = map.osds.get(&to).is_some_and(|o| o.is_in && o.weight > 0);
        if !usable || shards.contains(&Some(to)) {
            continue;
        }
        if let Some(slot) = shards.iter_mut().find(|s| **s == Some(from)) {
            *slot = Some(to);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::crush::{CrushChange, DEFAULT_RULE};
    use shoal_types::{OsdEntry, PoolId};

    fn pool(pg_num: u32, size: u32) -> Pool {
        Pool {
            id: PoolId(1),
            name: "p".into(),
            pg_num,
            size,
            min_size: 1,
            erasure: None,
            crush_rule: DEFAULT_RULE.into(),
        }
    }

    /// `hosts` hosts `h0…` with `per_host` OSDs each, numbered in host order, weight 1.0.
    fn cluster(hosts: usize, per_host: usize) -> OsdMap {
        let mut map = OsdMap::default();
        for h in 0..hosts {
            for o in 0..per_host {
                let entry =
                    OsdEntry { addr: String::new(), host: format!("h{h}"), weight: 0x10000, up: true, is_in: true };
                map.osds.insert(OsdId((h * per_host + o) as u32), entry);
            }
        }
        map
    }

    /// A rule named after its domain under `default`, and a pool of `size` that uses it.
    fn ruled(map: &mut OsdMap, pg_num: u32, size: u32, domain: BucketType) -> Pool {
        let rule = CrushRule { root: "default".into(), failure_domain: domain, device_class: None };
        CrushChange::CreateRule { name: domain.name().into(), rule }.apply(map).unwrap();
        Pool { crush_rule: domain.name().into(), ..pool(pg_num, size) }
    }

    fn set_out(map: &mut OsdMap, osds: &[u32]) {
        for o in osds {
            map.osds.get_mut(&OsdId(*o)).unwrap().is_in = false;
        }
    }

    /// Placements computed by the code before the CRUSH hierarchy (hosts and OSDs only), for
    /// maps of the shapes it knew: a map from then keeps every PG where it was.
    #[test]
    fn placement_from_before_the_hierarchy_is_unchanged() {
        let weighted = |hosts, per_host| {
            let mut map = cluster(hosts, per_host);
            for (id, osd) in map.osds.iter_mut() {
                osd.weight = 0x10000 + (id.0 % per_host as u32) * 0x4000;
            }
            map
        };
        let ids = |osds: Vec<OsdId>| osds.iter().map(|o| o.0).collect::<Vec<u32>>();
        let mut map = weighted(4, 3);
        let p = Pool { id: PoolId(3), ..pool(16, 3) };
        let placed = |map: &OsdMap| {
            let t = Topology::from_map(map);
            (0..16).map(|s| ids(t.pg_to_osds(&p, PgId { pool: p.id, seed: s }))).collect::<Vec<Vec<u32>>>()
        };
        let replicated = placed(&map);
        #[rustfmt::skip]
        let expected = [
            [10, 5, 1], [3, 2, 11], [2, 4, 10], [5, 2, 8], [0, 5, 7], [0, 3, 8], [1, 9, 8], [6, 0, 5],
            [3, 9, 7], [2, 11, 3], [6, 2, 4], [8, 9, 2], [8, 1, 4], [1, 10, 7], [8, 0, 5], [7, 10, 5],
        ];
        assert_eq!(replicated, expected.map(Vec::from));
        // An out OSD is turned away when drawn (before the hierarchy it weighed nothing,
        // which moved copies on other OSDs too): only its own copies move.
        set_out(&mut map, &[4]);
        for (old, new) in replicated.iter().zip(placed(&map)) {
            let kept: Vec<&u32> = old.iter().filter(|o| new.contains(o)).collect();
            assert_eq!(kept.len(), old.len() - usize::from(old.contains(&4)), "{old:?} -> {new:?}");
        }
        let mut map = weighted(8, 2);
        set_out(&mut map, &[5]);
        let host: [[u32; 6]; 16] = [
            [9, 10, 7, 15, 12, 4],
            [3, 9, 4, 11, 15, 6],
            [0, 2, 8, 10, 7, 14],
            [2, 11, 15, 13, 7, 4],
            [9, 11, 4, 1, 7, 13],
            [15, 2, 10, 1, 4, 7],
            [12, 7, 1, 8, 11, 14],
            [13, 0, 9, 3, 10, 14],
            [3, 6, 15, 11, 1, 13],
            [0, 6, 11, 15, 4, 8],
            [4, 15, 11, 7, 1, 9],
            [4, 2, 8, 14, 11, 13],
            [4, 8, 14, 11, 13, 6],
            [1, 15, 13, 10, 4, 8],
            [15, 1, 2, 11, 4, 12],
            [4, 0, 7, 15, 3, 9],
        ];
        let osd: [[u32; 6]; 16] = [
            [15, 6, 8, 12, 14, 11],
            [6, 7, 4, 11, 13, 15],
            [7, 14, 2, 4, 1, 9],
            [7, 9, 15, 0, 13, 10],
            [9, 7, 1, 2, 3, 13],
            [12, 9, 1, 6, 7, 8],
            [7, 15, 9, 14, 4, 10],
            [1, 12, 9, 3, 8, 7],
            [14, 3, 4, 15, 1, 6],
            [15, 3, 7, 11, 10, 8],
            [12, 2, 14, 15, 13, 10],
            [13, 1, 8, 12, 9, 2],
            [13, 10, 7, 2, 1, 8],
            [6, 1, 13, 2, 3, 10],
            [1, 9, 0, 13, 10, 6],
            [3, 7, 12, 1, 15, 0],
        ];
        for (domain, expected) in [(BucketType::Host, host), (BucketType::Osd, osd)] {
            let e = Pool { id: PoolId(3), ..ruled(&mut map, 16, 6, domain) };
            let t = Topology::from_map(&map);
            let shards: Vec<Vec<u32>> = (0..16)
                .map(|s| t.pg_to_shards(&e, PgId { pool: e.id, seed: s }).iter().map(|o| o.unwrap().0).collect())
                .collect();
            assert_eq!(shards, expected.map(Vec::from), "{domain}");
        }
    }

    #[test]
    fn shards_keep_their_positions_when_osds_go_out() {
        // One OSD per host too: there a shard leaves its host, and must still not push
        // another shard out of its position.
        for (domain, per_host) in [(BucketType::Host, 2), (BucketType::Host, 1), (BucketType::Osd, 2)] {
            let mut before = cluster(8, per_host);
            let p = ruled(&mut before, 512, 6, domain);
            let mut after = before.clone();
            set_out(&mut after, &[6, 3]);
            let (old_t, new_t) = (Topology::from_map(&before), Topology::from_map(&after));
            let (mut moved, mut held) = (0, 0);
            for seed in 0..p.pg_num {
                let pg = PgId { pool: p.id, seed };
                let (old, new) = (old_t.pg_to_shards(&p, pg), new_t.pg_to_shards(&p, pg));
                assert!(old.iter().all(Option::is_some) && new.iter().all(Option::is_some), "{old:?} {new:?}");
                let mut distinct: Vec<OsdId> = new.iter().flatten().copied().collect();
                distinct.sort();
                distinct.dedup();
                assert_eq!(distinct.len(), 6, "shards on distinct OSDs: {new:?}");
                assert!(new.iter().flatten().all(|o| o.0 != 6 && o.0 != 3), "{new:?}");
                if domain == BucketType::Host {
                    let mut hosts: Vec<u32> = new.iter().flatten().map(|o| o.0 / per_host as u32).collect();
                    hosts.sort();
                    hosts.dedup();
                    assert_eq!(hosts.len(), 6, "shards on distinct hosts: {new:?}");
                }
                for (a, b) in old.iter().zip(&new) {
                    if a.is_some_and(|o| o.0 == 6 || o.0 == 3) {
                        held += 1;
                    } else if a != b {
                        moved += 1;
                    }
                }
            }
            // Only the shards on the OSDs that went out move.
            assert!(held > 0);
            assert_eq!(moved, 0, "{domain:?}, {per_host} per host: other shards moved ({held} were on out OSDs)");
        }
    }

    #[test]
    fn too_few_hosts_leave_shards_unplaced() {
        let mut map = cluster(3, 2);
        let by_host = ruled(&mut map, 16, 6, BucketType::Host);
        let by_osd = ruled(&mut map, 16, 6, BucketType::Osd);
        let t = Topology::from_map(&map);
        for seed in 0..16 {
            let pg = PgId { pool: by_host.id, seed };
            assert_eq!(t.pg_to_shards(&by_host, pg).iter().filter(|s| s.is_some()).count(), 3);
            assert_eq!(t.pg_to_shards(&by_osd, pg).iter().filter(|s| s.is_some()).count(), 6);
        }
    }

    #[test]
    fn stable_mod_only_splits() {
        for x in 0..5000u32 {
            let h = hash::str_hash(&x.to_le_bytes());
            for n in 1..64u32 {
                let before = stable_mod(h, n, pg_mask(n));
                let after = stable_mod(h, n + 1, pg_mask(n + 1));
                assert!(after == before || after == n, "growing {n}->{} moved {before}->{after}", n + 1);
            }
        }
    }

    #[test]
    fn split_pgs_stay_with_their_parent_until_pgp_num_moves() {
        let mut map = cluster(6, 2);
        let p = map.create(&shoal_types::PoolSpec { name: "p".into(), pg_num: 8, size: 3, min_size: 2 }).unwrap();
        let before = Topology::from_map(&map);
        let parents: Vec<Vec<OsdId>> = (0..8).map(|seed| before.up_osds(&map, &p, PgId { pool: p.id, seed })).collect();
        map.set_pg_num("p", 32).unwrap();
        let p = map.pools[&p.id].clone();
        let split = Topology::from_map(&map);
        for seed in 0..32 {
            let osds = split.up_osds(&map, &p, PgId { pool: p.id, seed });
            assert_eq!(osds, parents[(seed % 8) as usize], "pg {seed} under pgp_num 8");
        }
        map.step_pgp_num(p.id, 32).unwrap();
        let spread = Topology::from_map(&map);
        let moved = (8..32)
            .filter(|&seed| spread.up_osds(&map, &p, PgId { pool: p.id, seed }) != parents[(seed % 8) as usize])
            .count();
        assert!(moved > 12, "children spread once pgp_num is 32: {moved} of 24 moved");
        for seed in 0..8 {
            assert_eq!(spread.up_osds(&map, &p, PgId { pool: p.id, seed }), parents[seed as usize]);
        }
    }

    proptest::proptest! {
        #[test]
        fn reversed_ranges_cover_exactly_the_pg(hash in proptest::num::u32::ANY, pg_num in 1u32..300) {
            let p = pool(pg_num, 1);
            let pg = pg_of_hash(&p, hash).seed;
            for seed in 0..pg_num {
                let inside = pg_reversed_hash_ranges(seed, pg_num).iter().any(|r| r.contains(&hash.reverse_bits()));
                proptest::prop_assert_eq!(inside, seed == pg, "seed {} hash {:x}", seed, hash);
            }
        }
    }

    #[test]
    fn replicas_land_on_distinct_hosts() {
        let t = Topology::from_map(&cluster(3, 2));
        let p = pool(128, 3);
        for seed in 0..128 {
            let osds = t.pg_to_osds(&p, PgId { pool: p.id, seed });
            assert_eq!(osds.len(), 3);
            let mut hosts: Vec<u32> = osds.iter().map(|o| o.0 / 2).collect();
            hosts.sort();
            hosts.dedup();
            assert_eq!(hosts.len(), 3, "pg {seed} -> {osds:?}");
        }
    }

    /// Hosts in racks, a rack failure domain: no two replicas or shards share a rack, and
    /// with fewer racks than copies the rest go anywhere (replicated) or stay unplaced.
    #[test]
    fn a_rack_failure_domain_spreads_copies_over_racks() {
        let mut map = cluster(6, 2);
        for rack in 0..3 {
            let name = format!("rack{rack}");
            let parent = Some("default".into());
            CrushChange::AddBucket { name: name.clone(), kind: BucketType::Rack, parent }.apply(&mut map).unwrap();
            for host in [2 * rack, 2 * rack + 1] {
                CrushChange::Move { name: format!("h{host}"), parent: name.clone() }.apply(&mut map).unwrap();
            }
        }
        let rack_of = |o: &OsdId| o.0 / 4;
        let replicated = ruled(&mut map, 256, 3, BucketType::Rack);
        let erasure = Pool { size: 4, ..replicated.clone() };
        let t = Topology::from_map(&map);
        for seed in 0..256 {
            let pg = PgId { pool: replicated.id, seed };
            let mut racks: Vec<u32> = t.pg_to_osds(&replicated, pg).iter().map(rack_of).collect();
            racks.sort();
            assert_eq!(racks, [0, 1, 2], "pg {seed}");
            let shards = t.pg_to_shards(&erasure, pg);
            let mut racks: Vec<u32> = shards.iter().flatten().map(rack_of).collect();
            racks.sort();
            assert_eq!((racks, shards.iter().filter(|s| s.is_none()).count()), (vec![0, 1, 2], 1), "pg {seed}");
        }
    }

    /// A rule with a device class uses only OSDs of that class.
    #[test]
    fn a_device_class_rule_uses_only_that_class() {
        let mut map = cluster(4, 3);
        let ssds: Vec<OsdId> = map.osds.keys().copied().filter(|o| o.0 % 3 == 0).collect();
        CrushChange::SetDeviceClass { osds: ssds.clone(), class: "ssd".into() }.apply(&mut map).unwrap();
        let rule =
            CrushRule { root: "default".into(), failure_domain: BucketType::Host, device_class: Some("ssd".into()) };
        CrushChange::CreateRule { name: "fast".into(), rule }.apply(&mut map).unwrap();
        let p = Pool { crush_rule: "fast".into(), ..pool(64, 3) };
        let t = Topology::from_map(&map);
        let mut used = BTreeSet::new();
        for seed in 0..64 {
            let osds = t.pg_to_osds(&p, PgId { pool: p.id, seed });
            assert_eq!(osds.len(), 3);
            assert!(osds.iter().all(|o| ssds.contains(o)), "pg {seed}: {osds:?}");
            used.extend(osds);
        }
        assert_eq!(used.len(), 4, "every SSD serves");
        let missing = Pool { crush_rule: "nope".into(), ..p };
        assert!(t.pg_to_osds(&missing, PgId { pool: missing.id, seed: 0 }).is_empty(), "no rule, no OSDs");
    }

    /// `osd reweight 0.5` keeps about half an OSD's PGs, and only its PGs move.
    #[test]
    fn an_override_weight_sheds_a_share_and_moves_nothing_else() {
        let before = cluster(5, 2);
        let mut after = before.clone();
        CrushChange::Reweight { osd: OsdId(3), reweight: 0x8000 }.apply(&mut after).unwrap();
        let p = pool(4096, 3);
        let (old_t, new_t) = (Topology::from_map(&before), Topology::from_map(&after));
        let (mut had, mut kept, mut others_moved) = (0, 0, 0);
        for seed in 0..p.pg_num {
            let pg = PgId { pool: p.id, seed };
            let (old, new) = (old_t.pg_to_osds(&p, pg), new_t.pg_to_osds(&p, pg));
            if old.contains(&OsdId(3)) {
                had += 1;
                kept += usize::from(new.contains(&OsdId(3)));
            } else if old != new {
                others_moved += 1;
            }
        }
        let share = kept as f64 / had as f64;
        assert!((0.4..0.6).contains(&share), "kept {kept} of {had}");
        assert_eq!(others_moved, 0, "PGs without osd.3 stay");
    }

    #[test]
    fn too_few_hosts_still_gives_distinct_osds() {
        let t = Topology::from_map(&cluster(1, 3));
        let p = pool(16, 3);
        for seed in 0..16 {
            let mut osds = t.pg_to_osds(&p, PgId { pool: p.id, seed });
            osds.sort();
            osds.dedup();
            assert_eq!(osds.len(), 3);
        }
        assert_eq!(
            Topology::from_map(&cluster(1, 1)).pg_to_osds(&pool(8, 1), PgId { pool: PoolId(1), seed: 3 }),
            [OsdId(0)]
        );
    }

    /// Adding one OSD to ten should move about 1/11 of the data (all of it onto the new
    /// OSD); straw2 must stay within 1.5 times that.
    #[test]
    fn adding_an_osd_moves_close_to_the_ideal_share() {
        for (hosts, per_host, size) in [(10, 1, 3), (10, 1, 1), (5, 2, 3)] {
            let mut before = cluster(hosts, per_host);
            before.fill_placement();
            let mut after = before.clone();
            let entry = OsdEntry { host: "new".into(), ..after.osds[&OsdId(0)].clone() };
            after.osds.insert(OsdId(1000), entry);
            let p = pool(2048, size);
            let (old_t, new_t) = (Topology::from_map(&before), Topology::from_map(&after));
            let (mut moved, mut total) = (0usize, 0usize);
            for seed in 0..p.pg_num {
                let pg = PgId { pool: p.id, seed };
                let (old, new) = (old_t.pg_to_osds(&p, pg), new_t.pg_to_osds(&p, pg));
                total += old.len();
                moved += old.iter().filter(|o| !new.contains(o)).count();
            }
            let fraction = moved as f64 / total as f64;
            let ideal = 1.0 / (hosts * per_host + 1) as f64;
            eprintln!("{hosts}x{per_host} size {size}: moved {fraction:.4}, ideal {ideal:.4}");
            assert!(
                fraction <= 1.5 * ideal,
                "{hosts}x{per_host} size {size}: moved {fraction:.4} of replicas, ideal {ideal:.4}"
            );
            assert!(fraction >= 0.5 * ideal, "the new OSD took too little: {fraction:.4}");
        }
    }
}
