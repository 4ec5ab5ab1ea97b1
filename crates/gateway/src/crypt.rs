//! Server-side encryption of object data (SSE-S3, SSE-KMS, SSE-C), with AES-256-GCM from
//! aws-lc-rs.
//!
//! Each write gets a fresh random 256-bit *data key*. The data key is stored with the
//! object only wrapped (AES-256-GCM) by a *master key* from the gateway's key file (SSE-S3,
//! SSE-KMS) or by the customer's key (SSE-C, which is never stored: a wrong key fails to
//! unwrap). Data is sealed in blocks of [`BLOCK`] plaintext bytes, each stored as its
//! ciphertext and a 16-byte tag, so a range read opens only the blocks it covers. A block's
//! nonce is the stored *segment*'s random 64-bit salt followed by the block's index in the
//! segment: a segment is the inline data, the tail of a single write, or one upload of a
//! multipart part (parts of one upload share the data key, and a part uploaded twice gets a
//! new salt, so no nonce repeats under one key).

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::{Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Plaintext bytes per sealed block.
pub const BLOCK: u64 = 64 << 10;
/// Bytes of the tag after each sealed block.
pub const TAG: u64 = 16;
/// Bytes of a key.
pub const KEY_LEN: usize = 32;
/// What a data key's wrapping authenticates with it.
const WRAP_AAD: &[u8] = b"shoal data key v1";

/// How an object's data key is protected, as S3 names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// SSE-S3 (`AES256`): wrapped by the gateway's SSE-S3 master key of this id.
    S3 {
        /// The master key's id in the key file.
        key_id: String,
    },
    /// SSE-KMS (`aws:kms`): wrapped by the key file's key of this id.
    Kms {
        /// The key id the client named (or the default).
        key_id: String,
    },
    /// SSE-C: wrapped by the customer's key.
    Customer,
}

/// The encryption of a stored object, kept in its metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// Who holds the key that unwraps the data key.
    pub kind: Kind,
    /// The data key sealed by that key: nonce, ciphertext, tag.
    pub wrapped: Vec<u8>,
    /// The nonce salt of each stored segment: the inline data's, or each tail segment's
    /// in order.
    pub salts: Vec<u64>,
}

/// A new object's data key and its record.
#[derive(Clone, Debug)]
pub struct Protection {
    /// The data key.
    pub key: Key,
    /// Its wrapping, stored with the object (salts added as segments are written).
    pub sealed: Sealed,
}

/// A bucket's default encryption (PutBucketEncryption), applied to writes that ask for none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultEncryption {
    /// `AES256`, `aws:kms` or `aws:kms:dsse`.
    pub algorithm: String,
    /// The KMS key id (with `aws:kms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// BucketKeyEnabled, kept to be shown (every object has its own data key regardless).
    #[serde(default)]
    pub bucket_key_enabled: bool,
}

/// Why encryption or decryption failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CryptError {
    /// The key that should unwrap the data key does not (a wrong customer key).
    WrongKey,
    /// No key of this id in the key file.
    UnknownKey(String),
    /// Stored ciphertext failed authentication, or is shorter than its metadata says.
    Corrupt(String),
    /// The key file is unusable.
    KeyFile(String),
}

impl std::fmt::Display for CryptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CryptError::WrongKey => write!(f, "the key does not match the object's"),
            CryptError::UnknownKey(id) => write!(f, "no key '{id}' in the key file"),
            CryptError::Corrupt(what) => write!(f, "encrypted data is corrupt: {what}"),
            CryptError::KeyFile(what) => write!(f, "key file: {what}"),
        }
    }
}

/// A key: a master key, a customer key or a data key.
#[derive(Clone)]
pub struct Key(Arc<LessSafeKey>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// The key of these 32 bytes.
    pub fn new(bytes: &[u8; KEY_LEN]) -> Key {
        // AES-256 takes any 32 bytes: construction cannot fail.
        let unbound = UnboundKey::new(&AES_256_GCM, bytes).expect("AES-256 accepts a 32-byte key");
        Key(Arc::new(LessSafeKey::new(unbound)))
    }

    fn seal(&self, nonce: [u8; NONCE_LEN], aad: &[u8], in_out: &mut [u8]) -> [u8; TAG as usize] {
        let tag = self
            .0
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), in_out)
            .expect("AES-GCM seals any block under 64 GiB");
        tag.as_ref().try_into().expect("AES-GCM tags are 16 bytes")
    }

    fn open<'a>(&self, nonce: [u8; NONCE_LEN], aad: &[u8], in_out: &'a mut [u8]) -> Option<&'a mut [u8]> {
        self.0.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(aad), in_out).ok()
    }

    /// A fresh data key and `self`'s wrapping of it, for an object of `kind`.
    pub fn new_data_key(&self, kind: Kind) -> Protection {
        let data_key: [u8; KEY_LEN] = random_bytes();
        let nonce: [u8; NONCE_LEN] = random_bytes();
        let mut wrapped = data_key.to_vec();
        let tag = self.seal(nonce, WRAP_AAD, &mut wrapped);
        let wrapped = [&nonce[..], &wrapped, &tag].concat();
        Protection { key: Key::new(&data_key), sealed: Sealed { kind, wrapped, salts: Vec::new() } }
    }

    /// The data key of `sealed`, if `self` wrapped it.
    pub fn unwrap_data_key(&self, sealed: &Sealed) -> Result<Key, CryptError> {
        if sealed.wrapped.len() != NONCE_LEN + KEY_LEN + TAG as usize {
            return Err(CryptError::Corrupt("wrapped data key of the wrong length".into()));
        }
        let (nonce, sealed_key) = sealed.wrapped.split_at(NONCE_LEN);
        let mut in_out = sealed_key.to_vec();
        let opened = self.open(nonce.try_into().expect("split at the nonce length"), WRAP_AAD, &mut in_out);
        let bytes: &[u8; KEY_LEN] = opened.and_then(|k| (&*k).try_into().ok()).ok_or(CryptError::WrongKey)?;
        Ok(Key::new(bytes))
    }
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    aws_lc_rs::rand::fill(&mut bytes).expect("the system random generator works");
    bytes
}

/// A fresh segment salt.
pub fn new_salt() -> u64 {
    u64::from_le_bytes(random_bytes())
}

fn nonce(salt: u64, block: u64) -> [u8; NONCE_LEN] {
    let mut nonce = [0u8; NONCE_LEN];
    nonce[..8].copy_from_slice(&salt.to_be_bytes());
    // 2^32 blocks of 64 KiB is 256 TiB, far beyond the largest segment.
    nonce[8..].copy_from_slice(&(block as u32).to_be_bytes());
    nonce
}

/// Stored bytes of `plain` bytes of data.
pub fn stored_size(plain: u64) -> u64 {
    plain + TAG * plain.div_ceil(BLOCK)
}

/// Plaintext bytes stored in `stored` bytes (the inverse of [`stored_size`]).
pub fn plain_size(stored: u64) -> u64 {
    let (blocks, rest) = (stored / (BLOCK + TAG), stored % (BLOCK + TAG));
    blocks * BLOCK + rest.saturating_sub(TAG)
}

/// Seals one segment's plaintext as it streams in, in place at the end of the stored
/// bytes: the block being filled is the last [`Sealer::open_len`] bytes, in clear until
/// it is full (or the segment ends).
pub struct Sealer {
    key: Key,
    salt: u64,
    block: u64,
    open: usize,
}

impl Sealer {
    /// Seals a new segment under `key`, with a fresh salt.
    pub fn new(key: Key) -> Sealer {
        Sealer { key, salt: new_salt(), block: 0, open: 0 }
    }

    /// The segment's salt.
    pub fn salt(&self) -> u64 {
        self.salt
    }

    /// Bytes at the end of the stored bytes not sealed yet: they must stay there.
    pub fn open_len(&self) -> usize {
        self.open
    }

    /// Appends `plain` to `stored`, sealing every block it completes.
    pub fn push(&mut self, mut plain: &[u8], stored: &mut BytesMut) {
        while !plain.is_empty() {
            let take = (BLOCK as usize - self.open).min(plain.len());
            stored.extend_from_slice(&plain[..take]);
            self.open += take;
            plain = &plain[take..];
            if self.open == BLOCK as usize {
                self.seal_block(stored);
            }
        }
    }

    /// Seals the last, partial block.
    pub fn finish(&mut self, stored: &mut BytesMut) {
        if self.open > 0 {
            self.seal_block(stored);
        }
    }

    fn seal_block(&mut self, stored: &mut BytesMut) {
        let start = stored.len() - self.open;
        let tag = self.key.seal(nonce(self.salt, self.block), &[], &mut stored[start..]);
        stored.extend_from_slice(&tag);
        self.open = 0;
        self.block += 1;
    }
}

/// Opens stored blocks of one segment, from block `first` on, yielding the plaintext
/// bytes `skip..skip + take` counted from that block's start.
pub struct Opener {
    key: Key,
    salt: u64,
    block: u64,
    skip: u64,
    take: u64,
    pending: BytesMut,
}

impl Opener {
    /// Opens the blocks of the segment with `salt` that hold plaintext bytes `range`
    /// (offsets in the segment); the stored bytes to read are [`Opener::stored_range`].
    pub fn new(key: Key, salt: u64, range: std::ops::Range<u64>) -> Opener {
        let first = range.start / BLOCK;
        Opener {
            key,
            salt,
            block: first,
            skip: range.start - first * BLOCK,
            take: range.end - range.start,
            pending: BytesMut::new(),
        }
    }

    /// The stored bytes (offsets in a segment of `stored` bytes) that hold plaintext `range`.
    pub fn stored_range(range: &std::ops::Range<u64>, stored: u64) -> std::ops::Range<u64> {
        let first = range.start / BLOCK;
        let end = range.end.div_ceil(BLOCK);
        first * (BLOCK + TAG)..(end * (BLOCK + TAG)).min(stored)
    }

    /// Takes stored bytes in (without a copy when nothing is pending and `stored` is the
    /// only handle on its buffer, as a chunk just read is: blocks are opened in place).
    pub fn push(&mut self, stored: Bytes) {
        match self.pending.is_empty() {
            true => self.pending = BytesMut::from(stored),
            false => self.pending.extend_from_slice(&stored),
        }
    }

    /// The next opened plaintext, if a whole block is in (or, with `end`, what is left);
    /// `Ok(None)` when nothing is ready.
    pub fn next_plain(&mut self, end: bool) -> Result<Option<Bytes>, CryptError> {
        while self.take > 0 {
            let whole = (BLOCK + TAG) as usize;
            let size = match self.pending.len() {
                n if n >= whole => whole,
                0 if end => return Err(CryptError::Corrupt("a segment ends early".into())),
                n if end && n > TAG as usize => n,
                _ if end => return Err(CryptError::Corrupt("a block shorter than its tag".into())),
                _ => return Ok(None),
            };
            let mut block = self.pending.split_to(size);
            let plain = self.key.open(nonce(self.salt, self.block), &[], &mut block).map(|p| p.len());
            let plain =
                plain.ok_or_else(|| CryptError::Corrupt(format!("block {} fails authentication", self.block)))?;
            self.block += 1;
            block.truncate(plain);
            let start = self.skip.min(plain as u64) as usize;
            self.skip -= start as u64;
            let mut out = block.split_off(start);
            out.truncate(self.take.min(out.len() as u64) as usize);
            self.take -= out.len() as u64;
            if !out.is_empty() {
                return Ok(Some(out.freeze()));
            }
        }
        Ok(None)
    }
}

/// Master keys by id, loaded from the key file: one `id=base64-of-32-bytes` per line
/// (blank lines and `#` comments skipped), as Ceph's `rgw_crypt_s3_kms_encryption_keys`.
#[derive(Clone, Default)]
pub struct Keyring {
    keys: BTreeMap<String, Key>,
}

impl Keyring {
    /// Parses a key file's text.
    pub fn parse(text: &str) -> Result<Keyring, CryptError> {
        let mut keys = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |what: &str| CryptError::KeyFile(format!("line {}: {what}", n + 1));
            let (id, value) = line.split_once('=').ok_or_else(|| bad("expected id=base64-key"))?;
            let bytes = STANDARD.decode(value.trim()).map_err(|_| bad("the key is not base64"))?;
            let bytes: [u8; KEY_LEN] = bytes.try_into().map_err(|_| bad("the key is not 32 bytes"))?;
            if keys.insert(id.trim().to_owned(), Key::new(&bytes)).is_some() {
                return Err(bad("the id appears twice"));
            }
        }
        Ok(Keyring { keys })
    }

    /// Reads a key file.
    pub fn load(path: &std::path::Path) -> Result<Keyring, CryptError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| CryptError::KeyFile(format!("{}: {e}", path.display())))?;
        Keyring::parse(&text)
    }

    /// The text of a key file with one fresh key of id `id`.
    pub fn generate(id: &str) -> String {
        format!("{id}={}\n", STANDARD.encode(random_bytes::<KEY_LEN>()))
    }

    /// The key of `id`.
    pub fn key(&self, id: &str) -> Result<&Key, CryptError> {
        self.keys.get(id).ok_or_else(|| CryptError::UnknownKey(id.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Key {
        fn random() -> Key {
            Key::new(&random_bytes())
        }
    }

    fn seal_all(key: &Key, plain: &[u8], pieces: usize) -> (u64, Vec<u8>) {
        let mut sealer = Sealer::new(key.clone());
        let mut stored = BytesMut::new();
        for piece in plain.chunks(pieces.max(1)) {
            sealer.push(piece, &mut stored);
        }
        sealer.finish(&mut stored);
        (sealer.salt(), stored.to_vec())
    }

    fn open_range(key: &Key, salt: u64, stored: &[u8], range: std::ops::Range<u64>, feed: usize) -> Vec<u8> {
        let span = Opener::stored_range(&range, stored.len() as u64);
        let mut opener = Opener::new(key.clone(), salt, range);
        let mut out = Vec::new();
        for piece in stored[span.start as usize..span.end as usize].chunks(feed) {
            opener.push(Bytes::copy_from_slice(piece));
            while let Some(p) = opener.next_plain(false).unwrap() {
                out.extend_from_slice(&p);
            }
        }
        while let Some(p) = opener.next_plain(true).unwrap() {
            out.extend_from_slice(&p);
        }
        out
    }

    #[test]
    fn any_range_opens_to_the_plaintext_it_sealed() {
        let key = Key::random();
        let plain: Vec<u8> = (0..(3 * BLOCK + 777)).map(|i| (i * 31 % 251) as u8).collect();
        let (salt, stored) = seal_all(&key, &plain, 10_000);
        assert_eq!(stored.len() as u64, stored_size(plain.len() as u64));
        assert_eq!(plain_size(stored.len() as u64), plain.len() as u64);
        assert!(!stored.windows(64).any(|w| w == &plain[1000..1064]), "plaintext shows through");
        let n = plain.len() as u64;
        for range in [0..n, 0..1, 5..BLOCK, BLOCK - 1..BLOCK + 1, 2 * BLOCK..n, n - 1..n, 100..3 * BLOCK + 100] {
            for feed in [7, 4096, 1 << 20] {
                let got = open_range(&key, salt, &stored, range.clone(), feed);
                assert_eq!(got, &plain[range.start as usize..range.end as usize], "range {range:?} fed by {feed}");
            }
        }
    }

    #[test]
    fn tampering_a_wrong_salt_or_a_truncation_is_detected() {
        let key = Key::random();
        let plain = vec![7u8; (BLOCK + 10) as usize];
        let (salt, mut stored) = seal_all(&key, &plain, 1000);
        let n = plain.len() as u64;
        let mut opener = Opener::new(key.clone(), salt ^ 1, 0..n);
        opener.push(Bytes::copy_from_slice(&stored));
        assert!(matches!(opener.next_plain(true), Err(CryptError::Corrupt(_))));
        let mut opener = Opener::new(key.clone(), salt, 0..n);
        opener.push(Bytes::copy_from_slice(&stored[..(BLOCK + TAG) as usize]));
        assert!(opener.next_plain(true).unwrap().is_some());
        assert!(matches!(opener.next_plain(true), Err(CryptError::Corrupt(_))), "a missing last block");
        stored[3] ^= 0x40;
        let mut opener = Opener::new(key, salt, 0..n);
        opener.push(Bytes::from(stored));
        assert!(matches!(opener.next_plain(true), Err(CryptError::Corrupt(_))));
    }

    #[test]
    fn a_data_key_unwraps_only_with_its_wrapping_key() {
        let (master, other) = (Key::random(), Key::random());
        let Protection { key: data, sealed } = master.new_data_key(Kind::Customer);
        let again = master.unwrap_data_key(&sealed).unwrap();
        let (salt, stored) = seal_all(&data, b"hello", 5);
        assert_eq!(open_range(&again, salt, &stored, 0..5, 3), b"hello");
        assert_eq!(other.unwrap_data_key(&sealed).err(), Some(CryptError::WrongKey));
        let mut short = sealed.clone();
        short.wrapped.pop();
        assert!(matches!(master.unwrap_data_key(&short), Err(CryptError::Corrupt(_))));
    }

    #[test]
    fn sizes_invert_for_every_plaintext_length() {
        for plain in (0..3 * BLOCK + 2).step_by(4099).chain([BLOCK, 2 * BLOCK, BLOCK - 1, 1]) {
            assert_eq!(plain_size(stored_size(plain)), plain);
        }
        assert_eq!(stored_size(0), 0);
        assert_eq!(stored_size(1), 1 + TAG);
    }

    #[test]
    fn key_files_parse_and_name_their_faults() {
        let text = format!("# keys\n\n{}{}", Keyring::generate("a"), Keyring::generate("b"));
        let ring = Keyring::parse(&text).unwrap();
        assert!(ring.key("a").is_ok() && ring.key("b").is_ok());
        assert_eq!(ring.key("c").err(), Some(CryptError::UnknownKey("c".into())));
        for (bad, fault) in [
            ("a", "line 1: expected id=base64-key"),
            ("a=!!", "line 1: the key is not base64"),
            ("a=AAAA", "line 1: the key is not 32 bytes"),
        ] {
            assert_eq!(Keyring::parse(bad).err(), Some(CryptError::KeyFile(fault.into())));
        }
        let twice = format!("{}\n{}", Keyring::generate("a"), Keyring::generate("a"));
        assert_eq!(Keyring::parse(&twice).err(), Some(CryptError::KeyFile("line 3: the id appears twice".into())));
    }
}
