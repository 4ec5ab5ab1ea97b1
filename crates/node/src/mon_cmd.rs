//! `shoal mon add|rm|stat`: change the monitor quorum of a running cluster (Ceph's
//! `ceph mon add|remove|stat`). The leader makes a new monitor (started with `shoal mon
//! --join`) a learner, waits until it has caught up with the log, then makes it a voter;
//! both steps are Raft membership changes, so the quorum serves throughout.

use crate::session::ClusterArgs;
use clap::{Args, Subcommand};
use shoal_types::Result;

/// Arguments of `shoal mon`: run a monitor, or change the quorum (`add`, `rm`, `stat`).
#[derive(Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MonArgs {
    #[command(subcommand)]
    command: Option<MonCommand>,
    #[command(flatten)]
    daemon: crate::daemon::MonArgs,
}

impl MonArgs {
    /// Whether this runs a monitor daemon (rather than a `mon add|rm|stat` command).
    pub fn runs_daemon(&self) -> bool {
        self.command.is_none()
    }
}

/// Runs `shoal mon`: the daemon, or a quorum change.
pub async fn mon(args: MonArgs) -> Result<()> {
    match args.command {
        Some(command) => run(command).await,
        None => crate::daemon::run_mon(args.daemon).await,
    }
}

/// `shoal mon …` subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum MonCommand {
    /// Add a monitor to the quorum; start it first with `shoal mon --id ID --join --bind
    /// HOST:PORT`, then list its address in `mon_host` of every configuration file.
    Add {
        /// Which cluster.
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Its id (unused by any member).
        id: u64,
        /// Where it listens.
        addr: String,
    },
    /// Remove a monitor from the quorum (running or dead), e.g. to replace a dead one.
    Rm {
        /// Which cluster.
        #[command(flatten)]
        cluster: ClusterArgs,
        /// Its id.
        id: u64,
    },
    /// The monitors, the quorum and the leader.
    Stat {
        /// Which cluster.
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

/// Runs a `shoal mon` subcommand.
async fn run(command: MonCommand) -> Result<()> {
    let cluster = match &command {
        MonCommand::Add { cluster, .. } | MonCommand::Rm { cluster, .. } | MonCommand::Stat { cluster } => cluster,
    };
    let session = cluster.open().await?;
    let rados = &session.rados;
    let result = async {
        match &command {
            MonCommand::Add { id, addr, .. } => {
                rados.mon_add(*id, addr).await?;
                println!("added mon.{id} at {addr}: list it in mon_host of every configuration file");
            }
            MonCommand::Rm { id, .. } => {
                rados.mon_remove(*id).await?;
                println!("removed mon.{id}: remove it from mon_host of every configuration file");
            }
            MonCommand::Stat { .. } => {}
        }
        let (members, leader) = rados.mon_status().await?;
        let listed: Vec<String> = members.iter().map(|(id, addr)| format!("mon.{id} {addr}")).collect();
        let leader = leader.map_or("none".to_owned(), |l| format!("mon.{l}"));
        println!("{} monitors: {}; leader {leader}", members.len(), listed.join(", "));
        Ok(())
    }
    .await;
    session.close();
    result
}
