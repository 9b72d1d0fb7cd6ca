//! What background tasks wait for during a graceful shutdown.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::runtime::context;

/// Resolves when the runtime asks its background tasks to finish: during
/// [`Runtime::shutdown_graceful`](crate::Runtime::shutdown_graceful), once
/// every other task has finished. A background task that is still running
/// after the grace period is cancelled.
///
/// # Panics
/// Outside a runtime, with a message saying so.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// rt.block_on(async move {
///     fairlane::task::Builder::new().background().spawn(async move {
///         fairlane::task::shutdown_requested().await;
///         tx.send("flushed").unwrap();
///     })
/// })?;
/// rt.shutdown_graceful(std::time::Duration::from_secs(5));
/// assert_eq!(rx.recv().unwrap(), "flushed");
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn shutdown_requested() -> ShutdownRequested {
    match context::with_current(|handle| handle.shared.signal.clone()) {
        Some(signal) => ShutdownRequested { signal },
        None => panic!(
            "fairlane::task::shutdown_requested must be called from within a fairlane runtime"
        ),
    }
}

/// The future returned by [`shutdown_requested`]: ready once the runtime's
/// graceful shutdown has asked background tasks to finish.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// rt.block_on(async move {
///     fairlane::task::Builder::new().background().spawn(async move {
///         let requested: fairlane::task::ShutdownRequested = fairlane::task::shutdown_requested();
///         requested.await;
///         tx.send("asked to stop").unwrap();
///     })
/// })?;
/// rt.shutdown_graceful(std::time::Duration::from_secs(5));
/// assert_eq!(rx.recv().unwrap(), "asked to stop");
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct ShutdownRequested {
    signal: std::sync::Arc<crate::runtime::ShutdownSignal>,
}

impl Future for ShutdownRequested {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.poll_raised(cx.waker()) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl fmt::Debug for ShutdownRequested {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShutdownRequested").finish_non_exhaustive()
    }
}
