//! Bucket policies in the AWS policy language: parsed once (with the reasons AWS gives for
//! a malformed policy) and evaluated against one request at a time.
//!
//! A statement applies when its principal, action and resource match the request and
//! every condition holds; a policy's answer is Deny if an applying statement denies, else
//! Allow if one allows, else nothing (the ACLs decide).

use super::glob::{has_wildcard, matches};
use serde_json::Value;
use std::net::IpAddr;

/// Largest policy document accepted, as AWS: 20 KiB.
pub const MAX_POLICY_SIZE: usize = 20 * 1024;

/// A parsed bucket policy and the text it came from (returned as it was given).
#[derive(Clone, Debug)]
pub struct Policy {
    text: String,
    statements: Vec<Statement>,
}

impl PartialEq for Policy {
    fn eq(&self, other: &Policy) -> bool {
        self.text == other.text
    }
}

impl Eq for Policy {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    Allow,
    Deny,
}

/// A list that matches when one of its items does, or (the `Not…` form) when none does.
#[derive(Clone, Debug)]
struct Either<T> {
    items: Vec<T>,
    negated: bool,
}

impl<T> Either<T> {
    fn holds(&self, mut matches: impl FnMut(&T) -> bool) -> bool {
        self.items.iter().any(&mut matches) != self.negated
    }
}

/// Who a statement speaks of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// Anyone, anonymous requests included.
    Anyone,
    /// One Shoal user, by uid.
    User(String),
}

#[derive(Clone, Debug)]
struct Statement {
    effect: Effect,
    principals: Either<Principal>,
    actions: Either<String>,
    resources: Either<String>,
    conditions: Vec<Condition>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    StringEquals,
    StringNotEquals,
    StringEqualsIgnoreCase,
    StringNotEqualsIgnoreCase,
    StringLike,
    StringNotLike,
    NumericEquals,
    NumericNotEquals,
    NumericLessThan,
    NumericLessThanEquals,
    NumericGreaterThan,
    NumericGreaterThanEquals,
    DateEquals,
    DateNotEquals,
    DateLessThan,
    DateLessThanEquals,
    DateGreaterThan,
    DateGreaterThanEquals,
    Bool,
    BinaryEquals,
    IpAddress,
    NotIpAddress,
    ArnEquals,
    ArnNotEquals,
    ArnLike,
    ArnNotLike,
    Null,
}

const OPERATORS: [(&str, Operator); 27] = [
    ("StringEquals", Operator::StringEquals),
    ("StringNotEquals", Operator::StringNotEquals),
    ("StringEqualsIgnoreCase", Operator::StringEqualsIgnoreCase),
    ("StringNotEqualsIgnoreCase", Operator::StringNotEqualsIgnoreCase),
    ("StringLike", Operator::StringLike),
    ("StringNotLike", Operator::StringNotLike),
    ("NumericEquals", Operator::NumericEquals),
    ("NumericNotEquals", Operator::NumericNotEquals),
    ("NumericLessThan", Operator::NumericLessThan),
    ("NumericLessThanEquals", Operator::NumericLessThanEquals),
    ("NumericGreaterThan", Operator::NumericGreaterThan),
    ("NumericGreaterThanEquals", Operator::NumericGreaterThanEquals),
    ("DateEquals", Operator::DateEquals),
    ("DateNotEquals", Operator::DateNotEquals),
    ("DateLessThan", Operator::DateLessThan),
    ("DateLessThanEquals", Operator::DateLessThanEquals),
    ("DateGreaterThan", Operator::DateGreaterThan),
    ("DateGreaterThanEquals", Operator::DateGreaterThanEquals),
    ("Bool", Operator::Bool),
    ("BinaryEquals", Operator::BinaryEquals),
    ("IpAddress", Operator::IpAddress),
    ("NotIpAddress", Operator::NotIpAddress),
    ("ArnEquals", Operator::ArnEquals),
    ("ArnNotEquals", Operator::ArnNotEquals),
    ("ArnLike", Operator::ArnLike),
    ("ArnNotLike", Operator::ArnNotLike),
    ("Null", Operator::Null),
];

impl Operator {
    /// Operators that hold when the request's value matches none of the condition's.
    fn negated(self) -> bool {
        use Operator::*;
        matches!(
            self,
            StringNotEquals
                | StringNotEqualsIgnoreCase
                | StringNotLike
                | NumericNotEquals
                | DateNotEquals
                | NotIpAddress
                | ArnNotEquals
                | ArnNotLike
        )
    }

    /// Whether one request value matches one condition value (of a positive operator, or
    /// the positive form of a negated one).
    fn matches(self, condition: &str, value: &str) -> bool {
        use Operator::*;
        match self {
            StringEquals | StringNotEquals | BinaryEquals | ArnEquals | ArnNotEquals => condition == value,
            StringEqualsIgnoreCase | StringNotEqualsIgnoreCase => condition.to_lowercase() == value.to_lowercase(),
            StringLike | StringNotLike | ArnLike | ArnNotLike => matches(condition, value, false),
            NumericEquals | NumericNotEquals => compare(number(condition), number(value), |o| o.is_eq()),
            NumericLessThan => compare(number(value), number(condition), |o| o.is_lt()),
            NumericLessThanEquals => compare(number(value), number(condition), |o| o.is_le()),
            NumericGreaterThan => compare(number(value), number(condition), |o| o.is_gt()),
            NumericGreaterThanEquals => compare(number(value), number(condition), |o| o.is_ge()),
            DateEquals | DateNotEquals => compare(date(condition), date(value), |o| o.is_eq()),
            DateLessThan => compare(date(value), date(condition), |o| o.is_lt()),
            DateLessThanEquals => compare(date(value), date(condition), |o| o.is_le()),
            DateGreaterThan => compare(date(value), date(condition), |o| o.is_gt()),
            DateGreaterThanEquals => compare(date(value), date(condition), |o| o.is_ge()),
            Bool => condition.eq_ignore_ascii_case(value),
            IpAddress | NotIpAddress => match (network(condition), value.parse::<IpAddr>()) {
                (Some(net), Ok(ip)) => net.contains(&ip),
                _ => false,
            },
            Null => false,
        }
    }

    /// Whether `value` is a valid condition value of this operator.
    fn accepts(self, value: &str) -> bool {
        use Operator::*;
        match self {
            NumericEquals
            | NumericNotEquals
            | NumericLessThan
            | NumericLessThanEquals
            | NumericGreaterThan
            | NumericGreaterThanEquals => number(value).is_some(),
            DateEquals
            | DateNotEquals
            | DateLessThan
            | DateLessThanEquals
            | DateGreaterThan
            | DateGreaterThanEquals => date(value).is_some(),
            Bool | Null => value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false"),
            IpAddress | NotIpAddress => network(value).is_some(),
            _ => true,
        }
    }
}

fn compare<T: PartialOrd>(a: Option<T>, b: Option<T>, test: impl Fn(std::cmp::Ordering) -> bool) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.partial_cmp(&b).is_some_and(test),
        _ => false,
    }
}

fn number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|n| n.is_finite())
}

/// A date as ISO 8601 (RFC 3339, or a bare date) or seconds since the epoch, in seconds.
fn date(s: &str) -> Option<i128> {
    use time::format_description::well_known::Rfc3339;
    if let Ok(t) = time::OffsetDateTime::parse(s, &Rfc3339) {
        return Some(t.unix_timestamp_nanos() / 1_000_000_000);
    }
    let day = time::macros::format_description!("[year]-[month]-[day]");
    if let Ok(d) = time::Date::parse(s, &day) {
        return Some(d.midnight().assume_utc().unix_timestamp().into());
    }
    s.parse::<i64>().ok().map(i128::from)
}

/// A CIDR block, or one address.
fn network(s: &str) -> Option<ipnet::IpNet> {
    let s = s.trim();
    s.parse::<ipnet::IpNet>().ok().or_else(|| s.parse::<IpAddr>().ok().map(ipnet::IpNet::from))
}

/// How a set operator combines a key's several request values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Quantifier {
    /// No set operator: the key is single-valued (any of its values decides).
    Single,
    /// `ForAnyValue:`: some request value matches.
    Any,
    /// `ForAllValues:`: every request value matches (true when there are none).
    All,
}

#[derive(Clone, Debug)]
struct Condition {
    operator: Operator,
    quantifier: Quantifier,
    if_exists: bool,
    /// The key, in the normal form of [`normal_key`].
    key: String,
    values: Vec<String>,
}

/// A condition key compared case-insensitively, but for what follows its first `/` (a tag key).
pub fn normal_key(key: &str) -> String {
    match key.split_once('/') {
        Some((name, rest)) => format!("{}/{rest}", name.to_ascii_lowercase()),
        None => key.to_ascii_lowercase(),
    }
}

impl Condition {
    fn holds(&self, context: &dyn Context) -> bool {
        let found = context.values(&self.key);
        if self.operator == Operator::Null {
            let absent = found.as_ref().is_none_or(|v| v.is_empty());
            return self.values.iter().any(|v| v.eq_ignore_ascii_case("true") == absent);
        }
        let Some(values) = found.filter(|v| !v.is_empty()) else {
            return match self.quantifier {
                Quantifier::All => true,
                _ => self.if_exists || self.operator.negated(),
            };
        };
        let one = |value: &String| self.values.iter().any(|c| self.operator.matches(c, value));
        let values: &[String] = &values;
        let positive = match self.quantifier {
            Quantifier::All => values.iter().all(one),
            Quantifier::Single | Quantifier::Any => values.iter().any(one),
        };
        positive != self.operator.negated()
    }
}

/// The request values of condition keys, looked up by their [`normal_key`].
pub trait Context {
    /// The key's values; `None` when the request has none.
    fn values(&self, key: &str) -> Option<std::borrow::Cow<'_, [String]>>;
}

/// What a request asks, in the policy's terms.
pub struct Request<'a> {
    /// The requester's uid; `None` when anonymous.
    pub principal: Option<&'a str>,
    /// The action, such as `s3:GetObject`.
    pub action: &'a str,
    /// The resource ARN: `arn:aws:s3:::bucket` or `arn:aws:s3:::bucket/key`.
    pub resource: &'a str,
    /// Everything conditions may ask.
    pub context: &'a dyn Context,
}

/// A policy's answer to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// A statement denies it: nothing else can allow it.
    Deny,
    /// A statement allows it and none denies it.
    Allow,
    /// No statement applies.
    Silent,
}

/// Condition keys that name who or where the requester is: a statement for anyone that
/// fixes one of them to a value without wildcards is not public (AWS's rule).
const LIMITING_KEYS: [&str; 9] = [
    "aws:sourceip",
    "aws:sourcearn",
    "aws:sourcevpc",
    "aws:sourcevpce",
    "aws:sourceaccount",
    "aws:sourceowner",
    "aws:principalorgid",
    "aws:principalaccount",
    "aws:userid",
];

impl Policy {
    /// Parses a policy for `bucket`; the error is the reason AWS's MalformedPolicy gives.
    pub fn parse(text: &str, bucket: &str) -> Result<Policy, String> {
        Policy::parse_for(text, Some(bucket))
    }

    /// Parses a policy, checking that its resources name `bucket` when given (a stored
    /// policy was checked when it was put).
    fn parse_for(text: &str, bucket: Option<&str>) -> Result<Policy, String> {
        if text.len() > MAX_POLICY_SIZE {
            return Err(format!("Policy exceeds the maximum allowed document size of {MAX_POLICY_SIZE} bytes"));
        }
        if !text.trim_start().starts_with('{') {
            return Err("Policies must be valid JSON and the first byte must be '{'".into());
        }
        let document: Value =
            serde_json::from_str(text).map_err(|e| format!("This policy contains invalid Json: {e}"))?;
        let Value::Object(fields) = document else {
            return Err("Policies must be valid JSON and the first byte must be '{'".into());
        };
        let mut statements = None;
        for (name, value) in &fields {
            match name.as_str() {
                "Version" => match value.as_str() {
                    Some("2012-10-17" | "2008-10-17") => {}
                    _ => return Err("The policy must contain a valid version string".into()),
                },
                "Id" => {
                    value.as_str().ok_or("Id must be a string")?;
                }
                "Statement" => {
                    let list = match value {
                        Value::Array(items) => items.iter().collect::<Vec<_>>(),
                        one => vec![one],
                    };
                    statements = Some(list.into_iter().map(|s| statement(s, bucket)).collect::<Result<Vec<_>, _>>()?);
                }
                other => return Err(format!("Unknown field {other}")),
            }
        }
        let statements = statements.ok_or("Missing required field Statement")?;
        if statements.is_empty() {
            return Err("Could not parse the policy: Statement is empty!".into());
        }
        Ok(Policy { text: text.to_owned(), statements })
    }

    /// The document as it was given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The users the policy names (so the gateway can check that they exist).
    pub fn named_users(&self) -> impl Iterator<Item = &str> {
        self.statements.iter().flat_map(|s| s.principals.items.iter()).filter_map(|p| match p {
            Principal::User(uid) => Some(uid.as_str()),
            Principal::Anyone => None,
        })
    }

    /// The policy's answer to `request`.
    pub fn evaluate(&self, request: &Request<'_>) -> Decision {
        let mut allowed = false;
        for statement in &self.statements {
            if statement.applies(request) {
                match statement.effect {
                    Effect::Deny => return Decision::Deny,
                    Effect::Allow => allowed = true,
                }
            }
        }
        if allowed { Decision::Allow } else { Decision::Silent }
    }

    /// Whether the policy grants anything to everyone, as AWS judges it for public access
    /// blocks and GetBucketPolicyStatus: an Allow statement for any principal (or all but
    /// some) without a condition fixing the requester's address, account or network.
    pub fn is_public(&self) -> bool {
        self.statements.iter().any(|s| {
            let to_anyone = s.principals.negated || s.principals.items.contains(&Principal::Anyone);
            let limited = s.conditions.iter().any(|c| {
                let fixes = matches!(
                    c.operator,
                    Operator::StringEquals | Operator::StringLike | Operator::ArnEquals | Operator::ArnLike
                ) || (c.operator == Operator::IpAddress
                    && c.values.iter().all(|v| network(v).is_some_and(|n| n.prefix_len() >= 8)));
                fixes
                    && !c.if_exists
                    && LIMITING_KEYS.contains(&c.key.as_str())
                    && !c.values.iter().any(|v| has_wildcard(v))
            });
            s.effect == Effect::Allow && to_anyone && !limited
        })
    }
}

impl Statement {
    fn applies(&self, request: &Request<'_>) -> bool {
        self.principals.holds(|p| match p {
            Principal::Anyone => true,
            Principal::User(uid) => request.principal == Some(uid.as_str()),
        }) && self.actions.holds(|a| matches(a, request.action, true))
            && self.resources.holds(|r| matches(r, request.resource, false))
            && self.conditions.iter().all(|c| c.holds(request.context))
    }
}

/// A string or a list of strings (the policy language allows either).
fn strings(value: &Value, field: &str) -> Result<Vec<String>, String> {
    let scalar = |v: &Value| match v {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(format!("{field} must be a string or a list of strings")),
    };
    match value {
        Value::Array(items) if items.is_empty() => Err(format!("{field} must not be empty")),
        Value::Array(items) => items.iter().map(scalar).collect(),
        other => Ok(vec![scalar(other)?]),
    }
}

/// The one of `names` a statement has (exactly one is required).
fn one_of<'a>(
    fields: &'a serde_json::Map<String, Value>,
    names: [&'static str; 2],
) -> Result<(&'a Value, bool), String> {
    match (fields.get(names[0]), fields.get(names[1])) {
        (Some(v), None) => Ok((v, false)),
        (None, Some(v)) => Ok((v, true)),
        (None, None) => Err(format!("Missing required field {}", names[0])),
        (Some(_), Some(_)) => Err(format!("A statement takes {} or {}, not both", names[0], names[1])),
    }
}

fn statement(value: &Value, bucket: Option<&str>) -> Result<Statement, String> {
    let Value::Object(fields) = value else { return Err("Each statement must be a JSON object".into()) };
    for name in fields.keys() {
        if ![
            "Sid",
            "Effect",
            "Principal",
            "NotPrincipal",
            "Action",
            "NotAction",
            "Resource",
            "NotResource",
            "Condition",
        ]
        .contains(&name.as_str())
        {
            return Err(format!("Unknown field {name}"));
        }
    }
    if let Some(sid) = fields.get("Sid") {
        sid.as_str().ok_or("Sid must be a string")?;
    }
    let effect = match fields.get("Effect").map(|e| e.as_str()) {
        Some(Some("Allow")) => Effect::Allow,
        Some(Some("Deny")) => Effect::Deny,
        Some(other) => return Err(format!("Invalid effect: {}", other.unwrap_or("(not a string)"))),
        None => return Err("Missing required field Effect".into()),
    };
    let (value, negated) = one_of(fields, ["Principal", "NotPrincipal"])?;
    let principals = Either { items: principals(value)?, negated };
    let (value, negated) = one_of(fields, ["Action", "NotAction"])?;
    let actions = strings(value, "Action")?;
    if let Some(bad) = actions.iter().find(|a| !valid_action(a)) {
        return Err(format!("Policy has invalid action: {bad}"));
    }
    let actions = Either { items: actions, negated };
    let (value, negated) = one_of(fields, ["Resource", "NotResource"])?;
    let resources = strings(value, "Resource")?;
    if let Some(bad) = resources.iter().find(|r| !valid_resource(r, bucket)) {
        return Err(format!("Policy has invalid resource: {bad}"));
    }
    let resources = Either { items: resources, negated };
    let conditions = match fields.get("Condition") {
        Some(value) => conditions(value)?,
        None => Vec::new(),
    };
    Ok(Statement { effect, principals, actions, resources, conditions })
}

/// The ARN of a Shoal user, as policies name it.
pub fn user_arn(uid: &str) -> String {
    format!("arn:aws:iam:::user/{uid}")
}

fn principals(value: &Value) -> Result<Vec<Principal>, String> {
    const INVALID: &str = "Invalid principal in policy";
    match value {
        Value::String(s) if s == "*" => Ok(vec![Principal::Anyone]),
        Value::Object(kinds) if !kinds.is_empty() => {
            let mut all = Vec::new();
            for (kind, ids) in kinds {
                for id in strings(ids, "Principal")? {
                    all.push(match (kind.as_str(), id.as_str()) {
                        ("AWS", "*") => Principal::Anyone,
                        ("AWS", arn) => {
                            // arn:aws:iam::<account, empty or a tenant>:user/<uid>
                            let rest = arn.strip_prefix("arn:aws:iam::").ok_or(INVALID)?;
                            let (_account, user) = rest.split_once(':').ok_or(INVALID)?;
                            let uid = user.strip_prefix("user/").filter(|u| !u.is_empty()).ok_or(INVALID)?;
                            Principal::User(uid.to_owned())
                        }
                        ("CanonicalUser", id) if !id.is_empty() => Principal::User(id.to_owned()),
                        _ => return Err(INVALID.into()),
                    });
                }
            }
            Ok(all)
        }
        _ => Err(INVALID.into()),
    }
}

/// The S3 actions a policy may name.
pub const ACTIONS: &[&str] = &[
    "AbortMultipartUpload",
    "BypassGovernanceRetention",
    "CreateBucket",
    "DeleteBucket",
    "DeleteBucketCORS",
    "DeleteBucketEncryption",
    "DeleteBucketLifecycle",
    "DeleteBucketOwnershipControls",
    "DeleteBucketPolicy",
    "DeleteBucketPublicAccessBlock",
    "DeleteBucketTagging",
    "DeleteBucketWebsite",
    "DeleteObject",
    "DeleteObjectTagging",
    "DeleteObjectVersion",
    "DeleteObjectVersionTagging",
    "GetAccelerateConfiguration",
    "GetBucketAcl",
    "GetBucketCORS",
    "GetBucketLocation",
    "GetBucketLogging",
    "GetBucketNotification",
    "GetBucketObjectLockConfiguration",
    "GetBucketOwnershipControls",
    "GetBucketPolicy",
    "GetBucketPolicyStatus",
    "GetBucketPublicAccessBlock",
    "GetBucketRequestPayment",
    "GetBucketTagging",
    "GetBucketVersioning",
    "GetBucketWebsite",
    "GetEncryptionConfiguration",
    "GetLifecycleConfiguration",
    "GetObject",
    "GetObjectAcl",
    "GetObjectAttributes",
    "GetObjectLegalHold",
    "GetObjectRetention",
    "GetObjectTagging",
    "GetObjectTorrent",
    "GetObjectVersion",
    "GetObjectVersionAcl",
    "GetObjectVersionAttributes",
    "GetObjectVersionTagging",
    "GetReplicationConfiguration",
    "ListAllMyBuckets",
    "ListBucket",
    "ListBucketMultipartUploads",
    "ListBucketVersions",
    "ListMultipartUploadParts",
    "PutAccelerateConfiguration",
    "PutBucketAcl",
    "PutBucketCORS",
    "PutBucketLogging",
    "PutBucketNotification",
    "PutBucketObjectLockConfiguration",
    "PutBucketOwnershipControls",
    "PutBucketPolicy",
    "PutBucketPublicAccessBlock",
    "PutBucketRequestPayment",
    "PutBucketTagging",
    "PutBucketVersioning",
    "PutBucketWebsite",
    "PutEncryptionConfiguration",
    "PutLifecycleConfiguration",
    "PutObject",
    "PutObjectAcl",
    "PutObjectLegalHold",
    "PutObjectRetention",
    "PutObjectTagging",
    "PutObjectVersionAcl",
    "PutObjectVersionTagging",
    "PutReplicationConfiguration",
    "RestoreObject",
];

fn valid_action(action: &str) -> bool {
    if action == "*" {
        return true;
    }
    let Some((service, name)) = action.split_once(':') else { return false };
    service.eq_ignore_ascii_case("s3")
        && !name.is_empty()
        && (has_wildcard(name) || ACTIONS.iter().any(|known| known.eq_ignore_ascii_case(name)))
}

/// A resource must be an S3 ARN of this bucket (when known) or of objects in it.
fn valid_resource(resource: &str, bucket: Option<&str>) -> bool {
    if resource == "*" {
        return true;
    }
    let Some(path) = resource.strip_prefix("arn:aws:s3:::") else { return false };
    let named = path.split_once('/').map_or(path, |(b, _)| b);
    bucket.is_none_or(|bucket| matches(named, bucket, false))
}

/// Stored as the text it was given.
impl serde::Serialize for Policy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Policy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Policy, D::Error> {
        let text = String::deserialize(deserializer)?;
        Policy::parse_for(&text, None).map_err(serde::de::Error::custom)
    }
}

fn conditions(value: &Value) -> Result<Vec<Condition>, String> {
    let Value::Object(operators) = value else { return Err("Condition must be a JSON object".into()) };
    let mut all = Vec::new();
    for (name, keys) in operators {
        let (quantifier, rest) = match name.split_once(':') {
            Some(("ForAnyValue", rest)) => (Quantifier::Any, rest),
            Some(("ForAllValues", rest)) => (Quantifier::All, rest),
            Some(_) => return Err(format!("Invalid Condition type : {name}")),
            None => (Quantifier::Single, name.as_str()),
        };
        let (base, if_exists) = match rest.strip_suffix("IfExists") {
            Some(base) => (base, true),
            None => (rest, false),
        };
        let operator = OPERATORS
            .iter()
            .find(|(n, _)| *n == base)
            .map(|(_, op)| *op)
            .filter(|op| !(if_exists && *op == Operator::Null))
            .ok_or_else(|| format!("Invalid Condition type : {name}"))?;
        let Value::Object(keys) = keys else { return Err(format!("The {name} condition must be a JSON object")) };
        for (key, values) in keys {
            if key.is_empty() || !key.contains(':') {
                return Err(format!("Policy has an invalid condition key: {key}"));
            }
            let values = strings(values, "A condition value")?;
            if let Some(bad) = values.iter().find(|v| !operator.accepts(v)) {
                return Err(format!("Invalid value for the {name} condition on {key}: {bad}"));
            }
            all.push(Condition { operator, quantifier, if_exists, key: normal_key(key), values });
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct Keys(BTreeMap<String, Vec<String>>);

    impl Context for Keys {
        fn values(&self, key: &str) -> Option<std::borrow::Cow<'_, [String]>> {
            self.0.get(key).map(|v| std::borrow::Cow::Borrowed(v.as_slice()))
        }
    }

    fn keys(pairs: &[(&str, &str)]) -> Keys {
        let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (k, v) in pairs {
            map.entry(normal_key(k)).or_default().push(v.to_string());
        }
        Keys(map)
    }

    fn decide(policy: &Policy, who: Option<&str>, action: &str, resource: &str, context: &[(&str, &str)]) -> Decision {
        let context = keys(context);
        policy.evaluate(&Request { principal: who, action, resource, context: &context })
    }

    fn policy(statements: &str) -> Policy {
        Policy::parse(&format!(r#"{{"Version":"2012-10-17","Statement":[{statements}]}}"#), "b").unwrap()
    }

    const OBJ: &str = "arn:aws:s3:::b/k";

    #[test]
    fn statements_decide_as_aws_documents() {
        let public_read =
            policy(r#"{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}"#);
        let deny_bob = policy(
            r#"{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::b","arn:aws:s3:::b/*"]},
               {"Effect":"Deny","Principal":{"AWS":"arn:aws:iam:::user/bob"},"Action":"s3:Delete*","Resource":"arn:aws:s3:::b/*"}"#,
        );
        let not_action = policy(
            r#"{"Effect":"Deny","NotPrincipal":{"AWS":["arn:aws:iam:::user/alice"]},"NotAction":"s3:Get*","Resource":"arn:aws:s3:::b/*"}"#,
        );
        let not_resource = policy(
            r#"{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:GetObject","NotResource":"arn:aws:s3:::b/secret/*"}"#,
        );
        for (p, who, action, resource, expected) in [
            (&public_read, None, "s3:GetObject", OBJ, Decision::Allow),
            (&public_read, Some("bob"), "s3:GetObject", OBJ, Decision::Allow),
            (&public_read, None, "s3:PutObject", OBJ, Decision::Silent),
            (&public_read, None, "s3:GetObject", "arn:aws:s3:::b", Decision::Silent),
            (&deny_bob, Some("bob"), "s3:DeleteObject", OBJ, Decision::Deny),
            (&deny_bob, Some("bob"), "s3:PutObject", OBJ, Decision::Allow),
            (&deny_bob, Some("carol"), "s3:DeleteObject", OBJ, Decision::Allow),
            (&deny_bob, None, "s3:ListBucket", "arn:aws:s3:::b", Decision::Allow),
            (&not_action, Some("bob"), "s3:PutObject", OBJ, Decision::Deny),
            (&not_action, Some("bob"), "s3:GetObject", OBJ, Decision::Silent),
            (&not_action, Some("alice"), "s3:PutObject", OBJ, Decision::Silent),
            (&not_resource, None, "s3:GetObject", OBJ, Decision::Allow),
            (&not_resource, None, "s3:GetObject", "arn:aws:s3:::b/secret/x", Decision::Silent),
        ] {
            assert_eq!(
                decide(p, who, action, resource, &[]),
                expected,
                "{who:?} {action} {resource} under {}",
                p.text()
            );
        }
    }

    #[test]
    fn conditions_decide_as_aws_documents() {
        /// A condition, the request's keys, and whether the statement applies.
        type Case = (&'static str, &'static [(&'static str, &'static str)], bool);
        let cases: &[Case] = &[
            (r#"{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}"#, &[("aws:SourceIp", "10.1.2.3")], true),
            (r#"{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}"#, &[("aws:SourceIp", "11.1.2.3")], false),
            (r#"{"IpAddress":{"aws:SourceIp":["192.168.1.1","::1/128"]}}"#, &[("aws:SourceIp", "::1")], true),
            (r#"{"NotIpAddress":{"aws:SourceIp":"127.0.0.0/8"}}"#, &[("aws:SourceIp", "127.0.0.1")], false),
            (r#"{"Bool":{"aws:SecureTransport":"true"}}"#, &[("aws:SecureTransport", "false")], false),
            (r#"{"Bool":{"aws:SecureTransport":false}}"#, &[("aws:SecureTransport", "false")], true),
            (r#"{"StringEquals":{"s3:prefix":["home/","docs/"]}}"#, &[("s3:prefix", "docs/")], true),
            (r#"{"StringEquals":{"s3:prefix":"home/"}}"#, &[], false),
            (r#"{"StringNotEquals":{"s3:prefix":"home/"}}"#, &[], true),
            (r#"{"StringNotEquals":{"s3:prefix":"home/"}}"#, &[("s3:prefix", "home/")], false),
            (r#"{"StringEqualsIfExists":{"s3:prefix":"home/"}}"#, &[], true),
            (r#"{"StringEqualsIgnoreCase":{"aws:username":"ALICE"}}"#, &[("aws:username", "alice")], true),
            (r#"{"StringLike":{"s3:prefix":"home/*"}}"#, &[("s3:prefix", "home/alice/")], true),
            (r#"{"StringNotLike":{"s3:prefix":"home/*"}}"#, &[("s3:prefix", "etc/")], true),
            (r#"{"NumericLessThanEquals":{"s3:max-keys":"10"}}"#, &[("s3:max-keys", "10")], true),
            (r#"{"NumericLessThan":{"s3:max-keys":10}}"#, &[("s3:max-keys", "10")], false),
            (r#"{"NumericGreaterThan":{"s3:max-keys":"10"}}"#, &[("s3:max-keys", "11")], true),
            (r#"{"NumericNotEquals":{"s3:max-keys":"10"}}"#, &[("s3:max-keys", "9")], true),
            (
                r#"{"DateLessThan":{"aws:CurrentTime":"2030-01-01T00:00:00Z"}}"#,
                &[("aws:CurrentTime", "2026-11-25T10:00:00Z")],
                true,
            ),
            (
                r#"{"DateGreaterThan":{"aws:CurrentTime":"2030-01-01"}}"#,
                &[("aws:CurrentTime", "2026-11-25T10:00:00Z")],
                false,
            ),
            (r#"{"DateEquals":{"aws:EpochTime":"1700000000"}}"#, &[("aws:EpochTime", "1700000000")], true),
            (r#"{"Null":{"s3:x-amz-server-side-encryption":"true"}}"#, &[], true),
            (
                r#"{"Null":{"s3:x-amz-server-side-encryption":"true"}}"#,
                &[("s3:x-amz-server-side-encryption", "AES256")],
                false,
            ),
            (
                r#"{"Null":{"s3:x-amz-server-side-encryption":"false"}}"#,
                &[("s3:x-amz-server-side-encryption", "AES256")],
                true,
            ),
            (r#"{"StringEquals":{"s3:ExistingObjectTag/Team":"red"}}"#, &[("s3:existingobjecttag/Team", "red")], true),
            (r#"{"StringEquals":{"s3:ExistingObjectTag/Team":"red"}}"#, &[("s3:existingobjecttag/team", "red")], false),
            (
                r#"{"ForAnyValue:StringEquals":{"s3:RequestObjectTagKeys":["a","b"]}}"#,
                &[("s3:RequestObjectTagKeys", "b"), ("s3:RequestObjectTagKeys", "z")],
                true,
            ),
            (
                r#"{"ForAllValues:StringEquals":{"s3:RequestObjectTagKeys":["a","b"]}}"#,
                &[("s3:RequestObjectTagKeys", "b"), ("s3:RequestObjectTagKeys", "z")],
                false,
            ),
            (r#"{"ForAllValues:StringEquals":{"s3:RequestObjectTagKeys":["a","b"]}}"#, &[], true),
            (
                r#"{"ArnLike":{"aws:SourceArn":"arn:aws:sns:*:*:t"}}"#,
                &[("aws:SourceArn", "arn:aws:sns:default::t")],
                true,
            ),
            (
                r#"{"StringEquals":{"s3:x-amz-acl":"bucket-owner-full-control"},"IpAddress":{"aws:SourceIp":"127.0.0.1"}}"#,
                &[("s3:x-amz-acl", "bucket-owner-full-control"), ("aws:SourceIp", "127.0.0.2")],
                false,
            ),
        ];
        for (condition, context, expected) in cases {
            let p = policy(&format!(
                r#"{{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b/*","Condition":{condition}}}"#
            ));
            let decision = decide(&p, Some("u"), "s3:ListBucket", OBJ, context);
            assert_eq!(decision == Decision::Allow, *expected, "{condition} with {context:?}");
        }
    }

    #[test]
    fn malformed_policies_say_why() {
        for (text, reason) in [
            ("", "first byte must be '{'"),
            ("[]", "first byte must be '{'"),
            ("{", "invalid Json"),
            (r#"{"Version":"2012-10-17"}"#, "Missing required field Statement"),
            (r#"{"Statement":[]}"#, "Statement is empty"),
            (r#"{"Version":"2020-01-01","Statement":[]}"#, "valid version string"),
            (
                r#"{"Statement":[{"Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}"#,
                "Missing required field Effect",
            ),
            (
                r#"{"Statement":[{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject","Resource":"*"}]}"#,
                "Invalid effect: Maybe",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}"#,
                "Missing required field Principal",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"bob","Action":"s3:GetObject","Resource":"*"}]}"#,
                "Invalid principal",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":{"AWS":"bob"},"Action":"s3:GetObject","Resource":"*"}]}"#,
                "Invalid principal",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObjekt","Resource":"*"}]}"#,
                "invalid action: s3:GetObjekt",
            ),
            (r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"iam:*","Resource":"*"}]}"#, "invalid action"),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::other/*"}]}"#,
                "invalid resource",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"b/*"}]}"#,
                "invalid resource",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Extra":1}]}"#,
                "Unknown field Extra",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Condition":{"StringSortOf":{"s3:prefix":"a"}}}]}"#,
                "Invalid Condition type : StringSortOf",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"nowhere"}}}]}"#,
                "Invalid value",
            ),
            (
                r#"{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*","Condition":{"NumericEquals":{"s3:max-keys":"ten"}}}]}"#,
                "Invalid value",
            ),
        ] {
            let error = Policy::parse(text, "b").expect_err(text);
            assert!(error.contains(reason), "{text}: {error}");
        }
        let big = format!(r#"{{"Statement":[{}]}}"#, " ".repeat(MAX_POLICY_SIZE));
        assert!(Policy::parse(&big, "b").unwrap_err().contains("maximum allowed document size"));
    }

    #[test]
    fn public_means_granted_to_anyone_without_a_fixing_condition() {
        let anyone = r#"{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*""#;
        for (statement, public) in [
            (format!("{anyone}}}"), true),
            (format!(r#"{anyone},"Condition":{{"IpAddress":{{"aws:SourceIp":"10.0.0.0/8"}}}}}}"#), false),
            (format!(r#"{anyone},"Condition":{{"IpAddress":{{"aws:SourceIp":"0.0.0.0/0"}}}}}}"#), true),
            (format!(r#"{anyone},"Condition":{{"StringLike":{{"aws:SourceArn":"*"}}}}}}"#), true),
            (format!(r#"{anyone},"Condition":{{"StringEquals":{{"s3:prefix":"x"}}}}}}"#), true),
            (
                r#"{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam:::user/bob"},"Action":"s3:*","Resource":"*"}"#
                    .into(),
                false,
            ),
            (r#"{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*"}"#.into(), false),
            (
                r#"{"Effect":"Allow","NotPrincipal":{"AWS":"arn:aws:iam:::user/bob"},"Action":"s3:*","Resource":"*"}"#
                    .into(),
                true,
            ),
        ] {
            assert_eq!(policy(&statement).is_public(), public, "{statement}");
        }
    }

    #[test]
    fn named_users_are_listed() {
        let p = policy(
            r#"{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam:::user/bob","arn:aws:iam::tenant:user/carol"],"CanonicalUser":"dave"},"Action":"s3:*","Resource":"*"}"#,
        );
        let mut users: Vec<&str> = p.named_users().collect();
        users.sort();
        assert_eq!(users, ["bob", "carol", "dave"]);
    }

    proptest::proptest! {
        #[test]
        fn any_document_is_parsed_or_refused_without_panic(text in "\\PC{0,300}") {
            if let Ok(p) = Policy::parse(&text, "b") {
                let _ = decide(&p, None, "s3:GetObject", OBJ, &[]);
            }
        }

        #[test]
        fn any_statement_shape_evaluates_without_panic(
            effect in "Allow|Deny|x",
            principal in r#""\*"|\{"AWS":"arn:aws:iam:::user/[a-z]{0,3}"\}|\{"AWS":\[\]\}|1"#,
            action in "[sS]3:[A-Za-z*?]{0,12}|\\*",
            resource in "arn:aws:s3:::[b*?]{0,2}(/[a-z*?]{0,4})?|\\*",
            operator in "(ForAnyValue:|ForAllValues:)?(String|Numeric|Date|Ip|Arn|Bool|Null|NotIp)[A-Za-z]{0,12}",
            key in "(aws|s3):[A-Za-z-]{0,10}(/[A-Za-z]{0,3})?",
            value in r#""[^"\\]{0,12}"|[0-9]{1,4}|true|\["[^"\\]{0,6}","[0-9./:a-f]{0,12}"\]"#,
            request in "[0-9a-zA-Z./:*-]{0,16}",
        ) {
            let text = format!(
                r#"{{"Statement":{{"Effect":"{effect}","Principal":{principal},"Action":"{action}","Resource":"{resource}","Condition":{{"{operator}":{{"{key}":{value}}}}}}}}}"#
            );
            if let Ok(p) = Policy::parse(&text, "b") {
                let _ = p.is_public();
                for who in [None, Some("u")] {
                    let _ = decide(&p, who, &action, OBJ, &[(&key, &request)]);
                }
            }
        }
    }
}
