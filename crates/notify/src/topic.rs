//! Topics: where events go (the push endpoint and its arguments) and how (synchronously, or
//! through a persistent queue sharded over several objects). SNS-compatible attributes.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Endpoint arguments a topic may carry besides `push-endpoint` and the persistence settings.
pub const ENDPOINT_ARGS: &[&str] = &[
    "verify-ssl",
    "cloudevents",
    "amqp-exchange",
    "amqp-ack-level",
    "kafka-ack-level",
    "use-ssl",
    "ca-location",
    "mechanism",
    "user-name",
    "password",
    "kafka-brokers",
];

/// A topic record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topic {
    /// The topic's name (1–256 of `[A-Za-z0-9_-]`).
    pub name: String,
    /// The owner's tenant ("" for none).
    pub tenant: String,
    /// The uid of the user who created it.
    pub owner: String,
    /// `arn:aws:sns:<zonegroup>:<tenant>:<name>`.
    pub arn: String,
    /// Copied into every event as `opaqueData`.
    pub opaque_data: String,
    /// The SNS policy document, kept as given.
    pub policy: String,
    /// Delivery settings.
    pub dest: Destination,
}

/// How a topic delivers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Destination {
    /// `http[s]://…`, `amqp[s]://…` or `kafka://…`; empty for none.
    pub push_endpoint: String,
    /// Endpoint arguments ([`ENDPOINT_ARGS`] and whatever else CreateTopic was given).
    pub args: BTreeMap<String, String>,
    /// Events go through a persistent queue instead of being pushed before the S3 reply.
    pub persistent: bool,
    /// Seconds a queued event may wait; `None` takes `rgw_topic_persistency_time_to_live` (0 = forever).
    pub time_to_live: Option<u64>,
    /// Failed pushes before an event expires; `None` takes `rgw_topic_persistency_max_retries` (0 = unlimited).
    pub max_retries: Option<u64>,
    /// Least seconds between two pushes of one event; `None` takes `rgw_topic_persistency_sleep_duration`.
    pub retry_sleep_duration: Option<u64>,
    /// Bytes the queue may hold over all shards; 0 takes `rgw_topic_persistent_queue_size`.
    pub queue_size: u64,
    /// Name of the topic that receives this one's expired events ("" = drop and count them).
    pub dead_letter_topic: String,
    /// The queue's current shard generation.
    pub queue: QueueGeneration,
    /// Older generations still draining after a reshard, oldest first.
    #[serde(default)]
    pub draining: Vec<QueueGeneration>,
}

/// One generation of a persistent topic's queue shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueGeneration {
    /// Generation number: 0 at creation, +1 per reshard.
    pub generation: u32,
    /// Shard objects (0 when the topic is not persistent).
    pub shards: u32,
}

impl Topic {
    /// The key of a topic record and the base of its queue names: `<name>`, or
    /// `<tenant>:<name>` for a tenant's topic.
    pub fn key(tenant: &str, name: &str) -> String {
        if tenant.is_empty() { name.to_owned() } else { format!("{tenant}:{name}") }
    }

    /// This topic's key.
    pub fn own_key(&self) -> String {
        Topic::key(&self.tenant, &self.name)
    }

    /// The ARN of topic `name` of `tenant` in `zonegroup`.
    pub fn arn_of(zonegroup: &str, tenant: &str, name: &str) -> String {
        format!("arn:aws:sns:{zonegroup}:{tenant}:{name}")
    }

    /// Whether the topic carries a secret (a password in the endpoint URI or the `password` argument).
    pub fn has_secret(&self) -> bool {
        self.dest.args.contains_key("password")
            || url::Url::parse(&self.dest.push_endpoint).is_ok_and(|u| u.password().is_some())
    }

    /// The endpoint address with any password removed, for display.
    pub fn endpoint_without_secret(&self) -> String {
        match url::Url::parse(&self.dest.push_endpoint) {
            Ok(mut u) if u.password().is_some() => {
                let _ = u.set_password(None);
                u.to_string()
            }
            _ => self.dest.push_endpoint.clone(),
        }
    }

    /// The endpoint arguments as RGW prints them (`k=v&k=v`), without the password.
    pub fn args_string(&self) -> String {
        let args = self.dest.args.iter().filter(|(k, _)| k.as_str() != "password");
        args.map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
    }
}

/// Parses an ARN `arn:aws:sns:<zonegroup>:<tenant>:<name>` into (tenant, name).
pub fn parse_arn(arn: &str) -> Option<(String, String)> {
    let mut parts = arn.splitn(6, ':');
    let (arn_word, partition, service, _zonegroup) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let (tenant, name) = (parts.next()?, parts.next()?);
    (arn_word == "arn" && partition == "aws" && service == "sns" && valid_name(name))
        .then(|| (tenant.to_owned(), name.to_owned()))
}

/// SNS topic names: 1–256 characters from `[A-Za-z0-9_-]`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 256 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Why an attribute was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct AttributeError(pub String);

fn parse_bool(name: &str, value: &str) -> Result<bool, AttributeError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(AttributeError(format!("attribute {name} must be true or false, not '{value}'"))),
    }
}

fn parse_u64(name: &str, value: &str) -> Result<u64, AttributeError> {
    value.parse().map_err(|_| AttributeError(format!("attribute {name} must be a non-negative integer, not '{value}'")))
}

impl Topic {
    /// Applies one attribute. `create` accepts unknown names as endpoint arguments (as
    /// CreateTopic does); SetTopicAttributes (`create == false`) refuses them.
    pub fn set_attribute(&mut self, name: &str, value: &str, create: bool) -> Result<(), AttributeError> {
        let dest = &mut self.dest;
        match name {
            "push-endpoint" => {
                if !value.is_empty() {
                    EndpointKind::of(value).map_err(AttributeError)?;
                }
                dest.push_endpoint = value.to_owned();
            }
            "OpaqueData" => self.opaque_data = value.to_owned(),
            "Policy" => self.policy = value.to_owned(),
            "persistent" => dest.persistent = parse_bool(name, value)?,
            "time_to_live" => dest.time_to_live = Some(parse_u64(name, value)?),
            "max_retries" => dest.max_retries = Some(parse_u64(name, value)?),
            "retry_sleep_duration" => dest.retry_sleep_duration = Some(parse_u64(name, value)?),
            "persistent_queue_size" => dest.queue_size = parse_u64(name, value)?,
            "dead_letter_topic" => {
                if !value.is_empty() && !valid_name(value) {
                    return Err(AttributeError(format!("dead_letter_topic '{value}' is not a topic name")));
                }
                dest.dead_letter_topic = value.to_owned();
            }
            "verify-ssl" | "cloudevents" | "use-ssl" => {
                parse_bool(name, value)?;
                dest.args.insert(name.to_owned(), value.to_owned());
            }
            "amqp-ack-level" if !["none", "broker", "routable"].contains(&value) => {
                return Err(AttributeError(format!("amqp-ack-level must be none, broker or routable, not '{value}'")));
            }
            "kafka-ack-level" if !["none", "broker"].contains(&value) => {
                return Err(AttributeError(format!("kafka-ack-level must be none or broker, not '{value}'")));
            }
            _ if ENDPOINT_ARGS.contains(&name) || create => {
                dest.args.insert(name.to_owned(), value.to_owned());
            }
            _ => return Err(AttributeError(format!("unknown attribute {name}"))),
        }
        Ok(())
    }

    /// Checks what only the whole topic can tell (AMQP needs an exchange).
    pub fn validate(&self) -> Result<(), AttributeError> {
        if self.dest.push_endpoint.starts_with("amqp") && !self.dest.args.contains_key("amqp-exchange") {
            return Err(AttributeError("an AMQP endpoint needs the amqp-exchange attribute".into()));
        }
        if self.dest.dead_letter_topic == self.name {
            return Err(AttributeError("a topic cannot be its own dead-letter topic".into()));
        }
        Ok(())
    }

    /// The `EndPoint` attribute of GetTopicAttributes: a JSON document.
    pub fn endpoint_json(&self) -> String {
        let mut v = serde_json::json!({
            "EndpointAddress": self.endpoint_without_secret(),
            "EndpointArgs": self.args_string(),
            "EndpointTopic": self.name,
            "HasStoredSecret": self.has_secret(),
            "Persistent": self.dest.persistent,
        });
        if self.dest.persistent {
            v["TimeToLive"] = self.dest.time_to_live.map_or("None".into(), |t| t.to_string()).into();
            v["MaxRetries"] = self.dest.max_retries.map_or("None".into(), |t| t.to_string()).into();
            v["RetrySleepDuration"] = self.dest.retry_sleep_duration.map_or("None".into(), |t| t.to_string()).into();
            v["NumShards"] = self.dest.queue.shards.into();
        }
        v.to_string()
    }

    /// GetTopicAttributes' attributes, in order.
    pub fn attributes(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![
            ("User", self.owner.clone()),
            ("Name", self.name.clone()),
            ("EndPoint", self.endpoint_json()),
            ("TopicArn", self.arn.clone()),
            ("OpaqueData", self.opaque_data.clone()),
            ("Policy", self.policy.clone()),
        ];
        if !self.dest.dead_letter_topic.is_empty() {
            out.push(("dead_letter_topic", self.dest.dead_letter_topic.clone()));
        }
        if self.dest.queue_size > 0 {
            out.push(("persistent_queue_size", self.dest.queue_size.to_string()));
        }
        out
    }
}

/// The kinds of endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointKind {
    /// `http://` or `https://`.
    Http,
    /// `amqp://` or `amqps://`.
    Amqp,
    /// `kafka://`.
    Kafka,
}

impl EndpointKind {
    /// The kind of `uri`, or why it is not a push endpoint.
    pub fn of(uri: &str) -> Result<EndpointKind, String> {
        let parsed = url::Url::parse(uri).map_err(|e| format!("push-endpoint '{uri}' is not a URI: {e}"))?;
        match parsed.scheme() {
            "http" | "https" => Ok(EndpointKind::Http),
            "amqp" | "amqps" => Ok(EndpointKind::Amqp),
            "kafka" => Ok(EndpointKind::Kafka),
            other => Err(format!("push-endpoint scheme '{other}' is not http, https, amqp, amqps or kafka")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arns_round_trip_and_bad_ones_are_refused() {
        let arn = Topic::arn_of("default", "", "t-1");
        assert_eq!(arn, "arn:aws:sns:default::t-1");
        assert_eq!(parse_arn(&arn), Some((String::new(), "t-1".into())));
        assert_eq!(parse_arn("arn:aws:sns:default:acme:t"), Some(("acme".into(), "t".into())));
        for bad in ["", "arn:aws:s3:default::t", "arn:aws:sns:default:", "arn:aws:sns:default::bad.name", "t"] {
            assert_eq!(parse_arn(bad), None, "{bad}");
        }
    }

    #[test]
    fn attributes_are_checked_and_secrets_hidden() {
        let mut t = Topic { name: "t".into(), ..Topic::default() };
        t.set_attribute("push-endpoint", "amqp://bob:secret@localhost:5672/%2f", true).unwrap();
        assert!(t.validate().is_err(), "amqp without exchange");
        t.set_attribute("amqp-exchange", "ex", false).unwrap();
        t.validate().unwrap();
        assert!(t.has_secret());
        assert!(!t.endpoint_json().contains("secret"), "{}", t.endpoint_json());
        assert!(t.set_attribute("persistent", "yes", false).is_err());
        assert!(t.set_attribute("amqp-ack-level", "sometimes", false).is_err());
        assert!(t.set_attribute("bogus", "1", false).is_err());
        t.set_attribute("bogus", "1", true).unwrap();
        assert_eq!(t.dest.args["bogus"], "1");
        assert!(t.set_attribute("push-endpoint", "ftp://x", false).is_err());
        t.set_attribute("max_retries", "3", false).unwrap();
        assert_eq!(t.dest.max_retries, Some(3));
    }
}
