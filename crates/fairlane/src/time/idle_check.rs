//! The paused clock's idle check: whether the whole runtime is idle, so
//! that the clock may jump to the earliest timer (`clock.md`, "Auto-advance").
//!
//! This file holds the check's order of reads and the marks each engine
//! keeps for it; what it reads comes through [`IdleView`] (the runtime's
//! clusters in the library, a small model in the loom test
//! `tests/loom_idle_check.rs`, which compiles this very file with loom's
//! atomics from `super::atomics`).

use std::task::Waker;

use super::atomics::{AtomicU64, Ordering};

/// `IdleScan::earliest` when no engine has a timer.
pub(crate) const NO_TIMER: u64 = u64::MAX;

/// Counters the check reads before and after it looks: if any moved,
/// something may have woken meanwhile.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct Activity {
    /// Holds on the clock taken so far.
    pub(crate) holds_taken: u64,
    /// Wake-ups sent to sleeping processors, summed over engines.
    pub(crate) rouses: u64,
    /// Drains of engines finished (their wakers woken), summed.
    pub(crate) drains_done: u64,
}

/// What the check's look at the engines found.
#[derive(Debug)]
pub(crate) struct IdleScan {
    /// The earliest timer tick of all engines (`NO_TIMER`: none).
    pub(crate) earliest: u64,
    /// Drains begun so far, summed over engines.
    pub(crate) drains_begun: u64,
}

/// What the check reads, in the order it reads them (see [`idle_check`]).
pub(crate) trait IdleView {
    /// Every engine's marks and the clock's holds taken
    /// ([`EngineMarks::add_to`]), SeqCst.
    fn activity(&self) -> Activity;
    /// Whether every processor with a live engine has committed to idle
    /// sleep with no wake-up pending (its `sem` is `ASLEEP`, read with
    /// Acquire).
    fn all_asleep(&self) -> bool;
    /// Holds on the clock now (Acquire).
    fn holds(&self) -> usize;
    /// Under each live engine's lock: false if it has I/O in flight or
    /// wakers in hand; adds its drains begun and earliest timer to `scan`.
    fn scan_engines(&self, scan: &mut IdleScan) -> bool;
}

/// The earliest timer tick if the runtime is idle, else `None` (also with
/// no timer at all). Reads, in this order: the activity counters, every
/// processor's `sem`, the holds, every engine, the counters again.
pub(crate) fn idle_check(view: &impl IdleView) -> Option<u64> {
    let before = view.activity();
    if !view.all_asleep() || view.holds() != 0 {
        return None;
    }
    let mut scan = IdleScan {
        earliest: NO_TIMER,
        drains_begun: 0,
    };
    if !view.scan_engines(&mut scan) {
        return None;
    }
    // A drain begun before the engines' scan must have finished before the
    // first read (its wakes then precede the `sem` reads); one begun after
    // the scan only takes what the scan saw (due timers, I/O in flight).
    if view.activity() != before || scan.drains_begun != before.drains_done {
        return None;
    }
    (scan.earliest != NO_TIMER).then_some(scan.earliest)
}

/// One engine's marks for the idle check: wake-ups sent to its processor,
/// and drains that took wakers out of it while its processor may be asleep
/// (begun under the engine's lock, done once the wakers have woken).
#[derive(Default)]
pub(crate) struct EngineMarks {
    rouses: AtomicU64,
    drains_begun: AtomicU64,
    drains_done: AtomicU64,
}

impl EngineMarks {
    /// Before `Host::unpark` wakes the processor (its `sem` left `ASLEEP`
    /// just before). SeqCst: read by the check before and after it looks.
    pub(crate) fn roused(&self) {
        self.rouses.fetch_add(1, Ordering::SeqCst);
    }

    /// Wakes `fired`, taken out of this engine under its lock (`guard`),
    /// after unlocking; counted as a drain if there are any, so that the
    /// check sees wakers in flight between the engine and the ready queue.
    pub(crate) fn wake_after_unlock<G>(&self, guard: G, fired: Vec<Waker>) {
        if fired.is_empty() {
            drop(guard);
            return;
        }
        // Under the engine's lock: the check reads it under the same lock,
        // so Relaxed is enough.
        self.drains_begun.fetch_add(1, Ordering::Relaxed);
        drop(guard);
        fired.into_iter().for_each(Waker::wake);
        // SeqCst: the check reads it first, before the processors' `sem`s;
        // seeing it means the pushes above (and the `sem` swaps they made)
        // are visible to those reads.
        self.drains_done.fetch_add(1, Ordering::SeqCst);
    }

    /// Under the engine's lock (`_locked`): drains begun.
    pub(crate) fn drains_begun<L>(&self, _locked: &L) -> u64 {
        self.drains_begun.load(Ordering::Relaxed)
    }

    /// Adds this engine's wake-ups and finished drains.
    pub(crate) fn add_to(&self, activity: &mut Activity) {
        activity.rouses += self.rouses.load(Ordering::SeqCst);
        activity.drains_done += self.drains_done.load(Ordering::SeqCst);
    }
}
