//! The runtime itself: its clusters' processors, running futures on the
//! calling thread, and shutting down.

use std::fmt;
use std::future::Future;
use std::io;
use std::thread;
use std::time::{Duration, Instant};

use super::shutdown::shut_down;
use super::{context, Builder, Cluster, EnterGuard, Handle, RuntimeMetrics};
use crate::io::IoBackend;
use crate::task::JoinHandle;

/// A fairlane runtime: one or more clusters of processors (OS threads), each
/// cluster sharing one ready queue of timestamped lanes. Most programs have
/// just the default cluster; see [`Builder::cluster`] for more.
///
/// Dropping it cancels the tasks still alive (their futures are dropped) and
/// joins every processor thread.
///
/// # Panics
/// Dropping it (or shutting it down) from one of its own tasks or blocking
/// closures panics, since that thread would wait for itself. The runtime
/// is still shut down: a new thread, none of the runtime's, does it once
/// the panicking poll or closure has returned. (A drop while the task is
/// already panicking hands the shutdown over the same way without a second
/// panic.)
///
/// # Example
/// ```
/// use fairlane::Runtime;
///
/// let rt = Runtime::builder().processors(2).build()?;
/// let answer = rt.block_on(async {
///     let task = fairlane::spawn(async { 21 * 2 });
///     task.await.unwrap()
/// });
/// assert_eq!(answer, 42);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Runtime {
    /// A handle on the default cluster.
    pub(super) handle: Handle,
    /// Set once `shutdown` ran.
    pub(super) shut_down: bool,
}

// The runtime's shared state is atomics and locks that recover from
// poisoning; a panic on a thread using it (a task's panic is caught where
// it happens) leaves nothing another use could see half-changed, as with
// tokio's `Runtime`.
impl std::panic::UnwindSafe for Runtime {}
impl std::panic::RefUnwindSafe for Runtime {}

/// The flavor of a [`Runtime`], as [`Handle::runtime_flavor`] tells it:
/// which of [`Builder::new_multi_thread`] and
/// [`Builder::new_current_thread`] built it.
///
/// # Example
/// ```
/// use fairlane::runtime::{Builder, RuntimeFlavor};
/// let rt = Builder::new_current_thread().build()?;
/// assert_eq!(rt.handle().runtime_flavor(), RuntimeFlavor::CurrentThread);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeFlavor {
    /// One processor, run by the thread inside `Runtime::block_on`.
    CurrentThread,
    /// Processors on threads of their own.
    MultiThread,
}

impl Runtime {
    /// A runtime with one processor per available core.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::new()?;
    /// assert_eq!(rt.block_on(async { 1 }), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// A builder to configure a runtime.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(4).lanes_per_processor(2).build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// Runs `future` to completion on the calling thread, with this runtime as
    /// the context of `fairlane::spawn` and [`Handle::current`]. Tasks it
    /// spawns run on the processors: on a multi-thread runtime, the
    /// processors' own threads; on a current-thread runtime, this thread,
    /// while `future` waits (see [`Builder::new_current_thread`]).
    ///
    /// # Panics
    /// When called from a task or from inside another `block_on`.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// assert_eq!(rt.block_on(async { "hi" }), "hi");
    ///
    /// // Tasks of a current-thread runtime run only inside `block_on`.
    /// let rt = fairlane::runtime::Builder::new_current_thread().build()?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// rt.spawn(async move { tx.send("ran").unwrap() });
    /// assert!(rx.try_recv().is_err()); // not yet
    /// rt.block_on(fairlane::yield_now());
    /// assert_eq!(rx.try_recv(), Ok("ran"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let _guard = context::enter(self.handle.clone());
        self.handle
            .drive_until(future, None)
            .expect("no deadline, so the future completed")
    }

    /// Spawns a task on this runtime; see [`fairlane::spawn`](crate::spawn).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let task = rt.spawn(async { 5 });
    /// assert_eq!(rt.block_on(task).unwrap(), 5);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }

    /// Runs the blocking closure `f` on the runtime's blocking pool; see
    /// [`fairlane::task::spawn_blocking`](crate::task::spawn_blocking).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let len = rt.spawn_blocking(|| std::fs::read_dir(".").map(|d| d.count()).unwrap_or(0));
    /// assert!(rt.block_on(len).unwrap() > 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.handle.spawn_blocking(f)
    }

    /// A handle to this runtime, usable from any thread.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.handle().clone();
    /// let task = std::thread::spawn(move || handle.spawn(async { 3 })).join().unwrap();
    /// assert_eq!(rt.block_on(task).unwrap(), 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Makes this runtime the current one of the calling thread while the
    /// guard lives; see [`Handle::enter`].
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let _guard = rt.enter();
    /// let task = fairlane::spawn(async { 1 });
    /// assert_eq!(rt.block_on(task).unwrap(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn enter(&self) -> EnterGuard<'_> {
        self.handle().enter()
    }

    /// The I/O backend this runtime uses (see [`Builder::io_backend`]).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::IoBackend;
    /// let rt = fairlane::Runtime::builder().processors(1).io_backend(IoBackend::Fallback).build()?;
    /// assert_eq!(rt.io_backend(), IoBackend::Fallback);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn io_backend(&self) -> IoBackend {
        self.handle.io_backend()
    }

    /// The counters of the cluster this spawns onto (the default cluster
    /// for a runtime, a named one for a handle from [`Cluster::handle`]):
    /// its processors and its live tasks; see [`RuntimeMetrics`].
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(2).build()?;
    /// assert_eq!(rt.metrics().processors.len(), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn metrics(&self) -> RuntimeMetrics {
        self.handle.metrics()
    }

    /// Shuts down, waiting at most `timeout` for the processors to finish the
    /// polls they are in. Processors still busy after that (a task that never
    /// yields) are left to exit on their own; every other task is cancelled.
    ///
    /// # Panics
    /// From one of its own tasks or blocking closures, as dropping it does
    /// (see [`Runtime`]).
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let stuck = rt.spawn(std::future::pending::<()>());
    /// rt.shutdown_timeout(Duration::from_secs(1));
    /// let err = futures_lite::future::block_on(stuck).unwrap_err();
    /// assert!(err.is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn shutdown_timeout(mut self, timeout: Duration) {
        self.shutdown(Some(timeout));
    }

    /// Shuts down without waiting for the processors or the blocking pool:
    /// [`shutdown_timeout`](Self::shutdown_timeout) with a zero timeout, as
    /// tokio's. Every task that is not in a poll is cancelled before it
    /// returns; threads still busy (a blocking closure, a task that never
    /// yields) finish on their own.
    ///
    /// # Panics
    /// From one of its own tasks or blocking closures, as dropping it does
    /// (see [`Runtime`]).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let (started, wait) = std::sync::mpsc::channel();
    /// rt.spawn_blocking(move || {
    ///     started.send(()).unwrap();
    ///     std::thread::sleep(std::time::Duration::from_secs(3600));
    /// });
    /// let pending = rt.spawn(std::future::pending::<()>());
    /// wait.recv().unwrap();
    /// rt.shutdown_background(); // does not wait the hour
    /// assert!(futures_lite::future::block_on(pending).unwrap_err().is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn shutdown_background(self) {
        self.shutdown_timeout(Duration::ZERO);
    }

    /// Shuts down gracefully: waits for every task that is not a background
    /// task to finish (as long as that takes), then raises
    /// [`fairlane::task::shutdown_requested`](crate::task::shutdown_requested)
    /// for the background tasks, waits up to `grace` for them to finish, and
    /// then shuts down as dropping the runtime does (cancelling those left).
    ///
    /// # Panics
    /// When called from a task of this runtime or inside `block_on`.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// rt.block_on(async {
    ///     let background = tx.clone();
    ///     fairlane::task::Builder::new().background().spawn(async move {
    ///         fairlane::task::shutdown_requested().await;
    ///         background.send("background: asked to stop").unwrap();
    ///     })?;
    ///     fairlane::spawn(async move { tx.send("foreground: done").unwrap() });
    ///     Ok::<(), std::io::Error>(())
    /// })?;
    /// rt.shutdown_graceful(Duration::from_secs(60));
    /// let order: Vec<_> = rx.try_iter().collect();
    /// assert_eq!(order, ["foreground: done", "background: asked to stop"]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn shutdown_graceful(mut self, grace: Duration) {
        let _guard = context::enter(self.handle.clone());
        let clusters = &self.handle.shared.clusters;
        // Tasks may spawn on, or move to, other clusters while we wait: done
        // only when one pass finds every cluster finished at once.
        while clusters
            .iter()
            .any(|c| c.cluster.live_foreground_tasks() != 0)
        {
            for entry in clusters.iter() {
                self.handle
                    .drive_until(entry.cluster.tasks_finished(false), None);
            }
        }
        self.handle.shared.signal.raise();
        // A grace too long to add is no deadline.
        let deadline = Instant::now().checked_add(grace);
        for entry in clusters.iter() {
            self.handle
                .drive_until(entry.cluster.tasks_finished(true), deadline);
        }
        drop(_guard);
        self.shutdown(None);
    }

    fn shutdown(&mut self, timeout: Option<Duration>) {
        let shared = &self.handle.shared;
        let own_thread = shared
            .clusters
            .iter()
            .any(|c| c.cluster.host().is_own_processor())
            || context::is_blocking_thread_of(&self.handle);
        self.shut_down = true;
        if !own_thread {
            shut_down(&self.handle, timeout);
            return;
        }
        // This thread cannot wait for itself: a thread that is none of the
        // runtime's shuts it down, once this poll (or blocking closure)
        // returns.
        let handle = self.handle.clone();
        let handed_off = thread::Builder::new()
            .name("fairlane-shutdown".into())
            .spawn(move || shut_down(&handle, timeout));
        if let Err(e) = &handed_off {
            tracing::error!(
                "fairlane: could not start a thread to shut down a runtime dropped from its \
                 own task: {e}; it keeps running"
            );
        }
        // Already unwinding (the task panicked while it owned the runtime):
        // a second panic would abort the process.
        if !thread::panicking() {
            panic!(
                "a fairlane runtime cannot be dropped or shut down from one of its own tasks or \
                 blocking closures: the thread would wait for itself; move the runtime to another \
                 thread to drop it (this runtime is shut down on another thread once this task's \
                 poll ends)"
            );
        }
    }

    /// The cluster named `name`, if the runtime has one (the default
    /// cluster is `"default"`).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).cluster("io", 1).build()?;
    /// let io = rt.cluster("io").expect("built with it");
    /// let task = io.spawn(async { 3 });
    /// assert_eq!(rt.block_on(task).unwrap(), 3);
    /// assert!(rt.cluster("nope").is_none());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn cluster(&self, name: &str) -> Option<Cluster> {
        self.handle.shared.cluster_named(name)
    }

    /// Every cluster of the runtime, the default one first.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).cluster("io", 1).build()?;
    /// let names: Vec<String> = rt.clusters().iter().map(|c| c.name().to_owned()).collect();
    /// assert_eq!(names, ["default", "io"]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn clusters(&self) -> Vec<Cluster> {
        self.handle.shared.clusters()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if !self.shut_down {
            self.shutdown(None);
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("clusters", &self.clusters())
            .finish()
    }
}
