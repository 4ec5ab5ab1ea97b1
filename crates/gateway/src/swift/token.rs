//! Swift auth tokens that any gateway of the cluster can check without shared state:
//! `AUTH_tk` ‖ base64url(payload) ‖ `.` ‖ base64url(HMAC-SHA256(cluster key, payload)),
//! payload = version (1) ‖ expiry in seconds since the epoch (u64 BE) ‖ the subuser id.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{KeyInit, Mac};
use sha2::Sha256;

/// What every token starts with (as RGW's do).
const PREFIX: &str = "AUTH_tk";
/// The payload's version byte.
const VERSION: u8 = 1;

/// Why a token is refused (each is 401 to the client).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not a token this cluster made, or altered.
    Invalid,
    /// Past its expiry.
    Expired,
}

fn mac(key: &[u8]) -> hmac::Hmac<Sha256> {
    hmac::Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length")
}

/// A token for `subuser` valid until `expires` (seconds since the epoch), signed with `key`.
pub fn issue(key: &[u8], subuser: &str, expires: u64) -> String {
    let mut payload = vec![VERSION];
    payload.extend_from_slice(&expires.to_be_bytes());
    payload.extend_from_slice(subuser.as_bytes());
    let mut mac = mac(key);
    mac.update(&payload);
    let signature = mac.finalize().into_bytes();
    format!("{PREFIX}{}.{}", URL_SAFE_NO_PAD.encode(&payload), URL_SAFE_NO_PAD.encode(signature))
}

/// The subuser a token names and its expiry, if `key` signed it and it is not expired at
/// `now` (seconds since the epoch).
pub fn verify(key: &[u8], token: &str, now: u64) -> Result<(String, u64), Refused> {
    let (payload, signature) = token.strip_prefix(PREFIX).and_then(|t| t.split_once('.')).ok_or(Refused::Invalid)?;
    let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| Refused::Invalid)?;
    let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| Refused::Invalid)?;
    let mut mac = mac(key);
    mac.update(&payload);
    mac.verify_slice(&signature).map_err(|_| Refused::Invalid)?;
    let (&version, rest) = payload.split_first().ok_or(Refused::Invalid)?;
    if version != VERSION || rest.len() < 8 {
        return Err(Refused::Invalid);
    }
    let (expires, subuser) = rest.split_at(8);
    let expires = u64::from_be_bytes(expires.try_into().map_err(|_| Refused::Invalid)?);
    let subuser = String::from_utf8(subuser.to_vec()).map_err(|_| Refused::Invalid)?;
    if now >= expires {
        return Err(Refused::Expired);
    }
    Ok((subuser, expires))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: [u8; 32] = [7; 32];

    #[test]
    fn tokens_have_golden_bytes() {
        // The same as Python's hmac and base64 modules give.
        let token = issue(&KEY, "tester:swift", 1_800_000_000);
        assert_eq!(token, "AUTH_tkAQAAAABrSdIAdGVzdGVyOnN3aWZ0.fWzvYl91V5JWCEd8LV53PqB44xyTkHvu4h8qrZOcRv4");
        assert_eq!(verify(&KEY, &token, 1_799_999_999), Ok(("tester:swift".into(), 1_800_000_000)));
    }

    #[test]
    fn expired_tampered_and_foreign_tokens_are_refused() {
        let token = issue(&KEY, "tester:swift", 100);
        assert_eq!(verify(&KEY, &token, 100), Err(Refused::Expired));
        assert_eq!(verify(&[8; 32], &token, 10), Err(Refused::Invalid));
        // Another subuser's name under the same signature.
        let forged = token.replacen(&URL_SAFE_NO_PAD.encode(b"tester"), &URL_SAFE_NO_PAD.encode(b"attack"), 1);
        assert_ne!(forged, token);
        assert_eq!(verify(&KEY, &forged, 10), Err(Refused::Invalid));
        for bad in ["", "AUTH_tk", "AUTH_tk.", "AUTH_tkAQ.AA", "tk", "AUTH_tk!!!.???"] {
            assert_eq!(verify(&KEY, bad, 10), Err(Refused::Invalid), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn any_text_is_refused_and_a_token_names_what_was_signed(text in ".{0,200}", subuser in "[a-z]{1,8}:[a-z]{1,8}") {
            prop_assert!(verify(&KEY, &text, 0).is_err());
            let prefixed = format!("{PREFIX}{text}");
            prop_assert!(verify(&KEY, &prefixed, 0).is_err());
            let token = issue(&KEY, &subuser, u64::MAX);
            prop_assert_eq!(verify(&KEY, &token, 0), Ok((subuser, u64::MAX)));
            // Any one character changed breaks it.
            let mut bytes = token.into_bytes();
            let at = bytes.len() - 1 - (text.len() % 20);
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            prop_assert!(verify(&KEY, &String::from_utf8(bytes).unwrap(), 0).is_err());
        }
    }
}
