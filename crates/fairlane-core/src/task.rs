//! Tasks: the cell (`async-task`), the scheduling metadata fairlane keeps in
//! it, the registry of live tasks that shutdown cancels, and abort.
//!
//! Task states are `async-task`'s (scheduled, running, completed, closed);
//! `task.md` beside this file explains how fairlane relies on them for "a
//! task is queued at most once" and "a wake during a poll re-queues it once".

use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use async_task::{Builder, FallibleTask, Runnable};
use crossbeam_utils::CachePadded;
use slab::Slab;

use alloc::sync::Arc;

use crate::sync::{AtomicBool, AtomicU32, Ordering, SpinLock};
use crate::{Config, ConfigError, Host, Priority, ProcessorCounters, Scheduler};

const NO_PROCESSOR: u32 = u32::MAX;

/// Scheduling metadata stored in every task's header.
pub struct TaskMeta<H: Host> {
    /// The processor that last polled the task: outside wakes go there.
    preferred: AtomicU32,
    /// The task's priority class: which of its processor's lanes it goes to.
    priority: Priority,
    /// The task's cluster. Kept here rather than captured by the schedule
    /// function: `async-task` wraps every call of a schedule function that
    /// captures anything in a waker clone and drop (two atomic
    /// read-modify-writes per wake), and a zero-sized one skips that.
    cluster: Arc<Cluster<H>>,
}

impl<H: Host> TaskMeta<H> {
    fn preferred(&self) -> Option<usize> {
        match self.preferred.load(Ordering::Relaxed) {
            NO_PROCESSOR => None,
            p => Some(p as usize),
        }
    }
}

impl<H: Host> core::fmt::Debug for TaskMeta<H> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TaskMeta")
            .field("preferred", &self.preferred())
            .finish_non_exhaustive()
    }
}

/// The schedule function of every task: a zero-sized function item (see
/// [`TaskMeta::cluster`]). A closed cluster hands the runnable back, and
/// dropping it drops the future (cancels the task).
fn schedule<H: Host>(runnable: Runnable<TaskMeta<H>>) {
    let meta = runnable.metadata();
    if let Some(p) = meta.cluster.host().current_processor() {
        let cluster: *const Cluster<H> = &*meta.cluster;
        // SAFETY: by the `Host` contract this thread is inside
        // `cluster.run_processor(p)`, whose `&self` borrow keeps the cluster
        // alive for the whole of this call — also after the push, when the
        // runnable (and with it `meta`) may already be another processor's.
        let cluster = unsafe { &*cluster };
        let priority = meta.priority;
        drop(cluster.sched.push_local(p, runnable, priority));
    } else {
        // Outside a processor nothing else is known to keep the cluster alive
        // once the runnable is queued: hold a reference across the push.
        let preferred = meta.preferred();
        let cluster = meta.cluster.clone();
        let priority = meta.priority;
        drop(cluster.sched.push_remote(runnable, preferred, priority));
    }
}

/// How to spawn a task; see [`Cluster::spawn_with`].
///
/// # Example
/// ```
/// let options = fairlane_core::SpawnOptions::default();
/// assert!(!options.background);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpawnOptions {
    /// A background task: [`Cluster::tasks_finished(false)`](Cluster::tasks_finished)
    /// does not wait for it.
    pub background: bool,
    /// Its priority class.
    pub priority: Priority,
}

/// Shared between a task's future and its handles: the abort flag, and the
/// task's waker so that an abort can get it polled (and dropped).
struct TaskCtl {
    aborted: AtomicBool,
    /// Spawned as a background task: does not keep a graceful shutdown
    /// waiting (see [`Cluster::tasks_finished`]).
    background: bool,
    /// Set when the task's future has been dropped (completed or cancelled).
    finished: AtomicBool,
    waker: SpinLock<Option<Waker>>,
}

impl TaskCtl {
    fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        let waker = self.waker.lock().with(|w| w.clone());
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

type Registry = SpinLock<Shard>;

/// One shard of the registry of live tasks.
#[derive(Default)]
struct Shard {
    tasks: Slab<Arc<TaskCtl>>,
    /// How many of `tasks` are background tasks.
    background: usize,
}

/// One cluster: a [`Scheduler`] of tasks and the registry of its live tasks.
///
/// A host runs a cluster by calling [`run_processor`](Cluster::run_processor)
/// once per processor, each on its own thread, and stops it with
/// [`shutdown`](Cluster::shutdown) and [`cancel_all`](Cluster::cancel_all).
///
/// # Example
/// The whole life of a cluster on a minimal host (std threads, a counter for
/// a clock):
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use std::sync::{Mutex, OnceLock};
/// use std::thread::Thread;
/// use fairlane_core::{Cluster, Config, Host};
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
/// let cluster = Cluster::new(Config::new(2), host).unwrap();
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
/// assert!(cluster.counters(0).polls + cluster.counters(1).polls >= 2);
/// ```
pub struct Cluster<H: Host> {
    sched: Scheduler<Runnable<TaskMeta<H>>, H>,
    /// Live tasks, sharded by spawning processor (the last shard for outside
    /// threads) so that spawns on different processors do not contend.
    registry: alloc::boxed::Box<[CachePadded<Registry>]>,
    /// Set once something waits for tasks to finish: from then on every
    /// task that finishes wakes `drain_waiter`.
    draining: AtomicBool,
    drain_waiter: SpinLock<Option<Waker>>,
}

impl<H: Host> Cluster<H> {
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
    /// use fairlane_core::{Cluster, Config};
    /// let cluster = Cluster::new(Config::new(2), H(AtomicU64::new(0))).unwrap();
    /// assert_eq!(cluster.processors(), 2);
    /// ```
    pub fn new(config: Config, host: H) -> Result<Arc<Self>, ConfigError> {
        let shards = config.processors + 1;
        Ok(Arc::new(Self {
            sched: Scheduler::new(config, host)?,
            registry: (0..shards)
                .map(|_| CachePadded::new(SpinLock::new(Shard::default())))
                .collect(),
            draining: AtomicBool::new(false),
            drain_waiter: SpinLock::new(None),
        }))
    }

    /// Number of processors.
    pub fn processors(&self) -> usize {
        self.sched.processors()
    }

    /// The host.
    pub fn host(&self) -> &H {
        self.sched.host()
    }

    /// Spawns `future`; it is queued at once (on the current processor's
    /// lanes when called from one). `None` from the handle means the task
    /// was aborted or cancelled by shutdown. After shutdown the future is
    /// dropped at once and the handle reports cancellation.
    pub fn spawn<F>(self: &Arc<Self>, future: F) -> TaskHandle<F::Output, H>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_with(future, SpawnOptions::default())
    }

    /// [`spawn`](Self::spawn) with [`SpawnOptions`].
    pub fn spawn_with<F>(
        self: &Arc<Self>,
        future: F,
        options: SpawnOptions,
    ) -> TaskHandle<F::Output, H>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let SpawnOptions {
            background,
            priority,
        } = options;
        let shard = self
            .sched
            .host()
            .current_processor()
            .unwrap_or(self.processors());
        let ctl = Arc::new(TaskCtl {
            aborted: AtomicBool::new(false),
            background,
            finished: AtomicBool::new(false),
            waker: SpinLock::new(None),
        });
        let key = self.registry[shard].lock().with(|shard| {
            shard.background += usize::from(background);
            shard.tasks.insert(ctl.clone())
        });
        let supervised = Supervised {
            future,
            slot: RegistrySlot {
                cluster: self.clone(),
                ctl: ctl.clone(),
                shard,
                key,
            },
        };
        let (runnable, task) = Builder::new()
            .metadata(TaskMeta {
                preferred: AtomicU32::new(NO_PROCESSOR),
                priority,
                cluster: self.clone(),
            })
            .spawn(move |_| supervised, schedule::<H>);
        ctl.waker.lock().with(|w| *w = Some(runnable.waker()));
        runnable.schedule();
        TaskHandle {
            task: Some(task.fallible()),
            ctl,
        }
    }

    /// Runs processor `p` on the calling thread until the cluster is shut
    /// down: the one core function a host calls per processor thread.
    pub fn run_processor(&self, p: usize) {
        assert!(
            p < self.processors(),
            "processor {p} does not exist in this cluster"
        );
        while let Some(runnable) = self.sched.next(p) {
            let meta = runnable.metadata();
            if meta.preferred.load(Ordering::Relaxed) != p as u32 {
                meta.preferred.store(p as u32, Ordering::Relaxed);
            }
            self.sched.count_poll(p);
            runnable.run();
        }
    }

    /// Makes the thread running processor `p` return from `run_processor`
    /// after the poll it is in, so that another thread can take `p` over.
    /// Used to hand a processor back from a replacement thread (std's
    /// `block_in_place`). Call [`reclaim_processor`](Self::reclaim_processor)
    /// once that thread has returned.
    pub fn release_processor(&self, p: usize) {
        self.sched.release(p);
    }

    /// Lets processor `p` run again after
    /// [`release_processor`](Self::release_processor).
    pub fn reclaim_processor(&self, p: usize) {
        self.sched.reclaim(p);
    }

    /// Stops the processors: each returns from `run_processor` after the poll
    /// it is in. Tasks woken from now on are cancelled instead of queued.
    pub fn shutdown(&self) {
        self.sched.close();
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.sched.is_closed()
    }

    /// After `shutdown` and once the processors have returned: drops the
    /// future of every task still alive, on the calling thread. Queued tasks
    /// are dropped from the lanes; parked ones are aborted, which wakes them
    /// into the closed queue, which drops them.
    pub fn cancel_all(&self) {
        let queued = self.sched.drain();
        drop(queued);
        for shard in self.registry.iter() {
            let live: Vec<Arc<TaskCtl>> = shard
                .lock()
                .with(|shard| shard.tasks.iter().map(|(_, ctl)| ctl.clone()).collect());
            for ctl in live {
                ctl.abort();
            }
        }
        drop(self.sched.drain());
    }

    /// Number of tasks spawned and not yet completed or dropped.
    pub fn live_tasks(&self) -> usize {
        self.count_tasks(true)
    }

    /// Live tasks, background ones only when `include_background`.
    fn count_tasks(&self, include_background: bool) -> usize {
        let count =
            |s: &mut Shard| s.tasks.len() - if include_background { 0 } else { s.background };
        self.registry
            .iter()
            .map(|shard| shard.lock().with(count))
            .sum()
    }

    /// A future that resolves once no task is alive — no task but background
    /// ones, unless `include_background`. Meant for one waiter at a time (a
    /// graceful shutdown); a second waiter replaces the first's wake-ups.
    pub fn tasks_finished(self: &Arc<Self>, include_background: bool) -> TasksFinished<H> {
        TasksFinished {
            cluster: self.clone(),
            include_background,
        }
    }

    /// A snapshot of processor `p`'s counters.
    pub fn counters(&self, p: usize) -> ProcessorCounters {
        self.sched.counters(p)
    }
}

/// Removes a task from its cluster's registry, and marks it finished, when
/// its future is dropped.
struct RegistrySlot<H: Host> {
    cluster: Arc<Cluster<H>>,
    ctl: Arc<TaskCtl>,
    shard: usize,
    key: usize,
}

impl<H: Host> Drop for RegistrySlot<H> {
    fn drop(&mut self) {
        self.ctl.finished.store(true, Ordering::Release);
        let background = self.ctl.background;
        let removed = self.cluster.registry[self.shard].lock().with(|shard| {
            shard.background -= usize::from(background);
            shard.tasks.try_remove(self.key)
        });
        drop(removed);
        // After the removal, under the shard lock that `TasksFinished` also
        // takes to count: either its count saw this removal, or this load
        // sees its `draining` store and the waker it stored before counting.
        if self.cluster.draining.load(Ordering::Acquire) {
            let waiter = self.cluster.drain_waiter.lock().with(Option::take);
            if let Some(waker) = waiter {
                waker.wake();
            }
        }
    }
}

/// See [`Cluster::tasks_finished`].
pub struct TasksFinished<H: Host> {
    cluster: Arc<Cluster<H>>,
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

/// The future a task actually runs: the user's future, cut short by abort.
///
/// Aligned to 128 bytes (two cache lines, the unit adjacent-line prefetchers
/// fetch): `async-task` lays a task out as one allocation whose alignment is
/// that of its largest-aligned part, so this gives every task cache lines of
/// its own. Without it the header of one task (written by every wake and
/// poll) can share a line with the end of another task's future, polled on
/// another processor.
#[repr(align(128))]
struct Supervised<F, H: Host> {
    future: F,
    slot: RegistrySlot<H>,
}

impl<F: Future, H: Host> Future for Supervised<F, H> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Acquire pairs with the Release in `TaskCtl::abort`.
        if self.slot.ctl.aborted.load(Ordering::Acquire) {
            return Poll::Ready(None);
        }
        // SAFETY: `future` is structurally pinned: it is never moved out of
        // `self`, and `Supervised` has no `Unpin` impl or `Drop` that moves it.
        let future = unsafe { self.map_unchecked_mut(|s| &mut s.future) };
        future.poll(cx).map(Some)
    }
}

/// The spawner's side of a task: await it, abort it, or drop it to detach.
pub struct TaskHandle<T, H: Host> {
    /// `None` only inside `drop`.
    task: Option<FallibleTask<Option<T>, TaskMeta<H>>>,
    ctl: Arc<TaskCtl>,
}

impl<T, H: Host> TaskHandle<T, H> {
    /// Asks the task to stop: it is not polled again; its future is dropped
    /// on a processor. A task that already finished keeps its output.
    pub fn abort(&self) {
        self.ctl.abort();
    }

    /// A cloneable handle that can only abort.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle {
            ctl: self.ctl.clone(),
        }
    }

    /// Whether the task finished (completed, aborted or cancelled).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl<T, H: Host> Drop for TaskHandle<T, H> {
    fn drop(&mut self) {
        // Dropping an `async-task` handle would cancel the task; fairlane's
        // handles detach, as tokio's do.
        if let Some(task) = self.task.take() {
            task.detach();
        }
    }
}

impl<T, H: Host> Future for TaskHandle<T, H> {
    type Output = Option<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        match self.task.as_mut() {
            Some(task) => Pin::new(task).poll(cx).map(Option::flatten),
            None => Poll::Ready(None),
        }
    }
}

/// Aborts a task from anywhere; see [`TaskHandle::abort`].
#[derive(Clone)]
pub struct AbortHandle {
    ctl: Arc<TaskCtl>,
}

impl AbortHandle {
    /// Asks the task to stop; see [`TaskHandle::abort`].
    pub fn abort(&self) {
        self.ctl.abort();
    }

    /// Whether the task's future has been dropped (completed or cancelled).
    pub fn is_finished(&self) -> bool {
        self.ctl.finished.load(Ordering::Acquire)
    }
}
