//! What an operation tells bucket notifications: where the request came from, what the
//! operation is about, what it produced, and the events waiting for its outcome. The data
//! path writes the persistent ones into the operation's bucket index transaction
//! ([`Pending::logged`]); [`crate::notifications`] prepares and finishes them.

use crate::head::ObjectMeta;
use crate::meta::BucketInfo;
use bytes::Bytes;
use shoal_notify::event::QueuedEvent;
use shoal_notify::topic::Topic;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What an operation is about, known before it runs.
pub struct Operation<'a> {
    /// The bucket.
    pub bucket: &'a BucketInfo,
    /// The object key.
    pub key: &'a str,
    /// Event type, e.g. `ObjectCreated:Put`.
    pub event: &'a str,
    /// The operation's tag (the head object carries it once a write happened).
    pub tag: &'a str,
    /// User metadata without the `x-amz-meta-` prefix.
    pub metadata: &'a BTreeMap<String, String>,
    /// Tags.
    pub tags: &'a [(String, String)],
}

/// What an operation produced (for removals: what it removed).
pub struct Done {
    /// Object size (of the removed object for removals).
    pub size: u64,
    /// ETag without quotes.
    pub etag: String,
    /// The operation's order time in ns (the sequencer).
    pub order_ns: u64,
    /// The version written or removed (empty for the null version).
    pub version_id: String,
}

impl Done {
    /// What writing `meta` produced.
    pub fn of(meta: &ObjectMeta) -> Done {
        let version_id = meta.version.clone().unwrap_or_default();
        Done { size: meta.size, etag: meta.etag.clone(), order_ns: meta.mtime_ns, version_id }
    }
}

/// Events of one operation waiting for its outcome.
#[derive(Default)]
pub struct Pending {
    /// Each matched topic and its event, completed when the operation is done.
    pub(crate) events: Vec<(Arc<Topic>, QueuedEvent)>,
}

impl Pending {
    /// The persistent events, completed with `done` and encoded for the bucket index log.
    pub fn logged(&self, done: &Done) -> Vec<Bytes> {
        let persistent = self.events.iter().filter(|(topic, _)| topic.dest.persistent);
        persistent.map(|(_, event)| Bytes::from(complete(event.clone(), done).encode())).collect()
    }
}

/// `event` completed with what the operation produced.
pub(crate) fn complete(mut event: QueuedEvent, done: &Done) -> QueuedEvent {
    event.record.s3.object.version_id = done.version_id.clone();
    event.complete(done.order_ns, done.size, &done.etag);
    event
}
