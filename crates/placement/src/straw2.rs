//! Straw2 selection: each candidate draws `log2(u) / weight` for a hash-derived `u` in
//! (0, 1]; the largest draw wins. The winner is chosen with probability proportional to
//! its weight, and changing one candidate's weight only moves data to or from it.

use crate::hash::hash3;

/// Fractional bits of the fixed-point logarithm.
const LOG_FRACTION_BITS: u32 = 44;

/// `log2(v)` for `v` in `1..=65536` as an unsigned fixed-point number with 44 fractional
/// bits, computed with integers only so that every machine gets the same bits.
pub fn log2_fixed(v: u32) -> u64 {
    assert!((1..=65536).contains(&v), "log2_fixed input {v} out of range");
    let integer = 31 - v.leading_zeros();
    // y = v / 2^integer in [1, 2), as Q62.
    let mut y: u128 = (u128::from(v) << 62) >> integer;
    let mut result = u64::from(integer) << LOG_FRACTION_BITS;
    for bit in (0..LOG_FRACTION_BITS).rev() {
        y = (y * y) >> 62;
        if y >= 2u128 << 62 {
            y >>= 1;
            result |= 1 << bit;
        }
    }
    result
}

/// The straw2 draw of one candidate: a non-positive number, larger wins; a zero weight
/// never wins.
pub fn draw(x: u32, item: i32, r: u32, weight_16_16: u32) -> i64 {
    if weight_16_16 == 0 {
        return i64::MIN;
    }
    let u = (hash3(x, item as u32, r) & 0xffff) + 1;
    // ln((u)/65536) scaled: log2(u) - 16, in Q44; always <= 0.
    let ln = log2_fixed(u) as i64 - (16i64 << LOG_FRACTION_BITS);
    ln / i64::from(weight_16_16)
}

/// Picks among `(item, weight)` candidates for input `x` and attempt `r`; `None` if every
/// weight is zero or the list is empty. Ties go to the earlier candidate.
pub fn choose(x: u32, r: u32, candidates: impl IntoIterator<Item = (i32, u32)>) -> Option<i32> {
    let mut best: Option<(i64, i32)> = None;
    for (item, weight) in candidates {
        if weight == 0 {
            continue;
        }
        let d = draw(x, item, r, weight);
        if best.is_none_or(|(best_draw, _)| d > best_draw) {
            best = Some((d, item));
        }
    }
    best.map(|(_, item)| item)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_matches_floating_point() {
        for v in [1u32, 2, 3, 10, 1000, 40000, 65535, 65536] {
            let got = log2_fixed(v) as f64 / (1u64 << LOG_FRACTION_BITS) as f64;
            assert!((got - (v as f64).log2()).abs() < 1e-9, "log2({v}) = {got}");
        }
    }

    #[test]
    fn selection_is_proportional_to_weight() {
        let mut counts = [0u32; 3];
        let weights = [0x10000u32, 0x20000, 0x10000];
        for x in 0..40_000 {
            let pick = choose(x, 0, (0..3).map(|i| (i, weights[i as usize]))).unwrap();
            counts[pick as usize] += 1;
        }
        let share = counts[1] as f64 / 40_000.0;
        assert!((share - 0.5).abs() < 0.02, "double weight got {share} of picks: {counts:?}");
    }

    #[test]
    fn zero_weight_never_wins() {
        for x in 0..1000 {
            assert_eq!(choose(x, 0, [(0, 0), (1, 1)]), Some(1));
        }
        assert_eq!(choose(1, 0, [(0, 0)]), None);
    }
}
