//! [`AsyncFdRegisterError`]: a refused [`AsyncFd`](super::AsyncFd), with the
//! value handed back.

use std::error::Error;
use std::fmt;
use std::io;

/// Why [`AsyncFd::register`](super::AsyncFd::register) (or
/// [`register_with_interest`](super::AsyncFd::register_with_interest),
/// [`try_new`](super::AsyncFd::try_new),
/// [`try_with_interest`](super::AsyncFd::try_with_interest)) refused a
/// value, with the value itself, as tokio's type of that name:
/// [`into_parts`](Self::into_parts) gives both back.
///
/// # Example
/// ```
/// use fairlane::io::unix::AsyncFd;
/// # let rt = fairlane::runtime::Builder::new_current_thread().build()?;
/// # rt.block_on(async {
/// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
/// // Still in blocking mode: refused, and handed back.
/// let err = AsyncFd::try_new(a).unwrap_err();
/// assert_eq!(err.to_string().contains("non-blocking"), true);
/// let (a, cause) = err.into_parts();
/// assert_eq!(cause.kind(), std::io::ErrorKind::InvalidInput);
/// a.set_nonblocking(true)?;
/// let fd = AsyncFd::try_new(a)?;
/// # drop(fd);
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct AsyncFdRegisterError<T> {
    inner: T,
    cause: io::Error,
}

impl<T> AsyncFdRegisterError<T> {
    pub(super) fn new(inner: T, cause: io::Error) -> Self {
        AsyncFdRegisterError { inner, cause }
    }

    /// The value that was refused, and why.
    ///
    /// # Example
    /// See [`AsyncFdRegisterError`].
    /// ```
    /// fn cause<T>(err: fairlane::io::unix::AsyncFdRegisterError<T>) -> std::io::Error {
    ///     err.into_parts().1
    /// }
    /// ```
    pub fn into_parts(self) -> (T, io::Error) {
        (self.inner, self.cause)
    }
}

impl<T> fmt::Display for AsyncFdRegisterError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.cause, f)
    }
}

impl<T> fmt::Debug for AsyncFdRegisterError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.cause, f)
    }
}

impl<T> Error for AsyncFdRegisterError<T> {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.cause)
    }
}

impl<T> From<AsyncFdRegisterError<T>> for io::Error {
    fn from(err: AsyncFdRegisterError<T>) -> io::Error {
        err.cause
    }
}
