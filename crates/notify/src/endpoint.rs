//! Push endpoints: HTTP(S) POST (optionally with CloudEvents headers), AMQP 0-9-1 publish
//! to an exchange with the topic name as routing key, Kafka produce to a topic named after
//! ours. Connections are cached per endpoint and re-made after a failure.

use crate::event::QueuedEvent;
use crate::topic::{EndpointKind, Topic};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

type KafkaClient = Arc<rskafka::client::partition::PartitionClient>;

/// Pushes events, caching a connection per endpoint.
pub struct Pusher {
    http: reqwest::Client,
    http_insecure: reqwest::Client,
    amqp: Mutex<HashMap<String, lapin::Channel>>,
    kafka: Mutex<HashMap<String, KafkaClient>>,
    timeout: Duration,
}

impl Pusher {
    /// A pusher whose pushes give up after `timeout`.
    pub fn new(timeout: Duration) -> Pusher {
        let build = |verify: bool| {
            reqwest::Client::builder()
                .timeout(timeout)
                .tls_danger_accept_invalid_certs(!verify)
                .build()
                .unwrap_or_default()
        };
        Pusher {
            http: build(true),
            http_insecure: build(false),
            amqp: Mutex::new(HashMap::new()),
            kafka: Mutex::new(HashMap::new()),
            timeout,
        }
    }

    /// Pushes one event to `topic`'s endpoint. `Err` says why it failed.
    pub async fn push(&self, topic: &Topic, event: &QueuedEvent) -> Result<(), String> {
        let endpoint = &topic.dest.push_endpoint;
        if endpoint.is_empty() {
            return Err(format!("topic {} has no push endpoint", topic.name));
        }
        let message = event.message();
        let work = async {
            match EndpointKind::of(endpoint)? {
                EndpointKind::Http => self.push_http(topic, event, message).await,
                EndpointKind::Amqp => self.push_amqp(topic, message).await,
                EndpointKind::Kafka => self.push_kafka(topic, message).await,
            }
        };
        match tokio::time::timeout(self.timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(format!("push to {} timed out after {:?}", topic.endpoint_without_secret(), self.timeout)),
        }
    }

    async fn push_http(&self, topic: &Topic, event: &QueuedEvent, message: String) -> Result<(), String> {
        let args = &topic.dest.args;
        let client =
            if args.get("verify-ssl").is_some_and(|v| v == "false") { &self.http_insecure } else { &self.http };
        let mut req = client.post(&topic.dest.push_endpoint).header("Content-Type", "application/json").body(message);
        if args.get("cloudevents").is_some_and(|v| v == "true") {
            let r = &event.record;
            req = req
                .header("ce-specversion", "1.0")
                .header("ce-type", format!("com.amazonaws.{}", r.event_name))
                .header("ce-time", &r.event_time)
                .header("ce-id", format!("{}.{}", r.response_elements.request_id, r.response_elements.host_id))
                .header("ce-source", format!("ceph:s3.{}.{}", r.aws_region, r.s3.bucket.name))
                .header("ce-subject", &r.s3.object.key);
        }
        let response = req.send().await.map_err(|e| format!("HTTP push failed: {e}"))?;
        match response.status() {
            s if s.is_success() => Ok(()),
            s => Err(format!("HTTP endpoint answered {s}")),
        }
    }

    async fn amqp_channel(&self, uri: &str) -> Result<lapin::Channel, String> {
        let mut cache = self.amqp.lock().await;
        if let Some(channel) = cache.get(uri)
            && channel.status().connected()
        {
            return Ok(channel.clone());
        }
        let connection = lapin::Connection::connect(uri, lapin::ConnectionProperties::default())
            .await
            .map_err(|e| format!("AMQP connect failed: {e}"))?;
        let channel = connection.create_channel().await.map_err(|e| format!("AMQP channel failed: {e}"))?;
        channel
            .confirm_select(lapin::options::ConfirmSelectOptions::default())
            .await
            .map_err(|e| format!("AMQP confirm mode failed: {e}"))?;
        cache.insert(uri.to_owned(), channel.clone());
        Ok(channel)
    }

    async fn push_amqp(&self, topic: &Topic, message: String) -> Result<(), String> {
        let args = &topic.dest.args;
        let exchange = args.get("amqp-exchange").ok_or("AMQP topic has no amqp-exchange")?;
        let ack_level = args.get("amqp-ack-level").map_or("broker", String::as_str);
        let mut uri = url::Url::parse(&topic.dest.push_endpoint).map_err(|e| e.to_string())?;
        if let (Some(user), Some(password)) = (args.get("user-name"), args.get("password")) {
            let _ = uri.set_username(user);
            let _ = uri.set_password(Some(password));
        }
        let channel = self.amqp_channel(uri.as_str()).await?;
        let options = lapin::options::BasicPublishOptions { mandatory: ack_level == "routable", ..Default::default() };
        let published = channel
            .basic_publish(
                exchange.as_str().into(),
                topic.name.as_str().into(),
                options,
                message.as_bytes(),
                lapin::BasicProperties::default().with_content_type("application/json".into()),
            )
            .await;
        let confirm = match published {
            Ok(confirm) => confirm,
            Err(e) => {
                self.amqp.lock().await.remove(uri.as_str());
                return Err(format!("AMQP publish failed: {e}"));
            }
        };
        if ack_level == "none" {
            return Ok(());
        }
        match confirm.await {
            Ok(c) if c.is_ack() => match c.take_message() {
                Some(returned) if ack_level == "routable" => {
                    Err(format!("AMQP message not routable: {}", returned.reply_text))
                }
                _ => Ok(()),
            },
            Ok(_) => Err("AMQP broker refused the message (nack)".into()),
            Err(e) => {
                self.amqp.lock().await.remove(uri.as_str());
                Err(format!("AMQP confirm failed: {e}"))
            }
        }
    }

    async fn kafka_client(&self, topic: &Topic) -> Result<KafkaClient, String> {
        let uri = url::Url::parse(&topic.dest.push_endpoint).map_err(|e| e.to_string())?;
        let mut brokers = vec![format!("{}:{}", uri.host_str().unwrap_or("localhost"), uri.port().unwrap_or(9092))];
        if let Some(more) = topic.dest.args.get("kafka-brokers") {
            brokers.extend(more.split(',').filter(|b| !b.is_empty()).map(str::to_owned));
        }
        let key = format!("{}|{}", brokers.join(","), topic.name);
        let mut cache = self.kafka.lock().await;
        if let Some(client) = cache.get(&key) {
            return Ok(client.clone());
        }
        let mut builder = rskafka::client::ClientBuilder::new(brokers);
        let user = topic
            .dest
            .args
            .get("user-name")
            .cloned()
            .or_else(|| (!uri.username().is_empty()).then(|| uri.username().to_owned()));
        let password = topic.dest.args.get("password").cloned().or_else(|| uri.password().map(str::to_owned));
        if let (Some(username), Some(password)) = (user, password) {
            let credentials = rskafka::client::Credentials::new(username, password);
            let sasl = match topic.dest.args.get("mechanism").map(String::as_str) {
                Some("SCRAM-SHA-256") => rskafka::client::SaslConfig::ScramSha256(credentials),
                Some("SCRAM-SHA-512") => rskafka::client::SaslConfig::ScramSha512(credentials),
                _ => rskafka::client::SaslConfig::Plain(credentials),
            };
            builder = builder.sasl_config(sasl);
        }
        let client = builder.build().await.map_err(|e| format!("Kafka connect failed: {e}"))?;
        if let Ok(controller) = client.controller_client() {
            // Created on first use; "already exists" is the normal case afterwards.
            let _ = controller.create_topic(&topic.name, 1, 1, 5_000).await;
        }
        let partition = client
            .partition_client(topic.name.clone(), 0, rskafka::client::partition::UnknownTopicHandling::Retry)
            .await
            .map_err(|e| format!("Kafka partition client failed: {e}"))?;
        let partition = Arc::new(partition);
        cache.insert(key, partition.clone());
        Ok(partition)
    }

    async fn push_kafka(&self, topic: &Topic, message: String) -> Result<(), String> {
        let client = self.kafka_client(topic).await?;
        let record = rskafka::record::Record {
            key: None,
            value: Some(message.into_bytes()),
            headers: Default::default(),
            timestamp: chrono::Utc::now(),
        };
        let none = rskafka::client::partition::Compression::NoCompression;
        if topic.dest.args.get("kafka-ack-level").is_some_and(|l| l == "none") {
            // Fire and forget: the request is sent in the background; its outcome is not awaited.
            let background = client.clone();
            tokio::spawn(async move {
                let _ = background.produce(vec![record], none).await;
            });
            return Ok(());
        }
        match client.produce(vec![record], none).await {
            Ok(_) => Ok(()),
            Err(e) => {
                self.kafka.lock().await.retain(|_, c| !Arc::ptr_eq(c, &client));
                Err(format!("Kafka produce failed: {e}"))
            }
        }
    }
}
