//! The cluster: [`Executor`], which spawns tasks, runs the processors,
//! adds and removes them, moves tasks between clusters, waits for tasks to
//! finish ([`TasksFinished`]) and shuts down (the graveyard of tasks woken
//! after shutdown, `cancel_all`). `task.md` describes draining and
//! shutdown.

use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use crossbeam_utils::CachePadded;

use alloc::sync::Arc;

use crate::lane::Locality;
use crate::registry::{Registry, RegistrySlot, Shard};
use crate::scheduler::Scheduler;
use crate::sync::{AtomicBool, Ordering, SpinLock};
use crate::task::raw::{self, Runnable};
use crate::task::{
    schedule_restricted, AffinityError, Cancellable, NoCancelOutput, SpawnOptions, Supervised,
    TaskHandle, TaskMeta, NO_PROCESSOR,
};
use crate::{Config, ConfigError, Host, Priority, ProcessorCounters, ProcessorId, RemoveError};

/// The executor of one cluster of processors: the ready queue of its tasks
/// (timestamped lanes) and the registry of its live tasks. (The `fairlane`
/// crate's public `Cluster` is the handle a program holds; this is what it
/// runs on.)
///
/// A host runs a cluster by calling [`run_processor`](Executor::run_processor)
/// once per processor, each on its own thread, and stops it with
/// [`shutdown`](Executor::shutdown) and [`cancel_all`](Executor::cancel_all).
///
/// # Example
/// The whole life of a cluster on a minimal host (std threads, a counter for
/// a clock):
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::{Mutex, OnceLock};
/// use std::thread::Thread;
/// use fairlane_core::{Executor, Config, Host};
///
/// std::thread_local!(static ME: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) });
/// struct Threads { clock: AtomicU64, threads: [OnceLock<Thread>; 2] }
/// // SAFETY: a thread names itself processor `p` only inside `run_processor(p)`.
/// unsafe impl Host for Threads {
///     fn now(&self) -> u64 { self.clock.fetch_add(1, Ordering::Relaxed) }
///     fn current_processor(&self) -> Option<usize> { ME.with(|m| m.get()) }
///     fn park(&self, _: usize) { std::thread::park() }
///     fn unpark(&self, p: usize) { if let Some(t) = self.threads[p].get() { t.unpark() } }
/// }
///
/// let host = Threads { clock: AtomicU64::new(0), threads: [OnceLock::new(), OnceLock::new()] };
/// let cluster = Executor::new(Config::new(2), host).unwrap();
/// let processors: Vec<_> = (0..2)
///     .map(|p| {
///         let cluster = cluster.clone();
///         std::thread::spawn(move || {
///             cluster.host().threads[p].set(std::thread::current()).unwrap();
///             ME.with(|m| m.set(Some(p)));
///             cluster.run_processor(p);
///             ME.with(|m| m.set(None));
///         })
///     })
///     .collect();
///
/// let done = cluster.spawn(async { 1 + 1 });
/// let parked = cluster.spawn(std::future::pending::<()>());
/// while !done.is_finished() { std::thread::yield_now(); }
/// assert_eq!(cluster.live_tasks(), 1); // `parked`
///
/// cluster.shutdown();
/// for p in processors { p.join().unwrap(); }
/// cluster.cancel_all(); // drops `parked`'s future
/// assert_eq!(cluster.live_tasks(), 0);
/// assert!(parked.is_finished());
/// // `done` was polled by a processor; `parked` may have been ended unpolled.
/// assert!(cluster.counters(0).polls + cluster.counters(1).polls >= 1);
/// ```
pub struct Executor<H: Host> {
    pub(crate) sched: Scheduler<Runnable<TaskMeta<H>>, H>,
    /// Live tasks, sharded by spawning processor (the last shard for outside
    /// threads) so that spawns on different processors do not contend.
    pub(crate) registry: alloc::boxed::Box<[CachePadded<Registry>]>,
    /// Set once something waits for tasks to finish: from then on every
    /// task that finishes wakes `drain_waiter`.
    pub(crate) draining: AtomicBool,
    pub(crate) drain_waiter: SpinLock<Option<Waker>>,
    /// Tasks woken after `shutdown`, waiting for `cancel_all` to drop their
    /// futures (see [`bury`](Self::bury)).
    graveyard: SpinLock<Graveyard<H>>,
}

/// Runnables handed back by the closed scheduler, until `cancel_all` ends
/// them; closed by `cancel_all` once it has ended every task.
struct Graveyard<H: Host> {
    open: bool,
    tasks: Vec<Runnable<TaskMeta<H>>>,
}

impl<H: Host> Executor<H> {
    /// A cluster of `config.processors` processors on `host`.
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
    /// use fairlane_core::{Executor, Config};
    /// let cluster = Executor::new(Config::new(2), H(AtomicU64::new(0))).unwrap();
    /// assert_eq!(cluster.processors(), 2);
    /// ```
    pub fn new(config: Config, host: H) -> Result<Arc<Self>, ConfigError> {
        let shards = config.max_processors.max(config.processors) + 1;
        Ok(Arc::new(Self {
            sched: Scheduler::new(config, host)?,
            registry: (0..shards)
                .map(|_| CachePadded::new(SpinLock::new(Shard::default())))
                .collect(),
            draining: AtomicBool::new(false),
            drain_waiter: SpinLock::new(None),
            graveyard: SpinLock::new(Graveyard {
                open: true,
                tasks: Vec::new(),
            }),
        }))
    }

    /// Number of processors now.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(2);
    /// assert_eq!(cluster.processors(), 2);
    /// cluster.add_processor().unwrap();
    /// assert_eq!(cluster.processors(), 3);
    /// # }
    /// ```
    pub fn processors(&self) -> usize {
        self.sched.processors()
    }

    /// Number of processor slots (`Config::max_processors`): processor
    /// indices are below it.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(2); // `max_processors` 3: one spare slot
    /// assert_eq!(cluster.capacity(), 3);
    /// # }
    /// ```
    pub fn capacity(&self) -> usize {
        self.sched.capacity()
    }

    /// The identities of the processors now, in slot order.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let ids = cluster(2).processor_ids();
    /// assert_eq!(ids.iter().map(|id| id.index()).collect::<Vec<_>>(), [0, 1]);
    /// # }
    /// ```
    pub fn processor_ids(&self) -> Vec<ProcessorId> {
        self.sched.processor_ids()
    }

    /// Whether `id` names a processor of this cluster now.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(2);
    /// let id = cluster.processor_ids()[1];
    /// assert!(cluster.is_live(id));
    /// cluster.remove_processor(id).unwrap();
    /// assert!(!cluster.is_live(id));
    /// # }
    /// ```
    pub fn is_live(&self, id: ProcessorId) -> bool {
        self.sched.is_live(id)
    }

    /// The identity of processor `p`, if it is one of this cluster's now.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(2);
    /// assert_eq!(cluster.processor_id(1), Some(cluster.processor_ids()[1]));
    /// assert_eq!(cluster.processor_id(2), None); // the spare slot is empty
    /// # }
    /// ```
    pub fn processor_id(&self, p: usize) -> Option<ProcessorId> {
        self.processor_ids().into_iter().find(|id| id.index() == p)
    }

    /// Adds a processor and returns its identity; the host must then run it
    /// on a thread of its own ([`run_processor`](Self::run_processor) with
    /// its index). `None` when all `Config::max_processors` slots are taken
    /// (or the cluster is shut down).
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let added = cluster.add_processor().expect("a spare slot");
    /// let thread = start(&cluster, added.index()); // the host runs it
    /// assert_eq!(cluster.processors(), 2);
    /// assert!(cluster.add_processor().is_none()); // every slot is taken
    /// stop(&cluster, [thread]);
    /// # }
    /// ```
    pub fn add_processor(&self) -> Option<ProcessorId> {
        self.sched.add_processor()
    }

    /// Removes processor `id`: its thread returns from `run_processor` after
    /// the poll it is in, the tasks queued on it move to the other
    /// processors, and tasks restricted to it are placed on another of their
    /// allowed processors — or, if none is left, lose their restriction. A
    /// cluster keeps at least one processor. Blocks until every processor has
    /// finished the poll it is in (see `resize.md`).
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// use fairlane_core::RemoveError;
    /// let cluster = cluster(2);
    /// let threads: Vec<_> = (0..2).map(|p| start(&cluster, p)).collect();
    /// let ids = cluster.processor_ids();
    /// cluster.remove_processor(ids[1]).unwrap();
    /// assert_eq!(cluster.remove_processor(ids[0]), Err(RemoveError::LastProcessor));
    /// assert_eq!(block_on(cluster.spawn(async { 5 })), Some(5)); // on the one left
    /// stop(&cluster, threads);
    /// # }
    /// ```
    pub fn remove_processor(&self, id: ProcessorId) -> Result<(), RemoveError> {
        let restricted = self.sched.remove_processor(id)?;
        for runnable in restricted {
            // The same rule as any wake of a restricted task.
            schedule_restricted(runnable);
        }
        Ok(())
    }

    /// The metadata of the task being polled on processor `p`, if the
    /// calling thread is `p`'s and polls a task.
    fn current_meta(&self, p: usize) -> Option<&TaskMeta<H>> {
        let current = self.sched.current(p) as *const TaskMeta<H>;
        // SAFETY: `run_loop` stores the metadata pointer of the runnable it
        // runs right before running it and clears it right after; the caller
        // is processor `p`'s thread, so inside that run (a task's poll), and
        // the task, with its metadata, lives at least until the run returns.
        unsafe { current.as_ref() }
    }

    /// Moves the task being polled on the calling processor (of this
    /// cluster) to `target`: from its next schedule on it is queued, and
    /// runs, on `target`'s processors. Its affinity set, which names this
    /// cluster's processors, is cleared. The caller then wakes the task and
    /// returns `Pending`, so that it is scheduled — onto `target` — once
    /// the poll ends. Tasks stay in the registry of the cluster that spawned
    /// them.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let (a, b) = (cluster(1), cluster(1));
    /// let threads = [start(&a, 0), start(&b, 0)];
    /// let (from, to) = (a.clone(), b.clone());
    /// let task = a.spawn(async move {
    ///     from.migrate_current(&to).unwrap();
    ///     yield_once().await; // scheduled again: onto `to`
    ///     to.host().current_processor().is_some()
    /// });
    /// assert_eq!(block_on(task), Some(true));
    /// a.shutdown();
    /// b.shutdown();
    /// threads.into_iter().for_each(|t| t.join().unwrap());
    /// Executor::cancel_all_of(&[&*a, &*b]);
    /// # }
    /// ```
    pub fn migrate_current(&self, target: &Arc<Executor<H>>) -> Result<(), AffinityError> {
        let p = self
            .host()
            .current_processor()
            .ok_or(AffinityError::NotInTask)?;
        let meta = self.current_meta(p).ok_or(AffinityError::NotInTask)?;
        if !core::ptr::eq(&**meta.cluster(), self) {
            return Err(AffinityError::NotInTask);
        }
        meta.preferred.store(NO_PROCESSOR, Ordering::Relaxed);
        // SAFETY: we are polling the task (see `current_meta`), so neither
        // `schedule` nor the drop of its future can run for it now (see
        // `TaskMeta::cluster` and `TaskMeta::rare`). Whatever `Arc` is
        // dropped here, this thread is inside `self.run_processor`, whose
        // borrow keeps `self` alive.
        unsafe {
            meta.set_affinity(None);
            let old = core::mem::replace(&mut *meta.cluster.get(), target.clone());
            // The task stays in its registry: a graceful shutdown counts the
            // clusters one after the other, and a task on the move could
            // slip past both counts. So the task keeps that cluster alive.
            meta.moved(old, target);
        }
        Ok(())
    }

    /// Checks an affinity set against the processors that exist now.
    fn check_affinity(&self, allowed: &[ProcessorId]) -> Result<(), AffinityError> {
        if allowed.iter().any(|&id| !self.sched.owns(id)) {
            Err(AffinityError::OtherCluster)
        } else if allowed.iter().any(|&id| self.sched.is_live(id)) {
            Ok(())
        } else {
            Err(AffinityError::NoSuchProcessor)
        }
    }

    /// Restricts the task being polled on the calling processor to
    /// `allowed` (`None` lifts the restriction). Takes effect from the next
    /// time the task is scheduled: a task that wants to move at once yields
    /// after the call.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// use fairlane_core::AffinityError;
    /// let cluster = cluster(2);
    /// let threads: Vec<_> = (0..2).map(|p| start(&cluster, p)).collect();
    /// let second = cluster.processor_ids()[1];
    /// let c = cluster.clone();
    /// let task = cluster.spawn(async move {
    ///     c.set_current_affinity(Some(vec![second].into())).unwrap();
    ///     yield_once().await; // scheduled again: onto `second`
    ///     c.host().current_processor()
    /// });
    /// assert_eq!(block_on(task), Some(Some(1)));
    /// // Not in a task:
    /// assert_eq!(cluster.set_current_affinity(None), Err(AffinityError::NotInTask));
    /// stop(&cluster, threads);
    /// # }
    /// ```
    pub fn set_current_affinity(
        &self,
        allowed: Option<Arc<[ProcessorId]>>,
    ) -> Result<(), AffinityError> {
        let p = self
            .host()
            .current_processor()
            .ok_or(AffinityError::NotInTask)?;
        let meta = self.current_meta(p).ok_or(AffinityError::NotInTask)?;
        if let Some(allowed) = &allowed {
            self.check_affinity(allowed)?;
            if meta.priority != Priority::Normal {
                return Err(AffinityError::WithPriority);
            }
        }
        // SAFETY: we are polling the task (see `current_meta`).
        unsafe { meta.set_affinity(allowed) };
        Ok(())
    }

    /// The host.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// // This thread is not one of the cluster's processors.
    /// assert_eq!(fairlane_core::Host::current_processor(cluster.host()), None);
    /// # }
    /// ```
    pub fn host(&self) -> &H {
        self.sched.host()
    }

    /// Spawns `future`; it is queued at once (on the current processor's
    /// lanes when called from one). `None` from the handle means the task
    /// was aborted or cancelled by shutdown. After shutdown the future is
    /// dropped at once, never polled, and the handle reports cancellation.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let thread = start(&cluster, 0);
    /// let handle = cluster.spawn(async { 6 * 7 });
    /// assert_eq!(block_on(handle), Some(42));
    /// stop(&cluster, [thread]);
    /// # }
    /// ```
    pub fn spawn<F>(self: &Arc<Self>, future: F) -> TaskHandle<F::Output, H>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match self.spawn_with(future, SpawnOptions::default()) {
            Ok(handle) => handle,
            Err(_) => unreachable!("default spawn options are always valid"),
        }
    }

    /// [`spawn`](Self::spawn) with [`SpawnOptions`]; an affinity set that
    /// cannot work is an error (and the future is dropped).
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// use fairlane_core::{Priority, SpawnOptions};
    /// let cluster = cluster(1);
    /// let thread = start(&cluster, 0);
    /// let mut options = SpawnOptions::default();
    /// options.priority = Priority::High;
    /// let handle = cluster.spawn_with(async { "urgent" }, options).unwrap();
    /// assert_eq!(block_on(handle), Some("urgent"));
    /// stop(&cluster, [thread]);
    /// # }
    /// ```
    pub fn spawn_with<F>(
        self: &Arc<Self>,
        future: F,
        options: SpawnOptions,
    ) -> Result<TaskHandle<F::Output, H>, AffinityError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_cancellable(NoCancelOutput(future), options)
    }

    /// [`spawn_with`](Self::spawn_with) for a future that ends its task
    /// itself when the task is aborted or cancelled by shutdown: instead of
    /// being polled again it is told to [`cancel`](Cancellable::cancel), and
    /// what that returns is the task's output.
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
    /// use core::future::Future;
    /// use core::pin::Pin;
    /// use core::task::{Context, Poll};
    /// use fairlane_core::{Cancellable, Executor, Config, SpawnOptions};
    ///
    /// /// Never finishes on its own; says "cancelled" when cancelled.
    /// struct Forever;
    /// impl Future for Forever {
    ///     type Output = &'static str;
    ///     fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<&'static str> {
    ///         Poll::Pending
    ///     }
    /// }
    /// impl Cancellable for Forever {
    ///     fn cancel(self: Pin<&mut Self>) -> Option<&'static str> {
    ///         Some("cancelled")
    ///     }
    /// }
    ///
    /// let cluster = Executor::new(Config::new(1), H(AtomicU64::new(0))).unwrap();
    /// let task = cluster.spawn_cancellable(Forever, SpawnOptions::default()).unwrap();
    /// cluster.shutdown(); // no processor ever ran: the task is still queued
    /// cluster.cancel_all();
    /// let mut task = core::pin::pin!(task);
    /// let mut cx = Context::from_waker(core::task::Waker::noop());
    /// assert_eq!(task.as_mut().poll(&mut cx), Poll::Ready(Some("cancelled")));
    /// ```
    pub fn spawn_cancellable<F>(
        self: &Arc<Self>,
        future: F,
        options: SpawnOptions,
    ) -> Result<TaskHandle<F::Output, H>, AffinityError>
    where
        F: Cancellable + Send + 'static,
        F::Output: Send + 'static,
    {
        let SpawnOptions {
            background,
            priority,
            affinity,
        } = options;
        if let Some(allowed) = &affinity {
            self.check_affinity(allowed)?;
            if priority != Priority::Normal {
                return Err(AffinityError::WithPriority);
            }
        }
        let shard = self
            .sched
            .host()
            .current_processor()
            .unwrap_or(self.capacity());
        let meta = TaskMeta::new(self.clone(), priority, affinity, background);
        // `meta` stays put in the task's allocation, which outlives the
        // future.
        let (runnable, task) = raw::spawn(meta, move |meta| Supervised {
            future,
            slot: RegistrySlot { meta },
        });
        TaskMeta::hold_own_ref(&runnable);
        // SAFETY: the runnable holds a reference on the cell.
        let state = unsafe { TaskMeta::state_ptr(raw::Header::meta_ptr(runnable.ptr)) };
        // SAFETY: under the shard's lock; the state is in the task's own
        // allocation, in no list yet, and `RegistrySlot::drop` takes it out
        // before the task can be freed. It has the cell's provenance.
        self.registry[shard]
            .lock()
            .with(|list| unsafe { list.insert(state, shard) });
        if self.is_shut_down() {
            // Not a wake: the spawner can take the drop here, and learns at
            // once that the cluster is closed (its handle is finished). A
            // shutdown that begins after this check buries the task instead.
            end_task(runnable);
        } else {
            runnable.schedule();
        }
        Ok(TaskHandle { task })
    }

    /// Runs processor `p` on the calling thread until the cluster is shut
    /// down: the one core function a host calls per processor thread.
    ///
    /// Returns at once if `p` is not a processor of the cluster (a bad index,
    /// or one removed before its thread started).
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let c = cluster.clone();
    /// let thread = std::thread::spawn(move || {
    ///     // (`start` also makes the host name this thread processor 0.)
    ///     c.run_processor(0); // until the shutdown below
    /// });
    /// let handle = cluster.spawn(async { 1 + 1 });
    /// assert_eq!(block_on(handle), Some(2));
    /// cluster.shutdown();
    /// thread.join().unwrap();
    /// cluster.run_processor(7); // not a processor: returns at once
    /// # }
    /// ```
    pub fn run_processor(&self, p: usize) {
        if self.sched.start(p) {
            self.run_loop(p);
        }
        if p < self.capacity() {
            // The read side goes back first: what `processor_stopping` makes
            // ready (the std host reaps I/O completions there) is pushed as
            // from an outside thread, whose read side waits while a resize
            // is in progress, and the resize waits for this thread's flag.
            // The slot stays taken until `finish`.
            self.sched.leave(p);
            // Also when `p` was removed before it started: the host may have
            // set up state for it already.
            self.host().processor_stopping(p);
            self.sched.finish(p, true);
        }
    }

    /// Runs processor `p` on the calling thread in place of its own thread,
    /// which is busy elsewhere (std's `block_in_place`), until
    /// [`release_processor(p)`](Self::release_processor) or shutdown. The
    /// own thread takes over again with
    /// [`reclaim_processor`](Self::reclaim_processor).
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let own = start(&cluster, 0);
    /// let c = cluster.clone();
    /// let task = cluster.spawn(async move {
    ///     // In a poll on processor 0, about to block (`block_in_place`):
    ///     let queued = c.spawn(async { "polled by the stand-in" });
    ///     let stand_in = as_processor(&c, 0, |c| c.run_stand_in(0));
    ///     let got = block_on(queued); // the blocking work
    ///     c.release_processor(0); // the stand-in returns after its poll
    ///     stand_in.join().unwrap();
    ///     assert!(c.reclaim_processor(0)); // this thread runs processor 0 again
    ///     got
    /// });
    /// assert_eq!(block_on(task), Some(Some("polled by the stand-in")));
    /// stop(&cluster, [own]);
    /// # }
    /// ```
    pub fn run_stand_in(&self, p: usize) {
        // The own thread is inside a poll (the one that blocks): give it its
        // current task back when it takes over again, for calls that act on
        // the current task later in that poll.
        let polling = self.sched.current(p);
        if self.sched.start(p) {
            self.run_loop(p);
            self.sched.finish(p, false);
        }
        self.sched.set_current(p, polling);
    }

    fn run_loop(&self, p: usize) {
        while let Some(runnable) = self.sched.next(p) {
            let meta = runnable.metadata();
            let last = meta.preferred.load(Ordering::Relaxed);
            if last != p as u32 {
                meta.preferred.store(p as u32, Ordering::Relaxed);
                if last != NO_PROCESSOR {
                    self.sched.note_moved(p, runnable.address());
                }
            }
            let current = meta as *const TaskMeta<H> as *mut ();
            self.sched.poll_on(p, current, || runnable.run());
        }
    }

    /// Makes the thread running processor `p` return from `run_processor`
    /// after the poll it is in, so that another thread can take `p` over.
    /// Used to hand a processor back from a replacement thread (std's
    /// `block_in_place`). Call [`reclaim_processor`](Self::reclaim_processor)
    /// once that thread has returned.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let own = start(&cluster, 0);
    /// let c = cluster.clone();
    /// let task = cluster.spawn(async move {
    ///     let stand_in = stand_in(&c, 0); // `run_stand_in(0)` on another thread
    ///     c.release_processor(0);
    ///     stand_in.join().unwrap(); // it returned
    ///     c.reclaim_processor(0)
    /// });
    /// assert_eq!(block_on(task), Some(true));
    /// stop(&cluster, [own]);
    /// # }
    /// ```
    pub fn release_processor(&self, p: usize) {
        self.sched.release(p);
    }

    /// Lets processor `p` run again on the calling thread (its own thread)
    /// after [`release_processor`](Self::release_processor) and the stand-in's
    /// return. Returns false if `p` was removed meanwhile: the thread then
    /// finishes its poll as an outside thread (what it wakes goes to the
    /// other processors), and `run_processor` ends after it.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let own = start(&cluster, 0);
    /// let c = cluster.clone();
    /// let task = cluster.spawn(async move {
    ///     let stand_in = stand_in(&c, 0);
    ///     c.release_processor(0);
    ///     stand_in.join().unwrap();
    ///     let again = c.reclaim_processor(0);
    ///     yield_once().await; // and the task goes on on processor 0
    ///     (again, c.host().current_processor())
    /// });
    /// assert_eq!(block_on(task), Some((true, Some(0))));
    /// stop(&cluster, [own]);
    /// # }
    /// ```
    pub fn reclaim_processor(&self, p: usize) -> bool {
        self.sched.reclaim(p)
    }

    /// Whether processor slot `p` has committed to idle sleep (it is in, or
    /// about to enter, [`Host::park`]) and no waker has asked it to wake
    /// since; false for a slot out of range. A read of one word, with
    /// Acquire: what `p` did before committing is visible to the caller. A
    /// host that needs to know whether the whole cluster is idle (std's
    /// paused test clock) reads it for every processor, and must itself
    /// order those reads against the events that wake processors
    /// ([`Host::unpark`] is called after the word leaves `ASLEEP`).
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
    /// use fairlane_core::{Executor, Config};
    /// let cluster = Executor::new(Config::new(1), H(AtomicU64::new(0))).unwrap();
    /// assert!(!cluster.is_asleep(0)); // not running, so not asleep
    /// assert!(!cluster.is_asleep(7)); // no such slot
    /// ```
    pub fn is_asleep(&self, p: usize) -> bool {
        self.sched.is_asleep(p)
    }

    /// Stops the processors: each returns from `run_processor` after the poll
    /// it is in. Tasks woken from now on are not queued: they wait, not
    /// polled again, for [`cancel_all`](Self::cancel_all) to drop their
    /// futures.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let thread = start(&cluster, 0);
    /// let parked = cluster.spawn(core::future::pending::<()>());
    /// cluster.shutdown(); // the processor returns from `run_processor`
    /// thread.join().unwrap();
    /// cluster.cancel_all();
    /// assert_eq!(block_on(parked), None); // cancelled
    /// # }
    /// ```
    pub fn shutdown(&self) {
        self.sched.close();
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// assert!(!cluster.is_shut_down());
    /// cluster.shutdown();
    /// assert!(cluster.is_shut_down());
    /// # }
    /// ```
    pub fn is_shut_down(&self) -> bool {
        self.sched.is_closed()
    }

    /// After `shutdown` and once the processors have returned: ends every
    /// task still alive, on the calling thread. Queued tasks are taken from
    /// the lanes; parked ones are aborted, which wakes them into the closed
    /// scheduler, which hands them to the cluster's graveyard. Each is then
    /// run once, aborted: its future is dropped (a [`Cancellable`] one is
    /// told to [`cancel`](Cancellable::cancel)) and its handle resolves.
    /// Dropping one future can wake others: they join the graveyard and are
    /// ended in turn, here, never inside the wake. Once nothing is left the
    /// graveyard closes: a task woken into this cluster later (one polled
    /// by a thread that outlived the shutdown) is ended at once, by whoever
    /// wakes it.
    ///
    /// Parked tasks are found in this cluster's registry, which holds the
    /// tasks spawned here, also those that moved to another cluster
    /// ([`migrate_current`](Self::migrate_current)), and not those that
    /// moved here. A host whose tasks move between clusters shuts every
    /// one of them down, then cancels them together with
    /// [`cancel_all_of`](Self::cancel_all_of).
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let queued = cluster.spawn(async { "never polled" }); // no processor runs
    /// cluster.shutdown();
    /// cluster.cancel_all();
    /// assert_eq!(block_on(queued), None);
    /// assert_eq!(cluster.live_tasks(), 0);
    /// # }
    /// ```
    pub fn cancel_all(&self) {
        self.cancel_tasks();
        self.close_graveyard();
    }

    /// [`cancel_all`](Self::cancel_all) for several clusters between which
    /// tasks may have moved, all shut down: a cancelled task that moved is
    /// woken into its own cluster's graveyard, so every graveyard stays open
    /// until every cluster has cancelled its tasks.
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
    /// use fairlane_core::{Executor, Config};
    /// let a = Executor::new(Config::new(1), H(AtomicU64::new(0))).unwrap();
    /// let b = Executor::new(Config::new(1), H(AtomicU64::new(0))).unwrap();
    /// let tasks = [a.spawn(async {}), b.spawn(async {})];
    /// a.shutdown();
    /// b.shutdown();
    /// Executor::cancel_all_of(&[&*a, &*b]);
    /// assert!(tasks.iter().all(|t| t.is_finished()));
    /// ```
    pub fn cancel_all_of(clusters: &[&Self]) {
        for cluster in clusters {
            cluster.cancel_tasks();
        }
        for cluster in clusters {
            cluster.close_graveyard();
        }
    }

    /// Ends every task of the cluster, leaving the graveyard open.
    fn cancel_tasks(&self) {
        for runnable in self.sched.drain() {
            end_task(runnable);
        }
        for shard in self.registry.iter() {
            // The wakers are cloned under the shard's lock, which keeps every
            // listed task alive (see `registry.rs`), and woken after it.
            let live: Vec<Waker> = shard.lock().with(|shard| {
                let mut live = Vec::new();
                shard.for_each(|state| {
                    // SAFETY: listed, so alive under the lock we hold (see
                    // `registry.rs`); inserted with its cell's provenance
                    // (`spawn_cancellable`), so the metadata's pointer has
                    // it too.
                    let meta = unsafe { TaskMeta::<H>::from_state(state) };
                    // SAFETY: as above.
                    unsafe { state.as_ref() }
                        .aborted
                        .store(true, Ordering::Release);
                    // SAFETY: as above: the shard's lock keeps it allocated.
                    live.extend(unsafe { TaskMeta::own_waker(meta) });
                });
                live
            });
            for waker in live {
                waker.wake();
            }
        }
        // The closed scheduler queues nothing more, but a processor thread
        // may have pushed before it saw the close.
        for runnable in self.sched.drain() {
            end_task(runnable);
        }
        while let Some(buried) = self
            .graveyard
            .lock()
            .with(|g| (!g.tasks.is_empty()).then(|| core::mem::take(&mut g.tasks)))
        {
            // Outside the lock: ending a task can wake (bury) others.
            for runnable in buried {
                end_task(runnable);
            }
        }
    }

    /// Ends what is left in the graveyard, and closes it once it is empty.
    fn close_graveyard(&self) {
        while let Some(buried) = self.graveyard.lock().with(|g| {
            if g.tasks.is_empty() {
                g.open = false;
                None
            } else {
                Some(core::mem::take(&mut g.tasks))
            }
        }) {
            for runnable in buried {
                end_task(runnable);
            }
        }
    }

    /// Takes a task that the closed scheduler handed back. Its future is
    /// not dropped here: this runs inside a wake, and the waker may be
    /// called with a lock held that the future's destructor takes (a channel
    /// closed by its last sender's drop wakes its receivers under the lock
    /// their listeners take when dropped). `cancel_all` ends it. Once the
    /// graveyard is closed nobody would, so the task is ended at once.
    #[cold]
    pub(crate) fn bury(&self, runnable: Runnable<TaskMeta<H>>) {
        let late = self.graveyard.lock().with(|g| {
            if g.open {
                g.tasks.push(runnable);
                None
            } else {
                Some(runnable)
            }
        });
        if let Some(runnable) = late {
            end_task(runnable);
        }
    }

    /// Number of tasks spawned and not yet completed or dropped.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// use fairlane_core::SpawnOptions;
    /// let cluster = cluster(1);
    /// let mut background = SpawnOptions::default();
    /// background.background = true;
    /// let _tasks = (
    ///     cluster.spawn(async {}),
    ///     cluster.spawn_with(async {}, background).unwrap(),
    /// );
    /// assert_eq!(cluster.live_tasks(), 2);
    /// assert_eq!(cluster.live_foreground_tasks(), 1);
    /// cluster.shutdown();
    /// cluster.cancel_all();
    /// assert_eq!(cluster.live_tasks(), 0);
    /// # }
    /// ```
    pub fn live_tasks(&self) -> usize {
        self.count_tasks(true)
    }

    /// [`live_tasks`](Self::live_tasks) less the background tasks.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// use fairlane_core::SpawnOptions;
    /// let cluster = cluster(1);
    /// let mut background = SpawnOptions::default();
    /// background.background = true;
    /// let _task = cluster.spawn_with(async {}, background).unwrap();
    /// assert_eq!(cluster.live_foreground_tasks(), 0);
    /// assert_eq!(cluster.live_tasks(), 1);
    /// cluster.shutdown();
    /// cluster.cancel_all();
    /// # }
    /// ```
    pub fn live_foreground_tasks(&self) -> usize {
        self.count_tasks(false)
    }

    /// A future that resolves once no task is alive — no task but background
    /// ones, unless `include_background`. Meant for one waiter at a time (a
    /// graceful shutdown); a second waiter replaces the first's wake-ups.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let thread = start(&cluster, 0);
    /// let _task = cluster.spawn(async { yield_once().await });
    /// block_on(cluster.tasks_finished(false)); // resolves once the task is done
    /// assert_eq!(cluster.live_tasks(), 0);
    /// stop(&cluster, [thread]);
    /// # }
    /// ```
    pub fn tasks_finished(self: &Arc<Self>, include_background: bool) -> TasksFinished<H> {
        TasksFinished {
            cluster: self.clone(),
            include_background,
        }
    }

    /// A snapshot of processor `p`'s counters.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let thread = start(&cluster, 0);
    /// assert_eq!(block_on(cluster.spawn(async { yield_once().await })), Some(()));
    /// stop(&cluster, [thread]);
    /// assert!(cluster.counters(0).polls >= 2); // polled, yielded, polled again
    /// # }
    /// ```
    pub fn counters(&self, p: usize) -> ProcessorCounters {
        self.sched.counters(p)
    }
}

/// Runs a task of a cancelled cluster once, aborted: the poll drops its
/// future (or lets it [`cancel`](Cancellable::cancel)) and completes the
/// task, so its handle resolves with what the future's `cancel` returned.
/// A task dropped without running would drop its future inside the cell,
/// where nothing can report what the future's destructor does.
fn end_task<H: Host>(runnable: Runnable<TaskMeta<H>>) {
    // Release pairs with the Acquire in `Supervised::poll`, as `abort`'s.
    runnable
        .metadata()
        .state
        .aborted
        .store(true, Ordering::Release);
    runnable.run();
}

/// See [`Executor::tasks_finished`].
///
/// # Example
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
/// # fn main() {
/// let cluster = cluster(1);
/// let thread = start(&cluster, 0);
/// let _task = cluster.spawn(async {});
/// let finished: fairlane_core::TasksFinished<_> = cluster.tasks_finished(true);
/// block_on(finished);
/// assert_eq!(cluster.live_tasks(), 0);
/// stop(&cluster, [thread]);
/// # }
/// ```
pub struct TasksFinished<H: Host> {
    cluster: Arc<Executor<H>>,
    include_background: bool,
}

impl<H: Host> Future for TasksFinished<H> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let cluster = &self.cluster;
        // Register before counting (see `RegistrySlot::drop`).
        cluster
            .drain_waiter
            .lock()
            .with(|w| *w = Some(cx.waker().clone()));
        cluster.draining.store(true, Ordering::Release);
        if cluster.count_tasks(self.include_background) == 0 {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
