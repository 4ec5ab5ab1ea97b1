//! The gateway's side of bucket notifications: which configurations an operation
//! matches, the events it reserves before acting and commits (or pushes) after, and how
//! the queue owner learns whether a dead gateway's operation happened.

use crate::meta::{BucketInfo, Meta, UserInfo};
use crate::objects::read_meta;
use s3s::{S3Error, S3Result, s3_error};
use shoal_client::IoCtx;
use shoal_notify::event::{
    BucketEntity, EventRecord, KeyVal, ObjectEntity, Principal, QueuedEvent, RequestParameters, ResponseElements,
    S3Entity, event_time, sequencer,
};
use shoal_notify::filter::Subject;
use shoal_notify::manager::{Resolver, TopicSource};
use shoal_notify::publish::{Publisher, Reserved};
use shoal_notify::topic::{Topic, parse_arn};
use shoal_types::{Errno, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a request came from; the front puts it in the request's extensions.
#[derive(Clone, Debug, Default)]
pub struct Origin {
    /// The request id sent back as `x-amz-request-id`.
    pub request_id: String,
    /// The client's address.
    pub source_ip: String,
}

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
    /// The order time, when known before the operation (removals): the event is then
    /// complete but for the removed object's size and ETag.
    pub order_ns: Option<u64>,
}

/// What an operation produced.
pub struct Done {
    /// Object size (of the removed object for removals).
    pub size: u64,
    /// ETag without quotes.
    pub etag: String,
    /// The operation's order time in ns (the sequencer).
    pub order_ns: u64,
}

/// Events of one operation waiting for its outcome.
#[derive(Default)]
pub struct Pending {
    events: Vec<(Arc<Topic>, QueuedEvent, Option<Reserved>)>,
}

/// Matches operations against bucket notification configurations and publishes events.
pub struct Notifier {
    /// Queues, pusher and counters.
    pub publisher: Arc<Publisher>,
    meta: Arc<Meta>,
    zonegroup: String,
}

/// Fills in what is known only once the operation is done.
fn complete(mut event: QueuedEvent, done: &Done) -> QueuedEvent {
    let seq = sequencer(done.order_ns);
    let r = &mut event.record;
    r.event_time = event_time(done.order_ns);
    r.s3.object.size = done.size;
    r.s3.object.e_tag = done.etag.clone();
    r.event_id = format!("{seq}.{}.{}", event.tag, r.s3.configuration_id);
    r.s3.object.sequencer = seq;
    event
}

impl Notifier {
    /// A notifier publishing through `publisher`, reading topics through `meta`.
    pub fn new(publisher: Arc<Publisher>, meta: Arc<Meta>, zonegroup: String) -> Notifier {
        Notifier { publisher, meta, zonegroup }
    }

    /// The events `op` produces; persistent ones are reserved now. A queue that stays
    /// full answers 503 SlowDown (nothing is reserved then).
    pub async fn prepare(&self, op: &Operation<'_>, origin: &Origin, who: &Option<Arc<UserInfo>>) -> S3Result<Pending> {
        let mut pending = Pending::default();
        if op.bucket.notifications.is_empty() {
            return Ok(pending);
        }
        let subject = Subject { event: op.event, key: op.key, metadata: op.metadata, tags: op.tags };
        for config in op.bucket.notifications.iter().filter(|c| c.matches(&subject)) {
            let Some((tenant, name)) = parse_arn(&config.topic_arn) else { continue };
            let key = Topic::key(&tenant, &name);
            let topic = match self.meta.topic(&key).await {
                Ok(Some(topic)) => topic,
                // A topic deleted under its notification no longer fails the bucket's writes.
                Ok(None) => continue,
                Err(e) => {
                    self.finish(pending, None).await;
                    return Err(crate::s3::rados_error(e));
                }
            };
            let record = EventRecord {
                event_version: "2.1".into(),
                event_source: "ceph:s3".into(),
                aws_region: self.zonegroup.clone(),
                event_name: op.event.to_owned(),
                user_identity: Principal { principal_id: who.as_ref().map_or("anonymous".into(), |u| u.uid.clone()) },
                request_parameters: RequestParameters { source_ip_address: origin.source_ip.clone() },
                response_elements: ResponseElements {
                    request_id: origin.request_id.clone(),
                    host_id: origin.request_id.clone(),
                },
                s3: S3Entity {
                    s3_schema_version: "1.0".into(),
                    configuration_id: config.id.clone(),
                    bucket: BucketEntity {
                        name: op.bucket.name.clone(),
                        owner_identity: Principal { principal_id: op.bucket.owner.clone() },
                        arn: format!("arn:aws:s3:{}::{}", self.zonegroup, op.bucket.name),
                        id: op.bucket.id.clone(),
                    },
                    object: ObjectEntity {
                        key: op.key.to_owned(),
                        metadata: op
                            .metadata
                            .iter()
                            .map(|(k, v)| KeyVal { key: format!("x-amz-meta-{k}"), val: v.clone() })
                            .collect(),
                        tags: op.tags.iter().map(|(k, v)| KeyVal { key: k.clone(), val: v.clone() }).collect(),
                        ..Default::default()
                    },
                },
                opaque_data: topic.opaque_data.clone(),
                ..Default::default()
            };
            let mut event = QueuedEvent {
                topic: key,
                created_ns: crate::objects::now_ns(),
                head: crate::layout::head_object(&op.bucket.id, op.key),
                tag: op.tag.to_owned(),
                record,
            };
            if let Some(order_ns) = op.order_ns {
                event = complete(event, &Done { size: 0, etag: String::new(), order_ns });
            }
            let reserved = if topic.dest.persistent {
                match self.publisher.reserve(topic.clone(), &event).await {
                    Ok(r) => Some(r),
                    Err(e) => {
                        self.finish(pending, None).await;
                        return Err(reserve_error(e));
                    }
                }
            } else {
                None
            };
            pending.events.push((topic, event, reserved));
        }
        Ok(pending)
    }

    /// Publishes the events of an operation that succeeded (`done`), or drops them.
    pub async fn finish(&self, pending: Pending, done: Option<Done>) {
        let Some(done) = done else {
            for reserved in pending.events.into_iter().filter_map(|(_, _, r)| r) {
                self.publisher.abort(reserved).await;
            }
            return;
        };
        let publisher = &self.publisher;
        let work = pending.events.into_iter().map(|(topic, event, reserved)| {
            let event = complete(event, &done);
            async move {
                match reserved {
                    Some(reserved) => {
                        if let Err(e) = publisher.commit(reserved, &event).await {
                            // The reservation stays; the queue's owner commits it once stale.
                            tracing::warn!(topic = %topic.name, error = %e, "committing a notification failed");
                        }
                    }
                    None => publisher.push_now(&topic, &event).await,
                }
            }
        });
        futures::future::join_all(work).await;
    }
}

fn reserve_error(e: shoal_types::RadosError) -> S3Error {
    if e.errno == Errno::NoSpace {
        s3_error!(SlowDown, "a notification queue of this bucket is full; retry later")
    } else {
        crate::s3::rados_error(e)
    }
}

/// Topics for the delivery manager, through the gateway's coherent metadata cache.
pub struct Topics(pub Arc<Meta>);

#[async_trait::async_trait]
impl TopicSource for Topics {
    async fn topic(&self, key: &str) -> Result<Option<Arc<Topic>>> {
        self.0.topic(key).await
    }

    async fn generation_drained(&self, key: &str, generation: u32) -> Result<()> {
        let Some(topic) = self.0.topic(key).await? else { return Ok(()) };
        let mut changed = (*topic).clone();
        changed.dest.draining.retain(|g| g.generation != generation);
        self.0.put_topic(&changed).await
    }
}

/// Says whether a dead gateway's operation happened, from the head object it left.
pub struct HeadResolver(pub IoCtx);

#[async_trait::async_trait]
impl Resolver for HeadResolver {
    async fn resolve(&self, pending: &QueuedEvent) -> Result<Option<QueuedEvent>> {
        let meta = read_meta(&self.0, &pending.head).await?;
        if pending.record.event_name.starts_with("ObjectRemoved:") {
            // A removal happened if the head is gone (its event already has its time).
            return Ok(meta.is_none().then(|| pending.clone()));
        }
        Ok(meta.filter(|m| m.order.ends_with(&format!(".{}", pending.tag))).map(|m| {
            let done = Done { size: m.size, etag: m.etag.clone(), order_ns: m.mtime_ns };
            complete(pending.clone(), &done)
        }))
    }
}
