//! Keyrings: the keys of client entities in Ceph's format, a `[client.ID]` section with
//! `key = BASE64` (as `shoal auth get-or-create -o FILE` writes them).

use crate::config::Config;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use shoal_transport::{Credentials, TcpNetwork};
use shoal_types::{Result, err};
use std::path::Path;
use std::sync::Arc;

/// The keyring text of one entity.
pub fn format(entity: &str, key: &[u8]) -> String {
    format!("[{entity}]\n\tkey = {}\n", STANDARD.encode(key))
}

/// Reads `entity`'s key (or, without one, the first entity's) from a keyring file.
pub fn read(path: &Path, entity: Option<&str>) -> Result<Credentials> {
    let text = std::fs::read_to_string(path).map_err(|e| err::invalid(format!("keyring {}: {e}", path.display())))?;
    let mut section = None;
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.trim());
            continue;
        }
        let Some(("key", value)) = line.split_once('=').map(|(k, v)| (k.trim(), v.trim())) else { continue };
        match section {
            Some(name) if entity.is_none_or(|e| e == name) => {
                let key = STANDARD.decode(value).map_err(|e| {
                    err::invalid(format!("keyring {}: {name}'s key is not base64: {e}", path.display()))
                })?;
                return Ok(Credentials::new(name, &key));
            }
            _ => {}
        }
    }
    let which = entity.map_or("any entity".to_owned(), str::to_owned);
    Err(err::invalid(format!("keyring {} has no key for {which}", path.display())))
}

/// A TCP network authenticating as an entity of `keyring`, with the frame modes of `config`.
pub fn network(keyring: &Path, entity: Option<&str>, config: &Config) -> Result<Arc<TcpNetwork>> {
    crate::daemon::network_of(read(keyring, entity)?, config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyrings_round_trip_and_name_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        std::fs::write(&path, format("client.a", &[1, 2, 3]) + &format("client.b", &[9])).unwrap();
        let first = read(&path, None).unwrap();
        assert_eq!((first.entity.as_str(), first.keys), ("client.a", vec![vec![1, 2, 3]]));
        assert_eq!(read(&path, Some("client.b")).unwrap().keys, vec![vec![9]]);
        assert!(read(&path, Some("client.c")).unwrap_err().message.contains("client.c"));
        std::fs::write(&path, "[client.a]\n\tkey = not*base64\n").unwrap();
        assert!(read(&path, None).unwrap_err().message.contains("base64"));
        assert!(read(&dir.path().join("missing"), None).unwrap_err().message.contains("missing"));
    }
}
