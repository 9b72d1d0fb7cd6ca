//! A timer's waker is dropped outside the timer lock: a waker whose drop
//! drops another `Sleep` (cancelling a timer) must not deadlock, whether
//! the waker goes when its `Sleep` is dropped or when a poll replaces it.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use common::{scaled, with_deadline, DEADLINE};
use fairlane::io::IoBackend;
use fairlane::time::{sleep, Sleep};

/// A waker that owns a pending `Sleep` and drops it when the waker goes.
struct OwnsASleep {
    sleep: std::sync::Mutex<Option<Pin<Box<Sleep>>>>,
}

impl Wake for OwnsASleep {
    fn wake(self: Arc<Self>) {}
}

impl Drop for OwnsASleep {
    fn drop(&mut self) {
        drop(self.sleep.lock().unwrap().take());
    }
}

/// A `Sleep` registered with the timer wheel, and a waker owning it.
fn waker_owning_a_pending_sleep() -> Waker {
    let mut inner = Box::pin(sleep(Duration::from_secs(3600)));
    let noop = Waker::noop();
    assert!(inner
        .as_mut()
        .poll(&mut Context::from_waker(noop))
        .is_pending());
    Waker::from(Arc::new(OwnsASleep {
        sleep: std::sync::Mutex::new(Some(inner)),
    }))
}

fn each_runtime(name: &'static str, body: fn()) {
    for backend in [IoBackend::IoUring, IoBackend::Fallback] {
        for current_thread in [true, false] {
            with_deadline(name, scaled(DEADLINE), String::new, move || {
                let mut builder = if current_thread {
                    fairlane::runtime::Builder::new_current_thread()
                } else {
                    let mut b = fairlane::runtime::Builder::new_multi_thread();
                    b.worker_threads(1);
                    b
                };
                let rt = builder.io_backend(backend).build().unwrap();
                rt.block_on(async move { body() });
            });
        }
    }
}

#[test]
fn dropping_a_sleep_whose_waker_drops_another_sleep() {
    each_runtime("dropping a sleep", || {
        let waker = waker_owning_a_pending_sleep();
        let mut outer = Box::pin(sleep(Duration::from_secs(3600)));
        assert!(outer
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        // The wheel now holds the last clone of the waker once ours goes.
        drop(waker);
        drop(outer);
    });
}

#[test]
fn repolling_a_sleep_with_a_new_waker_drops_the_old_one_unlocked() {
    each_runtime("repolling a sleep", || {
        let waker = waker_owning_a_pending_sleep();
        let mut outer = Box::pin(sleep(Duration::from_secs(3600)));
        assert!(outer
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        drop(waker);
        // A different waker replaces the one the wheel holds: the old one's
        // drop cancels the inner sleep's timer.
        let noop = Waker::noop();
        assert!(outer
            .as_mut()
            .poll(&mut Context::from_waker(noop))
            .is_pending());
    });
}
