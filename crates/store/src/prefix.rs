//! Key ranges of the key-value store by prefix.

/// The smallest key greater than every key starting with `prefix` (prefix must not be all 0xff).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last != 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0xff; prefix.len() + 1]
}
