//! `shoal`: one binary for Shoal's daemons and tools.

use clap::{Parser, Subcommand};
use shoal_bench::{ec_bench, grow_bench, guarded_append, placement_bench, recovery_bench, scrub_bench, thrash};
use shoal_node::{
    admin_cmd, auth_cmd, balancer_cmd, config_cmd, debug, gateway_cmd, mon_cmd, rados_cmd, sim_cmd, vstart,
};

/// Shoal: a distributed object store in the lineage of Ceph.
#[derive(Parser, Debug)]
#[command(name = "shoal", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Object-layer commands (pools, objects, xattrs, omap, locks, bench), like `rados`.
    Rados(rados_cmd::RadosArgs),
    /// Cluster health, daemons and pools at a glance.
    Status(admin_cmd::StatusArgs),
    /// Placement groups: `dump`.
    #[command(subcommand)]
    Pg(admin_cmd::PgCommand),
    /// Pools: create, ls, rm.
    Pool(admin_cmd::PoolArgs),
    /// OSDs: run the daemon (`osd run`), `tree`, `df`, `out N`, `in N`.
    #[command(subcommand)]
    Osd(admin_cmd::OsdCommand),
    /// The balancer: `status`, `eval [POOL]`, `optimize` (upmap exceptions that even out
    /// copies per OSD).
    Balancer(balancer_cmd::BalancerArgs),
    /// Send a daemon an administrative command: `tell osd.N perf dump|config show|df`.
    Tell(admin_cmd::TellArgs),
    /// Client entities with keys of their own and caps: `get-or-create`, `get`, `ls`,
    /// `caps`, `rm`, `print-key` (like `ceph auth`).
    Auth(auth_cmd::AuthArgs),
    /// Run the map authority (monitor) daemon, or change the quorum: `mon add|rm|stat`.
    Mon(mon_cmd::MonArgs),
    /// Start (or stop) a local multi-process cluster on loopback.
    Vstart(vstart::VstartArgs),
    /// Benchmarks that reproduce published experiments.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The central configuration: `set`, `get`, `dump`, `rm`; `help` lists every option.
    #[command(subcommand, disable_help_subcommand = true)]
    Config(config_cmd::ConfigCommand),
    /// The embedded default: object layer and S3 gateway in one process.
    Server(gateway_cmd::ServerArgs),
    /// An S3 gateway in front of a cluster.
    Gateway(gateway_cmd::GatewayArgs),
    /// S3 users, keys, buckets and garbage collection.
    Admin(gateway_cmd::AdminArgs),
    /// Run seeds of the deterministic cluster simulator (the real PG protocol under faults).
    Sim(sim_cmd::SimArgs),
    /// Tools for crash tests.
    #[command(subcommand, hide = true)]
    Debug(debug::DebugCommand),
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Appends from 1..32 clients to one object, with and without an epoch guard.
    GuardedAppend(guarded_append::GuardedAppendArgs),
    /// Erasure-code encode and decode speed per code and object size, on one core.
    Ec(ec_bench::EcBenchArgs),
    /// CRUSH placement at scale from maps alone: data moved by each change against the
    /// least possible, and the spread of copies over OSDs.
    Placement(placement_bench::PlacementBenchArgs),
    /// Kills an OSD of a vstart cluster under load and measures degraded running and recovery.
    Recovery(recovery_bench::RecoveryBenchArgs),
    /// S3 load generator (warp-like): put, get, delete or mixed against any endpoint.
    S3(shoal_bench::s3_bench::S3BenchArgs),
    /// Client throughput on a vstart cluster with and without deep scrubs, alternated.
    Scrub(scrub_bench::ScrubBenchArgs),
    /// Grows a vstart cluster under S3 load (pg_num ×4 and a new host, then a merge to
    /// half) and measures what clients see, the time to active+clean and the data moved
    /// against the least.
    Grow(grow_bench::GrowBenchArgs),
    /// Random faults against a vstart cluster under RADOS and S3 load, then checks.
    Thrash(thrash::ThrashArgs),
    /// The Reef article's S3 cycle on a vstart cluster: fill, hybrid new and aged, hosts
    /// lost and recovered.
    Reef(shoal_bench::s3_bench::reef::ReefArgs),
}

impl Command {
    /// Whether the command prints and ends (`shoal … | head` should then end it as it ends
    /// `ls`), rather than serving: daemons keep Rust's ignored SIGPIPE.
    fn prints_and_ends(&self) -> bool {
        match self {
            Command::Rados(_)
            | Command::Status(_)
            | Command::Pg(_)
            | Command::Pool(_)
            | Command::Balancer(_)
            | Command::Tell(_)
            | Command::Auth(_)
            | Command::Config(_)
            | Command::Admin(_)
            | Command::Sim(_) => true,
            Command::Osd(command) => !matches!(command, admin_cmd::OsdCommand::Run(_)),
            Command::Mon(args) => !args.runs_daemon(),
            Command::Vstart(_) | Command::Bench(_) | Command::Server(_) | Command::Gateway(_) | Command::Debug(_) => {
                false
            }
        }
    }
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    if cli.command.prints_and_ends() {
        sigpipe::reset();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Rados(args) => rados_cmd::run(args).await,
            Command::Status(args) => admin_cmd::status(args).await,
            Command::Pool(args) => admin_cmd::pool(args).await,
            Command::Balancer(args) => balancer_cmd::balancer(args).await,
            Command::Pg(command) => admin_cmd::pg(command).await,
            Command::Mon(args) => mon_cmd::mon(args).await,
            Command::Auth(args) => auth_cmd::auth(args).await,
            Command::Osd(command) => admin_cmd::osd(command).await,
            Command::Tell(args) => admin_cmd::tell(args).await,
            Command::Vstart(args) => vstart::run(args),
            Command::Bench(BenchCommand::GuardedAppend(args)) => guarded_append::run(args).await,
            Command::Bench(BenchCommand::Ec(args)) => ec_bench::run(args).await,
            Command::Bench(BenchCommand::Placement(args)) => placement_bench::run(args),
            Command::Bench(BenchCommand::Recovery(args)) => recovery_bench::run(args).await,
            Command::Bench(BenchCommand::Scrub(args)) => scrub_bench::run(args).await,
            Command::Bench(BenchCommand::Thrash(args)) => thrash::run(args).await,
            Command::Bench(BenchCommand::Grow(args)) => grow_bench::run(args).await,
            Command::Bench(BenchCommand::S3(args)) => shoal_bench::s3_bench::run(args).await,
            Command::Bench(BenchCommand::Reef(args)) => shoal_bench::s3_bench::reef::run(args).await,
            Command::Config(command) => config_cmd::run(command).await,
            Command::Debug(command) => debug::run(command).await,
            Command::Sim(args) => sim_cmd::run_sim(args),
            Command::Server(args) => gateway_cmd::run_server(args).await,
            Command::Gateway(args) => gateway_cmd::run_gateway(args).await,
            Command::Admin(args) => gateway_cmd::run_admin(args).await,
        }
    });
    // Daemon threads end with the process.
    runtime.shutdown_background();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
