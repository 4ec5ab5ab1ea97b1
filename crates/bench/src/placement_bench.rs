//! `shoal bench placement`: CRUSH placement at scale, computed from maps alone (no
//! daemons). A cluster of racks of hosts of OSDs and one replicated pool with a host
//! failure domain; for each change to the cluster, the share of the pool's copies that
//! move, beside the least any placement could move (the share of capacity that changed
//! hands), and the spread of copies over OSDs afterwards. Then the balancer's upmap
//! exceptions: the spread they reach and the copies they move, against the least that
//! evens the OSDs out (every copy above an OSD's fair share). Last, growing a balanced
//! cluster under `norebalance` (the monitor keeps copies in place with exceptions) and
//! letting the balancer move data: what it moves against the same least.

use clap::Args;
use serde_json::Value;
use shoal_node::bench::{print_rows, round};
use shoal_placement::{Topology, ancestor};
use shoal_types::crush::{BucketType, CrushChange, CrushRule};
use shoal_types::resize::MAX_PG_NUM;
use shoal_types::{OsdEntry, OsdId, OsdMap, PgId, Pool, PoolId, Result, err};
use std::time::Instant;

/// Arguments of `shoal bench placement`.
#[derive(Args, Debug)]
pub struct PlacementBenchArgs {
    /// Racks.
    #[arg(long, default_value_t = 10)]
    racks: usize,
    /// Hosts, spread evenly over the racks.
    #[arg(long, default_value_t = 100)]
    hosts: usize,
    /// OSDs, spread evenly over the hosts (weight 1.0 each).
    #[arg(long, default_value_t = 1000)]
    osds: usize,
    /// PGs of the pool.
    #[arg(long, default_value_t = 100_000)]
    pgs: u32,
    /// Replicas per PG.
    #[arg(long, default_value_t = 3)]
    size: u32,
    /// The balancer's goal: copies an OSD may hold above its fair share.
    #[arg(long, default_value_t = 1.0)]
    max_deviation: f64,
    /// Print JSON rows.
    #[arg(long)]
    json: bool,
}

/// The cluster: racks `rack0…` under `default`, hosts `host0…` in them, OSDs in the hosts.
fn cluster(args: &PlacementBenchArgs) -> Result<OsdMap> {
    if args.racks == 0 || args.hosts < args.racks || args.osds < args.hosts {
        return Err(err::invalid("need at least one rack, a host per rack and an OSD per host"));
    }
    let mut map = OsdMap::default();
    for osd in 0..args.osds {
        let host = format!("host{}", osd * args.hosts / args.osds);
        let entry = OsdEntry { addr: String::new(), host, weight: 0x10000, up: true, is_in: true };
        map.osds.insert(OsdId(osd as u32), entry);
    }
    for rack in 0..args.racks {
        let parent = Some("default".to_owned());
        CrushChange::AddBucket { name: format!("rack{rack}"), kind: BucketType::Rack, parent }.apply(&mut map)?;
    }
    for host in 0..args.hosts {
        let parent = format!("rack{}", host * args.racks / args.hosts);
        CrushChange::Move { name: format!("host{host}"), parent }.apply(&mut map)?;
    }
    Ok(map)
}

/// Every PG's OSDs, and how many PGs were placed per second.
fn place(map: &OsdMap, pool: &Pool) -> Result<(Vec<Vec<OsdId>>, f64)> {
    let started = Instant::now();
    let topology = Topology::from_map(map);
    topology.placer(pool).ok_or_else(|| err::not_found("the pool's rule has no root"))?;
    let placed: Vec<Vec<OsdId>> = (0..pool.pg_num)
        .map(|seed| topology.raw_shards(map, pool, PgId { pool: pool.id, seed }).into_iter().flatten().collect())
        .collect();
    Ok((placed, f64::from(pool.pg_num) / started.elapsed().as_secs_f64().max(1e-9)))
}

/// The most and fewest copies an OSD holds, each over what its CRUSH weight entitles it to
/// (OSDs that are out or weigh nothing are left out).
fn spread(map: &OsdMap, placed: &[Vec<OsdId>]) -> (f64, f64) {
    let mut held: std::collections::BTreeMap<OsdId, usize> = std::collections::BTreeMap::new();
    for osd in placed.iter().flatten() {
        *held.entry(*osd).or_default() += 1;
    }
    // What an OSD is entitled to: its CRUSH weight times its override weight, if in.
    let share = |id: &OsdId, o: &OsdEntry| {
        let reweight = map.osd_reweight.get(id).map_or(1.0, |r| f64::from(*r) / 65536.0);
        if o.is_in { f64::from(o.weight) * reweight } else { 0.0 }
    };
    let total_weight: f64 = map.osds.iter().map(|(id, o)| share(id, o)).sum();
    let copies: usize = placed.iter().map(Vec::len).sum();
    let ratios: Vec<f64> = map
        .osds
        .iter()
        .filter(|(id, o)| share(id, o) > 0.0)
        .map(|(id, o)| held.get(id).copied().unwrap_or(0) as f64 / (copies as f64 * share(id, o) / total_weight))
        .collect();
    (ratios.iter().copied().fold(0.0, f64::max), ratios.iter().copied().fold(f64::MAX, f64::min))
}

/// The share of copies above the OSDs' fair shares (the cluster's OSDs weigh the same):
/// the least a balancer must move.
fn excess(map: &OsdMap, placed: &[Vec<OsdId>]) -> f64 {
    let total: usize = placed.iter().map(Vec::len).sum();
    let n = map.osds.len() as f64;
    let mut held: std::collections::BTreeMap<OsdId, usize> = std::collections::BTreeMap::new();
    for osd in placed.iter().flatten() {
        *held.entry(*osd).or_default() += 1;
    }
    let fair = total as f64 / n;
    held.values().map(|h| (*h as f64 - fair).max(0.0)).sum::<f64>() / total.max(1) as f64
}

/// The share of copies that are on another OSD after the change.
fn moved(before: &[Vec<OsdId>], after: &[Vec<OsdId>]) -> f64 {
    let total: usize = before.iter().map(Vec::len).sum();
    let gone: usize = before.iter().zip(after).map(|(b, a)| b.iter().filter(|o| !a.contains(o)).count()).sum();
    gone as f64 / total.max(1) as f64
}

/// The first OSD, which the changes act on.
fn osd0(map: &mut OsdMap) -> Result<&mut OsdEntry> {
    map.osds.get_mut(&OsdId(0)).ok_or_else(|| err::not_found("the cluster has no osd.0"))
}

/// A change to the cluster, applied to a copy of its map.
type Change = Box<dyn Fn(&mut OsdMap) -> Result<()>>;

/// Runs the changes and prints a row per change.
pub fn run(args: PlacementBenchArgs) -> Result<()> {
    let mut map = cluster(&args)?;
    let rule = CrushRule { root: "default".into(), failure_domain: BucketType::Host, device_class: None };
    CrushChange::CreateRule { name: "by-host".into(), rule }.apply(&mut map)?;
    let pool = Pool {
        id: PoolId(1),
        name: "bench".into(),
        pg_num: args.pgs,
        size: args.size,
        min_size: 1,
        erasure: None,
        crush_rule: "by-host".into(),
    };
    map.pools.insert(pool.id, pool.clone());
    let (before, rate) = place(&map, &pool)?;
    let n = args.osds as f64;
    let per_host = args.osds / args.hosts;
    let mut rows = Vec::new();
    let mut row = |change: &str, after_map: &OsdMap, after: &[Vec<OsdId>], moved: f64, ideal: f64, rate: f64| {
        let (most, fewest) = spread(after_map, after);
        rows.push(vec![
            ("change", Value::from(change)),
            ("moved", round(moved, 5)),
            ("ideal", round(ideal, 5)),
            ("moved_over_ideal", if ideal > 0.0 { round(moved / ideal, 3) } else { Value::Null }),
            ("max_over_fair", round(most, 3)),
            ("min_over_fair", round(fewest, 3)),
            ("pgs_placed_per_sec", round(rate, 0)),
        ]);
    };
    row("none", &map, &before, 0.0, 0.0, rate);

    let changes: Vec<(String, Change, f64)> = vec![
        (
            format!("add a host of {per_host} OSDs to rack0"),
            Box::new(move |map: &mut OsdMap| {
                let first = map.osds.len() as u32;
                let entry = OsdEntry { host: "new-host".into(), ..osd0(map)?.clone() };
                for id in first..first + per_host as u32 {
                    map.osds.insert(OsdId(id), entry.clone());
                }
                CrushChange::Move { name: "new-host".into(), parent: "rack0".into() }.apply(map)
            }),
            per_host as f64 / (n + per_host as f64),
        ),
        (
            "crush reweight osd.0 to 0.5".into(),
            Box::new(|map: &mut OsdMap| {
                osd0(map)?.weight = 0x8000;
                Ok(())
            }),
            1.0 / n - 0.5 / (n - 0.5),
        ),
        (
            "osd reweight osd.0 to 0.5".into(),
            Box::new(|map: &mut OsdMap| CrushChange::Reweight { osd: OsdId(0), reweight: 0x8000 }.apply(map)),
            0.5 / n,
        ),
        (
            "osd.0 out".into(),
            Box::new(|map: &mut OsdMap| {
                osd0(map)?.is_in = false;
                Ok(())
            }),
            1.0 / n,
        ),
        (
            "host0 out (every OSD)".into(),
            Box::new(move |map: &mut OsdMap| {
                map.osds.values_mut().filter(|o| o.host == "host0").for_each(|o| o.is_in = false);
                Ok(())
            }),
            per_host as f64 / n,
        ),
    ];
    for (change, apply, ideal) in &changes {
        let mut after_map = map.clone();
        apply(&mut after_map)?;
        let (after, rate) = place(&after_map, &pool)?;
        row(change, &after_map, &after, moved(&before, &after), *ideal, rate);
    }
    // pg_num doubled and pgp_num following: a child holds half its parent's objects, so
    // compare where it is with where its parent was. Nothing has to move (children could
    // stay with their parents and every OSD would keep its share): the ideal is 0.
    // A pool may have at most MAX_PG_NUM PGs: double one of at most half that.
    let half = Pool { pg_num: pool.pg_num.min(MAX_PG_NUM / 2), ..pool.clone() };
    let doubling = format!("pg_num {} -> {} (pgp_num follows)", half.pg_num, half.pg_num * 2);
    let (doubled, parents) = double(&map, &half, None)?;
    let grown = doubled.pool(half.id)?.clone();
    let (after, rate) = place(&doubled, &grown)?;
    row(&doubling, &doubled, &after, moved(&parents, &after), 0.0, rate);
    let started = Instant::now();
    let upmaps = shoal_placement::balancer::optimize(&map, usize::MAX, args.max_deviation);
    let balanced_in = started.elapsed();
    let mut balanced = map.clone();
    let items: usize = upmaps.values().map(Vec::len).sum();
    balanced.pg_upmap_items.extend(upmaps);
    let (after, rate) = place(&balanced, &pool)?;
    let ideal = excess(&map, &before);
    let change = format!("balancer: {items} upmap items in {:.1} s", balanced_in.as_secs_f64());
    row(&change, &balanced, &after, moved(&before, &after), ideal, rate);
    // The growing changes on the balanced cluster with `norebalance` set (exceptions keep
    // every copy where it was), then the balancer: what it moves, against the same ideal.
    let even = after;
    for (change, apply, ideal) in &changes[..2] {
        let mut after_map = balanced.clone();
        apply(&mut after_map)?;
        let kept = shoal_placement::balancer::keep_placement(&balanced, &after_map);
        after_map.pg_upmap_items.extend(kept);
        after_map.pg_upmap_items.extend(shoal_placement::balancer::optimize(
            &after_map,
            usize::MAX,
            args.max_deviation,
        ));
        let (after, rate) = place(&after_map, &pool)?;
        let change = format!("balanced, norebalance: {change}, then the balancer");
        row(&change, &after_map, &after, moved(&even, &after), *ideal, rate);
    }
    let (doubled, parents) = double(&map, &half, Some(args.max_deviation))?;
    let (after, rate) = place(&doubled, &grown)?;
    let change = format!("balanced, norebalance: {doubling}, then the balancer");
    row(&change, &doubled, &after, moved(&parents, &after), 0.0, rate);
    print_rows(&rows, args.json);
    Ok(())
}

/// `map` with `half` for its pool, doubled: `pg_num`, then `pgp_num` in one step. With a
/// balancer deviation: balanced first, the copies kept in place through the doubling (as
/// under `norebalance`), then balanced again. Also where each PG's parent was before.
fn double(map: &OsdMap, half: &Pool, balance: Option<f64>) -> Result<(OsdMap, Vec<Vec<OsdId>>)> {
    use shoal_placement::balancer::{keep_placement, optimize};
    let mut doubled = map.clone();
    doubled.pools.insert(half.id, half.clone());
    if let Some(deviation) = balance {
        let moves = optimize(&doubled, usize::MAX, deviation);
        doubled.pg_upmap_items.extend(moves);
    }
    let (parents, _) = place(&doubled, half)?;
    doubled.set_pg_num(&half.name, half.pg_num * 2)?;
    let split = doubled.clone();
    doubled.step_pgp_num(half.id, half.pg_num * 2)?;
    if let Some(deviation) = balance {
        let kept = keep_placement(&split, &doubled);
        doubled.pg_upmap_items.extend(kept);
        let moves = optimize(&doubled, usize::MAX, deviation);
        doubled.pg_upmap_items.extend(moves);
    }
    let parents = (0..half.pg_num * 2).map(|seed| parents[ancestor(seed, half.pg_num) as usize].clone()).collect();
    Ok((doubled, parents))
}
