//! The wake slot: a task woken by the running task runs next, at most three
//! times in a row before the lanes are served again, and a task that wakes
//! itself (as `yield_now` does) never gets there. Everything is counted in
//! polls. With two processors, a task in the slot of a processor stuck in a
//! poll that never yields is run by the other one, asleep or busy.

mod common;

use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use common::{serial, with_deadline, DEADLINE};

/// A one-bit signal between two tasks: `set` wakes the waiter.
#[derive(Default)]
struct Signal(Mutex<(bool, Option<Waker>)>);

impl Signal {
    fn set(&self) {
        let waker = {
            let mut state = self.0.lock().unwrap();
            state.0 = true;
            state.1.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    async fn wait(&self) {
        poll_fn(|cx| {
            let mut state = self.0.lock().unwrap();
            if std::mem::take(&mut state.0) {
                Poll::Ready(())
            } else {
                state.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }
}

/// A task polled in runs of more than three in a row from the wake slot
/// would take more than four polls per pass of the lanes.
#[test]
fn a_chain_of_wakes_gets_at_most_four_polls_per_pass_of_the_lanes() {
    const YIELDERS: usize = 6;
    const TOTAL: u64 = 200_000;
    let _serial = serial();
    with_deadline("wake_slot_bound", DEADLINE, String::new, || {
        let rt = fairlane::Runtime::builder().processors(1).build().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let counted = Arc::new(AtomicU64::new(0));
        let yielder_polls: Arc<Vec<AtomicU64>> =
            Arc::new((0..YIELDERS).map(|_| AtomicU64::new(0)).collect());
        let pair_polls = Arc::new(AtomicU64::new(0));
        let signals: Arc<[Signal; 2]> = Arc::new(Default::default());
        // Spawned while the processor is busy with a blocker, so that every
        // task is queued before any runs.
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let blocker = rt.spawn(async move { gate.recv().unwrap() });
        let count = {
            let (stop, counted) = (stop.clone(), counted.clone());
            move || {
                if counted.fetch_add(1, Ordering::Relaxed) + 1 >= TOTAL {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        };
        let mut handles = Vec::new();
        for i in 0..YIELDERS {
            let (stop, polls, count) = (stop.clone(), yielder_polls.clone(), count.clone());
            handles.push(rt.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    polls[i].fetch_add(1, Ordering::Relaxed);
                    count();
                    fairlane::yield_now().await;
                }
            }));
        }
        // Two tasks waking each other in turn: each wake is made by the
        // task being polled, so the woken one goes to the slot.
        for me in 0..2 {
            let (stop, polls, count, signals) = (
                stop.clone(),
                pair_polls.clone(),
                count.clone(),
                signals.clone(),
            );
            handles.push(rt.spawn(async move {
                if me == 1 {
                    signals[1].wait().await;
                }
                while !stop.load(Ordering::Relaxed) {
                    polls.fetch_add(1, Ordering::Relaxed);
                    count();
                    signals[1 - me].set();
                    signals[me].wait().await;
                }
                signals[1 - me].set();
            }));
        }
        release.send(()).unwrap();
        rt.block_on(async move {
            blocker.await.unwrap();
            for handle in handles {
                handle.await.unwrap();
            }
        });
        let yields: Vec<u64> = yielder_polls
            .iter()
            .map(|p| p.load(Ordering::SeqCst))
            .collect();
        let least = *yields.iter().min().unwrap();
        let pair = pair_polls.load(Ordering::SeqCst);
        // Per pass of the lanes each yielder is polled once and the pair's
        // queued task once, plus at most three runs from the slot.
        assert!(least > 0, "a yielder never ran beside the pair: {yields:?}");
        assert!(
            pair <= 4 * (least + 2),
            "the pair was polled {pair} times against at least {least} for each \
             yielder ({yields:?}): more than four per pass"
        );
    });
}

/// `yield_now` wakes the task itself: it must go behind every other ready
/// task, never into the slot, so no yielder is polled twice in a row.
#[test]
fn a_yielding_task_never_runs_twice_in_a_row_beside_others() {
    const TASKS: usize = 4;
    const ROUNDS: usize = 2_000;
    let _serial = serial();
    with_deadline("wake_slot_yield", DEADLINE, String::new, || {
        let rt = fairlane::Runtime::builder().processors(1).build().unwrap();
        let order = Arc::new(Mutex::new(Vec::with_capacity(TASKS * ROUNDS)));
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let (started, blocking) = std::sync::mpsc::channel::<()>();
        let blocker = rt.spawn(async move {
            started.send(()).unwrap();
            gate.recv().unwrap()
        });
        // The tasks are spawned from outside while the processor is inside
        // the blocker's poll, its clock reading older than their spawns: a
        // push from outside must still stamp them older than the yields
        // that follow.
        blocking.recv().unwrap();
        let handles: Vec<_> = (0..TASKS)
            .map(|i| {
                let order = order.clone();
                rt.spawn(async move {
                    for _ in 0..ROUNDS {
                        order.lock().unwrap().push(i);
                        fairlane::yield_now().await;
                    }
                })
            })
            .collect();
        release.send(()).unwrap();
        rt.block_on(async move {
            blocker.await.unwrap();
            for handle in handles {
                handle.await.unwrap();
            }
        });
        let order = order.lock().unwrap();
        // Until the first task finishes, every task is ready at every poll.
        let all_ready = order.len() - TASKS;
        let repeats = order[..all_ready]
            .windows(2)
            .filter(|w| w[0] == w[1])
            .count();
        assert_eq!(repeats, 0, "a yielding task ran twice in a row");
    });
}

/// How long the stuck task below waits for the task it woke before it gives
/// up; only a task left behind for good comes near it.
const STUCK_FOR: Duration = Duration::from_secs(30);

/// Two processors. A task `W` waits on a signal; once it is parked, a task
/// `S` sets the signal (so `W`, woken by the task being polled, goes to the
/// wake slot of `S`'s processor) and then spins without yielding until `W`
/// has run. With `yielders` tasks that yield in a loop, the other processor
/// never runs out of work, so only a help check can reach the slot; without
/// them it goes to sleep, and the slot's filling must wake it.
fn a_woken_task_is_not_left_behind_a_stuck_processor(yielders: usize) {
    let _serial = serial();
    with_deadline("wake_slot_stuck", DEADLINE, String::new, move || {
        let rt = fairlane::Runtime::builder().processors(2).build().unwrap();
        let signal = Arc::new(Signal::default());
        let parked = Arc::new(AtomicBool::new(false));
        let ran = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let woken = {
            let (signal, parked, ran) = (signal.clone(), parked.clone(), ran.clone());
            rt.spawn(async move {
                let mut first = true;
                poll_fn(|cx| {
                    if std::mem::take(&mut first) {
                        *signal.0.lock().unwrap() = (false, Some(cx.waker().clone()));
                        parked.store(true, Ordering::SeqCst);
                        Poll::Pending
                    } else {
                        Poll::Ready(())
                    }
                })
                .await;
                ran.store(true, Ordering::SeqCst);
            })
        };
        while !parked.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let busy: Vec<_> = (0..yielders)
            .map(|_| {
                let done = done.clone();
                rt.spawn(async move {
                    while !done.load(Ordering::Relaxed) {
                        fairlane::yield_now().await;
                    }
                })
            })
            .collect();
        let stuck = {
            let (signal, ran) = (signal.clone(), ran.clone());
            rt.spawn(async move {
                signal.set();
                let start = Instant::now();
                while !ran.load(Ordering::SeqCst) && start.elapsed() < common::scaled(STUCK_FOR) {
                    std::hint::spin_loop();
                }
                ran.load(Ordering::SeqCst)
            })
        };
        let served = rt.block_on(async move {
            let served = stuck.await.unwrap();
            done.store(true, Ordering::Relaxed);
            for handle in busy {
                handle.await.unwrap();
            }
            woken.await.unwrap();
            served
        });
        assert!(
            served,
            "the task woken by a task stuck in its poll did not run within {STUCK_FOR:?} \
             ({yielders} yielding tasks beside them)"
        );
    });
}

#[test]
fn a_woken_task_behind_a_stuck_processor_wakes_the_sleeping_one() {
    a_woken_task_is_not_left_behind_a_stuck_processor(0);
}

#[test]
fn a_woken_task_behind_a_stuck_processor_is_helped_by_the_busy_one() {
    a_woken_task_is_not_left_behind_a_stuck_processor(4);
}
