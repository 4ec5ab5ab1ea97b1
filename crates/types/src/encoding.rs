//! Versioned binary encoding for everything that crosses a disk or a network.
//!
//! A value is encoded as one version byte followed by its postcard encoding. postcard is
//! compact but not self-describing, so a change to an encoded struct must bump its
//! `VERSION` and keep the old shape as a module that decodes into the new one.

use crate::error::{Result, err};
use bytes::Bytes;
use serde::{Serialize, de::DeserializeOwned};
use std::cell::RefCell;

thread_local! {
    /// The buffer [`Versioned::decode_shared`] is decoding on this thread.
    static SOURCE: RefCell<Option<Bytes>> = const { RefCell::new(None) };
}

/// Serde for maps with structured keys, as a sequence of `(key, value)` pairs: JSON (the
/// monitors' Raft log) only takes string keys; postcard writes the same bytes either way.
pub mod map_as_pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    /// Encodes the entries in key order.
    pub fn serialize<S: Serializer, K: Serialize, V: Serialize>(
        map: &BTreeMap<K, V>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(map)
    }

    /// Decodes the pairs; a repeated key keeps its last value.
    pub fn deserialize<'de, D: Deserializer<'de>, K: Deserialize<'de> + Ord, V: Deserialize<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<K, V>, D::Error> {
        Ok(Vec::<(K, V)>::deserialize(deserializer)?.into_iter().collect())
    }
}

/// Serde for large byte fields (object data, shipped transactions): encoded exactly like
/// `Bytes`, and decoded by [`Versioned::decode_shared`] as a slice of the received buffer
/// rather than a copy of it.
pub mod shared_bytes {
    use super::SOURCE;
    use bytes::Bytes;
    use serde::{Deserializer, Serializer};

    /// Encodes like `Bytes` itself.
    pub fn serialize<S: Serializer>(bytes: &Bytes, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(bytes)
    }

    /// Decodes a slice of the buffer being decoded when there is one, else a copy.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Bytes, D::Error> {
        deserializer.deserialize_bytes(Visitor)
    }

    struct Visitor;

    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Bytes;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("bytes")
        }

        fn visit_borrowed_bytes<E>(self, v: &'de [u8]) -> Result<Bytes, E> {
            let within = |source: &Bytes| {
                let range = source.as_ptr_range();
                range.start <= v.as_ptr() && v.as_ptr_range().end <= range.end
            };
            let shared = SOURCE.with(|source| source.borrow().as_ref().filter(|s| within(s)).map(|s| s.slice_ref(v)));
            Ok(shared.unwrap_or_else(|| Bytes::copy_from_slice(v)))
        }

        fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
            Ok(Bytes::copy_from_slice(v))
        }

        fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Bytes, E> {
            Ok(Bytes::from(v))
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Bytes, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(b) = seq.next_element::<u8>()? {
                out.push(b);
            }
            Ok(Bytes::from(out))
        }
    }
}

/// A type with a stable, versioned binary encoding.
pub trait Versioned: Serialize + DeserializeOwned {
    /// A short name for error messages.
    const NAME: &'static str;
    /// The format version written by this build.
    const VERSION: u8;

    /// Encodes `self` as version byte + postcard.
    fn encode(&self) -> Vec<u8> {
        self.encode_after(Vec::new())
    }

    /// Appends the encoding of `self` to `out` (which may hold, say, a frame header): the
    /// same bytes as [`Versioned::encode`], without a second buffer.
    fn encode_after(&self, mut out: Vec<u8>) -> Vec<u8> {
        out.push(Self::VERSION);
        // postcard only fails on writer errors, and a Vec writer has none.
        postcard::to_extend(self, out).expect("postcard encoding into a Vec cannot fail")
    }

    /// Decodes like [`Versioned::decode`], but byte fields marked [`shared_bytes`] come
    /// out as slices of `bytes` instead of copies.
    fn decode_shared(bytes: &Bytes) -> Result<Self> {
        SOURCE.with(|source| *source.borrow_mut() = Some(bytes.clone()));
        let decoded = Self::decode(bytes);
        SOURCE.with(|source| source.borrow_mut().take());
        decoded
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
    struct Carrier {
        #[serde(with = "shared_bytes")]
        data: Bytes,
        plain: Bytes,
    }

    impl Versioned for Carrier {
        const NAME: &'static str = "carrier";
        const VERSION: u8 = 1;
    }

    #[test]
    fn shared_bytes_encode_like_bytes_and_decode_as_slices() {
        let carrier = Carrier { data: Bytes::from_static(b"large data"), plain: Bytes::from_static(b"p") };
        let encoded = Bytes::from(carrier.encode());
        assert_eq!(encoded[..], [1, 10, b'l', b'a', b'r', b'g', b'e', b' ', b'd', b'a', b't', b'a', 1, b'p']);
        let shared = Carrier::decode_shared(&encoded).unwrap();
        assert_eq!(shared, carrier);
        assert_eq!(shared.data.as_ptr(), encoded[2..].as_ptr(), "a slice of the received buffer");
        let copied = Carrier::decode(&encoded).unwrap();
        assert_ne!(copied.data.as_ptr(), encoded[2..].as_ptr(), "plain decoding copies");
        assert_eq!(carrier.encode_after(vec![9, 9])[2..], encoded[..]);
    }

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
