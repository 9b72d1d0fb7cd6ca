//! The public API's contract (docs/api-contract.md): panics, abort, detach,
//! misuse messages, builder errors, handles on other threads.

mod common;

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use common::{panic_message, runtime, DropCounter, Signal};
use fairlane::{AbortHandle, Handle, JoinError, JoinHandle, Runtime};

const NESTED_BLOCK_ON: &str = "Cannot start a fairlane runtime from within a runtime";

#[test]
fn api_types_are_send_sync_as_documented() {
    fn send_sync<T: Send + Sync>() {}
    fn send_unpin<T: Send + Unpin>() {}
    fn clone<T: Clone>() {}
    fn error_sync<T: std::error::Error + Send + Sync + 'static>() {}
    send_sync::<Runtime>();
    send_sync::<Handle>();
    clone::<Handle>();
    send_sync::<AbortHandle>();
    clone::<AbortHandle>();
    send_unpin::<JoinHandle<u32>>();
    send_unpin::<JoinHandle<Vec<u8>>>();
    // As tokio's, `JoinError` is `Sync`, so `?` converts it into
    // `anyhow::Error` / `Box<dyn Error + Send + Sync>`.
    error_sync::<JoinError>();
    error_sync::<fairlane::TryCurrentError>();
}

#[test]
fn runtime_new_has_one_processor_per_core() {
    let rt = Runtime::new().unwrap();
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(rt.metrics().processors.len(), cores);
    assert_eq!(rt.block_on(rt.spawn(async { 40 + 2 })).unwrap(), 42);
}

#[test]
fn builder_rejects_zero_processors() {
    let err = Runtime::builder().processors(0).build().unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("processors"), "{err}");
}

#[test]
fn builder_rejects_zero_lanes() {
    let err = Runtime::builder()
        .processors(1)
        .lanes_per_processor(0)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("lanes_per_processor"), "{err}");
}

#[test]
fn builder_rejects_help_factor_over_63() {
    let err = Runtime::builder()
        .processors(1)
        .help_factor_log2(64)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("help_factor_log2"), "{err}");
}

#[test]
fn builder_settings_build_a_working_runtime() {
    let rt = Runtime::builder()
        .processors(3)
        .lanes_per_processor(4)
        .help_period(0)
        .help_factor_log2(63)
        .thread_name("api-test")
        .build()
        .unwrap();
    assert_eq!(rt.metrics().processors.len(), 3);
    let names = rt.block_on(async {
        let tasks: Vec<_> = (0..30)
            .map(|_| fairlane::spawn(async { thread::current().name().map(String::from) }))
            .collect();
        let mut names = Vec::new();
        for t in tasks {
            names.push(t.await.unwrap().unwrap());
        }
        names
    });
    for name in names {
        assert!(name.starts_with("api-test-"), "{name}");
    }
}

// ---- panics ----------------------------------------------------------------

#[test]
fn panicking_task_gives_join_error_with_payload() {
    let rt = runtime(1);
    let err = rt
        .block_on(rt.spawn(async {
            panic!("boom {}", 42);
        }))
        .unwrap_err();
    assert!(err.is_panic());
    assert!(!err.is_cancelled());
    assert!(err.to_string().contains("boom 42"), "{err}");
    assert!(format!("{err:?}").contains("boom 42"));
    assert_eq!(panic_message(&*err.into_panic()), "boom 42");

    let n = std::hint::black_box(7);
    let err = rt
        .block_on(rt.spawn(async move { panic!("formatted {n}") }))
        .unwrap_err();
    assert_eq!(
        err.into_panic().downcast_ref::<String>().unwrap(),
        "formatted 7"
    );

    let err = rt
        .block_on(rt.spawn(async { std::panic::panic_any(17u32) }))
        .unwrap_err();
    assert!(err.is_panic());
    assert_eq!(
        *err.try_into_panic().unwrap().downcast::<u32>().unwrap(),
        17
    );
}

#[test]
fn processor_keeps_running_after_panics() {
    // One processor: every task below runs on the processor that caught the
    // panics.
    let rt = runtime(1);
    let panics: Vec<_> = (0..100)
        .map(|i| {
            rt.spawn(async move {
                fairlane::yield_now().await;
                if i % 2 == 0 {
                    panic!("task {i}");
                }
                i
            })
        })
        .collect();
    rt.block_on(async {
        for (i, t) in panics.into_iter().enumerate() {
            match t.await {
                Ok(v) => assert_eq!(v, i),
                Err(e) => {
                    assert!(e.is_panic() && i % 2 == 0);
                    assert_eq!(panic_message(&*e.into_panic()), format!("task {i}"));
                }
            }
        }
    });
    // Still working: tasks run, wake each other, and complete.
    let signal = Signal::new();
    let s = signal.clone();
    let waiter = rt.spawn(async move {
        s.wait().await;
        "woken"
    });
    rt.spawn(async move { signal.notify() });
    assert_eq!(rt.block_on(waiter).unwrap(), "woken");
}

#[test]
fn panic_in_block_on_future_propagates_to_caller() {
    let rt = runtime(1);
    let result = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async { panic!("in block_on") });
    }));
    assert_eq!(panic_message(&*result.unwrap_err()), "in block_on");
    // The runtime and the thread's context survive.
    assert_eq!(rt.block_on(async { 5 }), 5);
    assert!(Handle::try_current().is_err());
}

// ---- abort -----------------------------------------------------------------

#[test]
fn abort_pending_task_cancels_and_drops_it() {
    let rt = runtime(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicBool::new(false));
    let (d, s) = (drops.clone(), started.clone());
    let task = rt.spawn(async move {
        let _counter = DropCounter(d);
        s.store(true, Ordering::SeqCst);
        std::future::pending::<()>().await;
    });
    while !started.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    assert!(!task.is_finished());
    task.abort();
    task.abort(); // idempotent
    let abort = task.abort_handle();
    let err = rt.block_on(task).unwrap_err();
    assert!(err.is_cancelled());
    assert!(!err.is_panic());
    assert_eq!(err.to_string(), "task was cancelled");
    assert!(err.try_into_panic().is_err());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(abort.is_finished());
}

#[test]
fn abort_before_first_poll() {
    // The single processor is busy, so the task is still queued when aborted.
    let rt = runtime(1);
    let release = Arc::new(AtomicBool::new(false));
    let busy = Arc::new(AtomicBool::new(false));
    let (r, b) = (release.clone(), busy.clone());
    let blocker = rt.spawn(async move {
        b.store(true, Ordering::SeqCst);
        while !r.load(Ordering::SeqCst) {
            thread::yield_now();
        }
    });
    while !busy.load(Ordering::SeqCst) {
        thread::yield_now();
    }
    let polled = Arc::new(AtomicBool::new(false));
    let drops = Arc::new(AtomicUsize::new(0));
    let (p, d) = (polled.clone(), drops.clone());
    let counter = DropCounter(d);
    let task = rt.spawn(async move {
        let _counter = counter;
        p.store(true, Ordering::SeqCst);
    });
    task.abort();
    release.store(true, Ordering::SeqCst);
    assert!(rt.block_on(task).unwrap_err().is_cancelled());
    rt.block_on(blocker).unwrap();
    assert!(
        !polled.load(Ordering::SeqCst),
        "an aborted task must not run"
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn abort_yielding_task() {
    let rt = runtime(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let polls = Arc::new(AtomicUsize::new(0));
    let (d, p) = (drops.clone(), polls.clone());
    let task = rt.spawn(async move {
        let _counter = DropCounter(d);
        loop {
            p.fetch_add(1, Ordering::SeqCst);
            fairlane::yield_now().await;
        }
    });
    while polls.load(Ordering::SeqCst) < 100 {
        thread::yield_now();
    }
    task.abort();
    assert!(rt.block_on(task).unwrap_err().is_cancelled());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let after = polls.load(Ordering::SeqCst);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(polls.load(Ordering::SeqCst), after, "polled after abort");
}

#[test]
fn abort_after_completion_keeps_output() {
    let rt = runtime(1);
    let task = rt.spawn(async { String::from("output") });
    while !task.is_finished() {
        thread::yield_now();
    }
    task.abort();
    task.abort_handle().abort();
    assert_eq!(rt.block_on(task).unwrap(), "output");
}

#[test]
fn abort_handle_from_another_thread() {
    let rt = runtime(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            // Made outside the async block, so that a task aborted before
            // its first poll still owns (and drops) its counter.
            let counter = DropCounter(drops.clone());
            rt.spawn(async move {
                let _counter = counter;
                std::future::pending::<()>().await;
            })
        })
        .collect();
    let aborts: Vec<AbortHandle> = tasks.iter().map(JoinHandle::abort_handle).collect();
    let clones = aborts.clone();
    thread::spawn(move || {
        for a in clones {
            a.abort();
        }
    })
    .join()
    .unwrap();
    rt.block_on(async {
        for t in tasks {
            assert!(t.await.unwrap_err().is_cancelled());
        }
    });
    assert_eq!(drops.load(Ordering::SeqCst), 50);
    assert!(aborts.iter().all(AbortHandle::is_finished));
}

#[test]
fn abort_handle_outlives_join_handle() {
    let rt = runtime(1);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let (tx, rx) = mpsc::channel::<()>();
    // Fields drop in order: the counter first, then the sender, which closes
    // the channel; whether or not the task was ever polled.
    struct Guard {
        _counter: DropCounter,
        _tx: mpsc::Sender<()>,
    }
    let guard = Guard {
        _counter: DropCounter(d),
        _tx: tx,
    };
    let abort = {
        let task = rt.spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        task.abort_handle()
        // `task` dropped: detached
    };
    assert!(!abort.is_finished());
    abort.abort();
    // The channel closes when the future is dropped: disconnected, not a
    // timeout (the deadline only turns a future never dropped into a
    // failure instead of a hang).
    assert_eq!(
        rx.recv_timeout(common::DEADLINE),
        Err(mpsc::RecvTimeoutError::Disconnected)
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let start = std::time::Instant::now();
    while !abort.is_finished() {
        assert!(start.elapsed() < common::DEADLINE);
        thread::yield_now();
    }
}

// ---- detach ----------------------------------------------------------------

#[test]
fn dropped_join_handle_detaches_task() {
    let rt = runtime(2);
    let (tx, rx) = mpsc::channel();
    let signal = Signal::new();
    {
        let signal = signal.clone();
        let task = rt.spawn(async move {
            for _ in 0..10 {
                fairlane::yield_now().await;
            }
            signal.wait().await;
            tx.send("ran to completion").unwrap();
        });
        drop(task);
    }
    signal.notify();
    assert_eq!(
        rx.recv_timeout(common::DEADLINE).unwrap(),
        "ran to completion"
    );
}

#[test]
fn detached_tasks_spawned_from_tasks_complete() {
    let rt = runtime(2);
    let (tx, rx) = mpsc::channel();
    rt.block_on(async move {
        for i in 0..100 {
            let tx = tx.clone();
            drop(fairlane::spawn(async move {
                fairlane::yield_now().await;
                tx.send(i).unwrap();
            }));
        }
    });
    let mut got: Vec<i32> = (0..100)
        .map(|_| rx.recv_timeout(common::DEADLINE).unwrap())
        .collect();
    got.sort_unstable();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
}

// ---- misuse ----------------------------------------------------------------

#[test]
fn nested_block_on_inside_block_on_panics() {
    let rt = runtime(1);
    let result = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async { rt.block_on(async {}) });
    }));
    let msg = panic_message(&*result.unwrap_err());
    assert!(msg.contains(NESTED_BLOCK_ON), "{msg}");

    // Another runtime's block_on is refused too.
    let other = runtime(1);
    let result = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async { other.block_on(async {}) });
    }));
    let msg = panic_message(&*result.unwrap_err());
    assert!(msg.contains(NESTED_BLOCK_ON), "{msg}");

    // The failed nesting left the context clean.
    assert!(Handle::try_current().is_err());
    assert_eq!(rt.block_on(async { 1 }), 1);
}

#[test]
fn nested_block_on_inside_task_panics_in_the_task() {
    let rt = runtime(1);
    let handle = rt.handle().clone();
    let other = runtime(1);
    let other_handle = other.handle().clone();
    let err = rt
        .block_on(rt.spawn(async move { handle.block_on(async {}) }))
        .unwrap_err();
    assert!(err.is_panic());
    let msg = panic_message(&*err.into_panic());
    assert!(msg.contains(NESTED_BLOCK_ON), "{msg}");

    let err = rt
        .block_on(rt.spawn(async { Handle::current().block_on(async {}) }))
        .unwrap_err();
    assert!(panic_message(&*err.into_panic()).contains(NESTED_BLOCK_ON));

    let err = rt
        .block_on(rt.spawn(async move { other_handle.block_on(async {}) }))
        .unwrap_err();
    assert!(panic_message(&*err.into_panic()).contains(NESTED_BLOCK_ON));

    // The processor is still fine.
    assert_eq!(rt.block_on(rt.spawn(async { 3 })).unwrap(), 3);
}

#[test]
#[should_panic(expected = "fairlane::spawn")]
fn spawn_outside_runtime_panics() {
    drop(fairlane::spawn(async {}));
}

#[test]
fn spawn_outside_runtime_message() {
    let result = catch_unwind(|| drop(fairlane::spawn(async {})));
    let msg = panic_message(&*result.unwrap_err());
    assert!(msg.contains("fairlane::spawn"), "{msg}");
    assert!(
        msg.contains("Handle::spawn"),
        "says what to use instead: {msg}"
    );
}

#[test]
fn handle_current_outside_runtime() {
    let err = Handle::try_current().unwrap_err();
    assert!(!err.to_string().is_empty());
    let result = catch_unwind(Handle::current);
    assert!(
        result.is_err(),
        "Handle::current must panic outside a runtime"
    );
    thread::spawn(|| assert!(Handle::try_current().is_err()))
        .join()
        .unwrap();
}

#[test]
fn handle_current_inside_task_and_block_on() {
    let rt = runtime(2);
    rt.block_on(async {
        let h = Handle::current();
        assert_eq!(h.spawn(async { 1 }).await.unwrap(), 1);
    });
    let from_task = rt
        .block_on(rt.spawn(async { Handle::try_current().is_ok() }))
        .unwrap();
    assert!(from_task);
    // block_on leaves the context when it returns.
    assert!(Handle::try_current().is_err());
}

// ---- handles on other threads -------------------------------------------

#[test]
fn handle_spawn_and_block_on_from_other_threads() {
    let rt = runtime(2);
    let threads: Vec<_> = (0..4u64)
        .map(|k| {
            let handle = rt.handle().clone();
            thread::spawn(move || {
                let tasks: Vec<_> = (0..25u64)
                    .map(|i| {
                        handle.spawn(async move {
                            fairlane::yield_now().await;
                            k * 100 + i
                        })
                    })
                    .collect();
                handle.block_on(async move {
                    // `fairlane::spawn` works inside this block_on too.
                    let extra = fairlane::spawn(async { 0 }).await.unwrap();
                    let mut sum = extra;
                    for t in tasks {
                        sum += t.await.unwrap();
                    }
                    sum
                })
            })
        })
        .collect();
    let sums: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (k, sum) in sums.into_iter().enumerate() {
        let k = k as u64;
        assert_eq!(sum, (0..25).map(|i| k * 100 + i).sum::<u64>());
    }
}

#[test]
fn concurrent_block_on_from_many_threads() {
    let rt = Arc::new(runtime(2));
    let threads: Vec<_> = (0..8)
        .map(|k| {
            let rt = rt.clone();
            thread::spawn(move || {
                rt.block_on(async move {
                    let mut sum = 0;
                    for i in 0..50 {
                        sum += fairlane::spawn(async move { i }).await.unwrap();
                        fairlane::yield_now().await;
                    }
                    sum + k
                })
            })
        })
        .collect();
    for (k, t) in threads.into_iter().enumerate() {
        assert_eq!(t.join().unwrap(), 1225 + k);
    }
}

#[test]
fn join_handle_awaited_from_another_task_and_is_finished() {
    let rt = runtime(2);
    let signal = Signal::new();
    let s = signal.clone();
    let inner = rt.spawn(async move {
        s.wait().await;
        "inner"
    });
    assert!(!inner.is_finished());
    let outer = rt.spawn(async move { inner.await.unwrap() });
    signal.notify();
    assert_eq!(rt.block_on(outer).unwrap(), "inner");
}

#[test]
fn yield_now_in_block_on_and_tasks() {
    let rt = runtime(1);
    rt.block_on(async {
        for _ in 0..100 {
            fairlane::yield_now().await;
            fairlane::task::yield_now().await;
        }
    });
    let n = rt.block_on(async {
        fairlane::task::spawn(async {
            let mut n = 0;
            for _ in 0..100 {
                fairlane::task::yield_now().await;
                n += 1;
            }
            n
        })
        .await
        .unwrap()
    });
    assert_eq!(n, 100);
}
