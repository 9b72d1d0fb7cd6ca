//! A task's waker: a pointer to its header and one reference. Cloning and
//! dropping only count references; a wake queues the task only when it finds
//! it idle (see `State::wake_by_ref`).

use core::marker::PhantomData;
use core::ptr::NonNull;
use core::task::{RawWaker, RawWakerVTable, Waker};

use super::raw::{release, Header, Runnable, Schedule};
use super::state::{WakeByRef, WakeByVal};
use crate::sync::{AtomicBool, Ordering};

struct Vtable<M>(PhantomData<M>);

impl<M: Schedule> Vtable<M> {
    const VTABLE: RawWakerVTable =
        RawWakerVTable::new(clone::<M>, wake::<M>, wake_by_ref::<M>, drop_waker::<M>);
}

/// A waker that owns a reference the caller took for it.
///
/// # Safety
/// `ptr` is a live task's header, and the caller gives the waker one of its
/// references.
pub(crate) unsafe fn waker_from_ref<M: Schedule>(ptr: NonNull<Header<M>>) -> Waker {
    let raw = RawWaker::new(ptr.as_ptr().cast_const().cast(), &Vtable::<M>::VTABLE);
    // SAFETY: the vtable's functions keep `RawWaker`'s contract: each treats
    // the data pointer as a header holding the waker's reference, and the
    // header is `Sync` (`M: Sync`, the state atomic), so the waker may be
    // used from any thread.
    unsafe { Waker::from_raw(raw) }
}

/// # Safety (for the four functions below)
/// `data` is a header pointer given by `waker_from_ref`, holding a reference.
unsafe fn header<'a, M>(data: *const ()) -> &'a Header<M> {
    // SAFETY: see above.
    unsafe { &*data.cast::<Header<M>>() }
}

unsafe fn clone<M: Schedule>(data: *const ()) -> RawWaker {
    // SAFETY: the contract above.
    unsafe { header::<M>(data) }.state.ref_inc();
    RawWaker::new(data, &Vtable::<M>::VTABLE)
}

unsafe fn wake<M: Schedule>(data: *const ()) {
    // SAFETY: the contract above.
    let header = unsafe { header::<M>(data) };
    let ptr = NonNull::from(header);
    match header.state.wake_by_val() {
        WakeByVal::Nothing => {}
        // The waker's reference became the runnable's.
        WakeByVal::Schedule => M::schedule(Runnable {
            ptr,
            _marker: PhantomData,
        }),
        // SAFETY: the last reference, of a complete task: its future (and
        // output) are gone already, so no future is dropped in a wake.
        WakeByVal::Dealloc => unsafe { (header.vtable.dealloc)(ptr.cast()) },
    }
}

unsafe fn wake_by_ref<M: Schedule>(data: *const ()) {
    // SAFETY: the contract above.
    let header = unsafe { header::<M>(data) };
    if header.state.wake_by_ref() == WakeByRef::Schedule {
        // The transition took a reference for the runnable.
        M::schedule(Runnable {
            ptr: NonNull::from(header),
            _marker: PhantomData,
        });
    }
}

unsafe fn drop_waker<M: Schedule>(data: *const ()) {
    // SAFETY: the contract above; the waker's reference is given up once.
    unsafe { release(NonNull::from(header::<M>(data))) }
}

/// Raises `flag` for the task's next poll to read, then wakes the task
/// through `waker`, one of its own wakers (an abort: the flag is
/// `TaskState::aborted`, read at the top of every poll).
///
/// The wake is by value, and that is the rule: a wake by value is a
/// read-modify-write of the state word in every state (it gives up the
/// waker's reference), while a wake by reference that finds the task queued
/// writes nothing. Without a write, nothing orders the flag's store before
/// the next poll's load of it: the processor about to poll the queued task
/// may read the flag unset (each side's store is still on its way while it
/// loads the other's word), return `Pending`, and park the task with no
/// wake left to come. With the write, either it comes before that poll's
/// `start` in the state word's order (and `start`'s Acquire sees the flag,
/// through the release sequence of read-modify-writes), or after it (and
/// finds the task `RUNNING`: `NOTIFIED`, so it is polled again), or the
/// task is idle (and queued) or complete (nothing to abort).
pub fn raise_and_wake(flag: &AtomicBool, waker: Waker) {
    // Release pairs with the poll's Acquire load of the flag.
    flag.store(true, Ordering::Release);
    waker.wake();
}
