//! AWS Signature Version 4, for the requests s3s does not check itself (the SNS topic API,
//! service `sns`) and for the bench client: canonical requests, signing keys, and
//! verification of an `Authorization: AWS4-HMAC-SHA256 …` header. IO-free.

use hmac::{KeyInit, Mac};
use http::HeaderMap;
use sha2::{Digest, Sha256};

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lower- or upper-case hex `s`; `None` for an odd length or a non-hex digit.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len() / 2).map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()).collect()
}

/// Hex SHA-256 of `data` (a payload hash).
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = hmac::Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// The signature of `string_to_sign` with `secret` for `date` (YYYYMMDD), `region`, `service`.
pub fn signature(secret: &str, date: &str, region: &str, service: &str, string_to_sign: &str) -> String {
    let mut key = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    for part in [region, service, "aws4_request"] {
        key = hmac(&key, part.as_bytes());
    }
    hex(&hmac(&key, string_to_sign.as_bytes()))
}

/// The string to sign for a request made at `stamp` (YYYYMMDDTHHMMSSZ) in `scope`.
pub fn string_to_sign(stamp: &str, scope: &str, canonical_request: &str) -> String {
    format!("AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}", sha256_hex(canonical_request.as_bytes()))
}

/// A parsed `Authorization` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authorization {
    /// The access key.
    pub access_key: String,
    /// Scope date, YYYYMMDD.
    pub date: String,
    /// Scope region.
    pub region: String,
    /// Scope service.
    pub service: String,
    /// Signed header names, lower case, in the order given.
    pub signed_headers: Vec<String>,
    /// The hex signature.
    pub signature: String,
}

impl Authorization {
    /// Parses `AWS4-HMAC-SHA256 Credential=AK/DATE/REGION/SERVICE/aws4_request, SignedHeaders=a;b, Signature=…`.
    pub fn parse(header: &str) -> Option<Authorization> {
        let rest = header.strip_prefix("AWS4-HMAC-SHA256")?.trim_start();
        let (mut credential, mut signed, mut signature) = (None, None, None);
        for part in rest.split(',') {
            let (k, v) = part.trim().split_once('=')?;
            match k {
                "Credential" => credential = Some(v),
                "SignedHeaders" => signed = Some(v),
                "Signature" => signature = Some(v),
                _ => return None,
            }
        }
        let mut scope = credential?.split('/');
        let (access_key, date, region, service) = (scope.next()?, scope.next()?, scope.next()?, scope.next()?);
        if scope.next()? != "aws4_request" || scope.next().is_some() {
            return None;
        }
        Some(Authorization {
            access_key: access_key.to_owned(),
            date: date.to_owned(),
            region: region.to_owned(),
            service: service.to_owned(),
            signed_headers: signed?.split(';').map(str::to_owned).collect(),
            signature: signature?.to_owned(),
        })
    }

    /// The credential scope.
    pub fn scope(&self) -> String {
        format!("{}/{}/{}/aws4_request", self.date, self.region, self.service)
    }
}

/// The canonical form of a query string: pairs sorted, both sides URI-encoded.
fn canonical_query(query: &str) -> String {
    let mut pairs: Vec<(String, String)> =
        form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (uri_encode(&k, false), uri_encode(&v, false))).collect();
    pairs.sort();
    pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
}

/// URI-encodes as SigV4 does: everything but unreserved characters (and `/` with `keep_slash`).
pub fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The canonical request of a request with `headers`, signing `signed` headers.
pub fn canonical_request(
    method: &str,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    signed: &[String],
    payload_hash: &str,
) -> String {
    let mut canonical_headers = String::new();
    for name in signed {
        let values: Vec<String> = headers
            .get_all(name.as_str())
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        canonical_headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    format!("{method}\n{path}\n{}\n{canonical_headers}\n{}\n{payload_hash}", canonical_query(query), signed.join(";"))
}

/// Why a signature check failed.
#[derive(Debug, PartialEq, Eq)]
pub enum SignatureError {
    /// No or unreadable `Authorization` header, or a signed header missing.
    Malformed(String),
    /// The request's time is too far from ours.
    Skewed,
    /// The signature differs.
    Mismatch,
}

/// Checks a request's header signature against `secret`. `now_secs` is the current Unix time.
pub fn verify(
    parts: &http::request::Parts,
    auth: &Authorization,
    payload_hash: &str,
    secret: &str,
    now_secs: u64,
    max_skew_secs: u64,
) -> Result<(), SignatureError> {
    let stamp = parts
        .headers
        .get("x-amz-date")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| SignatureError::Malformed("missing x-amz-date".into()))?;
    let when = parse_stamp(stamp).ok_or_else(|| SignatureError::Malformed(format!("bad x-amz-date '{stamp}'")))?;
    if when.abs_diff(now_secs) > max_skew_secs {
        return Err(SignatureError::Skewed);
    }
    if !stamp.starts_with(&auth.date) {
        return Err(SignatureError::Malformed("the credential date is not the request's date".into()));
    }
    if let Some(missing) = auth.signed_headers.iter().find(|h| !parts.headers.contains_key(h.as_str())) {
        return Err(SignatureError::Malformed(format!("signed header {missing} is missing")));
    }
    let canonical = canonical_request(
        parts.method.as_str(),
        parts.uri.path(),
        parts.uri.query().unwrap_or(""),
        &parts.headers,
        &auth.signed_headers,
        payload_hash,
    );
    let expected =
        signature(secret, &auth.date, &auth.region, &auth.service, &string_to_sign(stamp, &auth.scope(), &canonical));
    // Compare without an early exit, so timing says nothing about where they differ.
    let same = expected.len() == auth.signature.len()
        && expected.bytes().zip(auth.signature.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
    if same { Ok(()) } else { Err(SignatureError::Mismatch) }
}

/// Unix seconds of `YYYYMMDDTHHMMSSZ`.
fn parse_stamp(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<u8>().ok();
    let month = time::Month::try_from(num(4..6)?).ok()?;
    let date = time::Date::from_calendar_date(s.get(0..4)?.parse().ok()?, month, num(6..8)?).ok()?;
    let at = date.with_hms(num(9..11)?, num(11..13)?, num(13..15)?).ok()?;
    u64::try_from(at.assume_utc().unix_timestamp()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of AWS's SigV4 documentation ("GET object", examplebucket).
    #[test]
    fn matches_the_documented_example() {
        let mut headers = HeaderMap::new();
        headers.insert("host", "examplebucket.s3.amazonaws.com".parse().unwrap());
        headers.insert("range", "bytes=0-9".parse().unwrap());
        let empty = sha256_hex(b"");
        headers.insert("x-amz-content-sha256", empty.parse().unwrap());
        headers.insert("x-amz-date", "20130524T000000Z".parse().unwrap());
        let signed: Vec<String> = ["host", "range", "x-amz-content-sha256", "x-amz-date"].map(String::from).to_vec();
        let canonical = canonical_request("GET", "/test.txt", "", &headers, &signed, &empty);
        let to_sign = string_to_sign("20130524T000000Z", "20130524/us-east-1/s3/aws4_request", &canonical);
        assert_eq!(
            signature("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524", "us-east-1", "s3", &to_sign),
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
        let auth = Authorization::parse(
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
        )
        .unwrap();
        let mut req = http::Request::get("/test.txt").body(()).unwrap();
        *req.headers_mut() = headers;
        let (parts, ()) = req.into_parts();
        let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
        let at = parse_stamp("20130524T000000Z").unwrap();
        assert_eq!(at, 1_369_353_600);
        assert_eq!(verify(&parts, &auth, &empty, secret, at + 10, 900), Ok(()));
        assert_eq!(verify(&parts, &auth, &empty, "wrong", at, 900), Err(SignatureError::Mismatch));
        assert_eq!(verify(&parts, &auth, &empty, secret, at + 3600, 900), Err(SignatureError::Skewed));
        assert!(Authorization::parse("AWS4-HMAC-SHA256 Credential=a/b/c").is_none());
        assert!(Authorization::parse("Basic xyz").is_none());
    }
}
