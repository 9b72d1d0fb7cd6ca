//! The join handle: the owner of a task's output, and of one reference.

use core::future::Future;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::{Context, Poll};

use super::raw::{Header, ReleaseOnDrop};
use super::state::{Snapshot, AWAITER, CLOSED, COMPLETE};

/// Awaits a task's output; `None` when the task ended without one (its
/// future was dropped unfinished). Dropping it detaches the task: the runner
/// drops the output.
pub struct JoinHandle<T, M> {
    ptr: NonNull<Header<M>>,
    _marker: PhantomData<T>,
}

// SAFETY: the handle hands out the output (`T: Send`) by value, and reaches
// the header (`M: Sync`) only through shared references and the state word.
unsafe impl<T: Send, M: Send + Sync> Send for JoinHandle<T, M> {}
// The handle is a pointer; nothing in it is pinned.
impl<T, M> Unpin for JoinHandle<T, M> {}

// SAFETY: `&JoinHandle` only reads the state word.
unsafe impl<T, M: Send + Sync> Sync for JoinHandle<T, M> {}

impl<T, M> JoinHandle<T, M> {
    /// # Safety
    /// `ptr` is a live task whose output type is `T`, and the caller gives
    /// the handle the reference that `HANDLE` counts.
    pub(crate) unsafe fn new(ptr: NonNull<Header<M>>) -> Self {
        Self {
            ptr,
            _marker: PhantomData,
        }
    }

    fn header(&self) -> &Header<M> {
        // SAFETY: the handle's reference keeps the cell allocated.
        unsafe { self.ptr.as_ref() }
    }

    /// The task's cell (the handle holds a reference on it).
    pub(crate) fn header_ptr(&self) -> NonNull<Header<M>> {
        self.ptr
    }

    /// Whether the task is complete (its future is gone).
    pub fn is_finished(&self) -> bool {
        self.header().state.load().has(COMPLETE)
    }

    /// The output of a complete task, once; `None` if there is none (any
    /// more).
    fn take_output(&self, seen: Snapshot) -> Option<T> {
        debug_assert!(seen.has(COMPLETE));
        if seen.has(CLOSED) {
            return None;
        }
        let header = self.header();
        let mut out = MaybeUninit::<T>::uninit();
        // SAFETY: `COMPLETE` was seen with Acquire (the output's write is
        // visible), `HANDLE` is ours (the runner leaves the output to us),
        // and `CLOSED` is clear: the output is live. `T` is the output type.
        unsafe { (header.vtable.take_output)(self.ptr.cast(), out.as_mut_ptr().cast()) };
        header.state.close();
        // SAFETY: written just above.
        Some(unsafe { out.assume_init() })
    }
}

impl<T, M> Future for JoinHandle<T, M> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let seen = self.header().state.load();
        if seen.has(COMPLETE) {
            return Poll::Ready(self.take_output(seen));
        }
        let header = self.header();
        if seen.has(AWAITER) {
            // The slot is stable while `AWAITER` is set; reading it races
            // only with the runner's read.
            // SAFETY: see above.
            let same = header.awaiter.with(|w| {
                unsafe { &*w }
                    .as_ref()
                    .is_some_and(|w| w.will_wake(cx.waker()))
            });
            if same {
                return Poll::Pending;
            }
            if let Err(seen) = header.state.unset_awaiter() {
                return Poll::Ready(self.take_output(seen));
            }
        }
        // `AWAITER` is clear and the task is not complete (the runner then
        // does not read the slot): the slot is the handle's to write.
        let waker = cx.waker().clone();
        // SAFETY: see above.
        header.awaiter.with_mut(|w| unsafe { *w = Some(waker) });
        match header.state.set_awaiter() {
            Ok(()) => Poll::Pending,
            // Completed meanwhile: the runner saw no waker; the one just
            // written is dropped with the cell.
            Err(seen) => Poll::Ready(self.take_output(seen)),
        }
    }
}

impl<T, M> Drop for JoinHandle<T, M> {
    fn drop(&mut self) {
        match self.header().state.drop_handle() {
            // Detached: the runner will drop the output.
            Ok(false) => {}
            // SAFETY: the last reference (a task that can never run again).
            Ok(true) => unsafe { (self.header().vtable.dealloc)(self.ptr.cast()) },
            Err(seen) => {
                // Complete: the output is ours to drop, then the reference.
                // The reference is given up even if the output's
                // destructor panics.
                let release_ref = ReleaseOnDrop(self.ptr);
                drop(self.take_output(seen));
                drop(release_ref);
            }
        }
    }
}
