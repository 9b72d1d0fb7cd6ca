//! The one synchronisation primitive every workload uses: a waker-based
//! semaphore that knows nothing of any runtime.
//!
//! Every runtime under test parks and wakes tasks through this same code, so a
//! difference in a figure is a difference in the scheduler, never in the
//! primitive. It is deliberately plain: a `std::sync::Mutex` around a permit
//! count and a FIFO of waiting tasks' wakers.
//!
//! # Protocol
//! * `post` hands its permit straight to the oldest waiter if there is one
//!   (the waiter does not have to race for it again), otherwise it adds to the
//!   count (a *binary* semaphore never holds more than one permit).
//! * A waiter that finds no permit takes a *ticket*. Tickets are granted in
//!   order, so "my ticket has been served" is `ticket < served`, and a waiter
//!   still queued sits at index `ticket - served` of the queue: a repeated poll
//!   replaces its waker in place instead of queueing twice.
//! * A waiter dropped before it was served leaves a hole (`None`) that `post`
//!   skips; one dropped after being served but before it saw the permit passes
//!   the permit on, so no permit is ever lost.
//! * `close` wakes everybody; every wait from then on returns [`Closed`]. The
//!   workloads use it to stop tasks that are parked when a run ends.
//!
//! Wakers are always woken after the lock is released.
//!
//! In the [`Padded`] layout (the default) each semaphore, and each queued
//! waker, has cache lines of its own. The workloads give neighbouring tasks
//! neighbouring semaphores, and a scheduler may run neighbours on different
//! processors: lines shared between them would make a figure depend on
//! which neighbours happen to run apart (false sharing in the benchmark's
//! own data), not on how the scheduler treats its tasks. The [`Plain`]
//! layout is the same code without the padding, as ordinary programs
//! allocate their synchronisation objects: neighbours share lines, and a
//! scheduler that keeps neighbouring tasks together is rewarded for it
//! (`--padded no`).

use std::collections::VecDeque;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use crossbeam_utils::CachePadded;

/// The semaphore was closed while (or before) waiting on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

/// What a successful wait observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    /// The wait could not take a permit at once: the task parked.
    pub blocked: bool,
}

/// How a semaphore lays out its state and its queued wakers: [`Padded`]
/// (each on cache lines of its own) or [`Plain`] (no padding).
pub trait Layout: Send + Sync + 'static {
    /// What holds the semaphore's lock.
    type Lock: Deref<Target = Mutex<State<Self>>> + From<Mutex<State<Self>>> + Send + Sync;
    /// What holds one queued waker.
    type Slot: DerefMut<Target = Option<Waker>> + From<Option<Waker>> + Send + Sync;
    /// The waker a slot holds.
    fn take(slot: Self::Slot) -> Option<Waker>;
}

/// Every semaphore and queued waker on cache lines of its own.
pub struct Padded;

/// No padding: consecutive semaphores share cache lines.
pub struct Plain;

impl Layout for Padded {
    type Lock = CachePadded<Mutex<State<Self>>>;
    type Slot = CachePadded<Option<Waker>>;
    fn take(slot: Self::Slot) -> Option<Waker> {
        CachePadded::into_inner(slot)
    }
}

impl Layout for Plain {
    type Lock = Bare<Mutex<State<Self>>>;
    type Slot = Bare<Option<Waker>>;
    fn take(slot: Self::Slot) -> Option<Waker> {
        slot.0
    }
}

/// A value as it is, for [`Plain`].
pub struct Bare<T>(T);

impl<T> From<T> for Bare<T> {
    fn from(value: T) -> Self {
        Bare(value)
    }
}

impl<T> Deref for Bare<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> DerefMut for Bare<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// A semaphore's state, behind its lock.
pub struct State<L: Layout + ?Sized> {
    permits: usize,
    /// Tickets handed out so far.
    next_ticket: u64,
    /// Tickets granted so far; waiters with `ticket < served` own a permit.
    served: u64,
    /// Waker of ticket `served + i` at index `i`; `None` marks a cancelled wait.
    waiters: VecDeque<L::Slot>,
    closed: bool,
}

/// A binary or counting semaphore whose waits are futures, laid out as `L`
/// says.
pub struct Semaphore<L: Layout = Padded> {
    max_permits: usize,
    state: L::Lock,
}

impl<L: Layout> Semaphore<L> {
    /// A binary semaphore: at most one permit, so two posts with nobody
    /// waiting leave one permit.
    pub fn binary(initially_set: bool) -> Self {
        Self::new(1, usize::from(initially_set), 0)
    }

    /// A counting semaphore with `permits` initial permits.
    pub fn counting(permits: usize) -> Self {
        Self::new(usize::MAX, permits, 0)
    }

    /// A counting semaphore whose waiter queue is allocated up front for
    /// `waiters` waits, so that queueing does not allocate (used where the
    /// suite counts the runtime's own allocations).
    pub fn counting_with_capacity(permits: usize, waiters: usize) -> Self {
        Self::new(usize::MAX, permits, waiters)
    }

    fn new(max_permits: usize, permits: usize, capacity: usize) -> Self {
        Semaphore {
            max_permits,
            state: Mutex::new(State {
                permits,
                next_ticket: 0,
                served: 0,
                waiters: VecDeque::with_capacity(capacity),
                closed: false,
            })
            .into(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<L>> {
        // A panicking task must not turn every other task's wait into a panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Releases one permit: to the oldest waiter if any, else to the count.
    pub fn post(&self) {
        let mut st = self.lock();
        if st.closed {
            return;
        }
        while let Some(slot) = st.waiters.pop_front().map(L::take) {
            st.served += 1;
            if let Some(waker) = slot {
                drop(st);
                waker.wake();
                return;
            }
        }
        if st.permits < self.max_permits {
            st.permits += 1;
        }
    }

    /// Waits for a permit.
    pub fn wait(&self) -> Wait<'_, L> {
        Wait {
            sem: self,
            ticket: None,
            done: false,
        }
    }

    /// Closes the semaphore: wakes every waiter, and every wait returns
    /// [`Closed`] from now on.
    pub fn close(&self) {
        let waiters = {
            let mut st = self.lock();
            st.closed = true;
            std::mem::take(&mut st.waiters)
        };
        for waker in waiters.into_iter().filter_map(L::take) {
            waker.wake();
        }
    }

    /// How many waits are queued (cancelled ones included).
    pub fn waiting(&self) -> usize {
        self.lock().waiters.len()
    }
}

/// The future returned by [`Semaphore::wait`].
pub struct Wait<'a, L: Layout = Padded> {
    sem: &'a Semaphore<L>,
    ticket: Option<u64>,
    done: bool,
}

impl<L: Layout> Future for Wait<'_, L> {
    type Output = Result<Acquired, Closed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut st = this.sem.lock();
        if st.closed {
            this.done = true;
            return Poll::Ready(Err(Closed));
        }
        match this.ticket {
            None => {
                if st.permits > 0 && st.waiters.is_empty() {
                    st.permits -= 1;
                    this.done = true;
                    return Poll::Ready(Ok(Acquired { blocked: false }));
                }
                let ticket = st.next_ticket;
                st.next_ticket += 1;
                st.waiters.push_back(Some(cx.waker().clone()).into());
                this.ticket = Some(ticket);
                Poll::Pending
            }
            Some(ticket) if ticket < st.served => {
                this.done = true;
                Poll::Ready(Ok(Acquired { blocked: true }))
            }
            Some(ticket) => {
                // Still queued: refresh the waker in place.
                let index = (ticket - st.served) as usize;
                let slot = &mut st.waiters[index];
                if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    **slot = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

impl<L: Layout> Drop for Wait<'_, L> {
    fn drop(&mut self) {
        let Some(ticket) = self.ticket else { return };
        if self.done {
            return;
        }
        let mut st = self.sem.lock();
        if st.closed {
            return;
        }
        if ticket < st.served {
            // Granted but never observed: pass the permit on.
            drop(st);
            self.sem.post();
        } else {
            let index = (ticket - st.served) as usize;
            *st.waiters[index] = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::task::Wake;

    struct Flag(std::sync::atomic::AtomicUsize);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn poll<F: Future + Unpin>(f: &mut F, flag: &Arc<Flag>) -> Poll<F::Output> {
        let waker = Waker::from(flag.clone());
        Pin::new(f).poll(&mut Context::from_waker(&waker))
    }

    fn wakes(flag: &Arc<Flag>) -> usize {
        flag.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn binary_caps_at_one_permit() {
        let s = Semaphore::<Padded>::binary(false);
        s.post();
        s.post();
        let f = Arc::new(Flag(0.into()));
        assert_eq!(
            poll(&mut s.wait(), &f),
            Poll::Ready(Ok(Acquired { blocked: false }))
        );
        assert!(poll(&mut s.wait(), &f).is_pending());
    }

    #[test]
    fn post_hands_off_fifo_and_repoll_does_not_requeue() {
        let s = Semaphore::<Padded>::counting(0);
        let (fa, fb) = (Arc::new(Flag(0.into())), Arc::new(Flag(0.into())));
        let mut a = s.wait();
        let mut b = s.wait();
        assert!(poll(&mut a, &fa).is_pending());
        assert!(poll(&mut b, &fb).is_pending());
        assert!(poll(&mut a, &fa).is_pending());
        assert_eq!(s.waiting(), 2);
        s.post();
        assert_eq!((wakes(&fa), wakes(&fb)), (1, 0));
        assert_eq!(
            poll(&mut a, &fa),
            Poll::Ready(Ok(Acquired { blocked: true }))
        );
        s.post();
        assert_eq!(wakes(&fb), 1);
        assert!(poll(&mut b, &fb).is_ready());
    }

    #[test]
    fn cancelled_waits_lose_no_permit() {
        let s = Semaphore::<Padded>::counting(0);
        let f = Arc::new(Flag(0.into()));
        let mut a = s.wait();
        let mut b = s.wait();
        assert!(poll(&mut a, &f).is_pending());
        assert!(poll(&mut b, &f).is_pending());
        drop(a); // cancelled before being served: a hole
        s.post(); // skips the hole, serves b
        drop(b); // served but never observed: permit passes on
        assert!(poll(&mut s.wait(), &f).is_ready());
    }

    #[test]
    fn plain_semaphores_share_lines_and_behave_alike() {
        assert!(std::mem::size_of::<Semaphore<Plain>>() < 128);
        assert!(std::mem::align_of::<Semaphore<Padded>>() >= 128);
        let s = Semaphore::<Plain>::counting(0);
        let f = Arc::new(Flag(0.into()));
        let mut a = s.wait();
        assert!(poll(&mut a, &f).is_pending());
        s.post();
        assert_eq!(wakes(&f), 1);
        assert_eq!(
            poll(&mut a, &f),
            Poll::Ready(Ok(Acquired { blocked: true }))
        );
    }

    #[test]
    fn close_wakes_and_fails_waits() {
        let s = Semaphore::<Padded>::binary(false);
        let f = Arc::new(Flag(0.into()));
        let mut a = s.wait();
        assert!(poll(&mut a, &f).is_pending());
        s.close();
        assert_eq!(wakes(&f), 1);
        assert_eq!(poll(&mut a, &f), Poll::Ready(Err(Closed)));
        assert_eq!(poll(&mut s.wait(), &f), Poll::Ready(Err(Closed)));
    }
}
