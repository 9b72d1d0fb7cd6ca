//! Background tasks and graceful shutdown: foreground tasks are waited for,
//! background tasks are signalled, then cancelled after the grace period.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{with_deadline, DEADLINE};

struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn graceful_shutdown_waits_for_foreground_tasks_then_signals_background_ones() {
    with_deadline("graceful", DEADLINE, String::new, || {
        let rt = fairlane::Runtime::builder().processors(2).build().unwrap();
        let (release, gate) = mpsc::channel::<()>();
        let foreground_done = Arc::new(AtomicBool::new(false));
        let signalled_after_foreground = Arc::new(AtomicBool::new(false));
        {
            let done = foreground_done.clone();
            // Foreground: blocks (in place) until released from outside.
            rt.spawn(async move {
                fairlane::task::block_in_place(|| gate.recv().unwrap());
                done.store(true, Ordering::SeqCst);
            });
        }
        {
            let (done, signalled) = (foreground_done.clone(), signalled_after_foreground.clone());
            rt.block_on(async move {
                fairlane::task::Builder::new()
                    .background()
                    .spawn(async move {
                        fairlane::task::shutdown_requested().await;
                        signalled.store(done.load(Ordering::SeqCst), Ordering::SeqCst);
                    })
            })
            .unwrap();
        }
        let releaser = std::thread::spawn(move || {
            // Give shutdown_graceful time to start waiting; correctness does
            // not depend on it.
            std::thread::sleep(Duration::from_millis(20));
            release.send(()).unwrap();
        });
        rt.shutdown_graceful(Duration::from_secs(30));
        releaser.join().unwrap();
        assert!(
            foreground_done.load(Ordering::SeqCst),
            "a foreground task was cut short"
        );
        assert!(
            signalled_after_foreground.load(Ordering::SeqCst),
            "background tasks were signalled before the foreground ones finished, or never"
        );
    });
}

#[test]
fn background_tasks_that_ignore_the_signal_are_cancelled_after_the_grace_period() {
    with_deadline("graceful_cancel", DEADLINE, String::new, || {
        let rt = fairlane::Runtime::builder().processors(1).build().unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let counter = DropCounter(drops.clone());
            rt.block_on(async move {
                fairlane::task::Builder::new()
                    .background()
                    .spawn(async move {
                        let _counter = counter;
                        std::future::pending::<()>().await;
                    })
            })
            .unwrap();
        }
        rt.shutdown_graceful(Duration::from_millis(10));
        assert_eq!(drops.load(Ordering::SeqCst), 3);
    });
}

#[test]
fn background_tasks_never_keep_a_graceful_shutdown_waiting() {
    with_deadline("graceful_background_only", DEADLINE, String::new, || {
        let rt = fairlane::Runtime::builder().processors(2).build().unwrap();
        let spins = Arc::new(AtomicUsize::new(0));
        let s = spins.clone();
        rt.block_on(async move {
            fairlane::task::Builder::new()
                .background()
                .spawn(async move {
                    loop {
                        s.fetch_add(1, Ordering::Relaxed);
                        fairlane::yield_now().await;
                    }
                })
        })
        .unwrap();
        while spins.load(Ordering::Relaxed) < 10 {
            std::thread::yield_now();
        }
        rt.shutdown_graceful(Duration::from_millis(10));
    });
}

#[test]
fn task_builder_outside_a_runtime_is_an_error_not_a_panic() {
    let err = fairlane::task::Builder::new().spawn(async {}).unwrap_err();
    assert!(err.to_string().contains("task::Builder::spawn"), "{err}");
}
