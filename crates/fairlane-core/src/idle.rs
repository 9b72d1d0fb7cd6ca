//! Idle sleep: who sleeps, who is woken, and the handshake that makes a
//! push racing a processor going to sleep impossible to lose.
//!
//! The protocol, its states and the proof sketch are in `idle.md` beside
//! this file. This module holds the shared state and its primitive steps; the
//! order in which they are called lives in `scheduler.rs`.

use alloc::boxed::Box;
use alloc::vec::Vec;

use crossbeam_utils::CachePadded;

use crate::queue::bump;
use crate::sync::{AtomicU64, AtomicU8, AtomicUsize, Ordering, SpinLock};
use crate::Host;

/// `sem` states of a processor's wait context.
const AWAKE: u8 = 0;
/// A waker asked the processor not to sleep (or woke it).
const WAKE: u8 = 1;
/// The processor committed to sleep and blocks in `Host::park`.
const ASLEEP: u8 = 2;

/// Published "most recently idled processor" value meaning "nobody idles".
const NOBODY: usize = 0;

pub(crate) struct Idle {
    sem: Box<[CachePadded<AtomicU8>]>,
    /// Idle processors, most recently idled last (a LIFO stack).
    list: SpinLock<Vec<usize>>,
    /// `p + 1` for the processor on top of `list`, or `NOBODY`. Read after
    /// every push; written only when the list changes, so in a loaded cluster
    /// it is a clean shared cache line.
    top: CachePadded<AtomicUsize>,
}

impl Idle {
    pub(crate) fn new(processors: usize) -> Self {
        Self {
            sem: (0..processors)
                .map(|_| CachePadded::new(AtomicU8::new(AWAKE)))
                .collect(),
            list: SpinLock::new(Vec::with_capacity(processors)),
            top: CachePadded::new(AtomicUsize::new(NOBODY)),
        }
    }

    /// Sleeper step 1: put `p` on top of the idle list and publish it. The
    /// caller follows with `fence(SeqCst)` before its final scan.
    pub(crate) fn publish(&self, p: usize) {
        let mut list = self.list.lock();
        list.with(|list| {
            list.push(p);
            self.top.store(p + 1, Ordering::Relaxed);
        });
    }

    /// Takes `p` off the idle list and republishes the top. The caller follows
    /// with `fence(SeqCst)` and a look for waiting work (the hand-over rule of
    /// `idle.md`).
    pub(crate) fn retract(&self, p: usize) {
        let mut list = self.list.lock();
        list.with(|list| {
            if let Some(i) = list.iter().rposition(|&q| q == p) {
                list.remove(i);
            }
            self.top
                .store(list.last().map_or(NOBODY, |&q| q + 1), Ordering::Relaxed);
        });
    }

    /// Sleeper step 4: commit to sleep unless a waker got there first.
    /// Returns false if a wake-up is already pending.
    pub(crate) fn commit(&self, p: usize) -> bool {
        // AcqRel/Acquire: pairs with the waker's swap, so that whatever the
        // waker did before asking us to wake is visible when we see WAKE.
        self.sem[p]
            .compare_exchange(AWAKE, ASLEEP, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Blocks until a waker has set `WAKE`, or the host asks this processor
    /// to look for work (`Host::look_after_park`: a processor it watches
    /// stopped scheduling); other returns of `park` are absorbed here, each
    /// counted in `host_parks` (owner-written). Leaving on the host's word
    /// with `sem` still `ASLEEP` is safe: `reset` swaps it to `AWAKE`
    /// whatever it holds, as after an absorbed wake.
    pub(crate) fn sleep(&self, p: usize, host: &impl Host, host_parks: &AtomicU64) {
        while self.sem[p].load(Ordering::Acquire) != WAKE {
            // Counted before the call, so that a park that keeps returning
            // early shows while it happens.
            bump(host_parks);
            host.park(p);
            if host.look_after_park(p) {
                return;
            }
        }
    }

    /// Back to `AWAKE` after a sleep or a refused commit.
    ///
    /// A read-modify-write, not a store: a `WAKE` that arrives between our
    /// wake-up and this reset (from `close`, or a second push) is then either
    /// read here, with Acquire, so that what its waker did before (setting
    /// `closed`) is visible to our next look; or it lands after the reset and
    /// makes the next `commit` fail. A plain store could overwrite it unseen
    /// and let us sleep through shutdown (the loom model `loom_idle` finds
    /// that interleaving).
    pub(crate) fn reset(&self, p: usize) {
        self.sem[p].swap(AWAKE, Ordering::Acquire);
    }

    /// Waker side, after its push and a `fence(SeqCst)`: wakes the most
    /// recently idled processor, if any. At most one processor per call.
    #[inline]
    pub(crate) fn notify_one(&self, host: &impl Host) {
        // Relaxed is enough: the caller's fence(SeqCst), paired with the
        // sleeper's fence after `publish`, decides which of the two sees the
        // other (idle.md, "why nothing is lost").
        let top = self.top.load(Ordering::Relaxed);
        if top != NOBODY {
            self.wake(top - 1, host);
        }
    }

    /// On processor `p`'s own thread: if `p` committed to sleep (the caller
    /// runs inside its `Host::park`), sets `WAKE` so that `sleep` returns once
    /// `park` does, and returns true. No unpark: the thread is awake, running
    /// this.
    #[inline]
    pub(crate) fn wake_self(&self, p: usize) -> bool {
        // Relaxed: only `p`'s thread (this one) stores ASLEEP, so this read
        // sees its own latest store; a WAKE from others needs nothing more.
        if self.in_own_park(p) {
            self.sem[p].swap(WAKE, Ordering::AcqRel);
            return true;
        }
        false
    }

    /// On processor `p`'s own thread: whether it is committed to sleep
    /// (the caller runs inside its `Host::park`). Relaxed, as in
    /// [`wake_self`](Self::wake_self).
    #[inline]
    pub(crate) fn in_own_park(&self, p: usize) -> bool {
        self.sem[p].load(Ordering::Relaxed) == ASLEEP
    }

    /// Whether processor `p` has committed to sleep and no waker has asked
    /// it to wake since (`sem == ASLEEP`). Acquire: pairs with the release
    /// half of `commit`, so that what `p` did before committing is visible
    /// to the caller (a host's idle check; see `Executor::is_asleep`).
    pub(crate) fn is_asleep(&self, p: usize) -> bool {
        self.sem
            .get(p)
            .is_some_and(|sem| sem.load(Ordering::Acquire) == ASLEEP)
    }

    /// Sets processor `p`'s `sem` to `WAKE`, unparking it if it had
    /// committed to sleep.
    pub(crate) fn wake(&self, p: usize, host: &impl Host) {
        if self.sem[p].swap(WAKE, Ordering::AcqRel) == ASLEEP {
            host.unpark(p);
        }
    }
}
