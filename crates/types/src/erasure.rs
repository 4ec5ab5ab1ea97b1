//! Erasure-code profiles and erasure-coded pools, as the cluster map records them.

use crate::crush::{BucketType, CrushMap, CrushRule, DEFAULT_ROOT};
use crate::error::{Result, err};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How an erasure-coded pool cuts objects: `k` data and `m` parity shards in stripes of
/// `k × stripe_unit` bytes (`shoal osd erasure-code-profile set NAME k=4 m=2 …`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasureProfile {
    /// Data shards.
    pub k: u32,
    /// Parity shards: the shards a PG may lose and still be read.
    pub m: u32,
    /// Bytes of one stripe on one shard.
    pub stripe_unit: u32,
    /// What no two shards of a PG may share (`crush-failure-domain`).
    pub failure_domain: BucketType,
    /// The CRUSH bucket the pool's shards are placed under (`crush-root`).
    pub crush_root: String,
    /// Only OSDs of this class (`crush-device-class`).
    pub crush_device_class: Option<String>,
}

/// The name of the profile every cluster has (k=2, m=2, as Ceph's).
pub const DEFAULT_PROFILE: &str = "default";
const DEFAULT_STRIPE_UNIT: u32 = 4096;

impl Default for ErasureProfile {
    fn default() -> Self {
        ErasureProfile {
            k: 2,
            m: 2,
            stripe_unit: DEFAULT_STRIPE_UNIT,
            failure_domain: BucketType::Host,
            crush_root: DEFAULT_ROOT.to_owned(),
            crush_device_class: None,
        }
    }
}

impl ErasureProfile {
    /// A profile from `key=value` settings (Ceph's names: `k`, `m`, `stripe_unit` with an
    /// optional K or M suffix, `crush-failure-domain=host|osd`, `plugin=reed_solomon`, also
    /// spelled `jerasure` with `technique=reed_sol_van`); the first bad one is named.
    pub fn parse(settings: &[String]) -> Result<ErasureProfile> {
        let mut profile = ErasureProfile::default();
        let mut given: BTreeMap<&str, &str> = BTreeMap::new();
        for setting in settings {
            let (key, value) =
                setting.split_once('=').ok_or_else(|| err::invalid(format!("'{setting}' is not key=value")))?;
            given.insert(key, value);
        }
        for (key, value) in given {
            let number = |what: &str| {
                value.parse::<u32>().map_err(|_| err::invalid(format!("{what} must be a whole number, got '{value}'")))
            };
            match key {
                "k" => profile.k = number("k")?,
                "m" => profile.m = number("m")?,
                "stripe_unit" => profile.stripe_unit = parse_size(value)?,
                "crush-failure-domain" => {
                    profile.failure_domain = value
                        .parse()
                        .map_err(|e: crate::RadosError| err::invalid(format!("crush-failure-domain: {}", e.message)))?;
                }
                "crush-root" => profile.crush_root = value.to_owned(),
                "crush-device-class" if value.is_empty() => profile.crush_device_class = None,
                "crush-device-class" => profile.crush_device_class = Some(value.to_owned()),
                "plugin" if matches!(value, "reed_solomon" | "jerasure") => {}
                "plugin" => {
                    return Err(err::invalid(format!(
                        "plugin '{value}' is not available: Shoal codes with Reed-Solomon (plugin=reed_solomon)"
                    )));
                }
                "technique" if value == "reed_sol_van" => {}
                "technique" => {
                    return Err(err::invalid(format!("technique '{value}' is not available: use reed_sol_van")));
                }
                other => return Err(err::invalid(format!("unknown erasure-code profile setting '{other}'"))),
            }
        }
        profile.validate()?;
        Ok(profile)
    }

    /// Checks the numbers, naming the first that is wrong.
    pub fn validate(&self) -> Result<()> {
        if self.crush_root.is_empty() {
            return Err(err::invalid("crush-root must name a CRUSH bucket"));
        }
        if !(2..=32).contains(&self.k) {
            return Err(err::invalid(format!("k must be in 2..=32, got {}", self.k)));
        }
        if !(1..=16).contains(&self.m) || self.k + self.m > 32 {
            return Err(err::invalid(format!("m must be in 1..=16 with k+m at most 32, got m={}", self.m)));
        }
        if self.stripe_unit < 512 || self.stripe_unit > 16 << 20 || !self.stripe_unit.is_multiple_of(512) {
            return Err(err::invalid(format!(
                "stripe_unit must be a multiple of 512 between 512 and 16M, got {}",
                self.stripe_unit
            )));
        }
        Ok(())
    }

    /// The profile as `key=value` settings, in the order `get` prints them.
    pub fn settings(&self) -> Vec<(String, String)> {
        [
            ("crush-device-class", self.crush_device_class.clone().unwrap_or_default()),
            ("crush-failure-domain", self.failure_domain.name().to_owned()),
            ("crush-root", self.crush_root.clone()),
            ("k", self.k.to_string()),
            ("m", self.m.to_string()),
            ("plugin", "reed_solomon".to_owned()),
            ("stripe_unit", self.stripe_unit.to_string()),
            ("technique", "reed_sol_van".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// `min_size` of a pool with this profile unless one is given: `k + 1` (Ceph's), or `k`
    /// when `m` is 1.
    pub fn default_min_size(&self) -> u32 {
        self.k + self.m.min(2) - 1
    }
}

impl CrushMap {
    /// Gives an erasure-coded pool the rule its profile asks for, named after the pool as
    /// Ceph names it (with `-N` added if that name holds another rule); returns the name.
    pub fn add_erasure_rule(&mut self, pool: &str, code: &ErasureProfile) -> String {
        let rule = CrushRule {
            root: code.crush_root.clone(),
            failure_domain: code.failure_domain,
            device_class: code.crush_device_class.clone(),
        };
        let (mut name, mut n) = (pool.to_owned(), 0);
        while self.rule(&name).is_ok_and(|existing| existing != rule) {
            n += 1;
            name = format!("{pool}-{n}");
        }
        self.rules.insert(name.clone(), rule);
        name
    }
}

/// `4096`, `4K`, `1M` as bytes.
fn parse_size(value: &str) -> Result<u32> {
    crate::space::parse_bytes(value)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| err::invalid(format!("stripe_unit must be a size like 4096, 4K or 1M, got '{value}'")))
}

/// The erasure coding of a pool: its profile as it was when the pool was made (the
/// profile may change later; the pool's layout never does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolErasure {
    /// The profile's name.
    pub profile: String,
    /// The code and layout.
    pub code: ErasureProfile,
    /// Partial overwrites are allowed (read-modify-write of the stripes they touch).
    pub allow_overwrites: bool,
}

/// The part of a shard's copy that an erasure-coded write replaces: the shard keeps it
/// until every shard has the write, so that the write can be undone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Touched {
    /// The whole copy (the write removes the object or rewrites it from its first byte).
    Whole,
    /// The metadata and the store chunks in these `[start, end)` ranges.
    Chunks(Vec<(u32, u32)>),
}

/// Parameters of an erasure-coded pool to be created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErasurePoolSpec {
    /// Pool name.
    pub name: String,
    /// Placement groups.
    pub pg_num: u32,
    /// The profile's name.
    pub profile: String,
    /// Shards needed to accept writes (`k..=k+m`); `None`: the profile's default.
    pub min_size: Option<u32>,
    /// Allow partial overwrites.
    pub allow_overwrites: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(settings: &[&str]) -> Result<ErasureProfile> {
        ErasureProfile::parse(&settings.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn profiles_parse_ceph_settings_and_name_what_is_wrong() {
        let p = parse(&["k=4", "m=2", "crush-failure-domain=osd", "stripe_unit=8K", "plugin=jerasure"]).unwrap();
        let expected =
            ErasureProfile { k: 4, m: 2, stripe_unit: 8192, failure_domain: BucketType::Osd, ..Default::default() };
        assert_eq!(p, expected);
        let placed = parse(&["crush-root=dc1", "crush-failure-domain=rack", "crush-device-class=ssd"]).unwrap();
        assert_eq!(
            (placed.crush_root.as_str(), placed.failure_domain, placed.crush_device_class.as_deref()),
            ("dc1", BucketType::Rack, Some("ssd"))
        );
        assert_eq!(p.default_min_size(), 5);
        assert_eq!(parse(&["k=3", "m=1"]).unwrap().default_min_size(), 3);
        assert_eq!(parse(&[]).unwrap(), ErasureProfile::default());
        for (bad, named) in [
            (&["k=1"][..], "k must be"),
            (&["k=4", "m=0"], "m must be"),
            (&["stripe_unit=1000"], "stripe_unit must be a multiple"),
            (&["stripe_unit=4X"], "stripe_unit must be a size"),
            (&["plugin=clay"], "plugin 'clay'"),
            (&["crush-failure-domain=shelf"], "'shelf' is not a CRUSH type"),
            (&["crush-rooot=default"], "unknown erasure-code profile setting 'crush-rooot'"),
            (&["k"], "not key=value"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.message.contains(named), "{bad:?}: {}", e.message);
        }
    }
}
