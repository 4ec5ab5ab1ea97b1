//! `shoal mon` and `shoal osd`: monitors (a Raft quorum of 1, 3 or 5) and OSDs as separate
//! processes that talk over authenticated TCP.

use crate::conffile::ConfFile;
use crate::config::Config;
use crate::embedded::{apply_config, follow_pool_removals, open_store};
use clap::Args;
use shoal_client::Rados;
use shoal_mon::raft::RaftAuthority;
use shoal_mon::{Authority, Monitor};
use shoal_osd::Osd;
use shoal_osd::heartbeat::PeerFailure;
use shoal_transport::{Credentials, Network, TcpNetwork};
use shoal_types::{OsdEntry, OsdId, OsdMap, Result, err};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Options every daemon takes: from the command line, or from the cluster configuration
/// file (`-c`; the command line wins).
#[derive(Args, Debug, Clone)]
pub struct DaemonArgs {
    /// The cluster configuration file (see README: deploying on several machines).
    #[arg(short = 'c', long = "conf", value_name = "CONF")]
    pub conf: Option<PathBuf>,
    /// Data directory (created if missing); default from `mon_data` / `osd_data`.
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Address to listen on; port 0 picks a free one (the chosen address is printed).
    #[arg(long, value_name = "HOST:PORT")]
    pub bind: Option<String>,
    /// File holding the cluster secret shared by every daemon and client.
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
    /// A configuration option, `key=value` (repeatable).
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Serve Prometheus metrics at `/metrics` on this port of the daemon's address (0: any
    /// free port; the URL is printed).
    #[arg(long, value_name = "PORT")]
    pub metrics_port: Option<u16>,
}

/// A daemon's settings with the configuration file applied.
struct Resolved {
    conf: ConfFile,
    data: PathBuf,
    secret_file: PathBuf,
    /// Configuration file options, then command-line ones.
    options: Vec<String>,
}

impl DaemonArgs {
    fn resolve(&self, data_key: &str, id: &str) -> Result<Resolved> {
        let conf = match &self.conf {
            Some(path) => ConfFile::read(path)?,
            None => ConfFile::default(),
        };
        let data = match &self.data {
            Some(d) => d.clone(),
            None => conf.path_for(data_key, id).map_err(|e| err::invalid(format!("--data or {}", e.message)))?,
        };
        let secret_file = match &self.secret_file {
            Some(s) => s.clone(),
            None => PathBuf::from(
                conf.require("secret_file").map_err(|e| err::invalid(format!("--secret-file or {}", e.message)))?,
            ),
        };
        let options = conf.options().into_iter().chain(self.options.iter().cloned()).collect();
        Ok(Resolved { conf, data, secret_file, options })
    }
}

/// Arguments of `shoal mon` that run a monitor.
#[derive(Args, Debug, Clone)]
pub struct MonArgs {
    #[command(flatten)]
    daemon: DaemonArgs,
    /// This monitor's id in the quorum.
    #[arg(long, default_value_t = 0)]
    id: u64,
    /// The monitors that form the quorum the first time, `ID=HOST:PORT,…` (this one
    /// included); the lowest id bootstraps it. Defaults to this monitor alone.
    #[arg(long, value_name = "ID=HOST:PORT,…", conflicts_with = "join")]
    initial_members: Option<String>,
    /// Join a running quorum instead of forming one: the monitor waits, empty, until
    /// `shoal mon add ID HOST:PORT` makes it a member (give --bind).
    #[arg(long)]
    join: bool,
}

/// Parses `0=HOST:PORT,1=HOST:PORT`.
fn parse_members(text: &str) -> Result<std::collections::BTreeMap<u64, String>> {
    text.split(',')
        .map(|member| {
            let (id, addr) = member
                .split_once('=')
                .ok_or_else(|| err::invalid(format!("monitor '{member}' is not ID=HOST:PORT")))?;
            let id = id.trim().parse().map_err(|_| err::invalid(format!("monitor id '{id}' is not a number")))?;
            Ok((id, addr.trim().to_owned()))
        })
        .collect()
}

/// Arguments of `shoal osd`.
#[derive(Args, Debug, Clone)]
pub struct OsdArgs {
    #[command(flatten)]
    daemon: DaemonArgs,
    /// This OSD's id.
    #[arg(long)]
    id: u32,
    /// The monitors' addresses; default `mon_host` from the configuration file.
    #[arg(long, value_name = "HOST:PORT[,…]")]
    mon: Option<String>,
    /// The failure domain this OSD belongs to.
    #[arg(long, default_value = "localhost")]
    host: String,
}

/// Reads a cluster secret file: one secret per line, the one to connect with first and
/// then older ones still accepted while the secret is rotated (README: rotating the cluster secret);
/// an empty or unreadable file is an error naming it.
pub fn read_secrets(path: &Path) -> Result<Vec<Vec<u8>>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| err::invalid(format!("secret file {}: {e}", path.display())))?;
    let secrets: Vec<Vec<u8>> =
        text.lines().map(str::trim).filter(|l| !l.is_empty()).map(|l| l.as_bytes().to_vec()).collect();
    if secrets.is_empty() {
        return Err(err::invalid(format!("secret file {} is empty", path.display())));
    }
    Ok(secrets)
}

/// A TCP network of `entity`, one of the cluster's own (`mon.0`, `osd.3`, `client.admin`),
/// with the secrets from `path` and the frame modes of `config`.
pub fn network(secret_file: &Path, entity: &str, config: &Config) -> Result<Arc<TcpNetwork>> {
    let credentials = Credentials { entity: entity.to_owned(), keys: read_secrets(secret_file)? };
    network_of(credentials, config)
}

/// A TCP network authenticating with `credentials`, with the frame modes of `config`.
pub fn network_of(credentials: Credentials, config: &Config) -> Result<Arc<TcpNetwork>> {
    let network = TcpNetwork::new(credentials, shoal_types::msg::MAX_MESSAGE_BYTES);
    network.set_frame_modes(config.frame_modes()?);
    Ok(Arc::new(network))
}

/// Keeps `network` accepting the client entities of the newest map, with their keys: a
/// key made by `auth get-or-create` works at once, a removed one stops opening
/// connections (and the caps check refuses the requests of those already open).
pub fn follow_entity_keys(network: Arc<TcpNetwork>, mut maps: watch::Receiver<Arc<OsdMap>>) {
    tokio::spawn(async move {
        let mut known = None;
        loop {
            let keys: HashMap<String, Vec<u8>> =
                maps.borrow_and_update().auth.iter().map(|(name, e)| (name.clone(), e.key.clone())).collect();
            if known.as_ref() != Some(&keys) {
                network.set_entity_keys(keys.clone());
                known = Some(keys);
            }
            if maps.changed().await.is_err() {
                return;
            }
        }
    });
}

/// Writes a file only its owner may read or write (mode 0600): secrets and keys.
pub fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let failed = |e: std::io::Error| err::io(format!("writing {}: {e}", path.display()));
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path).map_err(failed)?;
    // A file that existed keeps its mode through open: set it.
    file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(failed)?;
    file.write_all(contents).map_err(failed)
}

/// File descriptors kept back from client connections: RocksDB's files, links to the
/// monitors and OSDs, logs.
const RESERVED_FDS: u64 = 1024;

/// Raises this process's open-file limit to its hard limit (as servers do: each client
/// connection is a descriptor) and returns how many connections the rest allows.
pub fn connection_budget() -> usize {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum
        && let Err(e) = setrlimit(Resource::Nofile, Rlimit { current: limit.maximum, maximum: limit.maximum })
    {
        tracing::warn!(error = %e, "cannot raise the open-file limit");
    }
    let current = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    current.saturating_sub(RESERVED_FDS).max(64).min(usize::MAX as u64) as usize
}

/// Waits for SIGTERM or Ctrl-C.
pub async fn until_terminated() {
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
pub async fn run_mon(args: MonArgs) -> Result<()> {
    let MonArgs { daemon: args, id, initial_members, join } = args;
    let resolved = args.resolve("mon_data", &id.to_string())?;
    let config = Config::from_settings(&resolved.options)?;
    // The quorum: --initial-members, else `mon_host` of the file (monitor i is entry i).
    let from_file: Option<std::collections::BTreeMap<u64, String>> = match resolved.conf.get("mon_host") {
        Some(_) => Some(resolved.conf.mon_hosts()?.into_iter().enumerate().map(|(i, a)| (i as u64, a)).collect()),
        None => None,
    };
    let members = match (&initial_members, from_file) {
        (Some(text), _) => Some(parse_members(text)?),
        (None, file) => file,
    };
    if join && args.bind.is_none() {
        return Err(err::invalid("a joining monitor needs --bind HOST:PORT (the address `mon add` names)"));
    }
    let bind = match (&args.bind, &members) {
        (Some(b), _) => b.clone(),
        (None, Some(m)) => m.get(&id).cloned().ok_or_else(|| err::invalid(format!("mon.{id} is not in mon_host")))?,
        (None, None) => return Err(err::invalid("give --bind or a configuration file with mon_host")),
    };
    let (kv, store) = open_store(&resolved.data, &config)?;
    let network = network(&resolved.secret_file, &format!("mon.{id}"), &config)?;
    let listener = network.bind(&bind)?;
    let members = match join {
        true => std::collections::BTreeMap::new(),
        false => members.unwrap_or_else(|| std::collections::BTreeMap::from([(id, listener.local_addr().to_owned())])),
    };
    let authority = RaftAuthority::start(id, store.clone(), network.clone(), &members).await?;
    follow_entity_keys(network.clone(), authority.subscribe());
    let mon = Monitor::new(authority.clone(), network);
    if let Some(port) = args.metrics_port {
        let mut registry = crate::metrics::registry();
        mon.register_metrics(registry.sub_registry_with_prefix("mon"));
        crate::metrics::serve(crate::metrics::host_of(listener.local_addr()), port, registry).await?;
    }
    tokio::spawn(follow_mon_config(mon.clone(), resolved.options.clone()));
    println!("mon.{id} listening on {}", listener.local_addr());
    tokio::spawn(mon.serve(listener));
    until_terminated().await;
    authority.shutdown().await;
    store.sync()?;
    kv.close();
    Ok(())
}

/// Applies the central configuration (`global`, `mon`, with command-line options on top)
/// to the monitor's failure, balancer and autoscaler policies whenever the map changes.
async fn follow_mon_config(mon: Arc<Monitor>, cli: Vec<String>) {
    let mut maps = mon.subscribe();
    loop {
        let map = maps.borrow_and_update().clone();
        let settings: Vec<String> = map.config_for("mon").into_iter().chain(cli.iter().cloned()).collect();
        let policies = Config::from_settings(&settings)
            .and_then(|c| Ok((c.failure_policy()?, c.balancer_policy()?, c.autoscaler_policy()?)));
        match policies {
            Ok((failures, balancer, autoscaler)) => {
                mon.set_failure_policy(failures);
                mon.set_balancer_policy(balancer);
                mon.set_autoscaler_policy(autoscaler);
            }
            Err(e) => tracing::warn!(error = %e, "ignoring the central configuration"),
        }
        if maps.changed().await.is_err() {
            return;
        }
    }
}

/// A daemon's configuration at start: the central settings for `who`, overridden by the
/// `local` ones; the local ones alone if the central ones are unusable (with a warning).
fn startup_config(map: &shoal_types::OsdMap, who: &str, local: Config) -> Config {
    let settings: Vec<String> = map.config_for(who).into_iter().chain(local.settings().iter().cloned()).collect();
    Config::from_settings(&settings).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "ignoring the central configuration");
        local
    })
}

/// How often an OSD reports its PGs' states to the monitor.
const PG_STATS_INTERVAL: Duration = Duration::from_secs(1);

/// Runs an OSD until SIGTERM or Ctrl-C: it announces itself to the monitor, follows the
/// map, pings its peers, reports failures and PG states, and serves operations.
pub async fn run_osd(args: OsdArgs) -> Result<()> {
    let resolved = args.daemon.resolve("osd_data", &args.id.to_string())?;
    let local = Config::from_settings(&resolved.options)?;
    let mon = match &args.mon {
        Some(m) => m.clone(),
        None => {
            resolved.conf.require("mon_host").map_err(|e| err::invalid(format!("--mon or {}", e.message)))?.to_owned()
        }
    };
    // Listen on the machine's public address (any free port) unless told otherwise.
    let bind = match (&args.daemon.bind, resolved.conf.get("public_addr")) {
        (Some(b), _) => b.clone(),
        (None, Some(ip)) => format!("{ip}:0"),
        (None, None) => return Err(err::invalid("give --bind or a configuration file with public_addr")),
    };
    let id = OsdId(args.id);
    let network = network(&resolved.secret_file, &id.to_string(), &local)?;
    // The central configuration first: the store, the shards and the frame modes of the
    // connections to come are set up with it.
    let rados = Rados::connect(network.clone(), &mon).await?;
    let config = startup_config(&*rados.refresh_map().await?, &id.to_string(), local);
    network.set_frame_modes(config.frame_modes()?);
    let (kv, store) = open_store(&resolved.data, &config)?;
    let listener = network.bind(&bind)?;
    let entry = OsdEntry {
        addr: listener.local_addr().to_owned(),
        host: args.host.clone(),
        weight: config.initial_weight(shoal_store::device::file_system_bytes(&resolved.data)?)?,
        up: true,
        is_in: true,
    };
    let map = rados.osd_boot(id, entry.clone()).await?;
    let (publish, maps) = watch::channel(map.clone());
    follow_entity_keys(network.clone(), maps.clone());
    let registry = Arc::new(crate::registry::MonitorClient(rados.clone()));
    let osd = Osd::start(config.osd(id)?, store.clone(), maps.clone(), network.clone(), registry);
    let cli = resolved.options.clone();
    let (heartbeat_options, heartbeat_rx) = watch::channel(config.heartbeat()?);
    apply_config(&osd, &map, &cli);
    let mut failures = shoal_osd::heartbeat::start(id, network.clone(), maps.clone(), heartbeat_rx);
    let reporter = rados.clone();
    tokio::spawn(async move {
        while let Some(failure) = failures.recv().await {
            let reported = match failure {
                PeerFailure::Silent(target) => reporter.report_failure(target, id).await,
                PeerFailure::Refused { peer, addr } => reporter.report_refused(peer, id, addr).await,
            };
            if let Err(e) = reported {
                tracing::warn!(error = %e, "reporting a failed peer");
            }
        }
    });
    let (stats_reporter, stats_osd, stats_store, dir) =
        (rados.clone(), osd.clone(), store.clone(), resolved.data.clone());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(PG_STATS_INTERVAL).await;
            let stats = stats_osd.pg_stats().await;
            let usage = crate::embedded::osd_usage(&dir, &stats_store);
            if let Err(e) = stats_reporter.report_pg_stats(id, stats, usage).await {
                tracing::debug!(error = %e, "reporting PG states");
            }
        }
    });
    let (follower, osd_for_config) = (rados.clone(), osd.clone());
    tokio::spawn(async move {
        loop {
            // From the epoch the shards have, not the client's: the client also adopts the
            // maps its activation and primary_temp requests return, and the shards would
            // not see such a map until the next change (or 30 s).
            let published = publish.borrow().epoch;
            match follower.wait_for_map_newer_than(published, Duration::from_secs(30)).await {
                Ok(map) => {
                    // Options first, so that operations under the new map see them.
                    if let Some(hb) = apply_config(&osd_for_config, &map, &cli).and_then(|c| c.heartbeat().ok()) {
                        heartbeat_options.send_if_modified(|current| std::mem::replace(current, hb) != hb);
                    }
                    if map.osds.get(&id).is_some_and(|o| !o.up) {
                        tracing::warn!("the map marks this OSD down while it runs; booting again");
                        if let Err(e) = follower.osd_boot(id, entry.clone()).await {
                            tracing::warn!(error = %e, "booting again failed");
                        }
                    }
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
    if let Some(port) = args.daemon.metrics_port {
        let mut registry = crate::metrics::registry();
        let labelled = registry.sub_registry_with_label(("daemon".into(), id.to_string().into()));
        osd.register_metrics(labelled.sub_registry_with_prefix("osd"));
        crate::metrics::serve(crate::metrics::host_of(listener.local_addr()), port, registry).await?;
    }
    println!("{id} listening on {}", listener.local_addr());
    tokio::spawn(osd.clone().serve(listener));
    let failure = tokio::select! {
        () = until_terminated() => None,
        reason = osd.failed() => Some(reason),
    };
    osd.stop();
    if let Some(reason) = failure {
        // Peers already hear the failure in their pings; exiting makes it certain. What was
        // acknowledged is in the WAL, replayed at the next start.
        return Err(err::io(format!("{id} stops: {reason}")));
    }
    store.sync()?;
    kv.close();
    Ok(())
}
