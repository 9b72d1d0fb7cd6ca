//! Fairness: the transfer scenario and yield fairness.
//!
//! Transfer: 20 tasks on 2 processors. A leader bumps an epoch and then
//! busy-waits, without yielding, until each of the 19 others has acknowledged
//! the new epoch; then it names a random other task the next leader. The
//! processor running the leader is stuck for the whole transfer, so the tasks
//! queued on its lanes are only acknowledged if the other processor takes
//! them over. Work-stealing schedulers that steal only when idle starve here
//! (the other processor always has its own yielding tasks); fairlane's
//! age-based helping must not. Each acknowledgement's wait, from the bump to
//! the acknowledgement, is counted in polls of the other tasks (not in time:
//! a descheduled processor thread polls nothing and delays nothing); one
//! over `ACK_POLLS` fails the test.

mod common;

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use common::{serial, with_deadline, Rng, DEADLINE};

const TASKS: usize = 20;
const TRANSFERS: u64 = 1_000;
/// The most polls of the other tasks an acknowledgement may wait for. The
/// other processor helps the leader's lanes once their heads are twice as
/// old as its own, and draws a help target every `help_period` (8) pops, so
/// a queued task is helped after a few rounds of the other tasks; but ages
/// come from each processor's own clock (the TSC), which can be skewed
/// between cores, and polls are fast: a help that comes a fraction of a
/// millisecond late has waited thousands of polls. Hence a bound far above
/// what is seen (hundreds to a few thousand): it is starvation, where the
/// count grows without bound, that it catches, not speed. Unlike a clock, the
/// count does not move while the other processor's thread is descheduled.
const ACK_POLLS: u64 = 100_000;
/// A leader gives up once the other tasks have been polled this often since
/// its bump without every acknowledgement in: the other processor keeps
/// running its own tasks and leaves the leader's lanes to starve. Starvation
/// then fails the test with a report instead of spinning until the deadline.
const LEADER_GIVES_UP_POLLS: u64 = 4 * ACK_POLLS;
/// A leader also gives up after this long: if nothing is polled at all (the
/// other processor left asleep with tasks queued), no count moves, and only a
/// clock tells that from a slow machine. Generous: a hang, not slowness, is
/// what it catches.
const LEADER_GIVES_UP: Duration = Duration::from_secs(30);
const NO_LEADER: usize = usize::MAX;

struct Transfer {
    epoch: AtomicU64,
    /// Polls of the tasks that are not leading, so far.
    polls: AtomicU64,
    /// `polls` when the current epoch was bumped.
    bumped_at: AtomicU64,
    acks: AtomicUsize,
    next_leader: AtomicUsize,
    transfers: AtomicU64,
    stop: AtomicBool,
    /// Longest acknowledgement wait seen, in polls.
    max_wait: AtomicU64,
    /// Acknowledgements that waited longer than `ACK_POLLS`.
    late_acks: AtomicU64,
    /// Set when a leader gave up waiting.
    starved: Mutex<Option<String>>,
    /// Whether it gave up because of `LEADER_GIVES_UP_POLLS` (rather than
    /// `LEADER_GIVES_UP`).
    gave_up_by_count: AtomicBool,
    /// Parking variant: where each parked task leaves its waker.
    slots: Vec<Mutex<Option<Waker>>>,
}

impl Transfer {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: AtomicU64::new(0),
            polls: AtomicU64::new(0),
            bumped_at: AtomicU64::new(0),
            acks: AtomicUsize::new(0),
            next_leader: AtomicUsize::new(0),
            transfers: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            max_wait: AtomicU64::new(0),
            late_acks: AtomicU64::new(0),
            starved: Mutex::new(None),
            gave_up_by_count: AtomicBool::new(false),
            slots: (0..TASKS).map(|_| Mutex::new(None)).collect(),
        })
    }

    /// Counts one poll of a task that is not leading, as it ends (the task
    /// yields or parks).
    fn count_poll(&self) {
        self.polls.fetch_add(1, Ordering::Relaxed);
    }

    /// Polls of the other tasks since the current epoch's bump.
    fn polls_since_bump(&self) -> u64 {
        self.polls
            .load(Ordering::Relaxed)
            .saturating_sub(self.bumped_at.load(Ordering::Acquire))
    }

    fn wake_slot(&self, i: usize) {
        let waker = self.slots[i].lock().unwrap().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Acknowledges epoch `e` (which this task has just seen), counting how
    /// many polls of the others it waited since the bump.
    fn acknowledge(&self, seen: &mut u64, e: u64) {
        // `bumped_at` belongs to `e`: the next bump needs our acknowledgement.
        let waited = self.polls_since_bump();
        self.max_wait.fetch_max(waited, Ordering::Relaxed);
        if waited > ACK_POLLS {
            self.late_acks.fetch_add(1, Ordering::Relaxed);
        }
        *seen = e;
        self.acks.fetch_add(1, Ordering::AcqRel);
    }

    /// The leader's turn: bump the epoch, (wake the others,) spin without
    /// yielding until all have acknowledged, then hand over.
    fn lead(&self, me: usize, seen: &mut u64, rng: &mut Rng, wake_others: bool) {
        self.acks.store(0, Ordering::SeqCst);
        self.bumped_at
            .store(self.polls.load(Ordering::SeqCst), Ordering::SeqCst);
        let e = self.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        *seen = e;
        if wake_others {
            for i in (0..TASKS).filter(|&i| i != me) {
                self.wake_slot(i);
            }
        }
        let started = Instant::now();
        let mut spins = 0u64;
        while self.acks.load(Ordering::Acquire) < TASKS - 1 {
            std::hint::spin_loop();
            spins += 1;
            let by_count = || self.polls_since_bump() > LEADER_GIVES_UP_POLLS;
            if spins % 1024 == 0 && (by_count() || started.elapsed() > LEADER_GIVES_UP) {
                self.gave_up_by_count.store(by_count(), Ordering::SeqCst);
                *self.starved.lock().unwrap() = Some(format!(
                    "leader {me} of epoch {e} waited {} polls of the others and {:?} for \
                     acknowledgements: {} of {}",
                    self.polls_since_bump(),
                    started.elapsed(),
                    self.acks.load(Ordering::SeqCst),
                    TASKS - 1
                ));
                self.finish();
                return;
            }
        }
        if self.transfers.fetch_add(1, Ordering::SeqCst) + 1 == TRANSFERS {
            self.finish();
        } else {
            let next = (me + 1 + rng.below(TASKS - 1)) % TASKS;
            self.next_leader.store(next, Ordering::SeqCst);
            if wake_others {
                self.wake_slot(next);
            }
        }
    }

    fn finish(&self) {
        self.stop.store(true, Ordering::SeqCst);
        for i in 0..TASKS {
            self.wake_slot(i);
        }
    }

    /// Whether task `me` was just named leader (and takes the lead).
    fn take_lead(&self, me: usize) -> bool {
        self.next_leader
            .compare_exchange(me, NO_LEADER, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    fn report(&self) -> String {
        format!(
            "{} transfers, epoch {}, acks {}, longest acknowledgement wait {} polls, {} late",
            self.transfers.load(Ordering::SeqCst),
            self.epoch.load(Ordering::SeqCst),
            self.acks.load(Ordering::SeqCst),
            self.max_wait.load(Ordering::SeqCst),
            self.late_acks.load(Ordering::SeqCst),
        )
    }
}

/// Others loop `yield_now` -> check epoch -> acknowledge.
async fn yielding_task(t: Arc<Transfer>, me: usize) {
    let mut rng = Rng::new(me as u64 + 7);
    let mut seen = 0;
    while !t.stop.load(Ordering::Acquire) {
        if t.take_lead(me) {
            t.lead(me, &mut seen, &mut rng, false);
            continue;
        }
        let e = t.epoch.load(Ordering::Acquire);
        if e > seen {
            t.acknowledge(&mut seen, e);
        }
        t.count_poll();
        fairlane::yield_now().await;
    }
}

/// Others park until the leader wakes them, then acknowledge.
async fn parking_task(t: Arc<Transfer>, me: usize) {
    let mut rng = Rng::new(me as u64 + 7);
    let mut seen = 0;
    while !t.stop.load(Ordering::Acquire) {
        if t.take_lead(me) {
            t.lead(me, &mut seen, &mut rng, true);
            continue;
        }
        let e = t.epoch.load(Ordering::Acquire);
        if e > seen {
            t.acknowledge(&mut seen, e);
            continue;
        }
        // Park: leave the waker, then look again. The leader changes the
        // state before it takes the waker (both under the slot's lock), so
        // either it finds our waker or we see the change.
        t.count_poll();
        poll_fn(|cx| {
            *t.slots[me].lock().unwrap() = Some(cx.waker().clone());
            if t.stop.load(Ordering::SeqCst)
                || t.next_leader.load(Ordering::SeqCst) == me
                || t.epoch.load(Ordering::SeqCst) > seen
            {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}

/// Runs the transfer scenario on 2 processors with `help_period` (the
/// default where `None`) and returns its record.
fn run_transfer(parking: bool, help_period: Option<u32>) -> Arc<Transfer> {
    let _serial = serial();
    let t = Transfer::new();
    let watched = t.clone();
    with_deadline("transfer", DEADLINE, move || watched.report(), {
        let t = t.clone();
        move || {
            let mut builder = fairlane::Runtime::builder();
            builder.processors(2);
            if let Some(pops) = help_period {
                builder.help_period(pops);
            }
            let rt = builder.build().expect("build runtime");
            let tasks: Vec<_> = (0..TASKS)
                .map(|me| {
                    if parking {
                        rt.spawn(parking_task(t.clone(), me))
                    } else {
                        rt.spawn(yielding_task(t.clone(), me))
                    }
                })
                .collect();
            rt.block_on(async {
                for task in tasks {
                    task.await.unwrap();
                }
            });
        }
    });
    eprintln!(
        "transfer (parking: {parking}, help period {help_period:?}): {}",
        t.report()
    );
    t
}

fn transfer(parking: bool) {
    let t = run_transfer(parking, None);
    if let Some(starved) = t.starved.lock().unwrap().take() {
        panic!("starvation: {starved}; {}", t.report());
    }
    assert_eq!(
        t.transfers.load(Ordering::SeqCst),
        TRANSFERS,
        "{}",
        t.report()
    );
    assert_eq!(
        t.late_acks.load(Ordering::SeqCst),
        0,
        "an acknowledgement waited more than {ACK_POLLS} polls of the others: {}",
        t.report()
    );
}

#[test]
fn transfer_with_yielding_tasks() {
    transfer(false);
}

#[test]
fn transfer_with_parked_tasks() {
    transfer(true);
}

/// The yielding scenario's counts do see starvation: with helping disabled,
/// the other processor always has tasks of its own, never steals, and the
/// tasks queued behind the leader wait until the leader gives up, by the
/// count of polls, not the clock.
#[test]
fn transfer_with_yielding_tasks_starves_without_helping() {
    let t = run_transfer(false, Some(0));
    let starved = t.starved.lock().unwrap().take();
    assert!(
        starved.is_some(),
        "without helping no leader gave up: {}",
        t.report()
    );
    assert!(
        t.gave_up_by_count.load(Ordering::SeqCst),
        "the leader gave up by the clock, not by the count of polls: {starved:?}"
    );
    assert!(t.transfers.load(Ordering::SeqCst) < TRANSFERS);
}

/// How the yielding tasks are spawned.
#[derive(Clone, Copy, Debug)]
enum SpawnFrom {
    /// From the future given to `block_on`: outside the processors, so each
    /// task lands on a processor chosen round-robin, on the lane picked by
    /// the clock's low bits.
    BlockOn,
    /// From a task: all start on that task's processor.
    Task,
}

/// Yield fairness: `TASKS` tasks loop on `yield_now`; once `total` polls have
/// been counted in all, the most-polled task may have fewer than `bound`
/// times the polls of the least-polled one. Counting starts once every task
/// exists.
fn yield_fairness_once(
    rt: &fairlane::Runtime,
    spawn_from: SpawnFrom,
    total: u64,
    bound: u64,
) -> Result<(), String> {
    let go = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let counted = Arc::new(AtomicU64::new(0));
    let polls: Arc<Vec<AtomicU64>> = Arc::new((0..TASKS).map(|_| AtomicU64::new(0)).collect());
    let spawn_all = {
        let (go, stop, counted, polls) = (go.clone(), stop.clone(), counted.clone(), polls.clone());
        move || -> Vec<fairlane::JoinHandle<()>> {
            (0..TASKS)
                .map(|i| {
                    let (go, stop, counted, polls) =
                        (go.clone(), stop.clone(), counted.clone(), polls.clone());
                    fairlane::spawn(async move {
                        while !go.load(Ordering::Acquire) {
                            fairlane::yield_now().await;
                        }
                        while !stop.load(Ordering::Relaxed) {
                            polls[i].fetch_add(1, Ordering::Relaxed);
                            if counted.fetch_add(1, Ordering::Relaxed) + 1 >= total {
                                stop.store(true, Ordering::Relaxed);
                            }
                            fairlane::yield_now().await;
                        }
                    })
                })
                .collect()
        }
    };
    let handles = match spawn_from {
        SpawnFrom::BlockOn => rt.block_on(async move { spawn_all() }),
        SpawnFrom::Task => rt.block_on(rt.spawn(async move { spawn_all() })).unwrap(),
    };
    go.store(true, Ordering::Release);
    rt.block_on(async {
        for h in handles {
            h.await.unwrap();
        }
    });
    let counts: Vec<u64> = polls.iter().map(|p| p.load(Ordering::SeqCst)).collect();
    let max = *counts.iter().max().unwrap();
    let min = *counts.iter().min().unwrap();
    if min > 0 && max < bound * min {
        Ok(())
    } else {
        Err(format!(
            "poll counts of yielding tasks differ by {bound}x or more (max {max}, min {min}): \
             {counts:?}"
        ))
    }
}

/// Runs the yield-fairness scenario `trials` times, each on a fresh runtime
/// (where tasks land differs from run to run), and fails on the first unfair
/// one.
fn yield_fairness(processors: usize, lanes: usize, spawn_from: SpawnFrom, trials: usize) {
    let bound = if processors == 1 { 2 } else { 3 };
    // Enough polls for start-up (tasks spread over the processors) to fade.
    let total = 10_000 * TASKS as u64;
    let _serial = serial();
    with_deadline("yield_fairness", DEADLINE, String::new, move || {
        for trial in 0..trials {
            let rt = fairlane::Runtime::builder()
                .processors(processors)
                .lanes_per_processor(lanes)
                .build()
                .unwrap();
            if let Err(e) = yield_fairness_once(&rt, spawn_from, total, bound) {
                panic!(
                    "{processors} processor(s), {lanes} lane(s) each, spawned from \
                         {spawn_from:?}, trial {trial}: {e}"
                );
            }
        }
    });
}

// A processor serves its own lanes oldest head first. Round-robin service
// with round-robin pushes would let a yielded task go straight back to its
// own lane, and the lanes' lengths would then set the poll rates: these
// tests fail that way.
#[test]
fn yield_fairness_1_processor() {
    yield_fairness(1, 2, SpawnFrom::BlockOn, 20);
}

// With 2 processors the bound is 3x, not 2x: while the operating system
// runs something else on one processor's core, that processor's tasks are
// served by the other processor's age rule, which takes a lane's head only
// once it is more than twice as old as its own, so their share of polls may
// fall to about half for a while; tasks moving between processors blur each
// processor's lane order further. A 2x bound fails now and then on a shared
// machine; starvation (a task polled far less) still fails 3x.
#[test]
fn yield_fairness_2_processors() {
    yield_fairness(2, 2, SpawnFrom::BlockOn, 10);
}

#[test]
fn yield_fairness_2_processors_spawned_from_a_task() {
    yield_fairness(2, 2, SpawnFrom::Task, 10);
}

/// Spawned from a task, the tasks alternate between the processor's two
/// lanes, so the lanes start equal and stay equal.
#[test]
fn yield_fairness_1_processor_spawned_from_a_task() {
    yield_fairness(1, 2, SpawnFrom::Task, 5);
}

/// One lane: a strict FIFO.
#[test]
fn yield_fairness_1_processor_1_lane() {
    yield_fairness(1, 1, SpawnFrom::BlockOn, 5);
}
