//! Glob-style patterns as Redis matches them (KEYS, SCAN MATCH) and as
//! DQ.QUEUES MATCH does: `*` any run of bytes, `?` one byte, `[abc]`,
//! `[^abc]` and `[a-z]` one byte of a set, `\x` the byte x itself.
//! Case-sensitive, on bytes. A pattern that ends inside a set treats what
//! it has read as the set, as Redis does.
//!
//! One crate for the module (DQ.QUEUES MATCH) and the dashboard (which
//! picks `/metrics`' queues from a full listing, and must pick exactly
//! the names the server's MATCH picks for the list page).

#![forbid(unsafe_code)]

/// Whether `name` matches `pattern` in full.
pub fn matches(pattern: &[u8], name: &[u8]) -> bool {
    // Greedy with one backtrack point (the last `*`): linear in practice,
    // and never exponential, unlike the naive recursion.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                p += 1;
                star = Some((p, n));
                continue;
            }
            Some(_) => {
                if let Some(next) = one(pattern, p, name[n]) {
                    p = next;
                    n += 1;
                    continue;
                }
            }
            None => {}
        }
        // A mismatch: let the last star take one more byte.
        match star {
            Some((after, taken)) => {
                p = after;
                n = taken + 1;
                star = Some((after, n));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// If the pattern element at `p` (not `*`) matches byte `b`, the index of
/// the next element.
fn one(pattern: &[u8], p: usize, b: u8) -> Option<usize> {
    match pattern[p] {
        b'?' => Some(p + 1),
        b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == b).then_some(p + 2),
        b'[' => set(pattern, p + 1, b),
        c => (c == b).then_some(p + 1),
    }
}

/// A `[...]` set starting after its `[` at `p`.
fn set(pattern: &[u8], mut p: usize, b: u8) -> Option<usize> {
    let negate = pattern.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut hit = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            hit |= pattern[p + 1] == b;
            p += 2;
        } else if pattern.get(p + 1) == Some(&b'-') && p + 2 < pattern.len() {
            let (lo, hi) = (pattern[p], pattern[p + 2]);
            let (lo, hi) = (lo.min(hi), lo.max(hi));
            hit |= (lo..=hi).contains(&b);
            p += 3;
        } else {
            hit |= pattern[p] == b;
            p += 1;
        }
    }
    // Past the `]`, or at the end of an unclosed set.
    (hit != negate).then_some((p + 1).min(pattern.len()))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn stars_and_questions() {
        assert!(matches(b"*", b""));
        assert!(matches(b"*", b"orders"));
        assert!(matches(b"ord*", b"orders"));
        assert!(matches(b"*ers", b"orders"));
        assert!(matches(b"o*d*s", b"orders"));
        assert!(matches(b"o?ders", b"orders"));
        assert!(!matches(b"o?ders", b"oders"));
        assert!(!matches(b"ord", b"orders"));
        assert!(!matches(b"orders*x", b"orders"));
        assert!(matches(b"a*b*c", b"aXbYbZc"));
        assert!(!matches(b"a*b*c", b"aXbYbZ"));
        assert!(matches(b"**", b"x"));
    }

    #[test]
    fn sets_ranges_negation_and_escapes() {
        assert!(matches(b"tenant-[0-9]", b"tenant-7"));
        assert!(!matches(b"tenant-[0-9]", b"tenant-x"));
        assert!(matches(b"tenant-[^0-9]", b"tenant-x"));
        assert!(matches(b"[abc]x", b"bx"));
        assert!(matches(b"[z-a]", b"q"), "a reversed range still matches");
        assert!(matches(b"a\\*b", b"a*b"));
        assert!(!matches(b"a\\*b", b"axb"));
        assert!(matches(b"[\\]]", b"]"));
        assert!(matches(b"x[ab", b"xa"), "an unclosed set ends the pattern");
        assert!(matches(b"Q~1of4~*", b"Q~1of4~17"));
        assert!(!matches(b"Orders", b"orders"), "case-sensitive");
    }

    #[test]
    fn no_exponential_backtracking() {
        let name = vec![b'a'; 5000];
        let mut pattern = b"*a".repeat(40);
        pattern.push(b'b');
        assert!(!matches(&pattern, &name));
    }
}
