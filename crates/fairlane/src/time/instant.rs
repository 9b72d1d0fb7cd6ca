//! [`Instant`]: a point in time for the timers, with tokio's shape.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

/// A measurement of the monotonic clock, as taken by the timers
/// ([`sleep_until`](super::sleep_until), [`timeout_at`](super::timeout_at),
/// [`interval_at`](super::interval_at)) and returned by
/// [`Interval::tick`](super::Interval::tick); a newtype over
/// [`std::time::Instant`] with tokio's `Instant` methods, converted with
/// [`from_std`](Self::from_std)/[`into_std`](Self::into_std) or `From`.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use fairlane::time::Instant;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let start = Instant::now();
/// rt.block_on(fairlane::time::sleep_until(start + Duration::from_millis(5)));
/// assert!(start.elapsed() >= Duration::from_millis(5));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    std: std::time::Instant,
}

impl Instant {
    /// The current time: the current runtime's clock, which stands still
    /// while [paused](super::pause); the monotonic clock outside a runtime
    /// (and inside one whose clock was never paused).
    ///
    /// # Example
    /// ```
    /// let a = fairlane::time::Instant::now();
    /// let b = fairlane::time::Instant::now();
    /// assert!(b >= a);
    /// ```
    pub fn now() -> Instant {
        // One relaxed load while no runtime's clock was ever paused.
        if super::clock::any_shifted() {
            if let Some(now) = super::clock::current_now() {
                return Instant::from_std(now);
            }
        }
        Instant::from_std(std::time::Instant::now())
    }

    /// The same point in time as a std instant.
    ///
    /// # Example
    /// ```
    /// let std_now = std::time::Instant::now();
    /// assert_eq!(fairlane::time::Instant::from_std(std_now).into_std(), std_now);
    /// ```
    pub fn from_std(std: std::time::Instant) -> Instant {
        Instant { std }
    }

    /// This point in time as a std instant.
    ///
    /// # Example
    /// ```
    /// let now = fairlane::time::Instant::now();
    /// let std_now: std::time::Instant = now.into_std();
    /// assert_eq!(fairlane::time::Instant::from(std_now), now);
    /// ```
    pub fn into_std(self) -> std::time::Instant {
        self.std
    }

    /// The time from `earlier` to this instant; zero if `earlier` is later
    /// (as tokio's and std's since Rust 1.60: no panic).
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let a = fairlane::time::Instant::now();
    /// let b = a + Duration::from_secs(1);
    /// assert_eq!(b.duration_since(a), Duration::from_secs(1));
    /// assert_eq!(a.duration_since(b), Duration::ZERO);
    /// ```
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.std.saturating_duration_since(earlier.std)
    }

    /// The time from `earlier` to this instant, or `None` if `earlier` is
    /// later.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let a = fairlane::time::Instant::now();
    /// let b = a + Duration::from_secs(1);
    /// assert_eq!(b.checked_duration_since(a), Some(Duration::from_secs(1)));
    /// assert_eq!(a.checked_duration_since(b), None);
    /// ```
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.std.checked_duration_since(earlier.std)
    }

    /// The time from `earlier` to this instant, or zero if `earlier` is
    /// later.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let a = fairlane::time::Instant::now();
    /// assert_eq!(a.saturating_duration_since(a + Duration::from_secs(1)), Duration::ZERO);
    /// ```
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.std.saturating_duration_since(earlier.std)
    }

    /// The time that passed since this instant.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let start = fairlane::time::Instant::now();
    /// std::thread::sleep(Duration::from_millis(1));
    /// assert!(start.elapsed() >= Duration::from_millis(1));
    /// ```
    pub fn elapsed(&self) -> Duration {
        Instant::now().duration_since(*self)
    }

    /// `duration` later, or `None` if that cannot be represented.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let now = fairlane::time::Instant::now();
    /// assert!(now.checked_add(Duration::from_secs(1)).is_some());
    /// assert!(now.checked_add(Duration::MAX).is_none());
    /// ```
    pub fn checked_add(&self, duration: Duration) -> Option<Instant> {
        self.std.checked_add(duration).map(Instant::from_std)
    }

    /// `duration` earlier, or `None` if that cannot be represented.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let now = fairlane::time::Instant::now();
    /// assert_eq!(now.checked_sub(Duration::ZERO), Some(now));
    /// assert!(now.checked_sub(Duration::MAX).is_none());
    /// ```
    pub fn checked_sub(&self, duration: Duration) -> Option<Instant> {
        self.std.checked_sub(duration).map(Instant::from_std)
    }
}

impl From<std::time::Instant> for Instant {
    fn from(std: std::time::Instant) -> Instant {
        Instant::from_std(std)
    }
}

impl From<Instant> for std::time::Instant {
    fn from(instant: Instant) -> std::time::Instant {
        instant.std
    }
}

/// # Panics
/// If the result cannot be represented (as std's); see
/// [`Instant::checked_add`].
impl Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, rhs: Duration) -> Instant {
        Instant::from_std(self.std + rhs)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

/// # Panics
/// If the result cannot be represented (as std's); see
/// [`Instant::checked_sub`].
impl Sub<Duration> for Instant {
    type Output = Instant;

    fn sub(self, rhs: Duration) -> Instant {
        Instant::from_std(self.std - rhs)
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}

/// The time between two instants; zero if `rhs` is later (as
/// [`Instant::duration_since`]).
impl Sub<Instant> for Instant {
    type Output = Duration;

    fn sub(self, rhs: Instant) -> Duration {
        self.duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.std.fmt(f)
    }
}
