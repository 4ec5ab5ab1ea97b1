//! Additional checksums (`x-amz-checksum-crc32|crc32c|crc64nvme|sha1|sha256`): which one a
//! request asks for (a header with the value, or an algorithm whose value comes in the
//! aws-chunked trailer), computed over the data as it streams (s3s's hashers), checked,
//! and stored with the object to be shown on request.

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

/// A checksum algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Algorithm {
    /// CRC-32 (ISO HDLC).
    Crc32,
    /// CRC-32C (Castagnoli).
    Crc32c,
    /// CRC-64/NVME.
    Crc64Nvme,
    /// SHA-1.
    Sha1,
    /// SHA-256.
    Sha256,
}

const ALGORITHMS: [(Algorithm, &str); 5] = [
    (Algorithm::Crc32, "CRC32"),
    (Algorithm::Crc32c, "CRC32C"),
    (Algorithm::Crc64Nvme, "CRC64NVME"),
    (Algorithm::Sha1, "SHA1"),
    (Algorithm::Sha256, "SHA256"),
];

impl Algorithm {
    /// The S3 name (`CRC32`, …).
    pub fn name(self) -> &'static str {
        ALGORITHMS.iter().find(|(a, _)| *a == self).map_or("", |(_, n)| n)
    }

    /// The algorithm of an S3 name, in any case.
    pub fn named(name: &str) -> Option<Algorithm> {
        ALGORITHMS.iter().find(|(_, n)| n.eq_ignore_ascii_case(name)).map(|(a, _)| *a)
    }

    /// The header carrying its value: `x-amz-checksum-crc32`, …
    pub fn header(self) -> String {
        format!("x-amz-checksum-{}", self.name().to_ascii_lowercase())
    }

    fn hasher(self) -> s3s::checksum::ChecksumHasher {
        use s3s::crypto::Checksum as _;
        let mut hasher = s3s::checksum::ChecksumHasher::default();
        match self {
            Algorithm::Crc32 => hasher.crc32 = Some(s3s::crypto::Crc32::new()),
            Algorithm::Crc32c => hasher.crc32c = Some(s3s::crypto::Crc32c::new()),
            Algorithm::Crc64Nvme => hasher.crc64nvme = Some(s3s::crypto::Crc64Nvme::new()),
            Algorithm::Sha1 => hasher.sha1 = Some(s3s::crypto::Sha1::new()),
            Algorithm::Sha256 => hasher.sha256 = Some(s3s::crypto::Sha256::new()),
        }
        hasher
    }
}

/// A checksum as stored with an object: of the whole data, or (`parts`) of a multipart
/// object's part checksums.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The base64 digest.
    pub value: String,
    /// The part count of a composite checksum (shown as `value-N`).
    pub parts: Option<u32>,
}

impl Stored {
    /// The value as S3 shows it.
    pub fn shown(&self) -> String {
        match self.parts {
            Some(n) => format!("{}-{n}", self.value),
            None => self.value.clone(),
        }
    }
}

/// The checksum a request asks to be checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requested {
    /// Its algorithm.
    pub algorithm: Algorithm,
    /// The value from a header; `None` when it comes in the trailer.
    pub value: Option<String>,
}

impl Requested {
    /// The checksum named `name`, computed with no value to check it against.
    pub fn computed(name: &str) -> Result<Requested, String> {
        let algorithm = Algorithm::named(name).ok_or_else(|| format!("unsupported checksum algorithm '{name}'"))?;
        Ok(Requested { algorithm, value: None })
    }
}

/// What a request's headers ask: a `x-amz-checksum-*` header (at most one), or an
/// algorithm named by `x-amz-sdk-checksum-algorithm` or `x-amz-trailer` whose value
/// follows the body.
pub fn requested(headers: &HeaderMap) -> Result<Option<Requested>, String> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mut with_value = ALGORITHMS.iter().filter_map(|(a, _)| text(&a.header()).map(|v| (*a, v)));
    if let Some((algorithm, value)) = with_value.next() {
        if with_value.next().is_some() {
            return Err("Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.".into());
        }
        return Ok(Some(Requested { algorithm, value: Some(value.trim().to_owned()) }));
    }
    if let Some(trailer) = text("x-amz-trailer") {
        let name = trailer.trim().to_ascii_lowercase();
        let algorithm = name
            .strip_prefix("x-amz-checksum-")
            .and_then(Algorithm::named)
            .ok_or_else(|| format!("unsupported x-amz-trailer '{trailer}'"))?;
        return Ok(Some(Requested { algorithm, value: None }));
    }
    match text("x-amz-sdk-checksum-algorithm") {
        Some(name) => Requested::computed(name).map(Some),
        None => Ok(None),
    }
}

/// A running checksum, shared by the stream that feeds it and the writer that reads it.
#[derive(Clone)]
pub struct Running {
    algorithm: Algorithm,
    hasher: Arc<Mutex<Option<s3s::checksum::ChecksumHasher>>>,
}

impl Running {
    /// A new checksum of `algorithm`.
    pub fn new(algorithm: Algorithm) -> Running {
        Running { algorithm, hasher: Arc::new(Mutex::new(Some(algorithm.hasher()))) }
    }

    /// Adds data.
    pub fn update(&self, data: &[u8]) {
        if let Ok(mut guard) = self.hasher.lock()
            && let Some(hasher) = guard.as_mut()
        {
            hasher.update(data);
        }
    }

    /// The base64 digest of everything added.
    pub fn finish(&self) -> String {
        let hasher = self.hasher.lock().ok().and_then(|mut g| g.take()).unwrap_or_else(|| self.algorithm.hasher());
        let sum = hasher.finalize();
        match self.algorithm {
            Algorithm::Crc32 => sum.checksum_crc32,
            Algorithm::Crc32c => sum.checksum_crc32c,
            Algorithm::Crc64Nvme => sum.checksum_crc64nvme,
            Algorithm::Sha1 => sum.checksum_sha1,
            Algorithm::Sha256 => sum.checksum_sha256,
        }
        .unwrap_or_default()
    }
}

/// The checksum of a multipart object: the algorithm over the concatenated binary part
/// checksums (`None` if a part's value is not base64).
pub fn composite(algorithm: Algorithm, parts: &[String]) -> Option<Stored> {
    use base64::Engine;
    let running = Running::new(algorithm);
    for part in parts {
        running.update(&base64::engine::general_purpose::STANDARD.decode(part).ok()?);
    }
    Some(Stored { algorithm, value: running.finish(), parts: Some(parts.len() as u32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (http::HeaderName::from_static(k), v.parse().unwrap())).collect()
    }

    #[test]
    fn known_digests_of_every_algorithm() {
        // "hello" under each algorithm, as the AWS CLI computes them.
        for (algorithm, expected) in [
            (Algorithm::Crc32, "NhCmhg=="),
            (Algorithm::Crc32c, "mnG7TA=="),
            (Algorithm::Crc64Nvme, "M3eFcAZSQlc="),
            (Algorithm::Sha1, "qvTGHdzF6KLavt4PO0gs2a6pQ00="),
            (Algorithm::Sha256, "LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ="),
        ] {
            let running = Running::new(algorithm);
            running.update(b"hel");
            running.update(b"lo");
            assert_eq!(running.finish(), expected, "{algorithm:?}");
            assert_eq!(Algorithm::named(&algorithm.name().to_lowercase()), Some(algorithm));
        }
    }

    #[test]
    fn requests_name_one_checksum_by_header_trailer_or_algorithm() {
        assert_eq!(requested(&HeaderMap::new()), Ok(None));
        let by_header = requested(&headers(&[("x-amz-checksum-crc32c", "mnG7TA==")])).unwrap();
        assert_eq!(by_header, Some(Requested { algorithm: Algorithm::Crc32c, value: Some("mnG7TA==".into()) }));
        let by_trailer = requested(&headers(&[("x-amz-trailer", "x-amz-checksum-crc64nvme")])).unwrap();
        assert_eq!(by_trailer, Some(Requested { algorithm: Algorithm::Crc64Nvme, value: None }));
        let by_name = requested(&headers(&[("x-amz-sdk-checksum-algorithm", "SHA256")])).unwrap();
        assert_eq!(by_name, Some(Requested { algorithm: Algorithm::Sha256, value: None }));
        assert!(requested(&headers(&[("x-amz-checksum-crc32", "a"), ("x-amz-checksum-sha1", "b")])).is_err());
        assert!(requested(&headers(&[("x-amz-sdk-checksum-algorithm", "MD4")])).is_err());
        assert!(requested(&headers(&[("x-amz-trailer", "x-amz-checksum-md4")])).is_err());
    }

    #[test]
    fn composite_checksums_cover_the_part_checksums() {
        let parts = ["NhCmhg==".to_owned(), "NhCmhg==".to_owned()];
        let stored = composite(Algorithm::Crc32, &parts).unwrap();
        let direct = Running::new(Algorithm::Crc32);
        direct.update(&[0x36, 0x10, 0xa6, 0x86, 0x36, 0x10, 0xa6, 0x86]);
        assert_eq!(stored.value, direct.finish());
        assert_eq!(stored.shown(), format!("{}-2", stored.value));
        assert!(composite(Algorithm::Crc32, &["not base64!".into()]).is_none());
    }
}
