//! Exactly once: every wake of a parked task leads to exactly one poll, and
//! no task is polled without a wake.
//!
//! Each target task follows a strict protocol with a per-task state word:
//! it stores its waker, publishes `PARKED` and returns `Pending`. A waker
//! (another task on a processor, or a plain thread outside the runtime) may
//! wake it only after winning the CAS `PARKED -> WOKEN`, and counts that wake.
//! A poll swaps the state to `RUNNING` and must find `WOKEN` (or `INIT` on its
//! first poll): anything else is a poll without a wake. So with the wakes
//! counted on one side and the polls on the other, `polls == wakes + 1` for
//! every task, zero spurious polls and no concurrent poll is exactly "one poll
//! per wake"; a lost wake hangs the task, which the deadline turns into a
//! failure.

// Waking through a clone (`wake`, which consumes the waker) is a different
// path in the task cell than `wake_by_ref`; the tests use both on purpose.
#![allow(clippy::waker_clone_wake)]

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread;

use common::{runtime, serial, with_deadline, Rng, DEADLINE};

const INIT: u8 = 0;
const RUNNING: u8 = 1;
const PARKED: u8 = 2;
const WOKEN: u8 = 3;
const DONE: u8 = 4;

#[derive(Default)]
struct Target {
    state: AtomicU8,
    waker: Mutex<Option<Waker>>,
    in_poll: AtomicBool,
    polls: AtomicU64,
    /// Polls that consumed a wake (found `WOKEN`).
    consumed: AtomicU64,
    /// Polls that found no wake to consume.
    spurious: AtomicU64,
    /// Polls that began while another poll of the same task was running.
    concurrent: AtomicU64,
    /// Wakes sent: successful `PARKED -> WOKEN` transitions.
    wakes_sent: AtomicU64,
}

struct Shared {
    targets: Vec<Target>,
    finish: AtomicBool,
    /// Wakes the sender tasks still have to send.
    task_budget: AtomicI64,
    /// Wakes the sender threads still have to send.
    thread_budget: AtomicI64,
    from_tasks: AtomicU64,
    from_threads: AtomicU64,
}

impl Shared {
    /// Wakes target `i` if it is parked; returns whether it did.
    fn try_wake(&self, i: usize, by_value: bool) -> bool {
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

    fn totals(&self) -> String {
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

/// The target task: parks after every poll until `finish` is set.
struct Parked {
    shared: Arc<Shared>,
    i: usize,
}

impl Future for Parked {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let t = &self.shared.targets[self.i];
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
        if self.shared.finish.load(Ordering::Acquire) {
            t.state.store(DONE, Ordering::Release);
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

/// `targets` tasks; `task_wakes` wakes sent by tasks on the processors and
/// `thread_wakes` by threads outside the runtime.
fn exactly_once(processors: usize, targets: usize, task_wakes: i64, thread_wakes: i64) {
    let _serial = serial();
    let shared = Arc::new(Shared {
        targets: (0..targets).map(|_| Target::default()).collect(),
        finish: AtomicBool::new(false),
        task_budget: AtomicI64::new(task_wakes),
        thread_budget: AtomicI64::new(thread_wakes),
        from_tasks: AtomicU64::new(0),
        from_threads: AtomicU64::new(0),
    });
    let s = shared.clone();
    with_deadline(
        &format!("exactly_once_{processors}"),
        DEADLINE,
        move || s.totals(),
        {
            let shared = shared.clone();
            move || run_exactly_once(processors, shared)
        },
    );

    let mut wakes_total = 0;
    for (i, t) in shared.targets.iter().enumerate() {
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
    }
    let from_tasks = shared.from_tasks.load(Ordering::Relaxed);
    let from_threads = shared.from_threads.load(Ordering::Relaxed);
    assert!(
        from_tasks >= task_wakes as u64 && from_threads >= thread_wakes as u64,
        "budgets not spent: {}",
        shared.totals()
    );
    // The finishing wakes come on top.
    assert!(wakes_total >= from_tasks + from_threads);
}

fn run_exactly_once(processors: usize, shared: Arc<Shared>) {
    const SENDER_TASKS: usize = 4;
    const SENDER_THREADS: usize = 2;
    const BATCH: usize = 32;
    let n = shared.targets.len();
    let rt = runtime(processors);
    let targets: Vec<_> = (0..n)
        .map(|i| {
            rt.spawn(Parked {
                shared: shared.clone(),
                i,
            })
        })
        .collect();

    // Wakers on the processors.
    let sender_tasks: Vec<_> = (0..SENDER_TASKS)
        .map(|k| {
            let shared = shared.clone();
            rt.spawn(async move {
                let mut rng = Rng::new(k as u64 + 1);
                while shared.task_budget.load(Ordering::Relaxed) > 0 {
                    for _ in 0..BATCH {
                        let by_value = rng.next_u64() & 1 == 0;
                        if shared.try_wake(rng.below(n), by_value) {
                            shared.task_budget.fetch_sub(1, Ordering::Relaxed);
                            shared.from_tasks.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    fairlane::yield_now().await;
                }
            })
        })
        .collect();

    // Wakers outside the runtime.
    let sender_threads: Vec<_> = (0..SENDER_THREADS)
        .map(|k| {
            let shared = shared.clone();
            thread::spawn(move || {
                let mut rng = Rng::new(1000 + k as u64);
                while shared.thread_budget.load(Ordering::Relaxed) > 0 {
                    for _ in 0..BATCH {
                        let by_value = rng.next_u64() & 1 == 0;
                        if shared.try_wake(rng.below(n), by_value) {
                            shared.thread_budget.fetch_sub(1, Ordering::Relaxed);
                            shared.from_threads.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();

    for t in sender_threads {
        t.join().unwrap();
    }
    rt.block_on(async {
        for t in sender_tasks {
            t.await.unwrap();
        }
    });

    // Let every target finish: one last wake for each parked one; those in
    // flight see `finish` on the poll they are about to get.
    shared.finish.store(true, Ordering::SeqCst);
    for i in 0..n {
        loop {
            match shared.targets[i].state.load(Ordering::Acquire) {
                DONE => break,
                PARKED if shared.try_wake(i, i % 2 == 0) => break,
                _ => thread::yield_now(),
            }
        }
    }
    rt.block_on(async {
        for t in targets {
            t.await.unwrap();
        }
    });
}

// 3 million wakes in all three; a few seconds in a debug build on 2 cores.

#[test]
fn exactly_once_1_processor() {
    exactly_once(1, 2000, 600_000, 400_000);
}

#[test]
fn exactly_once_2_processors() {
    exactly_once(2, 2000, 600_000, 400_000);
}

#[test]
fn exactly_once_4_processors() {
    exactly_once(4, 4000, 600_000, 400_000);
}

/// A queued task is queued once however often it is woken: with one
/// processor busy running the waker, 100 parked tasks each get woken ten
/// times (by reference and by value, from clones); each must then be polled
/// exactly once more.
#[test]
fn repeated_wakes_of_a_queued_task_coalesce() {
    const TASKS: usize = 100;
    let rt = runtime(1);
    let wakers: Arc<Mutex<Vec<Option<Waker>>>> = Arc::new(Mutex::new(vec![None; TASKS]));
    let parked = Arc::new(AtomicUsize::new(0));
    let polls: Arc<Vec<AtomicU64>> = Arc::new((0..TASKS).map(|_| AtomicU64::new(0)).collect());
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let (wakers, parked, polls) = (wakers.clone(), parked.clone(), polls.clone());
            let mut first = true;
            rt.spawn(std::future::poll_fn(move |cx| {
                polls[i].fetch_add(1, Ordering::SeqCst);
                if first {
                    first = false;
                    wakers.lock().unwrap()[i] = Some(cx.waker().clone());
                    parked.fetch_add(1, Ordering::SeqCst);
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            }))
        })
        .collect();
    while parked.load(Ordering::SeqCst) < TASKS {
        thread::yield_now();
    }
    // The single processor runs this task while the wakes happen, so every
    // woken target stays queued until the task returns.
    let w = wakers.clone();
    rt.block_on(rt.spawn(async move {
        let wakers: Vec<Waker> = w.lock().unwrap().iter().flatten().cloned().collect();
        for _ in 0..5 {
            for waker in &wakers {
                waker.wake_by_ref();
                waker.clone().wake();
            }
        }
    }))
    .unwrap();
    rt.block_on(async {
        for t in tasks {
            t.await.unwrap();
        }
    });
    for (i, p) in polls.iter().enumerate() {
        assert_eq!(
            p.load(Ordering::SeqCst),
            2,
            "task {i}: ten wakes while queued must give one poll"
        );
    }
}
