//! Bucket notification configurations: which events of a bucket go to which topic, with
//! filters on the key, the user metadata and the tags. Parsed from and written as S3's
//! `NotificationConfiguration` XML (with Ceph's `S3Metadata` and `S3Tags` filters).

use serde::{Deserialize, Serialize};

/// Event types a configuration may name (without the `s3:` prefix).
pub const EVENT_TYPES: &[&str] = &[
    "ObjectCreated:*",
    "ObjectCreated:Put",
    "ObjectCreated:Post",
    "ObjectCreated:Copy",
    "ObjectCreated:CompleteMultipartUpload",
    "ObjectRemoved:*",
    "ObjectRemoved:Delete",
    "ObjectRemoved:DeleteMarkerCreated",
    "ObjectLifecycle:*",
    "ObjectLifecycle:Expiration:*",
    "ObjectLifecycle:Expiration:Current",
    "ObjectLifecycle:Expiration:DeleteMarkerCreated",
    "ObjectLifecycle:Expiration:Noncurrent",
    "ObjectLifecycle:Expiration:DeleteMarker",
    "ObjectLifecycle:Expiration:AbortMultipartUpload",
];

/// One `TopicConfiguration`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationConfig {
    /// The configuration's Id (copied into events as `configurationId`).
    pub id: String,
    /// The topic's ARN.
    pub topic_arn: String,
    /// Event types without the `s3:` prefix; empty means every created and removed event.
    pub events: Vec<String>,
    /// Filters, all of which must match.
    pub filter: Filter,
}

/// Filters of a configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filter {
    /// Key rules: `prefix`, `suffix`, `regex` (the regex must match the whole key).
    pub key: Vec<(String, String)>,
    /// User metadata (`x-amz-meta-…` name, value) pairs that must all be present.
    pub metadata: Vec<(String, String)>,
    /// Tag (key, value) pairs that must all be present.
    pub tags: Vec<(String, String)>,
}

/// What an event is about, for matching.
pub struct Subject<'a> {
    /// Event type, e.g. `ObjectCreated:Put`.
    pub event: &'a str,
    /// Object key.
    pub key: &'a str,
    /// User metadata without the `x-amz-meta-` prefix.
    pub metadata: &'a std::collections::BTreeMap<String, String>,
    /// Tags.
    pub tags: &'a [(String, String)],
}

impl NotificationConfig {
    /// Whether the configuration wants `event`.
    pub fn wants(&self, event: &str) -> bool {
        if self.events.is_empty() {
            return event.starts_with("ObjectCreated:") || event.starts_with("ObjectRemoved:");
        }
        self.events.iter().any(|e| match e.strip_suffix('*') {
            Some(family) => event.starts_with(family),
            None => e == event,
        })
    }

    /// Whether the configuration applies to `subject`.
    pub fn matches(&self, subject: &Subject<'_>) -> bool {
        if !self.wants(subject.event) {
            return false;
        }
        let key_ok = self.filter.key.iter().all(|(rule, value)| match rule.as_str() {
            "prefix" => subject.key.starts_with(value.as_str()),
            "suffix" => subject.key.ends_with(value.as_str()),
            "regex" => regex::Regex::new(&format!("^(?:{value})$")).is_ok_and(|r| r.is_match(subject.key)),
            _ => false,
        });
        let meta_ok = self.filter.metadata.iter().all(|(name, value)| {
            let bare = name.strip_prefix("x-amz-meta-").unwrap_or(name);
            subject.metadata.get(bare).is_some_and(|v| v == value)
        });
        let tags_ok = self.filter.tags.iter().all(|(k, v)| subject.tags.iter().any(|(tk, tv)| tk == k && tv == v));
        key_ok && meta_ok && tags_ok
    }
}

/// Why a configuration was refused; the S3 error code to answer with and a message.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// S3 error code.
    pub code: &'static str,
    /// What is wrong.
    pub message: String,
}

fn invalid(code: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError { code, message: message.into() }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename = "NotificationConfiguration")]
struct XmlConfiguration {
    #[serde(rename = "@xmlns", default, skip_deserializing)]
    xmlns: Option<String>,
    #[serde(rename = "TopicConfiguration", default)]
    topics: Vec<XmlTopic>,
    #[serde(rename = "QueueConfiguration", default, skip_serializing)]
    queues: Vec<serde::de::IgnoredAny>,
    #[serde(rename = "CloudFunctionConfiguration", default, skip_serializing)]
    functions: Vec<serde::de::IgnoredAny>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct XmlTopic {
    #[serde(rename = "Id", default)]
    id: Option<String>,
    #[serde(rename = "Topic", default)]
    topic: Option<String>,
    #[serde(rename = "Event", default)]
    events: Vec<String>,
    #[serde(rename = "Filter", default, skip_serializing_if = "Option::is_none")]
    filter: Option<XmlFilter>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct XmlFilter {
    #[serde(rename = "S3Key", default, skip_serializing_if = "Option::is_none")]
    key: Option<XmlRules>,
    #[serde(rename = "S3Metadata", default, skip_serializing_if = "Option::is_none")]
    metadata: Option<XmlRules>,
    #[serde(rename = "S3Tags", default, skip_serializing_if = "Option::is_none")]
    tags: Option<XmlRules>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct XmlRules {
    #[serde(rename = "FilterRule", default)]
    rules: Vec<XmlRule>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct XmlRule {
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "Value", default)]
    value: String,
}

fn rules(r: Option<XmlRules>) -> Vec<(String, String)> {
    r.map(|r| r.rules.into_iter().map(|x| (x.name, x.value)).collect()).unwrap_or_default()
}

fn xml_rules(pairs: &[(String, String)]) -> Option<XmlRules> {
    (!pairs.is_empty()).then(|| XmlRules {
        rules: pairs.iter().map(|(name, value)| XmlRule { name: name.clone(), value: value.clone() }).collect(),
    })
}

/// Parses a `NotificationConfiguration` body and checks everything but the topics'
/// existence: Ids present and unique, valid ARNs, known event names, sane key filters.
pub fn parse(xml: &str) -> Result<Vec<NotificationConfig>, ConfigError> {
    let doc: XmlConfiguration = quick_xml::de::from_str(xml)
        .map_err(|e| invalid("MalformedXML", format!("bad NotificationConfiguration: {e}")))?;
    if !doc.queues.is_empty() || !doc.functions.is_empty() {
        return Err(invalid("InvalidArgument", "only TopicConfiguration is supported"));
    }
    let mut out: Vec<NotificationConfig> = Vec::new();
    for t in doc.topics {
        let id = t.id.filter(|i| !i.is_empty()).ok_or_else(|| invalid("InvalidArgument", "missing notification Id"))?;
        if out.iter().any(|c| c.id == id) {
            return Err(invalid("InvalidArgument", format!("duplicate notification Id '{id}'")));
        }
        let topic_arn = t.topic.unwrap_or_default();
        if crate::topic::parse_arn(&topic_arn).is_none() {
            return Err(invalid("InvalidArgument", format!("invalid topic ARN '{topic_arn}'")));
        }
        let mut events = Vec::new();
        for e in t.events {
            let bare = e.strip_prefix("s3:").unwrap_or(&e);
            if !EVENT_TYPES.contains(&bare) {
                return Err(invalid("InvalidArgument", format!("unknown event type '{e}'")));
            }
            events.push(bare.to_owned());
        }
        let filter = t.filter.unwrap_or_default();
        let filter = Filter { key: rules(filter.key), metadata: rules(filter.metadata), tags: rules(filter.tags) };
        let mut seen = Vec::new();
        for (name, value) in &filter.key {
            if !["prefix", "suffix", "regex"].contains(&name.as_str()) || seen.contains(name) {
                return Err(invalid("InvalidArgument", format!("bad or repeated key filter rule '{name}'")));
            }
            if name == "regex" && regex::Regex::new(value).is_err() {
                return Err(invalid("InvalidArgument", format!("bad regex '{value}'")));
            }
            seen.push(name.clone());
        }
        out.push(NotificationConfig { id, topic_arn, events, filter });
    }
    Ok(out)
}

/// Writes configurations as a `NotificationConfiguration` document.
pub fn to_xml(configs: &[NotificationConfig]) -> String {
    let doc = XmlConfiguration {
        xmlns: Some("http://s3.amazonaws.com/doc/2006-03-01/".into()),
        topics: configs
            .iter()
            .map(|c| {
                let f = &c.filter;
                let filter =
                    XmlFilter { key: xml_rules(&f.key), metadata: xml_rules(&f.metadata), tags: xml_rules(&f.tags) };
                let has_filter = filter.key.is_some() || filter.metadata.is_some() || filter.tags.is_some();
                XmlTopic {
                    id: Some(c.id.clone()),
                    topic: Some(c.topic_arn.clone()),
                    events: c.events.iter().map(|e| format!("s3:{e}")).collect(),
                    filter: has_filter.then_some(filter),
                }
            })
            .collect(),
        ..Default::default()
    };
    let body = quick_xml::se::to_string(&doc).unwrap_or_default();
    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{body}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const DOC: &str = r#"<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
      <TopicConfiguration><Id>n1</Id><Topic>arn:aws:sns:default::t</Topic>
        <Event>s3:ObjectCreated:*</Event><Event>s3:ObjectRemoved:Delete</Event>
        <Filter><S3Key><FilterRule><Name>prefix</Name><Value>img/</Value></FilterRule>
          <FilterRule><Name>regex</Name><Value>[a-z/]+\.jpg</Value></FilterRule></S3Key>
          <S3Metadata><FilterRule><Name>x-amz-meta-color</Name><Value>red</Value></FilterRule></S3Metadata>
          <S3Tags><FilterRule><Name>project</Name><Value>apollo</Value></FilterRule></S3Tags></Filter>
      </TopicConfiguration>
      <TopicConfiguration><Id>n2</Id><Topic>arn:aws:sns:default::u</Topic></TopicConfiguration>
    </NotificationConfiguration>"#;

    #[test]
    fn parses_round_trips_and_matches() {
        let configs = parse(DOC).unwrap();
        assert_eq!(configs.len(), 2);
        assert_eq!(parse(&to_xml(&configs)).unwrap(), configs);
        let meta = BTreeMap::from([("color".to_string(), "red".to_string())]);
        let tags = vec![("project".to_string(), "apollo".to_string())];
        let subject = |event, key| Subject { event, key, metadata: &meta, tags: &tags };
        assert!(configs[0].matches(&subject("ObjectCreated:Put", "img/cat.jpg")));
        assert!(!configs[0].matches(&subject("ObjectCreated:Put", "img/cat.png")), "regex is whole-key");
        assert!(!configs[0].matches(&subject("ObjectCreated:Put", "doc/cat.jpg")));
        assert!(!configs[0].matches(&subject("ObjectRemoved:DeleteMarkerCreated", "img/cat.jpg")));
        let no_tags = Subject { event: "ObjectCreated:Put", key: "img/a.jpg", metadata: &meta, tags: &[] };
        assert!(!configs[0].matches(&no_tags));
        assert!(configs[1].matches(&subject("ObjectRemoved:Delete", "x")), "no events = all");
    }

    #[test]
    fn invalid_configurations_name_the_problem() {
        let one = |body: &str| {
            format!(
                "<NotificationConfiguration><TopicConfiguration>{body}</TopicConfiguration></NotificationConfiguration>"
            )
        };
        let arn = "<Topic>arn:aws:sns:default::t</Topic>";
        assert!(parse(&one(arn)).unwrap_err().message.contains("Id"));
        assert!(parse(&one("<Id>a</Id><Topic>arn:aws:sqs:x</Topic>")).unwrap_err().message.contains("ARN"));
        assert!(
            parse(&one(&format!("<Id>a</Id>{arn}<Event>s3:ObjectCreated:Bogus</Event>")))
                .unwrap_err()
                .message
                .contains("event")
        );
        assert_eq!(parse("<NotificationConfiguration").unwrap_err().code, "MalformedXML");
        assert!(parse("<NotificationConfiguration/>").unwrap().is_empty());
    }
}
