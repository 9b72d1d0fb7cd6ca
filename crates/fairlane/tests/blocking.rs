//! `spawn_blocking`: blocking closures run on the blocking pool, never on a
//! processor; the pool grows with demand; results, panics, aborts and
//! shutdown behave as documented.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

use common::{runtime, with_deadline, DEADLINE};

#[test]
fn result_comes_back_from_a_pool_thread() {
    let rt = fairlane::Runtime::builder()
        .processors(1)
        .thread_name("rt")
        .build()
        .unwrap();
    let name = rt.block_on(async {
        fairlane::task::spawn_blocking(|| std::thread::current().name().map(String::from)).await
    });
    let name = name.unwrap().unwrap();
    assert!(name.starts_with("rt-blocking-"), "ran on {name}");
}

#[test]
fn a_blocked_closure_does_not_hold_the_only_processor() {
    // The closure blocks until a task has run; with one processor, that task
    // can only run if the closure is not on the processor.
    with_deadline("blocking_one_processor", DEADLINE, String::new, || {
        let rt = runtime(1);
        let (tx, rx) = mpsc::channel::<()>();
        let blocked = rt.spawn_blocking(move || rx.recv().is_ok());
        let signal = rt.spawn(async move { tx.send(()).unwrap() });
        rt.block_on(signal).unwrap();
        assert!(rt.block_on(blocked).unwrap());
    });
}

#[test]
fn the_pool_grows_to_run_closures_side_by_side() {
    // Four closures that each wait for all four: only four threads at once
    // can finish them.
    with_deadline("blocking_grows", DEADLINE, String::new, || {
        let rt = runtime(1);
        let barrier = Arc::new(Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let barrier = barrier.clone();
                rt.spawn_blocking(move || {
                    barrier.wait();
                    i
                })
            })
            .collect();
        let sum: i32 = handles.into_iter().map(|h| rt.block_on(h).unwrap()).sum();
        assert_eq!(sum, 6);
    });
}

#[test]
fn jobs_beyond_the_thread_limit_wait_their_turn() {
    with_deadline("blocking_limit", DEADLINE, String::new, || {
        let rt = fairlane::Runtime::builder()
            .processors(1)
            .max_blocking_threads(1)
            .build()
            .unwrap();
        let running = Arc::new(AtomicUsize::new(0));
        let overlap = Arc::new(AtomicBool::new(false));
        let handles: Vec<_> = (0..20)
            .map(|_| {
                let (running, overlap) = (running.clone(), overlap.clone());
                rt.spawn_blocking(move || {
                    if running.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlap.store(true, Ordering::SeqCst);
                    }
                    std::thread::yield_now();
                    running.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for h in handles {
            rt.block_on(h).unwrap();
        }
        assert!(
            !overlap.load(Ordering::SeqCst),
            "two jobs ran at once with one thread allowed"
        );
    });
}

#[test]
fn a_panicking_closure_gives_a_join_error_with_its_payload() {
    let rt = runtime(1);
    let err = rt
        .block_on(rt.spawn_blocking(|| panic!("blocking boom")))
        .unwrap_err();
    assert!(err.is_panic());
    assert_eq!(
        *err.into_panic().downcast::<&str>().unwrap(),
        "blocking boom"
    );
    // The pool and the runtime keep working.
    assert_eq!(rt.block_on(rt.spawn_blocking(|| 7)).unwrap(), 7);
}

#[test]
fn the_runtime_is_current_inside_a_closure_and_block_on_is_allowed() {
    let rt = runtime(1);
    let out = rt.block_on(rt.spawn_blocking(|| {
        let handle = fairlane::Handle::current();
        handle.block_on(async { fairlane::spawn(async { 40 + 2 }).await.unwrap() })
    }));
    assert_eq!(out.unwrap(), 42);
}

#[test]
fn aborting_before_start_skips_the_closure() {
    with_deadline("blocking_abort", DEADLINE, String::new, || {
        let rt = fairlane::Runtime::builder()
            .processors(1)
            .max_blocking_threads(1)
            .build()
            .unwrap();
        let (release, gate) = mpsc::channel::<()>();
        let first = rt.spawn_blocking(move || gate.recv().is_ok());
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let second = rt.spawn_blocking(move || r.store(true, Ordering::SeqCst));
        second.abort();
        assert!(rt.block_on(second).unwrap_err().is_cancelled());
        release.send(()).unwrap();
        assert!(rt.block_on(first).unwrap());
        // A third job runs after the aborted one would have: by then the
        // aborted one was skipped.
        rt.block_on(rt.spawn_blocking(|| ())).unwrap();
        assert!(
            !ran.load(Ordering::SeqCst),
            "an aborted, unstarted closure ran"
        );
    });
}

#[test]
fn dropping_the_runtime_waits_for_running_closures_and_drops_queued_ones() {
    with_deadline("blocking_shutdown", DEADLINE, String::new, || {
        let rt = fairlane::Runtime::builder()
            .processors(1)
            .max_blocking_threads(1)
            .build()
            .unwrap();
        let (started_tx, started) = mpsc::channel::<()>();
        let finished = Arc::new(AtomicBool::new(false));
        let f = finished.clone();
        let running = rt.spawn_blocking(move || {
            started_tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            f.store(true, Ordering::SeqCst);
        });
        let queued_ran = Arc::new(AtomicBool::new(false));
        let q = queued_ran.clone();
        let queued = rt.spawn_blocking(move || q.store(true, Ordering::SeqCst));
        started.recv().unwrap();
        drop(rt);
        assert!(
            finished.load(Ordering::SeqCst),
            "drop returned before a running closure ended"
        );
        assert!(
            !queued_ran.load(Ordering::SeqCst),
            "a queued closure ran during shutdown"
        );
        let rt2 = runtime(1);
        assert!(rt2.block_on(queued).unwrap_err().is_cancelled());
        // The running one finished, but its task was cancelled by shutdown
        // before it could deliver the result.
        assert!(rt2.block_on(running).unwrap_err().is_cancelled());
    });
}

#[test]
fn spawn_blocking_outside_a_runtime_panics_with_a_clear_message() {
    let panic = std::panic::catch_unwind(|| fairlane::task::spawn_blocking(|| ())).unwrap_err();
    let msg = panic
        .downcast_ref::<&str>()
        .copied()
        .map(String::from)
        .or_else(|| panic.downcast_ref::<String>().cloned());
    assert!(msg
        .unwrap()
        .contains("spawn_blocking must be called from within a fairlane runtime"));
}

#[test]
fn zero_blocking_threads_is_invalid_input() {
    let err = fairlane::Runtime::builder()
        .max_blocking_threads(0)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("max_blocking_threads"));
}

/// Threads of this process whose name starts with `prefix` (Linux: the
/// kernel keeps the first 15 bytes of a thread's name).
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|comm| comm.starts_with(prefix))
                .count()
        })
        .unwrap_or(0)
}

#[test]
#[cfg(target_os = "linux")]
fn idle_pool_threads_exit_after_the_keep_alive() {
    let rt = fairlane::Runtime::builder()
        .processors(1)
        .thread_name("shrink")
        .thread_keep_alive(Duration::from_millis(20))
        .build()
        .unwrap();
    let barrier = Arc::new(Barrier::new(3));
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let barrier = barrier.clone();
            rt.spawn_blocking(move || {
                barrier.wait();
            })
        })
        .collect();
    for h in handles {
        rt.block_on(h).unwrap();
    }
    // The barrier needed three pool threads at once (the pool grew); they
    // may already be leaving.
    // Not a timing assertion: wait (up to the generous deadline) for the
    // idle threads to leave.
    let deadline = std::time::Instant::now() + DEADLINE;
    while threads_named("shrink-blocking") > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "idle blocking threads never exited"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

// ---- block_in_place ---------------------------------------------------------

#[test]
fn block_in_place_on_the_only_processor_lets_the_other_tasks_run() {
    with_deadline(
        "block_in_place_one_processor",
        DEADLINE,
        String::new,
        || {
            let rt = runtime(1);
            let (tx, rx) = mpsc::channel::<&'static str>();
            let waiter =
                rt.spawn(async move { fairlane::task::block_in_place(|| rx.recv().unwrap()) });
            // Runs while the waiter blocks: on the replacement of processor 0.
            let sender = rt.spawn(async move {
                let on = std::thread::current().name().map(String::from);
                tx.send("sent").unwrap();
                on
            });
            assert_eq!(rt.block_on(waiter).unwrap(), "sent");
            let on = rt.block_on(sender).unwrap().unwrap();
            assert!(
                on == "fairlane-replacement-0" || on.starts_with("fairlane-processor"),
                "ran on {on}"
            );
        },
    );
}

#[test]
fn block_in_place_many_times_while_other_tasks_ping_pong() {
    with_deadline("block_in_place_loop", DEADLINE, String::new, || {
        let rt = runtime(2);
        let rounds = Arc::new(AtomicUsize::new(0));
        let r = rounds.clone();
        let pinger = rt.spawn(async move {
            for _ in 0..2_000 {
                r.fetch_add(1, Ordering::Relaxed);
                fairlane::yield_now().await;
            }
        });
        let blocker = rt.spawn(async move {
            let mut sum = 0;
            for i in 0..100u64 {
                // Borrows from the task: block_in_place needs no 'static.
                let local = [i, 1];
                sum += fairlane::task::block_in_place(|| local.iter().sum::<u64>());
                fairlane::yield_now().await;
            }
            sum
        });
        assert_eq!(rt.block_on(blocker).unwrap(), (0..100).sum::<u64>() + 100);
        rt.block_on(pinger).unwrap();
        assert_eq!(rounds.load(Ordering::Relaxed), 2_000);
    });
}

#[test]
fn a_panic_in_block_in_place_fails_the_task_and_the_processor_comes_back() {
    with_deadline("block_in_place_panic", DEADLINE, String::new, || {
        let rt = runtime(1);
        let err = rt
            .block_on(rt.spawn(async {
                fairlane::task::block_in_place(|| panic!("in place"));
            }))
            .unwrap_err();
        assert!(err.is_panic());
        // Processor 0 is back on its own thread and runs tasks.
        let name = rt.block_on(rt.spawn(async { std::thread::current().name().map(String::from) }));
        assert_eq!(name.unwrap().as_deref(), Some("fairlane-processor-0"));
    });
}

#[test]
fn block_in_place_off_a_processor_just_runs() {
    let rt = runtime(1);
    let here = std::thread::current().id();
    let same =
        rt.block_on(async { fairlane::task::block_in_place(|| std::thread::current().id()) });
    assert_eq!(same, here);
    assert_eq!(fairlane::task::block_in_place(|| 5), 5);
}

/// `block_in_place` in a `block_on` future (no processor): the closure may
/// run another runtime's `block_on`, and the outer runtime is current again
/// afterwards.
#[test]
fn block_in_place_in_a_block_on_future_allows_block_on_inside() {
    for mut outer in [
        fairlane::runtime::Builder::new_multi_thread(),
        fairlane::runtime::Builder::new_current_thread(),
    ] {
        let outer = outer.worker_threads(1).build().unwrap();
        let outer_id = outer.handle().id();
        let current_thread =
            outer.handle().runtime_flavor() == fairlane::runtime::RuntimeFlavor::CurrentThread;
        let got = outer.block_on(async move {
            let inside = std::panic::catch_unwind(|| {
                fairlane::task::block_in_place(|| {
                    let inner = fairlane::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    inner.block_on(async { 5 })
                })
            });
            assert_eq!(fairlane::runtime::Handle::current().id(), outer_id);
            inside.ok()
        });
        // A current-thread runtime's block_on thread is its processor:
        // block_in_place refuses there, as tokio's does.
        assert_eq!(got, if current_thread { None } else { Some(5) });
    }
}
