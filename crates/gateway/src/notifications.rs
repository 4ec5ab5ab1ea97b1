//! The gateway's side of bucket notifications: which configurations an operation
//! matches, the events admitted before it acts (the persistent ones are written into its
//! bucket index transaction, see [`Pending::logged`]) and the synchronous ones pushed after.

use crate::clock::now_ns;
use crate::error::rados_error;
use crate::events::{Done, Operation, Pending, complete};
use crate::meta::{Meta, UserInfo};
use crate::request::Origin;
use s3s::{S3Error, S3Result, s3_error};
use shoal_notify::event::{
    BucketEntity, EVENT_SOURCE, EVENT_VERSION, EventRecord, KeyVal, ObjectEntity, Principal, QueuedEvent,
    RequestParameters, ResponseElements, S3_SCHEMA_VERSION, S3Entity, bucket_arn,
};
use shoal_notify::filter::Subject;
use shoal_notify::manager::TopicSource;
use shoal_notify::publish::Publisher;
use shoal_notify::topic::{Topic, parse_arn};
use shoal_types::{Errno, Result};
use std::sync::Arc;

/// Matches operations against bucket notification configurations and publishes events.
pub struct Notifier {
    /// Queues, pusher and counters.
    pub publisher: Arc<Publisher>,
    meta: Arc<Meta>,
    zonegroup: String,
}

impl Notifier {
    /// A notifier publishing through `publisher`, reading topics through `meta`.
    pub fn new(publisher: Arc<Publisher>, meta: Arc<Meta>, zonegroup: String) -> Notifier {
        Notifier { publisher, meta, zonegroup }
    }

    /// The events `op` produces; persistent ones are admitted to their queues now. A queue
    /// that stays full answers 503 SlowDown.
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
                Err(e) => return Err(rados_error(e)),
            };
            let record = EventRecord {
                event_version: EVENT_VERSION.into(),
                event_source: EVENT_SOURCE.into(),
                aws_region: self.zonegroup.clone(),
                event_name: op.event.to_owned(),
                user_identity: Principal { principal_id: who.as_ref().map_or("anonymous".into(), |u| u.uid.clone()) },
                request_parameters: RequestParameters { source_ip_address: origin.source_ip.clone() },
                response_elements: ResponseElements {
                    request_id: origin.request_id.clone(),
                    host_id: origin.request_id.clone(),
                },
                s3: S3Entity {
                    s3_schema_version: S3_SCHEMA_VERSION.into(),
                    configuration_id: config.id.clone(),
                    bucket: BucketEntity {
                        name: op.bucket.name.clone(),
                        owner_identity: Principal { principal_id: op.bucket.owner.clone() },
                        arn: bucket_arn(&self.zonegroup, &op.bucket.name),
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
            let event = QueuedEvent { topic: key, created_ns: now_ns(), tag: op.tag.to_owned(), record };
            if topic.dest.persistent {
                self.publisher.admit(&topic, &event).await.map_err(admit_error)?;
            }
            pending.events.push((topic, event));
        }
        Ok(pending)
    }

    /// Counts the logged events of an operation that succeeded and pushes its
    /// synchronous ones (`done` is `None` when it failed: nothing was logged).
    pub async fn finish(&self, pending: Pending, done: Option<Done>) {
        let Some(done) = done else { return };
        let publisher = &self.publisher;
        let mut work = Vec::new();
        for (topic, event) in pending.events {
            if topic.dest.persistent {
                // Already logged with the operation's index change.
                publisher.metrics.topic(&topic.name).queued.inc();
            } else {
                let event = complete(event, &done);
                work.push(async move { publisher.push_now(&topic, &event).await });
            }
        }
        futures::future::join_all(work).await;
    }
}

fn admit_error(e: shoal_types::RadosError) -> S3Error {
    if e.errno == Errno::NoSpace {
        s3_error!(SlowDown, "a notification queue of this bucket is full; retry later")
    } else {
        rados_error(e)
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
