//! The CRUSH hierarchy as the cluster map records it: buckets (root, datacenter, room, row,
//! rack, host) that hold each other and, at the bottom, OSDs; device classes; and rules that
//! say where a pool's copies go (which root, which failure domain, which class).
//!
//! An OSD sits in the host bucket its `OsdEntry::host` names; a host that no bucket names
//! yet is put under the root `default` when it first appears ([`CrushMap::add_hosts_of`]).

use crate::error::{Result, err};
use crate::ids::OsdId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A level of the hierarchy. The variant order is the encoding: `Host` and `Osd` come first
/// because erasure-code profiles stored them so before there were other levels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum BucketType {
    /// A machine holding OSDs.
    #[default]
    Host,
    /// A single OSD (never a bucket; a failure domain only).
    Osd,
    /// A rack of hosts.
    Rack,
    /// A row of racks.
    Row,
    /// A room.
    Room,
    /// A datacenter.
    Datacenter,
    /// The top of a tree.
    Root,
}

impl BucketType {
    /// Every type, from the bottom up.
    pub const ALL: [BucketType; 7] = [
        BucketType::Osd,
        BucketType::Host,
        BucketType::Rack,
        BucketType::Row,
        BucketType::Room,
        BucketType::Datacenter,
        BucketType::Root,
    ];

    /// How high the type stands: a bucket only holds buckets of lower levels.
    pub fn level(self) -> usize {
        Self::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }

    /// Its name, as Ceph spells it.
    pub fn name(self) -> &'static str {
        match self {
            BucketType::Osd => "osd",
            BucketType::Host => "host",
            BucketType::Rack => "rack",
            BucketType::Row => "row",
            BucketType::Room => "room",
            BucketType::Datacenter => "datacenter",
            BucketType::Root => "root",
        }
    }
}

impl std::fmt::Display for BucketType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for BucketType {
    type Err = crate::RadosError;

    fn from_str(text: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|t| t.name() == text).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|t| t.name()).collect();
            err::invalid(format!("'{text}' is not a CRUSH type: one of {}", names.join(", ")))
        })
    }
}

/// A bucket of the hierarchy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrushBucket {
    /// Negative and never reused: placement hashes it, so it fixes where data goes.
    pub id: i32,
    /// Its level.
    pub kind: BucketType,
    /// The buckets that hold it (more than one after `link`; none for a root).
    pub parents: Vec<String>,
}

/// Where a pool's copies go: distinct `failure_domain` buckets under `root`, on OSDs of
/// `device_class` if one is named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrushRule {
    /// The bucket placement starts from.
    pub root: String,
    /// What no two copies (shards) of a PG may share.
    pub failure_domain: BucketType,
    /// Only OSDs of this class.
    pub device_class: Option<String>,
}

/// The root every cluster has and new hosts join.
pub const DEFAULT_ROOT: &str = "default";
/// The rule replicated pools get unless told otherwise (root `default`, one copy per host).
pub const DEFAULT_RULE: &str = "replicated_rule";

/// The hierarchy, device classes and rules.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrushMap {
    /// Buckets by name.
    pub buckets: BTreeMap<String, CrushBucket>,
    /// Rules by name (`replicated_rule` is there unless set otherwise).
    pub rules: BTreeMap<String, CrushRule>,
    /// The class of each OSD that has one (`hdd`, `ssd`, `nvme`, or any name).
    pub device_classes: BTreeMap<OsdId, String>,
}

impl CrushMap {
    /// The rule `name` (`replicated_rule` unless set otherwise), or ENOENT.
    pub fn rule(&self, name: &str) -> Result<CrushRule> {
        match self.rules.get(name) {
            Some(rule) => Ok(rule.clone()),
            None if name == DEFAULT_RULE => {
                Ok(CrushRule { root: DEFAULT_ROOT.into(), failure_domain: BucketType::Host, device_class: None })
            }
            None => Err(err::not_found(format!("CRUSH rule '{name}' does not exist"))),
        }
    }

    /// Every rule by name, `replicated_rule` included.
    pub fn rule_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.rules.keys().cloned().collect();
        if !self.rules.contains_key(DEFAULT_RULE) {
            names.push(DEFAULT_RULE.into());
            names.sort();
        }
        names
    }

    /// Gives each host that `hosts` names but no bucket does a host bucket under the root
    /// `default`, in name order, creating the root after them if it is missing: a map from
    /// before the hierarchy gets the ids its placement hashed (host `i` of the sorted names
    /// was `-(i + 1)`), so no data moves.
    pub fn add_hosts_of<'a>(&mut self, hosts: impl IntoIterator<Item = &'a str>) {
        let mut missing: Vec<&str> = hosts.into_iter().filter(|h| !self.buckets.contains_key(*h)).collect();
        missing.sort_unstable();
        missing.dedup();
        for host in missing {
            let bucket = CrushBucket { id: self.next_id(), kind: BucketType::Host, parents: vec![DEFAULT_ROOT.into()] };
            self.buckets.insert(host.to_owned(), bucket);
        }
        if !self.buckets.contains_key(DEFAULT_ROOT) {
            let root = CrushBucket { id: self.next_id(), kind: BucketType::Root, parents: vec![] };
            self.buckets.insert(DEFAULT_ROOT.into(), root);
        }
    }

    /// The id the next bucket gets.
    pub(crate) fn next_id(&self) -> i32 {
        self.buckets.values().map(|b| b.id).min().unwrap_or(0).min(0) - 1
    }

    /// The bucket `name`, or ENOENT.
    pub fn bucket(&self, name: &str) -> Result<&CrushBucket> {
        self.buckets.get(name).ok_or_else(|| missing_bucket(name))
    }

    /// The bucket `name` to change, or ENOENT.
    pub(crate) fn bucket_mut(&mut self, name: &str) -> Result<&mut CrushBucket> {
        self.buckets.get_mut(name).ok_or_else(|| missing_bucket(name))
    }

    /// Checks that `parent` may hold `child` (a bucket of type `kind`).
    pub(crate) fn check_parent(&self, child: &str, kind: BucketType, parent: &str) -> Result<()> {
        let holder = self.bucket(parent)?;
        if holder.kind.level() <= kind.level() {
            return Err(err::invalid(format!(
                "{kind} '{child}' cannot go under {} '{parent}': a bucket holds only lower types",
                holder.kind
            )));
        }
        Ok(())
    }
}

fn missing_bucket(name: &str) -> crate::RadosError {
    err::not_found(format!("CRUSH bucket '{name}' does not exist"))
}

/// A change to the hierarchy, classes, rules or weights (`shoal osd crush …`, `osd
/// reweight`, `pool set POOL crush_rule`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CrushChange {
    /// Add a bucket, under `parent` or as a root of its own.
    AddBucket {
        /// Its name.
        name: String,
        /// Its type (not `osd`).
        kind: BucketType,
        /// The bucket to put it in.
        parent: Option<String>,
    },
    /// Put a bucket under `parent` alone (its data moves with it).
    Move {
        /// The bucket.
        name: String,
        /// Its new parent.
        parent: String,
    },
    /// Put a bucket under `parent` too, keeping its other parents.
    Link {
        /// The bucket.
        name: String,
        /// The added parent.
        parent: String,
    },
    /// Take a bucket out of `parent` (the bucket stays, a root of its own if it had no
    /// other parent).
    Unlink {
        /// The bucket.
        name: String,
        /// The parent to leave.
        parent: String,
    },
    /// Remove an empty bucket that no rule starts from.
    Remove(String),
    /// Set the class of OSDs.
    SetDeviceClass {
        /// The OSDs.
        osds: Vec<OsdId>,
        /// Their class.
        class: String,
    },
    /// Remove the class of OSDs.
    RemoveDeviceClass(Vec<OsdId>),
    /// Create a rule.
    CreateRule {
        /// Its name.
        name: String,
        /// What it does.
        rule: CrushRule,
    },
    /// Remove a rule no pool uses.
    RemoveRule(String),
    /// Make a pool place its PGs by a rule.
    SetPoolRule {
        /// The pool's name.
        pool: String,
        /// The rule's name.
        rule: String,
    },
    /// Set an OSD's override weight (`osd reweight`, 0..=1.0 in 16.16 fixed point): the
    /// share of the PGs its CRUSH weight gives it that it keeps.
    Reweight {
        /// The OSD.
        osd: OsdId,
        /// 0 to 0x10000.
        reweight: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::map::{OsdEntry, OsdMap, PoolSpec};

    fn map_with_hosts(hosts: &[&str]) -> OsdMap {
        let mut map = OsdMap::default();
        for (i, host) in hosts.iter().enumerate() {
            let entry = OsdEntry { addr: String::new(), host: (*host).into(), weight: 0x10000, up: true, is_in: true };
            map.osds.insert(OsdId(i as u32), entry);
        }
        map
    }

    #[test]
    fn hosts_from_before_the_hierarchy_keep_the_ids_placement_hashed() {
        let mut crush = CrushMap::default();
        crush.add_hosts_of(["b", "a", "c", "a"]);
        let ids: Vec<(&str, i32)> = crush.buckets.iter().map(|(n, b)| (n.as_str(), b.id)).collect();
        assert_eq!(ids, [("a", -1), ("b", -2), ("c", -3), ("default", -4)]);
        crush.add_hosts_of(["0-new", "b"]);
        assert_eq!(crush.buckets["0-new"].id, -5, "a later host gets a fresh id; none moves");
        assert_eq!(crush.buckets["0-new"].parents, [DEFAULT_ROOT]);
    }

    #[test]
    fn buckets_hold_only_lower_types_and_leave_only_when_empty() {
        let mut map = map_with_hosts(&["h0", "h1"]);
        let add = |name: &str, kind, parent: Option<&str>| CrushChange::AddBucket {
            name: name.into(),
            kind,
            parent: parent.map(Into::into),
        };
        add("rack1", BucketType::Rack, Some("default")).apply(&mut map).unwrap();
        let e = add("row1", BucketType::Row, Some("rack1")).apply(&mut map).unwrap_err();
        assert!(e.message.contains("holds only lower types"), "{}", e.message);
        assert_eq!(add("rack1", BucketType::Rack, None).apply(&mut map).unwrap_err().errno, crate::Errno::Exists);
        assert!(add("osd.3", BucketType::Host, None).apply(&mut map).is_err());
        assert!(add("x", BucketType::Osd, None).apply(&mut map).is_err());
        CrushChange::Move { name: "h0".into(), parent: "rack1".into() }.apply(&mut map).unwrap();
        assert_eq!(map.crush.buckets["h0"].parents, ["rack1"]);
        CrushChange::Link { name: "h0".into(), parent: "default".into() }.apply(&mut map).unwrap();
        assert_eq!(map.crush.buckets["h0"].parents, ["rack1", "default"]);
        let busy = CrushChange::Remove("rack1".into()).apply(&mut map).unwrap_err();
        assert!(busy.message.contains("holds 'h0'"), "{}", busy.message);
        let busy = CrushChange::Remove("h1".into()).apply(&mut map).unwrap_err();
        assert!(busy.message.contains("holds osd.1"), "{}", busy.message);
        CrushChange::Unlink { name: "h0".into(), parent: "rack1".into() }.apply(&mut map).unwrap();
        let rule = CrushRule { root: "rack1".into(), failure_domain: BucketType::Host, device_class: None };
        CrushChange::CreateRule { name: "r".into(), rule }.apply(&mut map).unwrap();
        let busy = CrushChange::Remove("rack1".into()).apply(&mut map).unwrap_err();
        assert!(busy.message.contains("root of rule 'r'"), "{}", busy.message);
        CrushChange::RemoveRule("r".into()).apply(&mut map).unwrap();
        CrushChange::Remove("rack1".into()).apply(&mut map).unwrap();
        assert!(!map.crush.buckets.contains_key("rack1"));
    }

    #[test]
    fn rules_in_use_stay_and_weights_stay_in_range() {
        let mut map = map_with_hosts(&["h0"]);
        map.create(&PoolSpec::named("p", 1)).unwrap();
        assert_eq!(map.pools.values().next().unwrap().crush_rule, DEFAULT_RULE);
        let rule =
            CrushRule { root: "default".into(), failure_domain: BucketType::Osd, device_class: Some("ssd".into()) };
        CrushChange::CreateRule { name: "fast".into(), rule: rule.clone() }.apply(&mut map).unwrap();
        let other = CrushRule { device_class: None, ..rule };
        let e = CrushChange::CreateRule { name: "fast".into(), rule: other }.apply(&mut map).unwrap_err();
        assert_eq!(e.errno, crate::Errno::Exists);
        let missing = CrushChange::SetPoolRule { pool: "p".into(), rule: "nope".into() }.apply(&mut map);
        assert_eq!(missing.unwrap_err().errno, crate::Errno::NotFound);
        CrushChange::SetPoolRule { pool: "p".into(), rule: "fast".into() }.apply(&mut map).unwrap();
        let e = CrushChange::RemoveRule("fast".into()).apply(&mut map).unwrap_err();
        assert!(e.message.contains("in use by pool 'p'"), "{}", e.message);
        assert!(CrushChange::Reweight { osd: OsdId(0), reweight: 0x10001 }.apply(&mut map).is_err());
        assert!(CrushChange::Reweight { osd: OsdId(9), reweight: 0 }.apply(&mut map).is_err());
        CrushChange::Reweight { osd: OsdId(0), reweight: 0x8000 }.apply(&mut map).unwrap();
        assert_eq!(map.osd_reweight[&OsdId(0)], 0x8000);
        CrushChange::Reweight { osd: OsdId(0), reweight: 0x10000 }.apply(&mut map).unwrap();
        assert!(map.osd_reweight.is_empty(), "1.0 is the default and is not stored");
        let classes = CrushChange::SetDeviceClass { osds: vec![OsdId(0)], class: "ssd".into() };
        classes.apply(&mut map).unwrap();
        assert_eq!(map.crush.device_classes[&OsdId(0)], "ssd");
    }
}
