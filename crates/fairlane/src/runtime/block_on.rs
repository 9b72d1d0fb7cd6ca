//! Running a future to completion on the calling thread.
//!
//! The thread holds the runtime's clock (`Clock::take_hold`) while it polls
//! and from the moment it is woken until it polls again, so that a paused
//! clock never auto-advances while this future may still make work
//! (time/clock.md, "Holds"). A waker takes the hold before it marks the
//! thread notified; the thread then keeps that hold for its next poll.
//!
//! Between polls the thread parks, or, on a current-thread runtime whose
//! seat it holds, runs the runtime's processor until the future is woken
//! (`current_thread.rs`).

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use super::current_thread::{Alarm, SeatGuard};
use super::{ExecutorRef, Handle};
use crate::time::clock::Clock;

/// `ThreadWaker::state`: no wake-up since the thread last looked.
const IDLE: u8 = 0;
/// Woken: the thread polls again, with the hold its waker took.
const NOTIFIED: u8 = 1;
/// `run` returned: later wake-ups do nothing (and hold nothing).
const DONE: u8 = 2;

/// Wakes the blocked thread.
pub(super) struct ThreadWaker {
    thread: Thread,
    state: AtomicU8,
    clock: Arc<Clock>,
    /// On a current-thread runtime: its processor, which the thread runs
    /// while it waits once it holds the seat.
    processor: Option<Processor>,
}

/// The processor a `block_on` thread of a current-thread runtime runs.
pub(super) struct Processor {
    pub(super) cluster: ExecutorRef,
    /// Set while the thread runs the processor: a wake-up then releases
    /// the processor, so that the thread returns to poll its future.
    pub(super) running: AtomicBool,
}

impl ThreadWaker {
    /// Whether a wake-up came since the thread last looked, with the
    /// ordering of `ThreadWaker::wake_by_ref`'s exchange (see
    /// `current_thread::drive`).
    pub(super) fn is_notified(&self) -> bool {
        self.state.load(Ordering::SeqCst) == NOTIFIED
    }

    pub(super) fn processor(&self) -> Option<&Processor> {
        self.processor.as_ref()
    }
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Held before the thread is marked notified, so that it never
        // polls without a hold counted; a second wake before the thread saw
        // the first, or one after `run` returned, gives its own back.
        self.clock.take_hold();
        // SeqCst: the thread's `running` store and its load of `state` in
        // `current_thread::drive`, against this exchange and the load of
        // `running` below, form a store-buffering pair: either this load
        // sees the thread running the processor (and releases it), or the
        // thread sees `NOTIFIED` before it starts running it. It is also a
        // Release that pairs with the Acquire swaps in `block`: what the
        // waker did before waking is visible to the next poll.
        match self
            .state
            .compare_exchange(IDLE, NOTIFIED, Ordering::SeqCst, Ordering::Relaxed)
        {
            Ok(_) => {
                if let Some(processor) = &self.processor {
                    if processor.running.load(Ordering::SeqCst) {
                        // The thread returns from the processor loop after
                        // the poll it is in (a stale `running` makes a
                        // later run return at once; the thread then only
                        // looks again).
                        processor.cluster.release_processor(0);
                    }
                }
                self.thread.unpark();
            }
            Err(_) => self.clock.release_hold(),
        }
    }
}

/// Polls `future` on this thread, parking between wake-ups.
pub(crate) fn run<F: Future>(future: F, clock: &Arc<Clock>) -> F::Output {
    run_until(future, None, clock).expect("no deadline, so the future completed")
}

/// [`run`], giving up (`None`) once `deadline` has passed.
pub(crate) fn run_until<F: Future>(
    future: F,
    deadline: Option<Instant>,
    clock: &Arc<Clock>,
) -> Option<F::Output> {
    block(future, deadline, clock, None)
}

/// [`run_until`] on a current-thread runtime, `handle`'s: while the future
/// waits, the thread runs the runtime's processor if no other thread does
/// (it takes the seat), else parks until its future is woken or the seat
/// is free.
pub(super) fn drive_until<F: Future>(
    future: F,
    deadline: Option<Instant>,
    handle: &Handle,
) -> Option<F::Output> {
    block(future, deadline, handle.clock(), Some(handle))
}

fn block<F: Future>(
    future: F,
    deadline: Option<Instant>,
    clock: &Arc<Clock>,
    runtime: Option<&Handle>,
) -> Option<F::Output> {
    let waker_state = Arc::new(ThreadWaker {
        thread: thread::current(),
        state: AtomicU8::new(IDLE),
        clock: clock.clone(),
        processor: runtime.map(|handle| Processor {
            cluster: handle.cluster.clone(),
            running: AtomicBool::new(false),
        }),
    });
    let waker = Waker::from(waker_state.clone());
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    // A thread that runs the processor does not park, so its deadline
    // comes as a wake-up.
    let _alarm = runtime
        .zip(deadline)
        .map(|(_, deadline)| Alarm::set(deadline, waker.clone()));
    let mut seat: Option<SeatGuard<'_>> = None;
    // The hold of the first poll; each later poll's is the one its waker
    // took (handed over by the swap that consumes `NOTIFIED`).
    clock.take_hold();
    let mut polling = Polling {
        waker: &waker_state,
        holds: true,
    };
    loop {
        if let Some(handle) = runtime {
            if seat.is_none() && !handle.cluster.is_shut_down() {
                seat = handle.shared.seat.take(handle, &waker_state);
            }
        }
        if let Poll::Ready(output) = poll_outside_tasks(future.as_mut(), &mut cx) {
            return Some(output);
        }
        // A wake-up already here: its hold serves the next poll.
        if waker_state.state.swap(IDLE, Ordering::Acquire) == NOTIFIED {
            clock.release_hold();
            match &seat {
                // The future woke itself (it yielded) or was woken while
                // polled: the tasks ready by now run before it is polled
                // again.
                Some(seat) => {
                    seat.run_ready_tasks(&waker_state);
                    if waker_state.state.swap(IDLE, Ordering::Acquire) == NOTIFIED {
                        // Woken again meanwhile: one hold is enough.
                        clock.release_hold();
                    }
                }
                None => continue,
            }
            continue;
        }
        polling.holds = false;
        clock.release_hold();
        loop {
            if waker_state.state.swap(IDLE, Ordering::Acquire) == NOTIFIED {
                break;
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                return None;
            }
            match &seat {
                Some(guard) if !guard.is_shut_down() => guard.drive(&waker_state),
                _ => {
                    // No processor to run (any more): the runtime shut
                    // down, or another thread has the seat.
                    if seat.take().is_some() {
                        continue;
                    }
                    match deadline {
                        None => thread::park(),
                        Some(deadline) => {
                            thread::park_timeout(deadline.saturating_duration_since(Instant::now()))
                        }
                    }
                }
            }
        }
        polling.holds = true;
    }
}

/// Polls the future of a `block_on`, which is no task: `task::try_id` is
/// `None` inside it, whatever task the thread may be in (a
/// `block_in_place` closure's). Each poll has a cooperative budget of its
/// own, as a task's poll has.
fn poll_outside_tasks<F: Future>(future: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output> {
    let _no_task = crate::task::id::enter(None);
    crate::task::coop::with_budget(|| future.poll(cx))
}

/// The polling thread's hold, given back however `block` ends (a
/// panicking poll included); later wake-ups then hold nothing, and the hold
/// of one that came and was not consumed is given back too.
struct Polling<'a> {
    waker: &'a ThreadWaker,
    holds: bool,
}

impl Drop for Polling<'_> {
    fn drop(&mut self) {
        if self.holds {
            self.waker.clock.release_hold();
        }
        // Acquire: as the swaps in `block`.
        if self.waker.state.swap(DONE, Ordering::Acquire) == NOTIFIED {
            self.waker.clock.release_hold();
        }
    }
}
