//! Helpers the unit tests of the core share.

/// A seeded xorshift: `next(n)` is below `n`. Random-operation tests
/// replay exactly from their seed.
pub(crate) fn xorshift(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n.max(1)
    }
}
