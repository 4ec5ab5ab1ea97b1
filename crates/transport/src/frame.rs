//! Framing for byte streams, without IO: each frame is
//! `magic "SHF1" ‖ payload length (u32 BE) ‖ crc32c of the payload (u32 BE) ‖ payload`.
//! The decoder takes bytes as they arrive and yields whole, checked payloads; a bad
//! magic, an oversized length or a checksum mismatch is an error, never a panic.

use bytes::{Bytes, BytesMut};
use shoal_types::{Result, err};

/// Marks the start of every frame (and the frame format's version).
pub const MAGIC: [u8; 4] = *b"SHF1";
/// Bytes before the payload.
pub const HEADER_LEN: usize = 12;

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
}

/// Bytes a decoder asks the socket for at least, when it has no frame length to go by.
const READ_CHUNK: usize = 64 * 1024;

impl Decoder {
    /// A decoder refusing payloads larger than `max_payload` bytes.
    pub fn new(max_payload: usize) -> Self {
        Decoder { buffer: BytesMut::new(), max_payload }
    }

    /// Appends bytes read from the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The buffer to read the stream into (append only), with room for the rest of the
    /// frame in progress, so a large payload arrives in one allocation and is never moved.
    pub fn read_buffer(&mut self) -> &mut BytesMut {
        let wanted = match self.frame_len() {
            Some(len) if len <= self.max_payload => (HEADER_LEN + len).saturating_sub(self.buffer.len()),
            _ => 0,
        };
        self.buffer.reserve(wanted.max(READ_CHUNK));
        &mut self.buffer
    }

    /// The payload length in the buffered header, once the header's first 8 bytes are in.
    fn frame_len(&self) -> Option<usize> {
        let word: [u8; 4] = self.buffer.get(4..8)?.try_into().ok()?;
        Some(u32::from_be_bytes(word) as usize)
    }

    /// The next complete payload, `None` if more bytes are needed. The payload shares the
    /// decoder's buffer: nothing is copied.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>> {
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

    proptest! {
        #[test]
        fn frames_survive_any_split(payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..6),
                                    cut in 1usize..50) {
            let stream: Vec<u8> = payloads.iter().flat_map(|p| encode(p)).collect();
            let mut d = Decoder::new(1000);
            let mut got = Vec::new();
            for piece in stream.chunks(cut) {
                d.feed(piece);
                while let Some(p) = d.next_frame().unwrap() {
                    got.push(p.to_vec());
                }
            }
            prop_assert_eq!(got, payloads);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut d = Decoder::new(64);
            d.feed(&bytes);
            for _ in 0..4 {
                if !matches!(d.next_frame(), Ok(Some(_))) {
                    break;
                }
            }
        }
    }
}
