//! Cluster-wide commands, in the manner of the `ceph` tool: `shoal status`,
//! `shoal osd tree|out|in|erasure-code-profile` (and `shoal osd run`, the daemon),
//! `shoal osd crush …`, `shoal pool create|ls|set|rm`.

use crate::session::ClusterArgs;
use clap::{Args, Subcommand};
use shoal_types::autoscale::{AutoscaleChange, AutoscaleMode};
use shoal_types::crush::{BucketType, CrushChange, CrushRule};
use shoal_types::erasure::{ErasurePoolSpec, ErasureProfile};
use shoal_types::space::{SpaceChange, SpaceState, StoreUsage};
use shoal_types::{OsdId, OsdMap, PgId, PgStat, PoolSpec, Result, err};
use std::collections::BTreeMap;

/// Arguments of `shoal status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Arguments of `shoal pool …`.
#[derive(Args, Debug)]
pub struct PoolArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(subcommand)]
    command: PoolCommand,
}

/// `shoal pg …` subcommands.
#[derive(Subcommand, Debug)]
pub enum PgCommand {
    /// Every PG with the OSDs placement puts it on (primary first).
    Dump(StatusArgs),
    /// Compare a PG's copies: object lists, sizes, versions, xattr and omap digests.
    Scrub(ScrubArgs),
    /// Compare a PG's copies and read every byte against its stored checksum.
    DeepScrub(ScrubArgs),
    /// Deep-scrub a PG and rewrite its bad copies from the authoritative one.
    Repair(ScrubArgs),
}

/// Arguments of `shoal pg scrub|deep-scrub|repair`.
#[derive(Args, Debug)]
pub struct ScrubArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// The PG, `POOL.SEED` as `shoal pg dump` prints it (seed in hex).
    pgid: String,
    /// Wait (up to this many seconds) for the scrub to finish and print what it found.
    #[arg(long, value_name = "SECS")]
    wait: Option<u64>,
}

/// `shoal osd …`: run the daemon, or look at and mark OSDs.
#[derive(Subcommand, Debug)]
pub enum OsdCommand {
    /// Run an OSD daemon.
    Run(crate::daemon::OsdArgs),
    /// Pools, as `shoal pool …` (Ceph spells it `osd pool …`).
    Pool(PoolArgs),
    /// OSDs by host with weight and state.
    Tree(StatusArgs),
    /// Take an OSD out of data placement (its PGs move elsewhere).
    Out(OsdMark),
    /// Put an OSD back into data placement.
    In(OsdMark),
    /// Whether stopping an OSD leaves every PG it serves with `min_size` members up (Ceph's
    /// `osd ok-to-stop`); exits with EBUSY naming the PGs that would stop serving if not.
    OkToStop(OsdMark),
    /// Set a cluster flag: `noout` (no down OSD is marked out: for maintenance), `noin`
    /// (booting OSDs that are out, or new, stay out), `nobackfill`, `norecover` (no data
    /// is copied to other members) or `pause` (no client operation is served).
    Set(FlagArgs),
    /// Clear a cluster flag.
    Unset(FlagArgs),
    /// Whether no PG can need an OSD's copies any more (Ceph's `osd safe-to-destroy`);
    /// exits with EBUSY naming the PGs that still may.
    SafeToDestroy(OsdMark),
    /// Remove a down OSD from the cluster for good: its map entry, weights and class.
    /// Refused while a PG may need its copies, unless `--force`.
    Purge {
        /// Which OSD, and where the cluster is.
        #[command(flatten)]
        mark: OsdMark,
        /// Say that you mean it: the OSD cannot come back under this id's old data.
        #[arg(long)]
        yes_i_really_mean_it: bool,
        /// Purge even if PGs may still need its copies (their data may be lost).
        #[arg(long)]
        force: bool,
    },
    /// Declare a down OSD's data gone for good, so that PGs waiting for it go on from the
    /// copies that remain (or empty): writes only it held are lost. Use it only for an OSD
    /// that cannot come back.
    Lost {
        /// Which OSD, and where the cluster is.
        #[command(flatten)]
        mark: OsdMark,
        /// Say that you mean it: data only this OSD held is given up.
        #[arg(long)]
        yes_i_really_mean_it: bool,
    },
    /// Put copies of a PG elsewhere than placement does: each FROM TO pair moves the copy
    /// placement gives osd FROM to osd TO (Ceph's pg-upmap-items; `balancer optimize`
    /// sets them too).
    PgUpmapItems {
        /// Where the cluster is.
        #[command(flatten)]
        cluster: ClusterArgs,
        /// The PG, e.g. `1.7`.
        pgid: String,
        /// OSD ids in pairs: FROM TO [FROM TO …].
        #[arg(required = true, num_args = 2..)]
        osds: Vec<u32>,
    },
    /// Remove a PG's upmap exceptions: its copies go back where placement puts them.
    RmPgUpmapItems {
        /// Where the cluster is.
        #[command(flatten)]
        cluster: ClusterArgs,
        /// The PG.
        pgid: String,
    },
    /// The CRUSH map: the hierarchy (`add-bucket`, `move`, `link`, `unlink`, `rm`), device
    /// classes, rules, and `reweight osd.N WEIGHT` (an OSD's capacity weight, kept across
    /// restarts).
    Crush(CrushArgs),
    /// Set an OSD's override weight, 0 to 1: the share of the PGs its CRUSH weight gives it
    /// that it keeps (Ceph's `osd reweight`).
    Reweight {
        /// Where the cluster is.
        #[command(flatten)]
        cluster: ClusterArgs,
        /// The OSD: `osd.N` or `N`.
        #[arg(value_parser = parse_osd)]
        osd: OsdId,
        /// 0 to 1.
        #[arg(value_parser = parse_weight)]
        weight: u32,
    },
    /// Space per OSD: the data device's size, what objects use, what is free, and what is
    /// allocated but not referenced (writes in flight, frees waiting for a sync); then the
    /// whole store (data device and key-value files) against its file system, the share
    /// used and whether the OSD is nearfull, backfillfull or full.
    Df(StatusArgs),
    /// Set the ratio of its store at which an OSD counts as full: writes to its PGs get
    /// ENOSPC, deletes still work (default 0.95).
    SetFullRatio(RatioArgs),
    /// Set the ratio at which backfill stops moving data to an OSD (default 0.90).
    SetBackfillfullRatio(RatioArgs),
    /// Set the ratio at which an OSD counts as near full: a warning (default 0.85).
    SetNearfullRatio(RatioArgs),
    /// Erasure-code profiles: `set NAME k=4 m=2 [crush-failure-domain=host|rack|osd|…]
    /// [crush-root=ROOT] [crush-device-class=CLASS] [stripe_unit=4K]
    /// [plugin=reed_solomon]`, `get NAME`, `ls`, `rm NAME`.
    ErasureCodeProfile(ProfileArgs),
}

/// Arguments of `shoal osd erasure-code-profile …`.
#[derive(Args, Debug)]
pub struct ProfileArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(subcommand)]
    command: ProfileCommand,
}

/// `shoal osd erasure-code-profile …` subcommands.
#[derive(Subcommand, Debug)]
pub enum ProfileCommand {
    /// Set a profile from `key=value` settings.
    Set {
        /// Profile name.
        name: String,
        /// `k=…`, `m=…`, `crush-failure-domain=TYPE`, `crush-root=…`, `crush-device-class=…`,
        /// `stripe_unit=…`, `plugin=reed_solomon`.
        settings: Vec<String>,
        /// Replace an existing profile with other settings (pools made with it keep theirs).
        #[arg(long)]
        force: bool,
    },
    /// Print a profile's settings.
    Get {
        /// Profile name.
        name: String,
    },
    /// List the profiles.
    Ls,
    /// Remove a profile no pool uses.
    Rm {
        /// Profile name.
        name: String,
    },
}

/// Arguments of `shoal tell`.
#[derive(Args, Debug)]
pub struct TellArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// The daemon, `osd.N`.
    who: String,
    /// The command: `perf dump`, `config show`, `df`, `damaged`, `injectdataerr <pool>
    /// <object> [chunk]`, `injectrewrite <pool> <object> [chunk]` or `inject
    /// wal-sync-failure`.
    #[arg(required = true, num_args = 1..)]
    command: Vec<String>,
}

/// Runs `shoal tell`: prints the daemon's JSON answer.
pub async fn tell(args: TellArgs) -> Result<()> {
    let id = args
        .who
        .strip_prefix("osd.")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| err::invalid(format!("'{}' is not a daemon to tell: give osd.N", args.who)))?;
    run(&args.cluster, Action::Tell(OsdId(id), args.command.join(" "))).await
}

/// Which OSD to mark, and where the cluster is.
#[derive(Args, Debug)]
pub struct OsdMark {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// The OSD's id.
    id: u32,
}

/// Arguments of `shoal osd set|unset`.
#[derive(Args, Debug)]
pub struct FlagArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// The flag: noout, noin, nobackfill, norecover, norebalance or pause.
    flag: String,
}

/// Arguments of `shoal osd set-full-ratio` and the like.
#[derive(Args, Debug)]
pub struct RatioArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// 0 to 1, e.g. 0.95.
    #[arg(value_parser = parse_ratio)]
    ratio: u16,
}

/// A ratio 0..=1 in basis points.
fn parse_ratio(text: &str) -> std::result::Result<u16, String> {
    let ratio: f64 = text.parse().map_err(|_| format!("'{text}' is not a number"))?;
    if !(0.0..=1.0).contains(&ratio) {
        return Err(format!("ratio {text} is outside 0 to 1"));
    }
    Ok((ratio * f64::from(shoal_types::space::WHOLE)).round() as u16)
}

/// Arguments of `shoal osd crush …`.
#[derive(Args, Debug)]
pub struct CrushArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    #[command(subcommand)]
    command: CrushCommand,
}

/// `shoal osd crush …` subcommands.
#[derive(Subcommand, Debug)]
pub enum CrushCommand {
    /// Set an OSD's CRUSH weight.
    Reweight {
        /// The OSD: `osd.N` or `N`.
        #[arg(value_parser = parse_osd)]
        osd: OsdId,
        /// Its weight: a share of the data, 1.0 for one (Ceph uses TiB of capacity); 0 to
        /// 65535.
        #[arg(value_parser = parse_weight)]
        weight: u32,
    },
    /// Add a bucket: `add-bucket rack1 rack [root=default]`.
    AddBucket {
        /// Its name.
        name: String,
        /// Its type: root, datacenter, room, row, rack or host.
        #[arg(value_parser = parse_type)]
        kind: BucketType,
        /// Where it goes, `TYPE=NAME` (several: the lowest is the parent).
        location: Vec<String>,
    },
    /// Put a bucket (and its data) under another alone: `move host3 rack=rack1`.
    Move {
        /// The bucket.
        name: String,
        /// Its new place, `TYPE=NAME`.
        #[arg(required = true)]
        location: Vec<String>,
    },
    /// Put a bucket under another too, keeping its other places.
    Link {
        /// The bucket.
        name: String,
        /// The added place, `TYPE=NAME`.
        #[arg(required = true)]
        location: Vec<String>,
    },
    /// Take a bucket out of one of its parents.
    Unlink {
        /// The bucket.
        name: String,
        /// The parent it leaves.
        parent: String,
    },
    /// Remove an empty bucket.
    Rm {
        /// The bucket.
        name: String,
    },
    /// Set the device class of OSDs: `set-device-class ssd osd.0 osd.3`.
    SetDeviceClass {
        /// The class (`hdd`, `ssd`, `nvme` or any name).
        class: String,
        /// The OSDs.
        #[arg(required = true, value_parser = parse_osd)]
        osds: Vec<OsdId>,
    },
    /// Remove the device class of OSDs.
    RmDeviceClass {
        /// The OSDs.
        #[arg(required = true, value_parser = parse_osd)]
        osds: Vec<OsdId>,
    },
    /// Device classes and their OSDs.
    ClassLs,
    /// Rules: `create-replicated NAME ROOT TYPE [CLASS]`, `ls`, `dump [NAME]`, `rm NAME`.
    #[command(subcommand)]
    Rule(RuleCommand),
}

/// `shoal osd crush rule …` subcommands.
#[derive(Subcommand, Debug)]
pub enum RuleCommand {
    /// Create a rule that puts each copy in a distinct TYPE bucket under ROOT (on OSDs of
    /// CLASS only, if given).
    CreateReplicated {
        /// The rule's name.
        name: String,
        /// The bucket placement starts from.
        root: String,
        /// The failure domain: osd, host, rack, row, room or datacenter.
        #[arg(value_parser = parse_type)]
        kind: BucketType,
        /// Only OSDs of this device class.
        class: Option<String>,
    },
    /// List the rules.
    Ls,
    /// Print rules (all, or one) as JSON.
    Dump {
        /// The rule.
        name: Option<String>,
    },
    /// Remove a rule no pool uses.
    Rm {
        /// The rule.
        name: String,
    },
}

fn parse_type(text: &str) -> std::result::Result<BucketType, String> {
    text.parse().map_err(|e: shoal_types::RadosError| e.message)
}

/// The parent a `TYPE=NAME …` location names (the lowest type given), checked against the
/// map: the bucket exists and has that type.
fn location_parent(map: &OsdMap, location: &[String]) -> Result<String> {
    let crush = map.crush_view();
    let mut parents = Vec::new();
    for pair in location {
        let (kind, name) =
            pair.split_once('=').ok_or_else(|| err::invalid(format!("location '{pair}' is not TYPE=NAME")))?;
        let kind: BucketType = kind.parse()?;
        let bucket = crush.bucket(name)?;
        if bucket.kind != kind {
            return Err(err::invalid(format!("'{name}' is a {}, not a {kind}", bucket.kind)));
        }
        parents.push((kind.level(), name.to_owned()));
    }
    parents.into_iter().min().map(|(_, name)| name).ok_or_else(|| err::invalid("give a location, TYPE=NAME"))
}

/// `osd.N` or `N`.
fn parse_osd(text: &str) -> std::result::Result<OsdId, String> {
    let id = text.strip_prefix("osd.").unwrap_or(text);
    id.parse().map(OsdId).map_err(|_| format!("'{text}' is not an OSD (osd.N or N)"))
}

/// A weight as 16.16 fixed point.
fn parse_weight(text: &str) -> std::result::Result<u32, String> {
    let weight: f64 = text.parse().map_err(|_| format!("'{text}' is not a number"))?;
    if !(0.0..65536.0).contains(&weight) {
        return Err(format!("weight {text} is outside 0 to 65535"));
    }
    Ok((weight * 65536.0).round() as u32)
}

/// `shoal pool …` subcommands.
#[derive(Subcommand, Debug)]
pub enum PoolCommand {
    /// Create a pool: replicated, or erasure-coded with `--erasure PROFILE`.
    Create {
        /// Pool name.
        name: String,
        /// Replicas.
        #[arg(long, default_value_t = 3, conflicts_with = "erasure")]
        size: u32,
        /// Replicas (shards) needed for writes (default: size - size/2; erasure-coded: k+1).
        #[arg(long)]
        min_size: Option<u32>,
        /// Placement groups.
        #[arg(long, default_value_t = 32)]
        pg_num: u32,
        /// Erasure-code the pool with this profile (`shoal osd erasure-code-profile ls`).
        #[arg(long, value_name = "PROFILE")]
        erasure: Option<String>,
        /// Allow partial overwrites of objects in the erasure-coded pool.
        #[arg(long, requires = "erasure")]
        allow_ec_overwrites: bool,
        /// The PG autoscaler's mode for it: on, warn or off (default
        /// `osd_pool_default_pg_autoscale_mode`).
        #[arg(long, value_name = "MODE")]
        autoscale_mode: Option<String>,
    },
    /// List pools with their parameters.
    Ls,
    /// Each pool's usage and the pg_num the PG autoscaler proposes for it.
    AutoscaleStatus,
    /// Set a pool's parameter: `crush_rule RULE`, `pg_num N` (raising it splits every PG
    /// in place; `pgp_num` then follows in steps; lowering it merges PGs once placement
    /// brought them together, pausing the pool's IO for the merge itself), `pgp_num N`
    /// (where placement goes),
    /// `pg_autoscale_mode on|warn|off` or `target_size_ratio 0..1` (the share of its
    /// OSDs' capacity the autoscaler sizes it for before the data arrives).
    Set {
        /// Pool name.
        name: String,
        /// The parameter: `crush_rule`, `pg_num`, `pgp_num`, `pg_autoscale_mode` or
        /// `target_size_ratio`.
        key: String,
        /// Its value.
        value: String,
    },
    /// Limit a pool: `max_objects N` or `max_bytes N` (0 removes the limit). Writes to a
    /// pool at its quota get EDQUOT; deletes still work.
    SetQuota {
        /// Pool name.
        name: String,
        /// `max_objects` or `max_bytes`.
        key: String,
        /// The limit (bytes may carry a K, M, G or T suffix).
        value: String,
    },
    /// A pool's quota and how much of it is used.
    GetQuota {
        /// Pool name.
        name: String,
    },
    /// Delete a pool and its objects.
    Rm {
        /// Pool name.
        name: String,
    },
}

/// A pool's parameters as `pool ls` prints them; `pgp_num` while placement catches up
/// with a change of `pg_num`.
fn describe_pool(map: &OsdMap, pool: &shoal_types::Pool) -> String {
    let kind = match &pool.erasure {
        Some(e) => format!(
            "erasure profile {} (k {}, m {}, stripe_unit {}){}",
            e.profile,
            e.code.k,
            e.code.m,
            e.code.stripe_unit,
            if e.allow_overwrites { " allow_ec_overwrites" } else { "" }
        ),
        None => "replicated".to_owned(),
    };
    let pgp = match map.pg_resize.get(&pool.id) {
        Some(r) if r.pgp_num == r.pgp_num_target => format!(" pgp_num {}", r.pgp_num),
        Some(r) => format!(" pgp_num {} (going to {})", r.pgp_num, r.pgp_num_target),
        None => String::new(),
    };
    let pgp = match map.pg_merge.get(&pool.id) {
        Some(m) if m.paused > 0 => format!("{pgp} (merging to {}: paused)", m.pg_num),
        Some(m) => format!("{pgp} (merging to {})", m.pg_num),
        None => pgp,
    };
    let autoscale = map.autoscale(pool.id);
    let target = match autoscale.target_size_ratio {
        0 => String::new(),
        r => format!(" target_size_ratio {}", f64::from(r) / f64::from(shoal_types::space::WHOLE)),
    };
    format!(
        "id {} {kind} size {} min_size {} pg_num {}{pgp} crush_rule {} autoscale_mode {}{target}",
        pool.id,
        pool.size,
        pool.min_size,
        pool.pg_num,
        pool.crush_rule,
        autoscale.mode.name()
    )
}

/// `osd tree`: the CRUSH hierarchy from each root down to the OSDs, with CRUSH weights
/// (a bucket's is its OSDs' sum), classes, states and override weights.
pub fn tree(map: &OsdMap, usage: &BTreeMap<OsdId, StoreUsage>) -> Vec<String> {
    let crush = map.crush_view();
    let mut lines = vec![format!(
        "{:>5}  {:<6} {:>9}  {:<28} {:<7} {:<8} {:>6}",
        "ID", "CLASS", "WEIGHT", "TYPE NAME", "STATUS", "REWEIGHT", "%USE"
    )];
    /// The CRUSH weight under `bucket` and the store bytes (used, used + available) of the
    /// OSDs under it that reported.
    fn under(
        map: &OsdMap,
        crush: &shoal_types::crush::CrushMap,
        usage: &BTreeMap<OsdId, StoreUsage>,
        bucket: &str,
    ) -> (u64, u128, u128) {
        let mut total = (0u64, 0u128, 0u128);
        for (id, osd) in map.osds.iter().filter(|(_, o)| o.host == bucket) {
            let u = usage.get(id).copied().unwrap_or_default();
            total.0 += u64::from(osd.weight);
            total.1 += u128::from(u.used);
            total.2 += u128::from(u.used) + u128::from(u.available);
        }
        for (child, _) in crush.buckets.iter().filter(|(_, b)| b.parents.iter().any(|p| p == bucket)) {
            let (w, used, size) = under(map, crush, usage, child);
            total = (total.0 + w, total.1 + used, total.2 + size);
        }
        total
    }
    let percent = |used: u128, size: u128| match size {
        0 => "-".to_owned(),
        _ => format!("{:.2}", used as f64 * 100.0 / size as f64),
    };
    fn walk(
        map: &OsdMap,
        crush: &shoal_types::crush::CrushMap,
        usage: &BTreeMap<OsdId, StoreUsage>,
        percent: &dyn Fn(u128, u128) -> String,
        bucket: &str,
        depth: usize,
        lines: &mut Vec<String>,
    ) {
        let b = &crush.buckets[bucket];
        let (weight, used, size) = under(map, crush, usage, bucket);
        let weight = weight as f64 / 65536.0;
        let name = format!("{:indent$}{} {bucket}", "", b.kind, indent = depth * 4);
        lines.push(format!(
            "{:>5}  {:<6} {weight:>9.5}  {name:<28} {:<7} {:<8} {:>6}",
            b.id,
            "",
            "",
            "",
            percent(used, size)
        ));
        for (child, _) in crush.buckets.iter().filter(|(_, c)| c.parents.iter().any(|p| p == bucket)) {
            walk(map, crush, usage, percent, child, depth + 1, lines);
        }
        for (id, osd) in map.osds.iter().filter(|(_, o)| o.host == bucket) {
            let class = crush.device_classes.get(id).map_or("", String::as_str);
            let status = match (osd.up, osd.is_in, map.osd_lost.contains_key(id)) {
                (true, true, _) => "up",
                (true, false, _) => "up out",
                (false, true, false) => "down",
                (false, false, false) => "down out",
                (false, true, true) => "lost",
                (false, false, true) => "lost out",
            };
            let reweight = f64::from(map.osd_reweight.get(id).copied().unwrap_or(0x10000)) / 65536.0;
            let name = format!("{:indent$}{id}", "", indent = (depth + 1) * 4);
            let u = usage.get(id).copied().unwrap_or_default();
            let used = percent(u128::from(u.used), u128::from(u.used) + u128::from(u.available));
            lines.push(format!(
                "{:>5}  {class:<6} {:>9.5}  {name:<28} {status:<7} {reweight:<8.5} {used:>6}",
                id.0,
                f64::from(osd.weight) / 65536.0
            ));
        }
    }
    for (root, _) in crush.buckets.iter().filter(|(_, b)| b.parents.is_empty()) {
        walk(map, &crush, usage, &percent, root, 0, &mut lines);
    }
    lines
}

/// Warns, when the map has erasure-coded pools, that a placement change may stall them.
fn warn_if_erasure_coded(map: &OsdMap) {
    if let Some(pool) = map.pools.values().find(|p| p.erasure.is_some()) {
        eprintln!(
            "warning: erasure-coded pool '{}': moving its shards (weights, buckets, rules) while OSDs fail can \
             leave PGs incomplete; marking OSDs out is safe (no pg_temp yet; see docs/ARCHITECTURE.md, known gaps)",
            pool.name
        );
    }
}

/// Runs a `shoal osd crush …` command.
async fn crush(rados: &shoal_client::Rados, command: CrushCommand) -> Result<()> {
    let map = rados.refresh_map().await?;
    if !matches!(command, CrushCommand::ClassLs | CrushCommand::Rule(RuleCommand::Ls | RuleCommand::Dump { .. })) {
        warn_if_erasure_coded(&map);
    }
    let (change, done) = match command {
        CrushCommand::Reweight { osd, weight } => {
            let map = rados.osd_set_weight(osd, weight).await?;
            println!("reweighted {osd} to {:.4} (map epoch {})", f64::from(weight) / 65536.0, map.epoch);
            return Ok(());
        }
        CrushCommand::AddBucket { name, kind, location } => {
            let parent = if location.is_empty() { None } else { Some(location_parent(&map, &location)?) };
            let done = format!(
                "added bucket {name} type {kind}{}",
                parent.as_ref().map_or(String::new(), |p| format!(" under {p}"))
            );
            (CrushChange::AddBucket { name, kind, parent }, done)
        }
        CrushCommand::Move { name, location } => {
            let parent = location_parent(&map, &location)?;
            (CrushChange::Move { name: name.clone(), parent: parent.clone() }, format!("moved {name} to {parent}"))
        }
        CrushCommand::Link { name, location } => {
            let parent = location_parent(&map, &location)?;
            (CrushChange::Link { name: name.clone(), parent: parent.clone() }, format!("linked {name} under {parent}"))
        }
        CrushCommand::Unlink { name, parent } => (
            CrushChange::Unlink { name: name.clone(), parent: parent.clone() },
            format!("unlinked {name} from {parent}"),
        ),
        CrushCommand::Rm { name } => (CrushChange::Remove(name.clone()), format!("removed bucket {name}")),
        CrushCommand::SetDeviceClass { class, osds } => {
            let done = format!("set {} OSDs to class {class}", osds.len());
            (CrushChange::SetDeviceClass { osds, class }, done)
        }
        CrushCommand::RmDeviceClass { osds } => {
            (CrushChange::RemoveDeviceClass(osds.clone()), format!("removed the class of {} OSDs", osds.len()))
        }
        CrushCommand::ClassLs => {
            let mut classes: BTreeMap<&str, Vec<String>> = BTreeMap::new();
            for (osd, class) in &map.crush.device_classes {
                classes.entry(class).or_default().push(osd.to_string());
            }
            for (class, osds) in classes {
                println!("{class}: {}", osds.join(" "));
            }
            return Ok(());
        }
        CrushCommand::Rule(RuleCommand::CreateReplicated { name, root, kind, class }) => {
            let rule = CrushRule { root, failure_domain: kind, device_class: class };
            (CrushChange::CreateRule { name: name.clone(), rule }, format!("created rule {name}"))
        }
        CrushCommand::Rule(RuleCommand::Ls) => {
            map.crush.rule_names().iter().for_each(|name| println!("{name}"));
            return Ok(());
        }
        CrushCommand::Rule(RuleCommand::Dump { name }) => {
            let names = match name {
                Some(name) => vec![name],
                None => map.crush.rule_names(),
            };
            let mut rules = Vec::new();
            for name in names {
                let rule = map.crush.rule(&name)?;
                let pools: Vec<&str> =
                    map.pools.values().filter(|p| p.crush_rule == name).map(|p| p.name.as_str()).collect();
                rules.push(serde_json::json!({
                    "rule_name": name,
                    "root": rule.root,
                    "failure_domain": rule.failure_domain.name(),
                    "device_class": rule.device_class,
                    "pools": pools,
                }));
            }
            println!("{}", serde_json::to_string_pretty(&rules).map_err(|e| err::io(e.to_string()))?);
            return Ok(());
        }
        CrushCommand::Rule(RuleCommand::Rm { name }) => {
            (CrushChange::RemoveRule(name.clone()), format!("removed rule {name}"))
        }
    };
    let map = rados.crush(change).await?;
    println!("{done} (map epoch {})", map.epoch);
    Ok(())
}

/// The PGs that go on without their last active interval under `map` (its members lost),
/// with the lost members.
fn given_up_pgs(map: &shoal_types::OsdMap) -> Vec<(PgId, Vec<OsdId>)> {
    map.pg_active
        .keys()
        .filter_map(|pg| {
            let pool = map.pools.get(&pg.pool)?;
            let needed = pool.erasure.as_ref().map_or(1, |e| e.code.k as usize);
            let (_, lost) = shoal_pg_core::peering::required_activation(map, *pg, needed);
            (!lost.is_empty()).then_some((*pg, lost))
        })
        .collect()
}

/// Every PG of the map with its state: as its primary reported it, or `unknown`.
fn pg_states(map: &OsdMap, stats: &[PgStat]) -> Vec<(PgId, Vec<OsdId>, String)> {
    let reported: BTreeMap<PgId, &PgStat> = stats.iter().map(|s| (s.pg, s)).collect();
    let mut out = Vec::new();
    let topology = shoal_placement::Topology::from_map(map);
    for pool in map.pools.values() {
        for seed in 0..pool.pg_num {
            let pg = PgId { pool: pool.id, seed };
            let up = topology.up_osds(map, pool, pg);
            let state = match reported.get(&pg) {
                Some(s) if s.acting == up => s.state_name(),
                _ if up.is_empty() => "stale+down".to_owned(),
                _ => "unknown".to_owned(),
            };
            out.push((pg, up, state));
        }
    }
    out
}

/// Whether `osd` can stop with every PG it serves keeping `min_size` members up, with how
/// many it serves; else EBUSY naming the PGs that would stop serving.
pub fn ok_to_stop(map: &OsdMap, osd: OsdId) -> Result<String> {
    if !map.osds.contains_key(&osd) {
        return Err(err::not_found(format!("{osd} does not exist")));
    }
    let (mut served, mut blocked) = (0, Vec::new());
    let topology = shoal_placement::Topology::from_map(map);
    for pool in map.pools.values() {
        for seed in 0..pool.pg_num {
            let pg = PgId { pool: pool.id, seed };
            let acting = topology.acting(map, pool, pg);
            if !acting.contains(&osd) {
                continue;
            }
            served += 1;
            let left = acting.iter().filter(|o| **o != osd && **o != OsdId::NONE).count() as u32;
            if left < pool.min_size {
                blocked.push(format!("{pg} ({left} of min_size {} left)", pool.min_size));
            }
        }
    }
    match blocked.is_empty() {
        true => Ok(format!("{osd} is ok to stop: the {served} PGs it serves keep min_size")),
        false => Err(err::busy(format!(
            "{osd} is not ok to stop: {} PGs would stop serving: {}",
            blocked.len(),
            blocked.join(", ")
        ))),
    }
}

/// The health summary of a map and its PG states: `HEALTH_OK`, or `HEALTH_WARN` /
/// `HEALTH_ERR` with reasons.
pub fn health(map: &OsdMap, stats: &[PgStat]) -> (&'static str, Vec<String>) {
    let total = map.osds.len();
    let down = map.osds.values().filter(|o| !o.up).count();
    let out = map.osds.values().filter(|o| !o.is_in).count();
    let mut reasons = Vec::new();
    if total == 0 {
        reasons.push("no OSDs".to_owned());
        return ("HEALTH_ERR", reasons);
    }
    if down > 0 {
        reasons.push(format!("{down} osds down"));
    }
    if out > 0 {
        reasons.push(format!("{out} osds out"));
    }
    if !map.flags.is_empty() {
        reasons.push(format!("{} flag(s) set", map.flags.iter().cloned().collect::<Vec<_>>().join(",")));
    }
    let mut full = false;
    for state in [SpaceState::Full, SpaceState::BackfillFull, SpaceState::NearFull] {
        let osds: Vec<String> =
            map.osd_space.iter().filter(|(_, s)| **s == state).map(|(o, _)| o.to_string()).collect();
        if !osds.is_empty() {
            reasons.push(format!("{} {} osd(s): {}", osds.len(), state.name(), osds.join(", ")));
            full |= state == SpaceState::Full;
        }
    }
    let full_pools: Vec<&str> =
        map.full_pools.iter().filter_map(|p| map.pools.get(p)).map(|p| p.name.as_str()).collect();
    if !full_pools.is_empty() {
        reasons.push(format!("{} pool(s) at their quota: {}", full_pools.len(), full_pools.join(", ")));
    }
    let up_in = map.osds.values().filter(|o| o.up && o.is_in).count() as u32;
    for pool in map.pools.values().filter(|p| p.size > up_in) {
        reasons.push(format!("pool '{}' wants {} replicas but only {up_in} osds are up and in", pool.name, pool.size));
    }
    if up_in == 0 || full {
        return ("HEALTH_ERR", reasons);
    }
    let states = pg_states(map, stats);
    let count = |pred: &dyn Fn(&str) -> bool| states.iter().filter(|(_, _, s)| pred(s)).count();
    let inactive = count(&|s| !s.starts_with("active"));
    let degraded = count(&|s| s.contains("degraded") || s.contains("undersized"));
    let moving = count(&|s| s.contains("backfilling") || s.contains("recovering"));
    if inactive > 0 {
        reasons.push(format!("Reduced data availability: {inactive} pgs inactive, peering or unknown"));
    }
    if degraded > 0 {
        reasons.push(format!("Degraded data redundancy: {degraded} pgs degraded or undersized"));
    }
    if moving > 0 {
        reasons.push(format!("{moving} pgs recovering or backfilling"));
    }
    let inconsistent = count(&|s| s.contains("inconsistent"));
    if inconsistent > 0 {
        reasons.push(format!("Possible data damage: {inconsistent} pgs inconsistent"));
        return ("HEALTH_ERR", reasons);
    }
    (if reasons.is_empty() { "HEALTH_OK" } else { "HEALTH_WARN" }, reasons)
}

/// The objects the primaries of inconsistent PGs report as damaged, as `pg object
/// (osd.N): why` (or a note that an OSD could not say).
async fn damaged_objects(rados: &shoal_client::Rados, stats: &[PgStat]) -> Vec<String> {
    let primaries: std::collections::BTreeSet<OsdId> = stats
        .iter()
        .filter(|s| s.state.contains(&shoal_types::PgStateFlag::Inconsistent))
        .filter_map(|s| s.acting.first().copied())
        .collect();
    let mut out = Vec::new();
    for osd in primaries {
        out.extend(damaged_on(rados, osd).await);
    }
    out
}

/// The objects `osd` reports as damaged, as `pg object (osd.N): why` (or a note that it
/// could not say).
async fn damaged_on(rados: &shoal_client::Rados, osd: OsdId) -> Vec<String> {
    let listed = rados
        .tell_osd(osd, "damaged")
        .await
        .and_then(|json| serde_json::from_str::<Vec<serde_json::Value>>(&json).map_err(|e| err::io(e.to_string())));
    match listed {
        Ok(objects) => objects
            .iter()
            .map(|o| {
                let field = |name: &str| o[name].as_str().unwrap_or("?").to_owned();
                format!("pg {} object '{}' ({osd}): {}", field("pg"), field("object"), field("why"))
            })
            .collect(),
        Err(e) => vec![format!("({osd} did not list its damaged objects: {e})")],
    }
}

/// The last scrub report of every PG `osd` scrubbed, as its `scrub-status` gives them.
pub async fn scrub_reports(rados: &shoal_client::Rados, osd: OsdId) -> Result<Vec<serde_json::Value>> {
    let answer = rados.tell_osd(osd, "scrub-status").await?;
    serde_json::from_str(&answer).map_err(|e| err::io(format!("{osd}'s scrub-status: {e}")))
}

/// `osd`'s report of the last scrub of `pg` (`None` before the first).
pub async fn last_scrub(rados: &shoal_client::Rados, osd: OsdId, pg: PgId) -> Result<Option<serde_json::Value>> {
    let reports = scrub_reports(rados, osd).await?;
    Ok(reports.into_iter().find(|r| r["pg"].as_str() == Some(pg.to_string().as_str())))
}

/// What a cluster-wide command does.
enum Action {
    Status,
    PgDump,
    Tree,
    SetIn(u32, bool),
    Override(OsdId, u32),
    Crush(CrushCommand),
    OkToStop(OsdId),
    SafeToDestroy(OsdId),
    Purge(OsdId, bool),
    Lost(OsdId),
    Flag(String, bool),
    Ratio(SpaceState, u16),
    Pool(PoolCommand),
    Profile(ProfileCommand),
    Df,
    Tell(OsdId, String),
    Scrub { verb: &'static str, pg: PgId, wait: Option<u64> },
}

/// Runs `shoal status`.
pub async fn status(args: StatusArgs) -> Result<()> {
    run(&args.cluster, Action::Status).await
}

/// Runs `shoal pg …`.
pub async fn pg(command: PgCommand) -> Result<()> {
    match command {
        PgCommand::Dump(args) => run(&args.cluster, Action::PgDump).await,
        PgCommand::Scrub(args) => scrub(args, "scrub").await,
        PgCommand::DeepScrub(args) => scrub(args, "deep-scrub").await,
        PgCommand::Repair(args) => scrub(args, "repair").await,
    }
}

async fn scrub(args: ScrubArgs, verb: &'static str) -> Result<()> {
    let pg = args.pgid.parse()?;
    run(&args.cluster, Action::Scrub { verb, pg, wait: args.wait }).await
}

/// Runs `shoal pool …`.
pub async fn pool(args: PoolArgs) -> Result<()> {
    run(&args.cluster, Action::Pool(args.command)).await
}

/// Runs `shoal osd …`.
pub async fn osd(command: OsdCommand) -> Result<()> {
    match command {
        OsdCommand::Run(args) => crate::daemon::run_osd(args).await,
        OsdCommand::Pool(args) => pool(args).await,
        OsdCommand::Tree(args) => run(&args.cluster, Action::Tree).await,
        OsdCommand::Out(mark) => run(&mark.cluster, Action::SetIn(mark.id, false)).await,
        OsdCommand::In(mark) => run(&mark.cluster, Action::SetIn(mark.id, true)).await,
        OsdCommand::OkToStop(mark) => run(&mark.cluster, Action::OkToStop(OsdId(mark.id))).await,
        OsdCommand::Set(args) => run(&args.cluster, Action::Flag(args.flag, true)).await,
        OsdCommand::Unset(args) => run(&args.cluster, Action::Flag(args.flag, false)).await,
        OsdCommand::SafeToDestroy(mark) => run(&mark.cluster, Action::SafeToDestroy(OsdId(mark.id))).await,
        OsdCommand::Purge { mark, yes_i_really_mean_it, force } => {
            if !yes_i_really_mean_it {
                return Err(err::invalid(format!(
                    "purging osd.{} removes it from the cluster for good; add --yes-i-really-mean-it",
                    mark.id
                )));
            }
            run(&mark.cluster, Action::Purge(OsdId(mark.id), force)).await
        }
        OsdCommand::PgUpmapItems { cluster, pgid, osds } => {
            crate::balancer_cmd::set_items(&cluster, &pgid, crate::balancer_cmd::parse_items(&osds)?).await
        }
        OsdCommand::RmPgUpmapItems { cluster, pgid } => {
            crate::balancer_cmd::set_items(&cluster, &pgid, Vec::new()).await
        }
        OsdCommand::Lost { mark, yes_i_really_mean_it } => {
            if !yes_i_really_mean_it {
                return Err(err::invalid(format!(
                    "declaring osd.{} lost gives up every write only it holds: PGs waiting for it go on \
                     without it. If it can never come back, add --yes-i-really-mean-it",
                    mark.id
                )));
            }
            run(&mark.cluster, Action::Lost(OsdId(mark.id))).await
        }
        OsdCommand::Crush(CrushArgs { cluster, command }) => run(&cluster, Action::Crush(command)).await,
        OsdCommand::Reweight { cluster, osd, weight } => {
            if weight > 0x10000 {
                return Err(err::invalid("an override weight is between 0 and 1"));
            }
            run(&cluster, Action::Override(osd, weight)).await
        }
        OsdCommand::Df(args) => run(&args.cluster, Action::Df).await,
        OsdCommand::SetFullRatio(args) => run(&args.cluster, Action::Ratio(SpaceState::Full, args.ratio)).await,
        OsdCommand::SetBackfillfullRatio(args) => {
            run(&args.cluster, Action::Ratio(SpaceState::BackfillFull, args.ratio)).await
        }
        OsdCommand::SetNearfullRatio(args) => run(&args.cluster, Action::Ratio(SpaceState::NearFull, args.ratio)).await,
        OsdCommand::ErasureCodeProfile(args) => run(&args.cluster, Action::Profile(args.command)).await,
    }
}

async fn run(cluster: &ClusterArgs, action: Action) -> Result<()> {
    let session = cluster.open().await?;
    let result = execute(&session.rados, action).await;
    session.close();
    result
}

async fn execute(rados: &shoal_client::Rados, action: Action) -> Result<()> {
    match action {
        Action::Status => {
            let map = rados.refresh_map().await?;
            let (stats, ops_per_sec, stores) = rados.pg_report().await?;
            let (mons, leader) = rados.mon_status().await?;
            let (mut state, mut reasons) = health(&map, &stats);
            let autoscale = crate::autoscale_cmd::warnings(&crate::autoscale_cmd::rows(&map, &stats, &stores)?);
            if !autoscale.is_empty() && state == "HEALTH_OK" {
                state = "HEALTH_WARN";
            }
            reasons.extend(autoscale);
            let damaged = damaged_objects(rados, &stats).await;
            if !damaged.is_empty() {
                let s = if damaged.len() == 1 { "" } else { "s" };
                reasons.push(format!("{} damaged object{s}: {}", damaged.len(), damaged.join("; ")));
                state = "HEALTH_ERR";
            }
            if leader.is_none() {
                reasons.push("the monitors have no leader".to_owned());
                state = "HEALTH_ERR";
            }
            let mut reachable = Vec::new();
            for (id, addr) in &mons {
                if rados.probe(addr).await {
                    reachable.push(*id);
                }
            }
            let down: Vec<String> =
                mons.iter().filter(|(id, _)| !reachable.contains(id)).map(|(id, _)| format!("mon.{id}")).collect();
            if !down.is_empty() {
                reasons.push(format!("{}/{} mons down: {}", down.len(), mons.len(), down.join(",")));
                if state == "HEALTH_OK" {
                    state = "HEALTH_WARN";
                }
            }
            let up = map.osds.values().filter(|o| o.up).count();
            let is_in = map.osds.values().filter(|o| o.is_in).count();
            let pgs: u32 = map.pools.values().map(|p| p.pg_num).sum();
            println!("  cluster:");
            println!("    health: {state}");
            for r in reasons {
                println!("            {r}");
            }
            println!("  services:");
            let names: Vec<String> = reachable.iter().map(|id| id.to_string()).collect();
            let leader = leader.map_or("none".to_owned(), |l| format!("mon.{l}"));
            println!("    mon: {} daemons, quorum {} (leader {leader})", mons.len(), names.join(","));
            println!("    osd: {} osds: {up} up, {is_in} in; map epoch {}", map.osds.len(), map.epoch);
            println!("  data:");
            println!("    pools: {} pools, {pgs} pgs", map.pools.len());
            let mut counted: BTreeMap<String, usize> = BTreeMap::new();
            for (_, _, state) in pg_states(&map, &stats) {
                *counted.entry(state).or_default() += 1;
            }
            for (state, n) in counted {
                println!("             {n} {state}");
            }
            let to_recover: u64 = stats.iter().map(|s| s.objects_to_recover).sum();
            println!("  io:\n    client: {ops_per_sec} op/s");
            let mut resizing: Vec<String> = map
                .pg_resize
                .iter()
                .filter_map(|(id, r)| map.pools.get(id).map(|p| (p, r)))
                .map(|(p, r)| {
                    format!(
                        "    pool '{}' pg_num {}: pgp_num {} going to {}",
                        p.name, p.pg_num, r.pgp_num, r.pgp_num_target
                    )
                })
                .collect();
            resizing.extend(map.pg_merge.iter().filter_map(|(id, m)| {
                let step = if m.paused > 0 { "paused, merging" } else { "bringing sources to their targets" };
                map.pools
                    .get(id)
                    .map(|p| format!("    pool '{}' pg_num {} merging to {}: {step}", p.name, p.pg_num, m.pg_num))
            }));
            if to_recover > 0 || !resizing.is_empty() {
                println!("  progress:");
            }
            if to_recover > 0 {
                println!("    recovery: {to_recover} objects to copy");
            }
            for line in resizing {
                println!("{line}");
            }
        }
        Action::Scrub { verb, pg, wait } => {
            let map = rados.refresh_map().await?;
            let pool = map.pools.get(&pg.pool).ok_or_else(|| err::not_found(format!("no pool with id {}", pg.pool)))?;
            if pg.seed >= pool.pg_num {
                return Err(err::not_found(format!("pool '{}' has {} pgs: no pg {pg}", pool.name, pool.pg_num)));
            }
            let primary = shoal_placement::pg_primary(&map, pool, pg)
                .ok_or_else(|| err::again(format!("pg {pg} has no OSD up")))?;
            let before = last_scrub(rados, primary, pg).await?;
            let answer = rados.tell_osd(primary, &format!("{verb} {pg}")).await?;
            let told: serde_json::Value = serde_json::from_str(&answer).map_err(|e| err::io(e.to_string()))?;
            println!("instructing {}", told["instructing"].as_str().unwrap_or("?"));
            if let Some(secs) = wait {
                let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
                let report = loop {
                    let now = last_scrub(rados, primary, pg).await?;
                    if now.is_some() && now != before {
                        break now.unwrap_or_default();
                    }
                    if tokio::time::Instant::now() >= deadline {
                        return Err(err::timed_out(format!("pg {pg} did not finish a scrub within {secs} s")));
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                };
                let kind = if report["deep"].as_bool() == Some(true) { "deep-scrub" } else { "scrub" };
                println!(
                    "pg {pg} {kind} on {primary}: {} objects, {} inconsistent, {} repaired",
                    report["objects"], report["errors"], report["repaired"]
                );
                for problem in report["inconsistent"].as_array().into_iter().flatten().filter_map(|p| p.as_str()) {
                    println!("  inconsistent: {problem}");
                }
                let damaged = damaged_on(rados, primary).await;
                for line in damaged.iter().filter(|d| d.starts_with(&format!("pg {pg} "))) {
                    println!("  {line}");
                }
            }
        }
        Action::PgDump => {
            let map = rados.refresh_map().await?;
            let (stats, _) = rados.pg_stats().await?;
            let versions: BTreeMap<PgId, (shoal_types::EVersion, String)> =
                stats.iter().map(|s| (s.pg, (s.last_update, s.note.clone()))).collect();
            println!("{:<10} {:<12} {:<8} {:<12} {:<32} NOTE", "PG", "UP", "PRIMARY", "LAST_UPDATE", "STATE");
            for (pg, up, state) in pg_states(&map, &stats) {
                let list: Vec<String> = up.iter().map(|o| o.0.to_string()).collect();
                let primary = up.first().map_or("-".to_owned(), |o| o.0.to_string());
                let (version, note) = versions.get(&pg).cloned().unwrap_or_default();
                println!(
                    "{:<10} {:<12} {primary:<8} {:<12} {state:<32} {note}",
                    pg.to_string(),
                    format!("[{}]", list.join(",")),
                    version.to_string()
                );
            }
        }
        Action::Tree => {
            let usage = rados.osd_usage().await?;
            for line in tree(&*rados.refresh_map().await?, &usage) {
                println!("{line}");
            }
        }
        Action::Tell(id, command) => println!("{}", rados.tell_osd(id, &command).await?),
        Action::Df => {
            let map = rados.refresh_map().await?;
            let usage = rados.osd_usage().await?;
            let mut rows = Vec::new();
            for (id, osd) in map.osds.iter().filter(|(_, o)| o.up) {
                let df: serde_json::Value = serde_json::from_str(&rados.tell_osd(*id, "df").await?)
                    .map_err(|e| err::io(format!("{id} answered df with bad JSON: {e}")))?;
                let mut row = vec![("osd", serde_json::Value::from(id.to_string())), ("host", osd.host.clone().into())];
                for key in ["device_bytes", "used_bytes", "free_bytes", "unreferenced_bytes", "kv_bytes"] {
                    row.push((key, df[key].clone()));
                }
                // The whole store against its file system, as the monitor last heard it.
                let u = usage.get(id).copied().unwrap_or_default();
                let percent = f64::from(u.basis_points()) / 100.0;
                let state = map.osd_space.get(id).map_or("", |s| s.name());
                row.extend([
                    ("store_bytes", u.used.into()),
                    ("available_bytes", u.available.into()),
                    ("use_percent", percent.into()),
                    ("space", state.into()),
                ]);
                rows.push(row);
            }
            crate::bench::print_rows(&rows, false);
        }
        Action::SetIn(id, is_in) => {
            let map = rados.osd_set_in(OsdId(id), is_in).await?;
            println!("marked {} osd.{id} (map epoch {})", if is_in { "in" } else { "out" }, map.epoch);
        }
        Action::OkToStop(osd) => println!("{}", ok_to_stop(&*rados.refresh_map().await?, osd)?),
        Action::SafeToDestroy(osd) => {
            let map = rados.refresh_map().await?;
            let (stats, _) = rados.pg_stats().await?;
            println!("{}", shoal_mon::lifecycle::safe_to_destroy(&map, &stats, osd)?);
        }
        Action::Flag(flag, on) => {
            let map = rados.osd_set_flag(&flag, on).await?;
            println!("{flag} is {} (map epoch {})", if on { "set" } else { "unset" }, map.epoch);
        }
        Action::Ratio(state, basis_points) => {
            let map = rados.space(SpaceChange::SetRatio { state, basis_points }).await?;
            println!("{} (map epoch {})", map.full_ratios.describe(), map.epoch);
        }
        Action::Pool(PoolCommand::SetQuota { name, key, value }) => {
            let limit = shoal_types::space::parse_bytes(&value)
                .ok_or_else(|| err::invalid(format!("quota '{value}' is not a count or size like 1000, 10G")))?;
            let (max_objects, max_bytes) = match key.as_str() {
                "max_objects" => (Some(limit), None),
                "max_bytes" => (None, Some(limit)),
                _ => return Err(err::invalid(format!("'{key}' is not a quota: max_objects or max_bytes"))),
            };
            let map = rados.space(SpaceChange::PoolQuota { pool: name.clone(), max_objects, max_bytes }).await?;
            println!("set-quota {key} = {limit} for pool '{name}' (map epoch {})", map.epoch);
        }
        Action::Pool(PoolCommand::GetQuota { name }) => {
            let map = rados.refresh_map().await?;
            let id = map.pool_named(&name)?.id;
            let quota = map.pool_quotas.get(&id).copied().unwrap_or_default();
            let (stats, _) = rados.pg_stats().await?;
            let (objects, bytes) =
                stats.iter().filter(|s| s.pg.pool == id).fold((0, 0), |(o, b), s| (o + s.objects, b + s.bytes));
            let limit = |n: u64| if n == 0 { "N/A".to_owned() } else { n.to_string() };
            println!("quotas for pool '{name}':");
            println!("  max objects: {} (current {objects})", limit(quota.max_objects));
            println!("  max bytes  : {} (current {bytes})", limit(quota.max_bytes));
            if map.full_pools.contains(&id) {
                println!("  the pool is at its quota: writes get EDQUOT");
            }
        }
        Action::Purge(osd, force) => {
            let map = rados.osd_purge(osd, force).await?;
            println!("purged {osd} (map epoch {})", map.epoch);
        }
        Action::Lost(osd) => {
            let map = rados.osd_lost(osd).await?;
            println!("marked {osd} lost (map epoch {})", map.epoch);
            let given_up = given_up_pgs(&map);
            if given_up.is_empty() {
                println!("no PG had its last active interval only on lost OSDs");
            } else {
                println!("PGs going on without their last active interval (its writes only lost OSDs held are gone):");
                for (pg, lost) in given_up {
                    let lost = lost.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
                    println!("  {pg}: {lost}");
                }
            }
        }
        Action::Override(osd, reweight) => {
            warn_if_erasure_coded(&*rados.refresh_map().await?);
            let map = rados.crush(CrushChange::Reweight { osd, reweight }).await?;
            println!("reweighted {osd} override to {:.4} (map epoch {})", f64::from(reweight) / 65536.0, map.epoch);
        }
        Action::Crush(command) => crush(rados, command).await?,
        Action::Pool(PoolCommand::Set { name, key, value }) => {
            let count =
                || value.parse::<u32>().map_err(|_| err::invalid(format!("{key} must be a number, got '{value}'")));
            let map = match key.as_str() {
                "crush_rule" => {
                    rados.crush(CrushChange::SetPoolRule { pool: name.clone(), rule: value.clone() }).await?
                }
                "pg_num" => rados.pool_set_pg_num(&name, count()?).await?,
                "pgp_num" => rados.pool_set_pgp_num(&name, count()?).await?,
                _ => match crate::autoscale_cmd::change(&name, &key, &value) {
                    Some(change) => rados.pool_autoscale(change?).await?,
                    None => {
                        return Err(err::invalid(format!(
                            "pool parameter '{key}' cannot be set (crush_rule, pg_num, pgp_num, \
                             pg_autoscale_mode and target_size_ratio can)"
                        )));
                    }
                },
            };
            println!("set pool '{name}' {key} to {value} (map epoch {})", map.epoch);
        }
        Action::Pool(PoolCommand::Create {
            name,
            size,
            min_size,
            pg_num,
            erasure,
            allow_ec_overwrites,
            autoscale_mode,
        }) => {
            let mode = autoscale_mode.map(|m| AutoscaleMode::parse(&m)).transpose()?;
            let pool = match erasure {
                Some(profile) => {
                    let allow_overwrites = allow_ec_overwrites;
                    let spec = ErasurePoolSpec { name, pg_num, profile, min_size, allow_overwrites };
                    rados.pool_create_erasure(spec).await?
                }
                None => {
                    let min_size = min_size.unwrap_or(size - size / 2);
                    rados.pool_create(PoolSpec { name, pg_num, size, min_size }).await?
                }
            };
            let change = AutoscaleChange { pool: pool.name.clone(), mode, target_size_ratio: None };
            let map = match mode {
                Some(_) => rados.pool_autoscale(change).await?,
                None => rados.refresh_map().await?,
            };
            println!("pool '{}' created ({})", pool.name, describe_pool(&map, &pool));
        }
        Action::Pool(PoolCommand::Ls) => {
            let map = rados.refresh_map().await?;
            for p in map.pools.values() {
                println!("{} {}", p.name, describe_pool(&map, p));
            }
        }
        Action::Pool(PoolCommand::AutoscaleStatus) => {
            let map = rados.refresh_map().await?;
            let (stats, _, stores) = rados.pg_report().await?;
            crate::autoscale_cmd::print_status(&crate::autoscale_cmd::rows(&map, &stats, &stores)?);
        }
        Action::Profile(ProfileCommand::Set { name, settings, force }) => {
            rados.erasure_profile_set(&name, ErasureProfile::parse(&settings)?, force).await?;
            println!("erasure-code profile '{name}' set");
        }
        Action::Profile(ProfileCommand::Get { name }) => {
            for (key, value) in rados.refresh_map().await?.erasure_profile(&name)?.settings() {
                println!("{key}={value}");
            }
        }
        Action::Profile(ProfileCommand::Ls) => {
            for name in rados.refresh_map().await?.erasure_profile_names() {
                println!("{name}");
            }
        }
        Action::Profile(ProfileCommand::Rm { name }) => {
            rados.erasure_profile_rm(&name).await?;
            println!("erasure-code profile '{name}' removed");
        }
        Action::Pool(PoolCommand::Rm { name }) => {
            rados.pool_delete(&name).await?;
            println!("pool '{name}' removed");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::{OsdEntry, PgStateFlag, Pool, PoolId};

    fn osd(up: bool, is_in: bool) -> OsdEntry {
        OsdEntry { addr: "a".into(), host: "h".into(), weight: 0x10000, up, is_in }
    }

    #[test]
    fn health_names_what_is_wrong() {
        let mut map = OsdMap::default();
        assert_eq!(health(&map, &[]).0, "HEALTH_ERR");
        map.osds.insert(OsdId(0), osd(true, true));
        map.osds.insert(OsdId(1), osd(true, true));
        assert_eq!(health(&map, &[]), ("HEALTH_OK", vec![]));
        map.flags.extend(["noin".to_owned(), "noout".to_owned()]);
        assert_eq!(health(&map, &[]), ("HEALTH_WARN", vec!["noin,noout flag(s) set".to_owned()]));
        map.flags.clear();
        map.osd_space.insert(OsdId(1), SpaceState::NearFull);
        assert_eq!(health(&map, &[]), ("HEALTH_WARN", vec!["1 nearfull osd(s): osd.1".to_owned()]));
        map.osd_space.insert(OsdId(0), SpaceState::Full);
        let expected = vec!["1 full osd(s): osd.0".to_owned(), "1 nearfull osd(s): osd.1".to_owned()];
        assert_eq!(health(&map, &[]), ("HEALTH_ERR", expected), "a full OSD stops writes: an error");
        map.osd_space.clear();
        map.pools.insert(
            PoolId(1),
            Pool {
                id: PoolId(1),
                name: "p".into(),
                pg_num: 1,
                size: 3,
                min_size: 2,
                erasure: None,
                crush_rule: shoal_types::crush::DEFAULT_RULE.into(),
            },
        );
        let (state, reasons) = health(&map, &[]);
        assert_eq!(state, "HEALTH_WARN");
        assert!(reasons[0].contains("wants 3 replicas"), "{reasons:?}");
        assert!(reasons[1].contains("1 pgs inactive"), "an unreported PG is not healthy: {reasons:?}");
        let pg = PgId { pool: PoolId(1), seed: 0 };
        let acting = shoal_placement::pg_up_osds(&map, &map.pools[&PoolId(1)], pg);
        let stat = PgStat {
            pg,
            state: vec![PgStateFlag::Active, PgStateFlag::Undersized, PgStateFlag::Degraded],
            epoch: 0,
            acting,
            last_update: Default::default(),
            objects_to_recover: 0,
            note: String::new(),
            client_ops: 0,
            objects: 0,
            bytes: 0,
        };
        let (_, reasons) = health(&map, &[stat]);
        assert!(reasons.iter().any(|r| r.contains("1 pgs degraded")), "{reasons:?}");
        map.osds.insert(OsdId(1), osd(false, false));
        let (_, reasons) = health(&map, &[]);
        assert!(reasons.iter().any(|r| r == "1 osds down") && reasons.iter().any(|r| r == "1 osds out"), "{reasons:?}");
    }

    #[test]
    fn an_osd_is_ok_to_stop_while_its_pgs_keep_min_size() {
        let mut map = OsdMap::default();
        for id in 0..3 {
            map.osds.insert(OsdId(id), OsdEntry { host: format!("h{id}"), ..osd(true, true) });
        }
        map.pools.insert(
            PoolId(1),
            Pool {
                id: PoolId(1),
                name: "p".into(),
                pg_num: 4,
                size: 3,
                min_size: 2,
                erasure: None,
                crush_rule: shoal_types::crush::DEFAULT_RULE.into(),
            },
        );
        assert!(ok_to_stop(&map, OsdId(0)).unwrap().contains("the 4 PGs it serves keep min_size"));
        map.osds.get_mut(&OsdId(1)).unwrap().up = false;
        let e = ok_to_stop(&map, OsdId(0)).unwrap_err();
        assert_eq!(e.errno, shoal_types::Errno::Busy);
        assert!(
            e.message.contains("4 PGs would stop serving") && e.message.contains("1.0 (1 of min_size 2 left)"),
            "{e}"
        );
        assert_eq!(ok_to_stop(&map, OsdId(9)).unwrap_err().errno, shoal_types::Errno::NotFound);
    }

    #[test]
    fn the_tree_shows_each_level_with_weights_classes_and_states() {
        let mut map = OsdMap::default();
        for id in 0..3 {
            map.osds.insert(OsdId(id), OsdEntry { host: format!("h{}", id / 2), ..osd(id != 2, id != 1) });
        }
        let rack = CrushChange::AddBucket { name: "r1".into(), kind: BucketType::Rack, parent: Some("default".into()) };
        rack.apply(&mut map).unwrap();
        let parent = location_parent(&map, &["root=default".into(), "rack=r1".into()]).unwrap();
        assert_eq!(parent, "r1", "the lowest level given is the parent");
        assert!(location_parent(&map, &["host=r1".into()]).unwrap_err().message.contains("'r1' is a rack, not a host"));
        assert!(location_parent(&map, &["r1".into()]).is_err());
        CrushChange::Move { name: "h0".into(), parent }.apply(&mut map).unwrap();
        CrushChange::SetDeviceClass { osds: vec![OsdId(1)], class: "ssd".into() }.apply(&mut map).unwrap();
        CrushChange::Reweight { osd: OsdId(0), reweight: 0x8000 }.apply(&mut map).unwrap();
        let usage = BTreeMap::from([(OsdId(0), StoreUsage { used: 1, available: 3 })]);
        let lines = tree(&map, &usage);
        let names: Vec<String> =
            lines[1..].iter().map(|l| l[25..].chars().take(28).collect::<String>().trim_end().to_owned()).collect();
        assert_eq!(
            names,
            [
                "root default",
                "    host h1",
                "        osd.2",
                "    rack r1",
                "        host h0",
                "            osd.0",
                "            osd.1"
            ],
            "{lines:#?}"
        );
        assert!(lines[0].contains("REWEIGHT") && lines[0].ends_with("%USE"), "{}", lines[0]);
        assert!(lines[1].contains("3.00000"), "the root weighs its three OSDs: {}", lines[1]);
        assert!(lines[6].contains("up      0.50000") && lines[6].ends_with(" 25.00"), "{}", lines[6]);
        assert!(lines[1].ends_with(" 25.00") && lines[3].ends_with(" -"), "{lines:#?}");
        assert!(lines[7].contains("ssd") && lines[7].contains("up out"), "{}", lines[7]);
        assert!(lines[3].contains("down"), "{}", lines[3]);
    }
}
