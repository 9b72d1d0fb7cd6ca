//! [`Interval`]: a stream of instants a period apart, and what it does
//! about ticks it missed ([`MissedTickBehavior`]), as tokio's.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::{far_future, sleep_until, Instant, Sleep};

/// How late a tick may be and still count as on time: a tick this late or
/// less keeps the schedule whatever the [`MissedTickBehavior`] (as tokio's
/// interval does).
const LATE: Duration = Duration::from_millis(5);

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
        sleep: Box::pin(sleep_until(start)),
        period,
        missed_tick_behavior: MissedTickBehavior::default(),
    }
}

/// What an [`Interval`] does when a tick comes more than a few
/// milliseconds late (the task was busy, or did not poll it), as tokio's.
/// In every case the late tick itself is delivered at once; the behavior
/// decides when the ticks after it come.
///
/// With a period of 300 ms, ticks due at 0, 300, 600, ... ms, and the
/// ticks at 600 and 900 ms missed (the task polls again at 950 ms):
/// - `Burst` delivers 600 and 900 at once, then 1200, 1500, ...;
/// - `Delay` delivers 600 at once, then 1250, 1550, ...;
/// - `Skip` delivers 600 at once, then 1200, 1500, ...
///
/// # Example
/// ```
/// use std::time::Duration;
/// use fairlane::time::{self, Instant, MissedTickBehavior};
/// let rt = fairlane::runtime::Builder::new_current_thread().start_paused(true).build()?;
/// rt.block_on(async {
///     let start = Instant::now();
///     let mut interval = time::interval(Duration::from_millis(300));
///     interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
///     interval.tick().await; // at once
///     time::advance(Duration::from_millis(950)).await; // 300, 600 and 900 missed
///     assert_eq!(interval.tick().await, start + Duration::from_millis(300));
///     assert_eq!(interval.tick().await, start + Duration::from_millis(1200));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MissedTickBehavior {
    /// Catch up: the missed ticks come at once, one per poll, until the
    /// schedule is met again; the schedule itself never moves (the
    /// default).
    #[default]
    Burst,
    /// Start again: the next tick is one period after the late one was
    /// delivered, and the schedule moves with it.
    Delay,
    /// Drop the missed ticks: the next tick is the next one of the original
    /// schedule after now.
    Skip,
}

impl MissedTickBehavior {
    /// The next deadline after a tick due at `due`, delivered late at `now`.
    fn next(self, due: Instant, now: Instant, period: Duration) -> Instant {
        let at = match self {
            Self::Burst => due.checked_add(period),
            Self::Delay => now.checked_add(period),
            Self::Skip => {
                // How far into a period `now` is, counted from the
                // schedule; the next tick is the rest of that period away.
                let into = (now - due).as_nanos() % period.as_nanos();
                let into = Duration::new(
                    u64::try_from(into / 1_000_000_000).unwrap_or(u64::MAX),
                    (into % 1_000_000_000) as u32,
                );
                now.checked_add(period - into)
            }
        };
        at.unwrap_or_else(far_future)
    }
}

/// Ticks every `period`, starting at its first instant. A tick that comes
/// late is delivered at once; what follows it is the
/// [`MissedTickBehavior`]'s choice (by default `Burst`: the missed ticks
/// catch up, and the schedule stays).
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
    /// Until the next tick: its deadline is the tick's instant.
    sleep: Pin<Box<Sleep>>,
    period: Duration,
    missed_tick_behavior: MissedTickBehavior,
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
        let due = self.sleep.deadline();
        let now = Instant::now();
        let next = if now.saturating_duration_since(due) > LATE {
            self.missed_tick_behavior.next(due, now, self.period)
        } else {
            due.checked_add(self.period).unwrap_or_else(far_future)
        };
        self.sleep.as_mut().reset(next);
        Poll::Ready(due)
    }

    /// Restarts the schedule: the next tick is one period from now.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// use fairlane::time::{self, Instant};
    /// let rt = fairlane::runtime::Builder::new_current_thread().start_paused(true).build()?;
    /// rt.block_on(async {
    ///     let mut interval = time::interval(Duration::from_secs(1));
    ///     interval.tick().await;
    ///     time::advance(Duration::from_millis(300)).await;
    ///     interval.reset();
    ///     let from = Instant::now();
    ///     assert_eq!(interval.tick().await, from + Duration::from_secs(1));
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reset(&mut self) {
        self.reset_after(self.period);
    }

    /// Restarts the schedule at once: the next tick is now, and the ones
    /// after it a period apart from there.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// use fairlane::time::{self, Instant};
    /// let rt = fairlane::runtime::Builder::new_current_thread().start_paused(true).build()?;
    /// rt.block_on(async {
    ///     let mut interval = time::interval(Duration::from_secs(1));
    ///     interval.tick().await;
    ///     interval.reset_immediately();
    ///     assert_eq!(interval.tick().await, Instant::now()); // without waiting
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reset_immediately(&mut self) {
        self.reset_at(Instant::now());
    }

    /// Restarts the schedule: the next tick is `after` from now, and the
    /// ones after it a period apart from there.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// use fairlane::time::{self, Instant};
    /// let rt = fairlane::runtime::Builder::new_current_thread().start_paused(true).build()?;
    /// rt.block_on(async {
    ///     let mut interval = time::interval(Duration::from_secs(1));
    ///     interval.tick().await;
    ///     interval.reset_after(Duration::from_millis(10));
    ///     let from = Instant::now();
    ///     assert_eq!(interval.tick().await, from + Duration::from_millis(10));
    ///     assert_eq!(interval.tick().await, from + Duration::from_millis(1010));
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reset_after(&mut self, after: Duration) {
        self.reset_at(Instant::now().checked_add(after).unwrap_or_else(far_future));
    }

    /// Restarts the schedule: the next tick is at `deadline`, and the ones
    /// after it a period apart from there.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// use fairlane::time::{self, Instant};
    /// let rt = fairlane::runtime::Builder::new_current_thread().start_paused(true).build()?;
    /// rt.block_on(async {
    ///     let mut interval = time::interval(Duration::from_secs(1));
    ///     let at = Instant::now() + Duration::from_millis(20);
    ///     interval.reset_at(at);
    ///     assert_eq!(interval.tick().await, at);
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reset_at(&mut self, deadline: Instant) {
        self.sleep.as_mut().reset(deadline);
    }

    /// What the interval does about missed ticks (default
    /// [`MissedTickBehavior::Burst`]).
    ///
    /// # Example
    /// ```
    /// use fairlane::time::MissedTickBehavior;
    /// let rt = fairlane::runtime::Builder::new_current_thread().build()?;
    /// let _guard = rt.enter();
    /// let interval = fairlane::time::interval(std::time::Duration::from_secs(1));
    /// assert_eq!(interval.missed_tick_behavior(), MissedTickBehavior::Burst);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.missed_tick_behavior
    }

    /// Sets what the interval does about missed ticks, from the next tick
    /// on.
    ///
    /// # Example
    /// ```
    /// use fairlane::time::MissedTickBehavior;
    /// let rt = fairlane::runtime::Builder::new_current_thread().build()?;
    /// let _guard = rt.enter();
    /// let mut interval = fairlane::time::interval(std::time::Duration::from_secs(1));
    /// interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    /// assert_eq!(interval.missed_tick_behavior(), MissedTickBehavior::Delay);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.missed_tick_behavior = behavior;
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
}
