//! Spawning tasks.

use std::future::Future;

use fairlane_core::AffinityError;

use super::join_handle::Inner;
use super::unwind::CatchUnwind;
use super::{Id, JoinHandle};
use crate::runtime::context;

/// Spawns a task on the current runtime and returns a handle to await its
/// output. Works from a task and from the future given to
/// [`Runtime::block_on`](crate::Runtime::block_on).
///
/// # Panics
/// Outside a runtime, with a message saying so; use
/// [`Handle::spawn`](crate::Handle::spawn) there.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(2).build()?;
/// let sum = rt.block_on(async {
///     let a = fairlane::spawn(async { 1 + 2 });
///     let b = fairlane::spawn(async { 3 + 4 });
///     a.await.unwrap() + b.await.unwrap()
/// });
/// assert_eq!(sum, 10);
/// # Ok::<(), std::io::Error>(())
/// ```
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match context::with_current(|handle| handle.spawn(future)) {
        Some(join) => join,
        None => panic!(
            "fairlane::spawn must be called from within a fairlane runtime (a task, or the future \
             given to Runtime::block_on); from other threads use Handle::spawn"
        ),
    }
}

/// Spawns `future` on `cluster` as task `id`, catching its panics.
pub(crate) fn spawn_on<F>(
    cluster: &crate::runtime::ExecutorRef,
    future: F,
    options: fairlane_core::SpawnOptions,
    id: Id,
) -> Result<JoinHandle<F::Output>, AffinityError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(JoinHandle {
        inner: Inner::Runtime(cluster.spawn_cancellable(CatchUnwind::new(future, id), options)?),
        name: None,
        id,
    })
}
