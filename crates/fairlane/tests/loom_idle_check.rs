//! Loom model of the paused clock's idle check (time/clock.md, "Auto-advance"):
//! a processor deciding to auto-advance against the events that end an
//! idle runtime. The property: a task woken by a timer due at tick 1 runs
//! while the clock still reads 1, so the clock never jumps to the next
//! timer (tick 5) while that task waits to run.
//!
//! The check (`idle_check`, the order of its reads) and each engine's marks
//! (`EngineMarks`: wake-ups sent, drains begun and done) are the production
//! module `src/time/idle_check.rs`, compiled here with loom's atomics. The
//! processors' idle-sleep words are transcribed from fairlane-core's
//! `idle.rs` with their orderings (`commit`, `wake`, `wake_self`, `reset`,
//! and the Acquire read of `Cluster::is_asleep`); an engine is a lock over
//! its pending timer ticks.
//!
//! Scenarios:
//! - `a_drain_inside_park_is_seen`: a sleeping processor fires its due timer
//!   inside its own park (the wake sets its own `sem` to `WAKE`, no
//!   unpark) while another decides. Without the drain marks the decider can
//!   read the first `sem` before the wake and the engine after the fire,
//!   and jump to tick 5.
//! - `a_wake_from_a_processor_that_then_sleeps_is_seen`: a processor wakes
//!   a sleeper for a task only it may run, then sleeps itself, while a
//!   third decides. Without the wake-up count (`roused`) the decider can
//!   read the sleeper's `sem` before the wake and the waker's after its
//!   sleep.
//! - `a_timer_set_under_a_hold_is_seen`: a `block_on` thread sets a timer
//!   while holding the clock, then gives the hold back and decides itself,
//!   while a processor decides too (one decision at a time). Without the
//!   hold, the clock could jump past the new timer.
//! - `a_timer_set_by_a_processor_that_then_sleeps_is_seen`: a processor
//!   sets a timer on another's engine, then sleeps. The check reads the
//!   `sem`s before the engines for this: seeing the setter asleep (its
//!   commit, a release) makes its timer visible to the engine scan.
//!
//! Run: `RUSTFLAGS="--cfg fairlane_loom" cargo test -p fairlane --release --test loom_idle_check`
#![cfg(fairlane_loom)]

/// What `idle_check.rs` takes from `super::atomics`: loom's atomics here.
mod atomics {
    pub(crate) use loom::sync::atomic::AtomicU64;
    pub(crate) use std::sync::atomic::Ordering;
}

#[allow(dead_code)]
#[path = "../src/time/idle_check.rs"]
mod idle_check;

use std::sync::Arc as StdArc;
use std::task::{Wake, Waker};

use idle_check::{idle_check, Activity, EngineMarks, IdleScan, IdleView};
use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize};
use loom::sync::{Arc, Mutex};
use loom::thread;
use std::sync::atomic::{fence, Ordering};

const AWAKE: u8 = 0;
const WAKE: u8 = 1;
const ASLEEP: u8 = 2;

/// The earlier timer (due) and the later one the clock must not reach
/// while the earlier one's task waits.
const DUE: u64 = 1;
const LATER: u64 = 5;

struct Processor {
    /// fairlane-core's `sem[p]`.
    sem: AtomicU8,
    /// The engine's lock over its pending timer ticks.
    engine: Mutex<Vec<u64>>,
    marks: EngineMarks,
    /// A task only this processor may run is queued.
    lane: AtomicBool,
    /// `Host::unpark` reached it (its futex or eventfd).
    unparked: AtomicBool,
}

struct World {
    processors: Vec<Processor>,
    clock: AtomicU64,
    holds: AtomicUsize,
    holds_taken: AtomicU64,
    deciding: Mutex<()>,
}

impl World {
    fn new(sems: &[u8], timers: &[&[u64]], holds: usize) -> Arc<World> {
        Arc::new(World {
            processors: sems
                .iter()
                .zip(timers)
                .map(|(&sem, timers)| Processor {
                    sem: AtomicU8::new(sem),
                    engine: Mutex::new(timers.to_vec()),
                    marks: EngineMarks::default(),
                    lane: AtomicBool::new(false),
                    unparked: AtomicBool::new(false),
                })
                .collect(),
            clock: AtomicU64::new(DUE),
            holds: AtomicUsize::new(holds),
            holds_taken: AtomicU64::new(holds as u64),
            deciding: Mutex::new(()),
        })
    }

    /// `Clock::auto_advance`: one decision at a time; moves the clock to
    /// the earliest timer if the check finds the runtime idle.
    fn decide(&self) {
        let _one = self.deciding.lock().unwrap();
        if let Some(earliest) = idle_check(self) {
            if earliest > self.clock.load(Ordering::SeqCst) {
                self.clock.store(earliest, Ordering::SeqCst);
            }
        }
    }

    /// `Idle::commit`.
    fn commit(&self, p: usize) -> bool {
        self.processors[p]
            .sem
            .compare_exchange(AWAKE, ASLEEP, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// `Idle::wake` with the std host's `unpark` (`Driver::unpark`).
    fn wake(&self, p: usize) {
        if self.processors[p].sem.swap(WAKE, Ordering::AcqRel) == ASLEEP {
            self.processors[p].marks.roused();
            self.processors[p].unparked.store(true, Ordering::Release);
        }
    }

    /// `Idle::wake_self`, on `p`'s own thread inside its park.
    fn wake_self(&self, p: usize) {
        if self.processors[p].sem.load(Ordering::Relaxed) == ASLEEP {
            self.processors[p].sem.swap(WAKE, Ordering::AcqRel);
        }
    }

    /// `Idle::reset`, then the task on `p`'s lane runs: it must see the
    /// clock where its timer fired.
    fn run_task(&self, p: usize) {
        self.processors[p].sem.swap(AWAKE, Ordering::Acquire);
        assert!(self.processors[p].lane.load(Ordering::Acquire));
        assert_eq!(
            self.clock.load(Ordering::SeqCst),
            DUE,
            "the clock jumped while a woken task waited to run"
        );
    }
}

impl IdleView for World {
    fn activity(&self) -> Activity {
        let mut activity = Activity {
            holds_taken: self.holds_taken.load(Ordering::SeqCst),
            ..Activity::default()
        };
        for p in &self.processors {
            p.marks.add_to(&mut activity);
        }
        activity
    }

    fn all_asleep(&self) -> bool {
        self.processors
            .iter()
            .all(|p| p.sem.load(Ordering::Acquire) == ASLEEP)
    }

    fn holds(&self) -> usize {
        self.holds.load(Ordering::Acquire)
    }

    fn scan_engines(&self, scan: &mut IdleScan) -> bool {
        for p in &self.processors {
            let timers = p.engine.lock().unwrap();
            scan.drains_begun += p.marks.drains_begun(&timers);
            if let Some(&t) = timers.iter().min() {
                scan.earliest = scan.earliest.min(t);
            }
        }
        true
    }
}

/// A task's waker: its wake queues the task on `p`'s lane (a task only `p`
/// may run), from `p`'s own thread inside its park.
struct LaneWaker {
    world: Arc<World>,
    p: usize,
}

impl Wake for LaneWaker {
    fn wake(self: StdArc<Self>) {
        self.world.processors[self.p]
            .lane
            .store(true, Ordering::Release);
        self.world.wake_self(self.p);
    }
}

#[test]
fn a_drain_inside_park_is_seen() {
    loom::model(|| {
        // Processor 0 sleeps with a due timer (the clock was just moved to
        // it, and 0 woken to fire it) and the later one; 1 sleeps.
        let world = World::new(&[ASLEEP, ASLEEP], &[&[DUE, LATER], &[]], 0);
        let owner = {
            let world = world.clone();
            thread::spawn(move || {
                // `Driver::park` after its wait: fire the due timer under
                // the lock, wake after unlocking.
                let mut timers = world.processors[0].engine.lock().unwrap();
                timers.retain(|&t| t > DUE);
                let fired = vec![Waker::from(StdArc::new(LaneWaker {
                    world: world.clone(),
                    p: 0,
                }))];
                world.processors[0].marks.wake_after_unlock(timers, fired);
                // The core's sleep loop sees WAKE and runs the task.
                assert_eq!(world.processors[0].sem.load(Ordering::Acquire), WAKE);
                world.run_task(0);
            })
        };
        world.decide();
        owner.join().unwrap();
    });
}

#[test]
fn a_wake_from_a_processor_that_then_sleeps_is_seen() {
    loom::model(|| {
        // 0 sleeps; 1 is awake and about to queue a task for 0 only, then
        // sleep; 2 sleeps and decides. The later timer is 1's.
        let world = World::new(&[ASLEEP, AWAKE, ASLEEP], &[&[], &[LATER], &[]], 0);
        let sleeper = {
            let world = world.clone();
            thread::spawn(move || {
                while !world.processors[0].unparked.load(Ordering::Acquire) {
                    thread::yield_now();
                }
                world.run_task(0);
            })
        };
        let waker = {
            let world = world.clone();
            thread::spawn(move || {
                // A restricted push: the lane, a fence, `wake(target)`.
                world.processors[0].lane.store(true, Ordering::Release);
                fence(Ordering::SeqCst);
                world.wake(0);
                // Nothing else to do: it sleeps.
                assert!(world.commit(1));
            })
        };
        world.decide();
        waker.join().unwrap();
        sleeper.join().unwrap();
    });
}

#[test]
fn a_timer_set_under_a_hold_is_seen() {
    loom::model(|| {
        // Both processors sleep; the later timer is 1's. A `block_on`
        // thread polls (it holds the clock) and sets a timer at DUE on 0.
        let world = World::new(&[ASLEEP, ASLEEP], &[&[], &[LATER]], 1);
        let holder = {
            let world = world.clone();
            thread::spawn(move || {
                world.processors[0].engine.lock().unwrap().push(DUE);
                // `Clock::release_hold`: the last hold decides.
                if world.holds.fetch_sub(1, Ordering::Release) == 1 {
                    world.decide();
                }
            })
        };
        world.decide();
        holder.join().unwrap();
        // DUE is pending and unfired: the clock may not be past it.
        assert!(world.clock.load(Ordering::SeqCst) <= DUE);
    });
}

#[test]
fn a_timer_set_by_a_processor_that_then_sleeps_is_seen() {
    loom::model(|| {
        // 0 sleeps; 1 is awake, sets a timer at DUE on 0's engine (a timer
        // or an operation put in another engine, under its lock), then
        // sleeps; the later timer is 0's. Read the engines before the
        // `sem`s and the decider could miss the new timer.
        let world = World::new(&[ASLEEP, AWAKE], &[&[LATER], &[]], 0);
        let setter = {
            let world = world.clone();
            thread::spawn(move || {
                world.processors[0].engine.lock().unwrap().push(DUE);
                assert!(world.commit(1));
                world.decide();
            })
        };
        world.decide();
        setter.join().unwrap();
        assert!(world.clock.load(Ordering::SeqCst) <= DUE);
    });
}
