//! `shoal auth`: client entities with keys of their own and caps, like Ceph's `ceph auth`
//! (`get-or-create`, `get`, `ls`, `caps`, `rm`, `print-key`).

use crate::session::ClusterArgs;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use clap::{Args, Subcommand};
use shoal_types::auth::{AuthChange, AuthEntity, Caps};
use shoal_types::{OsdMap, Result, err};
use std::path::PathBuf;

/// Arguments of `shoal auth`.
#[derive(Args, Debug, Clone)]
pub struct AuthArgs {
    /// Which cluster (needs the cluster secret or a key with `mon 'allow *'`).
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(subcommand)]
    command: AuthCommand,
}

/// `shoal auth …` subcommands.
#[derive(Subcommand, Debug, Clone)]
pub enum AuthCommand {
    /// Print an entity's keyring, creating the entity with CAPS first if it does not
    /// exist (an existing one keeps its key and caps).
    GetOrCreate {
        /// The entity, `client.ID`.
        entity: String,
        /// Its caps as pairs, e.g. `mon 'allow r' osd 'allow rwx pool=data'`.
        caps: Vec<String>,
        /// Write the keyring to FILE (mode 0600) instead of printing it.
        #[arg(short = 'o', long = "out-file", value_name = "FILE")]
        out_file: Option<PathBuf>,
    },
    /// Print an entity's keyring and caps.
    Get {
        /// The entity.
        entity: String,
    },
    /// Print an entity's key alone.
    PrintKey {
        /// The entity.
        entity: String,
    },
    /// List the entities and their caps (not their keys).
    Ls,
    /// Replace an entity's caps; they apply to its open connections at once.
    Caps {
        /// The entity.
        entity: String,
        /// The new caps as pairs, e.g. `mon 'allow r' osd 'allow r'`.
        caps: Vec<String>,
    },
    /// Remove an entity: its key stops working at once, open connections included.
    Rm {
        /// The entity.
        entity: String,
    },
}

/// Runs `shoal auth`.
pub async fn auth(args: AuthArgs) -> Result<()> {
    let session = args.cluster.open().await?;
    let rados = &session.rados;
    let result = async {
        match args.command {
            AuthCommand::GetOrCreate { entity, caps, out_file } => {
                let caps = Caps::parse(&caps)?;
                let map = rados.auth(AuthChange::GetOrCreate { entity: entity.clone(), caps }).await?;
                let keyring = crate::keyring::format(&entity, &known(&map, &entity)?.key);
                match out_file {
                    Some(path) => {
                        crate::daemon::write_private(&path, keyring.as_bytes())?;
                        println!("wrote {entity}'s keyring to {}", path.display());
                    }
                    None => print!("{keyring}"),
                }
            }
            AuthCommand::Get { entity } => {
                let map = rados.refresh_map().await?;
                let known = known(&map, &entity)?;
                print!("{}", crate::keyring::format(&entity, &known.key));
                println!("\tcaps = {}", known.caps);
            }
            AuthCommand::PrintKey { entity } => {
                println!("{}", STANDARD.encode(&known(&*rados.refresh_map().await?, &entity)?.key));
            }
            AuthCommand::Ls => {
                let map = rados.refresh_map().await?;
                println!("client.admin\n\tkey: the cluster secret\n\tcaps: mon 'allow *' osd 'allow *'");
                for (name, known) in &map.auth {
                    println!("{name}\n\tcaps: {}", known.caps);
                }
            }
            AuthCommand::Caps { entity, caps } => {
                let caps = Caps::parse(&caps)?;
                let map = rados.auth(AuthChange::SetCaps { entity: entity.clone(), caps }).await?;
                println!("updated caps for {entity}: {}", known(&map, &entity)?.caps);
            }
            AuthCommand::Rm { entity } => {
                rados.auth(AuthChange::Remove(entity.clone())).await?;
                println!("removed {entity}");
            }
        }
        Ok(())
    }
    .await;
    session.close();
    result
}

/// An entity of the map's auth table, or an error naming it.
fn known<'a>(map: &'a OsdMap, entity: &str) -> Result<&'a AuthEntity> {
    map.auth.get(entity).ok_or_else(|| err::not_found(format!("no entity {entity} (see `shoal auth ls`)")))
}
