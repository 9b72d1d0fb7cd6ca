use super::*;
use crate::sync::AtomicU64;

struct CountingHost(AtomicU64);

// SAFETY: no thread claims to be a processor.
unsafe impl Host for CountingHost {
    fn now(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
    fn current_processor(&self) -> Option<usize> {
        None
    }
    fn park(&self, _: usize) {}
    fn unpark(&self, _: usize) {}
}

/// Two processors driven by hand from the test's thread: the calling
/// code acts as processor `at`; the host watches processors if `watch`
/// is set; unparks are counted.
struct HandHost {
    now: AtomicU64,
    at: crate::sync::AtomicUsize,
    watch: bool,
    unparks: crate::sync::AtomicUsize,
}

// SAFETY: the tests act as one processor at a time, on one thread.
unsafe impl Host for HandHost {
    fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }
    fn current_processor(&self) -> Option<usize> {
        Some(self.at.load(Ordering::Relaxed)).filter(|&p| p != OUTSIDE)
    }
    fn park(&self, _: usize) {}
    fn unpark(&self, _: usize) {
        self.unparks.fetch_add(1, Ordering::Relaxed);
    }
    fn keep_watch(&self, _: usize) -> bool {
        self.watch
    }
}

/// `HandHost::at` for a thread that is no processor.
const OUTSIDE: usize = usize::MAX;

/// Two processors, the clock read at every iteration, `grow_after`
/// 1,000 ticks.
fn by_hand(watch: bool) -> Scheduler<u32, HandHost> {
    by_hand_with(watch, 2, 1)
}

fn by_hand_with(watch: bool, processors: usize, clock_period: u32) -> Scheduler<u32, HandHost> {
    let mut config = Config::new(processors);
    config.clock_period = clock_period;
    config.grow_after = 1_000;
    let host = HandHost {
        now: AtomicU64::new(0),
        at: crate::sync::AtomicUsize::new(0),
        watch,
        unparks: crate::sync::AtomicUsize::new(0),
    };
    Scheduler::new(config, host).unwrap()
}

/// Sleeper steps 1, 2 and 4 for processor `p` (its final scan finding
/// nothing).
fn asleep(sched: &Scheduler<u32, HandHost>, p: usize) {
    sched.idle.publish(p);
    fence(Ordering::SeqCst);
    assert!(sched.idle.commit(p));
}

impl Scheduler<u32, HandHost> {
    fn act_as(&self, p: usize) -> &Self {
        self.host.at.store(p, Ordering::Relaxed);
        self
    }
    fn unparks(&self) -> usize {
        self.host.unparks.load(Ordering::Relaxed)
    }
}

#[test]
fn a_moved_task_counts_under_the_take_that_brought_it_else_as_a_wake() {
    let sched = by_hand(false);
    sched.act_as(1).push_local(1, 7, Priority::Normal).unwrap();
    // Processor 0 has no work of its own: it takes 7 from processor 1.
    assert_eq!(sched.act_as(0).next(0), Some(7));
    let c = sched.counters(0);
    assert_eq!(c.steals + c.helps, 1);
    sched.note_moved(0, 7);
    let c = sched.counters(0);
    assert_eq!(c.moved_steal + c.moved_help + c.moved_rebalance, 1);
    assert_eq!(c.moved_steal, c.steals);
    assert_eq!(c.moved_wake, 0);
    // A moved task that no take brought (pushed onto 0's own lanes),
    // and the same task moving again later: wakes.
    sched.note_moved(0, 8);
    sched.note_moved(0, 7);
    assert_eq!(sched.counters(0).moved_wake, 2);
    assert_eq!(sched.counters(1), ProcessorCounters::default());
}

#[test]
fn leftovers_of_a_watched_processor_wake_a_sleeper_only_once_they_wait_past_grow_after() {
    for watch in [false, true] {
        let sched = by_hand(watch);
        asleep(&sched, 1);
        // Three tasks made ready by processor 0's own events.
        let local = &sched.queue.local[0];
        local.in_events.store(true, Ordering::Relaxed);
        for item in 1..=3 {
            sched.push_local(0, item, Priority::Normal).unwrap();
        }
        local.in_events.store(false, Ordering::Relaxed);
        sched.host.now.store(10, Ordering::Relaxed);
        // Equal stamps: any of them first.
        assert!(sched.next(0).is_some());
        assert_eq!(sched.unparks(), usize::from(!watch), "watch: {watch}");
        sched.host.now.store(5_000, Ordering::Relaxed);
        assert!(sched.next(0).is_some());
        assert_eq!(sched.unparks(), 1, "watch: {watch}");
    }
}

#[test]
fn a_task_made_ready_in_a_sleepers_park_goes_to_an_awake_processor_that_keeps_up() {
    let sched = by_hand(true);
    asleep(&sched, 1);
    sched.act_as(1).push_local(1, 7, Priority::Normal).unwrap();
    assert!(sched.idle.is_asleep(1), "the sleeper sleeps on");
    assert!(sched.queue.local[0].kept.load(Ordering::Relaxed));
    assert_eq!(sched.act_as(0).next(0), Some(7));
    assert_eq!(sched.unparks(), 0);
}

#[test]
fn a_task_made_ready_in_a_sleepers_park_stays_when_no_awake_processor_keeps_up() {
    // Processor 0 not watched; behind (its oldest task waited past
    // `grow_after`); asleep too.
    for case in ["unwatched", "behind", "asleep"] {
        let sched = by_hand(case != "unwatched");
        if case == "behind" {
            sched.push_local(0, 1, Priority::Normal).unwrap();
            sched.host.now.store(5_000, Ordering::Relaxed);
        }
        if case == "asleep" {
            asleep(&sched, 0);
        }
        asleep(&sched, 1);
        sched.act_as(1).push_local(1, 7, Priority::Normal).unwrap();
        assert!(!sched.idle.is_asleep(1), "{case}: the sleeper wakes for it");
        assert_eq!(sched.act_as(1).next(1), Some(7), "{case}");
    }
}

/// A processor that keeps reusing one clock reading re-queues the task
/// it ran (a yield) while tasks pushed from outside, later in real time,
/// wait: the re-queued task goes behind them, so it never runs twice in
/// a row while others are ready (queue.md, "Time").
#[test]
fn a_requeued_task_goes_behind_tasks_pushed_from_outside_meanwhile() {
    let sched = by_hand_with(false, 1, 1_000);
    sched.host.now.store(10, Ordering::Relaxed);
    sched.act_as(0).push_local(0, 0, Priority::Normal).unwrap();
    assert_eq!(sched.next(0), Some(0));
    // While task 0 runs, time passes and three tasks are pushed from
    // another thread.
    sched.host.now.store(1_000_000, Ordering::Relaxed);
    for item in 1..=3 {
        sched.act_as(OUTSIDE).push(item, Some(0)).unwrap();
    }
    // Task 0 yields: its processor re-queues it; then serves the lanes.
    sched.act_as(0).push_local(0, 0, Priority::Normal).unwrap();
    let order: Vec<u32> = (0..4).map(|_| sched.next(0).unwrap()).collect();
    assert_eq!(order, [1, 2, 3, 0], "the yielding task ran again first");
}

/// Two tasks that yield in turn on a processor that reuses one clock
/// reading: each re-queue is stamped above the other task's, queued an
/// iteration before (the clock goes up every iteration), so neither runs
/// twice in a row whichever lanes they alternate between.
#[test]
fn tasks_yielding_in_turn_alternate_while_the_clock_reading_is_reused() {
    let sched = by_hand_with(false, 1, 1_000);
    sched.host.now.store(10, Ordering::Relaxed);
    sched.act_as(0);
    sched.push_local(0, 1, Priority::Normal).unwrap();
    sched.push_local(0, 2, Priority::Normal).unwrap();
    let mut order = Vec::new();
    for _ in 0..6 {
        let task = sched.next(0).unwrap();
        order.push(task);
        // The task yields: its processor re-queues it after the poll.
        sched.push_local(0, task, Priority::Normal).unwrap();
    }
    assert_eq!(
        order,
        [1, 2, 1, 2, 1, 2],
        "a yielding task ran twice in a row"
    );
}

#[test]
fn an_item_pushed_is_handed_out_once_and_a_closed_scheduler_hands_out_nothing() {
    let sched = Scheduler::new(Config::new(1), CountingHost(AtomicU64::new(0))).unwrap();
    sched.push(1, None).unwrap();
    assert_eq!(sched.next(0), Some(1));
    sched.close();
    assert_eq!(sched.next(0), None);
    assert_eq!(sched.push(2, None), Err(2));
}
