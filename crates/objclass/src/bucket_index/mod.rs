//! `bucket_index`: one shard of a bucket's index, as Ceph's `cls_rgw`. Each object key of the
//! shard is an omap entry holding an [`IndexEntry`]; the omap header holds the shard's
//! [`IndexStats`], changed in the same transaction as the entries so they never disagree.
//!
//! Every change carries an *order* (the writer's timestamp and upload tag): an entry is only
//! replaced or removed by a change of a higher order, so concurrent writers of one key end
//! with the index naming the same winner as the head object, whatever the arrival order.
//!
//! A change may carry opaque *events* (bucket notifications): they are appended to the
//! shard's event log in the change's transaction, so an event exists exactly when its
//! change happened, in the order the shard applied the changes. Log keys start with a byte
//! no UTF-8 key has and sort after every object key; `log_list` reads the log in order and
//! `log_trim` removes what a reader has moved elsewhere.
//!
//! Versioned buckets keep one *version record* per version besides the plain entry, which
//! always mirrors the key's newest version unless that is a delete marker (so listing
//! current objects costs the same as in an unversioned bucket): see [`versions`]. An
//! unversioned write is a write of the key's `null` version, through the same code.

pub mod lock;
mod records;
pub mod versions;

use crate::registry::versioned_v1;
use crate::{ClassRegistry, MethodContext, MethodFlags, decode_input, decode_stored};
use bytes::Bytes;
pub use lock::{LockMode, ObjectLock, Retention};
pub use records::{ChangeOutput, Condition, IndexEntry, IndexStats, LinkInput, Segment};
use records::{LOG, RECORDS, SKIP, append_events, load_entry, load_stats, log_key, save_stats};
use serde::{Deserialize, Serialize};
use shoal_types::{Result, Versioned, err};
pub use versions::{
    GetVersionInput, GetVersionOutput, ListVersionsInput, ListVersionsOutput, SetLockInput, UnlinkVersionInput,
    VersionItem, Which, version_id_of,
};

/// The class name.
pub const CLASS: &str = "bucket_index";

/// Input of `bucket_index.unlink`: remove the key's null version (its only version in an
/// unversioned bucket).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnlinkInput {
    /// Object key.
    pub key: String,
    /// The remover's order: a stored entry of a higher order stays.
    pub order: String,
    /// Events logged with the change, whether or not there was an entry to remove.
    pub events: Vec<Bytes>,
}

/// Input of `bucket_index.log`: log events without changing any entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogInput {
    /// The events, in order.
    pub events: Vec<Bytes>,
}

/// Input of `bucket_index.log_list`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogListInput {
    /// Only events after this sequence number; `None` starts at the oldest.
    pub after: Option<u64>,
    /// At most this many events (capped at 1000).
    pub max: u32,
}

/// Output of `bucket_index.log_list`: the oldest logged events.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogListOutput {
    /// (sequence number, event) in log order.
    pub events: Vec<(u64, Bytes)>,
    /// More events follow.
    pub more: bool,
}

/// Input of `bucket_index.log_trim`: events to remove (unknown ones are ignored).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogTrimInput {
    /// Sequence numbers as `log_list` gave them.
    pub seqs: Vec<u64>,
}

/// Input of `bucket_index.list`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListInput {
    /// Only keys after this one; with a delimiter, a marker that is a common prefix skips
    /// every key under it.
    pub start_after: String,
    /// Only keys with this prefix.
    pub prefix: String,
    /// Roll keys up to the first delimiter after the prefix into common prefixes.
    pub delimiter: String,
    /// Most items (entries plus common prefixes) returned.
    pub max: u32,
}

/// One listed item.
// Nearly every item is an entry: boxing it would add an allocation per item.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ListItem {
    /// An object and its entry.
    Entry(String, IndexEntry),
    /// A common prefix (ends with the delimiter).
    Prefix(String),
}

impl ListItem {
    /// The key or prefix, which orders the listing.
    pub fn name(&self) -> &str {
        match self {
            ListItem::Entry(key, _) | ListItem::Prefix(key) => key,
        }
    }
}

/// Output of `bucket_index.list`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListOutput {
    /// Items in name order.
    pub items: Vec<ListItem>,
    /// More items follow the last one.
    pub more: bool,
}

impl Versioned for ListOutput {
    const NAME: &'static str = "bucket_index.list output";
    /// Version 3: entries of version 3.
    const VERSION: u8 = 3;
}

versioned_v1! {
    UnlinkInput => "bucket_index.unlink input",
    ListInput => "bucket_index.list input",
    LogInput => "bucket_index.log input",
    LogListInput => "bucket_index.log_list input",
    LogListOutput => "bucket_index.log_list output",
    LogTrimInput => "bucket_index.log_trim input",
}

/// Registers the class's methods.
pub fn register(r: &mut ClassRegistry) {
    r.register(CLASS, "init", MethodFlags::RDWR, init);
    r.register(CLASS, "link", MethodFlags::RDWR, link);
    r.register(CLASS, "unlink", MethodFlags::RDWR, unlink);
    r.register(CLASS, "list", MethodFlags::RD, list);
    r.register(CLASS, "stats", MethodFlags::RD, stats);
    r.register(CLASS, "log", MethodFlags::RDWR, log);
    r.register(CLASS, "log_list", MethodFlags::RD, log_list);
    r.register(CLASS, "log_trim", MethodFlags::RDWR, log_trim);
    r.register(CLASS, "get_version", MethodFlags::RD, versions::get_version);
    r.register(CLASS, "unlink_version", MethodFlags::RDWR, versions::unlink_version);
    r.register(CLASS, "list_versions", MethodFlags::RD, versions::list_versions);
    r.register(CLASS, "set_lock", MethodFlags::RDWR, versions::set_lock);
}

/// Most events one `log_list` returns.
const MAX_LOG_LIST: u32 = 1000;

fn init(ctx: &mut MethodContext<'_>, _input: &[u8]) -> Result<Vec<u8>> {
    if ctx.object.exists()? {
        return Err(err::exists("bucket index shard exists"));
    }
    ctx.object.create(true)?;
    save_stats(ctx, IndexStats::default())?;
    Ok(Vec::new())
}

fn link(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let LinkInput { key, entry, events, condition, fresh } = decode_input("bucket_index.link", input)?;
    versions::check_key(&key, "bucket_index.link")?;
    if fresh && let Some(newest) = versions::newest_order(ctx, &key)?.filter(|newest| *newest > entry.order) {
        return Err(err::stale_epoch(format!(
            "bucket_index.link: '{key}' has a version at {newest}, newer than {}",
            entry.order
        )));
    }
    if let Some(condition) = condition {
        let current = load_entry(ctx, &key)?;
        let holds = match &condition {
            Condition::Absent => current.is_none(),
            Condition::ETag(etag) => current.is_some_and(|c| c.etag == *etag),
            Condition::Order(order) => current.is_some_and(|c| c.order == *order),
        };
        if !holds {
            return Err(err::canceled(format!("bucket_index.link: the current object of '{key}' fails {condition:?}")));
        }
    }
    let mut stats = load_stats(ctx)?;
    let logged = append_events(ctx, &mut stats, events)?;
    let out = versions::link(ctx, &mut stats, &key, entry)?;
    if out.applied || logged {
        save_stats(ctx, stats)?;
    }
    Ok(out.encode())
}

fn unlink(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let UnlinkInput { key, order, events } = decode_input("bucket_index.unlink", input)?;
    versions::check_key(&key, "bucket_index.unlink")?;
    let mut stats = load_stats(ctx)?;
    let logged = append_events(ctx, &mut stats, events)?;
    let out = versions::unlink_null(ctx, &mut stats, &key, Some(&order))?;
    if out.applied || logged {
        save_stats(ctx, stats)?;
    }
    Ok(out.encode())
}

fn list(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let ListInput { start_after, prefix, delimiter, max } = decode_input("bucket_index.list", input)?;
    let max = max.clamp(1, 1000) as usize;
    // A marker that is a common prefix of this listing resumes after every key under it.
    let marker_is_common_prefix =
        versions::common_prefix(&start_after, &prefix, &delimiter) == Some(start_after.as_str());
    let mut cursor = start_after.into_bytes();
    if marker_is_common_prefix {
        cursor.push(SKIP);
    }
    let mut items = Vec::new();
    loop {
        let (page, page_more) = ctx.object.omap_get_vals(&cursor, prefix.as_bytes(), max + 1)?;
        let mut skipped = false;
        for (key, value) in page {
            if key.first().is_some_and(|&b| b >= RECORDS) {
                // The shard's own records follow every object key.
                return Ok(ListOutput { items, more: false }.encode());
            }
            if items.len() == max {
                return Ok(ListOutput { items, more: true }.encode());
            }
            let name = String::from_utf8(key.to_vec()).map_err(|_| err::io("bucket index key is not UTF-8"))?;
            match versions::common_prefix(&name, &prefix, &delimiter).map(str::to_owned) {
                Some(common) => {
                    cursor = common.clone().into_bytes();
                    cursor.push(SKIP);
                    items.push(ListItem::Prefix(common));
                    skipped = true;
                    break;
                }
                None => {
                    cursor = key.to_vec();
                    items.push(ListItem::Entry(name, decode_stored("bucket index entry", &value)?));
                }
            }
        }
        if !skipped && !page_more {
            return Ok(ListOutput { items, more: false }.encode());
        }
        if items.len() == max {
            // Whether anything follows is only known by looking once more.
            let (next, _) = ctx.object.omap_get_vals(&cursor, prefix.as_bytes(), 1)?;
            let more = next.first().is_some_and(|(key, _)| key.first().is_some_and(|&b| b < RECORDS));
            return Ok(ListOutput { items, more }.encode());
        }
    }
}

fn stats(ctx: &mut MethodContext<'_>, _input: &[u8]) -> Result<Vec<u8>> {
    if !ctx.object.exists()? {
        return Err(err::not_found("no such bucket index shard"));
    }
    Ok(load_stats(ctx)?.encode())
}

fn log(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let LogInput { events } = decode_input("bucket_index.log", input)?;
    let mut stats = load_stats(ctx)?;
    if append_events(ctx, &mut stats, events)? {
        save_stats(ctx, stats)?;
    }
    Ok(Vec::new())
}

fn log_list(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let LogListInput { after, max } = decode_input("bucket_index.log_list", input)?;
    if !ctx.object.exists()? {
        return Err(err::not_found("no such bucket index shard"));
    }
    let start = after.map_or(Bytes::copy_from_slice(&LOG), log_key);
    let (rows, more) = ctx.object.omap_get_vals(&start, &LOG, max.clamp(1, MAX_LOG_LIST) as usize)?;
    let events = rows
        .into_iter()
        .map(|(k, v)| match <[u8; 8]>::try_from(&k[LOG.len()..]) {
            Ok(seq) => Ok((u64::from_be_bytes(seq), v)),
            Err(_) => Err(err::io(format!("corrupt bucket index event log key {k:02x?}"))),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(LogListOutput { events, more }.encode())
}

fn log_trim(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let LogTrimInput { seqs } = decode_input("bucket_index.log_trim", input)?;
    let keys: Vec<Bytes> = seqs.into_iter().map(log_key).collect();
    if !keys.is_empty() {
        ctx.object.omap_rm_keys(&keys)?;
    }
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemObject;
    use shoal_types::Errno;

    fn entry(size: u64, order: &str) -> IndexEntry {
        IndexEntry { size, order: order.into(), ..Default::default() }
    }

    fn link_at(o: &mut MemObject, key: &str, size: u64, order: &str) -> ChangeOutput {
        let input = LinkInput { key: key.into(), entry: entry(size, order), ..Default::default() };
        ChangeOutput::decode(&o.call(CLASS, "link", 1, 0, &input.encode()).unwrap()).unwrap()
    }

    fn stats_of(o: &mut MemObject) -> IndexStats {
        IndexStats::decode(&o.call(CLASS, "stats", 1, 0, &[]).unwrap()).unwrap()
    }

    fn list_of(o: &mut MemObject, start_after: &str, prefix: &str, delimiter: &str, max: u32) -> (Vec<String>, bool) {
        let input =
            ListInput { start_after: start_after.into(), prefix: prefix.into(), delimiter: delimiter.into(), max };
        let out = ListOutput::decode(&o.call(CLASS, "list", 1, 0, &input.encode()).unwrap()).unwrap();
        (out.items.iter().map(|i| i.name().to_owned()).collect(), out.more)
    }

    #[test]
    fn newest_order_wins_and_stats_follow() {
        let mut o = MemObject::default();
        o.call(CLASS, "init", 1, 0, &[]).unwrap();
        assert_eq!(o.call(CLASS, "init", 1, 0, &[]).unwrap_err().errno, Errno::Exists);
        assert!(link_at(&mut o, "k", 10, "2").applied);
        let stale = link_at(&mut o, "k", 99, "1");
        assert!(!stale.applied, "an older writer does not replace a newer entry");
        assert_eq!(stale.previous.unwrap().size, 10);
        let newer = link_at(&mut o, "k", 5, "3");
        assert_eq!((newer.applied, newer.previous.map(|e| e.size)), (true, Some(10)));
        link_at(&mut o, "j", 7, "1");
        assert_eq!(stats_of(&mut o), IndexStats { entries: 2, bytes: 12, next_event: 0, ..Default::default() });
        let unlink = |o: &mut MemObject, order: &str| {
            let input = UnlinkInput { key: "k".into(), order: order.into(), events: Vec::new() };
            ChangeOutput::decode(&o.call(CLASS, "unlink", 1, 0, &input.encode()).unwrap()).unwrap()
        };
        assert!(!unlink(&mut o, "2").applied, "an older delete keeps the newer entry");
        assert!(unlink(&mut o, "4").applied);
        assert_eq!(unlink(&mut o, "5"), ChangeOutput { applied: false, previous: None });
        assert_eq!(stats_of(&mut o), IndexStats { entries: 1, bytes: 7, next_event: 0, ..Default::default() });
    }

    #[test]
    fn list_rolls_up_common_prefixes_and_resumes_after_them() {
        let mut o = MemObject::default();
        o.call(CLASS, "init", 1, 0, &[]).unwrap();
        for key in ["a/1", "a/2", "a/b/3", "b", "c/1", "d"] {
            link_at(&mut o, key, 1, "1");
        }
        assert_eq!(list_of(&mut o, "", "", "/", 10), (vec!["a/".into(), "b".into(), "c/".into(), "d".into()], false));
        assert_eq!(list_of(&mut o, "", "", "/", 2), (vec!["a/".into(), "b".into()], true));
        assert_eq!(list_of(&mut o, "a/", "", "/", 10).0, vec!["b", "c/", "d"], "a prefix marker skips its keys");
        assert_eq!(list_of(&mut o, "", "a/", "/", 10).0, vec!["a/1", "a/2", "a/b/"]);
        assert_eq!(list_of(&mut o, "a/1", "a/", "", 10).0, vec!["a/2", "a/b/3"]);
        assert_eq!(list_of(&mut o, "c/", "", "/", 1), (vec!["d".into()], false));
    }

    fn log_of(o: &mut MemObject, max: u32) -> (Vec<(u64, String)>, bool) {
        let out = o.call(CLASS, "log_list", 1, 0, &LogListInput { after: None, max }.encode()).unwrap();
        let out = LogListOutput::decode(&out).unwrap();
        (out.events.into_iter().map(|(seq, e)| (seq, String::from_utf8(e.to_vec()).unwrap())).collect(), out.more)
    }

    #[test]
    fn changes_log_their_events_in_order_whether_or_not_they_apply() {
        let mut o = MemObject::default();
        o.call(CLASS, "init", 1, 0, &[]).unwrap();
        let events = |names: &[&str]| names.iter().map(|n| Bytes::from(n.to_string())).collect::<Vec<_>>();
        let link = |o: &mut MemObject, order: &str, names: &[&str]| {
            let input =
                LinkInput { key: "k".into(), entry: entry(1, order), events: events(names), ..Default::default() };
            ChangeOutput::decode(&o.call(CLASS, "link", 1, 0, &input.encode()).unwrap()).unwrap()
        };
        assert!(link(&mut o, "2", &["put2a", "put2b"]).applied);
        assert!(!link(&mut o, "1", &["put1"]).applied, "a losing writer's event is logged all the same");
        let unlink = UnlinkInput { key: "gone".into(), order: "9".into(), events: events(&["rm-gone"]) };
        o.call(CLASS, "unlink", 1, 0, &unlink.encode()).unwrap();
        o.call(CLASS, "log", 1, 0, &LogInput { events: events(&["raced"]) }.encode()).unwrap();
        let expect = |seqs: &[u64], names: &[&str]| -> Vec<(u64, String)> {
            seqs.iter().zip(names).map(|(s, n)| (*s, n.to_string())).collect()
        };
        assert_eq!(
            log_of(&mut o, 10),
            (expect(&[0, 1, 2, 3, 4], &["put2a", "put2b", "put1", "rm-gone", "raced"]), false)
        );
        assert_eq!(log_of(&mut o, 2), (expect(&[0, 1], &["put2a", "put2b"]), true));
        let page = o.call(CLASS, "log_list", 1, 0, &LogListInput { after: Some(2), max: 10 }.encode()).unwrap();
        assert_eq!(LogListOutput::decode(&page).unwrap().events.iter().map(|e| e.0).collect::<Vec<_>>(), [3, 4]);
        assert_eq!(list_of(&mut o, "", "", "", 10), (vec!["k".into()], false), "the log is not listed");
        assert_eq!(stats_of(&mut o), IndexStats { entries: 1, bytes: 1, next_event: 5, ..Default::default() });
        // Trimming any subset; numbering continues after the removed tail.
        o.call(CLASS, "log_trim", 1, 0, &LogTrimInput { seqs: vec![0, 2, 4, 77] }.encode()).unwrap();
        assert_eq!(log_of(&mut o, 10).0, expect(&[1, 3], &["put2b", "rm-gone"]));
        o.call(CLASS, "log", 1, 0, &LogInput { events: events(&["later"]) }.encode()).unwrap();
        assert_eq!(log_of(&mut o, 10).0, expect(&[1, 3, 5], &["put2b", "rm-gone", "later"]));
        assert_eq!(list_of(&mut o, "", "", "", 1), (vec!["k".into()], false), "no phantom page for the log");
    }

    #[test]
    fn version_1_stats_still_decode() {
        #[derive(Serialize, Deserialize)]
        struct V1 {
            entries: u64,
            bytes: u64,
        }
        versioned_v1! { V1 => "stats as version 1 wrote them" }
        let v1 = V1 { entries: 3, bytes: 700 }.encode();
        assert_eq!(
            IndexStats::decode(&v1).unwrap(),
            IndexStats { entries: 3, bytes: 700, next_event: 0, ..Default::default() }
        );
    }

    #[test]
    fn malformed_input_is_einval() {
        let mut o = MemObject::default();
        assert_eq!(o.call(CLASS, "link", 1, 0, b"junk").unwrap_err().errno, Errno::InvalidArgument);
        assert_eq!(o.call(CLASS, "stats", 1, 0, &[]).unwrap_err().errno, Errno::NotFound);
    }

    /// The listing computed naively: keys after `start_after` with `prefix`, rolled up at the
    /// first `delimiter` after it; a marker that is a common prefix skips its keys.
    fn model_list(
        keys: &std::collections::BTreeSet<String>,
        start_after: &str,
        prefix: &str,
        delimiter: &str,
    ) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for key in keys.iter().filter(|k| k.starts_with(prefix) && k.as_str() > start_after) {
            let name = match (!delimiter.is_empty()).then(|| key[prefix.len()..].find(delimiter)).flatten() {
                Some(at) => key[..prefix.len() + at + delimiter.len()].to_owned(),
                None => key.clone(),
            };
            if name != start_after && out.last() != Some(&name) {
                out.push(name);
            }
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Paging through `list` with its own markers yields exactly the model listing.
        #[test]
        fn paged_listing_matches_the_model(
            keys in proptest::collection::btree_set("[ab/]{1,6}", 0..40),
            prefix in "[ab/]{0,2}",
            delimiter in proptest::sample::select(vec!["", "/", "b"]),
            start_after in "[ab/]{0,3}",
            max in 1u32..6,
        ) {
            let mut o = MemObject::default();
            o.call(CLASS, "init", 1, 0, &[]).unwrap();
            for key in &keys {
                // Every change logs an event: listings must never show the log.
                let input = LinkInput { key: key.clone(), entry: entry(1, "1"), events: vec![Bytes::from(key.clone())], ..Default::default() };
                o.call(CLASS, "link", 1, 0, &input.encode()).unwrap();
            }
            let mut listed = Vec::new();
            let mut marker = start_after.clone();
            loop {
                let (page, more) = list_of(&mut o, &marker, &prefix, delimiter, max);
                proptest::prop_assert!(page.len() <= max as usize);
                listed.extend(page.iter().cloned());
                match (more, page.last()) {
                    (true, Some(last)) => marker = last.clone(),
                    (true, None) => proptest::prop_assert!(false, "more without items"),
                    (false, _) => break,
                }
            }
            proptest::prop_assert_eq!(listed, model_list(&keys, &start_after, &prefix, delimiter));
        }
    }
}
