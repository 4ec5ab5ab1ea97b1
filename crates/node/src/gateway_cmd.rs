//! `shoal server` (embedded object layer + S3 gateway in one process), `shoal gateway`
//! (an S3 gateway in front of a cluster) and `shoal admin` (users, buckets, GC).

use crate::config::Config;
use crate::embedded::Embedded;
use crate::session::ClusterArgs;
use clap::{Args, Subcommand, ValueEnum};
use shoal_client::Rados;
use shoal_gateway::Gateway;
use shoal_gateway::meta::{AccessKey, Subuser, SubuserAccess, SwiftKey, UserInfo, generate_key, validate_subuser};
use shoal_notify::topic::Topic;
use shoal_types::{Result, err};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the S3 endpoint listens.
#[derive(Args, Debug, Clone)]
pub struct ListenArgs {
    /// TCP port of the S3 endpoint.
    #[arg(long, default_value_t = 7480)]
    pub port: u16,
    /// Address to bind.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind: String,
    /// Serve Prometheus metrics at `/metrics` on this port of the same address (0: any
    /// free port); overrides `rgw_metrics_port`.
    #[arg(long, value_name = "PORT")]
    pub metrics_port: Option<u16>,
    /// Also serve S3 over HTTPS on this port (needs a certificate and key); overrides
    /// `rgw_tls_port`.
    #[arg(long, value_name = "PORT")]
    pub tls_port: Option<u16>,
    /// The HTTPS certificate chain, PEM, leaf first (read again when it changes);
    /// overrides `rgw_tls_cert`.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The HTTPS private key, PEM; overrides `rgw_tls_key`.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
}

/// The HTTPS endpoint to serve, if any: port, certificate and key from the flags, else the options.
fn tls_endpoint(
    listen: &ListenArgs,
    config: &shoal_gateway::config::GatewayConfig,
) -> Result<Option<(u16, PathBuf, PathBuf)>> {
    let port = listen.tls_port.or((config.tls_port > 0).then_some(config.tls_port));
    let cert = listen.tls_cert.clone().or_else(|| config.tls_cert.clone());
    let key = listen.tls_key.clone().or_else(|| config.tls_key.clone());
    match (port, cert, key) {
        (None, None, None) => Ok(None),
        (Some(port), Some(cert), Some(key)) => Ok(Some((port, cert, key))),
        (None, _, _) => Err(err::invalid("a TLS certificate and key were given without --tls-port (or rgw_tls_port)")),
        (Some(_), _, _) => {
            Err(err::invalid("--tls-port needs both --tls-cert and --tls-key (or rgw_tls_cert and rgw_tls_key)"))
        }
    }
}

/// `shoal server`.
#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Data directory (created if missing; kept across restarts).
    #[arg(long, value_name = "DIR", default_value = "./shoal-data")]
    pub data: PathBuf,
    /// Where the S3 endpoint listens.
    #[command(flatten)]
    pub listen: ListenArgs,
    /// A configuration option, `key=value` (repeatable; see `shoal config help`).
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Keep object data in an erasure-coded pool of K data and M parity shards, over K+M
    /// OSDs inside this process (one shard per OSD). Applies when the data pool is created.
    #[arg(long, value_name = "K+M")]
    pub ec: Option<EcShape>,
}

/// An erasure code's shape, `K+M`: data shards and parity shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcShape {
    /// Data shards.
    pub k: u32,
    /// Parity shards.
    pub m: u32,
}

impl std::str::FromStr for EcShape {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        let parse = |part: Option<&str>| part.and_then(|p| p.trim().parse::<u32>().ok());
        let mut parts = text.split('+');
        match (parse(parts.next()), parse(parts.next()), parts.next()) {
            (Some(k), Some(m), None) => Ok(EcShape { k, m }),
            _ => Err(format!("'{text}' is not K+M (data shards + parity shards, as in 4+2)")),
        }
    }
}

impl EcShape {
    /// The profile's name, `rgw-K-M`.
    pub fn profile_name(&self) -> String {
        format!("rgw-{}-{}", self.k, self.m)
    }

    /// The profile's settings, with shards on distinct `failure_domain`s (`host` or `osd`).
    pub fn profile_settings(&self, failure_domain: &str) -> Vec<String> {
        vec![format!("k={}", self.k), format!("m={}", self.m), format!("crush-failure-domain={failure_domain}")]
    }
}

/// `shoal gateway`.
#[derive(Args, Debug)]
pub struct GatewayArgs {
    /// The cluster to serve.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Where the S3 endpoint listens.
    #[command(flatten)]
    pub listen: ListenArgs,
    /// The gateway's name: it takes central options set for `client.NAME` (and `client`, `global`).
    #[arg(long, default_value = "rgw")]
    pub name: String,
}

/// The admin user's keys, as `shoal server` keeps them in its data directory.
#[derive(serde::Serialize, serde::Deserialize)]
struct AdminKeys {
    user: String,
    access_key: String,
    secret_key: String,
}

async fn connect_handles(
    first: Rados,
    network: Arc<dyn shoal_transport::Network>,
    mon: &str,
    n: usize,
) -> Result<Vec<Rados>> {
    let mut handles = vec![first];
    while handles.len() < n {
        handles.push(Rados::connect(network.clone(), mon).await?);
    }
    Ok(handles)
}

/// Serves S3 on `listen`, and the metrics of `registry` plus the gateway's when a metrics
/// port is set.
async fn serve(
    gateway: &Gateway,
    listen: &ListenArgs,
    mut registry: prometheus_client::registry::Registry,
) -> Result<()> {
    let addr = format!("{}:{}", listen.bind, listen.port);
    let listener =
        tokio::net::TcpListener::bind(&addr).await.map_err(|e| err::io(format!("cannot listen on {addr}: {e}")))?;
    let tls = match tls_endpoint(listen, &gateway.config)? {
        Some((port, cert, key)) => {
            let certificates = shoal_gateway::tls::Certificates::load(&cert, &key)
                .map_err(|e| err::invalid(format!("cannot serve HTTPS: {e}")))?;
            let acceptor = certificates.acceptor().map_err(|e| err::invalid(format!("cannot serve HTTPS: {e}")))?;
            tokio::spawn(certificates.watch());
            let tls_addr = format!("{}:{port}", listen.bind);
            let listener = tokio::net::TcpListener::bind(&tls_addr)
                .await
                .map_err(|e| err::io(format!("cannot listen on {tls_addr}: {e}")))?;
            Some((listener, acceptor, tls_addr))
        }
        None => None,
    };
    let front = gateway.start();
    // The address bound, port included when `--port 0` let the system choose it.
    let bound = listener.local_addr().map_or(addr, |a| a.to_string());
    eprintln!("S3 endpoint: http://{bound}");
    let https = match tls {
        Some((listener, acceptor, tls_addr)) => {
            eprintln!("S3 endpoint: https://{tls_addr}");
            futures::future::Either::Left(front.clone().serve(listener, Some(acceptor)))
        }
        None => futures::future::Either::Right(std::future::pending()),
    };
    let metrics_port = listen.metrics_port.or((gateway.config.metrics_port > 0).then_some(gateway.config.metrics_port));
    if let Some(port) = metrics_port {
        gateway.register_metrics(front.clone(), &mut registry);
        crate::metrics::serve(&listen.bind, port, registry).await?;
    }
    let result = tokio::select! {
        result = front.serve(listener, None) => result.map_err(|e| err::io(format!("accepting connections: {e}"))),
        result = https => result.map_err(|e| err::io(format!("accepting HTTPS connections: {e}"))),
        () = crate::daemon::until_terminated() => Ok(()),
    };
    // Hand the notification queues this gateway owns to the others at once.
    gateway.manager.shutdown().await;
    result
}

/// Runs `shoal server` until SIGTERM or Ctrl-C.
pub async fn run_server(args: ServerArgs) -> Result<()> {
    let config = Config::from_settings(&args.options)?;
    let dir = &args.data;
    std::fs::create_dir_all(dir).map_err(|e| err::io(format!("creating {}: {e}", dir.display())))?;
    let secret_path = dir.join("secret");
    if !secret_path.exists() {
        let secret: [u8; 24] = rand::random();
        let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        crate::daemon::write_private(&secret_path, (hex + "\n").as_bytes())?;
    }
    // Other processes (the CLI) reach the object layer over TCP; the gateway in this one
    // reaches it without a socket.
    let tcp = crate::daemon::network(&secret_path, "client.admin", &config)?;
    let network: Arc<dyn shoal_transport::Network> = Arc::new(shoal_transport::LocalFirst::new(tcp.clone()));
    let osds = args.ec.map_or(1, |ec| ec.k + ec.m);
    let local = Embedded::open_on(dir, &config, network.clone(), "127.0.0.1:0", "127.0.0.1:0", osds).await?;
    crate::daemon::follow_entity_keys(tcp, local.maps());
    let conf = format!("mon_host = {}\nsecret_file = {}\n", local.mon_addr(), secret_path.to_string_lossy());
    std::fs::write(dir.join("shoal.conf"), conf).map_err(|e| err::io(format!("writing shoal.conf: {e}")))?;
    let mut central = local.rados.map().config_for("client.rgw");
    central.extend(args.options.iter().cloned());
    let config = Config::from_settings(&central)?;
    let mut gateway_config = config.gateway()?;
    // One OSD: one replica. Several (for erasure coding): replicated pools as a cluster's.
    gateway_config.pool_size = if local.rados.map().osds.len() == 1 { 1 } else { 0 };
    if let Some(ec) = args.ec {
        let profile = shoal_types::erasure::ErasureProfile::parse(&ec.profile_settings("osd"))?;
        local.rados.erasure_profile_set(&ec.profile_name(), profile, false).await?;
        gateway_config.data_pool_erasure_profile = Some(ec.profile_name());
    }
    if gateway_config.crypt_key_file.is_none() {
        gateway_config.crypt_key_file = Some(sse_key_file(dir, &gateway_config.crypt_sse_s3_key_id)?);
    }
    gateway_config.max_connections = gateway_config.max_connections.min(crate::daemon::connection_budget());
    let handles =
        connect_handles(local.rados.clone(), network, local.mon_addr(), gateway_config.num_rados_handles).await?;
    for handle in &handles {
        handle.set_op_timeout(config.op_timeout()?);
    }
    let gateway = Gateway::open(handles, gateway_config).await?;
    let keys = admin_keys(&gateway, dir).await?;
    // The secret key stays out of the console and its logs: it is in the 0600 key file.
    println!(
        "access key: {}\nsecret key: in {} (readable by its owner only)",
        keys.access_key,
        dir.join("admin.json").display()
    );
    println!("admin: shoal admin -c {} user list", dir.join("shoal.conf").display());
    let mut registry = crate::metrics::registry();
    local.register_metrics(&mut registry);
    let result = tokio::select! {
        result = serve(&gateway, &args.listen, registry) => result,
        reason = local.failed() => return Err(err::io(format!("an embedded OSD stops the server: {reason}"))),
    };
    local.close();
    result
}

/// `DIR/sse.keys`, the master key file of SSE-S3 and SSE-KMS of a server given none,
/// created (0600) with a fresh key `id` on first start.
fn sse_key_file(dir: &Path, id: &str) -> Result<std::path::PathBuf> {
    let path = dir.join("sse.keys");
    if !path.exists() {
        let text = format!(
            "# SSE-S3 and SSE-KMS master keys, id=base64 of 32 bytes. Objects are unreadable without\n\
             # this file: keep a copy away from the data.\n{}",
            shoal_gateway::crypt::Keyring::generate(id)
        );
        crate::daemon::write_private(&path, text.as_bytes())?;
    }
    Ok(path)
}

/// The admin user's keys: read from `DIR/admin.json`, or created with the user on first start.
async fn admin_keys(gateway: &Gateway, dir: &Path) -> Result<AdminKeys> {
    let path = dir.join("admin.json");
    if let Ok(text) = std::fs::read_to_string(&path) {
        return serde_json::from_str(&text).map_err(|e| err::io(format!("{}: {e}", path.display())));
    }
    let key = generate_key();
    let user = UserInfo::new("admin".into(), "Administrator".into(), String::new(), key.clone());
    gateway.s3.meta.create_user(&user).await?;
    let keys = AdminKeys { user: user.uid, access_key: key.access_key, secret_key: key.secret_key };
    let text = serde_json::to_string_pretty(&keys).map_err(|e| err::io(e.to_string()))?;
    crate::daemon::write_private(&path, text.as_bytes())?;
    Ok(keys)
}

/// Runs `shoal gateway` until SIGTERM or Ctrl-C.
pub async fn run_gateway(args: GatewayArgs) -> Result<()> {
    if args.cluster.data.is_some() {
        return Err(err::invalid("shoal gateway serves a cluster (-c CONF); with a local --data DIR use shoal server"));
    }
    let session = args.cluster.open().await?;
    let config = args.cluster.config_for(&session.rados, &format!("client.{}", args.name))?;
    let mut gateway_config = config.gateway()?;
    gateway_config.max_connections = gateway_config.max_connections.min(crate::daemon::connection_budget());
    let mut handles = vec![session.rados.clone()];
    for _ in 1..gateway_config.num_rados_handles {
        handles.push(args.cluster.open().await?.rados);
    }
    for handle in &handles {
        handle.set_op_timeout(config.op_timeout()?);
    }
    let gateway = Gateway::open(handles, gateway_config).await?;
    let result = serve(&gateway, &args.listen, crate::metrics::registry()).await;
    session.close();
    result
}

/// `shoal admin`.
#[derive(Args, Debug)]
pub struct AdminArgs {
    /// The cluster to manage.
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// What `shoal admin` manages.
#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// S3 users and their keys.
    #[command(subcommand)]
    User(UserCommand),
    /// S3 access keys and Swift keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Subusers: Swift identities of a user.
    #[command(subcommand)]
    Subuser(SubuserCommand),
    /// Buckets.
    #[command(subcommand)]
    Bucket(BucketCommand),
    /// Garbage collection of replaced object data.
    #[command(subcommand)]
    Gc(GcCommand),
    /// Bucket lifecycle.
    #[command(subcommand)]
    Lc(LcCommand),
    /// SNS topics and their persistent queues.
    #[command(subcommand)]
    Topic(TopicCommand),
    /// Bucket notification configurations.
    #[command(subcommand)]
    Notification(NotificationCommand),
    /// Lists the gateway's pools, creating missing ones (every admin command does): run it
    /// as the cluster's administrator before starting gateways whose keys may not create
    /// pools (`mon 'allow r'`).
    Pools,
}

/// Topic commands.
#[derive(Subcommand, Debug)]
pub enum TopicCommand {
    /// Lists topics as JSON (with each one's subscribed buckets).
    List,
    /// Shows a topic's record as JSON (passwords left out).
    Get {
        /// Topic name.
        #[arg(long)]
        topic: String,
    },
    /// Queue totals summed over the shards: reservations, entries, bytes, oldest age.
    Stats {
        /// Topic name.
        #[arg(long)]
        topic: String,
    },
    /// The queued events, as JSON.
    Dump {
        /// Topic name.
        #[arg(long)]
        topic: String,
    },
    /// Removes a topic and its queues.
    Rm {
        /// Topic name.
        #[arg(long)]
        topic: String,
    },
    /// Spreads a persistent topic over a new number of shards, keeping per-key order.
    Reshard {
        /// Topic name.
        #[arg(long)]
        topic: String,
        /// New shard count.
        #[arg(long)]
        shards: u32,
    },
}

/// Notification configuration commands.
#[derive(Subcommand, Debug)]
pub enum NotificationCommand {
    /// A bucket's configurations as JSON.
    List {
        /// Bucket name.
        #[arg(long)]
        bucket: String,
    },
    /// One configuration as JSON.
    Get {
        /// Bucket name.
        #[arg(long)]
        bucket: String,
        /// Configuration Id.
        #[arg(long)]
        notification_id: String,
    },
    /// Removes one configuration, or all without --notification-id.
    Rm {
        /// Bucket name.
        #[arg(long)]
        bucket: String,
        /// Configuration Id.
        #[arg(long)]
        notification_id: Option<String>,
    },
}

/// User commands.
#[derive(Subcommand, Debug)]
pub enum UserCommand {
    /// Creates a user (keys generated unless given).
    Create {
        /// User id.
        #[arg(long)]
        uid: String,
        /// Display name.
        #[arg(long)]
        display_name: String,
        /// E-mail address.
        #[arg(long, default_value = "")]
        email: String,
        /// Access key to use instead of a generated one.
        #[arg(long, requires = "secret_key")]
        access_key: Option<String>,
        /// Secret key to use instead of a generated one (also `--secret`, as radosgw-admin).
        #[arg(long, alias = "secret", requires = "access_key")]
        secret_key: Option<String>,
    },
    /// Shows a user as JSON.
    Info {
        /// User id.
        #[arg(long)]
        uid: String,
    },
    /// Lists user ids.
    List,
    /// Removes a user (it must own no buckets).
    Rm {
        /// User id.
        #[arg(long)]
        uid: String,
    },
    /// Suspends a user: its requests are refused.
    Suspend {
        /// User id.
        #[arg(long)]
        uid: String,
    },
    /// Lifts a suspension.
    Enable {
        /// User id.
        #[arg(long)]
        uid: String,
    },
}

/// Which API a key is for.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// An S3 access key pair of a user.
    S3,
    /// A Swift key of a subuser (`X-Auth-Key`).
    Swift,
}

/// Key commands.
#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Adds an S3 key pair to a user, or a Swift key to a subuser (generated unless given;
    /// a subuser's Swift key replaces the one it had).
    Create {
        /// User id (an S3 key).
        #[arg(long, required_unless_present = "subuser", conflicts_with = "subuser")]
        uid: Option<String>,
        /// Subuser, `<uid>:<name>` (a Swift key).
        #[arg(long)]
        subuser: Option<String>,
        /// S3 keys belong to users, Swift keys to subusers.
        #[arg(long, value_enum, default_value = "s3")]
        key_type: KeyType,
        /// Access key (S3).
        #[arg(long, requires = "secret_key")]
        access_key: Option<String>,
        /// Secret key (also `--secret`, as radosgw-admin).
        #[arg(long, alias = "secret")]
        secret_key: Option<String>,
    },
    /// Removes a user's S3 key pair, or a subuser's Swift key.
    Rm {
        /// User id (an S3 key).
        #[arg(long, required_unless_present = "subuser", conflicts_with = "subuser", requires = "access_key")]
        uid: Option<String>,
        /// Subuser, `<uid>:<name>` (its Swift key).
        #[arg(long)]
        subuser: Option<String>,
        /// The access key to remove.
        #[arg(long)]
        access_key: Option<String>,
    },
}

/// Subuser commands.
#[derive(Subcommand, Debug)]
pub enum SubuserCommand {
    /// Adds a subuser (or changes its access).
    Create {
        /// The parent user.
        #[arg(long)]
        uid: String,
        /// `<uid>:<name>`.
        #[arg(long)]
        subuser: String,
        /// `read`, `write`, `readwrite` or `full`.
        #[arg(long, default_value = "full")]
        access: SubuserAccess,
    },
    /// Removes a subuser and its Swift key.
    Rm {
        /// `<uid>:<name>`.
        #[arg(long)]
        subuser: String,
    },
}

/// Bucket commands.
#[derive(Subcommand, Debug)]
pub enum BucketCommand {
    /// Lists buckets (all, or one user's).
    List {
        /// Only this user's buckets.
        #[arg(long)]
        uid: Option<String>,
    },
    /// Shows a bucket's record and index totals as JSON.
    Stats {
        /// Bucket name.
        #[arg(long)]
        bucket: String,
    },
    /// Removes a bucket; with --purge-objects, its objects first.
    Rm {
        /// Bucket name.
        #[arg(long)]
        bucket: String,
        /// Delete the bucket's objects too.
        #[arg(long)]
        purge_objects: bool,
    },
}

/// Lifecycle commands.
#[derive(Subcommand, Debug)]
pub enum LcCommand {
    /// Each bucket with a lifecycle configuration: its last pass (state, times, counts).
    List,
    /// Runs a pass now over every bucket (or one), due or not; prints what it did.
    Process {
        /// Only this bucket.
        #[arg(long)]
        bucket: Option<String>,
    },
}

/// GC commands.
#[derive(Subcommand, Debug)]
pub enum GcCommand {
    /// Deletes the due entries now (passes until one finds none); with --include-all, every entry.
    Process {
        /// Process entries that are not yet due too.
        #[arg(long)]
        include_all: bool,
    },
    /// Counts queued entries.
    List,
}

fn print_json(value: &(impl serde::Serialize + ?Sized)) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value).map_err(|e| err::io(e.to_string()))?);
    Ok(())
}

fn key_from(access_key: Option<String>, secret_key: Option<String>) -> AccessKey {
    match (access_key, secret_key) {
        (Some(access_key), Some(secret_key)) => AccessKey { access_key, secret_key },
        _ => generate_key(),
    }
}

/// Runs `shoal admin …`.
pub async fn run_admin(args: AdminArgs) -> Result<()> {
    let session = args.cluster.open().await?;
    let mut config = args.cluster.config_for(&session.rados, "client.rgw")?.gateway()?;
    // Admin commands change records once: no cache to keep.
    config.cache_enabled = false;
    let gateway = Gateway::open(vec![session.rados.clone()], config).await?;
    let result = admin(&gateway, args.command).await;
    session.close();
    result
}

async fn user_of(gateway: &Gateway, uid: &str) -> Result<Arc<UserInfo>> {
    gateway.s3.meta.user(uid).await?.ok_or_else(|| err::not_found(format!("no user '{uid}'")))
}

/// The uid of subuser `<uid>:<name>`.
fn parent_of(subuser: &str) -> Result<&str> {
    subuser
        .split_once(':')
        .map(|(uid, _)| uid)
        .ok_or_else(|| err::invalid(format!("bad subuser '{subuser}': use UID:NAME")))
}

/// Applies `change` to user `uid` as stored (concurrent changes survive) and prints the
/// result; a refusal of `change` is the command's error.
async fn change_user(gateway: &Gateway, uid: &str, change: impl Fn(&mut UserInfo) -> Result<()>) -> Result<()> {
    let changed = gateway.s3.meta.modify_user(uid, change).await.map_err(|e| match e.errno {
        shoal_types::Errno::NotFound => err::not_found(format!("no user '{uid}'")),
        _ => e,
    })?;
    print_json(&changed?)
}

/// A change that fails unless the user has subuser `subuser`.
fn has_subuser(user: &UserInfo, subuser: &str) -> Result<()> {
    match user.subuser(subuser) {
        Some(_) => Ok(()),
        None => Err(err::not_found(format!("user '{}' has no subuser '{subuser}'", user.uid))),
    }
}

async fn admin(gateway: &Gateway, command: AdminCommand) -> Result<()> {
    let meta = &gateway.s3.meta;
    match command {
        AdminCommand::Pools => {
            for pool in shoal_gateway::layout::POOLS {
                println!("{pool}");
            }
            Ok(())
        }
        AdminCommand::User(UserCommand::Create { uid, display_name, email, access_key, secret_key }) => {
            let user = UserInfo::new(uid, display_name, email, key_from(access_key, secret_key));
            meta.create_user(&user).await?;
            print_json(&user)
        }
        AdminCommand::User(UserCommand::Info { uid }) => print_json(&*user_of(gateway, &uid).await?),
        AdminCommand::User(UserCommand::List) => print_json(&meta.list_users().await?),
        AdminCommand::User(UserCommand::Rm { uid }) => meta.remove_user(&uid).await,
        AdminCommand::User(UserCommand::Suspend { uid }) => {
            change_user(gateway, &uid, |u| {
                u.suspended = true;
                Ok(())
            })
            .await
        }
        AdminCommand::User(UserCommand::Enable { uid }) => {
            change_user(gateway, &uid, |u| {
                u.suspended = false;
                Ok(())
            })
            .await
        }
        AdminCommand::Key(KeyCommand::Create { uid, subuser, key_type, access_key, secret_key }) => {
            match (uid, subuser, key_type) {
                (Some(uid), None, KeyType::S3) => {
                    if access_key.is_none() && secret_key.is_some() {
                        return Err(err::invalid("an S3 key pair needs --access-key with --secret-key"));
                    }
                    let key = key_from(access_key, secret_key);
                    change_user(gateway, &uid, |u| {
                        u.keys.push(key.clone());
                        Ok(())
                    })
                    .await
                }
                (None, Some(subuser), KeyType::Swift) => {
                    if access_key.is_some() {
                        return Err(err::invalid("a Swift key has no access key: give --secret-key only"));
                    }
                    let secret_key = secret_key.unwrap_or_else(|| generate_key().secret_key);
                    change_user(gateway, parent_of(&subuser)?, |u| {
                        has_subuser(u, &subuser)?;
                        u.swift_keys.retain(|k| k.user != subuser);
                        u.swift_keys.push(SwiftKey { user: subuser.clone(), secret_key: secret_key.clone() });
                        Ok(())
                    })
                    .await
                }
                (Some(_), _, KeyType::Swift) => Err(err::invalid("Swift keys belong to subusers: give --subuser")),
                _ => Err(err::invalid("S3 keys belong to users: give --uid, or --key-type swift")),
            }
        }
        AdminCommand::Key(KeyCommand::Rm { uid, subuser, access_key }) => match (uid, subuser) {
            (Some(uid), _) => {
                let access_key = access_key.unwrap_or_default();
                change_user(gateway, &uid, |u| {
                    let before = u.keys.len();
                    u.keys.retain(|k| k.access_key != access_key);
                    match u.keys.len() < before {
                        true => Ok(()),
                        false => Err(err::not_found(format!("user '{uid}' has no access key '{access_key}'"))),
                    }
                })
                .await
            }
            (None, Some(subuser)) => {
                change_user(gateway, parent_of(&subuser)?, |u| {
                    has_subuser(u, &subuser)?;
                    let before = u.swift_keys.len();
                    u.swift_keys.retain(|k| k.user != subuser);
                    match u.swift_keys.len() < before {
                        true => Ok(()),
                        false => Err(err::not_found(format!("subuser '{subuser}' has no Swift key"))),
                    }
                })
                .await
            }
            (None, None) => Err(err::invalid("give --uid and --access-key, or --subuser")),
        },
        AdminCommand::Subuser(SubuserCommand::Create { uid, subuser, access }) => {
            validate_subuser(&uid, &subuser)?;
            change_user(gateway, &uid, |u| {
                u.subusers.retain(|s| s.id != subuser);
                u.subusers.push(Subuser { id: subuser.clone(), permissions: access });
                Ok(())
            })
            .await
        }
        AdminCommand::Subuser(SubuserCommand::Rm { subuser }) => {
            change_user(gateway, parent_of(&subuser)?, |u| {
                has_subuser(u, &subuser)?;
                u.subusers.retain(|s| s.id != subuser);
                u.swift_keys.retain(|k| k.user != subuser);
                Ok(())
            })
            .await
        }
        AdminCommand::Bucket(BucketCommand::List { uid }) => match uid {
            Some(uid) => print_json(&meta.user_buckets(&uid).await?),
            None => print_json(&meta.list_buckets().await?),
        },
        AdminCommand::Bucket(BucketCommand::Stats { bucket }) => {
            let info = meta.bucket(&bucket).await?.ok_or_else(|| err::not_found(format!("no bucket '{bucket}'")))?;
            let stats = gateway.s3.objects.bucket_stats(&info).await?;
            print_json(&serde_json::json!({
                "bucket": info.name, "id": info.id, "owner": info.owner, "num_shards": info.num_shards,
                "num_objects": stats.entries, "size_bytes": stats.bytes,
                "num_versions": stats.versions, "versions_size_bytes": stats.version_bytes,
                "versioning": info.versioning,
            }))
        }
        AdminCommand::Bucket(BucketCommand::Rm { bucket, purge_objects }) => {
            let info = meta.bucket(&bucket).await?.ok_or_else(|| err::not_found(format!("no bucket '{bucket}'")))?;
            let objects = &gateway.s3.objects;
            if purge_objects {
                objects.purge(&info).await?;
            } else if !objects.bucket_stats(&info).await?.is_empty() {
                return Err(err::busy(format!("bucket '{bucket}' is not empty (use --purge-objects)")));
            }
            gateway.s3.remove_bucket(&info).await
        }
        AdminCommand::Gc(GcCommand::Process { include_all }) => {
            // A pass stops at half its lease: go on until one finds nothing to do.
            let mut total = shoal_gateway::gc::GcReport::default();
            loop {
                let pass = gateway.gc.process(include_all).await?;
                if pass.entries == 0 {
                    break;
                }
                total += pass;
            }
            print_json(&total)
        }
        AdminCommand::Gc(GcCommand::List) => print_json(&serde_json::json!({ "pending": gateway.gc.pending().await? })),
        AdminCommand::Lc(LcCommand::List) => {
            let registry = &gateway.s3.lifecycle;
            let mut out = serde_json::Map::new();
            for bucket in registry.buckets().await? {
                let status = registry.status(&bucket).await?;
                out.insert(bucket, serde_json::to_value(status).map_err(|e| err::io(e.to_string()))?);
            }
            print_json(&out)
        }
        AdminCommand::Lc(LcCommand::Process { bucket }) => {
            let done = gateway.lifecycle.process(bucket.as_deref(), true).await?;
            print_json(&done.into_iter().collect::<std::collections::BTreeMap<_, _>>())
        }
        AdminCommand::Topic(command) => topic(gateway, command).await,
        AdminCommand::Notification(command) => notification(gateway, command).await,
    }
}

/// A topic as `topic get` shows it: the record without passwords.
fn topic_json(topic: &Topic) -> serde_json::Value {
    let mut value = serde_json::to_value(topic).unwrap_or_default();
    value["dest"]["push_endpoint"] = topic.endpoint_without_secret().into();
    if let Some(args) = value["dest"]["args"].as_object_mut() {
        args.remove("password");
    }
    value["has_stored_secret"] = topic.has_secret().into();
    value
}

async fn topic(gateway: &Gateway, command: TopicCommand) -> Result<()> {
    let routes = &gateway.routes;
    match command {
        TopicCommand::List => {
            let buckets = gateway.s3.meta.list_buckets().await?;
            let mut subscribed: std::collections::BTreeMap<String, Vec<String>> = Default::default();
            for name in buckets {
                if let Some(bucket) = gateway.s3.meta.bucket(&name).await? {
                    for config in &bucket.notifications {
                        subscribed.entry(config.topic_arn.clone()).or_default().push(name.clone());
                    }
                }
            }
            let mut out = Vec::new();
            for key in gateway.s3.meta.list_topics().await? {
                if let Some(topic) = gateway.s3.meta.topic(&key).await? {
                    let mut value = topic_json(&topic);
                    let mut buckets = subscribed.remove(&topic.arn).unwrap_or_default();
                    buckets.dedup();
                    value["subscribed_buckets"] = buckets.into();
                    out.push(value);
                }
            }
            print_json(&out)
        }
        TopicCommand::Get { topic } => print_json(&topic_json(&*routes.existing_topic(&topic).await?)),
        TopicCommand::Stats { topic } => print_json(&routes.topic_stats(&topic).await?),
        TopicCommand::Dump { topic } => print_json(&routes.topic_dump(&topic).await?),
        TopicCommand::Rm { topic } => routes.delete_topic(&topic).await,
        TopicCommand::Reshard { topic, shards } => print_json(&topic_json(&routes.reshard(&topic, shards).await?)),
    }
}

async fn notification(gateway: &Gateway, command: NotificationCommand) -> Result<()> {
    let meta = &gateway.s3.meta;
    let bucket_of = |name: String| async move {
        meta.bucket(&name).await?.ok_or_else(|| err::not_found(format!("no bucket '{name}'")))
    };
    match command {
        NotificationCommand::List { bucket } => print_json(&bucket_of(bucket).await?.notifications),
        NotificationCommand::Get { bucket, notification_id } => {
            let bucket = bucket_of(bucket).await?;
            let config = bucket.notifications.iter().find(|c| c.id == notification_id);
            print_json(config.ok_or_else(|| err::not_found(format!("no notification '{notification_id}'")))?)
        }
        NotificationCommand::Rm { bucket, notification_id } => {
            let bucket = bucket_of(bucket).await?;
            let removed = meta.modify_bucket(&bucket.name, &bucket.id, |b| {
                b.notifications.retain(|c| notification_id.as_ref().is_some_and(|id| &c.id != id));
                Ok::<(), std::convert::Infallible>(())
            });
            removed.await.map(|_| ())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::os::unix::fs::PermissionsExt;

    /// `shoal admin …` as the binary parses it.
    #[derive(Parser, Debug)]
    struct Admin {
        #[command(flatten)]
        args: AdminArgs,
    }

    #[test]
    fn keys_take_secret_as_radosgw_admin_does() {
        for (command, flag) in
            [("key", "--secret"), ("key", "--secret-key"), ("user", "--secret"), ("user", "--secret-key")]
        {
            let mut argv = vec!["admin", command, "create", "--uid", "u", "--access-key", "A", flag, "S"];
            if command == "user" {
                argv.extend(["--display-name", "U"]);
            }
            let parsed = Admin::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let secret = match parsed.args.command {
                AdminCommand::Key(KeyCommand::Create { secret_key, .. }) => secret_key,
                AdminCommand::User(UserCommand::Create { secret_key, .. }) => secret_key,
                other => panic!("{argv:?} parsed as {other:?}"),
            };
            assert_eq!(secret.as_deref(), Some("S"), "{argv:?}");
        }
    }

    #[test]
    fn a_server_makes_its_sse_key_file_once_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = sse_key_file(dir.path(), "sse-s3").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let keyring = shoal_gateway::crypt::Keyring::parse(&text).unwrap();
        assert!(keyring.key("sse-s3").is_ok());
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        sse_key_file(dir.path(), "sse-s3").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "a second start keeps the key");
    }
}
