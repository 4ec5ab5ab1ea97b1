//! Versions of a key in its index shard.
//!
//! A key of an unversioned bucket has only its plain entry (omap key = the object key): its
//! `null` version. Once a key has a second version (a versioned write, or a delete marker),
//! every version of it is a *version record* `0xfe 'v' ‖ key ‖ 0x00 ‖ sort key` whose sort
//! key orders the key's versions newest first, and `0xfe 'n' ‖ key` holds the sort key of
//! its null version, if any. The plain entry then mirrors the newest record unless that
//! is a delete marker, so current-object listings read exactly what they read in an
//! unversioned bucket, and a version is found by one lookup (a version id *is* its sort
//! key: 32 hex digits, the write's order inverted).
//!
//! Every change (link, unlink of a version or of the null version) leaves that invariant
//! true in the transaction that made it, whichever mode the writer believed the bucket was
//! in, so a gateway with a stale bucket record cannot leave the index inconsistent.

use super::{
    ChangeOutput, IndexEntry, IndexStats, LOG, RECORDS, Retention, SKIP, append_events, decode_input, decode_stored,
    load_entry, load_stats, save_stats,
};
use crate::MethodContext;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_types::{Result, Versioned, err};
use std::collections::VecDeque;

/// Prefix of version records: `VERSIONS ‖ key ‖ 0x00 ‖ sort key`.
const VERSIONS: [u8; 2] = [0xfe, b'v'];
/// Prefix of null-version pointers: `NULLS ‖ key` = the null version's sort key.
const NULLS: [u8; 2] = [0xfe, b'n'];
/// A sort key (and a version id) is this many hex digits.
const SORT_KEY_LEN: usize = 32;

const _: () = assert!(VERSIONS[0] >= RECORDS && NULLS[0] >= RECORDS && LOG[0] >= RECORDS);

/// The version id of a write of `order` (`<ns, 20 digits>.<tag, 16 hex digits>`, as the
/// gateway writes orders): both fields inverted, so ids sort newest first.
pub fn version_id_of(order: &str) -> Result<String> {
    let parsed = order.split_once('.').and_then(|(ns, tag)| {
        let ok = ns.len() == 20 && tag.len() == 16;
        Some((ns.parse::<u64>().ok().filter(|_| ok)?, u64::from_str_radix(tag, 16).ok()?))
    });
    let (ns, tag) =
        parsed.ok_or_else(|| err::invalid(format!("order '{order}' is not <20 digits>.<16 hex digits>")))?;
    Ok(format!("{:016x}{:016x}", !ns, !tag))
}

/// Whether `id` can be a version id (it says nothing of whether that version exists).
fn is_version_id(id: &str) -> bool {
    id.len() == SORT_KEY_LEN && id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Object keys of versioned records are separated from their sort key by a NUL byte.
pub(super) fn check_key(key: &str, method: &str) -> Result<()> {
    if key.is_empty() || key.contains('\0') {
        return Err(err::invalid(format!("{method}: an object key is not empty and has no NUL character")));
    }
    Ok(())
}

fn records_of(key: &str) -> Vec<u8> {
    [&VERSIONS[..], key.as_bytes(), &[0]].concat()
}

fn record_key(key: &str, sort: &str) -> Bytes {
    Bytes::from([&records_of(key)[..], sort.as_bytes()].concat())
}

fn null_pointer(key: &str) -> Bytes {
    Bytes::from([&NULLS[..], key.as_bytes()].concat())
}

/// The object key and the sort key of a version record's omap key.
fn split_record(omap_key: &[u8]) -> Result<(&str, &str)> {
    let corrupt = || err::io(format!("corrupt version record key {omap_key:02x?}"));
    let body = omap_key.strip_prefix(&VERSIONS[..]).ok_or_else(corrupt)?;
    let at = body.len().checked_sub(SORT_KEY_LEN + 1).ok_or_else(corrupt)?;
    if body[at] != 0 {
        return Err(corrupt());
    }
    let key = std::str::from_utf8(&body[..at]).map_err(|_| corrupt())?;
    let sort = std::str::from_utf8(&body[at + 1..]).map_err(|_| corrupt())?;
    Ok((key, sort))
}

/// The key's newest version record: its sort key and entry.
fn newest(ctx: &mut MethodContext<'_>, key: &str) -> Result<Option<(String, IndexEntry)>> {
    let prefix = records_of(key);
    let (rows, _) = ctx.object.omap_get_vals(&prefix, &prefix, 1)?;
    match rows.into_iter().next() {
        Some((k, v)) => Ok(Some((split_record(&k)?.1.to_owned(), decode_stored("version record", &v)?))),
        None => Ok(None),
    }
}

/// The order of the key's newest version (a delete marker included), if it has one.
pub(super) fn newest_order(ctx: &mut MethodContext<'_>, key: &str) -> Result<Option<String>> {
    let newest = match newest(ctx, key)? {
        Some((_, entry)) => Some(entry),
        None => load_entry(ctx, key)?,
    };
    Ok(newest.map(|e| e.order))
}

fn record(ctx: &mut MethodContext<'_>, key: &str, sort: &str) -> Result<Option<IndexEntry>> {
    ctx.object.omap_get(&record_key(key, sort))?.map(|v| decode_stored("version record", &v)).transpose()
}

/// The key's null version record, if the key has records and a null version among them.
fn null_record(ctx: &mut MethodContext<'_>, key: &str) -> Result<Option<(String, IndexEntry)>> {
    let Some(sort) = ctx.object.omap_get(&null_pointer(key))? else { return Ok(None) };
    let sort = String::from_utf8(sort.to_vec()).map_err(|_| err::io("corrupt null version pointer"))?;
    let entry =
        record(ctx, key, &sort)?.ok_or_else(|| err::io(format!("null version pointer of '{key}' is dangling")))?;
    Ok(Some((sort, entry)))
}

fn put_record(
    ctx: &mut MethodContext<'_>,
    stats: &mut IndexStats,
    key: &str,
    sort: &str,
    entry: &IndexEntry,
) -> Result<()> {
    if let Some(replaced) = record(ctx, key, sort)? {
        stats.versions = stats.versions.saturating_sub(1);
        stats.version_bytes = stats.version_bytes.saturating_sub(replaced.size);
    }
    stats.versions += 1;
    stats.version_bytes += entry.size;
    let mut rows = vec![(record_key(key, sort), Bytes::from(entry.encode()))];
    if entry.version.is_none() {
        rows.push((null_pointer(key), Bytes::copy_from_slice(sort.as_bytes())));
    }
    ctx.object.omap_set(rows)
}

fn remove_record(
    ctx: &mut MethodContext<'_>,
    stats: &mut IndexStats,
    key: &str,
    sort: &str,
    entry: &IndexEntry,
) -> Result<()> {
    stats.versions = stats.versions.saturating_sub(1);
    stats.version_bytes = stats.version_bytes.saturating_sub(entry.size);
    let mut keys = vec![record_key(key, sort)];
    if entry.version.is_none() {
        keys.push(null_pointer(key));
    }
    ctx.object.omap_rm_keys(&keys)
}

/// Makes the plain entry mirror the newest record (none when that is a delete marker).
fn refresh_current(ctx: &mut MethodContext<'_>, stats: &mut IndexStats, key: &str) -> Result<()> {
    let newest = newest(ctx, key)?.map(|(_, e)| e).filter(|e| !e.delete_marker);
    let current = load_entry(ctx, key)?;
    if current == newest {
        return Ok(());
    }
    if let Some(old) = &current {
        stats.entries = stats.entries.saturating_sub(1);
        stats.bytes = stats.bytes.saturating_sub(old.size);
    }
    match newest {
        Some(entry) => {
            stats.entries += 1;
            stats.bytes += entry.size;
            ctx.object.omap_set(vec![(Bytes::copy_from_slice(key.as_bytes()), Bytes::from(entry.encode()))])
        }
        None => ctx.object.omap_rm_keys(&[Bytes::copy_from_slice(key.as_bytes())]),
    }
}

/// Turns a key's plain entry (its null version, from before the key had records) into a
/// record, so that a second version can be added beside it.
fn adopt_plain(ctx: &mut MethodContext<'_>, stats: &mut IndexStats, key: &str) -> Result<()> {
    if let Some(plain) = load_entry(ctx, key)? {
        put_record(ctx, stats, key, &version_id_of(&plain.order)?, &plain)?;
    }
    Ok(())
}

/// Adds `entry` as a version of `key` (see [`super::LinkInput`]).
pub(super) fn link(
    ctx: &mut MethodContext<'_>,
    stats: &mut IndexStats,
    key: &str,
    entry: IndexEntry,
) -> Result<ChangeOutput> {
    let has_records = newest(ctx, key)?.is_some();
    if entry.version.is_none() && !has_records && !entry.delete_marker {
        // The only version of the key: its plain entry. The same order again is a retry of
        // the same write: it applies (and changes nothing).
        let previous = load_entry(ctx, key)?;
        let applied = previous.as_ref().is_none_or(|old| old.order <= entry.order);
        if applied {
            if let Some(old) = &previous {
                stats.entries = stats.entries.saturating_sub(1);
                stats.bytes = stats.bytes.saturating_sub(old.size);
            }
            stats.entries += 1;
            stats.bytes += entry.size;
            ctx.object.omap_set(vec![(Bytes::copy_from_slice(key.as_bytes()), Bytes::from(entry.encode()))])?;
        }
        return Ok(ChangeOutput { applied, previous });
    }
    let sort = version_id_of(&entry.order)?;
    if let Some(id) = &entry.version
        && *id != sort
    {
        return Err(err::invalid(format!("bucket_index.link: version id {id} is not that of order {}", entry.order)));
    }
    if !has_records {
        adopt_plain(ctx, stats, key)?;
    }
    let mut previous = None;
    if entry.version.is_none() {
        match null_record(ctx, key)? {
            Some((_, old)) if old.order > entry.order => {
                return Ok(ChangeOutput { applied: false, previous: Some(old) });
            }
            Some((old_sort, old)) => {
                remove_record(ctx, stats, key, &old_sort, &old)?;
                previous = Some(old);
            }
            None => {}
        }
    }
    put_record(ctx, stats, key, &sort, &entry)?;
    refresh_current(ctx, stats, key)?;
    Ok(ChangeOutput { applied: true, previous })
}

/// Removes the key's null version if its order is at most `order` (any order if `None`).
pub(super) fn unlink_null(
    ctx: &mut MethodContext<'_>,
    stats: &mut IndexStats,
    key: &str,
    order: Option<&str>,
) -> Result<ChangeOutput> {
    let allowed = |entry: &IndexEntry| order.is_none_or(|o| entry.order.as_str() <= o);
    if newest(ctx, key)?.is_none() {
        let stored = load_entry(ctx, key)?;
        let applied = stored.as_ref().is_some_and(allowed);
        if let Some(old) = stored.as_ref().filter(|_| applied) {
            stats.entries = stats.entries.saturating_sub(1);
            stats.bytes = stats.bytes.saturating_sub(old.size);
            ctx.object.omap_rm_keys(&[Bytes::copy_from_slice(key.as_bytes())])?;
        }
        return Ok(ChangeOutput { applied, previous: stored });
    }
    match null_record(ctx, key)? {
        None => Ok(ChangeOutput { applied: false, previous: None }),
        Some((_, old)) if !allowed(&old) => Ok(ChangeOutput { applied: false, previous: Some(old) }),
        Some((sort, old)) => {
            remove_record(ctx, stats, key, &sort, &old)?;
            refresh_current(ctx, stats, key)?;
            Ok(ChangeOutput { applied: true, previous: Some(old) })
        }
    }
}

/// Which version of a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Which {
    /// The newest version (a delete marker included).
    Current,
    /// The null version.
    Null,
    /// The version with this id.
    Id(String),
}

impl Which {
    /// The version an S3 `versionId` names (`None`: the current one).
    pub fn from_version_id(id: Option<&str>) -> Which {
        match id {
            None => Which::Current,
            Some("null") => Which::Null,
            Some(id) => Which::Id(id.to_owned()),
        }
    }
}

/// Input of `bucket_index.get_version`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetVersionInput {
    /// Object key.
    pub key: String,
    /// Which of its versions.
    pub which: Which,
}

/// Output of `bucket_index.get_version`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetVersionOutput {
    /// The version, if it exists.
    pub entry: Option<IndexEntry>,
    /// It is the key's newest version.
    pub latest: bool,
}

/// Input of `bucket_index.unlink_version`: remove one version, whatever its order, unless
/// its object lock forbids it (EACCES, nothing changed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnlinkVersionInput {
    /// Object key.
    pub key: String,
    /// The version id; `None` is the null version.
    pub version: Option<String>,
    /// Events logged with the change, whether or not the version existed.
    pub events: Vec<Bytes>,
    /// The requester may remove versions under governance retention.
    pub bypass_governance: bool,
}

/// Input of `bucket_index.set_lock`: change one version's object lock (EACCES if its
/// retention forbids the change).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetLockInput {
    /// Object key.
    pub key: String,
    /// The version id; `None` is the null version.
    pub version: Option<String>,
    /// The new retention (`Some(None)` removes it), or `None` to keep it.
    pub retention: Option<Option<Retention>>,
    /// The new legal hold, or `None` to keep it.
    pub legal_hold: Option<bool>,
    /// The requester may shorten or remove a governance retention.
    pub bypass_governance: bool,
}

/// Input of `bucket_index.list_versions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListVersionsInput {
    /// Only keys with this prefix.
    pub prefix: String,
    /// Roll keys up to the first delimiter after the prefix into common prefixes.
    pub delimiter: String,
    /// Start after this key (with `version_marker`: inside it, after that version); a
    /// marker that is a common prefix skips every key under it.
    pub key_marker: String,
    /// The version of `key_marker` to resume after (`null` names the null version).
    pub version_marker: Option<String>,
    /// Most items (versions plus common prefixes) returned.
    pub max: u32,
}

/// One item of a version listing.
// Nearly every item is an entry: boxing it would add an allocation per item.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VersionItem {
    /// A version (or delete marker) of a key, and whether it is the key's newest.
    Version {
        /// Object key.
        key: String,
        /// The version.
        entry: IndexEntry,
        /// The key's newest version.
        latest: bool,
    },
    /// A common prefix (ends with the delimiter).
    Prefix(String),
}

impl VersionItem {
    /// The key or prefix, which orders the listing.
    pub fn name(&self) -> &str {
        match self {
            VersionItem::Version { key, .. } | VersionItem::Prefix(key) => key,
        }
    }
}

/// Output of `bucket_index.list_versions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListVersionsOutput {
    /// Items in key order, each key's versions newest first.
    pub items: Vec<VersionItem>,
    /// More items follow the last one.
    pub more: bool,
}

crate::registry::versioned_v1! {
    GetVersionInput => "bucket_index.get_version input",
    UnlinkVersionInput => "bucket_index.unlink_version input",
    SetLockInput => "bucket_index.set_lock input",
    ListVersionsInput => "bucket_index.list_versions input",
}

impl Versioned for GetVersionOutput {
    const NAME: &'static str = "bucket_index.get_version output";
    /// Version 2: entries of version 3.
    const VERSION: u8 = 2;
}

impl Versioned for ListVersionsOutput {
    const NAME: &'static str = "bucket_index.list_versions output";
    /// Version 2: entries of version 3.
    const VERSION: u8 = 2;
}

/// `bucket_index.get_version`: one version of a key.
pub(super) fn get_version(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let GetVersionInput { key, which } = decode_input("bucket_index.get_version", input)?;
    if which == Which::Current
        && let Some(current) = load_entry(ctx, &key)?
    {
        // The plain entry is the null version of a key without records or mirrors the
        // newest record: one point read instead of a scan of the key's records.
        return Ok(GetVersionOutput { entry: Some(current), latest: true }.encode());
    }
    let newest = newest(ctx, &key)?;
    let newest_sort = newest.as_ref().map(|(sort, _)| sort.clone());
    let found = match (which, newest) {
        (Which::Current, Some((_, newest))) => Some(newest),
        // The plain entry, read above, is absent.
        (Which::Current, None) => None,
        (Which::Null, None) => load_entry(ctx, &key)?,
        (Which::Null, Some(_)) => null_record(ctx, &key)?.map(|(_, e)| e),
        (Which::Id(id), _) if is_version_id(&id) => {
            record(ctx, &key, &id)?.filter(|e| e.version.as_deref() == Some(id.as_str()))
        }
        (Which::Id(_), _) => None,
    };
    let latest = found.as_ref().is_some_and(|e| {
        newest_sort.as_deref().is_none_or(|newest| version_id_of(&e.order).is_ok_and(|sort| sort == newest))
    });
    Ok(GetVersionOutput { entry: found, latest }.encode())
}

/// A version of `key` by id (`None`: the null version), and its sort key if it is a
/// record (`None`: a key's plain entry, the null version of a key without records).
fn find_version(
    ctx: &mut MethodContext<'_>,
    key: &str,
    version: Option<&str>,
) -> Result<Option<(Option<String>, IndexEntry)>> {
    Ok(match version {
        Some(id) if is_version_id(id) => {
            record(ctx, key, id)?.filter(|e| e.version.as_deref() == Some(id)).map(|e| (Some(id.to_owned()), e))
        }
        Some(_) => None,
        None if newest(ctx, key)?.is_some() => null_record(ctx, key)?.map(|(sort, e)| (Some(sort), e)),
        None => load_entry(ctx, key)?.map(|e| (None, e)),
    })
}

/// `bucket_index.unlink_version`: removes one version; the output's `previous` is it.
pub(super) fn unlink_version(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let UnlinkVersionInput { key, version, events, bypass_governance } =
        decode_input("bucket_index.unlink_version", input)?;
    check_key(&key, "bucket_index.unlink_version")?;
    let found = find_version(ctx, &key, version.as_deref())?;
    if let Some(why) = found.as_ref().and_then(|(_, e)| e.lock.forbids_removal(ctx.now_ns, bypass_governance)) {
        return Err(err::access(format!("bucket_index.unlink_version: {why}")));
    }
    let mut stats = load_stats(ctx)?;
    let logged = append_events(ctx, &mut stats, events)?;
    let out = match (version, found) {
        (None, _) => unlink_null(ctx, &mut stats, &key, None)?,
        (Some(id), Some((_, entry))) => {
            remove_record(ctx, &mut stats, &key, &id, &entry)?;
            refresh_current(ctx, &mut stats, &key)?;
            ChangeOutput { applied: true, previous: Some(entry) }
        }
        (Some(_), None) => ChangeOutput { applied: false, previous: None },
    };
    if out.applied || logged {
        save_stats(ctx, stats)?;
    }
    Ok(out.encode())
}

/// `bucket_index.set_lock`: changes a version's retention or legal hold; the output is
/// the version as changed.
pub(super) fn set_lock(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let SetLockInput { key, version, retention, legal_hold, bypass_governance } =
        decode_input("bucket_index.set_lock", input)?;
    let Some((sort, mut entry)) = find_version(ctx, &key, version.as_deref())? else {
        return Err(err::not_found(format!("bucket_index.set_lock: no such version of '{key}'")));
    };
    if entry.delete_marker {
        return Err(err::invalid("bucket_index.set_lock: a delete marker has no object lock"));
    }
    if let Some(retention) = retention {
        entry.lock.may_become(retention, ctx.now_ns, bypass_governance)?;
        entry.lock.retention = retention;
    }
    if let Some(hold) = legal_hold {
        entry.lock.legal_hold = hold;
    }
    let mut stats = load_stats(ctx)?;
    match &sort {
        Some(sort) => {
            put_record(ctx, &mut stats, &key, sort, &entry)?;
            refresh_current(ctx, &mut stats, &key)?;
            save_stats(ctx, stats)?;
        }
        None => ctx.object.omap_set(vec![(Bytes::copy_from_slice(key.as_bytes()), Bytes::from(entry.encode()))])?,
    }
    let latest = match (&sort, newest(ctx, &key)?) {
        (Some(sort), Some((newest, _))) => *sort == newest,
        _ => true,
    };
    Ok(GetVersionOutput { entry: Some(entry), latest }.encode())
}

/// The common prefix `name` rolls up to: up to and including the first `delimiter` after `prefix`.
pub(super) fn common_prefix<'a>(name: &'a str, prefix: &str, delimiter: &str) -> Option<&'a str> {
    if delimiter.is_empty() || !name.starts_with(prefix) {
        return None;
    }
    let at = name[prefix.len()..].find(delimiter)?;
    Some(&name[..prefix.len() + at + delimiter.len()])
}

/// Reads omap rows after a position, with a prefix, a page at a time.
struct Reader {
    after: Vec<u8>,
    prefix: Vec<u8>,
    page: VecDeque<(Bytes, Bytes)>,
    more: bool,
    page_size: usize,
}

impl Reader {
    fn new(after: Vec<u8>, prefix: Vec<u8>, page_size: usize) -> Reader {
        Reader { after, prefix, page: VecDeque::new(), more: true, page_size }
    }

    fn peek(&mut self, ctx: &mut MethodContext<'_>) -> Result<Option<Bytes>> {
        if self.page.is_empty() && self.more {
            let (rows, more) = ctx.object.omap_get_vals(&self.after, &self.prefix, self.page_size)?;
            self.page = rows.into();
            self.more = more;
        }
        Ok(self.page.front().map(|(k, _)| k.clone()))
    }

    fn pop(&mut self) -> Option<(Bytes, Bytes)> {
        let row = self.page.pop_front()?;
        self.after = row.0.to_vec();
        Some(row)
    }

    fn seek(&mut self, after: Vec<u8>) {
        self.after = after;
        self.page.clear();
        self.more = true;
    }
}

/// A walk over a shard's versions in listing order: plain entries of keys without records
/// (their null version) and the records of the others, merged by key.
struct VersionWalk<'p> {
    prefix: &'p str,
    delimiter: &'p str,
    plain: Reader,
    records: Reader,
    /// The key whose records are being listed, and the sort key of its newest one.
    listing: Option<(String, String)>,
}

impl VersionWalk<'_> {
    /// Positions both readers after every version of `key`.
    fn skip_key(&mut self, key: &str) {
        self.plain.seek(key.as_bytes().to_vec());
        self.records.seek([&VERSIONS[..], key.as_bytes(), &[1]].concat());
    }

    /// Positions both readers after every key starting with `common`.
    fn skip_prefix(&mut self, common: &str) {
        self.plain.seek([common.as_bytes(), &[SKIP]].concat());
        self.records.seek([&VERSIONS[..], common.as_bytes(), &[SKIP]].concat());
    }

    fn next(&mut self, ctx: &mut MethodContext<'_>) -> Result<Option<VersionItem>> {
        if let Some((key, newest)) = self.listing.take()
            && let Some(row) = self.records.peek(ctx)?
            && split_record(&row)?.0 == key
        {
            let (omap_key, value) = self.records.pop().ok_or_else(|| err::io("version walk lost its row"))?;
            let latest = split_record(&omap_key)?.1 == newest;
            let entry = decode_stored("version record", &value)?;
            self.listing = Some((key.clone(), newest));
            return Ok(Some(VersionItem::Version { key, entry, latest }));
        }
        let plain = match self.plain.peek(ctx)? {
            Some(k) if k.first().is_some_and(|&b| b < RECORDS) => {
                Some(String::from_utf8(k.to_vec()).map_err(|_| err::io("bucket index key is not UTF-8"))?)
            }
            _ => None,
        };
        let recorded = match self.records.peek(ctx)? {
            Some(k) => Some(split_record(&k)?.0.to_owned()),
            None => None,
        };
        let Some(key) = [plain.clone(), recorded.clone()].into_iter().flatten().min() else { return Ok(None) };
        if let Some(common) = common_prefix(&key, self.prefix, self.delimiter) {
            let common = common.to_owned();
            self.skip_prefix(&common);
            return Ok(Some(VersionItem::Prefix(common)));
        }
        if recorded.as_ref() == Some(&key) {
            if plain.as_ref() == Some(&key) {
                self.plain.pop();
            }
            let (omap_key, value) = self.records.pop().ok_or_else(|| err::io("version walk lost its row"))?;
            let newest = split_record(&omap_key)?.1.to_owned();
            self.listing = Some((key.clone(), newest));
            return Ok(Some(VersionItem::Version {
                key,
                entry: decode_stored("version record", &value)?,
                latest: true,
            }));
        }
        let (_, value) = self.plain.pop().ok_or_else(|| err::io("version walk lost its row"))?;
        Ok(Some(VersionItem::Version { key, entry: decode_stored("bucket index entry", &value)?, latest: true }))
    }
}

/// `bucket_index.list_versions`: a page of versions in key order, newest first per key.
pub(super) fn list_versions(ctx: &mut MethodContext<'_>, input: &[u8]) -> Result<Vec<u8>> {
    let ListVersionsInput { prefix, delimiter, key_marker, version_marker, max } =
        decode_input("bucket_index.list_versions", input)?;
    let max = max.clamp(1, 1000) as usize;
    let page = max + 1;
    let mut walk = VersionWalk {
        prefix: &prefix,
        delimiter: &delimiter,
        plain: Reader::new(Vec::new(), prefix.as_bytes().to_vec(), page),
        records: Reader::new(VERSIONS.to_vec(), [&VERSIONS[..], prefix.as_bytes()].concat(), page),
        listing: None,
    };
    if !key_marker.is_empty() {
        let marker = key_marker.as_str();
        if common_prefix(marker, &prefix, &delimiter) == Some(marker) {
            walk.skip_prefix(marker);
        } else {
            walk.skip_key(marker);
            let newest = newest(ctx, marker)?;
            // Resuming inside the marker's versions: after the named one.
            let resume = match (version_marker.as_deref(), &newest) {
                (Some("null"), Some(_)) => null_record(ctx, marker)?.map(|(sort, _)| sort),
                (Some(id), Some(_)) if is_version_id(id) => Some(id.to_owned()),
                _ => None,
            };
            if let (Some(sort), Some((newest, _))) = (resume, newest) {
                walk.records.seek(record_key(marker, &sort).to_vec());
                walk.listing = Some((key_marker.clone(), newest));
            }
        }
    }
    let mut items = Vec::new();
    while let Some(item) = walk.next(ctx)? {
        if items.len() == max {
            return Ok(ListVersionsOutput { items, more: true }.encode());
        }
        items.push(item);
    }
    Ok(ListVersionsOutput { items, more: false }.encode())
}

#[cfg(test)]
mod tests {
    use super::super::{CLASS, Condition, IndexStats, LinkInput, ListInput, ListItem, ListOutput, UnlinkInput};
    use super::*;
    use crate::testing::MemObject;
    use std::collections::BTreeMap;

    fn order(ns: u64, tag: u64) -> String {
        format!("{ns:020}.{tag:016x}")
    }

    fn shard() -> MemObject {
        let mut o = MemObject::default();
        o.call(CLASS, "init", 1, 0, &[]).unwrap();
        o
    }

    /// A version of `size` bytes written at `order`: a new version id, or the null version.
    fn version(order: &str, size: u64, versioned: bool, marker: bool) -> IndexEntry {
        IndexEntry {
            size,
            order: order.to_owned(),
            version: versioned.then(|| version_id_of(order).unwrap()),
            delete_marker: marker,
            ..Default::default()
        }
    }

    fn link(o: &mut MemObject, key: &str, entry: IndexEntry) -> ChangeOutput {
        let input = LinkInput { key: key.into(), entry, ..Default::default() };
        ChangeOutput::decode(&o.call(CLASS, "link", 1, 0, &input.encode()).unwrap()).unwrap()
    }

    fn get(o: &mut MemObject, key: &str, which: Which) -> GetVersionOutput {
        let input = GetVersionInput { key: key.into(), which };
        GetVersionOutput::decode(&o.call(CLASS, "get_version", 1, 0, &input.encode()).unwrap()).unwrap()
    }

    fn remove(o: &mut MemObject, key: &str, version: Option<&str>) -> ChangeOutput {
        let input = UnlinkVersionInput {
            key: key.into(),
            version: version.map(str::to_owned),
            events: Vec::new(),
            bypass_governance: false,
        };
        ChangeOutput::decode(&o.call(CLASS, "unlink_version", 1, 0, &input.encode()).unwrap()).unwrap()
    }

    fn stats(o: &mut MemObject) -> IndexStats {
        IndexStats::decode(&o.call(CLASS, "stats", 1, 0, &[]).unwrap()).unwrap()
    }

    fn current_keys(o: &mut MemObject) -> Vec<(String, u64)> {
        let input = ListInput { max: 1000, ..Default::default() };
        let out = ListOutput::decode(&o.call(CLASS, "list", 1, 0, &input.encode()).unwrap()).unwrap();
        out.items
            .into_iter()
            .map(|i| match i {
                ListItem::Entry(k, e) => (k, e.size),
                ListItem::Prefix(p) => panic!("no delimiter, yet prefix {p}"),
            })
            .collect()
    }

    /// A listing as (name, version id, delete marker, latest); prefixes have no version.
    type Listed = Vec<(String, Option<(String, bool, bool)>)>;

    fn listed(items: &[VersionItem]) -> Listed {
        items
            .iter()
            .map(|i| match i {
                VersionItem::Version { key, entry, latest } => {
                    (key.clone(), Some((entry.version_id().to_owned(), entry.delete_marker, *latest)))
                }
                VersionItem::Prefix(p) => (p.clone(), None),
            })
            .collect()
    }

    /// Pages through `list_versions` with its own markers, checking each page's size.
    fn list_all(o: &mut MemObject, prefix: &str, delimiter: &str, max: u32) -> Listed {
        let mut all = Vec::new();
        let (mut key_marker, mut version_marker) = (String::new(), None);
        loop {
            let input = ListVersionsInput {
                prefix: prefix.into(),
                delimiter: delimiter.into(),
                key_marker: key_marker.clone(),
                version_marker: version_marker.clone(),
                max,
            };
            let out =
                ListVersionsOutput::decode(&o.call(CLASS, "list_versions", 1, 0, &input.encode()).unwrap()).unwrap();
            assert!(out.items.len() <= max as usize);
            all.extend(listed(&out.items));
            match (out.more, out.items.last()) {
                (true, Some(VersionItem::Version { key, entry, .. })) => {
                    key_marker = key.clone();
                    version_marker = Some(entry.version_id().to_owned());
                }
                (true, Some(VersionItem::Prefix(p))) => {
                    key_marker = p.clone();
                    version_marker = None;
                }
                (true, None) => panic!("more without items"),
                (false, _) => return all,
            }
        }
    }

    #[test]
    fn version_ids_sort_newest_first_and_never_change() {
        let a = version_id_of(&order(1_764_000_000_000_000_000, 0x0123_4567_89ab_cdef)).unwrap();
        assert_eq!(a, "e78503589835fffffedcba9876543210");
        let later = version_id_of(&order(1_764_000_000_000_000_001, 0)).unwrap();
        let same_time_higher_tag = version_id_of(&order(1_764_000_000_000_000_000, 0x0123_4567_89ab_cdf0)).unwrap();
        assert!(later < a && same_time_higher_tag < a);
        assert!(is_version_id(&a) && !is_version_id("null") && !is_version_id(&a.to_uppercase()));
        for bad in ["", "1", "00000000000000000001.x", "0000000000000000001.0123456789abcdef", "a.b"] {
            assert!(version_id_of(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn entries_keep_their_golden_bytes_and_versions_1_and_2_still_decode() {
        let entry = IndexEntry {
            size: 5,
            etag: "e".into(),
            mtime_ns: 7,
            owner: "o".into(),
            storage_class: "S".into(),
            order: "r".into(),
            tail: vec![super::super::Segment { prefix: "p".into(), size: 9 }],
            version: Some("v".into()),
            delete_marker: true,
            own_head: true,
            lock: super::super::ObjectLock {
                retention: Some(Retention { mode: super::super::LockMode::Compliance, until_ns: 3 }),
                legal_hold: true,
            },
            content_type: Some("t".into()),
        };
        let v2 = [2, 5, 1, b'e', 7, 1, b'o', 1, b'S', 1, b'r', 1, 1, b'p', 9, 1, 1, b'v', 1, 1, 1, 1, 3, 1];
        let golden = [&[3], &v2[1..], &[1, 1, b't']].concat();
        assert_eq!(entry.encode(), golden);
        assert_eq!(IndexEntry::decode(&golden).unwrap(), entry);
        assert_eq!(IndexEntry::decode(&v2).unwrap(), IndexEntry { content_type: None, ..entry.clone() });
        let link_v2 = [&[2, 1, b'k'][..], &v2[1..], &[0, 1, 0]].concat();
        let expect_link = LinkInput {
            key: "k".into(),
            entry: IndexEntry { content_type: None, ..entry.clone() },
            events: vec![],
            condition: Some(Condition::Absent),
            fresh: false,
        };
        assert_eq!(LinkInput::decode(&link_v2).unwrap(), expect_link);
        // Link inputs of version 3 are those of version 4 without `fresh`.
        let link_v3 = [&[3, 1, b'k'][..], &golden[1..], &[0, 1, 0]].concat();
        let expect_v3 = LinkInput { entry: entry.clone(), ..expect_link.clone() };
        assert_eq!(LinkInput::decode(&link_v3).unwrap(), expect_v3);
        let link_v4 = LinkInput { fresh: true, ..expect_v3 };
        assert_eq!(link_v4.encode(), [&[4], &link_v3[1..], &[1]].concat());
        // Version 1: the same fields without version and delete marker.
        let v1 = [1, 5, 1, b'e', 7, 1, b'o', 1, b'S', 1, b'r', 1, 1, b'p', 9];
        let old = IndexEntry::decode(&v1).unwrap();
        let unlocked = super::super::ObjectLock::default();
        let expect_old = IndexEntry {
            version: None,
            delete_marker: false,
            own_head: false,
            lock: unlocked,
            content_type: None,
            ..entry
        };
        assert_eq!(old, expect_old);
        let link_v1 = [&[1, 1, b'k'][..], &v1[1..], &[0]].concat();
        let expect_link = LinkInput { key: "k".into(), entry: old, ..Default::default() };
        assert_eq!(LinkInput::decode(&link_v1).unwrap(), expect_link);
        let stats_v2 = [2, 3, 4, 5];
        let expect = IndexStats { entries: 3, bytes: 4, next_event: 5, ..Default::default() };
        assert_eq!(IndexStats::decode(&stats_v2).unwrap(), expect);
    }

    #[test]
    fn a_plain_object_becomes_the_null_version_of_a_versioned_key() {
        let mut o = shard();
        let (t1, t2, t3, t4) = (order(10, 1), order(20, 2), order(30, 3), order(40, 4));
        assert!(link(&mut o, "k", version(&t1, 1, false, false)).applied);
        assert_eq!(stats(&mut o), IndexStats { entries: 1, bytes: 1, ..Default::default() }, "no record yet");
        let v2 = version(&t2, 2, true, false);
        assert_eq!(link(&mut o, "k", v2.clone()), ChangeOutput { applied: true, previous: None });
        assert_eq!(get(&mut o, "k", Which::Current), GetVersionOutput { entry: Some(v2.clone()), latest: true });
        let null = get(&mut o, "k", Which::Null);
        assert_eq!((null.entry.map(|e| e.size), null.latest), (Some(1), false));
        // A delete marker hides the key from listings but not from version reads.
        let marker = version(&t3, 0, true, true);
        link(&mut o, "k", marker.clone());
        assert_eq!(current_keys(&mut o), vec![]);
        assert_eq!(get(&mut o, "k", Which::Current), GetVersionOutput { entry: Some(marker.clone()), latest: true });
        let id2 = v2.version.clone().unwrap();
        assert_eq!(get(&mut o, "k", Which::Id(id2.clone())).entry, Some(v2.clone()));
        assert_eq!(
            stats(&mut o),
            IndexStats { entries: 0, bytes: 0, versions: 3, version_bytes: 3, ..Default::default() }
        );
        // Removing the marker brings the newest version back.
        let removed = remove(&mut o, "k", marker.version.as_deref());
        assert_eq!(removed, ChangeOutput { applied: true, previous: Some(marker) });
        assert_eq!(current_keys(&mut o), vec![("k".into(), 2)]);
        // A suspended bucket's write replaces the null version only.
        let out = link(&mut o, "k", version(&t4, 4, false, false));
        assert_eq!((out.applied, out.previous.map(|e| e.size)), (true, Some(1)));
        let stale = link(&mut o, "k", version(&order(35, 9), 9, false, false));
        assert_eq!((stale.applied, stale.previous.map(|e| e.size)), (false, Some(4)), "an older null write loses");
        assert_eq!(current_keys(&mut o), vec![("k".into(), 4)]);
        assert_eq!(list_all(&mut o, "", "", 10).len(), 2);
        // Unknown and malformed ids are simply absent.
        assert_eq!(remove(&mut o, "k", Some("nonsense")), ChangeOutput { applied: false, previous: None });
        assert_eq!(get(&mut o, "k", Which::Id("f".repeat(32))).entry, None);
        remove(&mut o, "k", None);
        remove(&mut o, "k", Some(&id2));
        assert_eq!((current_keys(&mut o), stats(&mut o).is_empty()), (vec![], true));
        assert_eq!(list_all(&mut o, "", "", 10), vec![]);
    }

    #[test]
    fn ten_thousand_versions_list_in_pages_that_seek() {
        let mut o = shard();
        for i in 0..10_000u64 {
            link(&mut o, "hot", version(&order(1_000 + i, i), i, true, false));
        }
        link(&mut o, "cold", version(&order(5, 5), 1, false, false));
        // Resume in the middle of the hot key: the page holds the next versions only.
        let input = ListVersionsInput {
            key_marker: "hot".into(),
            version_marker: Some(version_id_of(&order(1_000 + 5_000, 5_000)).unwrap()),
            max: 3,
            ..Default::default()
        };
        let out = ListVersionsOutput::decode(&o.call(CLASS, "list_versions", 1, 0, &input.encode()).unwrap()).unwrap();
        let sizes: Vec<u64> = out
            .items
            .iter()
            .map(|i| match i {
                VersionItem::Version { entry, latest: false, .. } => entry.size,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!((sizes, out.more), (vec![4_999, 4_998, 4_997], true));
        let all = list_all(&mut o, "", "", 1000);
        assert_eq!(all.len(), 10_001);
        assert_eq!(all[0].0, "cold");
        assert_eq!(all[1].1.as_ref().map(|v| v.2), Some(true), "the newest hot version is latest");
    }

    #[test]
    fn keys_with_nul_are_refused() {
        let mut o = shard();
        let input =
            LinkInput { key: "a\0b".into(), entry: version(&order(1, 1), 1, true, false), ..Default::default() };
        assert!(o.call(CLASS, "link", 1, 0, &input.encode()).is_err());
        let wrong_id = IndexEntry { version: Some("0".repeat(32)), ..version(&order(1, 1), 1, true, false) };
        let input = LinkInput { key: "a".into(), entry: wrong_id, ..Default::default() };
        assert!(o.call(CLASS, "link", 1, 0, &input.encode()).is_err(), "a version id that is not its order's");
    }

    #[test]
    fn conditions_hold_against_the_current_object_or_nothing_changes() {
        let mut o = shard();
        let conditional = |o: &mut MemObject, at: &str, etag: &str, versioned: bool, condition: Condition| {
            let entry = IndexEntry { etag: etag.into(), ..version(at, 1, versioned, false) };
            let input = LinkInput {
                key: "k".into(),
                entry,
                events: vec![Bytes::from_static(b"e")],
                condition: Some(condition),
                fresh: false,
            };
            o.call(CLASS, "link", 1, 0, &input.encode()).map(|_| ())
        };
        conditional(&mut o, &order(1, 1), "a", false, Condition::Absent).unwrap();
        let refused = conditional(&mut o, &order(2, 2), "b", false, Condition::Absent).unwrap_err();
        assert_eq!(refused.errno, shoal_types::Errno::Canceled);
        assert_eq!(
            conditional(&mut o, &order(3, 3), "c", true, Condition::ETag("zz".into())).unwrap_err().errno,
            shoal_types::Errno::Canceled
        );
        conditional(&mut o, &order(4, 4), "d", true, Condition::ETag("a".into())).unwrap();
        assert_eq!(list_all(&mut o, "", "", 10).len(), 2, "refused links added nothing");
        let log =
            o.call(CLASS, "log_list", 1, 0, &super::super::LogListInput { after: None, max: 10 }.encode()).unwrap();
        assert_eq!(super::super::LogListOutput::decode(&log).unwrap().events.len(), 2, "nor logged anything");
        // A delete marker makes the key absent again.
        link(&mut o, "k", version(&order(5, 5), 0, true, true));
        conditional(&mut o, &order(6, 6), "f", true, Condition::Absent).unwrap();
        // A lifecycle marker for the version it read: refused once a newer one is current.
        let marker = |o: &mut MemObject, at: &str, read: &str| {
            let input = LinkInput {
                key: "k".into(),
                entry: version(at, 0, true, true),
                events: Vec::new(),
                condition: Some(Condition::Order(read.to_owned())),
                fresh: false,
            };
            o.call(CLASS, "link", 1, 0, &input.encode()).map(|_| ())
        };
        conditional(&mut o, &order(7, 7), "g", true, Condition::ETag("f".into())).unwrap();
        assert_eq!(marker(&mut o, &order(8, 8), &order(6, 6)).unwrap_err().errno, shoal_types::Errno::Canceled);
        marker(&mut o, &order(9, 9), &order(7, 7)).unwrap();
        assert_eq!(marker(&mut o, &order(10, 10), &order(7, 7)).unwrap_err().errno, shoal_types::Errno::Canceled);
    }

    #[test]
    fn a_fresh_link_older_than_a_version_of_its_key_is_stale_and_changes_nothing() {
        let mut o = shard();
        let fresh = |o: &mut MemObject, entry: IndexEntry| {
            let input = LinkInput {
                key: "k".into(),
                entry,
                events: vec![Bytes::from_static(b"e")],
                condition: None,
                fresh: true,
            };
            o.call(CLASS, "link", 1, 0, &input.encode()).map(|_| ())
        };
        // The plain entry of a never-versioned key, then versions and a marker.
        fresh(&mut o, version(&order(5, 5), 1, false, false)).unwrap();
        let stale = fresh(&mut o, version(&order(4, 4), 1, true, false)).unwrap_err();
        assert_eq!(stale.errno, shoal_types::Errno::StaleEpoch);
        fresh(&mut o, version(&order(6, 6), 1, true, false)).unwrap();
        fresh(&mut o, version(&order(7, 7), 0, true, true)).unwrap();
        for (at, versioned, marker) in [(6, true, false), (3, false, false), (2, true, true)] {
            let refused = fresh(&mut o, version(&order(at, at), 1, versioned, marker)).unwrap_err();
            assert_eq!(refused.errno, shoal_types::Errno::StaleEpoch, "older than the marker at 7: {at}");
        }
        // The same write again (a retry) is not older than itself.
        fresh(&mut o, version(&order(7, 7), 0, true, true)).unwrap();
        assert_eq!(list_all(&mut o, "", "", 10).len(), 3, "refused links added nothing");
        let log =
            o.call(CLASS, "log_list", 1, 0, &super::super::LogListInput { after: None, max: 10 }.encode()).unwrap();
        assert_eq!(super::super::LogListOutput::decode(&log).unwrap().events.len(), 4, "nor logged anything");
        // Writes that are not fresh (replays of earlier ones) still go in beside newer ones.
        link(&mut o, "k", version(&order(1, 1), 1, true, false));
        assert_eq!(list_all(&mut o, "", "", 10).len(), 4);
    }

    #[test]
    fn a_locked_version_stays_until_its_date_and_its_hold_is_lifted() {
        use super::super::{LockMode, Retention};
        let mut o = shard();
        let v = version(&order(10, 1), 1, true, false);
        link(&mut o, "k", v.clone());
        let id = v.version.clone();
        let set =
            |o: &mut MemObject, now: u64, retention: Option<Option<Retention>>, hold: Option<bool>, bypass: bool| {
                let input = SetLockInput {
                    key: "k".into(),
                    version: id.clone(),
                    retention,
                    legal_hold: hold,
                    bypass_governance: bypass,
                };
                o.call(CLASS, "set_lock", 1, now, &input.encode()).map(|out| GetVersionOutput::decode(&out).unwrap())
            };
        let unlink = |o: &mut MemObject, now: u64, bypass: bool| {
            let input =
                UnlinkVersionInput { key: "k".into(), version: id.clone(), events: vec![], bypass_governance: bypass };
            o.call(CLASS, "unlink_version", 1, now, &input.encode()).map(|out| ChangeOutput::decode(&out).unwrap())
        };
        let compliance = Retention { mode: LockMode::Compliance, until_ns: 150 };
        let out = set(&mut o, 50, Some(Some(compliance)), None, false).unwrap();
        assert_eq!((out.entry.unwrap().lock.retention, out.latest), (Some(compliance), true));
        assert_eq!(
            get(&mut o, "k", Which::Current).entry.unwrap().lock.retention,
            Some(compliance),
            "the plain entry mirrors it"
        );
        assert_eq!(unlink(&mut o, 100, true).unwrap_err().errno, shoal_types::Errno::AccessDenied);
        assert_eq!(set(&mut o, 100, Some(None), None, true).unwrap_err().errno, shoal_types::Errno::AccessDenied);
        set(&mut o, 100, None, Some(true), false).unwrap();
        assert_eq!(unlink(&mut o, 200, false).unwrap_err().errno, shoal_types::Errno::AccessDenied, "held");
        set(&mut o, 200, None, Some(false), false).unwrap();
        assert!(unlink(&mut o, 200, false).unwrap().applied, "retention over, hold lifted");
    }

    /// One version as the model keeps it.
    #[derive(Clone, Debug)]
    struct ModelVersion {
        id: Option<String>,
        order: String,
        marker: bool,
        size: u64,
    }

    /// Every key's versions, newest first: what the index must show.
    #[derive(Default)]
    struct Model(BTreeMap<String, Vec<ModelVersion>>);

    impl Model {
        fn add(&mut self, key: &str, v: ModelVersion) -> bool {
            let versions = self.0.entry(key.to_owned()).or_default();
            if v.id.is_none() {
                match versions.iter().position(|x| x.id.is_none()) {
                    Some(at) if versions[at].order >= v.order => return false,
                    Some(at) => {
                        versions.remove(at);
                    }
                    None => {}
                }
            }
            versions.push(v);
            versions.sort_by(|a, b| b.order.cmp(&a.order));
            true
        }

        fn remove(&mut self, key: &str, id: Option<&str>, order: Option<&str>) -> bool {
            let Some(versions) = self.0.get_mut(key) else { return false };
            let found =
                versions.iter().position(|v| v.id.as_deref() == id && order.is_none_or(|o| v.order.as_str() <= o));
            if let Some(at) = found {
                versions.remove(at);
            }
            if versions.is_empty() {
                self.0.remove(key);
            }
            found.is_some()
        }

        fn current(&self) -> Vec<(String, u64)> {
            self.0.iter().filter(|(_, v)| !v[0].marker).map(|(k, v)| (k.clone(), v[0].size)).collect()
        }

        fn listing(&self, prefix: &str, delimiter: &str) -> Listed {
            let mut out: Listed = Vec::new();
            for (key, versions) in self.0.range(prefix.to_owned()..).take_while(|(k, _)| k.starts_with(prefix)) {
                if let Some(common) = common_prefix(key, prefix, delimiter) {
                    if out.last().is_none_or(|(name, v)| v.is_some() || name != common) {
                        out.push((common.to_owned(), None));
                    }
                    continue;
                }
                for (i, v) in versions.iter().enumerate() {
                    let id = v.id.clone().unwrap_or_else(|| "null".into());
                    out.push((key.clone(), Some((id, v.marker, i == 0))));
                }
            }
            out
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// A write: a new version or (not `versioned`) the null version, maybe a delete
        /// marker, maybe with an order older than everything before it.
        Put { key: usize, versioned: bool, marker: bool, stale: bool },
        /// An unversioned bucket's DELETE: the null version, if not newer.
        Unlink { key: usize },
        /// DELETE of one version: the `pick`-th of the key's, or its null version.
        RemoveVersion { key: usize, pick: usize },
    }

    const KEYS: [&str; 6] = ["a", "a/b", "a/c", "ab", "b/x/y", "c"];

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..KEYS.len(), any::<bool>(), proptest::bool::weighted(0.2), proptest::bool::weighted(0.1))
                .prop_map(|(key, versioned, marker, stale)| Op::Put { key, versioned, marker, stale }),
            1 => (0..KEYS.len()).prop_map(|key| Op::Unlink { key }),
            2 => (0..KEYS.len(), 0..4usize).prop_map(|(key, pick)| Op::RemoveVersion { key, pick }),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Any sequence of writes, delete markers, null-version and version deletions gives
        /// the model's current listing, version listing (paged at any size, with any prefix
        /// and delimiter), current versions and totals.
        #[test]
        fn versions_behave_like_the_model(
            ops in proptest::collection::vec(op(), 1..40),
            prefix in proptest::sample::select(vec!["", "a", "a/", "b"]),
            delimiter in proptest::sample::select(vec!["", "/"]),
            max in 1u32..5,
        ) {
            let mut o = shard();
            let mut model = Model::default();
            for (step, op) in ops.iter().enumerate() {
                let now = 1_000 + 10 * step as u64;
                match *op {
                    Op::Put { key, versioned, marker, stale } => {
                        let at = order(if stale { now - 995 } else { now }, step as u64);
                        let entry = version(&at, step as u64 + 1, versioned, marker);
                        let applied = link(&mut o, KEYS[key], entry.clone()).applied;
                        let expected = model.add(KEYS[key], ModelVersion {
                            id: entry.version.clone(), order: at, marker, size: entry.size,
                        });
                        proptest::prop_assert_eq!(applied, expected, "put {:?}", op);
                    }
                    Op::Unlink { key } => {
                        let at = order(now, step as u64);
                        let input = UnlinkInput { key: KEYS[key].into(), order: at.clone(), events: vec![] };
                        let out = ChangeOutput::decode(&o.call(CLASS, "unlink", 1, 0, &input.encode()).unwrap()).unwrap();
                        proptest::prop_assert_eq!(out.applied, model.remove(KEYS[key], None, Some(&at)));
                    }
                    Op::RemoveVersion { key, pick } => {
                        let versions = model.0.get(KEYS[key]).cloned().unwrap_or_default();
                        let id = versions.get(pick).and_then(|v| v.id.clone());
                        let applied = remove(&mut o, KEYS[key], id.as_deref()).applied;
                        proptest::prop_assert_eq!(applied, model.remove(KEYS[key], id.as_deref(), None));
                    }
                }
                proptest::prop_assert_eq!(current_keys(&mut o), model.current());
            }
            proptest::prop_assert_eq!(list_all(&mut o, prefix, delimiter, max), model.listing(prefix, delimiter));
            for key in KEYS {
                let newest = model.0.get(key).map(|v| v[0].clone());
                let got = get(&mut o, key, Which::Current);
                proptest::prop_assert_eq!(got.entry.map(|e| (e.order, e.delete_marker)), newest.map(|v| (v.order, v.marker)));
            }
            let totals = stats(&mut o);
            let current = model.current();
            proptest::prop_assert_eq!((totals.entries, totals.bytes), (current.len() as u64, current.iter().map(|c| c.1).sum()));
            proptest::prop_assert_eq!(totals.is_empty(), model.0.is_empty());
        }
    }
}
