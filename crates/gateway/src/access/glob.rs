//! The wildcard matching of the policy language: `*` matches any run of characters, `?`
//! exactly one. Linear in practice: on a mismatch the last `*` takes one more character,
//! never more than one star at a time (no exponential backtracking on hostile patterns).

/// Whether `text` matches `pattern`; letters compare case-insensitively when `fold_case`.
pub fn matches(pattern: &str, text: &str, fold_case: bool) -> bool {
    // ASCII (nearly every ARN, action and key) is matched byte by byte without allocating.
    if pattern.is_ascii() && text.is_ascii() {
        let same = |p: u8, t: u8| p == b'?' || p == t || (fold_case && p.eq_ignore_ascii_case(&t));
        return matches_with(pattern.as_bytes(), text.as_bytes(), b'*', same);
    }
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let same = |p: char, t: char| p == '?' || p == t || (fold_case && p.to_lowercase().eq(t.to_lowercase()));
    matches_with(&pattern, &text, '*', same)
}

fn matches_with<T: Copy + PartialEq>(pattern: &[T], text: &[T], star: T, same: impl Fn(T, T) -> bool) -> bool {
    let (mut p, mut t) = (0, 0);
    // The position after the last star seen, and the text position it was matched against.
    let mut last_star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == star {
            last_star = Some((p + 1, t));
            p += 1;
        } else if p < pattern.len() && same(pattern[p], text[t]) {
            p += 1;
            t += 1;
        } else if let Some((after_star, matched)) = last_star {
            p = after_star;
            t = matched + 1;
            last_star = Some((after_star, matched + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == star)
}

/// Whether `s` holds a wildcard.
pub fn has_wildcard(s: &str) -> bool {
    s.contains(['*', '?'])
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn stars_and_question_marks_match_as_aws_documents() {
        for (pattern, text, expected) in [
            ("*", "", true),
            ("*", "anything/at/all", true),
            ("arn:aws:s3:::b/*", "arn:aws:s3:::b/k", true),
            ("arn:aws:s3:::b/*", "arn:aws:s3:::b", false),
            ("arn:aws:s3:::b/*", "arn:aws:s3:::bb/k", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*.jpg", "x/y.jpg", true),
            ("*.jpg", "x/y.jpeg", false),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("home/${x}", "home/${x}", true),
            ("", "", true),
            ("", "a", false),
        ] {
            assert_eq!(matches(pattern, text, false), expected, "{pattern} vs {text}");
        }
        assert!(matches("s3:get*", "s3:GetObject", true));
        assert!(matches("é?/*", "éa/ü", false), "one character, not one byte");
        assert!(!matches("é?/*", "éaa/ü", false));
        assert!(!matches("s3:get*", "s3:GetObject", false));
    }

    #[test]
    fn a_hostile_pattern_is_answered_quickly() {
        let pattern = "a*".repeat(200) + "b";
        let text = "a".repeat(5000);
        assert!(!matches(&pattern, &text, false));
    }
}
