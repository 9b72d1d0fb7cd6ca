//! The user's future inside `catch_unwind`, and the task's output until
//! its handle takes it.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::id::{self, Id};
use super::Panic;

/// The user's future, polled inside `catch_unwind` so that a panicking task
/// becomes a [`JoinError`] and its processor keeps running, and dropped
/// inside `catch_unwind` too, as soon as the task is done (it completed,
/// panicked, or was aborted or cancelled by shutdown): the task cell
/// (`no_std`) cannot catch a panic of the destructor.
///
/// A destructor's panic is reported as a `tracing` warning and given to the
/// task's handle as the task's panic, as in tokio: the output of a future
/// that completed and then panicked when dropped is discarded. Of a future
/// that panicked in `poll` and again when dropped, the handle gets the
/// poll's panic.
///
/// The task's [`Id`] is the current one (`task::id`) while its future is
/// polled or dropped, and while its output is dropped.
pub(super) struct CatchUnwind<F> {
    /// Dropped in place once `live` is false.
    future: ManuallyDrop<F>,
    live: bool,
    id: Id,
}

impl<F> CatchUnwind<F> {
    pub(super) fn new(future: F, id: Id) -> Self {
        Self {
            future: ManuallyDrop::new(future),
            live: true,
            id,
        }
    }

    /// Drops the user's future in place (once; later calls do nothing),
    /// catching a panic in its destructor.
    fn drop_future(self: Pin<&mut Self>) -> Result<(), Panic> {
        // SAFETY: the future is only dropped in place here, never moved.
        let this = unsafe { self.get_unchecked_mut() };
        if !this.live {
            return Ok(());
        }
        // Cleared first: a destructor that panics has still dropped the
        // future (the rest of its drop glue runs while unwinding), so it
        // must not be dropped again.
        this.live = false;
        let _id = id::enter(Some(this.id));
        // SAFETY: `live` was set, so the future was not dropped yet, and it
        // is not used again. Dropping in place keeps the pinning promise.
        catch_unwind(AssertUnwindSafe(|| unsafe {
            ManuallyDrop::drop(&mut this.future)
        }))
    }
}

/// Reports a panic of a task future's destructor.
fn report_drop_panic(panic: &Panic, when: &'static str) {
    tracing::warn!(
        panic = panic_text(panic),
        "a task's future panicked while being dropped ({when}); the task's JoinHandle reports \
         the panic"
    );
}

/// What to do when a task panicked for want of tokio's runtime.
pub(super) const TOKIO_HINT: &str = if cfg!(feature = "tokio-compat") {
    "this runtime was built with `Builder::tokio_compat(false)`; leave the tokio bridge on \
     (README, \"Coming from tokio\")"
} else {
    "enable fairlane's `tokio-compat` feature, whose tokio bridge runs such calls \
     (README, \"Coming from tokio\")"
};

/// Whether a panic's message is tokio's (or a crate's) complaint that no
/// tokio runtime is current.
pub(super) fn needs_tokio_runtime(message: &str) -> bool {
    message.contains("must be called from the context of a Tokio 1.x runtime")
        || message.contains("there is no reactor running")
        || message.contains("requires a Tokio context")
}

/// The message of a panic payload, for diagnostics.
fn panic_text(panic: &Panic) -> &str {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "<not a string>"
    }
}

/// Drops `value`, a task's discarded output or a second panic payload,
/// without letting a panic in its destructor out.
fn drop_quietly<T>(value: T) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| drop(value))) {
        // A payload that panics when dropped would go on for ever.
        std::mem::forget(panic);
    }
}

/// A task's result as its cell keeps it until the `JoinHandle` takes it.
/// Nobody takes the output of a detached task: the task cell drops it, and
/// a panic in its destructor is caught here (and reported), as one in the
/// future's is.
pub(super) struct TaskOutput<T>(ManuallyDrop<Result<T, Panic>>, Id);

impl<T> TaskOutput<T> {
    fn new(result: Result<T, Panic>, id: Id) -> Self {
        Self(ManuallyDrop::new(result), id)
    }

    pub(super) fn into_inner(self) -> Result<T, Panic> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so the result is taken once.
        unsafe { ManuallyDrop::take(&mut this.0) }
    }
}

impl<T> Drop for TaskOutput<T> {
    fn drop(&mut self) {
        // SAFETY: in `drop`: the result is not used again.
        let result = unsafe { ManuallyDrop::take(&mut self.0) };
        let _id = id::enter(Some(self.1));
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| drop(result))) {
            tracing::warn!(
                panic = panic_text(&panic),
                "a task's output panicked while being dropped (nobody awaited it)"
            );
            drop_quietly(panic);
        }
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = TaskOutput<F::Output>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: only a projection: the future is structurally pinned (never
        // moved out of `self`; dropped in place by `drop_future`).
        let this = unsafe { self.as_mut().get_unchecked_mut() };
        // The task is polled until it completes, never after; `live` is
        // cleared only when it completes (or is cancelled, after which it is
        // not polled either). A plain branch, no atomic.
        assert!(this.live, "a task's future polled after it finished");
        let id = this.id;
        let _id = id::enter(Some(id));
        // SAFETY: as above; `live` says the future is still there.
        let future = unsafe { Pin::new_unchecked(&mut *this.future) };
        let result = match catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(value)) => Ok(value),
            Err(panic) => {
                if needs_tokio_runtime(panic_text(&panic)) {
                    tracing::warn!(
                        panic = panic_text(&panic),
                        "a fairlane task called an item of tokio's runtime (tokio::spawn, \
                         tokio::net, tokio::time, ...), directly or inside a crate: {TOKIO_HINT}"
                    );
                }
                Err(panic)
            }
        };
        // Done: drop the future now, where a panicking destructor is caught.
        let output = match (self.drop_future(), result) {
            (Ok(()), result) => result,
            (Err(panic), Ok(value)) => {
                report_drop_panic(&panic, "after it completed");
                drop_quietly(value);
                Err(panic)
            }
            (Err(second), Err(panic)) => {
                report_drop_panic(&second, "after its poll panicked");
                drop_quietly(second);
                Err(panic)
            }
        };
        Poll::Ready(TaskOutput::new(output, id))
    }
}

impl<F: Future> fairlane_core::Cancellable for CatchUnwind<F> {
    fn cancel(self: Pin<&mut Self>) -> Option<Self::Output> {
        let id = self.id;
        match self.drop_future() {
            Ok(()) => None,
            Err(panic) => {
                report_drop_panic(&panic, "cancelled");
                Some(TaskOutput::new(Err(panic), id))
            }
        }
    }
}

impl<F> Drop for CatchUnwind<F> {
    fn drop(&mut self) {
        // The task cell drops a future it never polled to its end only when
        // its runnable is dropped unrun (a cluster dropped without being
        // cancelled): no handle can get the panic then.
        // SAFETY: `self` is not moved again (it is being dropped).
        if let Err(panic) = unsafe { Pin::new_unchecked(self) }.drop_future() {
            report_drop_panic(&panic, "dropped by the task cell");
            drop_quietly(panic);
        }
    }
}
