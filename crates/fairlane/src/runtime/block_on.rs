//! Running a future to completion on the calling thread.
//!
//! The thread holds the runtime's clock (`Clock::take_hold`) while it polls
//! and from the moment it is woken until it polls again, so that a paused
//! clock never auto-advances while this future may still make work
//! (time/clock.md, "Holds"). A waker takes the hold before it marks the
//! thread notified; the thread then keeps that hold for its next poll.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use crate::time::clock::Clock;

/// `ThreadWaker::state`: no wake-up since the thread last looked.
const IDLE: u8 = 0;
/// Woken: the thread polls again, with the hold its waker took.
const NOTIFIED: u8 = 1;
/// `run` returned: later wake-ups do nothing (and hold nothing).
const DONE: u8 = 2;

/// Wakes the blocked thread.
struct ThreadWaker {
    thread: Thread,
    state: AtomicU8,
    clock: Arc<Clock>,
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
        // Release pairs with the Acquire swap in `run`: what the waker did
        // before waking is visible to the next poll.
        match self
            .state
            .compare_exchange(IDLE, NOTIFIED, Ordering::Release, Ordering::Relaxed)
        {
            Ok(_) => self.thread.unpark(),
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
    let waker_state = Arc::new(ThreadWaker {
        thread: thread::current(),
        state: AtomicU8::new(IDLE),
        clock: clock.clone(),
    });
    let waker = Waker::from(waker_state.clone());
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    // The hold of the first poll; each later poll's is the one its waker
    // took (handed over by the swap that consumes `NOTIFIED`).
    clock.take_hold();
    let mut polling = Polling {
        waker: &waker_state,
        holds: true,
    };
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return Some(output);
        }
        // A wake-up already here: its hold serves the next poll.
        if waker_state.state.swap(IDLE, Ordering::Acquire) == NOTIFIED {
            clock.release_hold();
            continue;
        }
        polling.holds = false;
        clock.release_hold();
        while waker_state.state.swap(IDLE, Ordering::Acquire) != NOTIFIED {
            match deadline {
                None => thread::park(),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return None;
                    }
                    thread::park_timeout(deadline - now);
                }
            }
        }
        polling.holds = true;
    }
}

/// The polling thread's hold, given back however `run_until` ends (a
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
        // Acquire: as the swaps in `run_until`.
        if self.waker.state.swap(DONE, Ordering::Acquire) == NOTIFIED {
            self.waker.clock.release_hold();
        }
    }
}
