//! Handles to a runtime, and entering one.

use std::fmt;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use super::{
    block_on, context, Cluster, ExecutorRef, Id, RuntimeFlavor, RuntimeMetrics, RuntimeShared,
};
use crate::io::driver::Driver;
use crate::io::IoBackend;
use crate::task::{self, spawn_on, JoinHandle};
use crate::time::clock::Clock;

/// A cheap, cloneable reference to a runtime, usable from any thread.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let from_inside = rt.block_on(async { fairlane::Handle::current() });
/// let task = from_inside.spawn(async { 7 });
/// assert_eq!(rt.block_on(task).unwrap(), 7);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct Handle {
    /// The cluster whose processors this handle's spawns go to.
    pub(crate) cluster: ExecutorRef,
    pub(crate) shared: Arc<RuntimeShared>,
}

// See `Runtime`'s unwind-safety.
impl std::panic::UnwindSafe for Handle {}
impl std::panic::RefUnwindSafe for Handle {}

/// The current runtime of a thread while it lives; see [`Handle::enter`].
/// Not `Send`: it must be dropped on the thread that entered.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::new()?;
/// let guard = rt.enter();
/// assert!(fairlane::Handle::try_current().is_ok());
/// drop(guard);
/// assert!(fairlane::Handle::try_current().is_err());
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "the runtime is current only while the guard lives"]
pub struct EnterGuard<'a> {
    _inner: context::EnterGuard,
    _handle: std::marker::PhantomData<&'a Handle>,
}

impl fmt::Debug for EnterGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnterGuard").finish_non_exhaustive()
    }
}

impl Handle {
    /// The handle of the runtime this thread is in (a task, or a `block_on`).
    ///
    /// # Panics
    /// Outside a runtime; see [`try_current`](Self::try_current).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.block_on(async { fairlane::Handle::current() });
    /// assert_eq!(handle.block_on(handle.spawn(async { 3 })).unwrap(), 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn current() -> Handle {
        match Self::try_current() {
            Ok(handle) => handle,
            Err(e) => panic!("{e}"),
        }
    }

    /// The handle of the current runtime, or an error outside one.
    ///
    /// # Example
    /// ```
    /// assert!(fairlane::Handle::try_current().is_err());
    /// ```
    pub fn try_current() -> Result<Handle, TryCurrentError> {
        context::with_current(Handle::clone).ok_or(TryCurrentError { _private: () })
    }

    /// Makes this runtime the current one of the calling thread until the
    /// guard drops, so that [`fairlane::spawn`](crate::spawn),
    /// [`Handle::current`] and I/O constructors (such as a socket's
    /// `from_std`) work on a thread that is not part of the runtime. Guards
    /// nest; dropping one restores what was current before it. The thread
    /// does not become a processor: it runs no tasks.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.handle().clone();
    /// let task = std::thread::spawn(move || {
    ///     let _guard = handle.enter();
    ///     fairlane::spawn(async { 6 * 7 })
    /// })
    /// .join()
    /// .unwrap();
    /// assert_eq!(rt.block_on(task).unwrap(), 42);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn enter(&self) -> EnterGuard<'_> {
        EnterGuard {
            _inner: context::enter_plain(self.clone()),
            _handle: std::marker::PhantomData,
        }
    }

    /// Spawns a task on this runtime; see [`fairlane::spawn`](crate::spawn).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let task = rt.handle().spawn(async { 1 });
    /// assert_eq!(rt.block_on(task).unwrap(), 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.spawn_with(future, fairlane_core::SpawnOptions::default()) {
            Ok(handle) => handle,
            Err(_) => unreachable!("default spawn options are always valid"),
        }
    }

    /// [`spawn`](Self::spawn) with the options of a `task::Builder`.
    pub(crate) fn spawn_with<F>(
        &self,
        future: F,
        options: fairlane_core::SpawnOptions,
    ) -> Result<JoinHandle<F::Output>, fairlane_core::AffinityError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_as(future, options, task::Id::next())
    }

    /// [`spawn_with`](Self::spawn_with) as task `id`.
    pub(crate) fn spawn_as<F>(
        &self,
        future: F,
        options: fairlane_core::SpawnOptions,
        id: task::Id,
    ) -> Result<JoinHandle<F::Output>, fairlane_core::AffinityError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        spawn_on(&self.cluster, future, options, id)
    }

    /// Runs the blocking closure `f` on the runtime's blocking pool; see
    /// [`fairlane::task::spawn_blocking`](crate::task::spawn_blocking).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.handle().clone();
    /// let sum = std::thread::spawn(move || handle.spawn_blocking(|| (1..=4).sum::<u32>()))
    ///     .join()
    ///     .unwrap();
    /// assert_eq!(rt.block_on(sum).unwrap(), 10);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        // The closure runs as the task that awaits its result.
        let id = task::Id::next();
        let result = self.shared.blocking.run(self, id, f);
        match self.spawn_as(result, fairlane_core::SpawnOptions::default(), id) {
            Ok(handle) => handle,
            Err(_) => unreachable!("default spawn options are always valid"),
        }
    }

    /// Runs `future` on the calling thread; see [`Runtime::block_on`](crate::Runtime::block_on).
    /// On a current-thread runtime this does not run the runtime's tasks
    /// (as with tokio): they run while some thread is in
    /// `Runtime::block_on`, so a future that waits for them needs one.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.handle().clone();
    /// let out = std::thread::spawn(move || handle.block_on(async { 9 })).join().unwrap();
    /// assert_eq!(out, 9);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        let _guard = context::enter(self.clone());
        block_on::run(future, &self.shared.clock)
    }

    /// Which flavor of runtime this is a handle to.
    ///
    /// # Example
    /// ```
    /// use fairlane::runtime::{Builder, Handle, RuntimeFlavor};
    ///
    /// let rt = Builder::new_current_thread().build()?;
    /// let flavor = rt.block_on(async { Handle::current().runtime_flavor() });
    /// assert_eq!(flavor, RuntimeFlavor::CurrentThread);
    /// let rt = Builder::new_multi_thread().build()?;
    /// assert_eq!(rt.handle().runtime_flavor(), RuntimeFlavor::MultiThread);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn runtime_flavor(&self) -> RuntimeFlavor {
        self.shared.flavor
    }

    /// The [`Id`] of this handle's runtime.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let inside = rt.block_on(rt.spawn(async { fairlane::Handle::current().id() })).unwrap();
    /// assert_eq!(inside, rt.handle().id());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn id(&self) -> Id {
        self.shared.id
    }

    /// The runtime's name, given with
    /// [`Builder::name`](crate::runtime::Builder::name) (or the macros'
    /// `name = "…"`); `None` if it has none.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::runtime::Builder::new_current_thread().name("mine").build()?;
    /// assert_eq!(rt.handle().name(), Some("mine"));
    /// let unnamed = fairlane::runtime::Builder::new_current_thread().build()?;
    /// assert_eq!(unnamed.handle().name(), None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.shared.name.as_deref()
    }

    /// The I/O backend of this runtime; see [`Runtime::io_backend`](crate::Runtime::io_backend).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// assert_eq!(rt.handle().io_backend(), rt.io_backend());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn io_backend(&self) -> IoBackend {
        self.cluster.host().io().backend()
    }

    /// The runtime's clock.
    pub(crate) fn clock(&self) -> &Arc<Clock> {
        &self.shared.clock
    }

    /// The runtime's I/O driver.
    pub(crate) fn io_driver(&self) -> &Arc<Driver> {
        self.cluster.host().io()
    }

    /// The counters of the cluster this spawns onto (the default cluster
    /// for a runtime, a named one for a handle from [`Cluster::handle`]):
    /// its processors and its live tasks; see [`RuntimeMetrics`].
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// rt.block_on(rt.spawn(async {})).unwrap();
    /// assert!(rt.handle().metrics().processors[0].polls >= 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn metrics(&self) -> RuntimeMetrics {
        RuntimeMetrics {
            processors: self
                .cluster
                .processor_ids()
                .into_iter()
                .map(|id| self.cluster.counters(id.index()))
                .collect(),
            alive_tasks: self.cluster.live_tasks(),
        }
    }

    /// The cluster this handle spawns onto: the default cluster for
    /// [`Runtime::handle`](crate::Runtime::handle), the current task's cluster for
    /// [`Handle::current`] inside a task.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// assert_eq!(rt.handle().cluster().name(), "default");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn cluster(&self) -> Cluster {
        let index = self
            .shared
            .clusters
            .iter()
            .position(|c| Arc::ptr_eq(&c.cluster, &self.cluster))
            .expect("a handle's cluster belongs to its runtime");
        Cluster::new(self.shared.clone(), index)
    }
}

impl Handle {
    pub(crate) fn for_cluster(shared: Arc<RuntimeShared>, index: usize) -> Handle {
        Handle {
            cluster: shared.clusters[index].cluster.clone(),
            shared,
        }
    }

    /// Runs `future` on the calling thread as `Runtime::block_on` does (the
    /// caller has entered the runtime): on a current-thread runtime this
    /// thread runs the processor while the future waits. Gives up (`None`)
    /// once `deadline` has passed.
    pub(crate) fn drive_until<F: Future>(
        &self,
        future: F,
        deadline: Option<Instant>,
    ) -> Option<F::Output> {
        match self.shared.flavor {
            RuntimeFlavor::CurrentThread => block_on::drive_until(future, deadline, self),
            RuntimeFlavor::MultiThread => block_on::run_until(future, deadline, self.clock()),
        }
    }

    pub(crate) fn same_runtime(&self, other: &Handle) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Runs processor `p` of this handle's cluster on the calling thread
    /// until it is shut down, removed or (for a stand-in) released: as its
    /// own thread (`owner`) or as a `block_in_place` replacement.
    pub(crate) fn run_processor(&self, p: usize, owner: bool) {
        let cluster = &self.cluster;
        cluster.host().register_current(p);
        let guard = context::enter(self.clone());
        if owner {
            // This thread lives until its processor stops for good, and the
            // I/O it submitted is reaped before then
            // (`Host::processor_stopping`): it may submit I/O itself.
            crate::io::driver::mark_stable_thread();
            cluster.run_processor(p);
        } else {
            cluster.run_stand_in(p);
        }
        cluster.host().unregister_current();
        drop(guard);
    }

    /// Starts the thread of processor `p` of this handle's cluster.
    pub(crate) fn start_processor_thread(&self, p: usize) -> io::Result<()> {
        let cluster = self.cluster();
        let named = |prefix: &str| match cluster.name() {
            "default" => format!("{prefix}-{p}"),
            cluster => format!("{prefix}-{cluster}-{p}"),
        };
        let handle = self.clone();
        self.shared
            .spawn_processor_thread(self, named, move || handle.run_processor(p, true))
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("cluster", &self.cluster())
            .finish()
    }
}

/// [`Handle::try_current`] was called outside a runtime.
///
/// # Example
/// ```
/// let err = fairlane::Handle::try_current().unwrap_err();
/// assert!(err.to_string().contains("outside"));
/// ```
#[derive(Debug)]
pub struct TryCurrentError {
    _private: (),
}

impl fmt::Display for TryCurrentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "there is no fairlane runtime here: this was called outside a task and outside \
             Runtime::block_on; pass a Handle to this thread instead",
        )
    }
}

impl std::error::Error for TryCurrentError {}
