//! [`Receiver`]: the read end of a pipe.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{checked, nonblocking};
use crate::io::unix::AsyncFd;
use crate::io::{Interest, Ready};
use crate::net::socket::set_nonblocking;

/// The read end of a pipe or FIFO, as tokio's `pipe::Receiver`: reads into
/// the caller's slice when the pipe is readable; `Ok(0)` once every writer
/// is gone (a FIFO that no writer opened yet is not at its end). Implements
/// `futures_io::AsyncRead` (and tokio's `AsyncRead` with the `tokio-io`
/// feature).
///
/// # Example
/// ```
/// use futures_lite::io::AsyncReadExt;
/// # let rt = fairlane::Runtime::builder().processors(1).build()?;
/// # rt.block_on(async {
/// let (tx, mut rx) = fairlane::net::unix::pipe::pipe()?;
/// tx.try_write(b"abc")?;
/// drop(tx);
/// let mut got = Vec::new();
/// rx.read_to_end(&mut got).await?;
/// assert_eq!(got, b"abc");
/// # Ok::<(), std::io::Error>(()) })?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Receiver {
    fd: AsyncFd<File>,
}

impl Receiver {
    /// The read end in `file`, which must be a pipe or FIFO open for
    /// reading; made non-blocking.
    ///
    /// # Errors
    /// `InvalidInput` if it is not a pipe or not open for reading;
    /// outside a runtime.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let path = std::env::temp_dir().join(format!("fairlane-doc-receiver-{}", std::process::id()));
    /// std::fs::write(&path, b"")?;
    /// let file = std::fs::File::open(&path)?;
    /// let err = rt.block_on(async { fairlane::net::unix::pipe::Receiver::from_file(file) }).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_file(file: File) -> io::Result<Receiver> {
        checked(&file, false)?;
        Receiver::from_file_unchecked(file)
    }

    /// As [`from_file`](Self::from_file), without the checks (the file is
    /// still made non-blocking).
    ///
    /// # Example
    /// ```
    /// fn f(file: std::fs::File) -> std::io::Result<fairlane::net::unix::pipe::Receiver> {
    ///     fairlane::net::unix::pipe::Receiver::from_file_unchecked(file)
    /// }
    /// ```
    pub fn from_file_unchecked(file: File) -> io::Result<Receiver> {
        let fd = AsyncFd::with_interest(nonblocking(file)?, Interest::READABLE)?;
        Ok(Receiver { fd })
    }

    /// As [`from_file`](Self::from_file), from a descriptor.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (_tx, rx) = fairlane::net::unix::pipe::pipe()?;
    /// let fd = rx.into_nonblocking_fd()?;
    /// let rx = fairlane::net::unix::pipe::Receiver::from_owned_fd(fd)?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_owned_fd(fd: OwnedFd) -> io::Result<Receiver> {
        Receiver::from_file(File::from(fd))
    }

    /// As [`from_file_unchecked`](Self::from_file_unchecked), from a
    /// descriptor.
    ///
    /// # Example
    /// ```
    /// fn f(fd: std::os::fd::OwnedFd) -> std::io::Result<fairlane::net::unix::pipe::Receiver> {
    ///     fairlane::net::unix::pipe::Receiver::from_owned_fd_unchecked(fd)
    /// }
    /// ```
    pub fn from_owned_fd_unchecked(fd: OwnedFd) -> io::Result<Receiver> {
        Receiver::from_file_unchecked(File::from(fd))
    }

    /// Waits until the pipe is ready for `interest` (reading; the end of
    /// the stream or an error ends the wait too) and says what it reported
    /// ([`Ready::is_read_closed`]: every writer is gone).
    ///
    /// # Errors
    /// `InvalidInput` for an interest in writing.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (tx, rx) = fairlane::net::unix::pipe::pipe()?;
    /// drop(tx);
    /// assert!(rx.ready(fairlane::io::Interest::READABLE).await?.is_read_closed());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        Ok(self.fd.ready(interest).await?.ready())
    }

    /// Waits until a read would not block: data, the end of the stream or
    /// an error is there.
    ///
    /// # Example
    /// See [`pipe`](super::pipe()).
    /// ```
    /// async fn f(rx: &fairlane::net::unix::pipe::Receiver) -> std::io::Result<()> { rx.readable().await }
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        self.fd.readable().await.map(drop)
    }

    /// Polls for read readiness: `Ready(Ok)` once a read would not block,
    /// else `Pending` with `cx`'s waker registered (only the task that
    /// polled last is woken).
    ///
    /// # Example
    /// ```
    /// async fn f(rx: &fairlane::net::unix::pipe::Receiver) -> std::io::Result<()> {
    ///     std::future::poll_fn(|cx| rx.poll_read_ready(cx)).await
    /// }
    /// ```
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.fd.poll_read_ready(cx).map_ok(drop)
    }

    /// Reads into `buf` without waiting; `WouldBlock` if nothing is there,
    /// `Ok(0)` at the end of the stream (or for an empty `buf`).
    ///
    /// # Example
    /// See [`pipe`](super::pipe()).
    /// ```
    /// fn f(rx: &fairlane::net::unix::pipe::Receiver) -> std::io::Result<usize> { rx.try_read(&mut [0u8; 64]) }
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.fd
            .try_io(Interest::READABLE, |mut file| file.read(buf))
    }

    /// As [`try_read`](Self::try_read), into several buffers in order.
    ///
    /// # Example
    /// ```
    /// fn f(rx: &fairlane::net::unix::pipe::Receiver) -> std::io::Result<usize> {
    ///     let (mut a, mut b) = ([0u8; 4], [0u8; 4]);
    ///     rx.try_read_vectored(&mut [std::io::IoSliceMut::new(&mut a), std::io::IoSliceMut::new(&mut b)])
    /// }
    /// ```
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.fd
            .try_io(Interest::READABLE, |mut file| file.read_vectored(bufs))
    }

    /// Runs the non-blocking I/O `f` on the pipe (through its descriptor)
    /// without waiting; its result, `WouldBlock` included. Readiness is
    /// kept (see [`AsyncFd`](crate::io::unix::AsyncFd)): `f` runs only when
    /// the pipe is ready, and a `WouldBlock` it returns clears that.
    ///
    /// # Example
    /// ```
    /// use std::os::fd::AsRawFd;
    /// fn f(rx: &fairlane::net::unix::pipe::Receiver) -> std::io::Result<usize> {
    ///     let fd = rx.as_raw_fd();
    ///     let mut buf = [0u8; 8];
    ///     // SAFETY: a live descriptor and a live buffer of 8 bytes.
    ///     rx.try_io(|| match unsafe { libc::read(fd, buf.as_mut_ptr().cast(), 8) } {
    ///         -1 => Err(std::io::Error::last_os_error()),
    ///         n => Ok(n as usize),
    ///     })
    /// }
    /// ```
    pub fn try_io<R>(&self, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        self.fd.try_io(Interest::READABLE, |_| f())
    }

    /// Stops watching the pipe and gives its descriptor back, in blocking
    /// mode.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (_tx, rx) = fairlane::net::unix::pipe::pipe()?;
    /// let fd: std::os::fd::OwnedFd = rx.into_blocking_fd()?;
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
    /// fn f(rx: fairlane::net::unix::pipe::Receiver) -> std::io::Result<std::os::fd::OwnedFd> {
    ///     rx.into_nonblocking_fd()
    /// }
    /// ```
    pub fn into_nonblocking_fd(self) -> io::Result<OwnedFd> {
        Ok(OwnedFd::from(self.fd.into_inner()))
    }

    fn poll_read_slice(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        loop {
            std::task::ready!(self.poll_read_ready(cx))?;
            match self.try_read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return Poll::Ready(r),
            }
        }
    }
}

impl futures_io::AsyncRead for Receiver {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_read_slice(cx, buf)
    }
}

#[cfg(feature = "tokio-io")]
impl tokio::io::AsyncRead for Receiver {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = std::task::ready!(self.poll_read_slice(cx, buf.initialize_unfilled()))?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsRawFd for Receiver {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Receiver {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.get_ref().as_fd()
    }
}

impl fmt::Debug for Receiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}
