//! The std host of the scheduler core: processors are OS threads, parking
//! and per-iteration event polling belong to the I/O driver (a processor
//! sleeps in its own io_uring or poller, so completions and timers wake it),
//! and the clock is the TSC where there is one.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Waker;

use fairlane_core::Host;

use crate::io::driver::Driver;

thread_local! {
    /// `(runtime id, processor)` of the processor this thread runs, if any.
    static PROCESSOR: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
    /// While a task is polled on this thread: the address of the waker its
    /// poll got, and whether a future of the task asked to run again
    /// (`run_again`). Null between polls.
    static POLL: Cell<(*const Waker, bool)> = const { Cell::new((std::ptr::null(), false)) };
}

/// Asks for the task that `waker` wakes to be polled again soon, as
/// `waker.wake_by_ref()` does (`yield_now`, an exhausted budget). When
/// `waker` is the very waker the task's running poll got on this thread
/// (the same address: no other live waker has it while the poll lasts), the
/// request is noted in a thread-local and the task is queued again when the
/// poll returns, in the same write of its state word that ends the poll,
/// instead of in a write of its own now.
#[inline]
pub(crate) fn run_again(waker: &Waker) {
    let (polling, _) = POLL.get();
    if std::ptr::eq(polling, waker) {
        POLL.set((polling, true));
    } else {
        waker.wake_by_ref();
    }
}

static NEXT_RUNTIME_ID: AtomicUsize = AtomicUsize::new(1);

pub(crate) struct StdHost {
    id: usize,
    /// I/O, timers, and the processors' sleep (see `io/driver.md`).
    io: Arc<Driver>,
    #[cfg(not(target_arch = "x86_64"))]
    epoch: std::time::Instant,
}

impl StdHost {
    pub(crate) fn new(io: Arc<Driver>) -> Self {
        Self {
            id: NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed),
            io,
            #[cfg(not(target_arch = "x86_64"))]
            epoch: std::time::Instant::now(),
        }
    }

    /// Called on the thread that is about to run processor `p`, before it
    /// does.
    pub(crate) fn register_current(&self, p: usize) {
        self.io.register_current(p);
        PROCESSOR.with(|c| c.set(Some((self.id, p))));
    }

    /// The I/O driver.
    pub(crate) fn io(&self) -> &Arc<Driver> {
        &self.io
    }

    /// Called when processor `p`'s loop has returned: from now on the thread
    /// is no longer a processor (the `Host` contract).
    pub(crate) fn unregister_current(&self) {
        PROCESSOR.with(|c| c.set(None));
        self.io.unregister_current();
    }

    /// Whether the calling thread is one of this runtime's processors.
    pub(crate) fn is_own_processor(&self) -> bool {
        self.current_processor().is_some()
    }
}

// SAFETY: `current_processor` returns `Some(p)` only on a thread that called
// `register_current(p)` for this runtime and has not called
// `unregister_current` since; `Handle::run_processor` brackets
// `Executor::run_processor(p)` with exactly those two calls. `block_in_place`
// keeps the contract while it hands `p` over: the blocking thread (still
// inside `run_processor(p)`, so the cluster stays alive) unregisters before
// the replacement registers, and registers again only after the replacement
// has unregistered and been joined.
unsafe impl Host for StdHost {
    #[inline]
    fn poll_started(waker: &Waker) {
        POLL.set((waker, false));
    }

    #[inline]
    fn poll_ended() -> bool {
        POLL.replace((std::ptr::null(), false)).1
    }

    #[inline]
    fn now(&self) -> u64 {
        // The TSC is constant-rate and synchronised across cores on every
        // x86_64 CPU of the last decade; ages are heuristics, so a small skew
        // between cores costs at most a needless or a late help.
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `rdtsc` has no preconditions; it only reads a counter.
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self.epoch.elapsed().as_nanos() as u64
        }
    }

    #[inline]
    fn current_processor(&self) -> Option<usize> {
        match PROCESSOR.with(Cell::get) {
            Some((id, p)) if id == self.id => Some(p),
            _ => None,
        }
    }

    fn park(&self, processor: usize) {
        self.io.park(processor);
    }

    fn relax(&self) {
        std::thread::yield_now();
    }

    fn unpark(&self, processor: usize) {
        self.io.unpark(processor);
    }

    #[inline]
    fn poll_events(&self, processor: usize) {
        self.io.poll_events(processor);
    }

    fn processor_stopping(&self, processor: usize) {
        self.io.processor_stopped(processor);
    }

    fn keep_watch(&self, processor: usize) -> bool {
        self.io.keep_watch(processor)
    }

    fn end_watch(&self, processor: usize) {
        self.io.end_watch(processor);
    }

    #[inline]
    fn look_after_park(&self, processor: usize) -> bool {
        self.io.look_after_park(processor)
    }
}
