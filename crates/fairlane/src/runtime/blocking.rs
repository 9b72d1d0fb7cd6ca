//! The blocking pool: threads for closures that block, so that no processor
//! is ever held by one.
//!
//! Threads are started when a job arrives and none is idle, up to
//! `max_blocking_threads`; an idle thread exits after `thread_keep_alive`
//! without work. Shutdown drops the jobs that have not started and waits for
//! the running ones (as long as the caller's deadline allows).
//!
//! A job's result travels to the awaiting task through a [`Oneshot`]; the
//! task side is an ordinary fairlane task, so `spawn_blocking` hands out the
//! same [`JoinHandle`](crate::JoinHandle) as `spawn`.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use fairlane_core::Host;

use super::threads::ThreadSpec;
use super::{context, wait_until, Handle};
use crate::task::{self, Id};
use crate::time::clock::Hold;

type Job = Box<dyn FnOnce() + Send>;

/// Runs `f` on the calling thread. On a processor, first hands the
/// processor to a replacement thread, so that the tasks queued on it run
/// while `f` blocks, and takes it back afterwards (after the replacement
/// finished the poll it is in). Elsewhere `f` just runs.
///
/// # Panics
/// In the `block_on` of a current-thread runtime (its future or its
/// tasks), as tokio does: that thread is the runtime's only processor, and
/// nothing could run its tasks meanwhile.
#[track_caller]
pub(crate) fn block_in_place<F: FnOnce() -> R, R>(f: F) -> R {
    if context::drives_current_thread() {
        panic!(
            "task::block_in_place cannot be called on a current_thread runtime: the thread in \
             block_on is its only processor, and its tasks would wait for `f`; use \
             task::spawn_blocking, or a runtime from Builder::new_multi_thread"
        );
    }
    let Some((handle, p)) =
        context::with_current(|h| h.cluster.host().current_processor().map(|p| (h.clone(), p)))
            .flatten()
    else {
        // Not a processor: a `block_on` thread (its future is what calls
        // this) or no runtime's. Only the caller waits for this thread;
        // while `f` runs it may `block_on`, as a blocking thread may.
        let _context = context::with_current(Handle::clone).map(context::enter_blocking);
        return f();
    };
    let cluster = handle.cluster.clone();
    // `f` may make work the processors cannot see: a paused clock does not
    // auto-advance until this thread is processor `p` again.
    let hold = handle.clock().hold();
    // From here until `reclaim`, this thread is not processor `p`: it must
    // not push as `p` (the replacement owns `p`'s state), and while `f` runs
    // it may `block_on` like any blocking thread.
    cluster.host().unregister_current();
    let context = context::enter_blocking(handle.clone());
    let replacement = {
        let runner = handle.clone();
        handle.shared.thread_spec.spawn(
            &handle,
            |_| format!("fairlane-replacement-{p}"),
            move || runner.run_processor(p, false),
        )
    };
    let result = catch_unwind(AssertUnwindSafe(f));
    if let Ok(replacement) = replacement {
        cluster.release_processor(p);
        // The replacement only returns from the core loop; it cannot panic.
        let _ = replacement.join();
        // False if `p` was removed meanwhile: the core then treats this
        // thread as an outside one until the poll ends, and the processor
        // loop returns after it.
        let _still_a_processor = cluster.reclaim_processor(p);
    }
    // With no replacement thread (the OS refused one), the queued tasks
    // waited for `f`, as they would have without `block_in_place`.
    drop(context);
    cluster.host().register_current(p);
    drop(hold);
    match result {
        Ok(value) => value,
        Err(panic) => resume_unwind(panic),
    }
}

pub(crate) struct BlockingPool {
    state: Mutex<PoolState>,
    /// Signals idle threads that a job arrived (or shutdown began).
    work: Condvar,
    /// Signals `shutdown` that a thread exited.
    exited: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    spec: ThreadSpec,
}

#[derive(Default)]
struct PoolState {
    queue: VecDeque<Job>,
    /// Threads taking jobs (counted against `max_threads`).
    threads: usize,
    /// Threads started and not yet finished, stop hook included (what
    /// shutdown waits for).
    alive: usize,
    idle: usize,
    shutdown: bool,
    next_thread: usize,
}

impl BlockingPool {
    pub(crate) fn new(max_threads: usize, keep_alive: Duration, spec: ThreadSpec) -> Self {
        Self {
            state: Mutex::new(PoolState::default()),
            work: Condvar::new(),
            exited: Condvar::new(),
            max_threads,
            keep_alive,
            spec,
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // Jobs run outside the lock and the pool's own code does not panic
        // while holding it, so poisoning carries no broken invariant.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `f` and returns a future of its result. `handle` is the
    /// runtime the pool's threads make current; `f` runs as task `id` (the
    /// task awaiting the result), for `task::id`.
    pub(crate) fn run<F, R>(self: &Arc<Self>, handle: &Handle, id: Id, f: F) -> BlockingResult<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let oneshot = Arc::new(Oneshot::<R>::default());
        // Held until the job has run (or is dropped) and woken its task:
        // a paused clock does not auto-advance meanwhile.
        let sender = Sender(oneshot.clone(), handle.clock().hold());
        let job: Job = Box::new(move || {
            let _id = task::id::enter(Some(id));
            sender.run(f)
        });
        let mut state = self.lock();
        if state.shutdown {
            drop(state);
            drop(job); // closes the oneshot: the result is "cancelled"
            return BlockingResult { oneshot };
        }
        state.queue.push_back(job);
        if state.idle > 0 {
            self.work.notify_one();
        }
        // Each idle thread takes one queued job when it wakes, and one that
        // was notified counts as idle until it has woken and taken the lock:
        // so `idle` alone cannot tell whether this job has a thread. Jobs
        // beyond the idle threads get a new thread, or one queued behind a
        // job that runs for long (one that waits for this one) would wait
        // for it.
        if state.queue.len() > state.idle && state.threads < self.max_threads {
            let id = state.next_thread;
            state.next_thread += 1;
            state.threads += 1;
            state.alive += 1;
            let (pool, pool_handle) = (self.clone(), handle.clone());
            let spawned = self.spec.spawn(
                handle,
                |prefix| format!("{prefix}-blocking-{id}"),
                move || pool.thread_main(pool_handle),
            );
            if spawned.is_err() {
                // No new thread: the job waits for a running one to finish
                // its current job (or, with none, is cancelled at shutdown).
                state.threads -= 1;
                state.alive -= 1;
            }
        }
        BlockingResult { oneshot }
    }

    /// A pool thread's loop; the guard it returns counts the thread out
    /// once dropped, after the stop hook.
    fn thread_main(self: Arc<Self>, handle: Handle) -> Exited {
        let _context = context::enter_blocking(handle);
        let mut state = self.lock();
        loop {
            if let Some(job) = state.queue.pop_front() {
                drop(state);
                job();
                state = self.lock();
                continue;
            }
            if state.shutdown {
                break;
            }
            state.idle += 1;
            let (next, timeout) = self
                .work
                .wait_timeout(state, self.keep_alive)
                .unwrap_or_else(|e| e.into_inner());
            state = next;
            state.idle -= 1;
            if timeout.timed_out() && state.queue.is_empty() {
                break;
            }
        }
        state.threads -= 1;
        drop(state);
        Exited(self)
    }

    /// Drops the jobs not started, then waits until every thread has exited
    /// or `deadline` passed (threads still in a job then finish it alone).
    pub(crate) fn shutdown(&self, deadline: Option<Instant>) {
        let mut state = self.lock();
        state.shutdown = true;
        let queued = std::mem::take(&mut state.queue);
        self.work.notify_all();
        drop(state);
        drop(queued); // outside the lock: dropping a job wakes its task
        let state = self.lock();
        drop(wait_until(&self.exited, state, deadline, |s| s.alive == 0));
    }
}

/// Counts a pool thread out of `alive` when dropped.
struct Exited(Arc<BlockingPool>);

impl Drop for Exited {
    fn drop(&mut self) {
        self.0.lock().alive -= 1;
        self.0.exited.notify_all();
    }
}

/// Where a blocking job leaves its result for the task awaiting it.
struct Oneshot<R> {
    state: Mutex<OneshotState<R>>,
    /// The awaiting task is gone (aborted, or its runtime shut down): a job
    /// that has not started yet is skipped.
    abandoned: AtomicBool,
}

impl<R> Default for Oneshot<R> {
    fn default() -> Self {
        Self {
            state: Mutex::new(OneshotState {
                result: None,
                closed: false,
                waker: None,
            }),
            abandoned: AtomicBool::new(false),
        }
    }
}

struct OneshotState<R> {
    result: Option<thread::Result<R>>,
    /// The job was dropped without running.
    closed: bool,
    waker: Option<Waker>,
}

impl<R> Oneshot<R> {
    fn finish(&self, update: impl FnOnce(&mut OneshotState<R>)) {
        let waker = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            update(&mut state);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The job's side: delivers the result, or closes the oneshot if the job is
/// dropped unrun. Its hold on the clock is given back after that (fields
/// drop after `Drop::drop`).
struct Sender<R>(Arc<Oneshot<R>>, #[allow(dead_code)] Hold);

impl<R> Sender<R> {
    fn run(self, f: impl FnOnce() -> R) {
        if self.0.abandoned.load(Ordering::Acquire) {
            return; // `Drop` closes the oneshot
        }
        let result = catch_unwind(AssertUnwindSafe(f));
        self.0.finish(|s| s.result = Some(result));
    }
}

impl<R> Drop for Sender<R> {
    fn drop(&mut self) {
        self.0.finish(|s| s.closed = s.result.is_none());
    }
}

/// The task's side: resolves to the closure's result. A closure that panicked
/// panics here again, so the task's `JoinHandle` reports the panic.
pub(crate) struct BlockingResult<R> {
    oneshot: Arc<Oneshot<R>>,
}

impl<R> Future for BlockingResult<R> {
    type Output = R;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let mut state = self.oneshot.state.lock().unwrap_or_else(|e| e.into_inner());
        match state.result.take() {
            Some(Ok(value)) => Poll::Ready(value),
            Some(Err(panic)) => {
                drop(state);
                resume_unwind(panic)
            }
            // The job was dropped unrun: that happens only when the pool
            // shuts down, which the runtime does after cancelling every task
            // (this one included), or when spawning on a runtime already shut
            // down, whose closed queue cancels the task at once. Either way
            // the task is cancelled; it never needs to be woken again.
            None if state.closed => Poll::Pending,
            None => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl<R> Drop for BlockingResult<R> {
    fn drop(&mut self) {
        self.oneshot.abandoned.store(true, Ordering::Release);
    }
}
