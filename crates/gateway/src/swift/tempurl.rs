//! Temp URLs: a request without a token is let in when `temp_url_sig` is the HMAC, under
//! a temp URL key of the container's owner (`X-Account-Meta-Temp-URL-Key[-2]`) or of the
//! container (`X-Container-Meta-Temp-URL-Key[-2]`), of `<METHOD>\n<temp_url_expires>\n<path>`,
//! and `temp_url_expires` (seconds since the epoch) has not passed. The signature is hex
//! (SHA-1, SHA-256 or SHA-512 by its length) or `<digest>:<base64>`. A HEAD is let in by
//! a signature for GET, HEAD or PUT, as Swift.

use aws_lc_rs::hmac;
use base64::Engine;

/// Why a temp URL was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No `temp_url_sig` or `temp_url_expires`, or malformed ones.
    Malformed,
    /// `temp_url_expires` has passed.
    Expired,
    /// No key signs the request this way.
    BadSignature,
}

/// Checks a temp URL request: `method` and raw `path` as sent, its `query`, the `keys`
/// that may have signed it, and `now` in seconds since the epoch.
pub fn verify(method: &str, path: &str, query: &str, keys: &[&str], now: u64) -> Result<(), Refused> {
    let param = |name: &str| form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v);
    let (Some(signature), Some(expires)) = (param("temp_url_sig"), param("temp_url_expires")) else {
        return Err(Refused::Malformed);
    };
    let expires: u64 = expires.parse().map_err(|_| Refused::Malformed)?;
    if expires <= now {
        return Err(Refused::Expired);
    }
    let (algorithm, tag) = decode_signature(&signature).ok_or(Refused::Malformed)?;
    let methods: &[&str] = if method == "HEAD" { &["HEAD", "GET", "PUT"] } else { &[method] };
    let signed = methods.iter().any(|m| {
        let message = format!("{m}\n{expires}\n{path}");
        keys.iter()
            .any(|key| hmac::verify(&hmac::Key::new(algorithm, key.as_bytes()), message.as_bytes(), &tag).is_ok())
    });
    if signed { Ok(()) } else { Err(Refused::BadSignature) }
}

/// The digest and bytes of a signature: hex, its digest told by its length, or
/// `sha1:`/`sha256:`/`sha512:` and base64 (standard or URL-safe, padded or not).
fn decode_signature(signature: &str) -> Option<(hmac::Algorithm, Vec<u8>)> {
    if let Some((digest, encoded)) = signature.split_once(':') {
        let algorithm = match digest {
            "sha1" => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            "sha256" => hmac::HMAC_SHA256,
            "sha512" => hmac::HMAC_SHA512,
            _ => return None,
        };
        let normalized = encoded.replace('-', "+").replace('_', "/");
        let bytes = base64::engine::general_purpose::STANDARD_NO_PAD.decode(normalized.trim_end_matches('=')).ok()?;
        return Some((algorithm, bytes));
    }
    let algorithm = match signature.len() {
        40 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        64 => hmac::HMAC_SHA256,
        128 => hmac::HMAC_SHA512,
        _ => return None,
    };
    Some((algorithm, crate::sigv4::unhex(signature)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PATH: &str = "/swift/v1/c/o";

    fn query(sig: &str, expires: u64) -> String {
        format!("temp_url_sig={sig}&temp_url_expires={expires}")
    }

    #[test]
    fn signatures_match_pythons_hmac_in_every_digest() {
        // python3: hmac.new(b'secret', b'GET\n1700000000\n/swift/v1/c/o', hashlib.sha1).hexdigest(), ...
        let signatures = [
            "e401b8ab03220045e716a11e14e789df7687be15",
            "fa87ebca5c03f5e31566f6b2c4e7c34d3e8ea5340f5d64ab334ef8a46cdc55ef",
            "sha512:2e9gjr75_8Stz_RRB30ah_OuRW_azdI8ueCLfTGPTW_GbXWrACg1D8IZpt4sjv1nTUof78U2kIX_mHtTziOcWg",
        ];
        for sig in signatures {
            let q = query(sig, 1_700_000_000);
            assert_eq!(verify("GET", PATH, &q, &["other", "secret"], 1_699_999_999), Ok(()), "{sig}");
            assert_eq!(verify("HEAD", PATH, &q, &["secret"], 1_699_999_999), Ok(()), "a GET signature lets HEAD in");
            assert_eq!(verify("PUT", PATH, &q, &["secret"], 1_699_999_999), Err(Refused::BadSignature));
            assert_eq!(verify("GET", "/swift/v1/c/o2", &q, &["secret"], 1_699_999_999), Err(Refused::BadSignature));
            assert_eq!(verify("GET", PATH, &q, &["wrong"], 1_699_999_999), Err(Refused::BadSignature));
            assert_eq!(verify("GET", PATH, &q, &["secret"], 1_700_000_000), Err(Refused::Expired));
        }
        let tampered = query("e401b8ab03220045e716a11e14e789df7687be16", 1_700_000_000);
        assert_eq!(verify("GET", PATH, &tampered, &["secret"], 0), Err(Refused::BadSignature));
        let later = query("e401b8ab03220045e716a11e14e789df7687be15", 1_800_000_000);
        assert_eq!(verify("GET", PATH, &later, &["secret"], 0), Err(Refused::BadSignature), "expiry is signed");
        assert_eq!(verify("GET", PATH, "temp_url_sig=ab", &["secret"], 0), Err(Refused::Malformed));
        assert_eq!(verify("GET", PATH, &query("zz", 5), &["secret"], 0), Err(Refused::Malformed));
    }

    proptest! {
        #[test]
        fn any_query_is_refused_or_checked_without_panicking(q in ".{0,120}", sig in "[0-9a-f:=_sh-]{0,130}") {
            let with_sig = format!("{q}&temp_url_sig={sig}&temp_url_expires=99");
            prop_assert!(verify("GET", PATH, &q, &[], 0).is_err());
            prop_assert!(verify("GET", PATH, &with_sig, &[], 0).is_err(), "no key signs anything");
        }
    }
}
