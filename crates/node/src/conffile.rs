//! The cluster configuration file shared by daemons and clients, `key = value` lines:
//!
//! ```text
//! mon_host = 10.0.0.1:6789,10.0.0.2:6789,10.0.0.3:6789   # monitor i is the i-th entry
//! secret_file = /etc/shoal/secret
//! mon_data = /var/lib/shoal/mon.$id                      # $id: the daemon's id
//! osd_data = /var/lib/shoal/osd.$id
//! public_addr = 10.0.0.7                                  # where this machine's OSDs listen
//! osd_heartbeat_grace = 20                                # any option of `shoal config help`
//! ```

use crate::config::OPTIONS;
use shoal_types::{Result, err};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Keys that describe the cluster rather than tune it.
const CLUSTER_KEYS: &[&str] = &["mon_host", "secret_file", "mon_data", "osd_data", "public_addr"];

/// A parsed configuration file.
#[derive(Clone, Debug, Default)]
pub struct ConfFile {
    path: PathBuf,
    values: BTreeMap<String, String>,
}

impl ConfFile {
    /// Reads and checks a configuration file; unknown keys are errors naming them.
    pub fn read(path: &Path) -> Result<ConfFile> {
        let text =
            std::fs::read_to_string(path).map_err(|e| err::invalid(format!("config file {}: {e}", path.display())))?;
        let mut values = BTreeMap::new();
        for line in text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| err::invalid(format!("{}: '{line}' is not key = value", path.display())))?;
            let key = key.trim();
            if !CLUSTER_KEYS.contains(&key) && !OPTIONS.iter().any(|o| o.name == key) {
                return Err(err::invalid(format!("{}: unknown key '{key}'", path.display())));
            }
            values.insert(key.to_owned(), value.trim().to_owned());
        }
        Ok(ConfFile { path: path.to_owned(), values })
    }

    /// A cluster key's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// A cluster key's value, or an error naming the key and the file.
    pub fn require(&self, key: &str) -> Result<&str> {
        self.get(key).ok_or_else(|| err::invalid(format!("{}: '{key}' is not set", self.path.display())))
    }

    /// A path key with `$id` replaced by `id`.
    pub fn path_for(&self, key: &str, id: &str) -> Result<PathBuf> {
        Ok(PathBuf::from(self.require(key)?.replace("$id", id)))
    }

    /// The monitor addresses, in id order.
    pub fn mon_hosts(&self) -> Result<Vec<String>> {
        Ok(self.require("mon_host")?.split(',').map(|a| a.trim().to_owned()).filter(|a| !a.is_empty()).collect())
    }

    /// The tuning options in the file, as `key=value` settings.
    pub fn options(&self) -> Vec<String> {
        self.values
            .iter()
            .filter(|(k, _)| !CLUSTER_KEYS.contains(&k.as_str()))
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cluster_keys_and_options_and_names_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shoal.conf");
        std::fs::write(&path, "mon_host = a:1, b:2\n# comment\nosd_data = /d/osd.$id\nosd_heartbeat_grace = 5\n")
            .unwrap();
        let conf = ConfFile::read(&path).unwrap();
        assert_eq!(conf.mon_hosts().unwrap(), vec!["a:1", "b:2"]);
        assert_eq!(conf.path_for("osd_data", "3").unwrap(), PathBuf::from("/d/osd.3"));
        assert_eq!(conf.options(), vec!["osd_heartbeat_grace=5"]);
        assert!(conf.require("secret_file").unwrap_err().message.contains("secret_file"));
        std::fs::write(&path, "mon_hots = a:1\n").unwrap();
        assert!(ConfFile::read(&path).unwrap_err().message.contains("mon_hots"));
    }
}
