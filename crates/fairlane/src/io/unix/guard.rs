//! The guards [`AsyncFd`]'s waits return, and `try_io`'s error.

use std::fmt;
use std::io;
use std::os::fd::AsRawFd;

use crate::io::Ready;

use super::AsyncFd;

/// The readiness methods both guards have: `clear_ready`, `retain_ready`,
/// `clear_ready_matching`, `ready`, `is_ready` (examples on `$guard` from
/// `AsyncFd::$wait` and `AsyncFd::$ready`).
macro_rules! readiness_methods {
    ($guard:ident, $wait:ident, $ready:ident) => {
        /// Records that the descriptor is no longer ready (the I/O returned
        /// `WouldBlock`): the readiness this guard holds is forgotten by the
        /// `AsyncFd` too, and the next wait asks the descriptor again.
        ///
        /// # Example
        /// ```
        #[doc = concat!(
            "async fn f(fd: &mut fairlane::io::unix::AsyncFd<std::fs::File>) -> std::io::Result<()> {\n",
            "    let mut guard = fd.", stringify!($wait), "().await?;\n",
            "    guard.clear_ready();\n",
            "    assert!(!guard.is_ready());\n",
            "    Ok(())\n",
            "}"
        )]
        /// ```
        pub fn clear_ready(&mut self) {
            self.async_fd.clear_kept(self.ready);
            self.ready = Ready::EMPTY;
        }

        /// Records that the kinds of readiness in `ready` are gone, keeping
        /// the others (after a read that drained the input of a descriptor
        /// also waited for writability, say).
        ///
        /// # Example
        /// ```
        #[doc = concat!(
            "use fairlane::io::{Interest, Ready};\n",
            "async fn f(fd: &mut fairlane::io::unix::AsyncFd<std::fs::File>) -> std::io::Result<()> {\n",
            "    let mut guard = fd.", stringify!($ready), "(Interest::READABLE | Interest::WRITABLE).await?;\n",
            "    guard.clear_ready_matching(Ready::READABLE);\n",
            "    assert!(!guard.ready().is_readable());\n",
            "    Ok(())\n",
            "}"
        )]
        /// ```
        pub fn clear_ready_matching(&mut self, ready: Ready) {
            self.async_fd.clear_kept(ready & self.ready);
            self.ready = self.ready - ready;
        }

        /// The readiness the descriptor reported when the wait ended (see
        /// [`Ready`]), less what was cleared since.
        ///
        /// # Example
        /// ```
        #[doc = concat!(
            "use fairlane::io::Interest;\n",
            "async fn f(fd: &mut fairlane::io::unix::AsyncFd<std::fs::File>) -> std::io::Result<bool> {\n",
            "    let guard = fd.", stringify!($ready), "(Interest::READABLE).await?;\n",
            "    Ok(guard.ready().is_read_closed())\n",
            "}"
        )]
        /// ```
        pub fn ready(&self) -> Ready {
            self.ready
        }

        /// Keeps the readiness (dropping the guard does the same).
        ///
        /// # Example
        /// ```
        #[doc = concat!(
            "fn f(guard: fairlane::io::unix::", stringify!($guard), "<'_, std::fs::File>) {\n",
            "    guard.retain_ready();\n",
            "}"
        )]
        /// ```
        pub fn retain_ready(self) {}

        /// Whether the guard still holds readiness: true until
        /// [`clear_ready`](Self::clear_ready) or a `try_io` that would block.
        ///
        /// # Example
        /// See [`clear_ready`](Self::clear_ready).
        /// ```
        #[doc = concat!(
            "fn f(guard: &fairlane::io::unix::", stringify!($guard), "<'_, std::fs::File>) -> bool {\n",
            "    guard.is_ready()\n",
            "}"
        )]
        /// ```
        pub fn is_ready(&self) -> bool {
            !self.ready.is_empty()
        }
    };
}

/// The readiness that [`AsyncFd::readable`] or [`AsyncFd::writable`]
/// reported, as tokio's guard: do the I/O with [`try_io`](Self::try_io),
/// which clears it when the I/O would block.
///
/// # Example
/// See [`AsyncFd`].
/// ```
/// fn done(guard: &mut fairlane::io::unix::AsyncFdReadyGuard<'_, std::fs::File>) {
///     guard.clear_ready();
/// }
/// ```
pub struct AsyncFdReadyGuard<'a, T: AsRawFd> {
    pub(super) async_fd: &'a AsyncFd<T>,
    pub(super) ready: Ready,
}

impl<'a, T: AsRawFd> AsyncFdReadyGuard<'a, T> {
    readiness_methods!(AsyncFdReadyGuard, readable, ready);

    /// Runs the I/O `f`: its result, or, if it returned `WouldBlock`,
    /// [`TryIoError`] with the readiness cleared (wait again).
    ///
    /// # Example
    /// See [`AsyncFd`].
    /// ```
    /// use std::io::Read;
    /// async fn read(
    ///     fd: &fairlane::io::unix::AsyncFd<std::os::unix::net::UnixStream>,
    ///     buf: &mut [u8],
    /// ) -> std::io::Result<usize> {
    ///     loop {
    ///         let mut guard = fd.readable().await?;
    ///         if let Ok(result) = guard.try_io(|inner| inner.get_ref().read(buf)) {
    ///             return result;
    ///         }
    ///     }
    /// }
    /// ```
    pub fn try_io<R>(
        &mut self,
        f: impl FnOnce(&'a AsyncFd<T>) -> io::Result<R>,
    ) -> Result<io::Result<R>, TryIoError> {
        let result = f(self.async_fd);
        settle(self, result)
    }

    /// The [`AsyncFd`] this guard is for.
    ///
    /// # Example
    /// ```
    /// use std::os::fd::AsRawFd;
    /// fn fd(guard: &fairlane::io::unix::AsyncFdReadyGuard<'_, std::fs::File>) -> i32 {
    ///     guard.get_ref().as_raw_fd()
    /// }
    /// ```
    pub fn get_ref(&self) -> &'a AsyncFd<T> {
        self.async_fd
    }

    /// The wrapped value of the [`AsyncFd`].
    ///
    /// # Example
    /// ```
    /// fn file<'a>(guard: &fairlane::io::unix::AsyncFdReadyGuard<'a, std::fs::File>) -> &'a std::fs::File {
    ///     guard.get_inner()
    /// }
    /// ```
    pub fn get_inner(&self) -> &'a T {
        self.async_fd.get_ref()
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyGuard")
            .field("async_fd", self.async_fd)
            .field("ready", &self.ready)
            .finish()
    }
}

/// The readiness that [`AsyncFd::readable_mut`] or
/// [`AsyncFd::writable_mut`] reported; as [`AsyncFdReadyGuard`], with
/// `&mut` access.
///
/// # Example
/// See [`AsyncFd::readable_mut`].
/// ```
/// fn done(guard: &mut fairlane::io::unix::AsyncFdReadyMutGuard<'_, std::fs::File>) {
///     guard.clear_ready();
/// }
/// ```
pub struct AsyncFdReadyMutGuard<'a, T: AsRawFd> {
    pub(super) async_fd: &'a mut AsyncFd<T>,
    pub(super) ready: Ready,
}

impl<T: AsRawFd> AsyncFdReadyMutGuard<'_, T> {
    readiness_methods!(AsyncFdReadyMutGuard, readable_mut, ready_mut);

    /// Runs the I/O `f` on `&mut AsyncFd`: its result, or, if it returned
    /// `WouldBlock`, [`TryIoError`] with the readiness cleared.
    ///
    /// # Example
    /// See [`AsyncFd::readable_mut`].
    /// ```
    /// use std::io::Write;
    /// fn f(guard: &mut fairlane::io::unix::AsyncFdReadyMutGuard<'_, std::fs::File>) -> bool {
    ///     guard.try_io(|inner| inner.get_mut().write(b"x")).is_ok()
    /// }
    /// ```
    pub fn try_io<R>(
        &mut self,
        f: impl FnOnce(&mut AsyncFd<T>) -> io::Result<R>,
    ) -> Result<io::Result<R>, TryIoError> {
        let result = f(self.async_fd);
        settle(self, result)
    }

    /// The [`AsyncFd`] this guard is for.
    ///
    /// # Example
    /// ```
    /// use std::os::fd::AsRawFd;
    /// fn fd(guard: &fairlane::io::unix::AsyncFdReadyMutGuard<'_, std::fs::File>) -> i32 {
    ///     guard.get_ref().as_raw_fd()
    /// }
    /// ```
    pub fn get_ref(&self) -> &AsyncFd<T> {
        self.async_fd
    }

    /// The [`AsyncFd`] this guard is for, mutably.
    ///
    /// # Example
    /// ```
    /// fn file<'g>(
    ///     guard: &'g mut fairlane::io::unix::AsyncFdReadyMutGuard<'_, std::fs::File>,
    /// ) -> &'g mut std::fs::File {
    ///     guard.get_mut().get_mut()
    /// }
    /// ```
    pub fn get_mut(&mut self) -> &mut AsyncFd<T> {
        self.async_fd
    }
}

impl<T: AsRawFd + fmt::Debug> fmt::Debug for AsyncFdReadyMutGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncFdReadyMutGuard")
            .field("async_fd", &*self.async_fd)
            .field("ready", &self.ready)
            .finish()
    }
}

/// A guard's `try_io` outcome: `WouldBlock` clears the readiness and
/// becomes [`TryIoError`].
/// A guard's `try_io` result: `WouldBlock` clears the guard's readiness
/// (and the `AsyncFd`'s kept readiness of those kinds).
fn settle<G: ClearReady, R>(
    guard: &mut G,
    result: io::Result<R>,
) -> Result<io::Result<R>, TryIoError> {
    match result {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            guard.clear();
            Err(TryIoError(()))
        }
        result => Ok(result),
    }
}

/// Both guards' `clear_ready`, for `settle`.
trait ClearReady {
    fn clear(&mut self);
}

impl<T: AsRawFd> ClearReady for AsyncFdReadyGuard<'_, T> {
    fn clear(&mut self) {
        self.clear_ready();
    }
}

impl<T: AsRawFd> ClearReady for AsyncFdReadyMutGuard<'_, T> {
    fn clear(&mut self) {
        self.clear_ready();
    }
}

/// What [`AsyncFdReadyGuard::try_io`] returns when the I/O would block.
///
/// # Example
/// ```
/// fn would_block(r: &Result<std::io::Result<usize>, fairlane::io::unix::TryIoError>) -> bool {
///     r.is_err()
/// }
/// ```
#[derive(Debug)]
pub struct TryIoError(());
