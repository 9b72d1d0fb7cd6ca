//! Timers: order, cancellation by `timeout`, intervals, timers set from
//! threads that are not processors, and an idle runtime full of pending
//! timers that uses no CPU. Run on both I/O backends (the timer wheel is the
//! same, but the processors sleep in a different engine).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairlane::io::IoBackend;
use fairlane::time::{interval, sleep, sleep_until, timeout, Instant};
use fairlane::Runtime;

fn runtime(backend: IoBackend, processors: usize) -> Runtime {
    let rt = Runtime::builder()
        .processors(processors)
        .io_backend(backend)
        .build()
        .expect("build runtime");
    assert_eq!(rt.io_backend(), backend);
    rt
}

// Every test takes the serial lock: the CPU-time test measures the whole
// process, so nothing else may run beside it.
const BACKENDS: [IoBackend; 2] = [IoBackend::IoUring, IoBackend::Fallback];

#[test]
fn timers_fire_in_deadline_order() {
    let _serial = common::serial();
    const SPACING: Duration = Duration::from_millis(30);
    for backend in BACKENDS {
        let rt = runtime(backend, 2);
        let log = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now() + Duration::from_millis(20);
        let deadline = move |i: usize| start + SPACING * i as u32;
        // Spawned in scrambled order, deadlines 30 ms apart.
        let order = [7usize, 2, 9, 0, 5, 1, 8, 3, 6, 4];
        let tasks: Vec<_> = order
            .iter()
            .map(|&i| {
                let log = log.clone();
                rt.spawn(async move {
                    sleep_until(deadline(i)).await;
                    log.lock().unwrap().push((i, Instant::now()));
                })
            })
            .collect();
        rt.block_on(async {
            for t in tasks {
                t.await.unwrap();
            }
        });
        let log = log.lock().unwrap();
        for &(i, at) in log.iter() {
            assert!(at >= deadline(i), "{backend}: timer {i} fired early");
        }
        // The order is the deadlines' order, unless the machine stalled a
        // task by more than the spacing (then two timers may fire together
        // and their tasks run in either order): only that is excused.
        let stalled = log.iter().any(|&(i, at)| at - deadline(i) >= SPACING);
        let fired: Vec<usize> = log.iter().map(|&(i, _)| i).collect();
        if !stalled {
            assert_eq!(fired, (0..10).collect::<Vec<_>>(), "{backend}");
        } else {
            eprintln!("{backend}: a task was stalled longer than {SPACING:?}; order not checked: {fired:?}");
        }
    }
}

#[test]
fn sleep_never_returns_early() {
    let _serial = common::serial();
    for backend in BACKENDS {
        let rt = runtime(backend, 2);
        rt.block_on(async {
            for ms in [0u64, 1, 2, 5, 13] {
                let before = Instant::now();
                sleep(Duration::from_millis(ms)).await;
                assert!(before.elapsed() >= Duration::from_millis(ms));
                let t = rt_spawn_sleep(ms).await;
                assert!(t >= Duration::from_millis(ms));
            }
        });
    }
}

async fn rt_spawn_sleep(ms: u64) -> Duration {
    fairlane::spawn(async move {
        let before = Instant::now();
        sleep(Duration::from_millis(ms)).await;
        before.elapsed()
    })
    .await
    .unwrap()
}

#[test]
fn timeout_cancels_the_future_and_passes_results() {
    let _serial = common::serial();
    for backend in BACKENDS {
        let rt = runtime(backend, 2);
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        struct Flag(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let flag = Flag(dropped.clone());
        let result = rt.block_on(rt.spawn(async move {
            timeout(Duration::from_millis(10), async move {
                let _flag = flag;
                sleep(Duration::from_secs(3600)).await;
            })
            .await
        }));
        let err = result.unwrap().unwrap_err();
        assert_eq!(err.to_string(), "deadline has elapsed");
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
        let ok = rt.block_on(timeout(Duration::from_secs(3600), async {
            sleep(Duration::from_millis(1)).await;
            7
        }));
        assert_eq!(ok, Ok(7));
    }
}

#[test]
fn interval_ticks_on_schedule() {
    let _serial = common::serial();
    for backend in BACKENDS {
        let rt = runtime(backend, 1);
        rt.block_on(async {
            let mut iv = interval(Duration::from_millis(3));
            let first = iv.tick().await;
            let mut last = first;
            for n in 1..=5u32 {
                let t = iv.tick().await;
                assert_eq!(t, first + Duration::from_millis(3) * n);
                assert!(Instant::now() >= t);
                last = t;
            }
            assert_eq!(last - first, Duration::from_millis(15));
        });
    }
}

#[test]
fn timers_from_plain_threads_wake_sleeping_processors() {
    let _serial = common::serial();
    for backend in BACKENDS {
        let rt = runtime(backend, 2);
        let handle = rt.handle().clone();
        // Processors are asleep (nothing to do); each thread's sleep is on
        // a processor's wheel, which must wake to fire it.
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let handle = handle.clone();
                std::thread::spawn(move || {
                    handle.block_on(async move {
                        let before = Instant::now();
                        sleep(Duration::from_millis(10 + i)).await;
                        before.elapsed()
                    })
                })
            })
            .collect();
        for (i, t) in threads.into_iter().enumerate() {
            assert!(t.join().unwrap() >= Duration::from_millis(10 + i as u64));
        }
    }
}

#[test]
fn dropping_many_sleeps_cancels_them() {
    let _serial = common::serial();
    for backend in BACKENDS {
        let rt = runtime(backend, 2);
        rt.block_on(async {
            let tasks: Vec<_> = (0..1000)
                .map(|i| fairlane::spawn(async move { sleep(Duration::from_secs(3600 + i)).await }))
                .collect();
            fairlane::yield_now().await;
            for t in &tasks {
                t.abort();
            }
            for t in tasks {
                assert!(t.await.unwrap_err().is_cancelled());
            }
            // The runtime still runs timers.
            sleep(Duration::from_millis(2)).await;
        });
    }
}

#[test]
fn idle_runtime_with_10_000_sleeps_uses_no_cpu() {
    let _serial = common::serial();
    for backend in BACKENDS {
        let rt = runtime(backend, 2);
        let tasks: Vec<_> = (0..10_000u64)
            .map(|i| rt.spawn(async move { sleep(Duration::from_secs(3600 + i % 100)).await }))
            .collect();
        // Every task has registered its timer once it has been polled;
        // then wait until the processors sleep, by their counters.
        rt.block_on(async {
            while rt.metrics().processors.iter().map(|p| p.polls).sum::<u64>() < 10_000 {
                sleep(Duration::from_millis(1)).await;
            }
        });
        common::settle_asleep(&rt, &format!("{backend}"));
        common::assert_idle_for_a_second(&rt, &format!("{backend}"));
        for t in &tasks {
            t.abort();
        }
        drop(tasks);
    }
}

#[test]
fn timers_from_everywhere_under_churn() {
    let _serial = common::serial();
    for backend in BACKENDS {
        let rt = runtime(backend, 2);
        // Tasks and plain threads set, cancel and await timers at once; every
        // sleep that is awaited completes, none early.
        let tasks: Vec<_> = (0..64u64)
            .map(|t| {
                rt.spawn(async move {
                    let mut rng = common::Rng::new(t + 1);
                    for _ in 0..20 {
                        let d = Duration::from_micros(rng.below(3000) as u64);
                        if rng.below(2) == 0 {
                            let before = Instant::now();
                            sleep(d).await;
                            assert!(before.elapsed() >= d);
                        } else {
                            // Cancelled by the timeout (or completes first).
                            let _ = timeout(d, sleep(d * 2)).await;
                        }
                    }
                })
            })
            .collect();
        let threads: Vec<_> = (0..3u64)
            .map(|t| {
                let handle = rt.handle().clone();
                std::thread::spawn(move || {
                    let mut rng = common::Rng::new(100 + t);
                    handle.block_on(async move {
                        for _ in 0..30 {
                            let d = Duration::from_micros(rng.below(2000) as u64);
                            let before = Instant::now();
                            let r = timeout(d * 3, sleep(d)).await;
                            assert!(r.is_ok() || before.elapsed() >= d * 3);
                            assert!(before.elapsed() >= d);
                        }
                    })
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        rt.block_on(async {
            for t in tasks {
                t.await.unwrap();
            }
        });
    }
}

/// `Sleep::is_elapsed` is tokio's: false until the sleep was polled (even
/// with its deadline passed), true once it completed, and true for a polled
/// sleep whose deadline passed.
#[test]
fn is_elapsed_needs_a_poll() {
    let rt = fairlane::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut past = Box::pin(fairlane::time::sleep_until(fairlane::time::Instant::now()));
        assert!(!past.is_elapsed());
        past.as_mut().await;
        assert!(past.is_elapsed());

        let mut soon = Box::pin(fairlane::time::sleep(std::time::Duration::from_millis(1)));
        assert!(futures_lite::future::poll_once(soon.as_mut())
            .await
            .is_none());
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(soon.is_elapsed());
        soon.as_mut()
            .reset(fairlane::time::Instant::now() + std::time::Duration::from_secs(60));
        assert!(!soon.is_elapsed());
    });
}
