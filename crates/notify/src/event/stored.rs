//! The stored form of a queued event: only what varies between events. The constants and
//! the fields derived from others (`eventTime`, `sequencer` and `eventId` from the order
//! time, the bucket ARN, `x-amz-id-2` = the request id) are rebuilt when it is read. An
//! event that does not follow those rules (the gateway builds none) is stored whole.

use super::{
    BucketEntity, EventRecord, KeyVal, ObjectEntity, Principal, QueuedEvent, RequestParameters, ResponseElements,
    Route, S3Entity, bucket_arn, event_id, event_time, sequencer,
};
use serde::{Deserialize, Serialize};
use shoal_types::Versioned;
use std::borrow::Cow;

/// `eventVersion` of every record.
pub const EVENT_VERSION: &str = "2.1";
/// `eventSource` of every record.
pub const EVENT_SOURCE: &str = "ceph:s3";
/// `s3.s3SchemaVersion` of every record.
pub const S3_SCHEMA_VERSION: &str = "1.0";

/// An encoded event (version 2; version 1 was the whole [`QueuedEvent`]).
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Stored<'a> {
    /// The whole event.
    Full(Cow<'a, QueuedEvent>),
    /// The fields that vary.
    Compact(Compact<'a>),
}

/// The fields of a [`QueuedEvent`] that are not constant or derived.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Compact<'a> {
    topic: Cow<'a, str>,
    created_ns: u64,
    tag: Cow<'a, str>,
    /// The operation's order time: `eventTime`, `sequencer` and `eventId` follow from it.
    order_ns: u64,
    region: Cow<'a, str>,
    event_name: Cow<'a, str>,
    principal_id: Cow<'a, str>,
    source_ip: Cow<'a, str>,
    request_id: Cow<'a, str>,
    configuration_id: Cow<'a, str>,
    bucket: Cow<'a, str>,
    bucket_owner: Cow<'a, str>,
    bucket_id: Cow<'a, str>,
    key: Cow<'a, str>,
    size: u64,
    e_tag: Cow<'a, str>,
    version_id: Cow<'a, str>,
    metadata: Cow<'a, [KeyVal]>,
    tags: Cow<'a, [KeyVal]>,
    opaque_data: Cow<'a, str>,
}

impl Versioned for Stored<'_> {
    const NAME: &'static str = "queued event";
    const VERSION: u8 = 2;

    fn decode_older(version: u8, body: &[u8]) -> Option<shoal_types::Result<Self>> {
        (version == 1)
            .then(|| shoal_types::encoding::decode_body(Self::NAME, body).map(|e| Stored::Full(Cow::Owned(e))))
    }
}

impl<'a> Stored<'a> {
    /// How `event` is stored, borrowing from it.
    pub(super) fn of(event: &'a QueuedEvent) -> Stored<'a> {
        let Some(order_ns) = derived_from_order(event) else { return Stored::Full(Cow::Borrowed(event)) };
        let r = &event.record;
        let (bucket, object) = (&r.s3.bucket, &r.s3.object);
        Stored::Compact(Compact {
            topic: Cow::Borrowed(&event.topic),
            created_ns: event.created_ns,
            tag: Cow::Borrowed(&event.tag),
            order_ns,
            region: Cow::Borrowed(&r.aws_region),
            event_name: Cow::Borrowed(&r.event_name),
            principal_id: Cow::Borrowed(&r.user_identity.principal_id),
            source_ip: Cow::Borrowed(&r.request_parameters.source_ip_address),
            request_id: Cow::Borrowed(&r.response_elements.request_id),
            configuration_id: Cow::Borrowed(&r.s3.configuration_id),
            bucket: Cow::Borrowed(&bucket.name),
            bucket_owner: Cow::Borrowed(&bucket.owner_identity.principal_id),
            bucket_id: Cow::Borrowed(&bucket.id),
            key: Cow::Borrowed(&object.key),
            size: object.size,
            e_tag: Cow::Borrowed(&object.e_tag),
            version_id: Cow::Borrowed(&object.version_id),
            metadata: Cow::Borrowed(&object.metadata),
            tags: Cow::Borrowed(&object.tags),
            opaque_data: Cow::Borrowed(&r.opaque_data),
        })
    }

    /// Decodes any stored form: postcard (versions 1 and 2) or, as the first version
    /// queued events, JSON.
    pub(super) fn read(bytes: &[u8]) -> Result<Stored<'static>, String> {
        if bytes.first() == Some(&b'{') {
            let event = serde_json::from_slice(bytes).map_err(|e| format!("corrupt queued event: {e}"))?;
            return Ok(Stored::Full(Cow::Owned(event)));
        }
        <Stored as Versioned>::decode(bytes).map_err(|e| format!("corrupt queued event: {}", e.message))
    }

    /// Where the event goes.
    pub(super) fn route(self) -> Route {
        match self {
            Stored::Full(event) => event.into_owned().into_route(),
            Stored::Compact(c) => {
                Route { topic: c.topic.into_owned(), bucket: c.bucket.into_owned(), key: c.key.into_owned() }
            }
        }
    }

    /// The event, with its derived fields rebuilt.
    pub(super) fn into_event(self) -> QueuedEvent {
        let c = match self {
            Stored::Full(event) => return event.into_owned(),
            Stored::Compact(c) => c,
        };
        let sequencer = sequencer(c.order_ns);
        let event_id = event_id(&sequencer, &c.tag, &c.configuration_id);
        let arn = bucket_arn(&c.region, &c.bucket);
        let request_id = c.request_id.into_owned();
        QueuedEvent {
            topic: c.topic.into_owned(),
            created_ns: c.created_ns,
            tag: c.tag.into_owned(),
            record: EventRecord {
                event_version: EVENT_VERSION.into(),
                event_source: EVENT_SOURCE.into(),
                aws_region: c.region.into_owned(),
                event_time: event_time(c.order_ns),
                event_name: c.event_name.into_owned(),
                user_identity: Principal { principal_id: c.principal_id.into_owned() },
                request_parameters: RequestParameters { source_ip_address: c.source_ip.into_owned() },
                response_elements: ResponseElements { host_id: request_id.clone(), request_id },
                s3: S3Entity {
                    s3_schema_version: S3_SCHEMA_VERSION.into(),
                    configuration_id: c.configuration_id.into_owned(),
                    bucket: BucketEntity {
                        name: c.bucket.into_owned(),
                        owner_identity: Principal { principal_id: c.bucket_owner.into_owned() },
                        arn,
                        id: c.bucket_id.into_owned(),
                    },
                    object: ObjectEntity {
                        key: c.key.into_owned(),
                        size: c.size,
                        e_tag: c.e_tag.into_owned(),
                        version_id: c.version_id.into_owned(),
                        sequencer,
                        metadata: c.metadata.into_owned(),
                        tags: c.tags.into_owned(),
                    },
                },
                event_id,
                opaque_data: c.opaque_data.into_owned(),
            },
        }
    }
}

/// The order time `event`'s derived fields follow from, if they all do.
fn derived_from_order(event: &QueuedEvent) -> Option<u64> {
    let r = &event.record;
    let seq = &r.s3.object.sequencer;
    let order_ns = u64::from_str_radix(seq, 16).ok()?;
    let follows = sequencer(order_ns) == *seq
        && r.event_version == EVENT_VERSION
        && r.event_source == EVENT_SOURCE
        && r.s3.s3_schema_version == S3_SCHEMA_VERSION
        && r.event_time == event_time(order_ns)
        && r.response_elements.host_id == r.response_elements.request_id
        && r.event_id == event_id(seq, &event.tag, &r.s3.configuration_id)
        && r.s3.bucket.arn == bucket_arn(&r.aws_region, &r.s3.bucket.name);
    follows.then_some(order_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Strings with the characters that matter here (separators, hex digits, non-ASCII).
    fn text() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9.:/_ é-]{0,12}"
    }

    fn pairs() -> impl Strategy<Value = Vec<KeyVal>> {
        proptest::collection::vec((text(), text()).prop_map(|(key, val)| KeyVal { key, val }), 0..3)
    }

    /// An event as the gateway builds it: every derived field follows from the others.
    fn built() -> impl Strategy<Value = QueuedEvent> {
        let ids = (text(), text(), text(), text(), text(), text(), text());
        let object = (text(), any::<u64>(), text(), text(), pairs(), pairs());
        (ids, object, text(), any::<u64>(), any::<u64>(), text()).prop_map(
            |(
                (topic, tag, region, name, who, ip, request),
                (key, size, etag, version, metadata, tags),
                bucket,
                created,
                order,
                opaque,
            )| {
                let mut event = QueuedEvent {
                    created_ns: created,
                    record: EventRecord {
                        event_version: EVENT_VERSION.into(),
                        event_source: EVENT_SOURCE.into(),
                        event_name: name,
                        user_identity: Principal { principal_id: who.clone() },
                        request_parameters: RequestParameters { source_ip_address: ip },
                        response_elements: ResponseElements { request_id: request.clone(), host_id: request },
                        s3: S3Entity {
                            s3_schema_version: S3_SCHEMA_VERSION.into(),
                            configuration_id: opaque.chars().rev().collect(),
                            bucket: BucketEntity {
                                arn: bucket_arn(&region, &bucket),
                                name: bucket,
                                owner_identity: Principal { principal_id: who },
                                id: topic.to_uppercase(),
                            },
                            object: ObjectEntity { key, version_id: version, metadata, tags, ..Default::default() },
                        },
                        aws_region: region,
                        opaque_data: opaque,
                        ..Default::default()
                    },
                    topic,
                    tag,
                };
                event.complete(order, size, &etag);
                event
            },
        )
    }

    /// Makes one derived field disagree with what it derives from.
    fn tamper(e: &mut QueuedEvent, field: u8) {
        let r = &mut e.record;
        match field % 8 {
            0 => r.event_id.push('x'),
            1 => r.response_elements.host_id.push('x'),
            2 => r.s3.object.sequencer = r.s3.object.sequencer.to_lowercase().replace(char::is_numeric, "f"),
            3 => r.event_time.push('x'),
            4 => r.s3.bucket.arn.push('x'),
            5 => r.event_version = "2.2".into(),
            6 => r.s3.s3_schema_version.clear(),
            _ => r.event_source = "aws:s3".into(),
        }
    }

    proptest! {
        #[test]
        fn every_event_reads_back_as_written(mut event in built(), field in proptest::option::of(any::<u8>())) {
            if let Some(field) = field {
                tamper(&mut event, field);
            }
            let compact = matches!(Stored::of(&event), Stored::Compact(_));
            prop_assert_eq!(compact, field.is_none(), "only events built by the rules are stored compact");
            let bytes = event.encode();
            prop_assert_eq!(bytes.len(), event.encoded_len());
            prop_assert_eq!(QueuedEvent::decode(&bytes).unwrap(), event.clone());
            let whole = Stored::Full(Cow::Borrowed(&event)).encode();
            if compact {
                prop_assert!(bytes.len() < whole.len(), "{} bytes against {} whole", bytes.len(), whole.len());
            }
        }
    }

    #[test]
    fn version_one_events_still_decode() {
        #[derive(Serialize, Deserialize)]
        struct VersionOne(QueuedEvent);
        impl Versioned for VersionOne {
            const NAME: &'static str = "queued event";
            const VERSION: u8 = 1;
        }
        let mut event = QueuedEvent { topic: "t".into(), created_ns: 7, tag: "x".into(), record: Default::default() };
        event.record.s3.object.key = "k".into();
        let bytes = VersionOne(event.clone()).encode();
        assert_eq!(bytes[0], 1);
        assert_eq!(QueuedEvent::decode(&bytes).unwrap(), event);
        assert!(QueuedEvent::decode(&[3, 0]).unwrap_err().contains("version 3"));
    }
}
