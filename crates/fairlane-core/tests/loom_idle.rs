//! Loom model of the idle-sleep handshake (`src/idle.md`): pushes from an
//! outside thread race processors going to sleep. If a wake-up could be lost,
//! some run would end with every processor parked and an item queued, which
//! loom reports as a deadlock. Also checks each item is handed out once.
//!
//! The models run the production `Scheduler::push` / `Scheduler::next`, with
//! a host whose park/unpark are loom's.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p fairlane-core --release --test loom_idle`
#![cfg(loom)]

use fairlane_core::loom_scheduler::Scheduler;
use fairlane_core::{Config, Host};
use std::cell::Cell;

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread::{self, Thread};

loom::thread_local! {
    /// The processor the current loom thread runs.
    static PROCESSOR: Cell<Option<usize>> = Cell::new(None);
    /// Run by this thread's first `Host::poll_events`, as the std host's
    /// reaps I/O completions there and wakes their tasks. A thread-local
    /// rather than a field, so that the many calls with nothing to run add
    /// no branch points to the models.
    static EVENTS: std::cell::RefCell<Option<Box<dyn FnOnce()>>> = std::cell::RefCell::new(None);
}

/// A host whose processors are loom threads. Its clock stands still: ages
/// are heuristics and not part of the handshake, and a clock that is an
/// atomic would only add branch points.
struct LoomHost {
    threads: Mutex<Vec<Option<Thread>>>,
    /// Run by the first `park`, which then returns, as the std host's park
    /// returns after reaping an I/O completion or a timer that woke a task.
    on_park: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// Whether `on_park` is still to be claimed: the parks that find it
    /// claimed take no lock. A loom `Mutex` that another thread acquires
    /// or releases while a thread is about to lock it resets that thread's
    /// state, and with it an unpark it had stored for its next park, which
    /// would make that park block through a wake-up the protocol did make.
    event_pending: AtomicBool,
    /// Where set, counts the calls of `park` that block, so that a model can
    /// wait until its processors sleep.
    parks: Option<Count>,
    /// `Host::keep_watch`'s answer: whether the host watches processors.
    watch: bool,
}

impl LoomHost {
    fn new(processors: usize) -> Self {
        Self {
            threads: Mutex::new(vec![None; processors]),
            on_park: Mutex::new(None),
            event_pending: AtomicBool::new(false),
            parks: None,
            watch: false,
        }
    }

    /// Sets what the first `park` runs.
    fn on_park(&self, event: Box<dyn FnOnce() + Send>) {
        *self.on_park.lock().unwrap() = Some(event);
        self.event_pending.store(true, Ordering::SeqCst);
    }

    fn register(&self, p: usize) {
        PROCESSOR.with(|c| c.set(Some(p)));
        self.threads.lock().unwrap()[p] = Some(thread::current());
    }
}

// SAFETY: `current_processor` names a thread only after `register`, which
// processor threads call right before running the scheduler.
unsafe impl Host for LoomHost {
    fn now(&self) -> u64 {
        1
    }

    fn current_processor(&self) -> Option<usize> {
        PROCESSOR.with(Cell::get)
    }

    fn park(&self, _processor: usize) {
        let claimed = self.event_pending.load(Ordering::Relaxed)
            && self.event_pending.swap(false, Ordering::SeqCst);
        let event = if claimed {
            self.on_park.lock().unwrap().take()
        } else {
            None
        };
        match event {
            Some(event) => event(),
            None => {
                if let Some(parks) = &self.parks {
                    parks.add();
                }
                thread::park();
            }
        }
    }

    fn unpark(&self, processor: usize) {
        if let Some(t) = &self.threads.lock().unwrap()[processor] {
            t.unpark();
        }
    }

    fn poll_events(&self, _processor: usize) {
        if let Some(events) = EVENTS.with(|e| e.borrow_mut().take()) {
            events();
        }
    }

    fn keep_watch(&self, _processor: usize) -> bool {
        self.watch
    }
}

fn config(processors: usize) -> Config {
    let mut c = Config::new(processors);
    c.lanes_per_processor = 1;
    c.spin_rounds = 0;
    c.steal_attempts = 1;
    c.help_period = 0;
    c
}

/// Runs processor `p` until the scheduler closes; the processor that takes
/// the last of `total` items closes it.
fn processor(sched: &Scheduler<u32, LoomHost>, p: usize, taken: &AtomicUsize, total: usize) {
    sched.host().register(p);
    if sched.start(p) {
        while let Some(_item) = sched.next(p) {
            if taken.fetch_add(1, Ordering::SeqCst) + 1 == total {
                sched.close();
            }
        }
    }
    sched.finish(p, true);
}

/// The shape of the models below: `processors` processor threads run until
/// every item is taken (each exactly once), while this thread pushes
/// `pushes` (item, preferred processor) from outside. `events` are items the
/// first `Host::park` pushes from inside (see `LoomHost::on_park`).
fn outside_pushes_race_sleepers(
    processors: usize,
    pushes: &'static [(u32, Option<usize>)],
    events: &'static [u32],
) {
    let sched = Arc::new(Scheduler::new(config(processors), LoomHost::new(processors)).unwrap());
    let taken = Arc::new(AtomicUsize::new(0));
    let total = pushes.len() + events.len();
    if !events.is_empty() {
        let inner = sched.clone();
        // Taken (and dropped) by the park that runs it: no reference cycle.
        sched.host().on_park(Box::new(move || {
            for &item in events {
                inner.push(item, None).unwrap();
            }
        }));
    }
    let workers: Vec<_> = (0..processors)
        .map(|p| {
            let (sched, taken) = (sched.clone(), taken.clone());
            thread::spawn(move || processor(&sched, p, &taken, total))
        })
        .collect();
    for &(item, preferred) in pushes {
        sched.push(item, preferred).unwrap();
    }
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(
        taken.load(Ordering::SeqCst),
        total,
        "an item was handed out twice or lost"
    );
}

#[test]
fn idle_sleep_push_races_one_sleeper() {
    model(|| outside_pushes_race_sleepers(1, &[(1, None)], &[]));
}

/// Two processors, each free to go to sleep, and one push from outside: the
/// push must wake whichever processor went to sleep last, or be found by one
/// still scanning.
#[test]
fn idle_sleep_push_races_two_sleepers() {
    model(|| outside_pushes_race_sleepers(2, &[(1, Some(1))], &[]));
}

/// Two pushes from outside onto one lane, racing two processors going to
/// sleep: only the push that fills the empty lane does the wake-up handshake
/// (`Scheduler::notify_after_push`); the second, onto a lane that already
/// holds work, does not. Both items must still be taken: whoever the first
/// push woke, or a sleeper's final scan, finds the lane non-empty.
#[test]
fn idle_sleep_second_push_onto_a_full_lane_needs_no_wake() {
    model(|| outside_pushes_race_sleepers(2, &[(1, Some(1)), (2, Some(1))], &[]));
}

/// A lone processor reaps an event inside its own park and pushes the task
/// it wakes onto its own lanes (idle.md, "A lone processor": no handshake,
/// only `wake_self`), while an outside push races it. The processor must run
/// the item instead of sleeping on; fails if that push neither wakes itself
/// nor notifies.
#[test]
fn idle_sleep_lone_processor_pushes_from_inside_its_park() {
    model(|| outside_pushes_race_sleepers(1, &[(1, None)], &[2]));
}

/// A counter that threads of the model can wait on.
struct Count {
    n: Mutex<usize>,
    changed: Condvar,
}

impl Count {
    fn new() -> Self {
        Self {
            n: Mutex::new(0),
            changed: Condvar::new(),
        }
    }

    /// Adds one; returns the new value.
    fn add(&self) -> usize {
        let mut n = self.n.lock().unwrap();
        *n += 1;
        self.changed.notify_all();
        *n
    }

    /// Blocks until the count is at least `k`.
    fn wait_for(&self, k: usize) {
        let mut n = self.n.lock().unwrap();
        while *n < k {
            n = self.changed.wait(n).unwrap();
        }
    }

    fn get(&self) -> usize {
        *self.n.lock().unwrap()
    }
}

/// Like `processor`, but the item taken is a task that runs until all
/// `total` items have been taken: the processor stays busy and does not come
/// back to `next` for the others, so each item needs a processor of its own.
fn busy_processor(sched: &Scheduler<u32, LoomHost>, p: usize, taken: &Count, total: usize) {
    sched.host().register(p);
    if sched.start(p) {
        while let Some(_item) = sched.next(p) {
            if taken.add() == total {
                sched.close();
            } else {
                taken.wait_for(total);
            }
        }
    }
    sched.finish(p, true);
}

/// `processors` processors go to sleep one after the other (processor 0
/// first, so the last one is on top of the idle list); then this thread
/// pushes `pushes` from outside, and each processor stays busy with the
/// first item it takes until all are taken. With as many items as
/// processors, a run ends only if every processor is woken for an item of
/// its own; one left asleep with an item queued is a deadlock loom reports.
/// Letting the processors sleep first keeps the model small enough for a
/// preemption bound of 2: the race that matters is between the pushes and
/// the processors they wake, not the ones before the first sleep (the
/// models above cover those).
fn busy_processors_race_sleepers(processors: usize, pushes: &'static [(u32, Option<usize>)]) {
    let mut host = LoomHost::new(processors);
    host.parks = Some(Count::new());
    let sched = Arc::new(Scheduler::new(config(processors), host).unwrap());
    let taken = Arc::new(Count::new());
    let total = pushes.len();
    let parks = sched.host().parks.as_ref().unwrap();
    let workers: Vec<_> = (0..processors)
        .map(|p| {
            let (sched, taken) = (sched.clone(), taken.clone());
            let worker = thread::spawn(move || busy_processor(&sched, p, &taken, total));
            parks.wait_for(p + 1);
            worker
        })
        .collect();
    for &(item, preferred) in pushes {
        sched.push(item, preferred).unwrap();
    }
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(taken.get(), total, "an item was handed out twice or lost");
}

/// Two pushes onto different lanes race two sleepers, and the processor
/// that takes an item stays busy with it. Both pushes fill their lane and
/// notify, but the second may read `top` while it still names the processor
/// the first one woke (an absorbed wake): only that processor, leaving the
/// idle list and finding the other item still visible, can wake the second
/// sleeper (idle.md, step 6, the hand-over rule).
///
/// Mutations this model catches (each applied to `src/scheduler.rs` and
/// seen to fail with a deadlock in well under a second, at preemption bound
/// 1 as at 2): deleting the hand-over in `Scheduler::found`
/// (`if handing_over { if visible_beside_own_lanes(p) { notify_one } ... }`), and deleting the
/// `fence(SeqCst)` after `Idle::retract` in `Scheduler::next`. Neither
/// fails any other model in this file. It runs at bound 2 (about a second;
/// bound 3 takes about ten).
#[test]
fn idle_sleep_busy_processor_hands_over_to_the_next_sleeper() {
    model_at(2, || {
        busy_processors_race_sleepers(2, &[(1, Some(0)), (2, Some(1))])
    });
}

/// Two processors (with a host that watches them if `watch`), each busy
/// with the first item it takes; the first to park reaps `events` there,
/// pushing them from inside its park. Every item must be taken once.
fn events_reaped_inside_a_park(watch: bool, events: &'static [u32]) {
    let mut host = LoomHost::new(2);
    host.watch = watch;
    let sched = Arc::new(Scheduler::new(config(2), host).unwrap());
    let inner = sched.clone();
    // Taken (and dropped) by the park that runs it: no reference cycle.
    sched.host().on_park(Box::new(move || {
        for &item in events {
            inner.push(item, None).unwrap();
        }
    }));
    let taken = Arc::new(Count::new());
    let workers: Vec<_> = (0..2)
        .map(|p| {
            let (sched, taken) = (sched.clone(), taken.clone());
            thread::spawn(move || busy_processor(&sched, p, &taken, events.len()))
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(
        taken.get(),
        events.len(),
        "an item was handed out twice or lost"
    );
}

/// Two events reaped in a park, pushed onto the parked processor's own
/// lane. It ends its own sleep (`Idle::wake_self`) instead of waking
/// another sleeper, takes one item and finds the other still visible: the
/// hand-over must wake the other processor, asleep or going to sleep
/// (idle.md, "Pushes from inside `park`"). Fails if such a push neither
/// wakes its own processor nor notifies (a deadlock: the parked processor
/// sleeps on beside its items).
#[test]
fn idle_sleep_events_reaped_inside_a_park_reach_both_processors() {
    model(|| events_reaped_inside_a_park(false, &[1, 2]));
}

/// With a host that watches processors (`Host::keep_watch`), an event
/// reaped in a park is handed, the parked processor's own `sem` left
/// `ASLEEP`, to the other processor, awake, going to sleep or already
/// committed (idle.md, "Kept tasks", handing over). The swap of the
/// receiver's `sem` must end or prevent its sleep: deleting the
/// `Idle::wake` in `Scheduler::hand_to_keeper` was seen to fail with a
/// deadlock (the receiver sleeps on beside the item, the giver too).
#[test]
fn idle_sleep_a_task_handed_over_from_inside_a_park_reaches_its_receiver() {
    model(|| events_reaped_inside_a_park(true, &[1]));
}

/// A two-processor scheduler whose processor 1 runs `busy_processor` until
/// `items` have been taken, on its own thread, and goes to sleep meanwhile
/// (with `asleep`, has gone to sleep once this returns).
fn with_a_sleeper(
    asleep: bool,
    items: usize,
) -> (
    Arc<Scheduler<u32, LoomHost>>,
    Arc<Count>,
    thread::JoinHandle<()>,
) {
    let mut host = LoomHost::new(2);
    host.parks = Some(Count::new());
    let sched = Arc::new(Scheduler::new(config(2), host).unwrap());
    let taken = Arc::new(Count::new());
    let sleeper = {
        let (sched, taken) = (sched.clone(), taken.clone());
        thread::spawn(move || busy_processor(&sched, 1, &taken, items))
    };
    if asleep {
        sched.host().parks.as_ref().unwrap().wait_for(1);
    }
    (sched, taken, sleeper)
}

/// Processor 0 makes two items ready in one `Host::poll_events` (two
/// completions reaped at once), onto its own lane, while processor 1 goes
/// to sleep (or, with `asleep`, after it has gone to sleep); each processor
/// stays busy with the first item it takes. Pushes made between polls skip
/// the handshake, and processor 0 announces what it leaves behind after its
/// pop (idle.md, "Pushes between polls"): without that announcement,
/// processor 1 sleeps on beside the second item, a deadlock loom reports
/// (seen by deleting the call of `announce_leftovers` in `Scheduler::next`).
fn events_race_a_sleeper(asleep: bool) {
    let (sched, taken, sleeper) = with_a_sleeper(asleep, 2);
    let reaper = {
        let (sched, taken) = (sched.clone(), taken.clone());
        thread::spawn(move || {
            let inner = sched.clone();
            EVENTS.with(|e| {
                *e.borrow_mut() = Some(Box::new(move || {
                    for item in [1, 2] {
                        inner.push(item, None).unwrap();
                    }
                }))
            });
            busy_processor(&sched, 0, &taken, 2);
        })
    };
    sleeper.join().unwrap();
    reaper.join().unwrap();
    assert_eq!(taken.get(), 2, "an item was handed out twice or lost");
}

#[test]
fn idle_sleep_events_reaped_beside_a_sleeper_are_announced() {
    model(|| events_race_a_sleeper(true));
}

#[test]
fn idle_sleep_events_reaped_while_another_goes_to_sleep_are_announced() {
    model(|| events_race_a_sleeper(false));
}

/// Processor 0, polling a task that never returns (it waits until the task
/// it woke has been taken), wakes another task, which goes to its wake slot;
/// processor 1 goes to sleep meanwhile (or, with `asleep`, is asleep
/// already). Only processor 1 can run the woken task: filling the slot must
/// do the waker's handshake, and the final scan before a sleep must look
/// into the other processors' slots (idle.md, "The wake slot"). Mutations
/// seen to fail with a deadlock: deleting the call of `announce_woken` in
/// `Scheduler::put_woken` (both cases), its fence (the second case), and
/// deleting the slots from `ReadyQueue::final_scan` (`scan_woken`; both
/// cases).
fn a_stuck_processor_wakes_a_task_into_its_slot(asleep: bool) {
    let (sched, taken, sleeper) = with_a_sleeper(asleep, 1);
    let stuck = {
        let (sched, taken) = (sched.clone(), taken.clone());
        thread::spawn(move || {
            sched.host().register(0);
            assert!(sched.start(0));
            sched.wake_in_poll(0, 1).unwrap();
            taken.wait_for(1);
            assert_eq!(sched.next(0), None, "the item was handed out twice");
            sched.finish(0, true);
        })
    };
    sleeper.join().unwrap();
    stuck.join().unwrap();
    assert_eq!(taken.get(), 1, "an item was handed out twice or lost");
}

#[test]
fn idle_sleep_a_task_in_a_stuck_processors_slot_reaches_the_sleeper() {
    model(|| a_stuck_processor_wakes_a_task_into_its_slot(true));
}

#[test]
fn idle_sleep_a_task_in_a_stuck_processors_slot_reaches_one_going_to_sleep() {
    model(|| a_stuck_processor_wakes_a_task_into_its_slot(false));
}

/// Processor 0, polling a task that never returns (it waits until both
/// tasks it woke have been taken), wakes two tasks: the first goes to its
/// wake slot, the second, with the slot full, onto its own empty lane — a
/// filling push made during a poll. Processor 1 takes tasks as they come
/// and sleeps in between (with `asleep`, is asleep before the poll). It may
/// take the first task, then publish itself as a sleeper and look at
/// processor 0's lane before the second push is visible there: only that
/// push's own handshake (the filling push wakes a sleeper) gets the second
/// task run. Mutation seen to fail with a deadlock: deleting the
/// `notify_after_push` of a filling push in `Scheduler::push_local`.
fn a_stuck_processor_wakes_two_tasks(asleep: bool) {
    let mut host = LoomHost::new(2);
    host.parks = Some(Count::new());
    let sched = Arc::new(Scheduler::new(config(2), host).unwrap());
    let taken = Arc::new(Count::new());
    let sleeper = {
        let (sched, taken) = (sched.clone(), taken.clone());
        thread::spawn(move || {
            sched.host().register(1);
            if sched.start(1) {
                while let Some(_item) = sched.next(1) {
                    taken.add();
                }
            }
            sched.finish(1, true);
        })
    };
    if asleep {
        sched.host().parks.as_ref().unwrap().wait_for(1);
    }
    sched.host().register(0);
    assert!(sched.start(0));
    sched.wake_in_poll(0, 1).unwrap();
    sched.wake_in_poll(0, 2).unwrap();
    taken.wait_for(2);
    sched.close();
    assert_eq!(sched.next(0), None, "an item was handed out twice");
    sched.finish(0, true);
    sleeper.join().unwrap();
    assert_eq!(taken.get(), 2, "an item was handed out twice or lost");
}

#[test]
fn idle_sleep_a_filling_push_during_a_poll_reaches_the_sleeper() {
    model(|| a_stuck_processor_wakes_two_tasks(true));
}

#[test]
fn idle_sleep_a_filling_push_during_a_poll_reaches_one_going_to_sleep() {
    model(|| a_stuck_processor_wakes_two_tasks(false));
}

/// `release` (the hand-back of std's `block_in_place`) racing a processor
/// going to sleep: the processor must return from `next`, never sleep
/// through it.
#[test]
fn idle_sleep_release_races_a_sleeper() {
    model(|| {
        let sched = Arc::new(Scheduler::<u32, _>::new(config(1), LoomHost::new(1)).unwrap());
        let worker = {
            let sched = sched.clone();
            thread::spawn(move || {
                sched.host().register(0);
                assert!(sched.start(0));
                assert_eq!(sched.next(0), None);
                sched.finish(0, false);
            })
        };
        sched.release(0);
        worker.join().unwrap();
    });
}

/// Bounded exploration: the spin locks on the lanes and the idle list make
/// unbounded preemption explode, and a bound of 2 is too slow for a routine
/// run. A bound of 1 still finds both known-bad variants: the
/// push-side `fence(SeqCst)` removed, and `Idle::reset` as a plain store.
/// `LOOM_MAX_PREEMPTIONS` overrides it for a deeper run.
fn model(f: impl Fn() + Sync + Send + 'static) {
    model_at(1, f);
}

/// `model` at preemption bound `bound` (unless `LOOM_MAX_PREEMPTIONS` is set).
fn model_at(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(bound);
    }
    // One run of the two-processor model walks both processors through a
    // full search and sleep: far more branch points than loom's default.
    builder.max_branches = 100_000;
    builder.check(f);
}
