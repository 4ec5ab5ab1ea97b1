//! Versioned binary encoding for everything that crosses a disk or a network.
//!
//! A value is encoded as one version byte followed by its postcard encoding. postcard is
//! compact but not self-describing, so a change to an encoded struct must bump its
//! `VERSION` and keep the old shape as a module that decodes into the new one.

use crate::error::{Result, err};
use serde::{Serialize, de::DeserializeOwned};

/// A type with a stable, versioned binary encoding.
pub trait Versioned: Serialize + DeserializeOwned {
    /// A short name for error messages.
    const NAME: &'static str;
    /// The format version written by this build.
    const VERSION: u8;

    /// Encodes `self` as version byte + postcard.
    fn encode(&self) -> Vec<u8> {
        // One buffer, version byte first; postcard only fails on writer errors, and a Vec
        // writer has none.
        postcard::to_extend(self, vec![Self::VERSION]).expect("postcard encoding into a Vec cannot fail")
    }

    /// The length [`Versioned::encode`] would produce, computed without encoding.
    fn encoded_len(&self) -> usize {
        let body =
            postcard::serialize_with_flavor::<Self, postcard::ser_flavors::Size, usize>(self, Default::default());
        1 + body.expect("measuring a postcard encoding cannot fail")
    }

    /// Decodes the body of an older version into the current shape; `None` when the
    /// version is unknown. Types that changed shape keep their old shapes as modules and
    /// convert here.
    fn decode_older(version: u8, body: &[u8]) -> Option<Result<Self>> {
        let _ = (version, body);
        None
    }

    /// Decodes bytes written by [`Versioned::encode`] (of this or an older version);
    /// never panics on bad input.
    fn decode(bytes: &[u8]) -> Result<Self> {
        let (&version, body) =
            bytes.split_first().ok_or_else(|| err::invalid(format!("{}: empty encoding", Self::NAME)))?;
        if version != Self::VERSION {
            return Self::decode_older(version, body).unwrap_or_else(|| {
                Err(err::invalid(format!(
                    "{}: unsupported encoding version {version} (this build reads {})",
                    Self::NAME,
                    Self::VERSION
                )))
            });
        }
        decode_body(Self::NAME, body)
    }
}

/// Decodes one postcard body that must use every byte.
pub fn decode_body<T: DeserializeOwned>(name: &str, body: &[u8]) -> Result<T> {
    let (value, rest) =
        postcard::take_from_bytes(body).map_err(|e| err::invalid(format!("{name}: malformed encoding: {e}")))?;
    if !rest.is_empty() {
        return Err(err::invalid(format!("{name}: {} trailing bytes", rest.len())));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Sample {
        a: u64,
        b: String,
    }

    impl Versioned for Sample {
        const NAME: &'static str = "sample";
        const VERSION: u8 = 1;
    }

    #[test]
    fn golden_bytes() {
        let v = Sample { a: 300, b: "hi".into() };
        // version 1, varint 300 = ac 02, string length 2, "hi"
        assert_eq!(v.encode(), vec![1, 0xac, 0x02, 2, b'h', b'i']);
        assert_eq!(Sample::decode(&v.encode()).unwrap(), v);
        assert_eq!(v.encoded_len(), v.encode().len());
    }

    #[test]
    fn rejects_bad_input() {
        assert!(Sample::decode(&[]).is_err());
        assert!(Sample::decode(&[2, 0, 0]).unwrap_err().message.contains("version 2"));
        assert!(Sample::decode(&[1, 0xff]).is_err());
        assert!(Sample::decode(&[1, 1, 0, 9]).unwrap_err().message.contains("trailing"));
    }
}
