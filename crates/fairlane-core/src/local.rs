//! A processor's own state: the words only the processor running the slot
//! writes (its scheduling cursors, random state, clock reading, priority
//! counters, counters, the centroid of its work and the between-polls flags
//! of `idle.md`), beside the words of other protocols that live in the same
//! place (`stop` and `kept` of `idle.md`, `reading`, `occupied` and
//! `generation` of `resize.md`).

use crate::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Per-processor state that only the owning processor writes (but for the
/// other protocols' words named in the module's documentation). Relaxed
/// loads and stores (never read-modify-writes) keep it as cheap as plain
/// fields while letting other threads read the counters.
pub(crate) struct Local {
    /// Which normal lane the next own push tries first (below
    /// `lanes_per_processor`).
    pub(crate) push_cursor: AtomicUsize,
    /// Pops until the next help target is drawn.
    pub(crate) help_countdown: Countdown,
    /// Help checks until the next one that reads the target lane whatever
    /// its owner's heartbeat says (`queue.rs`, `REBALANCE_PERIOD`).
    pub(crate) rebalance_countdown: Countdown,
    /// Clock readings until the next heartbeat (`queue.rs`, `BEAT_PERIOD`).
    pub(crate) beat_countdown: Countdown,
    /// The estimated clock time between two of this processor's heartbeats
    /// (`ReadyQueue::beat`); 0 before the second.
    pub(crate) beat_interval: AtomicU64,
    /// This processor's last published heartbeat (0: none yet), kept here
    /// so that publishing the next one reads nothing from the heartbeat's
    /// line, which the processors checking it keep pulling away.
    pub(crate) last_beat: AtomicU64,
    /// Scheduling iterations until the clock is read again
    /// (`Config::clock_period`).
    pub(crate) clock_countdown: Countdown,
    pub(crate) rng: AtomicU64,
    /// Lane index chosen as the next help target, or `NO_TARGET`.
    pub(crate) help_target: AtomicUsize,
    /// The clock as read at the top of the current scheduling iteration;
    /// pushes made by this processor stamp their tasks with it.
    pub(crate) now: AtomicU64,
    /// Own-lane pops of other classes since the head of the normal lanes
    /// (resp. the low lane) became ready: the priority bound's counters.
    pub(crate) normal_waited: AtomicUsize,
    pub(crate) low_waited: AtomicUsize,
    pub(crate) counters: Counters,
    /// Why the thread running this processor must return from
    /// `run_processor`: `RELEASED` (the hand-back of `block_in_place`) or
    /// `REMOVED` (the processor left the cluster). Checked once per
    /// scheduling iteration.
    pub(crate) stop: AtomicU8,
    /// This processor's reader flag of the resize lock (`resize.md`).
    pub(crate) reading: AtomicBool,
    /// A thread has been promised this slot (by `add`) and has not yet
    /// returned from running it: the slot cannot be reused before that.
    pub(crate) occupied: AtomicBool,
    /// Bumped each time the slot is given to a new processor, so that a
    /// [`ProcessorId`] is never reused.
    pub(crate) generation: AtomicU32,
    /// The task being polled on this processor (a type-erased pointer to its
    /// metadata), for calls that act on "the current task".
    pub(crate) current: crate::sync::AtomicPtr<()>,
    /// Runs from the wake slot since the last scheduling iteration that
    /// served the lanes (`scheduler.rs`, `WOKEN_RUNS`).
    pub(crate) woken_runs: AtomicU32,
    /// Set while the processor is in `Host::poll_events`: its own filling
    /// pushes then skip the idle handshake and set `unannounced` instead
    /// (`idle.md`, "Pushes between polls").
    pub(crate) in_events: AtomicBool,
    /// A push made in `Host::poll_events` filled a lane and has not yet been
    /// announced: the processor does the handshake after its next pop.
    pub(crate) unannounced: AtomicBool,
    /// Tasks on this processor's lanes were left unannounced under the
    /// host's watch (`idle.md`, "Kept tasks"): kept by the owner, or handed
    /// over by a sleeping processor, which sets it too (the one word here
    /// that another thread writes). While it is set the owner checks its
    /// lanes every iteration (`Scheduler::check_kept`).
    pub(crate) kept: AtomicBool,
    /// Where this processor's work lives: a moving average (weight 1/8) of
    /// the addresses of tasks it popped from its own lanes, one pop in
    /// `help_period` (0: none yet). A rebalance takes the task nearest it.
    pub(crate) centroid: AtomicUsize,
    /// The address of the last task this processor took from another
    /// processor (a help or a steal), and how (`TAKEN_*`): a poll of a task
    /// another processor polled last compares its address with it to count
    /// the move by its cause (`Scheduler::note_moved`). Written only on those
    /// takes, never on a pop from the own lanes.
    pub(crate) taken: stat::AtomicUsize,
    pub(crate) taken_by: stat::AtomicU8,
    /// Whether the last help check that took a task was a rebalance (the
    /// owner was on time) rather than a rescue (the owner was late).
    pub(crate) helped_by_rebalance: stat::AtomicBool,
}

/// The atomics of statistics that no protocol reads (the move counters and
/// what they are derived from): `core`'s even under loom, so that the
/// models do not explore them.
pub(crate) mod stat {
    pub(crate) use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize};

    /// [`bump`](super::bump) for a statistics counter.
    #[inline]
    pub(crate) fn bump(counter: &AtomicU64) {
        let value = counter.load(super::Ordering::Relaxed).wrapping_add(1);
        counter.store(value, super::Ordering::Relaxed);
    }
}

/// `Local::taken_by`: how the task at `Local::taken` came here.
pub(crate) const TAKEN_BY_HELP: u8 = 1;
pub(crate) const TAKEN_BY_REBALANCE: u8 = 2;
pub(crate) const TAKEN_BY_STEAL: u8 = 3;

/// `Local::stop` bits.
pub(crate) const RELEASED: u8 = 1;
pub(crate) const REMOVED: u8 = 2;

/// Counters each processor keeps about itself.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) iterations: AtomicU64,
    pub(crate) polls: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) wakeups: AtomicU64,
    pub(crate) host_parks: AtomicU64,
    pub(crate) helps: AtomicU64,
    pub(crate) steals: AtomicU64,
    pub(crate) rebalances: stat::AtomicU64,
    pub(crate) moved_help: stat::AtomicU64,
    pub(crate) moved_rebalance: stat::AtomicU64,
    pub(crate) moved_steal: stat::AtomicU64,
    pub(crate) moved_wake: stat::AtomicU64,
    pub(crate) handoffs: stat::AtomicU64,
}

/// Adds one to an owner-written counter without a read-modify-write, and
/// returns the new value.
#[inline]
pub(crate) fn bump(counter: &AtomicU64) -> u64 {
    let value = counter.load(Ordering::Relaxed).wrapping_add(1);
    counter.store(value, Ordering::Relaxed);
    value
}

/// `Local::help_target` when no target is drawn.
pub(crate) const NO_TARGET: usize = usize::MAX;

impl Local {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            push_cursor: AtomicUsize::new(0),
            help_countdown: Countdown::default(),
            rebalance_countdown: Countdown::default(),
            beat_countdown: Countdown::default(),
            beat_interval: AtomicU64::new(0),
            last_beat: AtomicU64::new(0),
            clock_countdown: Countdown::default(),
            rng: AtomicU64::new(seed | 1),
            help_target: AtomicUsize::new(NO_TARGET),
            now: AtomicU64::new(0),
            normal_waited: AtomicUsize::new(0),
            low_waited: AtomicUsize::new(0),
            counters: Counters::default(),
            stop: AtomicU8::new(0),
            reading: AtomicBool::new(false),
            occupied: AtomicBool::new(false),
            generation: AtomicU32::new(0),
            current: crate::sync::AtomicPtr::new(core::ptr::null_mut()),
            woken_runs: AtomicU32::new(0),
            in_events: AtomicBool::new(false),
            unannounced: AtomicBool::new(false),
            kept: AtomicBool::new(false),
            centroid: AtomicUsize::new(0),
            taken: stat::AtomicUsize::new(0),
            taken_by: stat::AtomicU8::new(0),
            helped_by_rebalance: stat::AtomicBool::new(false),
        }
    }

    /// The owner's private random numbers ([`crate::rand::step`]).
    #[inline]
    pub(crate) fn random(&self) -> u64 {
        let mut x = self.rng.load(Ordering::Relaxed);
        let r = crate::rand::step(&mut x);
        self.rng.store(x, Ordering::Relaxed);
        r
    }

    /// Feeds the address of a task popped from the own lanes into
    /// `centroid` (the first one sets it).
    #[inline]
    pub(crate) fn note_address(&self, address: usize) {
        let centroid = self.centroid.load(Ordering::Relaxed);
        let next = if centroid == 0 {
            address
        } else {
            // An eighth of the way from the centroid to `address`, either
            // way (addresses fit in an `isize`).
            let step = (address.wrapping_sub(centroid) as isize) >> 3;
            centroid.wrapping_add(step as usize)
        };
        self.centroid.store(next, Ordering::Relaxed);
    }

    /// Post-increments an owner-only cursor that wraps at `n`.
    #[inline]
    pub(crate) fn next(cursor: &AtomicUsize, n: usize) -> usize {
        let c = cursor.load(Ordering::Relaxed);
        cursor.store(if c + 1 >= n { 0 } else { c + 1 }, Ordering::Relaxed);
        c
    }
}

/// An owner-only counter that says yes once every `period` calls. The hot
/// paths count this way rather than with `%`: a division costs a few
/// nanoseconds, and they run on every scheduling iteration or pop.
#[derive(Default)]
pub(crate) struct Countdown(AtomicU32);

impl Countdown {
    /// True on the first call and then once every `period` (at least 1)
    /// calls.
    #[inline]
    pub(crate) fn tick(&self, period: u32) -> bool {
        let left = self.0.load(Ordering::Relaxed);
        let (due, next) = match left {
            0 => (true, period - 1),
            _ => (false, left - 1),
        };
        self.0.store(next, Ordering::Relaxed);
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn the_centroid_moves_an_eighth_of_the_way_to_each_address() {
        let local = Local::new(1);
        local.note_address(800);
        assert_eq!(local.centroid.load(Ordering::Relaxed), 800);
        local.note_address(1_600);
        assert_eq!(local.centroid.load(Ordering::Relaxed), 900);
        local.note_address(100);
        assert_eq!(local.centroid.load(Ordering::Relaxed), 800);
    }

    #[test]
    fn countdown_says_yes_once_per_period() {
        for period in [1, 2, 3, 8] {
            let c = Countdown::default();
            let due: Vec<usize> = (0..4 * period as usize)
                .filter(|_| c.tick(period))
                .collect();
            assert_eq!(due.len(), 4, "period {period}");
        }
        let c = Countdown::default();
        let pattern: Vec<bool> = (0..6).map(|_| c.tick(3)).collect();
        assert_eq!(pattern, [true, false, false, true, false, false]);
    }
}
