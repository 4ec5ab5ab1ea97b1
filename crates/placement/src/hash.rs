//! Bob Jenkins' 32-bit hashes (lookup2, "rjenkins" in Ceph): fast, well mixed and fixed
//! forever, because every client and OSD must compute the same placement.

const GOLDEN_RATIO: u32 = 0x9e37_79b9;

/// Jenkins' reversible 96-bit mix.
fn mix(mut a: u32, mut b: u32, mut c: u32) -> (u32, u32, u32) {
    a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 13);
    b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 8);
    c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 13);
    a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 12);
    b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 16);
    c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 5);
    a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 3);
    b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 10);
    c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 15);
    (a, b, c)
}

fn le_word(bytes: &[u8]) -> u32 {
    bytes.iter().enumerate().fold(0u32, |acc, (i, &byte)| acc | (u32::from(byte) << (8 * i)))
}

/// The lookup2 hash of a byte string (seed 0), as Ceph's `ceph_str_hash_rjenkins`.
pub fn str_hash(key: &[u8]) -> u32 {
    let (mut a, mut b, mut c) = (GOLDEN_RATIO, GOLDEN_RATIO, 0u32);
    let mut blocks = key.chunks_exact(12);
    for block in &mut blocks {
        a = a.wrapping_add(le_word(&block[0..4]));
        b = b.wrapping_add(le_word(&block[4..8]));
        c = c.wrapping_add(le_word(&block[8..12]));
        (a, b, c) = mix(a, b, c);
    }
    let tail = blocks.remainder();
    c = c.wrapping_add(key.len() as u32);
    // The tail's bytes 8..11 go into c above its low byte, which holds the length.
    if tail.len() > 8 {
        c = c.wrapping_add(le_word(&tail[8..]) << 8);
    }
    if tail.len() > 4 {
        b = b.wrapping_add(le_word(&tail[4..tail.len().min(8)]));
    }
    if !tail.is_empty() {
        a = a.wrapping_add(le_word(&tail[..tail.len().min(4)]));
    }
    mix(a, b, c).2
}

/// Hash of two 32-bit words.
pub fn hash2(x: u32, y: u32) -> u32 {
    mix(GOLDEN_RATIO ^ x, GOLDEN_RATIO.wrapping_add(y), 1_315_423_911).2
}

/// Hash of three 32-bit words: the straw2 draw input `(x, item, r)`.
pub fn hash3(x: u32, y: u32, z: u32) -> u32 {
    let (a, b, c) = mix(GOLDEN_RATIO ^ x, GOLDEN_RATIO.wrapping_add(y), 1_315_423_911 ^ z);
    mix(a, b ^ 0x2545_f491, c).2
}

#[cfg(test)]
mod tests {
    use super::*;

    /// These values define placement; if they change, every object moves.
    #[test]
    fn golden_values_never_change() {
        let got: Vec<u32> = ["", "a", "foo", "hello world!", "exactly twelve", "namespace\x1fobject-name-1"]
            .iter()
            .map(|s| str_hash(s.as_bytes()))
            .collect();
        assert_eq!(got, GOLDEN_STR, "str_hash changed: {got:x?}");
        assert_eq!([hash2(1, 2), hash3(1, 2, 3)], GOLDEN_INT, "{:x?}", [hash2(1, 2), hash3(1, 2, 3)]);
    }

    const GOLDEN_STR: [u32; 6] = [0xbd49d10d, 0x29eec818, 0x7fc1f406, 0x1eccb293, 0x3f56a950, 0x0fd4630c];
    const GOLDEN_INT: [u32; 2] = [0x645e5a70, 0x5b78c287];

    #[test]
    fn every_tail_length_matters() {
        let key = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let hashes: std::collections::BTreeSet<u32> = (0..key.len()).map(|n| str_hash(&key[..n])).collect();
        assert_eq!(hashes.len(), key.len());
    }
}
