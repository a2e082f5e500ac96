//! What the server's allocator gives for a request: MEMORY USAGE must add
//! up what a queue really holds, and jemalloc (Redis' and Valkey's
//! allocator) rounds every request up to a size class.

/// The bytes jemalloc hands out for a request of `n` bytes: 8, then
/// multiples of 16 up to 128, then four classes per doubling (160, 192,
/// 224, 256, 320, ...), the same rule for small and large sizes.
pub fn alloc_size(n: usize) -> usize {
    match n {
        0 => 0,
        1..=8 => 8,
        9..=128 => (n + 15) & !15,
        _ => {
            let log2 = (usize::BITS - 1 - (n - 1).leading_zeros()) as usize;
            let spacing = 1 << (log2 - 2);
            (n + spacing - 1) & !(spacing - 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::alloc_size;

    #[test]
    fn jemalloc_size_classes() {
        let cases = [
            (1, 8),
            (8, 8),
            (9, 16),
            (24, 32),
            (72, 80),
            (128, 128),
            (129, 160),
            (160, 160),
            (161, 192),
            (256, 256),
            (257, 320),
            (440, 448),
            (641, 768),
            (4097, 5120),
            (72 * 1024, 80 * 1024),
            (80 * 1024, 80 * 1024),
            (1 << 20, 1 << 20),
            ((1 << 20) + 1, 1280 * 1024),
        ];
        for (n, class) in cases {
            assert_eq!(alloc_size(n), class, "{n}");
        }
    }
}
