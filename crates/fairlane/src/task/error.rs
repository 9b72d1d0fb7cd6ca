//! Why a task produced no output.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use super::{Id, Panic};

/// Why a task produced no output: it panicked, or it was cancelled (aborted,
/// or dropped by runtime shutdown).
///
/// A future that panics when it is dropped is a panicking task too, whenever
/// it is dropped: once it completed (as in tokio, its output is then
/// discarded), once it panicked in `poll` (the error carries the poll's
/// panic), or when it is aborted or cancelled by shutdown. Such a panic
/// never ends the process, and the runtime reports it as a `tracing`
/// warning.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let err = rt.block_on(rt.spawn(async { panic!("boom") })).unwrap_err();
/// assert!(err.is_panic());
/// assert_eq!(*err.into_panic().downcast::<&str>().unwrap(), "boom");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct JoinError {
    pub(super) repr: Repr,
    /// The task's name, if it was given one.
    pub(super) name: Option<Arc<str>>,
    pub(super) id: Id,
}

pub(super) enum Repr {
    Cancelled,
    /// The payload, and its message when it is a string.
    Panic(SyncPanic, Option<String>),
}

/// A panic payload that is only ever reached by value, which makes sharing a
/// `&JoinError` between threads harmless (as tokio's `JoinError` is `Sync`).
pub(super) struct SyncPanic(Panic);

// SAFETY: `Sync` only matters for `&SyncPanic`, and no code reads the payload
// through a shared reference: it leaves only by value (`into_panic`,
// `try_into_panic`). The message is copied out when the error is made.
unsafe impl Sync for SyncPanic {}

impl JoinError {
    pub(super) fn panic(payload: Panic, name: Option<Arc<str>>, id: Id) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned());
        JoinError {
            repr: Repr::Panic(SyncPanic(payload), message),
            name,
            id,
        }
    }

    /// The [`Id`] of the task that failed.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(async { panic!("boom") });
    /// let id = handle.id();
    /// assert_eq!(rt.block_on(handle).unwrap_err().id(), id);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn id(&self) -> Id {
        self.id
    }

    /// Whether the task was cancelled.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// handle.abort();
    /// let err = rt.block_on(handle).unwrap_err();
    /// assert!(err.is_cancelled() && !err.is_panic());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// Whether the task panicked.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let err = rt.block_on(rt.spawn(async { panic!("boom") })).unwrap_err();
    /// assert!(err.is_panic() && !err.is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(..))
    }

    /// The panic payload.
    ///
    /// # Panics
    /// If the task was cancelled rather than panicked.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let err = rt.block_on(rt.spawn(async { std::panic::panic_any(7u32) })).unwrap_err();
    /// assert_eq!(*err.into_panic().downcast::<u32>().unwrap(), 7);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("`JoinError::into_panic` called on a cancelled task's error")
    }

    /// The panic payload, or the error back if the task was cancelled.
    ///
    /// # Example
    /// ```
    /// let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let handle = rt.spawn(std::future::pending::<()>());
    /// handle.abort();
    /// let err = rt.block_on(handle).unwrap_err();
    /// let err = err.try_into_panic().expect_err("cancelled, not panicked");
    /// assert!(err.is_cancelled());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(SyncPanic(panic), _) => Ok(panic),
            Repr::Cancelled => Err(self),
        }
    }

    fn panic_message(&self) -> Option<&str> {
        match &self.repr {
            Repr::Panic(_, message) => message.as_deref(),
            Repr::Cancelled => None,
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("task ")?;
        if let Some(name) = &self.name {
            write!(f, "{name:?} ")?;
        }
        match (&self.repr, self.panic_message()) {
            (Repr::Cancelled, _) => f.write_str("was cancelled"),
            (Repr::Panic(..), Some(msg)) if super::unwind::needs_tokio_runtime(msg) => write!(
                f,
                "panicked with message {msg:?}: it needs tokio's runtime; {}",
                super::unwind::TOKIO_HINT
            ),
            (Repr::Panic(..), Some(msg)) => write!(f, "panicked with message {msg:?}"),
            (Repr::Panic(..), None) => f.write_str("panicked"),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // tokio's shape: the task's id, then the message of a string payload.
        match (&self.repr, self.panic_message()) {
            (Repr::Cancelled, _) => write!(f, "JoinError::Cancelled({:?})", self.id),
            (Repr::Panic(..), Some(msg)) => {
                write!(f, "JoinError::Panic({:?}, {msg:?}, ...)", self.id)
            }
            (Repr::Panic(..), None) => write!(f, "JoinError::Panic({:?}, ...)", self.id),
        }
    }
}

impl std::error::Error for JoinError {}

/// A `JoinError` as an `io::Error` (kind `Other`), as tokio's converts, so
/// that `handle.await?` works in a function returning `io::Result`.
///
/// # Example
/// ```
/// let rt = fairlane::Runtime::builder().processors(1).build()?;
/// let handle = rt.spawn(std::future::pending::<()>());
/// handle.abort();
/// let err: std::io::Error = rt.block_on(handle).unwrap_err().into();
/// assert_eq!(err.to_string(), "task was cancelled");
/// # Ok::<(), std::io::Error>(())
/// ```
impl From<JoinError> for std::io::Error {
    fn from(src: JoinError) -> std::io::Error {
        std::io::Error::other(match src.repr {
            Repr::Cancelled => "task was cancelled",
            Repr::Panic(..) => "task panicked",
        })
    }
}
