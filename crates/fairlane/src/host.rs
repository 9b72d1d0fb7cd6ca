//! The std host of the scheduler core: processors are OS threads, parking
//! and per-iteration event polling belong to the I/O driver (a processor
//! sleeps in its own io_uring or poller, so completions and timers wake it),
//! and the clock is the TSC where there is one.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use fairlane_core::Host;

use crate::io::driver::Driver;

thread_local! {
    /// `(runtime id, processor)` of the processor this thread runs, if any.
    static PROCESSOR: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
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
// `Cluster::run_processor(p)` with exactly those two calls. `block_in_place`
// keeps the contract while it hands `p` over: the blocking thread (still
// inside `run_processor(p)`, so the cluster stays alive) unregisters before
// the replacement registers, and registers again only after the replacement
// has unregistered and been joined.
unsafe impl Host for StdHost {
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
}
