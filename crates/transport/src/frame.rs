//! Framing for byte streams, without IO. The handshake's frames are
//! `magic "SHF1" ‖ payload length (u32 BE) ‖ crc32c of the payload (u32 BE) ‖ payload`;
//! every frame after it is sealed:
//! `magic "SHF2" ‖ length of what follows (u32 BE) ‖ AES-256-GCM ciphertext ‖ tag`, the
//! header as associated data and the frame's number in its direction as the nonce, so a
//! frame that is forged, altered, replayed, reordered or dropped fails to open.
//! The decoder takes bytes as they arrive and yields whole, checked payloads; a bad
//! magic, an oversized length, a checksum mismatch or a frame that fails to open is an
//! error, never a panic.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use bytes::{Bytes, BytesMut};
use shoal_types::{Result, err};

/// Marks the start of every handshake frame (and the frame format's version).
pub const MAGIC: [u8; 4] = *b"SHF1";
/// Bytes before the payload.
pub const HEADER_LEN: usize = 12;
/// Marks the start of every sealed frame.
pub const SEALED_MAGIC: [u8; 4] = *b"SHF2";
/// Bytes before a sealed frame's ciphertext.
pub const SEALED_HEADER_LEN: usize = 8;
/// Bytes of a sealed frame's tag.
pub const TAG_LEN: usize = 16;

/// One direction of a connection's sealing: AES-256-GCM under a session key, each
/// frame's nonce its number.
pub struct Cipher {
    key: LessSafeKey,
    next: u64,
}

impl Cipher {
    /// Seals or opens with `key`, from frame 0.
    pub fn new(key: &[u8; 32]) -> Cipher {
        let unbound = UnboundKey::new(&AES_256_GCM, key).expect("AES-256 accepts a 32-byte key");
        Cipher { key: LessSafeKey::new(unbound), next: 0 }
    }

    fn nonce(&mut self) -> Nonce {
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&self.next.to_be_bytes());
        self.next += 1;
        Nonce::assume_unique_for_key(nonce)
    }
}

/// Appends one sealed frame to `out` whose payload `write_payload` appends in place, then
/// seals it there.
pub fn append_sealed(mut out: Vec<u8>, cipher: &mut Cipher, write_payload: impl FnOnce(Vec<u8>) -> Vec<u8>) -> Vec<u8> {
    let start = out.len();
    out.extend_from_slice(&SEALED_MAGIC);
    out.extend_from_slice(&[0; 4]);
    let mut out = write_payload(out);
    let payload = start + SEALED_HEADER_LEN;
    let len = (out.len() - payload + TAG_LEN) as u32;
    out[start + 4..payload].copy_from_slice(&len.to_be_bytes());
    let (header, body) = out.split_at_mut(payload);
    let nonce = cipher.nonce();
    let tag = cipher
        .key
        .seal_in_place_separate_tag(nonce, Aad::from(&header[start..]), body)
        .expect("AES-GCM seals any frame under 64 GiB");
    out.extend_from_slice(tag.as_ref());
    out
}

/// Encodes one frame.
pub fn encode(payload: &[u8]) -> Vec<u8> {
    append(Vec::with_capacity(HEADER_LEN + payload.len()), |mut out| {
        out.extend_from_slice(payload);
        out
    })
}

/// Appends one frame to `out` whose payload `write_payload` appends in place (so a large
/// message is encoded once, straight behind its header, not copied into a frame).
pub fn append(mut out: Vec<u8>, write_payload: impl FnOnce(Vec<u8>) -> Vec<u8>) -> Vec<u8> {
    let start = out.len();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[0; 8]);
    let mut out = write_payload(out);
    let payload = start + HEADER_LEN;
    let len = (out.len() - payload) as u32;
    let crc = crc32c::crc32c(&out[payload..]);
    out[start + 4..start + 8].copy_from_slice(&len.to_be_bytes());
    out[start + 8..payload].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Accumulates stream bytes and cuts them into checked payloads.
pub struct Decoder {
    buffer: BytesMut,
    max_payload: usize,
    /// Opens sealed frames, once the handshake is done.
    opening: Option<Cipher>,
}

/// Bytes a decoder asks the socket for at least, when it has no frame length to go by.
const READ_CHUNK: usize = 64 * 1024;

impl Decoder {
    /// A decoder refusing payloads larger than `max_payload` bytes.
    pub fn new(max_payload: usize) -> Self {
        Decoder { buffer: BytesMut::new(), max_payload, opening: None }
    }

    /// From now on, takes only sealed frames, opened by `cipher`.
    pub fn open_with(&mut self, cipher: Cipher) {
        self.opening = Some(cipher);
    }

    fn header_len(&self) -> usize {
        if self.opening.is_some() { SEALED_HEADER_LEN } else { HEADER_LEN }
    }

    /// Appends bytes read from the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The buffer to read the stream into (append only), with room for the rest of the
    /// frame in progress, so a large payload arrives in one allocation and is never moved.
    pub fn read_buffer(&mut self) -> &mut BytesMut {
        let wanted = match self.frame_len() {
            Some(len) if len <= self.max_payload + TAG_LEN => {
                (self.header_len() + len).saturating_sub(self.buffer.len())
            }
            _ => 0,
        };
        self.buffer.reserve(wanted.max(READ_CHUNK));
        &mut self.buffer
    }

    /// The payload length in the buffered header, once the header's first 8 bytes are in.
    fn frame_len(&self) -> Option<usize> {
        frame_len(&self.buffer)
    }

    /// The next complete payload, `None` if more bytes are needed. The payload shares the
    /// decoder's buffer: nothing is copied.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>> {
        if let Some(cipher) = self.opening.as_mut() {
            return next_sealed(&mut self.buffer, self.max_payload, cipher);
        }
        if self.buffer.len() < HEADER_LEN {
            return Ok(None);
        }
        if self.buffer[..4] != MAGIC {
            return Err(err::invalid(format!("bad frame magic {:02x?}", &self.buffer[..4])));
        }
        let Some(len) = self.frame_len() else { return Ok(None) };
        if len > self.max_payload {
            return Err(err::too_big(format!("frame of {len} bytes exceeds the limit of {}", self.max_payload)));
        }
        if self.buffer.len() < HEADER_LEN + len {
            return Ok(None);
        }
        let crc = u32::from_be_bytes([self.buffer[8], self.buffer[9], self.buffer[10], self.buffer[11]]);
        let payload = self.buffer.split_to(HEADER_LEN + len).freeze().slice(HEADER_LEN..);
        let actual = crc32c::crc32c(&payload);
        if actual != crc {
            return Err(err::invalid(format!("frame checksum mismatch: header {crc:08x}, payload {actual:08x}")));
        }
        Ok(Some(payload))
    }
}

/// The length field of a buffered header, once its first 8 bytes are in.
fn frame_len(buffer: &[u8]) -> Option<usize> {
    let word: [u8; 4] = buffer.get(4..8)?.try_into().ok()?;
    Some(u32::from_be_bytes(word) as usize)
}

/// The next sealed frame of `buffer`, opened by `cipher`.
fn next_sealed(buffer: &mut BytesMut, max_payload: usize, cipher: &mut Cipher) -> Result<Option<Bytes>> {
    if buffer.len() < SEALED_HEADER_LEN {
        return Ok(None);
    }
    if buffer[..4] != SEALED_MAGIC {
        return Err(err::invalid(format!("bad sealed frame magic {:02x?}", &buffer[..4])));
    }
    let Some(len) = frame_len(buffer) else { return Ok(None) };
    let Some(payload_len) = len.checked_sub(TAG_LEN) else {
        return Err(err::invalid(format!("a sealed frame of {len} bytes is shorter than its tag")));
    };
    if payload_len > max_payload {
        return Err(err::too_big(format!("frame of {payload_len} bytes exceeds the limit of {max_payload}")));
    }
    if buffer.len() < SEALED_HEADER_LEN + len {
        return Ok(None);
    }
    let mut frame = buffer.split_to(SEALED_HEADER_LEN + len);
    let nonce = cipher.nonce();
    let (header, body) = frame.split_at_mut(SEALED_HEADER_LEN);
    if cipher.key.open_in_place(nonce, Aad::from(&*header), body).is_err() {
        return Err(err::invalid("a frame fails authentication (forged, altered, replayed or out of order)"));
    }
    Ok(Some(frame.freeze().slice(SEALED_HEADER_LEN..SEALED_HEADER_LEN + payload_len)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_bytes() {
        assert_eq!(encode(b"hi"), [b'S', b'H', b'F', b'1', 0, 0, 0, 2, 0xf5, 0x9d, 0xd9, 0xc2, b'h', b'i']);
        let two = append(encode(b"hi"), |mut out| {
            out.extend_from_slice(b"hi");
            out
        });
        assert_eq!(two[..14], two[14..], "a frame appended in place is the same frame");
    }

    #[test]
    fn large_payloads_are_not_moved() {
        let payload = vec![7u8; 1 << 20];
        let frame = encode(&payload);
        let mut d = Decoder::new(2 << 20);
        d.feed(&frame[..100]);
        let buffer = d.read_buffer();
        assert!(buffer.capacity() >= frame.len(), "room for the whole frame at once");
        buffer.extend_from_slice(&frame[100..]);
        let at = buffer.as_ptr();
        let got = d.next_frame().unwrap().unwrap();
        assert_eq!(got.as_ptr(), at.wrapping_add(HEADER_LEN), "the payload is the buffer itself");
        assert_eq!(got, payload);
    }

    #[test]
    fn rejects_corruption_and_oversize() {
        let mut frame = encode(b"payload");
        *frame.last_mut().unwrap() ^= 1;
        let mut d = Decoder::new(100);
        d.feed(&frame);
        assert!(d.next_frame().unwrap_err().message.contains("checksum"));
        let mut d = Decoder::new(3);
        d.feed(&encode(b"four"));
        assert_eq!(d.next_frame().unwrap_err().errno, shoal_types::Errno::TooBig);
        let mut d = Decoder::new(100);
        d.feed(b"GET / HTTP/1.1\r\n");
        assert!(d.next_frame().unwrap_err().message.contains("magic"));
    }

    fn sealed(payloads: &[&[u8]], key: &[u8; 32]) -> Vec<u8> {
        let mut cipher = Cipher::new(key);
        payloads.iter().fold(Vec::new(), |out, p| {
            append_sealed(out, &mut cipher, |mut out| {
                out.extend_from_slice(p);
                out
            })
        })
    }

    fn opening(key: &[u8; 32]) -> Decoder {
        let mut d = Decoder::new(1 << 20);
        d.open_with(Cipher::new(key));
        d
    }

    #[test]
    fn sealed_frames_keep_their_golden_header_and_hide_the_payload() {
        let stream = sealed(&[b"secret payload"], &[7; 32]);
        assert_eq!(stream[..8], [b'S', b'H', b'F', b'2', 0, 0, 0, 30]);
        assert!(!stream.windows(6).any(|w| w == b"secret"), "the payload is not in clear");
        let mut d = opening(&[7; 32]);
        d.feed(&stream);
        assert_eq!(d.next_frame().unwrap().unwrap(), &b"secret payload"[..]);
        assert_eq!(d.next_frame().unwrap(), None);
    }

    #[test]
    fn forged_altered_replayed_or_reordered_frames_fail_to_open() {
        let key = [9; 32];
        let stream = sealed(&[b"first", b"second"], &key);
        let first_len = SEALED_HEADER_LEN + 5 + TAG_LEN;
        let (first, second) = stream.split_at(first_len);
        let refused = |bytes: &[u8]| {
            let mut d = opening(&key);
            d.feed(bytes);
            loop {
                match d.next_frame() {
                    Ok(Some(_)) => continue,
                    Ok(None) => return false,
                    Err(_) => return true,
                }
            }
        };
        assert!(!refused(&stream), "the stream as sent opens");
        assert!(refused(&[second, first].concat()), "reordered");
        assert!(refused(&[first, first].concat()), "replayed");
        assert!(refused(second), "the first dropped");
        let mut altered = stream.clone();
        altered[SEALED_HEADER_LEN + 1] ^= 1;
        assert!(refused(&altered), "a ciphertext bit flipped");
        assert!(refused(&sealed(&[b"first"], &[8; 32])), "sealed under another key");
        assert!(refused(&encode(b"plain")), "an unsealed frame after the handshake");
        assert!(refused(&[b'S', b'H', b'F', b'2', 0, 0, 0, 3]), "shorter than a tag");
    }

    /// The payloads `d` decodes from `stream` fed in pieces of `cut` bytes.
    fn decode_in_pieces(mut d: Decoder, stream: &[u8], cut: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        for piece in stream.chunks(cut) {
            d.feed(piece);
            while let Some(p) = d.next_frame().unwrap() {
                got.push(p.to_vec());
            }
        }
        got
    }

    /// Feeds `bytes` to `d` and takes frames until one is not there (no panic is the test).
    fn take_frames(mut d: Decoder, bytes: &[u8]) {
        d.feed(bytes);
        for _ in 0..4 {
            if !matches!(d.next_frame(), Ok(Some(_))) {
                break;
            }
        }
    }

    proptest! {
        #[test]
        fn frames_survive_any_split(payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..6),
                                    cut in 1usize..50) {
            let stream: Vec<u8> = payloads.iter().flat_map(|p| encode(p)).collect();
            prop_assert_eq!(decode_in_pieces(Decoder::new(1000), &stream, cut), payloads.clone());
            let refs: Vec<&[u8]> = payloads.iter().map(|p| p.as_slice()).collect();
            let stream = sealed(&refs, &[3; 32]);
            prop_assert_eq!(decode_in_pieces(opening(&[3; 32]), &stream, cut), payloads);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            take_frames(Decoder::new(64), &bytes);
            take_frames(opening(&[1; 32]), &bytes);
        }
    }
}
