//! How a processor's owner sleeps in `park`, as the other threads see it:
//! whether it is parked, until which tick, and on which wait (driver.md,
//! "Sleeping" and "Who takes a parked processor's events").
//!
//! Both words are written only by the owner, under the processor's lock;
//! the methods that must run under that lock take a reference to what it
//! guards (`_locked`) as a witness. The atomics come from `super::atomics`:
//! std's in the library, loom's in the loom model of the handshake
//! (`tests/loom_driver_sleep.rs`), which compiles this very file.

use super::atomics::{AtomicU64, AtomicU8, Ordering};

/// Not in `park`'s wait (or about to choose one).
pub(crate) const AWAKE: u8 = 0;
/// Waiting in the engine (ring or poller).
pub(crate) const IN_ENGINE: u8 = 1;
/// Waiting on the processor's futex word (nothing in the engine).
pub(crate) const ON_FUTEX: u8 = 2;
/// `parked_until` while the owner is not parked.
const NOT_PARKED: u64 = 0;

/// The owner's sleep, as other threads see it.
pub(crate) struct SleepState {
    /// While the owner is parked (from `commit` to `awake`): the tick it
    /// waits until (`u64::MAX` without a timer); `NOT_PARKED` otherwise.
    parked_until: AtomicU64,
    /// How the owner waits: `AWAKE`, `IN_ENGINE` or `ON_FUTEX`.
    mode: AtomicU8,
}

impl SleepState {
    pub(crate) fn new() -> Self {
        Self {
            parked_until: AtomicU64::new(NOT_PARKED),
            mode: AtomicU8::new(AWAKE),
        }
    }

    /// Owner, under the lock: it waits from now until tick `until`, in
    /// `mode`. Relaxed for the tick: it is read under the same lock (or as
    /// a hint). SeqCst for the mode: a waker reads it without the lock and
    /// must see it or the `AWAKE` before it (driver.md, "Why a wake is
    /// never lost between the two").
    pub(crate) fn commit<L>(&self, _locked: &L, until: u64, mode: u8) {
        // Tick 0 has passed by the time anyone parks (timers at it fired);
        // 1 keeps it distinct from NOT_PARKED anyway.
        self.parked_until.store(until.max(1), Ordering::Relaxed);
        self.mode.store(mode, Ordering::SeqCst);
    }

    /// Owner, under the lock, after its wait: awake again.
    pub(crate) fn awake<L>(&self, _locked: &L) {
        self.mode.store(AWAKE, Ordering::SeqCst);
        self.parked_until.store(NOT_PARKED, Ordering::Relaxed);
    }

    /// Under the lock: the tick the owner waits until, if it is parked.
    /// Exact, since both sides of the word are written under the lock.
    pub(crate) fn parked_until<L>(&self, _locked: &L) -> Option<u64> {
        match self.parked_until.load(Ordering::Relaxed) {
            NOT_PARKED => None,
            tick => Some(tick),
        }
    }

    /// Under the lock: whether a thread other than the owner may take
    /// completions, readiness events or timers out of the engine. Not while
    /// the owner is parked: whatever is in its engine ends its wait and is
    /// its to take. A wake-up's completion taken by someone else would only
    /// set `woken`, which this wait never looks at, and the owner would
    /// sleep on through the `unpark` meant to end it.
    pub(crate) fn may_drain<L>(&self, locked: &L) -> bool {
        self.parked_until(locked).is_none()
    }

    /// Without the lock: whether the owner seems parked (a hint that may be
    /// stale either way; decisions are made again under the lock).
    pub(crate) fn parked_hint(&self) -> bool {
        self.parked_until.load(Ordering::Relaxed) != NOT_PARKED
    }

    /// For wakers, without the lock: the owner's wait (SeqCst, see `commit`).
    pub(crate) fn mode(&self) -> u8 {
        self.mode.load(Ordering::SeqCst)
    }

    /// The owner's own view of the wait it chose.
    pub(crate) fn own_mode(&self) -> u8 {
        self.mode.load(Ordering::Relaxed)
    }
}
