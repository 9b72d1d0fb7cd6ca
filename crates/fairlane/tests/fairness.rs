//! Fairness: the transfer scenario (design notes §4) and yield fairness.
//!
//! Transfer: 20 tasks on 2 processors. A leader bumps an epoch and then
//! busy-waits, without yielding, until each of the 19 others has acknowledged
//! the new epoch; then it names a random other task the next leader. The
//! processor running the leader is stuck for the whole transfer, so the tasks
//! queued on its lanes are only acknowledged if the other processor takes
//! them over. Work-stealing schedulers that steal only when idle starve here
//! (the other processor always has its own yielding tasks); fairlane's
//! age-based helping must not. Each acknowledgement's wait, from the bump to
//! the acknowledgement, is measured; one over a second fails the test. That
//! bound is a behaviour guard, generous by design: it is starvation, not
//! speed, that it catches.

mod common;

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use common::{runtime, serial, with_deadline, Rng, DEADLINE};

const TASKS: usize = 20;
const TRANSFERS: u64 = 1_000;
/// The longest an acknowledgement may wait.
const ACK_LIMIT: Duration = Duration::from_secs(1);
/// A leader that has waited this long gives up, so that starvation fails the
/// test with a report instead of spinning until the deadline.
const LEADER_GIVES_UP: Duration = Duration::from_secs(10);
const NO_LEADER: usize = usize::MAX;

struct Transfer {
    epoch: AtomicU64,
    /// When the current epoch was bumped, in nanoseconds since `base`.
    bumped_at: AtomicU64,
    acks: AtomicUsize,
    next_leader: AtomicUsize,
    transfers: AtomicU64,
    stop: AtomicBool,
    base: Instant,
    /// Longest acknowledgement wait seen, in nanoseconds.
    max_wait: AtomicU64,
    /// Acknowledgements that waited longer than `ACK_LIMIT`.
    late_acks: AtomicU64,
    /// Set when a leader gave up waiting.
    starved: Mutex<Option<String>>,
    /// Parking variant: where each parked task leaves its waker.
    slots: Vec<Mutex<Option<Waker>>>,
}

impl Transfer {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            epoch: AtomicU64::new(0),
            bumped_at: AtomicU64::new(0),
            acks: AtomicUsize::new(0),
            next_leader: AtomicUsize::new(0),
            transfers: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            base: Instant::now(),
            max_wait: AtomicU64::new(0),
            late_acks: AtomicU64::new(0),
            starved: Mutex::new(None),
            slots: (0..TASKS).map(|_| Mutex::new(None)).collect(),
        })
    }

    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn wake_slot(&self, i: usize) {
        let waker = self.slots[i].lock().unwrap().take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Acknowledges epoch `e` (which this task has just seen), measuring how
    /// long the acknowledgement took since the bump.
    fn acknowledge(&self, seen: &mut u64, e: u64) {
        // `bumped_at` belongs to `e`: the next bump needs our acknowledgement.
        let waited = self
            .now_ns()
            .saturating_sub(self.bumped_at.load(Ordering::Acquire));
        self.max_wait.fetch_max(waited, Ordering::Relaxed);
        if waited > ACK_LIMIT.as_nanos() as u64 {
            self.late_acks.fetch_add(1, Ordering::Relaxed);
        }
        *seen = e;
        self.acks.fetch_add(1, Ordering::AcqRel);
    }

    /// The leader's turn: bump the epoch, (wake the others,) spin without
    /// yielding until all have acknowledged, then hand over.
    fn lead(&self, me: usize, seen: &mut u64, rng: &mut Rng, wake_others: bool) {
        self.acks.store(0, Ordering::SeqCst);
        self.bumped_at.store(self.now_ns(), Ordering::SeqCst);
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
            if spins % 1024 == 0 && started.elapsed() > LEADER_GIVES_UP {
                *self.starved.lock().unwrap() = Some(format!(
                    "leader {me} of epoch {e} waited {LEADER_GIVES_UP:?} for acknowledgements: \
                     {} of {}",
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
            "{} transfers, epoch {}, acks {}, longest acknowledgement wait {:?}, {} late",
            self.transfers.load(Ordering::SeqCst),
            self.epoch.load(Ordering::SeqCst),
            self.acks.load(Ordering::SeqCst),
            Duration::from_nanos(self.max_wait.load(Ordering::SeqCst)),
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

fn transfer(parking: bool) {
    let _serial = serial();
    let t = Transfer::new();
    let watched = t.clone();
    with_deadline("transfer", DEADLINE, move || watched.report(), {
        let t = t.clone();
        move || {
            let rt = runtime(2);
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
    eprintln!("transfer (parking: {parking}): {}", t.report());
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
        "an acknowledgement waited more than {ACK_LIMIT:?}: {}",
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
/// been counted in all, the most-polled task may have fewer than twice the
/// polls of the least-polled one. Counting starts once every task exists.
fn yield_fairness_once(
    rt: &fairlane::Runtime,
    spawn_from: SpawnFrom,
    total: u64,
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
    if min > 0 && max < 2 * min {
        Ok(())
    } else {
        Err(format!(
            "poll counts of yielding tasks differ by 2x or more (max {max}, min {min}): \
             {counts:?}"
        ))
    }
}

/// Runs the yield-fairness scenario `trials` times, each on a fresh runtime
/// (where tasks land differs from run to run), and fails on the first unfair
/// one.
fn yield_fairness(processors: usize, lanes: usize, spawn_from: SpawnFrom, trials: usize) {
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
            if let Err(e) = yield_fairness_once(&rt, spawn_from, total) {
                panic!(
                    "{processors} processor(s), {lanes} lane(s) each, spawned from \
                         {spawn_from:?}, trial {trial}: {e}"
                );
            }
        }
    });
}

// A processor serves its own lanes oldest head first. (An earlier version
// served them round-robin while pushing round-robin: a yielded task could go
// straight back to its own lane forever, and the lanes' lengths then set the
// poll rates, up to 14/6 with 20 tasks. These tests caught it.)
#[test]
fn yield_fairness_1_processor() {
    yield_fairness(1, 2, SpawnFrom::BlockOn, 20);
}

// With 2 processors about one trial in 60 has a ratio over 2 (up to 2.4),
// so a 10-trial run fails about one time in six: probably the same lane
// lock per processor, blurred by tasks moving between processors.
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
