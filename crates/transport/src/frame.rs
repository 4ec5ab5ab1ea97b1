//! Framing for byte streams, without IO: each frame is
//! `magic "SHF1" ‖ payload length (u32 BE) ‖ crc32c of the payload (u32 BE) ‖ payload`.
//! The decoder takes bytes as they arrive and yields whole, checked payloads; a bad
//! magic, an oversized length or a checksum mismatch is an error, never a panic.

use shoal_types::{Result, err};

/// Marks the start of every frame (and the frame format's version).
pub const MAGIC: [u8; 4] = *b"SHF1";
/// Bytes before the payload.
pub const HEADER_LEN: usize = 12;

/// Encodes one frame.
pub fn encode(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Accumulates stream bytes and cuts them into checked payloads.
pub struct Decoder {
    buffer: Vec<u8>,
    max_payload: usize,
}

impl Decoder {
    /// A decoder refusing payloads larger than `max_payload` bytes.
    pub fn new(max_payload: usize) -> Self {
        Decoder { buffer: Vec::new(), max_payload }
    }

    /// Appends bytes read from the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete payload, `None` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>> {
        if self.buffer.len() < HEADER_LEN {
            return Ok(None);
        }
        if self.buffer[..4] != MAGIC {
            return Err(err::invalid(format!("bad frame magic {:02x?}", &self.buffer[..4])));
        }
        let word =
            |i: usize| u32::from_be_bytes([self.buffer[i], self.buffer[i + 1], self.buffer[i + 2], self.buffer[i + 3]]);
        let len = word(4) as usize;
        if len > self.max_payload {
            return Err(err::too_big(format!("frame of {len} bytes exceeds the limit of {}", self.max_payload)));
        }
        if self.buffer.len() < HEADER_LEN + len {
            return Ok(None);
        }
        let crc = word(8);
        let payload: Vec<u8> = self.buffer[HEADER_LEN..HEADER_LEN + len].to_vec();
        self.buffer.drain(..HEADER_LEN + len);
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
                    got.push(p);
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
