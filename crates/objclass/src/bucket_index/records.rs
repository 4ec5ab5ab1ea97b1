//! What a bucket index shard stores (its entries, statistics and log of changes, omap rows
//! under one-byte prefixes), the helpers that read and write them, and the versioned
//! input of `link`, whose older versions decode alongside old entries.

use super::lock::ObjectLock;
use crate::{MethodContext, decode_stored};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use shoal_types::{Result, Versioned};

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
    /// The version id; `None` is the `null` version (every object of an unversioned bucket).
    pub version: Option<String>,
    /// A delete marker (a version without data that hides the key).
    pub delete_marker: bool,
    /// The version has a head object of its own, named by its write's tag (every version
    /// written since the bucket was first versioned), not the key's plain head.
    pub own_head: bool,
    /// Object lock: retention and legal hold, enforced by `unlink_version`.
    pub lock: ObjectLock,
    /// The Content-Type given at upload, for listings that show it (Swift's).
    pub content_type: Option<String>,
}

impl IndexEntry {
    /// The version id as S3 shows it (`null` for the null version).
    pub fn version_id(&self) -> &str {
        self.version.as_deref().unwrap_or("null")
    }
}

impl Versioned for IndexEntry {
    const NAME: &'static str = "bucket index entry";
    /// Version 3: the content type.
    const VERSION: u8 = 3;

    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        use shoal_types::encoding::decode_body;
        match version {
            1 => Some(v1::IndexEntry::decode_body(body).map(Into::into)),
            2 => Some(decode_body::<v2::IndexEntry>("bucket index entry v2", body).map(Into::into)),
            _ => None,
        }
    }
}

/// The shard's totals, and the next event log sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexStats {
    /// Current (listed) objects in the shard.
    pub entries: u64,
    /// Sum of the current objects' sizes.
    pub bytes: u64,
    /// Sequence number of the next logged event (kept here because every change rewrites
    /// the header anyway).
    pub next_event: u64,
    /// Version records (every version of versioned keys, delete markers included).
    pub versions: u64,
    /// Sum of the version records' sizes.
    pub version_bytes: u64,
}

impl IndexStats {
    /// Whether the shard holds no object and no version.
    pub fn is_empty(&self) -> bool {
        self.entries == 0 && self.versions == 0
    }
}

impl Versioned for IndexStats {
    const NAME: &'static str = "bucket index stats";
    const VERSION: u8 = 3;

    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        use shoal_types::encoding::decode_body;
        let (entries, bytes, next_event) = match version {
            1 => match decode_body::<(u64, u64)>("bucket index stats v1", body) {
                Ok((entries, bytes)) => (entries, bytes, 0),
                Err(e) => return Some(Err(e)),
            },
            2 => match decode_body::<(u64, u64, u64)>("bucket index stats v2", body) {
                Ok(fields) => fields,
                Err(e) => return Some(Err(e)),
            },
            _ => return None,
        };
        Some(Ok(IndexStats { entries, bytes, next_event, ..Default::default() }))
    }
}

/// Shapes written by earlier versions, kept to decode them.
mod v1 {
    use serde::{Deserialize, Serialize};
    use shoal_types::Result;

    /// `IndexEntry` version 1: no version id, no delete marker.
    #[derive(Serialize, Deserialize)]
    pub struct IndexEntry {
        size: u64,
        etag: String,
        mtime_ns: u64,
        owner: String,
        storage_class: String,
        order: String,
        tail: Vec<super::Segment>,
    }

    impl IndexEntry {
        pub fn decode_body(body: &[u8]) -> Result<Self> {
            shoal_types::encoding::decode_body("bucket index entry v1", body)
        }
    }

    impl From<IndexEntry> for super::IndexEntry {
        fn from(e: IndexEntry) -> Self {
            super::IndexEntry {
                size: e.size,
                etag: e.etag,
                mtime_ns: e.mtime_ns,
                owner: e.owner,
                storage_class: e.storage_class,
                order: e.order,
                tail: e.tail,
                version: None,
                delete_marker: false,
                own_head: false,
                lock: super::ObjectLock::default(),
                content_type: None,
            }
        }
    }

    /// `LinkInput` version 1, holding a version 1 entry.
    #[derive(Serialize, Deserialize)]
    pub struct LinkInput {
        key: String,
        entry: IndexEntry,
        events: Vec<bytes::Bytes>,
    }

    impl From<LinkInput> for super::LinkInput {
        fn from(l: LinkInput) -> Self {
            super::LinkInput { key: l.key, entry: l.entry.into(), events: l.events, condition: None, fresh: false }
        }
    }
}

/// Version 2 shapes: entries without a content type.
mod v2 {
    use bytes::Bytes;
    use serde::{Deserialize, Serialize};

    /// `IndexEntry` version 2.
    #[derive(Serialize, Deserialize)]
    pub struct IndexEntry {
        size: u64,
        etag: String,
        mtime_ns: u64,
        owner: String,
        storage_class: String,
        order: String,
        tail: Vec<super::Segment>,
        version: Option<String>,
        delete_marker: bool,
        own_head: bool,
        lock: super::ObjectLock,
    }

    impl From<IndexEntry> for super::IndexEntry {
        fn from(e: IndexEntry) -> Self {
            super::IndexEntry {
                size: e.size,
                etag: e.etag,
                mtime_ns: e.mtime_ns,
                owner: e.owner,
                storage_class: e.storage_class,
                order: e.order,
                tail: e.tail,
                version: e.version,
                delete_marker: e.delete_marker,
                own_head: e.own_head,
                lock: e.lock,
                content_type: None,
            }
        }
    }

    /// `LinkInput` version 2, holding a version 2 entry.
    #[derive(Serialize, Deserialize)]
    pub struct LinkInput {
        key: String,
        entry: IndexEntry,
        events: Vec<Bytes>,
        condition: Option<super::Condition>,
    }

    impl From<LinkInput> for super::LinkInput {
        fn from(l: LinkInput) -> Self {
            super::LinkInput {
                key: l.key,
                entry: l.entry.into(),
                events: l.events,
                condition: l.condition,
                fresh: false,
            }
        }
    }
}

/// Output of `link` and `unlink`: what happened to the stored entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeOutput {
    /// The change was applied (false: a newer entry was already there).
    pub applied: bool,
    /// The entry that was replaced or removed (or, when not applied, the newer one kept).
    pub previous: Option<IndexEntry>,
}

impl Versioned for ChangeOutput {
    const NAME: &'static str = "bucket_index change output";
    /// Version 3: entries of version 3.
    const VERSION: u8 = 3;
}

/// The byte after every UTF-8 byte: `prefix + SKIP` sorts after every key starting with `prefix`.
pub(super) const SKIP: u8 = 0xff;

/// The lowest byte that starts no UTF-8 key: omap keys from here on are the shard's own
/// records (version records, null pointers, the event log), never object keys.
pub(super) const RECORDS: u8 = 0xf5;

/// Prefix of event log keys (`LOG` + sequence number, big-endian).
pub(super) const LOG: [u8; 2] = [SKIP, b'e'];

pub(super) fn log_key(seq: u64) -> Bytes {
    let mut k = LOG.to_vec();
    k.extend_from_slice(&seq.to_be_bytes());
    Bytes::from(k)
}

/// Appends `events` to the shard's event log, numbering them from `stats`; true when
/// there were any (the header must then be saved).
pub(super) fn append_events(ctx: &mut MethodContext<'_>, stats: &mut IndexStats, events: Vec<Bytes>) -> Result<bool> {
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

pub(super) fn load_stats(ctx: &mut MethodContext<'_>) -> Result<IndexStats> {
    let header = ctx.object.omap_get_header()?;
    if header.is_empty() { Ok(IndexStats::default()) } else { decode_stored("bucket index stats", &header) }
}

pub(super) fn load_entry(ctx: &mut MethodContext<'_>, key: &str) -> Result<Option<IndexEntry>> {
    ctx.object.omap_get(key.as_bytes())?.map(|v| decode_stored("bucket index entry", &v)).transpose()
}

pub(super) fn save_stats(ctx: &mut MethodContext<'_>, stats: IndexStats) -> Result<()> {
    ctx.object.omap_set_header(Bytes::from(stats.encode()))
}

/// Input of `bucket_index.link`: add a version of a key. With `entry.version` set, a new
/// version (its id must be [`version_id_of`] its order); without, the key's null version,
/// replacing the stored one if `entry.order` is above its order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkInput {
    /// Object key.
    pub key: String,
    /// The new entry.
    pub entry: IndexEntry,
    /// Events logged with the change, whether or not a newer entry keeps it from applying.
    pub events: Vec<Bytes>,
    /// What the key's current object must be for the change to apply (ECANCELED, and
    /// nothing changed or logged, if it is not).
    pub condition: Option<Condition>,
    /// A write a client waits for: it must be at least as new as every version of the key
    /// (ESTALE, nothing changed or logged, if not; the writer takes an order past the
    /// newest and links again), so a writer whose clock is behind cannot slip under a
    /// version acknowledged before it.
    pub fresh: bool,
}

/// A condition on a key's current object (S3's conditional writes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Condition {
    /// No current object (none, or a delete marker): `If-None-Match: *`.
    Absent,
    /// A current object with this ETag: `If-Match`.
    ETag(String),
    /// A current object written at this order: the version a lifecycle rule acted on
    /// (its delete marker must not hide a newer write).
    Order(String),
}

impl Versioned for LinkInput {
    const NAME: &'static str = "bucket_index.link input";
    /// Version 4 added `fresh`; version 3: entries of version 3.
    const VERSION: u8 = 4;

    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        use shoal_types::encoding::decode_body;
        match version {
            // Version 3 is version 4 without its last field: a `false` appended reads as it.
            3 => Some(decode_body::<LinkInput>("bucket_index.link input v3", &[body, &[0]].concat())),
            1 => Some(decode_body::<v1::LinkInput>("bucket_index.link input v1", body).map(Into::into)),
            2 => Some(decode_body::<v2::LinkInput>("bucket_index.link input v2", body).map(Into::into)),
            _ => None,
        }
    }
}
