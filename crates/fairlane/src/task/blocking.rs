//! Blocking work: on the blocking pool, or in place on a processor.

use super::JoinHandle;
use crate::runtime::context;

/// Runs the blocking closure `f` on a thread of the current runtime's
/// blocking pool, so that no processor waits for it, and returns a handle to
/// its result. The pool starts threads as jobs arrive (up to
/// [`Builder::max_blocking_threads`](crate::Builder::max_blocking_threads))
/// and lets idle ones exit after
/// [`Builder::thread_keep_alive`](crate::Builder::thread_keep_alive).
/// Inside `f`, [`Handle::current`](crate::Handle::current) works and
/// [`Handle::block_on`](crate::Handle::block_on) is allowed.
///
/// Aborting the handle cancels a job that has not started; one that is
/// running runs to its end (a thread cannot be interrupted), its result
/// discarded. Runtime shutdown drops jobs not started and waits for running
/// ones (`shutdown_timeout` bounds the wait).
///
/// # Panics
/// Outside a runtime, with a message saying so; use
/// [`Handle::spawn_blocking`](crate::Handle::spawn_blocking) there.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let contents = rt.block_on(async {
///     fairlane::task::spawn_blocking(|| std::fs::read_to_string("Cargo.toml")).await
/// });
/// assert!(contents.unwrap().unwrap().contains("[package]"));
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match context::with_current(|handle| handle.spawn_blocking(f)) {
        Some(join) => join,
        None => panic!(
            "fairlane::task::spawn_blocking must be called from within a fairlane runtime (a task, \
             the future given to Runtime::block_on, or a blocking closure); from other threads \
             use Handle::spawn_blocking"
        ),
    }
}

/// Runs the blocking closure `f` in place, on the calling thread, without
/// holding up the tasks queued on this thread's processor: the processor is
/// handed to a replacement thread for the duration of `f` (which finishes
/// the poll it is in before handing it back). Unlike
/// [`spawn_blocking`], `f` may borrow from the task. Outside a processor
/// (in a multi-thread runtime's `block_on`, a blocking closure, or any
/// other thread) `f` just runs.
///
/// The task calling it is not polled while `f` runs; other tasks are, on the
/// replacement and on the other processors. Each call starts a thread, so
/// prefer [`spawn_blocking`] for many short calls.
///
/// # Panics
/// On a current-thread runtime (in a task, or in the future given to its
/// `block_on`), as with tokio: the thread in `block_on` is its only
/// processor.
///
/// # Example
/// With one processor, a task blocks on a channel that another task fills:
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let (tx, rx) = std::sync::mpsc::channel();
/// let waiter = rt.spawn(async move { fairlane::task::block_in_place(|| rx.recv().unwrap()) });
/// rt.spawn(async move { tx.send(7).unwrap() });
/// assert_eq!(rt.block_on(waiter).unwrap(), 7);
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn block_in_place<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    crate::runtime::block_in_place(f)
}
