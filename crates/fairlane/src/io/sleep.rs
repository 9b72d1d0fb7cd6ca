//! How a processor's owner sleeps in `park`, as the other threads see it:
//! whether it is parked, until which tick, and on which wait (driver.md,
//! "Sleeping" and "Who takes a parked processor's events"); what its engine
//! holds ([`Work`]); and the handshake that makes some sleeper watch an
//! awake processor with work (driver.md, "The watch handshake").
//!
//! The sleep words are written only by the owner, under the processor's
//! lock, except the unwatched flag, which an announcer may take down; the
//! work words are written by anyone under that lock. The methods that must
//! run under it take a reference to what it guards (`_locked`) as a
//! witness.
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

    /// Owner, under the lock, after its wait: awake again. The fence orders
    /// the `AWAKE` before the owner's next look at the core's `sem` (the
    /// core's sleep loop may park again under the same idle commit), against
    /// a waker's swap of `sem` and its fenced read of the mode
    /// ([`mode_for_wake`](Self::mode_for_wake)): either the owner sees the
    /// waker's `WAKE` and parks no more, or the waker reads this `AWAKE` (or
    /// the next wait's mode) and wakes that wait (driver.md, "Why a wake is
    /// never lost between the two").
    pub(crate) fn awake<L>(&self, _locked: &L) {
        self.mode.store(AWAKE, Ordering::SeqCst);
        self.parked_until.store(NOT_PARKED, Ordering::Relaxed);
        fence(Ordering::SeqCst);
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

    /// [`mode`](Self::mode) for `notify`, which runs after the core's swap
    /// of the owner's `sem`: the fence orders that swap before this read,
    /// pairing with the fence of [`awake`](Self::awake).
    pub(crate) fn mode_for_wake(&self) -> u8 {
        fence(Ordering::SeqCst);
        self.mode.load(Ordering::SeqCst)
    }

    /// The owner's own view of the wait it chose.
    pub(crate) fn own_mode(&self) -> u8 {
        self.mode.load(Ordering::Relaxed)
    }

    /// Owner, in `park` after `commit`, under its lock: the sleeper's half
    /// of the watch handshake (driver.md, "The watch handshake"). It flags
    /// itself as sleeping unwatched (its flag and `all`'s count), then a
    /// SeqCst fence, then rechecks the other processors (`others`, each
    /// seen through `view`) and returns those it must watch: awake, with
    /// work in their engine. If there are any it takes its flag back (its
    /// wait is then bounded, and it looks again). The other half is
    /// [`Unwatched::anyone_unwatched`]: with a fence on both sides, either this
    /// recheck sees the work stored before the other side's fence, or the
    /// other side's read after its fence sees this count and flag (the
    /// store-buffering outcome in which each misses the other's store is
    /// what two SeqCst fences rule out). The flag, the count and the words
    /// rechecked are Relaxed: the fences order them.
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
                !sleep.parked_hint() && work.pending()
            })
            .collect();
        if !watched.is_empty() {
            self.end_unwatched(all);
        }
        watched
    }

    /// Owner: it watches someone after all, or its wait is over; its flag
    /// comes down. Returns false if the flag was down already while the
    /// owner had it up: an announcer claimed this sleeper
    /// ([`Unwatched::claim`]) and woke it to watch, a duty it hands on
    /// if it resumes running tasks instead of sleeping again. Relaxed: the
    /// swap itself decides who of the owner and an announcer takes the flag
    /// down, and so who takes one off the count; a stale count costs a
    /// needless scan, never a missed wake-up.
    pub(crate) fn end_unwatched(&self, all: &Unwatched) -> bool {
        let was_up = self.unwatched.swap(false, Ordering::Relaxed);
        if was_up {
            all.count.fetch_sub(1, Ordering::Relaxed);
        }
        was_up
    }
}

/// `Work::next_timer` when no timer is pending.
pub(crate) const NO_TIMER: u64 = u64::MAX;

/// What a processor's engine holds, as other threads see it: operations
/// (and, in the fallback backend, registered descriptors), the earliest
/// timer, whether the core keeps tasks under the watch
/// (`Driver::keep_watch`), and whether it holds any of them (`held`, the
/// one word the watch handshake reads). Written under the processor's
/// lock, so exact there; read without it as hints (a stale read delays
/// work one iteration), and by the watch handshake, whose fences order
/// those reads.
pub(crate) struct Work {
    outstanding: AtomicUsize,
    /// Earliest timer tick, `NO_TIMER` if none.
    next_timer: AtomicU64,
    /// Tasks on the processor's lanes are kept unannounced under the watch
    /// (set by [`keep`](Self::keep), only while `held` is true already;
    /// cleared by [`unkeep`](Self::unkeep) when the owner parks, and by
    /// [`end_keep`](Self::end_keep) when it has no kept task left).
    kept: AtomicBool,
    /// Another processor handed the owner tasks ([`keep`](Self::keep) with
    /// `handed`) since its last [`end_keep`](Self::end_keep). Under the
    /// lock only.
    handed: AtomicBool,
    /// `outstanding != 0 || next_timer != NO_TIMER || kept`, stored when it
    /// changes. One word, so that a sleeper's recheck cannot pair a stale
    /// read of one of them with a fresh read of another: an operation added
    /// while a timer was set, then the timer fired, would otherwise read as
    /// an empty engine although it never was one, and nothing would
    /// announce it (work never appeared).
    held: AtomicBool,
}

impl Work {
    pub(crate) fn new() -> Self {
        Self {
            outstanding: AtomicUsize::new(0),
            next_timer: AtomicU64::new(NO_TIMER),
            kept: AtomicBool::new(false),
            handed: AtomicBool::new(false),
            held: AtomicBool::new(false),
        }
    }

    /// Under the lock: `held` from the two counts. Returns whether work
    /// appeared (the engine held nothing before and holds something now),
    /// the cue of the watch handshake's announcing side if the owner is
    /// awake (`Unwatched::anyone_unwatched`). A load and, on a change only, a store:
    /// no read-modify-write, the lock orders the writers.
    fn update_held<L>(&self, _locked: &L) -> bool {
        let now = self.outstanding.load(Ordering::Relaxed) != 0
            || self.next_timer.load(Ordering::Relaxed) != NO_TIMER
            || self.kept.load(Ordering::Relaxed);
        let before = self.held.load(Ordering::Relaxed);
        if now != before {
            self.held.store(now, Ordering::Relaxed);
        }
        now && !before
    }

    /// Under the lock: one more operation or registration. Returns whether
    /// work appeared (`update_held`).
    pub(crate) fn add<L>(&self, locked: &L) -> bool {
        self.outstanding.fetch_add(1, Ordering::Relaxed);
        self.update_held(locked)
    }

    /// Under the lock: `n` operations or registrations fewer.
    pub(crate) fn remove<L>(&self, locked: &L, n: usize) {
        self.outstanding.fetch_sub(n, Ordering::Relaxed);
        self.update_held(locked);
    }

    /// Under the lock: the earliest timer is now `tick`. Returns whether
    /// work appeared (`update_held`).
    pub(crate) fn set_next_timer<L>(&self, locked: &L, tick: u64) -> bool {
        self.next_timer.store(tick, Ordering::Relaxed);
        self.update_held(locked)
    }

    /// Under the lock: the core keeps tasks on the processor's lanes
    /// unannounced (`Host::keep_watch`), which needs some sleeper to watch
    /// the processor. Only if the engine holds work already (`held`): the
    /// watch handshake then already has a sleeper watching it (or no
    /// processor sleeping unwatched), and `kept` holds `held` up until the
    /// owner parks or ends it, whoever takes the engine's operations and
    /// timers away meanwhile. `handed`: for tasks another processor hands
    /// the owner, which the owner's next `end_keep` may not have seen.
    /// Returns whether it is kept; no announcement is needed, since `held`
    /// does not change.
    pub(crate) fn keep<L>(&self, _locked: &L, handed: bool) -> bool {
        if !self.held.load(Ordering::Relaxed) {
            return false;
        }
        if !self.kept.load(Ordering::Relaxed) {
            self.kept.store(true, Ordering::Relaxed);
        }
        if handed {
            self.handed.store(true, Ordering::Relaxed);
        }
        true
    }

    /// Under the lock, by the owner, whose kept tasks are gone from its
    /// lanes or announced: nothing is kept any more, unless tasks were
    /// handed to it since its last call (it may have looked at its lanes
    /// before they came; its next look covers them, and its next call ends
    /// the watch).
    pub(crate) fn end_keep<L>(&self, locked: &L) {
        if self.handed.load(Ordering::Relaxed) {
            self.handed.store(false, Ordering::Relaxed);
        } else {
            self.unkeep(locked);
        }
    }

    /// Under the lock, by the owner going to sleep (its lanes are empty,
    /// and a parked processor is not watched): nothing is kept any more.
    pub(crate) fn unkeep<L>(&self, locked: &L) {
        if self.handed.load(Ordering::Relaxed) {
            self.handed.store(false, Ordering::Relaxed);
        }
        if self.kept.load(Ordering::Relaxed) {
            self.kept.store(false, Ordering::Relaxed);
            self.update_held(locked);
        }
    }

    /// Whether the core keeps tasks under the watch (a hint without the
    /// lock).
    pub(crate) fn is_kept(&self) -> bool {
        self.kept.load(Ordering::Relaxed)
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
    /// timers (exact under the lock, a hint without it).
    pub(crate) fn pending(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }
}

/// One per driver: how many processors sleep watching nobody (each also
/// flags itself, `SleepState::choose_watched`). A hint that spares an
/// announcer the scan of the flags while nobody sleeps unwatched.
pub(crate) struct Unwatched {
    count: AtomicUsize,
}

impl Unwatched {
    pub(crate) fn new() -> Self {
        Self {
            count: AtomicUsize::new(0),
        }
    }

    /// The announcing half of the watch handshake, after work appeared in
    /// the engine of an awake processor (`Work::add`, `Work::set_next_timer`
    /// returned true under its lock, and the lock was released), or after a
    /// processor that has work in its engine, or was watching others,
    /// resumed running tasks (`SleepState::awake` stored in its `park`): a
    /// SeqCst fence, then whether some processor may sleep watching nobody.
    /// If so, the caller rechecks whatever it must (after the fence) and
    /// [`claim`](Unwatched::claim)s one to wake. Relaxed: the fence orders
    /// the load after the caller's stores (see `SleepState::choose_watched`).
    pub(crate) fn anyone_unwatched(&self) -> bool {
        fence(Ordering::SeqCst);
        self.count.load(Ordering::Relaxed) != 0
    }

    /// After [`anyone_unwatched`](Unwatched::anyone_unwatched): claims the
    /// first of `candidates` (each seen through `sleep_of`) whose flag is
    /// up, taking its flag down and one off the count, and returns it for
    /// the caller to wake. It rechecks when it sleeps again, or hands the
    /// duty on if it resumes running tasks (`SleepState::end_unwatched`).
    /// A sleeper that took its own flag down in the meantime is awake, and
    /// rechecks before it sleeps unwatched again. Relaxed: the swap decides
    /// who takes the flag down; the caller's fence orders the loads.
    pub(crate) fn claim<'a, T>(
        &self,
        candidates: impl IntoIterator<Item = &'a T>,
        sleep_of: impl Fn(&T) -> &SleepState,
    ) -> Option<&'a T> {
        let claimed = candidates.into_iter().find(|c| {
            let flag = &sleep_of(c).unwatched;
            flag.load(Ordering::Relaxed) && flag.swap(false, Ordering::Relaxed)
        })?;
        self.count.fetch_sub(1, Ordering::Relaxed);
        Some(claimed)
    }
}
