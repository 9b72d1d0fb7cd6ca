//! The task cell: one allocation holding the header (state word, vtable,
//! the join handle's waker, the scheduler's metadata) and, after it, the
//! future — or, once the task is complete, its output in the same place.
//! [`Runnable`] is the permission to poll it.

use alloc::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use core::future::Future;
use core::marker::PhantomData;
use core::mem::{self, ManuallyDrop};
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Context, Poll, Waker};

use super::join::JoinHandle;
use super::state::{Idle, State, AWAITER, COMPLETE, HANDLE};
use crate::sync::UnsafeCell;

/// What the cell asks of its metadata: how to queue the task.
pub trait Schedule: Sized + Send + Sync + 'static {
    /// Queues `runnable`. Called by the wake that finds the task idle, and
    /// by the runner when the task was woken during its poll; never while
    /// the task runs. Must not poll or drop the runnable inline if the
    /// caller may hold locks (a waker's caller may): queue it, or put it
    /// aside.
    fn schedule(runnable: Runnable<Self>);

    /// Called by the runner right before a poll, with the poll's waker
    /// (see `Host::poll_started`). The default does nothing.
    #[inline]
    fn poll_started(waker: &Waker) {
        let _ = waker;
    }

    /// Called by the runner once the poll has returned or unwound: whether
    /// the task asked to be queued again without a wake (see
    /// `Host::poll_ended`). The default answers false.
    #[inline]
    fn poll_ended() -> bool {
        false
    }
}

/// The cell's operations that depend on the future's type.
pub(crate) struct VTable {
    /// Polls the future; on `Ready` drops it and stores the output, and
    /// returns true. Sets `*future_live` to false right before dropping the
    /// future, so that a destructor that panics is not run twice.
    pub(crate) poll: unsafe fn(NonNull<()>, &mut Context<'_>, &mut bool) -> bool,
    /// Drops the future in place.
    pub(crate) drop_future: unsafe fn(NonNull<()>),
    /// Moves the output to `*mut T` (the join handle's type).
    pub(crate) take_output: unsafe fn(NonNull<()>, *mut ()),
    /// Drops the output in place.
    pub(crate) drop_output: unsafe fn(NonNull<()>),
    /// Drops what is left in the cell and frees it.
    pub(crate) dealloc: unsafe fn(NonNull<()>),
}

/// The start of every task's allocation.
#[repr(C)]
pub(crate) struct Header<M> {
    pub(crate) state: State,
    pub(crate) vtable: &'static VTable,
    /// The join handle's waker; see `AWAITER` for who may access it when.
    pub(crate) awaiter: UnsafeCell<Option<Waker>>,
    pub(crate) meta: M,
}

impl<M> Header<M> {
    /// The metadata of the cell at `ptr`, as a pointer that keeps the whole
    /// cell's provenance: [`from_meta`](Self::from_meta) finds the header
    /// again from it (or from a pointer into the metadata derived from it
    /// by raw-pointer projection), which a pointer made from a `&M` may not
    /// do.
    ///
    /// # Safety
    /// `ptr` is a cell that is still allocated.
    pub(crate) unsafe fn meta_ptr(ptr: NonNull<Self>) -> NonNull<M> {
        // SAFETY: a projection to a field of the live header `ptr` points
        // to: in bounds of its allocation, so not null. No reference is
        // made, so the result keeps `ptr`'s provenance.
        unsafe { NonNull::new_unchecked(core::ptr::addr_of_mut!((*ptr.as_ptr()).meta)) }
    }

    /// The header whose metadata `meta` is.
    ///
    /// # Safety
    /// `meta` was given by [`meta_ptr`](Self::meta_ptr) (or by [`spawn`] to
    /// its `make`), for a cell that is still allocated.
    pub(crate) unsafe fn from_meta(meta: NonNull<M>) -> NonNull<Self> {
        // SAFETY: `meta` is `offset_of!(Self, meta)` bytes into the header
        // (`repr(C)`), with the cell's provenance: the header's address, in
        // the same allocation.
        unsafe { meta.byte_sub(mem::offset_of!(Self, meta)).cast() }
    }
}

impl<M: Schedule> Header<M> {
    /// A new waker of the task at `ptr`: takes a reference for it.
    ///
    /// # Safety
    /// `ptr` is a cell whose count cannot reach zero during the call: the
    /// caller holds a reference, or keeps one from being given up meanwhile.
    pub(crate) unsafe fn new_waker(ptr: NonNull<Self>) -> Waker {
        // SAFETY: the caller's contract keeps the cell allocated.
        unsafe { ptr.as_ref() }.state.ref_inc();
        // SAFETY: the reference just taken is the waker's.
        unsafe { super::waker::waker_from_ref(ptr) }
    }
}

/// The future, or its output once complete: which one is live is told by
/// the state word (`COMPLETE`, `CLOSED`, see `task.md`).
union Stage<F: Future> {
    future: ManuallyDrop<F>,
    output: ManuallyDrop<F::Output>,
}

/// A whole task: header first (`repr(C)`), so a header pointer is a cell
/// pointer.
///
/// Aligned to 128 bytes, a pair of cache lines, and so a whole number of
/// pairs long: tasks allocated one after another are often polled on
/// different processors, and CPUs that prefetch the other line of a pair
/// with every miss (x86's adjacent-line prefetchers) would otherwise pull
/// a neighbour's lines into one processor's cache while another processor
/// writes them, making every transition of either task's state word a
/// cache miss.
#[repr(C, align(128))]
struct Cell<F: Future, M> {
    header: Header<M>,
    stage: UnsafeCell<Stage<F>>,
}

/// The size of the cell of a task whose future is `F`, for the tests that
/// keep it small.
#[cfg(all(test, not(loom)))]
pub(crate) const fn cell_size<F: Future, M>() -> usize {
    mem::size_of::<Cell<F, M>>()
}

impl<F, M> Cell<F, M>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    M: Schedule,
{
    const VTABLE: VTable = VTable {
        poll: Self::poll,
        drop_future: Self::drop_future,
        take_output: Self::take_output,
        drop_output: Self::drop_output,
        dealloc: Self::dealloc,
    };

    /// # Safety (for every function below)
    /// `ptr` is the header of a live `Cell<F, M>` (it was made by `spawn`
    /// with this `F` and `M`, whose vtable this is).
    unsafe fn from_ptr<'a>(ptr: NonNull<()>) -> &'a Self {
        // SAFETY: see above; `Cell` is `repr(C)` with the header first.
        unsafe { ptr.cast::<Self>().as_ref() }
    }

    /// Only the runner (`RUNNING`), with the future live.
    unsafe fn poll(ptr: NonNull<()>, cx: &mut Context<'_>, future_live: &mut bool) -> bool {
        // SAFETY: the caller's contract.
        let cell = unsafe { Self::from_ptr(ptr) };
        cell.stage.with_mut(|stage| {
            // SAFETY: the runner has the stage to itself (`RUNNING`: nobody
            // else touches it before `COMPLETE`), the future is live, and it
            // is pinned: the cell never moves and the future is dropped in
            // place.
            let future = unsafe { Pin::new_unchecked(&mut *(*stage).future) };
            match future.poll(cx) {
                Poll::Pending => false,
                Poll::Ready(output) => {
                    *future_live = false;
                    // SAFETY: as above; the future is not used again (a
                    // panic in its destructor has still ended it).
                    unsafe { ManuallyDrop::drop(&mut (*stage).future) };
                    // SAFETY: the stage is ours; the future's bytes are dead.
                    unsafe { (*stage).output = ManuallyDrop::new(output) };
                    true
                }
            }
        })
    }

    /// Only the holder of the runnable, with the future live.
    unsafe fn drop_future(ptr: NonNull<()>) {
        // SAFETY: the caller's contract.
        let cell = unsafe { Self::from_ptr(ptr) };
        // SAFETY: the stage is the caller's and holds the live future; it is
        // dropped in place (pinning kept) and not used again.
        cell.stage
            .with_mut(|stage| unsafe { ManuallyDrop::drop(&mut (*stage).future) });
    }

    /// Only the owner of the output (the join handle after `COMPLETE`, or
    /// the runner when there is no handle), with the output live; `dst` is
    /// a `*mut F::Output`, uninitialised.
    unsafe fn take_output(ptr: NonNull<()>, dst: *mut ()) {
        // SAFETY: the caller's contract.
        let cell = unsafe { Self::from_ptr(ptr) };
        cell.stage.with_mut(|stage| {
            // SAFETY: the output is live and the caller's; it is moved out
            // and its bytes are not read again (`CLOSED` says so).
            unsafe {
                dst.cast::<F::Output>()
                    .write(ManuallyDrop::take(&mut (*stage).output))
            }
        });
    }

    /// As `take_output`.
    unsafe fn drop_output(ptr: NonNull<()>) {
        // SAFETY: the caller's contract.
        let cell = unsafe { Self::from_ptr(ptr) };
        // SAFETY: the output is live and the caller's; not used again.
        cell.stage
            .with_mut(|stage| unsafe { ManuallyDrop::drop(&mut (*stage).output) });
    }

    /// Only the holder of the last reference.
    unsafe fn dealloc(ptr: NonNull<()>) {
        let cell = ptr.cast::<Self>().as_ptr();
        // SAFETY: the last reference: nobody else can reach the cell. A
        // task that never completed still has its future (which may refer
        // to the metadata: dropped first); a completed one has no output
        // left, since the owner of the output takes or drops it before
        // giving up its reference (see `task.md`).
        unsafe {
            if !(*cell).header.state.load().has(COMPLETE) {
                Self::drop_future(ptr);
            }
            core::ptr::drop_in_place(cell);
            dealloc(cell.cast(), Layout::new::<Self>());
        }
    }
}

/// Makes a task: its metadata `meta` and the future `make(meta)` returns,
/// given a pointer to the metadata in the task's allocation, at an address
/// that stays put until the task is freed (a [`Header::meta_ptr`], from
/// which [`Header::from_meta`] finds the header). Returns the runnable (the
/// task is `SCHEDULED`: push it, or run it) and the join handle.
pub fn spawn<F, M>(
    meta: M,
    make: impl FnOnce(NonNull<M>) -> F,
) -> (Runnable<M>, JoinHandle<F::Output, M>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    M: Schedule,
{
    let layout = Layout::new::<Cell<F, M>>();
    // SAFETY: a cell is never zero-sized (the header has a state word).
    let raw = unsafe { alloc(layout) }.cast::<Cell<F, M>>();
    let Some(cell) = NonNull::new(raw) else {
        handle_alloc_error(layout)
    };
    let header = Header {
        state: State::new(),
        vtable: &Cell::<F, M>::VTABLE,
        awaiter: UnsafeCell::new(None),
        meta,
    };
    // SAFETY: `cell` is fresh memory for a `Cell<F, M>`: writing its fields
    // in place initialises it; nothing else can reach it yet.
    unsafe { core::ptr::addr_of_mut!((*raw).header).write(header) };
    /// Frees the half-made cell if `make` panics.
    struct Unmade<F: Future, M>(*mut Cell<F, M>);
    impl<F: Future, M> Drop for Unmade<F, M> {
        fn drop(&mut self) {
            // SAFETY: the header is initialised and the stage is not; the
            // allocation is ours alone.
            unsafe {
                core::ptr::drop_in_place(core::ptr::addr_of_mut!((*self.0).header));
                dealloc(self.0.cast(), Layout::new::<Cell<F, M>>());
            }
        }
    }
    let unmade = Unmade(raw);
    // SAFETY: the header was just written and is not moved until freed.
    let future = make(unsafe { Header::meta_ptr(cell.cast()) });
    mem::forget(unmade);
    // SAFETY: as above; the stage is written once, in place.
    unsafe {
        core::ptr::addr_of_mut!((*raw).stage).write(UnsafeCell::new(Stage {
            future: ManuallyDrop::new(future),
        }));
    }
    let header = cell.cast::<Header<M>>();
    // The initial state counts these two references.
    (
        Runnable {
            ptr: header,
            _marker: PhantomData,
        },
        // SAFETY: `F::Output` is the task's output; the handle's reference.
        unsafe { JoinHandle::new(header) },
    )
}

/// The permission to poll a task: exactly one exists while the task is
/// `SCHEDULED`, none otherwise. Holds a reference.
pub struct Runnable<M> {
    pub(crate) ptr: NonNull<Header<M>>,
    pub(crate) _marker: PhantomData<M>,
}

// SAFETY: a runnable is the only permission to poll its task's future, so
// moving it moves that permission; the future is `Send` (required by
// `spawn`) and the metadata is `Send + Sync` (`Schedule`).
unsafe impl<M: Schedule> Send for Runnable<M> {}
// SAFETY: `&Runnable` only gives `&M` (`Sync`).
unsafe impl<M: Schedule> Sync for Runnable<M> {}

impl<M: Schedule> Runnable<M> {
    fn header(&self) -> &Header<M> {
        // SAFETY: the runnable's reference keeps the cell allocated.
        unsafe { self.ptr.as_ref() }
    }

    /// The task's metadata.
    #[inline]
    pub fn metadata(&self) -> &M {
        &self.header().meta
    }

    /// Queues the task (calls [`Schedule::schedule`]).
    #[inline]
    pub fn schedule(self) {
        M::schedule(self);
    }

    /// A waker of the task (a new reference).
    pub fn waker(&self) -> Waker {
        // SAFETY: the runnable holds a reference.
        unsafe { Header::new_waker(self.ptr) }
    }

    /// Polls the task once: `RUNNING`, the poll, then idle (or re-queued if
    /// woken meanwhile: [`Schedule::schedule`] is called once), or
    /// complete. A panic out of the future's `poll` (or destructor) ends
    /// the task without output (its join handle gets `None`) and goes on
    /// unwinding.
    pub fn run(self) {
        let ptr = self.ptr;
        mem::forget(self);
        // SAFETY: the runnable's reference keeps the cell allocated until
        // it is given up below.
        let header = unsafe { ptr.as_ref() };
        header.state.start();
        // The poll's waker borrows the runnable's reference: never dropped.
        // SAFETY: that reference outlives the poll.
        let waker = ManuallyDrop::new(unsafe { super::waker::waker_from_ref(ptr) });
        let mut cx = Context::from_waker(&waker);
        let mut guard = Unwinding {
            ptr,
            future_live: true,
        };
        M::poll_started(&waker);
        let hooks = PollEnded::<M>(PhantomData);
        // SAFETY: `RUNNING`, and the future is live (a runnable exists only
        // for a task that is not complete).
        let ready = unsafe { (header.vtable.poll)(ptr.cast(), &mut cx, &mut guard.future_live) };
        mem::forget(hooks);
        let requeue = M::poll_ended();
        mem::forget(guard);
        if ready {
            // SAFETY: the output was just stored; the runnable's reference
            // is still held.
            unsafe { finish(ptr, false) };
            return;
        }
        match header.state.idle(requeue) {
            Idle::Ok => {}
            Idle::Requeue => M::schedule(Runnable {
                ptr,
                _marker: PhantomData,
            }),
            // SAFETY: the last reference: the cell is ours to free.
            Idle::Dealloc => unsafe { (header.vtable.dealloc)(ptr.cast()) },
        }
    }
}

/// Tells the host that a poll unwound (`Schedule::poll_ended`): it forgets
/// the poll's waker. A request to run again is moot then, the task
/// completes. Dropped before `Unwinding`, which completes the task.
struct PollEnded<M: Schedule>(PhantomData<M>);

impl<M: Schedule> Drop for PollEnded<M> {
    fn drop(&mut self) {
        let _ = M::poll_ended();
    }
}

/// Completes without output a task whose future is dropped unfinished: a
/// runnable dropped unrun, or a poll (or the future's destructor after
/// `Ready`) that panicked. Forgotten when the poll returns.
struct Unwinding<M> {
    ptr: NonNull<Header<M>>,
    future_live: bool,
}

impl<M> Drop for Unwinding<M> {
    fn drop(&mut self) {
        // Completes the task after the future is dropped, also when the
        // future's destructor panics: a task whose future is gone must
        // complete, or its handle never resolves and the cell leaks.
        let finish_guard = Finish(self.ptr);
        if self.future_live {
            // SAFETY: the guard belongs to the holder of the runnable, and
            // the future is still live; it is not dropped again (the cell is
            // `COMPLETE` once `finish_guard` has run, so `dealloc` leaves it).
            unsafe { (self.ptr.as_ref().vtable.drop_future)(self.ptr.cast()) };
        }
        drop(finish_guard);
    }
}

/// Completes the task without output and gives up the runnable's
/// reference when dropped (see [`finish`]), also while unwinding out of the
/// future's destructor.
struct Finish<M>(NonNull<Header<M>>);

impl<M> Drop for Finish<M> {
    fn drop(&mut self) {
        // SAFETY: made only by `Unwinding`, which belongs to the holder of
        // the runnable, once the future is dropped (or being unwound from).
        unsafe { finish(self.0, true) }
    }
}

/// Completes the task (`closed`: without output), hands the output to its
/// owner, and gives up the runnable's reference.
///
/// # Safety
/// Only the holder of the runnable, once the future is dropped and, unless
/// `closed`, the output is stored.
unsafe fn finish<M>(ptr: NonNull<Header<M>>, closed: bool) {
    // SAFETY: the runnable's reference keeps the cell allocated.
    let header = unsafe { ptr.as_ref() };
    let prev = header.state.complete(closed);
    if !prev.has(HANDLE) {
        // Detached: the output is the runner's (the handle's drop saw the
        // task incomplete, so it left the output to us).
        if !closed {
            // Gives up the reference even if the output's destructor
            // panics, which then unwinds out of `run`.
            let release_ref = ReleaseOnDrop(ptr);
            // SAFETY: the output is live and ours.
            unsafe { (header.vtable.drop_output)(ptr.cast()) };
            drop(release_ref);
            return;
        }
    } else if prev.has(AWAITER) {
        // The handle left its waker in the slot and, with `AWAITER` set,
        // does not touch it; after `COMPLETE` it never will. It is dropped
        // with the cell.
        header.awaiter.with(|waker| {
            // SAFETY: see above: only reads happen now.
            if let Some(waker) = unsafe { &*waker } {
                waker.wake_by_ref();
            }
        });
    }
    // SAFETY: the runnable's reference, given up once.
    unsafe { release(ptr) };
}

/// Gives up a reference (see [`release`]) when dropped, also while
/// unwinding from a destructor of the output.
pub(crate) struct ReleaseOnDrop<M>(pub(crate) NonNull<Header<M>>);

impl<M> Drop for ReleaseOnDrop<M> {
    fn drop(&mut self) {
        // SAFETY: whoever made this guard gave it its reference, and does
        // not use the cell after dropping it.
        unsafe { release(self.0) }
    }
}

/// Gives up a reference, freeing the cell if it was the last.
///
/// # Safety
/// The caller holds a reference, and does not use the cell afterwards.
pub(crate) unsafe fn release<M>(ptr: NonNull<Header<M>>) {
    // SAFETY: the caller's reference keeps the cell allocated until now.
    let header = unsafe { ptr.as_ref() };
    if header.state.ref_dec() {
        // SAFETY: that was the last reference.
        unsafe { (header.vtable.dealloc)(ptr.cast()) };
    }
}

impl<M> crate::lane::Locality for Runnable<M> {
    /// The task's cell: its header, then its future.
    fn address(&self) -> usize {
        self.ptr.as_ptr().addr()
    }
}

// SAFETY: the pointer is the runnable's cell, whose reference it carries
// while given up; `from_raw` rebuilds the one runnable from it.
unsafe impl<M> crate::wake_slot::IntoRaw for Runnable<M> {
    fn into_raw(self) -> NonNull<()> {
        ManuallyDrop::new(self).ptr.cast()
    }

    unsafe fn from_raw(ptr: NonNull<()>) -> Self {
        Runnable {
            ptr: ptr.cast(),
            _marker: PhantomData,
        }
    }
}

impl<M> Drop for Runnable<M> {
    fn drop(&mut self) {
        // A runnable dropped without running (a scheduler dropped with tasks
        // queued): the future is dropped here and the task completes
        // without output, also if the future's destructor panics.
        drop(Unwinding {
            ptr: self.ptr,
            future_live: true,
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use alloc::sync::Arc;
    use alloc::vec::Vec;
    use core::cell::RefCell;
    use core::future::{pending, Future};
    use core::pin::pin;
    use core::sync::atomic::{AtomicUsize, Ordering};
    use core::task::{Context, Poll, Waker};
    use std::panic::{catch_unwind, AssertUnwindSafe};

    use super::{spawn, Runnable, Schedule};

    std::thread_local!(static QUEUE: RefCell<Vec<Runnable<Meta>>> = const { RefCell::new(Vec::new()) });

    /// Counts its cell's frees.
    struct Meta(Arc<AtomicUsize>);

    impl Drop for Meta {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl Schedule for Meta {
        fn schedule(runnable: Runnable<Self>) {
            QUEUE.with(|q| q.borrow_mut().push(runnable));
        }
    }

    /// Counts its drops; panics in its destructor when told to.
    struct Counted(Arc<AtomicUsize>, bool);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
            if self.1 {
                panic!("dropped");
            }
        }
    }

    fn poll_once<F: Future>(f: F) -> Poll<F::Output> {
        pin!(f).poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn a_panicking_poll_completes_the_task_without_output() {
        let freed = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let held = Counted(drops.clone(), false);
        let (runnable, mut handle) = spawn(Meta(freed.clone()), move |_| async move {
            let _held = held;
            panic!("in poll");
        });
        assert!(catch_unwind(AssertUnwindSafe(|| runnable.run())).is_err());
        assert_eq!(drops.load(Ordering::Relaxed), 1, "the future is dropped");
        assert!(handle.is_finished());
        assert_eq!(poll_once(&mut handle), Poll::Ready(None::<()>));
        drop(handle);
        assert_eq!(freed.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_runnable_dropped_unrun_drops_the_future() {
        let freed = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let held = Counted(drops.clone(), false);
        let (runnable, mut handle) = spawn(Meta(freed.clone()), move |_| async move {
            let _held = held;
            pending::<()>().await;
        });
        let waker = runnable.waker();
        drop(runnable);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert_eq!(poll_once(&mut handle), Poll::Ready(None));
        // A wake of the complete task queues nothing.
        waker.wake_by_ref();
        assert!(QUEUE.with(|q| q.borrow().is_empty()));
        drop(handle);
        assert_eq!(freed.load(Ordering::Relaxed), 0, "the waker holds it");
        drop(waker);
        assert_eq!(freed.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_detached_output_that_panics_when_dropped_still_frees_the_cell() {
        let freed = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let output = Counted(drops.clone(), true);
        let (runnable, handle) = spawn(Meta(freed.clone()), move |_| async move { output });
        drop(handle);
        assert!(catch_unwind(AssertUnwindSafe(|| runnable.run())).is_err());
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert_eq!(freed.load(Ordering::Relaxed), 1);
    }

    /// Panics in its destructor the first time it is dropped; counts every
    /// drop (a second one would mean the value was dropped twice).
    struct PanicsOnce(Arc<AtomicUsize>);

    impl Drop for PanicsOnce {
        fn drop(&mut self) {
            if self.0.fetch_add(1, Ordering::Relaxed) == 0 {
                panic!("dropped");
            }
        }
    }

    /// A runnable dropped unrun (a cluster dropped with the task queued)
    /// whose future panics in its destructor still completes the task:
    /// its handle resolves and the cell is freed.
    #[test]
    fn a_runnable_dropped_unrun_completes_even_if_the_future_panics_in_drop() {
        let freed = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let held = PanicsOnce(drops.clone());
        let (runnable, mut handle) = spawn(Meta(freed.clone()), move |_| async move {
            let _held = held;
            pending::<()>().await;
        });
        assert!(catch_unwind(AssertUnwindSafe(|| drop(runnable))).is_err());
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert!(handle.is_finished(), "the task never completed");
        assert_eq!(poll_once(&mut handle), Poll::Ready(None));
        drop(handle);
        assert_eq!(freed.load(Ordering::Relaxed), 1, "the cell leaked");
    }

    /// A future whose destructor panics after it returned `Ready` is
    /// dropped once: the poll marks it dead before dropping it, so the
    /// guard that completes the task on unwinding does not drop it again.
    #[test]
    fn a_future_that_panics_in_drop_after_ready_is_dropped_once() {
        let freed = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        /// Ready at once; panics when dropped (its own destructor, not a
        /// local of an async block, which would panic inside `poll`).
        struct ReadyThenPanics(#[allow(dead_code)] PanicsOnce);
        impl Future for ReadyThenPanics {
            type Output = u32;
            fn poll(self: core::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u32> {
                Poll::Ready(5)
            }
        }
        let future = ReadyThenPanics(PanicsOnce(drops.clone()));
        let (runnable, mut handle) = spawn(Meta(freed.clone()), move |_| future);
        assert!(catch_unwind(AssertUnwindSafe(|| runnable.run())).is_err());
        assert_eq!(drops.load(Ordering::Relaxed), 1, "dropped twice");
        assert_eq!(poll_once(&mut handle), Poll::Ready(None));
        drop(handle);
        assert_eq!(freed.load(Ordering::Relaxed), 1);
    }

    /// The join handle hands out an output once: polled again after
    /// `Ready`, it answers `None` and never reads the moved-out output.
    #[test]
    fn the_join_handle_takes_the_output_once() {
        let freed = Arc::new(AtomicUsize::new(0));
        let (runnable, mut handle) = spawn(Meta(freed.clone()), |_| async {
            alloc::string::String::from("output")
        });
        runnable.run();
        assert_eq!(poll_once(&mut handle), Poll::Ready(Some("output".into())));
        assert_eq!(poll_once(&mut handle), Poll::Ready(None));
        drop(handle);
        assert_eq!(freed.load(Ordering::Relaxed), 1);
    }

    /// A wake by reference alone during the poll (no wake by value to hide
    /// a lost one) re-queues the task once, after the poll.
    #[test]
    fn a_wake_by_reference_during_the_poll_requeues_it() {
        let freed = Arc::new(AtomicUsize::new(0));
        let polls = Arc::new(AtomicUsize::new(0));
        let p = polls.clone();
        let (runnable, mut handle) = spawn(Meta(freed.clone()), move |_| {
            core::future::poll_fn(move |cx| {
                if p.fetch_add(1, Ordering::Relaxed) == 0 {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            })
        });
        runnable.run();
        let next = QUEUE.with(|q| core::mem::take(&mut *q.borrow_mut()));
        assert_eq!(next.len(), 1, "the wake during the poll was lost");
        next.into_iter().for_each(Runnable::run);
        assert_eq!(poll_once(&mut handle), Poll::Ready(Some(())));
        drop(handle);
        assert_eq!(freed.load(Ordering::Relaxed), 1);
    }

    /// Waking through a clone (`wake`, by value) is another path than
    /// `wake_by_ref`: the test takes both on purpose.
    #[test]
    #[allow(clippy::waker_clone_wake)]
    fn a_wake_during_the_poll_requeues_once_after_it() {
        let freed = Arc::new(AtomicUsize::new(0));
        let polls = Arc::new(AtomicUsize::new(0));
        let p = polls.clone();
        let (runnable, mut handle) = spawn(Meta(freed.clone()), move |_| {
            core::future::poll_fn(move |cx| {
                if p.fetch_add(1, Ordering::Relaxed) == 0 {
                    cx.waker().wake_by_ref();
                    cx.waker().wake_by_ref();
                    cx.waker().clone().wake();
                    assert!(
                        QUEUE.with(|q| q.borrow().is_empty()),
                        "queued during its poll"
                    );
                    Poll::Pending
                } else {
                    Poll::Ready(7)
                }
            })
        });
        runnable.run();
        let next = QUEUE.with(|q| core::mem::take(&mut *q.borrow_mut()));
        assert_eq!(next.len(), 1);
        next.into_iter().for_each(Runnable::run);
        assert_eq!(polls.load(Ordering::Relaxed), 2);
        assert_eq!(poll_once(&mut handle), Poll::Ready(Some(7)));
        drop(handle);
        assert_eq!(freed.load(Ordering::Relaxed), 1);
    }
}
