//! The runtime: processors as OS threads around a `fairlane-core` cluster,
//! its builder, and handles to it.

mod block_on;
mod blocking;
mod cluster;
pub(crate) mod context;

use std::fmt;
use std::future::Future;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use fairlane_core::{Config, Executor};

pub(crate) use self::blocking::block_in_place;
use self::blocking::BlockingPool;
pub use self::cluster::{Cluster, MigrateHere};
use self::cluster::{NamedExecutor, ProcessorThreads};
use crate::host::StdHost;
use crate::io::driver::Driver;
use crate::io::IoBackend;
use crate::task::{spawn_on, JoinHandle};
use crate::time::clock::Clock;

/// A shared reference to a cluster's executor.
pub(crate) type ExecutorRef = Arc<Executor<StdHost>>;

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
    handle: Handle,
    /// Set once `shutdown` ran.
    shut_down: bool,
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
    /// spawns run on the processors.
    ///
    /// # Panics
    /// When called from a task or from inside another `block_on`.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// assert_eq!(rt.block_on(async { "hi" }), "hi");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.handle.block_on(future)
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
                block_on::run(
                    entry.cluster.tasks_finished(false),
                    &self.handle.shared.clock,
                );
            }
        }
        self.handle.shared.signal.raise();
        let deadline = Some(Instant::now() + grace);
        for entry in clusters.iter() {
            block_on::run_until(
                entry.cluster.tasks_finished(true),
                deadline,
                &self.handle.shared.clock,
            );
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

/// Shuts the runtime down: closes its clusters, waits at most `timeout` for
/// the processors to finish the polls they are in, cancels every task,
/// stops the blocking pool and the I/O driver. Not on one of its own
/// threads.
fn shut_down(handle: &Handle, timeout: Option<Duration>) {
    let shared = &handle.shared;
    for entry in shared.clusters.iter() {
        entry.cluster.shutdown();
    }
    let deadline = timeout.map(|t| Instant::now() + t);
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

/// Configures and builds a [`Runtime`]. Methods take and return `&mut Self`,
/// as tokio's builder does.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder()
///     .processors(2)
///     .lanes_per_processor(2)
///     .help_period(8)
///     .help_factor_log2(1)
///     .thread_name("worker")
///     .build()?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    config: Config,
    /// Clusters besides the default one: name and processors.
    clusters: Vec<(String, usize)>,
    /// Processor slots per cluster, if set.
    max_processors: Option<usize>,
    thread_name: String,
    max_blocking_threads: usize,
    thread_keep_alive: Duration,
    io_backend: Option<IoBackend>,
    start_paused: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// Defaults: one processor per available core, 2 lanes each, a help check
    /// every 8 pops, helping lanes twice as old as one's own.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Builder::new().build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> Self {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            config: Config::new(cores),
            clusters: Vec::new(),
            max_processors: None,
            thread_name: "fairlane-processor".into(),
            max_blocking_threads: 512,
            thread_keep_alive: Duration::from_secs(10),
            io_backend: None,
            start_paused: false,
        }
    }

    /// Starts the runtime with its clock paused (default false), as
    /// [`time::pause`](crate::time::pause) called before any task runs:
    /// [`time::Instant::now`](crate::time::Instant::now) stands still, and
    /// timers fire when [`time::advance`](crate::time::advance) moves the
    /// clock or, once the whole runtime is idle, at once by auto-advance.
    /// For tests; `#[fairlane::test(start_paused = true)]` sets it. The
    /// clock then starts at a whole millisecond of the runtime's timers, so
    /// sleeps of whole milliseconds end exactly at their deadlines.
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// use fairlane::time::{sleep, Instant};
    /// let rt = fairlane::Runtime::builder().processors(2).start_paused(true).build()?;
    /// rt.block_on(async {
    ///     let start = Instant::now();
    ///     sleep(Duration::from_secs(24 * 3600)).await; // returns at once
    ///     assert_eq!(Instant::now() - start, Duration::from_secs(24 * 3600));
    /// });
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start_paused(&mut self, paused: bool) -> &mut Self {
        self.start_paused = paused;
        self
    }

    /// Forces the I/O backend. Without it, the environment variable
    /// `FAIRLANE_IO_BACKEND` (`io_uring` or `fallback`) decides, and without
    /// that io_uring is used where the kernel allows it. `build` fails if
    /// io_uring is forced but unavailable.
    ///
    /// # Example
    /// ```
    /// use fairlane::io::IoBackend;
    /// let rt = fairlane::Runtime::builder().io_backend(IoBackend::Fallback).build()?;
    /// assert_eq!(rt.io_backend(), IoBackend::Fallback);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn io_backend(&mut self, backend: IoBackend) -> &mut Self {
        self.io_backend = Some(backend);
        self
    }

    /// Number of processors (OS threads running tasks). At least 1.
    ///
    /// # Example
    /// ```
    /// let err = fairlane::Runtime::builder().processors(0).build().unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// ```
    pub fn processors(&mut self, n: usize) -> &mut Self {
        self.config.processors = n;
        self
    }

    /// Adds a cluster named `name` with `processors` processors of its own,
    /// besides the default cluster (named `"default"`, sized by
    /// [`processors`](Self::processors)). Tasks run only on the processors
    /// of their cluster; [`Runtime::cluster`] finds it by name. Names must be
    /// unique and processors at least 1.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).cluster("background", 1).build()?;
    /// assert_eq!(rt.clusters().len(), 2);
    /// let err = fairlane::Runtime::builder().cluster("default", 1).build().unwrap_err();
    /// assert!(err.to_string().contains("default"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn cluster(&mut self, name: impl Into<String>, processors: usize) -> &mut Self {
        self.clusters.push((name.into(), processors));
        self
    }

    /// Processor slots of every cluster: the most processors a cluster can
    /// have at once through [`Cluster::add_processor`] (default: as many as
    /// it starts with, or the machine's cores if more). At least each
    /// cluster's starting processors, at most 4096. Each slot costs about
    /// 1.5 KiB.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).max_processors(4).build()?;
    /// let cluster = rt.handle().cluster();
    /// let added = cluster.add_processor()?;
    /// assert_eq!(cluster.processors().len(), 2);
    /// cluster.remove_processor(added)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn max_processors(&mut self, n: usize) -> &mut Self {
        self.max_processors = Some(n);
        self
    }

    /// Normal-priority lanes each processor owns (default 2). At least 1.
    /// Each processor also has one lane per other priority class.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).lanes_per_processor(4).build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn lanes_per_processor(&mut self, n: usize) -> &mut Self {
        self.config.lanes_per_processor = n;
        self
    }

    /// A help target is drawn every `pops` pops and checked on the next one
    /// (default 8). 0 disables helping: a task behind a processor stuck in a
    /// task that never yields then waits until that processor is free.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(2).help_period(4).build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn help_period(&mut self, pops: u32) -> &mut Self {
        self.config.help_period = pops;
        self
    }

    /// A processor helps another when `their age / 2^factor > own age`
    /// (default 1: twice as old). At most 63. A processor that keeps
    /// scheduling is helped so only at one check in 8; at the others, only
    /// once it has not scheduled for longer than the helper's own age and
    /// than the helper's own last 32 or so iterations (it is stuck in a
    /// task, or its thread is not running).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(2).help_factor_log2(2).build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn help_factor_log2(&mut self, factor: u32) -> &mut Self {
        self.config.help_factor_log2 = factor;
        self
    }

    /// Rounds of a short spin (64 pause hints each, looking for work
    /// between them) a processor makes before it goes to sleep (default
    /// 4; 0 sleeps at once). Spinning saves a sleep and wake-up when work
    /// arrives right away, and costs CPU that other threads of a shared
    /// machine could use when it does not.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(2).spin_rounds(0).build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn spin_rounds(&mut self, rounds: u32) -> &mut Self {
        self.config.spin_rounds = rounds;
        self
    }

    /// How long, in clock ticks of the scheduler (the time-stamp counter
    /// on x86_64, nanoseconds elsewhere), the tasks made ready by a
    /// processor's own I/O and timers may wait on its lanes before a
    /// sleeping processor is woken to share them; also the most its oldest
    /// task may have waited for it to be handed the work of a processor
    /// that would otherwise wake up for it (default `1 << 22`, about 1.6 ms
    /// at 2.6 GHz). Lower spreads a server's connections over more
    /// processors sooner; higher keeps them on fewer, with fewer wake-ups.
    /// See `fairlane-core`'s `idle.md`, "Kept tasks".
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(2).grow_after(1 << 20).build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn grow_after(&mut self, ticks: u64) -> &mut Self {
        self.config.grow_after = ticks;
        self
    }

    /// How many polls of other classes' tasks a ready normal- or
    /// low-priority task at the head of its lane waits at most on its
    /// processor (default 8; at least 1). See
    /// [`task::Builder::priority`](crate::task::Builder::priority).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).priority_bound(4).build()?;
    /// let err = fairlane::Runtime::builder().priority_bound(0).build().unwrap_err();
    /// assert!(err.to_string().contains("priority_bound"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn priority_bound(&mut self, polls: u32) -> &mut Self {
        self.config.priority_bound = polls;
        self
    }

    /// Prefix of the processor threads' names (`{name}-{index}`).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).thread_name("io").build()?;
    /// let name = rt.block_on(rt.spawn(async { std::thread::current().name().map(String::from) }));
    /// assert_eq!(name.unwrap().as_deref(), Some("io-0"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.thread_name = name.into();
        self
    }

    /// Most threads the blocking pool may run at once (default 512, as
    /// tokio). At least 1. Jobs beyond it wait in a queue.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).max_blocking_threads(4).build()?;
    /// let err = fairlane::Runtime::builder().max_blocking_threads(0).build().unwrap_err();
    /// assert!(err.to_string().contains("max_blocking_threads"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn max_blocking_threads(&mut self, n: usize) -> &mut Self {
        self.max_blocking_threads = n;
        self
    }

    /// How long an idle blocking-pool thread waits for work before it exits
    /// (default 10 s).
    ///
    /// # Example
    /// ```
    /// use std::time::Duration;
    /// let rt = fairlane::Runtime::builder().thread_keep_alive(Duration::from_millis(100)).build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn thread_keep_alive(&mut self, keep_alive: Duration) -> &mut Self {
        self.thread_keep_alive = keep_alive;
        self
    }

    /// Builds the runtime and starts its processors.
    ///
    /// # Errors
    /// `InvalidInput` naming the setting when one is out of range; the
    /// operating system's error when a thread cannot be started.
    ///
    /// # Example
    /// ```
    /// let err = fairlane::Runtime::builder().lanes_per_processor(0).build().unwrap_err();
    /// assert!(err.to_string().contains("lanes_per_processor"));
    /// ```
    pub fn build(&mut self) -> io::Result<Runtime> {
        let invalid = |message: String| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid fairlane runtime setting: {message}"),
            )
        };
        if self.max_blocking_threads == 0 {
            return Err(invalid(
                "max_blocking_threads must be at least 1 (got 0)".into(),
            ));
        }
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        let backend = crate::io::select(self.io_backend)?;
        let backend_requested = self.io_backend.is_some()
            || std::env::var(crate::io::ENV_VAR).is_ok_and(|v| !v.trim().is_empty());
        let mut specs = vec![("default".to_owned(), self.config.processors)];
        for (name, processors) in &self.clusters {
            if specs.iter().any(|(n, _)| n == name) {
                return Err(invalid(format!(
                    "cluster names must be unique (\"{name}\" is given twice; \"default\" is the default cluster's)"
                )));
            }
            specs.push((name.clone(), *processors));
        }
        let mut clusters = Vec::with_capacity(specs.len());
        // One clock for every cluster's timers.
        let clock = Clock::new(self.start_paused);
        for (name, processors) in specs {
            let mut config = self.config.clone();
            config.processors = processors;
            config.max_processors = match self.max_processors {
                Some(max) => max,
                None => processors.max(cores).min(fairlane_core::MAX_PROCESSORS),
            };
            config.validate().map_err(|e| {
                invalid(if name == "default" {
                    e.to_string()
                } else {
                    format!("cluster \"{name}\": {e}")
                })
            })?;
            // One driver per cluster: its rings are indexed by the cluster's
            // processor slots; those of processors added later are made when
            // their threads start.
            let driver = match Driver::with_clock(backend, processors, clock.clone()) {
                // io_uring was chosen by the probe, not asked for, and a
                // ring cannot be set up after all (a limit on rings or
                // locked memory, a sandbox): run without it.
                Err(e) if backend == IoBackend::IoUring && !backend_requested => {
                    tracing::warn!(error = %e, "fairlane falls back from io_uring");
                    Driver::with_clock(IoBackend::Fallback, processors, clock.clone())?
                }
                driver => driver?,
            };
            let host = StdHost::new(driver);
            let cluster = Executor::new(config, host).map_err(|e| invalid(e.to_string()))?;
            clusters.push(NamedExecutor {
                name: name.into(),
                cluster,
            });
        }
        clock.attach(
            &clusters
                .iter()
                .map(|entry: &NamedExecutor| entry.cluster.clone())
                .collect::<Vec<_>>(),
        );
        let shared = Arc::new(RuntimeShared {
            clock,
            clusters,
            blocking: Arc::new(BlockingPool::new(
                self.max_blocking_threads,
                self.thread_keep_alive,
                self.thread_name.clone(),
            )),
            signal: Arc::default(),
            threads: ProcessorThreads::default(),
            thread_name: self.thread_name.clone(),
        });
        let runtime = Runtime {
            handle: Handle::for_cluster(shared.clone(), 0),
            shut_down: false,
        };
        for index in 0..shared.clusters.len() {
            let handle = Handle::for_cluster(shared.clone(), index);
            for id in handle.cluster.processor_ids() {
                // On failure, `runtime`'s drop stops the threads started so far.
                handle.start_processor_thread(id.index())?;
            }
        }
        Ok(runtime)
    }
}

/// Waits on `cvar` until `done` holds for the guarded state or `deadline`
/// passes; returns the guard and whether `done` holds.
pub(crate) fn wait_until<'a, T>(
    cvar: &Condvar,
    mut guard: MutexGuard<'a, T>,
    deadline: Option<Instant>,
    done: impl Fn(&T) -> bool,
) -> (MutexGuard<'a, T>, bool) {
    // Poisoning: the guarded counters stay consistent whatever panicked.
    while !done(&guard) {
        guard = match deadline {
            None => cvar.wait(guard).unwrap_or_else(|e| e.into_inner()),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return (guard, false);
                }
                cvar.wait_timeout(guard, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
    }
    (guard, true)
}

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

/// What all clusters of a runtime share.
pub(crate) struct RuntimeShared {
    /// The clock of every cluster's timers.
    pub(crate) clock: Arc<Clock>,
    /// The default cluster first.
    pub(crate) clusters: Vec<NamedExecutor>,
    pub(crate) blocking: Arc<BlockingPool>,
    pub(crate) signal: Arc<ShutdownSignal>,
    pub(crate) threads: ProcessorThreads,
    pub(crate) thread_name: String,
}

/// Raised by a graceful shutdown once only background tasks are left;
/// `fairlane::task::shutdown_requested` waits for it.
#[derive(Default)]
pub(crate) struct ShutdownSignal {
    raised: std::sync::atomic::AtomicBool,
    waiters: Mutex<Vec<std::task::Waker>>,
}

impl ShutdownSignal {
    fn raise(&self) {
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
        spawn_on(&self.cluster, future, options)
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
        let result = self.shared.blocking.run(self, f);
        self.spawn(result)
    }

    /// Runs `future` on the calling thread; see [`Runtime::block_on`].
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

    /// The I/O backend of this runtime; see [`Runtime::io_backend`].
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
    /// [`Runtime::handle`], the current task's cluster for
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
        let name = match self.cluster().name() {
            "default" => format!("{}-{p}", self.shared.thread_name),
            cluster => format!("{}-{cluster}-{p}", self.shared.thread_name),
        };
        let handle = self.clone();
        self.shared
            .spawn_processor_thread(name, move || handle.run_processor(p, true))
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

/// The counters of one cluster (tokio's name for the type, which there
/// covers the runtime's only cluster): per processor, and its live tasks.
/// A runtime with several clusters has one of these for each, from each
/// cluster's [`Handle::metrics`].
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(2).build()?;
/// let polls: u64 = rt.metrics().processors.iter().map(|p| p.polls).sum();
/// let parked = rt.spawn(std::future::pending::<()>());
/// assert_eq!(rt.metrics().alive_tasks, 1);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RuntimeMetrics {
    /// One entry per processor.
    pub processors: Vec<ProcessorMetrics>,
    /// Tasks spawned on the cluster whose future has not been dropped yet
    /// (tokio's `num_alive_tasks`). A task that moved to another cluster
    /// ([`Cluster::migrate_here`](crate::Cluster::migrate_here))
    /// still counts where it was spawned.
    pub alive_tasks: usize,
}

/// One processor's entry in [`RuntimeMetrics::processors`].
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// assert_eq!(rt.block_on(rt.spawn(async { 1 })).unwrap(), 1);
/// let metrics: fairlane::ProcessorMetrics = rt.metrics().processors[0];
/// assert!(metrics.polls >= 1);
/// # Ok::<(), std::io::Error>(())
/// ```
pub use fairlane_core::ProcessorCounters as ProcessorMetrics;
