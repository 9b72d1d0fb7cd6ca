//! Aborting a task without owning it.

use std::fmt;
use std::sync::Arc;

use super::local_set::LocalHeader;
use super::Id;

/// Aborts a task without owning it; see [`JoinHandle::abort_handle`](crate::JoinHandle::abort_handle).
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let handle = rt.spawn(std::future::pending::<()>());
/// let abort = handle.abort_handle();
/// abort.abort();
/// assert!(rt.block_on(handle).unwrap_err().is_cancelled());
/// assert!(abort.is_finished());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct AbortHandle {
    pub(super) inner: AbortInner,
    pub(super) id: Id,
}

/// Which kind of task the handle aborts.
#[derive(Clone)]
pub(super) enum AbortInner {
    /// A task of the runtime.
    Runtime(fairlane_core::AbortHandle),
    /// A task of a [`LocalSet`](super::LocalSet): its shared header.
    Local(Arc<LocalHeader>),
}

// An abort is an atomic flag and a wake: nothing a panic could leave
// half-done (as tokio's `AbortHandle`), for either kind of task.
impl std::panic::UnwindSafe for AbortHandle {}
impl std::panic::RefUnwindSafe for AbortHandle {}

impl AbortHandle {
    /// Aborts the task; see [`JoinHandle::abort`](crate::JoinHandle::abort).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// handle.abort_handle().abort();
    /// assert!(rt.block_on(handle).unwrap_err().is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn abort(&self) {
        match &self.inner {
            AbortInner::Runtime(task) => task.abort(),
            AbortInner::Local(task) => task.abort(),
        }
    }

    /// Whether the task has finished.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(async { 1 });
    /// let abort = handle.abort_handle();
    /// assert_eq!(rt.block_on(handle).unwrap(), 1);
    /// assert!(abort.is_finished());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_finished(&self) -> bool {
        match &self.inner {
            AbortInner::Runtime(task) => task.is_finished(),
            AbortInner::Local(task) => task.is_finished(),
        }
    }

    /// The task's [`Id`], as [`JoinHandle::id`](crate::JoinHandle::id).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(async {});
    /// assert_eq!(handle.abort_handle().id(), handle.id());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn id(&self) -> Id {
        self.id
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle")
            .field("id", &self.id)
            .field("finished", &self.is_finished())
            .finish()
    }
}
