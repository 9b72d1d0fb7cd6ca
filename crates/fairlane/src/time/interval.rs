//! [`Interval`]: a stream of instants a period apart.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::{far_future, sleep_until, Instant, Sleep};

/// A stream of instants `period` apart, starting now; see [`Interval`].
///
/// # Panics
/// If `period` is zero (as tokio).
///
/// # Example
/// ```
/// use std::time::Duration;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let mut interval = fairlane::time::interval(Duration::from_millis(2));
///     let first = interval.tick().await; // immediately
///     let second = interval.tick().await;
///     assert_eq!(second - first, Duration::from_millis(2));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn interval(period: Duration) -> Interval {
    interval_at(Instant::now(), period)
}

/// An [`interval`] whose first tick is at `start`.
///
/// # Panics
/// If `period` is zero (as tokio).
///
/// # Example
/// ```
/// use std::time::Duration;
/// use fairlane::time::Instant;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let start = Instant::now() + Duration::from_millis(3);
/// let mut interval = fairlane::time::interval_at(start, Duration::from_millis(1));
/// assert_eq!(rt.block_on(interval.tick()), start);
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(
        !period.is_zero(),
        "fairlane::time::interval: the period must be greater than zero"
    );
    Interval {
        next: start,
        period,
        sleep: Box::pin(sleep_until(start)),
    }
}

/// Ticks every `period`. A tick that is late (the task was busy) is
/// delivered at once, and later ones keep the original schedule, catching
/// up in a burst (tokio's default, `MissedTickBehavior::Burst`).
///
/// # Example
/// ```
/// use std::time::Duration;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let mut interval = fairlane::time::interval(Duration::from_millis(1));
///     for _ in 0..3 {
///         interval.tick().await;
///     }
///     assert_eq!(interval.period(), Duration::from_millis(1));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Interval {
    next: Instant,
    period: Duration,
    sleep: Pin<Box<Sleep>>,
}

impl Interval {
    /// Waits for the next tick and returns its scheduled instant.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let mut interval = rt.block_on(async { fairlane::time::interval(Duration::from_millis(1)) });
    /// let at = rt.block_on(interval.tick());
    /// assert!(at <= fairlane::time::Instant::now());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick (for hand-written futures).
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let mut interval = fairlane::time::interval(Duration::from_millis(1));
    /// rt.block_on(std::future::poll_fn(|cx| interval.poll_tick(cx)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        std::task::ready!(self.sleep.as_mut().poll(cx));
        let tick = self.next;
        self.next = tick.checked_add(self.period).unwrap_or_else(far_future);
        self.sleep.as_mut().reset(self.next);
        Poll::Ready(tick)
    }

    /// The period.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let interval = fairlane::time::interval(Duration::from_secs(1));
    /// assert_eq!(interval.period(), Duration::from_secs(1));
    /// ```
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Restarts the schedule: the next tick is one period from now.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let mut interval = fairlane::time::interval(Duration::from_secs(1));
    /// interval.reset();
    /// ```
    pub fn reset(&mut self) {
        self.next = Instant::now()
            .checked_add(self.period)
            .unwrap_or_else(far_future);
        self.sleep.as_mut().reset(self.next);
    }
}
