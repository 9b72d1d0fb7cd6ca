//! [`UnixStream`]: a Unix-domain stream connection.

use std::fmt;
use std::io;
use std::net::Shutdown;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::split;
use super::{OwnedReadHalf, OwnedWriteHalf, ReadHalf, WriteHalf};
use crate::io::reactor::Direction;
use crate::io::{Interest, IoBuf, IoBufMut, Ready};
use crate::net::into_std::refused;
use crate::net::socket::{with_std, SockAddrBuf, Socket};
use crate::net::stream::{impl_async_io, stream_into_fd, Compat};

/// A Unix-domain stream connection; owned-buffer reads and writes, and
/// `futures-io` traits, as [`TcpStream`](crate::net::TcpStream).
///
/// # Example
/// See [`UnixListener`](super::UnixListener).
/// ```
/// async fn f(s: &fairlane::net::UnixStream) -> std::io::Result<usize> {
///     let (n, _buf) = s.read_owned(Vec::with_capacity(64)).await;
///     n
/// }
/// ```
pub struct UnixStream {
    /// Declared before `sock`: a wait the adapters keep in flight is
    /// cancelled before the descriptor can close.
    compat: Compat,
    sock: Arc<Socket>,
}

impl UnixStream {
    pub(crate) fn from_socket(sock: Socket) -> UnixStream {
        UnixStream {
            sock: Arc::new(sock),
            compat: Compat::new(),
        }
    }

    /// Connects to the socket at `path`. Dropping the future abandons the
    /// attempt and closes its socket.
    ///
    /// # Errors
    /// `NotFound` if nothing is there, `ConnectionRefused` if nobody
    /// listens, `InvalidInput` for a path too long for a socket address.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// let err = rt.block_on(fairlane::net::UnixStream::connect("/nonexistent.sock")).unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        let addr = SockAddrBuf::from_path(path.as_ref())?;
        let sock = Socket::new(libc::AF_UNIX, libc::SOCK_STREAM)?;
        sock.connect(addr).await?;
        Ok(UnixStream::from_socket(sock))
    }

    /// Connects to the socket listening at `addr` (a path or, on Linux, an
    /// abstract name), as tokio's `connect_addr`.
    ///
    /// # Errors
    /// `InvalidInput` for an unnamed address; the operating system's error
    /// otherwise (e.g. `ConnectionRefused`).
    ///
    /// # Example
    /// See [`UnixListener::bind_addr`](super::UnixListener::bind_addr).
    /// ```
    /// async fn f(addr: &std::os::unix::net::SocketAddr) -> std::io::Result<fairlane::net::UnixStream> {
    ///     fairlane::net::UnixStream::connect_addr(addr).await
    /// }
    /// ```
    pub async fn connect_addr(addr: &SocketAddr) -> io::Result<UnixStream> {
        let addr = SockAddrBuf::from_unix_addr(addr)?;
        let sock = Socket::new(libc::AF_UNIX, libc::SOCK_STREAM)?;
        sock.connect(addr).await?;
        Ok(UnixStream::from_socket(sock))
    }

    /// A connected pair of unnamed streams (`socketpair`).
    ///
    /// # Errors
    /// The operating system's, e.g. when out of descriptors.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, b) = fairlane::net::UnixStream::pair()?;
    /// a.write_all_owned("hi").await.0?;
    /// let (n, buf) = b.read_owned(Vec::with_capacity(4)).await;
    /// assert_eq!(&buf[..n?], b"hi");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = std::os::unix::net::UnixStream::pair()?;
        Ok((UnixStream::from_std(a)?, UnixStream::from_std(b)?))
    }

    /// Adopts a connected std stream.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, b) = std::os::unix::net::UnixStream::pair()?;
    /// let (a, b) = (fairlane::net::UnixStream::from_std(a)?, fairlane::net::UnixStream::from_std(b)?);
    /// a.write_all_owned("hi").await.0?;
    /// let (n, buf) = b.read_owned(Vec::with_capacity(4)).await;
    /// assert_eq!(&buf[..n?], b"hi");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream::from_socket(Socket::from_fd(OwnedFd::from(
            stream,
        ))?))
    }

    /// Turns it into a std stream (non-blocking, as tokio leaves it), no
    /// longer part of the runtime; refused (the stream given back) where
    /// that would lose data, as
    /// [`TcpStream::into_std`](crate::net::TcpStream::into_std).
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// let a = fairlane::net::UnixStream::from_std(a)?.into_std()?;
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixStream> {
        stream_into_fd(self.sock, self.compat)
            .map(Into::into)
            .map_err(|(sock, compat)| refused(UnixStream { sock, compat }))
    }

    /// As [`TcpStream::read_owned`](crate::net::TcpStream::read_owned).
    ///
    /// # Example
    /// See [`UnixListener`](super::UnixListener).
    /// ```
    /// async fn f(s: &fairlane::net::UnixStream) { let _ = s.read_owned(vec![0u8; 8]).await; }
    /// ```
    pub async fn read_owned<B: IoBufMut>(&self, buf: B) -> (io::Result<usize>, B) {
        self.sock.recv(buf).await
    }

    /// As [`TcpStream::write_owned`](crate::net::TcpStream::write_owned).
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UnixStream) { let _ = s.write_owned("x").await; }
    /// ```
    pub async fn write_owned<B: IoBuf>(&self, buf: B) -> (io::Result<usize>, B) {
        self.sock.send(buf, 0).await
    }

    /// As [`TcpStream::write_all_owned`](crate::net::TcpStream::write_all_owned).
    ///
    /// # Example
    /// See [`UnixListener`](super::UnixListener).
    /// ```
    /// async fn f(s: &fairlane::net::UnixStream) { let _ = s.write_all_owned("x").await; }
    /// ```
    pub async fn write_all_owned<B: IoBuf>(&self, buf: B) -> (io::Result<()>, B) {
        self.sock.send_all(buf).await
    }

    /// As [`TcpStream::readable`](crate::net::TcpStream::readable).
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UnixStream) -> std::io::Result<usize> {
    ///     let mut buf = [0u8; 64];
    ///     loop {
    ///         s.readable().await?;
    ///         match s.try_read(&mut buf) {
    ///             Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
    ///             r => return r,
    ///         }
    ///     }
    /// }
    /// ```
    pub async fn readable(&self) -> io::Result<()> {
        self.sock.readable().await
    }

    /// As [`TcpStream::writable`](crate::net::TcpStream::writable).
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UnixStream) -> std::io::Result<usize> {
    ///     s.writable().await?;
    ///     s.try_write(b"x")
    /// }
    /// ```
    pub async fn writable(&self) -> io::Result<()> {
        self.sock.writable().await
    }

    /// As [`TcpStream::ready`](crate::net::TcpStream::ready).
    ///
    /// # Example
    /// ```
    /// use fairlane::io::Interest;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
    /// let a = fairlane::net::UnixStream::from_std(a)?;
    /// assert!(a.ready(Interest::WRITABLE).await?.is_writable());
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub async fn ready(&self, interest: Interest) -> io::Result<Ready> {
        self.sock.ready(interest).await
    }

    /// As [`TcpStream::try_read`](crate::net::TcpStream::try_read).
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UnixStream) -> std::io::Result<usize> { s.try_read(&mut [0u8; 8]) }
    /// ```
    pub fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.try_recv(buf)
    }

    /// As [`TcpStream::try_write`](crate::net::TcpStream::try_write).
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UnixStream) -> std::io::Result<usize> { s.try_write(b"x") }
    /// ```
    pub fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        self.sock.try_send(buf)
    }

    /// Shuts down the read side, the write side, or both, at once (std's
    /// `shutdown`). Named apart so that it does not hide the asynchronous
    /// `shutdown()` of tokio's `AsyncWriteExt` (`tokio-io` feature), which
    /// shuts the write side down as well, after what owned writes dropped
    /// in flight left to send (bytes the `AsyncWrite` adapters reported
    /// written are in the kernel already); futures' `AsyncWriteExt::close`
    /// does the same.
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UnixStream) -> std::io::Result<()> { s.shutdown_with(std::net::Shutdown::Both) }
    /// ```
    #[doc(alias = "shutdown")]
    pub fn shutdown_with(&self, how: Shutdown) -> io::Result<()> {
        self.sock.shutdown(how)
    }

    /// The peer's address.
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UnixStream) -> std::io::Result<()> { s.peer_addr().map(drop) }
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::os::unix::net::UnixStream::peer_addr)
    }

    /// The local address.
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UnixStream) -> std::io::Result<()> { s.local_addr().map(drop) }
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        with_std(self.sock.raw(), std::os::unix::net::UnixStream::local_addr)
    }

    /// Polls for read readiness, as tokio's `poll_read_ready`: `Ready(Ok)`
    /// once a read would not block, else `Pending` with `cx`'s waker
    /// registered (only the task that polled last is woken).
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UnixStream) -> std::io::Result<()> {
    ///     std::future::poll_fn(|cx| s.poll_read_ready(cx)).await
    /// }
    /// ```
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.sock.poll_ready(cx, Direction::Read).map_ok(drop)
    }

    /// Polls for write readiness, as
    /// [`poll_read_ready`](Self::poll_read_ready) for writing.
    ///
    /// # Example
    /// ```
    /// async fn f(s: &fairlane::net::UnixStream) -> std::io::Result<()> {
    ///     std::future::poll_fn(|cx| s.poll_write_ready(cx)).await
    /// }
    /// ```
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.sock.poll_ready(cx, Direction::Write).map_ok(drop)
    }

    /// As [`try_read`](Self::try_read), into several buffers in order.
    ///
    /// # Example
    /// ```
    /// use std::io::IoSliceMut;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, b) = fairlane::net::UnixStream::pair()?;
    /// b.write_all_owned("abcdef").await.0?;
    /// a.readable().await?;
    /// let (mut x, mut y) = ([0u8; 2], [0u8; 8]);
    /// let n = a.try_read_vectored(&mut [IoSliceMut::new(&mut x), IoSliceMut::new(&mut y)])?;
    /// assert_eq!((n, &x, &y[..4]), (6, b"ab", &b"cdef"[..]));
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.sock.try_recv_vectored(bufs)
    }

    /// As [`try_write`](Self::try_write), from several buffers in order.
    ///
    /// # Example
    /// ```
    /// use std::io::IoSlice;
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, b) = fairlane::net::UnixStream::pair()?;
    /// assert_eq!(a.try_write_vectored(&[IoSlice::new(b"ab"), IoSlice::new(b"cd")])?, 4);
    /// let (n, buf) = b.read_owned(Vec::with_capacity(8)).await;
    /// assert_eq!(&buf[..n?], b"abcd");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.sock.try_send_vectored(bufs)
    }

    /// Splits into a read half and a write half that borrow the stream,
    /// for reading and writing at the same time within one task (tokio's
    /// `split`); they implement the stream's read and write traits. Bytes
    /// the `AsyncRead` implementation buffered go to the read half.
    ///
    /// # Example
    /// ```
    /// use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (mut a, mut b) = fairlane::net::UnixStream::pair()?;
    /// let (mut read, mut write) = a.split();
    /// write.write_all(b"ping").await?;
    /// let mut got = [0u8; 4];
    /// b.read_exact(&mut got).await?;
    /// b.write_all(&got).await?;
    /// read.read_exact(&mut got).await?;
    /// assert_eq!(&got, b"ping");
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn split(&mut self) -> (ReadHalf<'_>, WriteHalf<'_>) {
        let (read, write) = self.compat.sides();
        split::split(&self.sock, read, write)
    }

    /// Splits into a read half and a write half that can move to different
    /// tasks (they implement the read and write traits respectively).
    /// Dropping the write half shuts down the write side;
    /// [`OwnedReadHalf::reunite`] puts the stream back together. Bytes the
    /// `AsyncRead` implementation buffered go to the read half.
    ///
    /// # Example
    /// ```
    /// # let rt = fairlane::Runtime::builder().processors(1).build()?;
    /// # rt.block_on(async {
    /// let (a, b) = fairlane::net::UnixStream::pair()?;
    /// let (read, write) = a.into_split();
    /// fairlane::spawn(async move { write.write_all_owned("x").await.0 });
    /// let (n, buf) = b.read_owned(Vec::with_capacity(4)).await;
    /// assert_eq!(&buf[..n?], b"x");
    /// # drop(read);
    /// # Ok::<(), std::io::Error>(()) })?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let (read, write) = self.compat.into_halves();
        (
            OwnedReadHalf::new(self.sock.clone(), read),
            OwnedWriteHalf::new(self.sock, write),
        )
    }

    /// A stream from the parts of its owned halves ([`OwnedReadHalf::reunite`]).
    pub(super) fn from_parts(sock: Arc<Socket>, compat: Compat) -> UnixStream {
        UnixStream { compat, sock }
    }

    /// Takes the socket's pending error (`SO_ERROR`); `None` if there is
    /// none.
    ///
    /// # Example
    /// ```
    /// fn f(s: &fairlane::net::UnixStream) -> std::io::Result<bool> { Ok(s.take_error()?.is_none()) }
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        crate::net::socket::take_error(self.sock.raw())
    }
}

impl_async_io!(UnixStream);

impl AsRawFd for UnixStream {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.raw()
    }
}

impl fmt::Debug for UnixStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnixStream")
            .field("fd", &self.sock.raw())
            .finish()
    }
}
