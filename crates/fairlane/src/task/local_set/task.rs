//! One task of a [`LocalSet`](super::LocalSet): what its wakers and handles
//! share ([`Header`], `Send + Sync`), the future the set owns
//! ([`LocalTask`], which never leaves the set's thread), and the slot its
//! `JoinHandle` takes the output from ([`JoinSlot`]).
//!
//! Nothing here is `unsafe` to share: the future lives only in the set (an
//! `Rc`), the wakers hold only the header, and the output slot is a
//! `Mutex<T>`, so a `JoinHandle<T>` is `Send` exactly when `T` is.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use fairlane_core::Cancellable;

use super::Shared;
use crate::task::coop;
use crate::task::id::Id;
use crate::task::unwind::{CatchUnwind, TaskOutput};

/// What a local task's wakers, join handle and abort handles share.
pub(crate) struct Header {
    id: Id,
    set: Arc<Shared>,
    /// In one of the set's queues, not yet taken for a poll: a wake that
    /// finds it set queues nothing, so a task is queued at most once. Set
    /// for good once the task has finished, so that late wakes queue
    /// nothing either.
    scheduled: AtomicBool,
    /// Asked to stop: the set's next turn at it drops its future instead
    /// of polling it.
    aborted: AtomicBool,
    /// The future is gone and the output (or its absence) is in the slot.
    finished: AtomicBool,
}

impl Header {
    pub(crate) fn id(&self) -> Id {
        self.id
    }

    pub(super) fn set(&self) -> &Arc<Shared> {
        &self.set
    }

    /// Taken off a queue for a poll: a wake from now on queues it again.
    fn unschedule(&self) {
        // AcqRel, a read-modify-write: it reads the last write of every
        // wake that found the flag set while the task was queued (each one
        // a Release read-modify-write too), so what a waker published
        // before waking is visible to this poll, `aborted` included. A
        // wake after this write finds the flag clear and queues the task
        // again: no wake is lost.
        self.scheduled.swap(false, Ordering::AcqRel);
    }

    /// Asks the task to stop; see `JoinHandle::abort`.
    pub(crate) fn abort(self: &Arc<Self>) {
        // Release, then a wake whose read-modify-write of `scheduled` the
        // next `unschedule` reads (see there): the next turn sees the flag.
        self.aborted.store(true, Ordering::Release);
        self.wake_by_ref();
    }

    pub(crate) fn is_finished(&self) -> bool {
        // Acquire pairs with the Release in `JoinSlot::complete`.
        self.finished.load(Ordering::Acquire)
    }
}

impl Wake for Header {
    fn wake(self: Arc<Self>) {
        // AcqRel: see `unschedule`.
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            Shared::schedule(self);
        }
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // AcqRel: see `unschedule`.
        if !self.scheduled.swap(true, Ordering::AcqRel) {
            Shared::schedule(Arc::clone(self));
        }
    }
}

/// A task's future, type-erased, with the slot it reports to.
trait Run {
    /// Polls the future; on `Ready` its output is in the slot.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>, header: &Header) -> Poll<()>;
    /// Drops the future unfinished; the slot reports it cancelled (or the
    /// panic of its destructor).
    fn cancel(self: Pin<&mut Self>, header: &Header);
}

struct Task<F: Future> {
    future: CatchUnwind<F>,
    slot: Arc<JoinSlot<F::Output>>,
}

impl<F: Future> Task<F> {
    fn project(self: Pin<&mut Self>) -> (Pin<&mut CatchUnwind<F>>, &JoinSlot<F::Output>) {
        // SAFETY: `future` is structurally pinned: it is never moved out of
        // the task, which has no `Drop` or `Unpin` impl of its own; `slot`
        // is not pinned and only borrowed.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        (future, &this.slot)
    }
}

impl<F: Future> Run for Task<F> {
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>, header: &Header) -> Poll<()> {
        let (future, slot) = self.project();
        let output = std::task::ready!(future.poll(cx));
        slot.complete(Some(output), header);
        Poll::Ready(())
    }

    fn cancel(self: Pin<&mut Self>, header: &Header) {
        let (future, slot) = self.project();
        let output = future.cancel();
        slot.complete(output, header);
    }
}

/// What a turn of a task came to.
pub(super) enum Ran {
    /// Polled, and not finished.
    Pending,
    /// Being polled further up the stack: still queued.
    Busy,
    /// Finished: its future is gone and its output in its slot.
    Finished,
}

/// A task as its set owns it.
pub(super) struct LocalTask {
    header: Arc<Header>,
    /// The task's waker, made once.
    waker: Waker,
    future: RefCell<Pin<Box<dyn Run>>>,
}

impl LocalTask {
    /// A task for `future`, queued (its header says so) but not yet in any
    /// queue, and its join handle's side.
    pub(super) fn new<F>(future: F, id: Id, set: &Arc<Shared>) -> (LocalTask, LocalJoin<F::Output>)
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let header = Arc::new(Header {
            id,
            set: Arc::clone(set),
            scheduled: AtomicBool::new(true),
            aborted: AtomicBool::new(false),
            finished: AtomicBool::new(false),
        });
        let slot = Arc::new(JoinSlot(Mutex::new(Slot::Waiting(None))));
        let task = LocalTask {
            waker: Waker::from(Arc::clone(&header)),
            header: Arc::clone(&header),
            future: RefCell::new(Box::pin(Task {
                future: CatchUnwind::new(future, id),
                slot: Arc::clone(&slot),
            })),
        };
        (task, LocalJoin { header, slot })
    }

    pub(super) fn header(&self) -> &Arc<Header> {
        &self.header
    }

    /// Its turn, having been taken off a queue: polls it, or ends it if it
    /// was aborted.
    pub(super) fn run(&self) -> Ran {
        // Already being polled further up this thread's stack: the set is
        // driven from inside one of its own tasks (`run_until` on a set the
        // task holds), and this task was woken meanwhile. It stays queued:
        // it runs again once that poll has returned.
        let Ok(mut future) = self.future.try_borrow_mut() else {
            return Ran::Busy;
        };
        self.header.unschedule();
        if self.header.aborted.load(Ordering::Acquire) {
            future.as_mut().cancel(&self.header);
            return Ran::Finished;
        }
        // Its own budget, as every task's poll has, not the budget of the
        // task that polls the set.
        let _budget = coop::fresh_budget();
        let mut cx = Context::from_waker(&self.waker);
        match future.as_mut().poll(&mut cx, &self.header) {
            Poll::Ready(()) => Ran::Finished,
            Poll::Pending => Ran::Pending,
        }
    }

    /// Drops the future of a task that has not finished (the set is being
    /// dropped).
    pub(super) fn cancel(&self) {
        // Borrowed only by a poll of this task, which cannot be under way:
        // its set is dropped, so nothing drives it. (Were it so, the drop
        // below would cancel the task once that poll had let it go.)
        if let Ok(mut future) = self.future.try_borrow_mut() {
            future.as_mut().cancel(&self.header);
        }
    }
}

impl Drop for LocalTask {
    fn drop(&mut self) {
        // Let go unfinished: its handle must still learn that it ended.
        if !self.header.is_finished() {
            self.future.get_mut().as_mut().cancel(&self.header);
        }
    }
}

/// Where a local task's output waits for its `JoinHandle`.
struct JoinSlot<T>(Mutex<Slot<T>>);

enum Slot<T> {
    /// Not finished; the waker of the handle awaiting it.
    Waiting(Option<Waker>),
    /// Finished: its output, or `None` if it was cancelled.
    Done(Option<TaskOutput<T>>),
    /// The handle took the output.
    Taken,
}

impl<T> JoinSlot<T> {
    fn lock(&self) -> MutexGuard<'_, Slot<T>> {
        // Nothing panics while the lock is held.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The task finished: publishes its output and wakes the handle.
    fn complete(&self, output: Option<TaskOutput<T>>, header: &Header) {
        let mut slot = self.lock();
        let Slot::Waiting(waker) = &mut *slot else {
            // Finished already: nothing to report again.
            drop(slot);
            drop(output);
            return;
        };
        let waker = waker.take();
        *slot = Slot::Done(output);
        drop(slot);
        // Stays set: no wake queues a finished task (see `scheduled`).
        header.scheduled.store(true, Ordering::Relaxed);
        // Release: whoever sees the task finished finds its output in the
        // slot (the lock above orders that write before this one).
        header.finished.store(true, Ordering::Release);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// A `JoinHandle`'s side of a local task.
pub(crate) struct LocalJoin<T> {
    header: Arc<Header>,
    slot: Arc<JoinSlot<T>>,
}

impl<T> LocalJoin<T> {
    pub(crate) fn header(&self) -> &Arc<Header> {
        &self.header
    }

    /// The output once the task finished: `None` if it was cancelled (or
    /// the output was taken before).
    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Option<TaskOutput<T>>> {
        let mut slot = self.slot.lock();
        match &mut *slot {
            Slot::Waiting(waker) => {
                let old = match waker {
                    Some(w) if w.will_wake(cx.waker()) => None,
                    _ => waker.replace(cx.waker().clone()),
                };
                drop(slot);
                drop(old);
                Poll::Pending
            }
            Slot::Done(_) => {
                let Slot::Done(output) = std::mem::replace(&mut *slot, Slot::Taken) else {
                    unreachable!("matched `Done` above")
                };
                Poll::Ready(output)
            }
            Slot::Taken => Poll::Ready(None),
        }
    }
}
