//! [`Sender`]: the write end of a pipe.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{checked, nonblocking};
use crate::io::unix::AsyncFd;
use crate::io::{Interest, Ready};
use crate::net::socket::set_nonblocking;

/// The write end of a pipe or FIFO, as tokio's `pipe::Sender`: writes from
/// the caller's slice when the pipe is writable. Implements
/// `futures_io::AsyncWrite` (and tokio's `AsyncWrite` with the `tokio-io`
/// feature); flushing and closing have nothing to wait for.
///
/// # Example
/// ```
/// use futures_lite::io::AsyncWriteExt;
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let (mut tx, rx) = fairlane::net::unix::pipe::pipe()?;
/// tx.write_all(b"hello").await?;
/// rx.readable().await?;
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Sender {
    fd: AsyncFd<File>,
}

impl Sender {
    /// The write end in `file`, which must be a pipe or FIFO open for
    /// writing; made non-blocking.
    ///
    /// # Errors
    /// `InvalidInput` if it is not a pipe or not open for writing;
    /// outside a runtime.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let path = std::env::temp_dir().join(format!("fairlane-doc-sender-{}", std::process::id()));
    /// std::fs::write(&path, b"")?;
    /// let file = std::fs::OpenOptions::new().write(true).open(&path)?;
    /// let err = rt.block_on(async { fairlane::net::unix::pipe::Sender::from_file(file) }).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_file(file: File) -> io::Result<Sender> {
        checked(&file, true)?;
        Sender::from_file_unchecked(file)
    }

    /// As [`from_file`](Self::from_file), without the checks (the file is
    /// still made non-blocking).
    ///
    /// # Example
    /// ```
    /// fn f(file: std::fs::File) -> std::io::Result<fairlane::net::unix::pipe::Sender> {
    ///     fairlane::net::unix::pipe::Sender::from_file_unchecked(file)
    /// }
    /// ```
    pub fn from_file_unchecked(file: File) -> io::Result<Sender> {
        let fd = AsyncFd::with_interest(nonblocking(file)?, Interest::WRITABLE)?;
        Ok(Sender { fd })
    }

    /// As [`from_file`](Self::from_file), from a descriptor.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (tx, _rx) = fairlane::net::unix::pipe::pipe()?;
    /// let fd = tx.into_nonblocking_fd()?;
    /// let tx = fairlane::net::unix::pipe::Sender::from_owned_fd(fd)?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_owned_fd(fd: OwnedFd) -> io::Result<Sender> {
        Sender::from_file(File::from(fd))
    }

    /// As [`from_file_unchecked`](Self::from_file_unchecked), from a
    /// descriptor.
    ///
    /// # Example
    /// ```
    /// fn f(fd: std::os::fd::OwnedFd) -> std::io::Result<fairlane::net::unix::pipe::Sender> {
    ///     fairlane::net::unix::pipe::Sender::from_owned_fd_unchecked(fd)
    /// }
    /// ```
    pub fn from_owned_fd_unchecked(fd: OwnedFd) -> io::Result<Sender> {
        Sender::from_file_unchecked(File::from(fd))
    }

    /// Waits until the pipe is ready for `interest` (writing; an error,
    /// e.g. no reader left, ends the wait too) and says what it reported.
    ///
    /// # Errors
    /// `InvalidInput` for an interest in reading.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (tx, _rx) = fairlane::net::unix::pipe::pipe()?;
    /// assert!(tx.ready(fairlane::io::Interest::WRITABLE).await?.is_writable());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        Ok(self.fd.ready(interest).await?.ready())
    }

    /// Waits until a write would not block (or would fail).
    ///
    /// # Example
    /// See [`pipe`](super::pipe()).
    /// ```
    /// async fn f(tx: &fairlane::net::unix::pipe::Sender) -> std::io::Result<()> { tx.writable().await }
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        self.fd.writable().await.map(drop)
    }

    /// Polls for write readiness: `Ready(Ok)` once a write would not
    /// block, else `Pending` with `cx`'s waker registered (only the task
    /// that polled last is woken).
    ///
    /// # Example
    /// ```
    /// async fn f(tx: &fairlane::net::unix::pipe::Sender) -> std::io::Result<()> {
    ///     std::future::poll_fn(|cx| tx.poll_write_ready(cx)).await
    /// }
    /// ```
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.fd.poll_write_ready(cx).map_ok(drop)
    }

    /// Writes some of `buf` without waiting; `WouldBlock` if the pipe is
    /// full, `BrokenPipe` once no reader is left.
    ///
    /// # Example
    /// See [`pipe`](super::pipe()).
    /// ```
    /// fn f(tx: &fairlane::net::unix::pipe::Sender) -> std::io::Result<usize> { tx.try_write(b"x") }
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.fd
            .try_io(Interest::WRITABLE, |mut file| file.write(buf))
    }

    /// As [`try_write`](Self::try_write), from several buffers in order.
    ///
    /// # Example
    /// ```
    /// fn f(tx: &fairlane::net::unix::pipe::Sender) -> std::io::Result<usize> {
    ///     tx.try_write_vectored(&[std::io::IoSlice::new(b"a"), std::io::IoSlice::new(b"b")])
    /// }
    /// ```
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.fd
            .try_io(Interest::WRITABLE, |mut file| file.write_vectored(bufs))
    }

    /// Runs the non-blocking I/O `f` on the pipe (through its descriptor)
    /// without waiting; its result, `WouldBlock` included. Readiness is
    /// kept (see [`AsyncFd`](crate::io::unix::AsyncFd)): `f` runs only when
    /// the pipe is ready, and a `WouldBlock` it returns clears that.
    ///
    /// # Example
    /// ```
    /// use std::os::fd::AsRawFd;
    /// fn f(tx: &fairlane::net::unix::pipe::Sender) -> std::io::Result<usize> {
    ///     let fd = tx.as_raw_fd();
    ///     // SAFETY: a live descriptor and a one-byte buffer.
    ///     tx.try_io(|| match unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) } {
    ///         -1 => Err(std::io::Error::last_os_error()),
    ///         n => Ok(n as usize),
    ///     })
    /// }
    /// ```
    pub fn try_io<R>(&self, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        self.fd.try_io(Interest::WRITABLE, |_| f())
    }

    /// Stops watching the pipe and gives its descriptor back, in blocking
    /// mode.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (tx, _rx) = fairlane::net::unix::pipe::pipe()?;
    /// let fd: std::os::fd::OwnedFd = tx.into_blocking_fd()?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn into_blocking_fd(self) -> io::Result<OwnedFd> {
        let fd = self.into_nonblocking_fd()?;
        set_nonblocking(fd.as_raw_fd(), false)?;
        Ok(fd)
    }

    /// Stops watching the pipe and gives its descriptor back, still
    /// non-blocking.
    ///
    /// # Example
    /// See [`from_owned_fd`](Self::from_owned_fd).
    /// ```
    /// fn f(tx: fairlane::net::unix::pipe::Sender) -> std::io::Result<std::os::fd::OwnedFd> {
    ///     tx.into_nonblocking_fd()
    /// }
    /// ```
    pub fn into_nonblocking_fd(self) -> io::Result<OwnedFd> {
        Ok(OwnedFd::from(self.fd.into_inner()))
    }

    fn poll_write_slice(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            std::task::ready!(self.poll_write_ready(cx))?;
            match self.try_write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return Poll::Ready(r),
            }
        }
    }
}

impl futures_io::AsyncWrite for Sender {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_slice(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(feature = "tokio-io")]
impl tokio::io::AsyncWrite for Sender {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_slice(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsRawFd for Sender {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Sender {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.get_ref().as_fd()
    }
}

impl fmt::Debug for Sender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}
