//! The runtime's builder.

use std::io;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use fairlane_core::{Config, Executor};

use super::blocking::BlockingPool;
use super::cluster::{NamedExecutor, ProcessorThreads};
use super::{Handle, Runtime, RuntimeShared};
use crate::host::StdHost;
use crate::io::driver::Driver;
use crate::io::IoBackend;
use crate::time::clock::Clock;

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
    /// have at once through [`Cluster::add_processor`](crate::Cluster::add_processor) (default: as many as
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
