//! The thrasher's check of bucket notifications. A persistent topic pushes the bucket's
//! `ObjectCreated` events to an HTTP receiver the thrasher runs, which refuses one push in
//! [`REFUSE_EVERY`] so that retries happen too. At the end every acknowledged PUT must have
//! had its event delivered at least once; every delivered event must be one of a PUT a
//! writer attempted, with that PUT's size and ETag; each key's events must first arrive in
//! the order of its writes, with sequencers in that order (a redelivery repeats earlier
//! events, under the same event id).

use super::workload::{BUCKET, payload};
use crate::s3client::S3Client;
use http::Method;
use md5::{Digest, Md5};
use shoal_notify::event::EventRecord;
use shoal_types::{Result, err};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The receiver answers 503 to every this-many-th push.
const REFUSE_EVERY: u64 = 50;
const TOPIC: &str = "thrash";

/// One delivery of an event.
struct Delivery {
    seq: u64,
    sequencer: String,
    event_id: String,
    at: Instant,
}

/// What was written and what was delivered.
#[derive(Default)]
pub struct Events {
    /// ETag → key and sequence number of every PUT attempted.
    written: Mutex<HashMap<String, (String, u64)>>,
    /// The acknowledged PUTs of each key, and when they were acknowledged.
    acked: Mutex<BTreeMap<String, BTreeMap<u64, Instant>>>,
    /// The deliveries of each key's events, in the order they came.
    delivered: Mutex<BTreeMap<String, Vec<Delivery>>>,
    /// Events that match no attempted PUT, and bodies that are no event.
    strays: Mutex<Vec<String>>,
    /// Records accepted.
    pub records: AtomicU64,
    /// Pushes answered 503.
    pub refused: AtomicU64,
    pushes: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn etag(body: &[u8]) -> String {
    Md5::digest(body).iter().map(|b| format!("{b:02x}")).collect()
}

/// The `{"Records":[…]}` message the gateways push.
#[derive(serde::Deserialize)]
struct Message {
    #[serde(rename = "Records")]
    records: Vec<EventRecord>,
}

impl Events {
    /// Notes a PUT of `body` as `seq` of `key`, before it is sent.
    pub fn attempt(&self, key: &str, seq: u64, body: &[u8]) {
        lock(&self.written).insert(etag(body), (key.to_owned(), seq));
    }

    /// Notes that the PUT `seq` of `key` was acknowledged.
    pub fn ack(&self, key: &str, seq: u64) {
        lock(&self.acked).entry(key.to_owned()).or_default().insert(seq, Instant::now());
    }

    /// Serves pushes on a free port of 127.0.0.1 in the background; returns its URL.
    pub async fn serve(self: &Arc<Self>) -> Result<String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| err::io(format!("the event receiver cannot listen: {e}")))?;
        let url = format!("http://{}", listener.local_addr().map_err(|e| err::io(e.to_string()))?);
        let events = self.clone();
        shoal_node::metrics::spawn_http(listener, move |request| {
            let events = events.clone();
            async move {
                use http_body_util::BodyExt;
                let status = match request.into_body().collect().await {
                    Ok(body) => events.receive(&body.to_bytes()),
                    Err(_) => http::StatusCode::BAD_REQUEST,
                };
                let mut response = http::Response::new(http_body_util::Full::new(bytes::Bytes::new()));
                *response.status_mut() = status;
                response
            }
        });
        Ok(url)
    }

    /// Takes one push: refused (503) if its turn has come, else recorded (200).
    fn receive(&self, body: &[u8]) -> http::StatusCode {
        if self.pushes.fetch_add(1, Ordering::Relaxed) % REFUSE_EVERY == REFUSE_EVERY - 1 {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return http::StatusCode::SERVICE_UNAVAILABLE;
        }
        let message: Message = match serde_json::from_slice(body) {
            Ok(message) => message,
            Err(e) => {
                lock(&self.strays)
                    .push(format!("a push that is no event message ({e}): {}", String::from_utf8_lossy(body)));
                return http::StatusCode::BAD_REQUEST;
            }
        };
        for record in message.records {
            self.records.fetch_add(1, Ordering::Relaxed);
            let object = &record.s3.object;
            let written = lock(&self.written).get(&object.e_tag).cloned();
            let Some((key, seq)) = written.filter(|(key, _)| {
                *key == object.key && record.s3.bucket.name == BUCKET && record.event_name == "ObjectCreated:Put"
            }) else {
                lock(&self.strays).push(format!(
                    "an event no PUT explains: {} of {}/{} with ETag {}",
                    record.event_name, record.s3.bucket.name, object.key, object.e_tag
                ));
                continue;
            };
            if object.size != payload(&key, seq).len() as u64 {
                lock(&self.strays).push(format!("{key}: the event of PUT {seq} gives size {}", object.size));
            }
            let delivery = Delivery {
                seq,
                sequencer: object.sequencer.clone(),
                event_id: record.event_id.clone(),
                at: Instant::now(),
            };
            lock(&self.delivered).entry(key).or_default().push(delivery);
        }
        http::StatusCode::OK
    }

    /// Acknowledged PUTs whose event has not come yet.
    fn missing(&self) -> Vec<(String, u64)> {
        let delivered = lock(&self.delivered);
        let mut missing = Vec::new();
        for (key, acked) in lock(&self.acked).iter() {
            let got: BTreeSet<u64> = delivered.get(key).map(|d| d.iter().map(|d| d.seq).collect()).unwrap_or_default();
            missing.extend(acked.keys().filter(|seq| !got.contains(seq)).map(|seq| (key.clone(), *seq)));
        }
        missing
    }

    /// Waits until every acknowledged PUT's event has come, at most `limit`; returns how
    /// long it waited.
    pub async fn wait_delivered(&self, limit: Duration) -> Duration {
        let started = Instant::now();
        while !self.missing().is_empty() && started.elapsed() < limit {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        started.elapsed()
    }

    /// Every delivery, and how many were repeats.
    pub fn deliveries(&self) -> (usize, usize) {
        let delivered = lock(&self.delivered);
        let all: usize = delivered.values().map(Vec::len).sum();
        let distinct: usize = delivered.values().map(|d| d.iter().map(|d| d.seq).collect::<BTreeSet<_>>().len()).sum();
        (all, all - distinct)
    }

    /// For each acknowledged PUT whose event came: the time from the acknowledgement to the
    /// event's first delivery (zero if the event came first), sorted.
    pub fn lags(&self) -> Vec<Duration> {
        let delivered = lock(&self.delivered);
        let mut lags = Vec::new();
        for (key, acked) in lock(&self.acked).iter() {
            let mut first: BTreeMap<u64, Instant> = BTreeMap::new();
            for d in delivered.get(key).into_iter().flatten() {
                first.entry(d.seq).or_insert(d.at);
            }
            lags.extend(acked.iter().filter_map(|(seq, at)| Some(first.get(seq)?.saturating_duration_since(*at))));
        }
        lags.sort();
        lags
    }

    /// What breaks the rules in the module's comment.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = lock(&self.strays).clone();
        let missing = self.missing();
        problems.extend(
            missing
                .iter()
                .take(20)
                .map(|(key, seq)| format!("{key}: PUT {seq} was acknowledged, its event never came")),
        );
        if missing.len() > 20 {
            problems.push(format!("… {} acknowledged PUTs without an event in all", missing.len()));
        }
        for (key, deliveries) in lock(&self.delivered).iter() {
            let mut first: BTreeMap<u64, &Delivery> = BTreeMap::new();
            let mut newest = 0;
            for d in deliveries {
                match first.get(&d.seq) {
                    Some(earlier) if earlier.event_id != d.event_id || earlier.sequencer != d.sequencer => {
                        problems.push(format!(
                            "{key}: PUT {} came again as another event ({} {} then {} {})",
                            d.seq, earlier.event_id, earlier.sequencer, d.event_id, d.sequencer
                        ));
                    }
                    Some(_) => {}
                    None if d.seq < newest => {
                        problems.push(format!("{key}: the event of PUT {} came after that of PUT {newest}", d.seq));
                    }
                    None => {
                        newest = d.seq;
                        first.insert(d.seq, d);
                    }
                }
            }
            let in_write_order: Vec<&&Delivery> = first.values().collect();
            for pair in in_write_order.windows(2) {
                if pair[0].sequencer >= pair[1].sequencer {
                    problems.push(format!(
                        "{key}: PUT {} has sequencer {}, the later PUT {} has {}",
                        pair[0].seq, pair[0].sequencer, pair[1].seq, pair[1].sequencer
                    ));
                }
            }
        }
        problems
    }
}

/// Creates a persistent topic pushing to `endpoint` and sends it every object created in
/// the thrasher's bucket.
pub async fn subscribe(client: &S3Client, endpoint: &str) -> Result<()> {
    let form: String = form_urlencoded_pairs(&[
        ("Action", "CreateTopic"),
        ("Name", TOPIC),
        ("Attributes.entry.1.key", "persistent"),
        ("Attributes.entry.1.value", "true"),
        ("Attributes.entry.2.key", "push-endpoint"),
        ("Attributes.entry.2.value", endpoint),
    ]);
    let content_type = [("content-type", "application/x-www-form-urlencoded".to_owned())];
    let created = client.for_service("sns").expect_ok_with(Method::POST, "/", &[], &content_type, form.into()).await?;
    let text = String::from_utf8_lossy(&created.body);
    let arn = text
        .split("<TopicArn>")
        .nth(1)
        .and_then(|rest| rest.split("</TopicArn>").next())
        .ok_or_else(|| err::io(format!("CreateTopic answered no TopicArn: {text}")))?;
    let config = format!(
        "<NotificationConfiguration><TopicConfiguration><Id>thrash</Id><Topic>{arn}</Topic>\
         <Event>s3:ObjectCreated:*</Event></TopicConfiguration></NotificationConfiguration>"
    );
    client.expect_ok(Method::PUT, &format!("/{BUCKET}"), &[("notification", "")], config.into()).await?;
    Ok(())
}

/// `k=v&…`, percent-encoded.
fn form_urlencoded_pairs(pairs: &[(&str, &str)]) -> String {
    use shoal_gateway::sigv4::uri_encode;
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", uri_encode(k, false), uri_encode(v, false)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message a gateway pushes for PUT `seq` of `key`, with sequencer `order`.
    fn push(events: &Events, key: &str, seq: u64, order: u64) -> http::StatusCode {
        let body = payload(key, seq);
        let mut record = EventRecord { event_name: "ObjectCreated:Put".into(), ..Default::default() };
        record.s3.bucket.name = BUCKET.into();
        record.s3.object =
            shoal_notify::event::ObjectEntity { key: key.into(), size: body.len() as u64, ..Default::default() };
        record.s3.object.e_tag = etag(&body);
        record.s3.object.sequencer = shoal_notify::event::sequencer(order);
        record.event_id = format!("id-{key}-{seq}");
        events.receive(serde_json::json!({ "Records": [record] }).to_string().as_bytes())
    }

    fn written(keys_and_seqs: &[(&str, u64)]) -> Events {
        let events = Events::default();
        for (key, seq) in keys_and_seqs {
            events.attempt(key, *seq, &payload(key, *seq));
            events.ack(key, *seq);
        }
        events
    }

    #[test]
    fn repeats_of_earlier_events_are_allowed_and_a_missing_one_is_reported() {
        let events = written(&[("a", 1), ("a", 2), ("a", 3)]);
        for (seq, order) in [(1, 10), (2, 20), (1, 10), (2, 20)] {
            assert_eq!(push(&events, "a", seq, order), http::StatusCode::OK);
        }
        assert_eq!(events.deliveries(), (4, 2));
        assert_eq!(events.problems(), vec!["a: PUT 3 was acknowledged, its event never came"]);
        push(&events, "a", 3, 30);
        assert_eq!(events.problems(), Vec::<String>::new());
    }

    #[test]
    fn events_out_of_write_order_are_reported() {
        let events = written(&[("a", 1), ("a", 2), ("b", 1), ("b", 2)]);
        push(&events, "a", 2, 20);
        push(&events, "a", 1, 10);
        push(&events, "b", 1, 20);
        push(&events, "b", 2, 10);
        assert_eq!(
            events.problems(),
            vec![
                "a: the event of PUT 1 came after that of PUT 2",
                "b: PUT 1 has sequencer 0000000000000014, the later PUT 2 has 000000000000000A",
            ]
        );
    }

    #[test]
    fn strays_and_changed_repeats_are_reported() {
        let events = written(&[("a", 1)]);
        push(&events, "a", 1, 10);
        push(&events, "a", 1, 11);
        push(&events, "b", 7, 10);
        let problems = events.problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("an event no PUT explains: ObjectCreated:Put of thrash/b"), "{problems:?}");
        assert!(problems[1].starts_with("a: PUT 1 came again as another event"), "{problems:?}");
    }

    #[test]
    fn every_fiftieth_push_is_refused() {
        let events = written(&[("a", 1)]);
        let refused = (0..2 * REFUSE_EVERY).filter(|_| push(&events, "a", 1, 10) != http::StatusCode::OK).count();
        assert_eq!(refused, 2);
        assert_eq!(events.refused.load(Ordering::Relaxed), 2);
    }
}
