//! `shoal sim`: runs seeds of the deterministic cluster simulator and prints, for a
//! failing seed, the invariant it broke and the command that replays it.

use shoal_pg_core::Flaws;
use shoal_sim::{Options, run};
use shoal_types::{Result, err};
use std::ops::Range;
use std::time::{Duration, Instant};

/// Arguments of `shoal sim`.
#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// One seed to run (its outcome is printed in full).
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// A range of seeds, `A..B` (B excluded).
    #[arg(long, value_parser = parse_range)]
    seeds: Option<Range<u64>>,
    /// Switch on a deliberate protocol bug, to see the simulator catch it.
    #[arg(long, value_enum)]
    flaw: Option<Flaw>,
    /// Simulated seconds of the chaos phase.
    #[arg(long, default_value_t = 60)]
    chaos_secs: u64,
    /// Run an erasure-coded pool (2+1, 2+2 or 3+1) instead of a replicated one.
    #[arg(long)]
    erasure: bool,
    /// Reshape only by splitting and merging PGs (`pg_num`, `pgp_num`).
    #[arg(long)]
    pg_num_only: bool,
    /// Stop at the first failing seed.
    #[arg(long)]
    fail_fast: bool,
    /// Print a JSON summary instead of a table.
    #[arg(long)]
    json: bool,
}

/// Deliberate protocol bugs.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Flaw {
    /// Acknowledge a write once the primary has it, before the replicas do.
    ReplyBeforeReplicaCommit,
    /// Split an incomplete copy of a PG into complete children.
    SplitCompletesChildren,
    /// Merge copies forgetting the requests of the source's log.
    MergeForgetsSource,
}

fn parse_range(s: &str) -> std::result::Result<Range<u64>, String> {
    let (a, b) = s.split_once("..").ok_or_else(|| format!("'{s}' is not a range A..B"))?;
    let parse = |x: &str| x.parse::<u64>().map_err(|e| format!("'{x}' in '{s}': {e}"));
    let range = parse(a)?..parse(b)?;
    if range.is_empty() {
        return Err(format!("'{s}' holds no seed"));
    }
    Ok(range)
}

/// Runs the seeds; fails if any broke an invariant.
pub fn run_sim(args: SimArgs) -> Result<()> {
    let flaws = match args.flaw {
        Some(Flaw::ReplyBeforeReplicaCommit) => Flaws { reply_before_replica_commit: true, ..Flaws::default() },
        Some(Flaw::SplitCompletesChildren) => Flaws { split_completes_children: true, ..Flaws::default() },
        Some(Flaw::MergeForgetsSource) => Flaws { merge_forgets_source: true, ..Flaws::default() },
        None => Flaws::default(),
    };
    let options = Options {
        flaws,
        chaos: Duration::from_secs(args.chaos_secs),
        erasure: args.erasure,
        pg_num_only: args.pg_num_only,
        ..Options::default()
    };
    let seeds = match (args.seed, args.seeds) {
        (Some(seed), _) => seed..seed + 1,
        (None, Some(range)) => range,
        (None, None) => 0..100,
    };
    let started = Instant::now();
    let (mut failed, mut events, mut ops, mut faults, mut simulated) = (Vec::new(), 0u64, 0u64, 0u64, 0f64);
    let count = seeds.end - seeds.start;
    for seed in seeds {
        let outcome = run(seed, &options);
        (events, ops, faults) = (events + outcome.events, ops + outcome.ops, faults + outcome.faults);
        simulated += outcome.elapsed.as_secs_f64();
        if count == 1 && !args.json {
            println!("{outcome}");
        }
        if let Some(violation) = &outcome.violation {
            if !args.json {
                println!(
                    "FAIL {outcome}\n     {violation}\n     replay: shoal sim --seed {seed}{}{}{}",
                    flaw_flag(args.flaw),
                    if args.erasure { " --erasure" } else { "" },
                    if args.pg_num_only { " --pg-num-only" } else { "" }
                );
            }
            failed.push(seed);
            if args.fail_fast {
                break;
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
    if args.json {
        let summary = serde_json::json!({
            "seeds": count, "failed": failed, "events": events, "ops": ops, "faults": faults,
            "simulated_s": simulated, "wall_s": wall,
        });
        println!("{summary}");
    } else {
        println!("| seeds | failed | events | client ops | faults | simulated | wall | seeds/s |");
        println!("|---|---|---|---|---|---|---|---|");
        println!(
            "| {count} | {} | {events} | {ops} | {faults} | {:.0} s | {wall:.1} s | {:.1} |",
            failed.len(),
            simulated,
            count as f64 / wall.max(1e-9)
        );
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(err::invalid(format!("{} of {count} seeds broke an invariant: {failed:?}", failed.len())))
    }
}

fn flaw_flag(flaw: Option<Flaw>) -> &'static str {
    match flaw {
        Some(Flaw::ReplyBeforeReplicaCommit) => " --flaw reply-before-replica-commit",
        Some(Flaw::SplitCompletesChildren) => " --flaw split-completes-children",
        Some(Flaw::MergeForgetsSource) => " --flaw merge-forgets-source",
        None => "",
    }
}
