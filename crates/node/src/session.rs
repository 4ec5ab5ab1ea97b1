//! How a command reaches the object layer: an embedded one on a local data directory, or a
//! running cluster through its monitor.

use crate::conffile::ConfFile;
use crate::config::Config;
use crate::embedded::Embedded;
use clap::Args;
use shoal_client::Rados;
use shoal_types::{Result, err};
use std::path::PathBuf;

const NO_CLUSTER: &str = "give --data DIR, -c CONF, or --mon HOST:PORT with --secret-file FILE or --keyring FILE";

/// Where the object layer is and how it is configured.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Data directory of an embedded object layer (created if missing).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["mon", "conf"])]
    pub data: Option<PathBuf>,
    /// The cluster configuration file (`mon_host = HOST:PORT,…`, `secret_file = FILE`, …),
    /// as `shoal vstart` writes.
    #[arg(short = 'c', long = "conf", value_name = "CONF", global = true)]
    pub conf: Option<PathBuf>,
    /// A running cluster's monitor (needs --secret-file or --keyring).
    #[arg(long, value_name = "HOST:PORT", global = true)]
    pub mon: Option<String>,
    /// File holding the cluster secret (the administrator's and the daemons' key).
    #[arg(long, value_name = "FILE", global = true)]
    pub secret_file: Option<PathBuf>,
    /// Authenticate as a client entity with its own key from this keyring (as `shoal
    /// auth get-or-create -o FILE` writes it), instead of with the cluster secret.
    #[arg(long, value_name = "FILE", global = true)]
    pub keyring: Option<PathBuf>,
    /// The entity to authenticate as, from the keyring (default: its first).
    #[arg(long = "entity", value_name = "client.ID", requires = "keyring", global = true)]
    pub as_entity: Option<String>,
    /// A configuration option, `key=value` (repeatable; see `shoal config help`).
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE", global = true)]
    pub options: Vec<String>,
}

/// A connected client, and the embedded object layer when there is one.
pub struct Session {
    /// The client.
    pub rados: Rados,
    local: Option<Embedded>,
}

impl ClusterArgs {
    /// The cluster a configuration file describes, reached as its administrator.
    pub fn from_conf(conf: PathBuf) -> Self {
        ClusterArgs {
            data: None,
            conf: Some(conf),
            mon: None,
            secret_file: None,
            keyring: None,
            as_entity: None,
            options: Vec::new(),
        }
    }

    /// The settings given locally: the file's options (if any), then `-o` options.
    pub fn settings(&self) -> Result<Vec<String>> {
        let mut settings = match &self.conf {
            Some(path) => ConfFile::read(path)?.options(),
            None => Vec::new(),
        };
        settings.extend(self.options.iter().cloned());
        Ok(settings)
    }

    /// The configuration: the central settings for `who` from the cluster map, overridden
    /// by the local ones.
    pub fn config_for(&self, rados: &Rados, who: &str) -> Result<Config> {
        let mut settings = rados.map().config_for(who);
        settings.extend(self.settings()?);
        Config::from_settings(&settings)
    }

    /// Starts the embedded object layer, or connects to the cluster.
    pub async fn open(&self) -> Result<Session> {
        let (mut mon, mut secret_file, mut settings) = (self.mon.clone(), self.secret_file.clone(), Vec::new());
        if let Some(path) = &self.conf {
            let conf = ConfFile::read(path)?;
            mon = mon.or(conf.get("mon_host").map(str::to_owned));
            secret_file = secret_file.or(conf.get("secret_file").map(PathBuf::from));
            settings = conf.options();
        }
        settings.extend(self.options.iter().cloned());
        let config = Config::from_settings(&settings)?;
        match (&self.data, &mon, &secret_file) {
            (Some(dir), _, _) => {
                let local = Embedded::open(dir, &config).await?;
                Ok(Session { rados: local.rados.clone(), local: Some(local) })
            }
            (None, Some(mon), secret) => {
                let network = match (&self.keyring, secret) {
                    (Some(keyring), _) => crate::keyring::network(keyring, self.as_entity.as_deref(), &config)?,
                    (None, Some(secret)) => crate::daemon::network(secret, "client.admin", &config)?,
                    (None, None) => return Err(err::invalid(NO_CLUSTER)),
                };
                let rados = Rados::connect(network, mon).await?;
                rados.set_op_timeout(config.op_timeout()?);
                Ok(Session { rados, local: None })
            }
            (None, None, _) => Err(err::invalid(NO_CLUSTER)),
        }
    }
}

impl Session {
    /// The embedded object layer, if this session runs one.
    pub fn local(&self) -> Option<&Embedded> {
        self.local.as_ref()
    }

    /// The embedded object layer, or an error naming what needs one.
    pub fn need_local(&self, what: &str) -> Result<&Embedded> {
        self.local().ok_or_else(|| err::invalid(format!("{what} reports on a local store: use --data DIR")))
    }

    /// Closes the embedded store, if any; call before the process exits.
    pub fn close(&self) {
        if let Some(local) = &self.local {
            local.close();
        }
    }
}
