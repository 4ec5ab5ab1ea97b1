//! `shoal config`: the central configuration database kept by the monitor, like Ceph's
//! `ceph config set|get|dump|rm`. Daemons apply changes as the map reaches them; the
//! `osd_max_*` limits take effect at once, other options at the daemon's next start.

use crate::config::{Config, OPTIONS, takes_effect};
use crate::session::ClusterArgs;
use clap::{Args, Subcommand};
use shoal_types::{Result, err};

/// `shoal config …` subcommands.
#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// List every option with its default.
    Help,
    /// Set an option for WHO (`global`, `osd`, `osd.3`, `client`, …).
    Set(SetArgs),
    /// Show the value WHO gets for KEY, or every option set for WHO.
    Get(GetArgs),
    /// Every option set in the cluster.
    Dump(DumpArgs),
    /// Remove an option set for WHO.
    Rm(RmArgs),
}

/// Arguments of `config set`.
#[derive(Args, Debug)]
pub struct SetArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Whom it applies to.
    who: String,
    /// The option.
    key: String,
    /// The value.
    value: String,
}

/// Arguments of `config get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Whose configuration.
    who: String,
    /// One option (default: every option set for WHO).
    key: Option<String>,
}

/// Arguments of `config dump`.
#[derive(Args, Debug)]
pub struct DumpArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Arguments of `config rm`.
#[derive(Args, Debug)]
pub struct RmArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Whom it applied to.
    who: String,
    /// The option.
    key: String,
}

fn check_key(key: &str) -> Result<()> {
    if OPTIONS.iter().any(|o| o.name == key) {
        Ok(())
    } else {
        Err(err::invalid(format!("unknown option '{key}' (see `shoal config help`)")))
    }
}

/// Runs `shoal config …`.
pub async fn run(command: ConfigCommand) -> Result<()> {
    let cluster = match &command {
        ConfigCommand::Help => {
            for o in OPTIONS {
                println!(
                    "{:<34} {}\n{:<34} default: {}; takes effect {}",
                    o.name,
                    o.help,
                    "",
                    o.default,
                    takes_effect(o.name)
                );
            }
            return Ok(());
        }
        ConfigCommand::Set(a) => &a.cluster,
        ConfigCommand::Get(a) => &a.cluster,
        ConfigCommand::Dump(a) => &a.cluster,
        ConfigCommand::Rm(a) => &a.cluster,
    };
    let session = cluster.open().await?;
    let result = execute(&session.rados, &command).await;
    session.close();
    result
}

async fn execute(rados: &shoal_client::Rados, command: &ConfigCommand) -> Result<()> {
    match command {
        ConfigCommand::Help => {}
        ConfigCommand::Set(a) => {
            Config::check_who(&a.who)?;
            check_key(&a.key)?;
            // The value must be one the option accepts.
            Config::from_settings(&[format!("{}={}", a.key, a.value)])?;
            rados.config_set(&a.who, &a.key, Some(&a.value)).await?;
        }
        ConfigCommand::Rm(a) => {
            Config::check_who(&a.who)?;
            rados.config_set(&a.who, &a.key, None).await?;
        }
        ConfigCommand::Get(a) => {
            Config::check_who(&a.who)?;
            let map = rados.refresh_map().await?;
            let settings = map.config_for(&a.who);
            match &a.key {
                Some(key) => {
                    check_key(key)?;
                    println!("{}", Config::from_settings(&settings)?.get(key));
                }
                None => {
                    let effective = Config::from_settings(&settings)?;
                    let mut keys: Vec<&str> =
                        settings.iter().filter_map(|s| s.split_once('=').map(|(k, _)| k)).collect();
                    keys.sort_unstable();
                    keys.dedup();
                    for key in keys {
                        println!("{key} = {}", effective.get(key));
                    }
                }
            }
        }
        ConfigCommand::Dump(_) => {
            let map = rados.refresh_map().await?;
            println!("{:<16} {:<34} VALUE", "WHO", "OPTION");
            for (who, options) in &map.config {
                for (key, value) in options {
                    println!("{who:<16} {key:<34} {value}");
                }
            }
        }
    }
    Ok(())
}
