//! The paused test clock: `time::pause`/`resume`/`advance`,
//! `Builder::start_paused` and `#[fairlane::test(start_paused = true)]`.
//! Every assertion is on the runtime's virtual `Instant`; real time only
//! bounds each scenario (`on_both_backends!` runs it under a deadline), so
//! an hour-long sleep that does not end at once fails by the deadline.
//! Where a test checks that the clock does *not* move, it gives the
//! runtime a real-time window (`quiet_window`) in which a wrong
//! auto-advance would happen, and asserts nothing about its length.
//! Run on both I/O backends: processors sleep in a different engine.

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{on_both_backends, Signal};
use fairlane::io::IoBackend;
use fairlane::net::{TcpListener, TcpStream};
use fairlane::time::{self, interval, sleep, timeout, Instant};
use fairlane::Runtime;

const SECOND: Duration = Duration::from_secs(1);

fn paused_runtime(backend: IoBackend, processors: usize) -> Runtime {
    let rt = Runtime::builder()
        .processors(processors)
        .io_backend(backend)
        .start_paused(true)
        .build()
        .expect("build runtime");
    assert_eq!(rt.io_backend(), backend);
    rt
}

/// Waits, inside the runtime, for a plain thread to signal after a short
/// real-time pause: a window in which every processor is idle and the
/// waiting task holds nothing, so that an auto-advance that should not
/// happen would.
async fn quiet_window() {
    let signal = Signal::new();
    let notifier = signal.clone();
    let thread = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        notifier.notify();
    });
    signal.wait().await;
    thread.join().unwrap();
}

on_both_backends!(
    an_hour_long_sleep_ends_at_once,
    advance_fires_the_sleeps_it_passes_and_no_others,
    interval_ticks_when_the_clock_moves,
    timeout_elapses_on_the_paused_clock,
    one_auto_advance_at_a_time_earliest_first,
    no_auto_advance_while_a_task_is_runnable,
    no_auto_advance_while_block_on_polls,
    no_auto_advance_while_a_blocking_closure_runs,
    no_auto_advance_while_a_socket_read_waits,
    resume_lets_time_flow_from_the_paused_instant,
    every_cluster_shares_the_paused_clock,
);

fn an_hour_long_sleep_ends_at_once(backend: IoBackend) {
    let rt = paused_runtime(backend, 2);
    rt.block_on(async {
        let start = Instant::now();
        sleep(Duration::from_secs(3600)).await;
        assert_eq!(Instant::now() - start, Duration::from_secs(3600));
        // From a task on a processor too.
        let task = fairlane::spawn(async move {
            sleep(Duration::from_secs(3600)).await;
            Instant::now()
        });
        assert_eq!(task.await.unwrap() - start, Duration::from_secs(7200));
    });
}

fn advance_fires_the_sleeps_it_passes_and_no_others(backend: IoBackend) {
    let rt = paused_runtime(backend, 2);
    rt.block_on(async {
        let start = Instant::now();
        // Made here, so their deadlines count from `start` whenever the
        // tasks first poll them.
        let five = fairlane::spawn(sleep(5 * SECOND));
        let fifteen = fairlane::spawn(sleep(15 * SECOND));
        time::advance(10 * SECOND).await;
        assert_eq!(Instant::now() - start, 10 * SECOND);
        five.await.unwrap();
        // Checked in the poll that saw `five` done: this thread holds the
        // clock while it polls, so nothing auto-advances meanwhile.
        assert_eq!(Instant::now() - start, 10 * SECOND);
        assert!(!fifteen.is_finished(), "advance(10 s) fired a 15 s sleep");
        fifteen.await.unwrap(); // by auto-advance
        assert_eq!(Instant::now() - start, 15 * SECOND);
    });
}

fn interval_ticks_when_the_clock_moves(backend: IoBackend) {
    let rt = paused_runtime(backend, 1);
    rt.block_on(async {
        let start = Instant::now();
        let mut ticks = interval(SECOND);
        assert_eq!(ticks.tick().await, start);
        for k in 1..=3u32 {
            time::advance(SECOND).await;
            assert_eq!(ticks.tick().await, start + k * SECOND);
            assert_eq!(Instant::now(), start + k * SECOND);
        }
        // Two periods at once: both ticks are due, delivered in a burst.
        time::advance(2 * SECOND).await;
        assert_eq!(ticks.tick().await, start + 4 * SECOND);
        assert_eq!(ticks.tick().await, start + 5 * SECOND);
        // And without `advance`, auto-advance moves the clock to each tick.
        assert_eq!(ticks.tick().await, start + 6 * SECOND);
        assert_eq!(Instant::now(), start + 6 * SECOND);
    });
}

fn timeout_elapses_on_the_paused_clock(backend: IoBackend) {
    let rt = paused_runtime(backend, 2);
    rt.block_on(async {
        let start = Instant::now();
        let never = timeout(5 * SECOND, std::future::pending::<()>()).await;
        assert!(never.is_err());
        assert_eq!(Instant::now() - start, 5 * SECOND);
        let soon = timeout(5 * SECOND, async {
            sleep(SECOND).await;
            7
        })
        .await;
        assert_eq!(soon, Ok(7));
        assert_eq!(Instant::now() - start, 6 * SECOND);
    });
}

fn one_auto_advance_at_a_time_earliest_first(backend: IoBackend) {
    let rt = paused_runtime(backend, 2);
    rt.block_on(async {
        let start = Instant::now();
        let log = Arc::new(Mutex::new(Vec::new()));
        // Scrambled, and two at the same deadline.
        let tasks: Vec<_> = [3u32, 1, 4, 2, 3]
            .into_iter()
            .map(|secs| {
                let log = log.clone();
                let nap = sleep(secs * SECOND);
                fairlane::spawn(async move {
                    nap.await;
                    log.lock().unwrap().push((secs, Instant::now() - start));
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let log = log.lock().unwrap();
        let fired: Vec<u32> = log.iter().map(|&(secs, _)| secs).collect();
        assert_eq!(fired, [1, 2, 3, 3, 4], "sleeps fired out of deadline order");
        for &(secs, at) in log.iter() {
            assert_eq!(at, secs * SECOND, "the clock passed a deadline unfired");
        }
    });
}

fn no_auto_advance_while_a_task_is_runnable(backend: IoBackend) {
    // Two processors: one spins, the other is idle all along.
    let rt = paused_runtime(backend, 2);
    rt.block_on(async {
        let start = Instant::now();
        let woke = Arc::new(AtomicBool::new(false));
        let sleeper = {
            let woke = woke.clone();
            let nap = sleep(SECOND);
            fairlane::spawn(async move {
                nap.await;
                woke.store(true, Ordering::SeqCst);
            })
        };
        // Runs without yielding for a real-time moment, then yields for a
        // while: its processor is busy or has it queued all along.
        let spinner = {
            let woke = woke.clone();
            fairlane::spawn(async move {
                let until = std::time::Instant::now() + Duration::from_millis(50);
                while std::time::Instant::now() < until {
                    assert!(!woke.load(Ordering::SeqCst), "advanced while a task ran");
                    assert_eq!(Instant::now(), start);
                }
                for _ in 0..2_000 {
                    fairlane::yield_now().await;
                    assert!(
                        !woke.load(Ordering::SeqCst),
                        "advanced while a task was runnable"
                    );
                    assert_eq!(Instant::now(), start);
                }
            })
        };
        spinner.await.unwrap();
        sleeper.await.unwrap();
        assert_eq!(Instant::now() - start, SECOND);
    });
}

fn no_auto_advance_while_block_on_polls(backend: IoBackend) {
    let rt = paused_runtime(backend, 2);
    rt.block_on(async {
        let start = Instant::now();
        let sleeper = fairlane::spawn(sleep(SECOND));
        // The processors are idle while this poll blocks its thread.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(Instant::now(), start);
        assert!(
            !sleeper.is_finished(),
            "advanced while block_on was polling"
        );
        sleeper.await.unwrap();
        assert_eq!(Instant::now() - start, SECOND);
    });
}

fn no_auto_advance_while_a_blocking_closure_runs(backend: IoBackend) {
    let rt = paused_runtime(backend, 2);
    rt.block_on(async {
        let start = Instant::now();
        let sleeper = fairlane::spawn(sleep(SECOND));
        let seen = fairlane::task::spawn_blocking(|| {
            std::thread::sleep(Duration::from_millis(50));
            Instant::now() // the runtime's clock, from its blocking pool
        });
        assert_eq!(seen.await.unwrap(), start);
        sleeper.await.unwrap();
        assert_eq!(Instant::now() - start, SECOND);
        // block_in_place holds the clock the same way.
        let inside = fairlane::spawn(async move {
            fairlane::task::block_in_place(|| {
                std::thread::sleep(Duration::from_millis(50));
                Instant::now()
            })
        });
        let later = fairlane::spawn(sleep(SECOND));
        assert_eq!(inside.await.unwrap() - start, SECOND);
        later.await.unwrap();
        assert_eq!(Instant::now() - start, 2 * SECOND);
    });
}

fn no_auto_advance_while_a_socket_read_waits(backend: IoBackend) {
    let rt = paused_runtime(backend, 2);
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let silent = TcpStream::connect(addr).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        let start = Instant::now();
        let reading = Arc::new(AtomicUsize::new(0));
        let reader = {
            let reading = reading.clone();
            fairlane::spawn(async move {
                reading.store(1, Ordering::SeqCst);
                let timed_out = timeout(SECOND, stream.read_owned(vec![0u8; 16]))
                    .await
                    .is_err();
                (timed_out, Instant::now(), stream)
            })
        };
        // The read waits on a peer that never writes: the runtime is idle
        // but for it, and the clock stays where it is.
        quiet_window().await;
        assert_eq!(reading.load(Ordering::SeqCst), 1, "the reader never ran");
        assert_eq!(Instant::now(), start, "advanced while a read was in flight");
        assert!(!reader.is_finished());
        // Moved by hand, the read's timeout fires.
        time::advance(SECOND).await;
        let (timed_out, at, _stream) = reader.await.unwrap();
        assert!(timed_out, "the silent peer's read completed");
        assert_eq!(at - start, SECOND);
        // The timed-out read is gone (dropped): nothing holds the clock.
        sleep(Duration::from_secs(3600)).await;
        assert_eq!(Instant::now() - start, Duration::from_secs(3601));
        drop(silent);
    });
}

fn resume_lets_time_flow_from_the_paused_instant(backend: IoBackend) {
    let rt = paused_runtime(backend, 2);
    rt.block_on(async {
        let start = Instant::now();
        time::advance(Duration::from_secs(3600)).await;
        let paused_at = Instant::now();
        time::resume();
        // From the paused instant, not from real time: still an hour ahead
        // of the monotonic clock.
        assert!(Instant::now() >= paused_at);
        assert!(Instant::now().into_std() > std::time::Instant::now() + Duration::from_secs(3599));
        // Timers run on real time again, never early.
        sleep(Duration::from_millis(20)).await;
        assert!(Instant::now() - paused_at >= Duration::from_millis(20));
        // And pausing again stands still where the clock has come to.
        time::pause();
        let again = Instant::now();
        assert!(again - start >= Duration::from_secs(3600) + Duration::from_millis(20));
        sleep(Duration::from_secs(60)).await;
        assert_eq!(Instant::now() - again, Duration::from_secs(60));
    });
}

fn every_cluster_shares_the_paused_clock(backend: IoBackend) {
    let rt = Runtime::builder()
        .processors(1)
        .cluster("other", 1)
        .io_backend(backend)
        .start_paused(true)
        .build()
        .expect("build runtime");
    let other = rt.cluster("other").expect("the second cluster");
    rt.block_on(async {
        let start = Instant::now();
        let far = other.spawn(async move {
            sleep(2 * SECOND).await;
            Instant::now()
        });
        let near = fairlane::spawn(async move {
            sleep(SECOND).await;
            Instant::now()
        });
        assert_eq!(near.await.unwrap() - start, SECOND);
        assert_eq!(far.await.unwrap() - start, 2 * SECOND);
    });
}

// The attribute's option.
#[fairlane::test(start_paused = true, processors = 2)]
async fn the_test_attribute_starts_paused() {
    let start = Instant::now();
    sleep(Duration::from_secs(3600)).await;
    assert_eq!(Instant::now() - start, Duration::from_secs(3600));
}

fn panic_of(f: impl FnOnce()) -> String {
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    common::panic_message(&*payload)
}

#[test]
fn misuse_panics_with_a_message() {
    let outside = panic_of(time::pause);
    assert!(outside.contains("outside a fairlane runtime"), "{outside}");
    let rt = Runtime::builder().processors(1).build().unwrap();
    let not_paused = panic_of(|| rt.block_on(time::advance(SECOND)));
    assert!(not_paused.contains("not paused"), "{not_paused}");
    let resume = panic_of(|| rt.block_on(async { time::resume() }));
    assert!(resume.contains("not paused"), "{resume}");
    let twice = panic_of(|| {
        rt.block_on(async {
            time::pause();
            time::pause();
        })
    });
    assert!(twice.contains("already paused"), "{twice}");
    // The first pause took: the runtime's clock stands still.
    rt.block_on(async {
        let start = Instant::now();
        sleep(Duration::from_secs(60)).await;
        assert_eq!(Instant::now() - start, Duration::from_secs(60));
    });
}
