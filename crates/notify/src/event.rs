//! The event record, in the AWS S3 event structure (`{"Records":[…]}`) with Ceph's
//! extensions (`opaqueData`, `eventId`, object metadata and tags), and the queued form
//! that carries it to a topic.

mod record;
mod stored;

pub use record::{
    BucketEntity, EventRecord, KeyVal, ObjectEntity, Principal, QueuedEvent, RequestParameters, ResponseElements,
    Route, S3Entity, bucket_arn, event_id, event_time, sequencer,
};

use shoal_types::Versioned;
use stored::Stored;
pub use stored::{EVENT_SOURCE, EVENT_VERSION, S3_SCHEMA_VERSION};

impl QueuedEvent {
    /// Fills in what is known only once the operation is done: its order time (which
    /// `eventTime`, `sequencer` and `eventId` follow from), the object's size and ETag.
    pub fn complete(&mut self, order_ns: u64, size: u64, etag: &str) {
        let seq = sequencer(order_ns);
        let r = &mut self.record;
        r.event_time = event_time(order_ns);
        r.s3.object.size = size;
        r.s3.object.e_tag = etag.to_owned();
        r.event_id = event_id(&seq, &self.tag, &r.s3.configuration_id);
        r.s3.object.sequencer = seq;
    }

    /// Encodes for a log or queue: a version byte and postcard of the compact form
    /// ([`Stored`]), about a third of the JSON size.
    pub fn encode(&self) -> Vec<u8> {
        Stored::of(self).encode()
    }

    /// The length of [`QueuedEvent::encode`], computed without encoding.
    pub fn encoded_len(&self) -> usize {
        Stored::of(self).encoded_len()
    }

    /// Decodes a logged or queued event (also JSON and the full postcard form, as earlier
    /// versions queued them).
    pub fn decode(bytes: &[u8]) -> Result<QueuedEvent, String> {
        Ok(Stored::read(bytes)?.into_event())
    }

    /// Where an encoded event goes (its derived fields are not rebuilt for this).
    pub fn route(bytes: &[u8]) -> Result<Route, String> {
        Ok(Stored::read(bytes)?.route())
    }

    fn into_route(self) -> Route {
        let s3 = self.record.s3;
        Route { topic: self.topic, bucket: s3.bucket.name, key: s3.object.key }
    }

    /// The message pushed to endpoints: `{"Records":[record]}`.
    pub fn message(&self) -> String {
        serde_json::json!({ "Records": [&self.record] }).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_sequencers_have_fixed_width() {
        assert_eq!(event_time(1_709_547_072_123_456_789), "2024-03-04T10:11:12.123456Z");
        assert_eq!(sequencer(255), "00000000000000FF");
        assert!(sequencer(1_000) < sequencer(1_001) && sequencer(0xFFFF) < sequencer(0x1_0000));
        let mut record = EventRecord { event_name: "ObjectCreated:Put".into(), ..Default::default() };
        record.s3.bucket.name = "b".into();
        record.s3.object.key = "photos/a.jpg".into();
        let q = QueuedEvent { topic: "t".into(), created_ns: 1, tag: "x".into(), record };
        assert_eq!(QueuedEvent::decode(&q.encode()).unwrap(), q);
        let route = QueuedEvent::route(&q.encode()).unwrap();
        assert_eq!(route, Route { topic: "t".into(), bucket: "b".into(), key: "photos/a.jpg".into() });
        assert!(QueuedEvent::route(b"{\"topic\":\"t\"}").is_err(), "an event without a record has no route");
        assert!(QueuedEvent::route(&q.encode()[..20]).is_err(), "a truncated event has no route");
        let json = serde_json::to_vec(&q).unwrap();
        assert_eq!(QueuedEvent::decode(&json).unwrap(), q, "events queued as JSON still decode");
        assert!(q.encode().len() < json.len() / 2, "{} bytes against {} as JSON", q.encode().len(), json.len());
        let msg: serde_json::Value = serde_json::from_str(&q.message()).unwrap();
        assert_eq!(msg["Records"][0]["eventName"], "ObjectCreated:Put");
        assert!(msg["Records"][0]["requestParameters"].get("sourceIPAddress").is_some());
        assert!(msg["Records"][0]["responseElements"].get("x-amz-request-id").is_some());
    }
}
