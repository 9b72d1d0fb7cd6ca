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

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::thread;

use common::wake_load::WakeLoad;
use common::{runtime, serial, with_deadline, DEADLINE};

/// `targets` tasks; `task_wakes` wakes sent by tasks on the processors and
/// `thread_wakes` by threads outside the runtime.
fn exactly_once(processors: usize, targets: usize, task_wakes: i64, thread_wakes: i64) {
    let _serial = serial();
    let load = WakeLoad::new(targets, task_wakes, thread_wakes);
    let l = load.clone();
    with_deadline(
        &format!("exactly_once_{processors}"),
        DEADLINE,
        move || l.totals(),
        {
            let load = load.clone();
            move || {
                let rt = runtime(processors);
                let running = load.start(&rt, 0);
                load.finish(&rt, running);
            }
        },
    );
    load.assert_exactly_once();
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
