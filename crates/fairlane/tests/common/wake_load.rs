//! Two workloads shared by the foundation tests and the resizing tests.
//!
//! - [`WakeLoad`]: parked target tasks woken at random by tasks on the
//!   processors and by outside threads, with every wake and poll counted on
//!   both sides, so a lost, duplicated or concurrent poll shows in the counts
//!   ([`WakeLoad::assert_exactly_once`]).
//! - [`PingPong`]: two sides passing a ball through two signals, so a lost
//!   wake-up hangs and a skipped or repeated step fails an assertion.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;

use fairlane::{JoinHandle, Runtime};

use super::{Rng, Signal};

const INIT: u8 = 0;
const RUNNING: u8 = 1;
pub const PARKED: u8 = 2;
const WOKEN: u8 = 3;
pub const DONE: u8 = 4;

#[derive(Default)]
pub struct Target {
    pub state: AtomicU8,
    waker: Mutex<Option<Waker>>,
    in_poll: AtomicBool,
    pub polls: AtomicU64,
    /// Polls that consumed a wake (found `WOKEN`).
    pub consumed: AtomicU64,
    /// Polls that found no wake to consume.
    pub spurious: AtomicU64,
    /// Polls that began while another poll of the same task was running.
    pub concurrent: AtomicU64,
    /// Wakes sent: successful `PARKED -> WOKEN` transitions.
    pub wakes_sent: AtomicU64,
    /// Times the task completed.
    pub completions: AtomicU64,
}

pub struct WakeLoad {
    pub targets: Vec<Target>,
    finish: AtomicBool,
    /// Wakes the sender tasks still have to send.
    task_budget: AtomicI64,
    /// Wakes the sender threads still have to send.
    thread_budget: AtomicI64,
    from_tasks: AtomicU64,
    from_threads: AtomicU64,
    task_wakes: i64,
    thread_wakes: i64,
}

/// The tasks and threads of a running [`WakeLoad`].
pub struct Running {
    targets: Vec<JoinHandle<()>>,
    sender_tasks: Vec<JoinHandle<()>>,
    sender_threads: Vec<thread::JoinHandle<()>>,
}

const SENDER_TASKS: usize = 4;
const SENDER_THREADS: usize = 2;
const BATCH: usize = 32;

impl WakeLoad {
    /// `targets` tasks; `task_wakes` wakes to be sent by tasks on the
    /// processors and `thread_wakes` by threads outside the runtime.
    pub fn new(targets: usize, task_wakes: i64, thread_wakes: i64) -> Arc<Self> {
        Arc::new(Self {
            targets: (0..targets).map(|_| Target::default()).collect(),
            finish: AtomicBool::new(false),
            task_budget: AtomicI64::new(task_wakes),
            thread_budget: AtomicI64::new(thread_wakes),
            from_tasks: AtomicU64::new(0),
            from_threads: AtomicU64::new(0),
            task_wakes,
            thread_wakes,
        })
    }

    /// Wakes target `i` if it is parked; returns whether it did.
    pub fn try_wake(&self, i: usize, by_value: bool) -> bool {
        let t = &self.targets[i];
        if t.state
            .compare_exchange(PARKED, WOKEN, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        t.wakes_sent.fetch_add(1, Ordering::Relaxed);
        let waker = t
            .waker
            .lock()
            .unwrap()
            .clone()
            .expect("a parked target has stored its waker");
        if by_value {
            waker.wake();
        } else {
            waker.wake_by_ref();
        }
        true
    }

    /// Spawns the targets and the sender tasks on `rt`, and starts the
    /// sender threads (random choices seeded with `seed`).
    pub fn start(self: &Arc<Self>, rt: &Runtime, seed: u64) -> Running {
        let n = self.targets.len();
        let targets = (0..n)
            .map(|i| {
                rt.spawn(Parked {
                    load: self.clone(),
                    i,
                })
            })
            .collect();
        let sender_tasks = (0..SENDER_TASKS)
            .map(|k| {
                let load = self.clone();
                rt.spawn(async move {
                    let mut rng = Rng::new(seed + k as u64 + 1);
                    while load.task_budget.load(Ordering::Relaxed) > 0 {
                        load.send_batch(&mut rng, &load.task_budget, &load.from_tasks);
                        fairlane::yield_now().await;
                    }
                })
            })
            .collect();
        let sender_threads = (0..SENDER_THREADS)
            .map(|k| {
                let load = self.clone();
                thread::spawn(move || {
                    let mut rng = Rng::new(seed + 1000 + k as u64);
                    while load.thread_budget.load(Ordering::Relaxed) > 0 {
                        load.send_batch(&mut rng, &load.thread_budget, &load.from_threads);
                    }
                })
            })
            .collect();
        Running {
            targets,
            sender_tasks,
            sender_threads,
        }
    }

    fn send_batch(&self, rng: &mut Rng, budget: &AtomicI64, sent: &AtomicU64) {
        for _ in 0..BATCH {
            let by_value = rng.next_u64() & 1 == 0;
            if self.try_wake(rng.below(self.targets.len()), by_value) {
                budget.fetch_sub(1, Ordering::Relaxed);
                sent.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Waits for the senders to spend their budgets, then lets every target
    /// finish (one last wake for each parked one; those in flight see
    /// `finish` on the poll they are about to get) and waits for them.
    pub fn finish(&self, rt: &Runtime, running: Running) {
        for t in running.sender_threads {
            t.join().unwrap();
        }
        rt.block_on(async {
            for t in running.sender_tasks {
                t.await.unwrap();
            }
        });
        self.finish.store(true, Ordering::SeqCst);
        for i in 0..self.targets.len() {
            loop {
                match self.targets[i].state.load(Ordering::Acquire) {
                    DONE => break,
                    PARKED if self.try_wake(i, i % 2 == 0) => break,
                    _ => thread::yield_now(),
                }
            }
        }
        rt.block_on(async {
            for t in running.targets {
                t.await.unwrap();
            }
        });
    }

    /// Every target: never polled concurrently with itself, never polled
    /// without a wake, one poll per wake plus the first, done exactly once;
    /// and both budgets spent.
    pub fn assert_exactly_once(&self) {
        let mut wakes_total = 0;
        for (i, t) in self.targets.iter().enumerate() {
            let sent = t.wakes_sent.load(Ordering::Relaxed);
            let polls = t.polls.load(Ordering::Relaxed);
            wakes_total += sent;
            assert_eq!(
                t.concurrent.load(Ordering::Relaxed),
                0,
                "target {i} was polled concurrently with itself"
            );
            assert_eq!(
                t.spurious.load(Ordering::Relaxed),
                0,
                "target {i} was polled without a wake ({sent} wakes, {polls} polls)"
            );
            assert_eq!(
                t.consumed.load(Ordering::Relaxed),
                sent,
                "target {i}: wakes sent vs wakes consumed by a poll"
            );
            assert_eq!(
                polls,
                sent + 1,
                "target {i}: every wake must lead to exactly one poll (plus the first poll)"
            );
            assert_eq!(t.state.load(Ordering::Relaxed), DONE, "target {i}");
            assert_eq!(
                t.completions.load(Ordering::Relaxed),
                1,
                "target {i} completions"
            );
        }
        let from_tasks = self.from_tasks.load(Ordering::Relaxed);
        let from_threads = self.from_threads.load(Ordering::Relaxed);
        assert!(
            from_tasks >= self.task_wakes as u64 && from_threads >= self.thread_wakes as u64,
            "budgets not spent: {}",
            self.totals()
        );
        // The finishing wakes come on top.
        assert!(wakes_total >= from_tasks + from_threads);
    }

    pub fn totals(&self) -> String {
        let sum = |f: fn(&Target) -> &AtomicU64| -> u64 {
            self.targets
                .iter()
                .map(|t| f(t).load(Ordering::Relaxed))
                .sum()
        };
        format!(
            "wakes {} (from tasks {}, from threads {}), polls {}, spurious {}, concurrent {}, \
             budget left {} + {}",
            sum(|t| &t.wakes_sent),
            self.from_tasks.load(Ordering::Relaxed),
            self.from_threads.load(Ordering::Relaxed),
            sum(|t| &t.polls),
            sum(|t| &t.spurious),
            sum(|t| &t.concurrent),
            self.task_budget.load(Ordering::Relaxed),
            self.thread_budget.load(Ordering::Relaxed),
        )
    }
}

/// A target task: parks after every poll until `finish` is set.
struct Parked {
    load: Arc<WakeLoad>,
    i: usize,
}

impl Future for Parked {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let t = &self.load.targets[self.i];
        if t.in_poll.swap(true, Ordering::AcqRel) {
            t.concurrent.fetch_add(1, Ordering::Relaxed);
        }
        let first = t.polls.fetch_add(1, Ordering::Relaxed) == 0;
        match t.state.swap(RUNNING, Ordering::AcqRel) {
            WOKEN => {
                t.consumed.fetch_add(1, Ordering::Relaxed);
            }
            INIT if first => {}
            _ => {
                t.spurious.fetch_add(1, Ordering::Relaxed);
            }
        }
        if self.load.finish.load(Ordering::Acquire) {
            t.state.store(DONE, Ordering::Release);
            t.completions.fetch_add(1, Ordering::Relaxed);
            t.in_poll.store(false, Ordering::Release);
            return Poll::Ready(());
        }
        {
            let mut slot = t.waker.lock().unwrap();
            if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *slot = Some(cx.waker().clone());
            }
        }
        // From here on a waker may wake us, possibly before this poll returns:
        // the runtime must then re-queue us once, after the poll.
        t.state.store(PARKED, Ordering::Release);
        t.in_poll.store(false, Ordering::Release);
        Poll::Pending
    }
}

/// Two signals and a ball: side A may move the ball only when it is even,
/// side B only when it is odd, so a skipped or repeated step is caught too.
pub struct PingPong {
    to_a: Arc<Signal>,
    to_b: Arc<Signal>,
    ball: AtomicU64,
}

impl PingPong {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            to_a: Signal::new(),
            to_b: Signal::new(),
            ball: AtomicU64::new(0),
        })
    }

    /// A's step `i`: expects `2i`, passes `2i + 1` to B.
    pub fn a_hits(&self, i: u64) {
        assert_eq!(self.ball.load(Ordering::Acquire), 2 * i, "A's turn {i}");
        self.ball.store(2 * i + 1, Ordering::Release);
        self.to_b.notify();
    }

    /// B's step `i`: expects `2i + 1`, passes `2i + 2` to A.
    pub fn b_hits(&self, i: u64) {
        assert_eq!(self.ball.load(Ordering::Acquire), 2 * i + 1, "B's turn {i}");
        self.ball.store(2 * i + 2, Ordering::Release);
        self.to_a.notify();
    }

    /// Where the ball is now.
    pub fn ball(&self) -> u64 {
        self.ball.load(Ordering::Acquire)
    }

    pub fn progress(self: &Arc<Self>) -> impl Fn() -> String {
        let me = self.clone();
        move || format!("ball at {}", me.ball.load(Ordering::Relaxed))
    }

    /// Side A of `n` round trips, as a task.
    pub async fn side_a(self: Arc<Self>, n: u64) {
        for i in 0..n {
            self.a_hits(i);
            self.to_a.wait().await;
        }
    }

    /// Side B of `n` round trips, as a task.
    pub async fn side_b(self: Arc<Self>, n: u64) {
        for i in 0..n {
            self.to_b.wait().await;
            self.b_hits(i);
        }
    }

    /// Side B on a plain thread.
    pub fn side_b_blocking(&self, n: u64) {
        for i in 0..n {
            self.to_b.wait_blocking();
            self.b_hits(i);
        }
    }
}

/// What [`run_chains`] reports while it runs: where every ball is.
pub fn chains_progress(pairs: &[Arc<PingPong>], steps: u64) -> impl Fn() -> String {
    let watched = pairs.to_vec();
    move || {
        let balls: Vec<u64> = watched.iter().map(|p| p.ball()).collect();
        format!("balls at {balls:?} of {}", 2 * steps)
    }
}

/// Runs `steps` round trips of every pair on `rt`: side A always as a task,
/// side B as a task for the first `task_pairs` pairs and on a plain thread
/// for the others; then checks every ball arrived.
pub fn run_chains(rt: &Runtime, pairs: &[Arc<PingPong>], task_pairs: usize, steps: u64) {
    let mut tasks = Vec::new();
    let mut threads = Vec::new();
    for (k, pp) in pairs.iter().enumerate() {
        tasks.push(rt.spawn(pp.clone().side_a(steps)));
        if k < task_pairs {
            tasks.push(rt.spawn(pp.clone().side_b(steps)));
        } else {
            let pp = pp.clone();
            threads.push(thread::spawn(move || pp.side_b_blocking(steps)));
        }
    }
    rt.block_on(async {
        for t in tasks {
            t.await.unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
    for pp in pairs {
        assert_eq!(pp.ball(), 2 * steps);
    }
}
