//! Tasks: spawning, joining, aborting and yielding.
//!
//! The common items are re-exported at the crate root, as in tokio.
//!
//! # Example
//! ```
//! let rt = fairlane::Runtime::builder().processors(2).build()?;
//! rt.block_on(async {
//!     let answer = fairlane::task::spawn(async { 6 * 7 });
//!     let stuck = fairlane::task::spawn(std::future::pending::<()>());
//!     stuck.abort();
//!     assert_eq!(answer.await.unwrap(), 42);
//!     assert!(stuck.await.unwrap_err().is_cancelled());
//! });
//! # Ok::<(), std::io::Error>(())
//! ```

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The identity of one processor of a fairlane runtime, as
/// [`current_processor`] and
/// [`Cluster::processors`](crate::Cluster::processors) give it.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(2).build()?;
/// let ids: Vec<fairlane::ProcessorId> = rt.handle().cluster().processors();
/// assert_eq!(ids.iter().map(|id| id.index()).collect::<Vec<_>>(), [0, 1]);
/// let on = rt.block_on(rt.spawn(async { fairlane::task::current_processor() })).unwrap();
/// assert!(ids.contains(&on.unwrap()));
/// # Ok::<(), std::io::Error>(())
/// ```
pub use fairlane_core::ProcessorId;
use fairlane_core::{AffinityError, Host};

pub(crate) mod coop;
mod join_set;
pub use join_set::JoinSet;
mod local;
pub use local::{AccessError, LocalKey, TaskLocalFuture};

use crate::runtime::context;

type Panic = Box<dyn Any + Send + 'static>;

/// Spawns a task on the current runtime and returns a handle to await its
/// output. Works from a task and from the future given to
/// [`Runtime::block_on`](crate::Runtime::block_on).
///
/// # Panics
/// Outside a runtime, with a message saying so; use
/// [`Handle::spawn`](crate::Handle::spawn) there.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(2).build()?;
/// let sum = rt.block_on(async {
///     let a = fairlane::spawn(async { 1 + 2 });
///     let b = fairlane::spawn(async { 3 + 4 });
///     a.await.unwrap() + b.await.unwrap()
/// });
/// assert_eq!(sum, 10);
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match context::with_current(|handle| handle.spawn(future)) {
        Some(join) => join,
        None => panic!(
            "fairlane::spawn must be called from within a fairlane runtime (a task, or the future \
             given to Runtime::block_on); from other threads use Handle::spawn"
        ),
    }
}

/// Runs the blocking closure `f` on a thread of the current runtime's
/// blocking pool, so that no processor waits for it, and returns a handle to
/// its result. The pool starts threads as jobs arrive (up to
/// [`Builder::max_blocking_threads`](crate::Builder::max_blocking_threads))
/// and lets idle ones exit after
/// [`Builder::thread_keep_alive`](crate::Builder::thread_keep_alive).
/// Inside `f`, [`Handle::current`](crate::Handle::current) works and
/// [`Handle::block_on`](crate::Handle::block_on) is allowed.
///
/// Aborting the handle cancels a job that has not started; one that is
/// running runs to its end (a thread cannot be interrupted), its result
/// discarded. Runtime shutdown drops jobs not started and waits for running
/// ones (`shutdown_timeout` bounds the wait).
///
/// # Panics
/// Outside a runtime, with a message saying so; use
/// [`Handle::spawn_blocking`](crate::Handle::spawn_blocking) there.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let contents = rt.block_on(async {
///     fairlane::task::spawn_blocking(|| std::fs::read_to_string("Cargo.toml")).await
/// });
/// assert!(contents.unwrap().unwrap().contains("[package]"));
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match context::with_current(|handle| handle.spawn_blocking(f)) {
        Some(join) => join,
        None => panic!(
            "fairlane::task::spawn_blocking must be called from within a fairlane runtime (a task, \
             the future given to Runtime::block_on, or a blocking closure); from other threads \
             use Handle::spawn_blocking"
        ),
    }
}

/// Runs the blocking closure `f` in place, on the calling thread, without
/// holding up the tasks queued on this thread's processor: the processor is
/// handed to a replacement thread for the duration of `f` (which finishes
/// the poll it is in before handing it back). Unlike
/// [`spawn_blocking`], `f` may borrow from the task. Outside a processor
/// (in `block_on`, a blocking closure, or any other thread) `f` just runs.
///
/// The task calling it is not polled while `f` runs; other tasks are, on the
/// replacement and on the other processors. Each call starts a thread, so
/// prefer [`spawn_blocking`] for many short calls.
///
/// # Example
/// With one processor, a task blocks on a channel that another task fills:
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// let waiter = rt.spawn(async move { fairlane::task::block_in_place(|| rx.recv().unwrap()) });
/// rt.spawn(async move { tx.send(7).unwrap() });
/// assert_eq!(rt.block_on(waiter).unwrap(), 7);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn block_in_place<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    crate::runtime::block_in_place(f)
}

/// Options for spawning a task, as tokio's `task::Builder`.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let handle = rt.block_on(async {
///     fairlane::task::Builder::new().background().spawn(async { 3 })
/// })?;
/// assert_eq!(rt.block_on(handle).unwrap(), 3);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
#[must_use = "a task::Builder does nothing until `spawn` is called"]
pub struct Builder {
    options: fairlane_core::SpawnOptions,
    name: Option<Arc<str>>,
}

/// A task's priority class, chosen with [`Builder::priority`].
///
/// # Example
/// ```
/// use fairlane::task::{Builder, Priority};
/// assert_eq!(Priority::default(), Priority::Normal);
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let low = Builder::new().priority(Priority::Low).spawn_on(async { "ran" }, rt.handle())?;
/// assert_eq!(rt.block_on(low).unwrap(), "ran");
/// # Ok::<(), std::io::Error>(())
/// ```
pub use fairlane_core::Priority;

impl Builder {
    /// A builder for an ordinary task.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let task = fairlane::task::Builder::new().spawn_on(async { 5 }, rt.handle())?;
    /// assert_eq!(rt.block_on(task).unwrap(), 5);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the task a background task: it never keeps the runtime alive.
    /// [`Runtime::shutdown_graceful`](crate::Runtime::shutdown_graceful) does
    /// not wait for it; it raises [`shutdown_requested`] for it once the other
    /// tasks have finished, and cancels it after the grace period.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// rt.block_on(async {
    ///     fairlane::task::Builder::new().background().spawn(async {
    ///         loop {
    ///             fairlane::yield_now().await; // housekeeping, forever
    ///         }
    ///     })
    /// })?;
    /// rt.shutdown_graceful(std::time::Duration::from_millis(10));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn background(mut self) -> Self {
        self.options.background = true;
        self
    }

    /// The task's priority class (default [`Priority::Normal`]). A priority
    /// shifts *when* a task runs, never *whether*: a ready normal or low task
    /// at the head of its lane waits at most
    /// [`Builder::priority_bound`](crate::Builder::priority_bound) polls of
    /// other classes' tasks on its processor (default 8), and processors help
    /// each other by age whatever the class. Yielding never raises a task's
    /// standing.
    ///
    /// # Example
    /// ```
    /// use fairlane::task::{Builder, Priority};
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let urgent = Builder::new().priority(Priority::High).spawn_on(async { "first" }, rt.handle())?;
    /// assert_eq!(rt.block_on(urgent).unwrap(), "first");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn priority(mut self, priority: Priority) -> Self {
        self.options.priority = priority;
        self
    }

    /// Restricts the task to the processors `allowed` of its cluster: it is
    /// only ever polled on one of them (helping and stealing processors
    /// outside the set never take it; it waits in a lane of its own so it
    /// never holds up the tasks behind it). A task woken on an allowed
    /// processor stays there; otherwise it goes to the processor that last
    /// ran it if allowed, else to the first allowed one. If every allowed
    /// processor is removed, the task loses its restriction and runs
    /// anywhere in its cluster. Restricted tasks run at normal priority.
    ///
    /// # Errors
    /// At spawn: a set naming no processor of the cluster, or a priority
    /// other than normal, is an `InvalidInput` error.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(2).build()?;
    /// let first = rt.handle().cluster().processors()[0];
    /// let task = fairlane::task::Builder::new()
    ///     .affinity([first])
    ///     .spawn_on(async { fairlane::task::current_processor() }, rt.handle())?;
    /// assert_eq!(rt.block_on(task).unwrap(), Some(first));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn affinity(mut self, allowed: impl IntoIterator<Item = ProcessorId>) -> Self {
        self.options.affinity = Some(allowed.into_iter().collect());
        self
    }

    /// Names the task; the name appears in its [`JoinError`]s and in its
    /// [`JoinHandle`]'s `Debug` output.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let task = fairlane::task::Builder::new()
    ///     .name("flusher")
    ///     .spawn_on(async { panic!("disk gone") }, rt.handle())?;
    /// let err = rt.block_on(task).unwrap_err();
    /// assert_eq!(err.to_string(), r#"task "flusher" panicked with message "disk gone""#);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Spawns `future` on the current runtime with these options.
    ///
    /// # Errors
    /// Outside a runtime (use [`spawn_on`](Self::spawn_on) there).
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::task::Builder::new().spawn(async {}).is_err());
    /// ```
    pub fn spawn<F>(self, future: F) -> std::io::Result<JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = crate::Handle::try_current()
            .map_err(|e| std::io::Error::other(format!("task::Builder::spawn: {e}")))?;
        self.spawn_on(future, &handle)
    }

    /// Spawns `future` on the runtime of `handle` with these options.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let task = fairlane::task::Builder::new().spawn_on(async { 1 }, rt.handle())?;
    /// assert_eq!(rt.block_on(task).unwrap(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_on<F>(
        self,
        future: F,
        handle: &crate::Handle,
    ) -> std::io::Result<JoinHandle<F::Output>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let mut task = handle.spawn_with(future, self.options).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("task::Builder: {e}"),
            )
        })?;
        task.name = self.name;
        Ok(task)
    }
}

/// The processor the calling task runs on, or `None` outside a task.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let id = rt.block_on(rt.spawn(async { fairlane::task::current_processor() })).unwrap();
/// assert_eq!(id, Some(rt.handle().cluster().processors()[0]));
/// assert_eq!(fairlane::task::current_processor(), None);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn current_processor() -> Option<ProcessorId> {
    context::with_current(|handle| {
        let p = handle.cluster.host().current_processor()?;
        handle.cluster.processor_id(p)
    })
    .flatten()
}

/// Restricts the calling task to the processors `allowed` of its cluster
/// (see [`Builder::affinity`]), or lifts the restriction with `None`. Takes
/// effect from the next time the task is scheduled: yield right after to
/// move at once.
///
/// # Errors
/// `InvalidInput` for a set naming no processor of the task's cluster or a
/// task with a priority other than normal; `Unsupported` outside a task.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(2).build()?;
/// let last = *rt.handle().cluster().processors().last().unwrap();
/// let on = rt.block_on(rt.spawn(async move {
///     fairlane::task::set_affinity(Some([last]))?;
///     fairlane::yield_now().await;
///     Ok::<_, std::io::Error>(fairlane::task::current_processor())
/// })).unwrap()?;
/// assert_eq!(on, Some(last));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn set_affinity(allowed: Option<impl IntoIterator<Item = ProcessorId>>) -> std::io::Result<()> {
    let allowed: Option<Arc<[ProcessorId]>> = allowed.map(|a| a.into_iter().collect());
    let result = context::with_current(|handle| handle.cluster.set_current_affinity(allowed));
    match result {
        Some(Ok(())) => Ok(()),
        Some(Err(AffinityError::NotInTask)) | None => Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            AffinityError::NotInTask.to_string(),
        )),
        Some(Err(e)) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            e.to_string(),
        )),
    }
}

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

/// Spawns `future` on `cluster`, catching its panics.
pub(crate) fn spawn_on<F>(
    cluster: &crate::runtime::ExecutorRef,
    future: F,
    options: fairlane_core::SpawnOptions,
) -> Result<JoinHandle<F::Output>, AffinityError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(JoinHandle {
        inner: cluster.spawn_cancellable(CatchUnwind::new(future), options)?,
        name: None,
    })
}

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

/// The user's future, polled inside `catch_unwind` so that a panicking task
/// becomes a [`JoinError`] and its processor keeps running, and dropped
/// inside `catch_unwind` too, as soon as the task is done (it completed,
/// panicked, or was aborted or cancelled by shutdown): the task cell
/// (`no_std`) cannot catch a panic of the destructor.
///
/// A destructor's panic is reported as a `tracing` warning and given to the
/// task's handle as the task's panic, as in tokio: the output of a future
/// that completed and then panicked when dropped is discarded. Of a future
/// that panicked in `poll` and again when dropped, the handle gets the
/// poll's panic.
struct CatchUnwind<F> {
    /// Dropped in place once `live` is false.
    future: ManuallyDrop<F>,
    live: bool,
}

impl<F> CatchUnwind<F> {
    fn new(future: F) -> Self {
        Self {
            future: ManuallyDrop::new(future),
            live: true,
        }
    }

    /// Drops the user's future in place (once; later calls do nothing),
    /// catching a panic in its destructor.
    fn drop_future(self: Pin<&mut Self>) -> Result<(), Panic> {
        // SAFETY: the future is only dropped in place here, never moved.
        let this = unsafe { self.get_unchecked_mut() };
        if !this.live {
            return Ok(());
        }
        // Cleared first: a destructor that panics has still dropped the
        // future (the rest of its drop glue runs while unwinding), so it
        // must not be dropped again.
        this.live = false;
        // SAFETY: `live` was set, so the future was not dropped yet, and it
        // is not used again. Dropping in place keeps the pinning promise.
        catch_unwind(AssertUnwindSafe(|| unsafe {
            ManuallyDrop::drop(&mut this.future)
        }))
    }
}

/// Reports a panic of a task future's destructor.
fn report_drop_panic(panic: &Panic, when: &'static str) {
    tracing::warn!(
        panic = panic_text(panic),
        "a task's future panicked while being dropped ({when}); the task's JoinHandle reports \
         the panic"
    );
}

/// The message of a panic payload, for diagnostics.
fn panic_text(panic: &Panic) -> &str {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "<not a string>"
    }
}

/// Drops `value`, a task's discarded output or a second panic payload,
/// without letting a panic in its destructor out.
fn drop_quietly<T>(value: T) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| drop(value))) {
        // A payload that panics when dropped would go on for ever.
        std::mem::forget(panic);
    }
}

/// A task's result as its cell keeps it until the `JoinHandle` takes it.
/// Nobody takes the output of a detached task: the task cell drops it, and
/// a panic in its destructor is caught here (and reported), as one in the
/// future's is.
struct TaskOutput<T>(ManuallyDrop<Result<T, Panic>>);

impl<T> TaskOutput<T> {
    fn new(result: Result<T, Panic>) -> Self {
        Self(ManuallyDrop::new(result))
    }

    fn into_inner(self) -> Result<T, Panic> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the result is taken once.
        unsafe { ManuallyDrop::take(&mut this.0) }
    }
}

impl<T> Drop for TaskOutput<T> {
    fn drop(&mut self) {
        // SAFETY: in `drop`: the result is not used again.
        let result = unsafe { ManuallyDrop::take(&mut self.0) };
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| drop(result))) {
            tracing::warn!(
                panic = panic_text(&panic),
                "a task's output panicked while being dropped (nobody awaited it)"
            );
            drop_quietly(panic);
        }
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = TaskOutput<F::Output>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: only a projection: the future is structurally pinned (never
        // moved out of `self`; dropped in place by `drop_future`).
        let this = unsafe { self.as_mut().get_unchecked_mut() };
        // The task is polled until it completes, never after; `live` is
        // cleared only when it completes (or is cancelled, after which it is
        // not polled either). A plain branch, no atomic.
        assert!(this.live, "a task's future polled after it finished");
        // SAFETY: as above; `live` says the future is still there.
        let future = unsafe { Pin::new_unchecked(&mut *this.future) };
        let result = match catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(value)) => Ok(value),
            Err(panic) => Err(panic),
        };
        // Done: drop the future now, where a panicking destructor is caught.
        Poll::Ready(TaskOutput::new(match (self.drop_future(), result) {
            (Ok(()), result) => result,
            (Err(panic), Ok(value)) => {
                report_drop_panic(&panic, "after it completed");
                drop_quietly(value);
                Err(panic)
            }
            (Err(second), Err(panic)) => {
                report_drop_panic(&second, "after its poll panicked");
                drop_quietly(second);
                Err(panic)
            }
        }))
    }
}

impl<F: Future> fairlane_core::Cancellable for CatchUnwind<F> {
    fn cancel(self: Pin<&mut Self>) -> Option<Self::Output> {
        match self.drop_future() {
            Ok(()) => None,
            Err(panic) => {
                report_drop_panic(&panic, "cancelled");
                Some(TaskOutput::new(Err(panic)))
            }
        }
    }
}

impl<F> Drop for CatchUnwind<F> {
    fn drop(&mut self) {
        // The task cell drops a future it never polled to its end only when
        // its runnable is dropped unrun (a cluster dropped without being
        // cancelled): no handle can get the panic then.
        // SAFETY: `self` is not moved again (it is being dropped).
        if let Err(panic) = unsafe { Pin::new_unchecked(self) }.drop_future() {
            report_drop_panic(&panic, "dropped by the task cell");
            drop_quietly(panic);
        }
    }
}

/// An owned permission to await a task's output. Dropping it detaches the
/// task, which runs on.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let handle = rt.spawn(async { "done" });
/// assert_eq!(rt.block_on(handle).unwrap(), "done");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct JoinHandle<T> {
    inner: fairlane_core::TaskHandle<TaskOutput<T>, crate::host::StdHost>,
    name: Option<Arc<str>>,
}

impl<T> JoinHandle<T> {
    /// Aborts the task: it is not polled again and its future is dropped. A
    /// task that already completed keeps its output; awaiting an aborted one
    /// gives a [`JoinError`] for which `is_cancelled()` holds (`is_panic()`
    /// if the future panicked when dropped).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// handle.abort();
    /// assert!(rt.block_on(handle).unwrap_err().is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn abort(&self) {
        self.inner.abort();
    }

    /// Whether the task has finished: completed, panicked, or been aborted.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// assert!(!handle.is_finished());
    /// handle.abort();
    /// while !handle.is_finished() { std::thread::yield_now(); }
    /// assert!(rt.block_on(handle).unwrap_err().is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// A handle that can abort the task from anywhere, without owning it.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// let abort = handle.abort_handle();
    /// std::thread::spawn(move || abort.abort()).join().unwrap();
    /// assert!(rt.block_on(handle).unwrap_err().is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle {
            inner: self.inner.abort_handle(),
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let out = std::task::ready!(Pin::new(&mut self.inner).poll(cx));
        Poll::Ready(match out.map(TaskOutput::into_inner) {
            Some(Ok(value)) => Ok(value),
            Some(Err(panic)) => Err(JoinError::panic(panic, self.name.clone())),
            None => Err(JoinError {
                repr: Repr::Cancelled,
                name: self.name.clone(),
            }),
        })
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("name", &self.name)
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// Aborts a task without owning it; see [`JoinHandle::abort_handle`].
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let handle = rt.spawn(std::future::pending::<()>());
/// let abort = handle.abort_handle();
/// abort.abort();
/// assert!(rt.block_on(handle).unwrap_err().is_cancelled());
/// assert!(abort.is_finished());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct AbortHandle {
    inner: fairlane_core::AbortHandle,
}

impl AbortHandle {
    /// Aborts the task; see [`JoinHandle::abort`].
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// handle.abort_handle().abort();
    /// assert!(rt.block_on(handle).unwrap_err().is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn abort(&self) {
        self.inner.abort();
    }

    /// Whether the task has finished.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(async { 1 });
    /// let abort = handle.abort_handle();
    /// assert_eq!(rt.block_on(handle).unwrap(), 1);
    /// assert!(abort.is_finished());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// Why a task produced no output: it panicked, or it was cancelled (aborted,
/// or dropped by runtime shutdown).
///
/// A future that panics when it is dropped is a panicking task too, whenever
/// it is dropped: once it completed (as in tokio, its output is then
/// discarded), once it panicked in `poll` (the error carries the poll's
/// panic), or when it is aborted or cancelled by shutdown. Such a panic
/// never ends the process, and the runtime reports it as a `tracing`
/// warning.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let err = rt.block_on(rt.spawn(async { panic!("boom") })).unwrap_err();
/// assert!(err.is_panic());
/// assert_eq!(*err.into_panic().downcast::<&str>().unwrap(), "boom");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct JoinError {
    repr: Repr,
    /// The task's name, if it was given one.
    name: Option<Arc<str>>,
}

enum Repr {
    Cancelled,
    /// The payload, and its message when it is a string.
    Panic(SyncPanic, Option<String>),
}

/// A panic payload that is only ever reached by value, which makes sharing a
/// `&JoinError` between threads harmless (as tokio's `JoinError` is `Sync`).
struct SyncPanic(Panic);

// SAFETY: `Sync` only matters for `&SyncPanic`, and no code reads the payload
// through a shared reference: it leaves only by value (`into_panic`,
// `try_into_panic`). The message is copied out when the error is made.
unsafe impl Sync for SyncPanic {}

impl JoinError {
    fn panic(payload: Panic, name: Option<Arc<str>>) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned());
        JoinError {
            repr: Repr::Panic(SyncPanic(payload), message),
            name,
        }
    }

    /// Whether the task was cancelled.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// handle.abort();
    /// let err = rt.block_on(handle).unwrap_err();
    /// assert!(err.is_cancelled() && !err.is_panic());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// Whether the task panicked.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let err = rt.block_on(rt.spawn(async { panic!("boom") })).unwrap_err();
    /// assert!(err.is_panic() && !err.is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(..))
    }

    /// The panic payload.
    ///
    /// # Panics
    /// If the task was cancelled rather than panicked.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let err = rt.block_on(rt.spawn(async { std::panic::panic_any(7u32) })).unwrap_err();
    /// assert_eq!(*err.into_panic().downcast::<u32>().unwrap(), 7);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("`JoinError::into_panic` called on a cancelled task's error")
    }

    /// The panic payload, or the error back if the task was cancelled.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// handle.abort();
    /// let err = rt.block_on(handle).unwrap_err();
    /// let err = err.try_into_panic().expect_err("cancelled, not panicked");
    /// assert!(err.is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(SyncPanic(panic), _) => Ok(panic),
            Repr::Cancelled => Err(self),
        }
    }

    fn panic_message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Panic(_, message) => message.as_deref(),
            Repr::Cancelled => None,
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("task ")?;
        if let Some(name) = &self.name {
            write!(f, "{name:?} ")?;
        }
        match (&self.repr, self.panic_message()) {
            (Repr::Cancelled, _) => f.write_str("was cancelled"),
            (Repr::Panic(..), Some(msg)) => write!(f, "panicked with message {msg:?}"),
            (Repr::Panic(..), None) => f.write_str("panicked"),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.repr, self.panic_message()) {
            (Repr::Cancelled, _) => f.write_str("JoinError::Cancelled"),
            (Repr::Panic(..), Some(msg)) => write!(f, "JoinError::Panic({msg:?})"),
            (Repr::Panic(..), None) => f.write_str("JoinError::Panic(..)"),
        }
    }
}

impl std::error::Error for JoinError {}
