//! Loom model of the task cell's state machine (`src/task.md`), compiled
//! from the production module (`src/task/`): wakes racing polls, each other,
//! completion, the join handle and the last reference. In every execution
//! the task is queued at most once, every wake that needs a poll gets one,
//! the output reaches the join handle or is dropped exactly once, and the
//! cell is freed exactly once.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p fairlane-core --release --test loom_task`
#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use fairlane_core::loom_task::{raise_and_wake, spawn, JoinHandle, Runnable, Schedule};
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

/// The ready queue of the model: the schedule function pushes here.
type Queue = Arc<Mutex<Vec<Runnable<Meta>>>>;

/// The metadata of a model task: its queue, and a count of cells freed
/// (the metadata is dropped when its cell is).
struct Meta {
    queue: Queue,
    freed: Arc<AtomicUsize>,
}

impl Drop for Meta {
    fn drop(&mut self) {
        self.freed.fetch_add(1, Ordering::Relaxed);
    }
}

impl Schedule for Meta {
    fn schedule(runnable: Runnable<Self>) {
        // The queue is reached before the push: once pushed, the runnable
        // (and its metadata) may be another thread's.
        let queue = runnable.metadata().queue.clone();
        queue.lock().unwrap().push(runnable);
    }
}

/// What a waiting task and the one that wakes it share, under one lock (as
/// a channel's state and its waiters are).
#[derive(Default)]
struct Gate {
    open: bool,
    waiter: Option<Waker>,
}

/// Opens the gate and wakes the task waiting at it, if any.
fn open(gate: &Mutex<Gate>) {
    let waiter = {
        let mut gate = gate.lock().unwrap();
        gate.open = true;
        gate.waiter.take()
    };
    if let Some(waker) = waiter {
        waker.wake();
    }
}

/// Completes, with the number of polls so far, once its gate is open (or
/// with `None` once `aborted`); otherwise waits at the gate.
struct Waiting {
    gate: Arc<Mutex<Gate>>,
    aborted: Arc<AtomicBool>,
    polls: Arc<AtomicUsize>,
}

impl Future for Waiting {
    type Output = Option<usize>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<usize>> {
        let polls = self.polls.fetch_add(1, Ordering::Relaxed) + 1;
        // Acquire pairs with the abort's Release, as `Supervised::poll`'s.
        if self.aborted.load(Ordering::Acquire) {
            return Poll::Ready(None);
        }
        let mut gate = self.gate.lock().unwrap();
        if gate.open {
            Poll::Ready(Some(polls))
        } else {
            gate.waiter = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

/// One model task and what its test looks at.
struct Model {
    queue: Queue,
    freed: Arc<AtomicUsize>,
    gate: Arc<Mutex<Gate>>,
    aborted: Arc<AtomicBool>,
    polls: Arc<AtomicUsize>,
}

impl Model {
    fn new() -> Self {
        Self {
            queue: Arc::new(Mutex::new(Vec::new())),
            freed: Arc::new(AtomicUsize::new(0)),
            gate: Arc::new(Mutex::new(Gate::default())),
            aborted: Arc::new(AtomicBool::new(false)),
            polls: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn spawn(&self) -> (Runnable<Meta>, JoinHandle<Option<usize>, Meta>) {
        let meta = Meta {
            queue: self.queue.clone(),
            freed: self.freed.clone(),
        };
        let future = Waiting {
            gate: self.gate.clone(),
            aborted: self.aborted.clone(),
            polls: self.polls.clone(),
        };
        spawn(meta, move |_| future)
    }

    fn queued(&self) -> usize {
        self.queue.lock().unwrap().len()
    }

    /// Runs what is queued until nothing is.
    fn drain(&self) {
        loop {
            let next = self.queue.lock().unwrap().pop();
            match next {
                Some(runnable) => runnable.run(),
                None => return,
            }
        }
    }

    fn polls(&self) -> usize {
        self.polls.load(Ordering::Relaxed)
    }

    fn freed(&self) -> usize {
        self.freed.load(Ordering::Relaxed)
    }
}

/// Polls `handle` once with a no-op waker.
fn poll_once<T>(handle: &mut JoinHandle<T, Meta>) -> Poll<Option<T>> {
    Pin::new(handle).poll(&mut Context::from_waker(Waker::noop()))
}

/// A wake races the poll that completes the task, while a third thread
/// awaits the join handle. The wake finds the task queued (no-op), running
/// (re-queued once after the poll), idle (queued) or complete (no-op); in
/// each case the task completes, the handle gets the output and is woken,
/// and nothing stays queued.
#[test]
fn wake_racing_the_completing_poll() {
    model(|| {
        let m = Model::new();
        let (runnable, handle) = m.spawn();
        let runner = thread::spawn(move || runnable.run());
        let gate = m.gate.clone();
        let waker = thread::spawn(move || open(&gate));
        let awaiter = thread::spawn(move || loom::future::block_on(handle));
        runner.join().unwrap();
        waker.join().unwrap();
        // A wake after the first poll queued the task again.
        m.drain();
        let out = awaiter.join().unwrap();
        assert_eq!(out, Some(Some(m.polls())));
        assert!(m.polls() <= 2, "polled {} times", m.polls());
        assert_eq!(m.queued(), 0);
        assert_eq!(m.freed(), 1);
    });
}

/// Two threads wake a parked task at once (one by reference, one by
/// value): it is queued exactly once, and polled once more.
#[test]
fn wake_from_two_threads_at_once() {
    model(|| {
        let m = Model::new();
        let (runnable, mut handle) = m.spawn();
        let first = runnable.waker();
        let second = first.clone();
        runnable.run();
        assert_eq!(m.polls(), 1);
        assert!(poll_once(&mut handle).is_pending());
        let a = thread::spawn(move || first.wake_by_ref());
        let b = thread::spawn(move || second.wake());
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(m.queued(), 1);
        m.drain();
        assert_eq!(m.polls(), 2);
        assert_eq!(m.queued(), 0);
        // The gate never opened: parked again (its waker is in the gate).
        assert!(poll_once(&mut handle).is_pending());
        drop(handle);
        assert_eq!(m.freed(), 0);
        m.gate.lock().unwrap().waiter = None;
        assert_eq!(m.freed(), 1);
    });
}

/// An abort (`raise_and_wake`, as `TaskState::abort` and
/// `AbortHandle::abort`) races the poll that completes the task: the task
/// completes once, with its output or as aborted, is never queued again,
/// and is freed once, whichever thread drops the last reference.
#[test]
fn abort_racing_completion() {
    model(|| {
        let m = Model::new();
        let (runnable, handle) = m.spawn();
        let own_waker = runnable.waker();
        runnable.run();
        // The gate opens: the task is queued to complete.
        open(&m.gate);
        let next = m.queue.lock().unwrap().pop().expect("queued by the gate");
        let runner = thread::spawn(move || next.run());
        let aborted = m.aborted.clone();
        let aborter = thread::spawn(move || raise_and_wake(&aborted, own_waker));
        runner.join().unwrap();
        aborter.join().unwrap();
        // A wake of a running or complete task queues nothing.
        assert_eq!(m.queued(), 0);
        assert_eq!(m.polls(), 2);
        let out = loom::future::block_on(handle);
        assert!(out == Some(Some(2)) || out == Some(None), "{out:?}");
        assert_eq!(m.freed(), 1);
    });
}

/// An abort races the poll of a task that is queued while its gate is
/// still closed (a spurious wake queued it): the abort's wake finds the task
/// queued or running, and either way the task's next poll sees the flag, so
/// the task completes aborted. A wake by reference in `raise_and_wake`
/// loses the abort here: it writes nothing to a queued task's state word,
/// so the poll may read the flag unset and park the task for good.
#[test]
fn abort_racing_the_poll_of_a_queued_task() {
    model(|| {
        let m = Model::new();
        let (runnable, mut handle) = m.spawn();
        let own_waker = runnable.waker();
        runnable.run();
        // Woken with the gate still closed: queued, and will park again.
        own_waker.wake_by_ref();
        let next = m.queue.lock().unwrap().pop().expect("queued by the wake");
        let runner = thread::spawn(move || next.run());
        let aborted = m.aborted.clone();
        let aborter = thread::spawn(move || raise_and_wake(&aborted, own_waker));
        runner.join().unwrap();
        aborter.join().unwrap();
        m.drain();
        assert!(handle.is_finished(), "the abort was lost");
        assert_eq!(poll_once(&mut handle), Poll::Ready(Some(None)));
        drop(handle);
        // The gate still holds the waker of the first poll.
        m.gate.lock().unwrap().waiter = None;
        assert_eq!(m.freed(), 1);
    });
}

/// An output that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Spawns a task that completes at its first poll with a `Counted`.
fn spawn_ready(m: &Model, drops: &Arc<AtomicUsize>) -> (Runnable<Meta>, JoinHandle<Counted, Meta>) {
    let meta = Meta {
        queue: m.queue.clone(),
        freed: m.freed.clone(),
    };
    let output = Counted(drops.clone());
    spawn(meta, move |_| async move { output })
}

/// The join handle is dropped while the task completes: the output is
/// dropped exactly once, by the runner (handle gone first) or by the handle
/// (task complete first), and the cell is freed once.
#[test]
fn join_handle_dropped_racing_completion() {
    model(|| {
        let m = Model::new();
        let drops = Arc::new(AtomicUsize::new(0));
        let (runnable, handle) = spawn_ready(&m, &drops);
        let runner = thread::spawn(move || runnable.run());
        let dropper = thread::spawn(move || drop(handle));
        runner.join().unwrap();
        dropper.join().unwrap();
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert_eq!(m.freed(), 1);
    });
}

/// A detached task completes while another thread wakes it by value and
/// drops another waker: whoever gives up the last reference (the runner or
/// the waking thread) frees the cell, once; the output was dropped by the
/// runner, never by a wake.
#[test]
fn last_waker_dropped_on_another_thread() {
    model(|| {
        let m = Model::new();
        let drops = Arc::new(AtomicUsize::new(0));
        let (runnable, handle) = spawn_ready(&m, &drops);
        drop(handle);
        let waker = runnable.waker();
        let other = waker.clone();
        let runner = thread::spawn(move || runnable.run());
        let waking = thread::spawn(move || {
            waker.wake();
            drop(other);
        });
        runner.join().unwrap();
        waking.join().unwrap();
        assert_eq!(m.queued(), 0);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert_eq!(m.freed(), 1);
    });
}

/// Exhaustive up to a preemption bound of 3 (`LOOM_MAX_PREEMPTIONS`
/// overrides it).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}
