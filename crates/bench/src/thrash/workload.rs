//! What the thrasher writes: one bucket, and each key's payload for a sequence number
//! (so a read can tell which write it sees).

/// The bucket the S3 part of the thrasher writes.
pub(super) const BUCKET: &str = "thrash";

/// The body of write `seq` of `key`: it names both, in one of five sizes.
pub(super) fn payload(key: &str, seq: u64) -> bytes::Bytes {
    bytes::Bytes::from(format!("{key} {seq} ").repeat(1 + (seq % 5) as usize * 40))
}
