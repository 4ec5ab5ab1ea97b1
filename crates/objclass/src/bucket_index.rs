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

use crate::{ClassRegistry, MethodContext, MethodFlags, decode_input, decode_stored, versioned_v1};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_types::{Result, Versioned, err};

/// The class name.
pub const CLASS: &str = "bucket_index";

/// One run of data chunks of an object: chunk `i` is the object `<prefix>_<i>`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// Object name prefix of the chunks.
    pub prefix: String,
    /// Bytes in the segment.
    pub size: u64,
}

/// What the index knows about one object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// Object size in bytes.
    pub size: u64,
    /// The S3 ETag, without quotes.
    pub etag: String,
    /// Last modification, nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
    /// Owner's user id.
    pub owner: String,
    /// Storage class as listed.
    pub storage_class: String,
    /// Orders concurrent writers: the highest order wins (see the module docs).
    pub order: String,
    /// Data kept outside the head object, to be garbage-collected when replaced.
    pub tail: Vec<Segment>,
}

/// The shard's totals, and the next event log sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexStats {
    /// Entries in the shard.
    pub entries: u64,
    /// Sum of the entries' sizes.
    pub bytes: u64,
    /// Sequence number of the next logged event (kept here because every change rewrites
    /// the header anyway).
    pub next_event: u64,
}

impl Versioned for IndexStats {
    const NAME: &'static str = "bucket index stats";
    const VERSION: u8 = 2;

    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        (version == 1).then(|| {
            let (entries, bytes) = shoal_types::encoding::decode_body::<(u64, u64)>("bucket index stats v1", body)?;
            Ok(IndexStats { entries, bytes, next_event: 0 })
        })
    }
}

/// Input of `bucket_index.link`: add or replace one entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkInput {
    /// Object key.
    pub key: String,
    /// The new entry; its `order` must be above the stored one's.
    pub entry: IndexEntry,
    /// Events logged with the change, whether or not a newer entry keeps it from applying.
    pub events: Vec<Bytes>,
}

/// Input of `bucket_index.unlink`: remove one entry.
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

/// Output of `link` and `unlink`: what happened to the stored entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeOutput {
    /// The change was applied (false: a newer entry was already there).
    pub applied: bool,
    /// The entry that was replaced or removed (or, when not applied, the newer one kept).
    pub previous: Option<IndexEntry>,
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

versioned_v1! {
    IndexEntry => "bucket index entry",
    LinkInput => "bucket_index.link input",
    UnlinkInput => "bucket_index.unlink input",
    ChangeOutput => "bucket_index change output",
    ListInput => "bucket_index.list input",
    ListOutput => "bucket_index.list output",
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
}

/// The byte after every UTF-8 byte: `prefix + SKIP` sorts after every key starting with `prefix`.
const SKIP: u8 = 0xff;
/// Prefix of event log keys (`LOG` + sequence number, big-endian).
const LOG: [u8; 2] = [SKIP, b'e'];
/// Most events one `log_list` returns.
const MAX_LOG_LIST: u32 = 1000;

fn log_key(seq: u64) -> Bytes {
    let mut k = LOG.to_vec();
    k.extend_from_slice(&seq.to_be_bytes());
    Bytes::from(k)
}

/// Appends `events` to the shard's event log, numbering them from `stats`; true when
/// there were any (the header must then be saved).
fn append_events(ctx: &mut MethodContext<'_>, stats: &mut IndexStats, events: Vec<Bytes>) -> Result<bool> {
    if events.is_empty() {
        return Ok(false);
    }
    let mut rows = Vec::with_capacity(events.len());
    for event in events {
        rows.push((log_key(stats.next_event), event));
        stats.next_event += 1;
    }
    ctx.object.omap_set(rows)?;
    Ok(true)
}

fn load_stats(ctx: &mut MethodContext<'_>) -> Result<IndexStats> {
    let header = ctx.object.omap_get_header()?;
    if header.is_empty() { Ok(IndexStats::default()) } else { decode_stored("bucket index stats", &header) }
}

fn load_entry(ctx: &mut MethodContext<'_>, key: &str) -> Result<Option<IndexEntry>> {
    ctx.object.omap_get(key.as_bytes())?.map(|v| decode_stored("bucket index entry", &v)).transpose()
}

fn save_stats(ctx: &mut MethodContext<'_>, stats: IndexStats) -> Result<()> {
    ctx.object.omap_set_header(Bytes::from(stats.encode()))
}

fn change_output(applied: bool, previous: Option<IndexEntry>) -> Result<Vec<u8>> {
    Ok(ChangeOutput { applied, previous }.encode())
}

fn init(ctx: &mut MethodContext<'_>, _input: &[u8]) -> Result<Vec<u8>> {
    if ctx.object.exists()? {
        return Err(err::exists("bucket index shard exists"));
    }
    ctx.object.create(true)?;
    save_stats(ctx, IndexStats::default())?;
    Ok(Vec::new())
}

fn link(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let LinkInput { key, entry, events } = decode_input("bucket_index.link", input)?;
    if key.is_empty() {
        return Err(err::invalid("bucket_index.link: empty key"));
    }
    let mut stats = load_stats(ctx)?;
    let logged = append_events(ctx, &mut stats, events)?;
    let previous = load_entry(ctx, &key)?;
    let applied = previous.as_ref().is_none_or(|old| old.order < entry.order);
    if applied {
        if let Some(old) = &previous {
            stats.entries -= 1;
            stats.bytes -= old.size;
        }
        stats.entries += 1;
        stats.bytes += entry.size;
        ctx.object.omap_set(vec![(Bytes::from(key.into_bytes()), Bytes::from(entry.encode()))])?;
    }
    if applied || logged {
        save_stats(ctx, stats)?;
    }
    change_output(applied, previous)
}

fn unlink(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let UnlinkInput { key, order, events } = decode_input("bucket_index.unlink", input)?;
    let mut stats = load_stats(ctx)?;
    let logged = append_events(ctx, &mut stats, events)?;
    let stored = load_entry(ctx, &key)?;
    let applied = stored.as_ref().is_some_and(|old| old.order <= order);
    if let Some(old) = stored.as_ref().filter(|_| applied) {
        stats.entries -= 1;
        stats.bytes -= old.size;
        ctx.object.omap_rm_keys(&[Bytes::from(key.into_bytes())])?;
    }
    if applied || logged {
        save_stats(ctx, stats)?;
    }
    change_output(applied, stored)
}

fn list(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let ListInput { start_after, prefix, delimiter, max } = decode_input("bucket_index.list", input)?;
    let max = max.clamp(1, 1000) as usize;
    // A marker that is a common prefix of this listing (its first delimiter after the
    // prefix ends it) resumes after every key under it.
    let marker_is_common_prefix = !delimiter.is_empty()
        && start_after.len() > prefix.len()
        && start_after.starts_with(&prefix)
        && start_after[prefix.len()..].find(&delimiter).map(|at| prefix.len() + at + delimiter.len())
            == Some(start_after.len());
    let mut cursor = start_after.into_bytes();
    if marker_is_common_prefix {
        cursor.push(SKIP);
    }
    let mut items = Vec::new();
    loop {
        let (page, page_more) = ctx.object.omap_get_vals(&cursor, prefix.as_bytes(), max + 1)?;
        let mut skipped = false;
        for (key, value) in page {
            if key.first() == Some(&SKIP) {
                // The event log follows every object key.
                return Ok(ListOutput { items, more: false }.encode());
            }
            if items.len() == max {
                return Ok(ListOutput { items, more: true }.encode());
            }
            let name = String::from_utf8(key.to_vec()).map_err(|_| err::io("bucket index key is not UTF-8"))?;
            let rest = &name[prefix.len()..];
            match (!delimiter.is_empty()).then(|| rest.find(&delimiter)).flatten() {
                Some(at) => {
                    let common = name[..prefix.len() + at + delimiter.len()].to_owned();
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
            let more = next.first().is_some_and(|(key, _)| key.first() != Some(&SKIP));
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
        let input = LinkInput { key: key.into(), entry: entry(size, order), events: Vec::new() };
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
        assert_eq!(stats_of(&mut o), IndexStats { entries: 2, bytes: 12, next_event: 0 });
        let unlink = |o: &mut MemObject, order: &str| {
            let input = UnlinkInput { key: "k".into(), order: order.into(), events: Vec::new() };
            ChangeOutput::decode(&o.call(CLASS, "unlink", 1, 0, &input.encode()).unwrap()).unwrap()
        };
        assert!(!unlink(&mut o, "2").applied, "an older delete keeps the newer entry");
        assert!(unlink(&mut o, "4").applied);
        assert_eq!(unlink(&mut o, "5"), ChangeOutput { applied: false, previous: None });
        assert_eq!(stats_of(&mut o), IndexStats { entries: 1, bytes: 7, next_event: 0 });
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
            let input = LinkInput { key: "k".into(), entry: entry(1, order), events: events(names) };
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
        assert_eq!(stats_of(&mut o), IndexStats { entries: 1, bytes: 1, next_event: 5 });
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
        assert_eq!(IndexStats::decode(&v1).unwrap(), IndexStats { entries: 3, bytes: 700, next_event: 0 });
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
                let input = LinkInput { key: key.clone(), entry: entry(1, "1"), events: vec![Bytes::from(key.clone())] };
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
