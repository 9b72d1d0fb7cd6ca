//! Where and how task futures are dropped: never inside a wake (a task woken
//! while its runtime shuts down is dropped by the canceller, so futures that
//! wake each other under a lock, as `event-listener`'s do, cannot deadlock),
//! and a panicking destructor never aborts the process (it reaches the
//! task's join handle as a panic, and cancelling goes on with the others).
//!
//! Every scenario runs on both I/O backends.

mod common;

use std::future::{pending, poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use common::{panic_message, with_deadline, DropCounter, Signal};
use fairlane::io::IoBackend;
use fairlane::{JoinError, JoinHandle, Runtime};

/// A shutdown that deadlocks never returns: the scenarios run on a thread of
/// their own and a regression fails the test after this long instead of
/// hanging it. Generous, so that only a real hang trips it.
const HANG: Duration = Duration::from_secs(60);

fn runtime(backend: IoBackend, processors: usize) -> Runtime {
    Runtime::builder()
        .processors(processors)
        .io_backend(backend)
        .build()
        .expect("build runtime")
}

/// Awaits the handles of a runtime that is gone.
fn join<T>(handle: JoinHandle<T>) -> Result<T, JoinError> {
    futures_lite::future::block_on(handle)
}

/// Polls `future`, and notifies `parked` each time it returns `Pending`: once
/// notified, the future has registered its waker wherever it waits.
async fn parked_on<F: Future>(parked: Arc<Signal>, future: F) -> F::Output {
    let mut future = pin!(future);
    poll_fn(|cx| {
        let poll = future.as_mut().poll(cx);
        if poll.is_pending() {
            parked.notify();
        }
        poll
    })
    .await
}

/// Panics when dropped.
struct PanicOnDrop(&'static str);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("{}", self.0);
    }
}

/// Completes at its first poll with `7`, and panics when dropped afterwards.
struct ReadyThenPanicOnDrop;

impl Future for ReadyThenPanicOnDrop {
    type Output = u32;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u32> {
        Poll::Ready(7)
    }
}

impl Drop for ReadyThenPanicOnDrop {
    fn drop(&mut self) {
        panic!("drop after completion");
    }
}

/// The panic message of a join error, which must be a panic.
fn panicked_with(result: Result<impl std::fmt::Debug, JoinError>) -> String {
    let err = result.expect_err("the task must not produce its output");
    assert!(err.is_panic(), "expected a panic, got {err:?}");
    panic_message(&*err.into_panic())
}

/// A `tracing` subscriber, the process's global one, that keeps the
/// `panic` field of every warning, per thread (a global subscriber, since
/// tracing caches each callsite's interest for the whole process: with a
/// thread's own subscriber, a warning first seen on another thread can be
/// cached as uninteresting).
#[derive(Clone, Default)]
struct Warnings;

thread_local! {
    static REPORTED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Warnings {
    /// Installs the subscriber once and forgets this thread's reports.
    fn start() {
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            tracing::subscriber::set_global_default(Warnings).expect("no other global subscriber");
        });
        REPORTED.with(|r| r.borrow_mut().clear());
    }

    /// What this thread reported since `start`.
    fn reported() -> Vec<String> {
        REPORTED.with(|r| r.borrow().clone())
    }
}

impl tracing::Subscriber for Warnings {
    // Never let a callsite's interest be cached as "never" while tests
    // without this subscriber run on other threads.
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct PanicField(Option<String>);
        impl tracing::field::Visit for PanicField {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "panic" {
                    self.0 = Some(format!("panic={value:?}"));
                }
            }
        }
        if *event.metadata().level() == tracing::Level::WARN {
            let mut panic = PanicField(None);
            event.record(&mut panic);
            if let Some(panic) = panic.0 {
                REPORTED.with(|r| r.borrow_mut().push(panic));
            }
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod io_uring {
            $(
                #[test]
                fn $name() {
                    super::$name(fairlane::io::IoBackend::IoUring);
                }
            )*
        }
        mod fallback {
            $(
                #[test]
                fn $name() {
                    super::$name(fairlane::io::IoBackend::Fallback);
                }
            )*
        }
    };
}

on_both_backends!(
    shutdown_with_last_channel_sender_and_a_receiver_completes,
    shutdown_with_a_held_async_mutex_and_a_waiter_completes,
    abort_with_a_panicking_destructor_is_a_panic,
    shutdown_with_panicking_destructors_cancels_the_others,
    completed_future_whose_destructor_panics_is_a_panic,
    panic_in_poll_and_in_the_destructor_keeps_the_poll_panic,
    detached_task_whose_output_panics_when_dropped_goes_on,
);

/// A detached task (its handle dropped while it waits) completes with an
/// output that panics when dropped. Nobody can get the output, so the runner
/// drops it, and the panic is caught there: the processor goes on running
/// tasks and the runtime shuts down as usual.
fn detached_task_whose_output_panics_when_dropped_goes_on(backend: IoBackend) {
    let after = with_deadline("detached_output", HANG, String::new, move || {
        let rt = runtime(backend, 1);
        let go = Signal::new();
        let g = go.clone();
        let (dropped_tx, dropped_rx) = std::sync::mpsc::channel();
        let detached = rt.spawn(async move {
            g.wait().await;
            struct Output(std::sync::mpsc::Sender<()>);
            impl Drop for Output {
                fn drop(&mut self) {
                    let _ = self.0.send(());
                    panic!("detached output dropped");
                }
            }
            Output(dropped_tx)
        });
        drop(detached);
        go.notify();
        dropped_rx.recv().expect("the output is dropped");
        // The same processor runs the next task.
        let after = rt.block_on(rt.spawn(async { "still running" })).unwrap();
        drop(rt);
        after
    });
    assert_eq!(after, "still running");
}

/// One task holds the last `async_channel::Sender`, another waits in
/// `recv()`. Dropping the sender's task (the runtime is dropped) closes the
/// channel, whose `notify` wakes the receiver under `event-listener`'s lock;
/// the receiver's listener takes the same lock when it is dropped, so it
/// must not be dropped inside that wake.
fn shutdown_with_last_channel_sender_and_a_receiver_completes(backend: IoBackend) {
    let received = with_deadline("channel_shutdown", HANG, String::new, move || {
        let rt = runtime(backend, 2);
        let (tx, rx) = async_channel::unbounded::<u32>();
        let parked = Signal::new();
        // The sender first: shutdown cancels the parked tasks in spawn order.
        let p = parked.clone();
        let sender = rt.spawn(parked_on(p, async move {
            let _tx = tx;
            pending::<()>().await
        }));
        parked.wait_blocking();
        let p = parked.clone();
        let receiver = rt.spawn(parked_on(p, async move { rx.recv().await }));
        parked.wait_blocking();
        drop(rt);
        assert!(join(sender).unwrap_err().is_cancelled());
        join(receiver)
    });
    // The receiver was cancelled before it could see the channel closed.
    assert!(received.unwrap_err().is_cancelled());
}

/// One task holds an `async_lock::Mutex` guard, another waits for the lock:
/// releasing the guard at shutdown wakes the waiter under the lock its
/// listener's drop takes.
fn shutdown_with_a_held_async_mutex_and_a_waiter_completes(backend: IoBackend) {
    with_deadline("mutex_shutdown", HANG, String::new, move || {
        let rt = runtime(backend, 2);
        let mutex = Arc::new(async_lock::Mutex::new(0u32));
        let parked = Signal::new();
        let (m, p) = (mutex.clone(), parked.clone());
        let holder = rt.spawn(async move {
            let _guard = m.lock().await;
            parked_on(p, pending::<()>()).await
        });
        parked.wait_blocking();
        let (m, p) = (mutex.clone(), parked.clone());
        let waiter = rt.spawn(parked_on(p, async move { *m.lock().await += 1 }));
        parked.wait_blocking();
        drop(rt);
        assert!(join(holder).unwrap_err().is_cancelled());
        assert!(join(waiter).unwrap_err().is_cancelled());
        // Both futures are gone: the lock is free and untouched.
        assert_eq!(*mutex.try_lock().expect("nobody holds the lock"), 0);
    });
}

/// Aborting a task whose future panics when dropped: the processor survives,
/// and the handle reports the destructor's panic.
fn abort_with_a_panicking_destructor_is_a_panic(backend: IoBackend) {
    with_deadline("abort_panicking_drop", HANG, String::new, move || {
        let rt = runtime(backend, 1);
        let parked = Signal::new();
        let p = parked.clone();
        let task = rt.spawn(async move {
            let _bomb = PanicOnDrop("drop on abort");
            parked_on(p, pending::<()>()).await
        });
        parked.wait_blocking();
        task.abort();
        assert_eq!(panicked_with(rt.block_on(task)), "drop on abort");
        // The processor goes on running tasks.
        assert_eq!(rt.block_on(rt.spawn(async { 3 })).unwrap(), 3);
    });
}

/// Runtime drop with parked tasks whose futures panic when dropped, some
/// cancelled directly and one woken by another's drop (so dropped by the
/// canceller later): every handle of a panicking one reports its panic, and
/// every other task is still cancelled.
fn shutdown_with_panicking_destructors_cancels_the_others(backend: IoBackend) {
    with_deadline("shutdown_panicking_drops", HANG, String::new, move || {
        // One at a time: the subscriber is this thread's, and tracing's
        // callsite cache is the process's.
        let _serial = common::serial();
        const OTHERS: usize = 8;
        let rt = runtime(backend, 2);
        let dropped = Arc::new(AtomicUsize::new(0));
        let parked = Signal::new();
        let mut others = Vec::new();
        let p = parked.clone();
        let first = rt.spawn(async move {
            let _bomb = PanicOnDrop("first");
            parked_on(p, pending::<()>()).await
        });
        parked.wait_blocking();
        for _ in 0..OTHERS / 2 {
            let (d, p) = (dropped.clone(), parked.clone());
            others.push(rt.spawn(async move {
                let _counter = DropCounter(d);
                parked_on(p, pending::<()>()).await
            }));
            parked.wait_blocking();
        }
        // A task that holds the last sender of a channel whose receiver task
        // panics when dropped: the receiver is woken by the sender's drop.
        let (tx, rx) = async_channel::bounded::<()>(1);
        let p = parked.clone();
        let sender = rt.spawn(parked_on(p, async move {
            let _tx = tx;
            pending::<()>().await
        }));
        parked.wait_blocking();
        let p = parked.clone();
        let receiver = rt.spawn(async move {
            let _bomb = PanicOnDrop("woken during shutdown");
            parked_on(p, rx.recv()).await
        });
        parked.wait_blocking();
        for _ in OTHERS / 2..OTHERS {
            let (d, p) = (dropped.clone(), parked.clone());
            others.push(rt.spawn(async move {
                let _counter = DropCounter(d);
                parked_on(p, pending::<()>()).await
            }));
            parked.wait_blocking();
        }
        // The canceller is this thread: what it reports is seen here.
        Warnings::start();
        drop(rt);
        let mut reported = Warnings::reported();
        reported.sort();
        assert_eq!(
            reported,
            ["panic=\"first\"", "panic=\"woken during shutdown\""],
            "each destructor's panic is reported once, through tracing"
        );
        assert_eq!(dropped.load(Ordering::SeqCst), OTHERS);
        assert_eq!(panicked_with(join(first)), "first");
        assert_eq!(panicked_with(join(receiver)), "woken during shutdown");
        assert!(join(sender).unwrap_err().is_cancelled());
        for other in others {
            assert!(join(other).unwrap_err().is_cancelled());
        }
    });
}

/// A future that completes and then panics when dropped: as in tokio, its
/// output is lost and the handle reports the destructor's panic.
fn completed_future_whose_destructor_panics_is_a_panic(backend: IoBackend) {
    with_deadline("completed_panicking_drop", HANG, String::new, move || {
        let rt = runtime(backend, 1);
        let task = rt.spawn(ReadyThenPanicOnDrop);
        assert_eq!(panicked_with(rt.block_on(task)), "drop after completion");
        // Also for a detached task, whose output nobody awaits.
        let finished = Arc::new(Mutex::new(false));
        let f = finished.clone();
        drop(rt.spawn(ReadyThenPanicOnDrop));
        rt.block_on(rt.spawn(async move { *f.lock().unwrap() = true }))
            .unwrap();
        assert!(*finished.lock().unwrap());
        assert_eq!(rt.block_on(rt.spawn(async { 3 })).unwrap(), 3);
    });
}

/// A future that panics in `poll`, and again when the task drops it after
/// that: the handle reports the poll's panic.
fn panic_in_poll_and_in_the_destructor_keeps_the_poll_panic(backend: IoBackend) {
    struct PanicsTwice;
    impl Future for PanicsTwice {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            panic!("poll")
        }
    }
    impl Drop for PanicsTwice {
        fn drop(&mut self) {
            panic!("drop after the poll panicked");
        }
    }
    with_deadline("poll_and_drop_panic", HANG, String::new, move || {
        let rt = runtime(backend, 1);
        let task = rt.spawn(PanicsTwice);
        assert_eq!(panicked_with(rt.block_on(task)), "poll");
        assert_eq!(rt.block_on(rt.spawn(async { 3 })).unwrap(), 3);
    });
}
