//! Running a future to completion on the calling thread.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

/// Wakes the blocked thread.
struct ThreadWaker {
    thread: Thread,
    notified: AtomicBool,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Release pairs with the Acquire swap in `run`: what the waker did
        // before waking is visible to the next poll.
        if !self.notified.swap(true, Ordering::Release) {
            self.thread.unpark();
        }
    }
}

/// Polls `future` on this thread, parking between wake-ups.
pub(crate) fn run<F: Future>(future: F) -> F::Output {
    run_until(future, None).expect("no deadline, so the future completed")
}

/// [`run`], giving up (`None`) once `deadline` has passed.
pub(crate) fn run_until<F: Future>(future: F, deadline: Option<Instant>) -> Option<F::Output> {
    let waker_state = Arc::new(ThreadWaker {
        thread: thread::current(),
        notified: AtomicBool::new(false),
    });
    let waker = Waker::from(waker_state.clone());
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return Some(output);
        }
        while !waker_state.notified.swap(false, Ordering::Acquire) {
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
    }
}
