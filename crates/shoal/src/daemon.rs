//! `shoal mon` and `shoal osd`: the map authority and an OSD as separate processes that
//! talk over authenticated TCP. A monitor quorum (Raft) replaces the single monitor in the
//! cluster issue; the OSD side stays as it is.

use crate::config::Config;
use crate::embedded::{apply_config, follow_pool_removals, open_store};
use clap::Args;
use shoal_client::Rados;
use shoal_mon::LocalMon;
use shoal_osd::Osd;
use shoal_transport::{Network, TcpNetwork};
use shoal_types::{OsdEntry, OsdId, Result, err};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Largest message a daemon accepts: the largest write plus room for the envelope.
const MAX_MESSAGE_BYTES: usize = 128 << 20;

/// Options every daemon takes.
#[derive(Args, Debug, Clone)]
pub struct DaemonArgs {
    /// Data directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub data: PathBuf,
    /// Address to listen on; port 0 picks a free one (the chosen address is printed).
    #[arg(long, value_name = "HOST:PORT")]
    pub bind: String,
    /// File holding the cluster secret shared by every daemon and client.
    #[arg(long, value_name = "FILE")]
    pub secret_file: PathBuf,
    /// A configuration option, `key=value` (repeatable).
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
}

/// Arguments of `shoal osd`.
#[derive(Args, Debug, Clone)]
pub struct OsdArgs {
    #[command(flatten)]
    daemon: DaemonArgs,
    /// This OSD's id.
    #[arg(long)]
    id: u32,
    /// The monitor's address.
    #[arg(long, value_name = "HOST:PORT")]
    mon: String,
    /// The failure domain this OSD belongs to.
    #[arg(long, default_value = "localhost")]
    host: String,
}

/// Reads a cluster secret file; an empty or unreadable one is an error naming the file.
pub fn read_secret(path: &Path) -> Result<Vec<u8>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| err::invalid(format!("secret file {}: {e}", path.display())))?;
    let secret = text.trim();
    if secret.is_empty() {
        return Err(err::invalid(format!("secret file {} is empty", path.display())));
    }
    Ok(secret.as_bytes().to_vec())
}

/// A TCP network with the secret from `path`.
pub fn network(secret_file: &Path) -> Result<Arc<TcpNetwork>> {
    Ok(Arc::new(TcpNetwork::new(&read_secret(secret_file)?, MAX_MESSAGE_BYTES)))
}

async fn until_terminated() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let sigterm = async {
        match term.as_mut() {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        () = sigterm => {},
    }
}

/// Runs a monitor until SIGTERM or Ctrl-C.
pub async fn run_mon(args: DaemonArgs) -> Result<()> {
    let config = Config::from_settings(&args.options)?;
    let (kv, store) = open_store(&args.data, &config)?;
    let network = network(&args.secret_file)?;
    let listener = network.bind(&args.bind)?;
    let mon = LocalMon::open(store.clone(), None)?;
    println!("mon listening on {}", listener.local_addr());
    tokio::spawn(mon.serve(listener));
    until_terminated().await;
    store.sync()?;
    kv.close();
    Ok(())
}

/// Runs an OSD until SIGTERM or Ctrl-C: it announces itself to the monitor, follows the
/// map, and serves operations.
pub async fn run_osd(args: OsdArgs) -> Result<()> {
    let config = Config::from_settings(&args.daemon.options)?;
    let (kv, store) = open_store(&args.daemon.data, &config)?;
    let network = network(&args.daemon.secret_file)?;
    let listener = network.bind(&args.daemon.bind)?;
    let id = OsdId(args.id);
    let entry = OsdEntry {
        addr: listener.local_addr().to_owned(),
        host: args.host.clone(),
        weight: 0x10000,
        up: true,
        is_in: true,
    };
    let rados = Rados::connect(network.clone(), &args.mon).await?;
    let map = rados.osd_boot(id, entry).await?;
    let (publish, maps) = watch::channel(map.clone());
    let osd = Osd::start(config.osd(id)?, store.clone(), maps.clone());
    let cli = args.daemon.options.clone();
    apply_config(&osd, &map, &cli);
    let (follower, osd_for_config) = (rados.clone(), osd.clone());
    tokio::spawn(async move {
        loop {
            match follower.wait_for_newer_map(Duration::from_secs(30)).await {
                Ok(map) => {
                    // Options first, so that operations under the new map see them.
                    apply_config(&osd_for_config, &map, &cli);
                    publish.send_if_modified(|current| {
                        let newer = map.epoch > current.epoch;
                        if newer {
                            *current = map.clone();
                        }
                        newer
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "lost the monitor; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    });
    tokio::spawn(follow_pool_removals(osd.clone(), maps));
    println!("{id} listening on {}", listener.local_addr());
    tokio::spawn(osd.serve(listener));
    until_terminated().await;
    store.sync()?;
    kv.close();
    Ok(())
}
