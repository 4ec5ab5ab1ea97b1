//! `shoal balancer status|eval|optimize|on|off` and `shoal osd pg-upmap-items|rm-pg-upmap-items`:
//! per-PG exceptions to placement, set by hand or by the balancer
//! ([`shoal_placement::balancer`]), which evens out how many copies each OSD holds.

use crate::session::ClusterArgs;
use clap::{Args, Subcommand};
use shoal_types::{OsdId, OsdMap, PgId, Result, err};

/// Arguments of `shoal balancer …`.
#[derive(Args, Debug)]
pub struct BalancerArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(subcommand)]
    command: BalancerCommand,
}

/// `shoal balancer …` subcommands.
#[derive(Subcommand, Debug)]
pub enum BalancerCommand {
    /// Whether the leader monitor runs the balancer, the upmap exceptions in the map and
    /// the cluster's score.
    Status,
    /// Let the leader monitor run the balancer every `mon_balancer_sleep_interval` while
    /// every PG is active+clean, `mon_balancer_max_optimizations` moves at a time.
    On,
    /// Stop the leader monitor's balancer (exceptions already set stay).
    Off,
    /// Each pool's spread (or one pool's): the fullest and emptiest OSD's copies over its
    /// fair share, and the score (the fullest OSD's excess over fair; 0 is even).
    Eval {
        /// Only this pool.
        pool: Option<String>,
    },
    /// Computes upmap exceptions that move copies from OSDs over their fair share to
    /// OSDs under it (within each rule's failure domains), and applies them.
    Optimize {
        /// Copies moved at most (each moves one PG's copy: data is copied).
        #[arg(long, default_value_t = 100)]
        max_changes: usize,
        /// Copies an OSD may hold above its fair share before copies move off it.
        #[arg(long, default_value_t = 1.0)]
        max_deviation: f64,
    },
}

/// Runs `shoal balancer …`.
pub async fn balancer(args: BalancerArgs) -> Result<()> {
    let session = args.cluster.open().await?;
    let rados = &session.rados;
    let result = async {
        let map = rados.refresh_map().await?;
        match args.command {
            BalancerCommand::Status => {
                let items: usize = map.pg_upmap_items.values().map(Vec::len).sum();
                let policy = crate::config::Config::from_settings(&map.config_for("mon"))?.balancer_policy()?;
                match policy.active {
                    true => println!(
                        "active: the leader monitor moves up to {} copies every {:?} while every PG is active+clean \
                         (max deviation {} copies)",
                        policy.max_changes, policy.interval, policy.max_deviation
                    ),
                    false => println!("inactive: `balancer optimize` by hand, or `balancer on`"),
                }
                let pending = shoal_placement::balancer::optimize(&map, usize::MAX, policy.max_deviation).len();
                println!("PGs the balancer would still change: {pending}");
                println!("upmap exceptions: {items} in {} PGs", map.pg_upmap_items.len());
                println!("score: {:.4}", score(&map, None)?);
            }
            BalancerCommand::On | BalancerCommand::Off => {
                let on = matches!(args.command, BalancerCommand::On);
                rados.config_set("mon", "mon_balancer_active", Some(if on { "true" } else { "false" })).await?;
                println!("the balancer is {}", if on { "on" } else { "off" });
            }
            BalancerCommand::Eval { pool } => {
                println!("score: {:.4}", score(&map, pool.as_deref())?);
            }
            BalancerCommand::Optimize { max_changes, max_deviation } => {
                if !max_deviation.is_finite() || max_deviation < 0.0 {
                    return Err(err::invalid("--max-deviation is a number of copies, 0 or more"));
                }
                let before = score(&map, None)?;
                let changes = shoal_placement::balancer::optimize(&map, max_changes, max_deviation);
                if changes.is_empty() {
                    println!("nothing to do: every OSD is within {max_deviation} copies of its fair share or cannot give any (score {before:.4})");
                    return Ok(());
                }
                let pgs = changes.len();
                let map = rados.pg_upmap_items(changes.into_iter().collect()).await?;
                println!("changed the upmap exceptions of {pgs} PGs (map epoch {})", map.epoch);
                println!("score: {before:.4} -> {:.4}", score(&map, None)?);
            }
        }
        Ok(())
    }
    .await;
    session.close();
    result
}

/// Prints each pool's spread (or `only` pool's) and returns the worst score.
fn score(map: &OsdMap, only: Option<&str>) -> Result<f64> {
    if let Some(name) = only {
        map.pool_named(name)?;
    }
    let mut worst: f64 = 0.0;
    for pool in map.pools.values().filter(|p| only.is_none_or(|n| n == p.name)) {
        let Some(spread) = shoal_placement::balancer::spread(map, pool) else {
            println!("pool '{}': its rule '{}' places nothing", pool.name, pool.crush_rule);
            continue;
        };
        let score = (spread.max_over_fair - 1.0).max(0.0);
        worst = worst.max(score);
        println!(
            "pool '{}': copies per OSD over fair share max {:.3} min {:.3}, stddev {:.1} copies, score {score:.4}",
            pool.name, spread.max_over_fair, spread.min_over_fair, spread.stddev
        );
    }
    Ok(worst)
}

/// Parses `osd pg-upmap-items PG FROM TO [FROM TO …]`'s OSD pairs.
pub fn parse_items(pairs: &[u32]) -> Result<Vec<(OsdId, OsdId)>> {
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(err::invalid("pg-upmap-items takes pairs of OSD ids: FROM TO [FROM TO …]"));
    }
    Ok(pairs.chunks(2).map(|p| (OsdId(p[0]), OsdId(p[1]))).collect())
}

/// Sets (or, with no items, removes) one PG's upmap exceptions.
pub async fn set_items(cluster: &ClusterArgs, pg: &str, items: Vec<(OsdId, OsdId)>) -> Result<()> {
    let pg: PgId = pg.parse()?;
    let session = cluster.open().await?;
    let result = session.rados.pg_upmap_items(vec![(pg, items.clone())]).await;
    session.close();
    let map = result?;
    match items.is_empty() {
        true => println!("removed the upmap exceptions of pg {pg} (map epoch {})", map.epoch),
        false => {
            let list: Vec<String> = items.iter().map(|(from, to)| format!("{from} -> {to}")).collect();
            println!("set pg {pg} upmap items {} (map epoch {})", list.join(", "), map.epoch);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upmap_items_come_in_pairs() {
        assert_eq!(parse_items(&[3, 5, 4, 6]).unwrap(), vec![(OsdId(3), OsdId(5)), (OsdId(4), OsdId(6))]);
        assert!(parse_items(&[3, 5, 4]).unwrap_err().message.contains("pairs"));
        assert!(parse_items(&[]).is_err());
    }
}
