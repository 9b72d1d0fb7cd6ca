//! The scheduler core of fairlane: a ready queue of timestamped lanes with
//! age-based helping, race-free idle sleep, and tasks, for `no_std` + `alloc`.
//!
//! The core knows nothing of threads, clocks or system calls. A host — the
//! `fairlane` crate on std, or a library OS — implements [`Host`] (time,
//! parking, which processor the calling thread is) and calls
//! [`Executor::run_processor`] once per processor thread.
//!
//! The protocols are explained beside their code: `queue.md` (lanes, push,
//! pop, helping, stealing), `idle.md` (idle sleep), `resize.md` (adding and
//! removing processors while tasks run), `task.md` (the task cell's state
//! machine, the registry, shutdown). Two plain data structures a host may
//! use come with it: [`wheel`], a timer wheel of wakers, and [`rand`], the
//! scheduler's random-number generator.
//!
//! # Example
//! A library OS runs a cluster on its own threads; here, one processor on a
//! host with a counter for a clock and a spin for parking:
//! ```
//! use core::sync::atomic::{AtomicU64, Ordering};
//! use fairlane_core::{Executor, Config, Host};
//!
//! struct MyHost(AtomicU64);
//! // SAFETY: no thread ever claims to be a processor.
//! unsafe impl Host for MyHost {
//!     fn now(&self) -> u64 { self.0.fetch_add(1, Ordering::Relaxed) }
//!     fn current_processor(&self) -> Option<usize> { None }
//!     fn park(&self, _: usize) { std::thread::yield_now() }
//!     fn unpark(&self, _: usize) {}
//! }
//!
//! let cluster = Executor::new(Config::new(1), MyHost(AtomicU64::new(0))).unwrap();
//! let handle = cluster.spawn(async { 6 * 7 });
//! let c = cluster.clone();
//! let processor = std::thread::spawn(move || c.run_processor(0));
//! while !handle.is_finished() { std::thread::yield_now(); }
//! cluster.shutdown();
//! processor.join().unwrap();
//! assert_eq!(futures_lite_block_on(handle), Some(42));
//! # fn futures_lite_block_on<F: core::future::Future>(f: F) -> F::Output {
//! #     let waker = std::task::Waker::noop();
//! #     let mut cx = std::task::Context::from_waker(&waker);
//! #     let mut f = core::pin::pin!(f);
//! #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v } }
//! # }
//! ```
#![no_std]
#![warn(missing_docs)]

extern crate alloc;

mod cluster;
mod host;
mod idle;
mod lane;
mod local;
mod queue;
pub mod rand;
mod registry;
mod resize;
mod scheduler;
mod sync;
mod task;
mod wake_slot;
pub mod wheel;

use core::fmt;

pub use host::Host;

/// The resize lock, exposed only to its loom model (`tests/loom_resize.rs`).
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_resize {
    pub use crate::resize::ResizeLock;
}

/// The task cell, exposed only to its loom model (`tests/loom_task.rs`).
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_task {
    pub use crate::task::join::JoinHandle;
    pub use crate::task::raw::{spawn, Runnable, Schedule};
    pub use crate::task::waker::raise_and_wake;
}

/// The lane type, exposed only to the loom models (`tests/loom_lane.rs`).
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_lane {
    pub use crate::lane::{Lane, LaneInfo, PushOutcome, EMPTY};
}
pub use scheduler::RemoveError;

/// The wake slot, exposed only to its loom model (`tests/loom_wake_slot.rs`).
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_wake_slot {
    pub use crate::wake_slot::{IntoRaw, WakeSlot};
}

/// The scheduler without tasks (ready queue, idle sleep, resizing), exposed
/// only to its loom models (`tests/loom_idle.rs`, `tests/loom_resize.rs`):
/// a host runs tasks through [`Executor`].
#[cfg(loom)]
#[doc(hidden)]
pub mod loom_scheduler {
    pub use crate::lane::Locality;
    pub use crate::scheduler::{PushError, Scheduler};
    pub use crate::wake_slot::IntoRaw;
}
pub use cluster::{Executor, TasksFinished};
pub use task::{AbortHandle, AffinityError, Cancellable, SpawnOptions, TaskHandle, TaskMeta};

/// The scheduler's tunables. Start from [`Config::new`].
///
/// # Example
/// ```
/// let mut config = fairlane_core::Config::new(4);
/// config.lanes_per_processor = 3;
/// assert!(config.validate().is_ok());
/// config.processors = 0;
/// assert!(config.validate().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Processors of the cluster at the start (at least 1).
    pub processors: usize,
    /// Processor slots: the most processors the cluster can have at once
    /// when processors are added at run time (default: `processors`; at
    /// most [`MAX_PROCESSORS`]). Every slot costs its lanes' memory (about
    /// 1.5 KiB) whether used or not.
    pub max_processors: usize,
    /// Normal-priority lanes each processor owns (at least 1; default 2);
    /// each also has one high- and one low-priority lane.
    pub lanes_per_processor: usize,
    /// A help target is drawn every `help_period` pops and checked on the
    /// next one; 0 disables helping.
    pub help_period: u32,
    /// Help when `target age / 2^help_factor_log2 > own age` (default 1:
    /// twice as old), and the target's owner is late (has not scheduled
    /// for longer than that own age and about 32 of the helper's own
    /// iterations) or the check is one of the rebalance checks (one in 8);
    /// see `queue.md`.
    pub help_factor_log2: u32,
    /// Random single-lane try-pops on other processors before a full scan.
    pub steal_attempts: usize,
    /// Rounds of a short spin (64 pause hints each) before idle sleep.
    pub spin_rounds: u32,
    /// A processor that found work in its last round reads the host's clock
    /// only every `clock_period` iterations and reuses the last reading,
    /// plus two per iteration, in between (1: every iteration; `queue.md`,
    /// "Time"). Timestamps then lag by at most that many
    /// polls, which only makes pushed tasks look older — helped sooner, never
    /// later — while a clock read can cost as much as a whole poll (`rdtsc`
    /// on a virtual machine). Any round after one that found no work reads
    /// the clock afresh.
    pub clock_period: u32,
    /// A ready task at the head of its class's lane (normal or low) runs
    /// after at most this many polls of other classes on its processor
    /// (default 8; at least 1). Under a saturating load of high-priority
    /// tasks, a waiting low one still gets one poll in `priority_bound + 1`.
    pub priority_bound: u32,
    /// How long, in the host's clock ticks, tasks that a watched processor
    /// keeps on its lanes without waking a sleeper may wait before it wakes
    /// one after all, and the most that a processor's oldest task may have
    /// waited for it to be handed the tasks of a sleeping processor's own
    /// events (`idle.md`, "Kept tasks"; only with a host that watches
    /// processors, [`Host::keep_watch`]). Default `1 << 22`, about 1.6 ms
    /// on a 2.6 GHz time-stamp counter: lower spreads work over more
    /// processors sooner; higher keeps it on fewer, with fewer wake-ups.
    pub grow_after: u64,
}

/// A task's priority class. Priorities shift *when* a task runs, within a
/// bound, never *whether* it runs: a ready normal or low task at the head of
/// its lane waits at most [`Config::priority_bound`] polls of other classes
/// on its processor, and age-based helping treats every class alike.
///
/// # Example
/// ```
/// use fairlane_core::Priority;
/// assert_eq!(Priority::default(), Priority::Normal);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Priority {
    /// Runs before normal and low tasks, within the bound.
    High,
    /// The default.
    #[default]
    Normal,
    /// Runs after high and normal tasks, within the bound.
    Low,
}

/// Most processors a cluster may have.
///
/// # Example
/// ```
/// let config = fairlane_core::Config::new(fairlane_core::MAX_PROCESSORS + 1);
/// assert!(config.validate().is_err());
/// ```
pub const MAX_PROCESSORS: usize = 4096;

impl Config {
    /// The defaults for `processors` processors.
    ///
    /// # Example
    /// ```
    /// let config = fairlane_core::Config::new(4);
    /// assert_eq!((config.processors, config.max_processors), (4, 4));
    /// assert_eq!(config.lanes_per_processor, 2);
    /// ```
    pub fn new(processors: usize) -> Self {
        Self {
            processors,
            max_processors: processors,
            lanes_per_processor: 2,
            help_period: 8,
            help_factor_log2: 1,
            steal_attempts: 4,
            spin_rounds: 4,
            clock_period: 4,
            priority_bound: 8,
            grow_after: 1 << 22,
        }
    }

    /// Checks every setting.
    ///
    /// # Example
    /// ```
    /// use fairlane_core::{Config, ConfigError};
    /// let mut config = Config::new(2);
    /// assert_eq!(config.validate(), Ok(()));
    /// config.processors = 0;
    /// assert_eq!(config.validate(), Err(ConfigError::ZeroProcessors));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.processors == 0 {
            return Err(ConfigError::ZeroProcessors);
        }
        if self.processors > MAX_PROCESSORS {
            return Err(ConfigError::TooManyProcessors(self.processors));
        }
        if self.max_processors > MAX_PROCESSORS || self.max_processors < self.processors {
            return Err(ConfigError::MaxProcessors {
                processors: self.processors,
                max_processors: self.max_processors,
            });
        }
        if self.lanes_per_processor == 0 {
            return Err(ConfigError::ZeroLanes);
        }
        if self.priority_bound == 0 {
            return Err(ConfigError::ZeroPriorityBound);
        }
        if self.clock_period == 0 {
            return Err(ConfigError::ZeroClockPeriod);
        }
        if self.help_factor_log2 > 63 {
            return Err(ConfigError::HelpFactorTooLarge(self.help_factor_log2));
        }
        Ok(())
    }
}

/// A [`Config`] setting that cannot work.
///
/// # Example
/// ```
/// let err = fairlane_core::Config::new(0).validate().unwrap_err();
/// assert!(err.to_string().contains("processors"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `processors` was 0.
    ZeroProcessors,
    /// `processors` exceeded [`MAX_PROCESSORS`].
    TooManyProcessors(usize),
    /// `max_processors` was below `processors` or above [`MAX_PROCESSORS`].
    MaxProcessors {
        /// The `processors` setting.
        processors: usize,
        /// The `max_processors` setting.
        max_processors: usize,
    },
    /// `lanes_per_processor` was 0.
    ZeroLanes,
    /// `help_factor_log2` was above 63.
    HelpFactorTooLarge(u32),
    /// `clock_period` was 0.
    ZeroClockPeriod,
    /// `priority_bound` was 0.
    ZeroPriorityBound,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroProcessors => f.write_str("processors must be at least 1 (got 0)"),
            Self::TooManyProcessors(n) => {
                write!(f, "processors must be at most {MAX_PROCESSORS} (got {n})")
            }
            Self::MaxProcessors {
                processors,
                max_processors,
            } => write!(
                f,
                "max_processors must be between processors ({processors}) and {MAX_PROCESSORS} (got {max_processors})"
            ),
            Self::ZeroLanes => f.write_str("lanes_per_processor must be at least 1 (got 0)"),
            Self::HelpFactorTooLarge(n) => {
                write!(f, "help_factor_log2 must be at most 63 (got {n})")
            }
            Self::ZeroClockPeriod => f.write_str("clock_period must be at least 1 (got 0)"),
            Self::ZeroPriorityBound => f.write_str("priority_bound must be at least 1 (got 0)"),
        }
    }
}

impl core::error::Error for ConfigError {}

/// A processor's identity: its cluster, its slot and which of the
/// processors that have held the slot it is, so an identity is never reused
/// for another processor (a removed processor's slot can be given to a new
/// one, with a new generation) and never names a processor of another
/// cluster (of this runtime or another one), whose slots have the same
/// numbers.
///
/// # Example
/// ```
/// # use core::sync::atomic::{AtomicU64, Ordering};
/// # struct H(AtomicU64);
/// # unsafe impl fairlane_core::Host for H {
/// #     fn now(&self) -> u64 { self.0.fetch_add(1, Ordering::Relaxed) }
/// #     fn current_processor(&self) -> Option<usize> { None }
/// #     fn park(&self, _: usize) {}
/// #     fn unpark(&self, _: usize) {}
/// # }
/// let cluster = fairlane_core::Executor::new(fairlane_core::Config::new(2), H(AtomicU64::new(0))).unwrap();
/// let ids = cluster.processor_ids();
/// assert_eq!(ids.len(), 2);
/// assert_eq!(ids[1].index(), 1);
/// assert_ne!(ids[0], ids[1]);
/// let other = fairlane_core::Executor::new(fairlane_core::Config::new(2), H(AtomicU64::new(0))).unwrap();
/// assert_ne!(other.processor_ids()[0], ids[0]);
/// assert!(!other.is_live(ids[0]));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessorId {
    /// The identity of the cluster's ready queue (unique in the process).
    cluster: u64,
    index: u32,
    generation: u32,
}

impl ProcessorId {
    pub(crate) fn new(cluster: u64, index: usize, generation: u32) -> Self {
        Self {
            cluster,
            index: index as u32,
            generation,
        }
    }

    /// Whether this names a processor of the cluster whose ready queue has
    /// identity `cluster`.
    pub(crate) fn is_of(self, cluster: u64) -> bool {
        self.cluster == cluster
    }

    /// The processor's slot: the number the host's `park`, `unpark` and
    /// `current_processor` use, and the index of its counters.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(2);
    /// let ids = cluster.processor_ids();
    /// assert_eq!(ids.iter().map(|id| id.index()).collect::<Vec<_>>(), [0, 1]);
    /// # }
    /// ```
    pub fn index(self) -> usize {
        self.index as usize
    }

    /// How many processors held this slot before this one.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(2);
    /// let threads = [start(&cluster, 0), start(&cluster, 1)];
    /// let old = cluster.processor_ids()[1];
    /// assert_eq!(old.generation(), 0);
    /// cluster.remove_processor(old).unwrap();
    /// let [first, second] = threads;
    /// second.join().unwrap(); // its thread left: the slot is free again
    /// let new = cluster.add_processor().unwrap();
    /// assert_eq!((new.index(), new.generation()), (1, 1));
    /// let third = start(&cluster, 1);
    /// stop(&cluster, [first, third]);
    /// # }
    /// ```
    pub fn generation(self) -> u32 {
        self.generation
    }
}

impl fmt::Display for ProcessorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.generation == 0 {
            write!(f, "processor {}", self.index)
        } else {
            write!(
                f,
                "processor {} (generation {})",
                self.index, self.generation
            )
        }
    }
}

/// What a processor counted about itself. Counters are written only by their
/// processor and read without synchronisation: a snapshot, not a transaction.
///
/// # Example
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
/// # fn main() {
/// let cluster = cluster(1);
/// let thread = start(&cluster, 0);
/// assert_eq!(block_on(cluster.spawn(async { 1 })), Some(1));
/// stop(&cluster, [thread]);
/// let counters: fairlane_core::ProcessorCounters = cluster.counters(0);
/// assert!(counters.polls >= 1 && counters.iterations >= counters.polls);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessorCounters {
    /// Rounds of the scheduling loop (one per pop attempt, idle time excluded).
    pub iterations: u64,
    /// Tasks polled.
    pub polls: u64,
    /// Times the processor went to sleep.
    pub parks: u64,
    /// Times it came back from sleep.
    pub wakeups: u64,
    /// Calls of [`Host::park`] while asleep: one per sleep, plus one for
    /// each return of `park` that was not a wake-up for this processor (a
    /// host whose park returns early is seen here).
    pub host_parks: u64,
    /// Tasks taken from another processor's lane by the age rule.
    pub helps: u64,
    /// Tasks taken from another processor's lane for want of local work.
    pub steals: u64,
    /// Of `helps`, those taken at a rebalance check (the other processor
    /// kept scheduling; its lanes were only much older than ours), rather
    /// than rescued from a processor that was late.
    pub rebalances: u64,
    /// Polls of a task that another processor polled last, taken here by a
    /// help of a late processor's lane or wake slot (a rescue).
    pub moved_help: u64,
    /// Polls of a task that another processor polled last, taken here by a
    /// rebalance.
    pub moved_rebalance: u64,
    /// Polls of a task that another processor polled last, taken here by a
    /// steal (this processor had no work).
    pub moved_steal: u64,
    /// Polls of a task that another processor polled last, placed on this
    /// processor's own lanes or wake slot by a push: woken here (by the
    /// task this processor polled, or by its events), handed over by a
    /// sleeping processor, or pushed from outside (outside pushes go to the
    /// processor that polled the task last, so move it only when that one
    /// was removed).
    pub moved_wake: u64,
    /// Tasks this processor's events made ready while it slept that it
    /// handed to an awake processor (it counts them, not the receiver).
    pub handoffs: u64,
}
