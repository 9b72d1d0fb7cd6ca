//! The one small random-number generator of the workspace: xorshift64*, a
//! few shifts and a multiply per number. Not for cryptography; for choices
//! that only need to look random (which lane to help, a benchmark's next
//! key, a test's shuffle).

/// The xorshift64* step: advances `state` (never zero) and returns the
/// number it yields. For state kept somewhere other than an [`Rng`] (the
/// scheduler keeps each processor's in an owner-only atomic).
///
/// # Example
/// ```
/// let mut state = 1;
/// let a = fairlane_core::rand::step(&mut state);
/// let b = fairlane_core::rand::step(&mut state);
/// assert_ne!(a, b);
/// assert_ne!(state, 0);
/// ```
#[inline]
pub fn step(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// A number in `0..n` made from the low 32 bits of `r` (random, or as good
/// as random) by a multiply and a shift: no division, unlike `r % n`, and
/// as even for the small `n`s it is used for (processors, lanes, keys; 0
/// for `n == 0`).
///
/// # Example
/// ```
/// use fairlane_core::rand::below;
/// assert_eq!(below(0, 10), 0);
/// assert_eq!(below(u64::MAX, 10), 9);
/// ```
#[inline]
pub fn below(r: u64, n: usize) -> usize {
    ((u64::from(r as u32) * n as u64) >> 32) as usize
}

/// An xorshift64* generator.
///
/// # Example
/// ```
/// use fairlane_core::rand::Rng;
/// let mut rng = Rng::new(7);
/// let die = rng.below(6) + 1;
/// assert!((1..=6).contains(&die));
/// // The same seed gives the same sequence.
/// assert_eq!(Rng::new(7).next_u64(), Rng::new(7).next_u64());
/// ```
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded from `seed`: any value, 0 included (it is
    /// scrambled with splitmix64 so that nearby seeds give unrelated
    /// sequences, and the state is never zero).
    ///
    /// # Example
    /// ```
    /// let mut rng = fairlane_core::rand::Rng::new(0);
    /// assert_ne!(rng.next_u64(), 0);
    /// ```
    pub const fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// The next number.
    ///
    /// # Example
    /// ```
    /// let mut rng = fairlane_core::rand::Rng::new(1);
    /// let (a, b) = (rng.next_u64(), rng.next_u64());
    /// assert_ne!(a, b);
    /// ```
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        step(&mut self.0)
    }

    /// A number in `0..n`, from the next number's high bits (see
    /// [`below`]).
    ///
    /// # Example
    /// ```
    /// let mut rng = fairlane_core::rand::Rng::new(3);
    /// assert!(rng.below(4) < 4);
    /// ```
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        below(self.next_u64() >> 32, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_below_and_reaches_every_value() {
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        for n in [1, 2, 3, 5, 7, 64] {
            let mut seen = alloc::vec![0usize; n];
            for _ in 0..10_000 {
                seen[below(rng.next_u64(), n)] += 1;
            }
            // Even: every value within a third of its fair share.
            let fair = 10_000 / n;
            assert!(
                seen.iter().all(|&k| k > fair * 2 / 3 && k < fair * 4 / 3),
                "{n}: {seen:?}"
            );
        }
    }

    #[test]
    fn nearby_seeds_give_unrelated_sequences() {
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
        assert_ne!(Rng::new(0).next_u64(), 0);
    }
}
