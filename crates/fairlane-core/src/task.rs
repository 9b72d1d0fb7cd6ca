//! Tasks as the cluster sees them: the cell (`task/`: its state word, the
//! runnable, the waker, the join handle), the scheduling metadata fairlane
//! keeps in it, the schedule function, the future a task runs, its handles
//! and abort. The registry of live tasks is in `registry.rs`, the cluster
//! that runs tasks (`Executor`) in `cluster.rs`.
//!
//! `task.md` beside this file describes the cell's state machine, on which
//! "a task is queued at most once" and "a wake during a poll re-queues it
//! once" rest.

pub(crate) mod join;
pub(crate) mod raw;
pub(crate) mod state;
pub(crate) mod waker;

use core::future::Future;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Context, Poll, Waker};

use join::JoinHandle;
use raw::{Runnable, Schedule};

use alloc::sync::Arc;

use crate::cluster::Executor;
use crate::registry::{RegistryPlace, RegistrySlot, TaskState};
use crate::scheduler::PushError;
use crate::sync::{AtomicBool, AtomicU32, Ordering, SpinLock};
use crate::{Host, Priority, ProcessorId};

pub(crate) const NO_PROCESSOR: u32 = u32::MAX;

/// Scheduling metadata stored in every task's header. Opaque: the cluster
/// alone reads and writes it.
///
/// # Example
/// ```
/// use fairlane_core::{Host, TaskMeta};
/// // The type is all a host names: every task of a cluster on host `H`
/// // carries one.
/// fn carried<H: Host>(meta: &TaskMeta<H>) -> &TaskMeta<H> {
///     meta
/// }
/// # let _ = carried::<DummyHost>;
/// # struct DummyHost;
/// # unsafe impl Host for DummyHost {
/// #     fn now(&self) -> u64 { 0 }
/// #     fn current_processor(&self) -> Option<usize> { None }
/// #     fn park(&self, _: usize) {}
/// #     fn unpark(&self, _: usize) {}
/// # }
/// ```
pub struct TaskMeta<H: Host> {
    /// The processor that last polled the task: outside wakes go there.
    pub(crate) preferred: AtomicU32,
    /// The task's priority class: which of its processor's lanes it goes to.
    pub(crate) priority: Priority,
    /// Whether `affinity` holds a set: read on every schedule, so that an
    /// unrestricted task never touches the lock.
    pub(crate) restricted: AtomicBool,
    /// The processors the task may run on, if restricted. Written by the
    /// task itself while it runs (or at spawn); the cell's state word orders
    /// that write before any later schedule of the task.
    pub(crate) affinity: SpinLock<Option<Arc<[ProcessorId]>>>,
    /// The task's cluster, for the schedule function.
    ///
    /// Changed only by the task itself, while it runs
    /// ([`Executor::migrate_current`]), and read only by the schedule
    /// function, which the cell never calls while the task runs: the task's
    /// state word (AcqRel transitions) orders every write before every later
    /// read, so the cell is never accessed concurrently.
    pub(crate) cluster: core::cell::UnsafeCell<Arc<Executor<H>>>,
    /// Abort, finish and background, and the task's links in the registry:
    /// what the task's handles, the registry and its future share. In the
    /// task's own allocation, so that a spawn allocates once.
    pub(crate) state: TaskState,
    /// Which cluster's registry holds the task, if it moved. Written before
    /// the task is first scheduled and by the task itself while it runs
    /// ([`Executor::migrate_current`]); read when its future is dropped,
    /// which never overlaps a poll. The same ordering argument as `cluster`.
    pub(crate) registration: core::cell::UnsafeCell<RegistryPlace<H>>,
}

// SAFETY: every field but `cluster` and `registration` is `Sync`. Those two
// are written only by the thread polling the task (or by the spawner before
// the task is first scheduled) and read only by `schedule` and by the drop
// of the task's future, neither of which runs during a poll of the same
// task (see the fields' comments), so no two threads access them at once.
unsafe impl<H: Host> Sync for TaskMeta<H> {}

impl<H: Host> TaskMeta<H> {
    /// The task's cluster; see the field's comment for why this is sound.
    #[inline]
    pub(crate) fn cluster(&self) -> &Arc<Executor<H>> {
        // SAFETY: called only from `schedule` (and `migrate_current`, the
        // writer itself), never during a write (see `cluster`).
        unsafe { &*self.cluster.get() }
    }
}

impl<H: Host> TaskMeta<H> {
    /// The cluster whose registry holds the task.
    ///
    /// # Safety
    /// Only while the task is being polled on this thread, or while its
    /// future is being dropped, or before it is first scheduled (see
    /// `registration`).
    pub(crate) unsafe fn registry_cluster(&self) -> &Executor<H> {
        // SAFETY: the caller is the only one accessing the two cells now.
        let (cluster, reg) = unsafe { (&*self.cluster.get(), &*self.registration.get()) };
        reg.spawned_in.as_ref().unwrap_or(cluster)
    }

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

impl<H: Host> Schedule for TaskMeta<H> {
    #[inline]
    fn schedule(runnable: Runnable<Self>) {
        schedule(runnable);
    }

    #[inline]
    fn poll_started(waker: &core::task::Waker) {
        H::poll_started(waker);
    }

    #[inline]
    fn poll_ended() -> bool {
        H::poll_ended()
    }
}

/// The schedule function of every task. A closed cluster hands the runnable
/// back, and it goes to the cluster's graveyard ([`Executor::bury`]): a wake
/// never drops a future itself.
fn schedule<H: Host>(runnable: Runnable<TaskMeta<H>>) {
    let meta = runnable.metadata();
    if meta.restricted.load(Ordering::Relaxed) {
        return schedule_restricted(runnable);
    }
    if let Some(p) = meta.cluster().host().current_processor() {
        let cluster: *const Executor<H> = &**meta.cluster();
        // SAFETY: by the `Host` contract this thread is inside
        // `cluster.run_processor(p)`, whose `&self` borrow keeps the cluster
        // alive for the whole of this call — also after the push, when the
        // runnable (and with it `meta`) may already be another processor's.
        let cluster = unsafe { &*cluster };
        let priority = meta.priority;
        let me = meta as *const TaskMeta<H> as *mut ();
        let Err(runnable) = cluster.sched.put_woken(p, runnable, priority, me) else {
            return;
        };
        if let Err(runnable) = cluster.sched.push_local(p, runnable, priority) {
            cluster.bury(runnable);
        }
    } else {
        // Outside a processor nothing else is known to keep the cluster alive
        // once the runnable is queued: hold a reference across the push.
        let preferred = meta.preferred();
        let cluster = meta.cluster().clone();
        let priority = meta.priority;
        if let Err(runnable) = cluster.sched.push_remote(runnable, preferred, priority) {
            cluster.bury(runnable);
        }
    }
}

/// The push rule of a task restricted to a set of processors (see
/// [`Scheduler::push_restricted`](crate::scheduler::Scheduler::push_restricted)).
/// A task none of whose allowed processors exists any more is re-homed: its
/// restriction is cleared and it runs anywhere in its cluster from then on.
#[cold]
pub(crate) fn schedule_restricted<H: Host>(runnable: Runnable<TaskMeta<H>>) {
    let meta = runnable.metadata();
    let allowed = meta.affinity.lock().with(|a| a.clone());
    // Keeps the cluster alive across the push, wherever we are.
    let cluster = meta.cluster().clone();
    let preferred = meta.preferred();
    let Some(allowed) = allowed else {
        meta.restricted.store(false, Ordering::Relaxed);
        return schedule(runnable);
    };
    match cluster.sched.push_restricted(runnable, &allowed, preferred) {
        Ok(()) => {}
        Err(PushError::Closed(runnable)) => cluster.bury(runnable),
        Err(PushError::NoneAllowed(runnable)) => {
            let meta = runnable.metadata();
            meta.affinity.lock().with(|a| *a = None);
            meta.restricted.store(false, Ordering::Relaxed);
            schedule(runnable);
        }
    }
}

/// How to spawn a task; see [`Executor::spawn_with`].
///
/// # Example
/// ```
/// let options = fairlane_core::SpawnOptions::default();
/// assert!(!options.background);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpawnOptions {
    /// A background task: [`Executor::tasks_finished(false)`](Executor::tasks_finished)
    /// does not wait for it.
    pub background: bool,
    /// Its priority class.
    pub priority: Priority,
    /// The processors it may run on (`None`: any of its cluster's). At
    /// least one must exist when spawning; a restricted task is served as a
    /// normal-priority one, so `priority` must then be `Normal`.
    pub affinity: Option<Arc<[ProcessorId]>>,
}

/// Why a set of processors cannot restrict a task.
///
/// # Example
/// ```
/// let err = fairlane_core::AffinityError::NoSuchProcessor;
/// assert!(err.to_string().contains("no processor"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AffinityError {
    /// The set names no processor of the cluster that exists now.
    NoSuchProcessor,
    /// Restricted tasks are served as normal-priority ones.
    WithPriority,
    /// Changing the current task's set was asked outside a task of this
    /// cluster.
    NotInTask,
    /// The set names a processor of another cluster (of this runtime or of
    /// another one): identities belong to the cluster that made them.
    OtherCluster,
}

impl core::fmt::Display for AffinityError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::NoSuchProcessor => "the affinity set names no processor of the task's cluster (ask the cluster for its processor ids)",
            Self::WithPriority => "a task restricted to a set of processors runs at normal priority: drop the priority or the affinity",
            Self::NotInTask => "the current task's affinity can only be changed from inside a task, on a processor of its cluster",
            Self::OtherCluster => "the affinity set names a processor of another cluster or runtime (ask the task's cluster for its processor ids)",
        })
    }
}

impl core::error::Error for AffinityError {}

/// The future a task actually runs: the user's future, cut short by abort.
/// (The cell around it is aligned to a pair of cache lines: see `raw::Cell`.)
pub(crate) struct Supervised<F, H: Host> {
    pub(crate) future: F,
    pub(crate) slot: RegistrySlot<H>,
}

impl<F: Cancellable, H: Host> Future for Supervised<F, H> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Acquire pairs with the Release in `TaskState::abort` (and in
        // `end_task`, `AbortHandle::abort` and `cancel_all`).
        let aborted = self.slot.state().aborted.load(Ordering::Acquire);
        // SAFETY: `future` is structurally restricted: it is never moved out of
        // `self`, and `Supervised` has no `Unpin` impl or `Drop` that moves it.
        let future = unsafe { self.map_unchecked_mut(|s| &mut s.future) };
        if aborted {
            return Poll::Ready(future.cancel());
        }
        future.poll(cx).map(Some)
    }
}

/// A task's future that ends its task itself when the task is aborted or
/// cancelled by shutdown (see [`Executor::spawn_cancellable`]).
///
/// The std runtime's tasks use it to drop the user's future where a panic
/// in its destructor can be caught and reported through the task's handle:
/// the task cell (`no_std`) cannot catch panics.
///
/// # Example
/// See [`Executor::spawn_cancellable`].
pub trait Cancellable: Future {
    /// Called once, instead of a poll, when the task has been aborted or
    /// its cluster cancelled; the future is not polled again, and is
    /// dropped afterwards. `Some` is the task's output; `None` reports the
    /// task cancelled.
    fn cancel(self: Pin<&mut Self>) -> Option<Self::Output>;
}

/// A plain future as a [`Cancellable`] one: cancelling it gives no output,
/// and the task drops it.
pub(crate) struct NoCancelOutput<F>(pub(crate) F);

impl<F: Future> Future for NoCancelOutput<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the field is structurally restricted: never moved out, and the
        // wrapper has no `Drop` or `Unpin` impl of its own.
        unsafe { self.map_unchecked_mut(|s| &mut s.0) }.poll(cx)
    }
}

impl<F: Future> Cancellable for NoCancelOutput<F> {
    fn cancel(self: Pin<&mut Self>) -> Option<F::Output> {
        None
    }
}

/// The spawner's side of a task: await it, abort it, or drop it to detach.
///
/// # Example
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
/// # fn main() {
/// let cluster = cluster(1);
/// let thread = start(&cluster, 0);
/// let handle: fairlane_core::TaskHandle<u32, _> = cluster.spawn(async { 7 });
/// assert_eq!(block_on(handle), Some(7)); // `None`: aborted or cancelled
/// stop(&cluster, [thread]);
/// # }
/// ```
pub struct TaskHandle<T, H: Host> {
    pub(crate) task: JoinHandle<Option<T>, TaskMeta<H>>,
}

impl<T, H: Host> TaskHandle<T, H> {
    fn state(&self) -> &TaskState {
        &self.task.metadata().state
    }

    /// Asks the task to stop: it is not polled again; its future is dropped
    /// on a processor. A task that already finished keeps its output.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let thread = start(&cluster, 0);
    /// let handle = cluster.spawn(std::future::pending::<u32>());
    /// handle.abort();
    /// assert_eq!(block_on(handle), None); // aborted: no output
    /// stop(&cluster, [thread]);
    /// # }
    /// ```
    pub fn abort(&self) {
        self.state().abort();
    }

    /// A cloneable handle that can only abort.
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let thread = start(&cluster, 0);
    /// let handle = cluster.spawn(core::future::pending::<()>());
    /// let abort = handle.abort_handle();
    /// let other = abort.clone();
    /// other.abort();
    /// assert_eq!(block_on(handle), None);
    /// assert!(abort.is_finished());
    /// stop(&cluster, [thread]);
    /// # }
    /// ```
    pub fn abort_handle(&self) -> AbortHandle {
        let state = self.state();
        AbortHandle {
            // A waker keeps the task, and its state, allocated. None once
            // the future is dropped: there is nothing left to abort.
            task: state
                .waker
                .lock()
                .with(|w| w.clone())
                .map(|waker| (waker, NonNull::from(state))),
        }
    }

    /// Whether the task finished (completed, aborted or cancelled).
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let handle = cluster.spawn(async {});
    /// assert!(!handle.is_finished()); // queued: no processor runs yet
    /// let thread = start(&cluster, 0);
    /// while !handle.is_finished() {
    ///     std::thread::yield_now();
    /// }
    /// stop(&cluster, [thread]);
    /// # }
    /// ```
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl<T, H: Host> Future for TaskHandle<T, H> {
    type Output = Option<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        Pin::new(&mut self.task).poll(cx).map(Option::flatten)
    }
}

/// Aborts a task from anywhere; see [`TaskHandle::abort`].
///
/// Like tokio's, it holds a reference on the task: the task's memory (and
/// its cluster) stays allocated while an `AbortHandle` made before the task
/// finished exists, though its future is dropped when it finishes.
///
/// # Example
/// ```
/// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
/// # fn main() {
/// let cluster = cluster(1);
/// let thread = start(&cluster, 0);
/// let handle = cluster.spawn(core::future::pending::<()>());
/// let abort: fairlane_core::AbortHandle = handle.abort_handle();
/// std::thread::spawn(move || abort.abort()).join().unwrap();
/// assert_eq!(block_on(handle), None);
/// stop(&cluster, [thread]);
/// # }
/// ```
#[derive(Clone)]
pub struct AbortHandle {
    /// The task's waker, which keeps it allocated, and its state; `None`
    /// when made after the task's future was dropped.
    task: Option<(Waker, NonNull<TaskState>)>,
}

// SAFETY: `TaskState` is `Sync` and the waker keeps it allocated.
unsafe impl Send for AbortHandle {}
// SAFETY: as above.
unsafe impl Sync for AbortHandle {}

impl AbortHandle {
    fn state(&self) -> Option<&TaskState> {
        // SAFETY: see `task`.
        self.task
            .as_ref()
            .map(|(_, state)| unsafe { state.as_ref() })
    }

    /// Asks the task to stop; see [`TaskHandle::abort`].
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let thread = start(&cluster, 0);
    /// let handle = cluster.spawn(core::future::pending::<()>());
    /// let abort = handle.abort_handle();
    /// abort.abort();
    /// abort.abort(); // a second time changes nothing
    /// assert_eq!(block_on(handle), None);
    /// stop(&cluster, [thread]);
    /// # }
    /// ```
    pub fn abort(&self) {
        if let Some((waker, state)) = &self.task {
            // SAFETY: see `task`. By value, through a clone: see
            // `raise_and_wake`.
            waker::raise_and_wake(&unsafe { state.as_ref() }.aborted, waker.clone());
        }
    }

    /// Whether the task's future has been dropped (completed or cancelled).
    ///
    /// # Example
    /// ```
    /// # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/doc_host.rs"));
    /// # fn main() {
    /// let cluster = cluster(1);
    /// let thread = start(&cluster, 0);
    /// let handle = cluster.spawn(async { 3 });
    /// let abort = handle.abort_handle();
    /// assert_eq!(block_on(handle), Some(3));
    /// assert!(abort.is_finished());
    /// stop(&cluster, [thread]);
    /// # }
    /// ```
    pub fn is_finished(&self) -> bool {
        self.state()
            .is_none_or(|state| state.finished.load(Ordering::Acquire))
    }
}
#[cfg(test)]
mod tests {
    /// The cell puts its header (the state word, the vtable pointer, the
    /// join handle's waker and the metadata) before the future: it stays
    /// within one 128-byte pair of cache lines, so that a task whose future
    /// (with its wrappers) takes at most 128 bytes fits in a cell of 256.
    #[test]
    fn task_metadata_fits_before_the_future() {
        struct H;
        // SAFETY: never runs a processor.
        unsafe impl crate::Host for H {
            fn now(&self) -> u64 {
                0
            }
            fn current_processor(&self) -> Option<usize> {
                None
            }
            fn park(&self, _: usize) {}
            fn unpark(&self, _: usize) {}
        }
        assert!(core::mem::size_of::<super::raw::Header<super::TaskMeta<H>>>() <= 128);
    }
}
