//! Yielding to the scheduler.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Yields to the scheduler: the task goes to the back of a lane of its
/// processor, with a fresh timestamp, and runs again after the tasks already
/// waiting there. Yielding never raises a task's standing.
///
/// # Example
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let yields = rt.block_on(rt.spawn(async {
///     let flag = Arc::new(AtomicBool::new(false));
///     let set = flag.clone();
///     let _other = fairlane::spawn(async move { set.store(true, Ordering::Relaxed) });
///     let mut yields = 0;
///     while !flag.load(Ordering::Relaxed) {
///         fairlane::yield_now().await;
///         yields += 1;
///     }
///     yields
/// }));
/// // The other task, queued in the same poll (it may carry the same
/// // timestamp), runs before the yielding task's second turn at the latest.
/// assert!(yields.unwrap() <= 2);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future returned by [`yield_now`]: pending once (the task goes to the
/// back of its lane), ready when polled again.
///
/// # Example
/// ```
/// use futures_lite::future::poll_once;
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// rt.block_on(rt.spawn(async {
///     let mut yielding: fairlane::task::YieldNow = fairlane::yield_now();
///     assert_eq!(poll_once(&mut yielding).await, None); // pending once
///     assert_eq!(poll_once(&mut yielding).await, Some(())); // then ready
/// })).unwrap();
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        // Re-queued exactly once, after the poll returns (task.md in
        // fairlane-core): by the write that ends the poll when this is the
        // task's own waker, else by a wake.
        crate::host::run_again(cx.waker());
        Poll::Pending
    }
}
