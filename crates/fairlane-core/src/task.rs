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
use raw::{Header, Runnable, Schedule};

use alloc::boxed::Box;
use alloc::sync::Arc;

use crate::cluster::Executor;
use crate::registry::{RegistrySlot, TaskState};
use crate::scheduler::PushError;
use crate::sync::{AtomicBool, AtomicU32, Ordering};
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
    // Small on purpose: the cell's header (this, the state word, the vtable
    // and the join handle's waker) and a boxed future with the std
    // runtime's wrappers fit in one pair of cache lines
    // (`a_boxed_future_fits_one_pair_of_cache_lines`). What few tasks need
    // is out of line (`Rare`), and the task's reference on itself is a flag
    // (`TaskState::own_ref`), not a stored waker.
    /// The task's cluster, for the schedule function.
    ///
    /// Changed only by the task itself, while it runs
    /// ([`Executor::migrate_current`]), and read only by the schedule
    /// function, which the cell never calls while the task runs: the task's
    /// state word (AcqRel transitions) orders every write before every later
    /// read, so the cell is never accessed concurrently.
    pub(crate) cluster: core::cell::UnsafeCell<Arc<Executor<H>>>,
    /// What few tasks need, allocated when first needed. Written at spawn,
    /// by the task itself while it runs ([`Executor::set_current_affinity`],
    /// [`Executor::migrate_current`]) and by the schedule function
    /// (`schedule_restricted`, which may lift a restriction); read by the
    /// schedule function and when the task's future is dropped, which never
    /// overlaps a poll or a schedule of the task. The same ordering
    /// argument as `cluster`: all of them hold the task's runnable (or run
    /// it), and the state word and the ready queue hand that on.
    rare: core::cell::UnsafeCell<Option<Box<Rare<H>>>>,
    /// Abort, finish and background, the task's reference on itself and
    /// its links in the registry: what the task's handles, the registry and
    /// its future share. In the task's own allocation, so that a spawn
    /// allocates once.
    pub(crate) state: TaskState,
    /// The processor that last polled the task: outside wakes go there.
    pub(crate) preferred: AtomicU32,
    /// The task's priority class: which of its processor's lanes it goes to.
    pub(crate) priority: Priority,
    /// Whether the task is restricted to a set of processors
    /// (`Rare::affinity` holds one): read on every schedule, so that an
    /// unrestricted task never reads `rare`.
    pub(crate) restricted: AtomicBool,
}

/// What few tasks need, out of the task's cell: the cell stays one pair of
/// cache lines for a small future, and tasks that use none of it allocate
/// nothing more. Behind `TaskMeta::rare`, whose comment says who accesses
/// it when.
struct Rare<H: Host> {
    /// The processors the task may run on, if restricted.
    affinity: Option<Arc<[ProcessorId]>>,
    /// The cluster whose registry holds the task, when that is not the
    /// task's cluster (it moved: tasks stay in the registry of the cluster
    /// that spawned them, see `Executor::migrate_current`). `None` for a
    /// task that never moved, so that a spawn takes one reference on its
    /// cluster, not two.
    spawned_in: Option<Arc<Executor<H>>>,
}

// SAFETY: every field but `cluster` and `rare` is `Sync`. Those two are
// written only by the holder of the task's runnable: the thread polling the
// task, the spawner before the task is first scheduled, and the schedule
// function; and read only by those and by the drop of the task's future,
// none of which overlaps another for the same task (see the fields'
// comments), so no two threads access them at once.
unsafe impl<H: Host> Sync for TaskMeta<H> {}

impl<H: Host> TaskMeta<H> {
    /// The metadata of a new task of `cluster`.
    pub(crate) fn new(
        cluster: Arc<Executor<H>>,
        priority: Priority,
        affinity: Option<Arc<[ProcessorId]>>,
        background: bool,
    ) -> Self {
        Self {
            cluster: core::cell::UnsafeCell::new(cluster),
            restricted: AtomicBool::new(affinity.is_some()),
            rare: core::cell::UnsafeCell::new(affinity.map(|affinity| {
                Box::new(Rare {
                    affinity: Some(affinity),
                    spawned_in: None,
                })
            })),
            state: TaskState::new(background),
            preferred: AtomicU32::new(NO_PROCESSOR),
            priority,
        }
    }

    /// The task's cluster; see the field's comment for why this is sound.
    #[inline]
    pub(crate) fn cluster(&self) -> &Arc<Executor<H>> {
        // SAFETY: called only from `schedule` (and `migrate_current`, the
        // writer itself), never during a write (see `cluster`).
        unsafe { &*self.cluster.get() }
    }

    /// The task's out-of-line part (`None` until first needed).
    ///
    /// # Safety
    /// Only by the holder of the task's runnable (or while polling the
    /// task, on this thread), or while its future is being dropped (see
    /// `rare`); the reference is not kept past that.
    #[allow(clippy::mut_from_ref)] // the safety contract makes it unique
    unsafe fn rare_mut(&self) -> &mut Option<Box<Rare<H>>> {
        // SAFETY: the caller is the only one accessing the cell now.
        unsafe { &mut *self.rare.get() }
    }

    /// The processors the task may run on, if restricted.
    ///
    /// # Safety
    /// As [`rare_mut`](Self::rare_mut).
    unsafe fn affinity(&self) -> Option<Arc<[ProcessorId]>> {
        // SAFETY: the caller's contract.
        unsafe { self.rare_mut() }
            .as_ref()
            .and_then(|rare| rare.affinity.clone())
    }

    /// Restricts the task to `allowed` (`None`: lifts the restriction).
    ///
    /// # Safety
    /// As [`rare_mut`](Self::rare_mut).
    pub(crate) unsafe fn set_affinity(&self, allowed: Option<Arc<[ProcessorId]>>) {
        self.restricted.store(allowed.is_some(), Ordering::Relaxed);
        // SAFETY: the caller's contract.
        let rare = unsafe { self.rare_mut() };
        match (rare.as_mut(), allowed) {
            (None, None) => {}
            (None, Some(allowed)) => {
                *rare = Some(Box::new(Rare {
                    affinity: Some(allowed),
                    spawned_in: None,
                }))
            }
            (Some(r), allowed) => r.affinity = allowed,
        }
    }

    /// Records that the task moves from cluster `old` to `target` (its
    /// `cluster` already says `target`): it stays in the registry that holds
    /// it, which it keeps alive. Drops `old` otherwise.
    ///
    /// # Safety
    /// Only while polling the task, on this thread (see `rare`).
    pub(crate) unsafe fn moved(&self, old: Arc<Executor<H>>, target: &Arc<Executor<H>>) {
        // SAFETY: the caller's contract.
        let rare = unsafe { self.rare_mut() };
        let home_is_target = rare
            .as_ref()
            .and_then(|r| r.spawned_in.as_ref())
            .map(|home| Arc::ptr_eq(home, target));
        match home_is_target {
            None if Arc::ptr_eq(&old, target) => drop(old),
            None => {
                rare.get_or_insert_with(|| {
                    Box::new(Rare {
                        affinity: None,
                        spawned_in: None,
                    })
                })
                .spawned_in = Some(old)
            }
            // Back home: `old` is dropped.
            Some(true) => {
                if let Some(r) = rare {
                    r.spawned_in = None;
                }
            }
            Some(false) => drop(old),
        }
    }

    /// The cluster whose registry holds the task.
    ///
    /// # Safety
    /// Only while the task is being polled on this thread, or while its
    /// future is being dropped, or before it is first scheduled (see
    /// `rare`).
    pub(crate) unsafe fn registry_cluster(&self) -> &Executor<H> {
        // SAFETY: the caller is the only one accessing the two cells now.
        let (cluster, rare) = unsafe { (&*self.cluster.get(), &*self.rare.get()) };
        rare.as_ref()
            .and_then(|r| r.spawned_in.as_ref())
            .unwrap_or(cluster)
    }

    /// The state of the task whose metadata `meta` is, with its provenance
    /// (for the registry, which finds the cell from it: [`from_state`](Self::from_state)).
    ///
    /// # Safety
    /// `meta` is a live task's, with its cell's provenance (see
    /// [`Header::meta_ptr`]).
    pub(crate) unsafe fn state_ptr(meta: NonNull<Self>) -> NonNull<TaskState> {
        // SAFETY: a projection to a field of the live metadata: in bounds,
        // not null; no reference is made, so the provenance is kept.
        unsafe { NonNull::new_unchecked(core::ptr::addr_of_mut!((*meta.as_ptr()).state)) }
    }

    /// The metadata whose state `state` is.
    ///
    /// # Safety
    /// `state` was given by [`state_ptr`](Self::state_ptr), and its task is
    /// still allocated.
    pub(crate) unsafe fn from_state(state: NonNull<TaskState>) -> NonNull<Self> {
        // SAFETY: `state` is that field of a `TaskMeta<H>`, with the cell's
        // provenance: this is the metadata's address, in the same
        // allocation.
        unsafe { state.byte_sub(core::mem::offset_of!(Self, state)).cast() }
    }

    /// Makes the task hold a reference on itself, until its future is
    /// dropped (`RegistrySlot::drop` gives it up).
    pub(crate) fn hold_own_ref(runnable: &Runnable<Self>) {
        // The waker's reference is the task's own: the flag stands for it.
        core::mem::forget(runnable.waker());
        runnable
            .metadata()
            .state
            .own_ref
            .lock()
            .with(|held| *held = true);
    }

    /// A new waker of the task, if it still holds its reference on itself
    /// (its future lives).
    ///
    /// # Safety
    /// `meta` is a task's metadata with its cell's provenance (see
    /// [`Header::meta_ptr`]), and the cell is allocated: the caller holds a
    /// reference, or the lock of the registry shard that lists the task.
    pub(crate) unsafe fn own_waker(meta: NonNull<Self>) -> Option<Waker> {
        // SAFETY: the caller's contract.
        let (header, state) = unsafe { (Header::from_meta(meta), &meta.as_ref().state) };
        state.own_ref.lock().with(|held| {
            // SAFETY: the task's own reference is held, and cannot be given
            // up while we hold the lock: the count is not zero.
            held.then(|| unsafe { Header::new_waker(header) })
        })
    }

    /// Gives up the task's reference on itself, if it still holds it.
    ///
    /// # Safety
    /// As [`own_waker`](Self::own_waker), and the caller holds a reference
    /// of its own (the task's is then never its last).
    pub(crate) unsafe fn drop_own_ref(meta: NonNull<Self>) {
        // SAFETY: the caller's contract.
        let (header, state) = unsafe { (Header::from_meta(meta), &meta.as_ref().state) };
        if state.own_ref.lock().with(core::mem::take) {
            // SAFETY: the flag stood for this reference, given up once
            // (cleared under the lock); not the last (the caller's contract).
            unsafe { raw::release(header) };
        }
    }

    /// Aborts the task; see [`TaskHandle::abort`].
    ///
    /// # Safety
    /// As [`own_waker`](Self::own_waker).
    pub(crate) unsafe fn abort(meta: NonNull<Self>) {
        // SAFETY: the caller's contract.
        match unsafe { Self::own_waker(meta) } {
            // SAFETY: the cell is allocated (the caller's contract).
            Some(waker) => waker::raise_and_wake(unsafe { &meta.as_ref().state.aborted }, waker),
            // The future is gone: nothing polls the flag any more.
            // SAFETY: as above.
            None => unsafe { meta.as_ref() }
                .state
                .aborted
                .store(true, Ordering::Release),
        }
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
    // SAFETY: we hold the runnable.
    let allowed = unsafe { meta.affinity() };
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
            // SAFETY: we hold the runnable (handed back).
            unsafe { runnable.metadata().set_affinity(None) };
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
    fn meta_ptr(&self) -> NonNull<TaskMeta<H>> {
        // SAFETY: the handle holds a reference on the cell.
        unsafe { Header::meta_ptr(self.task.header_ptr()) }
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
        // SAFETY: the handle's reference keeps the cell allocated; the
        // pointer has the cell's provenance.
        unsafe { TaskMeta::abort(self.meta_ptr()) }
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
        let meta = self.meta_ptr();
        AbortHandle {
            // A waker keeps the task, and its state, allocated. None once
            // the future is dropped: there is nothing left to abort.
            // SAFETY: the handle's reference keeps the cell allocated; the
            // pointer has the cell's provenance.
            task: unsafe { TaskMeta::own_waker(meta) }
                .map(|waker| (waker, unsafe { TaskMeta::state_ptr(meta) })),
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
#[cfg(all(test, not(loom)))]
mod tests {
    use alloc::boxed::Box;
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll};

    use super::raw::{cell_size, Header};
    use super::{Cancellable, NoCancelOutput, Supervised, TaskMeta};

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

    type Boxed = Pin<Box<dyn Future<Output = ()> + Send>>;

    /// A boxed future as the std runtime spawns it: beside the box, the
    /// task's id and whether the future is still live (its panic-catching
    /// wrapper), 32 bytes in all.
    struct StdWrapped {
        boxed: Boxed,
        _id: u64,
        _live: bool,
    }

    impl Future for StdWrapped {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.boxed.as_mut().poll(cx)
        }
    }

    impl Cancellable for StdWrapped {
        fn cancel(self: Pin<&mut Self>) -> Option<()> {
            None
        }
    }

    type CellOf<F> = Supervised<F, H>;

    /// The cell of a task spawned with `future`, a plain future.
    fn cell_of<F: Future>(_: &F) -> usize {
        cell_size::<CellOf<NoCancelOutput<F>>, TaskMeta<H>>()
    }

    /// The header (state word, vtable, the join handle's waker, the
    /// metadata) and a boxed future, with the wrappers the std runtime
    /// puts around it, fit one 128-byte pair of cache lines: a parked
    /// boxed task costs one pair, not two.
    #[test]
    fn a_boxed_future_fits_one_pair_of_cache_lines() {
        assert_eq!(core::mem::size_of::<StdWrapped>(), 32);
        assert_eq!(cell_size::<CellOf<StdWrapped>, TaskMeta<H>>(), 128);
        assert_eq!(
            cell_size::<CellOf<NoCancelOutput<Boxed>>, TaskMeta<H>>(),
            128
        );
        assert_eq!(cell_of(&async {}), 128);
        // What is left of the pair for a future with its wrappers.
        let room = 128 - core::mem::size_of::<Header<TaskMeta<H>>>();
        assert!(room >= 48, "the header grew: {room} bytes left");
    }
}
