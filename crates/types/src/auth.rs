//! Per-entity keys and capabilities, like Ceph's cephx: a client entity (`client.rgw.0`)
//! authenticates with a key of its own, and its caps say what it may do on the monitors
//! (`mon 'allow r'`) and the OSDs (`osd 'allow rwx pool=rgw.data'`). The cluster's own
//! daemons and its administrator authenticate with the cluster secret and may do
//! everything. The monitors keep the entities in the map ([`crate::OsdMap::auth`]); the
//! keys reach only holders of the cluster secret.

use crate::op::Step;
use crate::{Result, err};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Bytes of an entity's key.
pub const KEY_LEN: usize = 32;

/// Names that authenticate with the cluster secret and never have a key of their own.
pub fn is_cluster_entity(name: &str) -> bool {
    name == "client.admin" || is_daemon_entity(name)
}

/// Names of the cluster's daemons: monitors, OSDs, managers.
pub fn is_daemon_entity(name: &str) -> bool {
    ["mon.", "osd.", "mgr."].iter().any(|prefix| name.starts_with(prefix))
}

/// Checks an entity name: `TYPE.ID` with type `client`, not one of the cluster's own.
pub fn check_entity_name(name: &str) -> Result<()> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    let Some(id) = name.strip_prefix("client.") else {
        return Err(err::invalid(format!("entity '{name}' is not client.ID (only clients have keys of their own)")));
    };
    if id.is_empty() || !name.chars().all(valid_char) || name.len() > 128 {
        return Err(err::invalid(format!(
            "entity name '{name}' must be client.ID with letters, digits, '.', '_', '-'"
        )));
    }
    if is_cluster_entity(name) {
        return Err(err::invalid(format!("{name} authenticates with the cluster secret and has no key of its own")));
    }
    Ok(())
}

/// One entity in the monitors' auth table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthEntity {
    /// Its key (random, [`KEY_LEN`] bytes).
    pub key: Vec<u8>,
    /// What it may do.
    pub caps: Caps,
}

/// Permissions of a grant: read, write, execute (object class methods), and `*`
/// (everything, including the monitors' auth commands).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Perms {
    /// `r`.
    pub read: bool,
    /// `w`.
    pub write: bool,
    /// `x`.
    pub exec: bool,
    /// `*`.
    pub all: bool,
}

impl Perms {
    /// Read only.
    pub const R: Perms = Perms { read: true, write: false, exec: false, all: false };
    /// Write only.
    pub const W: Perms = Perms { read: false, write: true, exec: false, all: false };
    /// Execute only.
    pub const X: Perms = Perms { read: false, write: false, exec: true, all: false };
    /// `*`.
    pub const ALL: Perms = Perms { read: true, write: true, exec: true, all: true };

    /// Whether these permissions cover `need`.
    pub fn covers(self, need: Perms) -> bool {
        self.all || (!need.all && (self.read || !need.read) && (self.write || !need.write) && (self.exec || !need.exec))
    }

    fn union(self, other: Perms) -> Perms {
        Perms {
            read: self.read || other.read,
            write: self.write || other.write,
            exec: self.exec || other.exec,
            all: self.all || other.all,
        }
    }

    fn parse(text: &str) -> Option<Perms> {
        if text == "*" {
            return Some(Perms::ALL);
        }
        let mut perms = Perms::default();
        for c in text.chars() {
            match c {
                'r' => perms.read = true,
                'w' => perms.write = true,
                'x' => perms.exec = true,
                _ => return None,
            }
        }
        (!text.is_empty()).then_some(perms)
    }
}

impl fmt::Display for Perms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.all {
            return f.write_str("*");
        }
        for (on, c) in [(self.read, "r"), (self.write, "w"), (self.exec, "x")] {
            if on {
                f.write_str(c)?;
            }
        }
        Ok(())
    }
}

/// One `allow PERMS [pool=NAME] [namespace=NS]` of a cap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// What it allows.
    pub perms: Perms,
    /// The pool it is limited to.
    pub pool: Option<String>,
    /// The namespace it is limited to.
    pub namespace: Option<String>,
}

/// A service's cap: grants separated by commas, as Ceph writes them
/// (`allow rwx pool=a, allow r pool=b`); empty allows nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cap(pub Vec<Grant>);

impl Cap {
    /// Parses a cap; `pools` says whether `pool=` and `namespace=` may limit grants
    /// (OSD caps) or not (monitor caps).
    pub fn parse(text: &str, pools: bool) -> Result<Cap> {
        let mut grants = Vec::new();
        for clause in text.split([',', ';']).map(str::trim).filter(|c| !c.is_empty()) {
            let mut words = clause.split_whitespace();
            if words.next() != Some("allow") {
                return Err(err::invalid(format!("cap '{clause}' does not start with 'allow'")));
            }
            let perms = words.next().and_then(Perms::parse).ok_or_else(|| {
                err::invalid(format!("cap '{clause}': expected permissions r, w, x (combined) or * after 'allow'"))
            })?;
            let mut grant = Grant { perms, pool: None, namespace: None };
            for word in words {
                let (slot, value) = match word.split_once('=') {
                    Some(("pool", v)) if pools => (&mut grant.pool, v),
                    Some(("namespace", v)) if pools => (&mut grant.namespace, v),
                    _ => return Err(err::invalid(format!("cap '{clause}': '{word}' is not understood here"))),
                };
                if value.is_empty() || slot.is_some() {
                    return Err(err::invalid(format!("cap '{clause}': '{word}' is empty or repeated")));
                }
                *slot = Some(value.trim_matches(['\'', '"']).to_owned());
            }
            grants.push(grant);
        }
        Ok(Cap(grants))
    }

    /// Whether the grants that apply to `pool` and `namespace` (all, for a monitor cap)
    /// together cover `need`.
    pub fn allows(&self, pool: Option<&str>, namespace: Option<&str>, need: Perms) -> bool {
        let applies = |limit: &Option<String>, value: Option<&str>| limit.as_deref().is_none_or(|l| Some(l) == value);
        let granted = self
            .0
            .iter()
            .filter(|g| applies(&g.pool, pool) && applies(&g.namespace, namespace))
            .fold(Perms::default(), |perms, g| perms.union(g.perms));
        granted.covers(need)
    }
}

impl fmt::Display for Cap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, grant) in self.0.iter().enumerate() {
            write!(f, "{}allow {}", if n > 0 { ", " } else { "" }, grant.perms)?;
            if let Some(pool) = &grant.pool {
                write!(f, " pool={pool}")?;
            }
            if let Some(namespace) = &grant.namespace {
                write!(f, " namespace={namespace}")?;
            }
        }
        Ok(())
    }
}

/// What an entity may do on each service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caps {
    /// On the monitors: `r` reads the map and status, `w` changes it, `*` also manages
    /// keys and may send what daemons report.
    pub mon: Cap,
    /// On the OSDs: `r` reads objects and lists, `w` writes, `x` calls object class methods.
    pub osd: Cap,
}

impl Caps {
    /// Caps from `SERVICE CAP` pairs as `auth get-or-create` takes them
    /// (`mon 'allow r' osd 'allow rwx pool=p'`).
    pub fn parse(pairs: &[String]) -> Result<Caps> {
        if !pairs.len().is_multiple_of(2) {
            return Err(err::invalid("caps come in pairs: SERVICE 'CAP' (e.g. mon 'allow r')"));
        }
        let mut caps = Caps::default();
        for pair in pairs.chunks(2) {
            match pair[0].as_str() {
                "mon" => caps.mon = Cap::parse(&pair[1], false)?,
                "osd" => caps.osd = Cap::parse(&pair[1], true)?,
                other => return Err(err::invalid(format!("unknown service '{other}' in caps (mon or osd)"))),
            }
        }
        Ok(caps)
    }
}

impl fmt::Display for Caps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mon '{}' osd '{}'", self.mon, self.osd)
    }
}

/// What a compound operation needs of an OSD cap: `w` if a step changes the object,
/// `x` if one calls an object class method (which may read and write, as Ceph's `x`),
/// `r` if one reads or compares.
pub fn op_perms(steps: &[Step]) -> Perms {
    let mut need = Perms::default();
    for step in steps {
        match step {
            Step::Exec { .. } => need.exec = true,
            Step::FullTry => {}
            step if step.is_mutation() => need.write = true,
            _ => need.read = true,
        }
    }
    need
}

/// A change to the auth table, as `shoal auth` asks for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthChange {
    /// Creates `entity` with `caps` unless it exists (`auth get-or-create`); an existing
    /// entity keeps its key and caps. The leader picks the key.
    GetOrCreate {
        /// The entity.
        entity: String,
        /// Its caps if it is new.
        caps: Caps,
    },
    /// Replaces an entity's caps (`auth caps`).
    SetCaps {
        /// The entity.
        entity: String,
        /// Its new caps.
        caps: Caps,
    },
    /// Removes an entity: its key stops working at once (`auth rm`).
    Remove(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(mon: &str, osd: &str) -> Caps {
        Caps::parse(&[String::from("mon"), mon.into(), String::from("osd"), osd.into()]).unwrap()
    }

    #[test]
    fn grants_union_within_their_pool_and_namespace() {
        let c = caps("allow r", "allow rwx pool=data, allow r pool=logs namespace=web");
        assert!(c.mon.allows(None, None, Perms::R));
        assert!(!c.mon.allows(None, None, Perms::W), "r does not write");
        assert!(!c.mon.allows(None, None, Perms::ALL));
        assert!(c.osd.allows(Some("data"), None, Perms::W) && c.osd.allows(Some("data"), Some("x"), Perms::X));
        assert!(c.osd.allows(Some("logs"), Some("web"), Perms::R));
        assert!(!c.osd.allows(Some("logs"), None, Perms::R), "the grant is limited to namespace web");
        assert!(!c.osd.allows(Some("logs"), Some("web"), Perms::W));
        assert!(!c.osd.allows(Some("other"), None, Perms::R));
        let split = caps("allow r, allow w", "");
        assert!(split.mon.allows(None, None, Perms { read: true, write: true, ..Perms::default() }));
        assert!(!split.osd.allows(Some("data"), None, Perms::R), "an empty cap allows nothing");
        let star = caps("allow *", "allow *");
        assert!(star.mon.allows(None, None, Perms::ALL) && star.osd.allows(Some("p"), None, Perms::W));
        assert!(!caps("allow rwx", "").mon.allows(None, None, Perms::ALL), "rwx is not *");
    }

    #[test]
    fn operations_need_what_their_steps_do() {
        use bytes::Bytes;
        let write = Step::WriteFull { data: Bytes::from_static(b"x") };
        assert_eq!(op_perms(&[write.clone(), Step::FullTry]), Perms::W);
        assert_eq!(op_perms(&[Step::Stat]), Perms::R);
        let guarded = op_perms(&[Step::AssertExists, write]);
        assert!(guarded.read && guarded.write && !guarded.exec);
        let call = Step::Exec { class: "lock".into(), method: "lock".into(), input: Bytes::new() };
        assert_eq!(op_perms(&[call]), Perms::X);
    }

    #[test]
    fn caps_print_as_they_parse() {
        let c = caps("allow rw", "allow rwx pool=data namespace=n, allow * pool=\"b\"");
        assert_eq!(c.to_string(), "mon 'allow rw' osd 'allow rwx pool=data namespace=n, allow * pool=b'");
        let again = caps(&c.mon.to_string(), &c.osd.to_string());
        assert_eq!(again, c);
    }

    #[test]
    fn bad_caps_and_names_are_refused_with_the_reason() {
        let bad = |mon: &str, osd: &str| {
            Caps::parse(&[String::from("mon"), mon.into(), String::from("osd"), osd.into()]).unwrap_err().message
        };
        assert!(bad("allow q", "").contains("permissions"));
        assert!(bad("grant r", "").contains("'allow'"));
        assert!(bad("allow r pool=x", "").contains("pool=x"), "monitor caps take no pool");
        assert!(bad("", "allow r pool=").contains("empty"));
        assert!(bad("", "allow r pool=a pool=b").contains("repeated"));
        assert!(Caps::parse(&["mds".into(), "allow".into()]).unwrap_err().message.contains("mds"));
        assert!(Caps::parse(&["mon".into()]).unwrap_err().message.contains("pairs"));
        assert!(check_entity_name("client.rgw.0").is_ok());
        for name in ["osd.1", "client.admin", "client.", "rgw", "client.a b", "mon.a"] {
            assert!(check_entity_name(name).is_err(), "{name}");
        }
    }
}
