//! The runtime's builder: tokio's settings here, fairlane's own in
//! `builder/scheduling.rs`.

mod scheduling;

use std::io;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use fairlane_core::{Config, Executor};

use super::blocking::BlockingPool;
use super::cluster::{NamedExecutor, ProcessorThreads};
use super::current_thread::Seat;
use super::threads::{ThreadName, ThreadSpec};
use super::{Handle, Id, Runtime, RuntimeFlavor, RuntimeShared};
use crate::host::StdHost;
use crate::io::driver::Driver;
use crate::io::IoBackend;
use crate::time::clock::Clock;

/// Configures and builds a [`Runtime`]. Methods take and return `&mut Self`,
/// as tokio's builder does.
///
/// Start from [`new_multi_thread`](Self::new_multi_thread) (processors on
/// threads of their own, the default) or
/// [`new_current_thread`](Self::new_current_thread) (one processor, driven
/// by the thread in `block_on`), as with tokio. tokio's settings come
/// first below; fairlane's own (clusters, lanes, helping, priorities, the
/// I/O backend) follow.
///
/// # Example
/// ```
/// use fairlane::runtime::Builder;
///
/// let rt = Builder::new_multi_thread()
///     .worker_threads(2)
///     .enable_all()
///     .thread_name("worker")
///     .lanes_per_processor(2)
///     .build()?;
/// assert_eq!(rt.block_on(rt.spawn(async { 1 + 1 })).unwrap(), 2);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    flavor: RuntimeFlavor,
    config: Config,
    /// Clusters besides the default one: name and processors.
    clusters: Vec<(String, usize)>,
    /// Processor slots per cluster, if set.
    max_processors: Option<usize>,
    threads: ThreadSpec,
    max_blocking_threads: usize,
    /// Start the tokio bridge (feature `tokio-compat`).
    #[cfg(feature = "tokio-compat")]
    tokio_compat: bool,
    thread_keep_alive: Duration,
    io_backend: Option<IoBackend>,
    start_paused: bool,
    /// Accepted for tokio's sake; see `global_queue_interval`.
    global_queue_interval: Option<u32>,
    /// The runtime's name (`Handle::name`).
    name: Option<String>,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    /// A builder for a multi-thread runtime, as
    /// [`new_multi_thread`](Self::new_multi_thread). Defaults: one processor
    /// per available core, 2 lanes each, a help check every 8 pops, helping
    /// lanes twice as old as one's own.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Builder::new().build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> Self {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            flavor: RuntimeFlavor::MultiThread,
            config: Config::new(cores),
            clusters: Vec::new(),
            max_processors: None,
            threads: ThreadSpec::default(),
            max_blocking_threads: 512,
            #[cfg(feature = "tokio-compat")]
            tokio_compat: true,
            thread_keep_alive: Duration::from_secs(10),
            io_backend: None,
            start_paused: false,
            global_queue_interval: None,
            name: None,
        }
    }

    /// A builder for a multi-thread runtime: processors on threads of their
    /// own (one per available core unless
    /// [`worker_threads`](Self::worker_threads) says otherwise) run the
    /// tasks, whether or not any thread is in `block_on`.
    ///
    /// # Example
    /// ```
    /// use fairlane::runtime::{Builder, RuntimeFlavor};
    /// let rt = Builder::new_multi_thread().worker_threads(2).build()?;
    /// assert_eq!(rt.handle().runtime_flavor(), RuntimeFlavor::MultiThread);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new_multi_thread() -> Self {
        Self::new()
    }

    /// A builder for a current-thread runtime, as tokio's: its one
    /// processor is the thread inside [`Runtime::block_on`]. Tasks run
    /// there, and only while some thread is in `Runtime::block_on`: a task
    /// spawned before, or from another thread, runs once `block_on` is
    /// called. Between `block_on` calls nothing runs, timers included. When
    /// several threads call `Runtime::block_on` at once, one drives the
    /// tasks and the others wait for their own futures (and take over
    /// when it returns). [`Handle::block_on`] does not drive the tasks, as
    /// with tokio. The runtime starts no thread of its own but the
    /// blocking pool's.
    ///
    /// Settings about more processors (`worker_threads`, `processors`,
    /// `max_processors`, `lanes_per_processor`) have no effect, and
    /// [`cluster`](Self::cluster) makes `build` fail.
    ///
    /// # Example
    /// ```
    /// use fairlane::runtime::{Builder, RuntimeFlavor};
    /// let rt = Builder::new_current_thread().enable_all().build()?;
    /// let caller = std::thread::current().id();
    /// let task = rt.spawn(async { std::thread::current().id() });
    /// // The task runs on the thread in `block_on`.
    /// assert_eq!(rt.block_on(task).unwrap(), caller);
    /// assert_eq!(rt.handle().runtime_flavor(), RuntimeFlavor::CurrentThread);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new_current_thread() -> Self {
        let mut builder = Self::new();
        builder.flavor = RuntimeFlavor::CurrentThread;
        builder
    }

    /// Accepted for tokio's sake: fairlane's I/O and timers are always on.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::runtime::Builder::new_current_thread().enable_all().build()?;
    /// rt.block_on(fairlane::time::sleep(std::time::Duration::from_millis(1)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn enable_all(&mut self) -> &mut Self {
        self
    }

    /// Accepted for tokio's sake: fairlane's I/O driver is always on.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::runtime::Builder::new_multi_thread().enable_io().build()?;
    /// rt.block_on(async { fairlane::net::UdpSocket::bind("127.0.0.1:0").await })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn enable_io(&mut self) -> &mut Self {
        self
    }

    /// Accepted for tokio's sake: fairlane's timers are always on.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::runtime::Builder::new_multi_thread().enable_time().build()?;
    /// rt.block_on(fairlane::time::sleep(std::time::Duration::from_millis(1)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn enable_time(&mut self) -> &mut Self {
        self
    }

    /// tokio's name for [`processors`](Self::processors): the number of
    /// processors (worker threads) of a multi-thread runtime. No effect on a
    /// current-thread runtime, as with tokio. At least 1: `build` fails
    /// with `InvalidInput` for 0.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::runtime::Builder::new_multi_thread().worker_threads(3).build()?;
    /// assert_eq!(rt.metrics().processors.len(), 3);
    /// let err = fairlane::runtime::Builder::new_multi_thread().worker_threads(0).build();
    /// assert_eq!(err.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn worker_threads(&mut self, n: usize) -> &mut Self {
        self.processors(n)
    }

    /// Names the threads the runtime starts, from this prefix: processors
    /// `{name}-{index}` (`{name}-{cluster}-{index}` in a named cluster),
    /// blocking-pool threads `{name}-blocking-{n}` (default prefix
    /// `fairlane-processor`). tokio gives every thread the name itself; the
    /// suffixes tell fairlane's threads apart. For names of your own, see
    /// [`thread_name_fn`](Self::thread_name_fn).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).thread_name("io").build()?;
    /// let name = rt.block_on(rt.spawn(async { std::thread::current().name().map(String::from) }));
    /// assert_eq!(name.unwrap().as_deref(), Some("io-0"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn thread_name(&mut self, name: impl Into<String>) -> &mut Self {
        self.threads.name = ThreadName::Prefix(name.into());
        self
    }

    /// Names the runtime, as tokio's option of that name:
    /// [`Handle::name`](crate::runtime::Handle::name) returns it (a runtime
    /// has no name unless given one). The name is the runtime's, not its
    /// threads' (see [`thread_name`](Self::thread_name)).
    ///
    /// # Panics
    /// If `name` is empty or only white space (at the caller, as tokio's).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::runtime::Builder::new_multi_thread()
    ///     .worker_threads(1)
    ///     .name("ingest")
    ///     .build()?;
    /// assert_eq!(rt.handle().name(), Some("ingest"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn name(&mut self, name: impl Into<String>) -> &mut Self {
        let name = name.into();
        assert!(
            !name.trim().is_empty(),
            "a runtime name must not be empty or only white space"
        );
        self.name = Some(name);
        self
    }

    /// Names every thread the runtime starts (processors, blocking-pool
    /// threads, `block_in_place` replacements) by calling `f` on the
    /// starting side, as tokio's option of that name; replaces
    /// [`thread_name`](Self::thread_name).
    ///
    /// # Example
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// static NEXT: AtomicUsize = AtomicUsize::new(0);
    /// let rt = fairlane::runtime::Builder::new_multi_thread()
    ///     .worker_threads(1)
    ///     .thread_name_fn(|| format!("mine-{}", NEXT.fetch_add(1, Ordering::Relaxed)))
    ///     .build()?;
    /// let name = rt.block_on(rt.spawn(async { std::thread::current().name().map(String::from) }));
    /// assert!(name.unwrap().unwrap().starts_with("mine-"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn thread_name_fn<F>(&mut self, f: F) -> &mut Self
    where
        F: Fn() -> String + Send + Sync + 'static,
    {
        self.threads.name = ThreadName::Fn(Arc::new(f));
        self
    }

    /// The stack size, in bytes, of every thread the runtime starts
    /// (default: std's, 2 MiB unless `RUST_MIN_STACK` says otherwise).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::runtime::Builder::new_multi_thread()
    ///     .worker_threads(1)
    ///     .thread_stack_size(4 << 20)
    ///     .build()?;
    /// let deep = rt.spawn(async { [0u8; 1 << 20].iter().map(|&b| b as u32).sum::<u32>() });
    /// assert_eq!(rt.block_on(deep).unwrap(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn thread_stack_size(&mut self, bytes: usize) -> &mut Self {
        self.threads.stack_size = Some(bytes);
        self
    }

    /// Runs `f` on every thread the runtime starts (processors,
    /// blocking-pool threads, `block_in_place` replacements), first thing,
    /// with the runtime current ([`Handle::current`] works), as tokio's
    /// option of that name. A current-thread runtime starts only
    /// blocking-pool threads. A panic in `f` is reported (a `tracing`
    /// error) and the thread goes on.
    ///
    /// # Example
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let started = Arc::new(AtomicUsize::new(0));
    /// let count = started.clone();
    /// let rt = fairlane::runtime::Builder::new_multi_thread()
    ///     .worker_threads(2)
    ///     .on_thread_start(move || {
    ///         count.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build()?;
    /// rt.block_on(rt.spawn_blocking(|| ())).unwrap();
    /// drop(rt); // joins the processors; the blocking thread has started too
    /// assert_eq!(started.load(Ordering::Relaxed), 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn on_thread_start<F>(&mut self, f: F) -> &mut Self
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.threads.on_start = Some(Arc::new(f));
        self
    }

    /// Runs `f` on every thread the runtime starts, last thing before the
    /// thread exits (a processor's at shutdown or removal, a blocking-pool
    /// thread's after its idle keep-alive or at shutdown), with the
    /// runtime current, as tokio's option of that name. A panic in `f` is
    /// reported (a `tracing` error).
    ///
    /// # Example
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let stopped = Arc::new(AtomicUsize::new(0));
    /// let count = stopped.clone();
    /// let rt = fairlane::runtime::Builder::new_multi_thread()
    ///     .worker_threads(2)
    ///     .on_thread_stop(move || {
    ///         count.fetch_add(1, Ordering::Relaxed);
    ///     })
    ///     .build()?;
    /// drop(rt); // joins the processor threads
    /// assert_eq!(stopped.load(Ordering::Relaxed), 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn on_thread_stop<F>(&mut self, f: F) -> &mut Self
    where
        F: Fn() + Send + Sync + 'static,
    {
        self.threads.on_stop = Some(Arc::new(f));
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

    /// Whether the runtime starts a tokio runtime beside itself and makes
    /// its context current on every thread of its own (default: on), so
    /// that crates calling `tokio::spawn`, `tokio::net`, `tokio::time` or
    /// `tokio::task::spawn_blocking` themselves work from fairlane tasks.
    /// What they hand to tokio runs on the bridge's one tokio worker thread;
    /// see README, "Coming from tokio". Feature `tokio-compat`.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// // tokio's timer, from a fairlane task, through the bridge.
    /// rt.block_on(rt.spawn(async {
    ///     tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    /// }))
    /// .unwrap();
    ///
    /// let off = fairlane::Runtime::builder().processors(1).tokio_compat(false).build()?;
    /// let err = off
    ///     .block_on(off.spawn(async { tokio::spawn(async {}).await }))
    ///     .unwrap_err();
    /// assert!(err.is_panic());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[cfg(feature = "tokio-compat")]
    pub fn tokio_compat(&mut self, on: bool) -> &mut Self {
        self.tokio_compat = on;
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

    /// Accepted for tokio's sake, with no effect: tokio's processors look
    /// for I/O and timer events every `ticks` tasks; fairlane's look at
    /// every scheduling iteration, and a current-thread runtime polls the
    /// future in `block_on` as soon as it is woken (after the task it is
    /// running, or after the tasks already ready when the future woke
    /// itself).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::runtime::Builder::new_current_thread().event_interval(31).build()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn event_interval(&mut self, ticks: u32) -> &mut Self {
        let _ = ticks;
        self
    }

    /// Accepted for tokio's sake, with no effect on scheduling: fairlane
    /// has no global queue besides its lanes, and age-based helping decides
    /// when a task waiting elsewhere runs. At least 1, as with tokio:
    /// `build` fails with `InvalidInput` for 0.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::runtime::Builder::new_multi_thread().global_queue_interval(31).build()?;
    /// let err = fairlane::runtime::Builder::new_multi_thread().global_queue_interval(0).build();
    /// assert!(err.unwrap_err().to_string().contains("global_queue_interval"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn global_queue_interval(&mut self, ticks: u32) -> &mut Self {
        self.global_queue_interval = Some(ticks);
        self
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

    /// Builds the runtime and starts its processors (a multi-thread
    /// runtime's; a current-thread runtime's processor is the thread in
    /// `block_on`).
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
        if self.global_queue_interval == Some(0) {
            return Err(invalid(
                "global_queue_interval must be at least 1 (got 0)".into(),
            ));
        }
        let current_thread = self.flavor == RuntimeFlavor::CurrentThread;
        if current_thread {
            if let Some((name, _)) = self.clusters.first() {
                return Err(invalid(format!(
                    "a current_thread runtime has one processor, the thread in block_on: it has \
                     no cluster \"{name}\" (use Builder::new_multi_thread for clusters)"
                )));
            }
        }
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        let backend = crate::io::select(self.io_backend)?;
        let backend_requested = self.io_backend.is_some()
            || std::env::var(crate::io::ENV_VAR).is_ok_and(|v| !v.trim().is_empty());
        let default_processors = if current_thread {
            1
        } else {
            self.config.processors
        };
        let mut specs = vec![("default".to_owned(), default_processors)];
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
            if current_thread {
                // One processor, never resized; one lane, so that ready
                // tasks run in the order they became ready (the future in
                // `block_on` relies on it to let them run first, see
                // `current_thread.rs`).
                config.max_processors = 1;
                config.lanes_per_processor = 1;
            }
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
                self.threads.clone(),
            )),
            signal: Arc::default(),
            threads: ProcessorThreads::default(),
            thread_spec: self.threads.clone(),
            flavor: self.flavor,
            seat: Seat::default(),
            id: Id::next(),
            name: self.name.clone(),
            #[cfg(feature = "tokio-compat")]
            tokio: if self.tokio_compat {
                Some(super::tokio_compat::TokioBridge::start()?)
            } else {
                None
            },
        });
        let runtime = Runtime {
            handle: Handle::for_cluster(shared.clone(), 0),
            shut_down: false,
        };
        if current_thread {
            // Its processor runs on the threads that call `block_on`.
            return Ok(runtime);
        }
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
