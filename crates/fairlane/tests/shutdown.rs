//! Shutdown: dropping the runtime or `shutdown_timeout` cancels every task
//! still alive, whatever it is doing (parked forever, queued and never
//! polled, parked on another task's waker in a reference cycle, mid-yield),
//! and drop counters prove each future was dropped. Join handles, handles
//! and wakers that outlive the runtime keep working.

mod common;

use std::future::{pending, poll_fn};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Poll, Waker};
use std::thread;
use std::time::Duration;

use common::{panic_message, runtime, wait_until, with_deadline, DropCounter, DEADLINE};
use fairlane::{JoinError, JoinHandle, Runtime};

/// Awaits join handles of a runtime that is gone, on a fresh runtime.
fn join_all<T: Send + 'static>(handles: Vec<JoinHandle<T>>) -> Vec<Result<T, JoinError>> {
    let fresh = runtime(1);
    fresh.block_on(async {
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await);
        }
        out
    })
}

/// One end of a reference cycle between two tasks: each task's future owns
/// a slot that holds the *other* task's waker.
#[derive(Default)]
struct Slot {
    waker: Mutex<Option<Waker>>,
}

#[derive(Clone, Copy, Debug)]
enum Via {
    Drop,
    ShutdownTimeout,
}

/// Everything at once, then shutdown: tasks parked forever, pairs of tasks
/// parked on each other's wakers, tasks queued behind busy processors that
/// never got polled. The busy "blocker" tasks keep every processor occupied
/// until they see the runtime close (a task spawned after shutdown is
/// cancelled at once), so the queued tasks are still queued at shutdown.
fn cancel_everything(processors: usize, via: Via) {
    const PARKED: usize = 50;
    const PAIRS: usize = 25;
    const QUEUED: usize = 50;
    let rt = runtime(processors);
    let drops = Arc::new(AtomicUsize::new(0));
    let first_polls = Arc::new(AtomicUsize::new(0));
    let mut handles: Vec<JoinHandle<()>> = Vec::new();

    // Parked forever.
    for _ in 0..PARKED {
        let (counter, polls) = (DropCounter(drops.clone()), first_polls.clone());
        handles.push(rt.spawn(async move {
            let _counter = counter;
            polls.fetch_add(1, Ordering::SeqCst);
            pending::<()>().await;
        }));
    }

    // Pairs parked on each other's wakers: task A's future owns slot A,
    // which holds B's waker, and B's future owns slot B holding A's waker.
    let mut weak_slots: Vec<Weak<Slot>> = Vec::new();
    for _ in 0..PAIRS {
        let (a, b) = (Arc::new(Slot::default()), Arc::new(Slot::default()));
        weak_slots.push(Arc::downgrade(&a));
        weak_slots.push(Arc::downgrade(&b));
        for (own, other) in [(a.clone(), b.clone()), (b, a)] {
            let (counter, polls) = (DropCounter(drops.clone()), first_polls.clone());
            handles.push(rt.spawn(async move {
                let _counter = counter;
                let mut registered = false;
                poll_fn(|cx| {
                    if !registered {
                        registered = true;
                        *other.waker.lock().unwrap() = Some(cx.waker().clone());
                        polls.fetch_add(1, Ordering::SeqCst);
                    }
                    Poll::<()>::Pending
                })
                .await;
                drop(own);
            }));
        }
    }
    drop(rt.handle().clone()); // a clone of the handle does not keep anything alive
    wait_until("every parked task polled once", || {
        first_polls.load(Ordering::SeqCst) == PARKED + 2 * PAIRS
    });

    // Keep every processor busy until the runtime closes.
    let busy = Arc::new(AtomicUsize::new(0));
    let mut blockers = Vec::new();
    for _ in 0..processors {
        let busy = busy.clone();
        blockers.push(rt.spawn(async move {
            busy.fetch_add(1, Ordering::SeqCst);
            loop {
                let probe = fairlane::spawn(async {});
                if probe.is_finished() {
                    // Spawning after shutdown cancels at once: we are closing.
                    break;
                }
                thread::sleep(Duration::from_millis(1));
            }
        }));
    }
    wait_until("every processor runs a blocker", || {
        busy.load(Ordering::SeqCst) == processors
    });

    // Queued, never polled.
    let polled_queued = Arc::new(AtomicBool::new(false));
    for _ in 0..QUEUED {
        let (counter, polled) = (DropCounter(drops.clone()), polled_queued.clone());
        handles.push(rt.spawn(async move {
            let _counter = counter;
            polled.store(true, Ordering::SeqCst);
        }));
    }

    match via {
        Via::Drop => drop(rt),
        Via::ShutdownTimeout => rt.shutdown_timeout(DEADLINE),
    }

    let total = PARKED + 2 * PAIRS + QUEUED;
    assert_eq!(
        drops.load(Ordering::SeqCst),
        total,
        "{via:?} with {processors} processors must drop every future"
    );
    assert!(
        !polled_queued.load(Ordering::SeqCst),
        "queued tasks were polled: the scenario did not test what it meant to"
    );
    for (i, slot) in weak_slots.iter().enumerate() {
        assert!(
            slot.upgrade().is_none(),
            "slot {i} of a waker cycle is still alive: the cycle leaked"
        );
    }
    for (i, r) in join_all(handles).into_iter().enumerate() {
        assert!(r.unwrap_err().is_cancelled(), "task {i}");
    }
    for r in join_all(blockers) {
        r.unwrap();
    }
}

#[test]
fn drop_cancels_everything_1_processor() {
    cancel_everything(1, Via::Drop);
}

#[test]
fn drop_cancels_everything_2_processors() {
    cancel_everything(2, Via::Drop);
}

#[test]
fn shutdown_timeout_cancels_everything_1_processor() {
    cancel_everything(1, Via::ShutdownTimeout);
}

#[test]
fn shutdown_timeout_cancels_everything_2_processors() {
    cancel_everything(2, Via::ShutdownTimeout);
}

/// Shutdown while a thousand tasks yield in loops on four processors.
#[test]
fn drop_while_tasks_are_running() {
    let rt = runtime(4);
    let drops = Arc::new(AtomicUsize::new(0));
    let polls = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..1000)
        .map(|_| {
            let (counter, polls) = (DropCounter(drops.clone()), polls.clone());
            rt.spawn(async move {
                let _counter = counter;
                loop {
                    polls.fetch_add(1, Ordering::Relaxed);
                    fairlane::yield_now().await;
                }
            })
        })
        .collect();
    wait_until("tasks running", || polls.load(Ordering::Relaxed) > 20_000);
    drop(rt);
    assert_eq!(drops.load(Ordering::SeqCst), 1000);
    let after = polls.load(Ordering::SeqCst);
    for r in join_all(handles) {
        assert!(r.unwrap_err().is_cancelled());
    }
    assert_eq!(polls.load(Ordering::SeqCst), after, "polled after shutdown");
}

/// A task that never yields: `shutdown_timeout` gives up on its processor
/// after the timeout, cancels everything else, and the processor exits once
/// the task's poll returns.
#[test]
fn shutdown_timeout_with_a_task_that_never_yields() {
    let rt = runtime(1);
    let release = Arc::new(AtomicBool::new(false));
    let spinning = Arc::new(AtomicBool::new(false));
    let spinner_drops = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(AtomicUsize::new(0));
    let spinner = {
        let (release, spinning) = (release.clone(), spinning.clone());
        let counter = DropCounter(spinner_drops.clone());
        rt.spawn(async move {
            let _counter = counter;
            spinning.store(true, Ordering::SeqCst);
            while !release.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
        })
    };
    wait_until("spinner runs", || spinning.load(Ordering::SeqCst));
    let queued: Vec<_> = (0..20)
        .map(|_| {
            let counter = DropCounter(drops.clone());
            rt.spawn(async move {
                let _counter = counter;
            })
        })
        .collect();
    rt.shutdown_timeout(Duration::from_millis(100));
    assert_eq!(drops.load(Ordering::SeqCst), 20, "queued futures dropped");
    for r in join_all(queued) {
        assert!(r.unwrap_err().is_cancelled());
    }
    assert_eq!(spinner_drops.load(Ordering::SeqCst), 0, "still in its poll");
    release.store(true, Ordering::SeqCst);
    wait_until("the spinner finishes its poll and is dropped", || {
        spinner_drops.load(Ordering::SeqCst) == 1
    });
    // It completed its poll: its output is there (or it was cancelled, if the
    // runtime dropped it first); either way the handle resolves.
    let r = join_all(vec![spinner]).pop().unwrap();
    assert!(r.is_ok() || r.unwrap_err().is_cancelled());
}

#[test]
fn join_handles_outliving_the_runtime_report_cancelled() {
    let rt = runtime(2);
    let handles: Vec<_> = (0..10).map(|_| rt.spawn(pending::<u32>())).collect();
    let done = rt.spawn(async { 5u32 });
    while !done.is_finished() {
        thread::yield_now();
    }
    drop(rt);
    for h in &handles {
        assert!(h.is_finished());
    }
    for r in join_all(handles) {
        assert!(r.unwrap_err().is_cancelled());
    }
    // A task that completed before shutdown keeps its output.
    assert_eq!(join_all(vec![done]).pop().unwrap().unwrap(), 5);
}

/// A thread blocked in `Handle::block_on` on a task's join handle is released
/// (with "cancelled") when the runtime is dropped under it.
#[test]
fn block_on_waiting_for_a_task_is_released_by_shutdown() {
    with_deadline("block_on_released", DEADLINE, String::new, || {
        let rt = runtime(2);
        let task = rt.spawn(pending::<()>());
        let handle = rt.handle().clone();
        let waiting = Arc::new(AtomicBool::new(false));
        let w = waiting.clone();
        let waiter = thread::spawn(move || {
            handle.block_on(async move {
                w.store(true, Ordering::SeqCst);
                task.await
            })
        });
        wait_until("waiter blocked", || waiting.load(Ordering::SeqCst));
        drop(rt);
        assert!(waiter.join().unwrap().unwrap_err().is_cancelled());
    });
}

#[test]
fn handle_and_wakers_outliving_the_runtime() {
    let rt = runtime(1);
    let handle = rt.handle().clone();
    let waker_slot: Arc<Mutex<Option<Waker>>> = Arc::default();
    let polled = Arc::new(AtomicBool::new(false));
    let task = {
        let (slot, polled) = (waker_slot.clone(), polled.clone());
        rt.spawn(poll_fn(move |cx| {
            *slot.lock().unwrap() = Some(cx.waker().clone());
            polled.store(true, Ordering::SeqCst);
            Poll::<()>::Pending
        }))
    };
    wait_until("task parked", || polled.load(Ordering::SeqCst));
    let waker = waker_slot.lock().unwrap().clone().unwrap();
    drop(rt);
    // Waking a task of a dropped runtime is harmless.
    waker.wake_by_ref();
    waker.wake();
    assert!(join_all(vec![task])
        .pop()
        .unwrap()
        .unwrap_err()
        .is_cancelled());

    // Spawning through a handle of a dropped runtime: the future is dropped
    // at once and the task reports cancellation.
    let drops = Arc::new(AtomicUsize::new(0));
    let counter = DropCounter(drops.clone());
    let late = handle.spawn(async move {
        let _counter = counter;
        1
    });
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(late.is_finished());
    assert!(join_all(vec![late])
        .pop()
        .unwrap()
        .unwrap_err()
        .is_cancelled());
}

#[test]
fn dropping_the_runtime_inside_its_own_task_panics() {
    let rt = runtime(1);
    let handle = rt.handle().clone();
    let task = handle.spawn(async move { drop(rt) });
    let err = join_all(vec![task]).pop().unwrap().unwrap_err();
    assert!(err.is_panic());
    let msg = panic_message(&*err.into_panic());
    assert!(
        msg.contains("cannot be dropped or shut down from one of its own tasks"),
        "{msg}"
    );
}

/// Many short-lived runtimes, each dropped with work in flight and wakes
/// coming from outside: shutdown never hangs and never leaks a future.
#[test]
fn repeated_runtime_drop_with_work_in_flight() {
    let drops = Arc::new(AtomicUsize::new(0));
    let spawned = Arc::new(AtomicUsize::new(0));
    let (d, s) = (drops.clone(), spawned.clone());
    with_deadline("repeated_drop", DEADLINE, String::new, move || {
        for round in 0..50 {
            let rt: Runtime = runtime(1 + round % 3);
            let wakers: Arc<Mutex<Vec<Waker>>> = Arc::default();
            for i in 0..100 {
                let counter = DropCounter(d.clone());
                s.fetch_add(1, Ordering::SeqCst);
                let wakers = wakers.clone();
                drop(rt.spawn(async move {
                    let _counter = counter;
                    loop {
                        if i % 2 == 0 {
                            fairlane::yield_now().await;
                        } else {
                            let w = &wakers;
                            poll_fn(|cx| {
                                w.lock().unwrap().push(cx.waker().clone());
                                Poll::Ready(())
                            })
                            .await;
                            let mut registered = false;
                            poll_fn(|_| {
                                if registered {
                                    Poll::Ready(())
                                } else {
                                    registered = true;
                                    Poll::Pending
                                }
                            })
                            .await;
                        }
                    }
                }));
            }
            let stop = Arc::new(AtomicBool::new(false));
            let waker_thread = {
                let (wakers, stop) = (wakers.clone(), stop.clone());
                thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let batch: Vec<Waker> = std::mem::take(&mut *wakers.lock().unwrap());
                        for w in batch {
                            w.wake();
                        }
                        thread::yield_now();
                    }
                })
            };
            thread::sleep(Duration::from_millis(2));
            drop(rt);
            stop.store(true, Ordering::SeqCst);
            waker_thread.join().unwrap();
            // Wakers left over belong to dropped tasks; waking them is a no-op.
            for w in std::mem::take(&mut *wakers.lock().unwrap()) {
                w.wake();
            }
            assert_eq!(
                d.load(Ordering::SeqCst),
                s.load(Ordering::SeqCst),
                "round {round}: a future was not dropped"
            );
        }
    });
    assert_eq!(drops.load(Ordering::SeqCst), spawned.load(Ordering::SeqCst));
}
