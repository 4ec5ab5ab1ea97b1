//! Erasure coding for pools that store `k` data shards and `m` parity shards per object.
//!
//! An object's bytes are cut into stripes of `k × stripe_unit` bytes; chunk `i` of every
//! stripe goes to shard `i`, and shards `k..k+m` hold the parity of each stripe. A shard is
//! thus the concatenation of its chunks, and since the code works bytewise, the parity of
//! whole shards is the parity of their stripes laid end to end: a write encodes once for
//! all its stripes. The last stripe is padded with zeros; the object's logical size is kept
//! beside the shards.
//!
//! The code sits behind [`ErasureCoder`]; its one implementation is Reed–Solomon computed
//! with ISA-L (through Debian's `libisal`), on the generator matrix of the
//! `reed-solomon-erasure` crate it replaced, so shards stored before still decode.

mod code;
mod isal;
mod layout;
mod rs;

pub use code::ErasureCoder;
pub use layout::StripeLayout;
pub use rs::ReedSolomon;

use shoal_types::Result;

/// The code for `k + m` shards: Reed–Solomon over GF(2⁸).
pub fn coder(k: u32, m: u32) -> Result<Box<dyn ErasureCoder>> {
    Ok(Box::new(ReedSolomon::new(k as usize, m as usize)?))
}

/// What checking every shard of a stripe set against its parity found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parity {
    /// Parity agrees with the data.
    Consistent,
    /// Exactly this shard disagrees with all the others.
    Bad(usize),
    /// They disagree and no single shard explains it (several are bad, or `m` is 1).
    Unlocated,
}

/// Checks a full set of `k + m` shards (of one length) against their parity and, if they
/// disagree, finds the one shard whose rebuild from the others makes them all agree.
pub fn check_parity(coder: &dyn ErasureCoder, shards: &[Vec<u8>]) -> Result<Parity> {
    // An empty object has no stripe to check (the coder refuses empty shards).
    if shards.iter().all(Vec::is_empty) || coder.verify(shards)? {
        return Ok(Parity::Consistent);
    }
    let mut culprits = Vec::new();
    for suspect in 0..shards.len() {
        let mut slots: Vec<Option<Vec<u8>>> = shards.iter().cloned().map(Some).collect();
        slots[suspect] = None;
        coder.reconstruct(&mut slots)?;
        let rebuilt: Vec<Vec<u8>> = slots.into_iter().flatten().collect();
        if coder.verify(&rebuilt)? {
            culprits.push(suspect);
        }
    }
    Ok(match culprits[..] {
        [one] => Parity::Bad(one),
        _ => Parity::Unlocated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn one_bad_shard_is_found_when_m_is_at_least_two(
            (k, m) in (1u32..6, 1u32..4),
            data in proptest::collection::vec(any::<u8>(), 1..64),
            bad in 0usize..9,
            at in 0usize..64,
            flip in 1u8..=255,
        ) {
            let code = coder(k, m).unwrap();
            let n = (k + m) as usize;
            let mut shards: Vec<Vec<u8>> = (0..n).map(|i| if i < k as usize { data.clone() } else { vec![0; data.len()] }).collect();
            code.encode(&mut shards).unwrap();
            prop_assert_eq!(check_parity(code.as_ref(), &shards).unwrap(), Parity::Consistent);
            let (bad, at) = (bad % n, at % data.len());
            shards[bad][at] ^= flip;
            let expected = if m >= 2 { Parity::Bad(bad) } else { Parity::Unlocated };
            prop_assert_eq!(check_parity(code.as_ref(), &shards).unwrap(), expected);
        }
    }

    #[test]
    fn two_bad_shards_of_a_two_parity_code_are_not_blamed_on_one() {
        let code = coder(4, 2).unwrap();
        let mut shards: Vec<Vec<u8>> = (0..6u8).map(|i| vec![i.wrapping_mul(29); 16]).collect();
        code.encode(&mut shards).unwrap();
        shards[0][3] ^= 1;
        shards[4][7] ^= 1;
        assert_eq!(check_parity(code.as_ref(), &shards).unwrap(), Parity::Unlocated);
    }

    #[test]
    fn an_empty_object_is_consistent() {
        let code = coder(4, 2).unwrap();
        assert_eq!(check_parity(code.as_ref(), &vec![Vec::new(); 6]).unwrap(), Parity::Consistent);
    }
}

#[cfg(test)]
mod golden {
    use super::*;

    /// The parity, in hex, of data shards `i` = `[17 i + j for j in 0..6]` under a `k + m` code.
    fn parity_hex(k: u32, m: u32) -> Vec<String> {
        let code = coder(k, m).unwrap();
        let mut shards: Vec<Vec<u8>> = (0..k + m)
            .map(|i| {
                if i < k { (0..6u8).map(|j| (i as u8).wrapping_mul(17).wrapping_add(j)).collect() } else { vec![0; 6] }
            })
            .collect();
        code.encode(&mut shards).unwrap();
        shards[k as usize..].iter().map(|p| p.iter().map(|b| format!("{b:02x}")).collect()).collect()
    }

    /// Stored parity shards must read back under every later version: the code is
    /// Reed–Solomon over GF(2⁸) with polynomial 0x11D and the systematic matrix made from a
    /// Vandermonde matrix (times the inverse of its top `k` rows). The bytes are those
    /// reed-solomon-erasure 6 wrote, which Shoal used before ISA-L.
    #[test]
    fn parity_has_golden_bytes() {
        assert_eq!(parity_hex(2, 1), ["2227202d2623"]);
        assert_eq!(parity_hex(3, 2), ["333035323734", "44555e6f4051"]);
        assert_eq!(parity_hex(4, 2), ["44055e3f40a1", "550e4f30519a"]);
        assert_eq!(parity_hex(8, 3), ["88e16c9a3cf5", "99147ddb2d67", "aa5cfa931e3c"]);
    }
}
