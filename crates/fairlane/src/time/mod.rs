//! Time: [`sleep`], [`sleep_until`], [`timeout`], [`interval`] (with
//! [`MissedTickBehavior`]), [`Instant`] and std's [`Duration`], with
//! tokio's shapes.
//!
//! For tests the runtime's clock can be paused, as tokio's: [`pause`],
//! [`resume`], [`advance`], [`Builder::start_paused`](crate::Builder::start_paused)
//! and `#[fairlane::test(start_paused = true)]`. One clock serves every
//! processor of every cluster of the runtime. Paused, [`Instant::now`]
//! stands still; [`advance`] moves it, and when the whole runtime is idle
//! (every processor asleep with nothing to run, no I/O operation in flight,
//! no blocking closure running, no `block_on` polling) it jumps to the
//! earliest timer at once (*auto-advance*), so that an hour's sleep ends
//! without waiting. Unlike tokio, a socket read (or accept) waiting for a
//! peer keeps a paused clock where it is: move it with [`advance`]. These
//! test tools panic when misused (pausing twice, resuming or advancing a
//! clock that is not paused, outside a runtime), as tokio's do. The design
//! (where the clock lives, how auto-advance decides) is in `clock.md` in
//! the source beside this module. What it costs when unused: the timers
//! read the clock with one relaxed load of a flag more than the monotonic
//! clock, and [`Instant::now`] with one relaxed load more than std's while
//! no runtime in the process has paused its clock.
//!
//! Each processor keeps a hierarchical timer wheel (millisecond ticks,
//! O(1) insert and cancel) behind its lock; a timer set on a processor goes
//! to that processor's wheel, a timer set on another thread (a `block_on`
//! thread) to a processor chosen round-robin, which is woken if it sleeps
//! past the new deadline. A sleeping processor waits at most until its
//! earliest timer, so an idle runtime with pending timers uses no CPU
//! between deadlines. Timers never fire early; they fire at the first
//! millisecond tick at or after their deadline, or later if every processor
//! is busy.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! let rt = fairlane::Runtime::builder().processors(1).build()?;
//! rt.block_on(async {
//!     fairlane::time::sleep(Duration::from_millis(5)).await;
//!     let slow = fairlane::time::sleep(Duration::from_secs(60));
//!     let result = fairlane::time::timeout(Duration::from_millis(5), slow).await;
//!     assert!(result.is_err());
//! });
//! # Ok::<(), std::io::Error>(())
//! ```

pub(crate) mod clock;
pub(crate) mod idle_check;
mod instant;
mod interval;

/// The atomics of `idle_check`, which its loom model replaces with loom's.
mod atomics {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
}

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::io::driver::{Driver, ProcessorIo};
use crate::task::coop;
use fairlane_core::wheel::TimerKey;

pub use clock::{advance, pause, resume};
pub use instant::Instant;
pub use interval::{interval, interval_at, Interval, MissedTickBehavior};
/// std's `Duration`, here as in tokio's `time` module, so that
/// `use fairlane::time::{sleep, Duration}` works as it does with tokio.
///
/// # Example
/// ```
/// use fairlane::time::{sleep, Duration};
/// let rt = fairlane::runtime::Builder::new_current_thread().build()?;
/// rt.block_on(sleep(Duration::from_millis(1)));
/// assert_eq!(Duration::from_secs(1), std::time::Duration::from_secs(1));
/// # Ok::<(), std::io::Error>(())
/// ```
pub use std::time::Duration;

/// Errors of the time module.
///
/// # Example
/// ```
/// use fairlane::time::error::Elapsed;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let timeout = fairlane::time::timeout(std::time::Duration::ZERO, std::future::pending::<()>());
/// let err: Elapsed = rt.block_on(timeout).unwrap_err();
/// let io: std::io::Error = err.into();
/// assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
/// # Ok::<(), std::io::Error>(())
/// ```
pub mod error {
    use std::fmt;

    /// The deadline of a [`timeout`](super::timeout) passed before its future
    /// completed.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let err = rt
    ///     .block_on(fairlane::time::timeout(Duration::from_millis(1), std::future::pending::<()>()))
    ///     .unwrap_err();
    /// assert_eq!(err.to_string(), "deadline has elapsed");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Elapsed(pub(super) ());

    impl fmt::Display for Elapsed {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("deadline has elapsed")
        }
    }

    impl std::error::Error for Elapsed {}

    impl From<Elapsed> for std::io::Error {
        fn from(e: Elapsed) -> std::io::Error {
            std::io::Error::new(std::io::ErrorKind::TimedOut, e)
        }
    }
}

/// Waits until `duration` has passed.
///
/// # Panics
/// When polled outside a fairlane runtime, or after its runtime shut down.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use fairlane::time::Instant;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let start = Instant::now();
/// rt.block_on(fairlane::time::sleep(Duration::from_millis(10)));
/// assert!(start.elapsed() >= Duration::from_millis(10));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    let deadline = Instant::now()
        .checked_add(duration)
        .unwrap_or_else(far_future);
    sleep_until(deadline)
}

/// Waits until `deadline`.
///
/// # Panics
/// When polled outside a fairlane runtime, or after its runtime shut down.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use fairlane::time::Instant;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let deadline = Instant::now() + Duration::from_millis(5);
/// rt.block_on(fairlane::time::sleep_until(deadline));
/// assert!(Instant::now() >= deadline);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        driver: crate::io::current_driver().ok(),
        timer: None,
        elapsed: false,
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

/// The future of [`sleep`] and [`sleep_until`].
///
/// # Example
/// ```
/// use std::time::Duration;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     let sleep = fairlane::time::sleep(Duration::from_millis(1));
///     let deadline = sleep.deadline();
///     sleep.await;
///     assert!(fairlane::time::Instant::now() >= deadline);
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Sleep {
    deadline: Instant,
    driver: Option<Arc<Driver>>,
    timer: Option<(Arc<ProcessorIo>, TimerKey)>,
    elapsed: bool,
}

impl Sleep {
    /// When this sleep completes.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// use fairlane::time::Instant;
    /// let at = Instant::now() + Duration::from_secs(1);
    /// assert_eq!(fairlane::time::sleep_until(at).deadline(), at);
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the sleep has elapsed, as tokio's: it has been polled and
    /// its deadline has passed since (or it completed). A sleep never
    /// polled has not elapsed, whatever its deadline.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// # let rt = fairlane::runtime::Builder::new_current_thread().build()?;
    /// # rt.block_on(async {
    /// assert!(!fairlane::time::sleep(Duration::from_secs(60)).is_elapsed());
    /// let mut now = std::pin::pin!(fairlane::time::sleep_until(fairlane::time::Instant::now()));
    /// assert!(!now.is_elapsed(), "not polled yet");
    /// now.as_mut().await;
    /// assert!(now.is_elapsed());
    /// # });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_elapsed(&self) -> bool {
        self.elapsed || (self.timer.is_some() && Instant::now() >= self.deadline)
    }

    /// Moves the deadline (earlier or later); the sleep is pending again
    /// if the new deadline is in the future.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// use fairlane::time::Instant;
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// rt.block_on(async {
    ///     let mut sleep = Box::pin(fairlane::time::sleep(Duration::from_secs(60)));
    ///     sleep.as_mut().reset(Instant::now() + Duration::from_millis(1));
    ///     sleep.await;
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn reset(self: Pin<&mut Self>, deadline: Instant) {
        let this = self.get_mut();
        this.cancel();
        this.deadline = deadline;
        this.elapsed = false;
    }

    fn cancel(&mut self) {
        if let Some((proc, key)) = self.timer.take() {
            proc.cancel_timer(key);
        }
    }

    /// Polls with (`budgeted`) or without the cooperative budget.
    fn poll_sleep(&mut self, cx: &mut Context<'_>, budgeted: bool) -> Poll<()> {
        if budgeted {
            std::task::ready!(coop::poll_proceed(cx));
        }
        loop {
            if self.elapsed || Instant::now() >= self.deadline {
                self.cancel();
                self.elapsed = true;
                if budgeted {
                    coop::spend();
                }
                return Poll::Ready(());
            }
            if let Some((proc, key)) = &self.timer {
                if proc.timer_pending(*key, cx.waker()) {
                    return Poll::Pending;
                }
                // Fired (or its processor stopped): look at the clock again.
                self.timer = None;
                if Instant::now() >= self.deadline {
                    continue;
                }
            }
            if self.driver.is_none() {
                self.driver = crate::io::current_driver().ok();
            }
            let Some(driver) = &self.driver else {
                panic!(
                    "fairlane::time::sleep was polled outside a fairlane runtime: await it inside \
                     a task or Runtime::block_on"
                );
            };
            let tick = driver.tick_at(self.deadline.into_std());
            match driver.add_timer(tick, cx.waker()) {
                Ok(Some(timer)) => {
                    self.timer = Some(timer);
                    return Poll::Pending;
                }
                // The tick already passed: the deadline is less than a
                // millisecond away (or passed); the loop looks again.
                Ok(None) => {
                    if Instant::now() >= self.deadline {
                        continue;
                    }
                    // Within the current tick: yield and look again.
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Err(e) => panic!("fairlane::time::sleep cannot wait: {e}"),
            }
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().poll_sleep(cx, true)
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// Runs `future` for at most `duration`: `Err(Elapsed)` if the deadline
/// passes first, in which case `future` is dropped (cancelled).
///
/// # Example
/// ```
/// use std::time::Duration;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(async {
///     assert_eq!(fairlane::time::timeout(Duration::from_secs(5), async { 1 }).await, Ok(1));
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn timeout<F: Future>(duration: Duration, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep(duration),
    }
}

/// [`timeout`] with a deadline instead of a duration.
///
/// # Example
/// ```
/// use std::time::Duration;
/// use fairlane::time::Instant;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let at = Instant::now() + Duration::from_millis(2);
/// let r = rt.block_on(fairlane::time::timeout_at(at, std::future::pending::<()>()));
/// assert!(r.is_err());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn timeout_at<F: Future>(deadline: Instant, future: F) -> Timeout<F> {
    Timeout {
        future,
        sleep: sleep_until(deadline),
    }
}

/// The future of [`timeout`].
///
/// # Example
/// ```
/// use std::time::Duration;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let t: fairlane::time::Timeout<_> = fairlane::time::timeout(Duration::from_secs(1), async { 2 });
/// assert_eq!(rt.block_on(t), Ok(2));
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Timeout<F> {
    future: F,
    sleep: Sleep,
}

impl<F> Timeout<F> {
    /// The wrapped future.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let t = fairlane::time::timeout(Duration::from_secs(1), async { 2 });
    /// let _inner = t.into_inner();
    /// ```
    pub fn into_inner(self) -> F {
        // `Timeout` has no destructor of its own, so it can be taken apart
        // by value: the sleep is dropped (its timer cancelled) here.
        let Timeout { future, sleep } = self;
        drop(sleep);
        future
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, error::Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of `future`: it is never moved out of a
        // pinned `Timeout` (`into_inner` takes `self` by value, which needs
        // an unpinned value), and `Timeout` has no `Drop` of its own.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above; `future` stays where the pinned `Timeout` is.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        if let Poll::Ready(out) = future.poll(cx) {
            return Poll::Ready(Ok(out));
        }
        // The deadline is checked even when the inner future used up the
        // cooperative budget, as tokio does.
        match this.sleep.poll_sleep(cx, false) {
            Poll::Ready(()) => Poll::Ready(Err(error::Elapsed(()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<F> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("deadline", &self.sleep.deadline)
            .finish_non_exhaustive()
    }
}
