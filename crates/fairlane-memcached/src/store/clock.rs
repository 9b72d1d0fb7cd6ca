//! Where the store reads the time: whole seconds of Unix time, from the
//! system or, in tests, from a clock moved by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where the store reads the time: Unix seconds.
pub trait Clock: Send + Sync {
    /// The time now, in whole seconds since the Unix epoch.
    fn now(&self) -> u64;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// A clock moved by hand, for tests.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock that reads `now` until it is moved.
    pub fn new(now: u64) -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicU64::new(now)))
    }

    /// Moves the clock `seconds` ahead.
    pub fn advance(&self, seconds: u64) {
        // Relaxed: the clock is a lone value; readers need no other memory
        // ordered with it.
        self.0.fetch_add(seconds, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}
