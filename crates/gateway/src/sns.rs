//! Requests s3s does not serve: the SNS-compatible topic API (`POST /` with
//! `Action=CreateTopic|GetTopicAttributes|SetTopicAttributes|ListTopics|DeleteTopic`,
//! SigV4 service `sns`, checked here since s3s knows only `s3` and `sts`; SNS XML
//! answers), and bucket notification configurations (`PUT|GET|DELETE
//! /<bucket>?notification[=<id>]`, with Ceph's metadata and tag filters and per-Id
//! merge), an s3s custom route that s3s authenticates.

use crate::clock::now_ns;
use crate::config::GatewayConfig;
use crate::error::rados_error;
use crate::meta::{Meta, UserInfo};
use crate::request::Origin;
use crate::service::change_bucket_record;
use crate::xml::xml_escape;
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, Uri};
use http_body_util::BodyExt;
use s3s::route::S3Route;
use s3s::{Body, S3Request, S3Response, S3Result, s3_error};
use shoal_notify::event::QueuedEvent;
use shoal_notify::eventlog::EventLogs;
use shoal_notify::filter::{self, NotificationConfig};
use shoal_notify::manager::Manager;
use shoal_notify::queue::{Queues, shard_names};
use shoal_notify::topic::{QueueGeneration, Topic, parse_arn, valid_name};
use std::collections::BTreeMap;
use std::sync::Arc;

const SNS_NS: &str = "https://sns.amazonaws.com/doc/2010-03-31/";
/// Largest SNS form or notification XML body.
const MAX_BODY: usize = 1 << 20;

/// A topic's queue totals, summed over its shards.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct TopicStats {
    /// Reservations not yet committed or aborted (`2pc_queue` producers; the gateway's own
    /// events enter the queue without one).
    pub reservations: u64,
    /// Events logged in bucket index shards, not yet moved to the queue (read before the
    /// shards, so an event moving meanwhile is in both counts, never in neither).
    pub pending: u64,
    /// Committed events waiting for delivery.
    pub entries: u64,
    /// Bytes of those events.
    pub size: u64,
    /// Bytes the shards may hold.
    pub capacity: u64,
    /// Age of the oldest waiting event, seconds.
    pub oldest_age_secs: f64,
    /// Shards of the current generation.
    pub shards: u32,
    /// The current generation.
    pub generation: u32,
    /// Older generations still draining after a reshard.
    pub draining_generations: u32,
    /// The gateways' counters (as last published, every `rgw_notify_poll_interval`), summed.
    pub counters: shoal_notify::metrics::CounterSnapshot,
}

/// The custom routes.
pub struct Routes {
    /// Users, buckets, topics.
    pub meta: Arc<Meta>,
    /// Persistent topics' queues.
    pub queues: Queues,
    /// Bucket index event logs.
    pub logs: EventLogs,
    /// Delivery (woken when queue shards or logs appear).
    pub manager: Arc<Manager>,
    /// Options.
    pub config: GatewayConfig,
}

fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/x-www-form-urlencoded"))
}

/// Whether a request is an SNS topic request.
pub fn is_sns(method: &Method, uri: &Uri, headers: &HeaderMap) -> bool {
    method == Method::POST && uri.path() == "/" && is_form(headers)
}

/// The bucket and optional configuration Id of a `?notification` request.
fn notification_target(uri: &Uri) -> Option<(String, Option<String>)> {
    let bucket = uri.path().strip_prefix('/')?.strip_suffix('/').unwrap_or(uri.path().strip_prefix('/')?);
    if bucket.is_empty() || bucket.contains('/') {
        return None;
    }
    let query = uri.query()?;
    let (_, id) = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "notification")?;
    Some((bucket.to_owned(), (!id.is_empty()).then(|| id.into_owned())))
}

fn xml_response(status: StatusCode, body: String) -> http::Response<Body> {
    let mut response = http::Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/xml"));
    response
}

/// An SNS error answer.
fn sns_error(status: StatusCode, code: &str, message: &str, request_id: &str) -> http::Response<Body> {
    let kind = if status.is_server_error() { "Receiver" } else { "Sender" };
    xml_response(
        status,
        format!(
            "<ErrorResponse xmlns=\"{SNS_NS}\"><Error><Type>{kind}</Type><Code>{code}</Code><Message>{}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>",
            xml_escape(message)
        ),
    )
}

/// An SNS success answer for `action` with `result` inside its `<ActionResult>` (if any).
fn sns_ok(action: &str, result: Option<String>, request_id: &str) -> http::Response<Body> {
    let result = result.map(|r| format!("<{action}Result>{r}</{action}Result>")).unwrap_or_default();
    xml_response(
        StatusCode::OK,
        format!(
            "<{action}Response xmlns=\"{SNS_NS}\">{result}<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></{action}Response>"
        ),
    )
}

/// What a failed SNS action answers.
struct SnsFailure(StatusCode, &'static str, String);

fn bad(message: impl Into<String>) -> SnsFailure {
    SnsFailure(StatusCode::BAD_REQUEST, "InvalidParameter", message.into())
}

fn internal(e: shoal_types::RadosError) -> SnsFailure {
    tracing::error!(error = %e, "topic operation failed");
    SnsFailure(StatusCode::INTERNAL_SERVER_ERROR, "InternalFailure", e.to_string())
}

async fn read_body(body: Body) -> S3Result<Bytes> {
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    match limited.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(_) => Err(s3_error!(EntityTooLarge, "the request body exceeds {MAX_BODY} bytes")),
    }
}

#[async_trait::async_trait]
impl S3Route for Routes {
    fn is_match(&self, method: &Method, uri: &Uri, _: &HeaderMap, _: &mut http::Extensions) -> bool {
        [Method::GET, Method::PUT, Method::DELETE].contains(method) && notification_target(uri).is_some()
    }

    async fn check_access(&self, req: &mut S3Request<Body>) -> S3Result<()> {
        match req.credentials {
            Some(_) => Ok(()),
            None => Err(s3_error!(AccessDenied, "anonymous requests are refused")),
        }
    }

    async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let credentials = req.credentials.as_ref().ok_or_else(|| s3_error!(AccessDenied))?;
        let who = self.meta.user_by_access_key(&credentials.access_key).await.map_err(rados_error)?;
        let who = match who {
            Some(u) if !u.suspended => u,
            Some(_) => return Err(s3_error!(AccessDenied, "the user is suspended")),
            None => return Err(s3_error!(InvalidAccessKeyId)),
        };
        let (bucket, id) = notification_target(&req.uri).ok_or_else(|| s3_error!(InvalidRequest))?;
        let body = read_body(req.input).await?;
        self.notification(&req.method, &bucket, id.as_deref(), &body, &who).await
    }
}

/// The `Attributes.entry.N.key/value` pairs of a form, in N order.
fn form_attributes(params: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let mut entries: BTreeMap<u32, (Option<String>, Option<String>)> = BTreeMap::new();
    for (k, v) in params {
        let Some(rest) = k.strip_prefix("Attributes.entry.") else { continue };
        let Some((n, field)) = rest.split_once('.') else { continue };
        let Ok(n) = n.parse::<u32>() else { continue };
        let slot = entries.entry(n).or_default();
        match field {
            "key" => slot.0 = Some(v.clone()),
            "value" => slot.1 = Some(v.clone()),
            _ => {}
        }
    }
    entries.into_values().filter_map(|(k, v)| Some((k?, v.unwrap_or_default()))).collect()
}

impl Routes {
    /// Serves one SNS request: checks its signature, then runs its action.
    pub async fn sns_request(&self, req: http::Request<Body>) -> http::Response<Body> {
        let (parts, body) = req.into_parts();
        let origin = parts.extensions.get::<Origin>().cloned().unwrap_or_default();
        match self.sns_authenticated(parts, body).await {
            Ok((action, Ok(result))) => sns_ok(&action, result, &origin.request_id),
            Ok((_, Err(SnsFailure(status, code, message)))) | Err(SnsFailure(status, code, message)) => {
                sns_error(status, code, &message, &origin.request_id)
            }
        }
    }

    async fn sns_authenticated(
        &self,
        parts: http::request::Parts,
        body: Body,
    ) -> Result<(String, Result<Option<String>, SnsFailure>), SnsFailure> {
        use crate::sigv4::{Authorization, SignatureError, sha256_hex, verify};
        let denied = |code: &'static str, message: &str| SnsFailure(StatusCode::FORBIDDEN, code, message.to_owned());
        let body = read_body(body).await.map_err(|_| bad(format!("the form exceeds {MAX_BODY} bytes")))?;
        let header = parts.headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let header = header.ok_or_else(|| denied("MissingAuthenticationToken", "anonymous requests are refused"))?;
        let auth = Authorization::parse(header)
            .ok_or_else(|| denied("IncompleteSignature", "the Authorization header is not AWS4-HMAC-SHA256"))?;
        let user = self.meta.user_by_access_key(&auth.access_key).await.map_err(internal)?;
        let user = user.ok_or_else(|| denied("InvalidClientTokenId", "the access key does not exist"))?;
        if user.suspended {
            return Err(denied("AuthorizationError", "the user is suspended"));
        }
        let secret = user.keys.iter().find(|k| k.access_key == auth.access_key).map(|k| k.secret_key.clone());
        let payload_hash = sha256_hex(&body);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        match verify(
            &parts,
            &auth,
            &payload_hash,
            &secret.unwrap_or_default(),
            now,
            self.config.max_clock_skew.as_secs(),
        ) {
            Ok(()) => {}
            Err(SignatureError::Mismatch) => {
                return Err(denied("SignatureDoesNotMatch", "the request signature does not match"));
            }
            Err(SignatureError::Skewed) => return Err(denied("RequestExpired", "the request time is too skewed")),
            Err(SignatureError::Malformed(why)) => return Err(denied("IncompleteSignature", &why)),
        }
        let params: BTreeMap<String, String> =
            form_urlencoded::parse(&body).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        let action = params.get("Action").cloned().unwrap_or_default();
        let result = self.sns(&action, &params, &user).await;
        Ok((action, result))
    }

    fn arn_key(arn: &str) -> Result<String, SnsFailure> {
        let (tenant, name) = parse_arn(arn).ok_or_else(|| bad(format!("invalid topic ARN '{arn}'")))?;
        Ok(Topic::key(&tenant, &name))
    }

    async fn owned_topic(&self, params: &BTreeMap<String, String>, who: &UserInfo) -> Result<Arc<Topic>, SnsFailure> {
        let arn = params.get("TopicArn").ok_or_else(|| bad("missing TopicArn"))?;
        let key = Self::arn_key(arn)?;
        let topic = self.meta.topic(&key).await.map_err(internal)?;
        let topic = topic
            .ok_or_else(|| SnsFailure(StatusCode::NOT_FOUND, "NotFound", format!("topic {arn} does not exist")))?;
        if topic.owner != who.uid {
            return Err(SnsFailure(
                StatusCode::FORBIDDEN,
                "AuthorizationError",
                "Topic was created by another user.".into(),
            ));
        }
        Ok(topic)
    }

    /// A dead-letter topic must be one of the caller's own: another user's queue is not
    /// theirs to fill.
    async fn check_dead_letter(&self, topic: &Topic, who: &UserInfo) -> Result<(), SnsFailure> {
        let name = &topic.dest.dead_letter_topic;
        if name.is_empty() {
            return Ok(());
        }
        match self.meta.topic(&Topic::key(&topic.tenant, name)).await.map_err(internal)? {
            Some(dead_letter) if dead_letter.owner == who.uid => Ok(()),
            Some(_) => Err(SnsFailure(
                StatusCode::FORBIDDEN,
                "AuthorizationError",
                format!("dead_letter_topic '{name}' belongs to another user"),
            )),
            None => Err(bad(format!("dead_letter_topic '{name}' does not exist"))),
        }
    }

    fn check_secret(&self, topic: &Topic) -> Result<(), SnsFailure> {
        if topic.has_secret() && !self.config.notify.secrets_in_cleartext {
            return Err(bad(
                "topics with passwords are refused over plain HTTP (set rgw_allow_notification_secrets_in_cleartext)",
            ));
        }
        Ok(())
    }

    /// Creates or removes queue generations so the stored queue matches `topic.dest.persistent`.
    async fn sync_queues(&self, old: Option<&Topic>, topic: &mut Topic) -> Result<(), SnsFailure> {
        let was = old.filter(|t| t.dest.persistent);
        let key = topic.own_key();
        match (was, topic.dest.persistent) {
            (Some(old), true) => {
                topic.dest.queue = old.dest.queue;
                topic.dest.draining = old.dest.draining.clone();
            }
            (None, true) => {
                let generation = old.map_or(0, |t| t.dest.queue.generation + 1);
                topic.dest.queue = QueueGeneration { generation, shards: self.config.notify.num_shards };
                topic.dest.draining.clear();
                let size = self.queue_size(topic);
                self.queues.create(&key, topic.dest.queue, size).await.map_err(internal)?;
                self.manager.wake();
            }
            (Some(old), false) => {
                self.remove_queues(&key, old).await.map_err(internal)?;
                topic.dest.queue = QueueGeneration { generation: old.dest.queue.generation, shards: 0 };
                topic.dest.draining.clear();
            }
            (None, false) => {
                topic.dest.queue =
                    QueueGeneration { generation: old.map_or(0, |t| t.dest.queue.generation), shards: 0 };
            }
        }
        Ok(())
    }

    /// Bytes a topic's queue holds over all shards.
    pub fn queue_size(&self, topic: &Topic) -> u64 {
        if topic.dest.queue_size > 0 { topic.dest.queue_size } else { self.config.notify.queue_size }
    }

    /// Removes every queue generation of a persistent topic.
    pub async fn remove_queues(&self, key: &str, topic: &Topic) -> shoal_types::Result<()> {
        for generation in topic.dest.draining.iter().chain([&topic.dest.queue]) {
            self.queues.remove(key, *generation).await?;
        }
        Ok(())
    }

    /// The topic with `key`, or ENOENT naming it.
    pub async fn existing_topic(&self, key: &str) -> shoal_types::Result<Arc<Topic>> {
        self.meta.topic(key).await?.ok_or_else(|| shoal_types::err::not_found(format!("no topic '{key}'")))
    }

    /// Queue totals of a topic, summed over its shards (all generations).
    pub async fn topic_stats(&self, key: &str) -> shoal_types::Result<TopicStats> {
        let topic = self.existing_topic(key).await?;
        let mut stats = TopicStats {
            shards: topic.dest.queue.shards,
            generation: topic.dest.queue.generation,
            ..Default::default()
        };
        let now = now_ns();
        // Logs first: an event moving to its queue meanwhile is counted twice, never missed.
        for log in self.logs.registry().await? {
            let mut after = None;
            loop {
                let page = match self.logs.list(&log, after, 1000).await {
                    Ok(page) => page,
                    Err(e) if e.errno == shoal_types::Errno::NotFound => break,
                    Err(e) => return Err(e),
                };
                for event in page.events.iter().filter_map(|(_, bytes)| QueuedEvent::decode(bytes).ok()) {
                    if event.topic == key {
                        stats.pending += 1;
                        let age = now.saturating_sub(event.created_ns) as f64 / 1e9;
                        stats.oldest_age_secs = stats.oldest_age_secs.max(age);
                    }
                }
                match page.events.last() {
                    Some((seq, _)) if page.more => after = Some(*seq),
                    _ => break,
                }
            }
        }
        for (shard, draining) in queue_shards(key, &topic) {
            let h = match self.queues.header(&shard).await {
                Err(e) if drained(&e, draining) => continue,
                h => h?,
            };
            stats.reservations += h.reservations;
            stats.entries += h.committed_entries;
            stats.size += h.committed_bytes;
            stats.capacity += h.capacity_bytes;
            let first = match self.queues.list(&shard, None, 1).await {
                Err(e) if drained(&e, draining) => continue,
                page => page?.entries.into_iter().next(),
            };
            if let Some(event) = first.and_then(|first| QueuedEvent::decode(&first.data).ok()) {
                let age = now.saturating_sub(event.created_ns) as f64 / 1e9;
                stats.oldest_age_secs = stats.oldest_age_secs.max(age);
            }
        }
        stats.draining_generations = topic.dest.draining.len() as u32;
        stats.counters = shoal_notify::metrics::CounterSnapshot::sum(&self.queues.counters(&topic.name).await?);
        Ok(stats)
    }

    /// Every queued event of a topic, shard by shard.
    pub async fn topic_dump(&self, key: &str) -> shoal_types::Result<Vec<QueuedEvent>> {
        let topic = self.existing_topic(key).await?;
        let mut out = Vec::new();
        for (shard, draining) in queue_shards(key, &topic) {
            let mut after = None;
            loop {
                let page = match self.queues.list(&shard, after, 1000).await {
                    Err(e) if drained(&e, draining) => break,
                    page => page?,
                };
                after = page.entries.last().map(|e| e.marker);
                out.extend(page.entries.iter().filter_map(|e| QueuedEvent::decode(&e.data).ok()));
                if !page.truncated {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Removes a topic and its queues.
    pub async fn delete_topic(&self, key: &str) -> shoal_types::Result<()> {
        let topic = self.existing_topic(key).await?;
        if topic.dest.persistent {
            self.remove_queues(key, &topic).await?;
        }
        self.meta.remove_topic(key).await
    }

    /// Spreads a persistent topic over `shards` new shards without stopping it: new events
    /// go to a new generation, which is delivered once the old one has drained (per-key
    /// order holds across the change).
    pub async fn reshard(&self, key: &str, shards: u32) -> shoal_types::Result<Topic> {
        let old = self.existing_topic(key).await?;
        if !old.dest.persistent {
            return Err(shoal_types::err::invalid(format!("topic '{key}' is not persistent")));
        }
        if !(1..=1024).contains(&shards) {
            return Err(shoal_types::err::invalid("--shards must be 1..=1024"));
        }
        let mut topic = (*old).clone();
        let next = QueueGeneration { generation: old.dest.queue.generation + 1, shards };
        self.queues.create(key, next, self.queue_size(&topic)).await?;
        topic.dest.draining.push(old.dest.queue);
        topic.dest.queue = next;
        self.meta.put_topic(&topic).await?;
        Ok(topic)
    }

    async fn sns(
        &self,
        action: &str,
        params: &BTreeMap<String, String>,
        who: &UserInfo,
    ) -> Result<Option<String>, SnsFailure> {
        match action {
            "CreateTopic" => {
                let name = params.get("Name").ok_or_else(|| bad("missing Name"))?;
                if !valid_name(name) {
                    return Err(bad(format!("invalid topic name '{name}': 1-256 of A-Z a-z 0-9 _ -")));
                }
                let key = Topic::key("", name);
                let old = self.meta.topic(&key).await.map_err(internal)?;
                if let Some(old) = &old
                    && old.owner != who.uid
                {
                    return Err(SnsFailure(
                        StatusCode::FORBIDDEN,
                        "AuthorizationError",
                        "Topic was created by another user.".into(),
                    ));
                }
                let mut topic = Topic {
                    name: name.clone(),
                    tenant: String::new(),
                    owner: who.uid.clone(),
                    arn: Topic::arn_of(&self.config.notify.zonegroup, "", name),
                    ..Topic::default()
                };
                for (k, v) in form_attributes(params) {
                    topic.set_attribute(&k, &v, true).map_err(|e| bad(e.0))?;
                }
                topic.validate().map_err(|e| bad(e.0))?;
                self.check_secret(&topic)?;
                self.check_dead_letter(&topic, who).await?;
                self.sync_queues(old.as_deref(), &mut topic).await?;
                self.meta.put_topic(&topic).await.map_err(internal)?;
                Ok(Some(format!("<TopicArn>{}</TopicArn>", xml_escape(&topic.arn))))
            }
            "GetTopicAttributes" => {
                let topic = self.owned_topic(params, who).await?;
                let entries: String = topic
                    .attributes()
                    .into_iter()
                    .map(|(k, v)| format!("<entry><key>{k}</key><value>{}</value></entry>", xml_escape(&v)))
                    .collect();
                Ok(Some(format!("<Attributes>{entries}</Attributes>")))
            }
            "SetTopicAttributes" => {
                let old = self.owned_topic(params, who).await?;
                let name = params.get("AttributeName").ok_or_else(|| bad("missing AttributeName"))?;
                let value = params.get("AttributeValue").cloned().unwrap_or_default();
                let mut topic = (*old).clone();
                topic.set_attribute(name, &value, false).map_err(|e| bad(e.0))?;
                topic.validate().map_err(|e| bad(e.0))?;
                self.check_secret(&topic)?;
                self.check_dead_letter(&topic, who).await?;
                self.sync_queues(Some(&old), &mut topic).await?;
                self.meta.put_topic(&topic).await.map_err(internal)?;
                Ok(None)
            }
            "ListTopics" => {
                let mut members = String::new();
                for key in self.meta.list_topics().await.map_err(internal)? {
                    if let Ok(Some(topic)) = self.meta.topic(&key).await
                        && topic.owner == who.uid
                    {
                        members.push_str(&format!("<member><TopicArn>{}</TopicArn></member>", xml_escape(&topic.arn)));
                    }
                }
                Ok(Some(format!("<Topics>{members}</Topics>")))
            }
            "DeleteTopic" => {
                let arn = params.get("TopicArn").ok_or_else(|| bad("missing TopicArn"))?;
                let key = Self::arn_key(arn)?;
                match self.owned_topic(params, who).await {
                    Ok(_) => {
                        self.delete_topic(&key).await.map_err(internal)?;
                        Ok(None)
                    }
                    // Deleting a missing topic succeeds, as in RGW.
                    Err(SnsFailure(StatusCode::NOT_FOUND, ..)) => Ok(None),
                    Err(e) => Err(e),
                }
            }
            "" => Err(bad("missing Action")),
            other => Err(SnsFailure(StatusCode::BAD_REQUEST, "InvalidAction", format!("unsupported action {other}"))),
        }
    }

    async fn notification(
        &self,
        method: &Method,
        bucket: &str,
        id: Option<&str>,
        body: &[u8],
        who: &UserInfo,
    ) -> S3Result<S3Response<Body>> {
        let info = self.meta.bucket(bucket).await.map_err(rados_error)?.ok_or_else(|| s3_error!(NoSuchBucket))?;
        if info.owner != who.uid {
            return Err(s3_error!(AccessDenied));
        }
        let ok_xml = |xml: String| {
            let mut r = S3Response::new(Body::from(xml));
            r.headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/xml"));
            r
        };
        match *method {
            Method::GET => {
                let configs: Vec<NotificationConfig> =
                    info.notifications.iter().filter(|c| id.is_none_or(|i| c.id == i)).cloned().collect();
                if let Some(id) = id
                    && configs.is_empty()
                {
                    return Err(s3_error!(NoSuchKey, "no notification configuration with Id '{id}'"));
                }
                Ok(ok_xml(filter::to_xml(&configs)))
            }
            Method::PUT => {
                let text = std::str::from_utf8(body).map_err(|_| s3_error!(MalformedXML, "the body is not UTF-8"))?;
                let parsed = filter::parse(text).map_err(|e| match e.code {
                    "MalformedXML" => s3_error!(MalformedXML, "{}", e.message),
                    _ => s3_error!(InvalidArgument, "{}", e.message),
                })?;
                for config in &parsed {
                    let key = Routes::arn_key(&config.topic_arn)
                        .map_err(|_| s3_error!(InvalidArgument, "invalid topic ARN '{}'", config.topic_arn))?;
                    match self.meta.topic(&key).await.map_err(rados_error)? {
                        None => return Err(s3_error!(InvalidArgument, "topic {} does not exist", config.topic_arn)),
                        // Only the caller's own topics: another user's queue is not theirs to fill.
                        Some(topic) if topic.owner != who.uid => {
                            return Err(s3_error!(AccessDenied, "topic {} belongs to another user", config.topic_arn));
                        }
                        Some(_) => {}
                    }
                }
                if !parsed.is_empty() {
                    // Movers must know the bucket's logs before any write logs an event.
                    self.logs.register(&crate::objects::Objects::index_shards(&info)).await.map_err(rados_error)?;
                    self.manager.wake();
                }
                change_bucket_record(&self.meta, &info, |b| {
                    b.notifications.retain(|c| !parsed.is_empty() && !parsed.iter().any(|p| p.id == c.id));
                    b.notifications.extend(parsed.iter().cloned());
                    Ok(())
                })
                .await?;
                Ok(S3Response::new(Body::empty()))
            }
            _ => {
                change_bucket_record(&self.meta, &info, |b| {
                    b.notifications.retain(|c| id.is_some_and(|i| c.id != i));
                    Ok(())
                })
                .await?;
                Ok(S3Response::with_status(Body::empty(), StatusCode::NO_CONTENT))
            }
        }
    }
}

/// Every queue shard of a topic: the draining generations' (`true`) and the current one's.
fn queue_shards(key: &str, topic: &Topic) -> Vec<(String, bool)> {
    let draining = topic.dest.draining.iter().flat_map(|g| shard_names(key, *g).into_iter().map(|s| (s, true)));
    draining.chain(shard_names(key, topic.dest.queue).into_iter().map(|s| (s, false))).collect()
}

/// Whether `e` says a shard of a draining generation is gone: the generation drained and
/// was removed after the topic record was read, so it holds nothing.
fn drained(e: &shoal_types::RadosError, draining: bool) -> bool {
    draining && e.errno == shoal_types::Errno::NotFound
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_recognise_their_requests() {
        let uri = |s: &str| s.parse::<Uri>().unwrap();
        assert_eq!(notification_target(&uri("/b?notification")), Some(("b".into(), None)));
        assert_eq!(notification_target(&uri("/b/?notification=n1")), Some(("b".into(), Some("n1".into()))));
        assert_eq!(notification_target(&uri("/b/key?notification")), None);
        assert_eq!(notification_target(&uri("/b?acl")), None);
        let mut params = BTreeMap::new();
        params.insert("Attributes.entry.2.key".to_string(), "persistent".to_string());
        params.insert("Attributes.entry.2.value".to_string(), "true".to_string());
        params.insert("Attributes.entry.1.key".to_string(), "push-endpoint".to_string());
        params.insert("Attributes.entry.1.value".to_string(), "http://h:1".to_string());
        assert_eq!(
            form_attributes(&params),
            [("push-endpoint".to_string(), "http://h:1".to_string()), ("persistent".into(), "true".into())]
        );
    }
}
