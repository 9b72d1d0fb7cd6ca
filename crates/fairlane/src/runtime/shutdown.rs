//! Shutting a runtime down: closing its clusters, cancelling their tasks,
//! and the signal a graceful shutdown raises for background tasks.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use fairlane_core::Executor;

use super::Handle;
use crate::host::StdHost;

/// Shuts the runtime down: closes its clusters, waits at most `timeout` for
/// the processors to finish the polls they are in, cancels every task,
/// stops the blocking pool and the I/O driver. Not on one of its own
/// threads.
pub(super) fn shut_down(handle: &Handle, timeout: Option<Duration>) {
    let shared = &handle.shared;
    for entry in shared.clusters.iter() {
        entry.cluster.shutdown();
    }
    // A timeout too long to add (`Duration::MAX`) is no deadline.
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    // Threads still in a task after the deadline are detached; they exit
    // after its poll.
    shared.threads.join_all(deadline);
    // Every cluster is closed before any is cancelled, and they are
    // cancelled together: a cancelled task that migrated is woken into the
    // graveyard of the cluster it moved to, and dropped from there.
    let clusters: Vec<&Executor<StdHost>> = shared
        .clusters
        .iter()
        .map(|entry| &*entry.cluster)
        .collect();
    Executor::cancel_all_of(&clusters);
    // After the tasks: a job whose task is gone is skipped, and the
    // jobs still running are waited for (within the deadline).
    shared.blocking.shutdown(deadline);
    // Every ring cancelled and reaped (those of processors that stopped
    // were already, in `Host::processor_stopping`).
    for entry in shared.clusters.iter() {
        entry.cluster.host().io().shutdown();
    }
    // Last: no fairlane task is left to await what tokio runs.
    #[cfg(feature = "tokio-compat")]
    if let Some(bridge) = &shared.tokio {
        bridge.shutdown();
    }
}

/// Raised by a graceful shutdown once only background tasks are left;
/// `fairlane::task::shutdown_requested` waits for it.
#[derive(Default)]
pub(crate) struct ShutdownSignal {
    raised: std::sync::atomic::AtomicBool,
    waiters: Mutex<Vec<std::task::Waker>>,
}

impl ShutdownSignal {
    pub(super) fn raise(&self) {
        self.raised
            .store(true, std::sync::atomic::Ordering::Release);
        let waiters = std::mem::take(&mut *self.waiters.lock().unwrap_or_else(|e| e.into_inner()));
        for waker in waiters {
            waker.wake();
        }
    }

    /// Ready once raised; otherwise registers `waker`.
    pub(crate) fn poll_raised(&self, waker: &std::task::Waker) -> bool {
        use std::sync::atomic::Ordering::Acquire;
        if self.raised.load(Acquire) {
            return true;
        }
        let mut waiters = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        // Checked again under the lock `raise` takes, so a raise cannot slip
        // between the check and the registration.
        if self.raised.load(Acquire) {
            return true;
        }
        if !waiters.iter().any(|w| w.will_wake(waker)) {
            waiters.push(waker.clone());
        }
        false
    }
}

/// The error of an I/O operation whose runtime was shut down (or that was
/// made after it was): `is_rt_shutdown_err` recognises it by its type.
#[derive(Debug)]
pub(crate) struct ShutDown;

impl std::fmt::Display for ShutDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the fairlane runtime was shut down")
    }
}

impl std::error::Error for ShutDown {}

/// Whether `err` is the error fairlane's I/O returns because its runtime
/// was shut down, as tokio's `is_rt_shutdown_err`: an operation on a socket
/// whose runtime is gone, or one awaited while that runtime shuts down.
/// Any other error, whatever its message, is not.
///
/// # Example
/// ```
/// use fairlane::net::TcpListener;
/// let rt1 = fairlane::Runtime::new()?;
/// let rt2 = fairlane::Runtime::new()?;
/// let listener = rt1.block_on(TcpListener::bind("127.0.0.1:0"))?;
/// drop(rt1);
/// rt2.block_on(async {
///     let err = listener.accept().await.unwrap_err();
///     assert!(fairlane::runtime::is_rt_shutdown_err(&err));
/// });
/// let other = std::io::Error::other("the fairlane runtime was shut down");
/// assert!(!fairlane::runtime::is_rt_shutdown_err(&other));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn is_rt_shutdown_err(err: &std::io::Error) -> bool {
    err.kind() == std::io::ErrorKind::Other && err.get_ref().is_some_and(|e| e.is::<ShutDown>())
}
