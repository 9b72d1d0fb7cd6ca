//! The wake slot: a task woken by the task running on a processor runs next
//! there, at most `wake_slot_budget` times in a row before the lanes are
//! served, and a processor stuck in a task that never yields does not keep
//! the task it woke. Counted in polls, never in time.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::{serial, with_deadline, Signal, DEADLINE};

fn one_processor(budget: u32) -> fairlane::Runtime {
    fairlane::Runtime::builder()
        .processors(1)
        .wake_slot_budget(budget)
        .build()
        .unwrap()
}

/// On one processor with ten yielding tasks queued, task `A` wakes task `B`:
/// returns how many polls of other tasks came between `A`'s poll and `B`'s.
fn polls_between_wake_and_run(budget: u32) -> usize {
    let rt = one_processor(budget);
    let log = Arc::new(Mutex::new(Vec::<&'static str>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let b_waits = Signal::new();
    // Everything is queued behind a blocker before anything runs, in the
    // order B, the yielders, A: B parks first, and A runs after the
    // yielders have queued themselves again.
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let blocker = rt.spawn(async move { gate.recv().unwrap() });
    let b = {
        let (log, signal) = (log.clone(), b_waits.clone());
        rt.spawn(async move {
            log.lock().unwrap().push("B parks");
            signal.wait().await;
            log.lock().unwrap().push("B runs");
        })
    };
    let yielders: Vec<_> = (0..10)
        .map(|_| {
            let (log, stop) = (log.clone(), stop.clone());
            rt.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    log.lock().unwrap().push("yield");
                    fairlane::yield_now().await;
                }
            })
        })
        .collect();
    let a = {
        let log = log.clone();
        rt.spawn(async move {
            log.lock().unwrap().push("A wakes B");
            b_waits.notify();
        })
    };
    release.send(()).unwrap();
    rt.block_on(async {
        blocker.await.unwrap();
        a.await.unwrap();
        b.await.unwrap();
    });
    stop.store(true, Ordering::Relaxed);
    for y in yielders {
        rt.block_on(y).unwrap();
    }
    let log = log.lock().unwrap();
    let woke = log.iter().position(|&e| e == "A wakes B").unwrap();
    let ran = log.iter().position(|&e| e == "B runs").unwrap();
    assert!(ran > woke, "{log:?}");
    ran - woke - 1
}

#[test]
fn a_task_woken_by_the_running_task_runs_next() {
    let _serial = serial();
    let between = with_deadline("runs_next", DEADLINE, String::new, || {
        polls_between_wake_and_run(3)
    });
    assert_eq!(between, 0, "polls of other tasks before the woken one ran");
}

#[test]
fn without_a_wake_slot_a_woken_task_queues_behind_the_ready_ones() {
    let _serial = serial();
    let between = with_deadline("queues_behind", DEADLINE, String::new, || {
        polls_between_wake_and_run(0)
    });
    assert!(between >= 10, "{between} polls before the woken task ran");
}

/// One processor: two tasks that wake each other in turn (each woken task
/// goes to the wake slot) next to one task that yields in a loop. Returns
/// (polls of the pair, polls of the yielder) once the yielder has been
/// polled `yields` times.
fn ping_pong_next_to_a_yielder(budget: u32, yields: u64) -> (u64, u64) {
    let rt = one_processor(budget);
    let stop = Arc::new(AtomicBool::new(false));
    let pair_polls = Arc::new(AtomicU64::new(0));
    let yielder_polls = Arc::new(AtomicU64::new(0));
    let (ping, pong) = (Signal::new(), Signal::new());
    let player = |mine: Arc<Signal>, theirs: Arc<Signal>, serve: bool| {
        let (stop, polls) = (stop.clone(), pair_polls.clone());
        rt.spawn(async move {
            if serve {
                theirs.notify();
            }
            loop {
                mine.wait().await;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                polls.fetch_add(1, Ordering::Relaxed);
                theirs.notify();
            }
            // Let the partner see `stop` too.
            theirs.notify();
        })
    };
    let players = [
        player(ping.clone(), pong.clone(), false),
        player(pong, ping, true),
    ];
    let yielder = {
        let (stop, polls) = (stop.clone(), yielder_polls.clone());
        rt.spawn(async move {
            while polls.fetch_add(1, Ordering::Relaxed) + 1 < yields {
                fairlane::yield_now().await;
            }
            stop.store(true, Ordering::Relaxed);
        })
    };
    rt.block_on(yielder).unwrap();
    for p in players {
        rt.block_on(p).unwrap();
    }
    (
        pair_polls.load(Ordering::SeqCst),
        yielder_polls.load(Ordering::SeqCst),
    )
}

#[test]
fn slot_runs_in_a_row_are_bounded_by_the_budget() {
    let _serial = serial();
    for budget in [1, 3] {
        let (pair, yielder) = with_deadline("slot_bound", DEADLINE, String::new, move || {
            ping_pong_next_to_a_yielder(budget, 2_000)
        });
        // Between two polls of the yielder at most `budget` slot runs: the
        // pair's polls are bounded by the yielder's. The slot is in use
        // too: the pair gets more than the one poll in two that plain
        // FIFO service would give it.
        let bound = u64::from(budget) * (yielder + 1);
        assert!(
            pair <= bound,
            "budget {budget}: {pair} polls of the pair against {yielder} of the yielder"
        );
        if budget > 1 {
            assert!(
                pair > yielder * 3 / 2,
                "budget {budget}: {pair} polls of the pair against {yielder} of the yielder"
            );
        }
    }
}

#[test]
fn a_task_woken_by_a_task_that_never_yields_runs_elsewhere() {
    let _serial = serial();
    with_deadline("hostage", DEADLINE, String::new, || {
        let rt = common::runtime(2);
        for _ in 0..20 {
            let parked = Signal::new();
            let wake = Signal::new();
            let done = Arc::new(AtomicBool::new(false));
            let woken = {
                let (parked, wake, done) = (parked.clone(), wake.clone(), done.clone());
                rt.spawn(async move {
                    parked.notify();
                    wake.wait().await;
                    done.store(true, Ordering::Release);
                })
            };
            parked.wait_blocking();
            // Wakes the parked task (into its own processor's wake slot),
            // then spins without yielding until that task has run: only
            // the other processor can run it.
            let spinner = rt.spawn(async move {
                wake.notify();
                while !done.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
            });
            rt.block_on(async {
                spinner.await.unwrap();
                woken.await.unwrap();
            });
        }
    });
}
