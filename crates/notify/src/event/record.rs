//! An event record as S3 defines it (the JSON each endpoint receives) and the queued event
//! around it.

use serde::{Deserialize, Serialize};

/// One S3 event record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    /// "2.1".
    pub event_version: String,
    /// "ceph:s3".
    pub event_source: String,
    /// The zonegroup.
    pub aws_region: String,
    /// ISO 8601 with microseconds.
    pub event_time: String,
    /// E.g. `ObjectCreated:Put` (no `s3:` prefix).
    pub event_name: String,
    /// Who made the request.
    pub user_identity: Principal,
    /// The request's origin.
    pub request_parameters: RequestParameters,
    /// Request and host ids.
    pub response_elements: ResponseElements,
    /// Bucket and object.
    pub s3: S3Entity,
    /// Unique per event and the same on every delivery of it.
    pub event_id: String,
    /// The topic's `OpaqueData`.
    pub opaque_data: String,
}

/// A principal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    /// The user's id.
    pub principal_id: String,
}

/// `requestParameters`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestParameters {
    /// The client's address.
    #[serde(rename = "sourceIPAddress")]
    pub source_ip_address: String,
}

/// `responseElements`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseElements {
    /// The request id the client saw.
    #[serde(rename = "x-amz-request-id")]
    pub request_id: String,
    /// The gateway's host id.
    #[serde(rename = "x-amz-id-2")]
    pub host_id: String,
}

/// `s3`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct S3Entity {
    /// "1.0".
    pub s3_schema_version: String,
    /// The notification configuration's Id.
    pub configuration_id: String,
    /// The bucket.
    pub bucket: BucketEntity,
    /// The object.
    pub object: ObjectEntity,
}

/// `s3.bucket`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BucketEntity {
    /// Name.
    pub name: String,
    /// Owner.
    pub owner_identity: Principal,
    /// `arn:aws:s3:<zonegroup>::<bucket>`.
    pub arn: String,
    /// The bucket instance id.
    pub id: String,
}

/// `s3.object`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectEntity {
    /// Key.
    pub key: String,
    /// Size in bytes (of the removed object for removals, 0 if unknown).
    pub size: u64,
    /// ETag without quotes.
    pub e_tag: String,
    /// Version id ("" while versioning is not supported).
    pub version_id: String,
    /// 16 hex digits increasing with the order of writes to this key.
    pub sequencer: String,
    /// User metadata as `x-amz-meta-…` names.
    pub metadata: Vec<KeyVal>,
    /// Tags.
    pub tags: Vec<KeyVal>,
}

/// A name and value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyVal {
    /// Name.
    pub key: String,
    /// Value.
    pub val: String,
}

/// `eventTime` for `ns` since the Unix epoch: `YYYY-MM-DDTHH:MM:SS.uuuuuuZ`.
pub fn event_time(ns: u64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(ns as i128).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        t.month() as u8,
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

/// The sequencer of a write ordered at `order_ns`: fixed-width hex, so it compares as a string too.
pub fn sequencer(order_ns: u64) -> String {
    format!("{order_ns:016X}")
}

/// `eventId`: unique per event and the same on every delivery of it.
pub fn event_id(sequencer: &str, tag: &str, configuration_id: &str) -> String {
    format!("{sequencer}.{tag}.{configuration_id}")
}

/// The ARN of a bucket in a zonegroup.
pub fn bucket_arn(zonegroup: &str, bucket: &str) -> String {
    format!("arn:aws:s3:{zonegroup}::{bucket}")
}

/// Where an event goes: its topic, and the bucket and key that pick the queue shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Key of the topic.
    pub topic: String,
    /// Bucket name.
    pub bucket: String,
    /// Object key.
    pub key: String,
}

/// An event on its way to a topic: the record plus what delivery needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedEvent {
    /// Key of the topic it goes to (re-read at delivery, so endpoint changes apply).
    pub topic: String,
    /// When it was queued, ns since the epoch (for `time_to_live`).
    pub created_ns: u64,
    /// The operation's tag (part of the `eventId`).
    pub tag: String,
    /// The record (size, ETag and time filled in once the operation is done).
    pub record: EventRecord,
}
