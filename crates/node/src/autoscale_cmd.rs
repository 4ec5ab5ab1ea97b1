//! `shoal osd pool autoscale-status`, `osd pool set POOL pg_autoscale_mode|target_size_ratio`
//! and the autoscaler's health warnings: what [`shoal_placement::autoscale`] proposes for
//! each pool from the OSDs' reports.

use crate::config::Config;
use shoal_placement::autoscale::{AutoscalePolicy, Proposal, Usage, proposals};
use shoal_types::autoscale::{AutoscaleChange, AutoscaleMode};
use shoal_types::space::{StoreUsage, WHOLE};
use shoal_types::{OsdId, OsdMap, PgStat, Result, err};
use std::collections::BTreeMap;

/// The proposal's knobs as the central configuration sets them for monitors.
fn policy(map: &OsdMap) -> Result<AutoscalePolicy> {
    Ok(Config::from_settings(&map.config_for("mon"))?.autoscaler_policy()?.proposal)
}

/// Every pool's proposal from the monitors' collected reports: the PG states and each
/// OSD's store usage.
pub fn rows(map: &OsdMap, stats: &[PgStat], stores: &BTreeMap<OsdId, StoreUsage>) -> Result<Vec<Proposal>> {
    Ok(proposals(map, &Usage::from_reports(stats, stores.iter()), &policy(map)?))
}

/// The health warnings of pools in mode `warn` whose `pg_num` is far from the proposal
/// (Ceph's `POOL_TOO_FEW_PGS` and `POOL_TOO_MANY_PGS`).
pub fn warnings(rows: &[Proposal]) -> Vec<String> {
    let mut out = Vec::new();
    for (few, what) in [(true, "too few"), (false, "too many")] {
        let pools: Vec<String> = rows
            .iter()
            .filter(|r| r.mode == AutoscaleMode::Warn)
            .filter_map(|r| Some((r, r.new_pg_num?)))
            .filter(|(r, new)| (*new > r.pg_num) == few)
            .map(|(r, new)| format!("{} ({}, should have {new})", r.name, r.pg_num))
            .collect();
        if !pools.is_empty() {
            out.push(format!("{} pool(s) have {what} placement groups: {}", pools.len(), pools.join(", ")));
        }
    }
    out
}

/// The change `osd pool set POOL KEY VALUE` makes, if `key` is an autoscaler setting.
pub fn change(pool: &str, key: &str, value: &str) -> Option<Result<AutoscaleChange>> {
    let change = |mode, target_size_ratio| AutoscaleChange { pool: pool.to_owned(), mode, target_size_ratio };
    match key {
        "pg_autoscale_mode" => Some(AutoscaleMode::parse(value).map(|mode| change(Some(mode), None))),
        "target_size_ratio" => Some(match value.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(change(None, Some((r * f64::from(WHOLE)).round() as u16))),
            _ => Err(err::invalid(format!("target_size_ratio is a number between 0 and 1, got '{value}'"))),
        }),
        _ => None,
    }
}

/// Prints `osd pool autoscale-status`: one row per pool.
pub fn print_status(rows: &[Proposal]) {
    println!(
        "{:<24} {:>12} {:>5} {:>14} {:>7} {:>12} {:>15} {:>7} {:>11} {:>9}",
        "POOL",
        "SIZE",
        "RATE",
        "RAW CAPACITY",
        "RATIO",
        "TARGET RATIO",
        "EFFECTIVE RATIO",
        "PG_NUM",
        "NEW PG_NUM",
        "AUTOSCALE"
    );
    for r in rows {
        let new = match r.new_pg_num {
            Some(n) if n < r.pg_num && r.mode == AutoscaleMode::On => format!("{n} (merge)"),
            Some(n) => n.to_string(),
            None => String::new(),
        };
        let target = if r.target_ratio > 0.0 { format!("{:.4}", r.target_ratio) } else { String::new() };
        println!(
            "{:<24} {:>12} {:>5.1} {:>14} {:>7.4} {:>12} {:>15.4} {:>7} {:>11} {:>9}",
            r.name,
            r.bytes,
            r.rate,
            r.raw_capacity,
            r.ratio,
            target,
            r.effective_ratio,
            r.pg_num,
            new,
            r.mode.name()
        );
    }
    if rows.iter().any(|r| r.mode == AutoscaleMode::On && r.new_pg_num.is_some_and(|n| n < r.pg_num)) {
        println!("(merge): the autoscaler does not lower pg_num by itself: `osd pool set POOL pg_num N` merges");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_types::PoolId;

    fn row(name: &str, pg_num: u32, new_pg_num: Option<u32>, mode: AutoscaleMode) -> Proposal {
        Proposal {
            pool: PoolId(1),
            name: name.into(),
            bytes: 0,
            rate: 3.0,
            raw_capacity: 0,
            ratio: 0.0,
            target_ratio: 0.0,
            effective_ratio: 0.0,
            pg_num,
            new_pg_num,
            mode,
        }
    }

    #[test]
    fn only_pools_in_warn_mode_far_from_their_proposal_warn() {
        let rows = [
            row("few", 8, Some(128), AutoscaleMode::Warn),
            row("many", 512, Some(8), AutoscaleMode::Warn),
            row("right", 8, None, AutoscaleMode::Warn),
            row("acted", 8, Some(128), AutoscaleMode::On),
            row("ignored", 8, Some(128), AutoscaleMode::Off),
        ];
        assert_eq!(
            warnings(&rows),
            [
                "1 pool(s) have too few placement groups: few (8, should have 128)",
                "1 pool(s) have too many placement groups: many (512, should have 8)"
            ]
        );
    }

    #[test]
    fn settings_parse_or_say_what_is_wrong() {
        let mode = change("p", "pg_autoscale_mode", "warn").unwrap().unwrap();
        assert_eq!(mode.mode, Some(AutoscaleMode::Warn));
        let ratio = change("p", "target_size_ratio", "0.2").unwrap().unwrap();
        assert_eq!(ratio.target_size_ratio, Some(2_000));
        for (key, value, why) in [
            ("pg_autoscale_mode", "auto", "off, warn or on"),
            ("target_size_ratio", "2", "between 0 and 1"),
            ("target_size_ratio", "lots", "'lots'"),
        ] {
            assert!(change("p", key, value).unwrap().unwrap_err().message.contains(why), "{key} {value}");
        }
        assert!(change("p", "size", "3").is_none());
    }
}
