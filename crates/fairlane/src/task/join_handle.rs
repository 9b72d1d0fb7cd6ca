//! Awaiting a task's output.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::abort_handle::AbortInner;
use super::error::Repr;
use super::local_set::LocalJoin;
use super::unwind::TaskOutput;
use super::{AbortHandle, Id, JoinError};

/// An owned permission to await a task's output. Dropping it detaches the
/// task, which runs on.
///
/// The same type serves the runtime's tasks and a
/// [`LocalSet`](crate::task::LocalSet)'s; it is `Send` and `Sync` when `T`
/// is `Send`, as tokio's.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let handle = rt.spawn(async { "done" });
/// assert_eq!(rt.block_on(handle).unwrap(), "done");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct JoinHandle<T> {
    pub(super) inner: Inner<T>,
    pub(super) name: Option<Arc<str>>,
    pub(super) id: Id,
}

/// Which kind of task the handle is for.
pub(super) enum Inner<T> {
    /// A task of the runtime, in a task cell of its cluster.
    Runtime(fairlane_core::TaskHandle<TaskOutput<T>, crate::host::StdHost>),
    /// A task of a [`LocalSet`](super::LocalSet).
    Local(LocalJoin<T>),
}

// A panic while a `JoinHandle` is in use leaves nothing half-changed that a
// later use could see: its state is the task cell's atomic state word (or,
// for a local task, a slot changed in one step under its lock), as tokio's
// `JoinHandle` (which is unwind-safe too).
impl<T> std::panic::UnwindSafe for JoinHandle<T> {}
impl<T> std::panic::RefUnwindSafe for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// The handle of a [`LocalSet`](super::LocalSet)'s task.
    pub(super) fn local(join: LocalJoin<T>, id: Id) -> Self {
        JoinHandle {
            inner: Inner::Local(join),
            name: None,
            id,
        }
    }

    /// Aborts the task: it is not polled again and its future is dropped. A
    /// task that already completed keeps its output; awaiting an aborted one
    /// gives a [`JoinError`] for which `is_cancelled()` holds (`is_panic()`
    /// if the future panicked when dropped).
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// handle.abort();
    /// assert!(rt.block_on(handle).unwrap_err().is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn abort(&self) {
        match &self.inner {
            Inner::Runtime(task) => task.abort(),
            Inner::Local(task) => task.header().abort(),
        }
    }

    /// Whether the task has finished: completed, panicked, or been aborted.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// assert!(!handle.is_finished());
    /// handle.abort();
    /// while !handle.is_finished() { std::thread::yield_now(); }
    /// assert!(rt.block_on(handle).unwrap_err().is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_finished(&self) -> bool {
        match &self.inner {
            Inner::Runtime(task) => task.is_finished(),
            Inner::Local(task) => task.header().is_finished(),
        }
    }

    /// A handle that can abort the task from anywhere, without owning it.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// let abort = handle.abort_handle();
    /// std::thread::spawn(move || abort.abort()).join().unwrap();
    /// assert!(rt.block_on(handle).unwrap_err().is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle {
            inner: match &self.inner {
                Inner::Runtime(task) => AbortInner::Runtime(task.abort_handle()),
                Inner::Local(task) => AbortInner::Local(Arc::clone(task.header())),
            },
            id: self.id,
        }
    }

    /// The task's [`Id`]: what [`task::id`](crate::task::id) returns
    /// inside it.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let (a, b) = (rt.spawn(async {}), rt.spawn(async {}));
    /// assert_ne!(a.id(), b.id());
    /// let inside = rt.spawn(async { fairlane::task::id() });
    /// let id = inside.id();
    /// assert_eq!(rt.block_on(inside).unwrap(), id);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn id(&self) -> Id {
        self.id
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let out = std::task::ready!(match &mut self.inner {
            Inner::Runtime(task) => Pin::new(task).poll(cx),
            Inner::Local(task) => task.poll(cx),
        });
        Poll::Ready(match out.map(TaskOutput::into_inner) {
            Some(Ok(value)) => Ok(value),
            Some(Err(panic)) => Err(JoinError::panic(panic, self.name.clone(), self.id)),
            None => Err(JoinError {
                repr: Repr::Cancelled,
                name: self.name.clone(),
                id: self.id,
            }),
        })
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("finished", &self.is_finished())
            .finish()
    }
}
