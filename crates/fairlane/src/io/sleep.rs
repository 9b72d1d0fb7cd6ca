//! How a processor's owner sleeps in `park`, as the other threads see it:
//! whether it is parked, until which tick, and on which wait (driver.md,
//! "Sleeping" and "Who takes a parked processor's events"); what its engine
//! holds ([`Work`]); and the handshake that makes some sleeper watch an
//! awake processor with work (driver.md, "Sleeping helpers").
//!
//! The sleep words are written only by the owner, under the processor's
//! lock, the work words by anyone under that lock; the methods that must run
//! under it take a reference to what it guards (`_locked`) as a witness.
//! The atomics come from `super::atomics`: std's in the library, loom's in
//! the loom models of the handshakes (`tests/loom_driver_sleep.rs`), which
//! compile this very file.

use super::atomics::{fence, AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};

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
    /// The owner sleeps watching no processor (counted in [`Unwatched`]):
    /// whoever makes work appear on an awake processor wakes one such
    /// sleeper.
    unwatched: AtomicBool,
}

impl SleepState {
    pub(crate) fn new() -> Self {
        Self {
            parked_until: AtomicU64::new(NOT_PARKED),
            mode: AtomicU8::new(AWAKE),
            unwatched: AtomicBool::new(false),
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

    /// Owner, in `park` after `commit`: the sleeper's half of the watch
    /// handshake. It publishes that it may sleep watching nobody (its flag
    /// and `all`'s count), then a SeqCst fence, then rechecks the other
    /// processors (`others`, each seen through `view`): it must watch those
    /// awake with work ([`SleepState::must_be_watched`]), and returns them;
    /// if there are any it withdraws its flag (its wait is then bounded, and
    /// it looks again). The other half is [`Unwatched::wake_one`]. With both
    /// fences, either this recheck sees the other side's work, or the other
    /// side sees this flag and wakes a sleeper, which rechecks: the
    /// store-buffering outcome in which each misses the other's store is
    /// what SeqCst fences rule out. The flag, the count and the rechecked
    /// words themselves are Relaxed: the fences order them.
    pub(crate) fn choose_watched<T>(
        &self,
        all: &Unwatched,
        others: impl IntoIterator<Item = T>,
        view: impl Fn(&T) -> (&SleepState, &Work),
    ) -> Vec<T> {
        self.unwatched.store(true, Ordering::Relaxed);
        all.count.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let watched: Vec<T> = others
            .into_iter()
            .filter(|other| {
                let (sleep, work) = view(other);
                sleep.must_be_watched(work)
            })
            .collect();
        if !watched.is_empty() {
            self.end_unwatched(all);
        }
        watched
    }

    /// Owner: it watches someone after all, or its wait is over. Relaxed:
    /// a stale flag or count costs a needless wake-up or scan, never a
    /// missed one (a sleeper that cleared its flag rechecks before it sleeps
    /// unwatched again).
    pub(crate) fn end_unwatched(&self, all: &Unwatched) {
        if self.unwatched.swap(false, Ordering::Relaxed) {
            all.count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The recheck, by a sleeper in `choose_watched`, of another processor
    /// (this one, with its engine's `work`): it must be watched if it is
    /// awake and its engine holds work (a processor that parked waits for
    /// its own engine; when it resumes with work, it announces it).
    fn must_be_watched(&self, work: &Work) -> bool {
        !self.parked_hint() && work.pending()
    }
}

/// `Work::next_timer` when no timer is pending.
pub(crate) const NO_TIMER: u64 = u64::MAX;

/// What a processor's engine holds, as other threads see it: operations
/// (and, in the fallback backend, registered descriptors) and the earliest
/// timer. Written under the processor's lock, so exact there; read without
/// it as hints (a stale read delays work one iteration), and by the watch
/// handshake, whose fences order those reads.
pub(crate) struct Work {
    outstanding: AtomicUsize,
    /// Earliest timer tick, `NO_TIMER` if none.
    next_timer: AtomicU64,
}

impl Work {
    pub(crate) fn new() -> Self {
        Self {
            outstanding: AtomicUsize::new(0),
            next_timer: AtomicU64::new(NO_TIMER),
        }
    }

    /// Under the lock: one more operation or registration. Returns whether
    /// the engine held nothing before: work appeared, the cue of the watch
    /// handshake (`Unwatched::after_work`) if its owner is awake.
    pub(crate) fn add<L>(&self, _locked: &L) -> bool {
        let before = self.outstanding.fetch_add(1, Ordering::Relaxed);
        before == 0 && self.next_timer.load(Ordering::Relaxed) == NO_TIMER
    }

    /// Under the lock: `n` operations or registrations fewer.
    pub(crate) fn remove<L>(&self, _locked: &L, n: usize) {
        self.outstanding.fetch_sub(n, Ordering::Relaxed);
    }

    /// Under the lock: the earliest timer is now `tick`. Returns whether
    /// work appeared (as `add`).
    pub(crate) fn set_next_timer<L>(&self, _locked: &L, tick: u64) -> bool {
        let before = self.next_timer.swap(tick, Ordering::Relaxed);
        before == NO_TIMER && tick != NO_TIMER && self.outstanding.load(Ordering::Relaxed) == 0
    }

    /// Operations and registrations (a hint without the lock).
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Relaxed)
    }

    /// The earliest timer tick, `NO_TIMER` if none (a hint without the
    /// lock).
    pub(crate) fn next_timer(&self) -> u64 {
        self.next_timer.load(Ordering::Relaxed)
    }

    /// Whether the engine holds anything: operations, registrations or
    /// timers.
    pub(crate) fn pending(&self) -> bool {
        self.outstanding() != 0 || self.next_timer() != NO_TIMER
    }
}

/// One per driver: how many processors sleep watching nobody (each also
/// flags itself, `SleepState::sleeps_unwatched`).
pub(crate) struct Unwatched {
    count: AtomicUsize,
}

impl Unwatched {
    pub(crate) fn new() -> Self {
        Self {
            count: AtomicUsize::new(0),
        }
    }

    /// The other half of the watch handshake, after work appeared in the
    /// engine of an awake processor (`Work::add`, `Work::set_next_timer`,
    /// stored under its lock), or a processor resumes with work in its
    /// engine (`SleepState::awake` stored): a SeqCst fence, then, if some
    /// processor may sleep watching nobody, the first of `candidates` (each
    /// seen through `sleep_of`) that does, for the caller to wake; it
    /// rechecks before it sleeps again. (A sleeper counted but no longer
    /// flagged has woken and rechecks anyway.)
    pub(crate) fn wake_one<'a, T>(
        &self,
        candidates: impl IntoIterator<Item = &'a T>,
        sleep_of: impl Fn(&T) -> &SleepState,
    ) -> Option<&'a T> {
        fence(Ordering::SeqCst);
        if self.count.load(Ordering::Relaxed) == 0 {
            return None;
        }
        candidates
            .into_iter()
            .find(|c| sleep_of(c).unwatched.load(Ordering::Relaxed))
    }
}
