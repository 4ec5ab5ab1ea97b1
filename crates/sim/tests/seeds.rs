//! Seeds of the simulator: a seed replays to the same trace, and a deliberately broken
//! protocol is caught on seeds the real one passes.
//!
//! The sweep over hundreds of seeds with the real protocol is not here yet: it fails today
//! (lost acknowledged writes after all members of the last active interval went away; see
//! docs/ARCHITECTURE.md, "What the simulator found"). `shoal sim --seeds 0..300` runs it.

use shoal_pg_core::Flaws;
use shoal_sim::{Options, run};

#[test]
fn a_seed_replays_to_the_same_trace() {
    let options = Options::default();
    let (a, b) = (run(7, &options), run(7, &options));
    assert_eq!((a.trace, a.events, a.ops), (b.trace, b.events, b.ops));
    assert!(a.ops > 0 && a.faults > 0, "{a}: the run did nothing");
    assert_ne!(a.trace, run(8, &options).trace, "another seed gives another trace");
}

#[test]
fn replying_before_the_replicas_commit_is_caught_within_a_few_hundred_seeds() {
    let broken = Options { flaws: Flaws { reply_before_replica_commit: true }, ..Options::default() };
    let real = Options::default();
    // A seed that breaks an invariant with the flaw and keeps them all without it.
    let caught = (0..500u64).find_map(|seed| {
        let outcome = run(seed, &broken);
        let violation = outcome.violation.clone()?;
        run(seed, &real).violation.is_none().then_some((outcome, violation))
    });
    let (outcome, violation) = caught.expect("no seed of 500 caught writes acknowledged before the replicas had them");
    assert_eq!(violation.invariant, "acknowledged_writes", "{outcome}: {violation}");
    println!(
        "caught: {outcome}\n{violation}\nreplay: shoal sim --seed {} --flaw reply-before-replica-commit",
        outcome.seed
    );
}
