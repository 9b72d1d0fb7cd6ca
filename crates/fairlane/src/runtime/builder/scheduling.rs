//! fairlane's own builder settings, which tokio's builder lacks: processors
//! and clusters, lanes, helping, spinning, priorities, and the I/O backend.

use super::Builder;
use crate::io::IoBackend;

impl Builder {
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

    /// Number of processors (OS threads running tasks) of the default
    /// cluster (default: one per available core). At least 1.
    /// [`worker_threads`](Self::worker_threads) is tokio's name for it. A
    /// [current-thread](Self::new_current_thread) runtime has one processor
    /// whatever this says.
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
    /// of their cluster; [`Runtime::cluster`](crate::Runtime::cluster) finds it by name. Names must be
    /// unique and processors at least 1. A
    /// [current-thread](Self::new_current_thread) runtime has no room for
    /// them: `build` refuses it.
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
    /// 1.5 KiB. A [current-thread](Self::new_current_thread) runtime keeps
    /// its one processor whatever this says.
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
    /// Each processor also has one lane per other priority class. A
    /// [current-thread](Self::new_current_thread) runtime has one, whatever
    /// this says, so that its ready tasks run in the order they became
    /// ready, as on tokio's current-thread runtime.
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
}
